//! Runtimes started through launchers get their JIT code named with no flags (issue 14):
//! `javac`, a `#!/usr/bin/env node` shim, `sh -c 'exec java …'`, and a JVM whose launcher
//! cleared the environment (`env -i`: the agent is attached while recording). Each names
//! ≥ 95% of its samples in JIT code, as the report's coverage line says.

use crate::cli_support;
use cli_support::{jprof, text};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

/// JVM runs are CPU-heavy on two cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared");

use crate::jdk_support;
use jdk_support::java;

/// Records `command` in `dir` with no flags; returns the recorder's output and the report's
/// coverage lines as (comm, percent, samples).
fn record(dir: &Path, command: &[&str]) -> (Output, Vec<(String, f64, u64)>) {
    record_with(dir, &[], command)
}

/// `record` with recording options (no runtime flags: those are jprof's job).
fn record_with(
    dir: &Path,
    options: &[&str],
    command: &[&str],
) -> (Output, Vec<(String, f64, u64)>) {
    let data = dir.join("run.data");
    let out = jprof()
        .args(["record", "-o"])
        .arg(&data)
        .args(options)
        .arg("--")
        .args(command)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let report = jprof()
        .args(["report", "-f", "text", "-o", "-", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(report.status.success(), "{}", text(&report));
    let lines = String::from_utf8_lossy(&report.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("JIT names: pid "))
        .filter_map(|l| {
            // "4242 (javac): 97.1% of 5123 samples in JIT code named"
            let (_, rest) = l.split_once(" (")?;
            let (comm, rest) = rest.split_once("): ")?;
            let (pct, rest) = rest.split_once("% of ")?;
            let samples = rest.split_whitespace().next()?.parse().ok()?;
            Some((comm.to_string(), pct.parse().ok()?, samples))
        })
        .collect();
    (out, lines)
}

/// The recorder's summary lines `JIT names: pid N: P% of M samples …` as (percent, samples).
fn summary_coverage(out: &Output) -> Vec<(f64, u64)> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| l.split_once("JIT names: pid ").map(|x| x.1))
        .filter_map(|l| {
            let (_, rest) = l.split_once(": ")?;
            let (pct, rest) = rest.split_once("% of ")?;
            Some((
                pct.parse().ok()?,
                rest.split_whitespace().next()?.parse().ok()?,
            ))
        })
        .collect()
}

fn assert_named(lines: &[(String, f64, u64)], out: &Output, min_samples: u64) {
    // The record summary says what the report says, to within a few points: the recorder
    // counts by JIT-index lookups before symbolization, the report by the frames it shows.
    let summary = summary_coverage(out);
    assert_eq!(
        summary.len(),
        lines.len(),
        "{summary:?} vs {lines:?}: {}",
        text(out)
    );
    for ((pct, n), (_, rpct, rn)) in summary.iter().zip(lines) {
        assert!((pct - rpct).abs() <= 5.0, "{summary:?} vs {lines:?}");
        assert!(*pct >= 90.0 && *n > 0, "{summary:?}");
        assert!(n.abs_diff(*rn) <= 3 + rn / 10, "{summary:?} vs {lines:?}");
    }
    let best = lines
        .iter()
        .max_by_key(|l| l.2)
        .unwrap_or_else(|| panic!("no JIT coverage line: {}", text(out)));
    assert!(best.2 >= min_samples, "{lines:?}: {}", text(out));
    assert!(best.1 >= 95.0, "{lines:?}: {}", text(out));
}

/// A Java program that spins in JIT-compiled code for `millis` of its main thread's CPU time
/// (not wall time: on a loaded machine the loop still gets as many samples).
fn spin_class(dir: &Path) -> PathBuf {
    let classes = dir.join("classes");
    std::fs::create_dir_all(&classes).unwrap();
    let src = dir.join("Spin.java");
    std::fs::write(
        &src,
        "public class Spin { static long x;\n\
         static long work(int n) { long s = 0; for (int i = 0; i < n; i++) s += i * 7L ^ (s >> 3); return s; }\n\
         public static void main(String[] a) {\n\
         java.lang.management.ThreadMXBean cpu = java.lang.management.ManagementFactory.getThreadMXBean();\n\
         long end = cpu.getCurrentThreadCpuTime() + Long.parseLong(a[0]) * 1000000L;\n\
         while (cpu.getCurrentThreadCpuTime() < end) for (int i = 0; i < 10; i++) x += work(10000); } }\n",
    )
    .unwrap();
    let ok = Command::new(java().with_file_name("javac"))
        .arg("-d")
        .arg(&classes)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success());
    classes
}

#[test]
fn javac_compiling_a_multi_file_project_is_named() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let sources: Vec<String> = ["Main", "Kernel", "Matrix"]
        .iter()
        .map(|c| format!("{FIXTURES}/src/demo/matrix/{c}.java"))
        .collect();
    let javac = java().with_file_name("javac");
    let mut command = vec![javac.to_str().unwrap(), "-d", "out"];
    command.extend(sources.iter().map(String::as_str));
    let (out, lines) = record(dir.path(), &command);
    assert!(dir.path().join("out/demo/matrix/Main.class").is_file());
    assert!(
        text(&out).contains("jprof's JVMTI agent wrote its jitdump"),
        "{}",
        text(&out)
    );
    assert_named(&lines, &out, 20);
}

