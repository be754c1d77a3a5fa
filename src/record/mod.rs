//! Live recording: launch or attach, open perf events, drain the rings, write the recording.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::Result;

/// What to profile.
#[derive(Clone, Debug)]
pub enum Target {
    /// Run this command line.
    Launch(Vec<String>),
    /// Attach to this running process.
    Pid(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventChoice {
    /// Hardware cycles; falls back to cpu-clock when the PMU is absent.
    Cycles,
    CpuClock,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallGraph {
    FramePointers,
    Dwarf,
}

/// Everything `jprof record` needs.
#[derive(Clone, Debug)]
pub struct RecordConfig {
    pub target: Target,
    /// Default is 999 Hz.
    pub frequency_hz: u64,
    /// Default is `jprof.data`.
    pub output: PathBuf,
    pub duration: Option<Duration>,
    /// Default is cycles.
    pub event: EventChoice,
    /// Default is frame pointers.
    pub call_graph: CallGraph,
    /// Default is true.
    pub embed_symbols: bool,
}

/// Records as configured; returns the exit code to give the shell (the target's).
pub fn run(_config: &RecordConfig) -> Result<i32> {
    Ok(0)
}
