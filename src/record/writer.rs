//! The writer thread: receives batches of raw perf records from the ring reader over a bounded
//! channel, appends them to the recording as checksummed chunks, and keeps the counters for the
//! summary. Each chunk is written whole with one write, so a SIGKILL leaves a readable prefix.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crossbeam_channel::Receiver;

use crate::error::Error;
use crate::format::perf::{Record, RecordIter, RecordKind, SampleLayout};
use crate::format::recording::{encode_chunk, file_header, ChunkKind};
use crate::recording::{Meta, Summary};

/// Appends chunks to the recording file.
pub struct ChunkWriter {
    file: File,
    path: PathBuf,
}

impl ChunkWriter {
    /// Creates the file and writes the file header and the META chunk.
    pub fn create(path: &Path, meta: &Meta) -> Result<Self, Error> {
        let mut file = File::create(path).map_err(|e| Error::io(path, e))?;
        file.write_all(&file_header())
            .map_err(|e| Error::io(path, e))?;
        let mut w = Self {
            file,
            path: path.to_path_buf(),
        };
        w.write_json(ChunkKind::META, meta)?;
        Ok(w)
    }

    /// Reopens a finished or partial recording to append more chunks.
    pub fn append(path: &Path) -> Result<Self, Error> {
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    pub fn write_chunk(&mut self, kind: ChunkKind, payload: &[u8]) -> Result<(), Error> {
        self.file
            .write_all(&encode_chunk(kind, payload))
            .map_err(|e| Error::io(&self.path, e))
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

/// Counters the writer derives from the records it passes through.
#[derive(Default)]
pub struct Counters {
    pub summary: Summary,
    tids: HashSet<u32>,
    pids: HashSet<u32>,
    first_time: Option<u64>,
    last_time: u64,
}

impl Counters {
    fn observe(&mut self, layout: &SampleLayout, batch: &[u8]) {
        for raw in RecordIter::new(batch).flatten() {
            if let Some(t) = layout.time_of(&raw) {
                self.first_time = Some(self.first_time.map_or(t, |f| f.min(t)));
                self.last_time = self.last_time.max(t);
            }
            match raw.kind {
                RecordKind::SAMPLE => {
                    self.summary.samples += 1;
                    if let Ok(Record::Sample(s)) = layout.parse(&raw) {
                        self.tids.insert(s.tid);
                        self.pids.insert(s.pid);
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
                RecordKind::THROTTLE => self.summary.throttles += 1,
                RecordKind::UNTHROTTLE => self.summary.unthrottles += 1,
                RecordKind::FORK | RecordKind::COMM => {
                    if let Ok(Record::Fork { pid, tid, .. } | Record::Comm { pid, tid, .. }) =
                        layout.parse(&raw)
                    {
                        self.tids.insert(tid);
                        self.pids.insert(pid);
                    }
                }
                _ => {}
            }
        }
    }

    pub fn finish(mut self) -> Summary {
        self.summary.threads = self.tids.len() as u64;
        self.summary.processes = self.pids.len() as u64;
        self.summary.start_time = self.first_time.unwrap_or(0);
        self.summary.end_time = self.last_time;
        self.summary
    }
}

/// Writer thread body: drains `batches` into PERF_RECORDS chunks until the channel closes.
pub fn run(
    mut out: ChunkWriter,
    layout: SampleLayout,
    batches: Receiver<Vec<u8>>,
) -> Result<(ChunkWriter, Counters), Error> {
    let mut counters = Counters::default();
    for batch in batches {
        counters.observe(&layout, &batch);
        out.write_chunk(ChunkKind::PERF_RECORDS, &batch)?;
    }
    Ok((out, counters))
}
