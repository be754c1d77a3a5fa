//! XRay logs recorded next to samples (`jprof record` on an instrumented binary): their
//! timestamps are put on the sample clock (emulated logs hold CLOCK_REALTIME ns; real ones TSC
//! ticks, converted with jprof's own calibration, the header's frequency only cross-checked),
//! each thread's call stack is replayed into a timeline, and every sample is looked up in it:
//! - a sampled stack whose unwinding stopped early (callers missing) gets the XRay callers;
//! - the text report gets exact call counts and latency percentiles next to sampled shares;
//! - `timeline agreement`: of the samples whose innermost function is instrumented, the share
//!   whose XRay stack at that time on that thread has the same innermost function.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use rustc_hash::{FxHashMap, FxHashSet};

use super::replay::{Call, CallTree, ThreadStack};
use crate::format::recording::SideKind;
use crate::format::xray::{self, instr_map::InstrMap, Header, Log};
use crate::profile::{Frame, FrameId, FrameKind, Profile};
use crate::recording::Recording;
use crate::timeline::ClockConversion;

/// Relative difference between the header's TSC frequency and jprof's calibration above which
/// the report says so.
const FREQUENCY_TOLERANCE: f64 = 0.01;

/// One thread's stack over time: `(sample-clock ns, innermost node)` after each event.
type Timeline = Vec<(u64, u32)>;

/// The correlation of a recording's XRay logs with its samples.
#[derive(Debug, Default)]
pub struct LiveXray {
    pub logs: usize,
    pub events: usize,
    pub threads: usize,
    /// How the log timestamps were put on the sample clock.
    pub clock: String,
    pub notes: Vec<String>,
    /// Samples whose innermost function is instrumented, and how many of them the XRay stack
    /// agrees with.
    pub agreement: (usize, usize),
    /// Sampled stacks completed with XRay callers.
    pub completed: usize,
    pub functions: Vec<FunctionRow>,
}

/// Exact and sampled figures for one instrumented function.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionRow {
    pub name: String,
    pub calls: usize,
    /// Inclusive durations in ns: median, 90th, 99th percentile, max.
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Share of samples (by weight) with this function innermost / anywhere on the stack.
    pub self_percent: f64,
    pub total_percent: f64,
}

/// Log bytes by (pid, log path).
type SideLogs = BTreeMap<(u32, String), Vec<u8>>;

/// Reassembles the recording's XRay logs by (pid, path) and finds the binary's path.
fn side_logs(recording: &Recording) -> (Option<String>, SideLogs) {
    let mut binary = None;
    let mut logs = SideLogs::new();
    for stored in recording.side_pieces().flatten() {
        let piece = &stored.piece;
        if piece.kind == SideKind::XRAY_BINARY {
            binary = Some(piece.path.to_string());
        } else if piece.kind == SideKind::XRAY_LOG {
            let bytes = logs.entry((piece.pid, piece.path.to_string())).or_default();
            // Pieces are stored in order; one out of place means a damaged recording.
            if piece.offset == bytes.len() as u64 {
                bytes.extend_from_slice(&stored.data);
            }
        }
    }
    (binary, logs)
}

/// How one log's timestamps become sample-clock ns.
enum LogClock<'a> {
    Realtime(&'a ClockConversion),
    Tsc(&'a ClockConversion),
    /// FDR without a usable calibration: the buffer's CLOCK_MONOTONIC marker plus ticks at the
    /// header's frequency since the buffer's first timestamp.
    Markers {
        anchor_ns: u64,
        anchor_tsc: u64,
    },
}

impl LogClock<'_> {
    fn to_sample(&self, header: &Header, tsc: u64) -> Option<u64> {
        match self {
            Self::Realtime(c) => Some(c.realtime_to_sample(tsc)),
            Self::Tsc(c) => c.tsc_to_sample(tsc),
            Self::Markers {
                anchor_ns,
                anchor_tsc,
            } => {
                let delta = header.ticks_to_ns(tsc.abs_diff(*anchor_tsc));
                Some(if tsc >= *anchor_tsc {
                    anchor_ns + delta
                } else {
                    anchor_ns.saturating_sub(delta)
                })
            }
        }
    }
}

