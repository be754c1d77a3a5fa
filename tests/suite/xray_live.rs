//! `jprof record` on XRay-instrumented programs, for real: `examples/xray/xray_demo.c` built
//! with clang's XRay, recorded in basic mode (the emulated clock this VM gives, and a real TSC
//! with a deliberately wrong frequency in a private sysfs), and the fixture binary `xray_rows`
//! in FDR mode. Checks the function names and exact call counts, the completed stacks, and the
//! printed `timeline agreement` figure.

use crate::cli_support;
use cli_support::{jprof, JPROF};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared/xray");
const ROUNDS: u32 = 200;

fn check(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Builds the example with clang's XRay instrumentation (clang and libclang-rt are required).
fn build_demo(dir: &Path) -> PathBuf {
    let bin = dir.join("xray_demo");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/xray/xray_demo.c");
    let out = Command::new("clang")
        .args([
            "-fxray-instrument",
            "-fxray-instruction-threshold=1",
            "-O1",
            "-pthread",
            "-o",
        ])
        .arg(&bin)
        .arg(src)
        .output()
        .expect("clang is installed (.ci/run installs clang and libclang-rt-14-dev)");
    check(out, "clang");
    bin
}

/// `(percent, samples)` from `timeline agreement: NN.N% of N samples`.
fn agreement(text: &str) -> (f64, usize) {
    let line = text
        .lines()
        .find(|l| l.starts_with("timeline agreement: "))
        .unwrap_or_else(|| panic!("no agreement line in:\n{text}"));
    let rest = line.trim_start_matches("timeline agreement: ");
    let (pct, n) = rest.split_once("% of ").unwrap();
    (
        pct.parse().unwrap(),
        n.trim_end_matches(" samples").parse().unwrap(),
    )
}

/// The calls column of the XRay table's row for `name`.
fn calls(text: &str, name: &str) -> u64 {
    let section = text.split("XRay: ").nth(1).expect("an XRay section");
    let row = section
        .lines()
        .find(|l| l.split_whitespace().last() == Some(name))
        .unwrap_or_else(|| panic!("no row for {name} in:\n{section}"));
    row.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// Records the demo (optionally through `wrap`, e.g. a private sysfs) and checks the report.
fn record_demo(wrap: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_demo(dir.path());
    let data = dir.path().join("x.data");
    let mut cmd = match wrap.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(JPROF);
            c
        }
        None => jprof(),
    };
    cmd.arg("record")
        .arg("-o")
        .arg(&data)
        .arg("--")
        .arg(&bin)
        .arg(ROUNDS.to_string());
    let recorded = cmd.output().unwrap();
    // jprof's summary goes to stderr (stdout is the target's).
    let stdout = String::from_utf8_lossy(&recorded.stderr).into_owned();
    assert!(
        recorded.status.success(),
        "record: {stdout}\n{}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    assert!(stdout.contains("XRay (basic mode): 1 log(s)"), "{stdout}");
    let text = check(
        jprof()
            .args(["report", "-f", "text", "-i"])
            .arg(&data)
            .output()
            .unwrap(),
        "report",
    );
    // Exact counts: two threads, ROUNDS rounds of 5 `middle` calls, each with 4 `leaf_hash`.
    let middles = 2 * ROUNDS as u64 * 5;
    assert_eq!(calls(&text, "middle"), middles, "{text}");
    assert_eq!(calls(&text, "leaf_hash"), middles * 4);
    assert_eq!(calls(&text, "spin"), middles * 5);
    assert_eq!(
        (
            calls(&text, "outer"),
            calls(&text, "main"),
            calls(&text, "worker")
        ),
        (2, 1, 1)
    );
    let folded = check(
        jprof()
            .args(["report", "-f", "collapsed", "-o", "-", "-i"])
            .arg(&data)
            .output()
            .unwrap(),
        "collapsed",
    );
    for path in [
        "main;outer;middle;leaf_hash;spin ",
        "worker;outer;middle;leaf_hash;spin ",
    ] {
        assert!(folded.contains(path), "no {path} in:\n{folded}");
    }
    text
}

#[test]
fn basic_mode_on_this_machine_clock() {
    let text = record_demo(&[]);
    let (pct, n) = agreement(&text);
    eprintln!("xray live (this machine's XRay clock): timeline agreement {pct}% of {n} samples");
    assert!(n >= 30, "too few samples in instrumented code:\n{text}");
    assert!(pct >= 95.0, "{text}");
}

#[test]
fn real_tsc_with_a_wrong_header_frequency() {
    // A private sysfs with tsc_freq_khz makes the XRay runtime use rdtscp and state this
    // (wrong) frequency in the header; jprof must use its own calibration instead.
    let script = "mount -t tmpfs none /sys/devices/system/cpu/cpu0 && \
                  echo 1000000 > /sys/devices/system/cpu/cpu0/tsc_freq_khz && exec \"$@\"";
    let text = record_demo(&["unshare", "-m", "sh", "-c", script, "sh"]);
    assert!(
        text.contains("clock: TSC via jprof's calibration"),
        "{text}"
    );
    assert!(
        text.contains("header says the TSC runs at 1000 MHz"),
        "{text}"
    );
    let (pct, n) = agreement(&text);
    eprintln!("xray live (real TSC): timeline agreement {pct}% of {n} samples");
    assert!(n >= 30, "{text}");
    assert!(pct >= 99.0, "{text}");
}

#[test]
fn fdr_mode_for_a_program_that_starts_fdr_itself() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("f.data");
    let bin = format!("{FIXTURES}/xray_rows");
    let out = jprof()
        .args(["record", "--xray", "fdr", "-o"])
        .arg(&data)
        .args(["--", &bin, "fdr"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stderr).into_owned();
    check(out, "record --xray fdr");
    assert!(stdout.contains("XRay (FDR mode): 1 log(s)"), "{stdout}");
    let text = check(
        jprof()
            .args(["report", "-f", "text", "-i"])
            .arg(&data)
            .output()
            .unwrap(),
        "report",
    );
    // The fixture's reference counts (FDR starts inside main, so main has no calls).
    for (name, n) in [
        ("mix64", 864),
        ("checksum_row", 108),
        ("fib_rec", 531),
        ("dispatch_op", 90),
    ] {
        assert_eq!(calls(&text, name), n, "{name}:\n{text}");
    }
    assert!(text.contains("timeline agreement: "), "{text}");
}

/// The entries of `dir` whose names start with `jprof-xray-` (XRay log directories).
fn xray_log_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("jprof-xray-"))
        .collect()
}

