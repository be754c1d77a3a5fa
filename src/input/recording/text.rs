//! The text report: the recording's summary (what was recorded, what was lost, how the file
//! ended) and the top functions by self and by total (inclusive) weight, JIT code per tier.

use rustc_hash::FxHashMap;
use std::io::{self, Write};

use crate::profile::{Frame, FrameId, FrameKind, Profile};
use crate::recording::Recording;

use crate::input::request::{SortBy, Tables};

/// One function's cost. Weights are summed sample periods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionCost {
    /// The folded-stack label (name plus kind suffix), then ` [tier]` for JIT code whose tier
    /// is known.
    pub name: String,
    /// Weight of samples where this function is the leaf.
    pub self_weight: u64,
    /// Weight of samples where this function is anywhere on the stack, counted once per sample.
    pub total_weight: u64,
}

/// Per-function costs of a profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionCosts {
    /// Sum of all sample weights: the 100%.
    pub total_weight: u64,
    /// How many samples the profile has.
    pub samples: usize,
    /// Sorted by self weight, then total, then name.
    pub functions: Vec<FunctionCost>,
    /// Off-CPU samples only: the kernel frames they waited in (`a > b > schedule`, outermost
    /// first) with their weight, heaviest first. Their self weight is counted for the
    /// user-level function that waited.
    pub kernel_paths: Vec<(String, u64)>,
}

/// Stands in for the leaf of a sample that has no frame besides the thread name.
const NO_FRAMES: &str = "[no frames]";

/// A function's label in the tables: the folded-stack label, plus the JIT tier where the
/// runtime named one, so a function's baseline and optimized code are counted apart.
fn text_label(profile: &Profile, id: FrameId, frame: &Frame) -> String {
    let label = crate::profile::frame_label(frame);
    match profile.tier(id) {
        Some(tier) => format!("{label} [{tier}]"),
        None => label,
    }
}

