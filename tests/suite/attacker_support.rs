//! The unprivileged user the security tests attack root's jprof from (`jprofsec`, created on
//! first use; the tests run as root, as CI does).

use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The attacker's account name.
const USER: &str = "jprofsec";

/// The unprivileged user's uid and gid (created once).
pub fn user() -> (u32, u32) {
    static IDS: OnceLock<(u32, u32)> = OnceLock::new();
    *IDS.get_or_init(|| {
        assert!(
            nix::unistd::geteuid().is_root(),
            "these tests replay attacks on root's jprof: run them as root (CI does)"
        );
        let id = |flag: &str| {
            Command::new("id")
                .args([flag, USER])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        };
        if id("-u").is_none() {
            let made = Command::new("useradd")
                .args(["--system", "--no-create-home", "--shell", "/bin/sh", USER])
                .status()
                .expect("useradd");
            assert!(
                made.success() || id("-u").is_some(),
                "useradd {USER} failed"
            );
        }
        (id("-u").expect("uid"), id("-g").expect("gid"))
    })
}

/// The next `count` pids the kernel will hand out, as an attacker predicts them: after
/// `ns_last_pid`, wrapping from `pid_max` back to 300 (the kernel's first pid after a wrap,
/// RESERVED_PIDS), as a machine that has run for hours does.
pub fn pids_ahead(count: u32) -> Vec<u32> {
    let read = |file: &str| -> u32 {
        std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("{file}: {e}"))
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let last = read("/proc/sys/kernel/ns_last_pid");
    let max = read("/proc/sys/kernel/pid_max");
    let mut pid = last;
    (0..count)
        .map(|_| {
            pid = if pid + 1 >= max { 300 } else { pid + 1 };
            pid
        })
        .collect()
}

/// The attacks plant names in shared directories (`/tmp/jit-PID.dump`, `/tmp/perf-PID.map`
/// for the pids ahead): one attack test at a time across the security modules, or one test's
/// root-owned names would stand in another's way.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
