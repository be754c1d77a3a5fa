//! Address → frames. Turns a recording's samples into a [`Profile`]: decodes the records in
//! time order (`records`), tracks each process's mappings (`process`), unwinds (`unwind`),
//! and names addresses (`lookup`) from JIT side data (`jit_index`), the symbols embedded in
//! the recording (`embedded`), ELF/DWARF files (`native`) and kallsyms (`kernel`). Rules:
//! `docs/symbolization.md`.

pub(crate) mod at_time;
pub(crate) mod build_id;
pub(crate) mod depth;
mod dwarf_units;
pub(crate) mod embedded;
mod entry_chunks;
pub(crate) mod frame_cache;
mod interpreted;
pub(crate) mod interpreted_frames;
pub(crate) mod jit_hits;
pub mod jit_index;
pub mod jit_unwind;
pub(crate) mod kernel;
mod kernel_cache;
pub(crate) mod lookup;
pub mod native;
pub(crate) mod process;
pub mod records;
mod stacks;
mod symbol_table;
pub(crate) mod unwind;
pub(crate) mod unwound;

use std::collections::BTreeMap;

use crate::error::Result;
use crate::format::perf::{context, Record};
use crate::format::recording::ChunkKind;
use crate::format::ParseError;
use crate::profile::Profile;
use crate::recording::{CallGraph, Recording};

use embedded::{EmbeddedFrame, EmbeddedIndex, EmbeddedSymbols};
use interpreted::INTERPRETER;
use lookup::Symbolizer;
use native::BinaryCache;
use process::{Mapping, ProcessModel};
use records::in_time_order;
use stacks::{SampleStack, StackBuilder};
use unwind::{split_callchain, Unwinders, UserRegs, UserState};

/// Options for turning a recording into a profile.
#[derive(Clone, Debug, Default)]
pub struct ResolveOptions {
    /// Only samples of this thread.
    pub tid: Option<u32>,
    /// Only samples whose thread name is this.
    pub comm: Option<String>,
    /// Read lines and inlined frames from separate debug files (`/usr/lib/debug`) too.
    pub debug_files: bool,
    /// Where copies of binaries are looked for by build id (`--search-dir`), when the file
    /// at a mapped path is another build than the recording's.
    pub search_dirs: Vec<std::path::PathBuf>,
    /// Counts symbolized samples (a bar on a terminal, else nothing).
    pub progress: crate::progress::Progress,
}

/// Samples symbolized between two progress updates.
const PROGRESS_EVERY: u64 = 512;

/// The mapping an MMAP or MMAP2 record describes. A record without a build id takes the one
/// the recording knows for the path apart from the records (`Recording::build_ids`).
fn file_mapping(
    addr: u64,
    len: u64,
    pgoff: u64,
    filename: &str,
    build_id: Option<&[u8]>,
    known: &BTreeMap<String, Vec<u8>>,
) -> Mapping {
    let known = || known.get(filename).map(Vec::as_slice);
    Mapping {
        start: addr,
        end: addr.saturating_add(len),
        pgoff,
        path: filename.into(),
        build_id: build_id.or_else(known).map(Into::into),
    }
}

/// Applies a record that changes the process model (mappings, names, forks); false for
/// any other record. `known`: build ids by path, for records without one.
fn update_model(
    model: &mut ProcessModel,
    record: &Record<'_>,
    known: &BTreeMap<String, Vec<u8>>,
) -> bool {
    match record {
        Record::Mmap2 {
            pid,
            addr,
            len,
            pgoff,
            build_id,
            filename,
            ..
        } => model.add_mapping(
            *pid,
            file_mapping(*addr, *len, *pgoff, filename, build_id.as_deref(), known),
        ),
        Record::Mmap {
            pid,
            addr,
            len,
            pgoff,
            filename,
            ..
        } => model.add_mapping(
            *pid,
            file_mapping(*addr, *len, *pgoff, filename, None, known),
        ),
        Record::Comm {
            pid,
            tid,
            comm,
            exec,
            ..
        } => model.comm(*pid, *tid, comm, *exec),
        Record::Fork {
            pid,
            ppid,
            tid,
            ptid,
            ..
        } => model.fork(*pid, *ppid, *tid, *ptid),
        _ => return false,
    }
    true
}

/// Frames walked over a sample's stack copy to find interpreted frames.
const MAX_WALK: usize = 1024;

