//! The per-function latency table of `jprof report --format text` for XRay logs, computed like
//! `llvm-xray account`: every finished call's inclusive duration, then count, min, median
//! (element n/2 of the sorted durations), 90th and 99th percentile (element ⌊n·p⌋), max and sum,
//! in seconds. Works on unsorted multi-threaded logs: each thread's stack is replayed apart.

use std::io::{self, Write};

use rustc_hash::FxHashMap;

use super::replay::{Call, ThreadStack, Threads};
use crate::format::xray::Event;

/// One function's row. Durations are seconds (ticks when the log gives no frequency).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// XRay function id.
    pub func_id: u32,
    /// The function's name, as the `name` callback of [`Accounting::rows`] gave it.
    pub name: String,
    /// Finished calls.
    pub count: usize,
    /// Shortest call's duration.
    pub min: f64,
    /// Element n/2 of the sorted durations.
    pub median: f64,
    /// Element ⌊0.9·n⌋ of the sorted durations.
    pub p90: f64,
    /// Element ⌊0.99·n⌋ of the sorted durations.
    pub p99: f64,
    /// Longest call's duration.
    pub max: f64,
    /// Total duration of all calls.
    pub sum: f64,
}

/// Function ids below this index a vector; larger (damaged) ids go to a map, so a stray id
/// cannot make the vector huge.
const DENSE_IDS: u32 = 1 << 16;

/// Direct-mapped cache of thread slots, indexed by the tid's low bits. Time-sorted logs switch
/// thread at almost every record, so the lookup must be an array index, not a hash probe.
const SLOT_CACHE: usize = 32;

/// Every finished call's inclusive duration (ticks) per function, from a replay of each
/// thread's stack that does not intern call paths: the fast path of `--format text`. Events
/// are added one at a time, so a log can be accounted while it is decoded.
#[derive(Debug, Default)]
pub struct Accounting {
    /// Final stacks with their counters (filled by [`Accounting::finish`]).
    pub threads: Threads,
    stacks: Vec<(u32, u32, ThreadStack)>,
    index: FxHashMap<u32, usize>,
    /// `tid % SLOT_CACHE` → slot + 1 in `stacks` (0: empty), checked against the slot's tid.
    cached: [u32; SLOT_CACHE],
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
        let slot = self.slot(event.tid, event.pid);
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

    /// The index of `tid`'s stack in `stacks`, made on its first event.
    #[inline]
    fn slot(&mut self, tid: u32, pid: u32) -> usize {
        let line = tid as usize % SLOT_CACHE;
        let cached = self.cached[line] as usize;
        if cached != 0 && self.stacks.get(cached - 1).is_some_and(|s| s.0 == tid) {
            return cached - 1;
        }
        let stacks = &mut self.stacks;
        let slot = *self.index.entry(tid).or_insert_with(|| {
            stacks.push((tid, pid, ThreadStack::default()));
            stacks.len() - 1
        });
        self.cached[line] = u32::try_from(slot + 1).unwrap_or(0);
        slot
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
                let order = OrderStats::of(&mut d);
                let secs = |ticks: u64| ticks as f64 / scale;
                Row {
                    func_id,
                    name: name(func_id),
                    count: d.len(),
                    min: secs(order.min),
                    median: secs(order.median),
                    p90: secs(order.p90),
                    p99: secs(order.p99),
                    max: secs(order.max),
                    // Exact integer sum, rounded once.
                    sum: d.iter().map(|&v| u128::from(v)).sum::<u128>() as f64 / scale,
                }
            })
            .collect()
    }
}

/// The order statistics of one function's durations: elements 0, n/2, ⌊0.9n⌋, ⌊0.99n⌋ and
/// n−1 of the sorted list (llvm-xray's `nth_element` picks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OrderStats {
    min: u64,
    median: u64,
    p90: u64,
    p99: u64,
    max: u64,
}

impl OrderStats {
    /// Reorders `d` (not empty). Each selection leaves everything above its element to its
    /// right, so the next, higher one only searches that remainder, and min and max are scans
    /// of the two ends.
    fn of(d: &mut [u64]) -> Self {
        let n = d.len();
        let ranks = [
            n / 2,
            (n as f64 * 0.9).floor() as usize,
            (n as f64 * 0.99).floor() as usize,
        ];
        let mut picked = [0; 3];
        let mut from = 0;
        for (pick, rank) in picked.iter_mut().zip(ranks) {
            let rank = rank.clamp(from, n - 1);
            let (_, value, _) = d[from..].select_nth_unstable(rank - from);
            *pick = *value;
            from = rank;
        }
        let [median, p90, p99] = picked;
        Self {
            min: d[..ranks[0].min(n - 1)]
                .iter()
                .copied()
                .min()
                .unwrap_or(median),
            median,
            p90,
            p99,
            max: d[from..].iter().copied().max().unwrap_or(p99),
        }
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

#[cfg(test)]
mod tests {
    use super::OrderStats;
    use proptest::collection::vec;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The nested selections pick the same elements as indexing the sorted list (values
        /// from a small range, so ties are common).
        #[test]
        fn order_stats_match_the_sorted_list(mut d in vec(0u64..50, 1..300)) {
            let n = d.len();
            let mut sorted = d.clone();
            sorted.sort_unstable();
            let at = |p: f64| sorted[((n as f64 * p).floor() as usize).min(n - 1)];
            let expected = OrderStats {
                min: sorted[0],
                median: sorted[n / 2],
                p90: at(0.9),
                p99: at(0.99),
                max: sorted[n - 1],
            };
            prop_assert_eq!(OrderStats::of(&mut d), expected);
        }
    }
}
