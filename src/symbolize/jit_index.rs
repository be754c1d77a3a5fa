//! The time-aware JIT index: which JIT code was at an address at a given time. Built from the
//! side files stored in a recording (jitdump, perf maps), with every timestamp on the sample
//! clock. Code loaded, moved and replaced at known times, so a reused address resolves to the
//! code that was there when the sample was taken.

use std::collections::hash_map::Entry;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::foreign_file::Owner;
use crate::format::j9::{self, InlineFrame, LookupError};
use crate::format::jitdump::{self, DebugEntry, DebugInfo2, J9Metadata, RecordBody, TierKind};
use crate::format::mlpd;
use crate::format::perf_map;
use crate::format::recording::SideKind;
use crate::profile::{Frame, FrameKind, Tier, TierClass};
use crate::recording::Recording;
use crate::recording::StoredSide;
use crate::symbolize::jit_unwind::JitUnwind;
use crate::timeline::ClockConversion;

/// Line and inline information of one code body.
#[derive(Debug, Default)]
pub struct JitDebug {
    /// DEBUG_INFO entries, sorted by address (absolute, bias removed).
    pub(crate) lines: Vec<DebugEntry>,
    /// SAMPLY_DEBUG_INFO2: inline tree and line table, when the producer wrote one.
    pub(crate) info2: Option<DebugInfo2>,
    /// OpenJ9 metadata (JPROF_J9_METADATA): inline chains with bytecode indexes.
    pub(crate) j9: Option<J9Body>,
}

/// A decoded OpenJ9 body and the names of its methods.
#[derive(Debug)]
pub struct J9Body {
    pub(crate) metadata: j9::Metadata,
    pub(crate) names: j9::MethodNames,
}

impl J9Body {
    /// The body's cold code (start, size), when it has some.
    fn cold_code(&self) -> Option<(u64, u64)> {
        let h = &self.metadata.header;
        (h.start_cold_pc != 0 && h.end_pc > h.start_cold_pc)
            .then(|| (h.start_cold_pc, h.end_pc - h.start_cold_pc))
    }

    /// The inline chain at `addr`, innermost first; what was walked before an error in the
    /// metadata, or nothing when no map covers `addr`.
    pub fn chain(&self, addr: u64) -> Vec<InlineFrame> {
        match self.metadata.lookup(addr, &self.names) {
            Ok(frames) => frames,
            Err(LookupError::BadCallerIndex { partial, .. })
            | Err(LookupError::CallerCycle { partial, .. }) => partial,
            Err(_) => Vec::new(),
        }
    }
}

/// The class of an OpenJ9 perf-map hotness level. `noOpt` bodies are compiled without
/// optimization, like a baseline tier; `cold` and up run the optimizer. The label may carry
/// `, FSD` (full-speed debug).
fn openj9_tier_class(label: &str) -> TierClass {
    let level = label.split(',').next().unwrap_or(label).trim();
    if level.eq_ignore_ascii_case("noOpt") {
        TierClass::Baseline
    } else {
        TierClass::Optimized
    }
}

/// `pkg/Class.method(Sig)Ret` (OpenJ9) → `pkg.Class.method`, like the agent names bodies.
pub fn java_readable(name: &str) -> String {
    if name.starts_with('[') {
        return name.to_string();
    }
    name.split('(').next().unwrap_or(name).replace('/', ".")
}

/// One body of JIT code, valid on `[start, start + size)` from `from` until `until`.
#[derive(Debug, Clone)]
pub struct JitCode {
    /// The name frames in this code get.
    pub name: String,
    /// Address of its first byte.
    pub start: u64,
    /// Length in bytes.
    pub size: u64,
    /// Sample-clock time it appeared.
    pub from: u64,
    /// Sample-clock time it was replaced, moved or unloaded.
    pub until: Option<u64>,
    /// The JIT tier it was compiled at, when the runtime said.
    pub tier: Option<Tier>,
    /// Lines and inline frames, when the producer wrote them.
    pub debug: Option<Arc<JitDebug>>,
    /// The side file it came from (for the frame's module).
    pub source: Arc<str>,
    /// jitdump beats perf map when both name an address.
    pub from_jitdump: bool,
    /// The body's unwind table (JIT_CODE_UNWINDING_INFO), for DWARF-mode unwinding.
    pub unwind: Option<Arc<JitUnwind>>,
    /// The jitdump CODE_LOAD record it came from (moved code keeps its load's).
    pub origin: Option<CodeOrigin>,
}

/// Which CODE_LOAD record of which jitdump a body came from: what its deferred line and inline
/// tables are keyed by (`format::recording::JitDebug`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CodeOrigin {
    /// The jitdump's path, as the recording's side pieces name it.
    pub path: Arc<str>,
    /// The CODE_LOAD's position among the file's CODE_LOAD records, from 0.
    pub ordinal: u64,
}

pub use crate::recording::DeferredDebug;

impl JitCode {
    fn live_at(&self, t: u64) -> bool {
        self.from <= t && self.until.is_none_or(|u| t < u)
    }

    fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr - self.start < self.size
    }
}

/// The name Mono's `--jitmap` perf map gives code it cannot name.
const UNNAMED_PERF_MAP: &str = "(null)";

/// The largest body [`ProcessCode`] keeps among the small live ones (a compiled method is a
/// few hundred bytes to some KiB).
const SMALL_BODY: u64 = 16 * 1024;

/// How a finished index files bodies for lookups, by size: (granule bits, largest body) — a
/// body of up to 16 KiB under each 1 KiB granule it covers, one of up to 64 MiB under each
/// 4 MiB granule, so no body takes more than 17 entries (a side file's sizes are its
/// writer's word). Larger ones are looked at by every lookup: a process has a few.
const FILINGS: [(u32, u64); 2] = [(10, 16 << 10), (22, 64 << 20)];

/// Per process: code bodies sorted by start address.
#[derive(Debug, Default)]
struct ProcessCode {
    code: Vec<JitCode>,
    max_size: u64,
    /// Once finished, per [`FILINGS`] entry: (granule, index into `code`) for every granule
    /// each body of that size covers, sorted by granule, then as [`ProcessCode::best`] ranks
    /// (jitdump or not, load time, index), so a lookup reads only the bodies that covered its
    /// address's granule around its time. Walking back over every body that starts within
    /// the largest body's size of the address grew with the run: a JVM that unloads classes
    /// reuses the same code cache addresses for thousands of bodies over minutes.
    granules: [Vec<(u64, u32)>; FILINGS.len()],
    /// Once finished: the bodies larger than any filing takes, looked at by every lookup.
    large: Vec<u32>,
    /// How many bodies `granules` and `large` were built for (`code.len()` once finished).
    indexed: usize,
    /// While loading: indices into `code` of the bodies not yet ended, by start address, so
    /// a load looks only at bodies that can overlap it instead of at every earlier one; bodies
    /// of up to [`SMALL_BODY`] bytes apart from larger ones, so a JVM's few large buffers
    /// (hundreds of KiB) do not widen every load's look back to their size.
    live: BTreeMap<u64, Vec<usize>>,
    live_large: BTreeMap<u64, Vec<usize>>,
    /// JPROF_METHOD_NAMES: VM method address → (sample-clock time named, name), its first
    /// naming; `renamed` holds the later ones.
    methods: rustc_hash::FxHashMap<u64, (u64, Arc<str>)>,
    /// VM methods named again (an address reused after a class was unloaded), in the order
    /// named: few, so the tens of thousands named once cost no list each.
    renamed: rustc_hash::FxHashMap<u64, Vec<(u64, Arc<str>)>>,
}

