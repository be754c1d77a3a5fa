//! The filters every format shares, the flame graph's look options and `jprof diff`, run as
//! commands: on the real Java perf.data fixture (`tests/fixtures/shared/java`), on a live
//! recording of a program that spends its time in an inlined function, and on folded files;
//! and the progress bars, drawn on a pseudo-terminal only.

use crate::cli_support;
use cli_support::{run, JPROF};

use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared");

fn java(file: &str) -> PathBuf {
    Path::new(FIXTURES).join("java").join(file)
}

/// Runs `jprof ARGS`: (stdout, stderr, whether it succeeded).
fn outcome(args: &[&str]) -> (String, String, bool) {
    let out = run(args);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// `jprof report` of the Java JVMTI fixture with `extra` arguments: (stdout, stderr).
fn java_report(extra: &[&str]) -> (String, String) {
    let data = java("perf-jvmti.data");
    let dir = java("");
    let mut args = vec![
        "report",
        "-i",
        data.to_str().unwrap(),
        "--search-dir",
        dir.to_str().unwrap(),
    ];
    args.extend(extra);
    let (out, err, ok) = outcome(&args);
    assert!(ok, "{extra:?}: {err}");
    (out, err)
}

/// Folded stacks of the Java JVMTI fixture with `filters`.
fn java_folded(filters: &[&str]) -> String {
    let mut args = vec!["--format", "collapsed", "-o", "-"];
    args.extend(filters);
    java_report(&args).0
}

fn total(folded: &str) -> u64 {
    folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum()
}

fn roots(folded: &str) -> std::collections::BTreeSet<&str> {
    folded
        .lines()
        .map(|l| l.split(';').next().unwrap())
        .collect()
}

#[test]
fn thread_process_and_time_filters() {
    let all = java_folded(&[]);
    let everything = total(&all);
    assert!(everything > 0);
    // The whole recording is one Java process (the jitdump's pid).
    assert_eq!(total(&java_folded(&["--pid", "13732"])), everything);
    assert_eq!(java_folded(&["--pid", "1"]), "");
    // The launcher thread (tid = pid) was "perf-exec" until it exec'd java; --comm matches
    // the name a sample was taken under.
    let launcher = java_folded(&["--tid", "13732"]);
    assert_eq!(roots(&launcher), ["java", "perf-exec"].into());
    let named_java = java_folded(&["--comm", "java"]);
    assert_eq!(roots(&named_java), ["java"].into());
    assert_eq!(
        roots(&java_folded(&["--comm", "perf-exec"])),
        ["perf-exec"].into()
    );
    assert!(total(&launcher) > 0 && total(&launcher) < total(&named_java));
    assert_eq!(
        java_folded(&["--thread", "C2 CompilerThre"]),
        java_folded(&["--comm", "C2 CompilerThre"])
    );
    // Time ranges split the recording without losing or double-counting samples.
    let early = total(&java_folded(&["--time", "0..0.5"]));
    let late = total(&java_folded(&["--time", "0.5.."]));
    assert!(early > 0 && late > 0);
    assert_eq!(early + late, everything);
    // Filters combine.
    let both = java_folded(&["--time", "0.5..", "--comm", "java", "--pid", "13732"]);
    assert!(total(&both) < total(&named_java));
}

#[test]
fn lines_name_each_line_of_jit_code() {
    let folded = java_folded(&["--lines"]);
    assert!(
        folded.contains("demo.matrix.Matrix.multiply (demo/matrix/Matrix.java:"),
        "{}",
        &folded[..folded.len().min(2000)]
    );
    // Every line of multiply is its own frame, but the total stays the same.
    let multiply_lines: std::collections::BTreeSet<&str> = folded
        .split(';')
        .filter(|f| f.starts_with("demo.matrix.Matrix.multiply ("))
        .map(|f| f.split(')').next().unwrap())
        .collect();
    assert!(multiply_lines.len() > 1, "{multiply_lines:?}");
    assert_eq!(total(&folded), total(&java_folded(&[])));
}

/// Builds a program that spends nearly all its time in a function inlined into `outer`,
/// records it for real, and returns the recording's path.
fn record_inlined(dir: &Path) -> PathBuf {
    let src = dir.join("spin.c");
    std::fs::write(
        &src,
        "static inline __attribute__((always_inline)) long spin(long x)\n\
         {\n\
             for (long i = 0; i < 200000000; i++)\n\
                 x = x * 6364136223846793005L + 1442695040888963407L;\n\
             return x;\n\
         }\n\
         __attribute__((noinline)) long outer(long x) { return spin(x) + 1; }\n\
         int main(int argc, char **argv) { return (int)(outer(argc) & 1); }\n",
    )
    .unwrap();
    let bin = dir.join("spin");
    let status = Command::new("cc")
        .args(["-O2", "-g", "-fno-omit-frame-pointer"])
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .status()
        .expect("cc");
    assert!(status.success());
    let data = dir.join("spin.data");
    let (_, err, ok) = outcome(&[
        "record",
        "-o",
        data.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    data
}

/// Weight of the folded lines whose stack ends with `leaf`.
fn weight_ending(folded: &str, leaf: &str) -> u64 {
    folded
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(stack, _)| stack.ends_with(leaf))
        .map(|(_, w)| w.parse::<u64>().unwrap())
        .sum()
}

#[test]
fn no_inline_and_lines_on_a_live_recording() {
    let dir = tempfile::tempdir().unwrap();
    let data = record_inlined(dir.path());
    let data = data.to_str().unwrap();
    let report = |extra: &[&str]| {
        let mut args = vec!["report", "-i", data, "--format", "collapsed", "-o", "-"];
        args.extend(extra);
        let (out, err, ok) = outcome(&args);
        assert!(ok, "{err}");
        out
    };
    let inlined = report(&[]);
    let in_spin = weight_ending(&inlined, ";outer;spin_[i]");
    assert!(in_spin > total(&inlined) / 2, "{inlined}");
    let flat = report(&["--no-inline"]);
    assert!(!flat.contains("_[i]"), "{flat}");
    assert!(weight_ending(&flat, ";main;outer") >= in_spin, "{flat}");
    assert_eq!(total(&flat), total(&inlined));
    let lines = report(&["--lines"]);
    let spin_c = dir.path().join("spin.c");
    let inline_frame = format!("spin ({}:4)_[i]", spin_c.display());
    assert!(lines.contains(&inline_frame), "{lines}");
    // The outer frame's line is where it calls the inlined function (line 7).
    assert!(
        lines.contains(&format!("outer ({}:7);{inline_frame}", spin_c.display())),
        "{lines}"
    );
}

#[test]
fn flame_graph_look_options() {
    let dir = tempfile::tempdir().unwrap();
    let draw = |name: &str, extra: &[&str]| -> String {
        let svg = dir.path().join(name);
        let mut args = vec!["-o", svg.to_str().unwrap()];
        args.extend(extra);
        let (out, _) = java_report(&args);
        assert!(out.contains("Flame graph:"), "{out}");
        std::fs::read_to_string(svg).unwrap()
    };
    let plain = draw("plain.svg", &[]);
    let styled = draw(
        "styled.svg",
        &["--inverted", "--title", "Matrix run", "--min-width", "1"],
    );
    assert!(styled.contains(">Matrix run<"), "title");
    assert!(!plain.contains("Matrix run"));
    let frames = |svg: &str| svg.matches("<g><title>").count();
    assert!(
        frames(&styled) < frames(&plain),
        "--min-width 1 drops narrow frames ({} vs {})",
        frames(&styled),
        frames(&plain)
    );
    // inferno marks icicle graphs in the script's settings.
    assert!(styled.contains("inverted = true"), "icicle setting");
    assert!(plain.contains("inverted = false"));
    let (_, err, ok) = outcome(&["report", "--min-width", "150"]);
    assert!(!ok && err.contains("percentage"), "{err}");
}

/// The fill colour of the frame whose tooltip starts with `name (`.
fn fill_of(svg: &str, name: &str) -> String {
    let at = svg
        .find(&format!("<title>{name} ("))
        .unwrap_or_else(|| panic!("no frame {name}"));
    let rest = &svg[at..];
    let fill = &rest[rest.find("fill=\"").unwrap() + 6..];
    fill[..fill.find('"').unwrap()].to_string()
}

#[test]
fn diff_of_folded_files_colours_growth_and_shrinkage() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.folded");
    let b = dir.path().join("b.folded");
    std::fs::write(&a, "app;main;parse 50\napp;main;render 50\n").unwrap();
    std::fs::write(&b, "app;main;parse 20\napp;main;render 80\n").unwrap();
    let svg = dir.path().join("diff.svg");
    let (out, err, ok) = outcome(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("Differential flame graph:"), "{out}");
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.contains("jprof diff: "), "title");
    // B's shape; render grew (red), parse shrank (blue), main is unchanged (white).
    assert!(
        svg.contains("render (80 samples, 80.00%; +30.00%)"),
        "{svg}"
    );
    assert!(svg.contains("parse (20 samples, 20.00%; -30.00%)"), "{svg}");
    assert_eq!(fill_of(&svg, "render"), "rgb(255,100,100)");
    assert_eq!(fill_of(&svg, "parse"), "rgb(100,100,255)");
    assert_eq!(fill_of(&svg, "main"), "rgb(250,250,250)");
}

