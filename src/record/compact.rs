//! The end of a JVM recording: once the symbols are embedded, every report reads a sample's
//! user stack from UNWOUND_STACKS (or its callchain) and its interpreted frames and cut from
//! INTERPRETED_FRAMES, so the samples' stack copies and the frames read past them
//! (JPROF_DEEP_FRAMES) are read by nothing any more. The recording is then written again
//! without them, beside the one written while recording, which it replaces only once
//! complete: a recorder killed before that leaves the whole form (docs/recording-format.md).
//! The jitdumps' CODE_LOAD records no sample's frame was found in are left out of it too
//! (`JitIndex::loads_to_leave_out`), and their JIT_DEBUG groups renumbered to match.

use std::path::Path;

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::foreign_file::AtomicOutput;
use crate::format::perf::{Record, RecordIter, RecordKind, SampleLayout};
use crate::format::recording::{self as container, file_header, ChunkKind, SideKind};
use crate::format::ParseError;
use crate::recording::{CallGraph, Recording, INFLATED_BASE};
use crate::symbolize::{interpreted_frames, jit_hits, unwound, LoadsToLeaveOut};

/// zstd level of the rewritten records: on javac's, gathered without their copies (1 MB),
/// level 3 stores 13% fewer bytes than level 1 in about 2 ms.
const ZSTD_LEVEL: i32 = 3;

/// Whether `recording` is a finished, intact fp-mode recording whose embedding stored what
/// the stack copies said (unwound stacks, interpreted frames); `JPROF_KEEP_STACK_COPIES=1`
/// keeps the copies (for comparing reports that unwind them again).
fn applies(recording: &Recording) -> bool {
    recording.meta.event.call_graph == CallGraph::FramePointers
        && recording.finished
        && recording.stopped.is_none()
        && recording.skipped.is_empty()
        && recording.recovered.is_empty()
        && [ChunkKind::INTERPRETED_FRAMES, ChunkKind::SYMBOLS_ZSTD]
            .iter()
            .all(|&kind| recording.payloads(kind).next().is_some())
        && !keeps_copies()
}

/// `JPROF_KEEP_STACK_COPIES=1`: finished recordings keep their stack copies.
pub(super) fn keeps_copies() -> bool {
    std::env::var_os("JPROF_KEEP_STACK_COPIES").is_some_and(|v| v == "1")
}

/// Writes the recording `written` holds again without its stack copies and the CODE_LOADs
/// `leave_out` names (its embedding's walk found them), beside `dest`, when that [`applies`];
/// the caller commits the returned output (and discards the first one).
pub(super) fn rewrite(
    dest: &Path,
    written: &AtomicOutput,
    leave_out: &LoadsToLeaveOut,
) -> Result<Option<AtomicOutput>> {
    let recording = Recording::written(written.partial_path(), written)?;
    if !applies(&recording) {
        return Ok(None);
    }
    let mut output = AtomicOutput::create(dest)?;
    let at = output.partial_path().to_path_buf();
    let mut file = std::io::BufWriter::new(output.file());
    use std::io::Write;
    file.write_all(&file_header())
        .map_err(|e| Error::io(&at, e))?;
    compact(&recording, leave_out, &mut |kind, payload| {
        file.write_all(&crate::format::recording::encode_chunk(kind, payload))
            .map_err(|e| Error::io(&at, e))
    })?;
    file.flush().map_err(|e| Error::io(&at, e))?;
    drop(file);
    Ok(Some(output))
}

/// [`rewrite`] of the recording at `input` into `output` (for comparing both forms), the
/// CODE_LOADs to leave out found by walking its samples as a report does; an error for a
/// recording it does not apply to.
pub fn compact_recording(input: &Path, output: &Path) -> Result<()> {
    let recording = Recording::open(input)?;
    if !applies(&recording) {
        return Err(Error::Other(format!(
            "{}: not a finished, intact frame-pointer recording whose embedded symbols \
             say what its stack copies held (or JPROF_KEEP_STACK_COPIES=1 is set)",
            input.display()
        )));
    }
    let leave_out = crate::symbolize::loads_to_leave_out(&recording);
    let mut bytes = file_header().to_vec();
    compact(&recording, &leave_out, &mut |kind, payload| {
        bytes.extend(crate::format::recording::encode_chunk(kind, payload));
        Ok(())
    })?;
    crate::foreign_file::write_output(output, |w| std::io::Write::write_all(w, &bytes))
}

