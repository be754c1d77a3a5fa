//! The workspace's own benchmarks (benches/, `cargo bench`), run and their result lines read.

use std::process::Stdio;

use anyhow::{bail, Context, Result};

use crate::command::{cargo, describe};
use crate::workspace::root;

/// `cargo bench --bench jitdump_parse`: the jitdump parser over the Node fixture, in GB/s.
pub(super) fn jitdump_throughput() -> Result<String> {
    let line = cargo_bench_line("jitdump_parse", &[], "jitdump parse_records:")?;
    Ok(format!("\n{line} (goal ≥ 1 GB/s)\n"))
}

/// Runs `cargo bench --bench NAME -- ARGS` and returns what it printed.
pub(super) fn cargo_bench(name: &str, args: &[&std::ffi::OsStr]) -> Result<String> {
    eprintln!("== {name} (benches/{name}.rs)");
    let mut cmd = cargo();
    cmd.current_dir(root())
        .args(["bench", "--quiet", "--bench", name, "--"])
        .args(args);
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run `{}`", describe(&cmd)))?;
    if !out.status.success() {
        bail!("`{}` failed ({})", describe(&cmd), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The result line (the one starting with `prefix`) of `cargo bench --bench NAME -- ARGS`.
pub(super) fn cargo_bench_line(
    name: &str,
    args: &[&std::ffi::OsStr],
    prefix: &str,
) -> Result<String> {
    cargo_bench(name, args)?
        .lines()
        .find(|l| l.starts_with(prefix))
        .map(str::to_string)
        .with_context(|| format!("{name} printed no result line"))
}

/// Time, size and peak memory of every report writer on a synthetic 1 M-sample profile
/// (benches/writers.rs prints the table).
pub(super) fn writers() -> Result<String> {
    Ok(format!("\n{}", cargo_bench("writers", &[])?))
}
