//! The end of a JVM recording: once the symbols are embedded, every report reads a sample's
//! user stack from UNWOUND_STACKS (or its callchain) and its interpreted frames and cut from
//! INTERPRETED_FRAMES, so the samples' stack copies and the frames read past them
//! (JPROF_DEEP_FRAMES) are read by nothing any more. The recording is then written again
//! without them, beside the one written while recording, which it replaces only once
//! complete: a recorder killed before that leaves the whole form (docs/recording-format.md).

use std::path::Path;

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::foreign_file::AtomicOutput;
use crate::format::perf::{Record, RecordIter, RecordKind, SampleLayout};
use crate::format::recording::{file_header, ChunkKind};
use crate::format::ParseError;
use crate::recording::{CallGraph, Recording, INFLATED_BASE};
use crate::symbolize::{interpreted_frames, unwound};

/// zstd level of the rewritten records: on javac's (the recorder's 250 ms chunks, without
/// their copies) level 3 stored as many bytes as level 1 and level 9 a tenth fewer, for
/// about 3 and 12 ms more of the end's CPU than level 1's 10 ms in all.
const ZSTD_LEVEL: i32 = 1;

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
        && std::env::var_os("JPROF_KEEP_STACK_COPIES").is_none_or(|v| v != "1")
}

/// Writes the recording at `partial` again without its stack copies, beside `dest`, when
/// that [`applies`]; the caller commits the returned output (and discards the first one).
pub(super) fn rewrite(dest: &Path, partial: &Path) -> Result<Option<AtomicOutput>> {
    let recording = Recording::open(partial)?;
    if !applies(&recording) {
        return Ok(None);
    }
    let mut output = AtomicOutput::create(dest)?;
    let at = output.partial_path().to_path_buf();
    let mut file = std::io::BufWriter::new(output.file());
    use std::io::Write;
    file.write_all(&file_header())
        .map_err(|e| Error::io(&at, e))?;
    compact(&recording, &mut |kind, payload| {
        file.write_all(&crate::format::recording::encode_chunk(kind, payload))
            .map_err(|e| Error::io(&at, e))
    })?;
    file.flush().map_err(|e| Error::io(&at, e))?;
    drop(file);
    Ok(Some(output))
}

/// [`rewrite`] of the recording at `input` into `output` (for comparing both forms).
pub fn compact_recording(input: &Path, output: &Path) -> Result<()> {
    let recording = Recording::open(input)?;
    let mut bytes = file_header().to_vec();
    compact(&recording, &mut |kind, payload| {
        bytes.extend(crate::format::recording::encode_chunk(kind, payload));
        Ok(())
    })?;
    crate::foreign_file::write_output(output, |w| std::io::Write::write_all(w, &bytes))
}

/// Every chunk of `recording` handed to `store` in file order, with the perf records
/// without the samples' stack copies and the JPROF_DEEP_FRAMES
/// records, and the UNWOUND_STACKS and INTERPRETED_FRAMES entries keyed by the records' new
/// offsets.
fn compact(
    recording: &Recording,
    store: &mut dyn FnMut(ChunkKind, &[u8]) -> Result<()>,
) -> Result<()> {
    let layout = recording.layout();
    let parse_error = |e: ParseError| Error::parse(&recording.path, e);
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
                records
                    .add(&layout, bytes, base as u64, at)
                    .map_err(parse_error)?;
                // Chunk for chunk: the RECORDS_ORDER marks between them stay where they
                // were, so a report walks the samples in the order the embedding did, the
                // order of the UNWOUND_STACKS and INTERPRETED_FRAMES entries.
                records.flush(store)?;
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
            _ => store(kind, payload)?,
        }
    }
    records.flush(store)
}

/// The rewritten perf records not yet stored, and where each sample went.
#[derive(Default)]
struct Records {
    pending: Vec<u8>,
    /// The offset the next chunk's records are numbered from, less [`INFLATED_BASE`].
    stored: u64,
    /// Old record offset → new, for every sample.
    new_offsets: FxHashMap<u64, u64>,
}

impl Records {
    /// Adds the records of one chunk, numbered from `base`, found at file offset `at`.
    fn add(
        &mut self,
        layout: &SampleLayout,
        bytes: &[u8],
        base: u64,
        at: usize,
    ) -> std::result::Result<(), ParseError> {
        for raw in RecordIter::new(bytes) {
            let raw = raw.map_err(|e| ParseError::new(at, e.expected))?;
            let whole = &bytes[raw.offset..raw.offset + 8 + raw.body.len()];
            match raw.kind {
                RecordKind::JPROF_DEEP_FRAMES => continue,
                RecordKind::SAMPLE => {
                    let new = INFLATED_BASE as u64 + self.stored + self.pending.len() as u64;
                    self.new_offsets.insert(base + raw.offset as u64, new);
                    match layout.parse(&raw) {
                        Ok(Record::Sample(s)) => match copy_span(raw.body, s.stack_user) {
                            Some(span) => {
                                let size = 8 + span.start + 8 + (raw.body.len() - span.end);
                                let size = u16::try_from(size).map_err(|_| {
                                    ParseError::new(at, "a record of at most 64 KiB")
                                })?;
                                self.pending.extend_from_slice(&whole[..6]);
                                self.pending.extend(size.to_le_bytes());
                                self.pending.extend_from_slice(&raw.body[..span.start]);
                                self.pending.extend(0u64.to_le_bytes());
                                self.pending.extend_from_slice(&raw.body[span.end..]);
                            }
                            None => self.pending.extend_from_slice(whole),
                        },
                        _ => self.pending.extend_from_slice(whole),
                    }
                }
                _ => self.pending.extend_from_slice(whole),
            }
        }
        Ok(())
    }

    fn flush(&mut self, store: &mut dyn FnMut(ChunkKind, &[u8]) -> Result<()>) -> Result<()> {
        if !self.pending.is_empty() {
            match zstd::bulk::compress(&self.pending, ZSTD_LEVEL) {
                Ok(packed) => store(ChunkKind::PERF_RECORDS_ZSTD, &packed)?,
                Err(e) => return Err(Error::Other(format!("compressing records: {e}"))),
            }
            self.stored += self.pending.len() as u64;
            self.pending.clear();
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
