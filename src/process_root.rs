//! Files as a process in another mount namespace (a container) sees them. A path a process
//! names (in an MMAP2 record, its jitdump's location, its `/tmp`) is reached from here through
//! `/proc/PID/root`, which the kernel resolves in the process's own namespace; for a process
//! that shares jprof's mount namespace the path is used as it is.

use std::path::{Path, PathBuf};

/// `/proc/PID/root` when `pid` lives in another mount namespace than jprof; `None` when it
/// shares ours or is gone.
pub fn foreign_root(pid: u32) -> Option<PathBuf> {
    let ours = std::fs::read_link("/proc/self/ns/mnt").ok()?;
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok()?;
    (ours != theirs).then(|| PathBuf::from(format!("/proc/{pid}/root")))
}

/// `path` (absolute, as the process names it) made reachable from jprof's namespace.
pub fn host_path(root: Option<&Path>, path: &Path) -> PathBuf {
    match (root, path.strip_prefix("/")) {
        (Some(root), Ok(relative)) => root.join(relative),
        _ => path.to_path_buf(),
    }
}

/// The pid inside the process's own PID namespace (the last `NStgid` field): the number that
/// names its files (`jit-<pid>.dump`, `/tmp/perf-<pid>.map`, `.java_pid<pid>`).
pub fn namespace_pid(pid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("NStgid:"))
                .and_then(|v| v.split_whitespace().last()?.parse().ok())
        })
        .unwrap_or(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_namespace_is_not_foreign() {
        assert_eq!(foreign_root(std::process::id()), None);
        assert_eq!(namespace_pid(std::process::id()), std::process::id());
    }

    #[test]
    fn paths_go_through_the_root() {
        let root = PathBuf::from("/proc/7/root");
        assert_eq!(
            host_path(Some(&root), Path::new("/tmp/jit-1.dump")),
            PathBuf::from("/proc/7/root/tmp/jit-1.dump")
        );
        assert_eq!(
            host_path(None, Path::new("/tmp/jit-1.dump")),
            PathBuf::from("/tmp/jit-1.dump")
        );
    }
}
