//! Brendan Gregg folded stacks (`root;caller;callee WEIGHT`), the input of every flame graph
//! tool. Owns how a [`Frame`] is written as one folded-stack label (kind suffixes, escaping).

use std::collections::BTreeMap;
use std::io::{self, Write};

use rustc_hash::FxHashMap;

use crate::profile::{Frame, FrameId, FrameKind, Profile};

/// The label of a frame in folded output: the name made safe for the format plus the kind
/// suffix that inferno's `java` palette colours by (`_[k]` kernel, `_[j]` JIT, `_[i]` inlined).
pub fn frame_label(frame: &Frame) -> String {
    let mut label: String = frame
        .name
        .chars()
        .filter(|c| *c != '\n' && *c != '\r')
        // `;` separates frames in the format, so it cannot appear inside one.
        .map(|c| if c == ';' { ':' } else { c })
        .collect();
    if label.is_empty() {
        label.push_str("[unknown]");
    }
    label.push_str(match frame.kind {
        FrameKind::Kernel => "_[k]",
        FrameKind::Jit => "_[j]",
        FrameKind::Inlined => "_[i]",
        FrameKind::Root | FrameKind::Native | FrameKind::Interpreter | FrameKind::Unknown => "",
    });
    label
}

/// Labels of every interned frame, indexed by `FrameId`, computed once per report.
pub(crate) fn labels(profile: &Profile) -> Vec<String> {
    profile.frames().iter().map(frame_label).collect()
}

/// `Some(tid)` when the sample's stack does not start with a `Root` frame but the profile knows
/// the thread's name: that name is then written as the root, so every folded stack starts with
/// the process/thread name.
fn missing_root(profile: &Profile, tid: u32, stack: &[FrameId]) -> Option<u32> {
    let starts_with_root = stack
        .first()
        .is_some_and(|&id| profile.frame(id).kind == FrameKind::Root);
    (!starts_with_root && profile.threads.contains_key(&tid)).then_some(tid)
}

/// Distinct folded stacks with their summed weights, in lexicographic order of the stack text.
/// Stacks that differ only in frame details hidden by the label (file, line) are merged.
pub fn fold(profile: &Profile) -> Vec<(String, u64)> {
    // Aggregate on interned ids first (cheap), then render each distinct stack once.
    let mut by_ids: FxHashMap<(Option<u32>, &[FrameId]), u64> = FxHashMap::default();
    for sample in &profile.samples {
        let root_tid = missing_root(profile, sample.tid, &sample.stack);
        *by_ids.entry((root_tid, &sample.stack)).or_default() += sample.weight;
    }
    let labels = labels(profile);
    let mut folded: BTreeMap<String, u64> = BTreeMap::new();
    let mut line = String::new();
    for ((root_tid, stack), weight) in by_ids {
        if stack.is_empty() && root_tid.is_none() {
            continue;
        }
        line.clear();
        if let Some(thread) = root_tid.and_then(|tid| profile.threads.get(&tid)) {
            line.push_str(&frame_label(&Frame {
                name: thread.comm.clone(),
                kind: FrameKind::Root,
                module: None,
                file: None,
                line: None,
            }));
        }
        for id in stack {
            if !line.is_empty() {
                line.push(';');
            }
            line.push_str(&labels[id.0 as usize]);
        }
        *folded.entry(line.clone()).or_default() += weight;
    }
    folded.into_iter().collect()
}

/// Folded lines, `stack weight`, one per distinct stack.
pub fn lines(profile: &Profile) -> Vec<String> {
    fold(profile)
        .into_iter()
        .map(|(stack, weight)| {
            // Exact capacity: `format!` grows by doubling, which for a million long lines
            // holds tens of MB of slack while the flame graph is drawn.
            let weight = weight.to_string();
            let mut line = String::with_capacity(stack.len() + 1 + weight.len());
            line.push_str(&stack);
            line.push(' ');
            line.push_str(&weight);
            line
        })
        .collect()
}

/// Writes the folded stacks, one line each.
pub fn write(profile: &Profile, mut out: impl Write) -> io::Result<()> {
    for (stack, weight) in fold(profile) {
        writeln!(out, "{stack} {weight}")?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::profile::{ProfileSample, ThreadInfo};

    pub(crate) fn frame(name: &str, kind: FrameKind) -> Frame {
        Frame {
            name: name.to_string(),
            kind,
            module: None,
            file: None,
            line: None,
        }
    }

    /// A profile from `(stack root-first, weight)` pairs; every stack starts with a `prog` root.
    pub(crate) fn profile(stacks: &[(&[(&str, FrameKind)], u64)]) -> Profile {
        let mut p = Profile::default();
        let root = p.intern(frame("prog", FrameKind::Root));
        for (i, (stack, weight)) in stacks.iter().enumerate() {
            let mut ids = vec![root];
            ids.extend(stack.iter().map(|(n, k)| p.intern(frame(n, *k))));
            p.samples.push(ProfileSample {
                pid: 1,
                tid: 1,
                time: i as u64,
                cpu: 0,
                weight: *weight,
                stack: ids,
            });
        }
        p
    }

    use FrameKind::*;

    #[test]
    fn merges_identical_stacks_and_sorts_lines() {
        let p = profile(&[
            (&[("main", Native), ("b", Native)], 5),
            (&[("main", Native), ("a", Native)], 3),
            (&[("main", Native), ("b", Native)], 7),
            (&[("main", Native)], 1),
        ]);
        assert_eq!(
            lines(&p),
            vec!["prog;main 1", "prog;main;a 3", "prog;main;b 12"]
        );
    }

    #[test]
    fn kind_suffixes() {
        let p = profile(&[(
            &[
                ("main", Native),
                ("Foo.bar", Jit),
                ("Foo.baz", Inlined),
                ("do_syscall_64", Kernel),
                ("[unknown] (libx.so+0x10)", Unknown),
            ],
            2,
        )]);
        assert_eq!(
            lines(&p),
            vec!["prog;main;Foo.bar_[j];Foo.baz_[i];do_syscall_64_[k];[unknown] (libx.so+0x10) 2"]
        );
    }

    #[test]
    fn separators_inside_names_are_neutralised() {
        let p = profile(&[(&[("a;b", Native), ("multi\nline", Native), ("", Native)], 1)]);
        assert_eq!(lines(&p), vec!["prog;a:b;multiline;[unknown] 1"]);
    }

    #[test]
    fn frames_differing_only_in_line_merge_in_output() {
        let mut p = profile(&[(&[("f", Native)], 1)]);
        let root = p.samples[0].stack[0];
        let f2 = p.intern(Frame {
            line: Some(7),
            ..frame("f", Native)
        });
        p.samples.push(ProfileSample {
            stack: vec![root, f2],
            ..p.samples[0].clone()
        });
        assert_eq!(lines(&p), vec!["prog;f 2"]);
    }

    #[test]
    fn thread_name_is_prepended_when_stack_has_no_root() {
        let mut p = Profile::default();
        let main = p.intern(frame("main", Native));
        p.threads.insert(
            42,
            ThreadInfo {
                pid: 42,
                comm: "worker".into(),
            },
        );
        p.samples.push(ProfileSample {
            pid: 42,
            tid: 42,
            time: 0,
            cpu: 0,
            weight: 9,
            stack: vec![main],
        });
        assert_eq!(lines(&p), vec!["worker;main 9"]);
    }

    #[test]
    fn write_matches_lines() {
        let p = profile(&[(&[("x", Native)], 4), (&[("y", Native)], 6)]);
        let mut out = Vec::new();
        write(&p, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "prog;x 4\nprog;y 6\n");
    }
}
