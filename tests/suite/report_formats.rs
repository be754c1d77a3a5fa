//! `jprof report --format firefox|pprof|speedscope|collapsed` on one fixed, hand-built
//! recording (two threads, JIT code from a jitdump with a tier and an inline chain, an unknown
//! native frame, a kernel frame), compared with golden files in tests/golden/. The outputs
//! are decoded (gunzip, JSON, protobuf) and pretty-printed before the comparison, so a
//! difference reads as a diff. `JPROF_BLESS=1 cargo test --test suite report_formats::` rewrites them.
//! pprof is also read back by Go's own reader (`go tool pprof -top`; .ci/run installs golang-go).

use crate::cli_support;
use cli_support::jprof;

use crate::golden_support;
use crate::symbolize_support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use flate2::read::GzDecoder;
use golden_support::golden;
use jprof::format::jitdump::TierKind;
use jprof::format::jitdump_write as jd;
use jprof::format::recording::{encode_chunk, encode_side_piece, ChunkKind, SideKind, SidePiece};
use jprof::output::pprof;
use jprof::recording::{HostFacts, Summary};
use serde_json::Value;
use symbolize_support as s;

const PID: u32 = 100;
const WORKER: u32 = 101;
/// Sample-clock ns of the first sample.
const T0: u64 = 5_000_000_000;
const RUN: u64 = 0x7f00_0000_1000;
const HOT: u64 = 0x7f00_0000_2000;
/// A native address nothing maps: an unknown frame.
const NATIVE: u64 = 0x40_1234;
const KERNEL: u64 = 0xffff_ffff_8100_0010;

/// The jitdump of process 100: `Demo.run` (C2, with `Demo.step` inlined at 0x10..0x20) and a
/// V8-style `hot` at the Turbofan tier, both loaded before the first sample.
fn jitdump() -> Vec<u8> {
    let code = |size: usize| vec![0xc3u8; size];
    let mut f = jd::header(PID, T0 - 1_000_000, false);
    f.extend(jd::jit_tier(T0 - 900_000, 0, TierKind::OPTIMIZED, "C2"));
    f.extend(jd::debug_info2(
        T0 - 900_000,
        &["Demo.java"],
        &["Demo.run", "Demo.step"],
        &[(0, 0, 20), (1, 0, 30)],
        &[jd::Inline {
            depth: 0,
            function: 1,
            call_line: 24,
            range: (0x10, 0x10),
        }],
        &[(0, 0, 21), (0x10, 0, 33), (0x20, 0, 25)],
    ));
    f.extend(jd::code_load(
        T0 - 900_000,
        &jd::CodeLoad {
            pid: PID,
            tid: PID,
            code_addr: RUN,
            code_index: 1,
            name: "Lgolden/Demo;run()V",
            code: &code(0x40),
        },
    ));
    f.extend(jd::code_load(
        T0 - 800_000,
        &jd::CodeLoad {
            pid: PID,
            tid: PID,
            code_addr: HOT,
            code_index: 2,
            name: "JS:*hot app.js:3:10",
            code: &code(0x80),
        },
    ));
    f
}

/// The whole recording: META, records, the jitdump as a side file, SUMMARY, END.
fn recording() -> Vec<u8> {
    let mut meta = s::meta("fp");
    meta.command = vec!["app".into(), "--golden".into()];
    meta.target_pid = Some(PID);
    // Not this machine's kernel: kernel addresses stay unnamed on every machine.
    meta.host = HostFacts {
        kernel_release: "golden-test-kernel".into(),
        ..HostFacts::default()
    };
    meta.event.event = "cpu-clock".into();
    meta.start_unix_ns = 1_700_000_000_000_000_000;
    let period = 1_001_001;
    let sample = |tid, i: u64, chain: &[u64], kernel: &[u64]| {
        s::sample(PID, tid, T0 + i * period, period, chain, kernel, None, &[])
    };
    let records = vec![
        s::comm(PID, PID, "app", true, T0 - 2_000_000),
        s::comm(PID, WORKER, "worker", false, T0 - 1_500_000),
        // main thread: run (inline step) twice, hot once, hot in a syscall once.
        sample(PID, 0, &[RUN + 0x14, NATIVE], &[]),
        sample(PID, 1, &[RUN + 0x14, NATIVE], &[]),
        sample(PID, 2, &[RUN + 0x2, NATIVE], &[]),
        sample(PID, 3, &[HOT + 0x8, RUN + 0x24, NATIVE], &[]),
        sample(PID, 4, &[HOT + 0x8, RUN + 0x24, NATIVE], &[KERNEL]),
        // worker: hot directly, and unknown native code.
        sample(WORKER, 2, &[HOT + 0x20, NATIVE], &[]),
        sample(WORKER, 5, &[NATIVE], &[]),
    ];
    let mut bytes = s::recording_bytes(&meta, &records);
    let dump = jitdump();
    bytes.extend(encode_chunk(
        ChunkKind::SIDE_FILE,
        &encode_side_piece(&SidePiece {
            kind: SideKind::JITDUMP,
            pid: PID,
            read_at: T0,
            offset: 0,
            // Not on disk anywhere, so nothing is read besides the stored bytes.
            path: "/nonexistent/jprof-golden/jit-100.dump",
            data: &dump,
        }),
    ));
    let summary = Summary {
        samples: 7,
        threads: 2,
        processes: 1,
        start_time: T0 - 2_000_000,
        end_time: T0 + 6 * period,
        exit_code: Some(0),
        stopped_by: "target exited".into(),
        ..Summary::default()
    };
    bytes.extend(encode_chunk(
        ChunkKind::SUMMARY,
        &serde_json::to_vec(&summary).unwrap(),
    ));
    bytes.extend(encode_chunk(ChunkKind::END, &[]));
    bytes
}