/// Picks the clock of one log and says what it did.
fn log_clock<'a>(
    log: &Log,
    clock: &'a ClockConversion,
    notes: &mut Vec<String>,
) -> Option<(LogClock<'a>, String)> {
    let header = &log.header;
    if log.is_emulated_clock() {
        return Some((
            LogClock::Realtime(clock),
            "emulated TSC (CLOCK_REALTIME ns), via the REALTIME-MONOTONIC offset".into(),
        ));
    }
    let fitted = clock.fitted_tsc_hz.or(clock.nominal_tsc_hz);
    if let Some(hz) = fitted {
        let stated = header.cycle_frequency as f64;
        if (stated - hz).abs() > hz * FREQUENCY_TOLERANCE {
            notes.push(format!(
                "XRay's header says the TSC runs at {:.0} MHz, jprof's calibration {:.0} MHz: \
                 jprof's is used",
                stated / 1e6,
                hz / 1e6
            ));
        }
    }
    if clock.has_tsc_conversion() {
        return Some((
            LogClock::Tsc(clock),
            format!("TSC via jprof's calibration ({:?})", clock.tsc_method),
        ));
    }
    let anchor = log
        .buffers
        .iter()
        .find_map(|b| Some((b.monotonic_ns?, b.first_tsc?)))?;
    notes.push("no TSC calibration in the recording: XRay times come from FDR's CLOCK_MONOTONIC markers (µs precision)".into());
    Some((
        LogClock::Markers {
            anchor_ns: anchor.0,
            anchor_tsc: anchor.1,
        },
        "TSC via FDR WalltimeMarker (CLOCK_MONOTONIC) anchors and the header's frequency".into(),
    ))
}

/// The innermost physical (not inlined, not kernel) frame of a stack: its index.
fn physical_leaf(profile: &Profile, stack: &[FrameId]) -> Option<usize> {
    stack.iter().rposition(|&id| {
        let kind = profile.frame(id).kind;
        !matches!(
            kind,
            FrameKind::Kernel | FrameKind::Inlined | FrameKind::Root
        )
    })
}

/// Whether `needles` appear in `names` in this order (not necessarily adjacent).
fn is_subsequence(needles: &[&str], names: &[&str]) -> bool {
    let mut it = names.iter();
    needles.iter().all(|n| it.any(|m| m == n))
}

/// Replays every log into per-thread timelines; returns the finished calls too.
struct Replayed {
    tree: CallTree,
    timelines: FxHashMap<u32, Timeline>,
    calls: Vec<(Call, u64)>,
}

