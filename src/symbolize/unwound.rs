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
        let head = &stack[..stack.len() - keep];
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
    front: Option<Entry>,
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
            front: None,
            error: None,
        }
    }

    /// The unwound user stack of the sample at `offset`/`time`, given its callchain's user
    /// part; None when unwinding left it as the callchain said. Samples must be asked for in
    /// the order the stacks were written; an entry whose sample is passed by is dropped.
    pub fn take(&mut self, time: u64, offset: u64, callchain: &[u64]) -> Option<Vec<u64>> {
        loop {
            let front = self.peek()?;
            if front.offset == offset {
                let e = self.front.take()?;
                let kept = callchain.len().saturating_sub(e.keep);
                let mut stack = e.head;
                stack.extend_from_slice(&callchain[kept..]);
                return Some(stack);
            }
            if front.time >= time {
                return None;
            }
            // Its sample was not visited (a damaged record): never asked for.
            self.front = None;
        }
    }

    fn peek(&mut self) -> Option<&Entry> {
        if self.front.is_none() {
            self.front = self.next_entry();
        }
        self.front.as_ref()
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
        for (time, offset, stack, chain) in &entries {
            assert_eq!(r.take(*time, offset + 1, chain), None);
            assert_eq!(r.take(*time, *offset, chain).as_ref(), Some(stack));
        }
        assert_eq!(r.take(400, 8, &[]), None);
        assert!(r.error.is_none());
    }

    #[test]
    fn an_entry_whose_sample_never_comes_is_passed_by() {
        let entries = vec![
            (10, 1, vec![0x1, 0x2], vec![0x2]),
            (20, 2, vec![0x3, 0x4], vec![0x4]),
        ];
        let chunks = write(&entries, 10);
        let mut r = StackReader::new(chunks.iter().map(|c| (0, &c[..])), |_, _| {});
        assert_eq!(r.take(20, 2, &[0x4]), Some(vec![0x3, 0x4]));
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
        assert_eq!(r.take(0, 1, &[]), None);
        assert_eq!(r.error.as_ref().map(|e| e.offset), Some(4096));
    }
}
