//! The bpf(2) calls jprof makes: create a map, load a program (with the verifier's log on
//! refusal), attach a program to a perf event (PERF_EVENT_IOC_SET_BPF), and read a
//! BPF_MAP_TYPE_RINGBUF from user space through its two mappings. The program itself is built
//! (pure code, no unsafe) by the recorder: `src/record/deep_frames.rs`.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::perf_event::page_size;

/// `BPF_MAP_TYPE_HASH` (uapi `enum bpf_map_type`).
pub const MAP_TYPE_HASH: u32 = 1;
/// `BPF_MAP_TYPE_PERCPU_ARRAY`.
pub const MAP_TYPE_PERCPU_ARRAY: u32 = 6;
/// `BPF_MAP_TYPE_RINGBUF`.
pub const MAP_TYPE_RINGBUF: u32 = 27;
/// `BPF_PROG_TYPE_PERF_EVENT` (uapi `enum bpf_prog_type`).
pub const PROG_TYPE_PERF_EVENT: u32 = 7;

/// bpf(2) commands (uapi `enum bpf_cmd`).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_BTF_LOAD: libc::c_long = 18;

/// The part of `union bpf_attr` BPF_MAP_CREATE reads (the kernel takes the rest as zero).
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// The part of `union bpf_attr` BPF_PROG_LOAD reads.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
}

/// The part of `union bpf_attr` BPF_BTF_LOAD reads.
#[repr(C)]
#[derive(Default)]
struct BtfLoadAttr {
    btf: u64,
    btf_log_buf: u64,
    btf_size: u32,
    btf_log_size: u32,
    btf_log_level: u32,
}

fn sys_bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a live, fully initialised #[repr(C)] prefix of `union bpf_attr` whose
    // size is passed along; the kernel reads at most that many bytes (and writes back only
    // into buffers the attr points at, which the callers keep alive for the call).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: MAP_CREATE and PROG_LOAD return a new fd owned by nobody else (O_CLOEXEC is the
    // kernel's default for bpf fds).
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (o, b) in out.iter_mut().zip(name.bytes().take(15)) {
        *o = b;
    }
    out
}

/// Creates a map; `name` (at most 15 bytes kept) shows in `bpftool map`.
pub fn create_map(
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type,
        key_size,
        value_size,
        max_entries,
        map_name: name16(name),
        ..Default::default()
    };
    sys_bpf(BPF_MAP_CREATE, &mut attr)
}

/// The part of `union bpf_attr` BPF_MAP_UPDATE_ELEM and BPF_MAP_DELETE_ELEM read.
#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// A hash map of process ids (4-byte keys and values) a program looks up: which processes it
/// works for.
pub struct PidSet(OwnedFd);

impl PidSet {
    /// Room for `max` processes; `name` as for [`create_map`].
    pub fn new(max: u32, name: &str) -> io::Result<Self> {
        create_map(MAP_TYPE_HASH, 4, 4, max, name).map(Self)
    }

    /// The map, for a program that looks it up.
    pub fn fd(&self) -> &OwnedFd {
        &self.0
    }

    /// Adds `pid` (a full map refuses it: E2BIG).
    pub fn insert(&self, pid: u32) -> io::Result<()> {
        self.command(BPF_MAP_UPDATE_ELEM, pid)
    }

    /// Takes `pid` out (one that is not in: ENOENT).
    pub fn remove(&self, pid: u32) -> io::Result<()> {
        self.command(BPF_MAP_DELETE_ELEM, pid)
    }