fn replay_on_sample_clock(logs: &[(Log, LogClock<'_>)]) -> Replayed {
    let mut tree = CallTree::default();
    let mut timelines: FxHashMap<u32, Timeline> = FxHashMap::default();
    let mut stacks: FxHashMap<u32, ThreadStack> = FxHashMap::default();
    let mut calls = Vec::new();
    for (log, clock) in logs {
        for event in &log.events {
            let Some(time) = clock.to_sample(&log.header, event.tsc) else {
                continue;
            };
            let stack = stacks.entry(event.tid).or_default();
            stack.apply(Some(&mut tree), event, |call| {
                // On the sample clock, so a wrong header frequency does not skew durations.
                let entry = clock.to_sample(&log.header, call.entry).unwrap_or(time);
                calls.push((call, time.saturating_sub(entry)));
            });
            timelines
                .entry(event.tid)
                .or_default()
                .push((time, stack.top()));
        }
    }
    for timeline in timelines.values_mut() {
        // Each thread's events are in time order in the file; sorting only guards against
        // a clock step between buffers.
        timeline.sort_by_key(|&(t, _)| t);
    }
    Replayed {
        tree,
        timelines,
        calls,
    }
}

/// The node on `tid`'s XRay stack at `time` (sample clock), if the thread's log covers that
/// time (FDR logging, for one, starts and stops when the program says).
fn node_at(timelines: &FxHashMap<u32, Timeline>, tid: u32, time: u64) -> Option<u32> {
    let timeline = timelines.get(&tid)?;
    let (first, last) = (timeline.first()?.0, timeline.last()?.0);
    if time < first || time > last {
        return None;
    }
    let after = timeline.partition_point(|&(t, _)| t <= time);
    timeline.get(after.checked_sub(1)?).map(|&(_, node)| node)
}

/// Correlates the recording's XRay logs with `profile` (completing stacks in place); None when
/// the recording has no XRay log.
pub fn correlate(recording: &Recording, profile: &mut Profile) -> Option<LiveXray> {
    let (binary, raw_logs) = side_logs(recording);
    if raw_logs.is_empty() {
        return None;
    }
    let mut live = LiveXray::default();
    let map = binary
        .as_deref()
        .and_then(|path| instr_map(path, &mut live.notes));
    let module = binary
        .as_deref()
        .map(|p| p.rsplit('/').next().unwrap_or(p).to_string());
    let name = |id: u32| {
        map.as_ref()
            .map_or_else(|| format!("#{id}"), |m| m.name(id))
    };
    let default_clock = ClockConversion::default();
    let clock = recording.clock.as_ref().unwrap_or(&default_clock);
    let logs = logs_on_sample_clock(&raw_logs, clock, &mut live);
    let replayed = replay_on_sample_clock(&logs);
    live.threads = replayed.timelines.len();
    let instrumented: FxHashSet<String> = map
        .as_ref()
        .map(|m| m.functions.iter().filter_map(|f| f.name.clone()).collect())
        .unwrap_or_default();
    let mut samples = std::mem::take(&mut profile.samples);
    let (mut considered, mut agreed) = (0, 0);
    let mut callers = XrayCallers {
        frames: FxHashMap::default(),
        module,
        name: &name,
    };
    for sample in &mut samples {
        let Some(node) = node_at(&replayed.timelines, sample.tid, sample.time) else {
            continue;
        };
        let xray_top = replayed.tree.func(node).map(&name);
        if let Some(leaf) = physical_leaf(profile, &sample.stack) {
            let leaf_name = &profile.frame(sample.stack[leaf]).name;
            if instrumented.contains(leaf_name) {
                considered += 1;
                agreed += usize::from(xray_top.as_deref() == Some(leaf_name.as_str()));
            }
        }
        let Some(top) = xray_top else { continue };
        let path = replayed.tree.path(node);
        if let Some(stack) = callers.complete(profile, &sample.stack, &top, &path) {
            sample.stack = stack.into();
            live.completed += 1;
        }
    }
    profile.samples = samples;
    live.agreement = (agreed, considered);
    live.functions = function_rows(profile, &replayed.calls, &name);
    Some(live)
}

/// The instrumentation map of the binary at `path`; None (noted) when it cannot be read.
fn instr_map(path: &str, notes: &mut Vec<String>) -> Option<InstrMap> {
    // Named by the recording: opened by the foreign-file rules.
    crate::foreign_file::binary_bytes(std::path::Path::new(path))
        .map_err(|e| e.to_string())
        .and_then(|elf| xray::instr_map::parse(&elf).map_err(|e| e.to_string()))
        .map_err(|e| {
            notes.push(format!(
                "XRay binary {path}: {e}: functions are shown by id"
            ))
        })
        .ok()
}

/// Every log that parses, each with the clock that puts it on the sample clock; counts the
/// logs and events, says how the clocks were found, and notes what could not be used.
fn logs_on_sample_clock<'a>(
    raw_logs: &SideLogs,
    clock: &'a ClockConversion,
    live: &mut LiveXray,
) -> Vec<(Log, LogClock<'a>)> {
    let mut logs = Vec::new();
    let mut clocks = BTreeSet::new();
    for ((_, path), bytes) in raw_logs {
        match xray::parse(bytes) {
            Ok(log) => {
                if !log.problems.is_empty() {
                    live.notes.push(format!(
                        "XRay log {path}: {} damaged regions skipped",
                        log.problems.len()
                    ));
                }
                match log_clock(&log, clock, &mut live.notes) {
                    Some((c, what)) => {
                        clocks.insert(what);
                        live.events += log.events.len();
                        logs.push((log, c));
                    }
                    None => live.notes.push(format!(
                        "XRay log {path}: its TSC times cannot be put on the sample clock (no calibration)"
                    )),
                }
            }
            Err(e) => live.notes.push(format!("XRay log {path}: {e}")),
        }
    }
    live.logs = logs.len();
    live.clock = clocks.into_iter().collect::<Vec<_>>().join("; ");
    logs
}

/// Frames for XRay's callers, interned once per function id.
struct XrayCallers<'n, N: Fn(u32) -> String> {
    frames: FxHashMap<u32, FrameId>,
    /// The instrumented binary's file name.
    module: Option<String>,
    name: &'n N,
}

