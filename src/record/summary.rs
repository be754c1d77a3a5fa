//! The one-screen summary `jprof record` prints when it ends.

use std::path::Path;

use crate::recording::{Meta, Summary};
use crate::timeline::ClockConversion;

fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

/// Writes the summary to stderr (stdout belongs to the target).
/// Write errors are ignored: the terminal may be gone (SIGHUP) and the recording is complete.
pub fn print(path: &Path, meta: &Meta, s: &Summary, clock: &ClockConversion) {
    use std::fmt::Write as _;
    use std::io::Write as _;
    let mut out = String::new();
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    let secs = s.wall_duration_ns as f64 / 1e9;
    let e = &meta.event;
    let _ = writeln!(
        out,
        "jprof: recorded {} samples in {secs:.2} s ({} @ {} Hz{}, call graph {}, kernel frames {})",
        s.samples,
        e.event,
        e.frequency_hz,
        e.weights_count(),
        e.call_graph,
        if e.kernel_callchains { "on" } else { "off" }
    );
    let _ = writeln!(out, "  threads {}, processes {}", s.threads, s.processes);
    let losses = s.losses();
    if losses.is_empty() {
        let _ = writeln!(out, "  lost: nothing");
    }
    for loss in losses {
        let _ = writeln!(out, "  lost: {loss}");
    }
    if let Some(off) = &s.off_cpu {
        let _ = writeln!(out, "  off-CPU: {}", off.describe(e.off_cpu_min_ns));
    }
    let _ = writeln!(out, "  clock: {}", clock.describe());
    let _ = match s.exit_code {
        Some(code) => writeln!(
            out,
            "  stopped by: {}; target exit code {code}",
            s.stopped_by
        ),
        None => writeln!(out, "  stopped by: {}", s.stopped_by),
    };
    // Each top process with its JIT coverage line, which is then not repeated among the notes.
    let coverage_of = |pid: u32| {
        let prefix = format!("JIT names: pid {pid}:");
        s.notes.iter().find(|n| n.starts_with(&prefix))
    };
    if !s.top_processes.is_empty() {
        let _ = writeln!(out, "  top processes by samples:");
    }
    for p in &s.top_processes {
        let share = 100.0 * p.samples as f64 / s.samples.max(1) as f64;
        let _ = writeln!(
            out,
            "    pid {} ({}): {} samples ({share:.1}%)",
            p.pid, p.comm, p.samples
        );
        if let Some(line) = coverage_of(p.pid) {
            let _ = writeln!(out, "      {line}");
        }
    }
    let listed = |note: &String| {
        s.top_processes
            .iter()
            .any(|p| coverage_of(p.pid) == Some(note))
    };
    for note in s.notes.iter().filter(|n| !listed(n)) {
        let _ = writeln!(out, "  note: {note}");
    }
    let _ = writeln!(out, "  wrote {} ({})", path.display(), human_bytes(size));
    let _ = writeln!(
        out,
        "  next: jprof report -i {}   # flamegraph.svg + top functions",
        path.display()
    );
    let out = crate::terminal::safe(out.as_bytes());
    let _ = std::io::stderr().write_all(out.as_bytes());
}