/// Every chunk of `recording` handed to `store` in file order, with the perf records
/// without the samples' stack copies and the JPROF_DEEP_FRAMES
/// records, and the UNWOUND_STACKS and INTERPRETED_FRAMES entries keyed by the records' new
/// offsets; the jitdumps' pieces without the CODE_LOADs `leave_out` names, and their JIT_DEBUG
/// groups renumbered.
fn compact(
    recording: &Recording,
    leave_out: &LoadsToLeaveOut,
    store: &mut dyn FnMut(ChunkKind, &[u8]) -> Result<()>,
) -> Result<()> {
    let layout = recording.layout();
    let parse_error = |e: ParseError| Error::parse(&recording.path, e);
    let mut jitdumps = without_loads(recording, leave_out).map_err(parse_error)?;
    let mut records = Records::default();
    let mut renumbered = false;
    for (kind, at, payload, base) in recording.chunks_in_order() {
        match kind {
            ChunkKind::PERF_RECORDS | ChunkKind::PERF_RECORDS_ZSTD => {
                if renumbered {
                    return Err(parse_error(ParseError::new(
                        at,
                        "no perf records after the unwound stacks",
                    )));
                }
                let inflated;
                let bytes = if kind == ChunkKind::PERF_RECORDS_ZSTD {
                    inflated = crate::recording::inflate(payload, at).map_err(parse_error)?;
                    &inflated[..]
                } else {
                    payload
                };
                let chunk = Chunk::cut(&layout, bytes, base as u64, at).map_err(parse_error)?;
                records.add(chunk, store)?;
            }
            ChunkKind::RECORDS_ORDER => {
                let mark = payload
                    .get(..8)
                    .and_then(|b| b.try_into().ok())
                    .map(u64::from_le_bytes)
                    .ok_or_else(|| parse_error(ParseError::new(at, "an 8-byte time")))?;
                records.mark = Some(records.mark.map_or(mark, |m| m.max(mark)));
            }
            ChunkKind::UNWOUND_STACKS | ChunkKind::INTERPRETED_FRAMES => {
                if !renumbered {
                    renumbered = true;
                    records.flush(store)?;
                    let new = |old: u64| records.new_offsets.get(&old).copied();
                    let chunks = |kind| recording.payloads(kind);
                    for chunk in unwound::renumbered(chunks(ChunkKind::UNWOUND_STACKS), new)
                        .map_err(parse_error)?
                    {
                        store(ChunkKind::UNWOUND_STACKS, &chunk)?;
                    }
                    for chunk in
                        interpreted_frames::renumbered(chunks(ChunkKind::INTERPRETED_FRAMES), new)
                            .map_err(parse_error)?
                    {
                        store(ChunkKind::INTERPRETED_FRAMES, &chunk)?;
                    }
                }
            }
            ChunkKind::SIDE_FILE_ZSTD => {
                let (piece, _) =
                    container::parse_packed_side_piece(payload, at).map_err(parse_error)?;
                match jitdumps.get_mut(&(piece.kind, piece.pid, piece.path.to_string())) {
                    Some(pruned) => {
                        let piece = pruned.pieces.pop_front().ok_or_else(|| {
                            parse_error(ParseError::new(at, "the jitdump's pieces as first read"))
                        })?;
                        store(kind, &piece)?;
                    }
                    None => store(kind, payload)?,
                }
            }
            ChunkKind::JIT_DEBUG => {
                let debug = container::parse_jit_debug(payload, at).map_err(parse_error)?;
                let key = (SideKind::JITDUMP, debug.pid, debug.path.to_string());
                let packed = leave_out.jit_debug.get(&(key.1, key.2.clone()));
                match (jitdumps.get(&key), packed) {
                    (Some(_), Some(packed)) => store(kind, packed)?,
                    (Some(pruned), None) => {
                        store(kind, &debug_without_loads(&debug, at, &pruned.left_out)?)?;
                    }
                    (None, _) => store(kind, payload)?,
                }
            }
            _ => store(kind, payload)?,
        }
    }
    records.flush(store)
}

