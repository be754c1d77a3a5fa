//! Shared by the parser benches: the input file (the first argument that is not a flag, else a
//! fixture) and the timing loop (passes for 400 ms, best of 5 rounds, so a burst of steal time
//! on a shared machine does not decide the number).

use std::time::{Duration, Instant};

/// The file to parse and its bytes; exits with status 2 when it cannot be read.
pub fn input(bench: &str, default: &str) -> (String, Vec<u8>) {
    // `cargo bench` passes `--bench`; anything else is the file.
    let path = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .unwrap_or_else(|| default.to_string());
    match std::fs::read(&path) {
        Ok(bytes) => (path, bytes),
        Err(e) => {
            eprintln!("{bench}: cannot read {path}: {e}");
            std::process::exit(2);
        }
    }
}

/// Seconds per pass of the best round, and the number of passes in all rounds.
pub fn best_of_5(mut pass: impl FnMut()) -> (f64, u64) {
    let mut best = f64::MAX;
    let mut passes_total = 0u64;
    for _ in 0..5 {
        let started = Instant::now();
        let mut passes = 0u64;
        while started.elapsed() < Duration::from_millis(400) {
            pass();
            passes += 1;
        }
        best = best.min(started.elapsed().as_secs_f64() / passes as f64);
        passes_total += passes;
    }
    (best, passes_total)
}
