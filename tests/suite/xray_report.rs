//! `jprof report -i XRAY_LOG --binary ELF` on the real logs: folded call counts equal to
//! `llvm-xray stack -all-stacks -aggregate-threads -stack-format=flame -aggregation-type=count`,
//! the account table equal to `llvm-xray account` (on the sorted log; jprof reads the raw one),
//! self-time weights, filters, and logs with broken stacks.

use crate::cli_support;
use cli_support::{run, stdout_ok};

use std::collections::BTreeSet;
use std::path::Path;

use jprof::format::xray::{self, write, EventKind};
use jprof::format::Endian;
use jprof::input::xray::replay::Replay;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared/xray");
const LOGS: [&str; 3] = ["fdr-tsc", "fdr-emulated", "basic-emulated"];

fn log(name: &str) -> String {
    format!("{FIXTURES}/{name}.xray")
}

fn binary() -> String {
    format!("{FIXTURES}/xray_rows")
}

fn folded(name: &str, extra: &[&str]) -> BTreeSet<String> {
    let (log, bin) = (log(name), binary());
    let mut args = vec![
        "report",
        "-i",
        &log,
        "--binary",
        &bin,
        "-f",
        "collapsed",
        "-o",
        "-",
    ];
    args.extend_from_slice(extra);
    stdout_ok(&args).lines().map(str::to_string).collect()
}

/// llvm-xray's flame lines end each stack with `;` before the count.
fn reference_folded(file: &str) -> BTreeSet<String> {
    std::fs::read_to_string(format!("{FIXTURES}/{file}"))
        .unwrap()
        .lines()
        .map(|l| l.replacen("; ", " ", 1))
        .collect()
}

#[test]
fn call_counts_equal_llvm_xray_stack() {
    for name in LOGS {
        let ours = folded(name, &["--weight", "calls"]);
        let reference = reference_folded(&format!("{name}.stack-count.folded"));
        assert_eq!(ours, reference, "{name}");
    }
}

#[test]
fn one_thread_equals_llvm_xray_per_thread_stacks() {
    for name in LOGS {
        let per_thread = reference_folded(&format!("{name}.stack-count-per-thread.folded"));
        let tids: BTreeSet<&str> = per_thread
            .iter()
            .map(|l| l.split(';').next().unwrap().trim_start_matches("thread_"))
            .collect();
        assert_eq!(tids.len(), 3);
        for tid in tids {
            let ours = folded(name, &["--weight", "calls", "--tid", tid]);
            let prefix = format!("thread_{tid};");
            let reference: BTreeSet<String> = per_thread
                .iter()
                .filter_map(|l| l.strip_prefix(&prefix).map(str::to_string))
                .collect();
            assert_eq!(ours, reference, "{name} thread {tid}");
        }
    }
}

