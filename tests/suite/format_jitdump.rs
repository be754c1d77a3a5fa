//! The jitdump parser against real files (node --perf-prof, HotSpot + perf's JVMTI agent) and
//! hand-built edge cases: byte-swapped files, Mono's short header, half-written records,
//! unknown ids, the samply extensions, and garbage.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use jprof::format::jitdump::{self, DebugEntry, RecordBody, RecordId, TierKind};
use jprof::format::jitdump_write as write;
use jprof::format::Endian;
use proptest::collection::vec;
use proptest::prelude::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared");

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{path}")).expect("fixture present (tests/fixtures/shared)")
}

fn counts(file: &[u8]) -> (BTreeMap<u32, usize>, usize, jitdump::Batch) {
    let header = jitdump::parse_header(file).expect("header");
    let batch = jitdump::parse_records(file, &header, 0);
    let mut by_id = BTreeMap::new();
    let mut entries = 0;
    for r in &batch.records {
        *by_id.entry(r.id.0).or_default() += 1;
        if let RecordBody::DebugInfo { entries: e, .. } = &r.body {
            entries += e.len();
        }
    }
    (by_id, entries, batch)
}

#[test]
fn node_fixture_matches_its_stats() {
    let file = fixture("node/jit-13228.dump");
    let header = jitdump::parse_header(&file).unwrap();
    assert_eq!(
        (header.version, header.pid, header.elf_mach),
        (1, 13228, 62)
    );
    assert!(!header.arch_timestamp());
    let (by_id, entries, batch) = counts(&file);
    assert!(batch.error.is_none(), "{:?}", batch.error);
    assert_eq!(batch.resume_at, file.len(), "every byte consumed");
    assert_eq!(by_id.get(&0), Some(&2480)); // CODE_LOAD
    assert_eq!(by_id.get(&4), Some(&2480)); // UNWINDING_INFO
    assert_eq!(by_id.get(&2), Some(&36)); // DEBUG_INFO
    assert_eq!(entries, 859);
    let unwind: usize = batch
        .records
        .iter()
        .map(|r| match &r.body {
            RecordBody::UnwindingInfo {
                eh_frame,
                eh_frame_hdr,
                ..
            } => eh_frame.len() + eh_frame_hdr.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(unwind, 50312);
    let min = batch.records.iter().map(|r| r.timestamp).min().unwrap();
    let max = batch.records.iter().map(|r| r.timestamp).max().unwrap();
    assert_eq!((min, max), (2862860257605, 2864236781543));
}

#[test]
fn java_fixture_matches_its_stats() {
    let file = fixture("java/jit-13732.dump");
    let (by_id, entries, batch) = counts(&file);
    assert!(batch.closed, "the JVMTI agent writes CODE_CLOSE");
    assert_eq!(batch.resume_at, file.len());
    assert_eq!(by_id.get(&0), Some(&654));
    assert_eq!(by_id.get(&2), Some(&113));
    assert_eq!(by_id.get(&3), Some(&1));
    assert_eq!(entries, 2774);
    let dot = batch.records.iter().find_map(|r| match &r.body {
        RecordBody::CodeLoad {
            name,
            code_index: 528,
            code_addr,
            code_size,
            ..
        } => Some((name.clone(), *code_addr, *code_size)),
        _ => None,
    });
    assert_eq!(
        dot,
        Some((
            "Ldemo/matrix/Matrix;dot(Ldemo/matrix/Matrix;II)D".to_string(),
            0x7f029541e440,
            496
        ))
    );
}

#[test]
fn every_prefix_of_a_real_file_parses_what_is_complete() {
    let file = fixture("java/jit-13732.dump");
    let header = jitdump::parse_header(&file).unwrap();
    let full = jitdump::parse_records(&file, &header, 0).records.len();
    // Tail in uneven steps, resuming each time where the previous pass stopped.
    let mut resume = 0;
    let mut seen = 0;
    let mut end = 40;
    while end < file.len() {
        end = (end + 7919).min(file.len());
        let batch = jitdump::parse_records(&file[..end], &header, resume);
        assert!(batch.error.is_none(), "at {end}: {:?}", batch.error);
        seen += batch.records.len();
        resume = batch.resume_at;
    }
    assert_eq!(seen, full);
}

fn header_bytes(endian: Endian, version: u32, total_size: u32, flags: u64) -> Vec<u8> {
    let mut h = Vec::new();
    let put32 = |h: &mut Vec<u8>, v: u32| match endian {
        Endian::Little => h.extend(v.to_le_bytes()),
        Endian::Big => h.extend(v.to_be_bytes()),
    };
    put32(&mut h, jitdump::MAGIC);
    put32(&mut h, version);
    put32(&mut h, total_size);
    put32(&mut h, 62);
    put32(&mut h, 0);
    put32(&mut h, 4242);
    let put64 = |h: &mut Vec<u8>, v: u64| match endian {
        Endian::Little => h.extend(v.to_le_bytes()),
        Endian::Big => h.extend(v.to_be_bytes()),
    };
    put64(&mut h, 1);
    put64(&mut h, flags);
    h
}

fn record(endian: Endian, id: u32, ts: u64, body: &[u8]) -> Vec<u8> {
    let size = (16 + body.len()) as u32;
    let mut r = Vec::new();
    match endian {
        Endian::Little => {
            r.extend(id.to_le_bytes());
            r.extend(size.to_le_bytes());
            r.extend(ts.to_le_bytes());
        }
        Endian::Big => {
            r.extend(id.to_be_bytes());
            r.extend(size.to_be_bytes());
            r.extend(ts.to_be_bytes());
        }
    }
    r.extend(body);
    r
}

fn load_body(endian: Endian, addr: u64, size: u64, name: &str) -> Vec<u8> {
    let mut b = Vec::new();
    let w32 = |b: &mut Vec<u8>, v: u32| match endian {
        Endian::Little => b.extend(v.to_le_bytes()),
        Endian::Big => b.extend(v.to_be_bytes()),
    };
    w32(&mut b, 1);
    w32(&mut b, 2);
    for v in [addr, addr, size, 7] {
        match endian {
            Endian::Little => b.extend(v.to_le_bytes()),
            Endian::Big => b.extend(v.to_be_bytes()),
        }
    }
    b.extend(name.as_bytes());
    b.push(0);
    b.extend(vec![0x90; size as usize]);
    b
}

#[test]
fn byte_swapped_file() {
    let mut f = header_bytes(Endian::Big, 1, 40, 1);
    f.extend(record(
        Endian::Big,
        0,
        99,
        &load_body(Endian::Big, 0x1000, 4, "swapped"),
    ));
    let h = jitdump::parse_header(&f).unwrap();
    assert_eq!(h.endian, Endian::Big);
    assert!(h.arch_timestamp());
    let b = jitdump::parse_records(&f, &h, 0);
    assert_eq!(b.records.len(), 1);
    assert_eq!(b.records[0].timestamp, 99);
    assert!(
        matches!(&b.records[0].body, RecordBody::CodeLoad { name, code_addr: 0x1000, .. } if name == "swapped")
    );
}

#[test]
fn mono_short_header_and_version_2() {
    let mut f = header_bytes(Endian::Little, 2, 8, 0);
    f.extend(record(
        Endian::Little,
        0,
        5,
        &load_body(Endian::Little, 0x2000, 2, "Mono"),
    ));
    let h = jitdump::parse_header(&f).unwrap();
    assert_eq!(h.records_start(), 40);
    assert_eq!(jitdump::parse_records(&f, &h, 0).records.len(), 1);
}

/// Node 20's V8 sometimes writes a DEBUG_INFO file name from freed memory: the right length,
/// with NULs inside (seen in a real `node --perf-prof` run: 24 bytes for `/work/…/hot.js`).
/// The entries after it stay aligned and keep their lines; only the garbled names are dropped.
#[test]
fn debug_entries_with_garbled_file_names_stay_aligned() {
    let code = 0x7f9b_f002_46c0_u64;
    let garbled: &[u8] = b"\xe5\xb9\x03\0\0\0\0\0\xd3\xe1\x3e\x69\xd5\x6e\x96\xad/hot.js\0";
    let mut body = Vec::new();
    body.extend(code.to_le_bytes());
    body.extend(4u64.to_le_bytes());
    let entry = |body: &mut Vec<u8>, addr: u64, line: i32, col: i32, name: &[u8]| {
        body.extend(addr.to_le_bytes());
        body.extend(line.to_le_bytes());
        body.extend(col.to_le_bytes());
        body.extend(name);
    };
    entry(&mut body, code + 0x40, 1, 23, garbled);
    entry(&mut body, code + 0x42, 1, 29, b"/srv/app.js\0");
    entry(&mut body, code + 0x47, 2, 5, b"\xff\0");
    entry(&mut body, code + 0x50, 3, 7, garbled);
    body.extend([0; 4]); // padding to 8 bytes
    let mut f = header_bytes(Endian::Little, 1, 40, 0);
    f.extend(record(Endian::Little, 2, 1, &body));
    let h = jitdump::parse_header(&f).unwrap();
    let b = jitdump::parse_records(&f, &h, 0);
    assert!(b.error.is_none(), "{:?}", b.error);
    let RecordBody::DebugInfo { entries, .. } = &b.records[0].body else {
        panic!("a DEBUG_INFO record: {:?}", b.records[0].body);
    };
    let got: Vec<(u64, i32, i32, &str)> = entries
        .iter()
        .map(|e| (e.addr - code, e.line, e.discrim, e.file.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (0x40, 1, 23, ""),
            (0x42, 1, 29, "/srv/app.js"),
            (0x47, 2, 5, "/srv/app.js"),
            (0x50, 3, 7, ""),
        ]
    );
}

#[test]
fn unknown_ids_are_skipped_and_half_written_records_wait() {
    let mut f = header_bytes(Endian::Little, 1, 40, 0);
    f.extend(record(Endian::Little, 77, 1, &[1, 2, 3, 4, 5]));
    let load = record(
        Endian::Little,
        0,
        2,
        &load_body(Endian::Little, 0x3000, 3, "f"),
    );
    f.extend(&load[..20]);
    let h = jitdump::parse_header(&f).unwrap();
    let b = jitdump::parse_records(&f, &h, 0);
    assert_eq!(b.records.len(), 1);
    assert_eq!(b.records[0].body, RecordBody::Unknown(RecordId(77)));
    assert!(b.error.is_none());
    let resume = b.resume_at;
    f.extend(&load[20..]);
    let b = jitdump::parse_records(&f, &h, resume);
    assert_eq!(b.records.len(), 1);
    assert!(matches!(b.records[0].body, RecordBody::CodeLoad { .. }));
}

#[test]
fn jit_tier_record_and_branch_layout_are_told_apart() {
    let mut tier = Vec::new();
    tier.extend(0u64.to_le_bytes());
    tier.extend(3u32.to_le_bytes());
    tier.extend(0u32.to_le_bytes());
    tier.extend(b"C2\0\0\0\0\0\0");
    // The unmerged samply branch's DEBUG_INFO2 under the same id: 1 offset, 1 position, 2 strings.
    let mut branch = Vec::new();
    for v in [0x4000u64, 1, 1, 2] {
        branch.extend(v.to_le_bytes());
    }
    branch.extend(0u32.to_le_bytes());
    branch.extend(0u32.to_le_bytes());
    for v in [-1i32 as u32, 0, 1, 10, 1, 12, 5] {
        branch.extend(v.to_le_bytes());
    }
    branch.extend(b"outer\0app.js\0");
    let mut f = header_bytes(Endian::Little, 1, 40, 0);
    f.extend(record(
        Endian::Little,
        RecordId::SAMPLY_JIT_TIER.0,
        1,
        &tier,
    ));
    f.extend(record(
        Endian::Little,
        RecordId::SAMPLY_JIT_TIER.0,
        2,
        &branch,
    ));
    let h = jitdump::parse_header(&f).unwrap();
    let b = jitdump::parse_records(&f, &h, 0);
    assert!(b.error.is_none(), "{:?}", b.error);
    match &b.records[0].body {
        RecordBody::JitTier(t) => {
            assert_eq!((t.kind, t.name.as_str()), (TierKind::OPTIMIZED, "C2"))
        }
        other => panic!("expected a tier, got {other:?}"),
    }
    match &b.records[1].body {
        RecordBody::DebugInfo2(d) => {
            assert_eq!(d.functions[0].name, "outer");
            assert_eq!(d.lines[0].line, 12);
            assert_eq!(d.lines[0].file.as_deref(), Some("app.js"));
        }
        other => panic!("expected branch DEBUG_INFO2, got {other:?}"),
    }
}

/// One record a runtime may write, and what reading it must give.
fn written_record() -> impl Strategy<Value = (Vec<u8>, RecordBody)> {
    let name = "[^\\x00]{0,40}";
    let file = "[A-Za-z0-9_./-]{1,24}";
    prop_oneof![
        (
            any::<u32>(),
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            name,
            vec(any::<u8>(), 0..64)
        )
            .prop_map(|(pid, tid, code_addr, code_index, name, code)| {
                let load = write::CodeLoad {
                    pid,
                    tid,
                    code_addr,
                    code_index,
                    name: &name,
                    code: &code,
                };
                let bytes = write::code_load(0, &load);
                let body = RecordBody::CodeLoad {
                    pid,
                    tid,
                    vma: code_addr,
                    code_addr,
                    code_size: code.len() as u64,
                    code_index,
                    name,
                };
                (bytes, body)
            }),
        (
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>()
        )
            .prop_map(|(pid, old, new, size, index)| {
                let body = RecordBody::CodeMove {
                    pid,
                    tid: pid,
                    vma: new,
                    old_code_addr: old,
                    new_code_addr: new,
                    code_size: size,
                    code_index: index,
                };
                (write::code_move(0, pid, old, new, size, index), body)
            }),
        // Line tables: addresses inside the code, as every runtime writes them.
        (
            0u64..1 << 40,
            vec((0u64..1 << 20, 1i32..100_000, file), 0..6)
        )
            .prop_map(|(code_addr, lines)| {
                let entries: Vec<_> = lines
                    .iter()
                    .map(|(offset, line, file)| (code_addr + offset, *line, file.as_str()))
                    .collect();
                let body = RecordBody::DebugInfo {
                    code_addr,
                    entries: entries
                        .iter()
                        .map(|&(addr, line, file)| DebugEntry {
                            addr,
                            line,
                            discrim: 0,
                            file: file.to_string(),
                        })
                        .collect(),
                };
                (write::debug_info(0, code_addr, &entries), body)
            }),
        (any::<u64>(), any::<u64>()).prop_map(|(code_addr, code_index)| {
            let body = RecordBody::CodeUnload {
                code_addr,
                code_index,
            };
            (write::code_unload(0, code_addr, code_index), body)
        }),
        vec((any::<u64>(), name), 0..5).prop_map(|methods| {
            (
                write::method_names(0, &methods),
                RecordBody::MethodNames(methods),
            )
        }),
    ]
}

/// A jitdump file of the given records, stamped 1, 2, 3…
fn jitdump_file(records: &[(Vec<u8>, RecordBody)]) -> Vec<u8> {
    let mut file = write::header(4242, 0, false);
    for (i, (bytes, _)) in records.iter().enumerate() {
        let mut bytes = bytes.clone();
        bytes[8..16].copy_from_slice(&(i as u64 + 1).to_le_bytes());
        file.extend(bytes);
    }
    file
}

/// The node fixture, read once for all the cases.
static NODE_DUMP: LazyLock<Vec<u8>> = LazyLock::new(|| fixture("node/jit-13228.dump"));

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// What the writer wrote reads back record by record; read as a runtime appends it (cut
    /// anywhere, then resumed from where the first pass stopped), it reads the same records,
    /// each once.
    #[test]
    fn written_records_read_back_whole_and_in_two_passes(
        records in vec(written_record(), 0..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let file = jitdump_file(&records);
        let header = jitdump::parse_header(&file).unwrap();
        let whole = jitdump::parse_records(&file, &header, 0);
        prop_assert!(whole.error.is_none(), "{:?}", whole.error);
        prop_assert_eq!(whole.resume_at, file.len());
        let read: Vec<_> = whole.records.iter().map(|r| (r.timestamp, &r.body)).collect();
        let written: Vec<_> = records.iter().enumerate().map(|(i, (_, body))| (i as u64 + 1, body)).collect();
        prop_assert_eq!(read, written);

        let cut = cut.index(file.len() + 1);
        let first = jitdump::parse_records(&file[..cut], &header, 0);
        prop_assert!(first.error.is_none(), "{:?}", first.error);
        prop_assert!(first.resume_at <= cut.max(jitdump::HEADER_LEN));
        let rest = jitdump::parse_records(&file, &header, first.resume_at);
        let both: Vec<_> = first.records.iter().chain(&rest.records).collect();
        prop_assert_eq!(both, whole.records.iter().collect::<Vec<_>>());
    }

    /// A real file (node --perf-prof), cut and with bytes overwritten: never a panic; every
    /// record and the place to resume lie inside the bytes, after the header, in order.
    #[test]
    fn garbage_never_panics(
        len in 41usize..4096,
        damage in vec((any::<prop::sample::Index>(), any::<u8>()), 1..16),
        from in 0usize..4096,
    ) {
        let real = &*NODE_DUMP;
        let header = jitdump::parse_header(real).unwrap();
        let mut f = real[..len.min(real.len())].to_vec();
        for (at, byte) in damage {
            let i = 40 + at.index(f.len() - 40);
            f[i] = byte;
        }
        let _ = jitdump::parse_header(&f[..len % 64]);
        let from = from.min(f.len());
        let b = jitdump::parse_records(&f, &header, from);
        prop_assert!(b.resume_at <= f.len() && b.resume_at >= from.max(40));
        let offsets: Vec<_> = b.records.iter().map(|r| r.offset).collect();
        prop_assert!(offsets.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(offsets.iter().all(|&o| o >= from.max(40) && o < b.resume_at));
        if let Some(e) = &b.error {
            prop_assert!(e.offset < f.len(), "{e:?}");
        }
    }
}

#[test]
fn marker_path_detection() {
    assert_eq!(jitdump::is_jitdump_path("/tmp/jit-1234.dump"), Some(1234));
    assert_eq!(jitdump::is_jitdump_path("jit-1.dump"), Some(1));
    assert_eq!(jitdump::is_jitdump_path("/tmp/jit-.dump"), None);
    assert_eq!(jitdump::is_jitdump_path("/tmp/jit-12x.dump"), None);
    assert_eq!(jitdump::is_jitdump_path("/tmp/perf-12.map"), None);
}