/// Writes the recording into a fresh directory and runs `jprof report --format FORMAT -o OUT`.
fn report(format: &str, out_name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("golden.data");
    std::fs::write(&input, recording()).unwrap();
    let out = dir.path().join(out_name);
    let result = jprof()
        .current_dir(dir.path())
        .args(["report", "--format", format, "-i"])
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "jprof report --format {format} failed:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    (dir, out)
}

fn gunzip(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "{} is gzipped", path.display());
    let mut raw = Vec::new();
    GzDecoder::new(&bytes[..]).read_to_end(&mut raw).unwrap();
    raw
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap() + "\n"
}

/// The JSON minus fields that name the jprof version.
fn without_version(mut v: Value) -> Value {
    if let Some(exporter) = v.get_mut("exporter") {
        *exporter = Value::from("jprof <version>");
    }
    v
}

#[test]
fn firefox_golden() {
    let (_dir, out) = report("firefox", "profile.json.gz");
    let v: Value = serde_json::from_slice(&gunzip(&out)).unwrap();
    // Structure a viewer relies on, checked explicitly before the whole-file comparison.
    let threads = v["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2);
    assert_eq!(threads[0]["name"], "app");
    assert_eq!(threads[1]["name"], "worker");
    assert_eq!(threads[0]["samples"]["length"], 5);
    assert_eq!(threads[1]["samples"]["length"], 2);
    assert_eq!(
        threads[0]["markers"]["length"], 2,
        "one marker per code load"
    );
    let categories: Vec<&str> = v["meta"]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(categories.contains(&"JIT") && categories.contains(&"Kernel"));
    let strings = threads[0]["stringArray"].as_array().unwrap();
    assert!(strings.iter().any(|s| s == "Demo.java"), "JIT file names");
    assert!(strings.iter().any(|s| s == "golden.Demo.run"));
    golden("formats.firefox.json", &pretty(&v));
}

#[test]
fn pprof_golden_and_round_trip() {
    let (_dir, out) = report("pprof", "profile.pb.gz");
    let bytes = std::fs::read(&out).unwrap();
    let profile = pprof::read(&bytes).unwrap();
    // Round trip: encoding the decoded message gives the same protobuf bytes.
    use prost::Message;
    assert_eq!(profile.encode_to_vec(), gunzip(&out));
    let dump = pprof::dump(&profile);
    assert!(
        dump.contains("golden.Demo.run (Demo.java:24) + Demo.step (Demo.java:33)"),
        "{dump}"
    );
    golden("formats.pprof.txt", &dump);
}

#[test]
fn pprof_reads_in_go_tool_pprof() {
    let (dir, out) = report("pprof", "profile.pb.gz");
    let result = Command::new("go")
        .args(["tool", "pprof", "-top", "-nodecount=20"])
        .arg(&out)
        .env("HOME", dir.path())
        .env("GOCACHE", dir.path().join("gocache"))
        .output()
        .expect("go runs (apt-get install golang-go; .ci/run installs it)");
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        result.status.success(),
        "go tool pprof failed:\n{stdout}\n{stderr}"
    );
    for name in [
        "Demo.step (inline)",
        "golden.Demo.run",
        // The short form of `JS:*hot app.js:3:10`.
        "hot app.js:3",
    ] {
        assert!(stdout.contains(name), "{name} missing:\n{stdout}\n{stderr}");
    }
    assert!(stdout.contains("Type: cpu"), "{stdout}");
}

#[test]
fn speedscope_golden() {
    let (_dir, out) = report("speedscope", "profile.speedscope.json");
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let profiles = v["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2, "one profile per thread");
    for p in profiles {
        assert_eq!(p["type"], "sampled");
        assert_eq!(
            p["samples"].as_array().unwrap().len(),
            p["weights"].as_array().unwrap().len()
        );
    }
    golden("formats.speedscope.json", &pretty(&without_version(v)));
}

#[test]
fn collapsed_golden() {
    let (_dir, out) = report("collapsed", "profile.folded");
    golden(
        "formats.collapsed.txt",
        &std::fs::read_to_string(&out).unwrap(),
    );
}

#[test]
fn default_output_files() {
    for (format, file) in [
        ("firefox", "profile.json.gz"),
        ("pprof", "profile.pb.gz"),
        ("speedscope", "profile.speedscope.json"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("jprof.data"), recording()).unwrap();
        let result = jprof()
            .current_dir(dir.path())
            .args(["report", "--format", format])
            .output()
            .unwrap();
        assert!(result.status.success(), "{format}");
        assert!(dir.path().join(file).is_file(), "{format} → {file}");
        let stdout = String::from_utf8_lossy(&result.stdout);
        assert!(stdout.contains(file), "{stdout}");
    }
}

/// Two jprof processes (each with its own hash seeds and address layout) write the same bytes.
#[test]
fn outputs_are_deterministic() {
    for (format, file) in [
        ("flamegraph", "a.svg"),
        ("firefox", "a.json.gz"),
        ("pprof", "a.pb.gz"),
        ("speedscope", "a.json"),
    ] {
        let (_d1, a) = report(format, file);
        let (_d2, b) = report(format, file);
        assert_eq!(
            std::fs::read(a).unwrap(),
            std::fs::read(b).unwrap(),
            "{format}"
        );
    }
}
