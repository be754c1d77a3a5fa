//! `cargo xtask bench --peers`: jprof against `perf record -g` and samply on three real
//! workloads in one run — `tsc` type-checking rxjs (tests/fixtures/tsc-rxjs, installed with
//! `npm ci`), `javac` compiling the JDK's own `java.sql` sources (from the JDK's `src.zip`), and
//! the native `examples/hotspots` — then the off-CPU ping-pong. Every variant runs `runs`
//! times, the order rotating each round; the tables give medians and ranges, slowdowns paired
//! with the same round's run alone, and the load average over the runs.
//!
//! Measured per run: the end-to-end time of the record command (start until it exits, its
//! recording written), the target's own wall and CPU time (GNU time around the target, inside
//! the recorder), the recorder's own CPU time (GNU time around the recorder, less the
//! target's), and the recording's size with what it needs from the runtime to name JIT frames:
//! for perf and samply the jitdumps and perf maps the runtime left beside their output.
//!
//! Every variant runs the target with the runtime flags that make it name JIT code (the ones
//! jprof adds itself: V8's `--perf-prof` family; for the JVM, perf and samply get
//! `-XX:+DumpPerfMapAtExit` as they have no agent), and "alone" is the target with those
//! flags: the slowdown is what sampling costs the target.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::measure::{median, GNU_TIME};
use crate::command::available;
use crate::workspace::{root, target_dir};

/// The flags jprof gives Node (record/runtimes.rs), given to every variant.
const NODE_FLAGS: [&str; 3] = [
    "--perf-prof",
    "--perf-prof-unwinding-info",
    "--interpreted-frames-native-stack",
];
/// What perf and samply need from a JVM to name its JIT frames (no agent: a perf map written
/// at exit), and frame pointers in JIT code as jprof asks for.
const JVM_FLAGS: &str =
    "-XX:+PreserveFramePointer -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit";

/// One workload: how to run it (in `dir`), and what to do before each run.
struct Workload {
    name: &'static str,
    dir: PathBuf,
    /// The target's command line for perf, samply and alone (runtime flags included).
    command: Vec<OsString>,
    /// The same for jprof, which adds the runtime flags itself.
    jprof_command: Vec<OsString>,
    /// Environment for perf, samply and alone.
    env: Vec<(&'static str, String)>,
    /// Made again before each run (javac's output).
    clean: Option<PathBuf>,
}

const VARIANTS: [&str; 4] = ["alone", "jprof record", "perf record -g", "samply record"];

/// One run's numbers.
#[derive(Clone, Copy, Default)]
struct Run {
    end_to_end: f64,
    /// The target's wall time and CPU time (user + system, all its threads and children).
    target: f64,
    target_cpu: f64,
    /// The recorder's own CPU time (its processes' user + system, the target's taken out).
    recorder_cpu: f64,
    bytes: u64,
    /// jprof only: CPU time of the target spent in jprof's JVMTI agent and the JVM's posting of
    /// its events, from jprof's own samples (zero outside a JVM).
    agent_cpu: f64,
}

/// What jprof's agent costs the JVM, from the recording `data`: the samples of the agent's own
/// threads and of stacks through the agent's code or HotSpot's JVMTI posting, in seconds
/// (`report -f collapsed` weighs each stack in nanoseconds). Sampled, so a far steadier figure
/// than the difference of two runs' CPU times, which the JIT's timing moves by several
/// percent from run to run.
fn agent_cpu(jprof: &Path, data: &Path) -> f64 {
    let Ok(out) = Command::new(jprof)
        .args(["report", "-f", "collapsed", "-i"])
        .arg(data)
        .stderr(Stdio::null())
        .output()
    else {
        return 0.0;
    };
    let agent_stack = |stack: &str| {
        stack.starts_with("jprof names;")
            || stack.starts_with("jprof-jitdump;")
            || stack.contains("jprof_agent::")
            || stack.contains("JvmtiExport::post_")
    };
    let nanoseconds: u64 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.rsplit_once(' '))
        .filter(|(stack, _)| agent_stack(stack))
        .filter_map(|(_, weight)| weight.parse::<u64>().ok())
        .sum();
    nanoseconds as f64 / 1e9
}