/// Replays the records in time order through the process model and hands every sample's
/// address stack to `visit`. User stacks come from `embedded` when it holds the unwinding
/// results, else from unwinding here (DWARF mode, or fp mode's frameless-leaf fix).
/// Returns the final model and the records that could not be decoded.
fn walk(
    recording: &Recording,
    embedded: Option<&EmbeddedSymbols>,
    jit: &jit_index::JitIndex,
    binaries: &mut BinaryCache,
    mut visit: impl FnMut(&ProcessModel, &mut BinaryCache, &SampleStack),
) -> (ProcessModel, Vec<ParseError>) {
    let dwarf = recording.meta.event.call_graph == CallGraph::Dwarf;
    let off_cpu_ids: rustc_hash::FxHashSet<u64> =
        recording.meta.event.off_cpu_ids.iter().copied().collect();
    let regs_mask = recording.meta.event.regs_user_mask;
    let max_stack = recording
        .meta
        .host
        .perf_event_max_stack
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n > 0);
    let mut model = ProcessModel::default();
    let mut unwinders = Unwinders::default();
    let mut unwound = embedded.filter(|e| e.stacks_in_chunks).map(|_| {
        unwound::StackReader::new(
            recording.payloads(ChunkKind::UNWOUND_STACKS),
            |offset, len| recording.release(offset, len),
        )
    });
    // What the embedding read from the copies (interpreted frames, cuts): the copies are then
    // not read again (a finished JVM recording stores none).
    let mut from_copies = unwound
        .as_ref()
        .filter(|_| {
            recording
                .payloads(ChunkKind::INTERPRETED_FRAMES)
                .next()
                .is_some()
        })
        .map(|_| {
            interpreted_frames::Reader::new(
                recording.payloads(ChunkKind::INTERPRETED_FRAMES),
                |offset, len| recording.release(offset, len),
            )
        });
    // The frames read past a sample's copy (a JVM's deep stacks), written just before it.
    let mut deep_frames: rustc_hash::FxHashMap<(u32, u64), Vec<u64>> = Default::default();
    let mut errors = in_time_order(recording, |timed| {
        if update_model(&mut model, &timed.record, &recording.build_ids) {
            return;
        }
        if let Record::DeepFrames {
            tid, time, words, ..
        } = &timed.record
        {
            // A sample lost after its frames were read leaves them here: a few at most.
            if deep_frames.len() > 64 {
                deep_frames.retain(|&(_, t), _| t + 1_000_000_000 >= *time);
            }
            deep_frames.insert((*tid, *time), words.iter().collect());
            return;
        }
        let Record::Sample(s) = &timed.record else {
            return;
        };
        let deep = deep_frames.remove(&(s.tid, s.time)).unwrap_or_default();
        model.note_thread(s.pid, s.tid);
        let mut stack = split_callchain(s);
        let offset = timed.offset as u64;
        let callchain_user;
        // The kernel stops a callchain at its limit, kernel and user frames together.
        let at_limit = max_stack
            .is_some_and(|max| s.callchain.iter().filter(|&a| a < context::MAX).count() >= max);
        let mut copy_ended = false;
        // The walk of the copy, when fixing the top of the stack made it for the interpreted
        // frames' matching too.
        let mut long_walk = None;
        match embedded.filter(|e| e.unwound) {
            Some(e) => {
                let found = match &mut unwound {
                    Some(reader) => reader.take(offset, &stack.user),
                    None => e.stacks.get(&offset).cloned(),
                };
                // The callchain's own user part is kept aside, not copied, when replaced.
                callchain_user = match found {
                    Some(user) => std::mem::replace(&mut stack.user, user),
                    None => stack.user.clone(),
                };
            }
            None => {
                callchain_user = stack.user.clone();
                if let Some(regs) = UserRegs::from_sample(s.regs_user, regs_mask) {
                    let at = UserState {
                        pid: s.pid,
                        time: s.time,
                        regs,
                        stack: s.stack_user,
                    };
                    if dwarf {
                        let walk = unwinders.unwind(&model, binaries, jit, &at);
                        copy_ended = walk.copy_ended;
                        stack.user = unwind::continue_walk(walk, &callchain_user);
                    } else if stack.user.first() == Some(&regs.ip) {
                        let fixed = if jit.has_method_names(s.pid) {
                            // The walk for interpreted frames below, made once for both.
                            let walk = unwinders.walk_copy(&model, binaries, jit, &at, MAX_WALK);
                            let fixed = unwind::frameless_top_from(&walk.0, &stack.user);
                            long_walk = Some(walk);
                            fixed
                        } else {
                            unwinders.fix_frameless_top(&model, binaries, jit, &at, &stack.user)
                        };
                        if let Some(fixed) = fixed {
                            stack.user = fixed;
                        }
                    }
                }
            }
        }
        if let Some(reader) = &mut from_copies {
            let found = reader.take(offset).unwrap_or_default();
            let sample = SampleStack {
                offset,
                pid: s.pid,
                tid: s.tid,
                time: s.time,
                cpu: s.cpu,
                period: s.period,
                off_cpu: s.id.is_some_and(|id| off_cpu_ids.contains(&id)),
                interpreted: found.per_frame(stack.user.len()),
                callchain_user,
                stack,
                cut: found.cut,
                cut_when_embedded: found.cut,
            };
            visit(&model, binaries, &sample);
            return;
        }
        let mut at_limit = at_limit;
        // Stack words an interpreted frame needed lay past the copy.
        let mut interpreted_ran_off = false;
        let interpreted = match UserRegs::from_sample(s.regs_user, regs_mask) {
            Some(regs) if jit.has_method_names(s.pid) => {
                let words = interpreted::StackWords::new(regs.sp, s.stack_user, &deep);
                let chain = words.chain(regs.ip, regs.bp);
                // Past the kernel's callchain limit, the chain through the words read past
                // the copy goes on to the thread's start.
                // (A stack embedded at record time is already whole: nothing is added to it.)
                let mut full_callchain = callchain_user.clone();
                if at_limit
                    && !deep.is_empty()
                    && interpreted::extend_past_limit(&mut full_callchain, &chain)
                {
                    at_limit = false;
                    interpreted::extend_past_limit(&mut stack.user, &chain);
                }
                let at = UserState {
                    pid: s.pid,
                    time: s.time,
                    regs,
                    stack: s.stack_user,
                };
                let (walked, ran_off) = long_walk
                    .take()
                    .unwrap_or_else(|| unwinders.walk_copy(&model, binaries, jit, &at, MAX_WALK));
                // Asked several times per frame (by both matchings and below): each frame's
                // JIT lookup is made once.
                let known: Vec<std::cell::Cell<Option<bool>>> =
                    vec![std::cell::Cell::new(None); stack.user.len()];
                let in_interpreter = |i: usize| {
                    if let Some(known) = known.get(i).and_then(std::cell::Cell::get) {
                        return known;
                    }
                    let addr = stack.user[i];
                    let probe = if i == 0 { addr } else { addr.wrapping_sub(1) };
                    let answer = jit
                        .lookup(s.pid, probe, s.time)
                        .is_some_and(|code| code.name == INTERPRETER);
                    if let Some(cell) = known.get(i) {
                        cell.set(Some(answer));
                    }
                    answer
                };
                let read = |addr: u64| {
                    let at = usize::try_from(addr.checked_sub(regs.sp)?).ok()?;
                    let word = s.stack_user.get(at..at.checked_add(8)?)?;
                    Some(u64::from_le_bytes(word.try_into().ok()?))
                };
                let mut methods = interpreted::methods(&stack.user, &walked, in_interpreter, read);
                // In fp mode the frame-pointer chain the callchain was made of says which
                // frame holds which slot, and only where it lines up with the stack; the walk
                // of the copy is matched by address (recursion repeats addresses), so it
                // serves dwarf mode's stacks, which the chain does not make, and in fp mode
                // only the frames where the stack is the walk itself, entry for entry from the
                // IP: a thread switched out in a system call of a libc without frame pointers
                // has a callchain of its IP alone, and its stack is that walk.
                let walk_is_stack = stack
                    .user
                    .iter()
                    .zip(&walked)
                    .take_while(|(&u, &(a, _))| u == a)
                    .count();
                let on_chain = interpreted::methods_on_chain(
                    &stack.user,
                    &full_callchain,
                    &chain,
                    in_interpreter,
                    |a| words.read(a),
                );
                for (i, (m, c)) in methods.iter_mut().zip(on_chain).enumerate() {
                    *m = if dwarf || i < walk_is_stack {
                        c.or(*m)
                    } else {
                        c
                    };
                }
                // An interpreted frame the walk of the copy never reached stays unnamed.
                interpreted_ran_off = ran_off
                    && (0..stack.user.len()).any(|i| methods[i].is_none() && in_interpreter(i));
                methods
            }
            _ => Vec::new(),
        };
        let cut_of = |copy_ended: bool| {
            if at_limit {
                Some(depth::Cut::KernelLimit)
            } else {
                copy_ended.then_some(depth::Cut::StackCopy)
            }
        };
        let cut = cut_of(copy_ended || interpreted_ran_off);
        let cut_when_embedded = cut_of(interpreted_ran_off);
        let sample = SampleStack {
            offset,
            pid: s.pid,
            tid: s.tid,
            time: s.time,
            cpu: s.cpu,
            period: s.period,
            off_cpu: s.id.is_some_and(|id| off_cpu_ids.contains(&id)),
            interpreted,
            callchain_user,
            stack,
            cut,
            cut_when_embedded,
        };
        visit(&model, binaries, &sample);
    });
    errors.extend(unwound.and_then(|r| r.error));
    errors.extend(from_copies.and_then(|r| r.error));
    (model, errors)
}

