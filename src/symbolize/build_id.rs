//! Build ids: whether the file on disk is the binary a recording mapped, and where else the
//! right one may be. A recording knows the build id of a mapped file from its MMAP2 record
//! (the kernel reads it when the file is mapped) or, for a perf.data, from perf's build-id
//! table; the file at that path today may be another build (a package update), whose symbols
//! would give false names. Such a file is never used: a copy with the recorded build id is
//! looked for (`--search-dir`, perf's build-id cache in `~/.debug`, `/usr/lib/debug`), else
//! the addresses stay `[unknown]` with a note. Rules: docs/symbolization.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The build-id side of a [`BinaryCache`](super::native::BinaryCache): where copies are
/// looked for, what was found, and which files were another build with no copy found.
#[derive(Default)]
pub struct Lookup {
    /// `--search-dir`, in order.
    pub(crate) search_dirs: Vec<PathBuf>,
    /// Whose `~/.debug` is perf's build-id cache (None: not looked in).
    pub(crate) home: Option<PathBuf>,
    /// Mapped path → the mismatch, for the notes.
    pub(crate) mismatches: BTreeMap<String, Mismatch>,
    /// Mapped paths that could not be read and of whose recorded build id (hex) no copy was
    /// found, for the notes.
    pub(crate) not_found: BTreeMap<String, String>,
}

impl Lookup {
    /// No search directories; perf's cache in `$HOME/.debug`.
    pub(crate) fn new() -> Self {
        Self {
            home: home(),
            ..Self::default()
        }
    }
}

/// Lower-case hex of a build id.
pub(crate) fn hex(bytes: &[u8]) -> String {
    // Not a `format!` per byte: the end of a recording writes a build id for every address it
    // names the first time (thousands in a JVM's libjvm.so).
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Where a copy of the binary mapped from `path` with build id `id` may be, in the order
/// they are tried: each search directory (by file name, then by the whole path under it),
/// perf's build-id cache under `home` (`~/.debug/.build-id/xx/rest/elf`, and its older layout
/// `~/.debug/.build-id/xx/rest`, then `~/.debug/PATH/ID/elf`), then the separate debug file
/// `/usr/lib/debug/.build-id/xx/rest.debug`. Each must still show the build id when opened.
pub(crate) fn places(
    path: &str,
    id: &[u8],
    search_dirs: &[PathBuf],
    home: Option<&Path>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if id.len() < 2 {
        return out;
    }
    let hex = hex(id);
    let (head, rest) = hex.split_at(2);
    // A recorded path climbing out with `..` is not followed under any directory.
    let climbs = Path::new(path)
        .components()
        .any(|c| c == std::path::Component::ParentDir);
    let relative = if climbs {
        ""
    } else {
        path.trim_start_matches('/')
    };
    let name = Path::new(path).file_name();
    for dir in search_dirs {
        if let Some(name) = name {
            out.push(dir.join(name));
        }
        if !relative.is_empty() && Path::new(relative).components().count() > 1 {
            out.push(dir.join(relative));
        }
    }
    if let Some(home) = home {
        let cache = home.join(".debug");
        out.push(cache.join(".build-id").join(head).join(rest).join("elf"));
        out.push(cache.join(".build-id").join(head).join(rest));
        if !relative.is_empty() {
            out.push(cache.join(relative).join(&hex).join("elf"));
        }
    }
    out.push(
        Path::new("/usr/lib/debug/.build-id")
            .join(head)
            .join(format!("{rest}.debug")),
    );
    out
}

/// Where the debug file named `name` by the `.gnu_debuglink` of the binary at `path` may be,
/// in the order gdb looks: beside the binary, in `.debug/` beside it, and under
/// `/usr/lib/debug` followed by the binary's directory.
pub(crate) fn debuglink_places(path: &Path, name: &str) -> Vec<PathBuf> {
    // Only a plain file name: a link naming `../x` or `/x` is not followed.
    if name.is_empty() || name.contains('/') {
        return Vec::new();
    }
    let Some(dir) = path.parent() else {
        return Vec::new();
    };
    let mut out = vec![dir.join(name), dir.join(".debug").join(name)];
    if let Ok(relative) = dir.strip_prefix("/") {
        out.push(Path::new("/usr/lib/debug").join(relative).join(name));
    }
    // The binary itself is not its debug file.
    out.retain(|p| p != path);
    out
}

/// How much of a file's start is read for its build id: the ELF header, the program headers
/// and the notes segment come first in every linker's layout.
const HEAD_BYTES: usize = 64 * 1024;

/// The build id of the ELF file at `path` (a binary another process mapped, opened with the
/// foreign-file rules), read from the notes in its first [`HEAD_BYTES`]; None when it has
/// none there or cannot be read.
pub(crate) fn of_file(path: &Path) -> Option<Vec<u8>> {
    use crate::foreign_file::{ForeignFile, Owner};
    of_opened(&ForeignFile::open(path, Owner::Anyone).ok()?)
}

/// The build id of an ELF file already opened by the foreign-file rules, as [`of_file`].
pub(crate) fn of_opened(file: &crate::foreign_file::ForeignFile) -> Option<Vec<u8>> {
    of_elf_head(&file.read_at(0, HEAD_BYTES).ok()?)
}

/// The GNU build id note of a 64-bit ELF image's PT_NOTE segments that lie in `head`.
fn of_elf_head(head: &[u8]) -> Option<Vec<u8>> {
    use object::read::elf::{FileHeader, ProgramHeader};
    let header = object::elf::FileHeader64::<object::Endianness>::parse(head).ok()?;
    let endian = header.endian().ok()?;
    for segment in header.program_headers(endian, head).ok()? {
        let Ok(Some(mut notes)) = segment.notes(endian, head) else {
            continue;
        };
        while let Ok(Some(note)) = notes.next() {
            if note.name() == object::elf::ELF_NOTE_GNU
                && note.n_type(endian) == object::elf::NT_GNU_BUILD_ID
            {
                return Some(note.desc().to_vec());
            }
        }
    }
    None
}

/// The home directory whose `.debug` is perf's build-id cache: `$HOME`, as perf uses it.
fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// A mapped file whose file on disk is another build, and no copy of the recorded build
/// was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mismatch {
    /// The build id the recording says (hex).
    pub recorded: String,
    /// The build id of the file on disk (hex; empty when it has none).
    pub on_disk: String,
}

