//! perf_event_open(2), its ioctls, and the mmap'd ring buffer (metadata page + data pages).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};

pub use perf_event_open_sys::bindings as abi;
use perf_event_open_sys::bindings::{perf_event_attr, perf_event_mmap_page};

/// A zeroed attr with `size` set, ready to fill in.
pub fn new_attr() -> perf_event_attr {
    perf_event_attr {
        size: std::mem::size_of::<perf_event_attr>() as u32,
        ..Default::default()
    }
}

/// Opens one event. `pid`/`cpu` as in perf_event_open(2); the fd is close-on-exec.
pub fn open(attr: &mut perf_event_attr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a valid, fully initialised perf_event_attr whose `size` matches the
    // struct; the kernel reads it and may write back `size` on E2BIG. No group fd is used.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            attr,
            pid,
            cpu,
            -1,
            abi::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Enables a disabled event.
pub fn enable(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: ENABLE takes an integer argument and only affects the event behind `fd`.
    let r = unsafe { perf_event_open_sys::ioctls::ENABLE(fd.as_raw_fd(), 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Disables an event (stops sampling; records already in the ring stay readable).
pub fn disable(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: DISABLE takes an integer argument and only affects the event behind `fd`.
    let r = unsafe { perf_event_open_sys::ioctls::DISABLE(fd.as_raw_fd(), 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's id of an event: what `PERF_SAMPLE_IDENTIFIER` reports for it and for the
/// copies `inherit` makes of it in new threads.
pub fn event_id(fd: &OwnedFd) -> io::Result<u64> {
    let mut id = 0u64;
    // SAFETY: ID writes one u64 through the pointer, which points at a live local.
    let r = unsafe { perf_event_open_sys::ioctls::ID(fd.as_raw_fd(), &mut id) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(id)
}

/// Sends `fd`'s records into the ring of `target` (same CPU, same clock).
pub fn set_output(fd: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    // SAFETY: SET_OUTPUT takes another perf fd as its integer argument; both fds are live.
    let r = unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// An mmap'd perf event: the metadata page followed by `2^n` data pages (possibly none).
pub struct PerfMmap {
    base: NonNull<u8>,
    len: usize,
    data_offset: usize,
    data_size: usize,
    // Keeps the event alive as long as the mapping.
    _fd: OwnedFd,
}

// SAFETY: the mapping is owned by this struct; concurrent kernel writes are synchronised through
// data_head/data_tail with the fences below, and the struct hands out no aliasing references.
unsafe impl Send for PerfMmap {}

impl PerfMmap {
    /// Maps the event's metadata page plus `data_pages` (0 or a power of two) data pages,
    /// writable so the kernel honours `data_tail` (records are dropped, never overwritten).
    pub fn new(fd: OwnedFd, data_pages: usize) -> io::Result<Self> {
        let page = page_size();
        let len = page * (1 + data_pages);
        // SAFETY: mapping a perf fd with MAP_SHARED is the documented interface; the length is
        // (1 + 2^n) pages; the result is checked against MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(ptr as *mut u8).ok_or_else(io::Error::last_os_error)?;
        Ok(Self {
            base,
            len,
            data_offset: page,
            data_size: page * data_pages,
            _fd: fd,
        })
    }

    /// The perf event fd this mapping belongs to.
    pub fn fd(&self) -> &OwnedFd {
        &self._fd
    }

    /// The metadata page. Fields the kernel updates must be read with volatile loads.
    pub fn meta(&self) -> *const perf_event_mmap_page {
        self.base.as_ptr() as *const perf_event_mmap_page
    }

    /// Copies every complete record between data_tail and data_head into `out`, then releases
    /// that space to the kernel. Returns the number of bytes copied.
    pub fn drain_into(&mut self, out: &mut Vec<u8>) -> usize {
        if self.data_size == 0 {
            return 0;
        }
        let meta = self.base.as_ptr() as *mut perf_event_mmap_page;
        // SAFETY: `meta` points at the live metadata page of this mapping; data_head is written
        // by the kernel, so it is read volatile and followed by an acquire fence (pairs with the
        // kernel's smp_wmb before it publishes data_head).
        let head = unsafe { std::ptr::addr_of!((*meta).data_head).read_volatile() };
        fence(Ordering::Acquire);
        // SAFETY: data_tail is only written by us; reading it is a plain load of our own value.
        let tail = unsafe { std::ptr::addr_of!((*meta).data_tail).read_volatile() };
        let avail = head.wrapping_sub(tail) as usize;
        if avail == 0 {
            return 0;
        }
        let avail = avail.min(self.data_size);
        let start = (tail as usize) % self.data_size;
        let first = avail.min(self.data_size - start);
        // SAFETY: [data_offset, data_offset + data_size) lies inside the mapping; `start + first`
        // and `avail - first` stay within data_size, and the kernel does not write the region
        // between tail and head until we advance data_tail below.
        let data = unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(self.data_offset), self.data_size)
        };
        out.extend_from_slice(&data[start..start + first]);
        out.extend_from_slice(&data[..avail - first]);
        // Our reads of the data must complete before the kernel may reuse the space.
        fence(Ordering::SeqCst);
        // SAFETY: data_tail is the user-owned field of the metadata page (mapped PROT_WRITE).
        unsafe { std::ptr::addr_of_mut!((*meta).data_tail).write_volatile(tail + avail as u64) };
        avail
    }
}

impl Drop for PerfMmap {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` describe exactly the mapping created in `new`, unmapped once.
        unsafe {
            libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}
