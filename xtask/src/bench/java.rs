//! The Java overhead comparison of `cargo xtask bench`: examples/java's demo (matrix multiply
//! with an inlined dot product) for a fixed time, alone, under `jprof record` (its JVMTI agent
//! and -XX:+PreserveFramePointer, added automatically), and under `perf record -g` with the
//! same frame-pointer flag and a perf map (-XX:+DumpPerfMapAtExit). The demo runs for a fixed
//! time, so the cost shows as fewer rounds done: slowdown = rounds alone / rounds profiled.
//! `jprof record --call-graph fp` runs beside it: the default before a JVM got the deep stack
//! copy cut down to each frame's links and `Method*` slot (docs/java.md), with both files'
//! bytes per sample. Then the same two on a deep workload, javac compiling 300 of the JDK's own
//! sources (`javac`): run time, bytes per sample, and how many main-thread samples reach
//! `com.sun.tools.javac.Main.main` by name.

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
    // The deep workload first: its table is printed as soon as it is measured.
    let deep = javac(jprof, runs, &dir)?;
    eprintln!("{deep}");
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
    s.push_str(&deep);
    Ok(s)
}

/// How many of the newest JDK's `java.util` sources javac compiles.
const JAVAC_SOURCES: usize = 300;

/// The JDK under /usr/lib/jvm with the highest major version that ships its sources.
fn jdk_with_sources() -> Result<std::path::PathBuf> {
    let mut found: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir("/usr/lib/jvm")
        .context("/usr/lib/jvm")?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("lib/src.zip").is_file() && p.join("bin/javac").is_file())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            let major = name
                .split(|c: char| !c.is_ascii_digit())
                .find_map(|w| w.parse().ok())?;
            Some((major, p))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, p)| p)
        .context("no JDK with lib/src.zip in /usr/lib/jvm (e.g. openjdk-17-source)")
}

/// From `jprof report -f collapsed --comm javac --weight samples`: the share of the main
/// thread's samples that reach `Main.main`, and of interpreted frames left `Interpreter`.
fn javac_depth(jprof: &Path, data: &Path) -> Result<(f64, f64)> {
    let out = Command::new(jprof)
        .args([
            "report",
            "-f",
            "collapsed",
            "--comm",
            "javac",
            "--weight",
            "samples",
        ])
        .args(["-o", "-", "-i"])
        .arg(data)
        .output()?;
    if !out.status.success() {
        bail!("jprof report: {}", String::from_utf8_lossy(&out.stderr));
    }
    let (mut all, mut reach, mut named, mut anonymous) = (0u64, 0u64, 0u64, 0u64);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let n: u64 = n.parse().unwrap_or(0);
        all += n;
        let frames = || stack.split(';');
        if frames().any(|f| f.starts_with("com.sun.tools.javac.Main.main")) {
            reach += n;
        }
        named += n * frames().filter(|f| f.ends_with("_[int]")).count() as u64;
        anonymous += n * frames().filter(|f| *f == "Interpreter_[j]").count() as u64;
    }
    Ok((
        100.0 * reach as f64 / all.max(1) as f64,
        100.0 * anonymous as f64 / (named + anonymous).max(1) as f64,
    ))
}

