//! `cargo xtask bench`: jprof against perf on the same workload in one run. Every variant runs
//! N times, interleaved (the order rotates each round so drift in machine speed hits all
//! variants alike); the table shows medians. Wall time is measured here; peak memory comes from
//! `/usr/bin/time -f %M` (GNU time) wrapped around each process.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::command::available;
use crate::workspace::{build_example, build_jprof, target_dir};
use measure::{interleaved, rss_cell, Meter, Summary, GNU_TIME};

/// An argument vector from mixed `&str`/path arguments.
macro_rules! argv {
    ($($arg:expr),* $(,)?) => { vec![$(OsString::from(&$arg)),*] };
}

/// The workspace's `cargo bench` benchmarks.
mod benches;
/// Wall time, peak memory, interleaved runs and medians.
mod measure;

/// The fleet store in ClickHouse: insert rate, bytes per sample, fleet query time.
mod fleet;
/// Recording size, recorder memory and binary sizes against perf (issue 16).
mod footprint;
/// jprof record -a against perf record -a -g on a host busy with JIT processes.
mod host;
/// `jprof report -i perf.data` against `perf inject --jit` + `perf script` + inferno.
mod import;
/// The Java demo under jprof's agent against perf record + a perf map.
mod java;
/// .mlpd decode throughput and `jprof report` against mprof-report.
mod mono;
/// Node under `jprof record` against Node with the same V8 flags alone.
mod node;
/// `record --off-cpu`: accuracy on known waits, overhead against perf's sched_switch.
mod off_cpu;
/// jprof against `perf record -g` and samply on tsc, javac and a native program.
mod peers;
/// CPython 3.12's deep stacks: the default's 64 KiB copy against fp, and alone.
mod python;
/// `jprof report -f text` on an XRay log against `llvm-xray account`.
mod xray;

struct Options {
    runs: usize,
    scale: String,
    /// Only the perf.data import comparison (`--import-only`).
    import_only: bool,
    /// Only the Java overhead comparison (`--java-only`).
    java_only: bool,
    /// Only the Mono comparison (`--mono-only`).
    mono_only: bool,
    /// Only the XRay account comparison (`--xray-only`).
    xray_only: bool,
    /// Only the report writers (`--writers-only`).
    writers_only: bool,
    /// Only the off-CPU comparison (`--off-cpu-only`).
    off_cpu_only: bool,
    /// Only the Node overhead (`--node-only`).
    node_only: bool,
    /// Only the CPython deep-stack comparison (`--python-only`).
    python_only: bool,
    /// Only the footprint comparison (`--footprint-only`).
    footprint_only: bool,
    /// jprof vs perf vs samply on tsc, javac and a native program, and off-CPU (`--peers`).
    peers: bool,
    /// Only the fleet store's scale (`--fleet-only`; `--scale S`: S × 10 million samples).
    fleet_only: bool,
    /// Only the whole-host comparison (`--host-only`).
    host_only: bool,
}

fn parse(args: &[String]) -> Result<Options> {
    let mut options = Options {
        runs: 5,
        scale: "1".into(),
        import_only: false,
        java_only: false,
        mono_only: false,
        xray_only: false,
        writers_only: false,
        off_cpu_only: false,
        node_only: false,
        python_only: false,
        footprint_only: false,
        peers: false,
        fleet_only: false,
        host_only: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .with_context(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--runs" => {
                options.runs = value("--runs")?.parse().context("--runs: a number")?;
                if options.runs < 5 {
                    bail!("--runs must be at least 5 (the medians need them)");
                }
            }
            "--scale" => options.scale = value("--scale")?,
            "--import-only" => options.import_only = true,
            "--java-only" => options.java_only = true,
            "--mono-only" => options.mono_only = true,
            "--xray-only" => options.xray_only = true,
            "--writers-only" => options.writers_only = true,
            "--off-cpu-only" => options.off_cpu_only = true,
            "--node-only" => options.node_only = true,
            "--python-only" => options.python_only = true,
            "--footprint-only" => options.footprint_only = true,
            "--peers" => options.peers = true,
            "--fleet-only" => options.fleet_only = true,
            "--host-only" => options.host_only = true,
            other => bail!(
                "bench: unknown argument {other:?} (try --runs N, --scale S, --import-only, --java-only, --mono-only, --xray-only, --writers-only, --off-cpu-only, --node-only, --python-only, --footprint-only, --peers, --fleet-only, --host-only)"
            ),
        }
    }
    Ok(options)
}

/// Fails with install instructions when a tool the comparison needs is missing: perf, and
/// inferno where perf's flame graphs are drawn (`inferno`; not for `--java-only`).
fn check_tools(inferno: bool) -> Result<()> {
    let mut missing = Vec::new();
    if !available("perf") {
        missing.push("perf: apt-get install linux-perf");
    }
    for tool in ["inferno-collapse-perf", "inferno-flamegraph"]
        .into_iter()
        .filter(|_| inferno)
    {
        if !available(tool) {
            missing.push("inferno-collapse-perf, inferno-flamegraph: cargo install inferno (and put ~/.cargo/bin on PATH)");
            break;
        }
    }
    if !missing.is_empty() {
        bail!(
            "the benchmark compares against tools that are not installed:\n  {}",
            missing.join("\n  ")
        );
    }
    Ok(())
}

