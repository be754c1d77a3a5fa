//! The recording as a whole: what a `jprof.data` file says (metadata, clock, perf records,
//! summary, embedded symbols, side data), loaded for reading. The byte container is in
//! `format::recording`; the writer is `record::writer`.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::foreign_file::FileBytes;
use crate::format::perf::sample_type;
use crate::format::perf::{RawRecord, RecordIter, SampleLayout};
use crate::format::recording::{parse_chunks_releasing, ChunkKind};
use crate::format::ParseError;
use crate::timeline::ClockConversion;

/// One piece of a side file as the recording stores it, its bytes decompressed.
pub struct StoredSide<'a> {
    /// Kind, process, path, read time and file offset (its `data` is the raw payload tail:
    /// use [`StoredSide::data`]).
    pub piece: crate::format::recording::SidePiece<'a>,
    /// The bytes stored: the file's bytes, or with `code_left_out` the jitdump's records
    /// without their machine code.
    pub data: Cow<'a, [u8]>,
    /// Bytes of the file the piece covers, from `piece.offset`.
    pub file_len: u64,
    /// CRC-32 of the file bytes covered, when the recorder stored it (SIDE_FILE_ZSTD).
    pub file_crc: Option<u32>,
    /// The jitdump's CODE_LOAD records are stored without their code, or some of them were
    /// left out: the stored bytes are not the file's.
    pub code_left_out: bool,
}

/// Jitdump records set aside while recording (`record::jit_debug`), by process and jitdump
/// path: each group of records by the ordinal of the CODE_LOAD it stood before (see
/// `format::recording::JitDebug`).
pub type DeferredDebug =
    std::collections::BTreeMap<(u32, String), std::collections::BTreeMap<u64, Vec<u8>>>;

/// How user stacks were collected: the kernel's frame-pointer walk, or a copy of the stack
/// unwound afterwards with DWARF CFI. Stored in META as `"fp"` / `"dwarf"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallGraph {
    /// The kernel walks the frame-pointer chain at each sample.
    #[serde(rename = "fp")]
    FramePointers,
    /// Each sample copies the user stack and registers, unwound later with DWARF CFI.
    #[serde(rename = "dwarf")]
    Dwarf,
}

impl CallGraph {
    /// The name `--call-graph` takes and META stores.
    pub fn name(self) -> &'static str {
        match self {
            CallGraph::FramePointers => "fp",
            CallGraph::Dwarf => "dwarf",
        }
    }
}

impl std::fmt::Display for CallGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CallGraph {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fp" => Ok(CallGraph::FramePointers),
            "dwarf" => Ok(CallGraph::Dwarf),
            other => Err(format!("call graph {other:?}: fp or dwarf")),
        }
    }
}

/// How the events were opened, enough to decode every record.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct EventConfig {
    /// [`EventConfig::CYCLES`] or [`EventConfig::CPU_CLOCK`] when jprof recorded; a perf.data
    /// import keeps perf's name (e.g. `cycles:u`).
    pub event: String,
    /// Why the event is what it is (e.g. the cycles fallback), for the summary.
    pub event_note: Option<String>,
    /// Requested samples per second.
    pub frequency_hz: u64,
    /// `perf_event_attr.sample_type`: the PERF_SAMPLE_* fields each sample carries.
    pub sample_type: u64,
    /// `perf_event_attr.sample_regs_user`: which user registers each sample holds.
    pub regs_user_mask: u64,
    /// Bytes of user stack copied per sample (0 with frame pointers).
    pub stack_user_bytes: u32,
    /// How user stacks were collected.
    pub call_graph: CallGraph,
    /// Whether kernel frames were requested (false when the kernel refuses them).
    pub kernel_callchains: bool,
    /// Linux clockid of the sample clock (1 = CLOCK_MONOTONIC).
    pub clockid: i32,
    /// `--off-cpu`: ids (PERF_SAMPLE_IDENTIFIER) of the context-switch events. Their samples
    /// are switch-outs whose period the recorder set to the ns the thread then stayed off-CPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub off_cpu_ids: Vec<u64>,
    /// `--off-cpu-min`: shorter switches were counted, not stored.
    #[serde(default)]
    pub off_cpu_min_ns: u64,
}

impl EventConfig {
    /// The hardware cycles event.
    pub const CYCLES: &'static str = "cycles";
    /// The cpu-clock software event: its periods are nanoseconds.
    pub const CPU_CLOCK: &'static str = "cpu-clock";
    /// The task-clock software event: its periods are nanoseconds too.
    pub const TASK_CLOCK: &'static str = "task-clock";

    /// Whether sample periods are nanoseconds of CPU time (cpu-clock, task-clock), not event
    /// counts.
    pub fn periods_are_ns(&self) -> bool {
        self.event == Self::CPU_CLOCK || self.event == Self::TASK_CLOCK
    }

