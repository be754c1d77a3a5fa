//! The jitdump records a recording keeps only for what its samples hit: line tables
//! (DEBUG_INFO), inline trees (DEBUG_INFO2) and VM method names (METHOD_NAMES) are most of a
//! JVM's jitdump, and most of them describe code no sample lands in. While recording they are
//! taken out of the stored pieces and set aside here, in an unnamed temporary file;
//! at the end `symbolize` keeps those of the code and methods the samples hit (JIT_DEBUG
//! chunks). CODE_LOAD records stay in the pieces: the timeline needs every one of them.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};

use crate::format::jitdump::{self, RecordId};
use crate::format::Endian;
use crate::recording::DeferredDebug;
use crate::symbolize::jit_hits::AFTER_LAST_LOAD;

/// Where one jitdump stands: how many CODE_LOAD records went by, and, within the piece being
/// split, the deferred records since the last one (they belong to the next).
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
                    self.release_group();
                }
                self.loads += 1;
            }
            kept.extend_from_slice(record);
        }
        // What is gathered for the next CODE_LOAD goes to the spool now, not when that load
        // comes: a JVM's agent writes megabytes of method names after its last load when it
        // attaches, and a running program may load nothing more; held here they stayed
        // resident through the end's naming (issue 28). Groups of one load pushed in several
        // parts are read back as one.
        if !self.group.is_empty() {
            spool.push(file, self.loads, &self.group);
            self.release_group();
        }
        kept.extend_from_slice(tail);
        kept
    }

    /// The file is read to its end: deferred records no CODE_LOAD followed belong after the
    /// last one.
    pub(crate) fn finish(&mut self, spool: &mut Spool, file: (u32, &str)) {
        spool.loads_at_end(file, self.loads);
        self.group = Vec::new();
    }

    /// Empties the group. A large group's buffer is let go of: a JVM's jitdump can set aside
    /// megabytes of records before one CODE_LOAD, and a buffer kept at that size would be held
    /// until the end of the recording, through the end's naming, where memory peaks.
    fn release_group(&mut self) {
        if self.group.capacity() > GROUP_KEPT_BYTES {
            self.group = Vec::new();
        } else {
            self.group.clear();
        }
    }
}

/// The largest group buffer a [`Splitter`] keeps for the next group (most groups are a few
/// records of a few hundred bytes).
const GROUP_KEPT_BYTES: usize = 64 * 1024;

/// How a zstd frame starts (a raw block starts with a small file number).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Uncompressed bytes gathered before they are compressed into the spool.
const BLOCK_BYTES: usize = 1 << 20;
/// zstd level of the spool's blocks: zstd's fastest (negative) levels pack these records
/// about 4.8 times, where level 3 packed them 5.4 times at half the speed: javac's 5.8 MB of
/// inline trees and method names took 20 ms of the writer's CPU beside the JVM at level 3, 10
/// at -1 (docs/performance.md). The spool is read back at the end and never stored as it is.
const SPOOL_ZSTD_LEVEL: i32 = -1;

/// The first bytes set aside go to the temporary file as they are, uncompressed: packing
/// javac's 6 MB took 10 ms of the writer's CPU beside the JVM, and unpacking them 3–4 ms at
/// the end, twice (docs/performance.md); only a longer recording's spool is compressed past
/// this, so its file grows about five times slower.
const RAW_SPOOL_BYTES: usize = 16 << 20;

/// The deferred records of every jitdump of a recording: blocks of `u32 file, u64 ordinal,
/// u32 len, records`, each as it is (the first [`RAW_SPOOL_BYTES`]) or a zstd frame, in an
/// unnamed temporary file (compressed in memory if none can be made), so a long recording's
/// memory does not grow with them.
pub struct Spool {
    files: Vec<(u32, String)>,
    ids: HashMap<(u32, String), u32>,
    buffer: Vec<u8>,
    blocks: Vec<Block>,
    file: Option<File>,
    /// No temporary file could be made (blocks are kept in memory), or writing one failed.
    problem: Option<String>,
    /// Bytes the temporary file may still take uncompressed.
    raw_left: usize,
    /// By file id, how many CODE_LOADs its file had when it was read for the last time: records
    /// set aside for the load of that ordinal had none after them ([`AFTER_LAST_LOAD`]).
    loads_at_end: HashMap<u32, u64>,
}

impl Default for Spool {
    fn default() -> Self {
        Self {
            files: Vec::new(),
            ids: HashMap::new(),
            buffer: Vec::new(),
            blocks: Vec::new(),
            file: None,
            problem: None,
            raw_left: RAW_SPOOL_BYTES,
            loads_at_end: HashMap::new(),
        }
    }
}