impl<N: Fn(u32) -> String> XrayCallers<'_, N> {
    /// Completion: when the innermost instrumented frame of `stack` is XRay's innermost
    /// function `top` (XRay's stack being `path`, outermost first) but the sampled callers
    /// above it lack some of XRay's callers, the stack with XRay's callers in their place.
    fn complete(
        &mut self,
        profile: &mut Profile,
        stack: &[FrameId],
        top: &str,
        path: &[u32],
    ) -> Option<Vec<FrameId>> {
        let at = stack
            .iter()
            .rposition(|&id| profile.frame(id).name == top)?;
        let callers: Vec<String> = path[..path.len() - 1]
            .iter()
            .map(|&f| (self.name)(f))
            .collect();
        let caller_refs: Vec<&str> = callers.iter().map(String::as_str).collect();
        let sampled: Vec<&str> = stack[..at]
            .iter()
            .map(|&id| profile.frame(id).name.as_str())
            .collect();
        if is_subsequence(&caller_refs, &sampled) {
            return None;
        }
        let roots = stack
            .iter()
            .take_while(|&&id| profile.frame(id).kind == FrameKind::Root)
            .count();
        let mut completed: Vec<FrameId> = stack[..roots.min(at)].to_vec();
        for &func in &path[..path.len() - 1] {
            completed.push(*self.frames.entry(func).or_insert_with(|| {
                profile.intern(Frame {
                    name: (self.name)(func),
                    kind: FrameKind::Native,
                    module: self.module.clone(),
                    file: None,
                    line: None,
                })
            }));
        }
        completed.extend_from_slice(&stack[at..]);
        Some(completed)
    }
}