    /// What a sample's weight (its period) counts, in words: `ns of CPU time`, `cycles`,
    /// `page faults`, … (None for an event jprof does not know, e.g. a perf.data's).
    pub fn unit(&self) -> Option<&'static str> {
        Some(match self.event.as_str() {
            Self::CPU_CLOCK | Self::TASK_CLOCK => "ns of CPU time",
            Self::CYCLES => "cycles",
            "instructions" => "instructions",
            "cache-misses" => "cache misses",
            "branch-misses" => "branch misses",
            "page-faults" => "page faults",
            "context-switches" => "context switches",
            "cpu-migrations" => "CPU migrations",
            _ => return None,
        })
    }

    /// Whether the weights count occurrences of something other than CPU time (page faults,
    /// instructions, …): a sample then stands for no known amount of time.
    pub fn counts_occurrences(&self) -> bool {
        !self.periods_are_ns() && self.event != Self::CYCLES && self.unit().is_some()
    }

    /// `, weights count page faults` (what the weights count, for the event line of the
    /// summary and the text report) when they count occurrences; else empty.
    pub(crate) fn weights_count(&self) -> String {
        match self.unit() {
            Some(unit) if self.counts_occurrences() => format!(", weights count {unit}"),
            _ => String::new(),
        }
    }

    /// How to decode this configuration's samples.
    pub(crate) fn layout(&self) -> SampleLayout {
        SampleLayout {
            sample_type: self.sample_type,
            regs_user_mask: self.regs_user_mask,
            sample_id_all: true,
        }
    }
}

/// Facts about the machine the recording was made on.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostFacts {
    /// The machine's host name.
    pub hostname: String,
    /// `uname -r`.
    pub kernel_release: String,
    /// CPU architecture as Rust names it (`x86_64`, `aarch64`).
    pub arch: String,
    /// Online CPUs.
    pub cpus: u32,
    /// Page size in bytes.
    pub page_size: u64,
    /// `kernel.perf_event_paranoid`, if readable.
    pub perf_event_paranoid: Option<i32>,
    /// `kernel.kptr_restrict`, if readable.
    pub kptr_restrict: Option<i32>,
    /// `kernel.perf_event_max_stack`, if readable: the most frames (kernel and user together)
    /// a sample's callchain holds; a callchain that long was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf_event_max_stack: Option<i32>,
}

/// The first chunk of every recording.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Meta {
    /// Version of the jprof that wrote the recording.
    pub jprof_version: String,
    /// The profiled command line (launch mode).
    pub command: Vec<String>,
    /// The attached PID (attach mode).
    pub attached_pid: Option<u32>,
    /// PID of the launched target.
    pub target_pid: Option<u32>,
    /// What else was attached to: several processes (`-p 1,2`), threads (`--tid`), or every
    /// process (`-a`). Empty for a launched command and for one `-p` (`attached_pid`).
    #[serde(default, skip_serializing_if = "Targets::is_empty")]
    pub targets: Targets,
    /// The machine the recording was made on.
    pub host: HostFacts,
    /// How the events were opened.
    pub event: EventConfig,
    /// Wall-clock start, Unix ns, for humans.
    pub start_unix_ns: u64,
}

/// The processes and threads an attached recording covers, beyond `Meta::attached_pid`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Targets {
    /// Every attached process (`-p PID,PID`, or the processes of `--tid`'s threads).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pids: Vec<u32>,
    /// `--tid`: only these threads were sampled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tids: Vec<u32>,
    /// `-a`: every CPU, every process and thread.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub system_wide: bool,
}

impl Targets {
    /// Nothing beyond what the other META fields say.
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty() && self.tids.is_empty() && !self.system_wide
    }

    /// How titles name what was recorded (`whole host (-a)`, `pids 1, 2`, `tids 5, 6`).
    pub fn describe(&self) -> Option<String> {
        let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        if self.system_wide {
            Some("whole host (-a)".into())
        } else if !self.tids.is_empty() {
            Some(format!("tids {}", list(&self.tids)))
        } else if !self.pids.is_empty() {
            Some(format!("pids {}", list(&self.pids)))
        } else {
            None
        }
    }
}

/// Counters written when recording ends. Problems are data here, not errors.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Summary {
    /// Sample records written.
    pub samples: u64,
    /// Records the kernel dropped because a ring was full (sum of PERF_RECORD_LOST counts).
    pub lost_records: u64,
    /// Samples the kernel dropped (sum of PERF_RECORD_LOST_SAMPLES counts).
    pub lost_samples: u64,
    /// Times the kernel throttled sampling for exceeding its rate limit (PERF_RECORD_THROTTLE).
    pub throttles: u64,
    /// Times sampling resumed after a throttle (PERF_RECORD_UNTHROTTLE).
    pub unthrottles: u64,
    /// Sample-clock ns between each throttle and its resumption, summed over the events (an
    /// event still throttled at the end counts to the last record): the most CPU time any
    /// one thread's samples can be missing.
    #[serde(default)]
    pub throttled_ns: u64,
    /// Ring batches jprof dropped because its writer fell behind (memory stays bounded).
    pub dropped_batches: u64,
    /// The samples those batches held.
    #[serde(default)]
    pub dropped_samples: u64,
    /// Distinct threads seen in samples, forks and comm records.
    pub threads: u64,
    /// Distinct processes seen the same way.
    pub processes: u64,
    /// Sample-clock time (ns) of the first record.
    pub start_time: u64,
    /// Sample-clock time (ns) of the last record.
    pub end_time: u64,
    /// Wall-clock length of the recording, in ns.
    pub wall_duration_ns: u64,
    /// Exit code of the target (128+signal when killed by a signal).
    pub exit_code: Option<i32>,
    /// What ended the recording (e.g. `target exited`, a signal, `--duration`).
    pub stopped_by: String,
    /// Human-readable notes (kernel frames unavailable, side files unreadable, ...).
    pub notes: Vec<String>,
    /// `--off-cpu`: what the context-switch events saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu: Option<OffCpuCounts>,
    /// The processes with the most samples, most first (recordings of several processes:
    /// `-a`, several `-p`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_processes: Vec<ProcessSamples>,
}