/// Every JIT code body of every process in a recording, each with the sample-clock interval it
/// was valid in.
#[derive(Debug, Default)]
pub struct JitIndex {
    processes: BTreeMap<u32, ProcessCode>,
    /// Problems met while reading the side files (for the report's notes).
    pub notes: Vec<String>,
}

/// The readable name and tier of a runtime's code name.
pub fn readable_name(raw: &str) -> (String, Option<Tier>) {
    // V8: "JS:*fn file:line:col" — the marker after "JS:" is the tier.
    if let Some((marker, _)) = crate::profile::names::v8_marker(raw) {
        let tier = match marker.tier {
            Some('~') => Some((TierClass::Interpreted, "Ignition (interpreted)")),
            Some('^') => Some((TierClass::Baseline, "Sparkplug (baseline)")),
            Some('+') => Some((TierClass::Optimized, "Maglev (optimized")),
            Some('*') => Some((TierClass::Optimized, "Turbofan (optimized")),
            _ => None,
        };
        let tier = tier.map(|(class, label)| {
            if class != TierClass::Optimized {
                return Tier::new(class, label);
            }
            // The optimizing tiers: "Turbofan (optimized, OSR, context-specialized)".
            let mut label = label.to_string();
            if marker.osr {
                label.push_str(", OSR");
            }
            if marker.context_specialized {
                label.push_str(", context-specialized");
            }
            label.push(')');
            Tier::new(class, label)
        });
        return (raw.to_string(), tier);
    }
    // HotSpot via JVMTI: "Lpkg/Class;method(Sig)Ret" → "pkg.Class.method".
    if let Some(rest) = raw.strip_prefix('L') {
        if let Some((class, method)) = rest.split_once(';') {
            if !class.is_empty() && !class.contains(' ') {
                let method = method.split('(').next().unwrap_or(method);
                return (format!("{}.{method}", class.replace('/', ".")), None);
            }
        }
    }
    (raw.to_string(), None)
}

/// A jitdump JIT_TIER record's tier: shown as `NAME (class)`, or the class alone.
fn record_tier(kind: TierKind, name: &str) -> Tier {
    let (class, word) = match kind {
        TierKind::INTERPRETER => (TierClass::Interpreted, "interpreter"),
        TierKind::BASELINE => (TierClass::Baseline, "baseline"),
        TierKind::OPTIMIZED => (TierClass::Optimized, "optimized"),
        TierKind::STUB => (TierClass::Stub, "stub"),
        _ => (TierClass::Unknown, "unknown tier"),
    };
    if name.is_empty() {
        Tier::new(class, word)
    } else {
        Tier::new(class, format!("{name} ({word})"))
    }
}

/// Decodes a JPROF_J9_METADATA record, noting what could not be read.
fn decode_j9(notes: &mut Vec<String>, path: &str, md: &J9Metadata) -> Option<J9Body> {
    match md.decode() {
        Ok(metadata) => {
            for p in metadata.problems.iter().take(3) {
                notes.push(format!(
                    "{path}: OpenJ9 metadata of {:#x}: {}: {}",
                    md.code_addr, p.section, p.error
                ));
            }
            Some(J9Body {
                metadata,
                names: md.names(),
            })
        }
        Err(e) => {
            notes.push(format!(
                "{path}: OpenJ9 metadata of {:#x} not decodable: {e}",
                md.code_addr
            ));
            None
        }
    }
}

/// A DEBUG_INFO's entries as lookups read them for the body at `start` (`size` bytes): the
/// producer's shift taken off ([`debug_bias`]), sorted by address.
pub(crate) fn placed_lines(mut lines: Vec<DebugEntry>, start: u64, size: u64) -> Vec<DebugEntry> {
    let bias = debug_bias(&lines, start, size);
    for e in &mut lines {
        e.addr = e.addr.wrapping_sub(bias);
    }
    lines.sort_by_key(|e| e.addr);
    lines
}

/// V8 writes DEBUG_INFO addresses shifted by the ELF header perf inject will put in front of the
/// code; other producers write real addresses. Find the shift that puts the entries inside the
/// code, preferring none.
pub(crate) fn debug_bias(entries: &[DebugEntry], start: u64, size: u64) -> u64 {
    let inside = |bias: u64| {
        entries.iter().all(|e| {
            e.addr.wrapping_sub(bias) >= start && e.addr.wrapping_sub(bias) - start <= size
        })
    };
    [0u64, 0x40, 0x80]
        .into_iter()
        .find(|&b| inside(b))
        .unwrap_or(0)
}

/// What a jitdump said of the next body before its CODE_LOAD: the records that precede a load
/// (lines, inline tree, OpenJ9 metadata, tier, unwind table), and tiers sent for an address.
#[derive(Default)]
struct BeforeLoad {
    lines: Option<Vec<DebugEntry>>,
    info2: Option<DebugInfo2>,
    j9: Option<J9Metadata>,
    tier: Option<Tier>,
    unwind: Option<Vec<u8>>,
    tiers_by_addr: BTreeMap<u64, Tier>,
}

impl BeforeLoad {
    /// The body's line and inline information, with the decoded OpenJ9 metadata; None when
    /// there is none of the three.
    fn debug(&mut self, start: u64, size: u64, j9: Option<J9Body>) -> Option<Arc<JitDebug>> {
        let (lines, info2) = (self.lines.take(), self.info2.take());
        if lines.is_none() && info2.is_none() && j9.is_none() {
            return None;
        }
        let lines = placed_lines(lines.unwrap_or_default(), start, size);
        Some(Arc::new(JitDebug { lines, info2, j9 }))
    }

    /// The tier sent for the next load, else for the body at `start`.
    fn tier_of(&mut self, start: u64) -> Option<Tier> {
        self.tier
            .take()
            .or_else(|| self.tiers_by_addr.remove(&start))
    }
}

