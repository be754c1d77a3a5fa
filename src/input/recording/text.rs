//! The text report: the recording's summary (what was recorded, what was lost, how the file
//! ended) and the top functions by self and by total (inclusive) weight, JIT code per tier.

use rustc_hash::FxHashMap;
use std::io::{self, Write};

use crate::profile::{Frame, FrameId, FrameKind, Profile};
use crate::recording::Recording;

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
    pub samples: usize,
    /// Sorted by self weight, then total, then name.
    pub functions: Vec<FunctionCost>,
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
/// would be 100% of their thread and say nothing about code.
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
    // The last sample (1-based) each function was counted for.
    let mut counted_in: Vec<usize> = vec![0; functions.len()];
    for (n, sample) in profile.samples.iter().enumerate() {
        let n = n + 1;
        total_weight += sample.weight;
        let mut leaf = no_frames;
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
        }
        if leaf == no_frames {
            functions[leaf].total_weight += sample.weight;
        }
        functions[leaf].self_weight += sample.weight;
    }
    functions.retain(|f| f.total_weight > 0);
    functions.sort_by(|a, b| {
        (b.self_weight, b.total_weight, &a.name).cmp(&(a.self_weight, a.total_weight, &b.name))
    });
    FunctionCosts {
        total_weight,
        samples: profile.samples.len(),
        functions,
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The two top-`n` tables, by self and by total weight.
pub fn write_top(costs: &FunctionCosts, n: usize, mut out: impl Write) -> io::Result<()> {
    if costs.samples == 0 {
        return writeln!(out, "No samples to report.");
    }
    let whole = costs.total_weight;
    writeln!(out, "Top {n} functions by self time:")?;
    let by_self = costs.functions.iter().filter(|f| f.self_weight > 0).take(n);
    write_rows(
        &mut out,
        ("self%", "total%"),
        by_self,
        |f| (f.self_weight, f.total_weight),
        whole,
    )?;
    let mut by_total: Vec<&FunctionCost> = costs.functions.iter().collect();
    by_total.sort_by(|a, b| {
        (b.total_weight, b.self_weight, &a.name).cmp(&(a.total_weight, a.self_weight, &b.name))
    });
    writeln!(out)?;
    writeln!(out, "Top {n} functions by total (inclusive) time:")?;
    let by_total = by_total.into_iter().take(n);
    write_rows(
        &mut out,
        ("total%", "self%"),
        by_total,
        |f| (f.total_weight, f.self_weight),
        whole,
    )
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
        (false, _) => writeln!(out, "Command:   {}", meta.command.join(" "))?,
        (true, Some(pid)) => writeln!(out, "Attached:  pid {pid}")?,
        (true, None) => {}
    }
    write!(
        out,
        "Event:     {} at {} Hz, call graph {}",
        event.event, event.frequency_hz, event.call_graph
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
            writeln!(
                out,
                "Lost:      {} records, {} samples; {} throttles; {} batches dropped by jprof",
                s.lost_records, s.lost_samples, s.throttles, s.dropped_batches
            )?;
            writeln!(out, "Threads:   {} in {} processes", s.threads, s.processes)?;
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
        .chain(profile.notes.iter());
    for note in notes {
        writeln!(out, "Note:      {note}")?;
    }
    for line in super::coverage::lines(profile) {
        writeln!(out, "JIT names: {line}")?;
    }
    Ok(())
}

/// The full text report: summary, then the top-`n` tables.
pub fn write(
    recording: &Recording,
    profile: &Profile,
    n: usize,
    mut out: impl Write,
) -> io::Result<()> {
    write_summary(recording, profile, &mut out)?;
    writeln!(out)?;
    write_top(&function_costs(profile), n, out)
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
        write_top(&function_costs(&p), 15, &mut out).unwrap();
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

    #[test]
    fn empty_profile_says_so() {
        let mut out = Vec::new();
        write_top(&function_costs(&Profile::default()), 15, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "No samples to report.\n");
    }
}