/// One process's samples, for the summary's top processes.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcessSamples {
    /// The process id.
    pub pid: u32,
    /// Its name (the main thread's comm), when known.
    pub comm: String,
    /// Samples taken in it.
    pub samples: u64,
}

impl Summary {
    /// What the recording lost, one exact phrase per kind of loss (empty: nothing). The kernel
    /// counts records lost to a full ring buffer without saying which were samples, so they
    /// are never called samples.
    pub fn losses(&self) -> Vec<String> {
        let mut parts = Vec::new();
        if self.lost_records > 0 {
            parts.push(format!(
                "{} records lost by the kernel (a ring buffer was full; samples and other \
                 records alike, not told apart)",
                self.lost_records
            ));
        }
        if self.lost_samples > 0 {
            parts.push(format!(
                "{} samples lost by the kernel (PERF_RECORD_LOST_SAMPLES)",
                self.lost_samples
            ));
        }
        if self.throttles > 0 {
            // Recordings made before the time was kept have none to tell.
            let without = match self.throttled_ns {
                0 => String::new(),
                ns => format!(" ({:.1} ms without samples in all)", ns as f64 / 1e6),
            };
            parts.push(format!(
                "sampling throttled {} times by the kernel{without}",
                self.throttles
            ));
        }
        if self.dropped_batches > 0 {
            parts.push(format!(
                "{} samples in {} batches dropped by jprof (its writer fell behind)",
                self.dropped_samples, self.dropped_batches
            ));
        }
        parts
    }
}

/// Context switches seen with `--off-cpu`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct OffCpuCounts {
    /// Switch-outs paired with the thread's return (or the end of the recording).
    pub switches: u64,
    /// Those stored with their stack (at least `--off-cpu-min` off the CPU).
    pub stored: u64,
    /// Total ns the stored switches spent off the CPU.
    pub stored_ns: u64,
    /// Shorter ones: counted here, not stored.
    pub short: u64,
    /// Total ns the shorter switches spent off the CPU.
    pub short_ns: u64,
    /// Switch-outs dropped without a duration: the thread exited, or its return was lost.
    pub unpaired: u64,
}

impl OffCpuCounts {
    /// One line for the summaries.
    pub(crate) fn describe(&self, min_ns: u64) -> String {
        let mut line = format!(
            "{} switches off the CPU, {} stored with their stack ({:.3} s waited)",
            self.switches,
            self.stored,
            self.stored_ns as f64 / 1e9
        );
        if self.short > 0 {
            line += &format!(
                ", {} shorter than {} counted only ({:.3} s)",
                self.short,
                human_ns(min_ns),
                self.short_ns as f64 / 1e9
            );
        }
        if self.unpaired > 0 {
            line += &format!(", {} without a return (lost records)", self.unpaired);
        }
        line
    }
}

fn human_ns(ns: u64) -> String {
    match ns {
        n if n >= 1_000_000_000 && n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

/// The bytes of a recording: from its file (mapped when safe: see `FileBytes`), or owned
/// (tests, fuzzing).
enum Bytes {
    Owned(Vec<u8>),
    Mapped(FileBytes),
}

impl Bytes {
    /// Pages of a mapped file a reader is done with are given back (they read again from the
    /// file if needed).
    fn release(&self, offset: usize, len: usize) {
        if let Bytes::Mapped(m) = self {
            m.release(offset, len);
        }
    }
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Owned(v) => v,
            Bytes::Mapped(m) => m,
        }
    }
}

/// A loaded recording.
pub struct Recording {
    /// The file it was read from (a name only, for a recording from bytes).
    pub(crate) path: PathBuf,
    bytes: Bytes,
    chunks: Vec<Chunk>,
    /// PERF_RECORDS_ZSTD payloads decompressed by [`Recording::perf_records`] and
    /// [`Recording::payloads`], kept for the recording's life (one cell per chunk; the
    /// time-ordered reader in `symbolize::records` decompresses on its own and lets go).
    inflated: Vec<OnceLock<Result<Vec<u8>, ParseError>>>,
    /// The META chunk.
    pub meta: Meta,
    /// The CLOCK chunk: how TSC stamps map onto the sample clock, if the file has one.
    pub clock: Option<ClockConversion>,
    /// The SUMMARY chunk; `None` when the recorder was killed before writing it.
    pub summary: Option<Summary>,
    /// Why reading stopped before the end, if it did (truncated/corrupt file).
    pub stopped: Option<ParseError>,
    /// Damaged byte ranges skipped to reach the intact chunks after them.
    pub skipped: Vec<std::ops::Range<usize>>,
    /// Whether the recorder finished cleanly (END chunk present).
    pub finished: bool,
    /// Build ids of mapped files known apart from their MMAP2 records, by path: a perf.data's
    /// build-id table (perf writes it at the end of `perf record`). Used for mappings whose
    /// record carries none.
    pub build_ids: std::collections::BTreeMap<String, Vec<u8>>,
    /// Zeros that end the file after its last chunk (padding), in bytes.
    pub zero_tail: usize,
    /// Damage that was read around: a damaged file header, a lost META chunk.
    pub recovered: Vec<String>,
}

