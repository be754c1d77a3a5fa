//! Facts about the recording machine, stored in the recording's META chunk.

use crate::recording::HostFacts;

use super::events::{online_cpus, read_sysctl};

pub fn facts() -> HostFacts {
    let uname = nix::sys::utsname::uname().ok();
    HostFacts {
        hostname: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        kernel_release: uname
            .as_ref()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default(),
        arch: std::env::consts::ARCH.to_string(),
        cpus: online_cpus().len() as u32,
        page_size: crate::sys::perf_event::page_size() as u64,
        perf_event_paranoid: read_sysctl("perf_event_paranoid"),
        kptr_restrict: read_sysctl("kptr_restrict"),
        perf_event_max_stack: read_sysctl("perf_event_max_stack"),
    }
}

pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
