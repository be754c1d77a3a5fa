//! The per-function latency table of `jprof report --format text` for XRay logs, computed like
//! `llvm-xray account`: every finished call's inclusive duration, then count, min, median
//! (element n/2 of the sorted durations), 90th and 99th percentile (element ⌊n·p⌋), max and sum,
//! in seconds. Works on unsorted multi-threaded logs: each thread's stack is replayed apart.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::replay::Call;

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

/// Rows by function id from finished calls; `frequency` is the log's ticks per second (0: the
/// durations are left in ticks, as llvm-xray does).
pub fn rows<'a>(
    calls: impl Iterator<Item = &'a Call>,
    frequency: u64,
    name: impl Fn(u32) -> String,
) -> Vec<Row> {
    let mut durations: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for call in calls {
        durations
            .entry(call.func)
            .or_default()
            .push(call.inclusive_ticks());
    }
    let scale = if frequency == 0 {
        1.0
    } else {
        frequency as f64
    };
    durations
        .into_iter()
        .map(|(func_id, mut d)| {
            d.sort_unstable();
            let n = d.len();
            let at = |p: f64| d[((n as f64 * p).floor() as usize).min(n - 1)] as f64 / scale;
            Row {
                func_id,
                name: name(func_id),
                count: n,
                min: d[0] as f64 / scale,
                median: d[n / 2] as f64 / scale,
                p90: at(0.9),
                p99: at(0.99),
                max: d[n - 1] as f64 / scale,
                sum: d.iter().fold(0.0, |s, &v| s + v as f64) / scale,
            }
        })
        .collect()
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
