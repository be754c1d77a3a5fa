//! Rebuilds call stacks from XRay entry/exit events, one stack per thread. Paths are interned
//! in a call tree (node = parent path + function id), so a stack is one number.
//!
//! Rules (llvm-xray's `stack` command follows the same ones for well-formed logs):
//! - an entry pushes;
//! - an exit or tail exit pops down to the innermost open frame of that function; frames above
//!   it (whose exits are missing) are closed at the same time and counted as `deduced`;
//! - an exit of a function that is not open on the thread is counted as `unmatched` and
//!   ignored;
//! - frames still open at the end are counted by `ThreadStack::depth` and yield no call.

use rustc_hash::FxHashMap;

use crate::format::xray::{Event, EventKind};

/// Interned call paths. Node 0 is the empty path (the root of every thread).
#[derive(Clone, Debug)]
pub struct CallTree {
    /// `(parent node, function id)` per node; the root's entry is unused.
    nodes: Vec<(u32, u32)>,
    children: FxHashMap<(u32, u32), u32>,
}

impl Default for CallTree {
    fn default() -> Self {
        Self {
            nodes: vec![(0, 0)],
            children: FxHashMap::default(),
        }
    }
}

impl CallTree {
    /// The empty path.
    pub(crate) const ROOT: u32 = 0;

    /// The node for `parent` followed by a call of `func`.
    pub fn child(&mut self, parent: u32, func: u32) -> u32 {
        let next = self.nodes.len() as u32;
        let node = *self.children.entry((parent, func)).or_insert(next);
        if node == next {
            self.nodes.push((parent, func));
        }
        node
    }

    /// The function called at `node` (None for the root).
    pub fn func(&self, node: u32) -> Option<u32> {
        (node != Self::ROOT).then(|| self.nodes.get(node as usize).map(|n| n.1))?
    }

    /// Function ids from the outermost call to `node`.
    pub fn path(&self, mut node: u32) -> Vec<u32> {
        let mut path = Vec::new();
        while node != Self::ROOT {
            let Some(&(parent, func)) = self.nodes.get(node as usize) else {
                break;
            };
            path.push(func);
            node = parent;
        }
        path.reverse();
        path
    }
}

/// One finished call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// Its call path in the [`CallTree`] (the root when paths are not interned).
    pub node: u32,
    /// XRay function id.
    pub func: u32,
    /// Log timestamp at entry (TSC ticks; ns in an emulated-TSC log).
    pub entry: u64,
    /// Log timestamp at exit, same unit as `entry`.
    pub exit: u64,
    /// Exit minus entry, minus the inclusive time of its callees (ticks).
    pub self_ticks: u64,
    /// Closed by the exit of a caller: its own exit record is missing.
    pub deduced: bool,
}

impl Call {
    /// Exit minus entry, callees included (log ticks).
    pub fn inclusive_ticks(&self) -> u64 {
        self.exit.saturating_sub(self.entry)
    }
}

#[derive(Clone, Copy, Debug)]
struct OpenFrame {
    node: u32,
    func: u32,
    entry: u64,
    child_ticks: u64,
}

/// What one event did to a thread's stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Applied {
    /// Opened a call.
    Entered,
    /// Closed this many calls (1 for a well-formed exit).
    Exited(usize),
    /// An exit whose function was not open: ignored.
    Unmatched,
}

/// The open calls of one thread.
#[derive(Clone, Debug, Default)]
pub struct ThreadStack {
    frames: Vec<OpenFrame>,
    /// Most calls open at once.
    pub max_depth: usize,
    /// Exits of functions that were not open (ignored).
    pub unmatched_exits: usize,
    /// Calls closed by a caller's exit, their own exit missing.
    pub deduced_exits: usize,
}

impl ThreadStack {
    /// The innermost open call's node (the root when nothing is open).
    pub fn top(&self) -> u32 {
        self.frames.last().map_or(CallTree::ROOT, |f| f.node)
    }

    /// Calls open now.
    pub(crate) fn depth(&self) -> usize {
        self.frames.len()
    }