/// Where a chunk is: its kind, its payload's file offset and length, and for perf records the
/// offset their records are numbered from.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    kind: ChunkKind,
    offset: usize,
    len: usize,
    /// PERF_RECORDS: the payload's file offset. PERF_RECORDS_ZSTD: [`INFLATED_BASE`] plus the
    /// decompressed sizes of the compressed chunks before it, so a record's offset never
    /// changes however the file grows (embedded symbols key unwound stacks by it).
    base: usize,
}

/// One item of [`Recording::record_chunks`], in file order.
pub(crate) enum RecordsItem<'a> {
    /// A chunk of perf records (decompressed if it was compressed), its records numbered from
    /// `base`.
    Records {
        /// The offset the chunk's records are numbered from.
        base: usize,
        /// The records' bytes, or why the chunk could not be decompressed.
        bytes: Result<Cow<'a, [u8]>, ParseError>,
    },
    /// A RECORDS_ORDER mark: every record earlier than this sample-clock time is in a chunk
    /// before it.
    OrderedBefore(u64),
}

impl Recording {
    /// Maps the file (reading a large recording into memory first costs more than parsing it);
    /// another user's recording is read instead (see `FileBytes`).
    pub fn open(path: &Path) -> Result<Self, Error> {
        let mapped = crate::foreign_file::named_file_bytes(path).map_err(|e| {
            // A recorder that was killed leaves its recording under the partial name.
            let partials = crate::foreign_file::leftover_partials(path);
            match partials.first() {
                Some(partial) if e.is_not_found() => Error::Other(format!(
                    "{}: no such file; a recorder that did not finish left {} (read it with `jprof report -i {}`)",
                    path.display(),
                    partial.display(),
                    partial.display()
                )),
                _ => e.into_error(path),
            }
        })?;
        Self::load(path.to_path_buf(), Bytes::Mapped(mapped))
    }

    /// The recording `output` is writing, read through the descriptor it holds (not its
    /// name, which another user may have given to another file); `path` names it in messages.
    pub(crate) fn written(
        path: &Path,
        output: &crate::foreign_file::AtomicOutput,
    ) -> Result<Self, Error> {
        let bytes = output.written_bytes().map_err(|e| e.into_error(path))?;
        Self::load(path.to_path_buf(), Bytes::Mapped(bytes))
    }

    /// Reads a recording held in memory; `path` names it in messages.
    pub fn from_bytes(path: PathBuf, bytes: Vec<u8>) -> Result<Self, Error> {
        Self::load(path, Bytes::Owned(bytes))
    }

    /// A recording made in memory from its parts (an imported perf.data): `payloads` are the
    /// chunks' contents (PERF_RECORDS, SIDE_FILE pieces) in order. Nothing is encoded into the
    /// container and parsed back: META, CLOCK and SUMMARY are taken as they are.
    pub fn in_memory(
        path: PathBuf,
        meta: Meta,
        clock: Option<ClockConversion>,
        summary: Option<Summary>,
        payloads: Vec<(ChunkKind, Vec<u8>)>,
    ) -> Self {
        let mut bytes = Vec::with_capacity(payloads.iter().map(|(_, p)| p.len()).sum());
        let mut chunks = Vec::with_capacity(payloads.len());
        for (kind, payload) in payloads {
            let offset = bytes.len();
            chunks.push(Chunk {
                kind,
                offset,
                len: payload.len(),
                base: offset,
            });
            bytes.extend_from_slice(&payload);
        }
        Self {
            path,
            inflated: chunks.iter().map(|_| OnceLock::new()).collect(),
            chunks,
            meta,
            clock,
            summary,
            stopped: None,
            skipped: Vec::new(),
            finished: true,
            zero_tail: 0,
            recovered: Vec::new(),
            bytes: Bytes::Owned(bytes),
            build_ids: Default::default(),
        }
    }

