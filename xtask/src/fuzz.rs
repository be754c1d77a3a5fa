//! `cargo xtask fuzz [SECS] [--stable]`: every fuzz target in `fuzz/` for SECS seconds each.
//! With a nightly toolchain and cargo-fuzz this is real coverage-guided libFuzzer; without them
//! (or with `--stable`) it runs the same target bodies over generated inputs from a fixed seed,
//! and says so.

use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use crate::command::{cargo, run as run_command};
use crate::workspace::root;

/// Every cargo-fuzz target (`fuzz/fuzz_targets/*.rs`).
const TARGETS: &[&str] = &[
    "recording_reader",
    "jitdump_parser",
    "perf_map_parser",
    "j9_metadata",
    "mlpd_parser",
    "xray_parser",
    "perf_data",
];

fn nightly_available() -> bool {
    Command::new("rustup")
        .args(["run", "nightly", "rustc", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn cargo_fuzz_available() -> bool {
    Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn run(args: &[String]) -> Result<()> {
    let mut seconds: u64 = 60;
    let mut force_stable = false;
    for arg in args {
        match arg.as_str() {
            "--stable" => force_stable = true,
            secs => {
                seconds = secs
                    .parse()
                    .with_context(|| format!("fuzz: expected SECS or --stable, got {secs:?}"))?
            }
        }
    }
    let fuzz_dir = root().join("fuzz");
    let libfuzzer = !force_stable && nightly_available() && cargo_fuzz_available();
    if !libfuzzer && !force_stable {
        eprintln!(
            "note: coverage-guided fuzzing needs a nightly toolchain and cargo-fuzz \
             (rustup toolchain install nightly; cargo install cargo-fuzz), which are not both \
             available here."
        );
    }
    for target in TARGETS {
        if libfuzzer {
            eprintln!("== {target}: cargo-fuzz (libFuzzer, nightly) for {seconds} s");
            // libFuzzer adds what it finds to the first directory (`corpus/`, not committed)
            // and starts from every one given: `seeds/TARGET` holds the small committed
            // inputs, among them the crashes fixed so far.
            let mut command = Command::new("cargo");
            command
                .current_dir(&fuzz_dir)
                // jprof's parsers are safe Rust: without AddressSanitizer libFuzzer runs about
                // three times the inputs; overflow checks and debug assertions stay on.
                .args(["+nightly", "fuzz", "run", "--sanitizer", "none", target])
                .arg(format!("corpus/{target}"));
            if fuzz_dir.join("seeds").join(target).is_dir() {
                command.arg(format!("seeds/{target}"));
            }
            std::fs::create_dir_all(fuzz_dir.join("corpus").join(target))?;
            run_command(command.arg("--").arg(format!("-max_total_time={seconds}")))?;
        } else {
            eprintln!(
                "== {target}: STABLE FALLBACK (no coverage guidance, deterministic seed) for \
                 {seconds} s"
            );
            run_command(
                cargo()
                    .current_dir(&fuzz_dir)
                    .args([
                        "run",
                        "--release",
                        "--features",
                        "stable",
                        "--bin",
                        "stable-fuzz",
                        "--",
                    ])
                    .arg(target)
                    .arg(seconds.to_string()),
            )?;
        }
    }
    Ok(())
}
