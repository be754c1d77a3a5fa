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

#[cfg(test)]
use gimli::leb128;
use gimli::{EndianSlice, LittleEndian};

use super::entry_chunks::{
    self, chunk_when_full, compress, get_count, get_delta, put_count, put_delta, ChunkReader,
    EntryDecoder,
};
use crate::format::ParseError;

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
        chunk_when_full(&mut self.buf)
    }

    /// The last, partly filled chunk (None when empty).
    pub fn finish(mut self) -> Option<Vec<u8>> {
        self.flush()
    }

    fn flush(&mut self) -> Option<Vec<u8>> {
        compress(&mut self.buf)
    }
}

/// One decoded entry.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    time: u64,
    offset: u64,
    keep: usize,
    head: Vec<u64>,
}

/// Decodes UNWOUND_STACKS entries.
#[derive(Default)]
pub struct UnwoundStacks {
    previous: Previous,
}

impl EntryDecoder for UnwoundStacks {
    type Entry = Entry;
    const WHAT: &'static str = "an unwound stack entry";

    fn decode(&mut self, r: &mut EndianSlice<'_, LittleEndian>) -> Option<Entry> {
        let time = self.previous.time.wrapping_add(get_delta(r)?);
        let offset = self.previous.offset.wrapping_add(get_delta(r)?);
        let keep = get_count(r)?;
        let n = get_count(r)?;
        // Each address takes at least one byte: a count beyond the chunk is damage.
        if n > r.len() {
            return None;
        }
        let mut head = Vec::with_capacity(n);
        let mut last = self.previous.first;
        for _ in 0..n {
            last = last.wrapping_add(get_delta(r)?);
            head.push(last);
        }
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

    fn offset(e: &Entry) -> u64 {
        e.offset
    }
}

/// Reads the entries of a recording's UNWOUND_STACKS chunks in step with a walk in the same
/// order: one chunk decompressed at a time.
pub type StackReader<'a> = ChunkReader<'a, UnwoundStacks>;

impl ChunkReader<'_, UnwoundStacks> {
    /// The unwound user stack of the sample at `offset`, given its callchain's user part;
    /// None when unwinding left it as the callchain said. Samples must be asked for in the
    /// order the stacks were written.
    pub fn take(&mut self, offset: u64, callchain: &[u64]) -> Option<Vec<u64>> {
        let e = self.entry(offset)?;
        let kept = callchain.len().saturating_sub(e.keep);
        let mut stack = e.head;
        stack.extend_from_slice(&callchain[kept..]);
        Some(stack)
    }
}

/// The UNWOUND_STACKS `chunks` (file offset, payload) rewritten with every sample's record
/// offset mapped through `new_offset` (a recording whose records were rewritten); an error
/// when one is damaged or names a sample `new_offset` does not know.
pub fn renumbered<'a>(
    chunks: impl Iterator<Item = (usize, &'a [u8])> + 'a,
    new_offset: impl Fn(u64) -> Option<u64>,
) -> Result<Vec<Vec<u8>>, ParseError> {
    let mut w = StackWriter::default();
    let mut out = entry_chunks::renumbered::<UnwoundStacks>(chunks, new_offset, |e, offset| {
        w.push_entry(e.time, offset, e.keep, &e.head)
    })?;
    out.extend(w.finish());
    Ok(out)
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

    /// Entries are relative to the ones before them, across chunks: past a damaged chunk
    /// none is used (they would land on other samples), those before it are.
    #[test]
    fn reading_stops_at_a_damaged_chunk_keeping_the_entries_before_it() {
        let entries: Vec<_> = (1..=6)
            .map(|i| (i * 10, i * 100, vec![i, 0x400000], vec![0x400000]))
            .collect();
        let mut chunks = write(&entries, 2);
        assert_eq!(chunks.len(), 3);
        chunks[1] = b"junk".to_vec();
        let read = std::cell::RefCell::new(Vec::new());
        let mut r = StackReader::new(
            chunks.iter().enumerate().map(|(i, c)| (i * 4096, &c[..])),
            |at, _| read.borrow_mut().push(at),
        );
        for (_, offset, stack, chain) in &entries {
            let found = r.take(*offset, chain);
            assert_eq!(
                found.as_ref(),
                (*offset <= 200).then_some(stack),
                "{offset}"
            );
        }
        assert_eq!(r.error.as_ref().map(|e| e.offset), Some(4096));
        drop(r);
        assert_eq!(*read.borrow(), [0, 4096]);
        // An entry damaged inside a chunk: the ones before it in that chunk are kept.
        let mut raw = StackWriter::default();
        raw.push(10, 100, &[0x1, 0x2], &[0x2]);
        put_delta(&mut raw.buf, 10);
        put_delta(&mut raw.buf, 100);
        let chunk = raw.finish().unwrap();
        let mut r = StackReader::new([(64, &chunk[..])].into_iter(), |_, _| {});
        assert_eq!(r.take(100, &[0x2]), Some(vec![0x1, 0x2]));
        assert_eq!(r.take(200, &[0x2]), None);
        let err = r.error.expect("an error");
        assert_eq!(err.offset, 64);
        assert!(
            err.to_string().contains("unwound stack entry at byte"),
            "{err}"
        );
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
