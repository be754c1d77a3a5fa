//! INTERPRETED_FRAMES chunks: per sample, what the embedding read from its stack copy and the
//! frames past it (a JVM's interpreted frames' `Method*`, and whether the stack may have been
//! cut short), so a report of a recording whose symbols were embedded needs neither; a
//! finished JVM recording then stores its samples without them (`record::compact`). Written
//! while the embedding walk runs and read in step with the report's walk, like
//! UNWOUND_STACKS (`unwound`).
//!
//! Payload: one zstd frame of entries, in the walk's order, for the samples with an
//! interpreted frame or a cut, each as LEB128 numbers: the time and record offset as signed
//! deltas from the previous entry (the previous chunk's last one for a chunk's first), the cut
//! (0 none, 1 the kernel's callchain limit, 2 the stack copy's end), the number of interpreted
//! frames, and when there are any, the number of frames of the user stack and per frame,
//! outermost first, its depth from the stack's outermost frame (as the difference from the
//! frame before it) and its `Method*` (as a signed difference from the frame before it; the
//! first from 0).

use gimli::leb128;
use gimli::{EndianSlice, LittleEndian};

use super::depth::Cut;
use super::unwound::Lookahead;
use crate::format::ParseError;
use crate::recording::inflate;

/// Encoded entries are compressed into a chunk once this many bytes are gathered.
const CHUNK_BYTES: usize = 1 << 20;
/// zstd level: the chunks are written once per recording, after it ends.
const ZSTD_LEVEL: i32 = 3;

#[derive(Clone, Copy, Default)]
struct Previous {
    time: u64,
    offset: u64,
}

/// What the embedding found for one sample.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// The sample's time.
    pub time: u64,
    /// The sample record's offset (its number in the recording).
    pub offset: u64,
    /// Where its stack may have been cut short.
    pub cut: Option<Cut>,
    /// How many frames the user stack has.
    pub len: usize,
    /// `(user stack index, Method*)` of each interpreted frame, innermost first.
    pub methods: Vec<(usize, u64)>,
}

impl Entry {
    /// The per-frame `Method*` list the walk hands on, for a user stack of `len` frames.
    pub fn per_frame(&self, len: usize) -> Vec<Option<u64>> {
        if self.methods.is_empty() {
            return Vec::new();
        }
        let mut out = vec![None; len];
        for &(i, m) in &self.methods {
            if let Some(slot) = out.get_mut(i) {
                *slot = Some(m);
            }
        }
        out
    }
}

/// Encodes the entries of one walk into compressed chunk payloads.
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
    previous: Previous,
    /// Whether any entry was written (a recording's walk writes a chunk even with none, so a
    /// reader knows the copies' findings are stored).
    wrote: bool,
}

impl Writer {
    /// Adds the sample at `offset`/`time` with `cut` and the per-frame `methods` (only
    /// samples with a cut or an interpreted frame are stored). Returns a compressed chunk
    /// payload when one is full.
    pub fn push(
        &mut self,
        time: u64,
        offset: u64,
        cut: Option<Cut>,
        methods: &[Option<u64>],
    ) -> Option<Vec<u8>> {
        let len = methods.len();
        let methods: Vec<(usize, u64)> = methods
            .iter()
            .enumerate()
            .filter_map(|(i, m)| Some((i, (*m)?)))
            .collect();
        if cut.is_none() && methods.is_empty() {
            return None;
        }
        self.push_entry(&Entry {
            time,
            offset,
            cut,
            len,
            methods,
        })
    }

    /// Adds one entry as it is.
    pub fn push_entry(&mut self, e: &Entry) -> Option<Vec<u8>> {
        put_delta(&mut self.buf, e.time.wrapping_sub(self.previous.time));
        put_delta(&mut self.buf, e.offset.wrapping_sub(self.previous.offset));
        put_count(
            &mut self.buf,
            match e.cut {
                None => 0,
                Some(Cut::KernelLimit) => 1,
                Some(Cut::StackCopy) => 2,
            },
        );
        put_count(&mut self.buf, e.methods.len());
        if !e.methods.is_empty() {
            put_count(&mut self.buf, e.len);
        }
        // Outermost first, each frame by its depth from the stack's outermost frame and its
        // method as a difference from the one before it in the entry: the frames samples of
        // one thread share encode to the same bytes, which zstd then stores once.
        let (mut depth, mut method) = (0, 0u64);
        for &(i, m) in e.methods.iter().rev() {
            let d = e.len.saturating_sub(1).saturating_sub(i);
            put_count(&mut self.buf, d.wrapping_sub(depth));
            put_delta(&mut self.buf, m.wrapping_sub(method));
            (depth, method) = (d, m);
        }
        self.previous = Previous {
            time: e.time,
            offset: e.offset,
        };
        (self.buf.len() >= CHUNK_BYTES)
            .then(|| self.flush())
            .flatten()
    }

