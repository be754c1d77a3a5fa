//! JPROF_J9_METADATA end to end: the record through the jitdump writer and parser, `jprof
//! symbolize --jitdump` printing inline chains with bytecode indexes, `jprof dump` printing
//! every section, and `report`'s profile getting `_[i]` frames for samples in OpenJ9 bodies
//! (warm and cold code, leaf IPs and return addresses); OpenJ9's own perf map with its tiers.

use crate::cli_support;
use cli_support::stdout_ok;

use crate::j9_support;
use crate::symbolize_support;

use j9_support::*;
use jprof::format::jitdump::{self, RecordBody};
use jprof::format::recording::{encode_chunk, encode_side_piece, ChunkKind, SideKind, SidePiece};
use jprof::profile::{FrameKind, TierClass};
use jprof::symbolize::{resolve, ResolveOptions};
use symbolize_support as s;

fn both_bodies(pid: u32) -> (Body, Body, Vec<u8>) {
    let (a, b) = (three_levels(), wide_body_elsewhere());
    let dump = jitdump(pid, &[(&a, "app.Main.run"), (&b, "app.Main.run")]);
    (a, b, dump)
}

#[test]
fn the_record_round_trips_through_the_jitdump_parser() {
    let (a, _, dump) = both_bodies(9);
    let header = jitdump::parse_header(&dump).unwrap();
    let batch = jitdump::parse_records(&dump, &header, 0);
    assert!(batch.error.is_none() && batch.closed);
    let RecordBody::J9Metadata(md) = &batch.records[0].body else {
        panic!("first record: {:?}", batch.records[0].id);
    };
    assert_eq!(batch.records[0].id, jitdump::RecordId::JPROF_J9_METADATA);
    assert_eq!(&dump[batch.records[0].offset..][..4], b"J9MD");
    assert_eq!(md.code_addr, a.start_pc);
    assert_eq!(md.image, a.build());
    assert_eq!(&dump[md.image_offset..][..md.image.len()], &md.image[..]);
    assert_eq!(md.methods.len(), 4);
    assert_eq!(
        md.names().get(&LEAF).map(String::as_str),
        Some("java/lang/Math.sqrt(D)D")
    );
    let decoded = md.decode().unwrap();
    assert_eq!(decoded.header.start_pc, a.start_pc);
    assert!(decoded.problems.is_empty());
    // Records are padded to 8 bytes; the next one is the CODE_LOAD.
    assert!(matches!(batch.records[1].body, RecordBody::CodeLoad { .. }));
}

