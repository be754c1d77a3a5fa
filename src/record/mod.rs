//! Live recording: launch the target suspended, open perf events on it, release it, drain the
//! rings while it runs, and write the recording. The ring reader (this thread) never touches the
//! disk: batches go over a bounded channel to the writer thread.

mod attach;
mod config;
pub(crate) mod events;
mod host;
mod jvm_attach;
mod leftovers;
mod off_cpu;
mod places;
mod reader;
mod runtimes;
mod session;
mod side_files;
mod stack_words;
mod summary;
mod tree;
pub(crate) mod writer;
mod xray_logs;

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::foreign_file;
use crate::recording::Recording;
use crate::sys::child;

pub(crate) use config::EventChoice;
pub use config::{RecordConfig, Target};
pub use events::online_cpus;
pub(crate) use events::{attr_for, read_sysctl, StackCopy};
pub use runtimes::{find_agent, mono_log_profiler_installed, AGENT_FILE};

/// Whether the kernel refuses names planted in `/tmp` (so every runtime of a launched tree can
/// be asked for its fixed `/tmp` names).
pub(crate) fn tmp_guarded() -> bool {
    places::place_of(std::path::Path::new("/tmp")) == places::Place::KernelGuarded
}

pub use crate::recording::CallGraph;

/// Records as configured; returns the exit code to give the shell (the target's). An error at
/// any step undoes what was set up (record/session.rs).
pub fn run(config: &RecordConfig) -> Result<i32> {
    if config.frequency_hz == 0 {
        return Err(Error::Usage("-F must be at least 1 Hz".into()));
    }
    let (config, pid_note) = &resolve_target(config)?;
    let (session, reading) = session::start(config.as_ref(), pid_note.as_deref())?;
    let read = reading.read(&session)?;
    session.finish(read)
}

/// Launches `argv` held before exec, after creating the fixed names its runtime will write for
/// its pid. A name another user holds is not written through: the held child is dropped and the
/// command launched again without asking the runtime that writes it (noted in the summary).
fn spawn_claiming(
    argv: &[String],
    setup: &mut runtimes::RuntimeSetup,
    extra_env: &[(String, String)],
) -> Result<child::SuspendedChild> {
    for attempt in 1.. {
        let spawn_error = |source| Error::Spawn {
            command: argv.join(" "),
            source,
        };
        let env: Vec<(String, String)> = setup.env.iter().chain(extra_env).cloned().collect();
        let child = child::spawn_suspended(argv, &env).map_err(spawn_error)?;
        match setup.claim_for(child.pid as u32) {
            Ok(None) => return Ok(child),
            // Asked no more: launch again without it.
            Ok(Some((runtime, name))) => {
                child.abandon();
                // A stale name of another user's process that had this pid: another pid may
                // be free. Names planted for every pid are not: after three, without it.
                if attempt >= 3 {
                    *setup = runtimes::prepare_again(std::mem::take(setup), runtime, name);
                }
            }
            Err(e) => {
                child.abandon();
                setup.release_claims();
                return Err(Error::Other(format!(
                    "cannot create the side files for the launched process: {e}"
                )));
            }
        }
    }
    unreachable!("the loop returns")
}

/// Which targets' stacks are deep in a way the default copy misses.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DeepStacks {
    /// CPython 3.12 or later.
    pub(crate) python: bool,
    /// A HotSpot JVM.
    pub(crate) jvm: bool,
}

impl DeepStacks {
    /// What the running processes `pids` are.
    pub(crate) fn of_processes(pids: impl Iterator<Item = u32> + Clone) -> Self {
        Self {
            python: pids.clone().any(|pid| runtimes::runs(pid, "python")),
            jvm: pids.into_iter().any(|pid| runtimes::runs(pid, "java")),
        }
    }
}

