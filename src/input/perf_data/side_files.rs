//! Finding the JIT side files a perf.data refers to: the jitdumps its MMAP records name (at
//! the recorded path, or by file name under a search directory) and the perf maps of the
//! processes it saw (`/tmp/perf-<pid>.map`, or `perf-<pid>.map` under a search directory).

use std::path::{Path, PathBuf};

use crate::foreign_file::{ForeignFile, Owner, Refusal};

use crate::format::recording::SideKind;

/// A side file that was found and read.
#[derive(Debug)]
pub struct SideFile {
    pub kind: SideKind,
    pub pid: u32,
    pub path: PathBuf,
    pub bytes: Vec<u8>,
}

/// Where a file named `recorded` (a path from the recording) may be: that path, then its file
/// name under each search directory, in order.
pub fn candidates(recorded: &Path, search_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = vec![recorded.to_path_buf()];
    if let Some(name) = recorded.file_name() {
        out.extend(search_dirs.iter().map(|dir| dir.join(name)));
    }
    out
}

/// The largest side file read for a perf.data (a hostile one may claim any size).
const MAX_SIDE_FILE: u64 = 4 << 30;

/// The first candidate that can be read; the errors of the others are not interesting (most
/// simply do not exist), except a file that exists but cannot be read or is refused. Like perf,
/// a side file is read only when it is a regular file (not a link) owned by one of `owners`
/// (the reader, the perf.data's owner) or root: another user cannot feed names into the report.
pub fn read_first(
    kind: SideKind,
    pid: u32,
    candidates: &[PathBuf],
    owners: &[u32],
    notes: &mut Vec<String>,
) -> Option<SideFile> {
    for path in candidates {
        let read = ForeignFile::open(path, Owner::Anyone).and_then(|f| {
            if f.uid != 0 && !owners.contains(&f.uid) {
                return Err(Refusal::WrongOwner {
                    found: f.uid,
                    expected: owners.first().copied().unwrap_or(0),
                });
            }
            f.read_all(MAX_SIDE_FILE)
        });
        match read {
            Ok(bytes) => {
                return Some(SideFile {
                    kind,
                    pid,
                    path: path.clone(),
                    bytes,
                })
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => notes.push(format!("{}: not read: {e}", path.display())),
        }
    }
    None
}

/// Who may own the side files of the perf.data at `path`: the user running the report and the
/// owner of the perf.data (root is always accepted).
pub fn trusted_owners(path: &Path) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let mut owners = vec![nix::unistd::geteuid().as_raw()];
    if let Ok(m) = std::fs::metadata(path) {
        owners.push(m.uid());
    }
    owners
}

/// Joins paths for a message: `a, b or c`.
pub fn list(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    match shown.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_path_first_then_search_dirs() {
        let c = candidates(
            Path::new("/tmp/work/jit-7.dump"),
            &[PathBuf::from("/a"), PathBuf::from("/b")],
        );
        assert_eq!(
            c,
            [
                PathBuf::from("/tmp/work/jit-7.dump"),
                PathBuf::from("/a/jit-7.dump"),
                PathBuf::from("/b/jit-7.dump")
            ]
        );
        assert_eq!(
            list(&c),
            "/tmp/work/jit-7.dump, /a/jit-7.dump or /b/jit-7.dump"
        );
    }
}
