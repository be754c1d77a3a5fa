//! `jprof report -i FILE.mlpd` against mprof-report: on the shared calls fixture and the local
//! sample-mode file (their mprof-report outputs are stored next to them), and on files a live
//! Mono writes during the test, compared with the installed mprof-report section by section.
//! Flame-graph inputs (folded stacks) are checked for their totals and filters, and the calls
//! fixture's folded stacks against a golden file (`JPROF_BLESS=1` rewrites it).

use crate::cli_support;
use cli_support::stdout_ok;

use crate::golden_support;
use crate::mlpd_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared");

fn calls_file() -> PathBuf {
    PathBuf::from(format!("{FIXTURES}/mono/shapes-calls.mlpd"))
}

fn sample_file() -> PathBuf {
    PathBuf::from(format!("{FIXTURES}/mono/shapes-sample.mlpd"))
}

fn report(file: &Path, extra: &[&str]) -> String {
    let mut args = vec!["report", "-i", file.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    stdout_ok(&args)
}

/// mprof-report's output split into sections: title line → lines. Lines before the first
/// section (decoding warnings) are under "".
fn sections(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut title = String::new();
    let mut after_blank = false;
    for line in text.lines() {
        if line.is_empty() {
            after_blank = true;
            continue;
        }
        if after_blank && !line.starts_with(['\t', ' ']) {
            title = line.to_string();
        }
        after_blank = false;
        out.entry(title.clone()).or_default().push(line.to_string());
    }
    out
}

fn call_rows(section: &[String]) -> Vec<String> {
    let mut rows: Vec<String> = section
        .iter()
        .filter(|l| l.starts_with(' ') && !l.contains("Total(ms)"))
        .cloned()
        .collect();
    rows.sort();
    rows
}

/// Checks one file: every mprof-report section equals ours, and the method call table has
/// every row of mprof-report's verbose table (`verbose_calls`) and no other.
fn assert_agrees(ours: &str, default_report: &str, verbose_calls: Option<&str>) {
    let ours = sections(ours);
    let theirs = sections(default_report);
    for (title, lines) in &theirs {
        if title == "Method call summary" {
            continue;
        }
        assert_eq!(ours.get(title), Some(lines), "section {title:?}");
    }
    if let Some(verbose) = verbose_calls {
        let verbose = sections(verbose);
        let title = "Method call summary".to_string();
        let rows = |s: &BTreeMap<String, Vec<String>>| s.get(&title).map(|t| call_rows(t));
        assert_eq!(rows(&ours), rows(&verbose));
        let total =
            |s: &BTreeMap<String, Vec<String>>| s.get(&title).and_then(|t| t.last().cloned());
        assert_eq!(total(&ours), total(&verbose), "Total calls");
    }
}

#[test]
fn calls_fixture_text_agrees_with_mprof_report() {
    let ours = report(&calls_file(), &["--format", "text"]);
    let read =
        |name: &str| std::fs::read_to_string(format!("{FIXTURES}/mono/{name}")).expect("ref");
    assert_agrees(
        &ours,
        &read("shapes-calls.mprof-report.txt"),
        Some(&read("shapes-calls.mprof-report-calls-verbose.txt")),
    );
    assert!(ours.contains(
        "\n      28        7         25 (wrapper runtime-invoke) object:runtime_invoke_void"
    ));
    assert!(ours
        .contains("       2        0        248 Shapes.Fractal:Subdivide (Shapes.Polygon,int)\n"));
    assert!(ours.starts_with(
        "unmatched leave at stack pos: 2 for method System.Globalization.CultureInfo:CreateSpecificCulture (string)\n"
    ));
}

#[test]
fn sample_file_text_equals_mprof_report() {
    let ours = report(&sample_file(), &["--format", "text"]);
    let theirs = std::fs::read_to_string(format!("{FIXTURES}/mono/shapes-sample.mprof-report.txt"))
        .expect("ref");
    assert_eq!(ours, theirs);
}

/// Folded lines as (stack, weight).
fn folded(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(s, w)| (s.to_string(), w.parse().expect("weight")))
        .collect()
}

