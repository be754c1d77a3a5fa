//! Raw clock reads: the TSC (`rdtsc`/`rdtscp`), `clock_gettime`, tight paired reads of the TSC
//! against a clock, and the time fields of a perf mmap metadata page read under its seqlock.
//! Everything here only reads; the arithmetic that uses the values lives in `jprof::timeline`.

use std::io;
use std::sync::atomic::{compiler_fence, fence, Ordering};
use std::sync::OnceLock;

use nix::time::ClockId;

use super::perf_event::{self, abi, PerfMmap};

/// Linux clockid of wall-clock time (ns since the Unix epoch; NTP may step or slew it).
pub const CLOCK_REALTIME: i32 = libc::CLOCK_REALTIME;
/// Linux clockid of the monotonic clock (ns since boot, minus suspend; NTP slews it). jprof's
/// sample clock.
pub const CLOCK_MONOTONIC: i32 = libc::CLOCK_MONOTONIC;

/// Which TSC instructions this CPU executes (checked once; executing an absent one is SIGILL).
#[derive(Clone, Copy, Debug)]
struct TscInsns {
    rdtsc: bool,
    rdtscp: bool,
}

fn tsc_insns() -> TscInsns {
    static INSNS: OnceLock<TscInsns> = OnceLock::new();
    *INSNS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let cpuid = raw_cpuid::CpuId::new();
            let rdtsc = cpuid.get_feature_info().is_some_and(|f| f.has_tsc());
            let rdtscp = rdtsc
                && cpuid
                    .get_extended_processor_and_feature_identifiers()
                    .is_some_and(|e| e.has_rdtscp());
            TscInsns { rdtsc, rdtscp }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            TscInsns {
                rdtsc: false,
                rdtscp: false,
            }
        }
    })
}

