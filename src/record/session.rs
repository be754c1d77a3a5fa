//! One recording from launch (or attach) to the finished file, in three steps: [`start`] sets
//! everything up and releases the target, [`Reading::read`] drains the rings until the
//! recording should stop, [`Session::finish`] writes the summary, embeds the symbols and renames
//! the file into place.
//!
//! Every part a step holds undoes itself when dropped, so an error at any step (a `?`) leaves
//! nothing behind that it should not: a child still held before exec is killed
//! (`SuspendedChild`), the files jprof made for runtimes and the XRay log directory are removed
//! unless kept (`RuntimeSetup`, `XraySetup`), the partial output is removed until the target
//! was released and kept readable after (`AtomicOutput`), and the writer thread is stopped and
//! joined ([`Writer`]).

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::call_graph::{stacks_for, DeepStacks};
use super::compact;
use super::config::{RecordConfig, Target};
use super::reader::Profiled;
use super::writer::{self, Batch, ChunkWriter, Counters};
use super::{
    attach, embed, events, host, jvm_attach, jvm_starts, leftovers, off_cpu, reader, runtimes,
    side_files, summary, xray_logs,
};
use crate::error::{Error, Result};
use crate::foreign_file::{self, AtomicOutput};
use crate::format::recording::ChunkKind;
use crate::recording::{CallGraph, Meta};
use crate::sys::child;
use crate::timeline::Calibration;

/// Batches in flight between ring reader and writer; beyond this the reader drops batches
/// (counted) rather than block, so memory stays bounded.
const CHANNEL_BATCHES: usize = 512;
/// What the writer thread hands back: the file, the counts, the clock calibration and the side
/// files it tailed.
type WriterEnd = (
    Result<(ChunkWriter, Counters)>,
    Calibration,
    side_files::SideFiles,
);

/// The writer thread and the channel that feeds it. Dropped (an error on the way), the channel
/// closes and the thread is joined, so it never writes on after `run` returned.
pub(super) struct Writer {
    feed: Option<writer::Feed>,
    thread: Option<JoinHandle<WriterEnd>>,
}

impl Writer {
    fn feed(&self) -> &writer::Feed {
        self.feed
            .as_ref()
            .expect("the channel is open until finish")
    }

    /// Closes the channel and waits for the thread to write what it holds.
    fn finish(mut self) -> Result<WriterEnd> {
        self.feed = None;
        let thread = self.thread.take().expect("joined once");
        thread
            .join()
            .map_err(|_| Error::Other("the writer thread panicked".into()))
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.feed = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A recording from start to finish (see the module documentation for what dropping it undoes).
pub(super) struct Session<'a> {
    config: &'a RecordConfig,
    meta: Meta,
    output: AtomicOutput,
    partial: PathBuf,
    profiled: Profiled,
    setup: runtimes::RuntimeSetup,
    xray: Option<xray_logs::XraySetup>,
    /// The writer cuts the samples' stack copies down (a JVM's) and the symbols are
    /// embedded: the recording is then written again without them (`compact`).
    rewritten_at_end: bool,
}

/// What only the reading needs; it ends with the reading, so the rings' memory is free before
/// the symbols are embedded.
pub(super) struct Reading {
    wall_start: Instant,
    events: events::Events,
    stop: reader::StopFlags,
    writer: Writer,
    /// The HotSpot attach of an attached JVM, running beside the reader.
    java_attach: Vec<jvm_attach::Running>,
    /// `-a` with the agent: JVMs that start while recording get it too.
    jvm_starts: Option<jvm_starts::JvmStarts>,
    /// This machine's kallsyms being read while a launched target runs.
    kallsyms: Option<EarlyKallsyms>,
}

/// This machine's kallsyms (which the end's embedding needs for kernel frames) read while a
/// launched target runs, by a thread in SCHED_IDLE: it takes CPU time only when no other
/// thread, the target's included, wants it. Read at the end, it took ≈55 ms of CPU beside the
/// end's own work on two cores. Once the target exits, the thread is put back in the normal
/// class if it is not done.
struct EarlyKallsyms {
    /// The reading thread's id while it reads in SCHED_IDLE (0: done, or not idle).
    idle_tid: std::sync::Arc<std::sync::Mutex<i32>>,
}

impl EarlyKallsyms {
    fn start() -> Option<Self> {
        let idle_tid = std::sync::Arc::new(std::sync::Mutex::new(0));
        let tid = idle_tid.clone();
        std::thread::Builder::new()
            .name("jprof-kallsyms".into())
            .spawn(move || {
                let set = |value: i32| {
                    *tid.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = value;
                };
                if crate::sys::sched::set_idle(0, true).is_ok() {
                    set(crate::sys::sched::thread_id());
                }
                drop(crate::symbolize::kernel::this_machine());
                set(0);
            })
            .ok()?;
        Some(Self { idle_tid })
    }