    /// The last chunk; one (of no entries) even when nothing was written at all.
    pub fn finish(mut self) -> Option<Vec<u8>> {
        match self.flush() {
            Some(chunk) => Some(chunk),
            None if !self.wrote => zstd::bulk::compress(&[], ZSTD_LEVEL).ok(),
            None => None,
        }
    }

    fn flush(&mut self) -> Option<Vec<u8>> {
        if self.buf.is_empty() {
            return None;
        }
        let packed = zstd::bulk::compress(&self.buf, ZSTD_LEVEL).ok();
        self.buf.clear();
        self.wrote = true;
        packed
    }
}

/// Reads the entries of a recording's INTERPRETED_FRAMES chunks in step with a walk in the
/// same order: one chunk decompressed at a time.
pub struct Reader<'a> {
    chunks: Box<dyn Iterator<Item = (usize, &'a [u8])> + 'a>,
    done_with: Box<dyn Fn(usize, usize) + 'a>,
    buf: Vec<u8>,
    chunk_at: usize,
    pos: usize,
    previous: Previous,
    ahead: Lookahead<Entry>,
    /// The first damaged chunk; its entries from the damage on are not used.
    pub error: Option<ParseError>,
}

impl<'a> Reader<'a> {
    /// `chunks`: the INTERPRETED_FRAMES payloads with their file offsets, in file order;
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

    /// The entry of the sample at `offset`; None when it had neither a cut nor an
    /// interpreted frame. Samples must be asked for in the order the entries were written
    /// (see [`Lookahead`]).
    pub fn take(&mut self, offset: u64) -> Option<Entry> {
        let mut ahead = std::mem::take(&mut self.ahead);
        let e = ahead.take(offset, |e| e.offset, || self.next_entry());
        self.ahead = ahead;
        e
    }

    /// Every entry, in order (for rewriting a recording); an error at the first damage.
    pub fn all(mut self) -> Result<Vec<Entry>, ParseError> {
        let mut out = Vec::new();
        while let Some(e) = self.next_entry() {
            out.push(e);
        }
        match self.error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    fn next_entry(&mut self) -> Option<Entry> {
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
        let decoded = self.decode();
        if decoded.is_none() {
            self.error = Some(ParseError::new(
                self.chunk_at,
                format!(
                    "an interpreted-frames entry at byte {} of the decompressed chunk",
                    self.pos
                ),
            ));
        }
        decoded
    }

    fn decode(&mut self) -> Option<Entry> {
        let mut r = EndianSlice::new(self.buf.get(self.pos..)?, LittleEndian);
        let time = self.previous.time.wrapping_add(get_delta(&mut r)?);
        let offset = self.previous.offset.wrapping_add(get_delta(&mut r)?);
        let cut = match get_count(&mut r)? {
            0 => None,
            1 => Some(Cut::KernelLimit),
            2 => Some(Cut::StackCopy),
            _ => return None,
        };
        let n = get_count(&mut r)?;
        // Each frame takes at least two bytes: a count beyond the chunk is damage.
        if n > r.len() / 2 {
            return None;
        }
        let len = if n > 0 { get_count(&mut r)? } else { 0 };
        let mut methods = Vec::with_capacity(n);
        let (mut depth, mut method) = (0usize, 0u64);
        for _ in 0..n {
            depth = depth.checked_add(get_count(&mut r)?)?;
            method = method.wrapping_add(get_delta(&mut r)?);
            // A frame deeper than the stack is damage.
            methods.push((len.checked_sub(1)?.checked_sub(depth)?, method));
        }
        methods.reverse();
        self.pos = self.buf.len() - r.len();
        self.previous = Previous { time, offset };
        Some(Entry {
            time,
            offset,
            cut,
            len,
            methods,
        })
    }
}

/// The INTERPRETED_FRAMES `chunks` (file offset, payload) rewritten with every sample's record
/// offset mapped through `new_offset` (a recording whose records were rewritten); an error
/// when one is damaged or names a sample `new_offset` does not know.
pub fn renumbered<'a>(
    chunks: impl Iterator<Item = (usize, &'a [u8])> + 'a,
    new_offset: impl Fn(u64) -> Option<u64>,
) -> Result<Vec<Vec<u8>>, ParseError> {
    let mut w = Writer::default();
    let mut out = Vec::new();
    for mut e in Reader::new(chunks, |_, _| {}).all()? {
        e.offset = new_offset(e.offset).ok_or_else(|| {
            ParseError::new(
                0,
                format!(
                    "the sample record at {:#x} of an interpreted-frames entry",
                    e.offset
                ),
            )
        })?;
        out.extend(w.push_entry(&e));
    }
    out.extend(w.finish());
    Ok(out)
}

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

