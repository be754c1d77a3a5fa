//! UNWOUND_STACKS chunks: the user stacks that unwinding at record time changed (fp mode's
//! frameless-leaf fix, DWARF mode), so a report elsewhere needs neither the binaries' CFI nor
//! the stack copies' interpretation. Written while the embedding walk runs and read in step
//! with the report's walk, so neither side holds a map of every sample.
//!
//! Payload: one zstd frame of entries, in the walk's order (time order), each as LEB128
//! numbers (gimli's, DWARF's encoding): the time and record offset as signed deltas from the
//! previous entry, how many outermost frames of the sample's callchain the stack keeps, the
//! number of other (innermost) addresses, and those addresses as signed deltas, the first from
//! the previous entry's first. Deltas and repetition make an entry a few bytes after
//! compression.

use gimli::leb128;
use gimli::{EndianSlice, LittleEndian};

use crate::format::ParseError;
use crate::recording::inflate;

/// Encoded entries are compressed into a chunk once this many bytes are gathered.
const CHUNK_BYTES: usize = 1 << 20;
/// zstd level: the chunks are written once per recording, after it ends.
const ZSTD_LEVEL: i32 = 3;

#[derive(Default)]
struct Previous {
    time: u64,
    offset: u64,
    first: u64,
}

/// Encodes the stacks of one walk into compressed chunk payloads.
#[derive(Default)]
pub struct StackWriter {
    buf: Vec<u8>,
    previous: Previous,
}

impl StackWriter {
    /// Adds the sample at `offset`/`time` whose unwound user stack is `stack` (innermost
    /// first) where its callchain said `callchain`. Returns a compressed chunk payload when
    /// one is full.
    pub fn push(
        &mut self,
        time: u64,
        offset: u64,
        stack: &[u64],
        callchain: &[u64],
    ) -> Option<Vec<u8>> {
        let keep = stack
            .iter()
            .rev()
            .zip(callchain.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        self.push_entry(time, offset, keep, &stack[..stack.len() - keep])
    }

    /// Adds one entry as stored: `keep` outermost frames of the callchain after `head`.
    fn push_entry(&mut self, time: u64, offset: u64, keep: usize, head: &[u64]) -> Option<Vec<u8>> {
        put_delta(&mut self.buf, time.wrapping_sub(self.previous.time));
        put_delta(&mut self.buf, offset.wrapping_sub(self.previous.offset));
        put_count(&mut self.buf, keep);
        put_count(&mut self.buf, head.len());
        let mut last = self.previous.first;
        for &addr in head {
            put_delta(&mut self.buf, addr.wrapping_sub(last));
            last = addr;
        }
        self.previous = Previous {
            time,
            offset,
            first: head.first().copied().unwrap_or(self.previous.first),
        };
        (self.buf.len() >= CHUNK_BYTES)
            .then(|| self.flush())
            .flatten()
    }

    /// The last, partly filled chunk (None when empty).
    pub fn finish(mut self) -> Option<Vec<u8>> {
        self.flush()
    }

    fn flush(&mut self) -> Option<Vec<u8>> {
        if self.buf.is_empty() {
            return None;
        }
        let packed = zstd::bulk::compress(&self.buf, ZSTD_LEVEL).ok();
        self.buf.clear();
        packed
    }
}

/// One decoded entry.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    time: u64,
    offset: u64,
    keep: usize,
    head: Vec<u64>,
}

/// Reads the entries of a recording's UNWOUND_STACKS chunks in step with a walk in the same
/// order: one chunk decompressed at a time.
pub struct StackReader<'a> {
    chunks: Box<dyn Iterator<Item = (usize, &'a [u8])> + 'a>,
    /// Called with each chunk's offset and length once it is decompressed.
    done_with: Box<dyn Fn(usize, usize) + 'a>,
    buf: Vec<u8>,
    /// File offset of the chunk being read (for errors).
    chunk_at: usize,
    pos: usize,
    previous: Previous,
    ahead: Lookahead<Entry>,
    /// The first damaged chunk; its entries from the damage on are not used.
    pub error: Option<ParseError>,
}

