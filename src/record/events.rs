//! Opening the sampling events: one per online CPU on the target (inherit follows every thread
//! and child it creates), with the cycles → cpu-clock fallback and errors that say the fix.

use std::io;
use std::os::fd::OwnedFd;

use crate::error::Error;
use crate::format::perf::{sample_type as st, SampleLayout};
use crate::recording::EventConfig;
use crate::sys::perf_event::{self, abi, PerfMmap};

use super::config::EventChoice;
use crate::recording::CallGraph;

// The sampled layout is the recording's (a reader rebuilds it when every META copy is damaged).
pub use crate::recording::{REGS_USER_MASK, STACK_BYTES_DEEP, STACK_BYTES_DWARF, STACK_BYTES_FP};
/// Ring sizes in pages (power of two) per CPU.
const RING_PAGES_FP: usize = 256;
/// fp mode with the deep copy: the kernel writes ~64 KiB a sample before the writer cuts it.
const RING_PAGES_FP_DEEP: usize = 2048;
const RING_PAGES_DWARF: usize = 2048;
/// With the deep copy a sample is ~64 KiB: this ring holds a quarter second of them at 999 Hz.
const RING_PAGES_DEEP: usize = 4096;
/// How much the kernel writes into a ring before it wakes the reader.
const WAKEUP_BYTES: u32 = 64 * 1024;
/// `--off-cpu` writes a sample with its stack copy at every switch, hundreds of thousands a
/// second on a switch-heavy program, and each reader wakeup costs that program's CPU time (a
/// wake-up from the sample path, the reader's and writer's passes beside it): woken four
/// times less often, from rings four times larger, so as much is left free after a wakeup
/// (docs/performance.md#off-cpu).
const WAKEUP_BYTES_OFF_CPU: u32 = 256 * 1024;
/// At least 4 MiB per CPU with `--off-cpu`: 3.75 MiB free when the reader is woken.
const RING_PAGES_OFF_CPU: usize = 1024;

/// How user stacks are collected: the call graph META records, and how many bytes of the user
/// stack each sample copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackCopy {
    /// Frame pointers (the kernel's walk) or DWARF (the copy, unwound by the report).
    pub call_graph: CallGraph,
    /// `perf_event_attr.sample_stack_user`.
    pub bytes: u32,
}

impl StackCopy {
    /// What `--call-graph` gives: 1 KiB with frame pointers, 8 KiB with dwarf.
    pub fn of(call_graph: CallGraph) -> Self {
        let bytes = match call_graph {
            CallGraph::Dwarf => STACK_BYTES_DWARF,
            CallGraph::FramePointers => STACK_BYTES_FP,
        };
        Self { call_graph, bytes }
    }

    /// DWARF over the largest copy the kernel makes, for code without frame pointers whose
    /// stacks are deep (CPython's libpython: docs/python.md).
    pub const DEEP: Self = Self {
        call_graph: CallGraph::Dwarf,
        bytes: STACK_BYTES_DEEP,
    };

    /// Frame pointers over the largest copy the kernel makes, which the writer cuts down to
    /// the frame chain's words (`stack_words`): for a JVM's interpreted frames (docs/java.md).
    pub const DEEP_FP: Self = Self {
        call_graph: CallGraph::FramePointers,
        bytes: STACK_BYTES_DEEP,
    };

    /// Whether the writer cuts each sample's copy down (`stack_words`): fp mode's deep copy.
    pub fn trimmed(self) -> bool {
        self.call_graph == CallGraph::FramePointers && self.bytes > STACK_BYTES_FP
    }

    fn ring_pages(self) -> usize {
        match self.call_graph {
            CallGraph::FramePointers if self.trimmed() => RING_PAGES_FP_DEEP,
            CallGraph::FramePointers => RING_PAGES_FP,
            CallGraph::Dwarf if self.bytes > STACK_BYTES_DWARF => RING_PAGES_DEEP,
            CallGraph::Dwarf => RING_PAGES_DWARF,
        }
    }
}

