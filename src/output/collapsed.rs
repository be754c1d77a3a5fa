//! Brendan Gregg folded stacks (`root;caller;callee WEIGHT`), the input of every flame graph
//! tool. How a [`Frame`] is written as one label is `profile::frame_label` (kind suffixes,
//! escaping), shared with the text report.

use std::collections::BTreeMap;
use std::io::{self, Write};

use rustc_hash::FxHashMap;

use crate::profile::{frame_label, Frame, FrameId, FrameKind, Profile};

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

/// Distinct stacks as paths of label indices (into the returned labels, deduplicated), with
/// their summed weights. Frames with the same label get the same index, so paths compare the
/// way the folded text does.
fn label_paths(profile: &Profile) -> (Vec<String>, Vec<(Vec<u32>, u64)>) {
    // Aggregate on interned ids first (cheap), then map each distinct stack to labels once.
    let mut by_ids: FxHashMap<(Option<u32>, &[FrameId]), u64> = FxHashMap::default();
    for sample in &profile.samples {
        let root_tid = missing_root(profile, sample.tid, &sample.stack);
        *by_ids.entry((root_tid, &sample.stack)).or_default() += sample.weight;
    }
    let mut names: Vec<String> = Vec::new();
    let mut index: FxHashMap<String, u32> = FxHashMap::default();
    let mut intern = |label: String| -> u32 {
        *index.entry(label).or_insert_with_key(|label| {
            names.push(label.clone());
            names.len() as u32 - 1
        })
    };
    let of_frame: Vec<u32> = labels(profile).into_iter().map(&mut intern).collect();
    let mut paths = Vec::with_capacity(by_ids.len());
    for ((root_tid, stack), weight) in by_ids {
        let mut path = Vec::with_capacity(stack.len() + 1);
        if let Some(thread) = root_tid.and_then(|tid| profile.threads.get(&tid)) {
            path.push(intern(frame_label(&Frame {
                name: thread.comm.clone(),
                kind: FrameKind::Root,
                module: None,
                file: None,
                line: None,
            })));
        }
        path.extend(stack.iter().map(|id| of_frame[id.0 as usize]));
        if !path.is_empty() {
            paths.push((path, weight));
        }
    }
    (names, paths)
}

/// Joins label paths into folded stacks, merging equal ones, in lexicographic order.
fn render<'a>(
    names: &[String],
    paths: impl Iterator<Item = (&'a [u32], u64)>,
) -> Vec<(String, u64)> {
    let mut folded: BTreeMap<String, u64> = BTreeMap::new();
    let mut line = String::new();
    for (path, weight) in paths {
        line.clear();
        for (i, &label) in path.iter().enumerate() {
            if i > 0 {
                line.push(';');
            }
            line.push_str(&names[label as usize]);
        }
        // A clone has exactly the line's length; the reused buffer keeps the slack.
        match folded.get_mut(&line) {
            Some(sum) => *sum += weight,
            None => {
                folded.insert(line.clone(), weight);
            }
        }
    }
    folded.into_iter().collect()
}

/// Distinct folded stacks with their summed weights, in lexicographic order of the stack text.
/// Stacks that differ only in frame details hidden by the label (file, line) are merged.
pub fn fold(profile: &Profile) -> Vec<(String, u64)> {
    let (names, paths) = label_paths(profile);
    render(&names, paths.iter().map(|(p, w)| (&p[..], *w)))
}

/// `stack weight` lines, each allocated exactly: `format!` grows by doubling, which for a
/// million long lines holds tens of MB of slack while the flame graph is drawn.
fn to_lines(folded: Vec<(String, u64)>) -> Vec<String> {
    folded
        .into_iter()
        .map(|(stack, weight)| {
            let weight = weight.to_string();
            let mut line = String::with_capacity(stack.len() + 1 + weight.len());
            line.push_str(&stack);
            line.push(' ');
            line.push_str(&weight);
            line
        })
        .collect()
}

/// Folded lines, `stack weight`, one per distinct stack.
pub fn lines(profile: &Profile) -> Vec<String> {
    to_lines(fold(profile))
}

/// Folded lines for drawing: like [`lines`], but each stack is cut shortly after its first
/// frame that weighs less than `min_width_percent` of the total. inferno does not draw such a
/// frame (it drops frames narrower than its `min_width`, a percentage of the total), nor
/// anything above it. The thin frame and one frame above it are kept: inferno places
/// siblings by sorting whole lines as text, so the thin frame must stay and still be followed
/// by `;` (not by the ` weight` a cut there would put after it) for every drawn frame to keep
/// its position. The picture is the same, drawn from far fewer and shorter lines.
pub fn lines_to_draw(profile: &Profile, min_width_percent: f64) -> Vec<String> {
    let (names, mut paths) = label_paths(profile);
    // Sorted paths put every prefix's stacks next to each other, like inferno's sorted lines.
    paths.sort_unstable();
    let total: u64 = paths.iter().map(|p| p.1).sum();
    // inferno's own arithmetic, so the boundary case falls the same way.
    let min_weight = min_width_percent / (100.0 / total as f64);
    // How many leading frames of each path are drawn.
    let mut keep = vec![0usize; paths.len()];
    // The prefixes of the current path: (first path with it, weight of the paths closed so far).
    let mut open: Vec<(usize, u64)> = Vec::new();
    for j in 0..=paths.len() {
        let common = match (j.checked_sub(1), paths.get(j)) {
            (Some(prev), Some(cur)) => paths[prev]
                .0
                .iter()
                .zip(&cur.0)
                .take_while(|(a, b)| a == b)
                .count(),
            _ => 0,
        };
        while open.len() > common {
            let depth = open.len();
            let (first, weight) = open.pop().unwrap_or_default();
            // Same comparison as inferno's: narrower than the minimum is not drawn.
            if weight as f64 >= min_weight {
                for k in &mut keep[first..j] {
                    *k = (*k).max(depth);
                }
            }
            if let Some(parent) = open.last_mut() {
                parent.1 += weight;
            }
        }
        if let Some((path, weight)) = paths.get(j) {
            open.resize(path.len(), (j, 0));
            if let Some(deepest) = open.last_mut() {
                deepest.1 += weight;
            }
        }
    }
    let cut = paths
        .iter()
        .zip(&keep)
        .map(|((path, weight), &k)| (&path[..(k + 2).min(path.len())], *weight));
    to_lines(render(&names, cut))
}

