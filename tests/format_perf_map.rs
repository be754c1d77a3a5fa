//! The perf map parser reads every line of the maps real runtimes wrote (HotSpot, V8, Mono).

use jprof::format::perf_map;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/fixtures");

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