/// The opened, mapped events and the configuration they were opened with.
pub struct Events {
    /// One ring per online CPU.
    pub rings: Vec<PerfMmap>,
    /// Events of further threads, writing into the rings.
    redirected: Vec<OwnedFd>,
    opened_tids: Vec<i32>,
    pub config: EventConfig,
    attr: abi::perf_event_attr,
    /// `--off-cpu`: the context-switch event opened beside `attr` for every thread and CPU.
    switch_attr: Option<abi::perf_event_attr>,
    cpus: Vec<i32>,
    /// A JVM's frames past the deep copy, read at sample time (`deep_frames`), when the kernel
    /// took the program.
    pub deep: Option<super::deep_frames::DeepFrames>,
    /// Why there is no `deep` where one was wanted (the summary says it once).
    pub deep_note: Option<String>,
    /// `-a`: the watching program is loaded when the records first show a JVM
    /// ([`Events::watch_jvms`]), so a host without one pays nothing for it (its 16 MiB ring).
    pub deep_at_first_jvm: bool,
}

/// Set to `1`, jprof does not load its BPF program for a JVM's deep stacks and copies 64 KiB of
/// stack per sample instead, as on a kernel that refuses the program (to measure and test that
/// path).
pub const NO_BPF_VAR: &str = "JPROF_NO_BPF";

/// Whether [`NO_BPF_VAR`] is set to `1`.
pub fn bpf_refused_by_env() -> bool {
    std::env::var_os(NO_BPF_VAR).is_some_and(|v| v == "1")
}

/// Loads the program that reads a JVM's frames past the 1 KiB stack copy; the error is the
/// summary's note on the fallback. `cpus`: how many CPUs are sampled (the ring's size).
fn load_deep_frames(cpus: usize) -> Result<super::deep_frames::DeepFrames, String> {
    let refused = |why: String| {
        format!(
            "java: {why}, so each sample copies {} KiB of stack instead of {} KiB; frames \
             deeper than that are not read and interpreted frames there stay `Interpreter`",
            STACK_BYTES_DEEP.div_ceil(1024),
            STACK_BYTES_FP.div_ceil(1024),
        )
    };
    if bpf_refused_by_env() {
        return Err(refused(format!(
            "{NO_BPF_VAR}=1: jprof's BPF program was not loaded"
        )));
    }
    super::deep_frames::DeepFrames::load(STACK_BYTES_FP, cpus)
        .map_err(|why| refused(format!("the kernel refused jprof's BPF program ({why})")))
}

/// CPUs in a kernel CPU list ("0-3,5").
fn parse_cpu_list(text: &str) -> Vec<i32> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.splitn(2, '-').map(|n| n.trim().parse::<i32>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), Some(Ok(b))) => cpus.extend(a..=b),
            (Some(Ok(a)), None) => cpus.push(a),
            _ => {}
        }
    }
    cpus
}

/// The online CPUs (/sys/devices/system/cpu/online), or 0..N when that cannot be read.
pub fn online_cpus() -> Vec<i32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = parse_cpu_list(&text);
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        cpus.extend(0..n as i32);
    }
    cpus
}

/// The integer value of `/proc/sys/kernel/NAME`, if readable.
pub(crate) fn read_sysctl(name: &str) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

