//! Bytes of a file (mapped or read) or of a buffer, shared by several readers and sliced
//! without copying: a binary's sections handed to the DWARF reader (gimli) and the unwinder
//! (framehop) are ranges of the binary's one mapping instead of copies of it.

use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

use crate::mapped_file::MappedFile;

/// Where the bytes are: never moved or changed while any [`SharedBytes`] holds them.
enum Source {
    Mapped(MappedFile),
    Owned(Box<[u8]>),
}

impl Source {
    fn bytes(&self) -> &[u8] {
        match self {
            Source::Mapped(m) => m,
            Source::Owned(b) => b,
        }
    }
}

/// A range of shared bytes; cloning shares them.
#[derive(Clone)]
pub struct SharedBytes {
    source: Arc<Source>,
    range: Range<usize>,
}

impl SharedBytes {
    /// All of a mapped file.
    pub fn mapped(file: MappedFile) -> Self {
        let len = file.len();
        Self {
            source: Arc::new(Source::Mapped(file)),
            range: 0..len,
        }
    }

    /// All of a buffer.
    pub fn owned(bytes: Vec<u8>) -> Self {
        let len = bytes.len();
        Self {
            source: Arc::new(Source::Owned(bytes.into_boxed_slice())),
            range: 0..len,
        }
    }

    /// `range` of these bytes (relative to them), sharing them; `None` when out of bounds.
    pub fn slice(&self, range: Range<usize>) -> Option<Self> {
        if range.start > range.end || range.end > self.range.len() {
            return None;
        }
        Some(Self {
            source: self.source.clone(),
            range: self.range.start + range.start..self.range.start + range.end,
        })
    }

    /// Lets the kernel drop these bytes' pages from this process when they are a file's
    /// mapping (see [`MappedFile::release`]): a reader that went through much of them once
    /// (a symbol table, every DWARF unit's header) and from now on reads only a few places
    /// keeps only those few pages resident. Owned bytes stay as they are.
    pub fn release_pages(&self) {
        if let Source::Mapped(file) = &*self.source {
            file.release(self.range.start, self.range.len());
        }
    }

    /// Whether [`SharedBytes::read_at`] reads from the file, mapping nothing (a mapped file
    /// kept open: [`MappedFile::map_keeping`]); else these bytes are best read in place.
    pub fn reads_apart(&self) -> bool {
        matches!(&*self.source, Source::Mapped(file) if file.is_kept_open())
    }

    /// Copies the bytes at `offset` (relative to these bytes) into `buf`, as many as there are
    /// up to its length; returns how many. A mapped file kept open is read with pread, so
    /// the pages read are not mapped into this process (see [`MappedFile::map_keeping`]).
    pub fn read_at(&self, offset: usize, buf: &mut [u8]) -> usize {
        let len = self.range.len().saturating_sub(offset).min(buf.len());
        let at = self.range.start + offset;
        match &*self.source {
            Source::Mapped(file) => file.read_at(at, &mut buf[..len]),
            Source::Owned(bytes) => {
                buf[..len].copy_from_slice(&bytes[at..at + len]);
                len
            }
        }
    }

    /// Where `part` (a slice of these bytes) starts in them; `None` for bytes from elsewhere.
    pub fn offset_of(&self, part: &[u8]) -> Option<usize> {
        let start = (part.as_ptr() as usize).checked_sub(self.as_ptr() as usize)?;
        (start.checked_add(part.len())? <= self.len()).then_some(start)
    }
}

impl Deref for SharedBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.source.bytes()[self.range.clone()]
    }
}

/// Equal when the bytes are.
impl PartialEq for SharedBytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for SharedBytes {}

impl fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SharedBytes({} bytes)", self.range.len())
    }
}

// SAFETY: `StableDeref` promises that the address `deref` returns does not change when a
// `SharedBytes` is moved, and `CloneStableDeref` that a clone derefs to the same address. Both
// hold: the bytes are owned by the `Arc`'s `Source` (a file mapping, whose address is fixed for
// its life, or a boxed slice, which is never reallocated: nothing mutates a `Source` after it is
// made, since it is only reachable through `Arc`, shared and immutable), not by the
// `SharedBytes` value itself, and `range` is fixed at construction. A clone shares the same
// `Arc` and range.
unsafe impl stable_deref_trait::StableDeref for SharedBytes {}
// SAFETY: see above: a clone derefs to exactly the same bytes.
unsafe impl stable_deref_trait::CloneStableDeref for SharedBytes {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    #[test]
    fn slices_share_the_bytes_and_stay_in_bounds() {
        let all = SharedBytes::owned((0u8..100).collect());
        let part = all.slice(10..20).unwrap();
        assert_eq!(&part[..], &(10u8..20).collect::<Vec<_>>()[..]);
        let inner = part.slice(2..5).unwrap();
        assert_eq!(&inner[..], &[12, 13, 14]);
        assert_eq!(all.offset_of(&inner), Some(12));
        assert_eq!(part.offset_of(&all[0..3]), None);
        assert!(part.slice(5..11).is_none());
        assert!(all.slice(101..101).is_none());
        assert_eq!(inner.as_ptr(), inner.clone().as_ptr());
    }

    /// Released pages of a mapping read back as the file's bytes (faulted in again), and a
    /// slice releases only its own range (with what is around it) without changing any byte.
    #[test]
    fn released_pages_read_back_the_same() {
        let path = std::env::current_exe().unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let all = SharedBytes::mapped(MappedFile::map(&file).unwrap());
        assert_eq!(&all[..], &on_disk[..]);
        let middle = all.slice(on_disk.len() / 3..on_disk.len() / 2).unwrap();
        middle.release_pages();
        assert_eq!(&middle[..], &on_disk[on_disk.len() / 3..on_disk.len() / 2]);
        all.release_pages();
        assert_eq!(&all[..], &on_disk[..]);
        let owned = SharedBytes::owned(on_disk.clone());
        owned.release_pages();
        assert_eq!(&owned[..], &on_disk[..]);
    }

    /// Bytes read apart (pread from the file kept open) are the mapping's, within a slice and
    /// cut at its end; without the file kept, or owned, they are copied from memory.
    #[test]
    fn bytes_read_apart_are_the_mapped_ones() {
        let path = std::env::current_exe().unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        let kept =
            SharedBytes::mapped(MappedFile::map_keeping(File::open(&path).unwrap()).unwrap());
        let not_kept = SharedBytes::mapped(MappedFile::map(&File::open(&path).unwrap()).unwrap());
        let owned = SharedBytes::owned(on_disk.clone());
        assert!(kept.reads_apart());
        assert!(!not_kept.reads_apart() && !owned.reads_apart());
        let (start, end) = (on_disk.len() / 3, on_disk.len() / 3 + 5000);
        for all in [kept, not_kept, owned] {
            let part = all.slice(start..end).unwrap();
            let mut buf = vec![0u8; 300];
            assert_eq!(part.read_at(100, &mut buf), 300);
            assert_eq!(buf, on_disk[start + 100..start + 400]);
            // Past the slice's end: only what it holds.
            assert_eq!(part.read_at(4900, &mut buf), 100);
            assert_eq!(buf[..100], on_disk[start + 4900..end]);
            assert_eq!(part.read_at(6000, &mut buf), 0);
        }
    }
}
