//! Decodes a recording's perf records and puts them in time order. Records of different
//! CPUs' rings are interleaved in the file; a stable sort by timestamp restores the order the
//! process model needs. A record without a time keeps its place next to its predecessor.

use crate::format::perf::Record;
use crate::format::ParseError;
use crate::recording::Recording;

/// A decoded record with its sort time and the file offset of its header.
#[derive(Debug)]
pub struct Timed<'a> {
    pub time: u64,
    pub offset: usize,
    pub record: Record<'a>,
}

#[derive(Debug, Default)]
pub struct Ordered<'a> {
    pub records: Vec<Timed<'a>>,
    /// Records that could not be decoded (skipped) and chunks whose record stream broke off.
    pub errors: Vec<ParseError>,
}

/// The time a record carries, if any.
pub fn record_time(record: &Record<'_>) -> Option<u64> {
    match record {
        Record::Sample(s) => Some(s.time),
        Record::Fork { time, .. } | Record::Exit { time, .. } | Record::Throttle { time, .. } => {
            Some(*time)
        }
        Record::Mmap2 { id, .. }
        | Record::Mmap { id, .. }
        | Record::Comm { id, .. }
        | Record::Lost { id, .. }
        | Record::LostSamples { id, .. }
        | Record::Switch { id, .. } => id.time,
        Record::Other(_) => None,
    }
}

pub fn time_ordered(recording: &Recording) -> Ordered<'_> {
    let layout = recording.layout();
    let mut out = Ordered::default();
    let mut previous = 0;
    for raw in recording.perf_records() {
        let raw = match raw {
            Ok(raw) => raw,
            Err(e) => {
                out.errors.push(e);
                continue;
            }
        };
        match layout.parse(&raw) {
            Ok(record) => {
                let time = record_time(&record).unwrap_or(previous);
                previous = time;
                out.records.push(Timed {
                    time,
                    offset: raw.offset,
                    record,
                });
            }
            Err(e) => out.errors.push(e),
        }
    }
    out.records.sort_by_key(|r| r.time);
    out
}
