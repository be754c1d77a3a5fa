//! What the CPU and kernel say about the TSC: CPUID bits and nominal frequencies (raw-cpuid,
//! formats.md §8), the `/proc/cpuinfo` TSC flags and the current clocksource. The text parsing
//! and the CPUID decoding are pure; `TscFacts::probe` is the small loader that reads the machine.

use serde::{Deserialize, Serialize};

const CLOCKSOURCE_PATH: &str = "/sys/devices/system/clocksource/clocksource0/current_clocksource";

/// TSC-related flags from the `flags` line of /proc/cpuinfo (set by the kernel, so they include
/// what it learned beyond CPUID, e.g. from the hypervisor).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuinfoTscFlags {
    pub(crate) tsc: bool,
    pub(crate) constant_tsc: bool,
    pub(crate) nonstop_tsc: bool,
    pub(crate) tsc_reliable: bool,
    pub(crate) tsc_known_freq: bool,
}

/// Reads the TSC flags from the first `flags` line of /proc/cpuinfo text (all CPUs agree).
pub fn parse_cpuinfo_flags(text: &str) -> Option<CpuinfoTscFlags> {
    let line = text
        .lines()
        .find(|l| l.split(':').next().is_some_and(|key| key.trim() == "flags"))?;
    let (_, flags) = line.split_once(':')?;
    let mut out = CpuinfoTscFlags::default();
    for flag in flags.split_whitespace() {
        match flag {
            "tsc" => out.tsc = true,
            "constant_tsc" => out.constant_tsc = true,
            "nonstop_tsc" => out.nonstop_tsc = true,
            "tsc_reliable" => out.tsc_reliable = true,
            "tsc_known_freq" => out.tsc_known_freq = true,
            _ => {}
        }
    }
    Some(out)
}

/// Everything known about the TSC on the recording machine; stored in the CLOCK chunk.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TscFacts {
    /// The recording ran on x86_64 (no TSC elsewhere).
    pub x86_64: bool,
    /// CPUID `1:EDX[4]`.
    pub has_tsc: bool,
    /// CPUID `0x8000_0007:EDX[8]`: constant rate, runs in all C-states.
    pub invariant_tsc: bool,
    /// CPUID `0x8000_0001:EDX[27]`.
    pub has_rdtscp: bool,
    /// CPUID `1:ECX[31]`.
    pub under_hypervisor: bool,
    /// Hypervisor identity from leaf 0x4000_0000 (e.g. "KVM"), when there is one.
    pub hypervisor: Option<String>,
    /// CPUID vendor string, e.g. "GenuineIntel".
    pub vendor: Option<String>,
    /// Leaf 0x15: crystal Hz · numerator / denominator (None when any part is 0).
    pub cpuid_tsc_hz: Option<u64>,
    /// Leaf 0x4000_0010 EAX (kHz, converted to Hz), when present and non-zero.
    pub hypervisor_tsc_hz: Option<u64>,
    /// Leaf 0x16 base frequency (MHz, converted to Hz), when non-zero. Approximate.
    pub base_frequency_hz: Option<u64>,
    /// 1e9·2^time_shift/time_mult from the perf mmap page, when it publishes cap_user_time.
    pub page_tsc_hz: Option<f64>,
    /// The TSC flags of /proc/cpuinfo, when it could be read.
    pub cpuinfo: Option<CpuinfoTscFlags>,
    /// The kernel's current clocksource ("tsc", "kvm-clock", ...).
    pub clocksource: Option<String>,
}

