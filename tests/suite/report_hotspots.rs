//! End to end on the example program (examples/hotspots, see examples/README.md): compile it
//! with g++, `jprof record` it for real, and check `jprof report`'s folded stacks against the
//! known 50/30/20 split, the demangled names, and the frameless leaf's caller.

use crate::cli_support;
use cli_support::jprof;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use jprof::recording::Recording;

// Reports show C++ names without parameter lists, as perf does (`--signatures` shows them).
const A: &str = "hot::compute_a";
const B: &str = "hot::compute_b";
const LEAF: &str = "hot::frameless_leaf";
const LEAF_CALLER: &str = "hot::leaf_caller";

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds the example exactly as `cargo xtask example` does.
fn build_hotspots(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hotspots");
    for (file, frame_pointer) in [
        ("hotspots.cpp", "-fno-omit-frame-pointer"),
        ("leaf.cpp", "-fomit-frame-pointer"),
    ] {
        run(Command::new("g++")
            .args(["-O2", "-g", frame_pointer, "-c"])
            .arg(src.join(file))
            .arg("-o")
            .arg(dir.join(file).with_extension("o")));
    }
    let binary = dir.join("hotspots");
    run(Command::new("g++")
        .arg(dir.join("hotspots.o"))
        .arg(dir.join("leaf.o"))
        .arg("-o")
        .arg(&binary));
    binary
}

/// Records the example (half its default run time) and returns the folded stacks.
fn folded(call_graph: &str) -> BTreeMap<Vec<String>, u64> {
    folded_with(call_graph, "0.5", &[]).0
}

/// Records the example (SCALE times its default run time) at 4999 Hz; returns the folded stacks
/// `jprof report` writes with `options` and how many samples they hold.
fn folded_with(
    call_graph: &str,
    scale: &str,
    options: &[&str],
) -> (BTreeMap<Vec<String>, u64>, u64) {
    let dir = tempfile::tempdir().unwrap();
    let binary = build_hotspots(dir.path());
    let data = dir.path().join("jprof.data");
    run(jprof()
        .args(["record", "-F", "4999", "--call-graph", call_graph, "-o"])
        .arg(&data)
        .arg("--")
        .arg(&binary)
        .arg(scale));
    let text = run(jprof()
        .args(["report", "--format", "collapsed", "-i"])
        .arg(&data)
        .args(options));
    let mut stacks = BTreeMap::new();
    for line in text.lines() {
        let (stack, weight) = line.rsplit_once(' ').expect("`stack weight`");
        let frames = stack.split(';').map(str::to_string).collect();
        stacks.insert(frames, weight.parse::<u64>().expect("weight"));
    }
    assert!(!stacks.is_empty(), "no folded stacks");
    let samples = Recording::open(&data)
        .expect("the recording")
        .summary
        .expect("its summary")
        .samples;
    (stacks, samples)
}

/// Share of the total weight whose leaf frame is `name`.
fn self_share(stacks: &BTreeMap<Vec<String>, u64>, name: &str) -> f64 {
    let total: u64 = stacks.values().sum();
    let own: u64 = stacks
        .iter()
        .filter(|(s, _)| s.last().is_some_and(|f| f == name))
        .map(|(_, w)| w)
        .sum();
    own as f64 / total as f64
}

fn check(call_graph: &str) {
    let stacks = folded(call_graph);
    let shares = [(A, 0.50), (B, 0.30), (LEAF, 0.20)]
        .map(|(name, expected)| (name, expected, self_share(&stacks, name)));
    for (name, expected, got) in shares {
        assert!(
            (got - expected).abs() < 0.05,
            "{call_graph}: {name} has {:.1}% of samples, expected {:.0}% ± 5:\n{shares:?}",
            got * 100.0,
            expected * 100.0
        );
    }
    // Every stack starts with the process name, then reaches main.
    for stack in stacks
        .keys()
        .filter(|s| s.iter().any(|f| f == LEAF || f == A))
    {
        assert_eq!(stack[0], "hotspots", "{stack:?}");
        assert!(stack.iter().any(|f| f == "main"), "{stack:?}");
        assert!(stack.iter().any(|f| f == "hot::run_workload"), "{stack:?}");
    }
    // The frameless leaf's caller must not be skipped.
    let (mut leaf, mut with_caller) = (0u64, 0u64);
    for (stack, weight) in &stacks {
        if let Some(i) = stack.iter().position(|f| f == LEAF) {
            leaf += weight;
            if i > 0 && stack[i - 1] == LEAF_CALLER {
                with_caller += weight;
            }
        }
    }
    let ratio = with_caller as f64 / leaf as f64;
    assert!(
        ratio >= 0.95,
        "{call_graph}: {LEAF_CALLER} is the caller in only {:.1}% of {LEAF}'s weight",
        ratio * 100.0
    );
}