/// zstd level of a jitdump's pieces written again (the recorder's).
const SIDE_ZSTD_LEVEL: i32 = 3;

/// A jitdump's pieces without the CODE_LOADs left out, as SIDE_FILE_ZSTD payloads in file
/// order, and those loads' ordinals, sorted.
struct Pruned {
    pieces: std::collections::VecDeque<Vec<u8>>,
    left_out: Vec<u64>,
}

/// Of each jitdump `leave_out` names loads of, its pieces without them
/// (`jitdump::without_loads`), keyed by (kind, pid, path). A jitdump stored otherwise than in
/// SIDE_FILE_ZSTD pieces that follow on from each other from its start, or whose pieces do
/// not split into records, is kept whole.
fn without_loads(
    recording: &Recording,
    leave_out: &LoadsToLeaveOut,
) -> std::result::Result<FxHashMap<(SideKind, u32, String), Pruned>, ParseError> {
    type Pieces<'a> = Vec<(container::SidePiece<'a>, container::PackedSide, Vec<u8>)>;
    let mut files: FxHashMap<(SideKind, u32, String), Option<Pieces<'_>>> = Default::default();
    for (kind, at, payload, _) in recording.chunks_in_order() {
        let (piece, packed) = match kind {
            ChunkKind::SIDE_FILE_ZSTD => {
                let (piece, packed) = container::parse_packed_side_piece(payload, at)?;
                (piece, Some(packed))
            }
            ChunkKind::SIDE_FILE => (container::parse_side_piece(payload, at)?, None),
            _ => continue,
        };
        let names = |(pid, path): &(u32, String)| *pid == piece.pid && path == piece.path;
        if piece.kind != SideKind::JITDUMP || !leave_out.loads.keys().any(names) {
            continue;
        }
        let key = (piece.kind, piece.pid, piece.path.to_string());
        let file = files.entry(key).or_insert_with(|| Some(Vec::new()));
        let Some(pieces) = file else { continue };
        let covered = pieces
            .last()
            .map_or(0, |(p, packed, _)| p.offset + packed.file_len);
        match packed {
            Some(packed) if piece.offset == covered => {
                let at = at + (payload.len() - piece.data.len());
                let data = crate::recording::inflate(piece.data, at)?;
                pieces.push((piece, packed, data));
            }
            _ => *file = None,
        }
    }
    let mut out = FxHashMap::default();
    'files: for ((kind, pid, path), pieces) in files {
        let (Some(pieces), Some(left_out)) = (pieces, leave_out.loads.get(&(pid, path.clone())))
        else {
            continue;
        };
        let data: Vec<&[u8]> = pieces.iter().map(|(_, _, d)| &d[..]).collect();
        let Ok(kept) = crate::format::jitdump::without_loads(&data, |o| left_out.contains(&o))
        else {
            continue;
        };
        let mut encoded = std::collections::VecDeque::with_capacity(pieces.len());
        for ((piece, packed, _), kept) in pieces.iter().zip(kept) {
            // (zstd does not fail on memory it could allocate.)
            let Ok(frame) = zstd::bulk::compress(&kept, SIDE_ZSTD_LEVEL) else {
                continue 'files;
            };
            let packed = container::PackedSide {
                loads_left_out: true,
                ..*packed
            };
            let piece = container::SidePiece {
                data: &frame,
                ..*piece
            };
            encoded.push_back(container::encode_packed_side_piece(&piece, &packed));
        }
        let left_out = left_out.iter().copied().collect();
        out.insert(
            (kind, pid, path),
            Pruned {
                pieces: encoded,
                left_out,
            },
        );
    }
    Ok(out)
}

