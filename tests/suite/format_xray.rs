//! The XRay readers on the real logs in `tests/fixtures/shared/xray` (FDR v5 with real TSC and
//! emulated clock, basic v3) and on logs built from the layouts for every FDR version (1–5) and
//! basic version (1–3), in both byte orders; the instrumentation map of the fixture binary; and
//! damaged input, which must never panic.

use std::sync::LazyLock;

use jprof::format::xray::instr_map::{self, SledKind};
use jprof::format::xray::write::{self, FdrWriter};
use jprof::format::xray::{self, BufferStart, Event, EventKind, LogMode};
use jprof::format::Endian;
use jprof::input::xray::replay::Replay;
use proptest::collection::vec;
use proptest::prelude::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared/xray");

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{name}")).expect("fixture present (tests/fixtures/shared)")
}

fn counts(name: &str) -> serde_json::Value {
    serde_json::from_slice(&fixture(&format!("{name}.counts.json"))).unwrap()
}

fn kinds(events: &[Event]) -> (usize, usize, usize) {
    let n = |k: EventKind| events.iter().filter(|e| e.kind == k).count();
    (
        n(EventKind::Enter),
        n(EventKind::Exit),
        n(EventKind::TailExit),
    )
}

/// Records, kinds, per-thread record counts, stack depths and clean replays agree with the
/// fixture's reference counts (from llvm-xray's YAML).
fn check_against_counts(name: &str) {
    let log = xray::parse(&fixture(&format!("{name}.xray"))).unwrap();
    assert!(log.problems.is_empty(), "{name}: {:?}", log.problems);
    let reference = counts(name);
    assert_eq!(
        log.events.len() as u64,
        reference["records"].as_u64().unwrap()
    );
    let k = &reference["record_kinds"];
    assert_eq!(
        kinds(&log.events),
        (
            k["function-enter"].as_u64().unwrap() as usize,
            k["function-exit"].as_u64().unwrap() as usize,
            k["function-tail-exit"].as_u64().unwrap() as usize
        )
    );
    let replay = Replay::run(&log.events);
    assert_eq!(replay.unmatched_exits(), 0);
    assert_eq!(replay.open_at_end(), 0);
    assert_eq!(replay.deduced_exits(), 0);
    for thread in reference["threads"].as_object().unwrap().values() {
        let tid = thread["tid"].as_u64().unwrap() as u32;
        let records = log.events.iter().filter(|e| e.tid == tid).count();
        assert_eq!(
            records as u64,
            thread["records"].as_u64().unwrap(),
            "{name} tid {tid}"
        );
        let (pid, stack) = &replay.threads[&tid];
        assert_eq!(*pid as u64, reference["pids"][0].as_u64().unwrap());
        assert_eq!(
            stack.max_depth as u64,
            thread["max_depth"].as_u64().unwrap()
        );
        let first = log.events.iter().find(|e| e.tid == tid).unwrap().tsc;
        assert_eq!(
            first,
            thread["tsc_first"].as_u64().unwrap(),
            "{name} tid {tid}"
        );
    }
}

#[test]
fn fdr_real_tsc_fixture() {
    check_against_counts("fdr-tsc");
    let log = xray::parse(&fixture("fdr-tsc.xray")).unwrap();
    let h = &log.header;
    assert_eq!(
        (h.version, h.mode, h.endian),
        (5, LogMode::Fdr, Endian::Little)
    );
    assert_eq!(h.cycle_frequency, 2_250_000_000);
    assert!(!log.is_emulated_clock());
    assert_eq!(h.thread_buffer_size, 16384);
    assert!(h.constant_tsc && h.nonstop_tsc);
    let mut cpus: Vec<u16> = log.events.iter().map(|e| e.cpu).collect();
    cpus.sort();
    cpus.dedup();
    assert_eq!(cpus, vec![0, 1]);
    assert_eq!(log.buffers.len(), 3);
    for b in &log.buffers {
        assert_eq!(b.pid, 12768);
        // The marker is CLOCK_MONOTONIC (seconds since boot), not wall time.
        let mono = b.monotonic_ns.unwrap();
        assert!(
            mono > 1_000_000_000 && mono < 1_000_000 * 1_000_000_000,
            "{mono}"
        );
        assert!(b.first_tsc.is_some());
    }
}