    fn load(path: PathBuf, bytes: Bytes) -> Result<Self, Error> {
        // Checking the CRCs brings the file into memory; each part is let go once checked and
        // read again when it is needed (a long recording's records would otherwise all stay
        // resident).
        let parsed =
            parse_chunks_releasing(&bytes, |range| bytes.release(range.start, range.len()))
                .map_err(|e| Error::parse(&path, e))?;
        let mut recovered = parsed.header_notes;
        // Compressed records are decompressed when read, not here: a long recording's records
        // do not fit in memory at once. The size each frame declares numbers their records.
        let mut inflated_len = 0;
        let mut skipped = parsed.skipped;
        let mut stopped = parsed.stopped;
        let mut chunks = Vec::with_capacity(parsed.chunks.len());
        for c in &parsed.chunks {
            let mut chunk = Chunk {
                kind: c.kind,
                offset: c.offset,
                len: c.payload.len(),
                base: c.offset,
            };
            if c.kind == ChunkKind::PERF_RECORDS_ZSTD {
                match declared_size(c.payload, c.offset) {
                    Ok(size) => {
                        chunk.base = INFLATED_BASE + inflated_len;
                        inflated_len += size;
                    }
                    Err(e) => {
                        // A chunk whose CRC matched but that cannot be decompressed: skipped.
                        skipped.push(c.offset..c.offset + c.payload.len());
                        recovered.push(format!("a compressed chunk was left out ({e})"));
                        stopped.get_or_insert(e);
                        continue;
                    }
                }
            }
            chunks.push(chunk);
        }
        let json = |kind: ChunkKind| {
            chunks
                .iter()
                .rev()
                .find(|c| c.kind == kind)
                .map(|c| (c.offset, &bytes[c.offset..c.offset + c.len]))
        };
        // Every intact copy of META is the same (the recorder writes it again after the first
        // records and at the end), so any survivor serves.
        let meta = match json(ChunkKind::META) {
            Some((meta_off, meta)) => serde_json::from_slice(meta).map_err(|e| {
                Error::parse(&path, ParseError::new(meta_off, format!("META JSON ({e})")))
            })?,
            None => {
                let records = chunks.iter().find(|c| {
                    matches!(
                        c.kind,
                        ChunkKind::PERF_RECORDS | ChunkKind::PERF_RECORDS_ZSTD
                    )
                });
                let no_meta = || {
                    Error::parse(
                        &path,
                        stopped
                            .clone()
                            .unwrap_or_else(|| ParseError::new(16, "a META chunk")),
                    )
                };
                let first = records.ok_or_else(no_meta)?;
                let bytes = match first.kind {
                    ChunkKind::PERF_RECORDS => {
                        Cow::Borrowed(&bytes[first.offset..first.offset + first.len])
                    }
                    _ => Cow::Owned(
                        inflate(&bytes[first.offset..first.offset + first.len], first.offset)
                            .map_err(|_| no_meta())?,
                    ),
                };
                let meta = default_meta(&bytes).ok_or_else(no_meta)?;
                recovered.push(format!(
                    "every copy of its META chunk (how the events were opened) is damaged: the \
                     records were decoded with jprof's own sample layout (call graph {}, found \
                     in the samples); the command, host and event name are unknown",
                    meta.event.call_graph
                ));
                meta
            }
        };
        let clock = match json(ChunkKind::CLOCK) {
            Some((off, c)) => Some(serde_json::from_slice(c).map_err(|e| {
                Error::parse(&path, ParseError::new(off, format!("CLOCK JSON ({e})")))
            })?),
            None => None,
        };
        let summary = match json(ChunkKind::SUMMARY) {
            Some((off, c)) => Some(serde_json::from_slice(c).map_err(|e| {
                Error::parse(&path, ParseError::new(off, format!("SUMMARY JSON ({e})")))
            })?),
            None => None,
        };
        let finished = chunks.iter().any(|c| c.kind == ChunkKind::END);
        Ok(Self {
            path,
            inflated: chunks.iter().map(|_| OnceLock::new()).collect(),
            chunks,
            meta,
            clock,
            summary,
            stopped,
            skipped,
            finished,
            zero_tail: parsed.zero_tail,
            recovered,
            bytes,
            build_ids: Default::default(),
        })
    }

    fn file_bytes(&self, c: &Chunk) -> &[u8] {
        &self.bytes[c.offset..c.offset + c.len]
    }

    /// The records of chunk `i`, decompressed once and kept.
    fn kept_records(&self, i: usize) -> Result<&[u8], ParseError> {
        let c = &self.chunks[i];
        if c.kind == ChunkKind::PERF_RECORDS {
            return Ok(self.file_bytes(c));
        }
        self.inflated[i]
            .get_or_init(|| inflate(self.file_bytes(c), c.offset))
            .as_deref()
            .map_err(Clone::clone)
    }

    /// Every chunk of perf records and every RECORDS_ORDER mark, in file order. Compressed
    /// chunks are decompressed as the iterator reaches them and owned by the item, so a
    /// reader that drops them holds one chunk at a time.
    pub(crate) fn record_chunks(&self) -> impl Iterator<Item = RecordsItem<'_>> + '_ {
        self.chunks.iter().enumerate().filter_map(move |(i, c)| {
            if c.kind == ChunkKind::RECORDS_ORDER {
                let bytes = self.file_bytes(c).get(..8)?;
                return Some(RecordsItem::OrderedBefore(u64::from_le_bytes(
                    bytes.try_into().ok()?,
                )));
            }
            let bytes = match c.kind {
                ChunkKind::PERF_RECORDS => Ok(Cow::Borrowed(self.file_bytes(c))),
                ChunkKind::PERF_RECORDS_ZSTD => match self.inflated[i].get() {
                    Some(kept) => kept.as_deref().map(Cow::Borrowed).map_err(Clone::clone),
                    None => {
                        let records = inflate(self.file_bytes(c), c.offset).map(Cow::Owned);
                        // Read once per pass: the compressed bytes need not stay resident.
                        self.bytes.release(c.offset, c.len);
                        records
                    }
                },
                _ => return None,
            };
            Some(RecordsItem::Records {
                base: c.base,
                bytes,
            })
        })
    }

