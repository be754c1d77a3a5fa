//! Files jprof opens or creates on behalf of another process, and the files it writes for the
//! user. jprof runs as root to profile other users' processes, so every file another process
//! can name or plant (jitdumps, perf maps, Mono logs, XRay logs, the attach trigger, the agent
//! copy in a container's `/tmp`, the files a perf.data names) is hostile input, and every
//! output may sit in a directory another user can write. The rules (docs/security.md):
//!
//! - open without following a symbolic link in the last component (`O_NOFOLLOW`), and under a
//!   container's `/proc/PID/root` in no component at all (its absolute links would resolve on
//!   the host); never block on a FIFO (`O_NONBLOCK`), then check on the open descriptor that
//!   the file is a regular file owned by the expected user or root;
//! - read in bounded steps, never more than the file holds or the caller allows;
//! - create only new files (`O_EXCL`, mode 0600 unless said otherwise), and remove only a file
//!   that is still the very one jprof created or read (same device and inode);
//! - write outputs to a new temporary file beside the destination and rename it into place once
//!   complete, so an existing file is never truncated and readers keep a valid inode.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::Mode;

use crate::error::Error;

/// The most a single read of a side file takes; a runtime's file grows by far less between two
/// polls, and a larger claim (a sparse file, a hostile header) never becomes one allocation.
pub(crate) const READ_STEP: usize = 16 << 20;

/// Who may own a file read on behalf of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The process's user; root's files are accepted too (a runtime started by root).
    Uid(u32),
    /// Any user: the content is checked otherwise (e.g. it must extend bytes already trusted).
    Anyone,
}

/// Why a file was not opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("refused: it is a symbolic link")]
    Symlink,
    #[error("refused: it is not a regular file but {0}")]
    NotRegular(&'static str),
    #[error("refused: owned by uid {found}, but the process runs as uid {expected}")]
    WrongOwner { found: u32, expected: u32 },
    #[error("refused: {len} bytes, more than the {limit} allowed")]
    TooLarge { len: u64, limit: u64 },
    #[error(
        "refused: its {len} bytes would pass the {limit} bytes jprof reads into memory, all \
         files together, of files it does not map"
    )]
    OverBudget { len: u64, limit: u64 },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl Refusal {
    /// The refusal of an input as an error naming `path`.
    pub(crate) fn into_error(self, path: &Path) -> Error {
        match self {
            Refusal::Io(e) => Error::io(path, e),
            too_large @ (Refusal::TooLarge { .. } | Refusal::OverBudget { .. }) => {
                Error::Other(format!(
                    "{}: {too_large}. It is read into memory, not mapped, because another user \
                     could truncate it under jprof: copy it (`cp`) and read the copy",
                    path.display()
                ))
            }
            other => Error::Other(format!("{}: {other}", path.display())),
        }
    }

    /// The file is simply not there (not worth a note).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Refusal::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// A regular file of the expected owner, opened read-only.
#[derive(Debug)]
pub(crate) struct ForeignFile {
    file: File,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) uid: u32,
    /// Opened inside a container's `/proc/PID/root`.
    in_container: bool,
}

fn file_kind(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => "a directory",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFSOCK => "a socket",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFLNK => "a symbolic link",
        _ => "a special file",
    }
}

/// Splits a container path `/proc/PID/root/rest` into its trusted root and the rest.
fn container_parts(path: &Path) -> Option<(PathBuf, PathBuf)> {
    let mut parts = path.components();
    let (Some(Component::RootDir), Some(proc), Some(pid), Some(root)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let is_pid = pid
        .as_os_str()
        .to_str()?
        .bytes()
        .all(|b| b.is_ascii_digit());
    (proc.as_os_str() == "proc" && is_pid && root.as_os_str() == "root")
        .then(|| (Path::new("/proc").join(pid).join("root"), parts.collect()))
}

/// Opens `path` with `flags` (plus `O_NOFOLLOW | O_CLOEXEC`); under `/proc/PID/root` the rest
/// of the path is resolved inside that root (see [`open_in_root`]).
fn open_nofollow(path: &Path, flags: OFlag, mode: u32) -> std::io::Result<OwnedFd> {
    let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match container_parts(path) {
        Some((root, rest)) => open_in_root(&root, &rest, flags, mode),
        None => nix::fcntl::open(path, flags, Mode::from_bits_truncate(mode)).map_err(to_io),
    }
}

fn to_io(e: nix::Error) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

/// Opens `rest` as a process whose root directory is `root` would: the kernel resolves every
/// link, absolute or `..`, inside `root` (`openat2` with `RESOLVE_IN_ROOT`; no `/proc` magic
/// links), so a container's links never lead into the host. Kernels before 5.6 (or a seccomp
/// filter refusing openat2) get a walk that follows no link at all below `root`.
fn open_in_root(root: &Path, rest: &Path, flags: OFlag, mode: u32) -> std::io::Result<OwnedFd> {
    use nix::fcntl::{openat2, OpenHow, ResolveFlag};
    let root_dir = nix::fcntl::open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(to_io)?;
    let rest = rest.strip_prefix("/").unwrap_or(rest);
    if rest.as_os_str().is_empty() {
        return Err(std::io::Error::other("a container's root is not a file"));
    }
    let mut how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    if flags.contains(OFlag::O_CREAT) {
        how = how.mode(Mode::from_bits_truncate(mode));
    }
    match openat2(&root_dir, rest, how) {
        Err(nix::Error::ENOSYS | nix::Error::EPERM) => {}
        done => return done.map_err(to_io),
    }
    let names: Vec<&OsStr> = rest
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(Ok(n)),
            Component::CurDir => None,
            _ => Some(Err(())),
        })
        .collect::<Result<_, ()>>()
        .map_err(|()| std::io::Error::other("`..` in a container path"))?;
    let Some((last, dirs)) = names.split_last() else {
        return Err(std::io::Error::other("a container's root is not a file"));
    };
    let mut dir = root_dir;
    for name in dirs {
        let walk = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        dir = openat(&dir, *name, walk, Mode::empty()).map_err(to_io)?;
    }
    openat(&dir, *last, flags, Mode::from_bits_truncate(mode)).map_err(to_io)
}

