//! The `jit-<pid>.dump` file: header, the marker mmap that tells profilers where the file is,
//! and records stamped with the chosen clock (CLOCK_MONOTONIC, or raw TSC with the header's
//! ARCH_TIMESTAMP flag). Record bytes come from `jprof::format::jitdump_write`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use jprof::format::jitdump_write;

/// Nanoseconds of CLOCK_MONOTONIC (the clock jprof's samples are on).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn tsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86-64 (user-mode TSC reads are allowed on Linux).
    unsafe { core::arch::x86_64::_rdtsc() }
}

pub struct JitDump {
    path: PathBuf,
    file: File,
    /// The marker mapping of the file's first page.
    marker: *mut libc::c_void,
    arch_timestamp: bool,
}

const PAGE: usize = 4096;

impl JitDump {
    /// Creates `dir/jit-<pid>.dump`, writes the header and maps the marker page.
    pub fn create(dir: &Path, arch_timestamp: bool) -> io::Result<Self> {
        let pid = std::process::id();
        let path = dir.join(format!("jit-{pid}.dump"));
        // Read access too: the marker mmap needs it.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        let now = if arch_timestamp {
            tsc()
        } else {
            monotonic_ns()
        };
        file.write_all(&jitdump_write::header(pid, now, arch_timestamp))?;
        // The marker: an executable mapping of the file, so the profiler sees an MMAP2 record
        // naming jit-<pid>.dump (perf's convention). Nothing ever executes it.
        // SAFETY: maps the first page of a file we opened read-write; private and never
        // written through, so no other memory is affected.
        let marker = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if marker == libc::MAP_FAILED {
            return Err(io::Error::other(format!(
                "marker mmap of {}: {}",
                path.display(),
                io::Error::last_os_error()
            )));
        }
        Ok(Self {
            path,
            file,
            marker,
            arch_timestamp,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Now, on the dump's clock.
    pub fn now(&self) -> u64 {
        if self.arch_timestamp {
            tsc()
        } else {
            monotonic_ns()
        }
    }

    /// Appends one record. Unbuffered: a profiler tailing the file sees it at once.
    pub fn write(&mut self, record: &[u8]) -> io::Result<()> {
        self.file.write_all(record)
    }
}

impl Drop for JitDump {
    fn drop(&mut self) {
        let close = jitdump_write::close(self.now());
        let _ = self.file.write_all(&close);
        // SAFETY: unmaps exactly the marker page mapped in `create`.
        unsafe { libc::munmap(self.marker, PAGE) };
    }
}