#[test]
fn fdr_emulated_clock_fixture() {
    check_against_counts("fdr-emulated");
    let log = xray::parse(&fixture("fdr-emulated.xray")).unwrap();
    assert!(log.is_emulated_clock());
    // Emulated timestamps are CLOCK_REALTIME ns: around 2026, and cpu is always 0.
    let t = log.events[0].tsc;
    assert!(
        t > 1_700_000_000_000_000_000 && t < 2_100_000_000_000_000_000,
        "{t}"
    );
    assert!(log.events.iter().all(|e| e.cpu == 0));
    // Buffers as the fixture README states them: shard 0, shard 1, main, by their sizes.
    let offsets: Vec<usize> = log.buffers.iter().map(|b| b.offset).collect();
    assert_eq!(
        offsets,
        vec![48, 48 + 9424 + 16, 48 + 9424 + 16 + 14672 + 16]
    );
    assert_eq!(log.buffers[2].tid, log.buffers[2].pid, "main thread last");
}

#[test]
fn basic_fixture_with_junk_header_and_padding() {
    check_against_counts("basic-emulated");
    let bytes = fixture("basic-emulated.xray");
    assert_eq!(
        &bytes[4..8],
        &[0xff, 0x7f, 0, 0],
        "the junk bitfield is really there"
    );
    let log = xray::parse(&bytes).unwrap();
    let h = &log.header;
    assert_eq!((h.version, h.mode), (3, LogMode::Basic));
    assert!(h.constant_tsc && h.nonstop_tsc);
    assert_eq!(h.thread_buffer_size, 0, "basic mode has no buffer size");
    assert_eq!(log.events.len(), (bytes.len() - 32) / 32);
    // Multi-threaded and not in global time order: the first records are not the earliest.
    let min = log.events.iter().map(|e| e.tsc).min().unwrap();
    assert_ne!(log.events[0].tsc, min);
}

#[test]
fn instrumentation_map_ids_and_names() {
    let map = instr_map::parse(&fixture("xray_rows")).unwrap();
    assert!(map.position_independent);
    let names: Vec<String> = (1..=9).map(|id| map.name(id)).collect();
    assert_eq!(
        names,
        [
            "mix64",
            "checksum_row",
            "parse_block",
            "fib_rec",
            "op_rotate",
            "op_square",
            "dispatch_op",
            "shard_thread",
            "main"
        ]
    );
    assert_eq!(map.name(10), "#10");
    // Every sled of instr_map.yaml (llvm-xray extract), in order.
    let yaml = String::from_utf8(fixture("instr_map.yaml")).unwrap();
    let field = |line: &str, key: &str| -> String {
        let at = line.find(&format!("{key}: ")).unwrap() + key.len() + 2;
        line[at..].split([',', ' ']).next().unwrap().to_string()
    };
    let expected: Vec<_> = yaml
        .lines()
        .filter(|l| l.starts_with("- {"))
        .map(|l| {
            (
                field(l, "id").parse::<u32>().unwrap(),
                u64::from_str_radix(field(l, "address").trim_start_matches("0x"), 16).unwrap(),
                u64::from_str_radix(field(l, "function").trim_start_matches("0x"), 16).unwrap(),
                field(l, "kind"),
            )
        })
        .collect();
    assert_eq!(expected.len(), 19);
    let got: Vec<_> = map
        .sleds
        .iter()
        .map(|s| {
            let kind = match s.kind {
                SledKind::Entry => "function-enter",
                SledKind::Exit => "function-exit",
                SledKind::TailCall => "tail-exit",
                other => panic!("unexpected sled kind {other:?}"),
            };
            (s.id, s.address, s.function, kind.to_string())
        })
        .collect();
    assert_eq!(got, expected);
    assert!(map.sleds.iter().all(|s| s.version == 2));
    let mix = map.function(1).unwrap();
    assert_eq!(mix.address, 0x21D80);
    assert!(mix.size > 0x3e, "size from the symbol table: {}", mix.size);
    assert_eq!(map.function_at(0x21D85).map(|f| f.id), Some(1));
    assert!(instr_map::has_instr_map(&fixture("xray_rows")));
}