fn leaf_total(rows: &[(String, u64)], leaf: &str) -> u64 {
    rows.iter()
        .filter(|(s, _)| s.rsplit(';').next() == Some(leaf))
        .map(|(_, w)| w)
        .sum()
}

#[test]
fn calls_weight_counts_every_call_on_its_path() {
    let rows = folded(&report(
        &calls_file(),
        &["--format", "collapsed", "--weight", "calls"],
    ));
    // mprof-report: Total calls 1344 (matched leaves, plus frames closed at the end).
    assert_eq!(rows.iter().map(|r| r.1).sum::<u64>(), 1344);
    assert_eq!(leaf_total(&rows, "Shapes.Fractal:Subdivide_[j]"), 248);
    assert_eq!(leaf_total(&rows, "Shapes.Polygon:Perimeter_[j]"), 192);
    assert_eq!(leaf_total(&rows, "Shapes.Polygon:Area_[j]"), 64);
    assert!(rows.iter().all(|(s, _)| !s.starts_with("thread 0x")));
    // No weight given: calls, since the file has no sample hits.
    assert_eq!(
        report(&calls_file(), &["--format", "collapsed"]),
        report(
            &calls_file(),
            &["--format", "collapsed", "--weight", "calls"]
        )
    );
    let text = report(
        &calls_file(),
        &["--format", "collapsed", "--weight", "calls"],
    );
    golden_support::golden("mono-shapes-calls.calls.folded", &text);
}

#[test]
fn time_weight_is_self_time_and_adds_up_to_the_roots() {
    let rows = folded(&report(
        &calls_file(),
        &["--format", "collapsed", "--weight", "time"],
    ));
    let text = report(&calls_file(), &["--format", "text"]);
    // RunTiler: 2 ms self in mprof-report's table (integer ms).
    let run_tiler = leaf_total(&rows, "Shapes.Program:RunTiler_[j]");
    assert_eq!(run_tiler / 1_000_000, 2, "{run_tiler}");
    assert!(text.contains("       5        2          3 Shapes.Program:RunTiler (int,int)"));
    // Self times of one thread add up to its roots' total time (no double counting).
    let main: u64 = rows
        .iter()
        .filter(|(s, _)| s.starts_with("Main;"))
        .map(|r| r.1)
        .sum();
    assert!(main / 1_000_000 >= 21, "{main}");
}

#[test]
fn sample_weight_uses_managed_backtraces_leaf_last() {
    let rows = folded(&report(&sample_file(), &["--format", "collapsed"]));
    // shapes-sample.mprof-report.txt: 253 unmanaged + 446 managed hits; Perimeter 367,
    // Area 76.
    assert_eq!(rows.iter().map(|r| r.1).sum::<u64>(), 253 + 446);
    assert_eq!(leaf_total(&rows, "Shapes.Polygon:Perimeter_[j]"), 367);
    assert_eq!(leaf_total(&rows, "Shapes.Polygon:Area_[j]"), 76);
    assert!(rows.iter().any(|(s, _)| s.starts_with("tiler-1;")
        && s.contains(";Shapes.Program:RunTiler_[j];")
        && s.ends_with(";Shapes.Polygon:Perimeter_[j]")));
    let tiler0 = folded(&report(
        &sample_file(),
        &["--format", "collapsed", "--thread", "tiler-0"],
    ));
    assert!(!tiler0.is_empty());
    assert!(tiler0.iter().all(|(s, _)| s.starts_with("tiler-0;")));
    let early = folded(&report(
        &sample_file(),
        &["--format", "collapsed", "--time", "0-0.2"],
    ));
    let early_total: u64 = early.iter().map(|r| r.1).sum();
    assert!(early_total > 0 && early_total < 266, "{early_total}");
}

#[test]
fn flame_graph_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svg = dir.path().join("mono.svg");
    report(&sample_file(), &["-o", svg.to_str().expect("utf-8")]);
    let text = std::fs::read_to_string(&svg).expect("svg");
    assert!(text.contains("Shapes.Polygon:Perimeter"));
}

