//! Where jprof lets a runtime write a side file, so that no runtime ever writes through a name
//! another user could plant (docs/security.md, "Runtime side files"):
//!
//! - where the runtime takes a directory, a private directory jprof creates (0700, mkdtemp) and
//!   removes after the recording;
//! - where the name is fixed (V8's `./jit-PID.dump`, `/tmp/perf-PID.map`), the directory must be
//!   one no other user can put a name into, or a sticky one where the kernel refuses to open
//!   another user's link, file or FIFO; otherwise jprof does not ask the runtime and says why.
//!   (Creating the name first for the launched pid is no help: every process the launched one
//!   starts inherits the request and opens the name for its own pid.)

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Who can put a new name into a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Only root and jprof's user (not group- or world-writable, owned by one of them).
    Private,
    /// Sticky and writable by others, and the kernel refuses to follow a link or open another
    /// user's regular file or FIFO planted there (`fs.protected_symlinks`,
    /// `fs.protected_regular`, `fs.protected_fifos`).
    KernelGuarded,
    /// Sticky and writable by others, without that protection: others can plant names, but
    /// cannot remove or rename a file jprof created there.
    Sticky,
    /// Another user can plant, remove or swap names here (or owns it).
    Open,
}

/// The kernel's protection of sticky world-writable directories (`fs.protected_*` sysctls).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct KernelGuard {
    /// `fs.protected_symlinks`: links in sticky world-writable directories are not followed
    /// unless their owner is the follower or the directory's owner.
    pub symlinks: bool,
    /// `fs.protected_regular`: 1 guards world-writable sticky directories, 2 group-writable too.
    pub regular: u8,
    /// `fs.protected_fifos`, the same for FIFOs: without it a runtime opening its name with
    /// `O_CREAT` opens another user's FIFO there, and blocks until that user reads it.
    pub fifos: u8,
}

impl KernelGuard {
    /// This host's settings.
    pub fn of_host() -> Self {
        let read = |name: &str| {
            std::fs::read_to_string(format!("/proc/sys/fs/{name}"))
                .ok()
                .and_then(|s| s.trim().parse::<u8>().ok())
                .unwrap_or(0)
        };
        Self {
            symlinks: read("protected_symlinks") == 1,
            regular: read("protected_regular"),
            fifos: read("protected_fifos"),
        }
    }
}

/// Who can plant names in a directory with this owner and mode, for a process of uid `uid`.
pub(crate) fn classify(owner: u32, mode: u32, uid: u32, guard: KernelGuard) -> Place {
    let group_writable = mode & 0o020 != 0;
    let world_writable = mode & 0o002 != 0;
    if owner != 0 && owner != uid {
        return Place::Open;
    }
    if !group_writable && !world_writable {
        return Place::Private;
    }
    if mode & 0o1000 == 0 {
        return Place::Open;
    }
    // protected_regular/fifos=1 cover world-writable sticky directories, 2 group-writable too.
    let needed = if world_writable { 1 } else { 2 };
    if guard.symlinks && guard.regular >= needed && guard.fifos >= needed {
        Place::KernelGuarded
    } else {
        Place::Sticky
    }
}

/// Who can plant names in `dir` (followed: a process's working directory is the directory
/// itself, whatever path leads there).
pub(crate) fn place_of(dir: &Path) -> Place {
    let uid = nix::unistd::geteuid().as_raw();
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => classify(m.uid(), m.mode(), uid, KernelGuard::of_host()),
        _ => Place::Open,
    }
}

/// Why another user could plant a name in a directory of this kind (for the summary).
pub(crate) fn why_open(dir: &Path) -> String {
    match std::fs::metadata(dir) {
        Ok(m) if m.uid() != 0 && m.uid() != nix::unistd::geteuid().as_raw() => {
            format!("{} belongs to uid {}", dir.display(), m.uid())
        }
        Ok(_) => format!("other users can write {}", dir.display()),
        Err(e) => format!("{}: {e}", dir.display()),
    }
}

