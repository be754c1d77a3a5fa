//! Throughput of the jitdump parser (`format::jitdump::parse_records`) over a real file, in
//! GB/s: `cargo bench --bench jitdump_parse [-- FILE]` (default: the Node fixture). Run by
//! `cargo xtask bench`; the goal is at least 1 GB/s.

use std::hint::black_box;
use std::time::{Duration, Instant};

use jprof::format::jitdump;

fn main() {
    // `cargo bench` passes `--bench`; anything else is the file.
    let path = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .unwrap_or_else(|| {
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../shared/fixtures/node/jit-13228.dump"
            )
            .to_string()
        });
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("jitdump_parse: cannot read {path}: {e}");
            std::process::exit(2);
        }
    };
    let header = match jitdump::parse_header(&bytes) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("jitdump_parse: {path}: {e}");
            std::process::exit(2);
        }
    };
    let records = jitdump::parse_records(&bytes, &header, 0).records.len();
    // Warm up, then passes for at least two seconds; report the best of 5 rounds so a burst of
    // steal time on a shared machine does not decide the number.
    let mut best = f64::MAX;
    let mut passes_total = 0u64;
    for _ in 0..5 {
        let started = Instant::now();
        let mut passes = 0u64;
        while started.elapsed() < Duration::from_millis(400) {
            let batch = jitdump::parse_records(black_box(&bytes), &header, 0);
            black_box(&batch);
            passes += 1;
        }
        let per_pass = started.elapsed().as_secs_f64() / passes as f64;
        best = best.min(per_pass);
        passes_total += passes;
    }
    let gbps = bytes.len() as f64 / best / 1e9;
    println!(
        "jitdump parse_records: {:.2} GB/s ({:.1} MB, {records} records, {:.2} ms per pass, best of 5 rounds, {passes_total} passes)",
        gbps,
        bytes.len() as f64 / 1e6,
        best * 1e3
    );
}
