//! Side files a killed recorder could not remove are removed by the next `jprof record`
//! (issue 15, docs/robustness.md). A test binary of its own: any other jprof starting
//! meanwhile (tests of the same binary run in parallel) would clean them first.

use crate::cli_support;
use cli_support::{jprof, text};

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

#[test]
fn side_files_of_a_killed_recorder_are_removed_by_the_next_run() {
    let work = tempfile::tempdir().unwrap();
    let mut child = jprof()
        .args(["record", "-o", "node.data", "--", "node", "-e"])
        .arg("const end = Date.now() + 20000; let s = 0; while (Date.now() < end) s++;")
        .current_dir(work.path())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until Node's jitdump exists, then kill jprof and Node.
    let start = Instant::now();
    let dump = loop {
        let found = std::fs::read_dir(work.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".dump"));
        if let Some(d) = found {
            break d;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "no jitdump");
        std::thread::sleep(Duration::from_millis(50));
    };
    // The recorder lists the file when it first tails it (it polls side files every second).
    let pending = std::env::temp_dir().join(format!(
        "jprof-{}/pending-{}",
        nix::unistd::geteuid().as_raw(),
        child.id()
    ));
    let start = Instant::now();
    while !std::fs::read_to_string(&pending).is_ok_and(|l| l.contains(".dump")) {
        assert!(start.elapsed() < Duration::from_secs(20), "never listed");
        std::thread::sleep(Duration::from_millis(50));
    }
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    let _ = child.wait();
    // pkill/pgrep take a regex: the script's text, escaped.
    let node = r"Date\.now\(\) \+ 20000";
    let _ = Command::new("pkill").args(["-f", node]).status();
    // Until the orphaned node is gone (pgrep finds nothing).
    let start = Instant::now();
    while Command::new("pgrep")
        .args(["-f", node])
        .status()
        .is_ok_and(|s| s.success())
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "node outlived SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(dump.exists(), "the killed recorder left its side file");
    let out = jprof()
        .args(["record", "-o", "next.data", "--", "true"])
        .current_dir(work.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!dump.exists(), "{}", text(&out));
    let logs = std::fs::read_dir(work.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("isolate-"))
        .count();
    assert_eq!(logs, 0);
}