/// The recording's last SYMBOLS or SYMBOLS_ZSTD chunk, if any and readable; a damaged one
/// becomes a note.
fn load_embedded(recording: &Recording, notes: &mut Vec<String>) -> Option<EmbeddedIndex> {
    let (offset, kind, payload) = recording
        .payloads(ChunkKind::SYMBOLS)
        .map(|(o, p)| (o, ChunkKind::SYMBOLS, p))
        .chain(
            recording
                .payloads(ChunkKind::SYMBOLS_ZSTD)
                .map(|(o, p)| (o, ChunkKind::SYMBOLS_ZSTD, p)),
        )
        .max_by_key(|(o, _, _)| *o)?;
    let json = if kind == ChunkKind::SYMBOLS_ZSTD {
        match crate::recording::inflate(payload, offset) {
            Ok(json) => std::borrow::Cow::Owned(json),
            Err(e) => {
                notes.push(format!(
                    "the embedded symbols at byte offset {offset} are unreadable ({e}); \
                     using the binaries on disk"
                ));
                return None;
            }
        }
    } else {
        std::borrow::Cow::Borrowed(payload)
    };
    match serde_json::from_slice::<EmbeddedSymbols>(&json) {
        Ok(symbols) => Some(EmbeddedIndex::new(symbols)),
        Err(e) => {
            notes.push(format!(
                "the embedded symbols at byte offset {offset} are unreadable ({e}); \
                 using the binaries on disk"
            ));
            None
        }
    }
}