pub(crate) fn attr_for(
    event: EventChoice,
    frequency_hz: u64,
    stacks: StackCopy,
    kernel: bool,
    launch: bool,
) -> abi::perf_event_attr {
    let mut attr = perf_event::new_attr();
    let (type_, config) = match event {
        EventChoice::Cycles => (abi::PERF_TYPE_HARDWARE, abi::PERF_COUNT_HW_CPU_CYCLES),
        EventChoice::Instructions => (abi::PERF_TYPE_HARDWARE, abi::PERF_COUNT_HW_INSTRUCTIONS),
        EventChoice::CacheMisses => (abi::PERF_TYPE_HARDWARE, abi::PERF_COUNT_HW_CACHE_MISSES),
        EventChoice::BranchMisses => (abi::PERF_TYPE_HARDWARE, abi::PERF_COUNT_HW_BRANCH_MISSES),
        EventChoice::CpuClock => (abi::PERF_TYPE_SOFTWARE, abi::PERF_COUNT_SW_CPU_CLOCK),
        EventChoice::TaskClock => (abi::PERF_TYPE_SOFTWARE, abi::PERF_COUNT_SW_TASK_CLOCK),
        EventChoice::PageFaults => (abi::PERF_TYPE_SOFTWARE, abi::PERF_COUNT_SW_PAGE_FAULTS),
        EventChoice::ContextSwitches => {
            (abi::PERF_TYPE_SOFTWARE, abi::PERF_COUNT_SW_CONTEXT_SWITCHES)
        }
        EventChoice::CpuMigrations => (abi::PERF_TYPE_SOFTWARE, abi::PERF_COUNT_SW_CPU_MIGRATIONS),
    };
    attr.type_ = type_;
    attr.config = config as u64;
    attr.sample_freq = frequency_hz;
    attr.set_freq(1);
    attr.sample_type = st::IP
        | st::TID
        | st::TIME
        | st::CPU
        | st::PERIOD
        | st::CALLCHAIN
        | st::REGS_USER
        | st::STACK_USER;
    attr.sample_regs_user = REGS_USER_MASK;
    attr.sample_stack_user = stacks.bytes;
    // dwarf mode keeps the kernel's frame-pointer chain of the user stack too: where the
    // stack copy ends, the report continues with it (docs/symbolization.md).
    attr.set_disabled(1);
    attr.set_enable_on_exec(u64::from(launch));
    attr.set_inherit(1);
    attr.set_mmap(1);
    attr.set_mmap2(1);
    attr.set_comm(1);
    attr.set_comm_exec(1);
    attr.set_task(1);
    attr.set_sample_id_all(1);
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr.set_exclude_hv(1);
    attr.set_exclude_kernel(u64::from(!kernel));
    attr.set_exclude_callchain_kernel(u64::from(!kernel));
    attr.set_watermark(1);
    attr.wakeup_watermark = WAKEUP_BYTES;
    attr
}

fn open_hint(err: &io::Error) -> String {
    let paranoid = read_sysctl("perf_event_paranoid");
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "perf_event_paranoid is {}; run jprof as root, grant CAP_PERFMON, or run `sysctl kernel.perf_event_paranoid=1`",
            paranoid.map_or("unknown".into(), |p| p.to_string())
        ),
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) => {
            "this event does not exist here (no PMU in this VM?); use `-e cpu-clock`".into()
        }
        Some(libc::EMFILE) => "too many open files; raise the limit with `ulimit -n 65536`".into(),
        Some(libc::EINVAL) => {
            "the kernel rejected the event settings; a kernel older than 4.1 lacks use_clockid, and -F above kernel.perf_event_max_sample_rate is refused".into()
        }
        Some(libc::ESRCH) => "the target process no longer exists".into(),
        _ => "see `man perf_event_open`".into(),
    }
}

fn mmap_hint(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::ENOMEM) => format!(
            "the ring buffers exceed the locked-memory allowance (kernel.perf_event_mlock_kb = {} KiB); run as root or raise it: `sysctl kernel.perf_event_mlock_kb=8192`",
            read_sysctl("perf_event_mlock_kb").map_or("unknown".into(), |v| v.to_string())
        ),
        _ => "see `man perf_event_open` (mmap)".into(),
    }
}

/// What the events are opened on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A launched child, held before exec: exec enables the events; its threads and children
    /// are followed (inherit).
    Launched,
    /// Every thread of running processes, and the threads and children they create later.
    Attached,
    /// These threads only (`--tid`): nothing they create is followed.
    ThreadsOnly,
    /// Every process on every CPU (`-a`): one event per CPU, pid -1.
    AllCpus,
}