#[test]
fn binary_without_map_is_refused_with_the_reason() {
    let err = instr_map::parse(&std::fs::read("/bin/sh").unwrap()).unwrap_err();
    assert!(err.expected.contains("xray_instr_map"), "{err}");
    assert!(!instr_map::has_instr_map(b"not an elf"));
}

/// One scenario written in each FDR version and byte order, with the events it must decode to.
fn fdr_scenario(version: u16, endian: Endian) -> (Vec<u8>, Vec<Event>, Vec<BufferStart>) {
    let mut w = FdrWriter::new(version, endian, 3_000_000_000, 512);
    let pid = |p: u32| if version >= 3 { p } else { 0 };
    let ev = |tid, p, cpu, kind, func_id, tsc| Event {
        tid,
        pid: pid(p),
        cpu,
        kind,
        func_id,
        tsc,
    };
    let mut expected = Vec::new();
    w.begin_buffer(7, 70, 2_000_123_456_000);
    w.new_cpu(3, 1000);
    w.function(EventKind::Enter, 1, 0);
    expected.push(ev(7, 70, 3, EventKind::Enter, 1, 1000));
    w.function(EventKind::EnterArg, 0x0abc_def1, 10);
    w.call_argument(42);
    w.call_argument(43);
    expected.push(ev(7, 70, 3, EventKind::EnterArg, 0x0abc_def1, 1010));
    // v5 custom events move the base by their delta; before, they carry an absolute TSC.
    let custom_delta = if version >= 5 { 7 } else { 0 };
    w.custom_event(if version >= 5 { 7 } else { 999_999 }, 3, b"hello");
    w.function(EventKind::Exit, 0x0abc_def1, 5);
    expected.push(ev(
        7,
        70,
        3,
        EventKind::Exit,
        0x0abc_def1,
        1015 + custom_delta,
    ));
    w.tsc_wrap(1 << 40);
    w.function(EventKind::Enter, 2, 1);
    expected.push(ev(7, 70, 3, EventKind::Enter, 2, (1 << 40) + 1));
    if version >= 5 {
        w.typed_event(3, 9, b"typed!");
    }
    w.new_cpu(4, (1 << 40) + 100);
    w.function(EventKind::TailExit, 2, 2);
    expected.push(ev(7, 70, 4, EventKind::TailExit, 2, (1 << 40) + 102));
    w.function(EventKind::Exit, 1, u32::MAX);
    expected.push(ev(
        7,
        70,
        4,
        EventKind::Exit,
        1,
        (1 << 40) + 102 + u32::MAX as u64,
    ));
    w.begin_buffer(8, 70, 2_000_200_000_000);
    w.new_cpu(0, 5000);
    w.function(EventKind::Enter, 3, 0);
    w.function(EventKind::Exit, 3, 4);
    expected.push(ev(8, 70, 0, EventKind::Enter, 3, 5000));
    expected.push(ev(8, 70, 0, EventKind::Exit, 3, 5004));
    let bytes = w.finish();
    let buffer_offset = |n: usize| -> usize {
        // v1 buffers are 512 bytes; v2+ buffers follow their 16-byte extents record.
        match version {
            1 => 32 + 512 * n,
            _ => 32 + 16,
        }
    };
    let buffers = vec![
        BufferStart {
            offset: buffer_offset(0),
            tid: 7,
            pid: pid(70),
            monotonic_ns: Some(2_000_123_456_000),
            first_tsc: Some(1000),
        },
        BufferStart {
            offset: 0, // checked apart: depends on the first buffer's length
            tid: 8,
            pid: pid(70),
            monotonic_ns: Some(2_000_200_000_000),
            first_tsc: Some(5000),
        },
    ];
    (bytes, expected, buffers)
}