    /// Every intact chunk in file order: its kind, its payload's file offset, the payload (as
    /// stored: compressed records stay compressed), and for perf records the offset their
    /// records are numbered from.
    pub(crate) fn chunks_in_order(
        &self,
    ) -> impl Iterator<Item = (ChunkKind, usize, &[u8], usize)> + '_ {
        self.chunks
            .iter()
            .map(|c| (c.kind, c.offset, self.file_bytes(c), c.base))
    }

    /// How to decode the recording's samples.
    pub fn layout(&self) -> SampleLayout {
        self.meta.event.layout()
    }

    /// Says a reader is done with the payload bytes at `offset..offset + len` (from
    /// [`Recording::payloads`]): a mapped file's pages may leave memory (they are read again
    /// from the file if needed).
    pub fn release(&self, offset: usize, len: usize) {
        self.bytes.release(offset, len);
    }

    /// Payloads of every chunk of one kind, in file order. PERF_RECORDS includes the
    /// compressed chunks, decompressed (and kept; a chunk that does not decompress is left out)
    /// and numbered from their base offset.
    pub fn payloads(&self, kind: ChunkKind) -> impl Iterator<Item = (usize, &[u8])> + '_ {
        self.chunks.iter().enumerate().filter_map(move |(i, c)| {
            if kind == ChunkKind::PERF_RECORDS
                && matches!(
                    c.kind,
                    ChunkKind::PERF_RECORDS | ChunkKind::PERF_RECORDS_ZSTD
                )
            {
                return self.kept_records(i).ok().map(|b| (c.base, b));
            }
            (c.kind == kind).then(|| (c.offset, self.file_bytes(c)))
        })
    }

    /// Every side-file piece (SIDE_FILE and SIDE_FILE_ZSTD chunks) in file order, with its
    /// bytes decompressed. A piece that cannot be read is an error carrying its file offset.
    pub fn side_pieces(&self) -> impl Iterator<Item = Result<StoredSide<'_>, ParseError>> + '_ {
        self.chunks.iter().filter_map(move |c| {
            let payload = self.file_bytes(c);
            match c.kind {
                ChunkKind::SIDE_FILE => Some(
                    crate::format::recording::parse_side_piece(payload, c.offset).map(|p| {
                        StoredSide {
                            file_len: p.data.len() as u64,
                            file_crc: None,
                            code_left_out: false,
                            data: Cow::Borrowed(p.data),
                            piece: p,
                        }
                    }),
                ),
                ChunkKind::SIDE_FILE_ZSTD => Some(
                    crate::format::recording::parse_packed_side_piece(payload, c.offset).and_then(
                        |(p, packed)| {
                            let at = c.offset + (payload.len() - p.data.len());
                            let data = inflate(p.data, at)?;
                            let all_stored = !packed.code_left_out && !packed.loads_left_out;
                            if all_stored && data.len() as u64 != packed.file_len {
                                return Err(ParseError::new(
                                    at,
                                    format!(
                                        "{} stored bytes, as the piece says, found {}",
                                        packed.file_len,
                                        data.len()
                                    ),
                                ));
                            }
                            Ok(StoredSide {
                                file_len: packed.file_len,
                                file_crc: Some(packed.file_crc),
                                code_left_out: packed.code_left_out || packed.loads_left_out,
                                data: Cow::Owned(data),
                                piece: p,
                            })
                        },
                    ),
                ),
                _ => None,
            }
        })
    }

    /// The deferred jitdump records of the JIT_DEBUG chunks, by process and jitdump path; an
    /// unreadable chunk (or its damaged rest) becomes a note.
    pub fn jit_debug(&self, notes: &mut Vec<String>) -> DeferredDebug {
        use crate::format::recording::{parse_jit_debug, parse_jit_debug_groups};
        let mut out = DeferredDebug::new();
        for (offset, payload) in self.payloads(ChunkKind::JIT_DEBUG) {
            let read = parse_jit_debug(payload, offset).and_then(|d| {
                let at = offset + (payload.len() - d.data.len());
                Ok((d.pid, d.path, inflate(d.data, at)?, at))
            });
            let (pid, path, bytes, at) = match read {
                Ok(r) => r,
                Err(e) => {
                    notes.push(format!(
                        "{}: JIT line and inline tables unreadable: {e}",
                        self.path.display()
                    ));
                    continue;
                }
            };
            let (groups, error) = parse_jit_debug_groups(&bytes, at);
            if let Some(e) = error {
                notes.push(format!(
                    "{}: JIT line and inline tables cut short: {e}",
                    self.path.display()
                ));
            }
            let file = out.entry((pid, path.to_string())).or_default();
            for (ordinal, records) in groups {
                file.entry(ordinal).or_default().extend_from_slice(records);
            }
        }
        out
    }

    /// Every perf record in file order. A damaged record ends its chunk; the error carries the
    /// absolute file offset. Compressed chunks stay decompressed afterwards: readers of whole
    /// long recordings use `symbolize::records::in_time_order`, which lets them go.
    pub fn perf_records(&self) -> impl Iterator<Item = Result<RawRecord<'_>, ParseError>> + '_ {
        self.chunks
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                matches!(
                    c.kind,
                    ChunkKind::PERF_RECORDS | ChunkKind::PERF_RECORDS_ZSTD
                )
            })
            .flat_map(move |(i, c)| {
                let (records, broken) = match self.kept_records(i) {
                    Ok(bytes) => (Some(RecordIter::new(bytes)), None),
                    Err(e) => (None, Some(Err(e))),
                };
                let base = c.base;
                records
                    .into_iter()
                    .flatten()
                    .map(move |r| {
                        r.map(|mut raw| {
                            raw.offset += base;
                            raw
                        })
                        .map_err(|mut e| {
                            e.offset += base;
                            e
                        })
                    })
                    .chain(broken)
            })
    }

    /// A one-line description of how the file ended, for reports.
    pub fn completeness(&self) -> String {
        let mut line = self.how_it_ended();
        for note in &self.recovered {
            line += &format!("; {note}");
        }
        if self.zero_tail > 0 {
            line += &format!(
                "; it ends in {} bytes of zeros after its last chunk (padding, not read as chunks)",
                self.zero_tail
            );
        }
        line
    }

    fn how_it_ended(&self) -> String {
        if !self.skipped.is_empty() {
            let bytes: usize = self.skipped.iter().map(|r| r.len()).sum();
            return format!(
                "{} is damaged: {bytes} bytes in {} region(s) skipped, the first at byte offset {}; \
                 every intact chunk before and after was read{}",
                self.path.display(),
                self.skipped.len(),
                self.skipped[0].start,
                if self.finished { "" } else { "; no end marker" }
            );
        }
        match (&self.stopped, self.finished) {
            (Some(e), _) => format!(
                "{} is truncated or damaged ({e}); everything before that offset was read",
                self.path.display()
            ),
            (None, false) => format!(
                "{} has no end marker: the recorder was killed; all complete chunks were read",
                self.path.display()
            ),
            (None, true) if self.recovered.is_empty() => "complete".to_string(),
            (None, true) => format!("{} is damaged", self.path.display()),
        }
    }
}