fn file_mib(path: &Path) -> f64 {
    std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / (1024.0 * 1024.0))
}

pub fn run(args: &[String]) -> Result<()> {
    let options = parse(args)?;
    if let Some(table) = only(&options)? {
        return table.show();
    }
    check_tools(true)?;
    let jprof = build_jprof()?;
    let example = build_example()?;
    let mut text = against_perf(&options, &jprof, &example)?;
    text.push('\n');
    text.push_str(&import::compare(&jprof, options.runs)?);
    text.push_str(&benches::jitdump_throughput()?);
    text.push_str(&benches::writers()?);
    text.push_str(&java::compare(&jprof, options.runs)?);
    text.push_str(&mono::compare(&jprof, options.runs)?);
    text.push_str(&xray::compare(&jprof, options.runs)?);
    text.push_str(&off_cpu::compare(&jprof, options.runs)?);
    text.push_str(&node::compare(&jprof, options.runs)?);
    text.push_str(&python::compare(&jprof, options.runs)?);
    text.push_str(&footprint::compare(&jprof, &example)?);
    Table {
        text,
        file: Some("bench.md"),
    }
    .show()
}

/// A comparison's table, and the file in the target directory it is also written to.
struct Table {
    text: String,
    file: Option<&'static str>,
}

impl Table {
    fn only(text: String) -> Option<Self> {
        Some(Self { text, file: None })
    }

    /// Prints the table, and writes its file.
    fn show(self) -> Result<()> {
        print!("{}", self.text);
        if let Some(name) = self.file {
            let md = target_dir().join(name);
            std::fs::write(&md, &self.text)
                .with_context(|| format!("cannot write {}", md.display()))?;
            eprintln!("written to {}", md.display());
        }
        Ok(())
    }
}

/// The one comparison an `--X-only` option or `--peers` asks for (each checks only the tools it
/// needs); None for the whole run.
fn only(options: &Options) -> Result<Option<Table>> {
    let runs = options.runs;
    Ok(if options.writers_only {
        Table::only(benches::writers()?)
    } else if options.xray_only {
        // Needs llvm-xray only, not perf or inferno.
        Table::only(xray::compare(&build_jprof()?, runs)?)
    } else if options.fleet_only {
        // Needs Debian's clickhouse-server only.
        let scale: f64 = options.scale.parse().context("--scale: a number")?;
        Table::only(fleet::measure(&build_jprof()?, scale * 10.0)?)
    } else if options.host_only {
        Table::only(host::compare(&build_jprof()?, &build_example()?, runs)?)
    } else if options.node_only {
        Table::only(node::compare(&build_jprof()?, runs)?)
    } else if options.python_only {
        Table::only(python::compare(&build_jprof()?, runs)?)
    } else if options.off_cpu_only {
        // Needs perf only.
        if !available("perf") {
            bail!("the off-CPU comparison needs perf: apt-get install linux-perf");
        }
        Table::only(off_cpu::compare(&build_jprof()?, runs)?)
    } else if options.peers {
        let jprof = build_jprof()?;
        let mut text = peers::compare(&jprof, &build_example()?, runs)?;
        // Kept as it comes: a peer that crashes later (perf 6.1 aborts in util/build-id.c
        // while a jprof -a runs beside it) must not cost the tables already measured.
        let partial = target_dir().join("bench-peers.partial.md");
        std::fs::write(&partial, &text)?;
        let dir = target_dir().join("bench-offcpu");
        std::fs::create_dir_all(&dir)?;
        let waits = off_cpu::build(&dir)?;
        // Both threads on one CPU too: no idle CPU to wake, so the cost per switch shows alone.
        for (placement, hops) in [("split", off_cpu::HOPS), ("same", 500_000)] {
            match off_cpu::overhead(&jprof, &waits, &dir, runs, placement, hops) {
                Ok(table) => text += &table,
                Err(e) => {
                    let first = e.to_string();
                    let why = first.lines().last().unwrap_or_default().to_string();
                    text += &format!("\nThe ping-pong with threads {placement} could not be measured: a run failed ({why}).\n");
                }
            }
            std::fs::write(&partial, &text)?;
        }
        Some(Table {
            text,
            file: Some("bench-peers.md"),
        })
    } else if options.footprint_only {
        if !available("perf") {
            bail!("the footprint comparison needs perf: apt-get install linux-perf");
        }
        Table::only(footprint::compare(&build_jprof()?, &build_example()?)?)
    } else if options.import_only || options.java_only || options.mono_only {
        check_tools(!options.java_only)?;
        let jprof = build_jprof()?;
        Table::only(if options.import_only {
            import::compare(&jprof, runs)?
        } else if options.java_only {
            java::compare(&jprof, runs)?
        } else {
            mono::compare(&jprof, runs)?
        })
    } else {
        None
    })
}