/// The 1-minute load average (/proc/loadavg): how busy the machine was around the runs.
pub(super) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// GNU time's `%e %U %S` line in `file`: wall seconds and CPU seconds (user + system).
fn wall_and_cpu(file: &Path) -> Option<(f64, f64)> {
    let text = std::fs::read_to_string(file).ok()?;
    let mut fields = text
        .lines()
        .last()?
        .split_whitespace()
        .map(str::parse::<f64>);
    let (wall, user, system) = (
        fields.next()?.ok()?,
        fields.next()?.ok()?,
        fields.next()?.ok()?,
    );
    Some((wall, user + system))
}

/// Finds samply (PATH or ~/.cargo/bin), or says how to install it.
fn samply() -> Result<PathBuf> {
    if available("samply") {
        return Ok("samply".into());
    }
    let cargo_bin = std::env::var_os("HOME")
        .map(|h| Path::new(&h).join(".cargo/bin/samply"))
        .filter(|p| p.is_file());
    cargo_bin.context(
        "samply is not installed: run `cargo install samply --locked` (it goes to \
         ~/.cargo/bin), then run this bench again",
    )
}

/// The pinned TypeScript and rxjs, installed once (again when the lockfile changes).
fn tsc_project(base: &Path) -> Result<PathBuf> {
    let fixture = root().join("tests/fixtures/tsc-rxjs");
    let dir = base.join("tsc-rxjs");
    std::fs::create_dir_all(&dir)?;
    for file in ["package.json", "package-lock.json", "tsconfig.json"] {
        std::fs::copy(fixture.join(file), dir.join(file))?;
    }
    let lock = std::fs::read(fixture.join("package-lock.json"))?;
    let stamp = dir.join("installed-lock.json");
    if std::fs::read(&stamp).ok().as_ref() != Some(&lock) {
        let status = Command::new("npm")
            .args(["ci", "--no-fund", "--no-audit", "--ignore-scripts"])
            .current_dir(&dir)
            // Its progress would land in the table on stdout.
            .stdout(Stdio::null())
            .status()
            .context("npm (apt-get install nodejs npm)")?;
        if !status.success() {
            bail!("npm ci failed in {}", dir.display());
        }
        std::fs::write(&stamp, &lock)?;
    }
    Ok(dir)
}

/// A JDK whose `src.zip` is there (a JDK package without its sources has a dangling link).
fn jdk_with_sources() -> Result<PathBuf> {
    let mut homes: Vec<PathBuf> = std::fs::read_dir("/usr/lib/jvm")
        .context("no /usr/lib/jvm: install a JDK with its sources (e.g. openjdk-17-source)")?
        .flatten()
        .map(|e| e.path())
        .filter(|h| h.join("bin/javac").is_file() && h.join("lib/src.zip").is_file())
        .collect();
    homes.sort();
    homes
        .pop()
        .context("no JDK under /usr/lib/jvm has lib/src.zip: install a JDK's sources (e.g. apt-get install openjdk-17-source)")
}

/// `java.sql`'s sources from the JDK's src.zip, with an argument file listing them.
fn javac_project(base: &Path, jdk: &Path) -> Result<PathBuf> {
    let dir = base.join("javac");
    std::fs::create_dir_all(&dir)?;
    if !dir.join("sources.txt").is_file() {
        let status = Command::new(jdk.join("bin/jar"))
            .arg("xf")
            .arg(jdk.join("lib/src.zip"))
            .arg("java.sql")
            .current_dir(&dir)
            .status()
            .context("jar")?;
        if !status.success() {
            bail!("jar xf src.zip java.sql failed");
        }
        let mut sources = Vec::new();
        let mut stack = vec![dir.join("java.sql")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d)?.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "java")
                    && p.file_name().is_some_and(|n| n != "module-info.java")
                {
                    sources.push(p.strip_prefix(&dir)?.display().to_string());
                }
            }
        }
        sources.sort();
        std::fs::write(dir.join("sources.txt"), sources.join("\n") + "\n")?;
    }
    Ok(dir)
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