/// Self and total weight of every function. Root frames (thread names) are left out: they
/// would be 100% of their thread and say nothing about code. A switch off the CPU
/// (`--weight off-cpu`, `wall`) ends in the kernel's scheduler whatever the program waited
/// for, so its self weight goes to the user-level function that waited (the innermost frame
/// outside the kernel), and its kernel path is counted in [`FunctionCosts::kernel_paths`].
pub fn function_costs(profile: &Profile) -> FunctionCosts {
    // Distinct frames (e.g. one function at two lines) can share a label; cost is per label.
    let mut index: FxHashMap<String, usize> = FxHashMap::default();
    let mut functions: Vec<FunctionCost> = Vec::new();
    let mut slot = |name: String| -> usize {
        *index.entry(name).or_insert_with_key(|name| {
            functions.push(FunctionCost {
                name: name.clone(),
                self_weight: 0,
                total_weight: 0,
            });
            functions.len() - 1
        })
    };
    // Root frames (thread names) get no slot.
    let slot_of_frame: Vec<Option<usize>> = profile
        .frames()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            (f.kind != FrameKind::Root).then(|| slot(text_label(profile, FrameId(i as u32), f)))
        })
        .collect();
    let no_frames = slot(NO_FRAMES.to_string());
    let mut total_weight = 0u64;
    let mut kernel_paths: FxHashMap<Vec<FrameId>, u64> = FxHashMap::default();
    // The last sample (1-based) each function was counted for.
    let mut counted_in: Vec<usize> = vec![0; functions.len()];
    for (n, sample) in profile.samples.iter().enumerate() {
        let n = n + 1;
        total_weight += sample.weight;
        let mut leaf = no_frames;
        let mut user_leaf = None;
        for &id in sample.stack.iter() {
            let Some(i) = slot_of_frame[id.0 as usize] else {
                continue;
            };
            // Recursion puts a function on the stack more than once; it still costs the
            // sample's weight once.
            if counted_in[i] != n {
                counted_in[i] = n;
                functions[i].total_weight += sample.weight;
            }
            leaf = i;
            if profile.frame(id).kind != FrameKind::Kernel {
                user_leaf = Some(i);
            }
        }
        if leaf == no_frames {
            functions[leaf].total_weight += sample.weight;
        }
        if sample.off_cpu {
            if let Some(user) = user_leaf {
                let kernel: Vec<FrameId> = sample
                    .stack
                    .iter()
                    .copied()
                    .skip_while(|&id| profile.frame(id).kind != FrameKind::Kernel)
                    .collect();
                *kernel_paths.entry(kernel).or_default() += sample.weight;
                leaf = user;
            }
        }
        functions[leaf].self_weight += sample.weight;
    }
    functions.retain(|f| f.total_weight > 0);
    functions.sort_by(|a, b| {
        (b.self_weight, b.total_weight, &a.name).cmp(&(a.self_weight, a.total_weight, &b.name))
    });
    let mut kernel_paths: Vec<(String, u64)> = kernel_paths
        .into_iter()
        .filter(|(path, _)| !path.is_empty())
        .map(|(path, weight)| {
            let names: Vec<&str> = path
                .iter()
                .map(|&id| profile.frame(id).name.as_str())
                .collect();
            (names.join(" > "), weight)
        })
        .collect();
    kernel_paths.sort_by(|a, b| (b.1, &a.0).cmp(&(a.1, &b.0)));
    FunctionCosts {
        total_weight,
        samples: profile.samples.len(),
        functions,
        kernel_paths,
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The top tables: by self and by total weight (one of them with `--sort`), `limit` rows each,
/// and for off-CPU weights the kernel paths the waits went through.
pub fn write_top(costs: &FunctionCosts, tables: &Tables, mut out: impl Write) -> io::Result<()> {
    if costs.samples == 0 {
        return writeln!(out, "No samples to report.");
    }
    let n = tables.limit;
    let whole = costs.total_weight;
    let waits = !costs.kernel_paths.is_empty();
    if tables.sort != Some(SortBy::Total) {
        write!(out, "Top {n} functions by self time")?;
        if waits {
            write!(
                out,
                " (a wait off the CPU counts for the user-level function that waited; its \
                 kernel path is listed below)"
            )?;
        }
        writeln!(out, ":")?;
        let by_self = costs.functions.iter().filter(|f| f.self_weight > 0).take(n);
        write_rows(
            &mut out,
            ("self%", "total%"),
            by_self,
            |f| (f.self_weight, f.total_weight),
            whole,
        )?;
    }
    if tables.sort != Some(SortBy::SelfWeight) {
        let mut by_total: Vec<&FunctionCost> = costs.functions.iter().collect();
        by_total.sort_by(|a, b| {
            (b.total_weight, b.self_weight, &a.name).cmp(&(a.total_weight, a.self_weight, &b.name))
        });
        if tables.sort.is_none() {
            writeln!(out)?;
        }
        writeln!(out, "Top {n} functions by total (inclusive) time:")?;
        let by_total = by_total.into_iter().take(n);
        write_rows(
            &mut out,
            ("total%", "self%"),
            by_total,
            |f| (f.total_weight, f.self_weight),
            whole,
        )?;
    }
    if waits {
        writeln!(out)?;
        writeln!(out, "Top {n} kernel paths of the waits off the CPU:")?;
        writeln!(out, "  {:>7}  kernel frames, outermost first", "self%")?;
        for (path, weight) in costs.kernel_paths.iter().take(n) {
            writeln!(out, "  {:>6.2}%  {path}", percent(*weight, whole))?;
        }
    }
    Ok(())
}

/// One table of [`write_top`]: a header naming the two percentage columns, then a row per
/// function with the two weights `columns` picks, as percentages of `whole`.
fn write_rows<'a, W: std::io::Write + ?Sized>(
    out: &mut W,
    headers: (&str, &str),
    functions: impl Iterator<Item = &'a FunctionCost>,
    columns: impl Fn(&FunctionCost) -> (u64, u64),
    whole: u64,
) -> std::io::Result<()> {
    writeln!(out, "  {:>7} {:>7}  function", headers.0, headers.1)?;
    for f in functions {
        let (first, second) = columns(f);
        writeln!(
            out,
            "  {:>6.2}% {:>6.2}%  {}",
            percent(first, whole),
            percent(second, whole),
            f.name
        )?;
    }
    Ok(())
}

