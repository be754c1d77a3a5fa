//! A read-only memory mapping of a whole file, so large recordings are read through the page
//! cache instead of being copied into a heap buffer first.

use std::fs::File;
use std::io;
use std::ops::Deref;
use std::path::Path;

/// A file's bytes, mapped read-only (an empty file has no mapping).
pub struct MappedFile {
    map: Option<memmap2::Mmap>,
}

/// How far around a faulting address the kernel maps file pages that are already in the page
/// cache (Linux's default `fault_around_bytes`).
const FAULT_AROUND: usize = 64 * 1024;

impl MappedFile {
    /// Maps the whole file at `path` read-only.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        if file.metadata()?.len() == 0 {
            return Ok(Self { map: None });
        }
        // SAFETY: the mapping is read-only (PROT_READ), so no Rust code writes through it.
        // The caveat of every file mapping remains: another process could truncate or
        // rewrite the file while it is mapped (a time-of-check/time-of-use race we
        // cannot rule out). Rewriting changes bytes under a `&[u8]`, which our parsers treat
        // as untrusted input anyway (every length is checked, no offsets are cached across
        // reads of the same bytes); truncation makes a read of the lost pages raise SIGBUS.
        // jprof only maps recordings it is asked to read, which are written append-only and
        // closed before they are read, so this is accepted as `perf report` and `git` do.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(Self { map: Some(map) })
    }
}

impl MappedFile {
    /// Lets the kernel drop the pages of `offset..offset + len` from this process (a reader
    /// done with them; reading them again faults them back in from the file), and those within
    /// 64 KiB (`FAULT_AROUND`) of it, which reading it mapped too. Failing calls change
    /// nothing: this only saves memory.
    pub fn release(&self, offset: usize, len: usize) {
        let Some(map) = &self.map else { return };
        let start = offset.saturating_sub(FAULT_AROUND).min(map.len());
        let end = offset
            .saturating_add(len)
            .saturating_add(FAULT_AROUND)
            .min(map.len());
        let (offset, len) = (start, end - start);
        if len == 0 {
            return;
        }
        // SAFETY: the mapping is a read-only file mapping (memmap2 maps it shared, PROT_READ)
        // that nothing writes through, so MADV_DONTNEED discards no data: it only unmaps the
        // pages, and a later read maps the file's bytes again from the page cache, the same
        // bytes any `&[u8]` into them saw (subject to the caveat in `open` about other
        // processes rewriting the file). The range is inside the mapping (clamped above).
        let _ =
            unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len) };
    }
}

impl Deref for MappedFile {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}