/// A directory only jprof's user can use, for side files of runtimes that take a path.
#[derive(Debug)]
pub(crate) struct PrivateDir {
    /// Where it is.
    pub path: PathBuf,
    dev: u64,
    ino: u64,
}

impl PrivateDir {
    /// Creates `jprof-rt-XXXXXX` (0700, a new name) in the temporary directory, provided no
    /// other user can rename it away and put theirs in its place.
    pub fn create() -> std::io::Result<Self> {
        let parent = std::env::temp_dir();
        if place_of(&parent) == Place::Open {
            return Err(std::io::Error::other(why_open(&parent)));
        }
        let path = nix::unistd::mkdtemp(&parent.join("jprof-rt-XXXXXX"))
            .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
        let m = std::fs::symlink_metadata(&path)?;
        Ok(Self {
            path,
            dev: m.dev(),
            ino: m.ino(),
        })
    }

    /// Device and inode, to remove it only while it is the same directory.
    pub fn identity(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    /// Removes the directory and what runtimes wrote into it.
    pub fn remove(&self) {
        remove_private_dir(&self.path, self.dev, self.ino);
    }
}

/// Removes the private directory `path` if it is still the one with this identity: its entries
/// (never followed) and itself.
pub(crate) fn remove_private_dir(path: &Path, dev: u64, ino: u64) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() && m.dev() == dev && m.ino() == ino => {
            for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
                // remove_file on a link removes the link; nothing below is followed.
                let _ = std::fs::remove_file(entry.path());
            }
            std::fs::remove_dir(path).is_ok()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFF: KernelGuard = KernelGuard {
        symlinks: false,
        regular: 0,
        fifos: 0,
    };
    const ON: KernelGuard = KernelGuard {
        symlinks: true,
        regular: 1,
        fifos: 1,
    };

    #[test]
    fn directories_are_classified_by_who_can_plant_names() {
        assert_eq!(classify(0, 0o40755, 1000, OFF), Place::Private);
        assert_eq!(classify(1000, 0o40700, 1000, OFF), Place::Private);
        assert_eq!(classify(2000, 0o40700, 1000, OFF), Place::Open);
        assert_eq!(classify(0, 0o40777, 1000, OFF), Place::Open);
        assert_eq!(classify(0, 0o40775, 1000, ON), Place::Open);
        assert_eq!(classify(0, 0o41777, 1000, OFF), Place::Sticky);
        assert_eq!(classify(0, 0o41777, 1000, ON), Place::KernelGuarded);
        // protected_regular=1 does not cover group-writable sticky directories.
        assert_eq!(classify(0, 0o41770, 1000, ON), Place::Sticky);
        let both = KernelGuard {
            symlinks: true,
            regular: 2,
            fifos: 2,
        };
        assert_eq!(classify(0, 0o41770, 1000, both), Place::KernelGuarded);
        // Links and files refused but another user's FIFO opened (and waited on): not guarded.
        let no_fifos = KernelGuard { fifos: 0, ..ON };
        assert_eq!(classify(0, 0o41777, 1000, no_fifos), Place::Sticky);
        let fifos_world_only = KernelGuard { fifos: 1, ..both };
        assert_eq!(classify(0, 0o41770, 1000, fifos_world_only), Place::Sticky);
        // A sticky directory of another user: its owner may remove anything in it.
        assert_eq!(classify(2000, 0o41777, 1000, ON), Place::Open);
    }

    #[test]
    fn a_private_dir_is_0700_and_removed_with_its_content_only() {
        let dir = PrivateDir::create().unwrap();
        let m = std::fs::metadata(&dir.path).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o700);
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(dir.path.join("perf-1.map"), b"x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path.join("link")).unwrap();
        dir.remove();
        assert!(!dir.path.exists());
        assert!(outside.path().exists(), "a link's target is not removed");
    }
}
