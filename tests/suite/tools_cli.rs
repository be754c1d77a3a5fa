//! `jprof dump` and `jprof symbolize` as commands, on the real jitdumps in the shared fixtures
//! (Node, HotSpot + perf's JVMTI agent), cut-off and damaged copies of them, and a recording.

use crate::cli_support;
use cli_support::run;

use std::path::Path;
use std::process::Output;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared");

fn fixture(path: &str) -> String {
    format!("{FIXTURES}/{path}")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn lines_starting(text: &str, prefix: &str) -> usize {
    text.lines().filter(|l| l.starts_with(prefix)).count()
}

#[test]
fn dump_lists_every_record_of_the_node_jitdump() {
    let out = run(&["dump", &fixture("node/jit-13228.dump")]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(text.contains("  version     1\n"), "{text:.400}");
    assert!(text.contains("  pid         13228\n"));
    assert!(text.contains("  elf_mach    62 (x86-64)\n"));
    assert!(text.contains("(little-endian)"));
    assert!(text.contains("flags       0x0 (timestamps are CLOCK_MONOTONIC ns)"));
    // The counts of tests/suite/format_jitdump.rs: 2480 loads, 2480 unwinding infos, 36 debug infos
    // with 859 entries.
    assert_eq!(lines_starting(&text, "@0x"), 4996);
    assert_eq!(text.matches(" CODE_LOAD ts=").count(), 2480);
    assert_eq!(text.matches(" UNWINDING_INFO ts=").count(), 2480);
    assert_eq!(text.matches(" DEBUG_INFO ts=").count(), 36);
    let entries = text
        .lines()
        .filter(|l| l.starts_with("    0x") && l.contains(" discrim="))
        .count();
    assert_eq!(entries, 859);
    assert!(text.starts_with("jitdump, "));
    assert!(
        text.contains("\n@0x28 "),
        "the first record is right after the header"
    );
    assert!(text.contains("4996 records (CODE_LOAD 2480, DEBUG_INFO 36, UNWINDING_INFO 2480)"));
    assert!(!text.contains("note:"), "a complete file has no note");
}

#[test]
fn dump_lists_the_java_jitdump_with_names_and_lines() {
    let out = run(&["dump", &fixture("java/jit-13732.dump")]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(text.contains("768 records (CODE_CLOSE 1, CODE_LOAD 654, DEBUG_INFO 113)"));
    let dot = text
        .lines()
        .find(|l| l.contains(" CODE_LOAD ") && l.contains("code_addr=0x7f029541e440 "))
        .expect("Matrix.dot's load is listed");
    assert!(
        dot.starts_with("@0x74405 CODE_LOAD ts=2881155773405 "),
        "{dot}"
    );
    assert!(dot.contains("code_size=0x1f0"), "{dot}");
    assert!(dot.ends_with("name=\"Ldemo/matrix/Matrix;dot(Ldemo/matrix/Matrix;II)D\""));
    assert!(text.contains(
        "@0x740ed DEBUG_INFO ts=2881155771685 size=792 code_addr=0x7f029541e440 entries=19\n"
    ));
    assert!(text.contains("    0x7f029541e590 demo/matrix/Matrix.java:29 discrim=0\n"));
    assert!(text.lines().last().unwrap().contains("records ("));
    assert!(text.contains(" CODE_CLOSE ts="));
}

#[test]
fn dump_of_a_cut_off_jitdump_notes_where_it_ends_and_succeeds() {
    let full = std::fs::read(fixture("node/jit-13228.dump")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jit-1.dump");
    std::fs::write(&path, &full[..100_000]).unwrap();
    let out = run(&["dump", path.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains("note: the file ends mid-record at offset 98812 (0x181fc)"),
        "{}",
        &text[text.len().saturating_sub(400)..]
    );
    assert_eq!(lines_starting(&text, "@0x"), 261);
}

#[test]
fn dump_of_a_damaged_jitdump_lists_what_was_read_then_fails_with_the_offset() {
    let mut bytes = std::fs::read(fixture("java/jit-13732.dump")).unwrap()[..5000].to_vec();
    // The second record starts at 0x8f: give it an impossible total_size of 5.
    bytes[0x8f + 4..0x8f + 8].copy_from_slice(&5u32.to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jit-2.dump");
    std::fs::write(&path, &bytes).unwrap();
    let out = run(&["dump", path.to_str().unwrap()]);
    assert!(!out.status.success());
    let text = stdout(&out);
    assert_eq!(lines_starting(&text, "@0x"), 1, "{text}");
    assert!(text.contains("name=\"flush_icache_stub\""));
    assert!(text.contains("error at offset 147 (0x93)"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at byte offset 147"), "{err}");
    assert!(err.contains("total_size of at least 16"), "{err}");

    // Not a jitdump at all: the magic is named.
    std::fs::write(&path, b"not a jitdump, not a recording, just text........").unwrap();
    let out = run(&["dump", path.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("jitdump magic"));
}

#[test]
fn dump_lists_a_recordings_chunks() {
    use jprof::format::recording::{encode_chunk, encode_side_piece, file_header};
    use jprof::format::recording::{ChunkKind, SideKind, SidePiece};
    let jit = std::fs::read(fixture("java/jit-13732.dump")).unwrap();
    let mut file = file_header().to_vec();
    file.extend(encode_chunk(ChunkKind::META, b"{}"));
    file.extend(encode_chunk(
        ChunkKind::SIDE_FILE,
        &encode_side_piece(&SidePiece {
            kind: SideKind::JITDUMP,
            pid: 13732,
            read_at: 5,
            offset: 0,
            path: "/tmp/jit-13732.dump",
            data: &jit[..1000],
        }),
    ));
    file.extend(encode_chunk(ChunkKind::END, b""));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.data");
    std::fs::write(&path, &file).unwrap();
    let out = run(&["dump", path.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(text.starts_with("jprof recording, "), "{text}");
    assert!(
        text.contains("@0x10 META payload @0x20 2 bytes (bad JSON)"),
        "{text}"
    );
    assert!(text.contains(
        "SIDE_FILE payload @0x38 1047 bytes: jitdump \"/tmp/jit-13732.dump\" pid=13732 bytes 0..1000 read_at=5"
    ), "{text}");
    assert!(text.contains("3 chunks"));
    assert!(!text.contains("note:"));

    // Cut inside the last chunk: a note, not a failure.
    std::fs::write(&path, &file[..file.len() - 30]).unwrap();
    let out = run(&["dump", path.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).contains("note: the file is truncated"));
    // A flipped payload byte: the CRC fails, which is corruption.
    let mut bad = file.clone();
    bad[0x40] ^= 1;
    std::fs::write(&path, &bad).unwrap();
    let out = run(&["dump", path.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CRC"));
}

#[test]
fn symbolize_names_java_code_with_its_line_from_the_jitdump() {
    let dump = fixture("java/jit-13732.dump");
    // Inside Matrix.dot (code_addr 0x7f029541e440, size 496), at a DEBUG_INFO entry.
    let out = run(&["symbolize", "--jitdump", &dump, "0x7f029541e590"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout(&out),
        "demo.matrix.Matrix.dot at demo/matrix/Matrix.java:29\n"
    );
    // Without 0x, several addresses, with -a: one block per address; before the first DEBUG_INFO
    // entry there is no line; an address in no code is unknown.
    let out = run(&[
        "symbolize",
        "--jitdump",
        &dump,
        "-a",
        "7f029541e5ba",
        "0x7f029541e440",
        "0x1234",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout(&out),
        "0x7f029541e5ba\ndemo.matrix.Matrix.dot at demo/matrix/Matrix.java:29\n\
         0x7f029541e440\ndemo.matrix.Matrix.dot\n\
         0x1234\n?? (0x1234)\n"
    );
    // Just past the end of the 496-byte body.
    let out = run(&["symbolize", "--jitdump", &dump, "0x7f029541e630"]);
    assert_eq!(stdout(&out), "?? (0x7f029541e630)\n");
}

#[test]
fn symbolize_rejects_bad_arguments() {
    let dump = fixture("java/jit-13732.dump");
    let out = run(&["symbolize", "--jitdump", &dump, "0xnothex"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a hexadecimal address"));
    let out = run(&["symbolize", "0x1234"]);
    assert!(!out.status.success(), "a source is required");
    let missing = Path::new(FIXTURES).join("no-such.dump");
    let out = run(&["symbolize", "--jitdump", missing.to_str().unwrap(), "0x1"]);
    assert!(!out.status.success());
}

#[test]
fn symbolize_reads_jit_code_from_a_recordings_side_files() {
    use jprof::format::recording::{encode_chunk, encode_side_piece, file_header};
    use jprof::format::recording::{ChunkKind, SideKind, SidePiece};
    use jprof::recording::{EventConfig, HostFacts, Meta};
    let meta = Meta {
        jprof_version: "test".into(),
        command: vec!["java".into()],
        attached_pid: None,
        target_pid: Some(13732),
        targets: Default::default(),
        host: HostFacts::default(),
        event: EventConfig {
            event: "cpu-clock".into(),
            event_note: None,
            frequency_hz: 999,
            sample_type: 0,
            regs_user_mask: 0,
            stack_user_bytes: 0,
            call_graph: jprof::recording::CallGraph::FramePointers,
            kernel_callchains: false,
            clockid: 1,
            off_cpu_ids: Vec::new(),
            off_cpu_min_ns: 0,
        },
        start_unix_ns: 0,
    };
    let jit = std::fs::read(fixture("java/jit-13732.dump")).unwrap();
    let mut file = file_header().to_vec();
    file.extend(encode_chunk(
        ChunkKind::META,
        &serde_json::to_vec(&meta).unwrap(),
    ));
    file.extend(encode_chunk(
        ChunkKind::SIDE_FILE,
        &encode_side_piece(&SidePiece {
            kind: SideKind::JITDUMP,
            pid: 13732,
            read_at: 0,
            offset: 0,
            path: "/tmp/jit-13732.dump",
            data: &jit,
        }),
    ));
    file.extend(encode_chunk(ChunkKind::END, b""));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.data");
    std::fs::write(&path, &file).unwrap();
    let input = path.to_str().unwrap();
    // The pid comes from META.
    let out = run(&["symbolize", "-i", input, "0x7f029541e590", "0x10"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout(&out),
        "demo.matrix.Matrix.dot at demo/matrix/Matrix.java:29\n?? (0x10)\n"
    );
    // Another process has no such code.
    let out = run(&["symbolize", "-i", input, "--pid", "1", "0x7f029541e590"]);
    assert_eq!(stdout(&out), "?? (0x7f029541e590)\n");
}
