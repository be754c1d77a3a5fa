//! The writer thread: receives batches of raw perf records from the ring reader over a bounded
//! channel, appends them to the recording as checksummed chunks, and keeps the counters for the
//! summary. Each chunk is written whole with one `writev`, so a SIGKILL leaves a readable prefix.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use std::time::{Duration, Instant};

use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};

use super::off_cpu::SwitchPairing;
use super::side_files::SideFiles;
use crate::sys::clock;
use crate::timeline::Calibration;

use crate::error::Error;
use crate::format::perf::{Record, RecordIter, RecordKind, SampleLayout};
use crate::format::recording::{
    chunk_header, chunk_padding, encode_packed_side_piece, encode_side_piece, file_header,
    ChunkKind, PackedSide, SideKind, SidePiece,
};
use crate::recording::{Meta, ProcessSamples, Summary};

/// zstd level for perf records: level 1 is the fastest, and stack copies compress well at it.
const RECORDS_ZSTD_LEVEL: i32 = 1;
/// zstd level for perf records whose stack copies are cut down (a JVM's): level 3 stores them
/// in a tenth fewer bytes than level 1 at about the same speed; on whole copies (native
/// code's) it stored more (docs/performance.md).
const CUT_RECORDS_ZSTD_LEVEL: i32 = 3;

/// Appends chunks to the recording file.
pub struct ChunkWriter {
    file: File,
    path: PathBuf,
    /// META's JSON, written again after the first records: one damaged chunk at the start of
    /// the file must not cost the recording (docs/recording-format.md).
    meta_copy: Option<Vec<u8>>,
    /// The records' compressor, its level, and the buffer it packs into, kept from chunk to
    /// chunk: made afresh for each, a context and a megabyte buffer were allocated, faulted in
    /// and unmapped every time.
    packer: Option<(zstd::bulk::Compressor<'static>, i32)>,
    packed: Vec<u8>,
}

impl ChunkWriter {
    /// Writes the file header and the META chunk into `file`, a new file at `path` (the
    /// output's partial name until the recording is complete).
    pub fn create(mut file: File, path: &Path, meta: &Meta) -> Result<Self, Error> {
        file.write_all(&file_header())
            .map_err(|e| Error::io(path, e))?;
        let json = serde_json::to_vec(meta).map_err(|e| Error::Other(e.to_string()))?;
        let mut w = Self {
            file,
            path: path.to_path_buf(),
            meta_copy: None,
            packer: None,
            packed: Vec::new(),
        };
        w.write_chunk(ChunkKind::META, &json)?;
        w.meta_copy = Some(json);
        Ok(w)
    }

    /// Appends more chunks through `file`, a handle on the recording at `path`.
    pub fn append(file: File, path: &Path) -> Self {
        Self {
            file,
            path: path.to_path_buf(),
            meta_copy: None,
            packer: None,
            packed: Vec::new(),
        }
    }

    pub fn write_chunk(&mut self, kind: ChunkKind, payload: &[u8]) -> Result<(), Error> {
        write_chunk_to(&mut self.file, &self.path, kind, payload)
    }

    /// Packs `records` with zstd at `level` into `self.packed`; None where zstd fails.
    fn pack(&mut self, records: &[u8], level: i32) -> Option<()> {
        let packer = match &mut self.packer {
            Some((packer, at)) if *at == level => packer,
            Some((packer, at)) => {
                packer.set_compression_level(level).ok()?;
                *at = level;
                packer
            }
            None => {
                let packer = zstd::bulk::Compressor::new(level).ok()?;
                &mut self.packer.insert((packer, level)).0
            }
        };
        self.packed.clear();
        self.packed
            .reserve(zstd::zstd_safe::compress_bound(records.len()));
        packer.compress_to_buffer(records, &mut self.packed).ok()?;
        Some(())
    }

    /// Writes a batch of perf records compressed (zstd at `level`: docs/dependencies.md), or as
    /// it is if compressing fails or `level` is None.
    pub fn write_records(&mut self, records: &[u8], level: Option<i32>) -> Result<(), Error> {
        match level.and_then(|level| self.pack(records, level)) {
            Some(()) => write_chunk_to(
                &mut self.file,
                &self.path,
                ChunkKind::PERF_RECORDS_ZSTD,
                &self.packed,
            )?,
            None => self.write_chunk(ChunkKind::PERF_RECORDS, records)?,
        }
        match self.meta_copy.take() {
            Some(meta) => self.write_chunk(ChunkKind::META, &meta),
            None => Ok(()),
        }
    }

