//! The jitdump records a recording keeps only for what its samples hit: line tables
//! (DEBUG_INFO), inline trees (DEBUG_INFO2) and VM method names (METHOD_NAMES) are most of a
//! JVM's jitdump, and most of them describe code no sample lands in. While recording they are
//! taken out of the stored pieces and set aside here, compressed, in an unnamed temporary file;
//! at the end `symbolize` keeps those of the code and methods the samples hit (JIT_DEBUG
//! chunks). CODE_LOAD records stay in the pieces: the timeline needs every one of them.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};

use crate::format::jitdump::{self, RecordId};
use crate::format::Endian;
use crate::recording::DeferredDebug;
use crate::symbolize::jit_hits::AFTER_LAST_LOAD;

/// Where one jitdump stands: how many CODE_LOAD records went by, and the deferred records
/// since the last one (they belong to the next).
#[derive(Default)]
pub(crate) struct Splitter {
    loads: u64,
    group: Vec<u8>,
}

impl Splitter {
    /// `records` (whole jitdump records) without the deferrable ones, which go to `spool`
    /// grouped by the CODE_LOAD they precede.
    pub(crate) fn split(
        &mut self,
        records: &[u8],
        endian: Endian,
        spool: &mut Spool,
        file: (u32, &str),
    ) -> Vec<u8> {
        let (whole, tail) = jitdump::split_records(records, endian);
        let mut kept = Vec::with_capacity(records.len() / 2);
        for (id, record) in whole {
            if jitdump::is_deferrable(id) {
                self.group.extend_from_slice(record);
                continue;
            }
            if id == RecordId::CODE_LOAD {
                if !self.group.is_empty() {
                    spool.push(file, self.loads, &self.group);
                    self.group.clear();
                }
                self.loads += 1;
            }
            kept.extend_from_slice(record);
        }
        kept.extend_from_slice(tail);
        kept
    }

    /// The file is read to its end: deferred records no CODE_LOAD followed go to `spool` too,
    /// to be put after the last one.
    pub(crate) fn finish(&mut self, spool: &mut Spool, file: (u32, &str)) {
        if !self.group.is_empty() {
            spool.push(file, AFTER_LAST_LOAD, &self.group);
            self.group.clear();
        }
    }
}

/// How a zstd frame starts (a raw block starts with a small file number).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Uncompressed bytes gathered before they are compressed into the spool.
const BLOCK_BYTES: usize = 1 << 20;
/// zstd level of the spool's blocks: zstd's fastest (negative) levels pack these records
/// about 4.8 times, where level 3 packed them 5.4 times at half the speed: javac's 5.8 MB of
/// inline trees and method names took 20 ms of the writer's CPU beside the JVM at level 3, 10
/// at -1 (docs/performance.md). The spool is read back at the end and never stored as it is.
const SPOOL_ZSTD_LEVEL: i32 = -1;

/// The deferred records of every jitdump of a recording: blocks of `u32 file, u64 ordinal,
/// u32 len, records`, each a zstd frame, in an unnamed temporary file (in memory if none can
/// be made), so a long recording's memory does not grow with them.
#[derive(Default)]
pub struct Spool {
    files: Vec<(u32, String)>,
    ids: HashMap<(u32, String), u32>,
    buffer: Vec<u8>,
    blocks: Vec<Block>,
    file: Option<File>,
    /// No temporary file could be made (blocks are kept in memory), or writing one failed.
    problem: Option<String>,
}

enum Block {
    /// A zstd frame in the temporary file, of `raw_len` bytes decompressed.
    InFile {
        offset: u64,
        len: usize,
        raw_len: usize,
    },
    /// A zstd frame kept in memory.
    Compressed { frame: Vec<u8>, raw_len: usize },
    /// Bytes zstd would not compress (it does not fail on valid input).
    Raw(Vec<u8>),
}