/// Opens and maps one event per online CPU for each of `tids` (the launched child, or every
/// thread of an attached process; `inherit` covers the threads they create later). One ring
/// per CPU: the other threads' events on that CPU write into it (SET_OUTPUT). Tries cycles,
/// then cpu-clock when the PMU is absent; tries with kernel frames, then without when the
/// kernel refuses them.
pub fn open(
    tids: &[i32],
    event: EventChoice,
    frequency_hz: u64,
    stacks: StackCopy,
    scope: Scope,
    off_cpu_min_ns: Option<u64>,
    watch_jvms: bool,
) -> Result<Events, Error> {
    let cpus = online_cpus();
    if tids.is_empty() {
        return Err(Error::Usage("no thread to profile".into()));
    }
    let mut notes = Vec::new();
    // A JVM's deep stacks: its frames past the frameless top are read by the BPF program, so
    // the kernel copies 1 KiB a sample rather than 64 KiB; where the kernel refuses the
    // program, the 64 KiB copy it replaces.
    let (deep, deep_note) = match stacks.trimmed() {
        true => match load_deep_frames(cpus.len()) {
            Ok(deep) => (Some(deep), None),
            Err(why) => (None, Some(why)),
        },
        // A launch that may start a JVM jprof could not foresee: the program, idle until
        // one maps libjvm.so; without it, a note if one does (session.rs).
        false if watch_jvms && stacks == StackCopy::of(CallGraph::FramePointers) => {
            let loaded = (!bpf_refused_by_env())
                .then(|| {
                    super::deep_frames::DeepFrames::load_watching(STACK_BYTES_FP, cpus.len()).ok()
                })
                .flatten();
            (loaded, None)
        }
        false => (None, None),
    };
    let stacks = match deep {
        Some(_) => StackCopy::of(CallGraph::FramePointers),
        None => stacks,
    };
    let mut settings = Settings {
        event,
        kernel: true,
        // Not for -a: while an event on every CPU asks the kernel for build ids, other
        // tools' own recordings get mmap records they misread (Debian's perf 6.1 aborts in
        // util/build-id.c, samply panics), so jprof -a would break other users' profilers.
        build_ids: !matches!(scope, Scope::AllCpus),
        frequency_hz,
        stacks,
        scope,
        off_cpu: off_cpu_min_ns.is_some(),
    };
    let (probe, pid) = settings.open_first(tids, cpus[0], &mut notes)?;
    let attr = settings.attr();
    let rings = open_rings(probe, pid, attr, &cpus, settings.ring_pages())?;
    let mut events = Events {
        rings,
        redirected: Vec::new(),
        opened_tids: vec![pid],
        config: settings.config(&abi::perf_event_attr::default(), None),
        attr,
        switch_attr: None,
        cpus,
        deep: None,
        deep_note,
        deep_at_first_jvm: false,
    };
    if let Some(min_ns) = off_cpu_min_ns {
        events.open_off_cpu(pid, min_ns, settings.kernel, &mut notes);
    }
    if let Some(deep) = deep {
        events.read_deep_frames(deep);
    }
    events.add_threads(tids)?;
    let off_cpu_ids = std::mem::take(&mut events.config.off_cpu_ids);
    let off_cpu_min_ns = events.config.off_cpu_min_ns;
    let event_note = (!notes.is_empty()).then(|| notes.join("; "));
    events.config = EventConfig {
        off_cpu_ids,
        off_cpu_min_ns,
        ..settings.config(&events.attr, event_note)
    };
    Ok(events)
}

/// How the events are opened: what was asked, with what the kernel made jprof give up.
struct Settings {
    /// The event sampled: cpu-clock when cycles were asked for and there is no PMU.
    event: EventChoice,
    /// Kernel frames; off when the kernel refuses them to an unprivileged user.
    kernel: bool,
    /// MMAP2 records with the mapped file's build id (Linux 5.12+), so a report knows whether
    /// the file on disk is still the build that ran; older kernels refuse the bit.
    build_ids: bool,
    frequency_hz: u64,
    stacks: StackCopy,
    scope: Scope,
    /// `--off-cpu`: every sample says which event fired.
    off_cpu: bool,
}