/// javac over 300 JDK sources: alone, under `jprof record --call-graph fp` (1 KiB copy, the
/// default before issue 27) and under `jprof record` (a JVM's default now), interleaved.
fn javac(jprof: &Path, runs: usize, dir: &Path) -> Result<String> {
    let home = jdk_with_sources()?;
    let work = dir.join("javac");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let status = Command::new(home.join("bin/jar"))
        .arg("xf")
        .arg(home.join("lib/src.zip"))
        .arg("java.base/java/util")
        .current_dir(&work)
        .status()
        .context("jar")?;
    if !status.success() {
        bail!("jar xf src.zip failed");
    }
    let mut sources = Vec::new();
    let mut dirs = vec![work.join("java.base/java/util")];
    while let Some(d) = dirs.pop() {
        for p in std::fs::read_dir(&d)?.flatten().map(|e| e.path()) {
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "java") {
                sources.push(p.display().to_string());
            }
        }
    }
    sources.sort();
    sources.truncate(JAVAC_SOURCES);
    let list = work.join("sources.txt");
    std::fs::write(&list, sources.join("\n"))?;
    let javac_argv = || -> Vec<OsString> {
        let mut v: Vec<OsString> = vec![home.join("bin/javac").into_os_string()];
        v.extend(
            [
                "-nowarn",
                "-implicit:none",
                "-XDshould-stop.ifNoError=FLOW",
                "-d",
            ]
            .map(OsString::from),
        );
        v.push(work.join("out").into_os_string());
        v.push("--patch-module".into());
        let mut patch = OsString::from("java.base=");
        patch.push(work.join("java.base"));
        v.push(patch);
        let mut at = OsString::from("@");
        at.push(&list);
        v.push(at);
        v
    };
    let mut meter = Meter {
        gnu_time: false,
        scratch: dir.to_path_buf(),
    };
    // Per variant: target seconds, bytes per sample, % reaching Main.main, % anonymous.
    let mut got: [Vec<[f64; 4]>; 3] = Default::default();
    eprintln!("== Java: javac over {JAVAC_SOURCES} JDK sources, alone / --call-graph fp / default ({runs} runs)");
    interleaved(runs, 3, |variant| {
        let data = work.join(format!("javac-{variant}.data"));
        let argv = match variant {
            0 => javac_argv(),
            _ => {
                let mut v = vec![OsString::from(jprof), "record".into(), "-o".into()];
                v.push(data.clone().into_os_string());
                if variant == 1 {
                    v.extend(["--call-graph".into(), "fp".into()]);
                }
                v.push("--".into());
                v.extend(javac_argv());
                v
            }
        };
        let m = meter.single(argv, &dir.join(format!("javac-{variant}.txt")))?;
        if variant == 0 {
            got[0].push([m.wall.as_secs_f64(), 0.0, 0.0, 0.0]);
            return Ok(m);
        }
        // "recorded N samples in S s (…": the target's run under the recorder.
        let summary = std::fs::read_to_string(dir.join("stderr-0.txt"))?;
        let mut words = summary.split_whitespace().skip_while(|w| *w != "recorded");
        let samples: f64 = words
            .nth(1)
            .and_then(|n| n.parse().ok())
            .context("samples")?;
        let seconds: f64 = words
            .nth(2)
            .and_then(|n| n.parse().ok())
            .context("seconds")?;
        let bytes = std::fs::metadata(&data)?.len() as f64 / samples;
        let (reach, anonymous) = javac_depth(jprof, &data)?;
        got[variant].push([seconds, bytes, reach, anonymous]);
        Ok(m)
    })?;
    let med = |v: usize, k: usize| median(got[v].iter().map(|r| r[k]).collect());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\njavac over {JAVAC_SOURCES} of {}'s `java.util` sources (a deep workload: its \
         driver stays interpreted), medians of {runs} interleaved runs:\n",
        home.display()
    );
    let _ = writeln!(
        s,
        "| run | target run (s) | file bytes/sample | main-thread samples reaching `Main.main` | interpreted frames left `Interpreter` |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|");
    let _ = writeln!(s, "| javac alone | {:.2} | | | |", med(0, 0));
    for (v, label) in [
        (
            1,
            "`jprof record --call-graph fp` (the default before: 1 KiB copy)",
        ),
        (
            2,
            "`jprof record` (now: 64 KiB copy cut down, frames past it read by BPF)",
        ),
    ] {
        let _ = writeln!(
            s,
            "| {label} | {:.2} | {:.0} | {:.1}% | {:.2}% |",
            med(v, 0),
            med(v, 1),
            med(v, 2),
            med(v, 3)
        );
    }
    Ok(s)
}
