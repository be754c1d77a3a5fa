//! Decodes a recording's perf records and hands them over in time order. Records of different
//! CPUs' rings are interleaved in the file; ordering by timestamp (file order among equal
//! times) restores the order the process model needs. A record without a time keeps its place
//! next to its predecessor.
//!
//! Memory stays bounded by a window, not the recording: only a 16-byte entry per record still
//! to come is kept, with the decompressed chunks those records are in. RECORDS_ORDER marks
//! (written by the recorder) say when everything before a time has been read; a recording
//! without them (older jprof, imports) is ordered whole at its end.

use std::borrow::Cow;

use crate::format::perf::{Record, RecordIter, RecordKind};
use crate::format::ParseError;
use crate::recording::{Recording, RecordsItem};

/// A decoded record with its sort time and the offset of its header.
#[derive(Debug)]
pub struct Timed<'a> {
    /// Sample-clock ns it is ordered by (its predecessor's for a record without a time).
    pub time: u64,
    /// Its header's offset in the recording's record numbering (the file offset in an
    /// uncompressed chunk); stable however the file grows.
    pub offset: usize,
    /// The decoded record.
    pub record: Record<'a>,
}

/// A record still to be handed over: its time, its chunk (in reading order), and where in
/// the chunk it starts. Sorting by all three is time order with file order among equals.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Waiting {
    time: u64,
    chunk: u32,
    at: u32,
}

/// The chunks whose records are still waiting, with how many are.
struct Window<'a> {
    chunks: Vec<Option<(usize, Cow<'a, [u8]>)>>,
    waiting_in: Vec<u32>,
}

/// Hands every record of `recording` to `visit` in time order; returns those that could not
/// be decoded (skipped) and the chunks whose record stream broke off.
pub fn in_time_order(recording: &Recording, mut visit: impl FnMut(&Timed<'_>)) -> Vec<ParseError> {
    let layout = recording.layout();
    let mut errors = Vec::new();
    let mut window = Window {
        chunks: Vec::new(),
        waiting_in: Vec::new(),
    };
    let mut waiting: Vec<Waiting> = Vec::new();
    let mut previous = 0;
    // Hands over what waits from before `before` (None: everything).
    let mut hand_over = |waiting: &mut Vec<Waiting>,
                         window: &mut Window<'_>,
                         before: Option<u64>,
                         errors: &mut Vec<ParseError>| {
        waiting.sort_unstable();
        let n = match before {
            Some(before) => waiting.partition_point(|w| w.time < before),
            None => waiting.len(),
        };
        for w in waiting.drain(..n) {
            let chunk = w.chunk as usize;
            if let Some((base, bytes)) = &window.chunks[chunk] {
                let at = w.at as usize;
                // Split once already when it was read, so this succeeds.
                if let Some(Ok(mut raw)) = RecordIter::new(&bytes[at..]).next() {
                    raw.offset = base + at;
                    // A sample is decoded whole only here (reading it took just its time).
                    match layout.parse(&raw) {
                        Ok(record) => visit(&Timed {
                            time: w.time,
                            offset: raw.offset,
                            record,
                        }),
                        Err(e) => errors.push(e),
                    }
                }
            }
            window.waiting_in[chunk] -= 1;
            if window.waiting_in[chunk] == 0 {
                window.chunks[chunk] = None;
            }
        }
    };
    for item in recording.record_chunks() {
        let (base, bytes) = match item {
            RecordsItem::OrderedBefore(time) => {
                hand_over(&mut waiting, &mut window, Some(time), &mut errors);
                continue;
            }
            RecordsItem::Records { base, bytes } => match bytes {
                Ok(bytes) => (base, bytes),
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            },
        };
        let chunk = window.chunks.len() as u32;
        let mut count = 0;
        for raw in RecordIter::new(&bytes) {
            let raw = match raw {
                Ok(raw) => raw,
                Err(mut e) => {
                    e.offset += base;
                    errors.push(e);
                    continue;
                }
            };
            let at = raw.offset;
            let mut absolute = raw;
            absolute.offset += base;
            // Samples (nearly all records) need only their time now; other kinds are rare.
            let time = if absolute.kind == RecordKind::SAMPLE {
                layout.sample_head(&absolute).map(|head| Some(head.time))
            } else {
                layout.parse(&absolute).map(|record| record.time())
            };
            match time {
                Ok(time) => {
                    let time = time.unwrap_or(previous);
                    previous = time;
                    // Chunks are at most 1 GiB (recording::MAX_INFLATED_CHUNK) or one file's
                    // chunk; a larger one is cut off here rather than misnumbered.
                    let Ok(at) = u32::try_from(at) else { break };
                    waiting.push(Waiting { time, chunk, at });
                    count += 1;
                }
                Err(e) => errors.push(e),
            }
        }
        window.waiting_in.push(count);
        window.chunks.push((count > 0).then_some((base, bytes)));
    }
    hand_over(&mut waiting, &mut window, None, &mut errors);
    errors
}
