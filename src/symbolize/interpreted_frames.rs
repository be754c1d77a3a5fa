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

use gimli::{EndianSlice, LittleEndian};

use super::depth::Cut;
use super::entry_chunks::{
    self, chunk_when_full, compress, empty_chunk, get_count, get_delta, put_count, put_delta,
    ChunkReader, EntryDecoder,
};
use crate::format::ParseError;

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
        self.wrote = true;
        chunk_when_full(&mut self.buf)
    }

    /// The last chunk; one (of no entries) even when nothing was written at all.
    pub fn finish(mut self) -> Option<Vec<u8>> {
        match self.flush() {
            Some(chunk) => Some(chunk),
            None if !self.wrote => empty_chunk(),
            None => None,
        }
    }

    fn flush(&mut self) -> Option<Vec<u8>> {
        compress(&mut self.buf)
    }
}

/// Decodes INTERPRETED_FRAMES entries.
#[derive(Default)]
pub struct InterpretedFrames {
    previous: Previous,
}

impl EntryDecoder for InterpretedFrames {
    type Entry = Entry;
    const WHAT: &'static str = "an interpreted-frames entry";

    fn decode(&mut self, r: &mut EndianSlice<'_, LittleEndian>) -> Option<Entry> {
        let time = self.previous.time.wrapping_add(get_delta(r)?);
        let offset = self.previous.offset.wrapping_add(get_delta(r)?);
        let cut = match get_count(r)? {
            0 => None,
            1 => Some(Cut::KernelLimit),
            2 => Some(Cut::StackCopy),
            _ => return None,
        };
        let n = get_count(r)?;
        // Each frame takes at least two bytes: a count beyond the chunk is damage.
        if n > r.len() / 2 {
            return None;
        }
        let len = if n > 0 { get_count(r)? } else { 0 };
        let mut methods = Vec::with_capacity(n);
        let (mut depth, mut method) = (0usize, 0u64);
        for _ in 0..n {
            depth = depth.checked_add(get_count(r)?)?;
            method = method.wrapping_add(get_delta(r)?);
            // A frame deeper than the stack is damage.
            methods.push((len.checked_sub(1)?.checked_sub(depth)?, method));
        }
        methods.reverse();
        self.previous = Previous { time, offset };
        Some(Entry {
            time,
            offset,
            cut,
            len,
            methods,
        })
    }

    fn offset(e: &Entry) -> u64 {
        e.offset
    }
}

/// Reads the entries of a recording's INTERPRETED_FRAMES chunks in step with a walk in the
/// same order: one chunk decompressed at a time.
pub type Reader<'a> = ChunkReader<'a, InterpretedFrames>;

impl ChunkReader<'_, InterpretedFrames> {
    /// The entry of the sample at `offset`; None when it had neither a cut nor an
    /// interpreted frame. Samples must be asked for in the order the entries were written.
    pub fn take(&mut self, offset: u64) -> Option<Entry> {
        self.entry(offset)
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
    let mut out =
        entry_chunks::renumbered::<InterpretedFrames>(chunks, new_offset, |mut e, offset| {
            e.offset = offset;
            w.push_entry(&e)
        })?;
    out.extend(w.finish());
    Ok(out)
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
