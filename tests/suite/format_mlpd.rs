//! The .mlpd decoder: data-format-1 files from the 2010 description round-trip through a
//! test-side writer; real Mono 6.8 files (the shared calls and sample fixtures) decode without a problem and with the counts their headers and
//! mprof-report state; damaged and truncated files never panic and lose nothing before the damage.

use crate::mlpd_support;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use jprof::format::mlpd::{self, BufferHeader, Event, EventKind, Metadata, MetadataPhase};
use mlpd_support::V1Writer;
use proptest::collection::vec;
use proptest::prelude::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared");

fn calls_fixture() -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/mono/shapes-calls.mlpd"))
        .expect("fixture present (tests/fixtures/shared)")
}

fn sample_fixture() -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/mono/shapes-sample.mlpd"))
        .expect("fixture present (tests/fixtures/shared)")
}

/// Every event as `time kind` text, plus the decoder.
fn decode(data: &[u8]) -> (Vec<String>, mlpd::Decoder) {
    let mut out = Vec::new();
    let decoder = mlpd::decode_all(data, &mut |_: &BufferHeader, e: &Event<'_>| {
        out.push(format!("{} {:?}", e.time, e.kind))
    })
    .expect("valid header");
    (out, decoder)
}

fn s(text: &'static str) -> Cow<'static, str> {
    Cow::Borrowed(text)
}

/// One of every event kind data format 1 has, with the times they must decode with.
fn format1_events() -> Vec<(u64, EventKind<'static>)> {
    const BT: &[u64] = &[0x7f00_0000_1000, 0x7f00_0000_0ff0, 0x7eff_ffff_0000];
    vec![
        (
            1_000_100,
            EventKind::Metadata {
                phase: MetadataPhase::Described,
                pointer: 0x7f00_0000_2000,
                what: Metadata::Image {
                    name: s("/app/App.exe"),
                    mvid: None,
                },
            },
        ),
        (
            1_000_150,
            EventKind::Metadata {
                phase: MetadataPhase::EndLoad,
                pointer: 0x7f00_0000_3000,
                what: Metadata::Class {
                    image: 0x7f00_0000_2000,
                    name: s("App.Shape"),
                },
            },
        ),
        (
            1_000_200,
            EventKind::Jit {
                method: 0x5555_0040,
                code: 0x7f00_4000_0000,
                size: 397,
                name: s("App.Shape:Area ()"),
            },
        ),
        (
            1_000_300,
            EventKind::MethodEnter {
                method: 0x5555_0040,
            },
        ),
        (
            1_000_350,
            EventKind::MethodEnter {
                method: 0x5555_0010,
            },
        ),
        (
            1_000_400,
            EventKind::MethodExcLeave {
                method: 0x5555_0010,
            },
        ),
        (
            1_000_450,
            EventKind::MethodLeave {
                method: 0x5555_0040,
            },
        ),
        (
            1_000_500,
            EventKind::Alloc {
                class: 0x7f00_0000_3000,
                object: 0x7f12_3456_7000 << 3,
                size: 48,
                backtrace: None,
            },
        ),
        (
            1_000_600,
            EventKind::Alloc {
                class: 0x7f00_0000_3000,
                object: (0x7f12_3456_7000 - 5) << 3,
                size: 4096,
                backtrace: Some(BT),
            },
        ),
        (
            1_000_700,
            EventKind::GcEvent {
                event: 0,
                generation: 1,
            },
        ),
        (1_000_710, EventKind::GcResize { heap_size: 1 << 24 }),
        (
            1_000_720,
            EventKind::GcMove {
                objects: vec![0x7f12_3456_7000 << 3, 0x7f12_3456_8000 << 3],
            },
        ),
        (
            1_000_800,
            EventKind::Throw {
                object: 0x7f12_3456_7010 << 3,
                backtrace: Some(BT),
            },
        ),
        (
            1_000_810,
            EventKind::Throw {
                object: 0x7f12_3456_7010 << 3,
                backtrace: None,
            },
        ),
        (
            1_000_820,
            EventKind::Clause {
                clause_type: 2,
                index: 1,
                method: 0x5555_0040,
                exception: None,
            },
        ),
        (
            1_000_900,
            EventKind::Monitor {
                event: 1,
                object: 0x7f12_3456_7020 << 3,
                backtrace: Some(BT),
            },
        ),
        (
            1_000_950,
            EventKind::Monitor {
                event: 2,
                object: 0x7f12_3456_7020 << 3,
                backtrace: None,
            },
        ),
        (1_001_000, EventKind::HeapStart),
        (
            1_001_000,
            EventKind::HeapObject {
                object: 0x7f12_3456_7000 << 3,
                class: 0x7f00_0000_3000,
                size: 48,
                generation: None,
                references: vec![
                    u64::MAX,
                    0x7f12_3456_7020 << 3,
                    u64::MAX,
                    0x7f12_3456_6000 << 3,
                ],
            },
        ),
        (1_001_100, EventKind::HeapEnd),
    ]
}

fn write_format1(events: &[(u64, EventKind<'static>)], threads: &[u64]) -> Vec<u8> {
    let mut w = V1Writer::new();
    for (i, &thread) in threads.iter().enumerate() {
        w.begin_buffer(
            1_000_000 + i as u64,
            0x7f00_0000_0000,
            0x7f12_3456_7000,
            thread,
            0x5555_0000,
        );
        for (t, kind) in events {
            w.event(*t, kind);
        }
        w.end_buffer();
    }
    w.finish()
}

#[test]
fn format1_round_trips_every_event_kind() {
    let events = format1_events();
    let data = write_format1(&events, &[0x7f00_1111_0000, 0x7f00_2222_0000]);
    let mut seen = Vec::new();
    let decoder = mlpd::decode_all(&data, &mut |b: &BufferHeader, e: &Event<'_>| {
        seen.push((b.thread_id, format!("{} {:?}", e.time, e.kind)))
    })
    .expect("format 1 header");
    assert_eq!(decoder.problems(), &[]);
    assert_eq!(decoder.buffers(), 2);
    let expected: Vec<String> = events.iter().map(|(t, k)| format!("{t} {k:?}")).collect();
    for (i, thread) in [0x7f00_1111_0000u64, 0x7f00_2222_0000]
        .into_iter()
        .enumerate()
    {
        let got: Vec<String> = seen
            .iter()
            .filter(|(t, _)| *t == thread)
            .map(|(_, e)| e.clone())
            .collect();
        assert_eq!(got, expected, "buffer {i}");
    }
    let header = decoder.header().expect("header");
    assert_eq!(
        (header.major, header.minor, header.data_version, header.len),
        (0, 1, 1, 32)
    );
    assert_eq!(header.sysid, Some(0));
    assert_eq!(header.startup_ns, None);
}

#[test]
fn a_bad_value_skips_the_rest_of_its_buffer_only() {
    let mut w = V1Writer::new();
    w.begin_buffer(10, 0x1000, 0x200, 1, 0x5000);
    w.event(11, &EventKind::MethodEnter { method: 0x5008 });
    w.raw(&[0x0f, 1, 2, 3]); // type 15 does not exist
    w.end_buffer();
    w.begin_buffer(20, 0x1000, 0x200, 2, 0x5000);
    w.event(21, &EventKind::MethodLeave { method: 0x5008 });
    w.end_buffer();
    let data = w.finish();
    let (events, decoder) = decode(&data);
    assert_eq!(
        events,
        vec![
            "11 MethodEnter { method: 20488 }".to_string(),
            "21 MethodLeave { method: 20488 }".to_string()
        ]
    );
    assert_eq!(decoder.problem_count(), 1);
    let problem = &decoder.problems()[0];
    // Header 32 + buffer header 48 + the enter event (3 bytes).
    assert_eq!(problem.error.offset, 32 + 48 + 3, "{problem:?}");
    assert_eq!(problem.skipped_bytes, 4);
    assert!(problem.error.expected.contains("0x0f"), "{problem:?}");
}

#[test]
fn calls_fixture_decodes_with_the_header_and_counts_mono_wrote() {
    let data = calls_fixture();
    let mut kinds: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut threads = BTreeSet::new();
    let mut names = BTreeSet::new();
    let mut subdivide_jit = None;
    let decoder = mlpd::decode_all(&data, &mut |b: &BufferHeader, e: &Event<'_>| {
        threads.insert(b.thread_id);
        let key = match &e.kind {
            EventKind::MethodEnter { .. } => "enter",
            EventKind::MethodLeave { .. } => "leave",
            EventKind::MethodExcLeave { .. } => "exc_leave",
            EventKind::Jit { name, code, .. } => {
                if name == "Shapes.Fractal:Subdivide (Shapes.Polygon,int)" {
                    subdivide_jit = Some(*code);
                }
                "jit"
            }
            EventKind::Throw { .. } => "throw",
            EventKind::Clause { .. } => "clause",
            EventKind::Metadata {
                what: Metadata::Thread { name: Some(n) },
                ..
            } => {
                names.insert(n.to_string());
                "thread name"
            }
            _ => "other",
        };
        *kinds.entry(key).or_default() += 1;
    })
    .expect("valid header");
    assert_eq!(decoder.problems(), &[]);
    assert_eq!(decoder.consumed(), data.len());
    let h = decoder.header().expect("header");
    assert_eq!(
        (h.major, h.minor, h.data_version, h.ptr_size),
        (3, 0, 17, 8)
    );
    assert_eq!((h.pid, h.port, h.timer_overhead_ns), (13050, 42695, 41));
    assert_eq!(
        (h.startup_ms, h.startup_ns),
        (1795332027000, Some(2857353229984))
    );
    assert_eq!(h.args, "log:calls,output=shapes-calls.mlpd");
    assert_eq!(
        (h.arch.as_str(), h.os.as_str(), h.len),
        ("x86-64", "linux", 98)
    );
    assert_eq!(decoder.buffers(), 20);
    assert_eq!(threads.len(), 8);
    // mprof-report: "Total calls: 1344", 1 throw, 1 catch + 3 finally clauses.
    assert_eq!(kinds["enter"], 1344);
    assert_eq!(kinds["leave"] + kinds["exc_leave"], 1345);
    assert_eq!((kinds["throw"], kinds["clause"]), (1, 4));
    let expected: BTreeSet<String> = [
        "Main",
        "Finalizer",
        "tiler-0",
        "tiler-1",
        "Profiler Sampler",
        "Profiler Helper",
        "Profiler Dumper",
        "Profiler Writer",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(names, expected);
    assert!(subdivide_jit.is_some_and(|c| c != 0));
}

#[test]
fn sample_fixture_has_every_hit_mprof_report_counts() {
    let data = sample_fixture();
    let (mut hits, mut managed_frames, mut usyms) = (0u64, 0u64, 0u64);
    let decoder = mlpd::decode_all(
        &data,
        &mut |_: &BufferHeader, e: &Event<'_>| match &e.kind {
            EventKind::SampleHit {
                ips,
                frames,
                thread,
                ..
            } => {
                assert_eq!(ips.len(), 1);
                assert_ne!(*thread, 0);
                hits += 1;
                managed_frames += frames.len() as u64;
            }
            EventKind::SampleUsym { .. } => usyms += 1,
            _ => {}
        },
    )
    .expect("valid header");
    assert_eq!(decoder.problems(), &[]);
    // mprof-report's own counts for the file: unmanaged + managed hits.
    let reference =
        std::fs::read_to_string(format!("{FIXTURES}/mono/shapes-sample.mprof-report.txt"))
            .expect("reference");
    let count = |label: &str| -> u64 {
        reference
            .lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{label} in the reference"))
    };
    let (unmanaged, managed) = (count("Unmanaged hits:"), count("Managed hits:"));
    assert_eq!(hits, unmanaged + managed);
    assert!(managed_frames > managed);
    assert!(usyms > 0, "no unmanaged symbols");
}

/// The three files the robustness properties start from (two real ones and a written data
/// format 1 file), each with the events it decodes to whole.
static FILES: LazyLock<Vec<(Vec<u8>, Vec<String>)>> = LazyLock::new(|| {
    let format1 = write_format1(&format1_events(), &[1, 2, 3]);
    [calls_fixture(), sample_fixture(), format1]
        .into_iter()
        .map(|data| {
            let (whole, _) = decode(&data);
            (data, whole)
        })
        .collect()
});

/// Every 300th cut of each file decodes a prefix of what the whole file decodes.
#[test]
fn truncations_keep_what_came_before() {
    for (data, whole) in FILES.iter() {
        let step = (data.len() / 300).max(1);
        for cut in (0..data.len()).step_by(step) {
            let (prefix, decoder) = decode_prefix(&data[..cut]);
            assert_eq!(&whole[..prefix.len()], &prefix[..], "cut at {cut}");
            assert!(decoder.is_none_or(|d| d.consumed() <= cut));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// A file fed to the decoder as it grows, in pieces of any size, decodes the same events
    /// as the whole file, without a problem.
    #[test]
    fn feeding_a_growing_file_decodes_the_same_events_as_the_whole(
        which in 0usize..2,
        steps in vec(1usize..4096, 1..64),
    ) {
        let (data, whole) = &FILES[which];
        let mut decoder = mlpd::Decoder::new();
        let mut pieces = Vec::new();
        let mut end = 0;
        for step in steps.iter().cycle() {
            if end == data.len() {
                break;
            }
            end = (end + step).min(data.len());
            decoder
                .feed(&data[..end], &mut |_: &BufferHeader, e: &Event<'_>| {
                    pieces.push(format!("{} {:?}", e.time, e.kind))
                })
                .expect("valid header");
            prop_assert!(decoder.consumed() <= end);
        }
        prop_assert_eq!(&pieces, whole);
        prop_assert_eq!(decoder.problem_count(), 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any cut decodes a prefix of the whole file's events; a few flipped bits never panic,
    /// and every problem the decoder lists points inside the file.
    #[test]
    fn truncations_and_bit_flips_never_panic_and_keep_what_came_before(
        which in 0usize..3,
        cut in any::<prop::sample::Index>(),
        flips in vec((any::<prop::sample::Index>(), 0u8..8), 1..=4),
    ) {
        let (data, whole) = &FILES[which];
        let cut = cut.index(data.len() + 1);
        let (prefix, decoder) = decode_prefix(&data[..cut]);
        prop_assert_eq!(&whole[..prefix.len()], &prefix[..], "cut at {}", cut);
        prop_assert!(decoder.is_none_or(|d| d.consumed() <= cut));

        let mut damaged = data.clone();
        for (at, bit) in flips {
            let i = at.index(damaged.len());
            damaged[i] ^= 1 << bit;
        }
        if let Ok(decoder) = mlpd::decode_all(&damaged, &mut |_: &BufferHeader, _: &Event<'_>| {}) {
            prop_assert!(decoder.consumed() <= damaged.len());
            for p in decoder.problems() {
                prop_assert!(p.error.offset <= damaged.len(), "{p:?}");
            }
        }
    }
}

fn decode_prefix(data: &[u8]) -> (Vec<String>, Option<mlpd::Decoder>) {
    let mut out = Vec::new();
    let decoder = mlpd::decode_all(data, &mut |_: &BufferHeader, e: &Event<'_>| {
        out.push(format!("{} {:?}", e.time, e.kind))
    })
    .ok();
    (out, decoder)
}

#[test]
fn headers_that_cannot_be_read_say_where_and_why() {
    let data = calls_fixture();
    let mut bad = data.clone();
    bad[6] = 99;
    let err = mlpd::parse_header(&bad).expect_err("data version 99");
    assert_eq!(err.offset, 6);
    let mut bad = data.clone();
    bad[0] = 0;
    assert_eq!(mlpd::parse_header(&bad).expect_err("id").offset, 0);
    // Too short is not an error: the file may still be growing.
    assert_eq!(mlpd::parse_header(&data[..40]), Ok(None));
    assert!(mlpd::parse_header(&data[..98]).expect("complete").is_some());
}

#[test]
fn jit_events_go_into_the_jit_index_at_their_times() {
    use jprof::symbolize::jit_index::JitIndex;
    use jprof::timeline::ClockConversion;
    let jit = |method, name: &'static str| EventKind::Jit {
        method,
        code: 0x7f00_4000_0000,
        size: 0x100,
        name: s(name),
    };
    let mut w = V1Writer::new();
    w.begin_buffer(1_000, 0x7f00_0000_0000, 0, 1, 0x5555_0000);
    w.event(1_000, &jit(0x5555_0040, "First:M ()"));
    w.event(2_000, &jit(0x5555_0080, "Second:M ()"));
    w.end_buffer();
    let mut index = JitIndex::default();
    index.add_mlpd(
        9,
        "/tmp/jprof-mono-9.mlpd",
        &w.finish(),
        &ClockConversion::default(),
    );
    let name = |t| index.lookup(9, 0x7f00_4000_0010, t).map(|c| c.name.clone());
    assert_eq!(name(1_500).as_deref(), Some("First:M ()"));
    assert_eq!(name(2_500).as_deref(), Some("Second:M ()"));
    assert!(index.notes.is_empty(), "{:?}", index.notes);

    let mut index = JitIndex::default();
    let data = calls_fixture();
    index.add_mlpd(
        13050,
        "shapes-calls.mlpd",
        &data,
        &ClockConversion::default(),
    );
    let mut subdivide = None;
    mlpd::decode_all(&data, &mut |_: &BufferHeader, e: &Event<'_>| {
        if let EventKind::Jit { name, code, .. } = &e.kind {
            if name == "Shapes.Fractal:Subdivide (Shapes.Polygon,int)" {
                subdivide = Some(*code);
            }
        }
    })
    .expect("valid");
    let code = subdivide.expect("Subdivide JIT event");
    let found = index
        .lookup(13050, code + 4, u64::MAX / 2)
        .expect("indexed");
    assert_eq!(found.name, "Shapes.Fractal:Subdivide (Shapes.Polygon,int)");
}