#[test]
fn diff_of_a_recording_with_itself_is_all_white() {
    let dir = tempfile::tempdir().unwrap();
    let data = java("perf-jvmti.data");
    let folded = dir.path().join("same.folded");
    std::fs::write(&folded, java_folded(&["--comm", "kernel-0"])).unwrap();
    let svg = dir.path().join("diff.svg");
    let (_, err, ok) = outcome(&[
        "diff",
        data.to_str().unwrap(),
        folded.to_str().unwrap(),
        "--search-dir",
        java("").to_str().unwrap(),
        "--comm",
        "kernel-0",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let svg = std::fs::read_to_string(svg).unwrap();
    let fills: std::collections::BTreeSet<&str> = svg
        .split("<g><title>")
        .skip(1)
        .map(|frame| {
            let fill = &frame[frame.find("fill=\"rgb(").unwrap() + 10..];
            &fill[..fill.find(')').unwrap()]
        })
        .collect();
    assert_eq!(fills, ["250,250,250"].into(), "no frame changed");
    // The demo's worker threads are named kernel-0 and kernel-1.
    assert!(
        svg.contains("demo.matrix.Matrix.multiply ("),
        "JIT frames drawn"
    );
    // A missing input is a clear error, not a panic.
    let (_, err, ok) = outcome(&["diff", "/nonexistent/a", folded.to_str().unwrap()]);
    assert!(!ok && err.contains("/nonexistent/a"), "{err}");
}

/// `jprof report` of the Java fixture to an SVG, under `script` (a pseudo-terminal) or with
/// plain pipes, bars allowed from the first moment: (stdout, stderr) as bytes turned text.
fn report_with_progress(svg: &Path, on_terminal: bool) -> (String, String) {
    let mut report = vec![JPROF.to_string()];
    report.extend(
        [
            "report",
            "-i",
            java("perf-jvmti.data").to_str().unwrap(),
            "--search-dir",
            java("").to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
        ]
        .map(String::from),
    );
    let mut cmd = if on_terminal {
        // util-linux `script` runs the command on a pty and copies what it draws to stdout.
        let mut c = Command::new("script");
        c.args(["-qec", &report.join(" "), "/dev/null"]);
        c
    } else {
        let mut c = Command::new(&report[0]);
        c.args(&report[1..]);
        c
    };
    let out = cmd
        .env("JPROF_PROGRESS_AFTER_MS", "0")
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn progress_bars_only_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let (shown, _) = report_with_progress(&dir.path().join("tty.svg"), true);
    // (The reading spinners race with how fast this small input is read: not asserted.)
    assert!(shown.contains("symbolizing ["), "{shown}");
    assert!(
        shown.contains("/1,968 ("),
        "the bar counts the samples: {shown}"
    );
    assert!(shown.contains("Top 15 functions"), "{shown}");
    let (stdout, stderr) = report_with_progress(&dir.path().join("pipe.svg"), false);
    assert!(stdout.contains("Top 15 functions"));
    assert!(
        !stdout.contains('\x1b') && !stdout.contains('\r'),
        "{stdout:?}"
    );
    assert_eq!(stderr, "", "nothing drawn on a pipe");
}

/// The text report's tables on the Java fixture: one table with `--sort`, `--limit` rows,
/// callers and callees of the hot method; options that cannot apply are refused.
#[test]
fn text_tables_sort_limit_callers_callees() {
    let (text, _) = java_report(&["--format", "text", "--sort", "self", "--limit", "3"]);
    let table = &text[text
        .find("Top 3 functions by self time:")
        .expect("self table")..];
    assert_eq!(table.lines().count(), 2 + 3, "{table}");
    assert!(!text.contains("by total"), "{text}");
    assert!(table.contains("demo.matrix.Matrix.multiply_[j]"), "{table}");

    let (text, _) = java_report(&["-f", "text", "--callees", "demo.matrix.Matrix.multiply"]);
    let callees = &text[text
        .find("Callees of demo.matrix.Matrix.multiply_[j] (total ")
        .expect("callees table")..];
    // Most of multiply's time is its own; dot is among what it calls.
    let share = |row: &str| -> f64 {
        let line = callees
            .lines()
            .find(|l| l.ends_with(row))
            .unwrap_or_else(|| panic!("no {row} in {callees}"));
        line.trim().split('%').next().unwrap().parse().unwrap()
    };
    assert!(share("[self]") > 80.0, "{callees}");
    assert!(share("demo.matrix.Matrix.dot_[j]") > 0.0, "{callees}");
    let (text, _) = java_report(&["-f", "text", "--callers", "Matrix.dot"]);
    assert!(
        text.contains("Callers of demo.matrix.Matrix.dot_[j]")
            && text.contains("demo.matrix.Matrix.multiply_[j]"),
        "{text}"
    );

    let data = java("perf-jvmti.data");
    let (_, err, ok) = outcome(&[
        "report",
        "-i",
        data.to_str().unwrap(),
        "-f",
        "collapsed",
        "--limit",
        "5",
    ]);
    assert!(!ok && err.contains("--format text"), "{err}");
}