/// The most bytes of a file read into memory (a file jprof does not map: see [`FileBytes`]).
pub(crate) const MAX_READ: u64 = 2 << 30;

/// The most bytes read into memory from files jprof does not map, all of them together in one
/// run: a target that maps many large files of its own cannot make root's jprof hold more.
const MAX_READ_TOTAL: u64 = 4 << 30;

/// Bytes read so far into memory from files jprof does not map (never given back: a bound,
/// not an account).
static READ_TOTAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Takes `len` bytes from the budget `total` of at most `limit`; false when they would pass it.
fn reserve(total: &std::sync::atomic::AtomicU64, len: u64, limit: u64) -> bool {
    use std::sync::atomic::Ordering::SeqCst;
    total
        .fetch_update(SeqCst, SeqCst, |t| {
            t.checked_add(len).filter(|&n| n <= limit)
        })
        .is_ok()
}

/// A whole file's bytes: mapped when only the user running jprof or root could truncate it
/// (reading a mapped page the file lost raises SIGBUS), read into memory otherwise (another
/// user's binary or recording, a container's files). Root's libraries and the user's own
/// recordings, the large files, stay mapped.
pub(crate) enum FileBytes {
    /// Mapped read-only.
    Mapped(crate::sys::mapped_file::MappedFile),
    /// Read into memory.
    Read(Vec<u8>),
}

impl FileBytes {
    /// Whether the file of `meta` may be mapped: see [`FileBytes`].
    fn may_map(meta: &std::fs::Metadata, in_container: bool) -> bool {
        !in_container && trusted_owner(meta.uid()) && meta.mode() & 0o022 == 0
    }

    /// Pages of a mapped file a reader is done with are given back (see `MappedFile::release`).
    pub(crate) fn release(&self, offset: usize, len: usize) {
        if let FileBytes::Mapped(m) = self {
            m.release(offset, len);
        }
    }
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m,
            FileBytes::Read(v) => v,
        }
    }
}

/// The bytes of a file the user (or the system: `/usr/lib/debug`) names: links are followed,
/// but it never blocks (`O_NONBLOCK`: a FIFO or device is refused before any read) and must
/// be a regular file. Mapped or read as [`FileBytes`] says.
pub(crate) fn named_file_bytes(path: &Path) -> Result<FileBytes, Refusal> {
    let file = open_named(path)?;
    let meta = file.metadata()?;
    ForeignFile {
        file,
        dev: meta.dev(),
        ino: meta.ino(),
        uid: meta.uid(),
        in_container: container_parts(path).is_some(),
    }
    .into_bytes()
}

/// Opens a file the user names (an input): links are followed, but it never blocks
/// (`O_NONBLOCK`) and must be a regular file, so a FIFO put at an input's name cannot hang jprof.
pub(crate) fn open_named(path: &Path) -> Result<File, Refusal> {
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
    let file = File::from(nix::fcntl::open(path, flags, Mode::empty()).map_err(to_io)?);
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(Refusal::NotRegular(file_kind(meta.mode())));
    }
    Ok(file)
}

/// The bytes of a binary a process or a recording names (a mapped ELF file): opened by the
/// foreign-file rules ([`ForeignFile::open`], any owner), mapped or read as [`FileBytes`] says.
pub(crate) fn binary_bytes(path: &Path) -> Result<FileBytes, Refusal> {
    ForeignFile::open(path, Owner::Anyone)?.into_bytes()
}

impl ForeignFile {
    /// Whether it was opened inside a container's `/proc/PID/root`.
    pub(crate) fn in_container(&self) -> bool {
        self.in_container
    }