fn workloads(base: &Path, example: &Path) -> Result<Vec<Workload>> {
    let tsc = tsc_project(base)?;
    let jdk = jdk_with_sources()?;
    let javac_dir = javac_project(base, &jdk)?;
    let javac = jdk.join("bin/javac");
    let javac_args = os(&[
        "-nowarn",
        "-d",
        "out",
        "--patch-module",
        "java.sql=java.sql",
        "@sources.txt",
    ]);
    let tsc_args = os(&["node_modules/typescript/bin/tsc", "-p", "."]);
    let mut node = os(&["node"]);
    node.extend(NODE_FLAGS.iter().map(OsString::from));
    let native_dir = base.join("native");
    std::fs::create_dir_all(&native_dir)?;
    Ok(vec![
        Workload {
            name: "tsc (TypeScript 5.6.3 type-checking rxjs 7.8.1)",
            dir: tsc,
            command: [node, tsc_args.clone()].concat(),
            jprof_command: [os(&["node"]), tsc_args].concat(),
            env: Vec::new(),
            clean: None,
        },
        Workload {
            name: "javac (the JDK's java.sql sources, 77 files)",
            dir: javac_dir.clone(),
            command: [vec![javac.clone().into()], javac_args.clone()].concat(),
            jprof_command: [vec![javac.into()], javac_args].concat(),
            env: vec![("JAVA_TOOL_OPTIONS", JVM_FLAGS.to_string())],
            clean: Some(javac_dir.join("out")),
        },
        Workload {
            name: "native (examples/hotspots 1)",
            dir: native_dir,
            command: vec![example.into(), "1".into()],
            jprof_command: vec![example.into(), "1".into()],
            env: Vec::new(),
            clean: None,
        },
    ])
}

/// Files the runtime of process `pid` left for perf or samply to name JIT code: its jitdump in
/// the working directory and its perf map in /tmp.
fn runtime_files(dir: &Path, pid: u32) -> Vec<PathBuf> {
    [
        dir.join(format!("jit-{pid}.dump")),
        PathBuf::from(format!("/tmp/perf-{pid}.map")),
    ]
    .into_iter()
    .filter(|p| p.is_file())
    .collect()
}

/// A file containing `1`, bound over perf_event_paranoid in samply's own mount namespace when
/// the machine's setting is stricter: samply refuses to start above 1, even as root.
fn samply_prefix(scratch: &Path) -> Result<Vec<OsString>> {
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2);
    if paranoid <= 1 {
        return Ok(Vec::new());
    }
    let one = scratch.join("paranoid-1");
    std::fs::write(&one, "1\n")?;
    Ok(vec![
        "unshare".into(),
        "-m".into(),
        "sh".into(),
        "-c".into(),
        format!(
            "mount --bind '{}' /proc/sys/kernel/perf_event_paranoid && exec \"$0\" \"$@\"",
            one.display()
        )
        .into(),
    ])
}