    /// BPF_MAP_UPDATE_ELEM (`pid` → 1) or BPF_MAP_DELETE_ELEM (`pid`) on the map.
    fn command(&self, command: libc::c_long, pid: u32) -> io::Result<()> {
        let (key, value) = (pid, 1u32);
        let mut attr = MapElemAttr {
            map_fd: self.0.as_raw_fd() as u32,
            key: &key as *const u32 as u64,
            // DELETE takes the key alone: the kernel refuses (EINVAL) any field after it set.
            value: match command {
                BPF_MAP_UPDATE_ELEM => &value as *const u32 as u64,
                _ => 0,
            },
            ..Default::default()
        };
        // SAFETY: `attr` is a live #[repr(C)] prefix of `union bpf_attr` whose size is passed;
        // the kernel reads the map's key and value sizes (4 and 4, as `new` made it) from
        // `key` and, for UPDATE, `value`, which live until the call returns, and writes
        // nothing back.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                command,
                &mut attr as *mut MapElemAttr as *mut libc::c_void,
                std::mem::size_of::<MapElemAttr>() as libc::c_uint,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Why the kernel refused a program.
#[derive(Debug)]
pub struct LoadError {
    /// The error bpf(2) returned.
    pub error: io::Error,
    /// The verifier's log (its last lines say why), empty when it wrote none.
    pub log: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tail: Vec<&str> = self.log.lines().rev().take(3).collect();
        write!(f, "{}", self.error)?;
        if !tail.is_empty() {
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            write!(f, " (verifier: {})", tail.join(" / "))?;
        }
        Ok(())
    }
}

/// Verifier log room: enough for the end of a refusal of a program of a few hundred
/// instructions (the kernel keeps the log's end when it overflows, with ENOSPC only if the
/// program was accepted).
const LOG_BYTES: usize = 1 << 20;

/// Loads type information (a BTF blob: header, types, strings) for a program's functions.
pub fn load_btf(blob: &[u8]) -> io::Result<OwnedFd> {
    let mut attr = BtfLoadAttr {
        btf: blob.as_ptr() as u64,
        btf_size: blob.len() as u32,
        ..Default::default()
    };
    sys_bpf(BPF_BTF_LOAD, &mut attr)
}

/// A program's functions (`struct bpf_func_info`: first instruction, BTF `FUNC` type id), in
/// the BTF `btf`: what a program with subprograms passed by address (callbacks) must carry.
pub struct Functions<'a> {
    /// From [`load_btf`].
    pub btf: &'a OwnedFd,
    /// (instruction index, type id) of each function, the main one first.
    pub funcs: &'a [[u32; 2]],
}

/// Loads a program of `prog_type` made of `insns` (encoded `struct bpf_insn`s), with its
/// functions' types when it has subprograms.
pub fn load_program(
    prog_type: u32,
    insns: &[u64],
    license: &CStr,
    name: &str,
    functions: Option<&Functions<'_>>,
) -> Result<OwnedFd, LoadError> {
    let load = |log: Option<&mut Vec<u8>>| {
        let mut attr = ProgLoadAttr {
            prog_type,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            prog_name: name16(name),
            ..Default::default()
        };
        if let Some(f) = functions {
            attr.prog_btf_fd = f.btf.as_raw_fd() as u32;
            attr.func_info_rec_size = 8;
            attr.func_info = f.funcs.as_ptr() as u64;
            attr.func_info_cnt = f.funcs.len() as u32;
        }
        if let Some(log) = log {
            attr.log_level = 1;
            attr.log_size = log.len() as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
        }
        sys_bpf(BPF_PROG_LOAD, &mut attr)
    };
    match load(None) {
        Ok(fd) => Ok(fd),
        Err(error) => {
            // Again with the log, to say why.
            let mut log = vec![0u8; LOG_BYTES];
            let _ = load(Some(&mut log));
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Err(LoadError {
                error,
                log: String::from_utf8_lossy(&log[..end]).into_owned(),
            })
        }
    }
}