#[test]
fn hotspots_split_and_frameless_caller_with_frame_pointers() {
    check("fp");
}

#[test]
fn hotspots_split_and_frameless_caller_with_dwarf() {
    check("dwarf");
}

/// Samples per function (self) from `perf report` on a perf recording of the same program
/// (SCALE times its default run time), and their total.
fn perf_self_samples(binary: &Path, dir: &Path, scale: &str) -> (BTreeMap<String, u64>, u64) {
    let data = dir.join("perf.data");
    run(Command::new("perf")
        .args(["record", "-q", "-F", "4999", "-g", "-o"])
        .arg(&data)
        .arg("--")
        .arg(binary)
        .arg(scale));
    let text = run(Command::new("perf")
        .args([
            "report",
            "--stdio",
            "--no-children",
            "-n",
            "--sort",
            "sym",
            "-g",
            "none",
            "-i",
        ])
        .arg(&data));
    let (mut samples, mut total) = (BTreeMap::new(), 0);
    // `  50.90%           381  [.] hot::compute_a`: overhead, samples, symbol.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut words = line.split_whitespace();
        let (Some(pct), Some(n)) = (words.next(), words.next()) else {
            continue;
        };
        let (true, Ok(n)) = (pct.ends_with('%'), n.parse::<u64>()) else {
            continue;
        };
        total += n;
        if let Some((_, name)) = line.split_once("[.]") {
            *samples.entry(name.trim().to_string()).or_default() += n;
        }
    }
    (samples, total)
}

#[test]
fn hotspots_time_split_matches_perf_report() {
    let dir = tempfile::tempdir().unwrap();
    let binary = build_hotspots(dir.path());
    // The full run: more samples, less noise.
    let (perf, perf_total) = perf_self_samples(&binary, dir.path(), "1");
    let (ours, our_total) = folded_with("fp", "1", &[]);
    for name in [A, B, LEAF] {
        // perf report prints C++ names without their parameter lists, as jprof does.
        let theirs = *perf
            .get(name)
            .unwrap_or_else(|| panic!("perf report has no {name}: {perf:?}"))
            as f64
            / perf_total as f64;
        let mine = self_share(&ours, name);
        // Two separate runs of the same fixed work, sampled independently: they differ by
        // sampling noise, which shrinks with the sample counts (4 standard deviations of the
        // difference of two binomial shares), plus 1 point for what the two tools attribute
        // differently.
        let p = (mine + theirs) / 2.0;
        let noise = (p * (1.0 - p) * (1.0 / our_total as f64 + 1.0 / perf_total as f64)).sqrt();
        let allowed = 4.0 * noise + 0.01;
        eprintln!(
            "{name}: jprof {:.1}% of {our_total}, perf {:.1}% of {perf_total} (± {:.1})",
            mine * 100.0,
            theirs * 100.0,
            allowed * 100.0
        );
        assert!(
            (mine - theirs).abs() < allowed,
            "{name}: jprof {:.1}% of {our_total} samples vs perf report {:.1}% of {perf_total}: \
             more apart than sampling explains (± {:.1} points)",
            mine * 100.0,
            theirs * 100.0,
            allowed * 100.0
        );
    }
}

#[test]
fn signatures_show_cpp_parameter_lists() {
    let (stacks, _) = folded_with("fp", "0.5", &["--signatures"]);
    let full = format!("{A}(unsigned long, unsigned long)");
    assert!(
        self_share(&stacks, &full) > 0.4,
        "{full} missing: {stacks:?}"
    );
    assert_eq!(self_share(&stacks, A), 0.0);
}