#[test]
fn a_shell_that_execs_java_is_named() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let classes = spin_class(dir.path());
    let script = format!(
        "exec {} -cp {} Spin 3000",
        java().display(),
        classes.display()
    );
    let (out, lines) = record(dir.path(), &["sh", "-c", &script]);
    assert_named(&lines, &out, 500);
}

#[test]
fn a_jvm_whose_environment_was_cleared_gets_the_agent_attached() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let classes = spin_class(dir.path());
    let script = format!(
        "#!/bin/sh\nexec env -i {} -cp {} Spin 6000\n",
        java().display(),
        classes.display()
    );
    let launcher = dir.path().join("launch.sh");
    std::fs::write(&launcher, script).unwrap();
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (out, lines) = record(dir.path(), &[launcher.to_str().unwrap()]);
    assert!(
        text(&out).contains("it had started without the agent"),
        "{}",
        text(&out)
    );
    // The advice fits the case: not "use jprof record -- java", which is what was done.
    assert!(
        !text(&out).contains("or with `jprof record -- java"),
        "{}",
        text(&out)
    );
    assert_named(&lines, &out, 500);
}

#[test]
fn a_node_shim_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let shim = dir.path().join("tool");
    // 3 s of the process's CPU time, not of wall time: a loaded machine once left the hot
    // function 317 samples of the 500 asked for.
    std::fs::write(
        &shim,
        "#!/usr/bin/env node\n\
         function hot(n) { let s = 0; for (let i = 0; i < n; i++) s += (i * 7) ^ (s >> 3); return s; }\n\
         const cpu = () => { const u = process.cpuUsage(); return u.user + u.system; };\n\
         const end = cpu() + 3e6; let x = 0;\n\
         while (cpu() < end) for (let i = 0; i < 10; i++) x += hot(20000);\n\
         console.log(x > 0);\n",
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (out, lines) = record(dir.path(), &["./tool"]);
    assert!(
        text(&out).contains("V8 wrote its jitdump"),
        "{}",
        text(&out)
    );
    assert_named(&lines, &out, 500);
    // The side files Node wrote only for jprof are gone.
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("jit-") || n.starts_with("isolate-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn programs_that_are_no_runtime_are_not_disturbed() {
    let dir = tempfile::tempdir().unwrap();
    let (out, lines) = record(dir.path(), &["sh", "-c", "echo plain"]);
    assert!(lines.is_empty(), "{lines:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("plain"));
    let left = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(left, 1, "only the recording is written");
}

#[test]
fn mcs_through_debians_wrapper_is_named() {
    // mcs is a shell script that runs `mono mcs.exe`; CI installs mono-mcs (.ci/run).
    let mcs = Path::new("/usr/bin/mcs");
    assert!(
        mcs.is_file(),
        "mono-mcs is not installed (.ci/run installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        format!("{FIXTURES}/src/Shapes.cs"),
        dir.path().join("Shapes.cs"),
    )
    .unwrap();
    // mcs spends ~0.03 s in JIT code (the rest is its AOT image): at 999 Hz that is ~25
    // samples, where one sample in a stub moves the share by 4 points. 4999 Hz gives ~130.
    let (out, lines) = record_with(
        dir.path(),
        &["-F", "4999"],
        &["mcs", "-out:Shapes.exe", "Shapes.cs"],
    );
    assert!(dir.path().join("Shapes.exe").is_file(), "{}", text(&out));
    // With --jitmap where /tmp lets jprof ask for it (docs/mono.md), from the log alone else.
    assert!(
        text(&out).contains("the log profiler and --jitmap named managed code")
            || text(&out).contains("the log profiler named managed code (no --jitmap perf map"),
        "{}",
        text(&out)
    );
    assert_named(&lines, &out, 5);
    assert!(
        text(&out).contains("--call-graph dwarf` unwinds it with the images' CFI"),
        "{}",
        text(&out)
    );
}

/// Mono's AOT images keep their CFI in `.debug_frame` (their `.eh_frame` is empty): in dwarf
/// mode, most of mcs's managed stacks reach `Main` through them.
#[test]
fn mcs_stacks_reach_main_through_aot_images_in_dwarf_mode() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        format!("{FIXTURES}/src/Shapes.cs"),
        dir.path().join("Shapes.cs"),
    )
    .unwrap();
    let data = dir.path().join("mcs.data");
    let out = jprof()
        .args(["record", "--call-graph", "dwarf", "-o"])
        .arg(&data)
        .args(["--", "mcs", "-out:Shapes.exe", "Shapes.cs"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let folded = jprof()
        .args(["report", "-f", "collapsed", "--comm", "mono", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let (mut all, mut main) = (0u64, 0u64);
    for line in String::from_utf8_lossy(&folded.stdout).lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let n: u64 = n.parse().unwrap();
        all += n;
        if stack.contains("Main") {
            main += n;
        }
    }
    assert!(
        main * 10 >= all * 6,
        "{main} of {all} weight of mcs's stacks reach Main"
    );
}