impl ProcessCode {
    /// Adds a body at time `t`, ending every live body it overlaps (the address was reused).
    fn load(&mut self, code: JitCode) {
        let (s, e) = (code.start, code.start.saturating_add(code.size));
        let Self {
            code: bodies,
            live,
            live_large,
            max_size,
            ..
        } = self;
        // A body starting before `s - its size` ends before `s`.
        for (live, largest) in [(live, SMALL_BODY), (live_large, *max_size)] {
            let lowest = s.saturating_sub(largest);
            let mut emptied = Vec::new();
            for (&start, indices) in live.range_mut(lowest..e) {
                indices.retain(|&i| {
                    let old = &mut bodies[i];
                    // Ended since by an unload or a move.
                    if old.until.is_some() {
                        return false;
                    }
                    let overlaps = old.start < e && s < old.start.saturating_add(old.size);
                    let ends =
                        overlaps && old.from <= code.from && old.from_jitdump <= code.from_jitdump;
                    if ends {
                        old.until = Some(code.from);
                    }
                    !ends
                });
                if indices.is_empty() {
                    emptied.push(start);
                }
            }
            for start in emptied {
                live.remove(&start);
            }
        }
        self.max_size = self.max_size.max(code.size);
        if code.until.is_none() {
            let index = self.code.len();
            self.live_of(code.size)
                .entry(code.start)
                .or_default()
                .push(index);
        }
        self.code.push(code);
    }

    /// The live set a body of `size` bytes belongs to.
    fn live_of(&mut self, size: u64) -> &mut BTreeMap<u64, Vec<usize>> {
        if size <= SMALL_BODY {
            &mut self.live
        } else {
            &mut self.live_large
        }
    }

    /// Adds a body from a jitdump; an OpenJ9 body's cold code (`cold`: start, size), which
    /// lies apart from its warm code, as a body of its own.
    fn load_with_cold_part(&mut self, body: JitCode, cold: Option<(u64, u64)>) {
        if let Some((start, size)) = cold {
            self.load(JitCode {
                start,
                size,
                // The table (if any) describes the warm code.
                unwind: None,
                ..body.clone()
            });
        }
        self.load(body);
    }

    /// OpenJ9 reports a body's cold part as a CODE_LOAD of its own, with no metadata of its own
    /// (or the warm part's again): it keeps the body's metadata, which the warm CODE_LOAD
    /// already placed at this range.
    fn warm_part_debug(&self, start: u64, size: u64, name: &str) -> Option<Arc<JitDebug>> {
        // Asked for every body a jitdump gives no tables for (most of a HotSpot run's, whose
        // tables wait in JIT_DEBUG): through the live sets, not a walk over every body.
        let warm = self.last_live_at(start, |c| {
            c.size == size && c.name == name && c.debug.as_ref().is_some_and(|d| d.j9.is_some())
        })?;
        self.code[warm].debug.clone()
    }

    /// A CODE_UNLOAD at time `t`: the live body at `start` ends.
    fn unload(&mut self, start: u64, t: u64) {
        if let Some(gone) = self.last_live_at(start, |c| c.from <= t) {
            self.code[gone].until = Some(t);
        }
    }

    /// A CODE_MOVE at time `t`: the live body at `old` ends, and goes on at `new` (`size`).
    fn relocate(&mut self, old: u64, new: u64, size: u64, t: u64) {
        if let Some(i) = self.last_live_at(old, |_| true) {
            let old = &mut self.code[i];
            old.until = Some(t);
            let mut moved = old.clone();
            moved.start = new;
            moved.size = size;
            moved.from = t;
            moved.until = None;
            self.load(moved);
        }
    }

    /// Sorts the bodies by address and files them for lookups.
    fn finish(&mut self) {
        self.code.sort_by_key(|c| (c.start, c.from));
        // Indices moved with the sort; another side file of this process may load more.
        self.live.clear();
        self.live_large.clear();
        for i in 0..self.code.len() {
            let (start, size, ended) = {
                let c = &self.code[i];
                (c.start, c.size, c.until.is_some())
            };
            if !ended {
                self.live_of(size).entry(start).or_default().push(i);
            }
        }
        self.granules.iter_mut().for_each(Vec::clear);
        self.large.clear();
        for (i, c) in self.code.iter().enumerate() {
            let Ok(index) = u32::try_from(i) else { break };
            if c.size == 0 {
                continue;
            }
            match FILINGS.iter().position(|&(_, largest)| c.size <= largest) {
                Some(filing) => {
                    let bits = FILINGS[filing].0;
                    let last = c.start.saturating_add(c.size - 1) >> bits;
                    for granule in c.start >> bits..=last {
                        self.granules[filing].push((granule, index));
                    }
                }
                None => self.large.push(index),
            }
        }
        let code = &self.code;
        for filed in &mut self.granules {
            filed.sort_unstable_by_key(|&(granule, i)| {
                let c = &code[i as usize];
                (granule, c.from_jitdump, c.from, i)
            });
        }
        self.indexed = self.code.len();
    }

    /// The index into `code` of the body loaded last at `start` that has not ended and that
    /// `accept`s: the live sets hold every such body, so no walk over all the code is needed.
    fn last_live_at(&self, start: u64, accept: impl Fn(&JitCode) -> bool) -> Option<usize> {
        [&self.live, &self.live_large]
            .into_iter()
            .filter_map(|live| live.get(&start))
            .flatten()
            .copied()
            .filter(|&i| self.code[i].until.is_none() && accept(&self.code[i]))
            .max()
    }

    fn lookup(&self, addr: u64, t: u64) -> Option<&JitCode> {
        if self.indexed == self.code.len() {
            let filed = FILINGS
                .iter()
                .zip(&self.granules)
                .flat_map(|(&(bits, _), filed)| {
                    let granule = addr >> bits;
                    let first = filed.partition_point(|&(g, _)| g < granule);
                    let rest = &filed[first..];
                    let filed = &rest[..rest.partition_point(|&(g, _)| g == granule)];
                    self.ranked_around(filed, addr, t)
                });
            let candidates = filed.chain(self.large.iter().map(|&i| i as usize));
            self.best(candidates, addr, t)
        } else {
            // Not finished (a side file is being added): every body within the largest's size.
            let end = self.code.partition_point(|c| c.start <= addr);
            let lowest = addr.saturating_sub(self.max_size);
            let candidates = (0..end).rev().take_while(|&i| self.code[i].start >= lowest);
            self.best(candidates, addr, t)
        }
    }

