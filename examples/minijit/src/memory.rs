//! Code memory: anonymous pages mapped read-write while code is written and read-execute while
//! it runs (never both), unmapped when dropped, and mapped again at a chosen address so freed
//! code addresses are reused.

use std::io;

const PAGE: usize = 4096;

/// The signature of every generated function: `u64 f(u64 iterations)` (System V: rdi → rax).
pub type JitFn = extern "C" fn(u64) -> u64;

/// One page of generated code.
pub struct CodePage {
    addr: *mut libc::c_void,
}

impl CodePage {
    /// A fresh page wherever the kernel puts it.
    pub fn new() -> io::Result<Self> {
        Self::map(std::ptr::null_mut(), 0)
    }

    /// A page at exactly `addr` (which must be free, e.g. a dropped page's address).
    pub fn at(addr: u64) -> io::Result<Self> {
        let page = Self::map(addr as *mut libc::c_void, libc::MAP_FIXED_NOREPLACE)?;
        if page.addr() != addr {
            // Kernels before 4.17 treat MAP_FIXED_NOREPLACE as a mere hint.
            return Err(io::Error::other(format!(
                "wanted the page at {addr:#x}, got {:#x}",
                page.addr()
            )));
        }
        Ok(page)
    }

    fn map(hint: *mut libc::c_void, extra_flags: libc::c_int) -> io::Result<Self> {
        // SAFETY: an anonymous private mapping touches no existing memory; with a hint and
        // MAP_FIXED_NOREPLACE the kernel fails rather than replace a mapping.
        let addr = unsafe {
            libc::mmap(
                hint,
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra_flags,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { addr })
    }

    pub fn addr(&self) -> u64 {
        self.addr as u64
    }

    fn protect(&self, prot: libc::c_int) -> io::Result<()> {
        // SAFETY: the range is exactly the page this value owns.
        if unsafe { libc::mprotect(self.addr, PAGE, prot) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Writes `code` at the start of the page (RW), then makes the page RX. x86 keeps the
    /// instruction cache coherent, so no flush is needed.
    pub fn install(&mut self, code: &[u8]) -> io::Result<()> {
        assert!(code.len() <= PAGE, "generated code fits one page");
        self.protect(libc::PROT_READ | libc::PROT_WRITE)?;
        // SAFETY: the page is mapped writable, owned by `self`, and `code` fits in it; the
        // source is a distinct Rust allocation, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), self.addr.cast::<u8>(), code.len()) };
        self.protect(libc::PROT_READ | libc::PROT_EXEC)
    }

    /// The installed code as a function.
    pub fn entry(&self) -> JitFn {
        // SAFETY: `install` put a complete function (prologue … ret) following the System V
        // ABI at the page start and made it executable; the page lives as long as `self`, and
        // callers only call the function while they hold the page.
        unsafe { std::mem::transmute::<*mut libc::c_void, JitFn>(self.addr) }
    }
}

impl Drop for CodePage {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the page this value mapped; no function of it runs any more.
        unsafe { libc::munmap(self.addr, PAGE) };
    }
}