/// How user stacks are collected: `--call-graph` as given; by default DWARF over the deep stack
/// copy for CPython 3.12 or later, whose libpython has no frame pointers and whose perf
/// trampolines make every Python call several C frames (docs/python.md); frame pointers with the
/// deep copy cut down to the frame chain's words for a JVM, whose interpreted frames are named
/// by a slot of each frame (docs/java.md); else frame pointers. Returns the summary's note on a
/// choice the user did not make.
fn stacks_for(config: &RecordConfig, deep: DeepStacks) -> (events::StackCopy, Option<String>) {
    let kib = events::STACK_BYTES_DEEP.div_ceil(1024);
    match config.call_graph {
        Some(given) => (events::StackCopy::of(given), None),
        None if deep.python => (
            events::StackCopy::DEEP,
            Some(format!(
                "python: CPython 3.12+ has no frame pointers in libpython, so its stacks are \
                 unwound with DWARF over a {kib} KiB stack copy per sample; `--call-graph fp` \
                 records frame pointers only (smaller, but the Python callers are lost)"
            )),
        ),
        None if deep.jvm => (
            events::StackCopy::DEEP_FP,
            Some(format!(
                "java: frame pointers over a {kib} KiB stack copy per sample, of which only \
                 each frame's links and Method* slot are kept, so interpreted Java frames are \
                 named at every depth; `--call-graph fp` copies 1 KiB (smaller, but interpreted \
                 frames deeper than that are `Interpreter`)"
            )),
        ),
        None => (events::StackCopy::of(CallGraph::FramePointers), None),
    }
}

