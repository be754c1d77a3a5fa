//! The perf map parser reads every line of the maps real runtimes wrote (HotSpot, V8, Mono).

use std::sync::LazyLock;

use jprof::format::perf_map;
use proptest::collection::vec;
use proptest::prelude::*;

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

/// The node fixture, read once for all the cases.
static NODE_MAP: LazyLock<Vec<u8>> =
    LazyLock::new(|| std::fs::read(format!("{FIXTURES}/node/perf-13228.map")).expect("fixture"));

/// One map line as some runtime writes it (hex with or without `0x`, either case, space or tab
/// before the name, `\n` or `\r\n`), and the (start, size, name) it says. Names have no `_`,
/// so none reads as an OpenJ9 name with a tier.
fn map_line() -> impl Strategy<Value = (String, (u64, u64, String))> {
    let name = "[A-Za-z0-9.:$<>()/~-]([A-Za-z0-9.:$<>()/~ -]{0,30}[A-Za-z0-9)])?";
    (
        any::<u64>(),
        any::<u64>(),
        name,
        0..4u8,
        prop::bool::ANY,
        prop::bool::ANY,
    )
        .prop_map(|(start, size, name, style, tab, crlf)| {
            let numbers = match style {
                0 => format!("0x{start:016x} 0x{size:016x}"),
                1 => format!("{start:X} {size:X}"),
                2 => format!("{start:x} {size:x}"),
                _ => format!("0X{start:x} {size:x}"),
            };
            let line = format!(
                "{numbers}{}{name}{}",
                if tab { "\t" } else { " " },
                if crlf { "\r\n" } else { "\n" }
            );
            (line, (start, size, name))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Written lines (and blank ones between them) read back with their offsets; read as the
    /// runtime appends (cut anywhere, then resumed where the first pass stopped) they read the
    /// same, each once, and a pass stops only after a newline.
    #[test]
    fn written_lines_read_back_whole_and_in_two_passes(
        lines in vec((map_line(), prop::bool::weighted(0.2)), 0..12),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut file = String::new();
        let mut written = Vec::new();
        for ((line, (start, size, name)), blank_before) in &lines {
            if *blank_before {
                file.push('\n');
            }
            written.push((*start, *size, name.clone(), file.len()));
            file.push_str(line);
        }
        let file = file.into_bytes();
        let read = |b: &perf_map::MapBatch| -> Vec<(u64, u64, String, usize)> {
            b.entries.iter().map(|e| (e.start, e.size, e.name.clone(), e.offset)).collect()
        };
        let whole = perf_map::parse(&file, 0);
        prop_assert!(whole.bad_lines.is_empty(), "{:?}", whole.bad_lines);
        prop_assert_eq!(whole.resume_at, file.len());
        prop_assert_eq!(read(&whole), written);

        let cut = cut.index(file.len() + 1);
        let first = perf_map::parse(&file[..cut], 0);
        prop_assert!(first.resume_at <= cut);
        prop_assert!(first.resume_at == 0 || file[first.resume_at - 1] == b'\n');
        let rest = perf_map::parse(&file, first.resume_at);
        let mut both = read(&first);
        both.extend(read(&rest));
        prop_assert_eq!(both, read(&whole));
    }

    /// A real map cut short and damaged with what lines are made of (digits, separators,
    /// newlines) and anything else, read from any offset: never a panic, entries and errors
    /// inside the bytes, and nothing half-written consumed.
    #[test]
    fn garbage_never_panics_and_offsets_stay_in_bounds(
        len in 1usize..=4096,
        damage in vec((any::<prop::sample::Index>(), 0u8..5, any::<u8>()), 1..24),
        from in any::<prop::sample::Index>(),
    ) {
        let real = &*NODE_MAP;
        let mut f = real[..len.min(real.len())].to_vec();
        for (at, what, byte) in damage {
            let i = at.index(f.len());
            f[i] = match what {
                0 => b'\n',
                1 => b' ',
                2 => b"0123456789abcdefxX"[byte as usize % 18],
                _ => byte,
            };
        }
        let from = from.index(f.len() + 2);
        let batch = perf_map::parse(&f, from);
        let start = from.min(f.len());
        prop_assert!(batch.resume_at <= f.len() && batch.resume_at >= start);
        for e in &batch.entries {
            prop_assert!(e.offset >= start && e.offset < f.len());
        }
        for bad in &batch.bad_lines {
            prop_assert!(bad.offset < f.len());
        }
        // Everything before `resume_at` ends in a newline: nothing half-written was consumed.
        if batch.resume_at > start {
            prop_assert_eq!(f[batch.resume_at - 1], b'\n');
        }
    }
}