enum Block {
    /// A zstd frame in the temporary file, of `raw_len` bytes decompressed; or the bytes
    /// themselves (`len == raw_len`: a block starts with a small file number, never with
    /// zstd's magic number).
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
    /// `file` was read to its end, with `loads` CODE_LOAD records.
    fn loads_at_end(&mut self, (pid, path): (u32, &str), loads: u64) {
        if let Some(&id) = self.ids.get(&(pid, path.to_string())) {
            self.loads_at_end.insert(id, loads);
        }
    }

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
        let raw_len = self.buffer.len();
        if raw_len <= self.raw_left {
            let block = std::mem::take(&mut self.buffer);
            let written = self.write(&block);
            self.buffer = block;
            if let Ok(offset) = written {
                self.raw_left -= raw_len;
                self.blocks.push(Block::InFile {
                    offset,
                    len: raw_len,
                    raw_len,
                });
                self.release_buffer();
                return;
            }
            // Compressed and kept in memory then (the problem is noted there).
            self.raw_left = 0;
        }
        let Ok(frame) = zstd::bulk::compress(&self.buffer, SPOOL_ZSTD_LEVEL) else {
            self.blocks
                .push(Block::Raw(std::mem::take(&mut self.buffer)));
            return;
        };
        let raw_len = self.buffer.len();
        self.release_buffer();
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

    /// Empties the buffer, letting go of its memory: the spool lives to the end of the
    /// recording, and a buffer kept at a block's size (or at a large group's, megabytes) stayed
    /// resident through the end's naming, where memory peaks (issue 28). A new block's buffer
    /// costs a mapping and its page faults, once a megabyte.
    fn release_buffer(&mut self) {
        self.buffer = Vec::new();
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

    /// Whether nothing was set aside.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Every group set aside, read back; an unreadable block is a note and left out.
    /// `method_names_only`: of each group, only its METHOD_NAMES records (what
    /// `jit_hits::method_names_into` keeps), so the rest is not held while the end's walk
    /// runs: the spool is read again for it afterwards.
    pub fn groups(&mut self, notes: &mut Vec<String>, method_names_only: bool) -> DeferredDebug {
        self.flush();
        // Per file id, then keyed by the file once.
        let mut by_file: Vec<BTreeMap<u64, Vec<u8>>> = vec![BTreeMap::new(); self.files.len()];
        // One buffer for every block read and one for it decompressed, so a block's megabyte
        // is not allocated and faulted in afresh each time.
        let mut frame = Vec::new();
        let mut bytes = Vec::new();
        let mut decompressor = None;
        let mut names = Vec::new();
        for block in &self.blocks {
            let read = match block {
                Block::Raw(raw) => {
                    bytes.clear();
                    bytes.extend_from_slice(raw);
                    Ok(())
                }
                Block::Compressed { frame, raw_len } => {
                    decompress_into(&mut decompressor, frame, *raw_len, &mut bytes)
                }
                Block::InFile {
                    offset,
                    len,
                    raw_len,
                } => {
                    frame.resize(*len, 0);
                    let read = match self.file.as_mut() {
                        Some(f) => f
                            .seek(SeekFrom::Start(*offset))
                            .and_then(|_| f.read_exact(&mut frame)),
                        None => Ok(()),
                    };
                    read.and_then(|()| {
                        decompress_into(&mut decompressor, &frame, *raw_len, &mut bytes)
                    })
                }
            };
            if let Err(e) = read {
                notes.push(format!("JIT line and inline tables lost: {e}"));
                continue;
            }
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
                rest = &rest[16 + len..];
                let ordinal = match self.loads_at_end.get(&id) {
                    Some(&loads) if loads == ordinal => AFTER_LAST_LOAD,
                    _ => ordinal,
                };
                // A group is whole records (`Splitter`): its METHOD_NAMES records are those of
                // the group it is part of.
                if method_names_only {
                    names.clear();
                    crate::symbolize::jit_hits::method_names_into(records, &mut names);
                    if !names.is_empty() {
                        groups.entry(ordinal).or_default().extend_from_slice(&names);
                    }
                } else if !records.is_empty() {
                    groups
                        .entry(ordinal)
                        .or_default()
                        .extend_from_slice(records);
                }
            }
        }
        if let Some(p) = &self.problem {
            notes.push(format!("JIT line and inline tables: {p}"));
        }
        self.files
            .iter()
            .cloned()
            .zip(by_file)
            .filter(|(_, groups)| !groups.is_empty())
            .collect()
    }
}

