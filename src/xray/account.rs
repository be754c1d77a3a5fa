//! The per-function latency table of `jprof report --format text` for XRay logs, computed like
//! `llvm-xray account`: every finished call's inclusive duration, then count, min, median
//! (element n/2 of the sorted durations), 90th and 99th percentile (element ⌊n·p⌋), max and sum,
//! in seconds. Works on unsorted multi-threaded logs: each thread's stack is replayed apart.

use std::io::{self, Write};

use rustc_hash::FxHashMap;

use super::replay::{Call, ThreadStack, Threads};
use crate::format::xray::Event;

/// One function's row. Durations are seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub func_id: u32,
    pub name: String,
    pub count: usize,
    pub min: f64,
    pub median: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub sum: f64,
}

/// Function ids below this index a vector; larger (damaged) ids go to a map, so a stray id
/// cannot make the vector huge.
const DENSE_IDS: u32 = 1 << 16;

/// Every finished call's inclusive duration (ticks) per function, from a replay of each
/// thread's stack that does not intern call paths: the fast path of `--format text`. Events
/// are added one at a time, so a log can be accounted while it is decoded.
#[derive(Debug, Default)]
pub struct Accounting {
    /// Final stacks with their counters (filled by [`Accounting::finish`]).
    pub threads: Threads,
    stacks: Vec<(u32, u32, ThreadStack)>,
    index: FxHashMap<u32, usize>,
    /// Records come in runs of one thread: the last one's tid and slot.
    last: Option<(u32, usize)>,
    dense: Vec<Vec<u64>>,
    sparse: FxHashMap<u32, Vec<u64>>,
    /// Finished calls that passed the filter.
    pub calls: usize,
}

impl Accounting {
    /// Replays `events` (file order); `keep(tid, call)` selects the calls that are counted.
    pub fn run(events: &[Event], keep: impl Fn(u32, &Call) -> bool) -> Self {
        let mut acc = Self::default();
        for event in events {
            acc.add(event, &keep);
        }
        acc.finish()
    }

    /// Applies one event to its thread's stack.
    pub fn add(&mut self, event: &Event, keep: impl Fn(u32, &Call) -> bool) {
        let slot = match self.last {
            Some((tid, slot)) if tid == event.tid => slot,
            _ => {
                let stacks = &mut self.stacks;
                let slot = *self.index.entry(event.tid).or_insert_with(|| {
                    stacks.push((event.tid, event.pid, ThreadStack::default()));
                    stacks.len() - 1
                });
                self.last = Some((event.tid, slot));
                slot
            }
        };
        let (dense, sparse, calls) = (&mut self.dense, &mut self.sparse, &mut self.calls);
        let Some((_, _, stack)) = self.stacks.get_mut(slot) else {
            return;
        };
        stack.apply(None, event, |call| {
            if !keep(event.tid, &call) {
                return;
            }
            *calls += 1;
            let ticks = call.inclusive_ticks();
            if call.func < DENSE_IDS {
                let i = call.func as usize;
                if dense.len() <= i {
                    dense.resize_with(i + 1, Vec::new);
                }
                dense[i].push(ticks);
            } else {
                sparse.entry(call.func).or_default().push(ticks);
            }
        });
    }

    /// Moves the per-thread stacks into [`Accounting::threads`].
    pub fn finish(mut self) -> Self {
        self.threads = std::mem::take(&mut self.stacks)
            .into_iter()
            .map(|(tid, pid, stack)| (tid, (pid, stack)))
            .collect();
        self
    }

    /// Rows by function id; `frequency` is the log's ticks per second (0: the durations are
    /// left in ticks, as llvm-xray does).
    pub fn rows(self, frequency: u64, name: impl Fn(u32) -> String) -> Vec<Row> {
        let scale = if frequency == 0 {
            1.0
        } else {
            frequency as f64
        };
        let mut by_id: Vec<(u32, Vec<u64>)> = self
            .dense
            .into_iter()
            .enumerate()
            .map(|(i, d)| (i as u32, d))
            .chain(self.sparse)
            .filter(|(_, d)| !d.is_empty())
            .collect();
        by_id.sort_unstable_by_key(|(id, _)| *id);
        by_id
            .into_iter()
            .map(|(func_id, mut d)| {
                let n = d.len();
                // Selection, not a full sort: the same elements llvm-xray's nth_element picks.
                let mut nth = |k: usize| *d.select_nth_unstable(k.min(n - 1)).1 as f64 / scale;
                let (min, max) = (nth(0), nth(n - 1));
                let median = nth(n / 2);
                let p90 = nth((n as f64 * 0.9).floor() as usize);
                let p99 = nth((n as f64 * 0.99).floor() as usize);
                Row {
                    func_id,
                    name: name(func_id),
                    count: n,
                    min,
                    median,
                    p90,
                    p99,
                    max,
                    sum: d.iter().fold(0.0, |s, &v| s + v as f64) / scale,
                }
            })
            .collect()
    }
}

/// The table in llvm-xray's text layout (seconds with 6 decimals).
pub fn write(rows: &[Row], mut out: impl Write) -> io::Result<()> {
    writeln!(out, "Functions with latencies: {}", rows.len())?;
    writeln!(
        out,
        "{:>9} {:>10} [{:>9}, {:>9}, {:>9}, {:>9}, {:>9}] {:>9}  function",
        "funcid", "count", "min", "med", "90p", "99p", "max", "sum"
    )?;
    for r in rows {
        writeln!(
            out,
            "{:>9} {:>10} [{:>9.6}, {:>9.6}, {:>9.6}, {:>9.6}, {:>9.6}] {:>9.6}  {}",
            r.func_id, r.count, r.min, r.median, r.p90, r.p99, r.max, r.sum, r.name
        )?;
    }
    Ok(())
}
