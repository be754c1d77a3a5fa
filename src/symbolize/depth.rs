//! How deep each process's stacks reach, for the record summary and the report's notes: the
//! share of CPU samples whose stack is whole (it goes from the thread's start, a libc entry
//! such as `start_thread` or `_start`, to the leaf, with every user frame named), and the
//! stacks cut short by the kernel's callchain limit or by the end of the stack copy. Kernel
//! threads, which have no user stack, are not counted.

use std::collections::BTreeMap;

/// Outermost user functions of a thread: libc's process and thread entries. A stack whose
/// outermost frame is one of them was walked to its very start.
const THREAD_ENTRIES: &[&str] = &[
    "_start",
    "__libc_start_main",
    "__libc_start_call_main",
    "start_thread",
    "clone",
    "__clone",
    "clone3",
    "__clone3",
    "__GI___clone",
    "__GI___clone3",
    "thread_start",
];

/// Whether `name` is a function a thread starts in (its outermost user frame).
pub fn is_thread_entry(name: &str) -> bool {
    THREAD_ENTRIES.contains(&name)
}

/// Why a stack that is not whole stops where it does, when the recording can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cut {
    /// The callchain holds as many frames as the kernel gives (`sample_max_stack`).
    KernelLimit,
    /// Unwinding needed stack words past the end of the sample's stack copy.
    StackCopy,
}

#[derive(Clone, Debug, Default)]
struct Counts {
    samples: u64,
    whole: u64,
}

#[derive(Clone, Debug, Default)]
struct Process {
    all: Counts,
    kernel_limit: u64,
    stack_copy: u64,
    /// Per thread, and its latest name.
    threads: BTreeMap<u32, (Counts, String)>,
}

/// Stack depth counts per process, over CPU samples.
#[derive(Clone, Debug, Default)]
pub struct StackDepths {
    by_pid: BTreeMap<u32, Process>,
}

/// Processes with fewer samples get no line.
const MIN_SAMPLES: u64 = 10;
/// At most this many processes get a line (the busiest).
const MAX_LINES: usize = 10;
/// A thread with at least 1/this of its process's samples is shown on its own...
const BUSY_THREAD_SHARE: u64 = 10;
/// ...at most this many of them.
const MAX_THREADS: usize = 3;

impl StackDepths {
    /// Counts one CPU sample of thread `tid` (named `comm`) of process `pid`: whether its
    /// stack is whole, else why it stops where it does if known.
    pub fn observe(&mut self, pid: u32, tid: u32, comm: &str, whole: bool, cut: Option<Cut>) {
        let p = self.by_pid.entry(pid).or_default();
        let (thread, name) = p.threads.entry(tid).or_default();
        if name != comm {
            *name = comm.to_string();
        }
        for c in [&mut p.all, thread] {
            c.samples += 1;
            c.whole += u64::from(whole);
        }
        if !whole {
            match cut {
                Some(Cut::KernelLimit) => p.kernel_limit += 1,
                Some(Cut::StackCopy) => p.stack_copy += 1,
                None => {}
            }
        }
    }

    /// Counts as whole `samples` samples [`Self::observe`] counted as not whole (cut by `cut`):
    /// the end of `record` knows whether a frame without a symbol is named only once the
    /// DWARF is read, after the walk.
    pub fn now_whole(&mut self, pid: u32, tid: u32, cut: Option<Cut>, samples: u64) {
        let Some(p) = self.by_pid.get_mut(&pid) else {
            return;
        };
        let Some((thread, _)) = p.threads.get_mut(&tid) else {
            return;
        };
        thread.whole += samples;
        p.all.whole += samples;
        match cut {
            Some(Cut::KernelLimit) => p.kernel_limit = p.kernel_limit.saturating_sub(samples),
            Some(Cut::StackCopy) => p.stack_copy = p.stack_copy.saturating_sub(samples),
            None => {}
        }
    }

    /// One line per process (the busiest first, at most [`MAX_LINES`]), e.g. `pid 4242
    /// (javac): 96.1% of 15055 samples have whole stacks (thread start to leaf, every frame
    /// named); busiest threads: javac (tid 4243) 97.3% of 9000, …; 120 cut at the kernel's
    /// 127-frame callchain limit …`. `max_stack`: the limit the events were opened with; `copy_bytes`: the stack
    /// copy's size.
    pub fn lines(&self, max_stack: u16, copy_bytes: u32) -> Vec<String> {
        let mut busiest: Vec<(&u32, &Process)> = self
            .by_pid
            .iter()
            .filter(|(_, p)| p.all.samples >= MIN_SAMPLES)
            .collect();
        busiest.sort_by_key(|(pid, p)| (std::cmp::Reverse(p.all.samples), **pid));
        let share = |c: &Counts| 100.0 * c.whole as f64 / c.samples.max(1) as f64;
        let mut lines: Vec<String> = busiest
            .iter()
            .take(MAX_LINES)
            .map(|(&pid, p)| {
                let mut busy: Vec<(&u32, &(Counts, String))> = p
                    .threads
                    .iter()
                    .filter(|(_, (c, _))| c.samples * BUSY_THREAD_SHARE >= p.all.samples)
                    .collect();
                busy.sort_by_key(|(tid, (c, _))| (std::cmp::Reverse(c.samples), **tid));
                // Named by its main thread, else its busiest (a process whose threads each took
                // few of its samples has no busy thread: `-a` meets many).
                let comm = p
                    .threads
                    .get(&pid)
                    .or_else(|| p.threads.values().max_by_key(|(c, _)| c.samples))
                    .map_or("?", |(_, name)| name.as_str());
                let mut line = format!(
                    "pid {pid} ({comm}): {:.1}% of {} samples have whole stacks (thread start \
                     to leaf, every frame named)",
                    share(&p.all),
                    p.all.samples
                );
                if p.threads.len() > 1 && !busy.is_empty() {
                    let threads: Vec<String> = busy
                        .iter()
                        .take(MAX_THREADS)
                        .map(|(tid, (c, name))| {
                            format!("{name} (tid {tid}) {:.1}% of {}", share(c), c.samples)
                        })
                        .collect();
                    line += &format!("; busiest threads: {}", threads.join(", "));
                }
                if p.kernel_limit > 0 {
                    line += &format!(
                        "; {} cut at the kernel's {max_stack}-frame callchain limit \
                         (`sysctl kernel.perf_event_max_stack=1024` raises it)",
                        p.kernel_limit
                    );
                }
                if p.stack_copy > 0 {
                    line += &format!(
                        "; {} ended at the end of the {} stack copy",
                        p.stack_copy,
                        human_bytes(copy_bytes)
                    );
                }
                if comm.starts_with("beam") {
                    line += "; Erlang code runs on each Erlang process's own stack, which ends \
                             at that process's first function, not at a thread's start";
                }
                line
            })
            .collect();
        if busiest.len() > MAX_LINES {
            lines.push(format!(
                "{} more processes with fewer samples",
                busiest.len() - MAX_LINES
            ));
        }
        lines
    }
}

