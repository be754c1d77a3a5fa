//! The whole-host overhead of `cargo xtask bench --host-only` (issue 28): while a JVM, a Node
//! (--perf-basic-prof) and a CPython 3.12 (-X perf) keep both CPUs busy, a fixed native
//! workload (examples/hotspots) is timed with nothing recording, under `jprof record -a -F 999`
//! and under `perf record -a -g -F 999`, alternated. The recorder runs from just before the
//! workload starts until it ends (then SIGINT); its own CPU time (user + system, finishing its
//! file included) is what it cost the host beside the slowdown the workload felt.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::measure::{median, GNU_TIME};
use crate::command::available;
use crate::workspace::target_dir;

/// The JIT processes of the host, killed when dropped.
struct Busy(Vec<Child>);

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

const JAVA: &str = "public class Hot {\n\
  static long spin(long n) { long s = 0; for (long i = 0; i < n; i++) { s += i * i % 7; } return s; }\n\
  public static void main(String[] a) { long x = 0; System.out.println(\"ready\");\n\
    for (;;) { x += spin(100000); if (x == 42) System.out.println(x); } }\n\
}\n";
const NODE: &str = "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n\
let acc = 0; console.log('ready'); for (;;) { acc += fib(20); }\n";
const PYTHON: &str = "def pyfib(n): return n if n < 2 else pyfib(n - 1) + pyfib(n - 2)\n\
print('ready', flush=True)\nwhile True: pyfib(18)\n";

/// Starts `command` and waits for its `ready` line.
fn start(mut command: Command, busy: &mut Busy) -> Result<()> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {command:?}"))?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
    busy.0.push(child);
    if line.trim() != "ready" {
        bail!("{command:?} did not start");
    }
    Ok(())
}

/// CPython 3.12 from pyenv.
fn python_3_12() -> Option<PathBuf> {
    let home = std::env::var("HOME").ok()?;
    std::fs::read_dir(Path::new(&home).join(".pyenv/versions"))
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin/python3.12"))
        .find(|p| p.is_file())
}

fn start_jit_processes(dir: &Path) -> Result<Busy> {
    let mut busy = Busy(Vec::new());
    std::fs::write(dir.join("Hot.java"), JAVA)?;
    let mut java = Command::new("java");
    java.current_dir(dir)
        .env_remove("JAVA_TOOL_OPTIONS")
        .arg("Hot.java");
    start(java, &mut busy)?;
    let mut node = Command::new("node");
    node.current_dir(dir)
        .args(["--perf-basic-prof", "-e", NODE]);
    start(node, &mut busy)?;
    let python = python_3_12().context("CPython 3.12 under ~/.pyenv/versions")?;
    let mut py = Command::new(python);
    py.current_dir(dir).args(["-X", "perf", "-c", PYTHON]);
    start(py, &mut busy)?;
    Ok(busy)
}

/// One run: the workload's wall seconds, and the recorder's CPU seconds, wall seconds, file
/// size (MiB) and peak resident memory (MiB) when one ran.
struct Run {
    workload_s: f64,
    recorder: Option<(f64, f64, f64, f64)>,
}

/// Runs the workload once, under `recorder` (an argument vector) when given.
fn run_once(
    example: &Path,
    scale: &str,
    recorder: Option<(&[String], &Path)>,
    dir: &Path,
) -> Result<Run> {
    let times = dir.join("recorder-time.txt");
    let mut rec = match recorder {
        Some((argv, _)) => {
            let child = Command::new(GNU_TIME)
                .args(["-f", "%U %S %e %M", "-o"])
                .arg(&times)
                .args(argv)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            // The recorder is GNU time's child; it has started sampling once its output exists.
            let out = recorder.map(|(_, o)| o.to_path_buf()).expect("given");
            let deadline = Instant::now() + Duration::from_secs(30);
            while !out.exists() && !partial_exists(&out) {
                if Instant::now() > deadline {
                    bail!("the recorder wrote nothing in 30 s");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Some(child)
        }
        None => None,
    };
    let started = Instant::now();
    let status = Command::new(example)
        .arg(scale)
        .stdout(Stdio::null())
        .status()?;
    let workload_s = started.elapsed().as_secs_f64();
    if !status.success() {
        bail!("the workload failed ({status})");
    }
    let recorder = match rec.take() {
        None => None,
        Some(mut time) => {
            let pid = time.id();
            let inner: i32 = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))?
                .split_whitespace()
                .next()
                .and_then(|p| p.parse().ok())
                .context("GNU time's child")?;
            // As Ctrl-C would: both recorders then finish their file.
            Command::new("kill")
                .args(["-INT", &inner.to_string()])
                .status()?;
            time.wait()?;
            let text = std::fs::read_to_string(&times)?;
            let v: Vec<f64> = text
                .lines()
                .last()
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            if v.len() != 4 {
                bail!("no times in {}: {text}", times.display());
            }
            let out = recorder.map(|(_, o)| o).expect("given");
            let mib = std::fs::metadata(out).map_or(0.0, |m| m.len() as f64 / (1 << 20) as f64);
            Some((v[0] + v[1], v[2], mib, v[3] / 1024.0))
        }
    };
    Ok(Run {
        workload_s,
        recorder,
    })
}

