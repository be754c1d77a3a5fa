//! The filters every output format shares (`--tid`, `--pid`, `--comm`, `--time`, `--lines`,
//! `--no-inline`), applied to the [`Profile`] before any writer sees it, whatever the input was.

use crate::profile::{Frame, FrameId, FrameKind, Profile, ProfileSample};

/// `--time START..END` (also `START-END`): seconds from the start of the input; either end may
/// be left out (`2..`, `..5`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeRange {
    pub(crate) start_s: Option<f64>,
    pub(crate) end_s: Option<f64>,
}

impl TimeRange {
    /// Parses `A..B` or `A-B` (seconds, either side optional).
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let (a, b) = text
            .split_once("..")
            .or_else(|| text.split_once('-'))
            .ok_or_else(|| {
                format!("--time {text:?}: expected START..END in seconds, e.g. 1.5..3")
            })?;
        let side = |s: &str| -> std::result::Result<Option<f64>, String> {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            match s.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
                _ => Err(format!(
                    "--time {text:?}: {s:?} is not a number of seconds, 0 or more"
                )),
            }
        };
        let range = Self {
            start_s: side(a)?,
            end_s: side(b)?,
        };
        if let (Some(a), Some(b)) = (range.start_s, range.end_s) {
            if b < a {
                return Err(format!("--time {text:?}: the end is before the start"));
            }
        }
        Ok(range)
    }

    /// Whether `offset_ns` (ns from the start of the input) falls in the range (end inclusive).
    pub fn contains_ns(&self, offset_ns: u64) -> bool {
        let s = offset_ns as f64 / 1e9;
        self.start_s.is_none_or(|a| s >= a) && self.end_s.is_none_or(|b| s <= b)
    }
}

/// Which samples and which frame details the outputs show.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filters {
    /// Only samples of this thread id.
    pub tid: Option<u32>,
    /// Only samples of this process id.
    pub pid: Option<u32>,
    /// Only samples of threads with this name.
    pub comm: Option<String>,
    /// Only samples in this range of seconds from the start.
    pub time: Option<TimeRange>,
    /// Append `file:line` to frame names, so lines of one function become separate frames.
    pub lines: bool,
    /// Drop inlined frames: their samples go to the function they were inlined into.
    pub no_inline: bool,
}

impl Filters {
    /// What is left to apply to the profile of an input that applied the thread, tid and time
    /// filters while reading its events (instrumentation inputs: a call's time needs them
    /// there).
    pub fn left_after_reading(&self) -> Self {
        Self {
            tid: None,
            comm: None,
            time: None,
            ..self.clone()
        }
    }
}

/// Applies `filters` to `profile`. The time range counts from the profile's `start_time` (the
/// first sample before any filtering), else from its first sample.
pub fn apply(profile: &mut Profile, filters: &Filters) {
    if let Some(range) = &filters.time {
        keep_time_range(profile, range);
    }
    if filters.tid.is_some() || filters.pid.is_some() || filters.comm.is_some() {
        let keep: Vec<bool> = profile
            .samples
            .iter()
            .map(|s| {
                filters.tid.is_none_or(|tid| s.tid == tid)
                    && filters.pid.is_none_or(|pid| s.pid == pid)
                    && filters
                        .comm
                        .as_deref()
                        .is_none_or(|comm| thread_name(profile, s) == Some(comm))
            })
            .collect();
        let mut keep = keep.into_iter();
        profile.samples.retain(|_| keep.next().unwrap_or(false));
    }
    if filters.lines || filters.no_inline {
        let old = std::mem::take(profile);
        *profile = rewrite_frames(old, |frame| {
            if filters.no_inline && frame.kind == FrameKind::Inlined {
                return None;
            }
            let mut frame = frame.clone();
            if filters.lines {
                frame.name = with_location(&frame);
            }
            Some(frame)
        });
    }
}

