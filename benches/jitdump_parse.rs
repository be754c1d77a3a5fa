//! Throughput of the jitdump parser (`format::jitdump::parse_records`) over a real file, in
//! GB/s: `cargo bench --bench jitdump_parse [-- FILE]` (default: the Node fixture). Run by
//! `cargo xtask bench`; the goal is at least 1 GB/s.

mod support;

use std::hint::black_box;

use jprof::format::jitdump;

fn main() {
    let (path, bytes) = support::input(
        "jitdump_parse",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/shared/node/jit-13228.dump"
        ),
    );
    let header = match jitdump::parse_header(&bytes) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("jitdump_parse: {path}: {e}");
            std::process::exit(2);
        }
    };
    let records = jitdump::parse_records(&bytes, &header, 0).records.len();
    let (best, passes_total) = support::best_of_5(|| {
        black_box(jitdump::parse_records(black_box(&bytes), &header, 0));
    });
    let gbps = bytes.len() as f64 / best / 1e9;
    println!(
        "jitdump parse_records: {:.2} GB/s ({:.1} MB, {records} records, {:.2} ms per pass, best of 5 rounds, {passes_total} passes)",
        gbps,
        bytes.len() as f64 / 1e6,
        best * 1e3
    );
}