#[test]
fn fdr_every_version_and_byte_order() {
    for version in 1..=5u16 {
        for endian in [Endian::Little, Endian::Big] {
            let (bytes, expected, buffers) = fdr_scenario(version, endian);
            let log = xray::parse(&bytes).unwrap();
            let what = format!("FDR v{version} {endian:?}");
            assert!(log.problems.is_empty(), "{what}: {:?}", log.problems);
            assert_eq!(log.header.version, version, "{what}");
            assert_eq!(log.header.endian, endian, "{what}");
            assert_eq!(log.header.thread_buffer_size, 512, "{what}");
            assert_eq!(log.events, expected, "{what}");
            assert_eq!(log.call_arguments, 2, "{what}");
            assert_eq!(log.custom_events, 1, "{what}");
            assert_eq!(log.typed_events, usize::from(version >= 5), "{what}");
            assert_eq!(log.buffers.len(), 2, "{what}");
            assert_eq!(log.buffers[0], buffers[0], "{what}");
            let second = BufferStart {
                offset: log.buffers[1].offset,
                ..buffers[1]
            };
            assert_eq!(log.buffers[1], second, "{what}");
            if version == 1 {
                assert_eq!(
                    log.buffers[1].offset,
                    32 + 512,
                    "{what}: fixed-size v1 buffers"
                );
            }
        }
    }
}

#[test]
fn fdr_damage_is_listed_and_the_rest_kept() {
    let (mut bytes, expected, _) = fdr_scenario(5, Endian::Little);
    // An unknown metadata kind (42) in place of the first CallArgument record.
    let call_arg = bytes
        .windows(2)
        .position(|w| w == [(6 << 1) | 1, 42])
        .unwrap();
    bytes[call_arg] = (42 << 1) | 1;
    let log = xray::parse(&bytes).unwrap();
    assert_eq!(log.events, expected);
    assert_eq!(log.problems.len(), 1, "{:?}", log.problems);
    assert_eq!(log.problems[0].offset, call_arg);
    // EndOfBuffer is v1-only: in v5 it ends the buffer and is reported.
    let (mut bytes, _, _) = fdr_scenario(5, Endian::Little);
    let first_fn = 32 + 16 + 16 * 4;
    bytes[first_fn..first_fn + 16].copy_from_slice(&[3; 16]);
    let log = xray::parse(&bytes).unwrap();
    assert!(
        log.problems[0].expected.contains("EndOfBuffer"),
        "{:?}",
        log.problems
    );
    assert_eq!(log.events.len(), 2, "the second buffer is still read");
}

#[test]
fn basic_every_version_and_byte_order() {
    for version in 1..=3u16 {
        for endian in [Endian::Little, Endian::Big] {
            let mut bytes = write::header(version, false, endian, 1_000_000_000, [0x77; 16]);
            write::basic_record(&mut bytes, endian, EventKind::EnterArg, 1, 5, 100, 11, 10);
            write::basic_arg_payload(&mut bytes, endian, 5, 11, 10, 0xdead);
            write::basic_record(&mut bytes, endian, EventKind::TailExit, 1, 5, 150, 11, 10);
            write::basic_record(&mut bytes, endian, EventKind::Enter, 0, -1, 90, 12, 10);
            write::basic_record(&mut bytes, endian, EventKind::Exit, 0, -1, 200, 12, 10);
            let log = xray::parse(&bytes).unwrap();
            let what = format!("basic v{version} {endian:?}");
            assert!(log.problems.is_empty(), "{what}: {:?}", log.problems);
            assert_eq!(log.header.mode, LogMode::Basic, "{what}");
            // 1e9 Hz but small values: a 1 GHz TSC, not CLOCK_REALTIME.
            assert!(!log.is_emulated_clock());
            assert_eq!(log.call_arguments, 1, "{what}");
            let pid = if version >= 3 { 10 } else { 0 };
            let got: Vec<_> = log
                .events
                .iter()
                .map(|e| (e.tid, e.pid, e.cpu, e.kind, e.func_id, e.tsc))
                .collect();
            assert_eq!(
                got,
                vec![
                    (11, pid, 1, EventKind::EnterArg, 5, 100),
                    (11, pid, 1, EventKind::TailExit, 5, 150),
                    (12, pid, 0, EventKind::Enter, u32::MAX, 90),
                    (12, pid, 0, EventKind::Exit, u32::MAX, 200),
                ],
                "{what}"
            );
        }
    }
    // Version 4 does not exist in basic mode.
    let bytes = write::header(4, false, Endian::Little, 1, [0; 16]);
    assert!(xray::parse(&bytes).is_err());
}