/// Where decompressed records are numbered from: past any file, so a record's offset says
/// where it is and never changes.
pub const INFLATED_BASE: usize = 1 << 48;

/// The most one compressed chunk may claim to hold (the recorder compresses one ring batch).
const MAX_INFLATED_CHUNK: usize = 1 << 30;

/// The most bytes one compressed byte may stand for. jprof's own chunks come to about 15 to
/// 100 (stack copies compress well; a 1 MiB chunk of identical 8 KiB samples, ~115): past 1024
/// a 1 MiB chunk would hold under 1 KiB of distinct bytes. zstd reaches some 30,000 on built
/// input (runs of one byte), so a small hostile or damaged file could otherwise ask for
/// gigabytes; with this bound, what a recording decompresses is at most this many times the
/// file's size.
pub const MAX_INFLATION: usize = 1024;

/// The decompressed size a zstd frame at file offset `at` declares, at most
/// [`MAX_INFLATION`] times its own size and [`MAX_INFLATED_CHUNK`].
fn declared_size(payload: &[u8], at: usize) -> Result<usize, ParseError> {
    let declared = zstd::zstd_safe::get_frame_content_size(payload)
        .ok()
        .flatten()
        .ok_or_else(|| ParseError::new(at, "a zstd frame that declares its content size"))?;
    let limit = payload
        .len()
        .saturating_mul(MAX_INFLATION)
        .min(MAX_INFLATED_CHUNK);
    if declared > limit as u64 {
        return Err(ParseError::new(
            at,
            format!(
                "a zstd frame that decompresses to at most {limit} bytes ({MAX_INFLATION} for \
                 each of its {} bytes, at most {MAX_INFLATED_CHUNK}); it declares {declared}",
                payload.len()
            ),
        ));
    }
    Ok(declared as usize)
}

/// Decompresses a zstd frame of a recording (records, side file, tables) at file offset `at`,
/// bounded by the size it declares, which [`declared_size`] bounds.
pub(crate) fn inflate(payload: &[u8], at: usize) -> Result<Vec<u8>, ParseError> {
    let declared = declared_size(payload, at)?;
    let out = zstd::bulk::decompress(payload, declared)
        .map_err(|e| ParseError::new(at, format!("a zstd frame that decompresses ({e})")))?;
    if out.len() != declared {
        return Err(ParseError::new(
            at,
            format!("{declared} decompressed bytes, found {}", out.len()),
        ));
    }
    Ok(out)
}

