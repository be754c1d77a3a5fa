//! The end of a recording: the symbols of what the samples hit embedded into it, and the
//! summary lines that gives (JIT coverage and stack depth per process).

use super::writer;
use crate::error::{Error, Result};
use crate::foreign_file;
use crate::recording::Recording;

/// Embeds the symbols; returns the JIT coverage line of each process that ran JIT code
/// (`still_writing`: whether it is an attached process whose runtime may name more later),
/// then the stack depth line of each busy process; and the CODE_LOADs no sample's frame was
/// found in that the finished recording can leave out.
pub(super) fn embed_symbols(
    output: &foreign_file::AtomicOutput,
    partial: &std::path::Path,
    still_writing: &dyn Fn(u32) -> bool,
    set_aside: crate::symbolize::SetAside<'_>,
) -> Result<(Vec<String>, crate::symbolize::LoadsToLeaveOut)> {
    let recording = Recording::written(partial, output)?;
    let file = output.try_clone().map_err(|e| Error::io(partial, e))?;
    let mut out = writer::ChunkWriter::append(file, partial);
    let facts = crate::symbolize::embedded_symbols_and_coverage(
        &recording,
        &mut |kind, payload| out.write_chunk(kind, payload),
        set_aside,
    )?;
    let coverage = facts
        .coverage
        .into_iter()
        .filter(|(_, c)| c.named > 0 || c.unnamed >= 10)
        .map(|(pid, c)| coverage_line(pid, c.named, c.unnamed, still_writing(pid)));
    let depth = facts
        .depth_lines
        .into_iter()
        .map(|l| format!("stacks: {l}"));
    Ok((coverage.chain(depth).collect(), facts.leave_out))
}

/// The summary's JIT coverage line of process `pid`. `still_writing`: it runs on with its JIT
/// files kept, so what is unnamed now may be named by `jprof report` once the runtime has
/// written the rest.
fn coverage_line(pid: u32, named: u64, unnamed: u64, still_writing: bool) -> String {
    let total = named + unnamed;
    let share = 100.0 * named as f64 / total.max(1) as f64;
    let line = format!("JIT names: pid {pid}: {share:.1}% of {total} samples in JIT code named");
    if still_writing && unnamed > 0 {
        format!(
            "{line} so far: the process runs on and its runtime may still hold JIT names in a buffer; `jprof report` reads them from its JIT files once the runtime writes them (when its buffer fills or it exits)"
        )
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attaching to a runtime that buffers its JIT names (issue 26: the summary said 81% while
    /// the report, after the flush, named 91%): the summary's share is marked as a lower bound.
    #[test]
    fn a_running_runtimes_coverage_is_a_lower_bound() {
        let done = coverage_line(7, 91, 9, false);
        assert_eq!(
            done,
            "JIT names: pid 7: 91.0% of 100 samples in JIT code named"
        );
        let running = coverage_line(7, 81, 19, true);
        assert!(
            running.starts_with("JIT names: pid 7: 81.0% of 100 samples in JIT code named so far")
        );
        assert!(running.contains("`jprof report`"), "{running}");
        // Nothing unnamed: nothing more to come.
        assert_eq!(
            coverage_line(7, 10, 0, true),
            "JIT names: pid 7: 100.0% of 10 samples in JIT code named"
        );
    }
}