fn clock_name(clockid: i32) -> String {
    match clockid {
        0 => "CLOCK_REALTIME".into(),
        1 => "CLOCK_MONOTONIC".into(),
        4 => "CLOCK_MONOTONIC_RAW".into(),
        7 => "CLOCK_BOOTTIME".into(),
        other => format!("clockid {other}"),
    }
}

/// What was recorded and how well: the header of every text report.
pub fn write_summary(
    recording: &Recording,
    profile: &Profile,
    mut out: impl Write,
) -> io::Result<()> {
    let meta = &recording.meta;
    let event = &meta.event;
    writeln!(
        out,
        "Recording: {} ({})",
        recording.path.display(),
        recording.completeness()
    )?;
    match (meta.command.is_empty(), meta.attached_pid) {
        (true, _) if !meta.targets.is_empty() => writeln!(
            out,
            "Attached:  {}",
            meta.targets.describe().unwrap_or_default()
        )?,
        (false, _) => writeln!(out, "Command:   {}", meta.command.join(" "))?,
        (true, Some(pid)) => writeln!(out, "Attached:  pid {pid}")?,
        (true, None) => {}
    }
    write!(
        out,
        "Event:     {} at {} Hz{}, call graph {}",
        event.event,
        event.frequency_hz,
        event.weights_count(),
        event.call_graph
    )?;
    if !event.kernel_callchains {
        write!(out, ", no kernel frames")?;
    }
    let summary_notes = recording.summary.iter().flat_map(|s| s.notes.iter());
    match &event.event_note {
        // The recorder usually repeats it among the summary notes; say it once.
        Some(note) if !summary_notes.clone().any(|n| n == note) => writeln!(out, " ({note})")?,
        _ => writeln!(out)?,
    }
    let clockid = recording
        .clock
        .as_ref()
        .map_or(event.clockid, |c| c.sample_clockid);
    writeln!(out, "Clock:     {}", clock_name(clockid))?;
    match &recording.summary {
        Some(s) => {
            writeln!(
                out,
                "Samples:   {} recorded, {} in this report",
                s.samples,
                profile.samples.len()
            )?;
            let losses = s.losses();
            if losses.is_empty() {
                writeln!(out, "Lost:      nothing")?;
            } else {
                writeln!(out, "Lost:      {}", losses.join("; "))?;
            }
            writeln!(out, "Threads:   {} in {} processes", s.threads, s.processes)?;
            for (i, p) in s.top_processes.iter().enumerate() {
                let share = 100.0 * p.samples as f64 / s.samples.max(1) as f64;
                writeln!(
                    out,
                    "{}pid {} ({}): {} samples ({share:.1}%)",
                    if i == 0 { "Processes: " } else { "           " },
                    p.pid,
                    p.comm,
                    p.samples
                )?;
            }
            if let Some(off) = &s.off_cpu {
                writeln!(out, "Off-CPU:   {}", off.describe(event.off_cpu_min_ns))?;
            }
            let exit = match s.exit_code {
                Some(code) => format!("exit code {code}"),
                None => "no exit code".into(),
            };
            let stopped = if s.stopped_by.is_empty() {
                String::new()
            } else {
                format!(", stopped by {}", s.stopped_by)
            };
            writeln!(
                out,
                "Duration:  {:.3} s, {exit}{stopped}",
                s.wall_duration_ns as f64 / 1e9
            )?;
        }
        None => writeln!(
            out,
            "Samples:   {} in this report (no summary: the recorder did not finish)",
            profile.samples.len()
        )?,
    }
    let notes = recording
        .summary
        .iter()
        .flat_map(|s| s.notes.iter())
        .chain(profile.notes.iter())
        .map(String::as_str);
    for note in crate::profile::notes::group(notes) {
        writeln!(out, "Note:      {note}")?;
    }
    for line in super::coverage::lines(profile) {
        writeln!(out, "JIT names: {line}")?;
    }
    Ok(())
}

/// Share of the weight from which an unnamed HotSpot interpreter frame (`Interpreter`) is worth
/// a hint.
const INTERPRETER_HINT_SHARE: f64 = 0.05;

