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

/// `cmd` run in a mount namespace of its own whose `/tmp` is an empty directory only root can
/// write: a `/tmp` where jprof asks every runtime for its fixed names. (The shared `/tmp` of
/// these machines is sticky without `fs.protected_symlinks`, where jprof asks no runtime that
/// opens its fixed name through links: tests/suite/security_runtimes.rs.) The test's own files
/// must be outside `/tmp` (`CARGO_TARGET_TMPDIR`). Runtimes' side files and jprof's private
/// directories left in that `/tmp` afterwards are named on stderr after [`LEFT_IN_PRIVATE_TMP`].
pub fn in_private_tmp(cmd: &Command) -> Command {
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs -o mode=0755 jprof-private-tmp /tmp || exit 99; \"$0\" \"$@\"; rc=$?; \
             for f in /tmp/perf-* /tmp/perfinfo-* /tmp/jit-* /tmp/jprof-rt-* /tmp/jprof-jit-*; do \
             [ -e \"$f\" ] && echo \"{LEFT_IN_PRIVATE_TMP}$f\" >&2; done; \
             exit $rc"
        ))
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (name, value) in cmd.get_envs() {
        match value {
            Some(value) => wrapped.env(name, value),
            None => wrapped.env_remove(name),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped
}

/// What [`in_private_tmp`] says before each file left in its `/tmp`.
pub const LEFT_IN_PRIVATE_TMP: &str = "left in the private /tmp: ";

/// A temporary directory outside `/tmp`, for tests run [`in_private_tmp`].
pub fn dir_outside_tmp() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}