/// Exact call figures per function, with the sampled shares of the same function.
fn function_rows(
    profile: &Profile,
    calls: &[(Call, u64)],
    name: &impl Fn(u32) -> String,
) -> Vec<FunctionRow> {
    let mut durations: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (call, ns) in calls {
        durations.entry(call.func).or_default().push(*ns);
    }
    let total_weight: u64 = profile.samples.iter().map(|s| s.weight).sum();
    let mut self_weight: FxHashMap<&str, u64> = FxHashMap::default();
    let mut any_weight: FxHashMap<&str, u64> = FxHashMap::default();
    for sample in &profile.samples {
        if let Some(leaf) = physical_leaf(profile, &sample.stack) {
            *self_weight
                .entry(&profile.frame(sample.stack[leaf]).name)
                .or_default() += sample.weight;
        }
        let names: FxHashSet<&str> = sample
            .stack
            .iter()
            .map(|&id| profile.frame(id).name.as_str())
            .collect();
        for n in names {
            *any_weight.entry(n).or_default() += sample.weight;
        }
    }
    let percent = |w: Option<&u64>| {
        let w = w.copied().unwrap_or(0);
        if total_weight == 0 {
            0.0
        } else {
            w as f64 * 100.0 / total_weight as f64
        }
    };
    let mut rows: Vec<FunctionRow> = durations
        .into_iter()
        .map(|(func, mut d)| {
            d.sort_unstable();
            let n = d.len();
            let at = |p: f64| d[((n as f64 * p) as usize).min(n - 1)];
            let fname = name(func);
            FunctionRow {
                calls: n,
                p50_ns: d[n / 2],
                p90_ns: at(0.9),
                p99_ns: at(0.99),
                max_ns: d[n - 1],
                self_percent: percent(self_weight.get(fname.as_str())),
                total_percent: percent(any_weight.get(fname.as_str())),
                name: fname,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.total_percent
            .total_cmp(&a.total_percent)
            .then(b.calls.cmp(&a.calls))
            .then(a.name.cmp(&b.name))
    });
    rows
}

impl LiveXray {
    /// `timeline agreement: NN.N% of N samples`.
    pub fn agreement_line(&self) -> String {
        let (agreed, considered) = self.agreement;
        let share = if considered == 0 {
            0.0
        } else {
            agreed as f64 * 100.0 / considered as f64
        };
        format!("timeline agreement: {share:.1}% of {considered} samples")
    }

    /// The XRay section of the text report.
    pub fn write(&self, mut out: impl Write) -> io::Result<()> {
        writeln!(out)?;
        writeln!(
            out,
            "XRay: {} log(s), {} events, {} threads; clock: {}",
            self.logs, self.events, self.threads, self.clock
        )?;
        for note in &self.notes {
            writeln!(out, "Note:      {note}")?;
        }
        writeln!(
            out,
            "  {:>7} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}  function",
            "self%", "total%", "calls", "p50 µs", "p90 µs", "p99 µs", "max µs"
        )?;
        let us = |ns: u64| ns as f64 / 1000.0;
        for r in &self.functions {
            writeln!(
                out,
                "  {:>6.2}% {:>6.2}% {:>10} {:>10.3} {:>10.3} {:>10.3} {:>10.3}  {}",
                r.self_percent,
                r.total_percent,
                r.calls,
                us(r.p50_ns),
                us(r.p90_ns),
                us(r.p99_ns),
                us(r.max_ns),
                r.name
            )?;
        }
        writeln!(
            out,
            "XRay completed {} sampled stacks whose unwinding stopped early",
            self.completed
        )?;
        writeln!(out, "{}", self.agreement_line())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_are_matched_in_order_not_adjacency() {
        assert!(is_subsequence(
            &["main", "outer"],
            &["root", "main", "x", "outer"]
        ));
        assert!(!is_subsequence(&["outer", "main"], &["main", "outer"]));
        assert!(is_subsequence(&[], &[]));
        assert!(!is_subsequence(&["main"], &[]));
    }

    #[test]
    fn stack_lookup_stays_inside_the_logged_time() {
        let mut timelines = FxHashMap::default();
        timelines.insert(7, vec![(100, 1), (200, 2), (300, 0)]);
        assert_eq!(node_at(&timelines, 7, 99), None, "before the log");
        assert_eq!(node_at(&timelines, 7, 100), Some(1));
        assert_eq!(node_at(&timelines, 7, 250), Some(2));
        assert_eq!(node_at(&timelines, 7, 300), Some(0));
        assert_eq!(node_at(&timelines, 7, 301), None, "after the log");
        assert_eq!(node_at(&timelines, 8, 150), None, "thread not logged");
    }
}
