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

impl MappedFile {
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        if file.metadata()?.len() == 0 {
            return Ok(Self { map: None });
        }
        // SAFETY: the mapping is read-only and private to this process, so no Rust code
        // writes through it. The caveat of every file mapping remains: another process could
        // truncate or rewrite the file while it is mapped (a time-of-check/time-of-use race we
        // cannot rule out). Rewriting changes bytes under a `&[u8]`, which our parsers treat
        // as untrusted input anyway (every length is checked, no offsets are cached across
        // reads of the same bytes); truncation makes a read of the lost pages raise SIGBUS.
        // jprof only maps recordings it is asked to read, which are written append-only and
        // closed before they are read, so this is accepted as `perf report` and `git` do.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(Self { map: Some(map) })
    }
}

impl Deref for MappedFile {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}
