//! What the viewer formats (Firefox Profiler, pprof, speedscope) share: threads as tracks,
//! stacks without the root frame, frame and module names.

use std::collections::BTreeMap;

use crate::profile::{Frame, FrameId, FrameKind, Profile, ProfileSample};

/// A thread as the viewers show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ThreadTrack {
    pub(crate) tid: u32,
    pub(crate) pid: u32,
    pub(crate) name: String,
    /// Indices into `profile.samples`, in time order.
    pub(crate) samples: Vec<usize>,
}

/// The threads that have samples, by tid, each with its samples in time order. A thread's
/// name is its comm, else the root frame of its first sample, else `:tid`.
pub(crate) fn threads(profile: &Profile) -> Vec<ThreadTrack> {
    let mut by_tid: BTreeMap<u32, ThreadTrack> = BTreeMap::new();
    for (i, s) in profile.samples.iter().enumerate() {
        by_tid
            .entry(s.tid)
            .or_insert_with(|| ThreadTrack {
                tid: s.tid,
                pid: s.pid,
                name: thread_name(profile, s),
                samples: Vec::new(),
            })
            .samples
            .push(i);
    }
    let mut tracks: Vec<ThreadTrack> = by_tid.into_values().collect();
    for t in &mut tracks {
        t.samples
            .sort_by_key(|&i| (profile.samples[i].time, profile.samples[i].cpu));
    }
    tracks
}

fn thread_name(profile: &Profile, sample: &ProfileSample) -> String {
    if let Some(t) = profile
        .threads
        .get(&sample.tid)
        .filter(|t| !t.comm.is_empty())
    {
        return t.comm.clone();
    }
    match sample.stack.first().map(|&id| profile.frame(id)) {
        Some(f) if f.kind == FrameKind::Root && !f.name.is_empty() => f.name.clone(),
        _ => format!(":{}", sample.tid),
    }
}

/// The stack without its leading root frames (the thread name, which the viewers show as
/// the thread itself), root first.
pub fn code_frames<'a>(profile: &Profile, stack: &'a [FrameId]) -> &'a [FrameId] {
    let roots = stack
        .iter()
        .take_while(|&&id| profile.frame(id).kind == FrameKind::Root)
        .count();
    &stack[roots..]
}

/// The frame's name as shown: `[unknown]` for an empty one.
pub fn frame_name(frame: &Frame) -> &str {
    if frame.name.is_empty() {
        "[unknown]"
    } else {
        &frame.name
    }
}

/// Name of the module a frame belongs to, or a bracketed stand-in by kind.
pub fn module_name(frame: &Frame) -> &str {
    match (&frame.module, frame.kind) {
        (Some(m), _) if !m.is_empty() => m,
        (_, FrameKind::Kernel) => "[kernel]",
        (_, FrameKind::Jit | FrameKind::Inlined) => "[jit]",
        (_, FrameKind::Interpreter) => "[interpreter]",
        _ => "[unknown]",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::profile::{CodeLoad, Context, ThreadInfo, Tier, TierClass, WeightUnit};

    /// A small profile with every frame kind, two threads of one process, file/line info and
    /// an inline chain, for the writers' tests.
    pub(crate) fn sample_profile() -> Profile {
        let mut p = Profile::default();
        let frame = |name: &str, kind, module: Option<&str>, file: Option<&str>, line| Frame {
            name: name.into(),
            kind,
            module: module.map(str::to_string),
            file: file.map(str::to_string),
            line,
        };
        let root_main = p.intern(frame("app", FrameKind::Root, None, None, None));
        let root_worker = p.intern(frame("worker", FrameKind::Root, None, None, None));
        let main = p.intern(frame(
            "main",
            FrameKind::Native,
            Some("app"),
            Some("main.c"),
            Some(10),
        ));
        let run = p.intern_tiered(
            frame(
                "Demo.run",
                FrameKind::Jit,
                Some("jit-100.dump"),
                Some("Demo.java"),
                Some(20),
            ),
            Some(Tier::new(TierClass::Optimized, "C2 (optimized)")),
        );
        let step = p.intern(frame(
            "Demo.step",
            FrameKind::Inlined,
            Some("jit-100.dump"),
            Some("Demo.java"),
            Some(33),
        ));
        let interp = p.intern(frame("Demo.slow", FrameKind::Interpreter, None, None, None));
        let read = p.intern(frame("sys_read", FrameKind::Kernel, None, None, None));
        let unknown = p.intern(frame("", FrameKind::Unknown, None, None, None));
        let stacks: [(u32, u64, Vec<FrameId>); 5] = [
            (100, 1_000_000, vec![root_main, main, run, step]),
            (100, 2_000_000, vec![root_main, main, run, step]),
            (100, 3_000_000, vec![root_main, main, interp, read]),
            (101, 1_500_000, vec![root_worker, main, run]),
            (101, 2_500_000, vec![root_worker, unknown]),
        ];
        for (tid, time, stack) in stacks {
            p.samples.push(ProfileSample {
                pid: 100,
                tid,
                time,
                cpu: 0,
                weight: 1_001_001,
                stack: stack.into(),
                off_cpu: false,
            });
        }
        for (tid, comm) in [(100, "app"), (101, "worker")] {
            p.threads.insert(
                tid,
                ThreadInfo {
                    pid: 100,
                    comm: comm.into(),
                },
            );
        }
        p
    }

    pub(crate) fn sample_context(profile: &Profile) -> Context {
        let mut ctx =
            Context::for_profile(profile, "jprof: app", "cpu-clock", WeightUnit::Nanoseconds);
        ctx.frequency_hz = 999;
        ctx.code_loads.push(CodeLoad {
            pid: 100,
            time: 500_000,
            name: "Demo.run".into(),
            tier: Some(Tier::new(TierClass::Optimized, "C2 (optimized)")),
            address: 0x7f00_0000_1000,
            size: 256,
            source: "jit-100.dump".into(),
        });
        ctx
    }

    #[test]
    fn threads_are_named_and_time_ordered() {
        let p = sample_profile();
        let t = threads(&p);
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].tid, t[0].name.as_str()), (100, "app"));
        assert_eq!(t[0].samples, vec![0, 1, 2]);
        assert_eq!((t[1].tid, t[1].name.as_str()), (101, "worker"));
    }

    #[test]
    fn root_frames_are_left_out_of_code_frames() {
        let p = sample_profile();
        let frames = code_frames(&p, &p.samples[0].stack);
        assert_eq!(frames.len(), 3);
        assert_eq!(p.frame(frames[0]).name, "main");
    }

    #[test]
    fn cpu_time_per_sample_by_unit() {
        let p = sample_profile();
        let mut ctx = sample_context(&p);
        assert_eq!(ctx.cpu_ns(1234), 1234);
        ctx.weight_unit = WeightUnit::Events;
        assert_eq!(ctx.cpu_ns(1234), 1_001_001);
        ctx.frequency_hz = 0;
        assert_eq!(ctx.cpu_ns(1234), 0);
        // Page faults, instructions: a sample is no amount of CPU time, at any rate.
        ctx.weight_unit = WeightUnit::Occurrences;
        ctx.frequency_hz = 999;
        assert_eq!(ctx.cpu_ns(1234), 0);
    }
}