/// `rdtsc`: the raw TSC, not ordered against surrounding instructions. None off x86_64 or when
/// the CPU has no TSC.
pub fn rdtsc() -> Option<u64> {
    if !tsc_insns().rdtsc {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the CPU advertises the TSC (CPUID 1:EDX[4]), so the instruction exists; it
        // has no memory effects.
        Some(unsafe { core::arch::x86_64::_rdtsc() })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// `rdtscp`: the TSC after all earlier instructions completed, and IA32_TSC_AUX (on Linux the
/// CPU number in the low 12 bits, the NUMA node above). None off x86_64 or without RDTSCP.
pub fn rdtscp() -> Option<(u64, u32)> {
    if !tsc_insns().rdtscp {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let mut aux = 0u32;
        // SAFETY: the CPU advertises RDTSCP (CPUID 0x8000_0001:EDX[27]); the intrinsic writes
        // only `aux`, a valid local.
        let tsc = unsafe { core::arch::x86_64::__rdtscp(&mut aux) };
        Some((tsc, aux))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// `clock_gettime(clockid)` in ns. None for a clock the kernel rejects or a negative time.
pub fn clock_ns(clockid: i32) -> Option<u64> {
    let ts = nix::time::clock_gettime(ClockId::from_raw(clockid)).ok()?;
    let secs = u64::try_from(ts.tv_sec()).ok()?;
    let nanos = u64::try_from(ts.tv_nsec()).ok()?;
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// One TSC ↔ clock pair. `tsc` is the midpoint of the two rdtscp reads around the clock read,
/// `bracket_ticks` their distance: the clock was read somewhere inside that window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TscPair {
    /// Raw TSC value (ticks): midpoint of the two rdtscp reads.
    pub tsc: u64,
    /// The clock's reading in ns (the clock passed to [`tsc_pairs`]).
    pub ns: u64,
    /// TSC ticks between the two rdtscp reads.
    pub bracket_ticks: u64,
}

/// Brackets `clock_gettime(clockid)` between two rdtscp reads `tries` times and returns every
/// pair taken without a CPU migration in between, tightest first. Empty without RDTSCP.
pub fn tsc_pairs(clockid: i32, tries: usize) -> Vec<TscPair> {
    let mut pairs = Vec::with_capacity(tries);
    for _ in 0..tries {
        let Some((t1, cpu1)) = rdtscp() else {
            return Vec::new();
        };
        let ns = clock_ns(clockid);
        let Some((t2, cpu2)) = rdtscp() else {
            return Vec::new();
        };
        // A migration mixes two CPUs' TSCs; a backwards step means the same.
        let (Some(ns), true, true) = (ns, cpu1 == cpu2, t2 >= t1) else {
            continue;
        };
        let bracket_ticks = t2 - t1;
        pairs.push(TscPair {
            tsc: t1 + bracket_ticks / 2,
            ns,
            bracket_ticks,
        });
    }
    pairs.sort_by_key(|p| p.bracket_ticks);
    pairs
}

/// The tightest of `tries` TSC ↔ clock pairs (see [`tsc_pairs`]).
pub fn tightest_tsc_pair(clockid: i32, tries: usize) -> Option<TscPair> {
    tsc_pairs(clockid, tries).into_iter().next()
}

/// One reading of clock `b` against clock `a`: `a_ns` is the midpoint of two `a` reads around
/// the `b` read, `bracket_ns` their distance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockPair {
    /// Clock `a` in ns: midpoint of its two reads.
    pub a_ns: u64,
    /// Clock `b` in ns, read between them.
    pub b_ns: u64,
    /// Clock `a` ns between its two reads.
    pub bracket_ns: u64,
}

/// Brackets a read of clock `b` between two reads of clock `a`, `tries` times; returns the pair
/// with the smallest bracket.
pub fn tightest_clock_pair(a: i32, b: i32, tries: usize) -> Option<ClockPair> {
    let mut best: Option<ClockPair> = None;
    for _ in 0..tries {
        let (Some(a1), Some(b_ns), Some(a2)) = (clock_ns(a), clock_ns(b), clock_ns(a)) else {
            return None;
        };
        let Some(bracket_ns) = a2.checked_sub(a1) else {
            continue;
        };
        if best.is_none_or(|p| bracket_ns < p.bracket_ns) {
            best = Some(ClockPair {
                a_ns: a1 + bracket_ns / 2,
                b_ns,
                bracket_ns,
            });
        }
    }
    best
}

/// The time fields of a perf mmap metadata page, copied out under its seqlock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfPageTime {
    /// The page's `version` field.
    pub version: u32,
    /// The page's `compat_version` field.
    pub compat_version: u32,
    /// The seqlock value the copy was taken under (even; the kernel adds 2 per update).
    pub lock: u32,
    /// Header size the kernel filled in; time_cycles/time_mask exist only when it covers them.
    pub size: u32,
    /// Capability bits (`cap_user_time` and friends); see the `cap_*` methods.
    pub capabilities: u64,
    /// Right shift of the TSC → ns scaling (ns = ticks · `time_mult` >> `time_shift`).
    pub time_shift: u16,
    /// Multiplier of the TSC → ns scaling.
    pub time_mult: u32,
    /// ns added to the scaled TSC for the event's enabled/running times (`cap_user_time`).
    pub time_offset: u64,
    /// ns added to the scaled TSC to give perf clock time (`cap_user_time_zero`).
    pub time_zero: u64,
    /// TSC ticks at the last update, to extend a counter narrower than 64 bits.
    pub time_cycles: u64,
    /// Mask of the counter's valid bits (`cap_user_time_short`).
    pub time_mask: u64,
}

impl PerfPageTime {
    /// `time_mult`/`time_shift` (and `time_offset`) are valid.
    pub fn cap_user_time(&self) -> bool {
        self.capabilities & (1 << 3) != 0
    }
    /// `time_zero` is valid: TSC converts to the perf clock.
    pub fn cap_user_time_zero(&self) -> bool {
        self.capabilities & (1 << 4) != 0
    }
    /// The counter is `time_mask` bits wide and must be extended with `time_cycles`.
    pub fn cap_user_time_short(&self) -> bool {
        self.capabilities & (1 << 5) != 0
    }
}

/// Offset of `time_mask`'s end in the page: `size` must reach it for time_cycles/mask to exist.
const TIME_MASK_END: u32 = 96;

/// Copies the time fields of `mmap`'s metadata page inside the seqlock loop (retry while the
/// lock is odd or changed). None if the kernel kept updating for `max_tries` attempts.
pub fn read_page_time(mmap: &PerfMmap, max_tries: usize) -> Option<PerfPageTime> {
    let meta = mmap.meta();
    for _ in 0..max_tries {
        // SAFETY: `meta` points at the live metadata page of `mmap`, which outlives this call;
        // the kernel may write it concurrently, hence a volatile load.
        let seq = unsafe { std::ptr::addr_of!((*meta).lock).read_volatile() };
        fence(Ordering::Acquire);
        // SAFETY: as above, for each field; a torn copy is detected by the seqlock check below
        // and discarded.
        let copy = unsafe {
            PerfPageTime {
                version: std::ptr::addr_of!((*meta).version).read_volatile(),
                compat_version: std::ptr::addr_of!((*meta).compat_version).read_volatile(),
                lock: seq,
                size: std::ptr::addr_of!((*meta).size).read_volatile(),
                capabilities: std::ptr::addr_of!((*meta).__bindgen_anon_1.capabilities)
                    .read_volatile(),
                time_shift: std::ptr::addr_of!((*meta).time_shift).read_volatile(),
                time_mult: std::ptr::addr_of!((*meta).time_mult).read_volatile(),
                time_offset: std::ptr::addr_of!((*meta).time_offset).read_volatile(),
                time_zero: std::ptr::addr_of!((*meta).time_zero).read_volatile(),
                time_cycles: std::ptr::addr_of!((*meta).time_cycles).read_volatile(),
                time_mask: std::ptr::addr_of!((*meta).time_mask).read_volatile(),
            }
        };
        fence(Ordering::Acquire);
        compiler_fence(Ordering::SeqCst);
        // SAFETY: as above.
        let seq_after = unsafe { std::ptr::addr_of!((*meta).lock).read_volatile() };
        if seq_after == seq && seq % 2 == 0 {
            let mut copy = copy;
            if copy.size < TIME_MASK_END {
                // Older kernels: these bytes are reserved, not time fields.
                copy.time_cycles = 0;
                copy.time_mask = 0;
            }
            return Some(copy);
        }
        std::hint::spin_loop();
    }
    None
}

/// Opens a dummy software event on this process (no `use_clockid`, since x86 publishes
/// `time_zero` only then), maps just its metadata page, and reads the time fields.
pub fn probe_perf_page_time() -> io::Result<PerfPageTime> {
    let mut attr = perf_event::new_attr();
    attr.type_ = abi::PERF_TYPE_SOFTWARE;
    attr.config = abi::PERF_COUNT_SW_DUMMY as u64;
    // Self-monitoring of user space only: allowed at perf_event_paranoid 2 without privileges.
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    let fd = perf_event::open(&mut attr, 0, -1)?;
    let mmap = PerfMmap::new(fd, 0)?;
    read_page_time(&mmap, 10_000).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            "perf mmap page seqlock never settled",
        )
    })
}