/// Runs Shapes.exe under the log profiler with `options`, returns the .mlpd path.
fn live_mlpd(dir: &Path, options: &str, rounds: &str) -> PathBuf {
    let exe = format!("{FIXTURES}/mono/Shapes.exe");
    let out = dir.join(format!("{}.mlpd", options.replace([',', '='], "-")));
    let status = Command::new("mono")
        .arg(format!("--profile=log:{options},output={}", out.display()))
        .arg(&exe)
        .arg(rounds)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("mono (apt-get install mono-runtime libmono-profiler)");
    assert!(status.success());
    assert!(
        out.exists(),
        "no {} (is libmono-profiler installed?)",
        out.display()
    );
    out
}

fn mprof_report(args: &[&str], file: &Path) -> String {
    let out = Command::new("mprof-report")
        .args(args)
        .arg(file)
        .output()
        .expect("mprof-report (apt-get install mono-utils)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn live_mono_files_agree_with_the_installed_mprof_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (options, rounds) in [
        ("calls,sample", "3"),
        ("sample", "4000"),
        ("jit,calls", "1"),
    ] {
        let file = live_mlpd(dir.path(), options, rounds);
        let ours = report(&file, &["--format", "text"]);
        assert_agrees(
            &ours,
            &mprof_report(&[], &file),
            Some(&mprof_report(&["--verbose", "--reports=call"], &file)),
        );
    }
}

#[test]
fn format1_files_report_calls_and_jit_like_current_ones() {
    use jprof::format::mlpd::{EventKind, Metadata, MetadataPhase};
    let mut w = mlpd_support::V1Writer::new();
    w.begin_buffer(1_000, 0x7f00_0000_0000, 0, 0x7f00_1111_0000, 0x5555_0000);
    let jit = |method, name: &'static str| EventKind::Jit {
        method,
        code: 0x7f00_4000_0000 + (method & 0xff) * 0x100,
        size: 0x40,
        name: name.into(),
    };
    w.event(1_000, &jit(0x5555_0010, "App:Main ()"));
    w.event(1_000, &jit(0x5555_0020, "App:Work (int)"));
    w.event(
        1_000,
        &EventKind::Metadata {
            phase: MetadataPhase::EndLoad,
            pointer: 0x7f00_0000_2000,
            what: Metadata::Image {
                name: "/app/App.exe".into(),
                mvid: None,
            },
        },
    );
    w.event(
        2_000,
        &EventKind::MethodEnter {
            method: 0x5555_0010,
        },
    );
    for i in 0..3u64 {
        w.event(
            3_000 + i * 1_000,
            &EventKind::MethodEnter {
                method: 0x5555_0020,
            },
        );
        w.event(
            3_500 + i * 1_000,
            &EventKind::MethodLeave {
                method: 0x5555_0020,
            },
        );
    }
    w.event(
        9_000,
        &EventKind::MethodLeave {
            method: 0x5555_0010,
        },
    );
    w.end_buffer();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("v1.mlpd");
    std::fs::write(&file, w.finish()).expect("write");
    let text = report(&file, &["--format", "text"]);
    assert!(
        text.contains("\tProfiler version: 0.1\n\tData version: 1\n"),
        "{text}"
    );
    assert!(text.contains("\tCompiled methods: 2\n"), "{text}");
    assert!(
        text.contains("       0        0          3 App:Work (int)\n"),
        "{text}"
    );
    assert!(text.contains("Total calls: 4\n"), "{text}");
    let rows = folded(&report(
        &file,
        &["--format", "collapsed", "--weight", "time"],
    ));
    assert_eq!(
        rows,
        vec![
            (
                "thread 0x7f0011110000;App:Main_[j]".to_string(),
                7_000 - 1_500
            ),
            (
                "thread 0x7f0011110000;App:Main_[j];App:Work_[j]".to_string(),
                1_500
            ),
        ]
    );
}
