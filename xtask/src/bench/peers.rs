//! `cargo xtask bench --peers`: jprof against `perf record -g` and samply on three real
//! workloads in one run — `tsc` type-checking rxjs (tests/fixtures/tsc-rxjs, installed with
//! `npm ci`), `javac` compiling the JDK's own `java.sql` sources (from the JDK's `src.zip`), and
//! the native `examples/hotspots` — then the off-CPU ping-pong. Every variant runs `runs`
//! times, the order rotating each round; the tables give medians and ranges.
//!
//! Measured per run: the end-to-end time of the record command (start until it exits, its
//! recording written), the target's own wall time (GNU time around the target, inside the
//! recorder), and the recording's size with what it needs from the runtime to name JIT frames:
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
    target: f64,
    bytes: u64,
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
    let pid_file = scratch.join("target-pid.txt");
    let _ = std::fs::remove_file(&times);
    let _ = std::fs::remove_file(&pid_file);
    // GNU time around the target, and the target's pid (it names the runtime's files).
    let mut target: Vec<OsString> = vec![
        GNU_TIME.into(),
        "-f".into(),
        "%e".into(),
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
    let target = std::fs::read_to_string(&times)
        .ok()
        .and_then(|t| t.lines().last().and_then(|l| l.trim().parse().ok()))
        .with_context(|| format!("no target time from {} on {}", VARIANTS[v], w.name))?;
    let pid: u32 = std::fs::read_to_string(&pid_file)?.trim().parse()?;
    let mut bytes = std::fs::metadata(&output).map_or(0, |m| m.len());
    for f in runtime_files(&w.dir, pid) {
        if v >= 2 {
            bytes += std::fs::metadata(&f).map_or(0, |m| m.len());
        }
        let _ = std::fs::remove_file(f);
    }
    Ok(Run {
        end_to_end,
        target,
        bytes,
    })
}

/// `median [min–max]` with `digits` decimals.
fn spread(values: &[f64], digits: usize) -> String {
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
         {perf_version}, {samply_version}; all at 999 Hz; {runs} alternated runs each, median \
         [min–max].\n"
    );
    for w in &workloads {
        eprintln!("== peers: {} ({runs} rounds of 4 variants)", w.name);
        let mut results: Vec<Vec<Run>> = vec![Vec::new(); 4];
        let mut crashes: Vec<String> = Vec::new();
        for round in 0..runs {
            eprint!("\rround {}/{runs}", round + 1);
            for k in 0..4 {
                let v = (round + k) % 4;
                // A recorder that fails is run again (up to four times) and the failure is told
                // under the table: samply 0.13.1 sometimes panics on a record it misparses.
                let mut tries = 0;
                let run = loop {
                    match run_once(w, v, jprof, &samply, &prefix, &scratch) {
                        Ok(run) => break run,
                        Err(e) if tries < 4 => {
                            tries += 1;
                            let first = e.to_string();
                            let why = first
                                .lines()
                                .find(|l| l.contains("panicked") || l.contains("assertion"))
                                .unwrap_or_else(|| first.lines().next().unwrap_or_default());
                            crashes.push(format!(
                                "{} failed once and was run again: {why}",
                                VARIANTS[v]
                            ));
                        }
                        Err(e) => return Err(e),
                    }
                };
                results[v].push(run);
            }
        }
        eprintln!();
        let alone = median(results[0].iter().map(|r| r.target).collect());
        let _ = writeln!(
            table,
            "\n**{}**\n\n| variant | end-to-end record (s) | target's own time (s) | target slowdown | recording (MiB) |\n|---|---:|---:|---:|---:|",
            w.name
        );
        let mut medians = [Run::default(); 4];
        for (v, runs) in results.iter().enumerate() {
            let e2e: Vec<f64> = runs.iter().map(|r| r.end_to_end).collect();
            let own: Vec<f64> = runs.iter().map(|r| r.target).collect();
            let mib: Vec<f64> = runs
                .iter()
                .map(|r| r.bytes as f64 / (1024.0 * 1024.0))
                .collect();
            medians[v] = Run {
                end_to_end: median(e2e.clone()),
                target: median(own.clone()),
                bytes: (median(mib.clone()) * 1024.0 * 1024.0) as u64,
            };
            let _ = writeln!(
                table,
                "| {} | {} | {} | {:.3}× | {} |",
                VARIANTS[v],
                if v == 0 {
                    "".to_string()
                } else {
                    spread(&e2e, 2)
                },
                spread(&own, 2),
                medians[v].target / alone,
                if v == 0 {
                    "".to_string()
                } else {
                    spread(&mib, 2)
                }
            );
        }
        let [_, j, p, s] = medians;
        let _ = writeln!(
            table,
            "\njprof / samply: end-to-end **{:.2}×**, recording **{:.2}×**. jprof / perf: end-to-end {:.2}×, recording {:.2}×. Target slowdown: jprof **{:.3}×**, perf {:.3}×, samply {:.3}×.",
            j.end_to_end / s.end_to_end,
            j.bytes as f64 / s.bytes as f64,
            j.end_to_end / p.end_to_end,
            j.bytes as f64 / p.bytes as f64,
            j.target / alone,
            p.target / alone,
            s.target / alone,
        );
        for crash in &crashes {
            let _ = writeln!(table, "\nNote: {crash}");
        }
    }
    table += "\nRecordings: jprof's file; perf's perf.data plus the jitdump or perf map the \
              runtime wrote for it; samply's profile plus the same files (samply reads them \
              when the profile is loaded). End-to-end: from starting the record command to its \
              exit, the recording written.\n";
    Ok(table)
}