/// User registers `record` samples: BP, SP and IP (x86_64 perf_regs indexes 6, 7, 8), enough
/// for frame-pointer and CFI unwinding.
pub const REGS_USER_MASK: u64 = 0x1c0;
/// Stack bytes `record` copies per sample with `--call-graph dwarf`: perf's default, the
/// frame-pointer chain continuing deeper stacks.
pub const STACK_BYTES_DWARF: u32 = 8 * 1024;
/// Stack bytes `record` copies per sample in fp mode: enough to walk frameless code at the top
/// (a leaf, libc's wrappers).
pub const STACK_BYTES_FP: u32 = 1024;
/// Stack bytes `record` copies per sample when it chooses DWARF for a target whose deep stacks
/// have no frame pointers (CPython 3.12+), and in fp mode for a JVM (each copy cut down by the
/// writer to the frame chain's words): the most the kernel copies (below 64 KiB, a multiple of
/// 8; it copies less when the rest of the sample leaves less room in a record).
pub const STACK_BYTES_DEEP: u32 = 65528;

/// META for a recording whose every META copy is damaged: the layout jprof records with
/// (`record::events`), the call graph and copy size told by the first samples' stack copies;
/// `None` when the first samples in `records` do not decode with it.
pub(crate) fn default_meta(records: &[u8]) -> Option<Meta> {
    let mut event = EventConfig {
        event: "unknown (META damaged)".into(),
        event_note: None,
        frequency_hz: 0,
        sample_type: sample_type::IP
            | sample_type::TID
            | sample_type::TIME
            | sample_type::CPU
            | sample_type::PERIOD
            | sample_type::CALLCHAIN
            | sample_type::REGS_USER
            | sample_type::STACK_USER,
        regs_user_mask: REGS_USER_MASK,
        stack_user_bytes: STACK_BYTES_FP,
        call_graph: CallGraph::FramePointers,
        kernel_callchains: true,
        clockid: libc::CLOCK_MONOTONIC,
        off_cpu_ids: Vec::new(),
        off_cpu_min_ns: 0,
    };
    let layout = event.layout();
    let samples: Vec<RawRecord<'_>> = RecordIter::new(records)
        .map_while(Result::ok)
        .filter(|r| r.kind == crate::format::perf::RecordKind::SAMPLE)
        .take(16)
        .collect();
    if samples.is_empty() || samples.iter().any(|s| layout.parse(s).is_err()) {
        return None;
    }
    // The room each sample's stack copy has, and what it holds. The kernel makes the room asked
    // for (8 KiB with dwarf; 64 KiB, less what the record's other fields take, for the deep
    // copy) whatever the stack holds; fp mode's deep copy is cut by the writer to end after the
    // deepest frame (room and copy the same, any size from 1 KiB).
    let copies: Vec<(usize, usize)> = samples
        .iter()
        .filter_map(|raw| match layout.parse(raw) {
            Ok(crate::format::perf::Record::Sample(s)) => {
                let at = (s.stack_user.as_ptr() as usize).checked_sub(raw.body.as_ptr() as usize)?;
                let room = raw.body.get(at.checked_sub(8)?..at)?;
                Some((
                    u64::from_le_bytes(room.try_into().ok()?) as usize,
                    s.stack_user.len(),
                ))
            }
            _ => None,
        })
        .collect();
    let dwarf = STACK_BYTES_DWARF as usize;
    if copies.iter().all(|&(room, _)| room == dwarf) {
        event.call_graph = CallGraph::Dwarf;
        event.stack_user_bytes = STACK_BYTES_DWARF;
    } else if copies.iter().all(|&(room, _)| room > 2 * dwarf)
        && copies.iter().any(|&(room, copied)| copied < room)
    {
        event.call_graph = CallGraph::Dwarf;
        event.stack_user_bytes = STACK_BYTES_DEEP;
    } else if copies
        .iter()
        .any(|&(room, _)| room > STACK_BYTES_FP as usize)
    {
        event.stack_user_bytes = STACK_BYTES_DEEP;
    }
    Some(Meta {
        jprof_version: String::new(),
        command: Vec::new(),
        attached_pid: None,
        target_pid: None,
        targets: Targets::default(),
        host: HostFacts {
            arch: std::env::consts::ARCH.into(),
            ..HostFacts::default()
        },
        event,
        start_unix_ns: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_never_call_lost_records_samples_nor_say_zero() {
        let ring_full = Summary {
            lost_records: 3456,
            ..Summary::default()
        };
        assert_eq!(
            ring_full.losses(),
            [
                "3456 records lost by the kernel (a ring buffer was full; samples and other \
              records alike, not told apart)"
            ]
        );
        assert!(Summary::default().losses().is_empty());
        let all = Summary {
            lost_records: 1,
            lost_samples: 2,
            throttles: 3,
            throttled_ns: 2_500_000,
            dropped_batches: 4,
            dropped_samples: 5,
            ..Summary::default()
        };
        let text = all.losses().join("; ");
        assert!(!text.contains(" 0 "), "{text}");
        for part in [
            "2 samples lost by the kernel",
            "throttled 3 times by the kernel (2.5 ms without samples in all)",
            "5 samples in 4 batches dropped by jprof",
        ] {
            assert!(text.contains(part), "{text}");
        }
    }
}
