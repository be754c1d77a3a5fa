//! Readiness for live tests: wait for the state a test needs instead of sleeping.
// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use jprof::format::perf::RecordKind;
use jprof::recording::Recording;

/// Polls `ready` every 10 ms until it gives a value; panics naming `what` after `limit`.
pub fn wait_for<T>(what: &str, limit: Duration, mut ready: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = ready() {
            return value;
        }
        assert!(start.elapsed() < limit, "{what}: not after {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The children of `pid` (of all its threads).
pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Every descendant of `pid`, children first.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut all = children(pid);
    let mut at = 0;
    while at < all.len() {
        let more = children(all[at]);
        all.extend(more);
        at += 1;
    }
    all
}

/// Waits until a child of `parent` (jprof) runs `comm`; returns its pid. jprof releases the
/// target only after its events, output file and signal handlers are set up, so from then on
/// a signal to jprof is handled as a stop request. Panics after 20 s.
pub fn wait_until_target_runs(parent: u32, comm: &str) -> u32 {
    wait_for(
        &format!("a child of {parent} running {comm}"),
        Duration::from_secs(20),
        || {
            children(parent).into_iter().find(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
            })
        },
    )
}

/// Whether `pid` ignores signal `sig` (SigIgn in /proc/PID/status), e.g. after a shell's
/// `trap '' INT`.
pub fn ignores(pid: u32, sig: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let mask = s.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
            u64::from_str_radix(mask.trim(), 16).ok()
        })
        .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
}

/// Nanoseconds `pid`'s main thread has run on a CPU (/proc/PID/schedstat); 0 once it is gone.
pub fn cpu_ns(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The records of kind `kind` in the partial recording a running `jprof record -o DATA`
/// writes (0 while it has none or is not readable yet).
pub fn records_in_partial(data: &Path, kind: RecordKind) -> usize {
    let partials = jprof::foreign_file::leftover_partials(data);
    let Some(partial) = partials.first() else {
        return 0;
    };
    Recording::open(partial).map_or(0, |rec| {
        rec.perf_records()
            .filter_map(Result::ok)
            .filter(|r| r.kind == kind)
            .count()
    })
}
