//! The off-CPU part of `cargo xtask bench` (examples/offcpu/waits.c):
//! - accuracy: `waits` sleeps 8 × 125 ms on its main thread while a second thread spins for
//!   1 s; `jprof record --off-cpu` must put 1 s under `wait_in_sleeper`, ~0 under the spinner,
//!   and 1 s of wall time on each thread;
//! - overhead: `waits pingpong N` (two threads passing a byte through pipes, two switches per
//!   hop) alone, under `jprof record --off-cpu`, and under `perf record -g --switch-events`
//!   with cpu-clock at 999 Hz plus every `sched:sched_switch` (`-c 1`): the same data (every
//!   switch-out with its stack, every switch-in) from perf without BPF.
//!   The workload times itself; slowdown = profiled / alone. GNU time also measures the
//!   workload's own CPU time (user + system: the kernel's work at each switch is charged to
//!   the thread that switches), which a busy shared machine disturbs far less than its wall
//!   time.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::measure::{interleaved, median, Measurement, Meter};
use crate::workspace::target_dir;

/// Hops across CPUs (~3 s alone here); on one CPU a hop is ~40× faster.
pub(super) const HOPS: u64 = 100_000;
const HOPS_SAME_CPU: u64 = 2_000_000;

pub(super) fn build(dir: &Path) -> Result<PathBuf> {
    let out = dir.join("waits");
    let status = Command::new("cc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-pthread"])
        .arg(crate::workspace::root().join("examples/offcpu/waits.c"))
        .arg("-o")
        .arg(&out)
        .status()
        .context("cc (apt-get install gcc)")?;
    if !status.success() {
        bail!("cc failed on examples/offcpu/waits.c");
    }
    Ok(out)
}

/// The workload's own "N hops in S s" line.
fn hop_seconds(stdout: &Path) -> Result<f64> {
    let text = std::fs::read_to_string(stdout)?;
    text.split_whitespace()
        .skip_while(|w| *w != "in")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("no `N hops in S s` in {}: {text}", stdout.display()))
}

/// The user + system seconds GNU time wrote (`-f "%U %S"`): its last line.
fn cpu_seconds(file: &Path) -> Result<f64> {
    let text = std::fs::read_to_string(file)?;
    let line = text.lines().last().unwrap_or_default();
    let parts: Vec<f64> = line
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    match parts[..] {
        [user, system] => Ok(user + system),
        _ => bail!("no `user system` seconds in {}: {text}", file.display()),
    }
}

