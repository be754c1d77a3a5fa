//! The accounting behind `jprof report -i FILE.mlpd`: one pass over the decoded events that
//! keeps what mprof-report keeps (methods by MonoMethod pointer, per-thread call stacks with
//! self/callee time, sample hits, GC, exceptions, monitors, metadata, counters), with the same
//! rules, so the counts agree with mprof-report's. It also collects the weighted stacks the
//! flame graph needs (sample backtraces, calls or self time per call path).

use rustc_hash::FxHashMap;

use crate::format::mlpd::{
    self, counter_type, BufferHeader, CounterDesc, CounterRaw, Event, EventKind, Header, Metadata,
    MetadataPhase,
};

/// mprof-report's method hash size: its listing order follows this hash (see `Method::order`).
const HASH_SIZE: u64 = 9371;

/// What the user asked to keep.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only these threads (pthread_t values), when set.
    pub threads: Option<Vec<u64>>,
    /// `[from, to)` in ns from the first buffer's time base, when `timed`.
    pub timed: bool,
    pub from_ns: u64,
    pub to_ns: u64,
}

impl Filter {
    pub fn all() -> Self {
        Self {
            threads: None,
            timed: false,
            from_ns: 0,
            to_ns: u64::MAX,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Method {
    /// `None` until a JIT event names it ("unknown method 0x..." in the listing).
    pub name: Option<String>,
    pub code: u64,
    pub len: u64,
    pub ignore_jit: bool,
    pub calls: u64,
    pub self_time: u64,
    pub callee_time: u64,
    /// Creation sequence, for mprof-report's listing order.
    seq: u64,
}

impl Method {
    pub fn display_name(&self, pointer: u64) -> String {
        match &self.name {
            Some(n) => n.clone(),
            None => format!("unknown method {pointer:#x}"),
        }
    }
}

/// A frame of a thread's emulated call stack.
#[derive(Clone, Copy, Debug)]
struct Call {
    method: u64,
    start: u64,
    callee: u64,
    /// Its call path in the call tree.
    node: u32,
}

#[derive(Clone, Debug, Default)]
pub struct Thread {
    pub id: u64,
    pub name: Option<String>,
    stack: Vec<Call>,
    last_time: u64,
    gc_start: [u64; 3],
    contention: Option<(u64, u64)>,
}

/// One sample hit as recorded.
#[derive(Clone, Debug)]
pub struct Hit {
    pub time: u64,
    pub thread: u64,
    pub ip: u64,
    /// Managed backtrace, leaf first.
    pub frames: Vec<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct Monitor {
    pub contentions: u64,
    pub wait: u64,
    pub max_wait: u64,
}

#[derive(Clone, Debug, Default)]
pub struct GcGeneration {
    pub count: u64,
    pub total: u64,
    pub max: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Handles {
    pub created: u64,
    pub destroyed: u64,
    pub live: i64,
    pub max_live: i64,
}

#[derive(Clone, Debug)]
pub struct Counter {
    pub section: String,
    pub name: String,
    pub kind: u64,
    pub unit: u64,
    pub index: u64,
    /// The latest value (integers accumulated from the deltas).
    pub last: Option<CounterValue>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CounterValue {
    Signed(i64),
    Unsigned(u64),
    Double(f64),
    String(Option<String>),
}

/// A call path of the enter/leave replay: a node of the per-thread call tree.
#[derive(Clone, Debug)]
pub struct CallNode {
    /// `NO_PARENT` for a thread's root node.
    pub parent: u32,
    /// The method (the thread's pthread_t for a root node).
    pub method: u64,
    /// Completed calls on this path, their summed self time (ns), and the last one's end.
    pub calls: u64,
    pub self_ns: u64,
    pub last: u64,
    /// Summed total time (self + callees) of the completed calls.
    pub total_ns: u64,
    /// The child entered last from here: loops enter the same one again without a lookup.
    last_child: Option<(u64, u32)>,
}

pub const NO_PARENT: u32 = u32::MAX;

/// Every call path seen, shared prefixes stored once, so a call costs no allocation.
#[derive(Debug, Default)]
pub struct CallTree {
    pub nodes: Vec<CallNode>,
    index: FxHashMap<(u32, u64), u32>,
}

impl CallTree {
    /// The node of `method` called from `parent`, and whether it is new.
    #[inline]
    fn child(&mut self, parent: u32, method: u64) -> (u32, bool) {
        let cached = self
            .nodes
            .get(parent as usize)
            .and_then(|p| p.last_child)
            .filter(|c| c.0 == method);
        match cached {
            Some((_, node)) => (node, false),
            None => self.looked_up_child(parent, method),
        }
    }

    /// `child` when it is not the parent's last child.
    fn looked_up_child(&mut self, parent: u32, method: u64) -> (u32, bool) {
        let nodes = &mut self.nodes;
        let mut created = false;
        let node = *self.index.entry((parent, method)).or_insert_with(|| {
            created = true;
            nodes.push(CallNode {
                parent,
                method,
                calls: 0,
                self_ns: 0,
                last: 0,
                total_ns: 0,
                last_child: None,
            });
            (nodes.len() - 1) as u32
        });
        if let Some(p) = self.nodes.get_mut(parent as usize) {
            p.last_child = Some((method, node));
        }
        (node, created)
    }

    /// The path of `node`: its thread and its methods, root first.
    pub fn path(&self, mut node: u32) -> (u64, Vec<u64>) {
        let mut methods = Vec::new();
        loop {
            let n = &self.nodes[node as usize];
            if n.parent == NO_PARENT {
                methods.reverse();
                return (n.method, methods);
            }
            methods.push(n.method);
            node = n.parent;
        }
    }
}

#[derive(Debug, Default)]
pub struct Analysis {
    pub header: Option<Header>,
    /// The first buffer's time base: mprof-report's "startup" for `--time`.
    pub startup_time: Option<u64>,
    pub methods: FxHashMap<u64, Method>,
    next_seq: u64,
    /// In creation order (mprof-report lists the newest first).
    pub threads: Vec<Thread>,
    thread_index: FxHashMap<u64, usize>,
    /// Index of the thread of the buffer being decoded.
    current_thread: usize,
    pub hits: Vec<Hit>,
    pub sample_type: Option<u64>,
    /// (address, size, name) of unmanaged symbols and binaries.
    pub usyms: Vec<(u64, u64, String)>,
    pub ubins: Vec<(u64, u64, String)>,
    pub jit_helpers: u64,
    pub jit_helpers_size: u64,
    pub gc_resizes: u64,
    pub max_heap: u64,
    pub object_moves: u64,
    pub gc: [GcGeneration; 3],
    pub handles: [Handles; 4],
    pub throws: u64,
    pub clauses: [u64; 5],
    pub monitors: FxHashMap<u64, Monitor>,
    pub monitor_contention: u64,
    pub monitor_acquired: u64,
    pub monitor_failed: u64,
    pub images: u64,
    pub assemblies: u64,
    /// (domain, friendly name) in creation order.
    pub domains: Vec<(u64, Option<String>)>,
    /// (context, domain) in creation order.
    pub contexts: Vec<(u64, u64)>,
    /// class pointer → name; vtable → class.
    pub classes: FxHashMap<u64, String>,
    pub vtables: FxHashMap<u64, u64>,
    /// Allocations per class (or vtable before resolution): (count, bytes).
    pub allocs: FxHashMap<u64, (u64, u64)>,
    pub heap_shots: u64,
    pub counters: Vec<Counter>,
    /// What mprof-report prints while decoding ("unmatched leave ...").
    pub warnings: Vec<String>,
    /// Completed calls of the enter/leave replay, by call path.
    pub call_tree: CallTree,
    pub has_calls: bool,
    filter: Filter,
}

impl Analysis {
    pub fn new(filter: Filter) -> Self {
        Self {
            filter,
            ..Self::default()
        }
    }

    fn thread(&mut self, id: u64) -> &mut Thread {
        let i = self.thread_slot(id);
        &mut self.threads[i]
    }

    /// The index of thread `id` in `threads`, added if new.
    fn thread_slot(&mut self, id: u64) -> usize {
        match self.thread_index.get(&id) {
            Some(&i) => i,
            None => {
                self.threads.push(Thread {
                    id,
                    ..Thread::default()
                });
                self.thread_index.insert(id, self.threads.len() - 1);
                self.threads.len() - 1
            }
        }
    }

    fn method(&mut self, pointer: u64) -> &mut Method {
        let seq = &mut self.next_seq;
        self.methods.entry(pointer).or_insert_with(|| {
            *seq += 1;
            Method {
                seq: *seq,
                ..Method::default()
            }
        })
    }

    /// mprof-report's `--time`: `[startup + from, startup + to)`; everything without it
    /// (events older than the first buffer included).
    fn in_time(&self, time: u64) -> bool {
        if !self.filter.timed {
            return true;
        }
        let start = self.startup_time.unwrap_or(0);
        time >= start.saturating_add(self.filter.from_ns)
            && time < start.saturating_add(self.filter.to_ns)
    }

    fn thread_kept(&self, thread: u64) -> bool {
        self.filter
            .threads
            .as_ref()
            .is_none_or(|keep| keep.contains(&thread))
    }

    /// mprof-report's listing order of methods: its hash slots, and within a slot the newest
    /// first. Used to break ties the way its (stable) sort leaves them.
    pub fn method_order(&self) -> Vec<u64> {
        let mut all: Vec<(u64, u64, u64)> = self
            .methods
            .iter()
            .map(|(&p, m)| (((p >> 2) & 0xffff) % HASH_SIZE, u64::MAX - m.seq, p))
            .collect();
        all.sort_unstable();
        all.into_iter().map(|(_, _, p)| p).collect()
    }

    /// The thread of the current buffer, when its calls count at `time` (after noting the
    /// thread's last time): what `event` does first, for the enter/leave fast path.
    #[inline]
    fn call_counted(&mut self, buffer: &BufferHeader, time: u64) -> Option<usize> {
        let ti = self.current_thread;
        self.threads[ti].last_time = time;
        (self.thread_kept(buffer.thread_id) && self.in_time(time)).then_some(ti)
    }

    #[inline]
    fn enter(&mut self, ti: usize, method: u64, time: u64) {
        let thread = &self.threads[ti];
        let parent = match thread.stack.last() {
            Some(c) => c.node,
            None => self.call_tree.child(NO_PARENT, thread.id).0,
        };
        let (node, new_path) = self.call_tree.child(parent, method);
        // A method's first call is always on a new path: that is where mprof-report creates
        // its entry (so a matched leave finds it there).
        if new_path {
            self.method(method);
        }
        self.threads[ti].stack.push(Call {
            method,
            start: time,
            callee: 0,
            node,
        });
    }

    /// Closes the call on top of `ti`'s stack (an unmatched leave is a warning).
    #[inline]
    fn pop(&mut self, ti: usize, method: u64, time: u64) {
        let thread = &mut self.threads[ti];
        let matched = thread.stack.last().is_some_and(|c| c.method == method);
        if !matched {
            let depth = thread.stack.len();
            let name = self.method(method).display_name(method);
            self.warnings.push(format!(
                "unmatched leave at stack pos: {depth} for method {name}"
            ));
            return;
        }
        let Some(call) = thread.stack.pop() else {
            return;
        };
        let tdiff = time.wrapping_sub(call.start);
        let self_ns = tdiff.wrapping_sub(call.callee);
        if let Some(parent) = thread.stack.last_mut() {
            parent.callee = parent.callee.wrapping_add(tdiff);
        }
        // Per-method totals are summed from the call tree in `finish`.
        let node = &mut self.call_tree.nodes[call.node as usize];
        node.calls += 1;
        node.self_ns = node.self_ns.wrapping_add(self_ns);
        node.total_ns = node.total_ns.wrapping_add(tdiff);
        node.last = time;
    }

    /// Ends the replay: frames still open are closed at their thread's last time, newest
    /// thread first (as mprof-report does).
    pub fn finish(&mut self) {
        for ti in (0..self.threads.len()).rev() {
            while let Some(top) = self.threads[ti].stack.last().copied() {
                let last = self.threads[ti].last_time;
                let before = self.threads[ti].stack.len();
                self.pop(ti, top.method, last);
                if self.threads[ti].stack.len() == before {
                    break;
                }
            }
        }
        for node in self
            .call_tree
            .nodes
            .iter()
            .filter(|n| n.parent != NO_PARENT)
        {
            if let Some(m) = self.methods.get_mut(&node.method) {
                m.calls += node.calls;
                m.self_time = m.self_time.wrapping_add(node.self_ns);
                m.callee_time = m
                    .callee_time
                    .wrapping_add(node.total_ns.wrapping_sub(node.self_ns));
            }
        }
    }

    /// The class name of an ALLOC/HEAP_OBJECT pointer (a vtable from data v15).
    pub fn class_name(&self, pointer: u64, vtable: bool) -> String {
        let class = if vtable {
            self.vtables.get(&pointer).copied()
        } else {
            Some(pointer)
        };
        class
            .and_then(|c| self.classes.get(&c).cloned())
            .unwrap_or_else(|| format!("unresolved class {:#x}", class.unwrap_or(pointer)))
    }

    fn counter_value(&mut self, index: u64, raw: &CounterRaw<'_>) {
        let Some(c) = self.counters.iter_mut().find(|c| c.index == index) else {
            return;
        };
        let value = match (raw, &c.last) {
            (CounterRaw::Signed(d), Some(CounterValue::Signed(p))) => {
                CounterValue::Signed(p.wrapping_add(*d))
            }
            (CounterRaw::Signed(d), _) => CounterValue::Signed(*d),
            (CounterRaw::Unsigned(d), Some(CounterValue::Unsigned(p))) => {
                CounterValue::Unsigned(p.wrapping_add(*d))
            }
            (CounterRaw::Unsigned(d), _) => CounterValue::Unsigned(*d),
            (CounterRaw::Double(v), _) => CounterValue::Double(*v),
            (CounterRaw::String(s), _) => CounterValue::String(s.as_ref().map(|s| s.to_string())),
        };
        c.last = Some(value);
    }
}

impl mlpd::Visitor for Analysis {
    fn buffer(&mut self, buffer: &BufferHeader) {
        if self.startup_time.is_none() {
            self.startup_time = Some(buffer.time_base);
        }
        self.current_thread = self.thread_slot(buffer.thread_id);
        self.threads[self.current_thread].last_time = buffer.time_base;
    }

    fn method_enter(&mut self, buffer: &BufferHeader, _offset: usize, time: u64, method: u64) {
        self.has_calls = true;
        if let Some(ti) = self.call_counted(buffer, time) {
            self.enter(ti, method, time);
        }
    }

    fn method_leave(&mut self, buffer: &BufferHeader, _offset: usize, time: u64, method: u64) {
        if let Some(ti) = self.call_counted(buffer, time) {
            self.pop(ti, method, time);
        }
    }

    fn event(&mut self, buffer: &BufferHeader, event: &Event<'_>) {
        let time = event.time;
        let ti = self.current_thread;
        self.threads[ti].last_time = time;
        let in_time = self.in_time(time);
        let kept_thread = self.thread_kept(buffer.thread_id);
        // Allocations and handles count when the thread was asked for by name, or in time.
        let chosen = (self.filter.threads.is_some() && kept_thread) || in_time;
        // Calls, exceptions and monitors count for the chosen thread in time.
        let counted = kept_thread && in_time;
        if matches!(event.kind, EventKind::MethodEnter { .. }) {
            self.has_calls = true;
        }
        if let Some(bt) = backtrace(&event.kind) {
            for &f in bt {
                self.method(f);
            }
        }
        match &event.kind {
            EventKind::Jit {
                method,
                code,
                size,
                name,
            } => {
                let m = self.method(*method);
                m.name = Some(name.to_string());
                m.code = *code;
                m.len = *size;
                if !in_time {
                    m.ignore_jit = true;
                }
            }
            EventKind::MethodEnter { method } if counted => self.enter(ti, *method, time),
            EventKind::MethodLeave { method } | EventKind::MethodExcLeave { method } if counted => {
                self.pop(ti, *method, time);
            }
            EventKind::SampleHit {
                sample_type,
                thread,
                ips,
                frames,
            } => self.sample_hit(*sample_type, *thread, ips, frames, time, in_time),
            EventKind::SampleUsym {
                address,
                size,
                name,
            } => self.usyms.push((*address, *size, name.to_string())),
            EventKind::SampleUbin {
                address,
                size,
                name,
                ..
            } => self.ubins.push((*address, *size, name.to_string())),
            EventKind::JitHelper { size, .. } => {
                self.jit_helpers += 1;
                self.jit_helpers_size += size;
            }
            EventKind::GcResize { heap_size } => {
                self.gc_resizes += 1;
                self.max_heap = self.max_heap.max(*heap_size);
            }
            EventKind::GcMove { objects } => self.object_moves += objects.len() as u64 / 2,
            EventKind::GcEvent { event, generation } => {
                self.gc_event(ti, *event, *generation as usize, time)
            }
            EventKind::GcHandleCreated { handle_type, .. } if chosen && *handle_type <= 3 => {
                let h = &mut self.handles[*handle_type as usize];
                h.created += 1;
                h.live += 1;
                h.max_live = h.max_live.max(h.live);
            }
            EventKind::GcHandleDestroyed { handle_type, .. } if chosen && *handle_type <= 3 => {
                let h = &mut self.handles[*handle_type as usize];
                h.destroyed += 1;
                h.live -= 1;
            }
            EventKind::Throw { .. } if counted => self.throws += 1,
            EventKind::Clause { clause_type, .. } if counted => {
                if let Some(c) = self.clauses.get_mut(*clause_type as usize) {
                    *c += 1;
                }
            }
            EventKind::Monitor { event, object, .. } => {
                self.monitors.entry(*object).or_default();
                if counted {
                    self.monitor_event(ti, *event, *object, time);
                }
            }
            EventKind::Metadata {
                phase,
                pointer,
                what,
            } => self.metadata(*phase, *pointer, what),
            EventKind::Alloc { class, size, .. } if chosen => {
                let e = self.allocs.entry(*class).or_default();
                e.0 += 1;
                e.1 += size;
            }
            EventKind::HeapStart => self.heap_shots += 1,
            EventKind::CountersDesc { counters } => self.counters_described(counters),
            EventKind::Counters { values, .. } => {
                for v in values {
                    self.counter_value(v.index, &v.value);
                }
            }
            _ => {}
        }
    }
}

impl Analysis {
    /// A SAMPLE hit: its backtrace's methods are known from now on; in the time range, one
    /// hit per instruction pointer.
    fn sample_hit(
        &mut self,
        sample_type: Option<u64>,
        thread: u64,
        ips: &[u64],
        frames: &[u64],
        time: u64,
        in_time: bool,
    ) {
        if self.sample_type.is_none() {
            self.sample_type = Some(sample_type.unwrap_or(1));
        }
        for &f in frames {
            self.method(f);
        }
        if in_time {
            for &ip in ips {
                self.hits.push(Hit {
                    time,
                    thread,
                    ip,
                    frames: frames.to_vec(),
                });
            }
        }
    }

    /// A collection's start or end in generation `gen` (MONO_GC_EVENT_START 0, END 5).
    fn gc_event(&mut self, ti: usize, event: u64, gen: usize, time: u64) {
        if gen > 2 {
            return;
        }
        match event {
            0 => {
                self.threads[ti].gc_start[gen] = time;
                self.gc[gen].count += 1;
            }
            5 => {
                let d = time.wrapping_sub(self.threads[ti].gc_start[gen]);
                self.gc[gen].total = self.gc[gen].total.wrapping_add(d);
                self.gc[gen].max = self.gc[gen].max.max(d);
            }
            _ => {}
        }
    }

    /// Counters the runtime describes, each kept once (by index).
    fn counters_described(&mut self, counters: &[CounterDesc<'_>]) {
        for d in counters {
            if self.counters.iter().any(|c| c.index == d.index) {
                continue;
            }
            let section = match &d.section_name {
                Some(name) => name.to_string(),
                None => section_name(d.section).to_string(),
            };
            self.counters.push(Counter {
                section,
                name: d.name.to_string(),
                kind: d.kind,
                unit: d.unit,
                index: d.index,
                last: None,
            });
        }
    }

    fn monitor_event(&mut self, ti: usize, event: u64, object: u64, time: u64) {
        // MONO_PROFILER_MONITOR_CONTENTION 1, DONE 2, FAIL 3.
        match event {
            1 => {
                self.monitor_contention += 1;
                if let Some(m) = self.monitors.get_mut(&object) {
                    m.contentions += 1;
                }
                self.threads[ti].contention = Some((object, time));
            }
            2 | 3 => {
                if event == 2 {
                    self.monitor_acquired += 1;
                } else {
                    self.monitor_failed += 1;
                }
                if let Some((obj, start)) = self.threads[ti].contention.take() {
                    if start != 0 {
                        if let Some(m) = self.monitors.get_mut(&obj) {
                            let wait = time.wrapping_sub(start);
                            m.wait = m.wait.wrapping_add(wait);
                            m.max_wait = m.max_wait.max(wait);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn metadata(&mut self, phase: MetadataPhase, pointer: u64, what: &Metadata<'_>) {
        let loaded = phase == MetadataPhase::EndLoad;
        match what {
            Metadata::Class { name, .. } => {
                self.classes.insert(pointer, name.to_string());
            }
            Metadata::Image { .. } if loaded => self.images += 1,
            Metadata::Assembly { .. } if loaded => self.assemblies += 1,
            Metadata::Domain { name } => {
                let i = match self.domains.iter().position(|d| d.0 == pointer) {
                    Some(i) => i,
                    None => {
                        self.domains.push((pointer, None));
                        self.domains.len() - 1
                    }
                };
                if let Some(n) = name {
                    self.domains[i].1 = Some(n.to_string());
                }
            }
            Metadata::Context { domain } if loaded => {
                match self.contexts.iter_mut().find(|c| c.0 == pointer) {
                    Some(c) => c.1 = *domain,
                    None => self.contexts.push((pointer, *domain)),
                }
            }
            Metadata::Thread { name } => {
                let t = self.thread(pointer);
                if let Some(n) = name {
                    t.name = Some(n.to_string());
                }
            }
            Metadata::VTable { class, .. } => {
                self.vtables.insert(pointer, *class);
            }
            _ => {}
        }
    }

    /// Managed method whose code holds `ip` (mprof-report's lookup by IP).
    pub fn method_at(&self, ip: u64) -> Option<u64> {
        self.methods
            .iter()
            .filter(|(_, m)| m.len > 0 && ip >= m.code && ip < m.code.wrapping_add(m.len))
            .min_by_key(|(&p, m)| (((p >> 2) & 0xffff) % HASH_SIZE, u64::MAX - m.seq))
            .map(|(&p, _)| p)
    }

    /// A LONG counter in time units (100 ns ticks), printed in ms.
    pub fn counter_is_time(c: &Counter) -> bool {
        c.kind == counter_type::LONG && c.unit == MONO_COUNTER_TIME
    }
}

/// The backtrace an event carries, if any.
fn backtrace<'e>(kind: &'e EventKind<'_>) -> Option<&'e [u64]> {
    match kind {
        EventKind::Alloc { backtrace, .. }
        | EventKind::GcHandleCreated { backtrace, .. }
        | EventKind::GcHandleDestroyed { backtrace, .. }
        | EventKind::Throw { backtrace, .. }
        | EventKind::Monitor { backtrace, .. } => *backtrace,
        _ => None,
    }
}

/// `MONO_COUNTER_TIME` unit (ticks of 100 ns).
pub const MONO_COUNTER_TIME: u64 = 2 << 24;

fn section_name(section: u64) -> &'static str {
    match section {
        s if s == 1 << 8 => "Mono JIT",
        s if s == 1 << 9 => "Mono GC",
        s if s == 1 << 10 => "Mono Metadata",
        s if s == 1 << 11 => "Mono Generics",
        s if s == 1 << 12 => "Mono Security",
        s if s == 1 << 13 => "Mono Runtime",
        s if s == 1 << 14 => "Mono System",
        s if s == 1 << 16 => "Mono Profiler",
        _ => "<unknown>",
    }
}