#[test]
fn a_cut_or_inflated_record_is_an_error_not_a_panic() {
    let (_, _, dump) = both_bodies(9);
    let header = jitdump::parse_header(&dump).unwrap();
    // image_size larger than the record.
    let mut bad = dump.clone();
    let at = jitdump::HEADER_LEN + 16 + 24;
    bad[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let batch = jitdump::parse_records(&bad, &header, 0);
    let e = batch.error.expect("an error");
    assert_eq!(e.offset, at + 8);
    assert!(batch.records.is_empty());
    for len in 0..dump.len() {
        let _ = jitdump::parse_records(&dump[..len], &header, 0);
    }
}

#[test]
fn symbolize_prints_the_inline_chain_with_bytecode_indexes() {
    let (a, b, dump) = both_bodies(9);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jit-9.dump");
    std::fs::write(&path, &dump).unwrap();
    let p = path.to_str().unwrap();
    let hex = |v: u64| format!("{v:#x}");
    assert_eq!(
        stdout_ok(&["symbolize", "--jitdump", p, &hex(a.start_pc + 0x15)]),
        "java/lang/Math.sqrt(D)D bci=2\napp/Shape.area()D bci=4\napp/Main.run()V bci=10\n"
    );
    // Cold code (not in the CODE_LOAD's range) and a body with 4-byte offsets.
    assert_eq!(
        stdout_ok(&[
            "symbolize",
            "--jitdump",
            p,
            &hex(a.start_pc + 0x400),
            &hex(b.start_pc + 0x12345)
        ]),
        "app/Main.run()V bci=30\napp/Shape.area()D bci=9\napp/Main.run()V bci=40\n"
    );
    // Outside both bodies.
    assert_eq!(
        stdout_ok(&["symbolize", "--jitdump", p, "0x10"]),
        "?? (0x10)\n"
    );
}

#[test]
fn dump_prints_every_section() {
    let (_, _, dump) = both_bodies(9);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jit-9.dump");
    std::fs::write(&path, &dump).unwrap();
    let text = stdout_ok(&["dump", path.to_str().unwrap()]);
    for want in [
        "JPROF_J9_METADATA ts=10",
        "method 0xc000 java/lang/Math.sqrt(D)D",
        "startColdPC = 0x7f0020000400",
        "numExcptionRanges = 0x0002 (count 2)",
        "exception ranges: 2",
        "[0x10, 0x30) handler=0x400 catchType=3",
        "inlined call sites: 3",
        "[1] method=0xc000 callerIndex=0 bci=4 sameReceiver=false",
        "stack atlas: maps=6 mapBytes=2",
        "map +0x10..=+0x1f callerIndex=1 bci=2 registerSaveDescription=0x5 registerMap=0x3 bits=0081 liveMonitors=0101",
        "map +0x20..=+0x2f callerIndex=0 bci=7 (bytecode info only)",
        "stack alloc map: firstStackMap=",
        "OSR section 0: size=",
        "OSR section 1: size=16 catchBlocks(by callerIndex+1)=[64, 0]",
        "GPU: signature=\"Lk;run()V\" ptxKernels=2",
        "ptx[1] \".version 2\"",
        "bytecode PC map: 1 entries",
        "numExcptionRanges = 0xc001 (count 1, wide, bytecode PCs)",
        "method/callerIndex=0xa000 bytecodePC=17",
        "internalPointerRegisters(size=5)=[4:[7, 9]]",
        "internal pointer map: firstStackMap=",
        "indexOfFirst=3 offsetOfFirst=-24 pinningArrays=[1:[5, 6] 4:[]]",
        "JPROF_J9_METADATA 2",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains("problem in"), "{text}");
}

/// A recording of `records` with one side file.
fn recording_with(kind: SideKind, path: &str, data: &[u8], records: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = s::recording_bytes(&s::meta("fp"), records);
    bytes.extend(encode_chunk(
        ChunkKind::SIDE_FILE,
        &encode_side_piece(&SidePiece {
            kind,
            pid: s::PID,
            read_at: 0,
            offset: 0,
            path,
            data,
        }),
    ));
    bytes.extend(encode_chunk(ChunkKind::END, b""));
    bytes
}

#[test]
fn openj9_perf_map_names_warm_and_cold_code_with_its_tier() {
    let pid = s::PID;
    let map = b"0x7f3c2a400100 1A4 demo/Main.loop(I)J_scorching
0x7f3c2a4f0000 3C demo/Main.loop(I)J_scorching
0x7f3c2a400400 80 demo/Util.pad(I)V_warm_fsd
0x7f3c2a400500 40 demo/Util.init()V_noOpt_fsd
";
    let records = vec![
        s::comm(pid, pid, "java", true, 1),
        s::sample(pid, pid, 1_000, 1, &[0x7f3c2a400110], &[], None, &[]),
        s::sample(pid, pid, 2_000, 1, &[0x7f3c2a4f0010], &[], None, &[]),
        s::sample(pid, pid, 3_000, 1, &[0x7f3c2a400410], &[], None, &[]),
        s::sample(pid, pid, 4_000, 1, &[0x7f3c2a400510], &[], None, &[]),
    ];
    let bytes = recording_with(SideKind::PERF_MAP, "/tmp/perf-4242.map", map, &records);
    let profile = resolve(&s::open(bytes), &ResolveOptions::default()).unwrap();
    assert_eq!(
        s::folded(&profile),
        [
            "java;demo.Main.loop",
            "java;demo.Main.loop",
            "java;demo.Util.pad",
            "java;demo.Util.init"
        ]
    );
    let tiers: Vec<Option<(&str, TierClass)>> = profile
        .samples
        .iter()
        .map(|sample| {
            profile
                .tier(*sample.stack.last().unwrap())
                .map(|t| (t.label.as_str(), t.class))
        })
        .collect();
    // noOpt is compiled without the optimizer: baseline; every other hotness is optimized.
    assert_eq!(
        tiers,
        [
            Some(("scorching", TierClass::Optimized)),
            Some(("scorching", TierClass::Optimized)),
            Some(("warm, FSD", TierClass::Optimized)),
            Some(("noOpt, FSD", TierClass::Baseline))
        ]
    );
}

#[test]
fn report_gets_inline_frames_for_samples_in_openj9_bodies() {
    let pid = s::PID;
    let (a, b, dump) = both_bodies(pid);
    let records = vec![
        s::comm(pid, pid, "java", true, 1),
        // Leaf IP in warm code, three levels deep.
        s::sample(pid, pid, 1_000, 1, &[a.start_pc + 0x15], &[], None, &[]),
        // Leaf IP in the cold code of one body, called from the other: the return address
        // 0x12001 is looked up at 0x12000, the call's last byte (return-address rule).
        s::sample(
            pid,
            pid,
            2_000,
            1,
            &[a.start_pc + 0x425, b.start_pc + 0x12001],
            &[],
            None,
            &[],
        ),
    ];
    let bytes = recording_with(
        SideKind::JITDUMP,
        "/nonexistent/jit-4242.dump",
        &dump,
        &records,
    );
    // `symbolize -i` reads the same side data and prints chains with bytecode indexes.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jprof.data");
    std::fs::write(&file, &bytes).unwrap();
    assert_eq!(
        stdout_ok(&[
            "symbolize",
            "-i",
            file.to_str().unwrap(),
            &format!("{:#x}", b.start_pc + 3)
        ]),
        "app/Main.run()V bci=3\n"
    );
    let recording = s::open(bytes);
    let profile = resolve(&recording, &ResolveOptions::default()).unwrap();
    assert_eq!(
        s::folded(&profile),
        [
            "java;app.Main.run;app.Shape.area;java.lang.Math.sqrt",
            "java;app.Main.run;app.Shape.area;app.Main.run;app.Shape.area;java.lang.Math.sqrt",
        ]
    );
    let kinds: Vec<FrameKind> = profile.samples[1]
        .stack
        .iter()
        .map(|&id| profile.frame(id).kind)
        .collect();
    use FrameKind::*;
    assert_eq!(kinds, [Root, Jit, Inlined, Jit, Inlined, Inlined]);
}

#[test]
fn damaged_metadata_becomes_a_note_and_the_body_keeps_its_name() {
    use jprof::symbolize::jit_index::JitIndex;
    let a = three_levels();
    let mut dump = jitdump(9, &[(&a, "app.Main.run")]);
    // gcStackAtlas (eyecatchers + 88) of the image, which starts 36 bytes into the record.
    let field = jitdump::HEADER_LEN + 16 + 36 + 24 + 88;
    dump[field..field + 8].copy_from_slice(&1u64.to_le_bytes());
    let mut index = JitIndex::default();
    index.add_jitdump(9, "jit-9.dump", &dump, &Default::default());
    assert!(
        index.notes.iter().any(|n| n.contains("stack atlas")),
        "{:?}",
        index.notes
    );
    let frames = index.frames(9, a.start_pc + 0x15, u64::MAX).unwrap();
    let names: Vec<&str> = frames.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["app.Main.run"]);
}