impl TscFacts {
    /// Reads CPUID, /proc/cpuinfo and the clocksource of this machine. `page_tsc_hz` is left for
    /// the caller, who has the perf page.
    pub fn probe() -> Self {
        let mut facts = Self::from_cpuid_of_this_cpu();
        facts.cpuinfo = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| parse_cpuinfo_flags(&t));
        facts.clocksource = std::fs::read_to_string(CLOCKSOURCE_PATH)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        facts
    }

    #[cfg(target_arch = "x86_64")]
    fn from_cpuid_of_this_cpu() -> Self {
        Self::from_cpuid(&raw_cpuid::CpuId::new())
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn from_cpuid_of_this_cpu() -> Self {
        Self::default()
    }

    /// Decodes the TSC facts from a CPUID source (the real CPU, or a table in tests).
    pub fn from_cpuid<R: raw_cpuid::CpuIdReader>(cpuid: &raw_cpuid::CpuId<R>) -> Self {
        let features = cpuid.get_feature_info();
        let hypervisor = cpuid.get_hypervisor_info();
        Self {
            x86_64: cfg!(target_arch = "x86_64"),
            has_tsc: features.as_ref().is_some_and(|f| f.has_tsc()),
            invariant_tsc: cpuid
                .get_advanced_power_mgmt_info()
                .is_some_and(|a| a.has_invariant_tsc()),
            has_rdtscp: cpuid
                .get_extended_processor_and_feature_identifiers()
                .is_some_and(|e| e.has_rdtscp()),
            under_hypervisor: features.as_ref().is_some_and(|f| f.has_hypervisor()),
            hypervisor: hypervisor.as_ref().map(|h| match h.identify() {
                raw_cpuid::Hypervisor::Unknown(..) => "unknown".to_string(),
                known => format!("{known:?}"),
            }),
            vendor: cpuid.get_vendor_info().map(|v| v.as_str().to_string()),
            cpuid_tsc_hz: cpuid.get_tsc_info().and_then(|t| t.tsc_frequency()),
            // The leaf returns Some(0) when the hypervisor leaves it empty.
            hypervisor_tsc_hz: hypervisor
                .as_ref()
                .and_then(|h| h.tsc_frequency())
                .filter(|&khz| khz != 0)
                .map(|khz| u64::from(khz) * 1000),
            base_frequency_hz: cpuid
                .get_processor_frequency_info()
                .map(|f| f.processor_base_frequency())
                .filter(|&mhz| mhz != 0)
                .map(|mhz| u64::from(mhz) * 1_000_000),
            page_tsc_hz: None,
            cpuinfo: None,
            clocksource: None,
        }
    }

    /// The TSC ticks at a constant rate that does not stop: CPUID's invariant bit, or the
    /// kernel's constant_tsc + nonstop_tsc flags (hypervisors often hide the CPUID bit).
    pub fn tsc_is_invariant(&self) -> bool {
        self.invariant_tsc
            || self
                .cpuinfo
                .is_some_and(|f| f.constant_tsc && f.nonstop_tsc)
    }

    /// rdtscp can be paired with clock reads and the TSC rate is stable.
    pub fn tsc_usable(&self) -> bool {
        self.x86_64 && self.has_tsc && self.has_rdtscp && self.tsc_is_invariant()
    }

    /// The best nominal TSC frequency and where it came from: the kernel's calibration (perf
    /// page) first, then CPUID 0x15, the hypervisor leaf, and the 0x16 base frequency.
    pub fn nominal_tsc_hz(&self) -> Option<(f64, &'static str)> {
        if let Some(hz) = self.page_tsc_hz {
            return Some((hz, "perf page time_mult/time_shift"));
        }
        let integer_sources = [
            (self.cpuid_tsc_hz, "cpuid 0x15"),
            (self.hypervisor_tsc_hz, "cpuid 0x40000010"),
            (self.base_frequency_hz, "cpuid 0x16 base frequency"),
        ];
        integer_sources
            .into_iter()
            .find_map(|(hz, source)| hz.map(|hz| (hz as f64, source)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raw_cpuid::{CpuId, CpuIdResult};

    fn regs(eax: u32, ebx: u32, ecx: u32, edx: u32) -> CpuIdResult {
        CpuIdResult { eax, ebx, ecx, edx }
    }

    /// An Intel CPU under KVM: invariant TSC, 0x15 = 24 MHz crystal · 125/2 = 1.5 GHz, hypervisor
    /// leaf 0x4000_0010 reporting 1_500_000 kHz, 0x16 base 1500 MHz.
    fn kvm_cpu(leaf: u32, _sub: u32) -> CpuIdResult {
        match leaf {
            // max basic leaf 0x16, "GenuineIntel"
            0 => regs(0x16, 0x756e_6547, 0x6c65_746e, 0x4965_6e69),
            // ECX[31] hypervisor, EDX[4] tsc
            1 => regs(0, 0, 1 << 31, 1 << 4),
            0x15 => regs(2, 125, 24_000_000, 0),
            0x16 => regs(1500, 3000, 100, 0),
            // max hypervisor leaf 0x4000_0010, "KVMKVMKVM\0\0\0"
            0x4000_0000 => regs(0x4000_0010, 0x4b4d_564b, 0x564b_4d56, 0x4d),
            0x4000_0010 => regs(1_500_000, 1_000_000, 0, 0),
            0x8000_0000 => regs(0x8000_0008, 0, 0, 0),
            0x8000_0001 => regs(0, 0, 0, 1 << 27),
            0x8000_0007 => regs(0, 0, 0, 1 << 8),
            _ => regs(0, 0, 0, 0),
        }
    }

    #[test]
    fn decodes_cpuid() {
        let facts = TscFacts::from_cpuid(&CpuId::with_cpuid_fn(kvm_cpu));
        assert!(facts.has_tsc && facts.invariant_tsc && facts.has_rdtscp);
        assert!(facts.under_hypervisor);
        assert_eq!(facts.hypervisor.as_deref(), Some("KVM"));
        assert_eq!(facts.vendor.as_deref(), Some("GenuineIntel"));
        assert_eq!(facts.cpuid_tsc_hz, Some(1_500_000_000));
        assert_eq!(facts.hypervisor_tsc_hz, Some(1_500_000_000));
        assert_eq!(facts.base_frequency_hz, Some(1_500_000_000));
        assert_eq!(facts.nominal_tsc_hz(), Some((1.5e9, "cpuid 0x15")));
    }

    #[test]
    fn empty_leaves_are_not_frequencies() {
        let bare = |leaf: u32, sub: u32| match leaf {
            0x15 | 0x16 | 0x4000_0010 | 0x8000_0007 => regs(0, 0, 0, 0),
            _ => kvm_cpu(leaf, sub),
        };
        let facts = TscFacts::from_cpuid(&CpuId::with_cpuid_fn(bare));
        assert_eq!(facts.cpuid_tsc_hz, None);
        assert_eq!(facts.hypervisor_tsc_hz, None);
        assert_eq!(facts.base_frequency_hz, None);
        assert_eq!(facts.nominal_tsc_hz(), None);
        assert!(!facts.invariant_tsc);
        let page = TscFacts {
            page_tsc_hz: Some(2.1e9),
            ..facts.clone()
        };
        assert_eq!(
            page.nominal_tsc_hz(),
            Some((2.1e9, "perf page time_mult/time_shift"))
        );
    }

    #[test]
    fn invariance_from_kernel_flags() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\n\
            flags\t\t: fpu tsc msr rdtscp constant_tsc nonstop_tsc tsc_known_freq hypervisor\n\
            processor\t: 1\nflags\t\t: fpu\n";
        let flags = parse_cpuinfo_flags(cpuinfo).unwrap();
        assert_eq!(
            flags,
            CpuinfoTscFlags {
                tsc: true,
                constant_tsc: true,
                nonstop_tsc: true,
                tsc_reliable: false,
                tsc_known_freq: true,
            }
        );
        let facts = TscFacts {
            x86_64: true,
            has_tsc: true,
            has_rdtscp: true,
            cpuinfo: Some(flags),
            ..Default::default()
        };
        assert!(facts.tsc_is_invariant() && facts.tsc_usable());
        let only_constant = TscFacts {
            cpuinfo: Some(CpuinfoTscFlags {
                nonstop_tsc: false,
                ..flags
            }),
            ..facts
        };
        assert!(!only_constant.tsc_usable());
        assert_eq!(parse_cpuinfo_flags("processor : 0\n"), None);
        assert_eq!(parse_cpuinfo_flags(""), None);
    }
}