/// Whether this machine runs the kernel the recording was made on, so its kallsyms and vdso
/// may name the recording's addresses.
fn same_kernel(recording: &Recording) -> bool {
    let recorded = recording.meta.host.kernel_release.trim();
    let current = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    recorded.is_empty() || recorded == current.trim()
}

/// Reads every record of the recording in time order and builds the symbolized profile.
pub fn resolve(recording: &Recording, options: &ResolveOptions) -> Result<Profile> {
    resolve_with_jit(recording, options).map(|(profile, _)| profile)
}

/// [`resolve`], also handing back the JIT index it built from the recording's side files
/// (reports list its code loads; building it again would cost as much as the first time).
pub fn resolve_with_jit(
    recording: &Recording,
    options: &ResolveOptions,
) -> Result<(Profile, jit_index::JitIndex)> {
    let mut profile = Profile::default();
    let embedded = load_embedded(recording, &mut profile.notes);
    let same_kernel = same_kernel(recording);
    let mut binaries = BinaryCache::new(same_kernel, options.debug_files);
    binaries.by_build_id.search_dirs = options.search_dirs.clone();
    let jit = jit_index::JitIndex::from_recording(recording);
    let mut stacks = StackBuilder::new(
        profile,
        Symbolizer::new(embedded.as_ref(), same_kernel),
        &jit,
        options.tid,
        options.comm.as_deref(),
    );
    let progress = &options.progress;
    // The records are read as they are symbolized; the summary says how many samples to
    // expect (a recorder that was killed wrote none: the bar then counts without an end).
    if let Some(summary) = &recording.summary {
        let off_cpu = summary.off_cpu.as_ref().map_or(0, |c| c.stored);
        progress.set_length(summary.samples + off_cpu);
    }
    let mut visited = 0u64;
    let (model, errors) = walk(
        recording,
        embedded.as_ref().map(|e| &e.symbols),
        &jit,
        &mut binaries,
        |model, binaries, s| {
            visited += 1;
            if visited.is_multiple_of(PROGRESS_EVERY) {
                progress.inc(PROGRESS_EVERY);
            }
            stacks.add(model, binaries, s);
        },
    );
    let StackBuilder {
        mut profile,
        symbolizer,
        kernel_frames,
        depths,
        ..
    } = stacks.finish(&model);
    let notes = notes(&errors, &symbolizer, &binaries, kernel_frames);
    profile.notes.extend(notes);
    profile
        .notes
        .extend(depth_lines(recording, &depths).map(|l| format!("stacks: {l}")));
    profile.notes.extend(jit.notes.iter().cloned());
    Ok((profile, jit))
}

/// The stack-depth line of each busy process, for the record summary and the report's notes.
pub(crate) fn depth_lines(
    recording: &Recording,
    depths: &depth::StackDepths,
) -> impl Iterator<Item = String> {
    let max_stack = recording.meta.host.perf_event_max_stack.unwrap_or(0);
    depths
        .lines(
            u16::try_from(max_stack).unwrap_or(u16::MAX),
            recording.meta.event.stack_user_bytes,
        )
        .into_iter()
}

/// What the reader should know about names that could not be found.
fn notes(
    errors: &[ParseError],
    symbolizer: &Symbolizer<'_>,
    binaries: &BinaryCache,
    kernel_frames: u64,
) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(first) = errors.first() {
        notes.push(format!(
            "{} perf records could not be decoded and were skipped; the first {first}",
            errors.len()
        ));
    }
    let failures: BTreeMap<&str, &str> = binaries.failures().collect();
    let unknown = &symbolizer.unknown;
    for (path, count) in &unknown.by_module {
        let module = path.rsplit('/').next().unwrap_or(path);
        let anonymous = path.starts_with("//anon")
            || path.starts_with('[')
            || path.starts_with("/memfd:")
            || path.starts_with("anon");
        let why = if anonymous {
            "anonymous memory no runtime named (JIT code without a jitdump or perf map entry)"
                .to_string()
        } else if let Some(mismatch) = binaries.by_build_id.mismatches.get(path) {
            mismatch.why(path)
        } else if let Some(reason) = failures.get(path.as_str()) {
            let copy = match binaries.by_build_id.not_found.get(path) {
                Some(id) => format!(
                    "; no copy with its build id {id} was found (looked in --search-dir, \
                     ~/.debug/.build-id and /usr/lib/debug/.build-id)"
                ),
                None => String::new(),
            };
            format!("cannot read {path} ({reason}) and the recording has no symbols for it{copy}")
        } else {
            format!("{path} has no symbol for these addresses")
        };
        notes.push(format!(
            "{count} frames shown as [unknown] ({module}+0x...): {why}"
        ));
    }
    if unknown.unmapped > 0 {
        notes.push(format!(
            "{} frames outside any mapped file (anonymous or JIT code, or a broken frame \
             chain) shown as [unknown] (0x...)",
            unknown.unmapped
        ));
    }
    if kernel_frames > 0 && symbolizer.kernel_hidden() {
        notes.push(kernel::HIDDEN_NOTE.to_string());
    } else if unknown.kernel > 0 {
        notes.push(format!(
            "{} kernel frames have no symbol (the recording has none for them and this \
             machine runs another kernel)",
            unknown.kernel
        ));
    }
    notes
}

