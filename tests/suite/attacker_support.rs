//! The unprivileged user the security tests attack root's jprof from (`jprofsec`, created on
//! first use; the tests run as root, as CI does).

use std::process::Command;
use std::sync::OnceLock;

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
