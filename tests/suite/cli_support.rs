//! The jprof binary as the integration tests run it, and what they read from its output.
// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStderr, Command, Output, Stdio};

/// The path of the jprof binary cargo built for these tests.
pub const JPROF: &str = env!("CARGO_BIN_EXE_jprof");

/// A command running jprof.
pub fn jprof() -> Command {
    Command::new(JPROF)
}

/// Runs `jprof ARGS` to completion.
pub fn run(args: &[&str]) -> Output {
    jprof().args(args).output().expect("run jprof")
}

/// Runs `jprof ARGS`, which must succeed; returns its stdout.
pub fn stdout_ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "jprof {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// stdout followed by stderr, as text.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `jprof record -a ARGS -o DATA`, returned once it says it records (the processes running
/// then were described from /proc, any that starts after is new to it), with its stderr (the
/// summary) still to read.
pub fn start_all_cpus(data: &Path, args: &[&str]) -> (Child, BufReader<ChildStderr>) {
    let mut run = jprof()
        .args(["record", "-a"])
        .args(args)
        .arg("-o")
        .arg(data)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(run.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("jprof: recording every process on every CPU (-a)"),
        "{line}"
    );
    (run, stderr)
}