/// `-p` of a thread that is not its process's main thread records the whole process (with a
/// note saying so); a pid given twice is recorded once.
fn resolve_target(config: &RecordConfig) -> Result<(Cow<'_, RecordConfig>, Option<String>)> {
    let Target::Pids(given) = &config.target else {
        return Ok((Cow::Borrowed(config), None));
    };
    let mut pids: Vec<u32> = Vec::new();
    let mut notes = Vec::new();
    for &tid in given {
        let pid = match attach::process_of_thread(tid)? {
            Some(pid) => {
                notes.push(format!(
                    "{tid} is a thread of process {pid}: recording the whole process {pid}"
                ));
                pid
            }
            None => tid,
        };
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    if &pids == given {
        return Ok((Cow::Borrowed(config), None));
    }
    let resolved = RecordConfig {
        target: Target::Pids(pids),
        ..config.clone()
    };
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    Ok((Cow::Owned(resolved), note))
}

/// What the runtimes did (and how to get more out of them), and the removal of the files they
/// wrote only because jprof asked (their bytes are in the recording): only a file jprof asked
/// for at that very name, and only the very file that was read (same device and inode), or one
/// jprof created itself.
fn runtime_notes_and_cleanup(
    config: &RecordConfig,
    call_graph: CallGraph,
    setup: &mut runtimes::RuntimeSetup,
    side: &side_files::SideFiles,
    agent_loaded: &[u32],
) -> Vec<String> {
    let mut notes = Vec::new();
    let read = side.read_files();
    if !config.keep_side_files {
        // The agent stays in the JVM; the file it writes is only for this recording. Only the
        // JVMs jprof loaded it into: another JVM's jitdump (`-a` meets every JVM) is not ours.
        let ours = |f: &&side_files::ReadFile| agent_loaded.contains(&f.pid);
        for f in read
            .iter()
            .filter(|f| f.runtime == Some("java"))
            .filter(ours)
        {
            if f.kind == crate::format::recording::SideKind::JITDUMP {
                foreign_file::remove_if_same(&f.path, f.dev, f.ino);
            }
        }
    }
    let runtimes = side.runtimes().clone();
    notes.extend(runtimes::observed_notes(
        &runtimes,
        &side.runtime_files(),
        setup,
    ));
    if call_graph == CallGraph::FramePointers && runtimes.values().any(|&r| r == "mono") {
        // Mono's AOT images (mscorlib, mcs) keep no frame pointers; their .debug_frame CFI
        // unwinds them in dwarf mode (docs/mono.md).
        notes.push(
            "mono: managed code precompiled into AOT images has no frame pointers, so fp-mode \
             stacks stop there; `jprof record --call-graph dwarf` unwinds it with the images' CFI"
                .into(),
        );
    }
    if !matches!(config.target, Target::Launch(_)) {
        return notes;
    }
    if config.keep_side_files {
        setup.keep();
        if let Some(dir) = &setup.private_dir {
            // Kept only when a runtime wrote something there.
            if std::fs::remove_dir(&dir.path).is_err() {
                notes.push(format!(
                    "side files kept in jprof's private directory {}",
                    dir.path.display()
                ));
            }
        }
        return notes;
    }
    for f in &read {
        let Some(runtime) = f.runtime else { continue };
        if runtimes::asked_for(&setup.asking, runtime, f.nspid, &f.path) {
            foreign_file::remove_if_same(&f.path, f.dev, f.ino);
        }
    }
    for (&pid, &runtime) in &runtimes {
        let nspid = read.iter().find(|f| f.pid == pid).map_or(pid, |f| f.nspid);
        let mut unread = runtimes::unread_side_files(&setup.asking, runtime, nspid);
        if runtime == "node" {
            unread.extend(runtimes::v8_logs(&setup.asking, nspid));
        }
        for file in unread {
            foreign_file::remove_runtime_file(&file, side.owner_of(pid));
        }
    }
    setup.release_claims();
    setup.remove_private_dir();
    notes
}

/// Embeds the symbols; returns the JIT coverage line of each process that ran JIT code
/// (`still_writing`: whether it is an attached process whose runtime may name more later),
/// then the stack depth line of each busy process.
fn embed_symbols(
    output: &foreign_file::AtomicOutput,
    partial: &std::path::Path,
    still_writing: &dyn Fn(u32) -> bool,
) -> Result<Vec<String>> {
    let recording = Recording::open(partial)?;
    let file = output.try_clone().map_err(|e| Error::io(partial, e))?;
    let mut out = writer::ChunkWriter::append(file, partial);
    let facts =
        crate::symbolize::embedded_symbols_and_coverage(&recording, &mut |kind, payload| {
            out.write_chunk(kind, payload)
        })?;
    let coverage = facts
        .coverage
        .into_iter()
        .filter(|(_, c)| c.named > 0 || c.unnamed >= 10)
        .map(|(pid, c)| coverage_line(pid, c.named, c.unnamed, still_writing(pid)));
    let depth = facts
        .depth_lines
        .into_iter()
        .map(|l| format!("stacks: {l}"));
    Ok(coverage.chain(depth).collect())
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

    #[test]
    fn cpython_and_jvms_get_deep_copies_unless_told_otherwise() {
        let config = |call_graph| RecordConfig {
            target: Target::Launch(vec!["python3.12".into()]),
            frequency_hz: 999,
            output: "x.data".into(),
            duration: None,
            event: EventChoice::CpuClock,
            call_graph,
            embed_symbols: true,
            keep_side_files: false,
            xray_fdr: false,
            off_cpu_min_ns: None,
            java_agent: true,
        };
        let python = DeepStacks {
            python: true,
            jvm: false,
        };
        let jvm = DeepStacks {
            python: false,
            jvm: true,
        };
        let (stacks, note) = stacks_for(&config(None), python);
        assert_eq!(stacks, events::StackCopy::DEEP);
        assert_eq!(stacks.bytes, 65528);
        assert!(note.unwrap().contains("`--call-graph fp`"));
        // A JVM: frame pointers over the deep copy, cut down by the writer.
        let (stacks, note) = stacks_for(&config(None), jvm);
        assert_eq!(stacks, events::StackCopy::DEEP_FP);
        assert!(stacks.trimmed() && stacks.bytes == 65528);
        assert!(note
            .unwrap()
            .starts_with("java: frame pointers over a 64 KiB"));
        // Other programs, and a choice the user made, as before.
        let (plain, note) = stacks_for(&config(None), DeepStacks::default());
        assert_eq!(plain, events::StackCopy::of(CallGraph::FramePointers));
        assert!(note.is_none() && !plain.trimmed() && plain.bytes == 1024);
        for given in [CallGraph::FramePointers, CallGraph::Dwarf] {
            for deep in [python, jvm] {
                assert_eq!(
                    stacks_for(&config(Some(given)), deep),
                    (events::StackCopy::of(given), None)
                );
            }
        }
        assert_eq!(events::StackCopy::of(CallGraph::Dwarf).bytes, 8 * 1024);
    }

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