/// With the 1 KiB fp copy alone (`--call-graph fp`, or a JVM jprof did not see the command
/// start) a HotSpot interpreter frame is named only when its frame is in the copy; when many
/// samples keep an unnamed `Interpreter` frame, the hint says how every frame's `Method*` slot
/// is read (docs/java.md).
pub fn unnamed_interpreter_hint(profile: &Profile) -> Option<String> {
    let unnamed: Vec<bool> = profile
        .frames()
        .iter()
        .map(|f| f.kind == FrameKind::Jit && f.name == "Interpreter")
        .collect();
    if !unnamed.contains(&true) {
        return None;
    }
    let total: u64 = profile.samples.iter().map(|s| s.weight).sum();
    let with: u64 = profile
        .samples
        .iter()
        .filter(|s| s.stack.iter().any(|id| unnamed[id.0 as usize]))
        .map(|s| s.weight)
        .sum();
    let share = with as f64 / total.max(1) as f64;
    (share >= INTERPRETER_HINT_SHARE).then(|| {
        format!(
            "{:.1}% of the samples pass through Java interpreter frames left unnamed \
             (`Interpreter`): only the frames in the 1 KiB stack copy of each sample are \
             named; `jprof record` reads every frame's Method* slot for a JVM it sees the \
             command start (without `--call-graph fp`), and with `--jvm` for one started \
             through a launcher it cannot see through",
            share * 100.0
        )
    })
}

/// The full text report: summary, then the top tables, or the callers or callees of a
/// function (`--callers`, `--callees`).
pub fn write(
    recording: &Recording,
    profile: &Profile,
    tables: &Tables,
    mut out: impl Write,
) -> io::Result<()> {
    write_summary(recording, profile, &mut out)?;
    writeln!(out)?;
    write_tables(profile, tables, out)
}

/// The top tables, or the callers or callees of a function (`--callers`, `--callees`), of any
/// profile.
pub fn write_tables(profile: &Profile, tables: &Tables, out: impl Write) -> io::Result<()> {
    match (&tables.callers, &tables.callees) {
        (Some(function), _) => write_neighbours(profile, function, Direction::Callers, tables, out),
        (None, Some(function)) => {
            write_neighbours(profile, function, Direction::Callees, tables, out)
        }
        (None, None) => write_top(&function_costs(profile), tables, out),
    }
}

/// Which neighbours of a function a table lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Callers,
    Callees,
}

/// The frames `wanted` names: those whose name or label is exactly it, else those whose name
/// contains it.
fn matching_frames(profile: &Profile, wanted: &str) -> Vec<bool> {
    let exact: Vec<bool> = profile
        .frames()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            f.kind != FrameKind::Root
                && (f.name == wanted
                    || crate::profile::frame_label(f) == wanted
                    || text_label(profile, FrameId(i as u32), f) == wanted)
        })
        .collect();
    if exact.iter().any(|&m| m) {
        return exact;
    }
    profile
        .frames()
        .iter()
        .map(|f| f.kind != FrameKind::Root && f.name.contains(wanted))
        .collect()
}

