//! A read-only memory mapping of a whole file, so large recordings and binaries are read through
//! the page cache instead of being copied into a heap buffer first.

use std::fs::File;
use std::io;
use std::ops::Deref;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A file's bytes, mapped read-only (an empty file has no mapping).
pub struct MappedFile {
    map: Option<memmap2::Mmap>,
    /// The file itself, kept open (see [`MappedFile::map_keeping`]) while it counts in
    /// [`KEPT_OPEN`].
    file: Option<File>,
}

/// How many files [`MappedFile::map_keeping`] keeps open at most at once: far below the usual
/// 1024 open files a process may have, whatever else jprof opens beside them.
const MAX_KEPT_OPEN: usize = 256;

/// How many mapped files are kept open now.
static KEPT_OPEN: AtomicUsize = AtomicUsize::new(0);

/// How far around a faulting address the kernel maps file pages that are already in the page
/// cache (Linux's default `fault_around_bytes`).
const FAULT_AROUND: usize = 64 * 1024;

impl MappedFile {
    /// Maps the whole of `file` read-only. The caller decides the file is safe to map (see the
    /// SAFETY note): jprof maps only through `foreign_file::FileBytes` in the jprof crate.
    pub fn map(file: &File) -> io::Result<Self> {
        if file.metadata()?.len() == 0 {
            return Ok(Self {
                map: None,
                file: None,
            });
        }
        // SAFETY: the mapping is read-only (PROT_READ), so no Rust code writes through it.
        // Every file mapping has one caveat: another process could rewrite or truncate the
        // file while it is mapped. Rewriting changes bytes under a `&[u8]`, which our parsers
        // treat as untrusted input anyway (every length is checked, no offset is trusted across
        // two reads of the same bytes). Truncating makes a read of the lost pages raise SIGBUS,
        // so the one caller (`foreign_file::FileBytes::of` in the jprof crate) maps only a
        // regular file that no other user can truncate: owned by the user running jprof or
        // root, writable by nobody else, and not inside a container's `/proc/PID/root` (whose
        // root may be another user's). Every other file is read into memory instead. Only a
        // process with jprof's own privileges, or root, can still truncate a mapped file, which
        // the threat model leaves out (docs/security.md).
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(Self {
            map: Some(map),
            file: None,
        })
    }

    /// [`MappedFile::map`], keeping `file` open (while fewer than 256 are) so that
    /// [`MappedFile::read_at`] reads scattered bytes (a symbol's name here and there in a string
    /// table of megabytes) without mapping them: a read through the mapping maps the 64 KiB of
    /// page-cache pages around it into this process, and they count in its resident memory.
    pub fn map_keeping(file: File) -> io::Result<Self> {
        let mut mapped = Self::map(&file)?;
        let kept = KEPT_OPEN.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < MAX_KEPT_OPEN).then_some(n + 1)
        });
        if kept.is_ok() {
            mapped.file = Some(file);
        }
        Ok(mapped)
    }

    /// Whether the file was kept open ([`MappedFile::map_keeping`]).
    pub fn is_kept_open(&self) -> bool {
        self.file.is_some()
    }

    /// Copies the bytes at `offset` into `buf`, as many as there are up to its length; returns
    /// how many. From the file (pread) when it was kept open, so that no page gets mapped; else
    /// from the mapping.
    pub fn read_at(&self, offset: usize, buf: &mut [u8]) -> usize {
        let len = self.len().saturating_sub(offset).min(buf.len());
        let buf = &mut buf[..len];
        if let Some(file) = &self.file {
            // A file shortened since it was mapped gives fewer bytes: they are all there is.
            let mut done = 0;
            while done < len {
                match file.read_at(&mut buf[done..], (offset + done) as u64) {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            return done;
        }
        if len > 0 {
            buf.copy_from_slice(&self[offset..offset + len]);
        }
        len
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            KEPT_OPEN.fetch_sub(1, Ordering::Relaxed);
        }
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
        // bytes any `&[u8]` into them saw (subject to the caveat in `map` about other
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
