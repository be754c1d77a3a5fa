//! The Node overhead of `cargo xtask bench` (issue 16): a ≥ 7 s V8 workload
//! (tests/fixtures/shared/src/tokens.js) run with jprof's V8 flags alone, and under
//! `jprof record` (which adds the same flags), alternated. The target's own wall time is taken
//! by GNU time around `node` itself, so jprof's start-up and finalization do not count: the
//! slowdown is what the profiled program feels.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::measure::{median, GNU_TIME};
use crate::workspace::{root, target_dir};

/// Rounds of tokens.js: about 7 s alone on this kind of machine.
const ROUNDS: &str = "18000";
/// The flags jprof gives Node (record/runtimes.rs).
const NODE_FLAGS: [&str; 3] = [
    "--perf-prof",
    "--perf-prof-unwinding-info",
    "--interpreted-frames-native-stack",
];

/// Runs `command` under GNU time; returns the seconds it printed for `node`.
fn node_seconds(mut command: Command, times: &Path) -> Result<f64> {
    let status = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()?;
    if !status.success() {
        bail!("a node run failed ({status})");
    }
    let text = std::fs::read_to_string(times)?;
    text.lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("no time in {}: {text}", times.display()))
}

pub fn compare(jprof: &Path, runs: usize) -> Result<String> {
    if !Path::new(GNU_TIME).exists() {
        bail!("the Node comparison needs {GNU_TIME}: apt-get install time");
    }
    let dir = target_dir().join("bench-node");
    std::fs::create_dir_all(&dir)?;
    let script = root().join("tests/fixtures/shared/src/tokens.js");
    let times = dir.join("time.txt");
    let data = dir.join("node.data");
    let timed_node = |flags: bool| -> Vec<OsString> {
        let mut v: Vec<OsString> = vec![
            GNU_TIME.into(),
            "-f".into(),
            "%e".into(),
            "-o".into(),
            times.clone().into(),
            "node".into(),
        ];
        if flags {
            v.extend(NODE_FLAGS.iter().map(OsString::from));
        }
        v.extend([script.clone().into_os_string(), ROUNDS.into()]);
        v
    };
    let mut seconds: [Vec<f64>; 2] = Default::default();
    eprintln!("== node overhead: V8 flags alone vs jprof record ({runs} runs, ~7 s each)");
    for round in 0..runs {
        eprint!("\rround {}/{runs}", round + 1);
        for k in 0..2 {
            let variant = (round + k) % 2;
            let command = if variant == 0 {
                let argv = timed_node(true);
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]).current_dir(&dir);
                c
            } else {
                let mut c = Command::new(jprof);
                c.args(["record", "-o"])
                    .arg(&data)
                    .arg("--")
                    .args(timed_node(false))
                    .current_dir(&dir);
                c
            };
            seconds[variant].push(node_seconds(command, &times)?);
        }
        // The runs' jitdumps and V8 logs (jprof removes its own).
        for entry in std::fs::read_dir(&dir)?.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("jit-") || name.ends_with(".log") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    eprintln!();
    let [alone, profiled] = seconds.map(median);
    let mut table = String::from("\n### Node: target slowdown under `jprof record`\n\n");
    let _ = writeln!(
        table,
        "`node tokens.js {ROUNDS}`, its own wall time (GNU time around `node`), median of {runs} alternated runs:\n"
    );
    table += "| variant | node's wall time (s) | slowdown |\n|---|---:|---:|\n";
    let _ = writeln!(
        table,
        "| node with jprof's V8 flags, alone | {alone:.2} | 1.000× |"
    );
    let _ = writeln!(
        table,
        "| the same under `jprof record` | {profiled:.2} | **{:.3}×** |",
        profiled / alone
    );
    table += "\nGoal: within 2% (≤ 1.020×).\n";
    Ok(table)
}
