//! `jprof record -p` on a Node process the user started (issue 26): the summary neither
//! understates the JIT names (V8 writes its jitdump in batches, so names still in its buffer
//! reach the file after the recording: the summary's share is marked as a lower bound), nor
//! blames a variable for a Node simply started without V8's perf flags (it says what to do).
//! Needs `node` on PATH and perf_event_open (root in CI).

use crate::cli_support;
use cli_support::jprof;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A hot loop for up to 60 s, "ready" printed once it runs.
const SCRIPT: &str = r#"
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
const end = Date.now() + 60000;
let acc = 0;
console.log('ready');
while (Date.now() < end) { acc += fib(20); }
"#;

/// The node process; killed when the test ends.
struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts node with `flags` in `dir` and waits until the script runs.
fn start_node(dir: &std::path::Path, flags: &[&str]) -> Node {
    let mut child = Command::new("node")
        .current_dir(dir)
        .env_remove("NODE_OPTIONS")
        .args(flags)
        .args(["-e", SCRIPT])
        .stdout(Stdio::piped())
        .spawn()
        .expect("node on PATH");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    Node(child)
}

/// `jprof record -p PID --duration 2`; its stderr (the summary).
fn record_attached(dir: &std::path::Path, pid: u32) -> String {
    let out = jprof()
        .args(["record", "--duration", "2", "-o"])
        .arg(dir.join("node.data"))
        .args(["-p", &pid.to_string()])
        .output()
        .expect("run jprof");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// Node started with V8's perf flags: the coverage line is there, and any share below 100%
/// is said to be a lower bound that `jprof report` improves once V8 has written the rest.
#[test]
fn attached_node_coverage_is_not_understated() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = start_node(
        dir.path(),
        &["--perf-prof", "--interpreted-frames-native-stack"],
    );
    let pid = node.0.id();
    let stderr = record_attached(dir.path(), pid);
    let line = stderr
        .lines()
        .find(|l| l.contains(&format!("JIT names: pid {pid}:")))
        .unwrap_or_else(|| panic!("no coverage line for node {pid}: {stderr}"));
    let share: f64 = line
        .split_once(&format!("pid {pid}: "))
        .and_then(|(_, rest)| rest.split('%').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no share in {line}"));
    // V8 may still hold every name of the hot code in its buffer (0% is possible).
    if share < 100.0 {
        assert!(
            line.contains("so far") && line.contains("`jprof report`"),
            "an unqualified share below 100%: {line}"
        );
    }
    // jprof set nothing: the note must not say it did.
    assert!(
        stderr.contains(&format!(
            "node (pid {pid}): it writes its JIT names (it was started with them turned on)"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("NODE_OPTIONS"), "{stderr}");
    assert!(
        node.0.try_wait().unwrap().is_none(),
        "node did not keep running"
    );
}

/// Node started without V8's perf flags: the note says what the user can do (restart it with
/// the flags, or under `jprof record --`), and blames no variable; its JIT coverage is not
/// said to be a lower bound.
#[test]
fn attached_node_without_flags_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path(), &[]);
    let pid = node.0.id();
    let stderr = record_attached(dir.path(), pid);
    let note = stderr
        .lines()
        .find(|l| l.contains(&format!("node (pid {pid}):")))
        .unwrap_or_else(|| panic!("no note for node {pid}: {stderr}"));
    assert!(note.contains("it was already running"), "{note}");
    assert!(note.contains("--perf-prof"), "{note}");
    assert!(note.contains("`jprof record -- …`"), "{note}");
    assert!(
        !note.contains("overridden") && !note.contains("NODE_OPTIONS"),
        "{note}"
    );
    // No JIT file, so no names to come: its coverage is final, not a lower bound waiting on
    // V8's buffer (the summary said "so far: … may still hold JIT names in a buffer").
    let line = stderr
        .lines()
        .find(|l| l.contains(&format!("JIT names: pid {pid}:")))
        .unwrap_or_else(|| panic!("no coverage line for node {pid}: {stderr}"));
    assert!(
        !line.contains("so far") && !line.contains("buffer"),
        "{line}"
    );
}