/// A JIT_DEBUG chunk (`debug`, found at `at`) with its groups renumbered for the CODE_LOADs
/// `left_out` (`jit_hits::groups_without_loads`), packed as the end packs them.
fn debug_without_loads(
    debug: &container::JitDebug<'_>,
    at: usize,
    left_out: &[u64],
) -> Result<Vec<u8>> {
    let parse_error = |e: ParseError| Error::Other(format!("JIT_DEBUG of {}: {e}", debug.path));
    let groups = crate::recording::inflate(debug.data, at).map_err(parse_error)?;
    let (read, damaged) = container::parse_jit_debug_groups(&groups, 0);
    if let Some(e) = damaged {
        return Err(parse_error(e));
    }
    let renumbered = jit_hits::groups_without_loads(&read, left_out);
    let groups = container::encode_jit_debug_groups(renumbered.iter().map(|(o, g)| (*o, &g[..])));
    let frame = match jit_hits::packer() {
        Some(mut packer) => packer.compress(&groups),
        None => zstd::bulk::compress(&groups, jit_hits::JIT_DEBUG_ZSTD_LEVEL),
    }
    .map_err(|e| Error::Other(format!("compressing JIT_DEBUG: {e}")))?;
    Ok(container::encode_jit_debug(&container::JitDebug {
        data: &frame,
        ..*debug
    }))
}

/// Records are gathered into chunks of at most this many bytes (before compression): a few
/// large chunks compress far better than the recorder's 250 ms ones, and a report still
/// holds no more than this of them at a time.
const CHUNK_BYTES: usize = 4 << 20;

/// One records chunk without its stack copies and JPROF_DEEP_FRAMES records.
struct Chunk {
    bytes: Vec<u8>,
    /// (old offset, offset in `bytes`) of each sample.
    samples: Vec<(u64, usize)>,
    /// The earliest time of its records; None when one has no time (it then takes its
    /// predecessor's when sorted) or does not decode.
    earliest: Option<u64>,
}

impl Chunk {
    /// The records of one chunk, numbered from `base`, found at file offset `at`.
    fn cut(
        layout: &SampleLayout,
        bytes: &[u8],
        base: u64,
        at: usize,
    ) -> std::result::Result<Self, ParseError> {
        let mut out = Chunk {
            bytes: Vec::with_capacity(bytes.len() / 4),
            samples: Vec::new(),
            earliest: Some(u64::MAX),
        };
        for raw in RecordIter::new(bytes) {
            let raw = raw.map_err(|e| ParseError::new(at, e.expected))?;
            let whole = &bytes[raw.offset..raw.offset + 8 + raw.body.len()];
            if raw.kind == RecordKind::JPROF_DEEP_FRAMES {
                continue;
            }
            let record = layout.parse(&raw);
            let time = record.as_ref().ok().and_then(Record::time);
            out.earliest = out.earliest.zip(time).map(|(a, b)| a.min(b));
            let span = match &record {
                Ok(Record::Sample(s)) => {
                    out.samples
                        .push((base + raw.offset as u64, out.bytes.len()));
                    copy_span(raw.body, s.stack_user)
                }
                _ => None,
            };
            match span {
                Some(span) => {
                    let size = 8 + span.start + 8 + (raw.body.len() - span.end);
                    let size = u16::try_from(size)
                        .map_err(|_| ParseError::new(at, "a record of at most 64 KiB"))?;
                    out.bytes.extend_from_slice(&whole[..6]);
                    out.bytes.extend(size.to_le_bytes());
                    out.bytes.extend_from_slice(&raw.body[..span.start]);
                    out.bytes.extend(0u64.to_le_bytes());
                    out.bytes.extend_from_slice(&raw.body[span.end..]);
                }
                None => out.bytes.extend_from_slice(whole),
            }
        }
        Ok(out)
    }
}

/// The rewritten perf records not yet stored, and where each sample went.
#[derive(Default)]
struct Records {
    pending: Vec<u8>,
    /// The offset the next chunk's records are numbered from, less [`INFLATED_BASE`].
    stored: u64,
    /// The RECORDS_ORDER mark after `pending` (the latest, when several came), not yet stored.
    mark: Option<u64>,
    /// Old record offset → new, for every sample.
    new_offsets: FxHashMap<u64, u64>,
}