impl<'a> StackReader<'a> {
    /// `chunks`: the UNWOUND_STACKS payloads with their file offsets, in file order;
    /// `done_with` is told when a payload's bytes are no longer needed.
    pub fn new(
        chunks: impl Iterator<Item = (usize, &'a [u8])> + 'a,
        done_with: impl Fn(usize, usize) + 'a,
    ) -> Self {
        Self {
            chunks: Box::new(chunks),
            done_with: Box::new(done_with),
            buf: Vec::new(),
            chunk_at: 0,
            pos: 0,
            previous: Previous::default(),
            ahead: Lookahead::default(),
            error: None,
        }
    }

    /// The unwound user stack of the sample at `offset`, given its callchain's user part;
    /// None when unwinding left it as the callchain said. Samples must be asked for in the
    /// order the stacks were written (see [`Lookahead`]).
    pub fn take(&mut self, offset: u64, callchain: &[u64]) -> Option<Vec<u64>> {
        let mut ahead = std::mem::take(&mut self.ahead);
        let e = ahead.take(offset, |e| e.offset, || self.next_entry());
        self.ahead = ahead;
        let e = e?;
        let kept = callchain.len().saturating_sub(e.keep);
        let mut stack = e.head;
        stack.extend_from_slice(&callchain[kept..]);
        Some(stack)
    }

    fn next_entry(&mut self) -> Option<Entry> {
        while self.pos >= self.buf.len() {
            let (at, payload) = self.chunks.next()?;
            let inflated = inflate(payload, at);
            (self.done_with)(at, payload.len());
            match inflated {
                Ok(buf) => {
                    self.buf = buf;
                    self.chunk_at = at;
                    self.pos = 0;
                }
                Err(e) => {
                    self.error.get_or_insert(e);
                }
            }
        }
        match self.decode() {
            Some(e) => Some(e),
            None => {
                self.error.get_or_insert(ParseError::new(
                    self.chunk_at,
                    format!(
                        "an unwound-stack entry at byte {} of the decompressed chunk",
                        self.pos
                    ),
                ));
                self.pos = self.buf.len();
                self.next_entry()
            }
        }
    }

    fn decode(&mut self) -> Option<Entry> {
        let mut r = EndianSlice::new(self.buf.get(self.pos..)?, LittleEndian);
        let time = self.previous.time.wrapping_add(get_delta(&mut r)?);
        let offset = self.previous.offset.wrapping_add(get_delta(&mut r)?);
        let keep = get_count(&mut r)?;
        let n = get_count(&mut r)?;
        // Each address takes at least one byte: a count beyond the chunk is damage.
        if n > r.len() {
            return None;
        }
        let mut head = Vec::with_capacity(n);
        let mut last = self.previous.first;
        for _ in 0..n {
            last = last.wrapping_add(get_delta(&mut r)?);
            head.push(last);
        }
        self.pos = self.buf.len() - r.len();
        self.previous = Previous {
            time,
            offset,
            first: head.first().copied().unwrap_or(self.previous.first),
        };
        Some(Entry {
            time,
            offset,
            keep,
            head,
        })
    }
}

/// How many entries a reader decodes ahead of the walk.
const LOOKAHEAD: usize = 1024;

/// The entries a reader decoded ahead of the walk that reads them, and their samples' record
/// offsets. The walk visits samples in the order their entries were written, but not in
/// time order (an off-CPU switch-out is stored when its thread runs again, and a late one is
/// taken with a later window of records), and not every sample has an entry: a sample's
/// entry is the first one with its offset among those read ahead, and the entries before it
/// were for samples the walk never visits (damaged records). A sample without an entry
/// finds none and leaves them in place.
pub(crate) struct Lookahead<E> {
    queue: std::collections::VecDeque<E>,
    offsets: rustc_hash::FxHashSet<u64>,
}

impl<E> Default for Lookahead<E> {
    fn default() -> Self {
        Self {
            queue: Default::default(),
            offsets: Default::default(),
        }
    }
}

impl<E> Lookahead<E> {
    /// The entry of the sample at `offset` (`key` gives an entry's offset; `next` decodes
    /// the next entry, None at the end).
    pub(crate) fn take(
        &mut self,
        offset: u64,
        key: impl Fn(&E) -> u64,
        mut next: impl FnMut() -> Option<E>,
    ) -> Option<E> {
        while self.queue.len() < LOOKAHEAD {
            let Some(e) = next() else { break };
            self.offsets.insert(key(&e));
            self.queue.push_back(e);
        }
        if !self.offsets.contains(&offset) {
            return None;
        }
        while let Some(e) = self.queue.pop_front() {
            self.offsets.remove(&key(&e));
            if key(&e) == offset {
                return Some(e);
            }
        }
        None
    }
}

/// The UNWOUND_STACKS `chunks` (file offset, payload) rewritten with every sample's record
/// offset mapped through `new_offset` (a recording whose records were rewritten); an error
/// when one is damaged or names a sample `new_offset` does not know.
pub fn renumbered<'a>(
    chunks: impl Iterator<Item = (usize, &'a [u8])> + 'a,
    new_offset: impl Fn(u64) -> Option<u64>,
) -> Result<Vec<Vec<u8>>, ParseError> {
    let mut reader = StackReader::new(chunks, |_, _| {});
    let mut w = StackWriter::default();
    let mut out = Vec::new();
    while let Some(e) = reader.next_entry() {
        let offset = new_offset(e.offset).ok_or_else(|| {
            ParseError::new(
                0,
                format!("the sample record at {:#x} of an unwound stack", e.offset),
            )
        })?;
        out.extend(w.push_entry(e.time, offset, e.keep, &e.head));
    }
    if let Some(e) = reader.error {
        return Err(e);
    }
    out.extend(w.finish());
    Ok(out)
}

/// Appends a difference of two u64 (wrapping) as a signed LEB128 number: small either way.
fn put_delta(out: &mut Vec<u8>, delta: u64) {
    // Writing to a Vec cannot fail.
    let _ = leb128::write::signed(out, delta as i64);
}

fn put_count(out: &mut Vec<u8>, n: usize) {
    let _ = leb128::write::unsigned(out, n as u64);
}

fn get_delta(r: &mut EndianSlice<'_, LittleEndian>) -> Option<u64> {
    leb128::read::signed(r).ok().map(|v| v as u64)
}

fn get_count(r: &mut EndianSlice<'_, LittleEndian>) -> Option<usize> {
    usize::try_from(leb128::read::unsigned(r).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(entries: &[(u64, u64, Vec<u64>, Vec<u64>)], chunk_every: usize) -> Vec<Vec<u8>> {
        let mut w = StackWriter::default();
        let mut chunks = Vec::new();
        for (i, (time, offset, stack, chain)) in entries.iter().enumerate() {
            chunks.extend(w.push(*time, *offset, stack, chain));
            if (i + 1) % chunk_every == 0 {
                chunks.extend(w.flush());
            }
        }
        chunks.extend(w.finish());
        chunks
    }

    #[test]
    fn stacks_read_back_in_step_across_chunks() {
        let entries = vec![
            (
                100,
                5000,
                vec![0x10, 0x401000, 0x402000],
                vec![0x10, 0x402000],
            ),
            (
                90,
                1 << 48,
                vec![0x7fff_0000_1000],
                vec![0x7fff_0000_1000, 0x5000],
            ),
            (300, 64, vec![0x30, 0x31, 0x402000], vec![0x99, 0x402000]),
            (300, 72, vec![u64::MAX, 0], vec![]),
        ];
        let chunks = write(&entries, 2);
        assert_eq!(chunks.len(), 2);
        let mut r = StackReader::new(chunks.iter().map(|c| (0, &c[..])), |_, _| {});
        // A sample without an entry before each one with.
        for (_, offset, stack, chain) in &entries {
            assert_eq!(r.take(offset + 1, chain), None);
            assert_eq!(r.take(*offset, chain).as_ref(), Some(stack));
        }
        assert_eq!(r.take(8, &[]), None);
        assert!(r.error.is_none());
    }

    #[test]
    fn renumbered_stacks_read_the_same_under_their_new_offsets() {
        let entries = vec![
            (10, 100, vec![0x1, 0x2], vec![0x2]),
            (20, 200, vec![0x3, 0x4, 0x9], vec![0x4]),
            (30, 300, vec![0x5], vec![0x6, 0x7]),
        ];
        let chunks = write(&entries, 2);
        let moved = renumbered(chunks.iter().map(|c| (0, &c[..])), |o| Some(o / 10)).unwrap();
        let mut r = StackReader::new(moved.iter().map(|c| (0, &c[..])), |_, _| {});
        for (_, offset, stack, chain) in &entries {
            assert_eq!(r.take(offset / 10, chain).as_ref(), Some(stack));
        }
        assert!(r.error.is_none());
        // A sample the new numbering lacks, or a damaged chunk: an error.
        assert!(renumbered(chunks.iter().map(|c| (0, &c[..])), |o| (o < 300)
            .then_some(o))
        .is_err());
        let err = renumbered([(512, &b"junk"[..])].into_iter(), Some).unwrap_err();
        assert_eq!(err.offset, 512);
    }

    /// An off-CPU switch-out is stored when its thread runs again: the walk meets it after
    /// later samples (with or without entries of their own), and its entry is still found.
    #[test]
    fn a_late_samples_entry_is_found_after_later_samples() {
        let entries = vec![
            (300, 1, vec![0x1, 0x2], vec![0x2]),
            (100, 2, vec![0x3, 0x4], vec![0x4]),
            (400, 3, vec![0x5, 0x6], vec![0x6]),
        ];
        let chunks = write(&entries, 10);
        let mut r = StackReader::new(chunks.iter().map(|c| (0, &c[..])), |_, _| {});
        assert_eq!(r.take(1, &[0x2]), Some(vec![0x1, 0x2]));
        // A sample at 350 without an entry, then the one of 100 taken late.
        assert_eq!(r.take(9, &[0x8]), None);
        assert_eq!(r.take(2, &[0x4]), Some(vec![0x3, 0x4]));
        assert_eq!(r.take(3, &[0x6]), Some(vec![0x5, 0x6]));
    }

    #[test]
    fn an_entry_whose_sample_never_comes_is_passed_by() {
        let entries = vec![
            (10, 1, vec![0x1, 0x2], vec![0x2]),
            (20, 2, vec![0x3, 0x4], vec![0x4]),
        ];
        let chunks = write(&entries, 10);
        let mut r = StackReader::new(chunks.iter().map(|c| (0, &c[..])), |_, _| {});
        assert_eq!(r.take(2, &[0x4]), Some(vec![0x3, 0x4]));
    }

    #[test]
    fn a_damaged_chunk_is_an_error_not_a_panic() {
        let mut buf = Vec::new();
        put_delta(&mut buf, 0);
        put_delta(&mut buf, 2);
        put_count(&mut buf, 0);
        let _ = leb128::write::unsigned(&mut buf, u64::MAX);
        let chunk = zstd::bulk::compress(&buf, 1).unwrap();
        let mut r = StackReader::new(
            [(4096, &chunk[..]), (8192, &b"junk"[..])].into_iter(),
            |_, _| {},
        );
        assert_eq!(r.take(1, &[]), None);
        assert_eq!(r.error.as_ref().map(|e| e.offset), Some(4096));
    }
}
