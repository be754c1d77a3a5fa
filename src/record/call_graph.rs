//! How user stacks are collected: `--call-graph` as given, or chosen from what the target runs
//! (the deep stack copy for CPython 3.12+ and for JVMs).

use super::config::RecordConfig;
use super::{events, runtimes};
use crate::recording::CallGraph;

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
/// trampolines make every Python call several C frames (docs/python.md); for a JVM, whose
/// interpreted frames are named by a slot of each frame (docs/java.md), frame pointers with
/// each frame's words read by a BPF program past the 1 KiB copy, or the deep copy cut down to
/// them where the kernel refuses the program (`events::open` decides); else frame pointers. Returns the summary's note on a
/// choice the user did not make.
pub(super) fn stacks_for(
    config: &RecordConfig,
    deep: DeepStacks,
) -> (events::StackCopy, Option<String>) {
    let kib = events::STACK_BYTES_DEEP.div_ceil(1024);
    match config.call_graph {
        Some(given) => (events::StackCopy::of(given), None),
        None if deep.python => (
            events::StackCopy::DEEP,
            Some(format!(
                "python: CPython's libpython keeps no frame pointers, so its stacks are \
                 unwound with DWARF over a {kib} KiB stack copy per sample; `--call-graph fp` \
                 records frame pointers only (smaller, but the Python callers are lost)"
            )),
        ),
        None if deep.jvm => (
            events::StackCopy::DEEP_FP,
            Some(format!(
                "java: frame pointers, with each frame's links and Method* slot read at sample \
                 time past a 1 KiB stack copy by a BPF program ({kib} KiB copies, cut down, \
                 where the kernel refuses it), so interpreted Java frames are named at every \
                 depth; `--call-graph fp` copies 1 KiB without the program (interpreted frames \
                 deeper than that are `Interpreter`)"
            )),
        ),
        None => (events::StackCopy::of(CallGraph::FramePointers), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::config::{EventChoice, Target};

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
            jvm: false,
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
        assert!(note.unwrap().contains("(64 KiB copies, cut down, where"));
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
}