    /// Applies one event of this thread; finished calls go to `done`, innermost first. Without
    /// a tree, paths are not interned (every node is the root): enough for per-function figures.
    pub(crate) fn apply(
        &mut self,
        tree: Option<&mut CallTree>,
        event: &Event,
        mut done: impl FnMut(Call),
    ) -> Applied {
        if event.kind.is_entry() {
            let node = tree.map_or(CallTree::ROOT, |t| t.child(self.top(), event.func_id));
            self.frames.push(OpenFrame {
                node,
                func: event.func_id,
                entry: event.tsc,
                child_ticks: 0,
            });
            self.max_depth = self.max_depth.max(self.frames.len());
            return Applied::Entered;
        }
        debug_assert!(matches!(event.kind, EventKind::Exit | EventKind::TailExit));
        // Well-formed logs exit the innermost call: no search.
        if self.frames.last().is_some_and(|f| f.func == event.func_id) {
            if let Some(call) = self.close_top(event.tsc, false) {
                done(call);
            }
            return Applied::Exited(1);
        }
        let Some(at) = self.frames.iter().rposition(|f| f.func == event.func_id) else {
            self.unmatched_exits += 1;
            return Applied::Unmatched;
        };
        let closed = self.frames.len() - at;
        self.deduced_exits += closed - 1;
        while self.frames.len() > at {
            let deduced = self.frames.len() > at + 1;
            let Some(call) = self.close_top(event.tsc, deduced) else {
                break;
            };
            done(call);
        }
        Applied::Exited(closed)
    }

    /// Pops the innermost open call, finished at `exit`, and adds its time to its caller's.
    #[inline]
    fn close_top(&mut self, exit: u64, deduced: bool) -> Option<Call> {
        let f = self.frames.pop()?;
        let inclusive = exit.saturating_sub(f.entry);
        if let Some(parent) = self.frames.last_mut() {
            parent.child_ticks = parent.child_ticks.saturating_add(inclusive);
        }
        Some(Call {
            node: f.node,
            func: f.func,
            entry: f.entry,
            exit,
            self_ticks: inclusive.saturating_sub(f.child_ticks),
            deduced,
        })
    }
}

/// Every thread's replay of a whole log.
#[derive(Clone, Debug, Default)]
pub struct Replay {
    /// Every call path seen, interned.
    pub tree: CallTree,
    /// Finished calls in the order they finished.
    pub calls: Vec<(u32, Call)>,
    /// Final state per thread: open frames, counters.
    pub threads: Threads,
}

impl Replay {
    /// Replays `events` in file order (each thread's events are in order within the file).
    pub fn run(events: &[Event]) -> Self {
        let mut replay = Self::default();
        let mut stacks: FxHashMap<u32, (u32, ThreadStack)> = FxHashMap::default();
        for event in events {
            let (_, stack) = stacks
                .entry(event.tid)
                .or_insert_with(|| (event.pid, ThreadStack::default()));
            let calls = &mut replay.calls;
            stack.apply(Some(&mut replay.tree), event, |call| {
                calls.push((event.tid, call))
            });
        }
        replay.threads = stacks.into_iter().collect();
        replay
    }

    /// Exits of functions that were not open, summed over threads.
    pub fn unmatched_exits(&self) -> usize {
        StackCounts::of(&self.threads).unmatched_exits
    }

    /// Calls closed by a caller's exit, summed over threads.
    pub fn deduced_exits(&self) -> usize {
        StackCounts::of(&self.threads).deduced_exits
    }

    /// Calls still open at the end of the log, summed over threads.
    pub fn open_at_end(&self) -> usize {
        StackCounts::of(&self.threads).open_at_end
    }
}

/// Final stacks per thread: tid → (pid, stack).
pub type Threads = std::collections::BTreeMap<u32, (u32, ThreadStack)>;

/// The replay's counters summed over threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackCounts {
    pub(crate) unmatched_exits: usize,
    pub(crate) deduced_exits: usize,
    pub(crate) open_at_end: usize,
}

impl StackCounts {
    /// The sums over `threads`.
    pub(crate) fn of(threads: &Threads) -> Self {
        threads.values().fold(Self::default(), |c, (_, s)| Self {
            unmatched_exits: c.unmatched_exits + s.unmatched_exits,
            deduced_exits: c.deduced_exits + s.deduced_exits,
            open_at_end: c.open_at_end + s.depth(),
        })
    }
}