    fn sample(time: u64, offset: u64, cut: Option<Cut>, methods: &[Option<u64>]) -> Entry {
        Entry {
            time,
            offset,
            cut,
            len: if methods.iter().any(Option::is_some) {
                3
            } else {
                0
            },
            methods: methods
                .iter()
                .enumerate()
                .filter_map(|(i, m)| Some((i, (*m)?)))
                .collect(),
        }
    }

    #[test]
    fn entries_read_back_in_step_across_chunks() {
        let samples = [
            sample(
                100,
                5000,
                None,
                &[None, Some(0x7f00_1000), Some(0x7f00_0800)],
            ),
            sample(100, 5100, None, &[None, None]),
            sample(190, 1 << 48, Some(Cut::KernelLimit), &[]),
            sample(
                300,
                64,
                Some(Cut::StackCopy),
                &[Some(u64::MAX), None, Some(0)],
            ),
        ];
        let mut w = Writer::default();
        let mut chunks = Vec::new();
        for (i, s) in samples.iter().enumerate() {
            chunks.extend(w.push(s.time, s.offset, s.cut, &s.per_frame(3)));
            if i == 1 {
                chunks.extend(w.flush());
            }
        }
        chunks.extend(w.finish());
        assert_eq!(chunks.len(), 2);
        let mut r = Reader::new(chunks.iter().map(|c| (0, &c[..])), |_, _| {});
        for s in &samples {
            assert_eq!(r.take(s.offset + 1), None);
            let stored = s.cut.is_some() || !s.methods.is_empty();
            assert_eq!(r.take(s.offset), stored.then(|| s.clone()));
        }
        assert!(r.error.is_none());
        // Renumbered, the same entries under the new offsets.
        let moved = renumbered(chunks.iter().map(|c| (0, &c[..])), |o| Some(o + 8)).unwrap();
        let all = Reader::new(moved.iter().map(|c| (0, &c[..])), |_, _| {})
            .all()
            .unwrap();
        let offsets: Vec<u64> = all.iter().map(|e| e.offset).collect();
        assert_eq!(offsets, [5008, (1 << 48) + 8, 72]);
        assert_eq!(all[2].methods, [(0, u64::MAX), (2, 0)]);
        // A sample the new numbering lacks is an error.
        let err = renumbered(chunks.iter().map(|c| (0, &c[..])), |_| None).unwrap_err();
        assert!(err.to_string().contains("interpreted-frames"), "{err}");
    }

    #[test]
    fn a_walk_without_entries_still_writes_a_chunk() {
        let mut w = Writer::default();
        assert_eq!(w.push(1, 2, None, &[None]), None);
        let chunk = w.finish().expect("an empty chunk");
        let r = Reader::new([(0, &chunk[..])].into_iter(), |_, _| {});
        assert_eq!(r.all().unwrap(), []);
    }

    #[test]
    fn damaged_chunks_are_errors_not_panics() {
        // A count of frames far beyond the chunk, a cut code that does not exist, and bytes
        // that are no zstd frame.
        let mut huge = Vec::new();
        put_delta(&mut huge, 1);
        put_delta(&mut huge, 2);
        put_count(&mut huge, 0);
        put_count(&mut huge, usize::MAX >> 1);
        let mut bad_cut = Vec::new();
        put_delta(&mut bad_cut, 1);
        put_delta(&mut bad_cut, 2);
        put_count(&mut bad_cut, 7);
        put_count(&mut bad_cut, 0);
        for (raw, at) in [(huge, 4096), (bad_cut, 8192)] {
            let chunk = zstd::bulk::compress(&raw, 1).unwrap();
            let mut r = Reader::new([(at, &chunk[..])].into_iter(), |_, _| {});
            assert_eq!(r.take(2), None);
            let e = r.error.clone().expect("an error");
            assert_eq!(e.offset, at);
            assert!(Reader::new([(at, &chunk[..])].into_iter(), |_, _| {})
                .all()
                .is_err());
        }
        let mut r = Reader::new([(64, &b"junk"[..])].into_iter(), |_, _| {});
        assert_eq!(r.take(2), None);
        assert_eq!(r.error.map(|e| e.offset), Some(64));
        // Every truncation of a good chunk reads to an error or to fewer entries, never a panic.
        let mut w = Writer::default();
        w.push(5, 6, Some(Cut::StackCopy), &[Some(0x1234_5678)]);
        let raw = w.buf.clone();
        for end in 0..raw.len() {
            let chunk = zstd::bulk::compress(&raw[..end], 1).unwrap();
            let _ = Reader::new([(0, &chunk[..])].into_iter(), |_, _| {}).all();
        }
    }
}