/// Symbols for every native address the recording's samples hit, and the user stacks
/// unwinding changed, as encoded chunks to append to the recording (UNWOUND_STACKS, then
/// SYMBOLS), so the recording can be reported elsewhere or after the binaries changed. Runs on
/// the recording machine: it unwinds and names with the binaries and kallsyms there.
pub fn embedded_symbols(recording: &Recording) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    embed(
        recording,
        &mut |kind, payload| {
            out.extend(crate::format::recording::encode_chunk(kind, payload));
            Ok(())
        },
        false,
        SetAside {
            method_names: Default::default(),
            any: false,
            all: &mut Default::default,
            beside_dwarf: false,
            rewritten: false,
        },
    )?;
    Ok(out)
}

/// How many samples of a process had their innermost user frame in JIT code with a name, and
/// in anonymous or unmapped memory without one (the record summary's coverage lines).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JitCoverage {
    pub(crate) named: u64,
    pub(crate) unnamed: u64,
}

/// What the record summary says of the stacks, found while embedding the symbols.
#[derive(Clone, Debug, Default)]
pub struct StackFacts {
    /// The JIT coverage of each process.
    pub coverage: BTreeMap<u32, JitCoverage>,
    /// How deep each busy process's stacks reach, one line each.
    pub depth_lines: Vec<String>,
    /// The CODE_LOADs the finished recording can leave out (`JitIndex::loads_to_leave_out`).
    pub leave_out: LoadsToLeaveOut,
}

/// What a finished recording leaves out of its jitdumps.
#[derive(Clone, Debug, Default)]
pub struct LoadsToLeaveOut {
    /// By jitdump (process, path), the ordinals of the CODE_LOADs no sample's frame was found
    /// in that a recording can leave out (`JitIndex::loads_to_leave_out`).
    pub loads: BTreeMap<(u32, String), std::collections::BTreeSet<u64>>,
    /// By jitdump, its JIT_DEBUG payload with the groups numbered by the loads kept, when the
    /// end packed it already (`jit_hits::jit_debug_chunks`).
    pub jit_debug: BTreeMap<(u32, String), Vec<u8>>,
}

/// [`LoadsToLeaveOut`] of a finished recording, found by walking its samples as a report
/// does, every frame of every stack (for `record::compact_recording`; `jprof record`'s end
/// has them from its embedding's walk, the same walk).
pub fn loads_to_leave_out(recording: &Recording) -> LoadsToLeaveOut {
    let jit = jit_index::JitIndex::from_recording(recording);
    let embedded = load_embedded(recording, &mut Vec::new());
    let mut binaries = BinaryCache::new(same_kernel(recording), false);
    let mut hits = jit_hits::JitHits::default();
    let symbols = embedded.as_ref().map(|e| &e.symbols);
    walk(recording, symbols, &jit, &mut binaries, |_, _, s| {
        for (i, &addr) in s.stack.user.iter().enumerate() {
            let probe = if i == 0 { addr } else { addr.wrapping_sub(1) };
            if let Some(code) = jit.lookup(s.pid, probe, s.time) {
                hits.code(s.pid, code, probe);
            }
        }
    });
    LoadsToLeaveOut {
        loads: jit.loads_to_leave_out(|pid, origin| hits.hit(pid, origin)),
        jit_debug: BTreeMap::new(),
    }
}

/// [`embedded_symbols`], each chunk handed to `store` as it is ready (the stacks while the
/// walk runs, so they are never all in memory); returns the JIT coverage and stack depth of
/// each process. For `jprof record`'s end: the caches it built are left for the process's exit
/// to free. `set_aside`: the jitdump records set aside while recording, of which those of the
/// code and methods the samples hit are stored (JIT_DEBUG chunks, before SYMBOLS).
pub fn embedded_symbols_and_coverage(
    recording: &Recording,
    store: &mut dyn FnMut(ChunkKind, &[u8]) -> Result<()>,
    set_aside: SetAside<'_>,
) -> Result<StackFacts> {
    embed(recording, store, true, set_aside)
}