impl Settings {
    /// The sampling event's attributes.
    fn attr(&self) -> abi::perf_event_attr {
        let launch = self.scope == Scope::Launched;
        let mut attr = attr_for(
            self.event,
            self.frequency_hz,
            self.stacks,
            self.kernel,
            launch,
        );
        attr.set_build_id(u64::from(self.build_ids));
        identify(&mut attr, self.off_cpu);
        if self.off_cpu {
            // The ring's owner sets the wakeup point for every event writing into it.
            attr.wakeup_watermark = WAKEUP_BYTES_OFF_CPU;
        }
        // A CPU-wide event sees every task already; inherit means nothing there.
        attr.set_inherit(u64::from(matches!(
            self.scope,
            Scope::Launched | Scope::Attached
        )));
        attr
    }

    /// Pages of each CPU's ring.
    fn ring_pages(&self) -> usize {
        match self.off_cpu {
            true => self.stacks.ring_pages().max(RING_PAGES_OFF_CPU),
            false => self.stacks.ring_pages(),
        }
    }

    /// Opens the first event on `cpu`, for the first of `tids` that still exists (an attached
    /// process's threads come and go while jprof opens its events): it will own the rings.
    /// Each refusal the kernel has a fallback for is taken (and noted) and the open tried again.
    fn open_first(
        &mut self,
        tids: &[i32],
        cpu: i32,
        notes: &mut Vec<String>,
    ) -> Result<(OwnedFd, i32), Error> {
        let mut owner = 0;
        loop {
            let pid = tids[owner];
            let mut attr = self.attr();
            let e = match perf_event::open(&mut attr, pid, cpu) {
                Ok(fd) => return Ok((fd, pid)),
                Err(e) => e,
            };
            if e.raw_os_error() == Some(libc::ESRCH) && owner + 1 < tids.len() {
                owner += 1;
            } else {
                self.fall_back(e, notes)?;
            }
        }
    }

    /// Gives up what the kernel refused, when something can be: build ids, the cycles
    /// counter, kernel frames. Anything else is the error, with the fix.
    fn fall_back(&mut self, e: io::Error, notes: &mut Vec<String>) -> Result<(), Error> {
        let code = e.raw_os_error();
        let no_event = matches!(
            code,
            Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP)
        );
        let denied = matches!(code, Some(libc::EACCES) | Some(libc::EPERM));
        if self.build_ids && code == Some(libc::EINVAL) {
            self.build_ids = false;
        } else if self.event == EventChoice::Cycles && no_event {
            notes.push(
                "no hardware cycles counter (no PMU visible): sampled cpu-clock instead".into(),
            );
            self.event = EventChoice::CpuClock;
        } else if self.event.is_hardware() && no_event {
            return Err(Error::Usage(no_such_event(self.event)));
        } else if self.scope == Scope::AllCpus && denied {
            return Err(Error::Perf {
                what: "perf_event_open on every CPU (-a)".into(),
                hint: format!(
                    "profiling the whole host needs root or CAP_PERFMON (or \
                     `sysctl kernel.perf_event_paranoid=-1`); perf_event_paranoid is {}",
                    read_sysctl("perf_event_paranoid").map_or("unknown".into(), |p| p.to_string())
                ),
                source: e,
            });
        } else if self.kernel && denied {
            notes.push(format!(
                "kernel frames unavailable: perf_event_paranoid is {} and jprof is not privileged; fix: `sysctl kernel.perf_event_paranoid=1` or run as root",
                read_sysctl("perf_event_paranoid").map_or("?".into(), |p| p.to_string())
            ));
            self.kernel = false;
        } else {
            return Err(Error::Perf {
                what: "perf_event_open".into(),
                hint: open_hint(&e),
                source: e,
            });
        }
        Ok(())
    }

    /// What the recording says the events were, for events opened with `attr`.
    fn config(&self, attr: &abi::perf_event_attr, event_note: Option<String>) -> EventConfig {
        EventConfig {
            event: self.event.name().into(),
            event_note,
            frequency_hz: self.frequency_hz,
            sample_type: attr.sample_type,
            regs_user_mask: attr.sample_regs_user,
            stack_user_bytes: attr.sample_stack_user,
            call_graph: self.stacks.call_graph,
            kernel_callchains: self.kernel,
            clockid: libc::CLOCK_MONOTONIC,
            off_cpu_ids: Vec::new(),
            off_cpu_min_ns: 0,
        }
    }
}

