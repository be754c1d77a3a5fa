//! Project automation: `cargo xtask example | demo | bench | fuzz`. Plain `std::process`
//! orchestration of cargo, g++, jprof, perf and inferno; no logic of jprof itself lives here.

mod bench;
mod command;
mod fuzz;
mod svg_check;
mod workspace;

use std::process::Command;

use anyhow::{bail, Context, Result};

use command::run;
use workspace::{build_example, build_jprof, target_dir};

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