/// The jitdump records `jprof record` set aside, as the end reads them: the walk over the
/// samples needs only their VM method names; the rest (a JVM's line and inline tables,
/// megabytes) is read once the walk is done, so it is not held beside the walk's symbol
/// tables, where the end's memory peaks.
pub struct SetAside<'a> {
    /// Their METHOD_NAMES records (each group's [`jit_hits::method_names_into`]).
    pub method_names: crate::recording::DeferredDebug,
    /// Whether any record was set aside.
    pub any: bool,
    /// Reads them all.
    pub all: &'a mut (dyn FnMut() -> crate::recording::DeferredDebug + Send),
    /// Whether they may be read back and packed on another thread while the binaries' DWARF
    /// is read, the binaries' DWARF sections read on another thread while the walk runs, and
    /// kernel addresses named from this machine's whole kallsyms (not at the end of a
    /// whole-host recording, whose memory peaks there: kallsyms is then read after the walk,
    /// for the symbols of the kernel addresses hit alone).
    pub beside_dwarf: bool,
    /// Whether the finished recording is written again (`record::compact`), with the
    /// JIT_DEBUG chunks numbered for the loads it leaves out: those numbered for every load
    /// are then read only if that does not happen, and are packed fast.
    pub rewritten: bool,
}

/// Every deferred jitdump record as JIT_DEBUG chunk payloads (for a recording without
/// embedded symbols, whose samples are not walked when it ends).
pub fn all_jit_debug(deferred: &crate::recording::DeferredDebug) -> Vec<Vec<u8>> {
    jit_hits::jit_debug_chunks(deferred, None, &BTreeMap::new(), false).0
}

/// zstd level of SYMBOLS_ZSTD: the default level; the level 9 used before took several times
/// longer (tens of milliseconds of the CPU time of a whole-host recording's end) to pack the
/// names somewhat smaller.
const SYMBOLS_ZSTD_LEVEL: i32 = 3;

/// Samples of one thread (pid, tid) and cut whose stacks are whole if the frames of these
/// pending addresses are named (and, when the last flag is set, the last one, outermost, is a
/// thread entry).
type WholeIfNamed = (u32, u32, Option<depth::Cut>, Vec<lookup::PendingId>, bool);

