//! Project automation: `cargo xtask example | demo | bench | fuzz`. Plain `std::process`
//! orchestration of cargo, g++, jprof, perf and inferno; no logic of jprof itself lives here.

mod bench;
mod fuzz;
mod svg_check;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  example                  compile examples/hotspots with g++ into target/examples/hotspots
  demo                     build jprof (release), profile the example, write target/demo/flamegraph.svg
  bench [--runs N] [--scale S]
                           jprof record/report vs perf record/perf script + inferno, side by side
                           (medians of N alternated runs, default 5; S scales the workload, default 1),
                           then every report writer on a 1 M-sample profile (--writers-only: just that),
                           Java, Mono, XRay, off-CPU, Node and CPython comparisons (--off-cpu-only,
                           --node-only, --python-only: CPython 3.12's deep stacks, default vs fp),
                           recording size, recorder memory and binary sizes (--footprint-only);
                           --peers: jprof vs perf record -g vs samply on tsc, javac and a native
                           program (end-to-end time, recording size, target slowdown) and off-CPU
  fuzz [SECS] [--stable]   fuzz every target (recording reader, jitdump, perf map) for SECS seconds
                           each (default 60); uses cargo-fuzz on nightly, or a deterministic
                           stable-toolchain fallback
  svg-check [SVG] [--search TERM] [--click NAME]
                           open a flame graph (default target/demo/flamegraph.svg) in headless
                           Chromium, press Ctrl-F (TERM), click the frame NAME, and fail unless
                           it rendered, highlighted the matches and zoomed; keeps a screenshot
                           in target/svg-check/";

fn main() -> std::process::ExitCode {
    match run_task() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run_task() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("example") => build_example().map(|_| ()),
        Some("demo") => demo(),
        Some("bench") => bench::run(rest),
        Some("fuzz") => fuzz::run(rest),
        Some("svg-check") => svg_check::run(rest),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown task {other:?}\n\n{USAGE}"),
        None => bail!("no task given\n\n{USAGE}"),
    }
}

/// The workspace root (xtask lives one level below it).
pub fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Cargo's target directory, honouring `CARGO_TARGET_DIR`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root().join(dir),
        None => root().join("target"),
    }
}

/// The cargo that runs us, so the same toolchain builds jprof.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Shows a command the way a shell would, for progress and error messages.
pub fn describe(cmd: &Command) -> String {
    let mut words = vec![cmd.get_program().to_string_lossy().into_owned()];
    words.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    words.join(" ")
}

/// Runs a command with inherited stdio; fails with the command line if it fails.
pub fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("$ {}", describe(cmd));
    let status = cmd
        .status()
        .with_context(|| format!("cannot start `{}`", describe(cmd)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", describe(cmd));
    }
    Ok(())
}

/// Whether `program` can be started (found on PATH and runs `--version`).
pub fn available(program: impl AsRef<OsStr>) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// Builds jprof in release mode; returns the binary's path.
pub fn build_jprof() -> Result<PathBuf> {
    run(cargo().current_dir(root()).args([
        "build",
        "--release",
        "--package",
        "jprof",
        "--bin",
        "jprof",
    ]))?;
    Ok(target_dir().join("release/jprof"))
}

/// Compiles examples/hotspots: the frameless leaf on its own with -fomit-frame-pointer, the
/// rest with frame pointers (see examples/README.md). Returns the binary's path.
pub fn build_example() -> Result<PathBuf> {
    if !available("g++") {
        bail!("g++ is needed to build the example: apt-get install g++");
    }
    let src = root().join("examples/hotspots");
    let out = target_dir().join("examples");
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let compile = |file: &str, frame_pointer: &str, object: &str| -> Result<PathBuf> {
        let object = out.join(object);
        run(Command::new("g++")
            .args(["-O2", "-g", frame_pointer, "-c"])
            .arg(src.join(file))
            .arg("-o")
            .arg(&object))?;
        Ok(object)
    };
    let main_object = compile("hotspots.cpp", "-fno-omit-frame-pointer", "hotspots.o")?;
    let leaf_object = compile("leaf.cpp", "-fomit-frame-pointer", "leaf.o")?;
    let binary = out.join("hotspots");
    run(Command::new("g++")
        .arg(main_object)
        .arg(leaf_object)
        .arg("-o")
        .arg(&binary))?;
    eprintln!("built {}", binary.display());
    Ok(binary)
}

/// The README quick start: build, profile the example, draw the flame graph.
fn demo() -> Result<()> {
    let jprof = build_jprof()?;
    let example = build_example()?;
    let dir = target_dir().join("demo");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let data = dir.join("jprof.data");
    let svg = dir.join("flamegraph.svg");
    run(Command::new(&jprof)
        .arg("record")
        .arg("-o")
        .arg(&data)
        .arg("--")
        .arg(&example))?;
    run(Command::new(&jprof)
        .arg("report")
        .arg("-i")
        .arg(&data)
        .arg("-o")
        .arg(&svg))?;
    // `jprof report` has printed the top functions and where the SVG is.
    println!(
        "Open it in a browser; folded stacks: {} report -i {} --format collapsed",
        jprof.display(),
        data.display()
    );
    Ok(())
}