    /// Opens `path` for reading: no link followed, never blocks, a regular file owned by
    /// `owner` (or root).
    pub fn open(path: &Path, owner: Owner) -> Result<Self, Refusal> {
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
        let fd = open_nofollow(path, flags, 0).map_err(|e| {
            // O_NOFOLLOW on a link fails with ELOOP.
            if e.raw_os_error() == Some(libc::ELOOP) {
                Refusal::Symlink
            } else {
                Refusal::Io(e)
            }
        })?;
        let file = File::from(fd);
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(Refusal::NotRegular(file_kind(meta.mode())));
        }
        if let Owner::Uid(expected) = owner {
            if meta.uid() != expected && meta.uid() != 0 {
                return Err(Refusal::WrongOwner {
                    found: meta.uid(),
                    expected,
                });
            }
        }
        Ok(Self {
            file,
            dev: meta.dev(),
            ino: meta.ino(),
            uid: meta.uid(),
            in_container: container_parts(path).is_some(),
        })
    }

    /// Opens the file mapped at `start..end` in process `pid` through
    /// `/proc/PID/map_files/START-END`: the kernel's link to the very file mapped there, even
    /// when its path now names another file or none. That one link is followed (no name a
    /// user can plant is resolved); it never blocks and must be a regular file. Needs
    /// CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE (root).
    pub fn open_mapped(pid: u32, start: u64, end: u64) -> Result<Self, Refusal> {
        let link = format!("/proc/{pid}/map_files/{start:x}-{end:x}");
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::open(link.as_str(), flags, Mode::empty()).map_err(to_io)?;
        let file = File::from(fd);
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(Refusal::NotRegular(file_kind(meta.mode())));
        }
        Ok(Self {
            file,
            dev: meta.dev(),
            ino: meta.ino(),
            uid: meta.uid(),
            // Another process's file: read, never mapped.
            in_container: true,
        })
    }

    /// The whole file: mapped or read (up to [`MAX_READ`] bytes) as [`FileBytes`] says.
    pub fn into_bytes(self) -> Result<FileBytes, Refusal> {
        let meta = self.file.metadata()?;
        if FileBytes::may_map(&meta, self.in_container) {
            let mapped = crate::sys::mapped_file::MappedFile::map_keeping(self.file)?;
            return Ok(FileBytes::Mapped(mapped));
        }
        let len = meta.len();
        if len <= MAX_READ && !reserve(&READ_TOTAL, len, MAX_READ_TOTAL) {
            return Err(Refusal::OverBudget {
                len,
                limit: MAX_READ_TOTAL,
            });
        }
        self.read_all(MAX_READ).map(FileBytes::Read)
    }

    /// The opened file itself, for readers that take a [`File`].
    pub fn into_file(self) -> File {
        self.file
    }

    /// The file's size now.
    pub fn size(&self) -> std::io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Up to `max` bytes from `offset`, never more than the file holds now.
    pub fn read_at(&self, offset: u64, max: usize) -> std::io::Result<Vec<u8>> {
        let available = self.size()?.saturating_sub(offset);
        let want = available.min(max as u64) as usize;
        let mut data = vec![0u8; want];
        let mut got = 0;
        while got < want {
            match self.file.read_at(&mut data[got..], offset + got as u64)? {
                0 => break,
                n => got += n,
            }
        }
        data.truncate(got);
        Ok(data)
    }

    /// The whole file, refused when larger than `limit` bytes.
    pub fn read_all(&self, limit: u64) -> Result<Vec<u8>, Refusal> {
        let len = self.size()?;
        if len > limit {
            return Err(Refusal::TooLarge { len, limit });
        }
        let mut out = Vec::new();
        while (out.len() as u64) < len {
            let step = self.read_at(out.len() as u64, READ_STEP)?;
            if step.is_empty() {
                break;
            }
            out.extend_from_slice(&step);
        }
        Ok(out)
    }
}

/// Reads a whole foreign file: [`ForeignFile::open`] then [`ForeignFile::read_all`].
pub(crate) fn read(path: &Path, owner: Owner, limit: u64) -> Result<Vec<u8>, Refusal> {
    ForeignFile::open(path, owner)?.read_all(limit)
}

/// A file this process created, identified so that only it is ever removed.
#[derive(Debug)]
pub(crate) struct Created {
    pub(crate) file: File,
    pub(crate) path: PathBuf,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

/// Creates a new file (never an existing one, never through a link) with `mode`.
pub(crate) fn create_new(path: &Path, mode: u32) -> std::io::Result<Created> {
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOCTTY;
    let file = File::from(open_nofollow(path, flags, mode)?);
    let meta = file.metadata()?;
    Ok(Created {
        file,
        path: path.to_path_buf(),
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

/// Removes `path` only if it is still the regular file with this device and inode: a file
/// someone put there since (a link, another file) is left alone. Returns whether it removed it.
pub(crate) fn remove_if_same(path: &Path, dev: u64, ino: u64) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() && m.dev() == dev && m.ino() == ino => {
            std::fs::remove_file(path).is_ok()
        }
        _ => false,
    }
}

/// Removes a file a runtime wrote for jprof (a jitdump, a Mono log) once its content is in the
/// recording: only a regular file, not a link, owned by the runtime's user `uid` (unknown: kept).
pub(crate) fn remove_runtime_file(path: &Path, uid: Option<u32>) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() && uid == Some(m.uid()) => {
            std::fs::remove_file(path).is_ok()
        }
        _ => false,
    }
}

/// The uid a process runs as (the owner of its `/proc` directory).
pub(crate) fn process_uid(pid: u32) -> Option<u32> {
    std::fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|m| m.uid())
}

/// Whether a link or an existing file at an output path may be trusted: it belongs to the user
/// running jprof or to root (as `fs.protected_symlinks` would allow, but in every directory).
pub(crate) fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