impl Mismatch {
    /// Why the frames of `path` are unknown, for the profile's note.
    pub(crate) fn why(&self, path: &str) -> String {
        let on_disk = if self.on_disk.is_empty() {
            "no build id".to_string()
        } else {
            format!("build id {}", self.on_disk)
        };
        format!(
            "{path} on disk has {on_disk}, the recording says {}: another build, so its \
             symbols are not used, and no copy with build id {} was found (looked in \
             --search-dir, ~/.debug/.build-id and /usr/lib/debug/.build-id); pass \
             --search-dir with a directory holding the original file, or record with embedded \
             symbols (the default)",
            self.recorded, self.recorded
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lowercase_digits_a_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff, 0x93]), "000fa0ff93");
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex(&all), expected);
    }

    #[test]
    fn build_id_from_the_head_of_this_test_binary() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let bytes = std::fs::read(&exe).unwrap();
        use object::Object;
        let whole = object::File::parse(&*bytes)
            .unwrap()
            .build_id()
            .unwrap()
            .map(<[u8]>::to_vec);
        assert!(whole.is_some(), "cargo links test binaries with a build id");
        assert_eq!(of_file(&exe), whole);
        assert_eq!(of_elf_head(&bytes[..16]), None);
    }

    #[test]
    fn debuglink_places_as_gdb_looks() {
        let got = debuglink_places(Path::new("/opt/app/lib/libw.so"), "libw.so.debug");
        let want: Vec<PathBuf> = [
            "/opt/app/lib/libw.so.debug",
            "/opt/app/lib/.debug/libw.so.debug",
            "/usr/lib/debug/opt/app/lib/libw.so.debug",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(got, want);
        assert!(debuglink_places(Path::new("/a/b.so"), "../etc/x").is_empty());
        assert_eq!(
            debuglink_places(Path::new("/a/b.so"), "b.so"),
            [
                PathBuf::from("/a/.debug/b.so"),
                PathBuf::from("/usr/lib/debug/a/b.so")
            ]
        );
    }

    #[test]
    fn places_in_order() {
        let id = [0xab, 0xcd, 0xef];
        let got = places(
            "/usr/lib/libw.so",
            &id,
            &[PathBuf::from("/s")],
            Some(Path::new("/h")),
        );
        let want: Vec<PathBuf> = [
            "/s/libw.so",
            "/s/usr/lib/libw.so",
            "/h/.debug/.build-id/ab/cdef/elf",
            "/h/.debug/.build-id/ab/cdef",
            "/h/.debug/usr/lib/libw.so/abcdef/elf",
            "/usr/lib/debug/.build-id/ab/cdef.debug",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(got, want);
        assert!(places("/x", &[1], &[], None).is_empty());
        let climbing = places("/a/../../etc/x.so", &id, &[PathBuf::from("/s")], None);
        assert_eq!(
            climbing,
            [
                PathBuf::from("/s/x.so"),
                PathBuf::from("/usr/lib/debug/.build-id/ab/cdef.debug")
            ]
        );
    }
}
