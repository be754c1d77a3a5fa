//! Build ids of the files mapped while recording, for the MMAP2 records the kernel sent
//! without one: `-a` does not ask it (events.rs says why), and kernels before 5.12 refuse to.
//! Each is read from the mapping itself as its record reaches the writer thread (off the ring
//! reader) and written into the record exactly as the kernel writes it, so the embedding at
//! the end and `report` use the file on disk only when it is the build that ran
//! (docs/symbolization.md). A name comes from the exact binary that ran or not at all.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::foreign_file::{ForeignFile, Owner};
use crate::format::perf::{misc, Record, RecordIter, RecordKind, SampleLayout};
use crate::symbolize::build_id;

/// The most files whose build id is remembered (about 64 bytes each); past it every mapping
/// is read again, never more memory.
const MAX_FILES: usize = 1 << 16;
/// The files named in the summary note among those whose build id could not be read.
const NOTE_EXAMPLES: usize = 3;
/// Where the device/inode union starts in an MMAP2 body (after pid, tid, addr, len, pgoff),
/// and its size: `maj, min` (u32 each), `ino, ino_generation` (u64 each), or, with
/// `PERF_RECORD_MISC_MMAP_BUILD_ID`, `build_id_size` (u8), 3 reserved bytes and 20 id bytes.
const UNION_AT: usize = 32;
const UNION_LEN: usize = 24;
/// The longest build id an MMAP2 record holds (the kernel's `BUILD_ID_SIZE_MAX`).
const MAX_ID: usize = 20;

/// The file an MMAP2 record names, as the kernel identifies it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct FileKey {
    major: u32,
    minor: u32,
    ino: u64,
    generation: u64,
}