    /// Of one granule's bodies (`filed`, ranked as `granules` is): for jitdump bodies and for
    /// the others, the latest loaded by `t` that contains `addr` and is live then, and the
    /// first loaded after `t` that contains it (of those loaded at that time, the last
    /// index): what [`ProcessCode::best`] would pick of them all. The walk from `t` stops at
    /// the first that fits, where the body live at an address is nearly always one of the
    /// last few loaded in its granule.
    fn ranked_around<'a>(
        &'a self,
        filed: &'a [(u64, u32)],
        addr: u64,
        t: u64,
    ) -> impl Iterator<Item = usize> + 'a {
        let body = move |&(_, i): &(u64, u32)| &self.code[i as usize];
        [true, false].into_iter().flat_map(move |jitdump| {
            let kind = {
                let first = filed.partition_point(|e| !body(e).from_jitdump & jitdump);
                let rest = &filed[first..];
                &rest[..rest.partition_point(|e| body(e).from_jitdump == jitdump)]
            };
            let split = kind.partition_point(|e| body(e).from <= t);
            let (by_t, after_t) = kind.split_at(split);
            let live = by_t
                .iter()
                .rev()
                .find(|e| body(e).contains(addr) && body(e).live_at(t));
            let mut later = after_t.iter().filter(|e| body(e).contains(addr));
            let first_later = later.next();
            let last_of_its_time = first_later.map(|f| {
                later
                    .take_while(|e| body(e).from == body(f).from)
                    .last()
                    .unwrap_or(f)
            });
            live.into_iter()
                .chain(last_of_its_time)
                .map(|&(_, i)| i as usize)
        })
    }

    /// Of the `candidates` (indices into `code`) that contain `addr`: the body live at `t`
    /// (a jitdump's before a perf map's, then the latest loaded), else the first loaded
    /// after `t`; equal ones go to the later index.
    fn best(&self, candidates: impl Iterator<Item = usize>, addr: u64, t: u64) -> Option<&JitCode> {
        let mut best_live: Option<(bool, u64, usize)> = None;
        let mut best_later: Option<(bool, std::cmp::Reverse<u64>, usize)> = None;
        for i in candidates {
            let c = &self.code[i];
            if !c.contains(addr) {
                continue;
            }
            if c.live_at(t) {
                best_live = best_live.max(Some((c.from_jitdump, c.from, i)));
            } else if c.from > t {
                best_later = best_later.max(Some((c.from_jitdump, std::cmp::Reverse(c.from), i)));
            }
        }
        let best_live = best_live.map(|(_, _, i)| &self.code[i]);
        let best_later = best_later.map(|(_, _, i)| &self.code[i]);
        // Mono's perf map says `(null)` for code it could not name; a timed record (the .mlpd)
        // that names the address a little later knows better.
        if best_live.is_some_and(|c| !c.from_jitdump && c.name == UNNAMED_PERF_MAP)
            && best_later.is_some_and(|c| c.from_jitdump)
        {
            return best_later;
        }
        // A sample may land in code a little before its load record was stamped: then the
        // first body loaded there afterwards is the best guess.
        best_live.or(best_later)
    }
}

impl JitIndex {
    /// Builds the index from the recording's side-file pieces (SIDE_FILE, SIDE_FILE_ZSTD) and
    /// the deferred jitdump records its JIT_DEBUG chunks keep.
    pub fn from_recording(recording: &Recording) -> Self {
        Self::with_deferred(recording, &DeferredDebug::new())
    }

    /// [`JitIndex::from_recording`] with more deferred records (`jprof record`'s, before it
    /// writes the JIT_DEBUG chunks).
    pub fn with_deferred(recording: &Recording, more: &DeferredDebug) -> Self {
        let clock = recording.clock.clone().unwrap_or_default();
        let mut notes = Vec::new();
        let mut deferred = recording.jit_debug(&mut notes);
        for (file, groups) in more {
            let into = deferred.entry(file.clone()).or_default();
            for (ordinal, records) in groups {
                into.entry(*ordinal).or_default().extend_from_slice(records);
            }
        }
        // Reassemble each side file from its pieces (they are stored in file order).
        let mut files: BTreeMap<(SideKind, u32, String), Vec<StoredSide<'_>>> = BTreeMap::new();
        let mut index = JitIndex {
            notes,
            ..JitIndex::default()
        };
        for piece in recording.side_pieces() {
            match piece {
                Ok(p) => files
                    .entry((p.piece.kind, p.piece.pid, p.piece.path.to_string()))
                    .or_default()
                    .push(p),
                Err(e) => index.notes.push(format!(
                    "{}: side file piece unreadable: {e}",
                    recording.path.display()
                )),
            }
        }
        for ((kind, pid, path), pieces) in files {
            let mut bytes = Vec::new();
            let mut stamps = Vec::new();
            // The file bytes the pieces stand for, and how to tell them on disk.
            let mut covered = 0u64;
            let mut checks = Vec::new();
            for p in &pieces {
                let offset = p.piece.offset;
                if offset != covered {
                    index.notes.push(format!(
                        "{path}: side file pieces are not contiguous at {offset}"
                    ));
                    break;
                }
                stamps.push((bytes.len() as u64, p.piece.read_at));
                let crc = p.file_crc.unwrap_or_else(|| crc32fast::hash(&p.data));
                checks.push((offset, p.file_len, crc));
                bytes.extend_from_slice(&p.data);
                covered += p.file_len;
            }
            if kind == SideKind::JITDUMP {
                if let Some(groups) = deferred.get(&(pid, path.clone())) {
                    if let Ok(header) = jitdump::parse_header(&bytes) {
                        bytes = jitdump::with_groups(&bytes, &header, groups);
                    }
                }
                index.complete_from_disk(&path, &mut bytes, &checks);
            }
            match kind {
                SideKind::JITDUMP => index.add_jitdump(pid, &path, &bytes, &clock),
                SideKind::PERF_MAP => index.add_perf_map(pid, &path, &bytes, &stamps),
                SideKind::MLPD => index.add_mlpd(pid, &path, &bytes, &clock),
                _ => {}
            }
        }
        index
    }

    /// Runtimes buffer their jitdump writes (V8 flushes 2 MB at a time), so a recording of a
    /// process that outlived it may hold only a prefix of records that were already stamped.
    /// When the file on disk still holds the stored pieces (`checks`: file offset, length and
    /// CRC-32 of each), the rest is read from there; every record carries its own timestamp,
    /// so later records cannot misplace earlier samples.
    fn complete_from_disk(&mut self, path: &str, bytes: &mut Vec<u8>, checks: &[(u64, u64, u32)]) {
        // Any owner: the file is used only when it extends the bytes the recording holds. Never
        // through a link, never a FIFO or device, never more than 4 GiB.
        let Ok(disk) =
            crate::foreign_file::read(std::path::Path::new(path), Owner::Anyone, 4 << 30)
        else {
            return;
        };
        let covered = checks.last().map_or(0, |&(offset, len, _)| offset + len) as usize;
        let same = checks.iter().all(|&(offset, len, crc)| {
            disk.get(offset as usize..(offset + len) as usize)
                .is_some_and(|b| crc32fast::hash(b) == crc)
        });
        if disk.len() > covered && same {
            let added = disk.len() - covered;
            bytes.extend_from_slice(&disk[covered..]);
            self.notes.push(format!(
                "{path}: {added} bytes the runtime had not yet flushed during recording were read from disk"
            ));
        }
    }