/// One ring per CPU: `first` (opened on the first CPU for `pid`) and an event with `attr` on
/// each other CPU, each mapped with `pages` pages.
fn open_rings(
    first: OwnedFd,
    pid: i32,
    attr: abi::perf_event_attr,
    cpus: &[i32],
    pages: usize,
) -> Result<Vec<PerfMmap>, Error> {
    let map = |fd| {
        PerfMmap::new(fd, pages).map_err(|e| Error::Perf {
            what: "mmap of the perf ring buffer".into(),
            hint: mmap_hint(&e),
            source: e,
        })
    };
    let mut rings = vec![map(first)?];
    for &cpu in &cpus[1..] {
        let mut attr = attr;
        let fd = perf_event::open(&mut attr, pid, cpu).map_err(|e| Error::Perf {
            what: format!("perf_event_open on CPU {cpu}"),
            hint: open_hint(&e),
            source: e,
        })?;
        rings.push(map(fd)?);
    }
    Ok(rings)
}

/// The refusal of a hardware event the kernel does not have.
fn no_such_event(event: EventChoice) -> String {
    format!(
        "-e {}: the kernel has no such event here (no hardware PMU is visible: a VM without PMU \
         passthrough, or a CPU the kernel has no driver for). The software events work everywhere: \
         -e cpu-clock, task-clock, page-faults, context-switches or cpu-migrations",
        event.name()
    )
}

/// With `--off-cpu` two events share each ring, so every sample says which one fired.
fn identify(attr: &mut abi::perf_event_attr, off_cpu: bool) {
    if off_cpu {
        attr.sample_type |= st::IDENTIFIER;
    }
}

/// The context-switch software event: a sample (same layout and unwinding as the CPU samples,
/// kernel part included) at every switch-out, and a SWITCH record at every switch-in. The
/// process-wide records (mmap, comm, task) come from the sampling event already.
fn switch_attr_for(main: &abi::perf_event_attr) -> abi::perf_event_attr {
    let mut attr = *main;
    attr.type_ = abi::PERF_TYPE_SOFTWARE;
    attr.config = abi::PERF_COUNT_SW_CONTEXT_SWITCHES as u64;
    attr.set_freq(0);
    attr.sample_period = 1;
    attr.set_mmap(0);
    attr.set_mmap2(0);
    attr.set_build_id(0);
    attr.set_comm(0);
    attr.set_comm_exec(0);
    attr.set_task(0);
    attr.set_context_switch(1);
    attr
}

impl Events {
    /// `--off-cpu`: the context-switch events beside the sampling events of `pid`, keeping
    /// switches of at least `min_ns`. Without kernel-mode events (`kernel`), or when the kernel
    /// refuses them, CPU samples only (noted).
    fn open_off_cpu(&mut self, pid: i32, min_ns: u64, kernel: bool, notes: &mut Vec<String>) {
        if !kernel {
            // A switch happens in the kernel: with kernel-mode events excluded its sample never
            // fires, so recording it would only look like a program that never waits.
            notes.push(
                "--off-cpu needs kernel-mode events (a thread leaves the CPU inside the kernel) and \
                 the kernel refused them: recorded CPU samples only. Fix: run as root, grant \
                 CAP_PERFMON, or `sysctl kernel.perf_event_paranoid=1`"
                    .into(),
            );
            return;
        }
        match self.open_switch_events(pid, switch_attr_for(&self.attr)) {
            Ok(ids) => {
                self.config.off_cpu_ids = ids;
                self.config.off_cpu_min_ns = min_ns;
            }
            Err(e) => notes.push(format!(
                "--off-cpu: the kernel refused the context-switch event ({e}); recorded \
                 CPU samples only. Fix: run as root or `sysctl kernel.perf_event_paranoid=1`"
            )),
        }
    }