/// Keeps the samples inside `range`, counted from the profile's start.
pub fn keep_time_range(profile: &mut Profile, range: &TimeRange) {
    let Some(first) = profile
        .start_time
        .or_else(|| profile.samples.iter().map(|s| s.time).min())
    else {
        return;
    };
    profile
        .samples
        .retain(|s| range.contains_ns(s.time.saturating_sub(first)));
}

/// The thread name a sample was taken under: its root frame (the name at that time), else the
/// thread's last known name.
fn thread_name<'a>(profile: &'a Profile, sample: &ProfileSample) -> Option<&'a str> {
    sample
        .stack
        .first()
        .map(|&id| profile.frame(id))
        .filter(|f| f.kind == FrameKind::Root)
        .map(|f| f.name.as_str())
        .or_else(|| profile.threads.get(&sample.tid).map(|t| t.comm.as_str()))
}

/// `name (file:line)`, `name (file)`, or the name alone when the frame has no file.
fn with_location(frame: &Frame) -> String {
    match (&frame.file, frame.line) {
        (Some(file), Some(line)) => format!("{} ({file}:{line})", frame.name),
        (Some(file), None) => format!("{} ({file})", frame.name),
        (None, _) => frame.name.clone(),
    }
}

/// A profile whose frames are `rewrite(frame)` (None drops the frame from every stack); JIT
/// tiers, samples' other fields, threads and notes are kept.
fn rewrite_frames(old: Profile, rewrite: impl Fn(&Frame) -> Option<Frame>) -> Profile {
    let mut new = Profile::default();
    new.samples.reserve(old.samples.len());
    new.threads.clone_from(&old.threads);
    new.notes.clone_from(&old.notes);
    new.full_names.clone_from(&old.full_names);
    new.start_time = old.start_time;
    let mapping: Vec<Option<FrameId>> = old
        .frames()
        .iter()
        .enumerate()
        .map(|(i, frame)| {
            let id = FrameId(i as u32);
            rewrite(frame).map(|f| new.intern_tiered(f, old.tier(id).cloned()))
        })
        .collect();
    for sample in old.samples {
        let stack: Vec<FrameId> = sample
            .stack
            .iter()
            .filter_map(|id| mapping[id.0 as usize])
            .collect();
        let stack = new.intern_stack(&stack);
        new.samples.push(ProfileSample { stack, ..sample });
    }
    new
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::testing::{frame, lines};
    use crate::profile::{FrameKind::*, ThreadInfo, Tier, TierClass};

    /// Two threads of pid 1 (`main` tid 1, `worker` tid 2) and one of pid 7 (`other` tid 7),
    /// one sample per second each.
    fn threads_profile() -> Profile {
        let mut p = Profile::default();
        let f = p.intern(frame("f", Native));
        for (pid, tid, comm) in [(1, 1, "main"), (1, 2, "worker"), (7, 7, "other")] {
            let root = p.intern(frame(comm, Root));
            p.threads.insert(
                tid,
                ThreadInfo {
                    pid,
                    comm: comm.into(),
                },
            );
            for second in 0..3u64 {
                p.samples.push(ProfileSample {
                    pid,
                    tid,
                    time: 10_000_000_000 + second * 1_000_000_000,
                    cpu: 0,
                    weight: 1,
                    stack: vec![root, f].into(),
                    off_cpu: false,
                });
            }
        }
        p
    }

    fn filtered(filters: Filters) -> Vec<String> {
        let mut p = threads_profile();
        apply(&mut p, &filters);
        lines(&p)
    }

    #[test]
    fn no_filters_keep_everything() {
        assert_eq!(
            filtered(Filters::default()),
            ["main;f 3", "other;f 3", "worker;f 3"]
        );
    }

    #[test]
    fn tid_pid_and_comm_select_threads() {
        let tid = Filters {
            tid: Some(2),
            ..Filters::default()
        };
        assert_eq!(filtered(tid), ["worker;f 3"]);
        let pid = Filters {
            pid: Some(1),
            ..Filters::default()
        };
        assert_eq!(filtered(pid), ["main;f 3", "worker;f 3"]);
        let comm = Filters {
            comm: Some("other".into()),
            ..Filters::default()
        };
        assert_eq!(filtered(comm), ["other;f 3"]);
        let none = Filters {
            pid: Some(7),
            comm: Some("main".into()),
            ..Filters::default()
        };
        assert!(filtered(none).is_empty());
    }

    #[test]
    fn comm_uses_the_name_at_sample_time() {
        let mut p = threads_profile();
        // The worker was renamed after its samples; they were taken as "worker".
        p.threads.get_mut(&2).unwrap().comm = "renamed".into();
        apply(
            &mut p,
            &Filters {
                comm: Some("worker".into()),
                ..Filters::default()
            },
        );
        assert_eq!(lines(&p), ["worker;f 3"]);
    }

    #[test]
    fn time_counts_from_the_start() {
        let only_second_one = Filters {
            time: Some(TimeRange::parse("0.5..1.5").unwrap()),
            ..Filters::default()
        };
        assert_eq!(
            filtered(only_second_one),
            ["main;f 1", "other;f 1", "worker;f 1"]
        );
        // The start is where the input began, not the first sample left by other filters.
        let mut p = threads_profile();
        p.start_time = Some(9_000_000_000);
        apply(
            &mut p,
            &Filters {
                time: Some(TimeRange::parse("..1.5").unwrap()),
                tid: Some(1),
                ..Filters::default()
            },
        );
        assert_eq!(lines(&p), ["main;f 1"]);
    }

    fn inlined_profile() -> Profile {
        let mut p = Profile::default();
        let root = p.intern(frame("prog", Root));
        let outer = p.intern(Frame {
            file: Some("a.c".into()),
            line: Some(10),
            ..frame("outer", Native)
        });
        let inner = p.intern(Frame {
            file: Some("b.h".into()),
            line: Some(3),
            ..frame("inner", Inlined)
        });
        let jit = p.intern_tiered(
            frame("Foo.bar", Jit),
            Some(Tier::new(TierClass::Optimized, "C2")),
        );
        for stack in [vec![root, outer, inner], vec![root, outer], vec![root, jit]] {
            p.samples.push(ProfileSample {
                pid: 1,
                tid: 1,
                time: 0,
                cpu: 0,
                weight: 2,
                stack: stack.into(),
                off_cpu: false,
            });
        }
        p
    }

    #[test]
    fn no_inline_gives_inlined_samples_to_the_outer_function() {
        let mut p = inlined_profile();
        assert_eq!(
            lines(&p),
            [
                "prog;Foo.bar_[j] 2",
                "prog;outer 2",
                "prog;outer;inner_[i] 2"
            ]
        );
        apply(
            &mut p,
            &Filters {
                no_inline: true,
                ..Filters::default()
            },
        );
        assert_eq!(lines(&p), ["prog;Foo.bar_[j] 2", "prog;outer 4"]);
        let jit = p.samples[2].stack[1];
        assert_eq!(
            p.tier(jit).map(|t| t.label.as_str()),
            Some("C2"),
            "JIT tiers survive the rewrite"
        );
    }

    #[test]
    fn lines_append_file_and_line() {
        let mut p = inlined_profile();
        apply(
            &mut p,
            &Filters {
                lines: true,
                ..Filters::default()
            },
        );
        assert_eq!(
            lines(&p),
            [
                "prog;Foo.bar_[j] 2",
                "prog;outer (a.c:10) 2",
                "prog;outer (a.c:10);inner (b.h:3)_[i] 2"
            ]
        );
    }

    #[test]
    fn time_range_parsing() {
        let r = TimeRange::parse("1.5..3").unwrap();
        assert_eq!((r.start_s, r.end_s), (Some(1.5), Some(3.0)));
        let r = TimeRange::parse("2-").unwrap();
        assert_eq!((r.start_s, r.end_s), (Some(2.0), None));
        assert!(TimeRange::parse("3..1").is_err());
        assert!(TimeRange::parse("x..1").is_err());
        assert!(TimeRange::parse("5").is_err());
        assert!(r.contains_ns(2_000_000_000) && !r.contains_ns(1_999_999_999));
    }
}