/// The callers or callees of `function`: for every sample with it on the stack, the function
/// next to it (towards the root for callers, the leaf for callees; `[self]` where it is the
/// leaf, `[root]` where nothing called it), each counted once per sample. Shares are of the
/// function's total weight.
fn write_neighbours(
    profile: &Profile,
    function: &str,
    direction: Direction,
    tables: &Tables,
    mut out: impl Write,
) -> io::Result<()> {
    let matches = matching_frames(profile, function);
    let is_match = |id: FrameId| matches[id.0 as usize];
    let mut names: Vec<String> = profile
        .frames()
        .iter()
        .enumerate()
        .filter(|(i, _)| matches[*i])
        .map(|(i, f)| text_label(profile, FrameId(i as u32), f))
        .collect();
    names.sort();
    names.dedup();
    if names.is_empty() {
        return writeln!(
            out,
            "No function matches {function:?}: give a name as the top table lists it, or a \
             part of one."
        );
    }
    let whole: u64 = profile.samples.iter().map(|s| s.weight).sum();
    let mut total = 0u64;
    let mut neighbours: FxHashMap<String, u64> = FxHashMap::default();
    for sample in &profile.samples {
        let stack = &sample.stack;
        if !stack.iter().any(|&id| is_match(id)) {
            continue;
        }
        total += sample.weight;
        let mut seen: Vec<String> = Vec::new();
        for (i, &id) in stack.iter().enumerate() {
            if !is_match(id) {
                continue;
            }
            let next = match direction {
                Direction::Callers => i.checked_sub(1).map(|j| stack[j]),
                Direction::Callees => stack.get(i + 1).copied(),
            };
            let name = match next {
                // Recursion: the function calling itself is not a neighbour.
                Some(n) if is_match(n) => continue,
                Some(n) if profile.frame(n).kind == FrameKind::Root => "[root]".to_string(),
                Some(n) => text_label(profile, n, profile.frame(n)),
                None if direction == Direction::Callees => "[self]".to_string(),
                None => "[root]".to_string(),
            };
            if !seen.contains(&name) {
                *neighbours.entry(name.clone()).or_default() += sample.weight;
                seen.push(name);
            }
        }
    }
    let what = match direction {
        Direction::Callers => "Callers",
        Direction::Callees => "Callees",
    };
    writeln!(
        out,
        "{what} of {} (total {:.2}%, self {:.2}% of all samples):",
        names.join(", "),
        percent(total, whole),
        percent(own_weight(profile, &matches), whole)
    )?;
    let mut rows: Vec<(String, u64)> = neighbours.into_iter().collect();
    rows.sort_by(|a, b| (b.1, &a.0).cmp(&(a.1, &b.0)));
    let column = match direction {
        Direction::Callers => "caller",
        Direction::Callees => "callee",
    };
    writeln!(out, "  {:>7} {:>7}  {column}", "share", "total%")?;
    for (name, weight) in rows.iter().take(tables.limit) {
        writeln!(
            out,
            "  {:>6.2}% {:>6.2}%  {name}",
            percent(*weight, total),
            percent(*weight, whole)
        )?;
    }
    if rows.len() > tables.limit {
        writeln!(
            out,
            "  ({} more; --limit shows more)",
            rows.len() - tables.limit
        )?;
    }
    Ok(())
}

