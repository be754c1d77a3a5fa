//! CPython's deep stacks (issue 27; `cargo xtask bench --python-only`): CPython 3.12 from
//! pyenv runs tests/fixtures/python/deep_calls.py (hot code 20 to 70 Python frames deep) alone,
//! under `jprof record --call-graph fp` (the default before issue 27) and under plain
//! `jprof record` (now dwarf over a 64 KiB stack copy for CPython), alternated. For each:
//! the program's own wall and CPU seconds (it prints them, start-up excluded), and for the
//! recordings the bytes per sample (the compressed perf records alone, and the whole file) and
//! the share of samples whose stack reaches `main`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::measure::median;
use crate::workspace::{root, target_dir};

/// Expressions deep_calls.py evaluates: about 3 s alone on this kind of machine.
const COUNT: &str = "120000";

/// CPython 3.12 under pyenv (`$PYENV_ROOT`, else `~/.pyenv`), any patch version.
fn python312() -> Result<PathBuf> {
    let home = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")))
        .context("neither PYENV_ROOT nor HOME is set")?;
    std::fs::read_dir(home.join("versions"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/python3.12"))
        .find(|p| p.is_file())
        .with_context(|| {
            format!(
                "the CPython comparison needs CPython 3.12 under {}/versions (pyenv install 3.12)",
                home.display()
            )
        })
}

/// The `wall W cpu C` line deep_calls.py printed on stderr.
fn own_seconds(stderr: &str) -> Result<(f64, f64)> {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("wall "))
        .with_context(|| format!("no times from deep_calls.py:\n{stderr}"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["wall", wall, "cpu", cpu] => Ok((wall.parse()?, cpu.parse()?)),
        _ => bail!("unexpected times line {line:?}"),
    }
}

/// One recording's facts.
#[derive(Default, Clone, Copy)]
struct Recorded {
    samples: u64,
    record_bytes: u64,
    file_bytes: u64,
    reach_main: f64,
}

/// Samples, compressed perf-record bytes and file size of `data`, and the share of samples
/// reaching `main`.
fn inspect(jprof: &Path, data: &Path, stderr: &str) -> Result<Recorded> {
    let samples: u64 = stderr
        .split("recorded ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no sample count in jprof's summary:\n{stderr}"))?;
    let dump = Command::new(jprof).arg("dump").arg(data).output()?;
    if !dump.status.success() {
        bail!("jprof dump {} failed", data.display());
    }
    // `@0x2a8 PERF_RECORDS_ZSTD payload @0x2b8 19432 bytes (…)`
    let record_bytes = String::from_utf8_lossy(&dump.stdout)
        .lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            match words.as_slice() {
                [_, "PERF_RECORDS_ZSTD" | "PERF_RECORDS", "payload", _, n, "bytes", ..] => {
                    n.parse::<u64>().ok()
                }
                _ => None,
            }
        })
        .sum();
    let report = Command::new(jprof)
        .args(["report", "-f", "collapsed", "-o", "-", "-i"])
        .arg(data)
        .output()?;
    if !report.status.success() {
        bail!("jprof report -i {} failed", data.display());
    }
    let (mut all, mut main) = (0u64, 0u64);
    for line in String::from_utf8_lossy(&report.stdout).lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let n: u64 = n.parse().unwrap_or(0);
        all += n;
        if stack
            .split(';')
            .any(|f| f.starts_with("main deep_calls.py"))
        {
            main += n;
        }
    }
    Ok(Recorded {
        samples,
        record_bytes,
        file_bytes: std::fs::metadata(data)?.len(),
        reach_main: main as f64 / all.max(1) as f64,
    })
}

pub fn compare(jprof: &Path, runs: usize) -> Result<String> {
    let python = python312()?;
    let dir = target_dir().join("bench-python");
    std::fs::create_dir_all(&dir)?;
    let program = root().join("tests/fixtures/python/deep_calls.py");
    let data = dir.join("python.data");
    let names = [
        "CPython 3.12 alone (no perf support)",
        "`jprof record --call-graph fp` (the default before)",
        "`jprof record` (now: dwarf, 64 KiB copy)",
    ];
    let mut wall: [Vec<f64>; 3] = Default::default();
    let mut cpu: [Vec<f64>; 3] = Default::default();
    let mut recorded = [Recorded::default(); 3];
    eprintln!("== CPython deep stacks: alone, jprof fp, jprof default ({runs} runs, ~3 s each)");
    for round in 0..runs {
        eprint!("\rround {}/{runs}", round + 1);
        for k in 0..3 {
            let variant = (round + k) % 3;
            let mut command = match variant {
                0 => Command::new(&python),
                _ => {
                    let mut c = Command::new(jprof);
                    c.args(["record", "-o"]).arg(&data);
                    if variant == 1 {
                        c.args(["--call-graph", "fp"]);
                    }
                    c.arg("--").arg(&python);
                    c
                }
            };
            let out = command
                .arg(&program)
                .args([COUNT, "--times"])
                .current_dir(&dir)
                .output()
                .with_context(|| format!("cannot run {}", names[variant]))?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !out.status.success() {
                bail!("{} failed ({}):\n{stderr}", names[variant], out.status);
            }
            let (w, c) = own_seconds(&stderr)?;
            wall[variant].push(w);
            cpu[variant].push(c);
            if variant > 0 {
                recorded[variant] = inspect(jprof, &data, &stderr)?;
            }
        }
    }
    eprintln!();
    let _ = std::fs::remove_file(&data);
    let [wall0, wall1, wall2] = wall.map(median);
    let [cpu0, cpu1, cpu2] = cpu.map(median);
    let mut table = String::from(
        "\n### CPython: the deep stack copy against the previous default (`--python-only`)\n\n",
    );
    let _ = writeln!(
        table,
        "`python3.12 tests/fixtures/python/deep_calls.py {COUNT}` (pyenv's build, hot code 20–70 \
         Python frames deep), its own wall and CPU seconds (start-up excluded), median of {runs} \
         alternated runs; bytes and depth from the last recording of each:\n"
    );
    table += "| variant | wall (s) | CPU (s) | CPU vs alone | CPU vs fp | samples | perf records (bytes/sample, zstd) | whole file (bytes/sample) | samples reaching `main` |\n\
              |---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    let _ = writeln!(
        table,
        "| {} | {wall0:.2} | {cpu0:.2} | 1.000× | | | | | |",
        names[0]
    );
    for (i, (w, c)) in [(wall1, cpu1), (wall2, cpu2)].into_iter().enumerate() {
        let r = recorded[i + 1];
        let per = |bytes: u64| bytes as f64 / r.samples.max(1) as f64;
        let _ = writeln!(
            table,
            "| {} | {w:.2} | {c:.2} | {:.3}× | **{:.3}×** | {} | {:.0} | {:.0} | **{:.1}%** |",
            names[i + 1],
            c / cpu0,
            c / cpu1,
            r.samples,
            per(r.record_bytes),
            per(r.file_bytes),
            100.0 * r.reach_main
        );
    }
    table += "\nBoth recordings run CPython with its perf trampolines (jprof asks with \
              `PYTHONPERFSUPPORT=1`), which cost CPython itself some time; the default's extra \
              cost over fp is the kernel's 64 KiB stack copy per sample.\n";
    Ok(table)
}