/// Writes the folded stacks, one line each.
pub fn write(profile: &Profile, mut out: impl Write) -> io::Result<()> {
    for (stack, weight) in fold(profile) {
        writeln!(out, "{stack} {weight}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::testing::{frame, profile};
    use crate::profile::{ProfileSample, ThreadInfo};

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
            stack: vec![root, f2].into(),
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
            stack: vec![main].into(),
            off_cpu: false,
        });
        assert_eq!(lines(&p), vec!["worker;main 9"]);
    }

    /// 200 stacks under two hot paths, most of them too thin to draw at the default width.
    /// Leaf names that prefix each other (`leaf1`, `leaf10`) exercise inferno's text sort.
    fn many_thin_stacks() -> Profile {
        let names: Vec<String> = (0..200).map(|i| format!("leaf{i}")).collect();
        let mut stacks: Vec<(Vec<(&str, FrameKind)>, u64)> = vec![
            (vec![("main", Native), ("hot", Native)], 900_000),
            (vec![("main", Native), ("warm", Jit)], 90_000),
        ];
        for (i, name) in names.iter().enumerate() {
            let parent = if i % 2 == 0 { "hot" } else { "warm" };
            let kind = if i % 2 == 0 { Native } else { Jit };
            let weight = if i < 4 { 2_000 } else { 1 + i as u64 % 7 };
            let mut stack = vec![("main", Native), (parent, kind), (name.as_str(), Native)];
            stack.extend([("deep", Kernel), ("deeper", Kernel), ("deepest", Kernel)]);
            stacks.push((stack, weight));
            // The same leaf seen without callees too.
            stacks.push((vec![("main", Native), (parent, kind), (name, Native)], 1));
        }
        let refs: Vec<(&[(&str, FrameKind)], u64)> =
            stacks.iter().map(|(s, w)| (&s[..], *w)).collect();
        profile(&refs)
    }

    fn svg(lines: &[String], look: &crate::output::flamegraph::Look) -> String {
        let labels = crate::output::flamegraph::Labels::new(
            "t",
            "samples",
            crate::profile::WeightUnit::Events,
        );
        let mut out = Vec::new();
        crate::output::flamegraph::write(lines, &labels, look, None, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn bytes(lines: &[String]) -> usize {
        lines.iter().map(String::len).sum()
    }

    #[test]
    fn pruned_lines_draw_the_same_flame_graph() {
        use crate::output::flamegraph::Look;
        let p = many_thin_stacks();
        let all = lines(&p);
        for min_width in [None, Some(0.5), Some(5.0)] {
            let look = Look {
                min_width,
                ..Look::default()
            };
            let pruned = lines_to_draw(&p, look.min_width_percent());
            assert!(bytes(&pruned) < bytes(&all) * 3 / 4, "{min_width:?}");
            let full = svg(&all, &look);
            assert!(full.matches("<g>").count() > 4);
            assert_eq!(full, svg(&pruned, &look), "{min_width:?}: the same SVG");
        }
        let inverted = Look {
            inverted: true,
            ..Look::default()
        };
        let pruned = lines_to_draw(&p, inverted.min_width_percent());
        assert_eq!(svg(&all, &inverted), svg(&pruned, &inverted));
    }

    #[test]
    fn pruning_keeps_the_total() {
        let p = many_thin_stacks();
        let total = |lines: &[String]| -> u64 {
            lines
                .iter()
                .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
                .sum()
        };
        // At 100% only prog;main is drawn: every line keeps two frames after it.
        let cut = lines_to_draw(&p, 100.0);
        assert!(cut.iter().all(|l| l.matches(';').count() <= 3), "{cut:?}");
        assert!(cut.contains(&"prog;main;hot;leaf0 2001".to_string()));
        assert_eq!(total(&cut), total(&lines(&p)));
        assert_eq!(lines_to_draw(&p, 0.0), lines(&p));
    }

    #[test]
    fn write_matches_lines() {
        let p = profile(&[(&[("x", Native)], 4), (&[("y", Native)], 6)]);
        let mut out = Vec::new();
        write(&p, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "prog;x 4\nprog;y 6\n");
    }
}
