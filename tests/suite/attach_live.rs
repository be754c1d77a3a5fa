//! `jprof record -p PID`: every existing thread is sampled, threads and mappings that existed
//! before attaching are named, jitdumps already being written are found through
//! /proc/PID/maps, and the target keeps running when recording stops.

use crate::cli_support;
use cli_support::jprof;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jprof::format::perf::Record;
use jprof::recording::Recording;
use jprof::symbolize::{resolve, ResolveOptions};
use object::Object;

/// Kills the target when the test ends, pass or fail.
struct Target(Child);

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `jprof record -p PID --duration 1`; asserts success and returns its stderr (the summary).
fn record_attached(pid: u32, data: &std::path::Path) -> String {
    let out = jprof()
        .args(["record", "--duration", "1", "-o"])
        .arg(data)
        .args(["-p", &pid.to_string()])
        .output()
        .expect("run jprof");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

#[test]
fn attach_samples_every_existing_thread_and_leaves_the_target_running() {
    // Three busy threads, all created before jprof attaches: the script says so on stdout.
    let script = "import sys, threading\n\
def spin():\n    x = 0\n    while True:\n        x += 1\n\
for _ in range(2):\n    threading.Thread(target=spin, daemon=True).start()\n\
print('ready', flush=True)\n\
spin()\n";
    let mut target = Target(
        Command::new("python3")
            .args(["-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3"),
    );
    let mut ready = String::new();
    BufReader::new(target.0.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(
        ready.trim(),
        "ready",
        "the target did not start its threads"
    );
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("attach.data");
    let stderr = record_attached(target.0.id(), &data);
    assert!(stderr.contains("the target keeps running"), "{stderr}");
    assert!(
        target.0.try_wait().unwrap().is_none(),
        "the target must keep running"
    );

    let rec = Recording::open(&data).unwrap();
    assert_eq!(rec.meta.attached_pid, Some(target.0.id()));
    // The synthesized MMAP2 record of the interpreter carries its file's build id (read from
    // its notes), as the kernel's own records do, so a report can tell a changed file.
    let exe = std::fs::read_link(format!("/proc/{}/exe", target.0.id())).unwrap();
    let bytes = std::fs::read(&exe).unwrap();
    let on_disk = object::File::parse(&*bytes)
        .unwrap()
        .build_id()
        .unwrap()
        .expect("python3 has a build id")
        .to_vec();
    let layout = rec.layout();
    let recorded: Vec<Option<Vec<u8>>> = rec
        .perf_records()
        .filter_map(|raw| match layout.parse(&raw.ok()?).ok()? {
            Record::Mmap2 {
                filename, build_id, ..
            } if std::path::Path::new(&filename) == exe => Some(build_id),
            _ => None,
        })
        .collect();
    assert!(!recorded.is_empty(), "an MMAP2 record of {}", exe.display());
    assert!(
        recorded
            .iter()
            .all(|id| id.as_deref() == Some(&on_disk[..])),
        "{recorded:?}"
    );
    let profile = resolve(&rec, &ResolveOptions::default()).unwrap();
    let mut tids: Vec<u32> = profile.samples.iter().map(|s| s.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    assert!(tids.len() >= 3, "samples from threads {tids:?}");
    // Mappings synthesized from /proc/PID/maps name the interpreter's code.
    let named = profile
        .samples
        .iter()
        .filter(|s| {
            s.stack.iter().any(|&f| {
                profile
                    .frame(f)
                    .module
                    .as_deref()
                    .is_some_and(|m| m.contains("python"))
            })
        })
        .count();
    assert!(
        named * 10 >= profile.samples.len() * 9,
        "{named} of {} samples have python frames",
        profile.samples.len()
    );
    assert!(
        profile
            .threads
            .values()
            .all(|t| t.comm.starts_with("python")),
        "{:?}",
        profile.threads
    );
}

#[test]
fn attach_finds_a_jitdump_already_being_written() {
    let dir = tempfile::tempdir().unwrap();
    // Spins until the test creates `stop`, once the recording is over: a fixed run time could
    // end before jprof attached on a loaded machine.
    std::fs::write(
        dir.path().join("spin.js"),
        "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n\
         const fs = require('fs'); let s = 0;\n\
         for (let i = 1; i % 100 !== 0 || !fs.existsSync('stop'); i++) { s += fib(22); }\n\
         console.log(s);\n",
    )
    .unwrap();
    let mut target = Target(
        Command::new("node")
            .args(["--perf-prof", "spin.js"])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("node"),
    );
    // Ready once V8 has opened its jitdump (it does so before running the script).
    let jitdump = dir.path().join(format!("jit-{}.dump", target.0.id()));
    let waiting_since = Instant::now();
    while !jitdump.exists() {
        assert!(
            waiting_since.elapsed() < Duration::from_secs(20),
            "node did not open {}",
            jitdump.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let data = dir.path().join("attach-node.data");
    let stderr = record_attached(target.0.id(), &data);
    assert!(
        stderr.contains(&format!("jit-{}.dump", target.0.id())),
        "{stderr}"
    );
    // V8 buffers its jitdump writes: the records of code compiled before attaching reach the
    // file when node flushes or exits; report reads what the recording lacks from disk.
    std::fs::write(dir.path().join("stop"), "").unwrap();
    target.0.wait().expect("node exits by itself");
    let rec = Recording::open(&data).unwrap();
    let profile = resolve(&rec, &ResolveOptions::default()).unwrap();
    let in_fib = profile
        .samples
        .iter()
        .filter(|s| {
            s.stack.iter().any(|&f| {
                profile.frame(f).name.starts_with("JS:") && profile.frame(f).name.contains("fib")
            })
        })
        .count();
    assert!(
        in_fib * 2 >= profile.samples.len(),
        "{in_fib} of {} samples in JS fib",
        profile.samples.len()
    );
    drop(target);
}
