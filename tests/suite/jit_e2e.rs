//! End to end with a JIT whose truth is known: `examples/minijit` generates x86-64 code at run
//! time, reuses a freed code address, recompiles a function at a higher tier and writes a
//! jitdump with DEBUG_INFO2 inline records and JIT_TIER records. It is recorded with
//! `jprof record` (real perf_event_open) with CLOCK_MONOTONIC and with TSC
//! (`--arch-timestamp`) jitdump timestamps, and every report must name exactly what minijit
//! generated: function names, inline chains, tiers, and which function was at the reused
//! address at each sample's time.
//!
//! minijit is a separate workspace package, so `CARGO_BIN_EXE_minijit` does not exist here: the
//! test builds it with `cargo build -p minijit` in the profile this test binary was built with
//! (the directory `CARGO_BIN_EXE_jprof` is in), into the same target directory.

use crate::cli_support;
use cli_support::{jprof, JPROF};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use jprof::profile::{FrameKind, Profile};
use jprof::recording::Recording;
use jprof::symbolize::{resolve, ResolveOptions};

/// Per phase; at 999 Hz about 300 samples each.
const PHASE_MILLIS: &str = "300";

/// Builds minijit once per test process; returns its path.
fn minijit() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let profile_dir = Path::new(JPROF).parent().expect("jprof's directory");
        let target_dir = profile_dir.parent().expect("target directory");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .args(["build", "--quiet", "-p", "minijit", "--manifest-path"])
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(target_dir);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("run cargo");
        assert!(status.success(), "cargo build -p minijit failed");
        let bin = profile_dir.join("minijit");
        assert!(bin.is_file(), "{} missing after the build", bin.display());
        bin
    })
}

/// One of minijit's phases, as it printed it (CLOCK_MONOTONIC ns = the sample clock).
#[derive(Debug)]
struct Phase {
    label: String,
    function: String,
    addr: u64,
    start: u64,
    end: u64,
}

fn parse_phases(stdout: &str) -> Vec<Phase> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("minijit phase "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 5, "phase line {l:?}");
            Phase {
                label: f[0].into(),
                function: f[1].into(),
                addr: u64::from_str_radix(f[2].trim_start_matches("0x"), 16).unwrap(),
                start: f[3].parse().unwrap(),
                end: f[4].parse().unwrap(),
            }
        })
        .collect()
}

/// Records minijit in a fresh directory (its cwd, where the jitdump goes).
fn record(arch_timestamp: bool) -> (tempfile::TempDir, PathBuf, Vec<Phase>) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("minijit.data");
    let mut cmd = jprof();
    cmd.current_dir(dir.path())
        .args(["record", "-o"])
        .arg(&data)
        .arg("--")
        .arg(minijit())
        .args(["--millis", PHASE_MILLIS]);
    if arch_timestamp {
        cmd.arg("--arch-timestamp");
    }
    let out = cmd.output().expect("run jprof record");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "jprof record failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("jitdump") && stderr.contains("8 records stored"),
        "the jitdump was not tailed:\n{stderr}"
    );
    let phases = parse_phases(&stdout);
    let labels: Vec<&str> = phases.iter().map(|p| p.label.as_str()).collect();
    assert_eq!(labels, ["baseline", "optimized", "reused"], "{stdout}");
    assert_eq!(
        phases[0].addr, phases[2].addr,
        "minijit reuses the first address"
    );
    assert_ne!(phases[0].addr, phases[1].addr);
    (dir, data, phases)
}