#[test]
fn a_recording_that_fails_leaves_no_xray_log_directory() {
    let work = tempfile::tempdir().unwrap();
    // jprof makes the log directory in $TMPDIR: a private one shows what it leaves behind.
    let tmp = tempfile::tempdir().unwrap();
    let fixture = format!("{FIXTURES}/xray_rows");
    // Readable but not executable: XRay is set up, the launch fails at exec.
    let not_executable = work.path().join("xray_rows");
    std::fs::copy(&fixture, &not_executable).unwrap();
    std::fs::set_permissions(&not_executable, PermissionsExt::from_mode(0o644)).unwrap();
    let cases = [
        // The output cannot be created (after the target was launched held).
        (work.path().join("missing/x.data"), fixture.clone()),
        (
            work.path().join("x.data"),
            not_executable.display().to_string(),
        ),
    ];
    for (data, binary) in cases {
        let out = jprof()
            .env("TMPDIR", tmp.path())
            .args(["record", "-o"])
            .arg(&data)
            .args(["--", &binary])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{binary} -o {data:?}: {text}");
        assert_eq!(
            xray_log_dirs(tmp.path()),
            Vec::<String>::new(),
            "{binary} -o {data:?} left its XRay log directory: {text}"
        );
    }
    // A recording that succeeds removes it too, and `--keep-side-files` keeps it.
    for (keep, left) in [(false, 0), (true, 1)] {
        let mut cmd = jprof();
        cmd.env("TMPDIR", tmp.path()).args(["record", "-o"]);
        cmd.arg(work.path().join("ok.data"));
        if keep {
            cmd.arg("--keep-side-files");
        }
        check(cmd.args(["--", &fixture]).output().unwrap(), "record");
        assert_eq!(xray_log_dirs(tmp.path()).len(), left, "keep: {keep}");
    }
}