    /// Runs the program that reads frames past the stack copy on every event opened so far
    /// (and, through `add_threads`, later); a refusal is noted, never fatal.
    fn read_deep_frames(&mut self, deep: super::deep_frames::DeepFrames) {
        let attached = self.all_fds().try_for_each(|fd| deep.attach(fd));
        if let Err(e) = attached {
            self.deep_note = Some(format!(
                "java: frames deeper than the {} KiB stack copy are not read at sample time (the \
                 kernel refused to attach jprof's BPF program to the event: {e}); interpreted \
                 frames there stay `Interpreter`",
                STACK_BYTES_FP.div_ceil(1024)
            ));
            return;
        }
        self.deep = Some(deep);
    }

    /// How long the reader may sleep before the deep frames' ring needs draining, if there is
    /// one (`DeepFrames::drain_within`).
    pub fn deep_drain_within(&self) -> Option<std::time::Duration> {
        self.deep
            .as_ref()
            .map(super::deep_frames::DeepFrames::drain_within)
    }

    /// The JVMs `records` show starting and ending, for the watching program
    /// (`DeepFrames::watch`); with [`Self::deep_at_first_jvm`], the program is loaded and
    /// attached to every event at the first one (a refusal is noted, once).
    pub fn watch_jvms(
        &mut self,
        layout: &SampleLayout,
        records: &[u8],
    ) -> super::deep_frames::JvmChanges {
        if self.deep.is_none()
            && self.deep_at_first_jvm
            && super::jvm_starts::jvms_mapped(layout, records)
                .next()
                .is_some()
        {
            self.deep_at_first_jvm = false;
            // One ring per CPU sampled.
            match super::deep_frames::DeepFrames::load_watching(STACK_BYTES_FP, self.rings.len()) {
                Ok(deep) => self.read_deep_frames(deep),
                Err(why) => {
                    self.deep_note = Some(format!(
                        "java: frames deeper than the {} KiB stack copy are not read at sample \
                         time (the kernel refused jprof's BPF program: {why}); interpreted \
                         frames there stay `Interpreter`",
                        STACK_BYTES_FP.div_ceil(1024)
                    ))
                }
            }
        }
        match &mut self.deep {
            Some(deep) => deep.watch(layout, records),
            None => Default::default(),
        }
    }

    /// Opens the events for more threads (attach mode), sending their records into the
    /// existing per-CPU rings. A thread that exited meanwhile is skipped.
    pub fn add_threads(&mut self, tids: &[i32]) -> Result<(), Error> {
        for &tid in tids {
            if self.opened_tids.contains(&tid) {
                continue;
            }
            for (i, &cpu) in self.cpus.iter().enumerate() {
                let mut attr = self.attr;
                let fd = match perf_event::open(&mut attr, tid, cpu) {
                    Ok(fd) => fd,
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => break,
                    Err(e) => {
                        return Err(Error::Perf {
                            what: format!("perf_event_open for thread {tid} on CPU {cpu}"),
                            hint: open_hint(&e),
                            source: e,
                        })
                    }
                };
                perf_event::set_output(&fd, self.rings[i].fd()).map_err(|e| Error::Perf {
                    what: "redirecting a thread's events into the CPU's ring".into(),
                    hint: "the kernel refused PERF_EVENT_IOC_SET_OUTPUT".into(),
                    source: e,
                })?;
                if let Some(deep) = &self.deep {
                    // Its samples then only lack the frames past the copy.
                    let _ = deep.attach(&fd);
                }
                self.redirected.push(fd);
            }
            if let Some(attr) = self.switch_attr {
                // A thread whose switch event is refused still has its CPU samples.
                let ids = self.open_switch_events(tid, attr).unwrap_or_default();
                self.config.off_cpu_ids.extend(ids);
            }
            self.opened_tids.push(tid);
        }
        Ok(())
    }

