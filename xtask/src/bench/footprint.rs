//! Issue 16's footprint, side by side with perf in one run (`cargo xtask bench
//! --footprint-only`):
//! - recording bytes per sample, fp (`perf record -g`) and DWARF (`--call-graph dwarf`, both
//!   copying 8 KiB of stack), on two busy processes (`hotspots`) at 999 Hz;
//! - the recorder's peak RSS (GNU time) for a short and a 4× longer recording at 4999 Hz: it
//!   must be the same (flat in duration), and ≤ 64 MiB;
//! - the release binaries as `cargo build --release` (the README's way) leaves them.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::measure::{Meter, GNU_TIME};
use crate::command::{cargo, run};
use crate::workspace::{root, target_dir};

/// `hotspots` scale for the size rows (about 3 s).
const SIZE_SCALE: &str = "2";
/// Scales for the memory rows: about 15 s and 60 s.
const SHORT_SCALE: f64 = 10.0;
const LONG_SCALE: f64 = 40.0;

/// Two `hotspots` processes at once: two busy threads, as in the issue.
fn two_busy(example: &Path, scale: &str) -> Vec<OsString> {
    let ex = example.display();
    vec![
        "sh".into(),
        "-c".into(),
        format!("{ex} {scale} & {ex} {scale}; wait").into(),
    ]
}

/// Runs `argv` under GNU time (through the bench's [`Meter`]); returns its peak RSS in KiB and
/// what it printed on stderr.
fn timed(argv: &[OsString], dir: &Path) -> Result<(u64, String)> {
    let mut meter = Meter {
        gnu_time: true,
        scratch: dir.to_path_buf(),
    };
    let measured = meter.single(argv.to_vec(), &dir.join("stdout.txt"))?;
    let stderr = std::fs::read_to_string(dir.join("stderr-0.txt")).unwrap_or_default();
    let kib = measured.max_rss_kib.context("no peak RSS from GNU time")?;
    Ok((kib, stderr))
}

/// The sample count jprof's summary printed ("recorded N samples").
fn jprof_samples(stderr: &str) -> Result<u64> {
    stderr
        .split("recorded ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no sample count in jprof's summary:\n{stderr}"))
}

