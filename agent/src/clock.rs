//! Record timestamps: raw TSC when the CPU's TSC is invariant (constant rate, never stops;
//! CPUID 0x8000_0007 EDX bit 8), flagged with JITDUMP_FLAGS_ARCH_TIMESTAMP so jprof converts it
//! with the recording's TSC calibration; CLOCK_MONOTONIC nanoseconds (the sample clock)
//! otherwise. `JPROF_AGENT_CLOCK=monotonic` forces the fallback.

use nix::time::{clock_gettime, ClockId};

use crate::ffi;

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    tsc: bool,
}

fn invariant_tsc() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        raw_cpuid::CpuId::new()
            .get_advanced_power_mgmt_info()
            .is_some_and(|apm| apm.has_invariant_tsc())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

impl Clock {
    pub fn detect() -> Self {
        let forced_monotonic = std::env::var("JPROF_AGENT_CLOCK").is_ok_and(|v| v == "monotonic");
        Clock {
            tsc: !forced_monotonic && invariant_tsc() && ffi::rdtsc().is_some(),
        }
    }

    /// Whether timestamps are raw TSC (the jitdump header flag).
    pub fn is_tsc(self) -> bool {
        self.tsc
    }

    pub fn now(self) -> u64 {
        if self.tsc {
            if let Some(t) = ffi::rdtsc() {
                return t;
            }
        }
        clock_gettime(ClockId::CLOCK_MONOTONIC)
            .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward() {
        let clock = Clock::detect();
        let a = clock.now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = clock.now();
        assert!(b > a, "{a} then {b}");
        let mono = Clock { tsc: false };
        let (x, y) = (mono.now(), mono.now());
        assert!(x > 0 && y >= x);
    }
}
