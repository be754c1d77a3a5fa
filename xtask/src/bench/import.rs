//! The perf.data import comparison of `cargo xtask bench`: on the node fixture
//! (`tests/fixtures/shared/node`, or `$JPROF_FIXTURES/node`), `jprof report -i perf.data
//! --search-dir DIR` (flame graph + top list) against `perf inject --jit` followed by
//! `perf script | inferno-collapse-perf | inferno-flamegraph`. perf finds the jitdump only at
//! the path recorded in perf.data, so it is copied there; perf inject's build-id cache and
//! jitted-*.so files are kept out of ~/.debug and removed afterwards.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::measure::{interleaved, versus_table, Measurement, Meter, GNU_TIME};
use crate::workspace::{root, target_dir};

/// Where perf.data says the node jitdump is (regen.sh's scratch directory).
const RECORDED_JITDUMP_DIR: &str = "/tmp/jprof-fixtures-work/node";
const JITDUMP: &str = "jit-13228.dump";

fn fixtures() -> PathBuf {
    std::env::var_os("JPROF_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("tests/fixtures/shared"))
}

/// Removes what perf inject left behind: the jitted-*.so files next to the jitdump.
fn remove_jitted(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with("jitted-") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Runs the comparison and returns its markdown table.
pub fn compare(jprof: &Path, runs: usize) -> Result<String> {
    let node = fixtures().join("node");
    let perf_data = node.join("perf.data");
    if !perf_data.exists() {
        return Ok(format!(
            "perf.data import: skipped, {} not found (set JPROF_FIXTURES)\n",
            perf_data.display()
        ));
    }
    let recorded = Path::new(RECORDED_JITDUMP_DIR);
    std::fs::create_dir_all(recorded)
        .with_context(|| format!("cannot create {}", recorded.display()))?;
    let jitdump = recorded.join(JITDUMP);
    if !jitdump.exists() {
        std::fs::copy(node.join(JITDUMP), &jitdump)
            .with_context(|| format!("cannot copy the jitdump to {}", jitdump.display()))?;
    }
    let dir = target_dir().join("bench-import");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let buildid = dir.join("buildid");
    let config = dir.join("perfconfig");
    std::fs::write(
        &config,
        format!("[buildid]\n\tdir = {}\n", buildid.display()),
    )?;
    let perf_config = OsString::from(format!("PERF_CONFIG={}", config.display()));
    let injected = dir.join("injected.data");
    let sink = dir.join("stdout.txt");
    let jprof_svg = dir.join("jprof.svg");
    let perf_svg = dir.join("perf.svg");
    let mut meter = Meter {
        gnu_time: Path::new(GNU_TIME).exists(),
        scratch: dir.clone(),
    };

    eprintln!("== perf.data import: jprof report -i perf.data vs perf inject --jit + perf script | inferno ({runs} runs)");
    let perf = |meter: &mut Meter| -> Result<Measurement> {
        let inject = meter.single(
            argv![
                "env",
                perf_config,
                "perf",
                "inject",
                "--jit",
                "-i",
                perf_data,
                "-o",
                injected
            ],
            &sink,
        )?;
        let script = meter.pipeline(
            &[
                argv!["env", perf_config, "perf", "script", "-i", injected],
                argv!["inferno-collapse-perf"],
                argv!["inferno-flamegraph"],
            ],
            &perf_svg,
        )?;
        Ok(Measurement {
            wall: inject.wall + script.wall,
            max_rss_kib: inject.max_rss_kib.max(script.max_rss_kib),
        })
    };
    let result = interleaved(runs, 2, |variant| match variant {
        0 => meter.single(
            argv![
                jprof,
                "report",
                "-i",
                perf_data,
                "--search-dir",
                node,
                "-o",
                jprof_svg
            ],
            &sink,
        ),
        _ => perf(&mut meter),
    });
    remove_jitted(recorded);
    let _ = std::fs::remove_dir_all(&buildid);
    let _ = std::fs::remove_file(&injected);
    let [j, p] = result?[..] else {
        unreachable!("two variants")
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "perf.data import (node fixture {}), medians of {runs} interleaved runs:\n",
        perf_data.display()
    );
    s.push_str(&versus_table(
        "Symbolizing a perf.data",
        "perf / jprof",
        (
            "`jprof report -i perf.data --search-dir DIR` (flame graph + top 15)",
            &j,
        ),
        (
            "`perf inject --jit` then `perf script \\| inferno-collapse-perf \\| inferno-flamegraph`",
            &p,
        ),
        "≥ 10× faster than perf inject + perf script + inferno.",
    ));
    Ok(s)
}