fn report(data: &Path, format: &str) -> String {
    let out = jprof()
        .args(["report", "-i"])
        .arg(data)
        .args(["--format", format, "-o", "-"])
        .output()
        .expect("run jprof report");
    assert!(
        out.status.success(),
        "jprof report --format {format}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The stacks JIT code may have, from the JIT frame to the leaf (kernel frames dropped).
const JIT_SUFFIXES: [&str; 4] = [
    "hot_outer_[j]",
    "hot_outer_[j];inlined_mid_[i]",
    "hot_outer_[j];inlined_mid_[i];inlined_leaf_[i]",
    "second_tenant_[j]",
];

/// Folded stacks: exact names, exact inline chains, and the Rust caller found by walking
/// the generated code's frame pointers.
fn check_collapsed(folded: &str) {
    let mut total = 0u64;
    let mut by_suffix: BTreeMap<&str, u64> = BTreeMap::new();
    let mut with_caller = 0u64;
    for line in folded.lines() {
        let (stack, weight) = line.rsplit_once(' ').expect("folded line");
        let weight: u64 = weight.parse().expect("weight");
        total += weight;
        let frames: Vec<&str> = stack.split(';').filter(|f| !f.ends_with("_[k]")).collect();
        let Some(jit) = frames.iter().position(|f| f.ends_with("_[j]")) else {
            continue;
        };
        let suffix = frames[jit..].join(";");
        let known = JIT_SUFFIXES
            .iter()
            .find(|s| **s == suffix)
            .unwrap_or_else(|| panic!("unexpected JIT stack {stack}"));
        *by_suffix.entry(known).or_default() += weight;
        if jit > 0 && frames[jit - 1] == "minijit::run_phase" {
            with_caller += weight;
        }
    }
    let jit_weight: u64 = by_suffix.values().sum();
    // minijit spends nearly all its time in generated code.
    assert!(
        jit_weight * 100 >= total * 90,
        "only {jit_weight} of {total} in JIT frames:\n{folded}"
    );
    assert!(
        with_caller * 100 >= jit_weight * 95,
        "the caller of JIT code is missing in {} of {jit_weight}:\n{folded}",
        jit_weight - with_caller
    );
    // The leaf region is the biggest part of hot_outer, and each part of the chain gets samples.
    for suffix in JIT_SUFFIXES {
        assert!(
            by_suffix.get(suffix).copied().unwrap_or(0) > 0,
            "no samples in {suffix}:\n{folded}"
        );
    }
    let leaf = by_suffix[JIT_SUFFIXES[2]];
    assert!(leaf * 100 >= jit_weight * 20, "{by_suffix:?}");
}

/// The text report names each tier of `hot_outer` apart.
fn check_text(text: &str) {
    for label in [
        "hot_outer_[j] [tier1 (baseline)]",
        "hot_outer_[j] [tier2 (optimized)]",
        "second_tenant_[j]",
        "inlined_mid_[i]",
        "inlined_leaf_[i]",
    ] {
        assert!(text.contains(label), "{label} missing:\n{text}");
    }
    assert!(
        !text.contains("second_tenant_[j] ["),
        "second_tenant has no tier record:\n{text}"
    );
}

/// A sample's JIT frame: (name, tier or "").
fn jit_frame(profile: &Profile, stack: &[jprof::profile::FrameId]) -> Option<(String, String)> {
    let id = stack
        .iter()
        .copied()
        .find(|&id| profile.frame(id).kind == FrameKind::Jit)?;
    Some((
        profile.frame(id).name.clone(),
        profile.tier(id).map_or(String::new(), |t| t.label.clone()),
    ))
}

/// Sample by sample: the code at the reused address is `hot_outer` (baseline) while phase 1
/// runs and `second_tenant` while phase 3 runs; inline frames carry DEBUG_INFO2's lines.
fn check_timeline(data: &Path, phases: &[Phase]) {
    let recording = Recording::open(data).expect("open recording");
    let profile = resolve(&recording, &ResolveOptions::default()).expect("resolve");
    let expected = [
        ("hot_outer", "tier1 (baseline)"),
        ("hot_outer", "tier2 (optimized)"),
        ("second_tenant", ""),
    ];
    let mut right = [0usize; 3];
    for sample in &profile.samples {
        let Some((name, tier)) = jit_frame(&profile, &sample.stack) else {
            continue;
        };
        let phase = phases
            .iter()
            .position(|p| p.start <= sample.time && sample.time <= p.end)
            .unwrap_or_else(|| {
                panic!(
                    "JIT sample at {} outside every phase {phases:?}",
                    sample.time
                )
            });
        assert_eq!(
            (name.as_str(), tier.as_str()),
            expected[phase],
            "sample at {} in phase {} ({} at {:#x})",
            sample.time,
            phases[phase].label,
            phases[phase].function,
            phases[phase].addr
        );
        right[phase] += 1;
        // Inline frames: leaf at its body line, then each caller at its call line.
        let lines: Vec<(String, Option<u32>)> = sample
            .stack
            .iter()
            .map(|&id| profile.frame(id))
            .filter(|f| matches!(f.kind, FrameKind::Jit | FrameKind::Inlined))
            .map(|f| (f.name.clone(), f.line))
            .collect();
        if lines.len() == 3 {
            let want = [
                ("hot_outer".to_string(), Some(12)),
                ("inlined_mid".to_string(), Some(22)),
                ("inlined_leaf".to_string(), Some(31)),
            ];
            assert_eq!(lines, want);
        }
    }
    // 300 ms at 999 Hz is at most 300 samples of CPU time; a busy machine (e.g. the other
    // test of this file on the next core) gives fewer. Enough to make a wrong lookup show.
    for (phase, n) in phases.iter().zip(right) {
        assert!(n >= 30, "only {n} samples in phase {}", phase.label);
    }
}

fn end_to_end(arch_timestamp: bool) {
    let (_dir, data, phases) = record(arch_timestamp);
    check_collapsed(&report(&data, "collapsed"));
    check_text(&report(&data, "text"));
    check_timeline(&data, &phases);
}

#[test]
fn minijit_monotonic_timestamps() {
    end_to_end(false);
}

#[test]
fn minijit_tsc_timestamps() {
    end_to_end(true);
}

/// Records `minijit --frameless` (plus `extra`) with `--call-graph MODE`; returns the folded
/// stacks (kernel frames dropped) of samples in `frameless_leaf`, with their weights.
fn frameless_leaf_stacks(mode: &str, extra: &[&str]) -> Vec<(String, u64)> {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("frameless.data");
    let out = jprof()
        .current_dir(dir.path())
        .args(["record", "--call-graph", mode, "-o"])
        .arg(&data)
        .arg("--")
        .arg(minijit())
        .args(["--millis", "100", "--frameless"])
        .args(extra)
        .output()
        .expect("run jprof record");
    assert!(
        out.status.success(),
        "jprof record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    report(&data, "collapsed")
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(stack, _)| stack.contains("frameless_leaf_[j]"))
        .map(|(stack, n)| {
            let user: Vec<&str> = stack.split(';').filter(|f| !f.ends_with("_[k]")).collect();
            (user.join(";"), n.parse().unwrap())
        })
        .collect()
}

fn share(stacks: &[(String, u64)], pred: &dyn Fn(&str) -> bool) -> f64 {
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    let hit: u64 = stacks.iter().filter(|(s, _)| pred(s)).map(|(_, n)| n).sum();
    assert!(total > 0, "no samples in frameless_leaf");
    hit as f64 / total as f64
}

/// DWARF mode through JIT code that keeps no frame pointer: minijit's `frameless_leaf` moves
/// the stack pointer and leaves rbp alone, so a frame-pointer walk skips its caller. Its
/// `.eh_frame` (JIT_CODE_UNWINDING_INFO) gives the way to `frameless_caller`, and from there
/// on to the Rust caller and `main`. Without the record the caller is lost: the test would
/// notice if the table were not used.
#[test]
fn dwarf_unwinding_through_jit_code_uses_its_unwinding_info() {
    let with = frameless_leaf_stacks("dwarf", &[]);
    let through = share(&with, &|s| {
        s.contains("minijit::run_phase;frameless_caller_[j];frameless_leaf_[j]")
            && s.contains(";main;")
    });
    assert!(
        through >= 0.9,
        "{:.0}% of frameless_leaf samples unwound through frameless_caller to main: {with:?}",
        through * 100.0
    );
    let without = frameless_leaf_stacks("dwarf", &["--no-unwind-info"]);
    let lost = share(&without, &|s| !s.contains("frameless_caller_[j]"));
    assert!(
        lost >= 0.9,
        "without UNWINDING_INFO the caller should be skipped, yet: {without:?}"
    );
}

/// Frame-pointer mode (the default): the kernel's walk skips `frameless_caller`, and the
/// frameless-leaf fix puts it back from the leaf's JIT unwind table.
#[test]
fn fp_mode_recovers_the_caller_of_a_frameless_jit_leaf() {
    let stacks = frameless_leaf_stacks("fp", &[]);
    let fixed = share(&stacks, &|s| {
        s.contains("minijit::run_phase;frameless_caller_[j];frameless_leaf_[j]")
    });
    assert!(
        fixed >= 0.9,
        "{:.0}% of frameless_leaf samples have their caller: {stacks:?}",
        fixed * 100.0
    );
}