/// Records jprof's summary says were lost (by the kernel or by its writer), from its stderr.
fn jprof_lost(stderr: &Path) -> u64 {
    let text = std::fs::read_to_string(stderr).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("lost: "))
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// `jprof report --format collapsed --weight WEIGHT`: total ns under a frame.
fn ns_under(jprof: &Path, data: &Path, weight: &str, frame: &str) -> Result<f64> {
    let out = Command::new(jprof)
        .args(["report", "-f", "collapsed", "--weight", weight, "-i"])
        .arg(data)
        .output()?;
    if !out.status.success() {
        bail!(
            "jprof report failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(stack, _)| stack.split(';').any(|f| f == frame))
        .filter_map(|(_, n)| n.parse::<f64>().ok())
        .sum())
}

pub fn compare(jprof: &Path, runs: usize) -> Result<String> {
    let dir = target_dir().join("bench-offcpu");
    std::fs::create_dir_all(&dir)?;
    let waits = build(&dir)?;
    let mut table = String::from("\n### Off-CPU (`record --off-cpu`, examples/offcpu/waits.c)\n\n");

    eprintln!("== off-CPU accuracy: waits under jprof record --off-cpu");
    let data = dir.join("sleep.data");
    let status = Command::new(jprof)
        .args(["record", "--off-cpu", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&waits)
        .stderr(std::process::Stdio::null())
        .status()?;
    if !status.success() {
        bail!("jprof record --off-cpu failed");
    }
    let asleep = ns_under(jprof, &data, "off-cpu", "wait_in_sleeper")?;
    let spinner_off = ns_under(jprof, &data, "off-cpu", "spin_in_spinner")?;
    let main_wall = ns_under(jprof, &data, "wall", "main")?;
    let spinner_wall = ns_under(jprof, &data, "wall", "spin_in_spinner")?;
    let err = |v: f64| format!("{:+.1}%", (v / 1e9 - 1.0) * 100.0);
    table += "| measure | real | jprof | error | goal |\n|---|---:|---:|---:|---|\n";
    let _ = writeln!(
        table,
        "| off-CPU under `wait_in_sleeper` | 1.000 s | {:.3} s | {} | within 5% |",
        asleep / 1e9,
        err(asleep)
    );
    let _ = writeln!(
        table,
        "| off-CPU under `spin_in_spinner` | ~0 | {:.3} s | | ~0 |",
        spinner_off / 1e9
    );
    let _ = writeln!(
        table,
        "| wall, main thread | 1.000 s | {:.3} s | {} | within 10% |",
        main_wall / 1e9,
        err(main_wall)
    );
    let _ = writeln!(
        table,
        "| wall, spinning thread | 1.000 s | {:.3} s | {} | within 10% |\n",
        spinner_wall / 1e9,
        err(spinner_wall)
    );

    table += &runtimes(jprof, &dir)?;
    table += &overhead(jprof, &waits, &dir, runs, "split", HOPS)?;
    table += &overhead(jprof, &waits, &dir, runs, "same", HOPS_SAME_CPU)?;
    Ok(table)
}

/// A Java thread in `Thread.sleep` (examples/offcpu/Sleeper.java) and a Node thread in
/// `Atomics.wait` (waits.js): the off-CPU time under the function that waited, named through
/// the runtime's frames, against the time the program measured itself.
fn runtimes(jprof: &Path, dir: &Path) -> Result<String> {
    let mut table = String::from(
        "| runtime: function that waited | measured by the program | jprof off-CPU under it | error |\n|---|---:|---:|---:|\n",
    );
    let examples = crate::workspace::root().join("examples/offcpu");
    let status = Command::new("javac")
        .arg("-d")
        .arg(dir)
        .arg(examples.join("Sleeper.java"))
        .status()
        .context("javac (install a JDK)")?;
    if !status.success() {
        bail!("javac failed on Sleeper.java");
    }
    let cases: [(&str, Vec<OsString>, &str); 2] = [
        (
            "Java `Thread.sleep` in `Sleeper.sleepLoop` (500 × 2 ms)",
            vec!["java".into(), "-cp".into(), dir.into(), "Sleeper".into()],
            "Sleeper.sleepLoop",
        ),
        (
            "Node `Atomics.wait` in `waitInSleeper` (8 × 125 ms)",
            vec!["node".into(), examples.join("waits.js").into()],
            "waitInSleeper",
        ),
    ];
    for (what, command, frame) in cases {
        let data = dir.join("runtime.data");
        let out = Command::new(jprof)
            .args(["record", "--off-cpu", "-o"])
            .arg(&data)
            .arg("--")
            .args(&command)
            .current_dir(dir)
            .output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let waited_ms: f64 = stdout
            .split_whitespace()
            .skip_while(|w| *w != "waited")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("no `waited N ms` from {what}: {stdout}"))?;
        let report = Command::new(jprof)
            .args(["report", "-f", "collapsed", "--weight", "off-cpu", "-i"])
            .arg(&data)
            .output()?;
        let ns: f64 = String::from_utf8_lossy(&report.stdout)
            .lines()
            .filter_map(|l| l.rsplit_once(' '))
            .filter(|(stack, _)| stack.split(';').any(|f| f.contains(frame)))
            .filter_map(|(_, n)| n.parse::<f64>().ok())
            .sum();
        let _ = writeln!(
            table,
            "| {what} | {:.3} s | {:.3} s | {:+.1}% |",
            waited_ms / 1e3,
            ns / 1e9,
            (ns / 1e6 / waited_ms - 1.0) * 100.0
        );
    }
    table.push('\n');
    Ok(table)
}

/// The ping-pong of `hops` hops with its threads on two CPUs (`split`) or both on CPU 0
/// (`same`).
pub(super) fn overhead(
    jprof: &Path,
    waits: &Path,
    dir: &Path,
    runs: usize,
    placement: &str,
    hops: u64,
) -> Result<String> {
    let mut table = String::new();
    eprintln!("== off-CPU overhead, threads {placement}: waits pingpong alone / jprof --off-cpu / perf sched_switch ({runs} runs)");
    let load_before = super::peers::load_average();
    let jprof_data = dir.join("pingpong.data");
    let perf_data = dir.join("pingpong.perf.data");
    let perf_stack_data = dir.join("pingpong.perf-stack.data");
    let outs = [
        dir.join("alone.txt"),
        dir.join("jprof.txt"),
        dir.join("perf.txt"),
        dir.join("perf-stack.txt"),
    ];
    let mut meter = Meter {
        gnu_time: false,
        scratch: dir.to_path_buf(),
    };
    let mut seconds: [Vec<f64>; 4] = Default::default();
    let mut cpu: [Vec<f64>; 4] = Default::default();
    let mut lost: Vec<u64> = Vec::new();
    let cpu_file = dir.join("pingpong-cpu.txt");
    let timed = Path::new(super::measure::GNU_TIME).exists();
    // The workload pins its threads to CPUs 0 and 1: unpinned, the hand-off time depends on
    // where the scheduler puts the pair, which the profiler's own threads change.
    let mut workload: Vec<OsString> = Vec::new();
    if timed {
        workload.extend([
            super::measure::GNU_TIME.into(),
            "-f".into(),
            "%U %S".into(),
            "-o".into(),
            cpu_file.clone().into(),
        ]);
    }
    workload.extend::<[OsString; 4]>([
        waits.into(),
        "pingpong".into(),
        hops.to_string().into(),
        placement.into(),
    ]);
    interleaved(runs, 4, |variant| -> Result<Measurement> {
        let mut argv: Vec<OsString> = match variant {
            0 => Vec::new(),
            1 => vec![
                jprof.into(),
                "record".into(),
                "--off-cpu".into(),
                "-F".into(),
                "999".into(),
                "-o".into(),
                jprof_data.clone().into(),
                "--".into(),
            ],
            2 | 3 => vec![
                "perf".into(),
                "record".into(),
                "-q".into(),
                "-g".into(),
                "--switch-events".into(),
                "-e".into(),
                "cpu-clock/freq=999/".into(),
                "-e".into(),
                "sched:sched_switch".into(),
                "-c".into(),
                "1".into(),
                "-o".into(),
                perf_data.clone().into(),
                "--".into(),
            ],
            _ => unreachable!(),
        };
        if variant == 3 {
            // The same stack copy per switch as jprof's (1 KiB, for the callers of frameless
            // code), which perf takes with its DWARF mode.
            argv.splice(3..4, ["--call-graph".into(), "dwarf,1024".into()]);
            if let Some(o) = argv.iter().position(|a| a == "-o") {
                argv[o + 1] = perf_stack_data.clone().into();
            }
        }
        argv.extend(workload.iter().cloned());
        let m = meter.single(argv, &outs[variant])?;
        seconds[variant].push(hop_seconds(&outs[variant])?);
        if timed {
            cpu[variant].push(cpu_seconds(&cpu_file)?);
        }
        if variant == 1 {
            lost.push(jprof_lost(&dir.join("stderr-0.txt")));
        }
        Ok(m)
    })?;
    let load_after = super::peers::load_average();
    // Per round, the variant's time over the same round's run alone.
    let paired = |v: usize| -> Vec<f64> {
        let ratios = seconds[v].iter().zip(&seconds[0]).map(|(a, b)| a / b);
        ratios.collect()
    };
    let slowdown = |v: usize| super::peers::spread(&paired(v), 2);
    let cpu_slowdown = |v: usize| -> String {
        if cpu[v].is_empty() {
            return "n/a".into();
        }
        let ratios: Vec<f64> = cpu[v].iter().zip(&cpu[0]).map(|(a, b)| a / b).collect();
        super::peers::spread(&ratios, 2)
    };
    let cpu_median = |v: usize| {
        if cpu[v].is_empty() {
            "n/a".into()
        } else {
            format!("{:.2}", median(cpu[v].clone()))
        }
    };
    let [alone, ours, perf, perf_stack] = seconds.clone().map(median);
    let switches = 2.0 * hops as f64;
    let per_switch = |p: &Path| std::fs::metadata(p).map_or(0.0, |m| m.len() as f64 / switches);
    let _ = writeln!(
        table,
        "\nPing-pong over pipes, {}, {hops} hops ({:.0} k switches/s alone), median of {runs} \
         [min–max]; the slowdown is per round (over the same round's run alone); load average \
         {load_before:.1} before, {load_after:.1} after:\n",
        if placement == "same" {
            "both threads on CPU 0"
        } else {
            "threads on CPUs 0 and 1"
        },
        switches / alone / 1e3
    );
    table += "| variant | workload time (s) | slowdown | workload CPU (s) | CPU slowdown | recording bytes per switch |\n|---|---:|---:|---:|---:|---:|\n";
    let _ = writeln!(
        table,
        "| alone | {alone:.3} | 1.00× | {} | 1.00× | |",
        cpu_median(0)
    );
    let _ = writeln!(
        table,
        "| jprof record --off-cpu | {ours:.3} | **{}×** | {} | **{}×** | {:.0} |",
        slowdown(1),
        cpu_median(1),
        cpu_slowdown(1),
        per_switch(&jprof_data)
    );
    let _ = writeln!(
        table,
        "| perf record -g --switch-events, cpu-clock + sched_switch -c 1 | {perf:.3} | {}× | {} | {}× | {:.0} |",
        slowdown(2),
        cpu_median(2),
        cpu_slowdown(2),
        per_switch(&perf_data)
    );
    let _ = writeln!(
        table,
        "| the same with `--call-graph dwarf,1024` (jprof's 1 KiB stack copy) | {perf_stack:.3} | {}× | {} | {}× | {:.0} |",
        slowdown(3),
        cpu_median(3),
        cpu_slowdown(3),
        per_switch(&perf_stack_data)
    );
    if lost.iter().any(|&n| n > 0) {
        let _ = writeln!(
            table,
            "\njprof lost records in {} of {runs} runs (at most {}): fewer records written \
             is less work, so those runs flatter it.",
            lost.iter().filter(|&&n| n > 0).count(),
            lost.iter().max().unwrap_or(&0)
        );
    }
    table += "\nGoal (issue 29): jprof's slowdown ≤ perf's with the same stack copy, the last row (the same data: CPU samples at 999 Hz and every switch with its call chain and a 1 KiB copy of the user stack; jprof also walks the user frame pointers past the copy). perf `-g` takes no copy: its row is the floor without one.\n";
    Ok(table)
}