/// OpenJ9 fires CompiledMethodLoad twice for one body: the warm part, then the cold part with
/// the same name and either no metadata of its own or the warm part's again. A PC in the cold
/// part must still decode with the body's metadata; a body placed between the two parts keeps
/// its own name.
#[test]
fn the_cold_part_reported_on_its_own_keeps_the_bodys_inline_chain() {
    use jprof::format::jitdump_write as w;
    let pid = s::PID;
    let a = three_levels();
    let (cold_off, cold_size) = a.cold.unwrap();
    let methods: Vec<(u64, String)> = names()
        .into_iter()
        .map(|(m, n)| (m, n.to_string()))
        .collect();
    let image = a.build();
    let metadata = |code_addr: u64| {
        w::j9_metadata(
            10,
            &w::J9Metadata {
                code_addr,
                metadata_addr: a.metadata_addr,
                struct_size: a.struct_size,
                flags: a.eyecatchers as u32,
                image: &image,
                methods: &methods,
            },
        )
    };
    let load = |ts: u64, code_addr: u64, size: u64, index: u64, name: &str| {
        w::code_load(
            ts,
            &w::CodeLoad {
                pid,
                tid: pid,
                code_addr,
                code_index: index,
                name,
                code: &vec![0x90; size as usize],
            },
        )
    };
    for metadata_again in [false, true] {
        let mut dump = w::header(pid, 0, false);
        dump.extend(metadata(a.start_pc));
        dump.extend(load(10, a.start_pc, a.warm_size, 1, "app.Main.run"));
        // Another body between the warm and the cold part.
        dump.extend(load(11, a.start_pc + 0x200, 0x100, 2, "app.Other.between"));
        if metadata_again {
            dump.extend(metadata(a.start_pc + cold_off));
        }
        dump.extend(load(
            12,
            a.start_pc + cold_off,
            cold_size,
            3,
            "app.Main.run",
        ));
        dump.extend(w::close(100));
        let records = vec![
            s::comm(pid, pid, "java", true, 1),
            s::sample(pid, pid, 1_000, 1, &[a.start_pc + 0x425], &[], None, &[]),
            s::sample(pid, pid, 2_000, 1, &[a.start_pc + 0x210], &[], None, &[]),
        ];
        let bytes = recording_with(
            SideKind::JITDUMP,
            "/nonexistent/jit-4242.dump",
            &dump,
            &records,
        );
        let profile = resolve(&s::open(bytes), &ResolveOptions::default()).unwrap();
        assert_eq!(
            s::folded(&profile),
            [
                "java;app.Main.run;app.Shape.area;java.lang.Math.sqrt",
                "java;app.Other.between",
            ],
            "metadata sent again with the cold part: {metadata_again}"
        );
    }
}