fn human_bytes(n: u32) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n}-byte")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_per_busy_process_with_its_busiest_thread_and_cuts() {
        let mut d = StackDepths::default();
        for i in 0..100 {
            // The main thread: 90 whole, 6 cut by the limit, 4 by the copy.
            let cut = match i {
                0..=5 => Some(Cut::KernelLimit),
                6..=9 => Some(Cut::StackCopy),
                _ => None,
            };
            d.observe(7, 8, "javac", cut.is_none(), cut);
        }
        for _ in 0..50 {
            d.observe(7, 9, "C2 CompilerThre", false, None);
        }
        // Too few samples for a line.
        for _ in 0..3 {
            d.observe(99, 99, "sh", true, None);
        }
        assert_eq!(
            d.lines(127, 65536),
            vec![
                "pid 7 (javac): 60.0% of 150 samples have whole stacks (thread start to leaf, \
                 every frame named); busiest threads: javac (tid 8) 90.0% of 100, C2 CompilerThre (tid \
                 9) 0.0% of 50; 6 cut at \
                 the kernel's 127-frame callchain limit (`sysctl kernel.perf_event_max_stack=1024` \
                 raises it); 4 ended at the end of the 64 KiB stack copy"
            ]
        );
    }

    /// The BEAM's samples in Erlang code never reach a thread's start (each Erlang process has
    /// its own stack): its line says why, so a low share does not read as a fault.
    #[test]
    fn a_beam_line_says_why_its_stacks_stop_short() {
        let mut d = StackDepths::default();
        for _ in 0..20 {
            d.observe(5, 5, "beam.smp", false, None);
            d.observe(7, 7, "java", false, None);
        }
        let lines = d.lines(127, 1024);
        assert!(
            lines[0].starts_with("pid 5 (beam.smp): 0.0% of 20"),
            "{lines:?}"
        );
        assert!(lines[0].contains("own stack"), "{lines:?}");
        assert!(!lines[1].contains("own stack"), "{lines:?}");
    }

    /// Samples counted as not whole, then found whole (`now_whole`), give the line they would
    /// have given counted whole at once, their cuts taken back.
    #[test]
    fn samples_found_whole_later_count_as_whole() {
        let mut at_once = StackDepths::default();
        let mut later = StackDepths::default();
        for i in 0..40 {
            let cut = (i % 4 == 0).then_some(Cut::KernelLimit);
            let whole = i % 2 == 0;
            at_once.observe(7, 8, "javac", whole, cut);
            // The whole ones with a cut are not known to be whole yet.
            later.observe(7, 8, "javac", whole && cut.is_none(), cut);
        }
        assert_ne!(at_once.lines(127, 1024), later.lines(127, 1024));
        later.now_whole(7, 8, Some(Cut::KernelLimit), 10);
        assert_eq!(at_once.lines(127, 1024), later.lines(127, 1024));
    }

    #[test]
    fn the_process_is_named_by_its_main_thread() {
        let mut d = StackDepths::default();
        for _ in 0..20 {
            d.observe(5, 6, "worker", true, None);
        }
        d.observe(5, 5, "server", true, None);
        let line = &d.lines(127, 1024)[0];
        assert!(
            line.starts_with("pid 5 (server): 100.0% of 21 samples"),
            "{line}"
        );
        assert!(
            line.contains("busiest threads: worker (tid 6) 100.0% of 20"),
            "{line}"
        );
        assert!(!line.contains("cut"), "{line}");
    }

    /// No sample in the main thread and none of the threads busy (each under a tenth): named by
    /// the busiest thread, no panic (an `-a` window had such a process).
    #[test]
    fn a_process_of_many_quiet_threads_is_named_by_its_busiest() {
        let mut d = StackDepths::default();
        for tid in 10..30 {
            let n = if tid == 12 { 2 } else { 1 };
            for _ in 0..n {
                d.observe(5, tid, &format!("w{tid}"), false, None);
            }
        }
        let line = &d.lines(127, 1024)[0];
        assert!(
            line.starts_with("pid 5 (w12): 0.0% of 21 samples"),
            "{line}"
        );
        assert!(!line.contains("busiest threads"), "{line}");
    }

    #[test]
    fn thread_entries() {
        assert!(is_thread_entry("start_thread"));
        assert!(is_thread_entry("_start"));
        assert!(!is_thread_entry("main"));
    }
}
