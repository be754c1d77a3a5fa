//! The Mono section of `cargo xtask bench`: a large .mlpd written by a live Mono
//! (examples/mono/Hot.cs in the log profiler's calls mode), the decoder's throughput on it
//! (benches/mlpd_parse.rs), and `jprof report -i FILE.mlpd --format text` against
//! `mprof-report` on the same file, as medians of interleaved runs and their ratio.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::benches::cargo_bench_line;
use super::measure::{interleaved, Meter};
use crate::command::available;
use crate::workspace::{root, target_dir};

/// Rounds of Hot.exe in calls mode: about 1.6 million enter/leave events, some 10 MB.
const ROUNDS: &str = "400000";

pub fn compare(jprof: &Path, runs: usize) -> Result<String> {
    for (tool, package) in [
        ("mono", "mono-runtime libmono-profiler"),
        ("mcs", "mono-mcs"),
        ("mprof-report", "mono-utils"),
    ] {
        if !available(tool) {
            bail!("the Mono comparison needs {tool}: apt-get install {package}");
        }
    }
    let dir = target_dir().join("bench-mono");
    std::fs::create_dir_all(&dir)?;
    let exe = dir.join("Hot.exe");
    let status = Command::new("mcs")
        .arg("-optimize+")
        .arg(format!("-out:{}", exe.display()))
        .arg(root().join("examples/mono/Hot.cs"))
        .status()
        .context("mcs")?;
    if !status.success() {
        bail!("mcs failed");
    }
    let mlpd = dir.join("hot-calls.mlpd");
    let _ = std::fs::remove_file(&mlpd);
    let status = Command::new("mono")
        .arg(format!("--profile=log:calls,output={}", mlpd.display()))
        .arg(&exe)
        .arg(ROUNDS)
        .stdout(std::process::Stdio::null())
        .status()
        .context("mono")?;
    if !status.success() || !mlpd.exists() {
        bail!(
            "mono did not write {} (is libmono-profiler installed?)",
            mlpd.display()
        );
    }
    let mib = std::fs::metadata(&mlpd)?.len() as f64 / (1024.0 * 1024.0);
    let decode = cargo_bench_line("mlpd_parse", &[mlpd.as_os_str()], "mlpd decode:")?;

    eprintln!("== Mono: jprof report --format text vs mprof-report on {mib:.1} MiB ({runs} runs)");
    let mut meter = Meter {
        gnu_time: false,
        scratch: dir.clone(),
    };
    let sink = dir.join("stdout.txt");
    let mut mprof_out = OsString::from("--out=");
    mprof_out.push(dir.join("mprof.txt"));
    let times = interleaved(runs, 2, |variant| {
        let argv: Vec<OsString> = match variant {
            0 => vec![
                jprof.into(),
                "report".into(),
                "-i".into(),
                mlpd.clone().into(),
                "--format".into(),
                "text".into(),
                "-o".into(),
                dir.join("jprof.txt").into(),
            ],
            _ => vec![
                "mprof-report".into(),
                mprof_out.clone(),
                mlpd.clone().into(),
            ],
        };
        meter.single(argv, &sink)
    })?;
    let (ours, theirs) = (times[0].wall, times[1].wall);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nMono .mlpd ({mib:.1} MiB, calls mode, Hot.exe {ROUNDS}):\n"
    );
    let _ = writeln!(s, "{decode} (goal ≥ 1 GB/s)\n");
    let _ = writeln!(s, "| report | wall (s), median of {runs} |");
    let _ = writeln!(s, "|---|---:|");
    let _ = writeln!(s, "| `jprof report --format text` | {ours:.3} |");
    let _ = writeln!(s, "| `mprof-report` | {theirs:.3} |");
    let _ = writeln!(
        s,
        "\nmprof-report / jprof wall-time ratio: **{:.2}** (> 1 means jprof is faster)",
        theirs / ours
    );
    Ok(s)
}