impl Spool {
    fn push(&mut self, (pid, path): (u32, &str), ordinal: u64, records: &[u8]) {
        let next = self.files.len() as u32;
        let id = *self
            .ids
            .entry((pid, path.to_string()))
            .or_insert_with(|| next);
        if id == next {
            self.files.push((pid, path.to_string()));
        }
        self.buffer.extend_from_slice(&id.to_le_bytes());
        self.buffer.extend_from_slice(&ordinal.to_le_bytes());
        self.buffer
            .extend_from_slice(&(records.len() as u32).to_le_bytes());
        self.buffer.extend_from_slice(records);
        if self.buffer.len() >= BLOCK_BYTES {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let Ok(frame) = zstd::bulk::compress(&self.buffer, SPOOL_ZSTD_LEVEL) else {
            self.blocks
                .push(Block::Raw(std::mem::take(&mut self.buffer)));
            return;
        };
        // The buffer keeps its capacity for the next block.
        let raw_len = self.buffer.len();
        self.buffer.clear();
        match self.write(&frame) {
            Ok(offset) => self.blocks.push(Block::InFile {
                offset,
                len: frame.len(),
                raw_len,
            }),
            Err(e) => {
                self.problem.get_or_insert(e);
                self.blocks.push(Block::Compressed { frame, raw_len });
            }
        }
    }

    /// Appends `frame` to the temporary file (made on first use: unnamed, so no other user can
    /// reach it through a name); its offset there.
    fn write(&mut self, frame: &[u8]) -> Result<u64, String> {
        if self.file.is_none() && self.problem.is_none() {
            self.file = Some(tempfile::tempfile().map_err(|e| {
                format!("no temporary file for JIT line tables ({e}); kept in memory")
            })?);
        }
        let Some(file) = &mut self.file else {
            return Err("kept in memory".into());
        };
        let offset = file.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
        file.write_all(frame).map_err(|e| e.to_string())?;
        Ok(offset)
    }

    /// Every group set aside, read back; an unreadable block is a note and left out.
    pub fn groups(mut self, notes: &mut Vec<String>) -> DeferredDebug {
        self.flush();
        // Per file id, then keyed by the file once.
        let mut by_file: Vec<BTreeMap<u64, Vec<u8>>> = vec![BTreeMap::new(); self.files.len()];
        for block in std::mem::take(&mut self.blocks) {
            let (frame, raw_len) = match block {
                Block::Raw(bytes) => (Ok(bytes), None),
                Block::Compressed { frame, raw_len } => (Ok(frame), Some(raw_len)),
                Block::InFile {
                    offset,
                    len,
                    raw_len,
                } => {
                    let mut frame = vec![0; len];
                    let read = match self.file.as_mut() {
                        Some(f) => f
                            .seek(SeekFrom::Start(offset))
                            .and_then(|_| f.read_exact(&mut frame)),
                        None => Ok(()),
                    };
                    (read.map(|()| frame), Some(raw_len))
                }
            };
            let bytes = match (frame, raw_len) {
                (Ok(frame), Some(raw_len)) if frame.starts_with(&ZSTD_MAGIC) => {
                    zstd::bulk::decompress(&frame, raw_len)
                }
                (other, _) => other,
            };
            let bytes = match bytes {
                Ok(b) => b,
                Err(e) => {
                    notes.push(format!("JIT line and inline tables lost: {e}"));
                    continue;
                }
            };
            let mut rest = &bytes[..];
            while rest.len() >= 16 {
                let id = u32::from_le_bytes(rest[..4].try_into().unwrap_or_default());
                let ordinal = u64::from_le_bytes(rest[4..12].try_into().unwrap_or_default());
                let len = u32::from_le_bytes(rest[12..16].try_into().unwrap_or_default()) as usize;
                let (Some(records), Some(groups)) =
                    (rest.get(16..16 + len), by_file.get_mut(id as usize))
                else {
                    break;
                };
                groups
                    .entry(ordinal)
                    .or_default()
                    .extend_from_slice(records);
                rest = &rest[16 + len..];
            }
        }
        if let Some(p) = self.problem.take() {
            notes.push(format!("JIT line and inline tables: {p}"));
        }
        std::mem::take(&mut self.files)
            .into_iter()
            .zip(by_file)
            .filter(|(_, groups)| !groups.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is set aside comes back whole, by file and load, across several compressed blocks.
    #[test]
    fn the_spool_gives_back_every_group() {
        let mut spool = Spool::default();
        let mut expected = DeferredDebug::new();
        // Varied, partly repeating bytes, so zstd has something to pack.
        let record = |i: u64| -> Vec<u8> {
            let text = format!("record {i} of method Lcom/example/Widget{};", i % 17);
            text.repeat(1 + (i % 50) as usize).into_bytes()
        };
        for i in 0..4000u64 {
            let file = (7 + (i % 2) as u32, format!("/tmp/jit-{}.dump", 7 + i % 2));
            let ordinal = i / 2;
            let r = record(i);
            spool.push((file.0, &file.1), ordinal, &r);
            expected
                .entry(file)
                .or_default()
                .entry(ordinal)
                .or_default()
                .extend_from_slice(&r);
        }
        assert!(spool.blocks.len() >= 2, "{} blocks", spool.blocks.len());
        let mut notes = Vec::new();
        let groups = spool.groups(&mut notes);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(groups, expected);
    }
}
