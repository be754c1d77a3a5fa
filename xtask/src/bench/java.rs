//! The Java overhead comparison of `cargo xtask bench`: examples/java's demo (matrix multiply
//! with an inlined dot product) for a fixed time, alone, under `jprof record` (its JVMTI agent
//! and -XX:+PreserveFramePointer, added automatically), and under `perf record -g` with the
//! same frame-pointer flag and a perf map (-XX:+DumpPerfMapAtExit). The demo runs for a fixed
//! time, so the cost shows as fewer rounds done: slowdown = rounds alone / rounds profiled.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::{interleaved, median, Measurement, Meter};
use crate::{cargo, root, run, target_dir};

const SECONDS: &str = "3";

/// The demo's "rounds N" line.
fn rounds(stdout: &Path) -> Result<f64> {
    let text = std::fs::read_to_string(stdout)?;
    text.split_whitespace()
        .skip_while(|w| *w != "rounds")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("no `rounds N` in {}: {text}", stdout.display()))
}

pub fn compare(jprof: &Path, runs: usize) -> Result<String> {
    run(cargo()
        .current_dir(root())
        .args(["build", "--release", "--package", "jprof-agent"]))?;
    let dir = target_dir().join("bench-java");
    let classes = dir.join("classes");
    std::fs::create_dir_all(&classes)?;
    let src = root().join("examples/java/demo");
    let status = Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .arg(src.join("App.java"))
        .arg(src.join("matrix/Matrix.java"))
        .status()
        .context("javac (install a JDK)")?;
    if !status.success() {
        bail!("javac failed");
    }
    let mut meter = Meter {
        gnu_time: false,
        scratch: dir.clone(),
    };
    let out = [
        dir.join("alone.txt"),
        dir.join("jprof.txt"),
        dir.join("perf.txt"),
    ];
    let mut done: [Vec<f64>; 3] = Default::default();
    let java = |extra: &[&str]| -> Vec<OsString> {
        let mut v: Vec<OsString> = vec!["java".into()];
        v.extend(extra.iter().map(OsString::from));
        v.extend([
            "-cp".into(),
            classes.clone().into_os_string(),
            "demo.App".into(),
            SECONDS.into(),
        ]);
        v
    };
    eprintln!(
        "== Java: demo alone vs jprof record (agent) vs perf record + perf map ({runs} runs)"
    );
    interleaved(runs, 3, |variant| {
        let argv = match variant {
            0 => java(&[]),
            1 => {
                let mut v = vec![
                    OsString::from(jprof),
                    "record".into(),
                    "-o".into(),
                    dir.join("java.data").into_os_string(),
                    "--".into(),
                ];
                v.extend(java(&[]));
                v
            }
            _ => {
                let mut v: Vec<OsString> = ["perf", "record", "-q", "-F", "999", "-g", "-o"]
                    .iter()
                    .map(OsString::from)
                    .collect();
                v.push(dir.join("perf.data").into_os_string());
                v.push("--".into());
                v.extend(java(&[
                    "-XX:+PreserveFramePointer",
                    "-XX:+UnlockDiagnosticVMOptions",
                    "-XX:+DumpPerfMapAtExit",
                ]));
                v
            }
        };
        let m: Measurement = meter.single(argv, &out[variant])?;
        done[variant].push(rounds(&out[variant])?);
        Ok(m)
    })?;
    let [alone, with_jprof, with_perf] = done.map(median);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nJava demo ({SECONDS} s of matrix multiplication), medians of {runs} interleaved runs:\n"
    );
    let _ = writeln!(s, "| run | rounds done | slowdown |");
    let _ = writeln!(s, "|---|---:|---:|");
    let _ = writeln!(s, "| alone | {alone:.0} | 1.00× |");
    let _ = writeln!(
        s,
        "| `jprof record` (agent, PreserveFramePointer) | {with_jprof:.0} | {:.2}× |",
        alone / with_jprof
    );
    let _ = writeln!(
        s,
        "| `perf record -g` + perf map, PreserveFramePointer | {with_perf:.0} | {:.2}× |",
        alone / with_perf
    );
    let _ = writeln!(
        s,
        "\njprof / perf slowdown ratio: **{:.2}** (≤ 1 means jprof costs no more)",
        (alone / with_jprof) / (alone / with_perf)
    );
    Ok(s)
}