    /// Puts the thread back in the normal class if it still reads (under the lock, so the
    /// thread id is still its own).
    fn hurry(&self) {
        let tid = self
            .idle_tid
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *tid != 0 {
            let _ = crate::sys::sched::set_idle(*tid, false);
        }
    }
}

/// What reading the rings ended with, for [`Session::finish`].
pub(super) struct Read {
    stopped: reader::Stopped,
    java_attach: Vec<jvm_attach::Running>,
    wall: Duration,
    end: WriterEnd,
    /// Why a program loaded during the recording was refused (`-a`'s at the first JVM).
    deep_note: Option<String>,
}

/// Launches the target held before exec (or attaches), opens its events, creates the output
/// and the writer thread, then releases the target.
pub(super) fn start<'a>(
    config: &'a RecordConfig,
    pid_note: Option<&str>,
) -> Result<(Session<'a>, Reading)> {
    let (argv, deep) = match &config.target {
        Target::Launch(argv) if !argv.is_empty() => (
            argv.clone(),
            DeepStacks {
                python: runtimes::launches_cpython_3_12(argv),
                jvm: config.jvm || runtimes::launches_jvm(argv),
            },
        ),
        Target::Launch(_) => return Err(Error::Usage("no command given after `--`".into())),
        Target::Pids(pids) => {
            // One process is named by its command line; several by their pids (META's
            // `targets`). Each must exist.
            let mut lines = pids
                .iter()
                .map(|&pid| attach::command_line(pid))
                .collect::<Result<Vec<_>>>()?;
            let argv = if lines.len() == 1 {
                lines.remove(0)
            } else {
                Vec::new()
            };
            (argv, DeepStacks::of_processes(pids.iter().copied()))
        }
        Target::Tids(tids) => {
            let pids = tids
                .iter()
                .map(|&tid| attach::process_of_thread(tid).ok().flatten().unwrap_or(tid));
            (Vec::new(), DeepStacks::of_processes(pids))
        }
        // Every process on the machine: not worth 64 KiB per sample for each.
        Target::System => (Vec::new(), DeepStacks::default()),
    };
    let (stacks, stacks_note) = stacks_for(config, deep);
    let mut setup = match &config.target {
        Target::Launch(argv) => runtimes::prepare(argv, stacks.call_graph == CallGraph::Dwarf),
        _ => runtimes::RuntimeSetup::default(),
    };
    setup.notes.extend(stacks_note);
    setup.jvm_frames = deep.jvm;
    let xray = match &config.target {
        Target::Launch(argv) => xray_logs::prepare(argv, config.xray_fdr, config.keep_side_files),
        _ => None,
    };
    if let Some(note) = pid_note {
        eprintln!("jprof: {}", crate::terminal::safe(note.as_bytes()));
        setup.notes.push(note.to_string());
    }

    // Killed recordings' side files are removed, and this one's are listed from the start.
    let (mut leftover_list, cleaned) = leftovers::Leftovers::start();
    if let Some(note) = cleaned {
        setup.notes.push(note);
    }
    if config.keep_side_files || !matches!(config.target, Target::Launch(_)) {
        if let Some(list) = leftover_list.take() {
            list.finish();
        }
    }

    let calibration = Calibration::start();
    let wall_start = Instant::now();
    let (mut profiled, opened) = match &config.target {
        Target::Launch(_) => {
            // Before the target runs: a child it starts and leaves at once must be reparented
            // to jprof, not to init (on a busy machine that can happen before the reader loop
            // starts). Without it the tree is lost from view and only the target is followed.
            let _ = child::become_subreaper();
            let xray_env = xray.as_ref().map_or(&[][..], |x| x.env.as_slice());
            let env: Vec<(String, String)> = setup.env.iter().chain(xray_env).cloned().collect();
            let child = child::spawn_suspended(&argv, &env).map_err(|source| Error::Spawn {
                command: argv.join(" "),
                source,
            })?;
            if let (Some(list), Some(dir)) = (leftover_list.as_mut(), &setup.private_dir) {
                let (dev, ino) = dir.identity();
                list.add("dir", &dir.path, dev, ino);
            }
            let opened = events::open(
                &[child.pid],
                config.event,
                config.frequency_hz,
                stacks,
                events::Scope::Launched,
                config.off_cpu_min_ns,
                // Not foreseen from the command line; `--call-graph` given is kept as given.
                config.call_graph.is_none() && !setup.jvm_frames,
            );
            (Profiled::Child(child), opened)
        }
        Target::Pids(pids) => {
            let pids: Vec<i32> = pids.iter().map(|&p| p as i32).collect();
            let opened = attach::open_events(&pids, None, config, stacks);
            (Profiled::Attached { pids, only: None }, opened)
        }
        Target::Tids(tids) => {
            let only: Vec<i32> = tids.iter().map(|&t| t as i32).collect();
            let mut pids = Vec::new();
            for &tid in tids {
                let pid = attach::process_of_thread(tid)?.unwrap_or(tid) as i32;
                if !pids.contains(&pid) {
                    pids.push(pid);
                }
            }
            let opened = attach::open_events(&pids, Some(&only), config, stacks);
            let only = Some(only);
            (Profiled::Attached { pids, only }, opened)
        }
        Target::System => (Profiled::System, attach::open_system_events(config, stacks)),
    };
    let mut events = opened?;
    setup.notes.extend(events.deep_note.take());
    setup.jvms_watched =
        events.deep_at_first_jvm || events.deep.as_ref().is_some_and(|d| d.watching());
    let targets = match &config.target {
        Target::Pids(pids) if pids.len() > 1 => crate::recording::Targets {
            pids: pids.clone(),
            ..Default::default()
        },
        Target::Tids(tids) => crate::recording::Targets {
            pids: match &profiled {
                Profiled::Attached { pids, .. } => pids.iter().map(|&p| p as u32).collect(),
                _ => Vec::new(),
            },
            tids: tids.clone(),
            ..Default::default()
        },
        Target::System => crate::recording::Targets {
            system_wide: true,
            ..Default::default()
        },
        _ => Default::default(),
    };
    let attached = !matches!(profiled, Profiled::Child(_));
    let meta = Meta {
        jprof_version: env!("CARGO_PKG_VERSION").to_string(),
        command: argv.clone(),
        attached_pid: profiled.pid().filter(|_| attached).map(|p| p as u32),
        target_pid: profiled.pid().map(|p| p as u32),
        targets,
        host: host::facts(),
        event: events.config.clone(),
        start_unix_ns: host::unix_now_ns(),
    };
    // Written beside the destination and renamed into place when complete: an existing
    // recording survives a failed launch, a crash or a concurrent run (docs/security.md).
    let mut output = AtomicOutput::create(&config.output)?;
    let partial = output.partial_path().to_path_buf();
    let file = output.try_clone().map_err(|e| Error::io(&partial, e))?;
    let out = ChunkWriter::create(file, &partial, &meta)?;
    let stop = reader::StopFlags::install()?;

    let (feed, intake) = writer::Feed::new(CHANNEL_BATCHES);
    let layout = events.config.layout();
    let off_cpu = off_cpu::SwitchPairing::new(
        layout,
        &events.config.off_cpu_ids,
        events.config.off_cpu_min_ns,
    );
    let mut side = side_files::SideFiles::default();
    side.set_asking(setup.asking.clone());
    if config.embed_symbols {
        // Line and inline tables and method names are stored for what samples hit, which
        // the embedding finds.
        side.defer_jit_debug();
    }
    if let Some(list) = leftover_list {
        side.list_leftovers(list);
    }
    let writer_failed = stop.writer_failed();
    let stack_cut = match stacks.trimmed() {
        false => writer::StackCut::Whole,
        // The kernel reports every mapping of a launched target.
        true if !attached => writer::StackCut::EveryMappingSeen,
        true => writer::StackCut::MayBeAddress,
    };
    let rewritten_at_end =
        stack_cut != writer::StackCut::Whole && config.embed_symbols && !compact::keeps_copies();
    let jvms_watched = setup.jvms_watched;
    let thread = std::thread::Builder::new()
        .name("jprof-writer".into())
        .spawn(move || {
            let result = writer::run(
                out,
                layout,
                intake,
                off_cpu,
                &calibration,
                &mut side,
                writer::StoredStacks {
                    cut: stack_cut,
                    rewritten_at_end,
                    join_watched: jvms_watched,
                },
            );
            if result.is_err() {
                writer_failed.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            (result, calibration, side)
        })
        .map_err(|e| Error::Other(format!("cannot start the writer thread: {e}")))?;
    let writer = Writer {
        feed: Some(feed),
        thread: Some(thread),
    };

    match &mut profiled {
        Profiled::Child(child) => child.release().map_err(|source| Error::Spawn {
            command: argv.join(" "),
            source,
        })?,
        Profiled::Attached { pids, only } => {
            // What existed before the events were opened is not reported by the kernel.
            let now = attach::now();
            let mut build_ids = attach::BuildIds::default();
            let mut records = Vec::new();
            for &pid in pids.iter() {
                let only = only.as_deref();
                records.extend(attach::synthesize(
                    pid as u32,
                    only,
                    &layout,
                    now,
                    &mut build_ids,
                ));
            }
            let existing = Batch {
                records,
                deep: Vec::new(),
                jvms: Default::default(),
                complete_before: None,
            };
            writer
                .feed()
                .batches
                .send(existing)
                .map_err(|_| Error::Other("the writer thread stopped".into()))?;
            events::enable_all(&events)?;
        }
        Profiled::System => {
            // Enabled first, so that no process started meanwhile is missed; the processes
            // that existed are reported as of just before (a process that execs meanwhile is
            // reported again by the kernel, later, which wins).
            let now = attach::now();
            events::enable_all(&events)?;
            let mut build_ids = attach::BuildIds::default();
            for pid in attach::all_processes() {
                let records = attach::synthesize(pid, None, &layout, now, &mut build_ids);
                // A JVM running already: the program reads its frames past the copy too.
                let jvms = events.watch_jvms(&layout, &records);
                let existing = Batch {
                    records,
                    deep: Vec::new(),
                    jvms,
                    complete_before: None,
                };
                writer
                    .feed()
                    .batches
                    .send(existing)
                    .map_err(|_| Error::Other("the writer thread stopped".into()))?;
            }
        }
    }
    // From here on, whatever stops jprof leaves the partial recording readable.
    output.keep_if_dropped();
    let kallsyms = (config.embed_symbols
        && events.config.kernel_callchains
        && matches!(profiled, Profiled::Child(_)))
    .then(EarlyKallsyms::start)
    .flatten();

    // A HotSpot JVM gets jprof's agent through the attach protocol, off the reader loop (the
    // JVM takes a moment to start its attach listener).
    let java_attach: Vec<jvm_attach::Running> = match &profiled {
        _ if !config.java_agent => Vec::new(),
        Profiled::Attached { pids, .. } => pids
            .iter()
            .map(|&pid| jvm_attach::start(pid as u32, jvm_attach::Origin::Running))
            .collect(),
        // Only the processes that map a libjvm.so get an attach thread.
        Profiled::System => attach::all_processes()
            .into_iter()
            .filter(|&pid| pid != std::process::id() && attach::maps_libjvm(pid))
            .map(|pid| jvm_attach::start(pid, jvm_attach::Origin::Running))
            .collect(),
        Profiled::Child(_) => Vec::new(),
    };
    // The events were enabled before /proc was listed: a JVM that started meanwhile is in both
    // and is attached once.
    let jvm_starts = (config.java_agent && matches!(profiled, Profiled::System)).then(|| {
        jvm_starts::JvmStarts::new(layout, java_attach.iter().map(jvm_attach::Running::pid))
    });
    if matches!(profiled, Profiled::System) {
        // Said once everything runs: what starts from now on is recorded as it starts.
        let until = match config.duration {
            Some(d) => format!(" for {:.1} s", d.as_secs_f64()),
            None => " until Ctrl-C".into(),
        };
        eprintln!("jprof: recording every process on every CPU (-a){until}");
    }
    let session = Session {
        config,
        meta,
        output,
        partial,
        profiled,
        setup,
        xray,
        rewritten_at_end,
    };
    let reading = Reading {
        wall_start,
        events,
        stop,
        writer,
        java_attach,
        jvm_starts,
        kallsyms,
    };
    Ok((session, reading))
}

impl Reading {
    /// Reads the rings until the recording should stop, then hands the rest to the writer and
    /// waits for it.
    pub(super) fn read(mut self, session: &Session) -> Result<Read> {
        let mut stopped = reader::read_until_stopped(
            &mut self.events,
            self.writer.feed(),
            &session.profiled,
            &self.stop,
            session.config.duration,
            self.jvm_starts.take(),
        );
        // The target is done: this machine's kernel symbols, which embedding the symbols
        // needs once its walk over the samples is done, are read on another core while the
        // rings are drained, the writer finishes and the walk runs (tens of milliseconds off
        // the time from the target's exit to the file); a launched target's are mostly read
        // already, in CPU time it left idle. Not for a whole-host recording, whose end reads
        // only the symbols of the kernel addresses hit, after the walk: its memory peaks in the
        // walk.
        if session.config.embed_symbols
            && self.events.config.kernel_callchains
            && !matches!(session.profiled, Profiled::System)
        {
            match &self.kallsyms {
                Some(early) => early.hurry(),
                None => {
                    let _ = std::thread::Builder::new()
                        .name("jprof-kallsyms".into())
                        .spawn(|| drop(crate::symbolize::kernel::this_machine()));
                }
            }
        }
        // An attach still talking to its JVM gives up now: the stop is obeyed whatever it does.
        self.java_attach.iter().for_each(jvm_attach::Running::stop);
        stopped.jvm_watch.stop();
        if let Some(starts) = &stopped.jvm_starts {
            starts.stop();
        }
        events::disable_all(&self.events);
        let batch = reader::drain_all(&mut self.events, self.writer.feed().buffer());
        if !batch.records.is_empty() && self.writer.feed().batches.send(batch).is_err() {
            stopped.dropped_batches += 1;
        }
        // `-a`: the program loaded at the first JVM was refused.
        let deep_note = self.events.deep_note.take();
        let wall = self.wall_start.elapsed();
        let Reading {
            events,
            writer,
            java_attach,
            ..
        } = self;
        drop(events);
        let end = writer.finish()?;
        Ok(Read {
            stopped,
            java_attach,
            wall,
            end,
            deep_note,
        })
    }
}

impl Session<'_> {
    /// Writes the clock, the summary and the embedded symbols, renames the recording into
    /// place and prints the summary; returns the exit code to give the shell (the target's).
    pub(super) fn finish(mut self, read: Read) -> Result<i32> {
        let Read {
            stopped,
            java_attach,
            wall,
            end,
            deep_note,
        } = read;
        let (result, calibration, mut side) = end;
        let reader::Stopped {
            exit,
            stopped_by,
            dropped_batches,
            dropped_samples,
            tree_notes,
            jvm_watch,
            jvm_starts,
        } = stopped;
        let (config, meta) = (self.config, &self.meta);
        let (mut out, counters) = result.map_err(|e| {
            Error::Other(format!(
                "{e}; {stopped_by}. What was written is kept in {p}, readable up to its last \
                 complete chunk: jprof report -i {p}",
                p = self.partial.display()
            ))
        })?;

        let clock = calibration.finish();
        out.write_json(ChunkKind::CLOCK, &clock)?;
        let mut summary = counters.finish();
        summary.dropped_batches = dropped_batches;
        summary.dropped_samples = dropped_samples;
        summary.wall_duration_ns = wall.as_nanos() as u64;
        summary.exit_code = exit.map(child::ChildExit::shell_code);
        summary.stopped_by = stopped_by;
        if let Some(note) = &meta.event.event_note {
            summary.notes.push(note.clone());
        }
        summary.notes.extend(side.notes());
        if let Some(x) = &self.xray {
            let pid = self.profiled.pid().unwrap_or(0) as u32;
            summary.notes.extend(xray_logs::store(x, pid, &mut out)?);
        }
        summary.notes.extend(self.setup.notes.iter().cloned());
        summary.notes.extend(tree_notes);
        summary.notes.extend(deep_note);
        // The JVMs whose agent really loaded.
        let agent_loaded = {
            let mut attached = jvm_watch.finish();
            for running in java_attach {
                attached.merge(running.finish());
            }
            if let Some(starts) = jvm_starts {
                attached.merge(starts.finish());
            }
            let jitdumps = side.jitdump_paths();
            let (loaded, notes) = attached.confirm(|pid| jitdumps.contains_key(&pid));
            summary.notes.extend(notes);
            loaded
        };
        summary.notes.extend(runtime_notes_and_cleanup(
            config,
            meta.event.call_graph,
            &mut self.setup,
            &side,
            &agent_loaded,
        ));
        side.finish_leftovers();
        // Read whole now for the summary's notes (a block that does not read), keeping only
        // the method names the end's walk needs; read again for the rest after the walk.
        let mut spool = side.take_jit_debug();
        let method_names = spool
            .as_mut()
            .map(|spool| spool.groups(&mut summary.notes, true))
            .unwrap_or_default();
        let read_again = |spool: &mut Option<super::jit_debug::Spool>| {
            // What did not read the first time is in the summary already.
            spool
                .as_mut()
                .map(|spool| spool.groups(&mut Vec::new(), false))
                .unwrap_or_default()
        };
        if let Some(child::ChildExit::Signal(s)) = exit {
            summary
                .notes
                .push(format!("the target was killed by signal {s}"));
        }
        // META once more, far from the first copies, so that damage to the file's first blocks
        // costs a finished recording nothing.
        out.write_json(ChunkKind::META, meta)?;
        out.write_json(ChunkKind::SUMMARY, &summary)?;
        drop(out);

        // A JVM recorded with whole 1 KiB copies (`--call-graph fp`, or behind a launcher jprof
        // does not see through) has what reads them stored all the same (not for `-a`: its end
        // is kept short).
        let jvm_with_whole_copies = config.embed_symbols
            && !compact::keeps_copies()
            && side.runtimes().values().any(|&r| r == "java")
            && !matches!(self.profiled, Profiled::System);
        let rewritten =
            (self.rewritten_at_end || jvm_with_whole_copies) && !compact::keeps_copies();
        // The CODE_LOADs the finished recording leaves out (found by the embedding's walk).
        let mut leave_out = crate::symbolize::LoadsToLeaveOut::default();
        if config.embed_symbols {
            // What the ring reader and writer threads used is free now; the embedding is the
            // recorder's largest user of memory.
            crate::sys::memory::trim();
            // An attached process that runs on, its JIT files kept, may still hold JIT names in
            // its runtime's buffer (V8 writes its jitdump in batches): `jprof report` reads them
            // from the file once written, so this summary's share is a lower bound.
            let attached = |pid: u32| match &self.profiled {
                Profiled::Attached { pids, .. } => pids.contains(&(pid as i32)),
                Profiled::System => true,
                Profiled::Child(_) => false,
            };
            let java = side.runtimes().clone();
            // Only a process with a JIT file can have more names to come: one started without
            // them (a Node without --perf-prof) gets its share as final, its note saying why.
            let with_files = side.pids_with_files();
            let still_writing = |pid: u32| {
                attached(pid)
                    && with_files.contains(&pid)
                    && !(agent_loaded.contains(&pid) && java.get(&pid) == Some(&"java"))
                    && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
            };
            let set_aside = crate::symbolize::SetAside {
                any: spool.as_ref().is_some_and(|s| !s.is_empty()),
                method_names,
                all: &mut || read_again(&mut spool),
                beside_dwarf: !matches!(self.profiled, Profiled::System),
                rewritten,
            };
            match embed::embed_symbols(&self.output, &self.partial, &still_writing, set_aside) {
                // Printed with the summary (the SUMMARY chunk is already written; reports
                // compute their own coverage lines).
                Ok((coverage, loads)) => {
                    summary.notes.extend(coverage);
                    leave_out = loads;
                }
                Err(e) => {
                    summary
                        .notes
                        .push(format!("symbols were not embedded: {e}"));
                    // The set-aside tables are stored whole then.
                    let file = self
                        .output
                        .try_clone()
                        .map_err(|e| Error::io(&self.partial, e))?;
                    let mut out = ChunkWriter::append(file, &self.partial);
                    for payload in crate::symbolize::all_jit_debug(&read_again(&mut spool)) {
                        out.write_chunk(ChunkKind::JIT_DEBUG, &payload)?;
                    }
                }
            }
        }
        let file = self
            .output
            .try_clone()
            .map_err(|e| Error::io(&self.partial, e))?;
        ChunkWriter::append(file, &self.partial).write_chunk(ChunkKind::END, &[])?;
        let output = if rewritten {
            compacted(self.output, &config.output, &leave_out, &mut summary.notes)
        } else {
            self.output
        };
        output.commit()?;

        summary::print(&config.output, meta, &summary, &clock);
        Ok(exit.map_or(0, child::ChildExit::shell_code))
    }
}