/// The most links followed while resolving an output path (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// Where an output goes, once its path has been resolved safely (see [`resolve_output`]).
enum Resolved {
    /// Written to a new file in `dir` and renamed to `name`: nothing is there yet, or a
    /// regular file, or a link jprof does not follow (another user's).
    Replace {
        dir: OwnedFd,
        dir_path: PathBuf,
        name: std::ffi::OsString,
    },
    /// An existing character device, FIFO (or, through a `/proc` fd link, whatever that fd
    /// is) of the user or root, written in place: `-o /dev/null`, `-o /dev/stdout`.
    InPlace { file: OwnedFd, kind: &'static str },
}

fn stat_kind(mode: u32) -> u32 {
    mode & libc::S_IFMT
}

/// Resolves an output path component by component from `/` or the working directory, with
/// each directory held open, so nothing another user does to a name changes where it goes:
///
/// - a link among the directories (or at the end) is followed only when it belongs to the
///   user or root; another user's link among the directories is an error, at the end it is
///   replaced by the output (never followed);
/// - an existing regular file is replaced by rename, a directory, socket or block device is
///   refused, a character device or FIFO is written in place when it belongs to the user or
///   root (else refused), and a `/proc/…/fd/N` link (what `/dev/stdout` leads to) is written
///   in place.
fn resolve_output(dest: &Path) -> Result<Resolved, Error> {
    use nix::fcntl::AtFlags;
    use nix::sys::stat::{fstatat, FileStat};
    use std::collections::VecDeque;

    let fail = |what: String| Error::Other(format!("{}: {what}", dest.display()));
    let to_io = |e: nix::Error| Error::io(dest, std::io::Error::from_raw_os_error(e as i32));
    let dir_flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let open_root = || nix::fcntl::open("/", dir_flags, Mode::empty()).map_err(to_io);
    let mut names: VecDeque<std::ffi::OsString> = VecDeque::new();
    let push_front = |names: &mut VecDeque<std::ffi::OsString>, path: &Path| {
        for c in path.components().rev() {
            match c {
                Component::Normal(n) => names.push_front(n.to_os_string()),
                Component::ParentDir => names.push_front("..".into()),
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
    };
    push_front(&mut names, dest);
    if dest.file_name().is_none() || names.back().is_some_and(|n| n == "..") {
        return Err(fail("an output must name a file".into()));
    }
    let (mut dir, mut dir_path) = if dest.is_absolute() {
        (open_root()?, PathBuf::from("/"))
    } else {
        let cwd = nix::fcntl::open(".", dir_flags, Mode::empty()).map_err(to_io)?;
        (cwd, PathBuf::new())
    };
    let mut links = 0;
    while let Some(name) = names.pop_front() {
        let last = names.is_empty();
        if name == ".." {
            dir = openat(&dir, "..", dir_flags, Mode::empty()).map_err(to_io)?;
            step_up(&mut dir_path);
            continue;
        }
        let stat: Option<FileStat> =
            match fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => Some(st),
                Err(nix::Error::ENOENT) if last => None,
                Err(e) => return Err(to_io(e)),
            };
        let kind = stat.map(|st| stat_kind(st.st_mode));
        if kind == Some(libc::S_IFLNK) {
            let st = stat.expect("a link was stat'ed");
            let link = dir_path.join(&name);
            if !trusted_owner(st.st_uid) {
                if last {
                    // Replaced by the output, never followed.
                    return Ok(Resolved::Replace {
                        dir,
                        dir_path,
                        name,
                    });
                }
                return Err(fail(format!(
                    "{} is a symbolic link owned by uid {}; jprof follows links on an output \
                     path only when they belong to you or root (name the real directory)",
                    link.display(),
                    st.st_uid
                )));
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(to_io(nix::Error::ELOOP));
            }
            let on_proc = nix::sys::statfs::fstatfs(&dir)
                .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC);
            if on_proc && last {
                // A `/proc/…/fd/N` link names an open file, not a path: open what it is.
                let file = openat(
                    &dir,
                    name.as_os_str(),
                    OFlag::O_PATH | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
                .map_err(to_io)?;
                let st = nix::sys::stat::fstat(&file).map_err(to_io)?;
                return match stat_kind(st.st_mode) {
                    libc::S_IFDIR => Err(fail("is a directory, not an output file".into())),
                    libc::S_IFSOCK => Err(fail(
                        "is a socket; jprof cannot open a socket as an output file".into(),
                    )),
                    k => Ok(Resolved::InPlace {
                        file,
                        kind: if k == libc::S_IFREG {
                            "a regular file"
                        } else {
                            file_kind(st.st_mode)
                        },
                    }),
                };
            }
            let target = nix::fcntl::readlinkat(&dir, name.as_os_str()).map_err(to_io)?;
            let target = Path::new(&target);
            if target.is_absolute() {
                dir = open_root()?;
                dir_path = PathBuf::from("/");
            }
            push_front(&mut names, target);
            if names.back().is_some_and(|n| n == "..") || names.is_empty() {
                return Err(fail(format!("{} does not lead to a file", link.display())));
            }
            continue;
        }
        if !last {
            dir = openat(
                &dir,
                name.as_os_str(),
                dir_flags | OFlag::O_NOFOLLOW,
                Mode::empty(),
            )
            .map_err(to_io)?;
            dir_path.push(&name);
            continue;
        }
        let Some(st) = stat else {
            return Ok(Resolved::Replace {
                dir,
                dir_path,
                name,
            });
        };
        return match stat_kind(st.st_mode) {
            libc::S_IFREG => Ok(Resolved::Replace {
                dir,
                dir_path,
                name,
            }),
            libc::S_IFDIR => Err(fail("is a directory, not an output file".into())),
            libc::S_IFCHR | libc::S_IFIFO => {
                // Checked again on the descriptor: the name may have changed since.
                let file = openat(
                    &dir,
                    name.as_os_str(),
                    OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
                .map_err(to_io)?;
                let st = nix::sys::stat::fstat(&file).map_err(to_io)?;
                let kind = stat_kind(st.st_mode);
                if kind != libc::S_IFCHR && kind != libc::S_IFIFO {
                    return Err(fail("changed while it was opened".into()));
                }
                if !trusted_owner(st.st_uid) {
                    return Err(fail(format!(
                        "is {} owned by uid {}; jprof writes into an existing device or FIFO \
                         only when it belongs to you or root",
                        file_kind(st.st_mode),
                        st.st_uid
                    )));
                }
                Ok(Resolved::InPlace {
                    file,
                    kind: file_kind(st.st_mode),
                })
            }
            _ => Err(fail(format!(
                "is {}; jprof writes only to a regular file, a character device or a FIFO",
                file_kind(st.st_mode)
            ))),
        };
    }
    Err(fail("an output must name a file".into()))
}

/// `path/..` as a path the partial file can be named by (and read back through): `a/..` is
/// `` (the working directory), `/..` is `/`, and `..` above the working directory stays.
fn step_up(path: &mut PathBuf) {
    match path.components().next_back() {
        Some(Component::Normal(_)) => {
            path.pop();
        }
        Some(Component::RootDir) => {}
        _ => path.push(".."),
    }
}

/// Whether the output path leads to this process's standard output (`-o /dev/stdout`, or a
/// link to `/proc/self/fd/1`): such an output is treated as `-o -`, so nothing else jprof prints
/// to stdout lands in the middle of it.
pub(crate) fn is_stdout(dest: &Path) -> bool {
    let Ok(Resolved::InPlace { file, .. }) = resolve_output(dest) else {
        return false;
    };
    let (Ok(out), Ok(ours)) = (
        nix::sys::stat::fstat(&file),
        nix::sys::stat::fstat(std::io::stdout()),
    ) else {
        return false;
    };
    (out.st_dev, out.st_ino) == (ours.st_dev, ours.st_ino)
}

/// Checks an output path before the work that fills it is done (a report of a large recording
/// should not be computed to find that `-o` names a directory). The path is resolved again when
/// the output is written.
pub(crate) fn check_output(dest: &Path) -> Result<(), Error> {
    resolve_output(dest).map(drop)
}

/// Opens an in-place destination for writing: through its descriptor, so it is the file that
/// was checked. A FIFO blocks until a reader opens it, as a shell's `>` does; a regular file
/// reached through a `/proc` fd link is appended to, as `>>` would.
fn open_in_place(dest: &Path, file: &OwnedFd, kind: &str) -> Result<File, Error> {
    use std::os::fd::AsRawFd;
    let mut flags = OFlag::O_WRONLY | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
    if kind == "a regular file" {
        flags |= OFlag::O_APPEND;
    }
    nix::fcntl::open(
        format!("/proc/self/fd/{}", file.as_raw_fd()).as_str(),
        flags,
        Mode::empty(),
    )
    .map(File::from)
    .map_err(|e| Error::io(dest, std::io::Error::from_raw_os_error(e as i32)))
}

/// An output file written beside its destination and renamed into place by [`Self::commit`];
/// dropped uncommitted, the temporary file is removed and the destination never touched.
pub(crate) struct AtomicOutput {
    created: Option<Created>,
    dir: OwnedFd,
    name: std::ffi::OsString,
    dest: PathBuf,
    keep_if_dropped: bool,
}

/// The temporary names of an output `name` while it is written: `NAME.partial-PID` in the same
/// directory (a rename never crosses file systems), with a counter when that name is taken.
fn partial_names(name: &OsStr) -> impl Iterator<Item = std::ffi::OsString> + '_ {
    let pid = std::process::id();
    (0..100u32).map(move |i| {
        let mut tmp = name.to_os_string();
        if i == 0 {
            tmp.push(format!(".partial-{pid}"));
        } else {
            tmp.push(format!(".partial-{pid}-{i}"));
        }
        tmp
    })
}

impl AtomicOutput {
    /// Creates the temporary file (mode 0600) for a recording at `dest`, which must be (or
    /// become) a regular file: a recording is read back to embed symbols, so a device or FIFO
    /// is refused.
    pub fn create(dest: &Path) -> Result<Self, Error> {
        match resolve_output(dest)? {
            Resolved::Replace {
                dir,
                dir_path,
                name,
            } => Self::create_in(dest, dir, dir_path, name),
            Resolved::InPlace { kind, .. } => Err(Error::Other(format!(
                "{}: is {kind}; a recording must be a regular file (it is read back to embed \
                 symbols), so jprof does not write one there",
                dest.display()
            ))),
        }
    }

    fn create_in(
        dest: &Path,
        dir: OwnedFd,
        dir_path: PathBuf,
        name: std::ffi::OsString,
    ) -> Result<Self, Error> {
        let flags = OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_EXCL
            | OFlag::O_NOCTTY
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC;
        let mut last = None;
        let tmps: Vec<_> = partial_names(&name).collect();
        for tmp in tmps {
            match openat(
                &dir,
                tmp.as_os_str(),
                flags,
                Mode::from_bits_truncate(0o600),
            ) {
                Ok(fd) => {
                    let file = File::from(fd);
                    let meta = file.metadata().map_err(|e| Error::io(dest, e))?;
                    let created = Created {
                        file,
                        path: dir_path.join(&tmp),
                        dev: meta.dev(),
                        ino: meta.ino(),
                    };
                    return Ok(Self {
                        created: Some(created),
                        dir,
                        name,
                        dest: dest.to_path_buf(),
                        keep_if_dropped: false,
                    });
                }
                Err(nix::Error::EEXIST) => last = Some(nix::Error::EEXIST),
                Err(e) => return Err(Error::io(dest, std::io::Error::from_raw_os_error(e as i32))),
            }
        }
        let e = last.map_or_else(
            || std::io::Error::other("no free temporary name"),
            |e| std::io::Error::from_raw_os_error(e as i32),
        );
        Err(Error::io(dest, e))
    }

    /// From now on an uncommitted file is left in place when dropped (a recording interrupted
    /// by an error is still worth reading), under its partial name.
    pub fn keep_if_dropped(&mut self) {
        self.keep_if_dropped = true;
    }

    /// Where the file is being written until it is committed.
    pub fn partial_path(&self) -> &Path {
        self.created.as_ref().map_or(&self.dest, |c| &c.path)
    }

    /// The file being written, opened again for reading through the descriptor held since it
    /// was created (`/proc/self/fd`), not through its name: in a directory another user can
    /// write, the name may since hold a file of theirs. As [`FileBytes`] it is mapped (the
    /// user running jprof made it).
    pub(crate) fn written_bytes(&self) -> Result<FileBytes, Refusal> {
        let created = self
            .created
            .as_ref()
            .ok_or_else(|| std::io::Error::other("already committed"))?;
        use std::os::fd::AsRawFd;
        let file = File::open(format!("/proc/self/fd/{}", created.file.as_raw_fd()))?;
        let meta = file.metadata()?;
        if (meta.dev(), meta.ino()) != (created.dev, created.ino) {
            return Err(std::io::Error::other("not the file created").into());
        }
        ForeignFile {
            file,
            dev: meta.dev(),
            ino: meta.ino(),
            uid: meta.uid(),
            in_container: false,
        }
        .into_bytes()
    }

    /// The temporary file, to write to.
    pub fn file(&mut self) -> &mut File {
        &mut self
            .created
            .as_mut()
            .expect("an AtomicOutput holds its file until committed")
            .file
    }

    /// A second handle on the temporary file (for a writer that owns its file).
    pub fn try_clone(&self) -> std::io::Result<File> {
        match &self.created {
            Some(c) => c.file.try_clone(),
            None => Err(std::io::Error::other("already committed")),
        }
    }

    /// Whether the temporary name still holds the file created (a regular file, the same
    /// device and inode).
    fn still_holds(&self, created: &Created) -> bool {
        let Some(tmp) = created.path.file_name() else {
            return false;
        };
        nix::sys::stat::fstatat(&self.dir, tmp, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(
            |st| {
                stat_kind(st.st_mode) == libc::S_IFREG
                    && st.st_dev == created.dev
                    && st.st_ino == created.ino
            },
        )
    }

    /// Removes the temporary file if it is still the one created.
    fn remove_partial(&self, created: &Created) {
        let Some(tmp) = created.path.file_name() else {
            return;
        };
        if self.still_holds(created) {
            let _ = nix::unistd::unlinkat(&self.dir, tmp, nix::unistd::UnlinkatFlags::NoRemoveDir);
        }
    }

    /// Removes the temporary file (a copy of it was committed instead).
    pub fn discard(mut self) {
        if let Some(c) = self.created.take() {
            self.remove_partial(&c);
        }
    }

    /// Flushes the file and renames it over the destination (replacing a link there, never
    /// following it), in the directory resolved when it was created, if its temporary name
    /// still holds it: in a directory another user can write, the name may hold theirs.
    pub fn commit(mut self) -> Result<(), Error> {
        let Some(mut created) = self.created.take() else {
            return Ok(());
        };
        created.file.flush().map_err(|e| Error::io(&self.dest, e))?;
        let tmp = created.path.file_name().unwrap_or_default().to_os_string();
        if !self.still_holds(&created) {
            return Err(Error::Other(format!(
                "{}: not written: its temporary file {} was replaced by another (someone who can \
                 write into {} moved it)",
                self.dest.display(),
                created.path.display(),
                created
                    .path
                    .parent()
                    .map_or_else(String::new, |d| d.display().to_string()),
            )));
        }
        nix::fcntl::renameat(&self.dir, tmp.as_os_str(), &self.dir, self.name.as_os_str()).map_err(
            |e| {
                self.remove_partial(&created);
                Error::io(&self.dest, std::io::Error::from_raw_os_error(e as i32))
            },
        )
    }
}

impl Drop for AtomicOutput {
    fn drop(&mut self) {
        if let Some(c) = self.created.take() {
            if !self.keep_if_dropped {
                self.remove_partial(&c);
            }
        }
    }
}

/// Writes an output file through `write` (buffered). A new or regular file is written beside
/// the destination and renamed into place when `write` succeeded (on failure the destination
/// is untouched); a device or FIFO of the user's is written in place (see [`resolve_output`]).
/// Errors name `dest`.
pub(crate) fn write_output(
    dest: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Error> {
    match resolve_output(dest)? {
        Resolved::Replace {
            dir,
            dir_path,
            name,
        } => {
            let mut out = AtomicOutput::create_in(dest, dir, dir_path, name)?;
            let mut w = std::io::BufWriter::new(out.file());
            write(&mut w)
                .and_then(|()| w.flush())
                .map_err(|e| Error::io(dest, e))?;
            drop(w);
            out.commit()
        }
        Resolved::InPlace { file, kind } => {
            let file = open_in_place(dest, &file, kind)?;
            let mut w = std::io::BufWriter::new(file);
            write(&mut w)
                .and_then(|()| w.flush())
                .map_err(|e| Error::io(dest, e))
        }
    }
}

/// Partial outputs of `dest` left by a writer that was killed (`NAME.partial-PID`), newest
/// first.
pub fn leftover_partials(dest: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (dest.parent(), dest.file_name()) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{}.partial-", name.to_string_lossy());
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .filter_map(|e| {
                    let m = e.path().symlink_metadata().ok()?;
                    let modified = m.modified().ok()?;
                    m.file_type()
                        .is_file()
                        .then(|| (modified, dir.join(e.file_name())))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn links_fifos_and_other_owners_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::write(&real, b"data").unwrap();
        let me = std::fs::metadata(&real).unwrap().uid();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(matches!(
            ForeignFile::open(&link, Owner::Anyone),
            Err(Refusal::Symlink)
        ));
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        assert!(matches!(
            ForeignFile::open(&fifo, Owner::Anyone),
            Err(Refusal::NotRegular("a FIFO"))
        ));
        assert!(matches!(
            ForeignFile::open(dir.path(), Owner::Anyone),
            Err(Refusal::NotRegular("a directory"))
        ));
        if me != 0 {
            assert!(matches!(
                ForeignFile::open(&real, Owner::Uid(me + 1)),
                Err(Refusal::WrongOwner { .. })
            ));
        }
        let f = ForeignFile::open(&real, Owner::Uid(me)).unwrap();
        assert_eq!(f.read_all(100).unwrap(), b"data");
        assert!(matches!(f.read_all(3), Err(Refusal::TooLarge { .. })));
        assert_eq!(f.read_at(1, 2).unwrap(), b"at");
        assert!(ForeignFile::open(&dir.path().join("none"), Owner::Anyone)
            .unwrap_err()
            .is_not_found());
    }

    #[test]
    fn a_huge_sparse_file_is_read_in_bounded_steps() {
        let dir = tempfile::tempdir().unwrap();
        let sparse = dir.path().join("sparse");
        File::create(&sparse).unwrap().set_len(1 << 40).unwrap();
        let f = ForeignFile::open(&sparse, Owner::Anyone).unwrap();
        assert_eq!(f.read_at(0, READ_STEP).unwrap().len(), READ_STEP);
        assert!(matches!(f.read_all(1 << 30), Err(Refusal::TooLarge { .. })));
    }

    #[test]
    fn create_new_never_reuses_or_follows() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("planted");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(create_new(&link, 0o600).is_err());
        assert!(create_new(&target, 0o600).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        let made = create_new(&dir.path().join("new"), 0o600).unwrap();
        let mode = std::fs::metadata(&made.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Replaced by another file: not removed.
        std::fs::remove_file(&made.path).unwrap();
        std::fs::write(&made.path, b"other").unwrap();
        assert!(!remove_if_same(&made.path, made.dev, made.ino));
        assert!(made.path.exists());
    }

    #[test]
    fn container_paths_resolve_inside_their_root() {
        assert_eq!(
            container_parts(Path::new("/proc/42/root/tmp/x.so")),
            Some((PathBuf::from("/proc/42/root"), PathBuf::from("tmp/x.so")))
        );
        assert_eq!(container_parts(Path::new("/proc/self/root/tmp")), None);
        assert_eq!(container_parts(Path::new("/tmp/x")), None);
        // A directory standing for a container's root: its links, absolute or `..`, resolve
        // inside it, never to the host's files.
        let host = tempfile::tempdir().unwrap();
        std::fs::write(host.path().join("secret"), b"host").unwrap();
        let root = host.path().join("root");
        std::fs::create_dir_all(root.join("usr/lib")).unwrap();
        std::fs::write(root.join("usr/lib/libx.so"), b"inside").unwrap();
        std::os::unix::fs::symlink("/usr/lib", root.join("lib")).unwrap();
        std::os::unix::fs::symlink("../../..", root.join("usr/lib/up")).unwrap();
        std::os::unix::fs::symlink(host.path(), root.join("hostdir")).unwrap();
        let read = |rest: &str| {
            let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            open_in_root(&root, Path::new(rest), flags, 0)
                .map(|fd| std::io::read_to_string(File::from(fd)).unwrap())
        };
        assert_eq!(read("lib/libx.so").unwrap(), "inside");
        assert_eq!(read("/usr/lib/up/usr/lib/libx.so").unwrap(), "inside");
        assert!(read("usr/lib/up/secret").is_err(), "`..` left the root");
        // The absolute link resolves inside the root, where that path does not exist.
        assert!(
            read("hostdir/secret").is_err(),
            "an absolute link left the root"
        );
        // The last component is never followed.
        std::os::unix::fs::symlink("usr/lib/libx.so", root.join("last")).unwrap();
        assert!(read("last").is_err());
        // Through /proc/PID/root of our own process (the host's root): a real file opens.
        let me = std::process::id();
        let through = PathBuf::from(format!("/proc/{me}/root"))
            .join(root.join("usr/lib/libx.so").strip_prefix("/").unwrap());
        assert!(ForeignFile::open(&through, Owner::Anyone).is_ok());
    }

    #[test]
    fn reads_of_unmapped_files_share_one_budget() {
        let total = std::sync::atomic::AtomicU64::new(0);
        assert!(reserve(&total, 3, 10));
        assert!(reserve(&total, 7, 10));
        assert!(!reserve(&total, 1, 10), "the budget is spent");
        assert!(!reserve(&total, u64::MAX, u64::MAX), "no overflow");
        assert_eq!(total.into_inner(), 10);
        // An input refused for its size says how to read it anyway.
        let err = Refusal::OverBudget { len: 3, limit: 2 }.into_error(Path::new("big.data"));
        assert!(err.to_string().contains("copy it (`cp`)"), "{err}");
    }

    #[test]
    fn binaries_never_block_and_other_users_files_are_read_not_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("lib.so");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o666)).unwrap();
        assert!(matches!(
            binary_bytes(&fifo),
            Err(Refusal::NotRegular("a FIFO"))
        ));
        assert!(matches!(
            named_file_bytes(&fifo),
            Err(Refusal::NotRegular("a FIFO"))
        ));
        let file = dir.path().join("bin");
        std::fs::write(&file, b"ELF bytes").unwrap();
        let ours = binary_bytes(&file).unwrap();
        assert!(matches!(ours, FileBytes::Mapped(_)));
        assert_eq!(&*ours, b"ELF bytes");
        // Writable by others: anyone could truncate it under a mapping.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(binary_bytes(&file).unwrap(), FileBytes::Read(_)));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
            let theirs = binary_bytes(&file).unwrap();
            assert!(matches!(theirs, FileBytes::Read(_)));
            assert_eq!(&*theirs, b"ELF bytes");
        }
    }

    #[test]
    fn outputs_replace_the_destination_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.data");
        std::fs::write(&dest, b"old").unwrap();
        {
            let mut out = AtomicOutput::create(&dest).unwrap();
            out.file().write_all(b"half").unwrap();
            assert_eq!(leftover_partials(&dest).len(), 1);
        }
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        assert!(leftover_partials(&dest).is_empty());
        // An existing file is replaced by a new inode: a reader of the old one keeps it.
        let old_reader = File::open(&dest).unwrap();
        let mut out = AtomicOutput::create(&dest).unwrap();
        out.file().write_all(b"new").unwrap();
        out.commit().unwrap();
        let mut kept = String::new();
        std::io::Read::read_to_string(&mut &old_reader, &mut kept).unwrap();
        assert_eq!(kept, "old");
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        // (Another user's link at the destination is replaced, not followed:
        // tests/suite/security_root.rs, planted_output_links_are_not_followed.)
        let mode = std::fs::symlink_metadata(&dest)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    /// In a directory another user can write, the temporary name may be given to another
    /// file (or a link) while jprof writes: what jprof reads back is its own file, and it
    /// never renames theirs into the destination.
    #[test]
    fn a_replaced_temporary_file_is_neither_read_back_nor_committed() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.data");
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"not jprof's").unwrap();
        let mut out = AtomicOutput::create(&dest).unwrap();
        out.file().write_all(b"ours").unwrap();
        let partial = out.partial_path().to_path_buf();
        std::fs::rename(&partial, dir.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&secret, &partial).unwrap();
        assert_eq!(&*out.written_bytes().unwrap(), b"ours");
        let refused = out.commit().unwrap_err().to_string();
        assert!(refused.contains("was replaced by another"), "{refused}");
        assert!(
            std::fs::symlink_metadata(&dest).is_err(),
            "nothing committed"
        );
        assert!(std::fs::symlink_metadata(&partial).unwrap().is_symlink());
        assert_eq!(std::fs::read(&secret).unwrap(), b"not jprof's");
    }

