//! The Java overhead comparison of `cargo xtask bench`: examples/java's demo (matrix multiply
//! with an inlined dot product) for a fixed time, alone, under `jprof record` (its JVMTI agent
//! and -XX:+PreserveFramePointer, added automatically), and under `perf record -g` with the
//! same frame-pointer flag and a perf map (-XX:+DumpPerfMapAtExit). The demo runs for a fixed
//! time, so the cost shows as fewer rounds done: slowdown = rounds alone / rounds profiled.
//! `jprof record --call-graph fp` runs beside it: the default before a JVM got the deep stack
//! copy cut down to each frame's links and `Method*` slot (docs/java.md), with both files'
//! bytes per sample.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::measure::{interleaved, median, Measurement, Meter};
use crate::command::{cargo, run};
use crate::workspace::{root, target_dir};

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
        dir.join("jprof-fp.txt"),
    ];
    let mut done: [Vec<f64>; 4] = Default::default();
    // File bytes per sample of the last recording of each jprof variant (by variant).
    let mut per_sample = [0.0f64; 4];
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
    let jprof_record = |data: &str, extra: &[&str]| -> Vec<OsString> {
        let mut v = vec![OsString::from(jprof), "record".into(), "-o".into()];
        v.push(dir.join(data).into_os_string());
        v.extend(extra.iter().map(OsString::from));
        v.push("--".into());
        v.extend(java(&[]));
        v
    };
    interleaved(runs, 4, |variant| {
        let argv = match variant {
            0 => java(&[]),
            1 => jprof_record("java.data", &[]),
            3 => jprof_record("java-fp.data", &["--call-graph", "fp"]),
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
        let data = match variant {
            1 => "java.data",
            3 => "java-fp.data",
            _ => return Ok(m),
        };
        // The recorder's summary: "recorded N samples in …".
        let summary = std::fs::read_to_string(dir.join("stderr-0.txt"))?;
        let samples: f64 = summary
            .split_whitespace()
            .skip_while(|w| *w != "recorded")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("no `recorded N samples` in {summary}"))?;
        per_sample[variant] = std::fs::metadata(dir.join(data))?.len() as f64 / samples;
        Ok(m)
    })?;
    let [alone, with_jprof, with_perf, with_fp] = done.map(median);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nJava demo ({SECONDS} s of matrix multiplication), medians of {runs} interleaved runs:\n"
    );
    let _ = writeln!(s, "| run | rounds done | slowdown | file bytes/sample |");
    let _ = writeln!(s, "|---|---:|---:|---:|");
    let _ = writeln!(s, "| alone | {alone:.0} | 1.00× | |");
    let _ = writeln!(
        s,
        "| `jprof record` (agent, PreserveFramePointer; 64 KiB copy cut down) | {with_jprof:.0} | {:.2}× | {:.0} |",
        alone / with_jprof,
        per_sample[1]
    );
    let _ = writeln!(
        s,
        "| `jprof record --call-graph fp` (the default before: 1 KiB copy) | {with_fp:.0} | {:.2}× | {:.0} |",
        alone / with_fp,
        per_sample[3]
    );
    let _ = writeln!(
        s,
        "| `perf record -g` + perf map, PreserveFramePointer | {with_perf:.0} | {:.2}× | |",
        alone / with_perf
    );
    let _ = writeln!(
        s,
        "\njprof / perf slowdown ratio: **{:.2}** (≤ 1 means jprof costs no more)",
        (alone / with_jprof) / (alone / with_perf)
    );
    Ok(s)
}