impl Records {
    /// Adds a chunk to the pending records, or stores those and the mark after them first.
    /// A report walks the samples in the order the embedding did (the order of the
    /// UNWOUND_STACKS and INTERPRETED_FRAMES entries) as long as no record is taken with
    /// another window of the time-ordered reading: the mark between two chunks is left out
    /// only when every record of the second is no earlier than it (an off-CPU switch-out
    /// stored late would be), as then both windows' records come out in the same order
    /// together.
    fn add(
        &mut self,
        chunk: Chunk,
        store: &mut dyn FnMut(ChunkKind, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let in_order = match (self.mark, chunk.earliest) {
            (None, Some(_)) => true,
            (Some(mark), Some(earliest)) => earliest >= mark,
            (_, None) => false,
        };
        if !(in_order && self.pending.len() + chunk.bytes.len() <= CHUNK_BYTES) {
            self.flush(store)?;
        }
        self.mark = None;
        let start = INFLATED_BASE as u64 + self.stored + self.pending.len() as u64;
        for (old, at) in chunk.samples {
            self.new_offsets.insert(old, start + at as u64);
        }
        self.pending.extend(chunk.bytes);
        Ok(())
    }

    /// Stores the pending records as one chunk, then the mark after them.
    fn flush(&mut self, store: &mut dyn FnMut(ChunkKind, &[u8]) -> Result<()>) -> Result<()> {
        if !self.pending.is_empty() {
            match zstd::bulk::compress(&self.pending, ZSTD_LEVEL) {
                Ok(packed) => store(ChunkKind::PERF_RECORDS_ZSTD, &packed)?,
                Err(e) => return Err(Error::Other(format!("compressing records: {e}"))),
            }
            self.stored += self.pending.len() as u64;
            self.pending.clear();
        }
        if let Some(mark) = self.mark.take() {
            store(ChunkKind::RECORDS_ORDER, &mark.to_le_bytes())?;
        }
        Ok(())
    }
}

/// Where a sample's STACK_USER field lies in its `body` (its size, the copy and the copy's
/// dynamic size), given the copy `stack` the parser found in it; None for a sample without
/// one (a size of 0 is the whole field).
fn copy_span(body: &[u8], stack: &[u8]) -> Option<std::ops::Range<usize>> {
    let at = (stack.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    let start = at.checked_sub(8)?;
    let size = u64::from_le_bytes(body.get(start..at)?.try_into().ok()?);
    let end = at
        .checked_add(usize::try_from(size).ok()?)?
        .checked_add(8)?;
    (size > 0 && end <= body.len()).then_some(start..end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::recording::encode_chunk;

    /// A jprof sample record (IP, TID, TIME, CPU, PERIOD, CALLCHAIN, REGS_USER, STACK_USER)
    /// with a user callchain of `chain` and a stack copy of `copy`.
    fn sample(time: u64, chain: &[u64], copy: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend(chain[0].to_le_bytes());
        body.extend(7u32.to_le_bytes());
        body.extend(8u32.to_le_bytes());
        body.extend(time.to_le_bytes());
        body.extend(0u64.to_le_bytes());
        body.extend(1_000_000u64.to_le_bytes());
        body.extend((chain.len() as u64).to_le_bytes());
        chain.iter().for_each(|a| body.extend(a.to_le_bytes()));
        body.extend(2u64.to_le_bytes());
        [0x7ff0u64, 0x7f00, chain[0]]
            .iter()
            .for_each(|r| body.extend(r.to_le_bytes()));
        body.extend((copy.len() as u64).to_le_bytes());
        body.extend(copy);
        if !copy.is_empty() {
            body.extend((copy.len() as u64).to_le_bytes());
        }
        let mut r = RecordKind::SAMPLE.0.to_le_bytes().to_vec();
        r.extend(2u16.to_le_bytes());
        r.extend(((8 + body.len()) as u16).to_le_bytes());
        r.extend(body);
        r
    }

    fn deep_frames(time: u64) -> Vec<u8> {
        let mut r = RecordKind::JPROF_DEEP_FRAMES.0.to_le_bytes().to_vec();
        r.extend(0u16.to_le_bytes());
        r.extend(56u16.to_le_bytes());
        r.extend(7u32.to_le_bytes());
        r.extend(8u32.to_le_bytes());
        r.extend(time.to_le_bytes());
        [0x7f10u64, 0x7f20, 0x401000, 0x9000]
            .iter()
            .for_each(|w| r.extend(w.to_le_bytes()));
        r
    }

    /// A finished recording of two samples (the second with frames past its copy) whose
    /// embedding stored an unwound stack for the second and an interpreted frame for the
    /// first; `unwound_at`: the record offset the unwound stack names.
    fn recording(unwound_at: Option<u64>, end: bool) -> (Vec<u8>, usize) {
        let a = sample(10, &[0x401000, 0x402000], &[0xaa; 64]);
        let b = sample(20, &[0x403000], &[0xbb; 32]);
        let mut records = a.clone();
        records.extend(deep_frames(20));
        records.extend(&b);
        let meta = crate::recording::default_meta(&records).expect("jprof's own layout");
        let (a_at, b_at) = (INFLATED_BASE as u64, (INFLATED_BASE + a.len() + 56) as u64);
        let mut stacks = unwound::StackWriter::default();
        let unwound_at = unwound_at.unwrap_or(b_at);
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        chunks.extend(stacks.push(20, unwound_at, &[0x403000, 0x404000], &[0x403000]));
        let mut frames = interpreted_frames::Writer::default();
        chunks.extend(frames.push(10, a_at, None, &[None, Some(0x7000_1000)]));
        let mut file = file_header().to_vec();
        file.extend(encode_chunk(
            ChunkKind::META,
            &serde_json::to_vec(&meta).unwrap(),
        ));
        file.extend(encode_chunk(
            ChunkKind::PERF_RECORDS_ZSTD,
            &zstd::bulk::compress(&records, 1).unwrap(),
        ));
        file.extend(encode_chunk(ChunkKind::RECORDS_ORDER, &30u64.to_le_bytes()));
        file.extend(encode_chunk(
            ChunkKind::UNWOUND_STACKS,
            &stacks.finish().unwrap(),
        ));
        file.extend(encode_chunk(
            ChunkKind::INTERPRETED_FRAMES,
            &frames.finish().unwrap(),
        ));
        file.extend(encode_chunk(ChunkKind::SYMBOLS_ZSTD, b"names"));
        if end {
            file.extend(encode_chunk(ChunkKind::END, &[]));
        }
        (file, a.len() + b.len())
    }

    fn compacted(file: Vec<u8>) -> Result<Vec<u8>> {
        let recording = Recording::from_bytes("test.data".into(), file)?;
        let mut out = file_header().to_vec();
        compact(
            &recording,
            &LoadsToLeaveOut::default(),
            &mut |kind, payload| {
                out.extend(encode_chunk(kind, payload));
                Ok(())
            },
        )?;
        Ok(out)
    }

    #[test]
    fn samples_lose_their_copies_and_entries_follow_their_new_offsets() {
        let (file, samples_len) = recording(None, true);
        assert!(applies(
            &Recording::from_bytes("t".into(), file.clone()).unwrap()
        ));
        let out = Recording::from_bytes("out".into(), compacted(file).unwrap()).unwrap();
        assert!(out.finished && out.stopped.is_none());
        let layout = out.layout();
        let mut offsets = Vec::new();
        for (kind, _, payload, base) in out.chunks_in_order() {
            if kind != ChunkKind::PERF_RECORDS_ZSTD {
                continue;
            }
            let records = crate::recording::inflate(payload, 0).unwrap();
            for raw in RecordIter::new(&records).map(|r| r.unwrap()) {
                assert_eq!(raw.kind, RecordKind::SAMPLE, "deep frames left out");
                let Ok(Record::Sample(s)) = layout.parse(&raw) else {
                    panic!("a sample that parses");
                };
                assert!(s.stack_user.is_empty());
                assert_eq!(s.regs_user.iter().count(), 3);
                offsets.push((s.time, (base + raw.offset) as u64));
            }
            // Each copy went with its dynamic size; the size field stays, 0.
            assert_eq!(records.len(), samples_len - (64 + 8) - (32 + 8));
        }
        assert_eq!(offsets.len(), 2);
        let (a_at, b_at) = (offsets[0].1, offsets[1].1);
        assert_eq!(a_at, INFLATED_BASE as u64);
        let mut stacks =
            unwound::StackReader::new(out.payloads(ChunkKind::UNWOUND_STACKS), |_, _| {});
        assert_eq!(
            stacks.take(b_at, &[0x403000]),
            Some(vec![0x403000, 0x404000])
        );
        let mut frames =
            interpreted_frames::Reader::new(out.payloads(ChunkKind::INTERPRETED_FRAMES), |_, _| {});
        let entry = frames.take(a_at).expect("the first sample's entry");
        assert_eq!(entry.per_frame(2), [None, Some(0x7000_1000)]);
        assert_eq!(
            out.payloads(ChunkKind::SYMBOLS_ZSTD).next().map(|(_, p)| p),
            Some(&b"names"[..])
        );
    }

    /// Chunks are gathered while no record comes before the mark between them: a late one
    /// (an off-CPU switch-out stored when its thread ran again) keeps its mark before it.
    #[test]
    fn chunks_are_gathered_unless_a_record_would_change_windows() {
        let s = |t| sample(t, &[0x401000], &[0xcc; 16]);
        let meta = crate::recording::default_meta(&s(1)).unwrap();
        let mut file = file_header().to_vec();
        file.extend(encode_chunk(
            ChunkKind::META,
            &serde_json::to_vec(&meta).unwrap(),
        ));
        for (times, mark) in [(&[10u64][..], 15u64), (&[20, 22], 25), (&[12, 26], 30)] {
            let records: Vec<u8> = times.iter().flat_map(|&t| s(t)).collect();
            let packed = zstd::bulk::compress(&records, 1).unwrap();
            file.extend(encode_chunk(ChunkKind::PERF_RECORDS_ZSTD, &packed));
            file.extend(encode_chunk(ChunkKind::RECORDS_ORDER, &mark.to_le_bytes()));
        }
        file.extend(encode_chunk(ChunkKind::END, &[]));
        let out = Recording::from_bytes("out".into(), compacted(file).unwrap()).unwrap();
        let layout = out.layout();
        let mut seen = Vec::new();
        for (kind, _, payload, _) in out.chunks_in_order() {
            match kind {
                ChunkKind::PERF_RECORDS_ZSTD => {
                    let records = crate::recording::inflate(payload, 0).unwrap();
                    let times: Vec<u64> = RecordIter::new(&records)
                        .map(|r| layout.parse(&r.unwrap()).unwrap().time().unwrap())
                        .collect();
                    seen.push(format!("{times:?}"));
                }
                ChunkKind::RECORDS_ORDER => seen.push(format!(
                    "mark {}",
                    u64::from_le_bytes(payload.try_into().unwrap())
                )),
                _ => {}
            }
        }
        assert_eq!(seen, ["[10, 20, 22]", "mark 25", "[12, 26]", "mark 30"]);
    }

    /// A jitdump's pieces lose the loads left out (flag bit 2, the file's length and CRC kept)
    /// and its JIT_DEBUG groups are numbered by the loads kept; a jitdump whose pieces do not
    /// follow on from each other is kept whole, JIT_DEBUG and all.
    #[test]
    fn jitdump_pieces_lose_the_loads_left_out() {
        use crate::format::jitdump_write as w;
        use container::{JitDebug, PackedSide, SidePiece};
        let path = "/tmp/jit-7.dump";
        let load = |i: u64| {
            w::code_load(
                i,
                &w::CodeLoad {
                    pid: 7,
                    tid: 7,
                    code_addr: 0x1000 * (i + 1),
                    code_index: i,
                    name: "f",
                    code: &[],
                },
            )
        };
        let names = w::method_names(1, &[(0x77, "Lp/A;run".to_string())]);
        let lines = w::debug_info(2, 0x4000, &[(0x4000, 3, "A.java")]);
        let with_pieces = |second_at: u64| {
            let pieces = [
                [w::header(7, 0, false), load(0), load(1)].concat(),
                [load(2), load(3)].concat(),
            ];
            let (mut file, _) = recording(None, false);
            for (piece, offset) in pieces.iter().zip([0, second_at]) {
                let frame = zstd::bulk::compress(piece, 3).unwrap();
                let side = SidePiece {
                    kind: SideKind::JITDUMP,
                    pid: 7,
                    read_at: 5,
                    offset,
                    path,
                    data: &frame,
                };
                let packed = PackedSide {
                    file_len: piece.len() as u64 + 100,
                    file_crc: 0xc0de,
                    code_left_out: true,
                    debug_deferred: true,
                    loads_left_out: false,
                };
                let payload = container::encode_packed_side_piece(&side, &packed);
                file.extend(encode_chunk(ChunkKind::SIDE_FILE_ZSTD, &payload));
            }
            let groups = container::encode_jit_debug_groups([(1, &names[..]), (3, &lines[..])]);
            let data = zstd::bulk::compress(&groups, 9).unwrap();
            let debug = container::encode_jit_debug(&JitDebug {
                pid: 7,
                path,
                data: &data,
            });
            file.extend(encode_chunk(ChunkKind::JIT_DEBUG, &debug));
            file.extend(encode_chunk(ChunkKind::END, &[]));
            file
        };
        let leave_out = LoadsToLeaveOut {
            loads: [((7, path.to_string()), [0u64, 2].into())].into(),
            jit_debug: Default::default(),
        };
        let rewritten = |file: Vec<u8>| {
            let recording = Recording::from_bytes("test.data".into(), file).unwrap();
            let mut out = Vec::new();
            compact(&recording, &leave_out, &mut |kind, payload| {
                if matches!(kind, ChunkKind::SIDE_FILE_ZSTD | ChunkKind::JIT_DEBUG) {
                    out.push((kind, payload.to_vec()));
                }
                Ok(())
            })
            .unwrap();
            out
        };
        let first_len = (w::header(7, 0, false).len() + 2 * load(0).len()) as u64 + 100;
        let file = with_pieces(first_len);
        let out = rewritten(file);
        let stored: Vec<(PackedSide, Vec<u8>)> = out
            .iter()
            .filter(|(kind, _)| *kind == ChunkKind::SIDE_FILE_ZSTD)
            .map(|(_, p)| {
                let (piece, packed) = container::parse_packed_side_piece(p, 0).unwrap();
                (packed, zstd::stream::decode_all(piece.data).unwrap())
            })
            .collect();
        assert_eq!(stored.len(), 2);
        assert!(stored
            .iter()
            .all(|(p, _)| p.loads_left_out && p.file_crc == 0xc0de));
        assert_eq!(stored[0].0.file_len, first_len);
        assert_eq!(stored[0].1, [w::header(7, 0, false), load(1)].concat());
        assert_eq!(stored[1].1, load(3));
        let (_, debug) = out
            .iter()
            .find(|(k, _)| *k == ChunkKind::JIT_DEBUG)
            .unwrap();
        let debug = container::parse_jit_debug(debug, 0).unwrap();
        let groups = zstd::stream::decode_all(debug.data).unwrap();
        let (groups, error) = container::parse_jit_debug_groups(&groups, 0);
        assert!(error.is_none());
        assert_eq!(groups, [(0, &names[..]), (1, &lines[..])]);

        // The second piece not where the first ends: all kept as it was.
        let file = with_pieces(first_len + 8);
        let original = Recording::from_bytes("t".into(), file.clone()).unwrap();
        let before: Vec<Vec<u8>> = original
            .chunks_in_order()
            .filter(|(k, ..)| matches!(*k, ChunkKind::SIDE_FILE_ZSTD | ChunkKind::JIT_DEBUG))
            .map(|(_, _, p, _)| p.to_vec())
            .collect();
        let after: Vec<Vec<u8>> = rewritten(file).into_iter().map(|(_, p)| p).collect();
        assert_eq!(before, after);
    }

    #[test]
    fn what_does_not_apply_or_does_not_line_up_is_an_error() {
        // A recorder killed before its end: not rewritten.
        let (file, _) = recording(None, false);
        assert!(!applies(&Recording::from_bytes("t".into(), file).unwrap()));
        let dir = tempfile::tempdir().unwrap();
        let (input, output) = (dir.path().join("in.data"), dir.path().join("out.data"));
        std::fs::write(&input, recording(None, false).0).unwrap();
        let err = compact_recording(&input, &output).unwrap_err().to_string();
        assert!(err.contains("embedded symbols say what"), "{err}");
        assert!(!output.exists());
        // An unwound stack naming no sample record.
        let err = compacted(recording(Some(12345), true).0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unwound stack"), "{err}");
    }
}