/// `PERF_EVENT_IOC_SET_BPF`: runs `prog` on every overflow of the perf event `event` (and of
/// the copies `inherit` makes of it in new threads); the program's return value decides
/// whether the kernel keeps the sample.
pub fn attach_to_perf_event(event: &OwnedFd, prog: &OwnedFd) -> io::Result<()> {
    // SAFETY: SET_BPF takes a BPF program fd as its integer argument; both fds are live.
    let r =
        unsafe { perf_event_open_sys::ioctls::SET_BPF(event.as_raw_fd(), prog.as_raw_fd() as u32) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Header bits of a ring buffer record (uapi `BPF_RINGBUF_BUSY_BIT`, `_DISCARD_BIT`).
const RINGBUF_BUSY: u32 = 1 << 31;
const RINGBUF_DISCARD: u32 = 1 << 30;
/// Bytes before each record in the ring (its length and flags word, padded).
pub const RINGBUF_HEADER: usize = 8;

/// A BPF ring buffer's user-space side: the consumer position page (ours to write) and the
/// producer position page followed by the data pages, mapped twice in a row by the kernel so a
/// record that wraps around reads as one slice.
pub struct RingBuf {
    consumer: NonNull<u8>,
    producer: NonNull<u8>,
    page: usize,
    size: usize,
    map: OwnedFd,
}

// SAFETY: the mappings are owned by this struct; the kernel's writes are synchronised through
// the producer/consumer positions and record headers with acquire/release atomics below.
unsafe impl Send for RingBuf {}

impl RingBuf {
    /// Creates a ring buffer map of `size` bytes (a power of two, a multiple of the page size)
    /// and maps it.
    pub fn new(size: usize, name: &str) -> io::Result<Self> {
        let map = create_map(MAP_TYPE_RINGBUF, 0, 0, size as u32, name)?;
        let page = page_size();
        // SAFETY: mapping a ring buffer map fd is its documented interface: the first page
        // (consumer position) read-write at offset 0; the result is checked.
        let consumer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_raw_fd(),
                0,
            )
        };
        if consumer == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above: the producer page and twice the data, read-only, at offset one page.
        let producer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page + 2 * size,
                libc::PROT_READ,
                libc::MAP_SHARED,
                map.as_raw_fd(),
                page as libc::off_t,
            )
        };
        if producer == libc::MAP_FAILED {
            let error = io::Error::last_os_error();
            // SAFETY: unmaps exactly the consumer page mapped above.
            unsafe { libc::munmap(consumer, page) };
            return Err(error);
        }
        Ok(Self {
            consumer: NonNull::new(consumer as *mut u8).ok_or_else(io::Error::last_os_error)?,
            producer: NonNull::new(producer as *mut u8).ok_or_else(io::Error::last_os_error)?,
            page,
            size,
            map,
        })
    }

    /// The map's fd (for the program's map references).
    pub fn fd(&self) -> &OwnedFd {
        &self.map
    }

    /// Hands every committed record's bytes to `each`, in the order they were reserved, and
    /// frees their space; stops at a record still being written. Returns how many it handed.
    pub fn drain(&mut self, mut each: impl FnMut(&[u8])) -> usize {
        // SAFETY: both positions are the first u64 of their pages, which stay mapped while
        // `self` lives; the kernel and this reader access them atomically.
        let (consumer_pos, producer_pos) = unsafe {
            (
                &*(self.consumer.as_ptr() as *const AtomicU64),
                &*(self.producer.as_ptr() as *const AtomicU64),
            )
        };
        let mut cons = consumer_pos.load(Ordering::Acquire);
        let prod = producer_pos.load(Ordering::Acquire);
        let mask = (self.size - 1) as u64;
        let mut handed = 0;
        while cons < prod {
            let at = self.page + (cons & mask) as usize;
            // SAFETY: `at` is within the first copy of the data pages (mask < size); a record
            // header is 8-aligned; the kernel writes its length word atomically.
            let header = unsafe {
                (*(self.producer.as_ptr().add(at) as *const AtomicU32)).load(Ordering::Acquire)
            };
            if header & RINGBUF_BUSY != 0 {
                break;
            }
            let len = (header & !(RINGBUF_BUSY | RINGBUF_DISCARD)) as usize;
            if len > self.size {
                // Never written by a kernel: stop rather than read outside the mapping.
                break;
            }
            if header & RINGBUF_DISCARD == 0 {
                // SAFETY: the record's data starts after its header and is at most `size`
                // bytes, which the second copy of the data pages covers past the end.
                let data = unsafe {
                    std::slice::from_raw_parts(self.producer.as_ptr().add(at + RINGBUF_HEADER), len)
                };
                each(data);
                handed += 1;
            }
            cons += (len + RINGBUF_HEADER).next_multiple_of(8) as u64;
            consumer_pos.store(cons, Ordering::Release);
        }
        handed
    }
}

impl Drop for RingBuf {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the two mappings made in `new`, once.
        unsafe {
            libc::munmap(self.consumer.as_ptr() as *mut libc::c_void, self.page);
            libc::munmap(
                self.producer.as_ptr() as *mut libc::c_void,
                self.page + 2 * self.size,
            );
        }
    }
}