    #[test]
    fn devices_fifos_and_fd_links_are_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        // A null device stays the device (/dev/null was once replaced by a regular file). Our
        // own node when we may make one, so a test never puts the machine's /dev/null at risk.
        let null = if nix::unistd::geteuid().is_root() {
            let null = dir.path().join("null");
            nix::sys::stat::mknod(
                &null,
                nix::sys::stat::SFlag::S_IFCHR,
                Mode::from_bits_truncate(0o666),
                nix::sys::stat::makedev(1, 3),
            )
            .unwrap();
            null
        } else {
            PathBuf::from("/dev/null")
        };
        write_output(&null, |w| w.write_all(b"gone")).unwrap();
        let meta = std::fs::symlink_metadata(&null).unwrap();
        assert_eq!(stat_kind(meta.mode()), libc::S_IFCHR);
        assert_eq!(meta.rdev(), nix::sys::stat::makedev(1, 3));
        // A recording is refused there, before anything is written.
        let refused = AtomicOutput::create(&null).err().unwrap();
        assert!(
            refused.to_string().contains("must be a regular file"),
            "{refused}"
        );

        // The user's own FIFO: written in place, read by another thread.
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_output(&fifo, |w| w.write_all(b"through the fifo")).unwrap();
        assert_eq!(reader.join().unwrap(), b"through the fifo");
        assert_eq!(
            stat_kind(std::fs::symlink_metadata(&fifo).unwrap().mode()),
            libc::S_IFIFO
        );

