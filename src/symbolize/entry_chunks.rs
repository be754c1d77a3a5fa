//! What UNWOUND_STACKS (`unwound`) and INTERPRETED_FRAMES (`interpreted_frames`) chunks share:
//! per-sample entries, LEB128-encoded relative to the entry before them (across chunks too),
//! gathered into zstd-compressed chunks when written and read back in step with a walk, one
//! chunk decompressed at a time. Each kind says how one entry is decoded ([`EntryDecoder`]).

use gimli::leb128;
use gimli::{EndianSlice, LittleEndian};

use crate::format::ParseError;
use crate::recording::inflate;

/// Encoded entries are compressed into a chunk once this many bytes are gathered.
const CHUNK_BYTES: usize = 1 << 20;
/// zstd level: the chunks are written once per recording, after it ends.
const ZSTD_LEVEL: i32 = 3;

/// The compressed chunk of the encoded entries in `buf` once they fill one (`buf` then starts
/// over).
pub(super) fn chunk_when_full(buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    (buf.len() >= CHUNK_BYTES).then(|| compress(buf)).flatten()
}

/// The compressed chunk of the encoded entries in `buf`, None when there are none; `buf`
/// starts over.
pub(super) fn compress(buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    if buf.is_empty() {
        return None;
    }
    let packed = zstd::bulk::compress(buf, ZSTD_LEVEL).ok();
    buf.clear();
    packed
}

/// A chunk of no entries.
pub(super) fn empty_chunk() -> Option<Vec<u8>> {
    zstd::bulk::compress(&[], ZSTD_LEVEL).ok()
}

/// Appends a difference of two u64 (wrapping) as a signed LEB128 number: small either way.
pub(super) fn put_delta(out: &mut Vec<u8>, delta: u64) {
    // Writing to a Vec cannot fail.
    let _ = leb128::write::signed(out, delta as i64);
}

/// Appends a count as an unsigned LEB128 number.
pub(super) fn put_count(out: &mut Vec<u8>, n: usize) {
    let _ = leb128::write::unsigned(out, n as u64);
}

/// Reads what [`put_delta`] wrote.
pub(super) fn get_delta(r: &mut EndianSlice<'_, LittleEndian>) -> Option<u64> {
    leb128::read::signed(r).ok().map(|v| v as u64)
}

/// Reads what [`put_count`] wrote.
pub(super) fn get_count(r: &mut EndianSlice<'_, LittleEndian>) -> Option<usize> {
    usize::try_from(leb128::read::unsigned(r).ok()?).ok()
}

/// How one kind of entry is decoded; the decoder holds what it needs of the entry before.
pub trait EntryDecoder: Default {
    /// One decoded entry.
    type Entry;
    /// What an entry is called in errors ("an unwound stack entry").
    const WHAT: &'static str;
    /// Decodes the entry `r` starts with; None when its bytes are damaged.
    fn decode(&mut self, r: &mut EndianSlice<'_, LittleEndian>) -> Option<Self::Entry>;
    /// The record offset of the entry's sample.
    fn offset(e: &Self::Entry) -> u64;
}

/// Reads the entries of a recording's chunks of one kind in step with a walk in the same
/// order: one chunk decompressed at a time. Reading stops at the first damage: the entries
/// after it are relative to ones that are lost.
pub struct ChunkReader<'a, D: EntryDecoder> {
    chunks: Box<dyn Iterator<Item = (usize, &'a [u8])> + 'a>,
    /// Called with each chunk's offset and length once it is decompressed.
    done_with: Box<dyn Fn(usize, usize) + 'a>,
    buf: Vec<u8>,
    /// File offset of the chunk being read (for errors).
    chunk_at: usize,
    pos: usize,
    decoder: D,
    ahead: Lookahead<D::Entry>,
    /// The first damaged chunk; its entries from the damage on, and the chunks after it, are
    /// not used.
    pub error: Option<ParseError>,
}

impl<'a, D: EntryDecoder> ChunkReader<'a, D> {
    /// `chunks`: the payloads with their file offsets, in file order; `done_with` is told
    /// when a payload's bytes are no longer needed.
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
            decoder: D::default(),
            ahead: Lookahead::default(),
            error: None,
        }
    }

    /// The entry of the sample at `offset`; None when it has none. Samples must be asked for
    /// in the order the entries were written (see [`Lookahead`]).
    pub fn entry(&mut self, offset: u64) -> Option<D::Entry> {
        let mut ahead = std::mem::take(&mut self.ahead);
        let e = ahead.take(offset, D::offset, || self.next_entry());
        self.ahead = ahead;
        e
    }

    /// Every entry, in order; an error at the first damage.
    #[cfg(test)]
    pub fn all(mut self) -> Result<Vec<D::Entry>, ParseError> {
        let mut out = Vec::new();
        while let Some(e) = self.next_entry() {
            out.push(e);
        }
        match self.error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    fn next_entry(&mut self) -> Option<D::Entry> {
        if self.error.is_some() {
            return None;
        }
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
                    self.error = Some(e);
                    return None;
                }
            }
        }
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let mut r = EndianSlice::new(rest, LittleEndian);
        let decoded = self.decoder.decode(&mut r);
        match decoded {
            Some(_) => self.pos = self.buf.len() - r.len(),
            None => {
                self.error = Some(ParseError::new(
                    self.chunk_at,
                    format!("{} at byte {} of the decompressed chunk", D::WHAT, self.pos),
                ))
            }
        }
        decoded
    }
}

/// The entries of `chunks` (file offset, payload) handed to `push` with their samples' record
/// offsets mapped through `new_offset` (a recording whose records were rewritten), and the
/// chunk payloads `push` returned; an error when a chunk is damaged or an entry names a sample
/// `new_offset` does not know.
pub(super) fn renumbered<'a, D: EntryDecoder>(
    chunks: impl Iterator<Item = (usize, &'a [u8])> + 'a,
    new_offset: impl Fn(u64) -> Option<u64>,
    mut push: impl FnMut(D::Entry, u64) -> Option<Vec<u8>>,
) -> Result<Vec<Vec<u8>>, ParseError> {
    let mut reader = ChunkReader::<D>::new(chunks, |_, _| {});
    let mut out = Vec::new();
    while let Some(e) = reader.next_entry() {
        let offset = new_offset(D::offset(&e)).ok_or_else(|| {
            ParseError::new(
                0,
                format!("the sample record at {:#x} of {}", D::offset(&e), D::WHAT),
            )
        })?;
        out.extend(push(e, offset));
    }
    match reader.error {
        Some(e) => Err(e),
        None => Ok(out),
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
struct Lookahead<E> {
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
    fn take(
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