/// One thread's FDR buffer: tid, pid, CPU, the TSC it starts from, and its function records
/// (kind, function id, TSC delta).
type Buffer = (u32, u32, u16, u64, Vec<(EventKind, u32, u32)>);

fn fdr_buffer() -> impl Strategy<Value = Buffer> {
    let kind = prop::sample::select(vec![
        EventKind::Enter,
        EventKind::EnterArg,
        EventKind::Exit,
        EventKind::TailExit,
    ]);
    (
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        0u64..1 << 62,
        vec((kind, 0u32..1 << 28, any::<u32>()), 0..20),
    )
}

/// The three real logs and the ELF with an instrumentation map, read once for all the cases.
static LOGS: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    ["fdr-tsc.xray", "fdr-emulated.xray", "basic-emulated.xray"]
        .map(fixture)
        .to_vec()
});
static XRAY_ROWS: LazyLock<Vec<u8>> = LazyLock::new(|| fixture("xray_rows"));

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// FDR logs of any version and byte order, with any threads and function records, read
    /// back to the events written: each one's thread, process (v3+), CPU, kind, function and
    /// TSC (the buffer's start plus the deltas so far).
    #[test]
    fn written_fdr_logs_read_back(
        version in 1u16..=5,
        big_endian: bool,
        buffers in vec(fdr_buffer(), 1..4),
    ) {
        let endian = if big_endian { Endian::Big } else { Endian::Little };
        let mut w = FdrWriter::new(version, endian, 3_000_000_000, 4096);
        let mut expected = Vec::new();
        for (tid, pid, cpu, start, records) in &buffers {
            w.begin_buffer(*tid, *pid, 1_000_000_000);
            w.new_cpu(*cpu, *start);
            let mut tsc = *start;
            for &(kind, func_id, delta) in records {
                w.function(kind, func_id, delta);
                if kind == EventKind::EnterArg {
                    w.call_argument(u64::from(delta));
                }
                tsc += u64::from(delta);
                let pid = if version >= 3 { *pid } else { 0 };
                expected.push(Event { tid: *tid, pid, cpu: *cpu, kind, func_id, tsc });
            }
        }
        let log = xray::parse(&w.finish()).unwrap();
        prop_assert!(log.problems.is_empty(), "{:?}", log.problems);
        prop_assert_eq!(log.events, expected);
    }

    /// The real logs cut anywhere or with bits flipped, and the instrumented ELF with bits
    /// flipped where its map is read from: never a panic, and every problem points inside the
    /// log.
    #[test]
    fn damaged_logs_never_panic(
        which in 0usize..3,
        cut in any::<prop::sample::Index>(),
        flips in vec((any::<prop::sample::Index>(), 0u8..8), 1..24),
        elf_flips in vec((any::<prop::sample::Index>(), prop::bool::ANY, 0u8..8), 8),
    ) {
        let real = &LOGS[which];
        if let Ok(log) = xray::parse(&real[..cut.index(real.len() + 1)]) {
            let _ = Replay::run(&log.events);
        }
        let mut f = real.clone();
        for (at, bit) in flips {
            let i = at.index(f.len());
            f[i] ^= 1 << bit;
        }
        if let Ok(log) = xray::parse(&f) {
            for p in &log.problems {
                prop_assert!(p.offset <= f.len(), "{p}");
            }
            let _ = Replay::run(&log.events);
        }

        let mut elf = XRAY_ROWS.clone();
        for (at, in_headers, bit) in elf_flips {
            // Half the flips in the headers and tables, where the map's reader looks.
            let i = at.index(if in_headers { 4096 } else { elf.len() });
            elf[i] ^= 1 << bit;
        }
        let _ = instr_map::parse(&elf);
        let _ = instr_map::parse(&elf[..cut.index(elf.len())]);
    }
}
