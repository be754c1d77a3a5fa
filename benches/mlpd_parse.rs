//! Throughput of the .mlpd decoder (`format::mlpd::decode_all`, every event decoded and handed
//! to a visitor) over a real file, in GB/s: `cargo bench --bench mlpd_parse [-- FILE]` (default:
//! the shared calls fixture). Run by `cargo xtask bench`; the goal is at least 1 GB/s.

mod support;

use std::hint::black_box;

use jprof::format::mlpd;

fn main() {
    let (path, bytes) = support::input(
        "mlpd_parse",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/shared/mono/shapes-calls.mlpd"
        ),
    );
    let decode = |bytes: &[u8]| {
        let mut events = 0u64;
        let decoder =
            mlpd::decode_all(bytes, &mut |_: &mlpd::BufferHeader, e: &mlpd::Event<'_>| {
                black_box(e);
                events += 1;
            });
        (events, decoder.map(|d| d.problem_count()))
    };
    let (events, problems) = decode(&bytes);
    if let Err(e) = problems {
        eprintln!("mlpd_parse: {path}: {e}");
        std::process::exit(2);
    }
    let (best, _) = support::best_of_5(|| {
        let _ = black_box(decode(black_box(&bytes)));
    });
    println!(
        "mlpd decode: {:.2} GB/s ({:.1} MB, {events} events, {:.2} ms per pass, best of 5 rounds)",
        bytes.len() as f64 / best / 1e9,
        bytes.len() as f64 / 1e6,
        best * 1e3
    );
}