    /// Opens the context-switch event of `tid` on every CPU into that CPU's ring; returns the
    /// events' ids. A thread that exited meanwhile gets none.
    fn open_switch_events(
        &mut self,
        tid: i32,
        attr: abi::perf_event_attr,
    ) -> std::io::Result<Vec<u64>> {
        let mut ids = Vec::new();
        for (i, &cpu) in self.cpus.iter().enumerate() {
            let mut a = attr;
            let fd = match perf_event::open(&mut a, tid, cpu) {
                Ok(fd) => fd,
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => break,
                Err(e) => return Err(e),
            };
            perf_event::set_output(&fd, self.rings[i].fd())?;
            if let Some(deep) = &self.deep {
                let _ = deep.attach(&fd);
            }
            ids.push(perf_event::event_id(&fd)?);
            self.redirected.push(fd);
        }
        self.switch_attr = Some(attr);
        Ok(ids)
    }

    pub fn thread_count(&self) -> usize {
        self.opened_tids.len()
    }

    /// Every event fd (ring owners and redirected ones).
    fn all_fds(&self) -> impl Iterator<Item = &OwnedFd> {
        self.rings
            .iter()
            .map(|r| r.fd())
            .chain(self.redirected.iter())
    }
}

pub fn disable_all(events: &Events) {
    for fd in events.all_fds() {
        let _ = perf_event::disable(fd);
    }
}

/// Starts sampling (attach mode; in launch mode exec enables the events).
pub fn enable_all(events: &Events) -> Result<(), Error> {
    for fd in events.all_fds() {
        perf_event::enable(fd).map_err(|e| Error::Perf {
            what: "enabling the perf event".into(),
            hint: open_hint(&e),
            source: e,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_common_failure_names_its_fix() {
        let hint = |code| open_hint(&io::Error::from_raw_os_error(code));
        assert!(hint(libc::EACCES).contains("sysctl kernel.perf_event_paranoid=1"));
        assert!(hint(libc::EPERM).contains("CAP_PERFMON"));
        assert!(hint(libc::ENOENT).contains("-e cpu-clock"));
        assert!(hint(libc::EMFILE).contains("ulimit -n"));
        let mlock = mmap_hint(&io::Error::from_raw_os_error(libc::EPERM));
        assert!(mlock.contains("sysctl kernel.perf_event_mlock_kb="));
    }

    #[test]
    fn off_cpu_wakes_the_reader_four_times_less_often_from_rings_four_times_larger() {
        let settings = |off_cpu| Settings {
            event: EventChoice::CpuClock,
            kernel: true,
            build_ids: true,
            frequency_hz: 999,
            stacks: StackCopy::of(CallGraph::FramePointers),
            scope: Scope::Launched,
            off_cpu,
        };
        let (on, off) = (settings(true), settings(false));
        assert_eq!(on.attr().wakeup_watermark, 256 * 1024);
        assert_eq!(on.ring_pages(), 4 * off.ring_pages());
        assert_eq!(off.attr().wakeup_watermark, 64 * 1024);
        assert_eq!(off.ring_pages(), RING_PAGES_FP);
        // The switch events write into the same rings: the owner's watermark is theirs.
        assert_eq!(switch_attr_for(&on.attr()).wakeup_watermark, 256 * 1024);
        // A larger ring of another mode is kept.
        let dwarf = Settings {
            stacks: StackCopy::of(CallGraph::Dwarf),
            ..settings(true)
        };
        assert_eq!(dwarf.ring_pages(), RING_PAGES_DWARF);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,5\n"), [0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list("1"), [1]);
        assert_eq!(parse_cpu_list("x,2-3"), [2, 3]);
        assert!(parse_cpu_list("").is_empty());
    }
}