/// The SAMPLE count `perf report --stats` gives for a perf.data.
fn perf_samples(data: &Path) -> Result<u64> {
    let out = Command::new("perf")
        .args(["report", "--stats", "-i"])
        .arg(data)
        .output()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("SAMPLE events:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .context("no SAMPLE count from perf report --stats")
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// One size row: jprof's and perf's bytes per sample with `jprof_args`/`perf_args` added.
fn size_row(
    jprof: &Path,
    example: &Path,
    dir: &Path,
    jprof_args: &[&str],
    perf_args: &[&str],
) -> Result<(f64, f64)> {
    let (jdata, pdata) = (dir.join("size.jprof.data"), dir.join("size.perf.data"));
    let mut argv: Vec<OsString> = vec![jprof.into(), "record".into(), "-F".into(), "999".into()];
    argv.extend(jprof_args.iter().map(OsString::from));
    argv.extend(["-o".into(), jdata.clone().into(), "--".into()]);
    argv.extend(two_busy(example, SIZE_SCALE));
    let (_, stderr) = timed(&argv, dir)?;
    let ours = size(&jdata) as f64 / jprof_samples(&stderr)? as f64;

    let mut argv: Vec<OsString> = vec!["perf".into(), "record".into(), "-q".into()];
    argv.extend(["-F", "999"].iter().map(OsString::from));
    argv.extend(perf_args.iter().map(OsString::from));
    argv.extend(["-o".into(), pdata.clone().into(), "--".into()]);
    argv.extend(two_busy(example, SIZE_SCALE));
    timed(&argv, dir)?;
    let theirs = size(&pdata) as f64 / perf_samples(&pdata)? as f64;
    Ok((ours, theirs))
}

/// Peak RSS (MiB) of `jprof record -F 4999` (or perf) over two busy processes at `scale`.
fn record_rss(recorder: &[OsString], example: &Path, dir: &Path, scale: f64) -> Result<f64> {
    let mut argv = recorder.to_vec();
    argv.extend(two_busy(example, &format!("{scale}")));
    let (kib, _) = timed(&argv, dir)?;
    Ok(kib as f64 / 1024.0)
}

pub fn compare(jprof: &Path, example: &Path) -> Result<String> {
    if !Path::new(GNU_TIME).exists() {
        bail!("the footprint comparison needs {GNU_TIME}: apt-get install time");
    }
    let dir = target_dir().join("bench-footprint");
    std::fs::create_dir_all(&dir)?;
    let mut s = String::new();

    eprintln!("== footprint: recording size against perf");
    let (fp, perf_fp) = size_row(jprof, example, &dir, &[], &["-g"])?;
    let (dwarf, perf_dwarf) = size_row(
        jprof,
        example,
        &dir,
        &["--call-graph", "dwarf"],
        &["--call-graph", "dwarf"],
    )?;
    let _ = writeln!(
        s,
        "\n### Recording size (two busy `hotspots {SIZE_SCALE}` processes, 999 Hz)\n\n\
         | call graph | jprof (bytes/sample) | perf (bytes/sample) | jprof / perf | goal |\n\
         |---|---:|---:|---:|---|\n\
         | fp (`perf record -g`) | {fp:.0} | {perf_fp:.0} | **{:.2}×** | ≤ 1.5× |\n\
         | dwarf, 8 KiB stack copies | {dwarf:.0} | {perf_dwarf:.0} | **{:.2}×** | ≤ 1× |",
        fp / perf_fp,
        dwarf / perf_dwarf
    );

    eprintln!("== footprint: recorder peak RSS at 4999 Hz, short and long");
    let data = dir.join("rss.data");
    let ours: Vec<OsString> = [
        jprof.as_os_str(),
        "record".as_ref(),
        "-F".as_ref(),
        "4999".as_ref(),
        "-o".as_ref(),
        data.as_os_str(),
        "--".as_ref(),
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let perf_data = dir.join("rss.perf.data");
    let theirs: Vec<OsString> = [
        "perf".as_ref(),
        "record".as_ref(),
        "-q".as_ref(),
        "-F".as_ref(),
        "4999".as_ref(),
        "-g".as_ref(),
        "-o".as_ref(),
        perf_data.as_os_str(),
        "--".as_ref(),
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let mut rows = Vec::new();
    for scale in [SHORT_SCALE, LONG_SCALE] {
        let started = std::time::Instant::now();
        let j = record_rss(&ours, example, &dir, scale)?;
        let seconds = started.elapsed().as_secs_f64();
        let p = record_rss(&theirs, example, &dir, scale)?;
        rows.push((seconds, j, p, size(&data)));
    }
    let _ = writeln!(
        s,
        "\n### Recorder peak RSS (two busy processes, 4999 Hz, fp; GNU time)\n\n\
         | duration | `jprof record` (MiB) | `perf record -g` (MiB) | jprof recording |\n\
         |---|---:|---:|---:|"
    );
    for (seconds, j, p, bytes) in &rows {
        let _ = writeln!(
            s,
            "| {seconds:.0} s | **{j:.1}** | {p:.1} | {:.1} MiB |",
            *bytes as f64 / (1024.0 * 1024.0)
        );
    }
    let _ = writeln!(
        s,
        "\nGoal: ≤ 64 MiB and flat in duration (long/short: **{:.2}×**).",
        rows[1].1 / rows[0].1
    );

    eprintln!("== footprint: release binaries");
    run(cargo().current_dir(root()).args(["build", "--release"]))?;
    let mib = |name: &str| size(&target_dir().join("release").join(name)) as f64 / 1048576.0;
    let _ = writeln!(
        s,
        "\n### Release binaries (`cargo build --release`)\n\n\
         | binary | size (MiB) | goal |\n|---|---:|---|\n\
         | `jprof` | {:.1} | ≤ 15 MiB |\n| `libjprof_agent.so` | {:.2} | ≤ 2 MiB |",
        mib("jprof"),
        mib("libjprof_agent.so")
    );
    Ok(s)
}