/// The output to commit: a JVM's recording written again without the stack copies its
/// embedding made redundant and the CODE_LOADs `leave_out` names (`compact`), else `output`,
/// the one written while recording.
fn compacted(
    output: AtomicOutput,
    dest: &Path,
    leave_out: &crate::symbolize::LoadsToLeaveOut,
    notes: &mut Vec<String>,
) -> AtomicOutput {
    match compact::rewrite(dest, &output, leave_out) {
        Ok(Some(compacted)) => {
            output.discard();
            compacted
        }
        Ok(None) => output,
        Err(e) => {
            notes.push(format!(
                "the recording keeps its stack copies (writing it without them failed: {e})"
            ));
            output
        }
    }
}

/// The note on a JVM the launched command started where jprof could not see it would (a
/// launcher it cannot see through): its frames past the copy were read once it was found
/// (`watched`), or not at all (the kernel refused the program that reads them).
fn unforeseen_jvm_note(pid: u32, watched: bool) -> String {
    let then = match watched {
        true => {
            "its frames past the 1 KiB stack copy were read from when it mapped libjvm.so \
                 on (`--jvm` reads them from its first sample)"
        }
        false => {
            "the program that reads a JVM's frames as it runs was not loaded, so its \
                  stacks got a 1 KiB copy and frame pointers only: interpreted Java frames \
                  beyond the copy stay `Interpreter`; `jprof record --jvm -- …` reads every \
                  frame (docs/java.md)"
        }
    };
    format!(
        "java (pid {pid}): jprof did not see from the command line that it starts a JVM (a \
         launcher it cannot see through, such as a script that runs \"$JAVACMD\"); {then}"
    )
}