/// `(count, [min, med, 90p, 99p, max, sum] as printed, name)` per function id.
fn account_rows(text: &str) -> Vec<(String, String, Vec<String>, String)> {
    text.lines()
        .skip_while(|l| !l.starts_with("Functions with latencies"))
        .skip(2)
        .map(|l| {
            let cleaned = l.replace([',', '[', ']'], " ");
            let words: Vec<&str> = cleaned.split_whitespace().collect();
            (
                words[0].to_string(),
                words[1].to_string(),
                words[2..8].iter().map(|s| s.to_string()).collect(),
                words.last().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn account_table_equals_llvm_xray_account_on_the_raw_unsorted_log() {
    for name in LOGS {
        let (log, bin) = (log(name), binary());
        let ours = stdout_ok(&["report", "-i", &log, "--binary", &bin, "-f", "text"]);
        let reference =
            std::fs::read_to_string(format!("{FIXTURES}/{name}.account-sorted.txt")).unwrap();
        let (ours_rows, reference_rows) = (account_rows(&ours), account_rows(&reference));
        assert_eq!(
            reference_rows.len(),
            if name.starts_with("basic") { 9 } else { 8 }
        );
        assert_eq!(ours_rows, reference_rows, "{name}:\n{ours}");
        assert!(ours.contains("3 threads of 1 process"), "{ours}");
    }
    // llvm-xray itself fails on the raw emulated logs (records not in global time order).
    let raw = std::fs::read_to_string(format!("{FIXTURES}/fdr-emulated.account-raw.txt")).unwrap();
    assert!(raw.contains("Failed accounting"));
}

#[test]
fn time_weight_is_self_time_and_sums_to_the_root_calls() {
    for name in LOGS {
        let bytes = std::fs::read(log(name)).unwrap();
        let parsed = xray::parse(&bytes).unwrap();
        let replay = Replay::run(&parsed.events);
        let root_inclusive_ns: u64 = replay
            .calls
            .iter()
            .filter(|(_, c)| replay.tree.path(c.node).len() == 1)
            .map(|(_, c)| parsed.header.ticks_to_ns(c.inclusive_ticks()))
            .sum();
        let lines = folded(name, &[]);
        let total: u64 = lines
            .iter()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        // Per-call rounding of ticks to ns may lose under 1 ns per call.
        let slack = replay.calls.len() as u64;
        assert!(
            total <= root_inclusive_ns && total + slack >= root_inclusive_ns,
            "{name}: {total} vs {root_inclusive_ns}"
        );
        // Same stacks as the call counts: time weights never invent a path.
        let paths = |set: &BTreeSet<String>| -> BTreeSet<String> {
            set.iter()
                .map(|l| l.rsplit_once(' ').unwrap().0.to_string())
                .collect()
        };
        assert_eq!(paths(&lines), paths(&folded(name, &["--weight", "calls"])));
    }
}

#[test]
fn time_range_and_missing_binary() {
    let all = folded("fdr-tsc", &["--weight", "calls"]);
    assert_eq!(
        folded("fdr-tsc", &["--weight", "calls", "--time", "0..60"]),
        all
    );
    let log = log("fdr-tsc");
    let out = stdout_ok(&[
        "report",
        "-i",
        &log,
        "-f",
        "collapsed",
        "-o",
        "-",
        "--weight",
        "calls",
    ]);
    assert!(out.contains("#8;#3;#2;#1 768"), "{out}");
    let out = run(&["report", "-i", &log, "--weight", "samples"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--weight calls"));
}

#[test]
fn flame_graph_file_and_summary() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("x.svg");
    let (log, bin) = (log("basic-emulated"), binary());
    let out = stdout_ok(&[
        "report",
        "-i",
        &log,
        "--binary",
        &bin,
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(out.contains("basic mode v3"), "{out}");
    assert!(out.contains("CLOCK_REALTIME"), "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    // Tooltips give self time with its unit (`fib_rec (1.23 ms self time, 40.00%)`).
    assert!(text.contains("fib_rec"), "{text}");
    assert!(
        [" s", " ms", " µs", " ns"]
            .iter()
            .any(|unit| text.contains(&format!("{unit} self time, "))),
        "{text}"
    );
}

#[test]
fn broken_stacks_are_counted() {
    let e = Endian::Little;
    let mut bytes = write::header(3, false, e, 1_000_000_000, [0; 16]);
    let mut rec = |kind, func, tsc| write::basic_record(&mut bytes, e, kind, 0, func, tsc, 5, 5);
    rec(EventKind::Exit, 9, 10); // unmatched: its entry was before the log
    rec(EventKind::Enter, 1, 20);
    rec(EventKind::Enter, 2, 30);
    rec(EventKind::Enter, 3, 40);
    rec(EventKind::Exit, 1, 100); // closes 3 and 2 too (their exits are missing)
    rec(EventKind::Enter, 4, 110); // still open at the end
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.xray");
    std::fs::write(&path, &bytes).unwrap();
    let p = path.to_str().unwrap();
    let text = stdout_ok(&["report", "-i", p, "-f", "text"]);
    assert!(text.contains("1 exits without a matching entry"), "{text}");
    assert!(text.contains("2 calls had no exit record"), "{text}");
    assert!(text.contains("1 calls were still open"), "{text}");
    let calls: BTreeSet<String> = stdout_ok(&[
        "report",
        "-i",
        p,
        "-f",
        "collapsed",
        "-o",
        "-",
        "--weight",
        "calls",
    ])
    .lines()
    .map(str::to_string)
    .collect();
    let expected: BTreeSet<String> = ["#1 1", "#1;#2 1", "#1;#2;#3 1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(calls, expected);
    // Self times: #3 60 ns, #2 70-60 = 10, #1 80-70 = 10.
    let time = stdout_ok(&["report", "-i", p, "-f", "collapsed", "-o", "-"]);
    assert_eq!(time, "#1 10\n#1;#2 10\n#1;#2;#3 60\n");
    assert!(Path::new(p).exists());
}

#[test]
fn account_table_filters_by_thread_and_time() {
    let (log, bin) = (log("fdr-tsc"), binary());
    let row = |text: &str, name: &str| -> Vec<String> {
        account_rows(text)
            .into_iter()
            .find(|r| r.3 == name)
            .map(|r| vec![r.0, r.1])
            .unwrap_or_default()
    };
    // The main thread (tid = pid 12768) calls mix64 96 times (fixture README).
    let main = stdout_ok(&[
        "report", "-i", &log, "--binary", &bin, "-f", "text", "--tid", "12768",
    ]);
    assert_eq!(row(&main, "mix64"), ["1", "96"], "{main}");
    assert!(row(&main, "shard_thread").is_empty(), "{main}");
    let all = stdout_ok(&[
        "report", "-i", &log, "--binary", &bin, "-f", "text", "--time", "0..60",
    ]);
    assert_eq!(row(&all, "mix64"), ["1", "864"], "{all}");
    let none = stdout_ok(&[
        "report", "-i", &log, "--binary", &bin, "-f", "text", "--time", "50..60",
    ]);
    assert!(none.contains("Functions with latencies: 0"), "{none}");
}

#[test]
fn big_endian_fdr_log_is_detected_and_reported() {
    let mut w = write::FdrWriter::new(4, Endian::Big, 1_000_000_000, 4096);
    w.begin_buffer(9, 9, 5_000_000_000);
    w.new_cpu(0, 100);
    w.function(EventKind::Enter, 1, 0);
    w.function(EventKind::Enter, 2, 10);
    w.function(EventKind::Exit, 2, 30);
    w.function(EventKind::Exit, 1, 5);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("be.xray");
    std::fs::write(&path, w.finish()).unwrap();
    let p = path.to_str().unwrap();
    let calls = stdout_ok(&[
        "report",
        "-i",
        p,
        "-f",
        "collapsed",
        "-o",
        "-",
        "--weight",
        "calls",
    ]);
    assert_eq!(calls, "#1 1\n#1;#2 1\n");
    let time = stdout_ok(&["report", "-i", p, "-f", "collapsed", "-o", "-"]);
    // #1: 100..145 with #2 110..140 inside: self 15.
    assert_eq!(time, "#1 15\n#1;#2 30\n");
    let text = stdout_ok(&["report", "-i", p, "-f", "text"]);
    assert!(text.contains("FDR mode v4, big-endian"), "{text}");
}