/// A block's bytes into `out`: a zstd frame decompressed into the size it was made from (with
/// `decompressor`, made on first use), else the bytes as they are.
fn decompress_into(
    decompressor: &mut Option<zstd::bulk::Decompressor<'static>>,
    frame: &[u8],
    raw_len: usize,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    out.clear();
    if !frame.starts_with(&ZSTD_MAGIC) {
        out.extend_from_slice(frame);
        return Ok(());
    }
    let decompressor = match decompressor {
        Some(d) => d,
        None => decompressor.insert(zstd::bulk::Decompressor::new()?),
    };
    out.reserve(raw_len);
    decompressor.decompress_to_buffer(frame, out)?;
    if out.len() > raw_len {
        return Err(std::io::Error::other(format!(
            "a spool block of {} bytes where {raw_len} were written",
            out.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pid 7's CODE_LOAD number `i` of a 16-byte `hot`, stamped `timestamp`.
    fn hot_load(timestamp: u64, i: u64) -> Vec<u8> {
        crate::format::jitdump_write::code_load(
            timestamp,
            &crate::format::jitdump_write::CodeLoad {
                pid: 7,
                tid: 7,
                code_addr: 0x7000 + 0x100 * i,
                code_index: i,
                name: "hot",
                code: &[0x90; 16],
            },
        )
    }

    /// A group of megabytes set aside before one CODE_LOAD does not keep its buffer: the
    /// splitter lives to the end of the recording (issue 28: 7 MB of a JVM's held through the
    /// end's naming). What is set aside is unchanged.
    #[test]
    fn a_large_group_does_not_keep_its_buffer() {
        use crate::format::jitdump_write as w;
        let names: Vec<(u64, String)> = (0..40_000u64)
            .map(|i| (0x1000 + i, format!("Lcom/example/Widget{i};method{i}")))
            .collect();
        let big = w::method_names(1, &names);
        assert!(big.len() > 1 << 20, "{} bytes", big.len());
        let load = |i: u64| hot_load(2 + i, i);
        let small = w::method_names(3, &names[..2]);
        let stream = [big.clone(), load(0), small.clone(), load(1)].concat();
        let (mut splitter, mut spool) = (Splitter::default(), Spool::default());
        let file = (7, "/tmp/jit-7.dump");
        // In two pieces, as tailing reads them.
        let at = big.len() + load(0).len();
        let mut kept = splitter.split(&stream[..at], Endian::Little, &mut spool, file);
        assert!(
            splitter.group.capacity() <= GROUP_KEPT_BYTES,
            "{} bytes kept",
            splitter.group.capacity()
        );
        kept.extend(splitter.split(&stream[at..], Endian::Little, &mut spool, file));
        assert_eq!(kept, [load(0), load(1)].concat());
        splitter.finish(&mut spool, file);
        assert_eq!(splitter.group.capacity(), 0);
        let groups = spool.groups(&mut Vec::new(), false);
        let expected: BTreeMap<u64, Vec<u8>> = [(0, big), (1, small)].into_iter().collect();
        assert_eq!(groups[&(7, file.1.to_string())], expected);
    }

    /// Records set aside after a piece's last CODE_LOAD are not held until the next load: a
    /// JVM's agent writes megabytes of method names after its last load when it attaches,
    /// and the program may load nothing more (issue 28: 3.5 MB held from the start of a
    /// recording through its end). Nor does the spool keep a block's buffer once written.
    /// What is set aside, and for which load, is unchanged.
    #[test]
    fn records_after_the_last_load_are_not_held() {
        use crate::format::jitdump_write as w;
        let names = |n: u64, tag: &str| -> Vec<(u64, String)> {
            (0..n)
                .map(|i| (0x1000 + i, format!("Lcom/example/{tag}{i};method{i}")))
                .collect()
        };
        let big = w::method_names(1, &names(40_000, "Widget"));
        let tail = w::method_names(5, &names(30_000, "Gadget"));
        assert!(big.len() > 1 << 20 && tail.len() > 1 << 20);
        let small = w::method_names(2, &names(2, "Small"));
        let load = |i: u64| hot_load(3 + i, i);
        // Three pieces, as tailing reads them: the first and the last end in records set
        // aside after a load; the second part of a group comes with its load.
        let pieces = [
            [load(0), big.clone()].concat(),
            [small.clone(), load(1), tail.clone()].concat(),
        ];
        let (mut splitter, mut spool) = (Splitter::default(), Spool::default());
        let file = (7, "/tmp/jit-7.dump");
        let mut kept = Vec::new();
        for piece in &pieces {
            kept.extend(splitter.split(piece, Endian::Little, &mut spool, file));
            assert!(
                splitter.group.capacity() <= GROUP_KEPT_BYTES,
                "{} bytes held by the splitter",
                splitter.group.capacity()
            );
            assert_eq!(spool.buffer.capacity(), 0, "the spool's buffer is kept");
        }
        assert_eq!(kept, [load(0), load(1)].concat());
        splitter.finish(&mut spool, file);
        let groups = spool.groups(&mut Vec::new(), false);
        let expected: BTreeMap<u64, Vec<u8>> =
            [(1, [big, small].concat()), (AFTER_LAST_LOAD, tail)]
                .into_iter()
                .collect();
        assert_eq!(groups[&(7, file.1.to_string())], expected);
        // Method names alone likewise.
        assert_eq!(
            spool.groups(&mut Vec::new(), true),
            crate::symbolize::jit_hits::method_names_only(&groups)
        );
    }

    /// Read for the walk, the spool gives the method names `jit_hits::method_names_only`
    /// keeps of everything; read again after, everything.
    #[test]
    fn method_names_read_alone_are_those_of_everything() {
        use crate::format::jitdump_write as w;
        let (mut splitter, mut spool) = (Splitter::default(), Spool::default());
        let mut stream = Vec::new();
        for i in 0..3000u64 {
            let names: Vec<(u64, String)> = (0..(i % 4))
                .map(|k| (0x1000 + 16 * i + k, format!("Lcom/example/W{i};m{k}")))
                .collect();
            if !names.is_empty() {
                stream.extend(w::method_names(i, &names));
            }
            if i % 3 == 0 {
                let lines: Vec<(u64, i32, &str)> = (0..50)
                    .map(|l| (0x7000 + 0x100 * i + l, l as i32, "Widget.java"))
                    .collect();
                stream.extend(w::debug_info(i, 0x7000 + 0x100 * i, &lines));
            }
            stream.extend(w::code_load(
                i,
                &w::CodeLoad {
                    pid: 7,
                    tid: 7,
                    code_addr: 0x7000 + 0x100 * i,
                    code_index: i,
                    name: "m",
                    code: &[],
                },
            ));
        }
        stream.extend(w::method_names(9000, &[(0x9000, "Ltail;t".to_string())]));
        let file = (7, "/tmp/jit-7.dump");
        splitter.split(&stream, Endian::Little, &mut spool, file);
        splitter.finish(&mut spool, file);
        let mut notes = Vec::new();
        let names = spool.groups(&mut notes, true);
        let all = spool.groups(&mut notes, false);
        assert!(notes.is_empty(), "{notes:?}");
        assert!(spool.blocks.len() >= 2, "{} blocks", spool.blocks.len());
        assert!(!names.is_empty());
        assert_ne!(names, all);
        assert_eq!(names, crate::symbolize::jit_hits::method_names_only(&all));
        // Read again, the same.
        assert_eq!(spool.groups(&mut notes, false), all);
    }

    /// What is set aside comes back whole, by file and load, across several blocks: the first
    /// ones stored as they are, the rest compressed once the uncompressed budget is spent.
    #[test]
    fn the_spool_gives_back_every_group() {
        let mut spool = Spool {
            raw_left: 2 * BLOCK_BYTES + 64 * 1024,
            ..Spool::default()
        };
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
        spool.flush();
        let raw = |b: &Block| matches!(b, Block::InFile { len, raw_len, .. } if len == raw_len);
        let raw_blocks = spool.blocks.iter().filter(|b| raw(b)).count();
        assert_eq!(raw_blocks, 2, "{} blocks", spool.blocks.len());
        assert!(spool.blocks.len() >= 4, "{} blocks", spool.blocks.len());
        let file_len = spool.file.as_ref().unwrap().metadata().unwrap().len();
        let raw_total: usize = expected
            .values()
            .flat_map(|g| g.values())
            .map(Vec::len)
            .sum();
        assert!(
            file_len < raw_total as u64 * 3 / 4,
            "{file_len} bytes in the file for {raw_total}"
        );
        let mut notes = Vec::new();
        let groups = spool.groups(&mut notes, false);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(groups, expected);
    }

    /// A spool the size of javac's (6 MB) is written as it is: no CPU spent packing it beside
    /// the JVM and unpacking it at the end.
    #[test]
    fn a_small_spool_is_not_compressed() {
        let mut spool = Spool::default();
        let record = |i: u64| format!("record {i};").repeat(40).into_bytes();
        let mut total = 0;
        for i in 0..10_000u64 {
            let r = record(i);
            total += r.len() + 16;
            spool.push((7, "/tmp/jit-7.dump"), i, &r);
        }
        spool.flush();
        assert!(total > 4 * BLOCK_BYTES, "{total}");
        let file_len = spool.file.as_ref().unwrap().metadata().unwrap().len();
        assert_eq!(file_len, total as u64);
        let groups = spool.groups(&mut Vec::new(), false);
        let group = &groups[&(7, "/tmp/jit-7.dump".to_string())];
        assert_eq!(group.len(), 10_000);
        assert!((0..10_000).all(|i| group[&i] == record(i)));
    }
}