/// Runs variant `v` of `w` once.
fn run_once(
    w: &Workload,
    v: usize,
    jprof: &Path,
    samply: &Path,
    samply_prefix: &[OsString],
    scratch: &Path,
) -> Result<Run> {
    if let Some(out) = &w.clean {
        let _ = std::fs::remove_dir_all(out);
        std::fs::create_dir_all(out)?;
    }
    let times = scratch.join("target-time.txt");
    let recorder_times = scratch.join("recorder-time.txt");
    let pid_file = scratch.join("target-pid.txt");
    for f in [&times, &recorder_times, &pid_file] {
        let _ = std::fs::remove_file(f);
    }
    // GNU time around the target, and the target's pid (it names the runtime's files).
    let mut target: Vec<OsString> = vec![
        GNU_TIME.into(),
        "-f".into(),
        "%e %U %S".into(),
        "-o".into(),
        times.clone().into(),
        "sh".into(),
        "-c".into(),
        format!("echo $$ > '{}'; exec \"$0\" \"$@\"", pid_file.display()).into(),
    ];
    target.extend(if v == 1 {
        w.jprof_command.iter().cloned()
    } else {
        w.command.iter().cloned()
    });
    let output = scratch.join(["", "jprof.data", "perf.data", "samply.json.gz"][v]);
    let _ = std::fs::remove_file(&output);
    let mut argv: Vec<OsString> = match v {
        0 => Vec::new(),
        1 => vec![
            jprof.into(),
            "record".into(),
            "-F".into(),
            "999".into(),
            "-o".into(),
            output.clone().into(),
            "--".into(),
        ],
        2 => os(&["perf", "record", "-q", "-g", "-F", "999", "-k", "1", "-o"])
            .into_iter()
            .chain([output.clone().into(), "--".into()])
            .collect(),
        _ => {
            let mut a = samply_prefix.to_vec();
            a.extend([
                samply.into(),
                "record".into(),
                "--save-only".into(),
                "-r".into(),
                "999".into(),
                "-o".into(),
                output.clone().into(),
                "--".into(),
            ]);
            a
        }
    };
    argv.extend(target);
    if v != 0 {
        // GNU time around the recorder too: its CPU time less the target's is its own.
        let outer: [OsString; 4] = [GNU_TIME.into(), "-f".into(), "%e %U %S".into(), "-o".into()];
        argv.splice(
            0..0,
            outer.into_iter().chain([recorder_times.clone().into()]),
        );
    }
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&w.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if v != 1 {
        cmd.envs(w.env.iter().map(|(k, v)| (k, v)));
    }
    let started = Instant::now();
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {}", argv[0].to_string_lossy()))?;
    let end_to_end = started.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "{} on {} failed ({}):\n{}",
            VARIANTS[v],
            w.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (target, target_cpu) = wall_and_cpu(&times)
        .with_context(|| format!("no target time from {} on {}", VARIANTS[v], w.name))?;
    let recorder_cpu = match v {
        0 => 0.0,
        _ => {
            let (_, all_cpu) = wall_and_cpu(&recorder_times)
                .with_context(|| format!("no recorder time from {} on {}", VARIANTS[v], w.name))?;
            (all_cpu - target_cpu).max(0.0)
        }
    };
    let pid: u32 = std::fs::read_to_string(&pid_file)?.trim().parse()?;
    let mut bytes = std::fs::metadata(&output).map_or(0, |m| m.len());
    for f in runtime_files(&w.dir, pid) {
        if v >= 2 {
            bytes += std::fs::metadata(&f).map_or(0, |m| m.len());
        }
        let _ = std::fs::remove_file(f);
    }
    // V8's isolate log, which `--perf-prof` also writes (no recorder reads it).
    let isolate_log = format!("-{pid}-v8.log");
    for entry in std::fs::read_dir(&w.dir)?.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("isolate-0x") && name.ends_with(&isolate_log) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let agent_cpu = match v {
        1 => agent_cpu(jprof, &output),
        _ => 0.0,
    };
    Ok(Run {
        end_to_end,
        target,
        target_cpu,
        recorder_cpu,
        bytes,
        agent_cpu,
    })
}