    /// Adds one jitdump's records (`bytes` = the file from offset 0).
    pub fn add_jitdump(&mut self, pid: u32, path: &str, bytes: &[u8], clock: &ClockConversion) {
        let Some((header, records)) = self.parse_jitdump(path, bytes) else {
            return;
        };
        let tsc = header.arch_timestamp();
        if tsc && !clock.has_tsc_conversion() {
            self.notes.push(format!(
                "{path}: TSC timestamps but the recording has no TSC conversion; code is placed without time"
            ));
        }
        let to_sample = |ts: u64| -> Option<u64> {
            if tsc {
                clock.tsc_to_sample(ts)
            } else {
                Some(clock.monotonic_to_sample(ts))
            }
        };
        let source: Arc<str> = Arc::from(path.rsplit('/').next().unwrap_or(path));
        let full_path: Arc<str> = Arc::from(path);
        let mut loads = 0u64;
        let process = self.processes.entry(pid).or_default();
        let mut before = BeforeLoad::default();
        for r in records {
            let t = to_sample(r.timestamp).unwrap_or(0);
            match r.body {
                RecordBody::DebugInfo { entries, .. } => before.lines = Some(entries),
                RecordBody::DebugInfo2(info) => before.info2 = Some(info),
                RecordBody::UnwindingInfo { eh_frame, .. } => before.unwind = Some(eh_frame),
                RecordBody::J9Metadata(md) => before.j9 = Some(md),
                RecordBody::JitTier(tier) => {
                    let name = record_tier(tier.kind, &tier.name);
                    if tier.code_addr == 0 {
                        before.tier = Some(name);
                    } else {
                        before.tiers_by_addr.insert(tier.code_addr, name);
                    }
                }
                RecordBody::MethodNames(list) => {
                    process.methods.reserve(list.len());
                    for (method, name) in list {
                        let named = (t, Arc::from(name));
                        match process.methods.entry(method) {
                            Entry::Vacant(first) => {
                                first.insert(named);
                            }
                            Entry::Occupied(_) => {
                                process.renamed.entry(method).or_default().push(named)
                            }
                        }
                    }
                }
                RecordBody::CodeLoad {
                    code_addr,
                    code_size,
                    name,
                    ..
                } => {
                    let (name, name_tier) = readable_name(&name);
                    // A body's metadata describes the code from its startPC; the same metadata
                    // sent again with the body's cold part is not the cold part's own.
                    let j9 = before
                        .j9
                        .take()
                        .filter(|md| md.code_addr == code_addr)
                        .and_then(|md| decode_j9(&mut self.notes, path, &md))
                        .filter(|b| b.metadata.header.start_pc == code_addr);
                    let cold = j9.as_ref().and_then(J9Body::cold_code);
                    let debug = before
                        .debug(code_addr, code_size, j9)
                        .or_else(|| process.warm_part_debug(code_addr, code_size, &name));
                    let tier = before.tier_of(code_addr).or(name_tier);
                    let unwind = before
                        .unwind
                        .take()
                        .and_then(|t| JitUnwind::place(&t, code_size))
                        .map(Arc::new);
                    process.load_with_cold_part(
                        JitCode {
                            name,
                            start: code_addr,
                            size: code_size,
                            from: t,
                            until: None,
                            tier,
                            debug,
                            source: source.clone(),
                            from_jitdump: true,
                            unwind,
                            origin: Some(CodeOrigin {
                                path: full_path.clone(),
                                ordinal: loads,
                            }),
                        },
                        cold,
                    );
                    loads += 1;
                }
                RecordBody::CodeUnload { code_addr, .. } => process.unload(code_addr, t),
                RecordBody::CodeMove {
                    old_code_addr,
                    new_code_addr,
                    code_size,
                    ..
                } => process.relocate(old_code_addr, new_code_addr, code_size, t),
                _ => {}
            }
        }
        process.finish();
    }

    /// A jitdump's header and the records up to the first damaged one, with notes on what was
    /// wrong; None when the header itself is unreadable.
    fn parse_jitdump(
        &mut self,
        path: &str,
        bytes: &[u8],
    ) -> Option<(jitdump::Header, Vec<jitdump::Record>)> {
        let header = match jitdump::parse_header(bytes) {
            Ok(h) => h,
            Err(e) => {
                self.notes.push(format!("{path}: {e}"));
                return None;
            }
        };
        if let Some(note) = header.size_note() {
            self.notes.push(format!("{path}: {note}"));
        }
        let batch = jitdump::parse_records(bytes, &header, 0);
        if let Some(e) = &batch.error {
            self.notes
                .push(format!("{path}: {e}; the records before it were used"));
        }
        Some((header, batch.records))
    }