/// What the runtimes did (and how to get more out of them), and the removal of the files they
/// wrote only because jprof asked (their bytes are in the recording): only a file jprof asked
/// for at that very name, and only the very file that was read (same device and inode).
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
    if matches!(config.target, Target::Launch(_))
        && config.call_graph.is_none()
        && !setup.jvm_frames
    {
        // A launcher jprof could not see through started a JVM: its first samples (or all,
        // without the program) have the 1 KiB copy alone.
        for (pid, _) in runtimes.iter().filter(|(_, &r)| r == "java") {
            notes.push(unforeseen_jvm_note(*pid, setup.jvms_watched));
        }
    }
    if matches!(config.target, Target::Launch(_))
        && config.call_graph.is_none()
        && call_graph == CallGraph::FramePointers
    {
        // A CPython 3.12+ behind such a launcher got the frame-pointer stacks of a native
        // program: the DWARF copy its libpython needs is chosen for the whole launch, at start.
        for (pid, _) in runtimes.iter().filter(|(_, &r)| r == "python") {
            notes.push(format!(
                "python (pid {pid}): jprof did not see from the command line that it runs \
                 CPython 3.12+ (a launcher it cannot see through), so its stacks were walked \
                 by frame pointers: where libpython has none, Python callers are lost; \
                 `jprof record --call-graph dwarf -- …` unwinds them (docs/python.md)"
            ));
        }
    }
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
    setup.remove_private_dir();
    notes
}