/// The table of one workload: per variant, medians and ranges over the rounds; slowdowns are
/// paired with the same round's run alone.
fn workload_table(name: &str, results: &[Vec<Run>], loads: &[f64]) -> String {
    let column =
        |v: usize, f: &dyn Fn(&Run) -> f64| -> Vec<f64> { results[v].iter().map(f).collect() };
    // Per round, variant `v` over the same round's `base` variant.
    let paired = |v: usize, base: usize, f: &dyn Fn(&Run) -> f64| -> Vec<f64> {
        results[v]
            .iter()
            .zip(&results[base])
            .map(|(a, b)| f(a) / f(b))
            .collect()
    };
    let wall = |r: &Run| r.target;
    let cpu = |r: &Run| r.target_cpu;
    let e2e = |r: &Run| r.end_to_end;
    let own_wall = |r: &Run| (r.end_to_end - r.target).max(0.0);
    let own_cpu = |r: &Run| r.recorder_cpu;
    let mib = |r: &Run| r.bytes as f64 / (1024.0 * 1024.0);
    let (lo, hi) = loads
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &l| {
            (lo.min(l), hi.max(l))
        });
    let mut table = format!(
        "\n**{name}** (load average {lo:.1}–{hi:.1} over these runs)\n\n\
         | variant | end-to-end record (s) | recorder's own wall: start + finish (s) | recorder's own CPU (s) | target wall (s) | slowdown, wall | target CPU (s) | slowdown, CPU | recording (MiB) |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for (v, variant) in VARIANTS.iter().enumerate() {
        let recorder = |f: &dyn Fn(&Run) -> f64, digits| match v {
            0 => String::new(),
            _ => spread(&column(v, f), digits),
        };
        let slowdown = |f: &dyn Fn(&Run) -> f64| match v {
            0 => "1".to_string(),
            _ => spread(&paired(v, 0, f), 3),
        };
        let _ = writeln!(
            table,
            "| {variant} | {} | {} | {} | {} | {}× | {} | {}× | {} |",
            recorder(&e2e, 2),
            recorder(&own_wall, 2),
            recorder(&own_cpu, 2),
            spread(&column(v, &wall), 2),
            slowdown(&wall),
            spread(&column(v, &cpu), 2),
            slowdown(&cpu),
            recorder(&mib, 2),
        );
    }
    let m = |v: usize, f: &dyn Fn(&Run) -> f64| median(column(v, f));
    let pm = |v: usize, base: usize, f: &dyn Fn(&Run) -> f64| median(paired(v, base, f));
    let (j, p, s) = (1, 2, 3);
    let _ = writeln!(
        table,
        "\njprof / samply: end-to-end **{:.2}×** (per round: {}), recording **{:.2}×**. \
         jprof / perf: end-to-end {:.2}×, recording {:.2}×. Target slowdown (wall, per round): \
         jprof **{:.3}×**, perf {:.3}×, samply {:.3}×; by the target's CPU time: jprof \
         **{:.3}×**, perf {:.3}×, samply {:.3}×.",
        m(j, &e2e) / m(s, &e2e),
        spread(&paired(j, s, &e2e), 2),
        m(j, &mib) / m(s, &mib),
        m(j, &e2e) / m(p, &e2e),
        m(j, &mib) / m(p, &mib),
        pm(j, 0, &wall),
        pm(p, 0, &wall),
        pm(s, 0, &wall),
        pm(j, 0, &cpu),
        pm(p, 0, &cpu),
        pm(s, 0, &cpu),
    );
    let _ = writeln!(
        table,
        "\njprof's target CPU over perf's, per round (the two ran seconds apart): {}; over \
         samply's: {}.",
        spread(&paired(j, p, &cpu), 3),
        spread(&paired(j, s, &cpu), 3),
    );
    if results[j].iter().any(|r| r.agent_cpu > 0.0) {
        let agent = |r: &Run| r.agent_cpu;
        let share = |r: &Run| r.agent_cpu / r.target_cpu * 100.0;
        let _ = writeln!(
            table,
            "
jprof's JVMTI agent inside the JVM, from jprof's own samples (its threads, its \
             callbacks and HotSpot's posting of their events): {} s of the target's CPU, {} %.",
            spread(&column(j, &agent), 3),
            spread(&column(j, &share), 1),
        );
    }
    table
}