/// jprof writes `NAME.partial-PID` beside its output until the recording is complete.
fn partial_exists(out: &Path) -> bool {
    let (Some(dir), Some(name)) = (out.parent(), out.file_name()) else {
        return false;
    };
    let prefix = format!("{}.partial-", name.to_string_lossy());
    std::fs::read_dir(dir).is_ok_and(|it| {
        it.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
    })
}

pub fn compare(jprof: &Path, example: &Path, runs: usize) -> Result<String> {
    if !Path::new(GNU_TIME).exists() {
        bail!("the host comparison needs {GNU_TIME}: apt-get install time");
    }
    if !available("perf") {
        bail!("the host comparison needs perf: apt-get install linux-perf");
    }
    let dir = target_dir().join("bench-host");
    std::fs::create_dir_all(&dir)?;
    let _busy = start_jit_processes(&dir)?;
    let jprof_out = dir.join("host.data");
    let perf_out = dir.join("perf.data");
    let jprof_argv: Vec<String> = vec![
        jprof.display().to_string(),
        "record".into(),
        "-a".into(),
        "-F".into(),
        "999".into(),
        "-o".into(),
        jprof_out.display().to_string(),
    ];
    let perf_argv: Vec<String> = ["perf", "record", "-q", "-a", "-g", "-F", "999", "-o"]
        .iter()
        .map(|s| s.to_string())
        .chain([perf_out.display().to_string()])
        .collect();
    let scale = "1";
    let mut results: [Vec<Run>; 3] = Default::default();
    eprintln!(
        "== whole host: nothing vs jprof record -a vs perf record -a -g, 999 Hz ({runs} runs)"
    );
    for round in 0..runs {
        eprint!("\rround {}/{runs}", round + 1);
        for k in 0..3 {
            let variant = (round + k) % 3;
            let _ = std::fs::remove_file(&jprof_out);
            let _ = std::fs::remove_file(&perf_out);
            let run = match variant {
                0 => run_once(example, scale, None, &dir)?,
                1 => run_once(example, scale, Some((&jprof_argv, &jprof_out)), &dir)?,
                _ => run_once(example, scale, Some((&perf_argv, &perf_out)), &dir)?,
            };
            results[variant].push(run);
        }
    }
    eprintln!();
    let workload = |v: usize| median(results[v].iter().map(|r| r.workload_s).collect());
    let rec = |v: usize, f: fn(&(f64, f64, f64, f64)) -> f64| {
        median(
            results[v]
                .iter()
                .filter_map(|r| r.recorder.as_ref().map(f))
                .collect(),
        )
    };
    let alone = workload(0);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "Whole host, 2 CPUs kept busy by a JVM, a Node and a CPython 3.12 (JIT names on), \
         workload examples/hotspots {scale}; medians of {runs}\n"
    );
    let _ = writeln!(
        t,
        "| recorder | workload s | slowdown | recorder CPU s | recorder CPU per recorded s | recorder peak RSS MiB | recording MiB |"
    );
    let _ = writeln!(t, "|---|---|---|---|---|---|---|");
    let _ = writeln!(t, "| nothing | {alone:.2} | 1.00× | – | – | – | – |");
    for (v, name) in [
        (1, "`jprof record -a -F 999`"),
        (2, "`perf record -a -g -F 999`"),
    ] {
        let w = workload(v);
        let cpu = rec(v, |r| r.0);
        let wall = rec(v, |r| r.1);
        let mib = rec(v, |r| r.2);
        let rss = rec(v, |r| r.3);
        let _ = writeln!(
            t,
            "| {name} | {w:.2} | {:.2}× | {cpu:.2} | {:.3} | {rss:.0} | {mib:.1} |",
            w / alone,
            cpu / wall.max(1e-9),
        );
    }
    Ok(t)
}
