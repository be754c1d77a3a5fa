//! Live recording: launch the target suspended, open perf events on it, release it, drain the
//! rings while it runs, and write the recording. The ring reader (this thread) never touches the
//! disk: batches go over a bounded channel to the writer thread.

mod attach;
mod call_graph;
mod compact;
mod config;
mod deep_frames;
mod embed;
pub(crate) mod events;
mod host;
mod jit_debug;
mod jvm_attach;
mod jvm_starts;
mod leftovers;
mod mapping_build_ids;
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

pub use crate::recording::CallGraph;
pub use compact::compact_recording;
pub(crate) use config::EventChoice;
pub use config::{RecordConfig, Target};
pub use events::online_cpus;
pub(crate) use events::{attr_for, read_sysctl, StackCopy};
pub use runtimes::{find_agent, mono_log_profiler_installed, AGENT_FILE};
pub use stack_words::{cut_stack_copies, Mapped};

/// Whether the kernel refuses names planted in `/tmp` (so every runtime of a launched tree can
/// be asked for its fixed `/tmp` names).
pub(crate) fn tmp_guarded() -> bool {
    places::place_of(std::path::Path::new("/tmp")) == places::Place::KernelGuarded
}

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
