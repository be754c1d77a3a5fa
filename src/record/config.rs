//! What `jprof record` is asked to do: the target, the event, the options.

use std::path::PathBuf;
use std::time::Duration;

use crate::recording::CallGraph;

/// What to profile.
#[derive(Clone, Debug)]
pub enum Target {
    /// Run this command line.
    Launch(Vec<String>),
    /// Attach to these running processes (all their threads).
    Pids(Vec<u32>),
    /// Attach to these threads only (`--tid`).
    Tids(Vec<u32>),
    /// Every process on every CPU (`-a`).
    System,
}

/// The event samples are taken on (`--event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventChoice {
    /// Hardware cycles; falls back to cpu-clock when the PMU is absent.
    Cycles,
    /// The cpu-clock software event (ns of CPU time).
    CpuClock,
    /// The task-clock software event (ns of CPU time the task ran).
    TaskClock,
    /// Page faults (software).
    PageFaults,
    /// Context switches (software).
    ContextSwitches,
    /// Moves of a thread to another CPU (software).
    CpuMigrations,
    /// Instructions retired (hardware).
    Instructions,
    /// Last-level cache misses (hardware).
    CacheMisses,
    /// Mispredicted branches (hardware).
    BranchMisses,
}

impl EventChoice {
    /// The name `-e` takes and recordings store.
    pub(crate) fn name(self) -> &'static str {
        match self {
            EventChoice::Cycles => "cycles",
            EventChoice::CpuClock => "cpu-clock",
            EventChoice::TaskClock => "task-clock",
            EventChoice::PageFaults => "page-faults",
            EventChoice::ContextSwitches => "context-switches",
            EventChoice::CpuMigrations => "cpu-migrations",
            EventChoice::Instructions => "instructions",
            EventChoice::CacheMisses => "cache-misses",
            EventChoice::BranchMisses => "branch-misses",
        }
    }

    /// Whether the PMU counts it (absent in most VMs).
    pub(crate) fn is_hardware(self) -> bool {
        matches!(
            self,
            EventChoice::Cycles
                | EventChoice::Instructions
                | EventChoice::CacheMisses
                | EventChoice::BranchMisses
        )
    }
}

/// Everything `jprof record` needs.
#[derive(Clone, Debug)]
pub struct RecordConfig {
    /// The command to launch or the process to attach to.
    pub(crate) target: Target,
    /// Default is 999 Hz.
    pub(crate) frequency_hz: u64,
    /// Default is `jprof.data`.
    pub(crate) output: PathBuf,
    /// Stop after this long (`--duration`); None: until the target exits or jprof is stopped.
    pub(crate) duration: Option<Duration>,
    /// Default is cycles.
    pub(crate) event: EventChoice,
    /// `--call-graph`; None (the default): chosen from the target (`call_graph.rs`).
    pub(crate) call_graph: Option<CallGraph>,
    /// Default is true.
    pub(crate) embed_symbols: bool,
    /// Keep the side files jprof made a runtime write (they are in the recording anyway).
    /// Default is false.
    pub(crate) keep_side_files: bool,
    /// XRay-instrumented targets log in FDR mode instead of basic mode (`--xray fdr`).
    pub(crate) xray_fdr: bool,
    /// `--off-cpu`: also record where threads wait, storing switches at least this long
    /// (`--off-cpu-min`) with their stacks.
    pub(crate) off_cpu_min_ns: Option<u64>,
    /// Load jprof's agent into running HotSpot JVMs (`-p`, `--tid`, `-a`); `--no-java-agent`
    /// turns it off. Default is true.
    pub(crate) java_agent: bool,
    /// `--jvm`: the launched command starts a HotSpot JVM jprof cannot tell from its command
    /// line; its stacks are collected as a JVM's (`call_graph.rs`).
    pub(crate) jvm: bool,
}
