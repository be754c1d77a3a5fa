//! The perf map parser reads every line of the maps real runtimes wrote (HotSpot, V8, Mono).

use jprof::format::perf_map;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared");

#[test]
fn real_maps_parse_completely() {
    for path in [
        "java/perf-13573.map",
        "node/perf-13228.map",
        "mono/perf-13154.map",
    ] {
        let file = std::fs::read(format!("{FIXTURES}/{path}")).expect("fixture");
        let lines = file
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        let batch = perf_map::parse(&file, 0);
        assert!(
            batch.bad_lines.is_empty(),
            "{path}: {:?}",
            batch.bad_lines.first()
        );
        assert_eq!(batch.entries.len(), lines, "{path}");
        assert_eq!(batch.resume_at, file.len(), "{path}");
        assert!(
            batch
                .entries
                .iter()
                .all(|e| e.size > 0 && !e.name.is_empty()),
            "{path}"
        );
    }
}

#[test]
fn garbage_never_panics_and_offsets_stay_in_bounds() {
    let real = std::fs::read(format!("{FIXTURES}/node/perf-13228.map")).expect("fixture");
    // A fixed seed: a failure reproduces.
    let mut rng = fastrand::Rng::with_seed(1);
    for round in 0..500 {
        let len = rng.usize(1..=4096.min(real.len()));
        let mut f = real[..len].to_vec();
        for _ in 0..(round % 24 + 1) {
            let i = rng.usize(..f.len());
            // Bias the damage towards what a line is made of: digits, separators, newlines.
            f[i] = match rng.u8(..5) {
                0 => b'\n',
                1 => b' ',
                2 => b"0123456789abcdefxX"[rng.usize(..18)],
                _ => rng.u8(..),
            };
        }
        let from = rng.usize(..f.len() + 2);
        let batch = perf_map::parse(&f, from);
        assert!(batch.resume_at <= f.len());
        assert!(batch.resume_at >= from.min(f.len()));
        for e in &batch.entries {
            assert!(e.offset >= from.min(f.len()) && e.offset < f.len());
        }
        for bad in &batch.bad_lines {
            assert!(bad.offset < f.len());
        }
        // Everything before `resume_at` ends in a newline: nothing half-written was consumed.
        if batch.resume_at > from.min(f.len()) {
            assert_eq!(f[batch.resume_at - 1], b'\n');
        }
    }
}