/// `median [min–max]` with `digits` decimals.
pub(super) fn spread(values: &[f64], digits: usize) -> String {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!(
        "{:.digits$} [{min:.digits$}–{max:.digits$}]",
        median(values.to_vec())
    )
}

pub fn compare(jprof: &Path, example: &Path, runs: usize) -> Result<String> {
    if !available("perf") {
        bail!("--peers needs perf: apt-get install linux-perf");
    }
    if !Path::new(GNU_TIME).exists() {
        bail!("--peers needs {GNU_TIME}: apt-get install time");
    }
    let samply = samply()?;
    let base = target_dir().join("bench-peers");
    let scratch = base.join("scratch");
    std::fs::create_dir_all(&scratch)?;
    let prefix = samply_prefix(&scratch)?;
    let workloads = workloads(&base, example)?;
    let samply_version = Command::new(&samply)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let perf_version = Command::new("perf")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();

    let mut table = format!(
        "\n### jprof, perf and samply on JIT and native programs (`cargo xtask bench --peers`)\n\n\
         {perf_version}, {samply_version}; all at 999 Hz; {runs} rounds, each running the 4 \
         variants one after the other (the order rotating); median [min–max] over the rounds. A \
         slowdown is the variant's time over the target alone in the same round (the pair ran \
         seconds apart, so load that comes and goes hits both), median over the rounds.\n"
    );
    for w in &workloads {
        eprintln!("== peers: {} ({runs} rounds of 4 variants)", w.name);
        let mut results: Vec<Vec<Run>> = vec![Vec::new(); 4];
        let mut crashes: Vec<String> = Vec::new();
        let mut loads = Vec::new();
        for round in 0..runs {
            eprint!("\rround {}/{runs}", round + 1);
            loads.push(load_average());
            for k in 0..4 {
                let v = (round + k) % 4;
                // A recorder that fails is run again (up to eight times) and the failure is told
                // under the table: samply 0.13.1 sometimes panics on a record it misparses.
                let mut tries = 0;
                let run = loop {
                    match run_once(w, v, jprof, &samply, &prefix, &scratch) {
                        Ok(run) => break run,
                        Err(e) if tries < 8 => {
                            tries += 1;
                            let first = e.to_string();
                            let why = first
                                .lines()
                                .find(|l| l.contains("panicked") || l.contains("assertion"))
                                .unwrap_or_else(|| first.lines().next().unwrap_or_default());
                            crashes
                                .push(format!("{} failed and was run again: {why}", VARIANTS[v]));
                        }
                        Err(e) => return Err(e),
                    }
                };
                results[v].push(run);
            }
        }
        loads.push(load_average());
        eprintln!();
        table += &workload_table(w.name, &results, &loads);
        // One line per kind of failure, with how often it happened.
        let mut told: Vec<(&String, usize)> = Vec::new();
        for crash in &crashes {
            match told.iter_mut().find(|(c, _)| *c == crash) {
                Some((_, n)) => *n += 1,
                None => told.push((crash, 1)),
            }
        }
        for (crash, n) in told {
            let times = if n == 1 {
                String::new()
            } else {
                format!(" ({n} times)")
            };
            let _ = writeln!(table, "\nNote: {crash}{times}");
        }
    }
    table += "\nRecordings: jprof's file; perf's perf.data plus the jitdump or perf map the \
              runtime wrote for it; samply's profile plus the same files (samply reads them \
              when the profile is loaded). End-to-end: from starting the record command to its \
              exit, the recording written; the recorder's own wall is that less the target's \
              wall (its start-up and what it does after the target exits), its own CPU is the \
              CPU time of its processes less the target's (GNU time around each). Target CPU: \
              user + system time of the target's processes and threads.\n";
    Ok(table)
}