impl FileKey {
    /// The key of an MMAP2 record without build id; None when it carries no inode (records
    /// jprof synthesized from /proc, whose build id was read then if it could be).
    fn of(body: &[u8]) -> Option<Self> {
        let union = body.get(UNION_AT..UNION_AT + UNION_LEN)?;
        let u32_at = |i: usize| u32::from_le_bytes(union[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(union[i..i + 8].try_into().expect("8 bytes"));
        let key = Self {
            major: u32_at(0),
            minor: u32_at(4),
            ino: u64_at(8),
            generation: u64_at(16),
        };
        (key.ino != 0).then_some(key)
    }
}

/// What reading one mapping's build id gave.
enum Read {
    Id(Vec<u8>),
    /// The very file was read and has no build id (nothing to check it against later).
    NoneInFile,
    /// The file could not be reached: `exited` when its process was gone.
    Missed {
        exited: bool,
    },
}

/// The build ids read for mappings, and what could not be read, for the summary.
#[derive(Default)]
pub(super) struct MappingBuildIds {
    /// By file: its build id, or None when it has none.
    known: HashMap<FileKey, Option<Vec<u8>>>,
    /// Mappings given a build id.
    pub(super) given: u64,
    /// Mappings whose file could not be read, after their process exited or otherwise.
    missed_exited: u64,
    missed_other: u64,
    missed_files: BTreeSet<String>,
}

impl MappingBuildIds {
    /// Gives every executable file mapping in `records` (raw perf records) that came without
    /// a build id the build id of the file mapped, in place.
    pub(super) fn fill(&mut self, layout: &SampleLayout, records: &mut [u8]) {
        let mut found = Vec::new();
        for raw in RecordIter::new(records).map_while(Result::ok) {
            if raw.kind != RecordKind::MMAP2 || raw.misc & misc::MMAP_BUILD_ID != 0 {
                continue;
            }
            let Some(key) = FileKey::of(raw.body) else {
                continue;
            };
            let Ok(Record::Mmap2 {
                pid,
                addr,
                len,
                prot,
                filename,
                ..
            }) = layout.parse(&raw)
            else {
                continue;
            };
            // A memfd (a JIT's code mapped twice, as the BEAM's `/memfd:vmem`) is anonymous
            // memory with a name, no binary: it has no build id to read.
            if prot & libc::PROT_EXEC as u32 == 0
                || !filename.starts_with('/')
                || filename.starts_with("/memfd:")
            {
                continue;
            }
            if let Some(id) = self.build_id(key, pid, addr, len, &filename) {
                found.push((raw.offset, id));
            }
        }
        for (offset, id) in found {
            write_build_id(records, offset, &id);
            self.given += 1;
        }
    }

    /// The build id of the file `key` mapped at `addr..addr + len` in `pid` from `path`.
    fn build_id(
        &mut self,
        key: FileKey,
        pid: u32,
        addr: u64,
        len: u64,
        path: &str,
    ) -> Option<Vec<u8>> {
        if let Some(known) = self.known.get(&key) {
            return known.clone();
        }
        let id = match read(key, pid, addr, len, path) {
            Read::Id(id) if id.len() <= MAX_ID && !id.is_empty() => Some(id),
            Read::Id(_) | Read::NoneInFile => None,
            Read::Missed { exited } => {
                // Not remembered: another process mapping the file may still be read.
                if exited {
                    self.missed_exited += 1;
                } else {
                    self.missed_other += 1;
                }
                if self.missed_files.len() < NOTE_EXAMPLES {
                    self.missed_files.insert(path.to_string());
                }
                return None;
            }
        };
        if self.known.len() < MAX_FILES {
            self.known.insert(key, id.clone());
        }
        id
    }

    /// The summary's note on the mappings whose build id could not be read.
    pub(super) fn note(&self) -> Option<String> {
        let missed = self.missed_exited + self.missed_other;
        if missed == 0 {
            return None;
        }
        let files: Vec<&str> = self.missed_files.iter().map(String::as_str).collect();
        Some(format!(
            "build ids: {missed} file mappings made while recording got none ({} of them in \
             processes that exited before their file was read): their binaries are used for \
             names as they are on disk at the end, with no build id to check them against \
             (e.g. {})",
            self.missed_exited,
            files.join(", ")
        ))
    }
}

/// Reads the build id of the file `key` mapped at `addr..addr + len` in process `pid` from
/// `path`: through the mapping itself (`/proc/PID/map_files`, root only), else at its path
/// (inside the process's root while it runs) when that is still the very file (device and
/// inode).
fn read(key: FileKey, pid: u32, addr: u64, len: u64, path: &str) -> Read {
    let of = |file: &ForeignFile| match build_id::of_opened(file) {
        Some(id) => Read::Id(id),
        None => Read::NoneInFile,
    };
    if let Ok(file) = ForeignFile::open_mapped(pid, addr, addr.saturating_add(len)) {
        // The device a file shows may differ from the mapping's (btrfs subvolumes, overlayfs
        // show their own); the inode tells a pid reused meanwhile apart.
        if file.ino == key.ino {
            return of(&file);
        }
    }
    let root = crate::process_root::foreign_root(pid);
    let at = crate::process_root::host_path(root.as_deref(), Path::new(path));
    let device = nix::sys::stat::makedev(u64::from(key.major), u64::from(key.minor));
    if let Ok(file) = ForeignFile::open(&at, Owner::Anyone) {
        if file.ino == key.ino && file.dev == device {
            return of(&file);
        }
    }
    Read::Missed {
        exited: !Path::new(&format!("/proc/{pid}")).exists(),
    }
}

/// Writes `id` into the MMAP2 record at `offset` of `records` as the kernel does with the
/// `build_id` attribute bit: the flag in `misc`, the size and id in place of device and inode.
fn write_build_id(records: &mut [u8], offset: usize, id: &[u8]) {
    let misc_at = offset + 4;
    let flagged =
        u16::from_le_bytes([records[misc_at], records[misc_at + 1]]) | misc::MMAP_BUILD_ID;
    records[misc_at..misc_at + 2].copy_from_slice(&flagged.to_le_bytes());
    let mut union = [0u8; UNION_LEN];
    union[0] = id.len() as u8;
    union[4..4 + id.len()].copy_from_slice(id);
    let at = offset + 8 + UNION_AT;
    records[at..at + UNION_LEN].copy_from_slice(&union);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::perf::{sample_type, SampleId};
    use std::os::unix::fs::MetadataExt;

    const LAYOUT: SampleLayout = SampleLayout {
        sample_type: sample_type::IP | sample_type::TID | sample_type::TIME,
        regs_user_mask: 0,
        sample_id_all: true,
    };

    /// An MMAP2 record as the kernel sends it without build id (device and inode).
    fn kernel_mmap2(pid: u32, start: u64, end: u64, path: &Path, prot: u32) -> Vec<u8> {
        kernel_mmap2_named(pid, start, end, path, path.to_str().unwrap(), prot)
    }

    /// [`kernel_mmap2`] of the file at `path`, under the name `name`.
    fn kernel_mmap2_named(
        pid: u32,
        start: u64,
        end: u64,
        path: &Path,
        name: &str,
        prot: u32,
    ) -> Vec<u8> {
        let meta = std::fs::metadata(path).unwrap();
        let mut b = Vec::new();
        b.extend(pid.to_le_bytes());
        b.extend(pid.to_le_bytes());
        for v in [start, end - start, 0u64] {
            b.extend(v.to_le_bytes());
        }
        let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
        b.extend(major.to_le_bytes());
        b.extend(minor.to_le_bytes());
        b.extend(meta.ino().to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend(prot.to_le_bytes());
        b.extend(2u32.to_le_bytes());
        b.extend(name.as_bytes());
        b.resize(b.len() + (name.len() + 1).div_ceil(8) * 8 - name.len(), 0);
        b.extend(pid.to_le_bytes());
        b.extend(pid.to_le_bytes());
        b.extend(7u64.to_le_bytes());
        let mut r = Vec::new();
        r.extend(RecordKind::MMAP2.0.to_le_bytes());
        r.extend(misc::USER.to_le_bytes());
        r.extend(((8 + b.len()) as u16).to_le_bytes());
        r.extend(b);
        r
    }

    fn mmap2s(records: &[u8]) -> Vec<(Option<Vec<u8>>, SampleId)> {
        RecordIter::new(records)
            .map(|r| match LAYOUT.parse(&r.unwrap()).unwrap() {
                Record::Mmap2 { build_id, id, .. } => (build_id, id),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// This test's own executable mapping, as /proc/self/maps shows it.
    fn own_text() -> (u64, u64, std::path::PathBuf) {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| {
                l.split_whitespace().nth(1) == Some("r-xp") && l.ends_with(exe.to_str().unwrap())
            })
            .expect("the executable's text mapping");
        let (start, end) = line
            .split_whitespace()
            .next()
            .unwrap()
            .split_once('-')
            .unwrap();
        let hex = |s| u64::from_str_radix(s, 16).unwrap();
        (hex(start), hex(end), exe)
    }

    /// A mapping of a live process gets its file's build id, in the kernel's encoding, and
    /// the rest of the record is unchanged; the file is read once.
    #[test]
    fn a_live_mapping_gets_its_files_build_id() {
        let (start, end, exe) = own_text();
        let expected = build_id::of_file(&exe).expect("the test binary has a build id");
        let pid = std::process::id();
        let mut records = kernel_mmap2(pid, start, end, &exe, 5);
        records.extend(kernel_mmap2(pid, start, end, &exe, 5));
        let mut ids = MappingBuildIds::default();
        ids.fill(&LAYOUT, &mut records);
        let parsed = mmap2s(&records);
        assert_eq!(parsed.len(), 2);
        for (id, trailer) in parsed {
            assert_eq!(id.as_deref(), Some(&expected[..]));
            assert_eq!((trailer.pid, trailer.time), (pid, Some(7)));
        }
        assert_eq!((ids.given, ids.known.len()), (2, 1));
        assert_eq!(ids.note(), None);
    }

    /// A process gone before its mapping was read: its file is still read when the path
    /// leads to the very file, and counted (with a note) when it does not.
    #[test]
    fn an_exited_process_is_read_by_path_or_counted() {
        let (_, _, exe) = own_text();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let mut records = kernel_mmap2(gone, 0x1000, 0x2000, &exe, 5);
        let mut ids = MappingBuildIds::default();
        ids.fill(&LAYOUT, &mut records);
        assert_eq!(mmap2s(&records)[0].0, build_id::of_file(&exe));

        // Another file now at the path (another inode): not read, counted.
        let dir = tempfile::tempdir().unwrap();
        let replaced = dir.path().join("prog");
        std::fs::copy(&exe, &replaced).unwrap();
        let mut records = kernel_mmap2(gone, 0x1000, 0x2000, &replaced, 5);
        std::fs::copy(&exe, dir.path().join("new")).unwrap();
        std::fs::rename(dir.path().join("new"), &replaced).unwrap();
        ids.fill(&LAYOUT, &mut records);
        assert_eq!(mmap2s(&records)[0].0, None);
        let note = ids.note().expect("a note");
        assert!(
            note.contains("1 file mappings") && note.contains("1 of them in processes that exited"),
            "{note}"
        );
        assert!(note.contains(replaced.to_str().unwrap()), "{note}");

        // A FIFO planted at a mapped file's path is refused without blocking, and a link
        // planted there to another file is not followed to it (another inode): both counted.
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
        let mut records = kernel_mmap2(gone, 0x1000, 0x2000, &fifo, 5);
        ids.fill(&LAYOUT, &mut records);
        assert_eq!(mmap2s(&records)[0].0, None);
        let planted = dir.path().join("planted");
        std::fs::copy(&exe, &planted).unwrap();
        let mut records = kernel_mmap2(gone, 0x1000, 0x2000, &planted, 5);
        std::fs::remove_file(&planted).unwrap();
        std::os::unix::fs::symlink(&exe, &planted).unwrap();
        ids.fill(&LAYOUT, &mut records);
        assert_eq!(mmap2s(&records)[0].0, None, "followed a planted link");
        assert!(ids.note().expect("a note").contains("3 file mappings"));

        // Shared anonymous memory (the BEAM's and others' JIT code, mapped twice through a
        // memfd) is no binary: not read, not in the note ("e.g. /memfd:vmem (deleted)").
        let mut ids = MappingBuildIds::default();
        let mut records =
            kernel_mmap2_named(gone, 0x1000, 0x2000, &exe, "/memfd:vmem (deleted)", 5);
        let before = records.clone();
        ids.fill(&LAYOUT, &mut records);
        assert_eq!(records, before);
        assert_eq!(ids.note(), None);

        // Data mappings and records with a build id already are left alone.
        let mut data = kernel_mmap2(gone, 0x1000, 0x2000, &exe, 3);
        let before = data.clone();
        ids.fill(&LAYOUT, &mut data);
        assert_eq!(data, before);
    }
}