/// The embedding; `exiting`: the process exits next, so its caches are not freed one by one.
fn embed(
    recording: &Recording,
    store: &mut dyn FnMut(ChunkKind, &[u8]) -> Result<()>,
    exiting: bool,
    set_aside: SetAside<'_>,
) -> Result<StackFacts> {
    let mut coverage: BTreeMap<u32, JitCoverage> = BTreeMap::new();
    let mut depths = depth::StackDepths::default();
    let mut binaries = BinaryCache::new(true, true);
    binaries.live_roots = true;
    let mut symbolizer = Symbolizer::new(None, true);
    // What DWARF adds to a symbol's name is read after the walk, one binary at a time. At the
    // end of a whole-host recording, whose memory peaks there, the symbol tables too: the walk
    // would hold those of every binary sampled at once (≈ 4.5 MB: `node`'s, `libjvm`'s, ...).
    // Not at the end of a launched or attached recording, where the walk names by symbol
    // while the other core reads the DWARF ahead.
    if set_aside.beside_dwarf {
        symbolizer.name_dwarf_later();
    } else {
        symbolizer.name_symbols_later();
    }
    let mut out = EmbeddedSymbols {
        version: embedded::VERSION,
        unwound: true,
        stacks_in_chunks: true,
        ..Default::default()
    };
    let mut stacks = unwound::StackWriter::default();
    let mut from_copies = interpreted_frames::Writer::default();
    let mut stored = Ok(());
    let mut hit: BTreeMap<(String, Option<String>), BTreeMap<u64, Vec<EmbeddedFrame>>> =
        BTreeMap::new();
    // Unwinding through JIT code needs the JIT bodies' unwind tables; of the records set
    // aside, the walk reads only the VM method names.
    let jit = jit_index::JitIndex::with_deferred(recording, &set_aside.method_names);
    drop(set_aside.method_names);
    let mut hits = jit_hits::JitHits::default();
    // Samples whose stack is whole if the DWARF read after the walk names their frames that
    // have no symbol (`UserLookup::pending`; the last one: the outermost frame, whose name
    // must also be a thread entry), counted as not whole for now: by thread, cut and keys.
    let mut whole_if_named: rustc_hash::FxHashMap<WholeIfNamed, u64> = Default::default();
    // Every kernel address the samples hit (the innermost frame's as it is, a return address
    // less one), named once the walk is done: from this machine's whole kallsyms, read on
    // another core since the recording stopped; at the end of a whole-host recording, whose
    // memory peaks there, from its symbols of these addresses alone, read after the walk.
    let mut kernel_probes: rustc_hash::FxHashSet<u64> = Default::default();
    // Each binary the walk leaves addresses in for the DWARF has its DWARF sections read
    // (libc's debug file inflated) on another core while the walk goes on: after the target
    // exits both cores are free. Not at the end of a whole-host recording, whose memory peaks
    // in the DWARF.
    let preparing = set_aside.beside_dwarf.then(|| {
        let (to, binaries) = std::sync::mpsc::channel::<native::DwarfAhead>();
        symbolizer.prepare_dwarf_beside(to);
        std::thread::Builder::new()
            .name("jprof-dwarf".into())
            .spawn(move || binaries.into_iter().for_each(native::DwarfAhead::read))
    });
    walk(
        recording,
        None,
        &jit,
        &mut binaries,
        |model, binaries, s| {
            if s.stack.user != s.callchain_user {
                if let Some(chunk) = stacks.push(s.time, s.offset, &s.stack.user, &s.callchain_user)
                {
                    if stored.is_ok() {
                        stored = store(ChunkKind::UNWOUND_STACKS, &chunk);
                    }
                }
            }
            if let Some(chunk) =
                from_copies.push(s.time, s.offset, s.cut_when_embedded, &s.interpreted)
            {
                if stored.is_ok() {
                    stored = store(ChunkKind::INTERPRETED_FRAMES, &chunk);
                }
            }
            // Coverage counts CPU samples, like the report's default view.
            if let Some(&leaf) = s.stack.user.first().filter(|_| !s.off_cpu) {
                if jit.lookup(s.pid, leaf, s.time).is_some() {
                    coverage.entry(s.pid).or_default().named += 1;
                } else {
                    let found = symbolizer.user(model, binaries, s.pid, leaf, true);
                    let anonymous = found.path.as_deref().is_none_or(|p| {
                        p.starts_with("//anon")
                            || p.starts_with("[anon")
                            || p.starts_with("/memfd:")
                    });
                    if anonymous {
                        coverage.entry(s.pid).or_default().unnamed += 1;
                    }
                }
            }
            // Whole: from a thread entry to the leaf, every frame named (as `StackBuilder`
            // names them: JIT code first, a bare `Interpreter` frame unnamed).
            let mut whole = !s.stack.user.is_empty();
            let mut pending = Vec::new();
            let mut outermost_pending = false;
            let outermost = s.stack.user.len().saturating_sub(1);
            for &method in s.interpreted.iter().flatten() {
                hits.method(s.pid, method);
            }
            for (i, &addr) in s.stack.user.iter().enumerate() {
                let exact = i == 0;
                let probe = if exact { addr } else { addr.wrapping_sub(1) };
                // Looked up once for both uses below. Every frame's code is noted, as the
                // loads no frame is found in are left out of the finished recording.
                let code = jit.lookup(s.pid, probe, s.time);
                if let Some(code) = code {
                    hits.code(s.pid, code, probe);
                }
                let found = symbolizer.user(model, binaries, s.pid, addr, exact);
                if whole {
                    let (named, name) = match code {
                        Some(code) => (
                            *code.name != *INTERPRETER
                                || s.interpreted
                                    .get(i)
                                    .copied()
                                    .flatten()
                                    .and_then(|m| jit.method_name(s.pid, m, s.time))
                                    .is_some(),
                            &*code.name,
                        ),
                        None => match found.pending {
                            Some(id) => {
                                pending.push(id);
                                outermost_pending = i == outermost;
                                (true, "")
                            }
                            None => (
                                !found.frames.is_empty(),
                                found.frames.last().map_or("", |f| f.name.as_str()),
                            ),
                        },
                    };
                    whole = named
                        && (i < outermost || outermost_pending || depth::is_thread_entry(name));
                }
                let Some(path) = &found.path else { continue };
                if found.frames.is_empty() && found.pending.is_none() {
                    continue;
                }
                // A pending address's frames are put in after the walk (or it is dropped,
                // when the DWARF does not name it either).
                hit.entry((
                    path.to_string(),
                    found.build_id.as_deref().map(str::to_string),
                ))
                .or_default()
                .entry(found.offset)
                .or_insert_with(|| found.frames.iter().map(EmbeddedFrame::from).collect());
            }
            if !s.off_cpu && !s.of_kernel_thread() {
                let comm = model.thread(s.tid).map_or("", |t| t.comm.as_str());
                if whole && !pending.is_empty() {
                    depths.observe(s.pid, s.tid, comm, false, s.cut);
                    *whole_if_named
                        .entry((s.pid, s.tid, s.cut, pending, outermost_pending))
                        .or_default() += 1;
                } else {
                    depths.observe(s.pid, s.tid, comm, whole, s.cut);
                }
            }
            // Named after the walk: this machine's kallsyms is still being read on another
            // core while the walk starts (`record`'s end), and the walk need not wait for it.
            for (i, &addr) in s.stack.kernel.iter().enumerate() {
                kernel_probes.insert(if i == 0 { addr } else { addr.wrapping_sub(1) });
            }
        },
    );
    symbolizer.stop_preparing();
    let loads_left_out = jit.loads_to_leave_out(|pid, origin| hits.hit(pid, origin));
    // The set-aside records are read back and what the samples hit of them packed (zstd level
    // 9) on another core while the binaries' DWARF names what the walk named by symbol alone:
    // the target has exited, so both cores are free. Not beside a whole-host recording's DWARF,
    // where its end's memory peaks: then after it.
    let SetAside {
        all,
        beside_dwarf,
        rewritten,
        ..
    } = set_aside;
    // The JIT index is not needed any more: freed before the binaries' DWARF is read, which is
    // where the end's memory peaks; on the other core when the packing runs there (a JVM's
    // index takes milliseconds to free, off the end's critical path there).
    let mut jit = Some(jit);
    if !beside_dwarf {
        drop(jit.take());
    }
    let (named_later, jit_debug, kallsyms) = std::thread::scope(|scope| {
        // /proc/kallsyms takes the kernel tens of milliseconds to write out: read on the other
        // core while the binaries' DWARF is read.
        let kallsyms = (!beside_dwarf && !kernel_probes.is_empty()).then(|| {
            scope.spawn(|| {
                let addrs: Vec<u64> = kernel_probes.iter().copied().collect();
                kernel::KernelSymbols::of_addresses(&addrs)
            })
        });
        let packing = beside_dwarf.then(|| {
            let hits = &hits;
            let loads_left_out = &loads_left_out;
            let all = &mut *all;
            let jit = jit.take();
            scope.spawn(move || {
                drop(jit);
                jit_hits::jit_debug_chunks(&all(), Some(hits), loads_left_out, rewritten)
            })
        });
        let named_later = symbolizer.name_later(&mut binaries);
        let jit_debug = packing.map(|packing| {
            packing
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        let kallsyms = kallsyms.map(|reading| {
            reading
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        (named_later, jit_debug, kallsyms)
    });
    if let Some(Ok(preparing)) = preparing {
        // Done by now: `name_later` took what it read.
        if let Err(panic) = preparing.join() {
            std::panic::resume_unwind(panic);
        }
    }
    match kallsyms {
        Some(kallsyms) => {
            for probe in kernel_probes {
                if let Some(name) = kallsyms.lookup(probe) {
                    out.kernel.insert(probe, name.to_string());
                }
            }
            out.kernel_hidden = kallsyms.hidden;
        }
        None => {
            for probe in kernel_probes {
                if let Some(name) = symbolizer.kernel(probe, true) {
                    out.kernel.insert(probe, name);
                }
            }
            out.kernel_hidden = symbolizer.kernel_hidden();
        }
    }
    // Each address gets the frames its first lookup's DWARF gives (the walk inserted the first
    // lookup's frames in `hit`; later lookups of the same place did not replace them).
    let mut replaced = std::collections::HashSet::new();
    for (path, build_id, offset, frames) in named_later {
        let key = (path.to_string(), build_id.as_deref().map(str::to_string));
        if !replaced.insert((key.clone(), offset)) {
            continue;
        }
        if let Some(kept) = hit.get_mut(&key).and_then(|h| h.get_mut(&offset)) {
            *kept = frames.iter().map(EmbeddedFrame::from).collect();
        }
    }
    drop(replaced);
    // What the DWARF did not name either is dropped, as the walk drops what nothing names.
    for frames in hit.values_mut() {
        frames.retain(|_, f| !f.is_empty());
    }
    hit.retain(|_, frames| !frames.is_empty());
    for ((pid, tid, cut, keys, outermost_pending), samples) in whole_if_named {
        let frames = |id| symbolizer.frames_later(id).filter(|f| !f.is_empty());
        let named = keys.iter().all(|&id| frames(id).is_some());
        let entry = !outermost_pending
            || keys
                .last()
                .and_then(|&id| frames(id))
                .and_then(|f| f.last())
                .is_some_and(|f| depth::is_thread_entry(&f.name));
        if named && entry {
            depths.now_whole(pid, tid, cut, samples);
        }
    }
    out.binaries = hit
        .into_iter()
        .map(|((path, build_id), frames)| embedded::EmbeddedBinary {
            path,
            build_id,
            frames,
        })
        .collect();
    stored?;
    if let Some(chunk) = stacks.finish() {
        store(ChunkKind::UNWOUND_STACKS, &chunk)?;
    }
    if let Some(chunk) = from_copies.finish() {
        store(ChunkKind::INTERPRETED_FRAMES, &chunk)?;
    }
    let (jit_debug, jit_debug_without_loads) = jit_debug.unwrap_or_else(|| {
        jit_hits::jit_debug_chunks(&all(), Some(&hits), &loads_left_out, rewritten)
    });
    for payload in jit_debug {
        store(ChunkKind::JIT_DEBUG, &payload)?;
    }
    let payload = serde_json::to_vec(&out)
        .map_err(|e| crate::Error::Other(format!("embedded symbols: {e}")))?;
    // Names and paths repeat: compressed they take about a tenth.
    match zstd::bulk::compress(&payload, SYMBOLS_ZSTD_LEVEL) {
        Ok(frame) => store(ChunkKind::SYMBOLS_ZSTD, &frame)?,
        Err(_) => store(ChunkKind::SYMBOLS, &payload)?,
    }
    // `jprof record` embeds just before it exits: freeing what is left piece by piece would take
    // milliseconds that the exit does at once.
    if exiting {
        std::mem::forget((binaries, symbolizer, out));
    }
    Ok(StackFacts {
        coverage,
        depth_lines: depth_lines(recording, &depths).collect(),
        leave_out: LoadsToLeaveOut {
            loads: loads_left_out,
            jit_debug: jit_debug_without_loads,
        },
    })
}