/// `jprof record` against `perf record` on the example, then `jprof report` against
/// `perf script | inferno` on what they recorded: the table of medians.
fn against_perf(options: &Options, jprof: &Path, example: &Path) -> Result<String> {
    let dir = target_dir().join("bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let gnu_time = Path::new(GNU_TIME).exists();
    if !gnu_time {
        eprintln!("note: {GNU_TIME} not found (apt-get install time): memory columns will say n/a");
    }
    let mut meter = Meter {
        gnu_time,
        scratch: dir.clone(),
    };
    let jprof_data = dir.join("jprof.data");
    let perf_data = dir.join("perf.data");
    let sink = dir.join("stdout.txt");
    let scale = options.scale.as_str();
    let meter = &mut meter;

    eprintln!(
        "== recording: target alone vs jprof record vs perf record ({} runs)",
        options.runs
    );
    let record = interleaved(options.runs, 3, |variant| match variant {
        0 => meter.single(argv![example, scale], &sink),
        1 => meter.single(
            argv![jprof, "record", "-F", "999", "-o", jprof_data, "--", example, scale],
            &sink,
        ),
        _ => meter.single(
            argv!["perf", "record", "-q", "-F", "999", "-g", "-o", perf_data, "--", example, scale],
            &sink,
        ),
    })?;

    eprintln!(
        "== reporting: jprof report vs perf script | inferno ({} runs)",
        options.runs
    );
    let jprof_folded = dir.join("jprof.folded");
    let jprof_svg = dir.join("jprof.svg");
    let perf_folded = dir.join("perf.folded");
    let perf_svg = dir.join("perf.svg");
    let perf_script = argv!["perf", "script", "-i", perf_data];
    let collapse = argv!["inferno-collapse-perf"];
    let draw = argv!["inferno-flamegraph"];
    let report = interleaved(options.runs, 4, |variant| match variant {
        0 => meter.single(
            argv![
                jprof,
                "report",
                "-i",
                jprof_data,
                "--format",
                "collapsed",
                "-o",
                jprof_folded
            ],
            &sink,
        ),
        1 => meter.pipeline(&[perf_script.clone(), collapse.clone()], &perf_folded),
        2 => meter.single(
            argv![jprof, "report", "-i", jprof_data, "-o", jprof_svg],
            &sink,
        ),
        _ => meter.pipeline(
            &[perf_script.clone(), collapse.clone(), draw.clone()],
            &perf_svg,
        ),
    })?;

    Ok(render(
        options,
        &record,
        &report,
        (file_mib(&jprof_data), file_mib(&perf_data)),
    ))
}

fn render(options: &Options, record: &[Summary], report: &[Summary], sizes: (f64, f64)) -> String {
    let [alone, jprof, perf] = record else {
        unreachable!("three recording variants")
    };
    let [j_collapsed, p_collapsed, j_svg, p_svg] = report else {
        unreachable!("four reporting variants")
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Workload: `hotspots {}`; medians of {} interleaved runs; Linux {}, {cpus} CPUs.\n",
        options.scale,
        options.runs,
        host.trim()
    );
    let _ = writeln!(
        s,
        "| Recording (-F 999) | wall time (s) | vs alone | max RSS (MiB) | file (MiB) |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|");
    let _ = writeln!(
        s,
        "| target alone | {:.3} | 1.00× | {} | |",
        alone.wall,
        rss_cell(alone)
    );
    let _ = writeln!(
        s,
        "| `jprof record` | {:.3} | {:.2}× | {} | {:.1} |",
        jprof.wall,
        jprof.wall / alone.wall,
        rss_cell(jprof),
        sizes.0
    );
    let _ = writeln!(
        s,
        "| `perf record -g` | {:.3} | {:.2}× | {} | {:.1} |",
        perf.wall,
        perf.wall / alone.wall,
        rss_cell(perf),
        sizes.1
    );
    let _ = writeln!(
        s,
        "\nSlowdown ratio jprof / perf: **{:.2}** (goal ≤ 1.00).\n",
        jprof.wall / perf.wall
    );
    let _ = writeln!(
        s,
        "| Reporting | time (s) | max RSS (MiB) | perf pipeline / jprof |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|");
    let _ = writeln!(
        s,
        "| `jprof report --format collapsed` | {:.3} | {} | **{:.1}×** |",
        j_collapsed.wall,
        rss_cell(j_collapsed),
        p_collapsed.wall / j_collapsed.wall
    );
    let _ = writeln!(
        s,
        "| `perf script \\| inferno-collapse-perf` | {:.3} | {} | |",
        p_collapsed.wall,
        rss_cell(p_collapsed)
    );
    let _ = writeln!(
        s,
        "| `jprof report` (flame graph + top 15) | {:.3} | {} | **{:.1}×** |",
        j_svg.wall,
        rss_cell(j_svg),
        p_svg.wall / j_svg.wall
    );
    let _ = writeln!(
        s,
        "| `perf script \\| inferno-collapse-perf \\| inferno-flamegraph` | {:.3} | {} | |",
        p_svg.wall,
        rss_cell(p_svg)
    );
    let _ = writeln!(s, "\nGoal: report ≥ 10× faster than the perf pipeline. Memory of a pipeline is its largest stage.");
    s
}