    /// Adds the code a Mono log profiler file describes: TYPE_JIT code ranges (methods) and
    /// JIT helpers/trampolines, placed at their event times (CLOCK_MONOTONIC).
    pub fn add_mlpd(&mut self, pid: u32, path: &str, bytes: &[u8], clock: &ClockConversion) {
        let source: Arc<str> = Arc::from(path.rsplit('/').next().unwrap_or(path));
        let mut loads = Vec::new();
        let decoded =
            mlpd::decode_all(bytes, &mut |_: &mlpd::BufferHeader, e: &mlpd::Event<'_>| {
                let (name, start, size) = match &e.kind {
                    mlpd::EventKind::Jit {
                        name, code, size, ..
                    } => (name.to_string(), *code, *size),
                    mlpd::EventKind::JitHelper {
                        kind,
                        address,
                        size,
                        name,
                    } => {
                        let name = match name {
                            Some(n) => format!("[mono] {n}"),
                            None => format!("[mono] {}", mlpd::code_buffer_name(*kind)),
                        };
                        (name, *address, *size)
                    }
                    _ => return,
                };
                if start != 0 && size != 0 {
                    loads.push((clock.monotonic_to_sample(e.time), name, start, size));
                }
            });
        match decoded {
            Ok(d) => {
                for p in d.problems().iter().take(3) {
                    self.notes.push(format!(
                        "{path}: {}; the rest of that buffer was skipped",
                        p.error
                    ));
                }
            }
            Err(e) => self.notes.push(format!("{path}: {e}")),
        }
        // Buffers of different threads interleave; load in time order so reuse ends the right code.
        loads.sort_by_key(|l| l.0);
        let process = self.processes.entry(pid).or_default();
        for (from, name, start, size) in loads {
            process.load(JitCode {
                name,
                start,
                size,
                from,
                until: None,
                tier: None,
                debug: None,
                source: source.clone(),
                from_jitdump: true,
                unwind: None,
                origin: None,
            });
        }
        process.finish();
    }

    /// Adds a perf map; each line is stamped with the time jprof first read it.
    pub fn add_perf_map(&mut self, pid: u32, path: &str, bytes: &[u8], stamps: &[(u64, u64)]) {
        let batch = perf_map::parse(bytes, 0);
        for bad in batch.bad_lines.iter().take(3) {
            self.notes.push(format!("{path}: {bad}"));
        }
        let source: Arc<str> = Arc::from(path.rsplit('/').next().unwrap_or(path));
        let process = self.processes.entry(pid).or_default();
        for e in batch.entries {
            let seen = stamps
                .iter()
                .rev()
                .find(|(off, _)| *off <= e.offset as u64)
                .map_or(0, |s| s.1);
            let (name, tier) = match e.tier {
                // OpenJ9's perfTool map: `pkg/Class.method(Sig)Ret` at a hotness.
                Some(tier) => (
                    java_readable(&e.name),
                    Some(Tier::new(openj9_tier_class(&tier), tier)),
                ),
                None => readable_name(&e.name),
            };
            process.load(JitCode {
                name,
                start: e.start,
                size: e.size,
                from: seen,
                until: None,
                tier,
                debug: None,
                source: source.clone(),
                from_jitdump: false,
                unwind: None,
                origin: None,
            });
        }
        process.finish();
    }

    /// The CODE_LOADs of each jitdump (by process and path: the loads' ordinals) a recording
    /// can leave out without a report reading otherwise. Timed bodies that share an address or
    /// a start, or come from one load (moved, or an OpenJ9 body's cold part), are taken
    /// together: a load, move or unload ends or finds only bodies that share addresses or its
    /// start, a JIT_TIER by address goes to a load at that start, and an OpenJ9 cold part
    /// takes the debug of the warm part at its range. So leaving out every load of such a
    /// group changes no other body, and a lookup that picked none of them picks the same
    /// without them: a group is left out when no sample's frame was found in it (`hit`) and
    /// all of it came from jitdump loads. (Time is not weighed: a runtime's records are not
    /// always in time order, and the index follows file order.) Perf-map bodies do not count:
    /// they are placed after every jitdump's and never end a timed body.
    pub fn loads_to_leave_out(
        &self,
        hit: impl Fn(u32, &CodeOrigin) -> bool,
    ) -> BTreeMap<(u32, String), std::collections::BTreeSet<u64>> {
        let mut out: BTreeMap<(u32, String), std::collections::BTreeSet<u64>> = BTreeMap::new();
        for (&pid, process) in &self.processes {
            let code = &process.code;
            // Union-find over the bodies: each group's root.
            let mut parent: Vec<usize> = (0..code.len()).collect();
            fn root(parent: &mut [usize], mut i: usize) -> usize {
                while parent[i] != i {
                    parent[i] = parent[parent[i]];
                    i = parent[i];
                }
                i
            }
            let join = |parent: &mut Vec<usize>, a: usize, b: usize| {
                let (ra, rb) = (root(parent, a), root(parent, b));
                parent[ra.max(rb)] = ra.min(rb);
            };
            let mut first_of_load: rustc_hash::FxHashMap<&CodeOrigin, usize> = Default::default();
            // Sorted by start (`finish`): a body shares addresses only with the ones after it
            // that start before it ends, or with earlier ones, which looked at it already.
            for (i, a) in code.iter().enumerate().filter(|(_, c)| c.from_jitdump) {
                if let Some(origin) = &a.origin {
                    let first = *first_of_load.entry(origin).or_insert(i);
                    join(&mut parent, first, i);
                }
                let end = a.start.saturating_add(a.size);
                let after = code[i + 1..]
                    .iter()
                    .take_while(|b| b.start < end || b.start == a.start);
                for (j, _) in after.enumerate().filter(|(_, b)| b.from_jitdump) {
                    join(&mut parent, i, i + 1 + j);
                }
            }
            // Groups that must stay: one hit, or one with a body no jitdump load placed.
            let mut kept = vec![false; code.len()];
            for (i, c) in code.iter().enumerate() {
                let stays = match &c.origin {
                    Some(origin) => hit(pid, origin),
                    None => c.from_jitdump,
                };
                if stays {
                    let r = root(&mut parent, i);
                    kept[r] = true;
                }
            }
            for (i, c) in code.iter().enumerate() {
                let Some(origin) = &c.origin else { continue };
                if !kept[root(&mut parent, i)] {
                    out.entry((pid, origin.path.to_string()))
                        .or_default()
                        .insert(origin.ordinal);
                }
            }
        }
        out
    }

    /// The OpenJ9 inline chain at `addr` (innermost first), when the code there has
    /// JPROF_J9_METADATA.
    pub fn j9_chain(&self, pid: u32, addr: u64, t: u64) -> Option<Vec<InlineFrame>> {
        let code = self.lookup(pid, addr, t)?;
        let body = code.debug.as_ref()?.j9.as_ref()?;
        Some(body.chain(addr))
    }

    /// Every body of code with its process, by pid then start address (for code-load markers).
    pub fn code(&self) -> impl Iterator<Item = (u32, &JitCode)> + '_ {
        self.processes
            .iter()
            .flat_map(|(&pid, p)| p.code.iter().map(move |c| (pid, c)))
    }

    /// The code at `addr` in `pid` at sample-clock time `t`.
    pub fn lookup(&self, pid: u32, addr: u64, t: u64) -> Option<&JitCode> {
        self.processes.get(&pid)?.lookup(addr, t)
    }

    /// Whether the process's runtime named its VM methods (JPROF_METHOD_NAMES).
    pub fn has_method_names(&self, pid: u32) -> bool {
        self.processes
            .get(&pid)
            .is_some_and(|p| !p.methods.is_empty())
    }

    /// The name of the VM method at `method` at time `t`: the latest naming at or before `t`
    /// (an address may name another method after its class was unloaded).
    pub fn method_name(&self, pid: u32, method: u64, t: u64) -> Option<&str> {
        let process = self.processes.get(&pid)?;
        let first = process.methods.get(&method)?;
        let renamed = process.renamed.get(&method).map_or(&[][..], Vec::as_slice);
        std::iter::once(first)
            .chain(renamed)
            .filter(|(from, _)| *from <= t)
            .max_by_key(|(from, _)| *from)
            .map(|(_, name)| &**name)
    }

    /// Frames for `addr`, innermost first: inlined functions from DEBUG_INFO2, then the body.
    /// `lines` adds file:line where the runtime gave them.
    pub fn frames(&self, pid: u32, addr: u64, t: u64) -> Option<Vec<Frame>> {
        self.lookup(pid, addr, t)
            .map(|code| Self::code_frames(code, addr))
    }

    /// Frames for `addr` inside `code` (found by [`JitIndex::lookup`]), innermost first.
    pub fn code_frames(code: &JitCode, addr: u64) -> Vec<Frame> {
        let module = Some(code.source.to_string());
        let mut frames = Vec::new();
        let offset = (addr - code.start) as u32;
        let mut outer_line = None;
        if let Some(debug) = &code.debug {
            if let Some(body) = &debug.j9 {
                // The chain ends with the compiled method itself: the body frame below.
                let chain = body.chain(addr);
                for f in chain.iter().take(chain.len().saturating_sub(1)) {
                    frames.push(Frame {
                        name: java_readable(&f.name),
                        kind: FrameKind::Inlined,
                        module: module.clone(),
                        file: None,
                        line: None,
                    });
                }
            } else if let Some(info) = &debug.info2 {
                // The deepest chain of inline calls whose ranges cover the offset. Calls are in
                // DFS order: a call's parent is the latest call one level up, and it counts only
                // if that parent (and so every ancestor) covers the offset too. The first such
                // chain wins; later siblings do not undo it.
                let mut chain: Vec<&jitdump::InlineCall2> = Vec::new();
                let mut path_covers: Vec<bool> = Vec::new();
                for call in &info.inline_calls {
                    let depth = call.depth as usize;
                    if depth > path_covers.len() {
                        continue;
                    }
                    path_covers.truncate(depth);
                    let covers = path_covers.last().is_none_or(|&c| c)
                        && call
                            .ranges
                            .iter()
                            .any(|&(s, n)| offset >= s && offset - s < n);
                    path_covers.push(covers);
                    if covers && chain.len() == depth {
                        chain.push(call);
                    }
                }
                let line = info
                    .lines
                    .iter()
                    .take_while(|l| l.code_offset <= offset)
                    .last();
                // Location inside the innermost function; each call site then gives the
                // location in its caller (the previous function on the chain, or the outer one).
                let mut location = line.map(|l| (l.file.clone(), l.line));
                for (i, call) in chain.iter().enumerate().rev() {
                    let function = info.functions.get(call.function as usize);
                    frames.push(Frame {
                        name: function.map_or_else(|| "[inlined]".to_string(), |f| f.name.clone()),
                        kind: FrameKind::Inlined,
                        module: module.clone(),
                        file: location.as_ref().and_then(|l| l.0.clone()),
                        line: location.as_ref().map(|l| l.1).filter(|&l| l > 0),
                    });
                    let caller = match i {
                        0 => info.functions.first(),
                        _ => info.functions.get(chain[i - 1].function as usize),
                    };
                    location = Some((caller.and_then(|f| f.file.clone()), call.call_line));
                }
                outer_line = location;
            } else if let Some(e) = debug.lines.iter().take_while(|e| e.addr <= addr).last() {
                // An empty file is one the producer garbled (see `format::jitdump`).
                let file = Some(e.file.clone()).filter(|f| !f.is_empty());
                outer_line = Some((file, e.line.max(0) as u32));
            }
        }
        frames.push(Frame {
            name: code.name.clone(),
            kind: FrameKind::Jit,
            module,
            file: outer_line.as_ref().and_then(|l| l.0.clone()),
            line: outer_line.as_ref().map(|l| l.1).filter(|&l| l > 0),
        });
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::jitdump_write as w;
    use proptest::prelude::*;

    /// What a side file does to a process's code, in the order it says it.
    #[derive(Debug, Clone)]
    enum Op {
        Load {
            start: u64,
            size: u64,
            jitdump: bool,
        },
        Unload {
            start: u64,
        },
        Move {
            old: u64,
            new: u64,
            size: u64,
        },
        Finish,
    }

    fn body(start: u64, size: u64, from: u64, jitdump: bool) -> JitCode {
        JitCode {
            name: format!("{start:#x}@{from}"),
            start,
            size,
            from,
            until: None,
            tier: None,
            debug: None,
            source: Arc::from("test"),
            from_jitdump: jitdump,
            unwind: None,
            origin: None,
        }
    }

    /// The walks the index replaced: every body, newest first.
    fn unload_by_walk(p: &mut ProcessCode, start: u64, t: u64) {
        if let Some(gone) = p
            .code
            .iter_mut()
            .rev()
            .find(|c| c.start == start && c.until.is_none() && c.from <= t)
        {
            gone.until = Some(t);
        }
    }

    fn move_by_walk(p: &mut ProcessCode, old: u64, new: u64, size: u64, t: u64) {
        let found = p
            .code
            .iter_mut()
            .rev()
            .find(|c| c.start == old && c.until.is_none());
        if let Some(old) = found {
            old.until = Some(t);
            let mut moved = old.clone();
            (moved.start, moved.size, moved.from, moved.until) = (new, size, t, None);
            p.load(moved);
        }
    }

    /// A lookup by looking at every body: the live one (a jitdump's first, then the latest;
    /// equal ones the later index), else the first one loaded after `t`.
    fn lookup_by_walk(p: &ProcessCode, addr: u64, t: u64) -> Option<usize> {
        let containing = || (0..p.code.len()).filter(|&i| p.code[i].contains(addr));
        let live = containing()
            .filter(|&i| p.code[i].live_at(t))
            .max_by_key(|&i| (p.code[i].from_jitdump, p.code[i].from, i));
        let later = containing()
            .filter(|&i| !p.code[i].live_at(t) && p.code[i].from > t)
            .max_by_key(|&i| (p.code[i].from_jitdump, std::cmp::Reverse(p.code[i].from), i));
        live.or(later)
    }

    fn apply(ops: &[Op], by_walk: bool) -> ProcessCode {
        let mut p = ProcessCode::default();
        for (t, op) in ops.iter().enumerate() {
            // Two at a time: bodies loaded at the same moment rank by index.
            let t = t as u64 / 2 * 10;
            match *op {
                Op::Load {
                    start,
                    size,
                    jitdump,
                } => p.load(body(start, size, t, jitdump)),
                Op::Unload { start } if by_walk => unload_by_walk(&mut p, start, t),
                Op::Unload { start } => p.unload(start, t),
                Op::Move { old, new, size } if by_walk => move_by_walk(&mut p, old, new, size, t),
                Op::Move { old, new, size } => p.relocate(old, new, size, t),
                Op::Finish => p.finish(),
            }
        }
        p.finish();
        p
    }

    /// Starts on a few hundred bytes reused again and again, some bodies over the large size.
    fn op() -> impl Strategy<Value = Op> {
        let start = (0u64..48).prop_map(|k| 0x7f00_0000_0000 + k * 96);
        let size = prop_oneof![
            8 => 1u64..3000,
            1 => Just(0u64),
            1 => FILINGS[0].1 - 4..FILINGS[0].1 + 4096,
            1 => FILINGS[1].1 - 4..FILINGS[1].1 + 4,
        ];
        prop_oneof![
            6 => (start.clone(), size.clone(), any::<bool>())
                .prop_map(|(start, size, jitdump)| Op::Load { start, size, jitdump }),
            3 => start.clone().prop_map(|start| Op::Unload { start }),
            1 => (start.clone(), start, size).prop_map(|(old, new, size)| Op::Move { old, new, size }),
            1 => Just(Op::Finish),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Unloads and moves found through the live sets end the same bodies as a walk over
        /// every body, and a lookup through the granules finds what looking at every body
        /// finds, at every address and time.
        #[test]
        fn the_index_finds_what_a_walk_over_every_body_finds(
            ops in prop::collection::vec(op(), 1..120),
            probes in prop::collection::vec((0u64..48 * 96 + 8192, 0u64..700), 64),
        ) {
            let indexed = apply(&ops, false);
            let walked = apply(&ops, true);
            let spans = |p: &ProcessCode| {
                p.code.iter().map(|c| (c.start, c.size, c.from, c.until, c.from_jitdump)).collect::<Vec<_>>()
            };
            prop_assert_eq!(spans(&indexed), spans(&walked));
            for (offset, t) in probes {
                let addr = 0x7f00_0000_0000 + offset;
                let found = indexed.lookup(addr, t).map(|c| (c.start, c.from, c.size));
                let expected = lookup_by_walk(&walked, addr, t).map(|i| {
                    let c = &walked.code[i];
                    (c.start, c.from, c.size)
                });
                prop_assert_eq!(found, expected, "{:#x} at {}", addr, t);
            }
        }
    }

    /// The same addresses reused by a body after body (a JVM unloading classes): a lookup
    /// looks only at the bodies filed under its granule, and finds the one live at its time.
    #[test]
    fn reused_addresses_resolve_by_time() {
        let mut p = ProcessCode::default();
        for round in 0..2000u64 {
            let t = round * 10;
            p.load(body(0x1000, 200, t, true));
            p.load(body(0x1100, 200, t + 1, true));
            p.unload(0x1000, t + 5);
        }
        p.finish();
        assert_eq!(p.lookup(0x1010, 12_343).map(|c| c.from), Some(12_340));
        assert_eq!(
            p.lookup(0x1010, 12_347).map(|c| c.from),
            Some(12_350),
            "unloaded: the next"
        );
        assert_eq!(p.lookup(0x1110, 12_347).map(|c| c.from), Some(12_341));
        assert!(p.lookup(0x1300, 12_347).is_none());
    }

    /// The loads left out are those of groups no sample hit (a stub loaded twice at one
    /// place goes as a whole; code sharing addresses with hit code, by a load or a move, or a
    /// start with it, stays), and the jitdump without them (`jitdump::without_loads`) gives
    /// every other body as before: place, time, end, name and tier.
    #[test]
    fn loads_left_out_change_no_other_body() {
        let load = |t: u64, i: u64, addr: u64, size: u64, name: &str| {
            let code = vec![0x90; size as usize];
            w::code_load(
                t,
                &w::CodeLoad {
                    pid: 1,
                    tid: 1,
                    code_addr: addr,
                    code_index: i,
                    name,
                    code: &code,
                },
            )
        };
        let tier = |addr, name| w::jit_tier(1, addr, TierKind::OPTIMIZED, name);
        let bytes = [
            w::header(1, 0, false),
            load(10, 0, 0x1000, 0x40, "stub"),
            load(11, 1, 0x1000, 0x40, "stub"),
            load(12, 2, 0x2000, 0x100, "hot"),
            load(13, 3, 0x2080, 0x40, "inside_hot"),
            tier(0, "C2"),
            w::debug_info(14, 0x3000, &[(0x3000, 5, "Lone.java")]),
            load(14, 4, 0x3000, 0x40, "lone"),
            load(15, 5, 0x4000, 0x40, "moved_onto_hot"),
            w::code_move(16, 1, 0x4000, 0x20f0, 0x40, 5),
            load(17, 6, 0x5000, 0x40, "unloaded"),
            w::code_unload(18, 0x5000, 6),
            load(19, 7, 0x5000, 0x20, "same_start"),
            tier(0x6000, "by address"),
            load(20, 8, 0x6000, 0x40, "tiered"),
            tier(0x7000, "by address too"),
            load(21, 9, 0x7000, 0x40, "late"),
            load(22, 10, 0x6000 + 0x1000, 0x10, "inside_late"),
        ]
        .concat();
        let hits = [2u64, 7, 9];
        let path = "/tmp/jit-1.dump";
        let clock = ClockConversion::default();
        let mut index = JitIndex::default();
        index.add_jitdump(1, path, &bytes, &clock);
        let leave_out = index.loads_to_leave_out(|_, o| hits.contains(&o.ordinal));
        let left_out = &leave_out[&(1, path.to_string())];
        assert_eq!(left_out.iter().copied().collect::<Vec<_>>(), [0, 1, 4, 8]);

        let kept = jitdump::without_loads(&[&bytes], |o| left_out.contains(&o)).unwrap();
        let mut pruned = JitIndex::default();
        pruned.add_jitdump(1, path, &kept[0], &clock);
        assert!(pruned.notes.is_empty(), "{:?}", pruned.notes);
        let described = |c: &JitCode, ordinal: u64| {
            format!(
                "{} {:#x}+{:#x} {}..{:?} {:?} load {ordinal}",
                c.name, c.start, c.size, c.from, c.until, c.tier
            )
        };
        let renumbered = |o: u64| o - left_out.range(..o).count() as u64;
        let before: Vec<String> = index
            .code()
            .filter_map(|(_, c)| {
                let o = c.origin.as_ref()?.ordinal;
                (!left_out.contains(&o)).then(|| described(c, renumbered(o)))
            })
            .collect();
        let after: Vec<String> = pruned
            .code()
            .map(|(_, c)| described(c, c.origin.as_ref().unwrap().ordinal))
            .collect();
        assert_eq!(before, after);
        assert!(after
            .iter()
            .any(|b| b.contains("late") && b.contains("by address too")));
        assert!(!after.iter().any(|b| b.contains("C2")), "{after:?}");
        // Every hit body is found where and when it was.
        for (_, c) in index
            .code()
            .filter(|(_, c)| c.origin.as_ref().is_some_and(|o| hits.contains(&o.ordinal)))
        {
            for addr in [c.start, c.start + c.size - 1] {
                let found = pruned.lookup(1, addr, c.from).map(|c| (&c.name, c.start));
                assert_eq!(found, Some((&c.name, c.start)), "{}", c.name);
            }
        }
    }
}
