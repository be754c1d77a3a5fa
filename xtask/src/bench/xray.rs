//! The XRay comparison of `cargo xtask bench`: `jprof report -i LOG -f text` (parse, replay
//! every thread's stacks, account table) against `llvm-xray account LOG` on the same log. The
//! log is a basic-mode (v3) log written here from the documented layout: 4 threads, records in
//! global time order (llvm-xray account needs that), random but well-formed call nesting over 9
//! function ids. Both tables are checked to agree before the times are reported.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::measure::{interleaved, versus_table, Meter, GNU_TIME};
use crate::command::available;
use crate::workspace::target_dir;

/// Function records in the generated log (32 bytes each).
const RECORDS: usize = 2_000_000;
const THREADS: u32 = 4;
const MAX_DEPTH: usize = 24;

/// One basic-mode record: type 0, cpu, kind (0 enter, 1 exit), func id, tsc, tid, pid, padding.
fn record(out: &mut Vec<u8>, cpu: u8, kind: u8, func: u32, tsc: u64, tid: u32) {
    out.extend_from_slice(&0u16.to_le_bytes());
    out.push(cpu);
    out.push(kind);
    out.extend_from_slice(&func.to_le_bytes());
    out.extend_from_slice(&tsc.to_le_bytes());
    out.extend_from_slice(&tid.to_le_bytes());
    out.extend_from_slice(&1000u32.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
}

/// Writes the log: header (v3, basic, 2.25 GHz), then records in time order.
fn write_log(path: &Path) -> Result<()> {
    let mut out = Vec::with_capacity(32 + RECORDS * 32);
    out.extend_from_slice(&3u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&2_250_000_000u64.to_le_bytes());
    out.extend_from_slice(&[0; 16]);
    // A fixed seed: every run measures the same log.
    let mut rng = fastrand::Rng::with_seed(0x6a70_726f_6678);
    let mut stacks: Vec<Vec<u32>> = vec![Vec::new(); THREADS as usize];
    let mut tsc = 1_000_000u64;
    let mut written = 0;
    while written < RECORDS {
        let r = rng.u64(..);
        let t = (r % THREADS as u64) as usize;
        tsc += 20 + (r >> 40) % 2000;
        let open: usize = stacks.iter().map(Vec::len).sum();
        let stack = &mut stacks[t];
        // Enter while there is room to close everything afterwards; exit otherwise.
        let enter = stack.len() < MAX_DEPTH
            && RECORDS - written > open + 1
            && (stack.is_empty() || (r >> 8) % 100 < 52);
        if enter {
            let func = 1 + ((r >> 16) % 9) as u32;
            stack.push(func);
            record(&mut out, t as u8, 0, func, tsc, 100 + t as u32);
        } else if let Some(func) = stack.pop() {
            record(&mut out, t as u8, 1, func, tsc, 100 + t as u32);
        } else {
            continue;
        }
        written += 1;
    }
    std::fs::write(path, out).with_context(|| format!("cannot write {}", path.display()))
}

/// `(funcid, count, min, med, 90p, 99p, max, sum)` cells of an account table.
fn numeric_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .skip_while(|l| !l.starts_with("Functions with latencies"))
        .skip(2)
        .map(|l| {
            l.replace([',', '[', ']'], " ")
                .split_whitespace()
                .take(8)
                .map(str::to_string)
                .collect()
        })
        .collect()
}

/// Runs the comparison and returns its markdown table.
pub fn compare(jprof: &Path, runs: usize) -> Result<String> {
    if !available("llvm-xray") {
        return Ok("XRay: skipped, llvm-xray not found (apt-get install llvm)\n".into());
    }
    let dir = target_dir().join("bench-xray");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let log = dir.join("sorted.xray");
    write_log(&log)?;
    let ours = dir.join("jprof-account.txt");
    let theirs = dir.join("llvm-xray-account.txt");
    let mut meter = Meter {
        gnu_time: Path::new(GNU_TIME).exists(),
        scratch: dir.clone(),
    };
    eprintln!("== XRay: jprof report -f text vs llvm-xray account ({runs} runs)");
    let result = interleaved(runs, 2, |variant| match variant {
        0 => meter.single(
            argv![jprof, "report", "-i", log, "-f", "text", "-o", ours],
            &dir.join("stdout.txt"),
        ),
        _ => meter.single(argv!["llvm-xray", "account", log], &theirs),
    })?;
    let (a, b) = (
        std::fs::read_to_string(&ours)?,
        std::fs::read_to_string(&theirs)?,
    );
    if numeric_rows(&a) != numeric_rows(&b) || numeric_rows(&a).is_empty() {
        bail!("the account tables differ:\n{a}\n{b}");
    }
    let [j, l] = result[..] else {
        unreachable!("two variants")
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nXRay account ({RECORDS} records, {THREADS} threads, {:.0} MiB, in time order), medians of {runs} interleaved runs; the tables agree:\n",
        std::fs::metadata(&log).map_or(0.0, |m| m.len() as f64 / 1048576.0)
    );
    s.push_str(&versus_table(
        "Accounting an XRay log",
        "llvm-xray / jprof",
        ("`jprof report -i LOG -f text`", &j),
        ("`llvm-xray account LOG`", &l),
        "parsing + account ≥ 10× faster than llvm-xray account.",
    ));
    Ok(s)
}