    pub fn write_json<T: serde::Serialize>(
        &mut self,
        kind: ChunkKind,
        value: &T,
    ) -> Result<(), Error> {
        let json = serde_json::to_vec(value).map_err(|e| Error::Other(e.to_string()))?;
        self.write_chunk(kind, &json)
    }
}

/// Writes one chunk into `file` (at `path`) with one `writev`: its header, the payload where it
/// lies (not copied next to the header first) and its padding.
fn write_chunk_to(
    file: &mut File,
    path: &Path,
    kind: ChunkKind,
    payload: &[u8],
) -> Result<(), Error> {
    let header = chunk_header(kind, payload);
    let mut parts = [
        std::io::IoSlice::new(&header),
        std::io::IoSlice::new(payload),
        std::io::IoSlice::new(chunk_padding(payload.len())),
    ];
    let mut left = &mut parts[..];
    while !left.is_empty() {
        match file.write_vectored(left) {
            Ok(0) => {
                let e = std::io::Error::from(std::io::ErrorKind::WriteZero);
                return Err(Error::io(path, e));
            }
            Ok(n) => std::io::IoSlice::advance_slices(&mut left, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(())
}

/// The ring reader's end of the channel to the writer: the batches go one way, and the record
/// buffers the writer is done with come back for the reader's next batches. Allocated afresh,
/// a batch's megabytes were mapped, faulted in page by page and unmapped again for every
/// batch (with the copies below, about a third of the recorder's CPU time on a
/// context-switch-heavy target: docs/performance.md).
pub struct Feed {
    pub batches: SyncSender<Batch>,
    spare: Receiver<Vec<u8>>,
}

/// Buffers kept for reuse at most (a batch is a pass over the rings).
const SPARE_BUFFERS: usize = 2;
/// A buffer larger than this is let go of rather than kept (`-a` on many CPUs).
const SPARE_BUFFER_MAX: usize = 16 << 20;

/// The writer's end of [`Feed`].
pub struct Intake {
    batches: Receiver<Batch>,
    spare: SyncSender<Vec<u8>>,
}

impl Intake {
    /// Gives a batch's buffer back to the reader, emptied, unless enough are waiting.
    fn give_back(&self, mut records: Vec<u8>) {
        if records.capacity() <= SPARE_BUFFER_MAX {
            records.clear();
            let _ = self.spare.try_send(records);
        }
    }
}

impl Feed {
    /// A channel of `batches` batches, with the writer's end.
    pub fn new(batches: usize) -> (Self, Intake) {
        let (tx, rx) = std::sync::mpsc::sync_channel(batches);
        let (spare_tx, spare) = std::sync::mpsc::sync_channel(SPARE_BUFFERS);
        (
            Self { batches: tx, spare },
            Intake {
                batches: rx,
                spare: spare_tx,
            },
        )
    }

    /// An empty buffer for the next batch: one the writer gave back, or a new one.
    pub fn buffer(&self) -> Vec<u8> {
        self.spare.try_recv().unwrap_or_default()
    }
}

/// Raw perf records from one pass of the ring reader.
pub struct Batch {
    pub records: Vec<u8>,
    /// Frames past the stack copies, read at sample time (`deep_frames`), for these records'
    /// samples or later ones.
    pub deep: Vec<super::deep_frames::Walked>,
    /// Processes these records show mapping libjvm.so that the deep-frames program now works
    /// for (`DeepFrames::watch`): their samples get its records joined; and those that ended.
    pub jvms: super::deep_frames::JvmChanges,
    /// Sample-clock ns before which every record has been read (all rings were drained after
    /// it); None for records jprof made up (attach mode's existing mappings).
    pub complete_before: Option<u64>,
}

/// How many SAMPLE records a batch of raw perf records holds (for a batch that is dropped).
pub fn samples_in(batch: &[u8]) -> u64 {
    RecordIter::new(batch)
        .filter_map(Result::ok)
        .filter(|r| r.kind == RecordKind::SAMPLE)
        .count() as u64
}

/// How many processes the summary lists by samples.
const TOP_PROCESSES: usize = 10;

/// Counters the writer derives from the records it passes through.
#[derive(Default)]
pub struct Counters {
    pub summary: Summary,
    tids: HashSet<u32>,
    pids: HashSet<u32>,
    /// Samples and name of each process, for the top processes.
    per_process: HashMap<u32, (u64, String)>,
    first_time: Option<u64>,
    last_time: u64,
    /// Events throttled now, by event id: when sampling stopped.
    throttled_since: HashMap<u64, u64>,
}

impl Counters {
    fn observe(&mut self, layout: &SampleLayout, batch: &[u8], side: &mut SideFiles) {
        for raw in RecordIter::new(batch).flatten() {
            let time = match raw.kind {
                RecordKind::SAMPLE => layout.sample_head(&raw).ok().map(|s| s.time),
                _ => layout.time_of(&raw),
            };
            if let Some(t) = time {
                self.first_time = Some(self.first_time.map_or(t, |f| f.min(t)));
                self.last_time = self.last_time.max(t);
            }
            match raw.kind {
                RecordKind::SAMPLE => {
                    self.summary.samples += 1;
                    if let Ok(s) = layout.sample_head(&raw) {
                        self.tids.insert(s.tid);
                        self.pids.insert(s.pid);
                        self.per_process.entry(s.pid).or_default().0 += 1;
                    }
                }
                RecordKind::LOST => {
                    if let Ok(Record::Lost { lost, .. }) = layout.parse(&raw) {
                        self.summary.lost_records += lost;
                    }
                }
                RecordKind::LOST_SAMPLES => {
                    if let Ok(Record::LostSamples { lost, .. }) = layout.parse(&raw) {
                        self.summary.lost_samples += lost;
                    }
                }
                RecordKind::THROTTLE | RecordKind::UNTHROTTLE => {
                    if let Ok(Record::Throttle {
                        time,
                        id,
                        unthrottle,
                    }) = layout.parse(&raw)
                    {
                        self.throttle(time, id, unthrottle);
                    }
                }
                RecordKind::FORK | RecordKind::COMM => {
                    let parsed = layout.parse(&raw);
                    if let Ok(Record::Fork { pid, tid, .. } | Record::Comm { pid, tid, .. }) =
                        &parsed
                    {
                        self.tids.insert(*tid);
                        self.pids.insert(*pid);
                        side.saw_pid(*pid);
                    }
                    if let Ok(Record::Comm { pid, tid, comm, .. }) = parsed {
                        if pid == tid {
                            self.per_process.entry(pid).or_default().1 = comm.to_string();
                        }
                    }
                }
                RecordKind::MMAP2 => {
                    if let Ok(Record::Mmap2 { pid, filename, .. }) = layout.parse(&raw) {
                        side.saw_mapping(pid, &filename);
                    }
                }
                _ => {}
            }
        }
    }

    /// Counts a throttle or its end, and the time between them.
    fn throttle(&mut self, time: u64, id: u64, unthrottle: bool) {
        if unthrottle {
            self.summary.unthrottles += 1;
            if let Some(since) = self.throttled_since.remove(&id) {
                self.summary.throttled_ns += time.saturating_sub(since);
            }
        } else {
            self.summary.throttles += 1;
            self.throttled_since.entry(id).or_insert(time);
        }
    }

    pub fn finish(mut self) -> Summary {
        let end = self.last_time;
        for (_, since) in self.throttled_since.drain() {
            self.summary.throttled_ns += end.saturating_sub(since);
        }
        let mut top: Vec<ProcessSamples> = self
            .per_process
            .drain()
            .filter(|(_, (samples, _))| *samples > 0)
            .map(|(pid, (samples, comm))| ProcessSamples { pid, comm, samples })
            .collect();
        top.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.pid.cmp(&b.pid)));
        top.truncate(TOP_PROCESSES);
        // One process: the summary's first line says it all.
        if top.len() > 1 {
            self.summary.top_processes = top;
        }
        self.summary.threads = self.tids.len() as u64;
        self.summary.processes = self.pids.len() as u64;
        self.summary.start_time = self.first_time.unwrap_or(0);
        self.summary.end_time = self.last_time;
        self.summary
    }
}

/// Records the end writes again (a JVM's, `compact`) are stored uncompressed up to this many
/// bytes: packing javac's 5.6 MB took 11 ms of the writer's CPU beside the JVM and unpacking
/// them 5 ms twice at the end, for a file that is replaced minutes or seconds later (a longer
/// recording's records are compressed past this, so a killed recorder's file stays small).
const RAW_REWRITTEN_RECORDS_BYTES: usize = 32 << 20;

/// How the writer stores its chunks of records: as they are while `raw_left` bytes last, then
/// compressed at `level`.
struct RecordsLevel {
    level: i32,
    raw_left: usize,
}

impl RecordsLevel {
    /// The zstd level of the next chunk, of `len` bytes (None: as they are).
    fn next(&mut self, len: usize) -> Option<i32> {
        if len <= self.raw_left {
            self.raw_left -= len;
            None
        } else {
            self.raw_left = 0;
            Some(self.level)
        }
    }
}

/// Records are written (compressed) once this many bytes are gathered (one frame over more
/// samples finds more of each thread's previous stacks to refer to)...
const RECORDS_CHUNK_BYTES: usize = 2 << 20;
/// Side-file pieces likewise.
const SIDE_CHUNK_BYTES: usize = 1 << 20;
/// ...or this long after the last write.
const RECORDS_FLUSH: Duration = Duration::from_millis(250);

/// How far a RECORDS_ORDER mark waits for off-CPU switch-outs still unpaired: a longer wait's
/// sample is written after the mark (a reader takes it a little out of order) so that readers
/// need not hold records for as long as a thread sleeps.
const ORDER_MAX_LAG_NS: u64 = 2_000_000_000;

/// The RECORDS_ORDER mark after a flush: records earlier than the last batch's watermark are
/// all written, except off-CPU switch-outs still waiting (up to [`ORDER_MAX_LAG_NS`]).
fn order_mark(watermark: u64, off_cpu: Option<&SwitchPairing>) -> u64 {
    match off_cpu.and_then(SwitchPairing::oldest_waiting) {
        Some(oldest) => watermark.min(oldest.max(watermark.saturating_sub(ORDER_MAX_LAG_NS))),
        None => watermark,
    }
}

/// How often the writer looks at side files when no batch arrives.
const SIDE_POLL: Duration = Duration::from_millis(100);
/// How often it scans well-known places for side files and refreshes the CLOCK chunk.
const SLOW_POLL: Duration = Duration::from_secs(1);

/// Writer thread body: drains `batches` into PERF_RECORDS chunks until the channel closes,
/// tails side files into SIDE_FILE chunks, and refreshes the CLOCK chunk now and then so a
/// killed recorder still leaves a usable clock.
/// How the writer stores samples' stack copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackCut {
    /// As the kernel wrote them.
    Whole,
    /// A JVM's, cut down (`stack_words`); every mapping of the target is in the records (it
    /// was launched), so words outside them are no return addresses.
    EveryMappingSeen,
    /// A JVM's, cut down keeping every word that may be an address (attached: code mapped
    /// before has no record).
    MayBeAddress,
}

/// How the writer stores samples' stack copies, and whether the end writes the recording
/// again without them (`compact`).
#[derive(Clone, Copy, Debug)]
pub struct StoredStacks {
    /// How the copies are cut.
    pub cut: StackCut,
    /// The finished recording is written again without the copies.
    pub rewritten_at_end: bool,
    /// Copies kept whole, and the frames read past them joined to the samples of the JVMs
    /// the records show mapping libjvm.so (`DeepFrames::watch`).
    pub join_watched: bool,
}

pub fn run(
    mut out: ChunkWriter,
    layout: SampleLayout,
    intake: Intake,
    mut off_cpu: Option<SwitchPairing>,
    calibration: &Calibration,
    side: &mut SideFiles,
    stacks: StoredStacks,
) -> Result<(ChunkWriter, Counters), Error> {
    let StoredStacks {
        cut: stack_cut,
        rewritten_at_end,
        join_watched,
    } = stacks;
    // The JVMs whose samples the program's records join (`join_watched`).
    let mut watched_jvms: Option<rustc_hash::FxHashSet<u32>> = join_watched.then(Default::default);
    let reduce_stacks = stack_cut != StackCut::Whole;
    let mut counters = Counters::default();
    let mut last_slow = Instant::now();
    // Batches are gathered into larger chunks, which compress far better; a SIGKILL loses at
    // most the last RECORDS_FLUSH of records.
    let mut pending: Vec<u8> = Vec::new();
    let mut last_flush = Instant::now();
    // Every record before this time has been read from the rings (the last batch's watermark).
    let mut watermark: Option<u64> = None;
    let mut side_chunks = SideChunks::default();
    let mut deep = super::stack_words::DeepJoin::default();
    deep.found_late = join_watched;
    // What the records mapped, when they hold every mapping of the target: stack words
    // outside them are no return addresses (`stack_words::reduce`).
    let mut mapped =
        (stack_cut == StackCut::EveryMappingSeen).then(super::stack_words::Mapped::default);
    let mut build_ids = super::mapping_build_ids::MappingBuildIds::default();
    // Keeps the top KiB of a JVM's stack copies whole, as jprof did before
    // (docs/java.md): for comparing reports.
    let whole_top = std::env::var_os("JPROF_WHOLE_STACK_TOP").is_some_and(|v| v == "1");
    // Records the end writes again without their copies (`compact`) are kept at the cheaper
    // level until then: only a killed recorder's file keeps them.
    let level = if reduce_stacks && !rewritten_at_end {
        CUT_RECORDS_ZSTD_LEVEL
    } else {
        RECORDS_ZSTD_LEVEL
    };
    let mut levels = RecordsLevel {
        level,
        raw_left: if rewritten_at_end {
            RAW_REWRITTEN_RECORDS_BYTES
        } else {
            0
        },
    };
    let mut level_for = |len: usize| levels.next(len);
    // The buffer a batch is rewritten into (its stacks cut down, or the program's records
    // joined): the batch's own buffer becomes the next one.
    let mut rewritten = Vec::new();
    loop {
        let batch = match intake.batches.recv_timeout(SIDE_POLL) {
            Ok(batch) => Some(batch),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if let Some(mut batch) = batch {
            build_ids.fill(&layout, &mut batch.records);
            if reduce_stacks {
                deep.add(std::mem::take(&mut batch.deep));
                if let Some(mapped) = &mut mapped {
                    mapped.note(&layout, &batch.records);
                }
                rewrite(&mut batch.records, &mut rewritten, |records, out| {
                    reduced(&layout, records, &mut deep, whole_top, mapped.as_ref(), out)
                });
            } else if let Some(jvms) = &mut watched_jvms {
                jvms.extend(std::mem::take(&mut batch.jvms.started));
                if !jvms.is_empty() {
                    deep.add(std::mem::take(&mut batch.deep));
                    rewrite(&mut batch.records, &mut rewritten, |records, out| {
                        joined(&layout, records, &mut deep, jvms, out)
                    });
                }
                for pid in &batch.jvms.ended {
                    jvms.remove(pid);
                }
            }
            counters.observe(&layout, &batch.records, side);
            watermark = batch.complete_before.or(watermark);
            match &mut off_cpu {
                Some(pairing) => {
                    pairing.process(&batch.records, batch.complete_before, &mut pending)
                }
                None => pending.extend_from_slice(&batch.records),
            }
            intake.give_back(batch.records);
        }
        if pending.len() >= RECORDS_CHUNK_BYTES
            || (!pending.is_empty() && last_flush.elapsed() >= RECORDS_FLUSH)
        {
            out.write_records(&pending, level_for(pending.len()))?;
            pending.clear();
            last_flush = Instant::now();
            if let Some(w) = watermark {
                let mark = order_mark(w, off_cpu.as_ref());
                out.write_chunk(ChunkKind::RECORDS_ORDER, &mark.to_le_bytes())?;
            }
        }
        if last_slow.elapsed() >= SLOW_POLL {
            last_slow = Instant::now();
            side.scan_known_places();
            if let Some(clock) = calibration.checkpoint() {
                out.write_json(ChunkKind::CLOCK, &clock)?;
            }
        }
        store_side_pieces(&mut out, side, &mut side_chunks, false)?;
    }
    if let Some(pairing) = off_cpu {
        // Switch-outs are not CPU samples.
        counters.summary.samples = counters.summary.samples.saturating_sub(pairing.seen);
        let (rest, counts) = pairing.finish(counters.last_time);
        pending.extend_from_slice(&rest);
        counters.summary.off_cpu = Some(counts);
    }
    if !pending.is_empty() {
        out.write_records(&pending, level_for(pending.len()))?;
    }
    counters.summary.notes.extend(deep.note());
    counters.summary.notes.extend(build_ids.note());
    side.scan_known_places();
    store_side_pieces(&mut out, side, &mut side_chunks, true)?;
    Ok((out, counters))
}

/// zstd level for side files: they come far slower than perf records, and level 3 packs a
/// jitdump's names, lines and unwind tables a little tighter than level 1 at a cost that does
/// not show.
const SIDE_ZSTD_LEVEL: i32 = 3;

/// Consecutive pieces of one side file waiting to be written as one SIDE_FILE_ZSTD chunk.
struct PendingSide {
    kind: SideKind,
    pid: u32,
    path: String,
    /// When the first of the pieces was read.
    read_at: u64,
    /// Where the first piece starts in the file, and the file bytes covered from there.
    offset: u64,
    file_len: u64,
    crc: crc32fast::Hasher,
    stored: Vec<u8>,
    code_left_out: bool,
    debug_deferred: bool,
    since: Instant,
}

/// Side-file pieces gathered like perf records (up to [`SIDE_CHUNK_BYTES`] or
/// [`RECORDS_FLUSH`]), since one larger frame compresses far better than many small ones. A
/// perf map's pieces are written as they come: when each was read is the only time its
/// entries have.
#[derive(Default)]
pub(crate) struct SideChunks {
    pending: Vec<PendingSide>,
}

impl SideChunks {
    /// Adds one piece (`compact`: the bytes to store when fewer than the file's).
    fn add(
        &mut self,
        out: &mut ChunkWriter,
        piece: &SidePiece<'_>,
        compact: Option<&[u8]>,
        debug_deferred: bool,
    ) -> Result<(), Error> {
        let same_file =
            |p: &PendingSide| p.kind == piece.kind && p.pid == piece.pid && p.path == piece.path;
        if let Some(i) = self.pending.iter().position(&same_file) {
            let p = &self.pending[i];
            if p.offset + p.file_len != piece.offset {
                let gap = self.pending.swap_remove(i);
                write_side(out, gap)?;
            }
        }
        let p = match self.pending.iter().position(same_file) {
            Some(i) => &mut self.pending[i],
            None => {
                self.pending.push(PendingSide {
                    kind: piece.kind,
                    pid: piece.pid,
                    path: piece.path.to_string(),
                    read_at: piece.read_at,
                    offset: piece.offset,
                    file_len: 0,
                    crc: crc32fast::Hasher::new(),
                    stored: Vec::new(),
                    code_left_out: false,
                    debug_deferred: false,
                    since: Instant::now(),
                });
                self.pending.last_mut().expect("just pushed")
            }
        };
        p.file_len += piece.data.len() as u64;
        p.crc.update(piece.data);
        p.stored.extend_from_slice(compact.unwrap_or(piece.data));
        p.code_left_out |= compact.is_some();
        p.debug_deferred |= debug_deferred;
        if piece.kind == SideKind::PERF_MAP {
            self.flush(out, true)?;
        }
        Ok(())
    }

    /// Writes the files gathered long enough (all of them with `all`).
    fn flush(&mut self, out: &mut ChunkWriter, all: bool) -> Result<(), Error> {
        let mut i = 0;
        while i < self.pending.len() {
            let p = &self.pending[i];
            if all || p.stored.len() >= SIDE_CHUNK_BYTES || p.since.elapsed() >= RECORDS_FLUSH {
                let p = self.pending.swap_remove(i);
                write_side(out, p)?;
            } else {
                i += 1;
            }
        }
        Ok(())
    }
}

/// Writes gathered pieces as one SIDE_FILE_ZSTD chunk (as they are, in a SIDE_FILE chunk, if
/// compressing fails and they are the file's own bytes).
fn write_side(out: &mut ChunkWriter, p: PendingSide) -> Result<(), Error> {
    let frame = zstd::bulk::compress(&p.stored, SIDE_ZSTD_LEVEL);
    let piece = |data| SidePiece {
        kind: p.kind,
        pid: p.pid,
        read_at: p.read_at,
        offset: p.offset,
        path: &p.path,
        data,
    };
    match frame {
        Ok(frame) => {
            let packed = PackedSide {
                file_len: p.file_len,
                file_crc: p.crc.clone().finalize(),
                code_left_out: p.code_left_out,
                debug_deferred: p.debug_deferred,
                loads_left_out: false,
            };
            out.write_chunk(
                ChunkKind::SIDE_FILE_ZSTD,
                &encode_packed_side_piece(&piece(&frame), &packed),
            )
        }
        Err(_) if !p.code_left_out => {
            out.write_chunk(ChunkKind::SIDE_FILE, &encode_side_piece(&piece(&p.stored)))
        }
        Err(e) => Err(Error::Other(format!(
            "cannot compress side data of {}: {e}",
            p.path
        ))),
    }
}

/// `records` rewritten by `into` (from the records, appending to an empty buffer) into `spare`,
/// which they then are; their old buffer, emptied, becomes `spare` for the next batch.
fn rewrite(records: &mut Vec<u8>, spare: &mut Vec<u8>, into: impl FnOnce(&[u8], &mut Vec<u8>)) {
    spare.clear();
    into(records, spare);
    std::mem::swap(records, spare);
    spare.clear();
}

/// The batch with every sample's stack copy cut down to the words a report reads
/// (`stack_words`), each sample after the frames read past its copy at sample time, if any,
/// appended to `out`.
fn reduced(
    layout: &SampleLayout,
    records: &[u8],
    deep: &mut super::stack_words::DeepJoin,
    whole_top: bool,
    mapped: Option<&super::stack_words::Mapped>,
    out: &mut Vec<u8>,
) {
    let mut done = 0;
    for raw in RecordIter::new(records).map_while(Result::ok) {
        let end = raw.offset + 8 + raw.body.len();
        let header = &records[raw.offset..raw.offset + 8];
        match super::stack_words::reduce(layout, &raw, header, whole_top, mapped) {
            Some((small, chain)) => {
                out.extend(deep.record_for(&chain).unwrap_or_default());
                out.extend_from_slice(&small);
            }
            None => out.extend_from_slice(&records[raw.offset..end]),
        }
        done = end;
    }
    // A record that does not split is kept with the rest, as it came.
    out.extend_from_slice(&records[done..]);
}

/// The batch with each sample of the processes `jvms` after the frames read past its copy,
/// if any; every record as it came; appended to `out`.
fn joined(
    layout: &SampleLayout,
    records: &[u8],
    deep: &mut super::stack_words::DeepJoin,
    jvms: &rustc_hash::FxHashSet<u32>,
    out: &mut Vec<u8>,
) {
    let mut done = 0;
    for raw in RecordIter::new(records).map_while(Result::ok) {
        let end = raw.offset + 8 + raw.body.len();
        if let Some(chain) =
            super::stack_words::chain_of(layout, &raw).filter(|chain| jvms.contains(&chain.pid))
        {
            out.extend(deep.record_for(&chain).unwrap_or_default());
        }
        out.extend_from_slice(&records[raw.offset..end]);
        done = end;
    }
    out.extend_from_slice(&records[done..]);
}

fn store_side_pieces(
    out: &mut ChunkWriter,
    side: &mut SideFiles,
    chunks: &mut SideChunks,
    last: bool,
) -> Result<(), Error> {
    let now = clock::clock_ns(clock::CLOCK_MONOTONIC).unwrap_or(0);
    let mut result = Ok(());
    side.poll(now, |piece, compact, deferred| {
        if result.is_ok() {
            result = chunks.add(out, &piece, compact, deferred);
        }
    });
    result?;
    chunks.flush(out, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk written with `writev` (header, payload in place, padding) is byte for byte what
    /// `encode_chunk` makes, and records packed by the kept compressor, at two levels in turn,
    /// read back as they went in.
    #[test]
    fn chunks_written_in_parts_are_the_encoded_chunks() {
        use crate::format::recording::encode_chunk;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chunks");
        let mut w = ChunkWriter::append(File::create(&path).unwrap(), &path);
        let payloads: [&[u8]; 3] = [b"", b"seven b", &[7u8; 1000]];
        let mut expected = Vec::new();
        for (i, payload) in payloads.iter().enumerate() {
            w.write_chunk(ChunkKind(100 + i as u32), payload).unwrap();
            expected.extend(encode_chunk(ChunkKind(100 + i as u32), payload));
        }
        let records: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for level in [Some(1), Some(3), Some(1), None] {
            w.write_records(&records, level).unwrap();
        }
        drop(w);
        let written = std::fs::read(&path).unwrap();
        assert_eq!(written[..expected.len()], expected[..]);
        let mut rest = &written[expected.len()..];
        for packed in [true, true, true, false] {
            let len = u64::from_le_bytes(rest[8..16].try_into().unwrap()) as usize;
            let payload = &rest[16..16 + len];
            let kind = u32::from_le_bytes(rest[..4].try_into().unwrap());
            match packed {
                true => {
                    assert_eq!(kind, ChunkKind::PERF_RECORDS_ZSTD.0);
                    let back = zstd::bulk::decompress(payload, records.len()).unwrap();
                    assert!(back == records);
                }
                false => {
                    assert_eq!(kind, ChunkKind::PERF_RECORDS.0);
                    assert!(payload == records);
                }
            }
            rest = &rest[16 + len.next_multiple_of(8)..];
        }
        assert!(rest.is_empty());
    }

    /// The writer gives batch buffers back emptied, keeps at most `SPARE_BUFFERS` waiting, and
    /// lets go of one larger than `SPARE_BUFFER_MAX`; the reader gets a new one when none waits.
    #[test]
    fn batch_buffers_come_back_to_the_reader() {
        let (feed, intake) = Feed::new(1);
        // Too large: not kept, though nothing waits yet.
        intake.give_back(Vec::with_capacity(SPARE_BUFFER_MAX + 1));
        for _ in 0..SPARE_BUFFERS + 1 {
            let mut used = Vec::with_capacity(1 << 20);
            used.extend_from_slice(b"records");
            intake.give_back(used);
        }
        for _ in 0..SPARE_BUFFERS {
            let back = feed.buffer();
            assert!(
                back.is_empty()
                    && back.capacity() >= 1 << 20
                    && back.capacity() <= SPARE_BUFFER_MAX
            );
        }
        assert_eq!(feed.buffer().capacity(), 0);
    }

    /// Records written again at the end go as they are until the budget is spent, then
    /// compressed for the rest of the recording; others are always compressed.
    #[test]
    fn rewritten_records_are_raw_up_to_the_budget_then_compressed() {
        let mut levels = RecordsLevel {
            level: 1,
            raw_left: 100,
        };
        assert_eq!(levels.next(60), None);
        assert_eq!(levels.next(40), None);
        assert_eq!(levels.next(1), Some(1));
        // Spent: a chunk that would have fitted before is compressed too.
        assert_eq!(levels.next(30), Some(1));
        let mut levels = RecordsLevel {
            level: 3,
            raw_left: 50,
        };
        assert_eq!(levels.next(51), Some(3));
        assert_eq!(levels.next(10), Some(3));
        let mut never = RecordsLevel {
            level: 3,
            raw_left: 0,
        };
        assert_eq!(never.next(1), Some(3));
    }

    /// The time without samples is summed per event: two CPUs' events throttled at once count
    /// twice, a stop repeated before its resumption counts from the first, and an event still
    /// throttled at the end counts to the last record.
    #[test]
    fn throttled_time_pairs_each_event_stop_with_its_resumption() {
        let mut counters = Counters::default();
        counters.throttle(1_000, 7, false);
        counters.throttle(1_500, 8, false);
        counters.throttle(1_800, 7, false);
        counters.throttle(3_000, 7, true);
        counters.throttle(2_500, 8, true);
        // A resumption never seen stopped adds nothing.
        counters.throttle(4_000, 9, true);
        counters.throttle(5_000, 9, false);
        counters.last_time = 5_400;
        let summary = counters.finish();
        assert_eq!((summary.throttles, summary.unthrottles), (4, 3));
        assert_eq!(summary.throttled_ns, 2_000 + 1_000 + 400);
    }
}
