//! `jprof report` as a command, on hand-built recordings: where each format writes, what the
//! summary says, and that bad input gives a clear error instead of a panic or an empty SVG.

use crate::cli_support;
use cli_support::jprof;

use std::path::Path;
use std::process::Output;

use jprof::format::perf::sample_type;
use jprof::format::recording::{encode_chunk, file_header, ChunkKind};
use jprof::recording::{EventConfig, HostFacts, Meta, Summary};

fn meta() -> Meta {
    Meta {
        jprof_version: "test".into(),
        command: vec!["./app".into(), "--fast".into()],
        attached_pid: None,
        target_pid: Some(4242),
        targets: Default::default(),
        host: HostFacts::default(),
        event: EventConfig {
            event: "cpu-clock".into(),
            event_note: Some("no PMU: cpu-clock instead".into()),
            frequency_hz: 999,
            sample_type: sample_type::IP
                | sample_type::TID
                | sample_type::TIME
                | sample_type::CPU
                | sample_type::PERIOD
                | sample_type::CALLCHAIN,
            regs_user_mask: 0,
            stack_user_bytes: 0,
            call_graph: jprof::recording::CallGraph::FramePointers,
            kernel_callchains: false,
            clockid: 1,
            off_cpu_ids: Vec::new(),
            off_cpu_min_ns: 0,
        },
        start_unix_ns: 0,
    }
}

/// A recording with no samples: META, SUMMARY and, when `finished`, END.
fn recording(finished: bool) -> Vec<u8> {
    let summary = Summary {
        samples: 0,
        lost_records: 3,
        lost_samples: 7,
        throttles: 2,
        threads: 5,
        processes: 1,
        wall_duration_ns: 1_500_000_000,
        exit_code: Some(0),
        stopped_by: "target exited".into(),
        notes: vec!["kernel frames unavailable".into()],
        ..Summary::default()
    };
    let mut file = file_header().to_vec();
    file.extend(encode_chunk(
        ChunkKind::META,
        &serde_json::to_vec(&meta()).unwrap(),
    ));
    file.extend(encode_chunk(
        ChunkKind::SUMMARY,
        &serde_json::to_vec(&summary).unwrap(),
    ));
    if finished {
        file.extend(encode_chunk(ChunkKind::END, &[]));
    }
    file
}

fn report(dir: &Path, args: &[&str]) -> Output {
    jprof()
        .current_dir(dir)
        .arg("report")
        .args(args)
        .output()
        .expect("run jprof")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn text_format_prints_the_recording_summary() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jprof.data"), recording(true)).unwrap();
    let out = report(dir.path(), &["--format", "text"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for expected in [
        "(complete)",
        "Command:   ./app --fast",
        "Event:     cpu-clock at 999 Hz, call graph fp, no kernel frames (no PMU: cpu-clock instead)",
        "Clock:     CLOCK_MONOTONIC",
        "Lost:      3 records lost by the kernel (a ring buffer was full; samples and other \
         records alike, not told apart); 7 samples lost by the kernel (PERF_RECORD_LOST_SAMPLES); \
         sampling throttled 2 times by the kernel",
        "Threads:   5 in 1 processes",
        "Duration:  1.500 s, exit code 0, stopped by target exited",
        "Note:      kernel frames unavailable",
        "No samples to report.",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?} in:\n{stdout}");
    }
}

#[test]
fn text_to_a_file_leaves_stdout_empty() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jprof.data"), recording(true)).unwrap();
    let out = report(dir.path(), &["--format", "text", "-o", "report.txt"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let written = std::fs::read_to_string(dir.path().join("report.txt")).unwrap();
    assert!(written.contains("Command:   ./app --fast"), "{written}");
}

#[test]
fn unfinished_recording_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jprof.data"), recording(false)).unwrap();
    let out = report(dir.path(), &["--format", "text"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("no end marker: the recorder was killed"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn truncated_recording_names_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = recording(true);
    // Cut into the SUMMARY chunk: META survives, the rest is reported as truncated.
    let meta_end = 16 + 16 + serde_json::to_vec(&meta()).unwrap().len().div_ceil(8) * 8;
    bytes.truncate(meta_end + 20);
    std::fs::write(dir.path().join("jprof.data"), bytes).unwrap();
    let out = report(dir.path(), &["--format", "text"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("is truncated or damaged"), "{stdout}");
    assert!(
        stdout.contains(&format!("at byte offset {meta_end}")),
        "{stdout}"
    );
    assert!(stdout.contains("no summary"), "{stdout}");
}

#[test]
fn empty_profile_writes_no_svg_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jprof.data"), recording(true)).unwrap();
    let out = report(dir.path(), &[]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no samples to draw"),
        "{}",
        text(&out.stderr)
    );
    // The summary still went to stdout, and no half-written SVG was left behind.
    assert!(text(&out.stdout).contains("Command:   ./app --fast"));
    assert!(!dir.path().join("flamegraph.svg").exists());
}

#[test]
fn missing_input_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = report(dir.path(), &["-i", "nope.data"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("nope.data"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn garbage_input_is_an_error_with_an_offset() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jprof.data"), b"not a recording at all").unwrap();
    let out = report(dir.path(), &["--format", "collapsed"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("at byte offset 0"), "{stderr}");
}