/// The weight of samples whose leaf is one of the matching frames.
fn own_weight(profile: &Profile, matches: &[bool]) -> u64 {
    profile
        .samples
        .iter()
        .filter(|s| s.stack.last().is_some_and(|id| matches[id.0 as usize]))
        .map(|s| s.weight)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::testing::profile;
    use crate::profile::FrameKind::*;

    fn cost<'a>(costs: &'a FunctionCosts, name: &str) -> &'a FunctionCost {
        costs
            .functions
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} missing from {costs:?}"))
    }

    #[test]
    fn self_and_total_count_recursion_once() {
        let p = profile(&[
            // fib recursing three deep, leaf in fib.
            (
                &[
                    ("main", Native),
                    ("fib", Native),
                    ("fib", Native),
                    ("fib", Native),
                ],
                50,
            ),
            // fib calling add.
            (&[("main", Native), ("fib", Native), ("add", Native)], 30),
            (&[("main", Native), ("sys_write", Kernel)], 20),
        ]);
        let c = function_costs(&p);
        assert_eq!(c.total_weight, 100);
        assert_eq!(c.samples, 3);
        let fib = cost(&c, "fib");
        assert_eq!((fib.self_weight, fib.total_weight), (50, 80));
        let main = cost(&c, "main");
        assert_eq!((main.self_weight, main.total_weight), (0, 100));
        assert_eq!(cost(&c, "sys_write_[k]").self_weight, 20);
        assert!(
            c.functions.iter().all(|f| f.name != "prog"),
            "roots are left out"
        );
        // Sorted by self weight.
        let names: Vec<_> = c.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, vec!["fib", "add", "sys_write_[k]", "main"]);
    }

    #[test]
    fn tables_show_percentages() {
        let p = profile(&[
            (&[("main", Native), ("a", Native)], 3),
            (&[("main", Native), ("b", Native)], 1),
        ]);
        let mut out = Vec::new();
        write_top(&function_costs(&p), &Tables::default(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(" 75.00% 100.00%  a") || text.contains("75.00%  75.00%  a"),
            "{text}"
        );
        assert!(text.contains(" 25.00%  25.00%  b"), "{text}");
        assert!(text.contains("100.00%   0.00%  main"), "{text}");
    }

    #[test]
    fn jit_tiers_are_counted_apart() {
        use crate::profile::testing::frame;
        use crate::profile::ProfileSample;
        let mut p = Profile::default();
        use crate::profile::{Tier, TierClass};
        let baseline = p.intern_tiered(
            frame("hot", Jit),
            Some(Tier::new(TierClass::Baseline, "tier1 (baseline)")),
        );
        let optimized = p.intern_tiered(
            frame("hot", Jit),
            Some(Tier::new(TierClass::Optimized, "tier2 (optimized)")),
        );
        let untiered = p.intern(frame("hot", Jit));
        assert_ne!(baseline, optimized);
        assert_ne!(baseline, untiered);
        assert_eq!(
            p.tier(optimized).map(|t| t.label.as_str()),
            Some("tier2 (optimized)")
        );
        assert_eq!(p.tier(untiered), None);
        for (time, (id, weight)) in [(baseline, 1), (optimized, 3), (untiered, 2)]
            .into_iter()
            .enumerate()
        {
            p.samples.push(ProfileSample {
                pid: 1,
                tid: 1,
                time: time as u64,
                cpu: 0,
                weight,
                stack: vec![id].into(),
                off_cpu: false,
            });
        }
        let c = function_costs(&p);
        assert_eq!(cost(&c, "hot_[j] [tier1 (baseline)]").self_weight, 1);
        assert_eq!(cost(&c, "hot_[j] [tier2 (optimized)]").self_weight, 3);
        assert_eq!(cost(&c, "hot_[j]").self_weight, 2);
    }

    #[test]
    fn sample_without_frames_is_counted() {
        let p = profile(&[(&[], 5), (&[("f", Native)], 5)]);
        let c = function_costs(&p);
        assert_eq!(cost(&c, NO_FRAMES).self_weight, 5);
        assert_eq!(cost(&c, "f").total_weight, 5);
    }

    fn text_of(p: &Profile, tables: &Tables) -> String {
        let mut out = Vec::new();
        match (&tables.callers, &tables.callees) {
            (Some(f), _) => write_neighbours(p, f, Direction::Callers, tables, &mut out),
            (None, Some(f)) => write_neighbours(p, f, Direction::Callees, tables, &mut out),
            (None, None) => write_top(&function_costs(p), tables, &mut out),
        }
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn callers_and_callees_with_their_shares() {
        let p = profile(&[
            (&[("main", Native), ("a", Native), ("work", Native)], 30),
            (&[("main", Native), ("b", Native), ("work", Native)], 10),
            // Recursion: work calling itself counts once, under its outer caller.
            (
                &[
                    ("main", Native),
                    ("a", Native),
                    ("work", Native),
                    ("work", Native),
                    ("leaf", Native),
                ],
                40,
            ),
            (&[("main", Native), ("other", Native)], 20),
        ]);
        let callers = text_of(
            &p,
            &Tables {
                callers: Some("work".into()),
                ..Tables::default()
            },
        );
        assert!(
            callers.starts_with("Callers of work (total 80.00%, self 40.00% of all samples):\n"),
            "{callers}"
        );
        assert!(callers.contains(" 87.50%  70.00%  a\n"), "{callers}");
        assert!(callers.contains(" 12.50%  10.00%  b\n"), "{callers}");
        let callees = text_of(
            &p,
            &Tables {
                callees: Some("work".into()),
                limit: 1,
                ..Tables::default()
            },
        );
        assert!(callees.contains(" 50.00%  40.00%  [self]\n"), "{callees}");
        assert!(
            callees.contains("(1 more; --limit shows more)"),
            "{callees}"
        );
        assert!(!callees.contains("leaf"), "{callees}");
        // A part of a name matches; nothing matching says so.
        assert!(text_of(
            &p,
            &Tables {
                callers: Some("ork".into()),
                ..Tables::default()
            }
        )
        .contains("Callers of work "));
        assert!(text_of(
            &p,
            &Tables {
                callees: Some("nothing".into()),
                ..Tables::default()
            }
        )
        .starts_with("No function matches \"nothing\""));
    }

    #[test]
    fn sort_and_limit_pick_the_table_and_its_rows() {
        let p = profile(&[
            (&[("main", Native), ("a", Native)], 3),
            (&[("main", Native), ("b", Native)], 2),
            (&[("main", Native), ("c", Native)], 1),
        ]);
        let by_total = text_of(
            &p,
            &Tables {
                sort: Some(SortBy::Total),
                limit: 2,
                ..Tables::default()
            },
        );
        assert_eq!(
            by_total,
            "Top 2 functions by total (inclusive) time:\n   total%   self%  function\n\
             \x20 100.00%   0.00%  main\n   50.00%  50.00%  a\n"
        );
        let by_self = text_of(
            &p,
            &Tables {
                sort: Some(SortBy::SelfWeight),
                ..Tables::default()
            },
        );
        assert!(by_self.starts_with("Top 15 functions by self time:\n"));
        assert!(!by_self.contains("by total"));
        assert_eq!(by_self.lines().count(), 2 + 3);
    }

    #[test]
    fn a_wait_counts_for_the_user_function_that_waited() {
        let mut p = profile(&[
            (
                &[
                    ("main", Native),
                    ("read_config", Native),
                    ("read", Native),
                    ("ksys_read", Kernel),
                    ("schedule", Kernel),
                ],
                600,
            ),
            (
                &[
                    ("main", Native),
                    ("nanosleep", Native),
                    ("do_nanosleep", Kernel),
                    ("schedule", Kernel),
                ],
                400,
            ),
        ]);
        for s in &mut p.samples {
            s.off_cpu = true;
        }
        let costs = function_costs(&p);
        assert_eq!(cost(&costs, "read").self_weight, 600);
        assert_eq!(cost(&costs, "nanosleep").self_weight, 400);
        assert_eq!(cost(&costs, "schedule_[k]").self_weight, 0);
        assert_eq!(cost(&costs, "schedule_[k]").total_weight, 1000);
        assert_eq!(
            costs.kernel_paths,
            vec![
                ("ksys_read > schedule".to_string(), 600),
                ("do_nanosleep > schedule".to_string(), 400)
            ]
        );
        let text = text_of(&p, &Tables::default());
        assert!(
            text.contains("Top 15 kernel paths of the waits off the CPU:"),
            "{text}"
        );
        assert!(text.contains(" 60.00%  ksys_read > schedule\n"), "{text}");
        // A CPU sample in the kernel stays the kernel's.
        let cpu = profile(&[(&[("main", Native), ("ksys_read", Kernel)], 1)]);
        assert_eq!(cost(&function_costs(&cpu), "ksys_read_[k]").self_weight, 1);
        assert!(function_costs(&cpu).kernel_paths.is_empty());
    }

    #[test]
    fn many_unnamed_interpreter_frames_get_a_hint() {
        let p = profile(&[
            (&[("main", Native), ("Interpreter", Jit), ("f", Jit)], 30),
            (&[("main", Native), ("App.run", Interpreter)], 70),
        ]);
        let hint = unnamed_interpreter_hint(&p).expect("a hint");
        assert!(hint.starts_with("30.0% of the samples"), "{hint}");
        assert!(hint.contains("without `--call-graph fp`"), "{hint}");
        assert!(hint.contains("with `--jvm`"), "{hint}");
        let few = profile(&[
            (&[("main", Native), ("Interpreter", Jit)], 1),
            (&[("main", Native)], 99),
        ]);
        assert_eq!(unnamed_interpreter_hint(&few), None);
    }

    #[test]
    fn empty_profile_says_so() {
        let mut out = Vec::new();
        write_top(
            &function_costs(&Profile::default()),
            &Tables::default(),
            &mut out,
        )
        .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "No samples to report.\n");
    }
}
