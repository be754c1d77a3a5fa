//! Side files a runtime writes for jprof (Node's `jit-PID.dump` and isolate log, Mono's log,
//! the agent's jitdump, its private directory) are removed when the recording ends. If jprof is killed before that,
//! the next `jprof record` of the same user removes them: while recording, jprof lists each
//! such file (device, inode, path) in `/tmp/jprof-UID/pending-PID`, a directory only that
//! user can write; a list whose jprof is gone is replayed and deleted. A listed file is removed
//! only while it is still the same regular file (docs/security.md).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::foreign_file;

/// The pending list of this recording.
pub struct Leftovers {
    list: File,
    path: PathBuf,
}

/// `/tmp/jprof-UID`, created 0700; when it exists but is not this user's private directory
/// (another user may have put it there first), what it is instead.
fn private_dir() -> Result<PathBuf, String> {
    let uid = nix::unistd::geteuid().as_raw();
    let dir = std::env::temp_dir().join(format!("jprof-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let m = std::fs::symlink_metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let what = if !m.is_dir() {
        "not a directory".to_string()
    } else if m.uid() != uid {
        format!("owned by uid {}", m.uid())
    } else if m.mode() & 0o077 != 0 {
        format!("open to others (mode {:o})", m.mode() & 0o777)
    } else {
        return Ok(dir);
    };
    Err(format!(
        "{} is {what}, not this user's private directory: side files a killed jprof leaves \
         cannot be listed for removal by the next run (remove it, or set TMPDIR)",
        dir.display()
    ))
}

/// Whether `pid` is a running jprof (not a zombie nobody reaped yet).
fn jprof_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.contains("(jprof) ") && !s.contains("(jprof) Z"))
}

/// Removes what one pending list names; returns how many files were removed.
fn replay(list: &str) -> usize {
    let mut removed = 0;
    for line in list.lines() {
        let mut parts = line.splitn(4, ' ');
        let (Some(kind), Some(dev), Some(ino), Some(path)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (Ok(dev), Ok(ino)) = (dev.parse(), ino.parse()) else {
            continue;
        };
        let path = Path::new(path);
        if kind == "dir" {
            // jprof's private directory for runtime side files.
            removed += usize::from(super::places::remove_private_dir(path, dev, ino));
            continue;
        }
        removed += usize::from(foreign_file::remove_if_same(path, dev, ino));
        if kind == "node" {
            removed += remove_isolate_logs(path);
        }
    }
    removed
}

/// Node writes `isolate-0x…-PID-v8.log` beside `jit-PID.dump` (both in its working directory).
fn remove_isolate_logs(jitdump: &Path) -> usize {
    let uid = nix::unistd::geteuid().as_raw();
    let (Some(dir), Some(pid)) = (
        jitdump.parent(),
        jitdump
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("jit-")?.strip_suffix(".dump")),
    ) else {
        return 0;
    };
    let suffix = format!("-{pid}-v8.log");
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.starts_with("isolate-0x") && n.ends_with(&suffix))
                })
                .filter(|e| foreign_file::remove_runtime_file(&e.path(), Some(uid)))
                .count()
        })
        .unwrap_or(0)
}

impl Leftovers {
    /// Removes what earlier recordings that were killed left behind, and starts this
    /// recording's list. Returns a note when something was cleaned, or when there is no
    /// private directory to keep the list in.
    pub fn start() -> (Option<Self>, Option<String>) {
        let dir = match private_dir() {
            Ok(dir) => dir,
            Err(why) => return (None, Some(why)),
        };
        let mut removed = 0;
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix("pending-"))
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == std::process::id() || jprof_alive(pid) {
                continue;
            }
            let list = entry.path();
            if let Ok(text) = foreign_file::read(&list, foreign_file::Owner::Anyone, 1 << 20) {
                removed += replay(&String::from_utf8_lossy(&text));
            }
            let _ = std::fs::remove_file(&list);
        }
        let note = (removed > 0).then(|| {
            format!("removed {removed} side file(s) an earlier jprof that was killed left behind")
        });
        let path = dir.join(format!("pending-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        match foreign_file::create_new(&path, 0o600) {
            Ok(made) => (
                Some(Self {
                    list: made.file,
                    path,
                }),
                note,
            ),
            Err(_) => (None, note),
        }
    }

    /// Lists a file to remove if this recording never ends cleanly.
    pub fn add(&mut self, kind: &str, path: &Path, dev: u64, ino: u64) {
        let _ = writeln!(self.list, "{kind} {dev} {ino} {}", path.display());
    }

    /// The recording ended and removed its files itself.
    pub fn finish(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_removes_only_the_files_it_names_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let dump = dir.path().join("jit-4242.dump");
        std::fs::write(&dump, b"x").unwrap();
        let log = dir.path().join("isolate-0x1234-4242-v8.log");
        std::fs::write(&log, b"x").unwrap();
        let other = dir.path().join("isolate-0x1234-4243-v8.log");
        std::fs::write(&other, b"x").unwrap();
        let m = std::fs::metadata(&dump).unwrap();
        let replaced = dir.path().join("jit-9.dump");
        std::fs::write(&replaced, b"x").unwrap();
        let list = format!(
            "node {} {} {}\nmono 1 2 {}\n",
            m.dev(),
            m.ino(),
            dump.display(),
            replaced.display()
        );
        assert_eq!(replay(&list), 2);
        assert!(!dump.exists() && !log.exists());
        assert!(other.exists(), "another process's log stays");
        assert!(replaced.exists(), "a file with another inode stays");
    }

    #[test]
    fn a_listed_private_dir_is_removed_only_while_it_is_the_same() {
        let private = super::super::places::PrivateDir::create().unwrap();
        std::fs::write(private.path.join("jprof-mono-1.mlpd"), b"x").unwrap();
        let (dev, ino) = private.identity();
        let list = format!("dir {dev} {} {}\n", ino + 1, private.path.display());
        assert_eq!(replay(&list), 0);
        assert!(private.path.exists());
        let list = format!("dir {dev} {ino} {}\n", private.path.display());
        assert_eq!(replay(&list), 1);
        assert!(!private.path.exists());
    }
}