        // A link to /proc/self/fd/N (what /dev/stdout is): the open file itself is written.
        use std::os::fd::AsRawFd;
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        let link = dir.path().join("stdout-like");
        std::os::unix::fs::symlink(format!("/proc/self/fd/{}", write_end.as_raw_fd()), &link)
            .unwrap();
        write_output(&link, |w| w.write_all(b"piped")).unwrap();
        drop(write_end);
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut File::from(read_end), &mut got).unwrap();
        assert_eq!(got, b"piped");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn directories_are_refused_before_and_own_links_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_output(dir.path()).unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
        assert!(write_output(dir.path(), |w| w.write_all(b"x")).is_err());
        // Our own link (to a directory, then to a file) is followed: the file it leads to is
        // replaced, the link stays.
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("via")).unwrap();
        std::fs::write(real.join("out.svg"), b"old").unwrap();
        std::os::unix::fs::symlink("via/out.svg", dir.path().join("out.svg")).unwrap();
        write_output(&dir.path().join("out.svg"), |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read(real.join("out.svg")).unwrap(), b"new");
        assert!(std::fs::symlink_metadata(dir.path().join("out.svg"))
            .unwrap()
            .file_type()
            .is_symlink());
        // A relative output through `..`.
        let sub = dir.path().join("real/sub");
        std::fs::create_dir(&sub).unwrap();
        let out = AtomicOutput::create(&sub.join("../rec.data")).unwrap();
        assert_eq!(out.partial_path().parent(), Some(sub.parent().unwrap()));
        out.commit().unwrap();
        assert!(real.join("rec.data").is_file());
        // The partial file's name, by which a recording is read back, follows `..` too.
        for (from, up) in [
            ("a", ""),
            ("/x/y", "/x"),
            ("/", "/"),
            ("", ".."),
            ("..", "../.."),
        ] {
            let mut path = PathBuf::from(from);
            step_up(&mut path);
            assert_eq!(path, PathBuf::from(up), "{from}/..");
        }
    }
}
