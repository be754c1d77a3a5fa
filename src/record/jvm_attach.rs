//! Loading jprof's JVMTI agent into a running HotSpot JVM with the HotSpot attach protocol
//! (the `.attach_pid` trigger file, SIGQUIT, the `.java_pid` socket, `load`), for `-p` targets
//! and for JVMs in a launched tree whose environment was cleared.
//!
//! The target is not trusted (docs/security.md, "Attaching to a process that poses as a JVM"):
//! - it is taken for HotSpot only when the library it maps executable, read through
//!   `/proc/PID/map_files`, is an ELF file defining HotSpot's exported symbols (a file merely
//!   named `libjvm.so` is not enough, and only then is it sent SIGQUIT);
//! - jprof's files (the trigger, the agent copy for a container) are created only in the JVM's
//!   own `/tmp` (resolved inside its root, opened once as a directory descriptor), only when
//!   that is a shared sticky directory or the JVM user's own, and never through a link;
//! - the socket must be served by the target process itself (its peer credentials);
//! - every reply is capped at [`REPLY_LIMIT`] and every exchange has a total deadline;
//! - the attach runs on its own thread and gives up within [`SLICE`] once the recording stops,
//!   and the recorder never waits for it longer than [`GIVE_UP`];
//! - the summary says "loaded" only when the JVM answered so and the agent's jitdump appeared.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::poll::{poll, PollFd, PollFlags};
use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType, UnixAddr};
use nix::sys::stat::{fstat, fstatat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::runtimes::{find_agent, AGENT_FILE};
use crate::foreign_file::{self, ForeignFile, Owner};
use crate::process_root;

/// The end of the summary note saying the agent was attached to a running JVM.
pub const LOADED: &str = "loaded jprof's JVMTI agent";

/// The largest reply jprof takes from a JVM: a `load` answer is a few lines and `VM.flags` a
/// few kilobytes; anything longer is refused, never accumulated.
const REPLY_LIMIT: usize = 64 << 10;
/// The whole `load` exchange: the agent replays the JVM's compiled code before it answers.
const LOAD_DEADLINE: Duration = Duration::from_secs(20);
/// The whole `VM.flags` exchange.
const QUERY_DEADLINE: Duration = Duration::from_secs(5);
/// How long the JVM may take to start its attach listener after SIGQUIT.
const LISTENER_DEADLINE: Duration = Duration::from_secs(6);
/// How often every wait looks at the stop flag: the attach gives up this soon after a stop.
const SLICE: Duration = Duration::from_millis(100);
/// How long the recorder waits for a stopped attach to end before leaving it behind.
const GIVE_UP: Duration = Duration::from_secs(1);
/// No HotSpot libjvm is near this size (JDK 17's is 24 MB, 25's 30 MB): a larger file is
/// not read.
const LIBJVM_LIMIT: u64 = 128 << 20;
/// The largest dynamic symbol or string table read from a claimed libjvm (HotSpot's are
/// about 100 KB).
const SYMBOL_TABLE_LIMIT: u64 = 16 << 20;
/// Symbols a HotSpot libjvm defines: the JNI entry point of every JVM library and the table
/// HotSpot exports for its serviceability agent (OpenJ9's libjvm.so lacks the second).
const HOTSPOT_SYMBOLS: [&str; 2] = ["JNI_CreateJavaVM", "gHotSpotVMStructs"];

/// An executable mapping of a file named `libjvm.so`, as `/proc/PID/maps` lists it.
#[derive(Debug, PartialEq, Eq)]
struct LibjvmMapping {
    /// `START-END` in hex, the name of its `/proc/PID/map_files` entry.
    range: String,
    /// The device (major, minor) and inode of the mapped file.
    dev: (u64, u64),
    inode: u64,
    path: String,
}

/// The executable mappings of files named `libjvm.so` in `/proc/PID/maps` text.
fn libjvm_mappings(maps: &str) -> Vec<LibjvmMapping> {
    maps.lines()
        .filter_map(|line| {
            // START-END PERMS OFFSET DEV INODE, then padding and the path.
            let mut fields = line.splitn(6, ' ');
            let range = fields.next()?;
            let perms = fields.next()?;
            let _offset = fields.next()?;
            let (major, minor) = fields.next()?.split_once(':')?;
            let dev = (
                u64::from_str_radix(major, 16).ok()?,
                u64::from_str_radix(minor, 16).ok()?,
            );
            let inode = fields.next()?.parse().ok()?;
            let path = fields.next()?.trim_start();
            (perms.contains('x') && path.ends_with("/libjvm.so")).then(|| LibjvmMapping {
                range: range.to_string(),
                dev,
                inode,
                path: path.to_string(),
            })
        })
        .collect()
}

/// The file behind `mapping`: through `/proc/PID/map_files` (the mapped file itself, no path
/// to race; root only), else through its path (see [`open_at_path`]). Never blocks on a FIFO;
/// refused when not a plausible library.
fn open_mapped(pid: u32, mapping: &LibjvmMapping) -> Result<File, String> {
    let through_map_files = mapping
        .range
        .split_once('-')
        .and_then(|(start, end)| {
            Some((
                u64::from_str_radix(start, 16).ok()?,
                u64::from_str_radix(end, 16).ok()?,
            ))
        })
        .and_then(|(start, end)| ForeignFile::open_mapped(pid, start, end).ok());
    let file = match through_map_files {
        Some(file) => file,
        None => open_at_path(process_root::foreign_root(pid).as_deref(), mapping)?,
    };
    let len = file.size().map_err(|e| e.to_string())?;
    if len > LIBJVM_LIMIT {
        return Err(format!("{len} bytes, larger than any libjvm"));
    }
    Ok(file.into_file())
}

/// The file at `mapping`'s path in the process's `root` (a container's `/proc/PID/root`,
/// resolved inside it by the foreign-file rules, so a link planted in the container cannot
/// lead to a host file), accepted only if it is the very file mapped (same device and inode).
fn open_at_path(root: Option<&Path>, mapping: &LibjvmMapping) -> Result<ForeignFile, String> {
    let path = process_root::host_path(root, Path::new(&mapping.path));
    let file = ForeignFile::open(&path, Owner::Anyone).map_err(|e| e.to_string())?;
    let (major, minor) = mapping.dev;
    if (file.dev, file.ino) != (nix::sys::stat::makedev(major, minor), mapping.inode) {
        return Err("the file at its path is not the one mapped".into());
    }
    Ok(file)
}

/// Whether `file` is a HotSpot libjvm: a 64-bit ELF file whose dynamic symbol table defines
/// [`HOTSPOT_SYMBOLS`]. Only its headers and dynamic symbols are read, in bounded pieces.
fn hotspot_library(file: File) -> Result<(), String> {
    use object::read::elf::SectionHeader;
    use object::{Object, ObjectSymbol};
    let data = object::ReadCache::new(file);
    let elf = object::read::elf::ElfFile64::<object::Endianness, _>::parse(&data)
        .map_err(|e| format!("not a 64-bit ELF library: {e}"))?;
    let endian = elf.endian();
    for section in elf.elf_section_table().iter() {
        let table = matches!(
            section.sh_type(endian),
            object::elf::SHT_DYNSYM | object::elf::SHT_STRTAB
        );
        if table && section.sh_size(endian) > SYMBOL_TABLE_LIMIT {
            return Err("a symbol table larger than any libjvm's".into());
        }
    }
    let mut found = [false; HOTSPOT_SYMBOLS.len()];
    for symbol in elf.dynamic_symbols().filter(|s| !s.is_undefined()) {
        if let Some(i) = HOTSPOT_SYMBOLS
            .iter()
            .position(|&name| symbol.name() == Ok(name))
        {
            found[i] = true;
        }
    }
    match found.iter().position(|&f| !f) {
        None => Ok(()),
        Some(i) => Err(format!("it does not define {}", HOTSPOT_SYMBOLS[i])),
    }
}

/// What `/proc/PID/maps` and the mapped library say about a process.
enum Jvm {
    /// No executable mapping of a file named `libjvm.so`.
    None,
    /// A `libjvm.so` that is not HotSpot's; why, for the summary.
    NotHotSpot(String),
    HotSpot,
}

fn hotspot_evidence(pid: u32) -> Jvm {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Jvm::None;
    };
    let Some(mapping) = libjvm_mappings(&maps).into_iter().next() else {
        return Jvm::None;
    };
    match open_mapped(pid, &mapping).and_then(hotspot_library) {
        Ok(()) => Jvm::HotSpot,
        Err(why) => Jvm::NotHotSpot(format!(
            "process {pid} maps {} but it is not a HotSpot JVM library ({why}): no agent was loaded",
            mapping.path
        )),
    }
}

/// Whether process `pid` runs jprof's agent for a recording still under way: it maps the agent
/// and a jitdump that has not been removed (a finished recording removes the one it read).
fn another_recordings_agent(pid: u32, agent: &Path) -> bool {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps_jprofs_agent(&maps, agent) && maps_live_jitdump(&maps)
}

/// The paths in `/proc/PID/maps` text (without their leading `/`).
fn mapped_paths(maps: &str) -> impl Iterator<Item = &str> {
    maps.lines()
        .filter_map(|l| l.split_once('/').map(|(_, p)| p))
}

/// Whether `maps` maps jprof's agent: from jprof's directory, `agent` (JPROF_AGENT may name it
/// otherwise), or a copy jprof put in a container's `/tmp` ([`copy_agent_into`]).
fn maps_jprofs_agent(maps: &str, agent: &Path) -> bool {
    let agent = agent.to_string_lossy();
    mapped_paths(maps).any(|path| {
        let name = path.rsplit('/').next().unwrap_or(path);
        path.ends_with(AGENT_FILE)
            || agent.ends_with(&format!("/{path}"))
            || name.starts_with("jprof-agent-")
    })
}

/// Whether `maps` maps a `jit-<pid>.dump` that still has its name (the agent maps its jitdump
/// as a marker for the recorder).
fn maps_live_jitdump(maps: &str) -> bool {
    mapped_paths(maps).any(|path| {
        let name = path.rsplit('/').next().unwrap_or(path);
        name.strip_prefix("jit-")
            .and_then(|n| n.strip_suffix(".dump"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Whether jprof may create files in a directory with `mode` owned by `owner`: a shared
/// sticky directory (a real `/tmp`: a name there can be neither replaced nor removed by
/// another user), or one of the JVM's user. Anything else may be a directory the JVM's user
/// put in place of its `/tmp` (e.g. `/etc` bind-mounted in a user namespace) to make root
/// write there.
fn tmp_is_usable(mode: u32, owner: u32, jvm_uid: u32) -> bool {
    let sticky_shared = mode & libc::S_ISVTX != 0 && mode & 0o002 != 0;
    mode & libc::S_IFMT == libc::S_IFDIR && (sticky_shared || owner == jvm_uid)
}

/// The JVM's `/tmp` (HotSpot looks for `.attach_pid<pid>` in its working directory, then
/// there, and serves `.java_pid<pid>` there), opened once: every name in it is reached
/// through this descriptor, so no link or mount swapped in later redirects what jprof
/// creates, removes or connects to.
struct JvmTmp {
    dir: OwnedFd,
}

/// A file jprof created in the JVM's `/tmp`, removed only while it is still that file.
struct Made {
    name: String,
    file: File,
    dev: u64,
    ino: u64,
}

impl JvmTmp {
    fn open(pid: u32, jvm_uid: u32) -> std::io::Result<Self> {
        // /proc/PID/root is the JVM's root (a container's, a chroot).
        Self::open_in(Path::new(&format!("/proc/{pid}/root")), jvm_uid)
    }

    /// `tmp` under `root`, resolved as the JVM resolves it but inside that root: a link there
    /// never leads into the host.
    fn open_in(root: &Path, jvm_uid: u32) -> std::io::Result<Self> {
        use nix::fcntl::{openat2, OpenHow, ResolveFlag};
        let root = nix::fcntl::open(
            root,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let how = OpenHow::new()
            .flags(flags)
            .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        let dir = match openat2(&root, "tmp", how) {
            // Kernels before 5.6, or a seccomp filter: no link followed at all.
            Err(Errno::ENOSYS | Errno::EPERM) => {
                openat(&root, "tmp", flags | OFlag::O_NOFOLLOW, Mode::empty())?
            }
            opened => opened?,
        };
        let st = fstat(&dir)?;
        if !tmp_is_usable(st.st_mode, st.st_uid, jvm_uid) {
            return Err(std::io::Error::other(format!(
                "its /tmp is neither a shared sticky directory nor its user's (mode {:o}, uid {})",
                st.st_mode & 0o7777,
                st.st_uid
            )));
        }
        Ok(Self { dir })
    }

    /// A path naming `name` in this directory through the descriptor (for `connect`).
    fn path_of(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}/{name}", self.dir.as_raw_fd()))
    }

    /// Whether `name` is a socket (not a link) owned by the JVM's user or root.
    fn has_socket(&self, name: &str, jvm_uid: u32) -> bool {
        fstatat(&self.dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| {
            st.st_mode & libc::S_IFMT == libc::S_IFSOCK && (st.st_uid == 0 || st.st_uid == jvm_uid)
        })
    }

    /// Creates `name` as a new file (never an existing one, never through a link).
    fn create(&self, name: &str, mode: u32) -> std::io::Result<Made> {
        let flags = OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_EXCL
            | OFlag::O_NOFOLLOW
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC;
        let fd = openat(&self.dir, name, flags, Mode::from_bits_truncate(mode))?;
        let file = File::from(fd);
        let meta = file.metadata()?;
        Ok(Made {
            name: name.to_string(),
            file,
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// Removes `made` if the name still holds that very file.
    fn remove(&self, made: &Made) -> bool {
        let same = fstatat(&self.dir, made.name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|st| st.st_dev == made.dev && st.st_ino == made.ino);
        same && unlinkat(&self.dir, made.name.as_str(), UnlinkatFlags::NoRemoveDir).is_ok()
    }
}

/// Copies the agent into the container's `/tmp` as a new file readable by every user (the
/// JVM's among them): jprof never hands a file it made to the container's user. Returns it and
/// the path the JVM knows it by.
fn copy_agent_into(tmp: &JvmTmp, agent: &Path, nspid: u32) -> std::io::Result<(Made, String)> {
    let mut last = None;
    for attempt in 0..16u32 {
        let name = format!("jprof-agent-{nspid}-{}-{attempt}.so", std::process::id());
        match tmp.create(&name, 0o444) {
            Ok(mut made) => {
                let copied =
                    File::open(agent).and_then(|mut src| std::io::copy(&mut src, &mut made.file));
                if let Err(e) = copied {
                    tmp.remove(&made);
                    return Err(e);
                }
                return Ok((made, format!("/tmp/{name}")));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name in /tmp")))
}

/// How long a JVM found while starting may take to come far enough for an attach.
const STARTUP_DEADLINE: Duration = Duration::from_secs(30);

/// Why a JVM was not sent SIGQUIT.
#[derive(Debug, PartialEq, Eq)]
enum Unready {
    /// It exited (a short-lived JVM: nothing to say).
    Gone,
    /// It runs but does not catch SIGQUIT, which would kill it.
    NoSigquitHandler,
    /// It did not get far enough within [`STARTUP_DEADLINE`].
    TooSlow,
    /// The recording stopped first.
    Stopped,
}

impl std::fmt::Display for Unready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unready::Gone => write!(f, "it exited"),
            Unready::NoSigquitHandler => write!(
                f,
                "it does not catch SIGQUIT (started with -Xrs or -XX:+ReduceSignalUsage?), which would kill it"
            ),
            Unready::TooSlow => write!(
                f,
                "it did not finish starting within {} s",
                STARTUP_DEADLINE.as_secs()
            ),
            Unready::Stopped => write!(f, "the recording stopped before it finished starting"),
        }
    }
}

/// Whether `/proc/PID/status` text says SIGQUIT is caught (`SigCgt`, a hex mask, bit 2).
fn catches_sigquit(status: &str) -> Option<bool> {
    let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
    let mask = u64::from_str_radix(mask.trim(), 16).ok()?;
    Some(mask & (1 << (libc::SIGQUIT - 1)) != 0)
}

/// The thread HotSpot starts after it has removed a stale attach socket left by an earlier
/// process with its pid (`AttachListener::vm_start`) and before it runs Java code; a listener
/// started before that removal would lose its socket.
const STARTED_THREAD: &str = "Service Thread";

/// Whether JVM `pid` can be sent SIGQUIT to start its attach listener: None while it is still
/// starting.
fn ready_for_sigquit(pid: u32) -> Option<Result<(), Unready>> {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Some(Err(Unready::Gone));
    };
    if status.lines().any(|l| l.starts_with("State:\tZ")) {
        return Some(Err(Unready::Gone));
    }
    let started = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|comm| comm.trim_end() == STARTED_THREAD)
        });
    match (started, catches_sigquit(&status)) {
        (_, None) => Some(Err(Unready::Gone)),
        (true, Some(true)) => Some(Ok(())),
        (true, Some(false)) => Some(Err(Unready::NoSigquitHandler)),
        (false, _) => None,
    }
}

/// Waits (looking every [`SLICE`] at most) until JVM `pid` catches SIGQUIT and has finished
/// starting, at most [`STARTUP_DEADLINE`]: a JVM found as its process maps libjvm is not
/// there yet.
fn wait_until_ready(pid: u32, stop: &AtomicBool) -> Result<(), Unready> {
    let until = Instant::now() + STARTUP_DEADLINE;
    let mut step = Duration::from_millis(10);
    loop {
        if let Some(ready) = ready_for_sigquit(pid) {
            return ready;
        }
        match time_left(until, STARTUP_DEADLINE, stop) {
            Ok(left) => std::thread::sleep(step.min(left)),
            Err(Failure::Stopped) => return Err(Unready::Stopped),
            Err(_) => return Err(Unready::TooSlow),
        }
        step = (step * 2).min(SLICE);
    }
}

/// Why an exchange with the JVM ended without a reply.
#[derive(Debug)]
enum Failure {
    /// The recording stopped first.
    Stopped,
    TimedOut(Duration),
    TooLarge,
    /// Something else answers on the JVM's socket.
    Impostor(i32),
    Io(std::io::Error),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Stopped => write!(f, "the recording stopped before the JVM answered"),
            Failure::TimedOut(d) => write!(f, "no complete answer within {} s", d.as_secs()),
            Failure::TooLarge => write!(f, "its answer exceeded {} KiB", REPLY_LIMIT >> 10),
            Failure::Impostor(peer) => {
                write!(
                    f,
                    "its attach socket is served by process {peer}, not by the JVM"
                )
            }
            Failure::Io(e) => write!(f, "{e}"),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Io(e)
    }
}

impl From<Errno> for Failure {
    fn from(e: Errno) -> Self {
        Failure::Io(e.into())
    }
}

/// The time left before `until`, or why there is none: the stop flag or the deadline.
fn time_left(until: Instant, deadline: Duration, stop: &AtomicBool) -> Result<Duration, Failure> {
    if stop.load(Ordering::Relaxed) {
        return Err(Failure::Stopped);
    }
    match until.saturating_duration_since(Instant::now()) {
        left if left.is_zero() => Err(Failure::TimedOut(deadline)),
        left => Ok(left),
    }
}

/// Waits until `fd` is ready for `events`, in slices of at most [`SLICE`].
fn wait_ready(
    fd: &impl AsFd,
    events: PollFlags,
    until: Instant,
    deadline: Duration,
    stop: &AtomicBool,
) -> Result<(), Failure> {
    loop {
        let slice = time_left(until, deadline, stop)?.min(SLICE);
        let mut fds = [PollFd::new(fd.as_fd(), events)];
        match poll(&mut fds, (slice.as_millis() as u16).max(1)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Sends one HotSpot attach request (protocol 1: version and exactly four arguments) to the
/// socket `name` of JVM `pid` and returns the reply text: within `deadline` in all, at most
/// [`REPLY_LIMIT`] bytes, given up once `stop` is set.
fn attach_request(
    tmp: &JvmTmp,
    name: &str,
    pid: u32,
    args: [&str; 4],
    deadline: Duration,
    stop: &AtomicBool,
) -> Result<String, Failure> {
    let until = Instant::now() + deadline;
    let addr = UnixAddr::new(&tmp.path_of(name))?;
    let stream = loop {
        let fd = socket::socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        )?;
        match socket::connect(fd.as_raw_fd(), &addr) {
            Ok(()) => break UnixStream::from(fd),
            // The listener's backlog is full: it is not accepting (yet).
            Err(Errno::EAGAIN) => {
                std::thread::sleep(time_left(until, deadline, stop)?.min(SLICE));
            }
            Err(e) => return Err(e.into()),
        }
    };
    // The socket was looked up by name: it must be the JVM's own listener.
    let peer = socket::getsockopt(&stream, sockopt::PeerCredentials)?;
    if u32::try_from(peer.pid()).ok() != Some(pid) {
        return Err(Failure::Impostor(peer.pid()));
    }
    let mut request = b"1\0".to_vec();
    for a in args {
        request.extend_from_slice(a.as_bytes());
        request.push(0);
    }
    let mut sent = 0;
    while sent < request.len() {
        match (&stream).write(&request[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                wait_ready(&stream, PollFlags::POLLOUT, until, deadline, stop)?
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut reply = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match (&stream).read(&mut buf) {
            Ok(0) => break,
            Ok(n) if reply.len() + n > REPLY_LIMIT => return Err(Failure::TooLarge),
            Ok(n) => {
                reply.extend_from_slice(&buf[..n]);
                time_left(until, deadline, stop)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                wait_ready(&stream, PollFlags::POLLIN, until, deadline, stop)?
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

/// Whether a refused `load` says only that the JVM has not finished starting: its attach
/// listener can answer before JVMTI's live phase, and a JVM found moments after it started
/// (or one slowed by a busy host) refuses agents until then. JDK 21+ says so itself; before,
/// the JVM loads the agent, whose Agent_OnAttach returns JNI_EDETACHED (-2) when it gets no
/// JVMTI env for that reason.
fn not_live_yet(reply: &str) -> bool {
    reply.contains("only permitted in the live phase")
        || reply
            .lines()
            .skip(1)
            .map(str::trim)
            .any(|l| l.strip_prefix("return code:").map_or(l, str::trim) == AGENT_NOT_LIVE)
}

/// Agent_OnAttach's return code when the VM is not in its live phase yet (agent/src/ffi.rs).
const AGENT_NOT_LIVE: &str = "-2";

/// Asks the JVM to load the agent, asking again while it answers that it is still starting
/// (every [`SLICE`]), all within [`LOAD_DEADLINE`] and the stop.
fn load_when_live(
    tmp: &JvmTmp,
    socket: &str,
    pid: u32,
    agent: &str,
    stop: &AtomicBool,
) -> Result<String, Failure> {
    let until = Instant::now() + LOAD_DEADLINE;
    loop {
        let left = time_left(until, LOAD_DEADLINE, stop)?;
        let reply = attach_request(tmp, socket, pid, ["load", agent, "true", ""], left, stop)
            .map_err(|e| match e {
                Failure::TimedOut(_) => Failure::TimedOut(LOAD_DEADLINE),
                e => e,
            })?;
        if !not_live_yet(&reply) {
            return Ok(reply);
        }
        std::thread::sleep(time_left(until, LOAD_DEADLINE, stop)?.min(SLICE));
    }
}

/// Whether a `load` reply means the agent's Agent_OnAttach returned 0: the first line is the
/// request's result; JDK 9+ adds `return code: N`, and JDK 21+ reports a load failure as
/// result 0 with a message instead.
fn load_succeeded(reply: &str) -> bool {
    let mut lines = reply.lines().map(str::trim);
    if lines.next() != Some("0") {
        return false;
    }
    let rest: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
    match rest.first() {
        None => true,
        Some(l) => l.strip_prefix("return code:").map(str::trim) == Some("0") || *l == "0",
    }
}

/// What attaching jprof's agent to running JVMs did.
#[derive(Debug, Default)]
pub struct Attach {
    /// JVMs that answered that the agent loaded, with the note saying so; [`Attach::confirm`]
    /// keeps those whose agent's jitdump appeared.
    pub answered: Vec<(u32, String)>,
    /// What the summary says about the rest.
    pub notes: Vec<String>,
}

impl Attach {
    fn failed(note: String) -> Self {
        Self {
            answered: Vec::new(),
            notes: vec![note],
        }
    }

    /// Adds `other`'s outcome to this one.
    pub fn merge(&mut self, other: Attach) {
        self.answered.extend(other.answered);
        self.notes.extend(other.notes);
    }

    /// Whether an agent really loaded, and the summary's notes: a JVM's "loaded" answer counts
    /// only when the agent's own jitdump for that pid appeared (`wrote_jitdump`).
    pub fn confirm(self, wrote_jitdump: impl Fn(u32) -> bool) -> (Vec<u32>, Vec<String>) {
        let mut loaded = Vec::new();
        let mut notes = Vec::new();
        for (pid, note) in self.answered {
            if wrote_jitdump(pid) {
                loaded.push(pid);
                notes.push(note);
            } else {
                notes.push(format!(
                    "HotSpot JVM {pid}: it answered that {AGENT_FILE} loaded, but no jitdump from the agent appeared during the recording: Java JIT frames will not be named"
                ));
            }
        }
        notes.extend(self.notes);
        (loaded, notes)
    }
}

/// An attach running on its own thread.
pub struct Running {
    pid: u32,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    outcome: std::sync::mpsc::Receiver<Attach>,
}

/// How jprof came to attach to a JVM (what the summary says, and what to advise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A `-p` or `--tid` target, or a JVM running when `-a` started.
    Running,
    /// A JVM of a tree jprof launched whose environment was cleared (so jprof's
    /// `JAVA_TOOL_OPTIONS` never reached it).
    ClearedEnvironment,
    /// A JVM that started during an `-a` recording.
    StartedDuringRecording,
}

/// Starts loading jprof's agent into `pid` (if it is a HotSpot JVM) on a thread of its own.
pub fn start(pid: u32, origin: Origin) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let (tx, outcome) = std::sync::mpsc::sync_channel(1);
    let flag = Arc::clone(&stop);
    let ended = Arc::clone(&done);
    let spawned = std::thread::Builder::new()
        .name("jprof-attach".into())
        .spawn({
            let tx = tx.clone();
            move || {
                let _ = tx.send(attach_java(pid, origin, &flag));
                ended.store(true, Ordering::Relaxed);
            }
        });
    if let Err(e) = spawned {
        done.store(true, Ordering::Relaxed);
        let _ = tx.send(Attach::failed(format!(
            "HotSpot JVM {pid}: cannot start the attach thread: {e}"
        )));
    }
    Running {
        pid,
        stop,
        done,
        outcome,
    }
}

impl Running {
    /// The JVM's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the attach has ended (its outcome is ready).
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Relaxed)
    }

    /// Tells the attach to give up (it does within [`SLICE`]).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops the attach and takes its outcome; one that has not ended within [`GIVE_UP`] is
    /// left behind with a note.
    pub fn finish(self) -> Attach {
        self.stop();
        self.outcome.recv_timeout(GIVE_UP).unwrap_or_else(|_| {
            Attach::failed(format!(
                "HotSpot JVM {}: the attach did not end when the recording stopped; Java JIT frames will not be named",
                self.pid
            ))
        })
    }
}

/// Loads jprof's agent into the running HotSpot JVM `pid`, so it replays the JVM's compiled
/// code into a jitdump jprof's recorder picks up. Not a HotSpot JVM or no agent gives no
/// attempt, or a note saying why; gives up as soon as `stop` is set.
fn attach_java(pid: u32, origin: Origin, stop: &AtomicBool) -> Attach {
    let launched = origin == Origin::ClearedEnvironment;
    match hotspot_evidence(pid) {
        Jvm::None => return Attach::default(),
        Jvm::NotHotSpot(note) => return Attach::failed(note),
        Jvm::HotSpot => {}
    }
    let Some(agent) = find_agent() else {
        return Attach::failed(format!(
            "HotSpot JVM: {AGENT_FILE} was not found next to jprof (or set JPROF_AGENT): Java JIT frames will not be named"
        ));
    };
    // The JVM accepts attach connections only from its own effective uid (or root).
    // A /proc/<pid> directory belongs to the process's effective uid.
    let Some(jvm_uid) = foreign_file::process_uid(pid) else {
        return Attach::default();
    };
    if let Some(euid) = foreign_file::process_uid(std::process::id()) {
        if euid != 0 && jvm_uid != euid {
            return Attach::failed(format!(
                "HotSpot JVM {pid} runs as uid {jvm_uid}: only that user or root can load jprof's agent; Java JIT frames will not be named"
            ));
        }
    }
    let nspid = process_root::namespace_pid(pid);
    let tmp = match JvmTmp::open(pid, jvm_uid) {
        Ok(tmp) => tmp,
        Err(e) => {
            return Attach::failed(format!(
                "HotSpot JVM {pid}: jprof does not use its /tmp ({e}); Java JIT frames will not be named"
            ))
        }
    };
    let socket = format!(".java_pid{nspid}");
    let listening = tmp.has_socket(&socket, jvm_uid);
    if !listening {
        // SIGQUIT kills a JVM that does not catch it yet (or ever: -Xrs).
        match wait_until_ready(pid, stop) {
            Ok(()) => {}
            Err(Unready::Gone) => return Attach::default(),
            Err(why) => {
                return Attach::failed(format!(
                    "HotSpot JVM {pid}: {why}; no agent was loaded and Java JIT frames will not be named"
                ))
            }
        }
    }
    // Started under another `jprof record` that still runs (its JAVA_TOOL_OPTIONS load the
    // agent as the JVM starts, well before it is ready): that recording's agent and jitdump,
    // read here but not restarted, and not removed at the end. An agent whose jitdump was
    // removed (an earlier session's) is attached again, and starts a new file.
    if another_recordings_agent(pid, &agent) {
        return Attach::failed(format!(
            "HotSpot JVM {pid}: it already runs jprof's agent (another recording's): its jitdump is read, not removed"
        ));
    }
    if !listening {
        // The JVM starts its attach listener on SIGQUIT only if this trigger file exists (in
        // its working directory, a directory its user chooses and jprof never writes in, or
        // its /tmp); otherwise SIGQUIT prints a thread dump. HotSpot accepts a trigger owned
        // by root.
        let Ok(trigger) = tmp.create(&format!(".attach_pid{nspid}"), 0o600) else {
            return Attach::failed(format!(
                "HotSpot JVM {pid}: cannot create its attach trigger file; Java JIT frames will not be named"
            ));
        };
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGQUIT,
        );
        let until = Instant::now() + LISTENER_DEADLINE;
        let mut step = Duration::from_millis(20);
        let mut waited = Ok(Duration::ZERO);
        while !tmp.has_socket(&socket, jvm_uid) {
            waited = time_left(until, LISTENER_DEADLINE, stop);
            let Ok(left) = waited else { break };
            std::thread::sleep(step.min(left));
            step = (step + Duration::from_millis(20)).min(SLICE);
        }
        tmp.remove(&trigger);
        match waited {
            Err(Failure::Stopped) => {
                return Attach::failed(format!(
                    "HotSpot JVM {pid}: the recording stopped before its attach listener started; Java JIT frames will not be named"
                ))
            }
            // A short-lived JVM (a build's `javac`) that ended meanwhile: nothing to say.
            Err(_) if ready_for_sigquit(pid) == Some(Err(Unready::Gone)) => {
                return Attach::default()
            }
            Err(_) => {
                return Attach::failed(format!(
                    "HotSpot JVM {pid}: its attach listener did not start (started with -XX:+DisableAttachMechanism?); Java JIT frames will not be named"
                ))
            }
            Ok(_) => {}
        }
    }
    let mut outcome = Attach::default();
    // A JVM in another mount namespace (a container) cannot see jprof's files: give it a copy
    // of the agent in its own /tmp, removed once loaded (the mapping stays).
    let copied = match process_root::foreign_root(pid) {
        None => None,
        Some(_) => match copy_agent_into(&tmp, &agent, nspid) {
            Ok(copy) => Some(copy),
            Err(e) => {
                return Attach::failed(format!(
                    "HotSpot JVM {pid} runs in another mount namespace and jprof's agent could not be copied into its /tmp: {e}; Java JIT frames will not be named"
                ))
            }
        },
    };
    let agent_arg = match &copied {
        Some((_, inside)) => inside.clone(),
        None => agent.display().to_string(),
    };
    let loaded = load_when_live(&tmp, &socket, pid, &agent_arg, stop);
    if let Some((made, _)) = &copied {
        tmp.remove(made);
    }
    match loaded {
        Ok(reply) if load_succeeded(&reply) => {
            let late = match origin {
                Origin::ClearedEnvironment => {
                    " (it had started without the agent: its environment was cleared)"
                }
                Origin::StartedDuringRecording => " (it started during the recording)",
                Origin::Running => "",
            };
            outcome
                .answered
                .push((pid, format!("HotSpot JVM {pid}: {LOADED}{late}")));
        }
        Ok(reply) => {
            // The JVM's words, shortened and without control characters (they reach a terminal).
            let reply: String = reply
                .trim()
                .chars()
                .take(300)
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            outcome.notes.push(format!(
                "HotSpot JVM {pid}: loading {AGENT_FILE} failed: {reply}"
            ));
            return outcome;
        }
        Err(e) => {
            // The request was sent: the JVM may still load the agent after jprof is gone.
            let later = match e {
                Failure::Stopped | Failure::TimedOut(_) => format!(
                    "; the JVM may still load the agent, which then writes a jit-{nspid}.dump jprof does not remove"
                ),
                _ => String::new(),
            };
            outcome.notes.push(format!(
                "HotSpot JVM {pid}: attach failed ({e}); Java JIT frames will not be named{later}"
            ));
            return outcome;
        }
    }
    let flags = attach_request(
        &tmp,
        &socket,
        pid,
        ["jcmd", "VM.flags", "", ""],
        QUERY_DEADLINE,
        stop,
    );
    if flags.is_ok_and(|flags| !flags.contains("-XX:+PreserveFramePointer")) {
        let fix = if launched {
            "its environment was cleared, so jprof's JAVA_TOOL_OPTIONS did not reach it: pass the flag on its command line"
        } else {
            "start it with that flag, or with `jprof record -- java ...`"
        };
        outcome.notes.push(format!(
            "HotSpot JVM {pid} runs without -XX:+PreserveFramePointer: stacks through compiled Java code may be truncated ({fix})"
        ));
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    impl JvmTmp {
        /// Any directory, as if it were a JVM's /tmp.
        fn at(dir: &Path) -> Self {
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
            Self {
                dir: nix::fcntl::open(dir, flags, Mode::empty()).unwrap(),
            }
        }
    }

    #[test]
    fn only_executable_mappings_of_a_libjvm_count() {
        let maps = "\
7f1272200000-7f1272451000 r--p 00000000 fe:00 315160                     /usr/lib/jvm/j17/lib/server/libjvm.so
7f1272451000-7f12731a4000 r-xp 00251000 fe:00 315160                     /usr/lib/jvm/j17/lib/server/libjvm.so
7f1273000000-7f1273001000 r-xp 00000000 08:1f 99                         /home/a b/libjvm.so
7f1274000000-7f1274001000 r-xp 00000000 08:01 7                          /tmp/libjvm.so (deleted)
7f1275000000-7f1275001000 r-xp 00000000 08:01 8                          /usr/lib/libjvm.so.bak
7ffd000000-7ffd001000 r-xp 00000000 00:00 0                              [vdso]
";
        let found = libjvm_mappings(maps);
        assert_eq!(
            found,
            vec![
                LibjvmMapping {
                    range: "7f1272451000-7f12731a4000".into(),
                    dev: (0xfe, 0),
                    inode: 315160,
                    path: "/usr/lib/jvm/j17/lib/server/libjvm.so".into(),
                },
                LibjvmMapping {
                    range: "7f1273000000-7f1273001000".into(),
                    dev: (8, 0x1f),
                    inode: 99,
                    path: "/home/a b/libjvm.so".into(),
                },
            ]
        );
    }

    /// A file merely named libjvm.so is not HotSpot: not an ELF file, or an ELF library
    /// without HotSpot's symbols (this test binary).
    #[test]
    fn a_library_without_hotspots_symbols_is_not_a_jvm() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("libjvm.so");
        std::fs::write(&fake, b"#!/bin/sh\necho not a library\n").unwrap();
        let err = hotspot_library(File::open(&fake).unwrap()).unwrap_err();
        assert!(err.contains("not a 64-bit ELF"), "{err}");
        let me = File::open(std::env::current_exe().unwrap()).unwrap();
        let err = hotspot_library(me).unwrap_err();
        assert!(err.contains("does not define JNI_CreateJavaVM"), "{err}");
    }

    /// A library this very process maps (libc: a real mapped file, not a JVM), read through
    /// map_files or its path: the very file mapped, refused as not HotSpot, without blocking.
    #[test]
    fn a_mapped_file_is_read_as_the_file_mapped() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| l.contains(" r-xp ") && l.contains("/libc.so"))
            .expect("this test binary maps libc");
        let libc_path = line.split_once('/').map(|(_, p)| format!("/{p}")).unwrap();
        let renamed = line.replace(&libc_path, "/x/libjvm.so");
        let mut mapping = libjvm_mappings(&renamed).pop().unwrap();
        // map_files (root) finds the file whatever the path says; the path fallback is
        // checked against the device and inode.
        mapping.path = libc_path.clone();
        let file = open_mapped(std::process::id(), &mapping).unwrap();
        assert_eq!(
            file.metadata().unwrap().ino(),
            std::fs::metadata(&libc_path).unwrap().ino()
        );
        let err = hotspot_library(file).unwrap_err();
        assert!(err.contains("does not define JNI_CreateJavaVM"), "{err}");
    }

    /// A process with a mount tree of its own (`unshare --mount`, as a container), killed when
    /// dropped.
    struct OwnTree(std::process::Child);

    impl Drop for OwnTree {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// The path fallback resolves a mapping's path inside the container's root: a link the
    /// container's user plants (absolute, so outside the root it names a host directory)
    /// leads to the container's file, never to the host's file it would name on the host.
    #[test]
    fn the_path_fallback_never_follows_a_planted_link_out_of_the_root() {
        use std::io::BufRead;
        let host = tempfile::tempdir().unwrap();
        let inner = host.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        std::fs::write(inner.join("libjvm.so"), b"the host's file").unwrap();
        std::os::unix::fs::symlink(&inner, host.path().join("planted")).unwrap();
        // In its own tree a tmpfs hides the host's `inner`, with the container's file in it.
        let script = format!(
            "mount -t tmpfs tmpfs '{0}' && printf 'the container' > '{0}/libjvm.so' && \
             echo ready && exec sleep 600",
            inner.display()
        );
        let mut child = std::process::Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run unshare");
        let stdout = child.stdout.take().unwrap();
        let container = OwnTree(child);
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n", "the mount namespace was not made");
        let pid = container.0.id();
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        assert_eq!(process_root::foreign_root(pid), Some(root.clone()));
        let mapping = |meta: std::fs::Metadata| LibjvmMapping {
            range: "1000-2000".into(),
            dev: (
                nix::sys::stat::major(meta.dev()),
                nix::sys::stat::minor(meta.dev()),
            ),
            inode: meta.ino(),
            path: host.path().join("planted/libjvm.so").display().to_string(),
        };
        // The host's file, named by the link as the host sees it, is not reached...
        let hosts = mapping(std::fs::metadata(inner.join("libjvm.so")).unwrap());
        let err = open_at_path(Some(&root), &hosts).unwrap_err();
        assert!(err.contains("not the one mapped"), "{err}");
        // ...the container's is.
        let in_root = process_root::host_path(Some(&root), &inner.join("libjvm.so"));
        let containers = mapping(std::fs::metadata(in_root).unwrap());
        let file = open_at_path(Some(&root), &containers).unwrap().into_file();
        assert_eq!(std::io::read_to_string(file).unwrap(), "the container");
        // And the whole lookup (map_files has no such range) takes the same path.
        let file = open_mapped(pid, &containers).unwrap();
        assert_eq!(std::io::read_to_string(file).unwrap(), "the container");
        assert!(open_mapped(pid, &hosts).is_err());
    }

    /// A container's `/tmp` that is a link is followed inside the container's root, never to
    /// the host's directory of that name.
    #[test]
    fn the_jvms_tmp_is_resolved_inside_its_root() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let real = root.path().join("real_tmp");
        std::fs::create_dir(&real).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o1777)).unwrap();
        std::os::unix::fs::symlink("/real_tmp", root.path().join("tmp")).unwrap();
        let tmp = JvmTmp::open_in(root.path(), 12345).unwrap();
        let made = tmp.create("probe", 0o600).unwrap();
        assert!(real.join("probe").is_file());
        assert!(tmp.remove(&made));
        // An absolute link to /etc means the container's /etc (absent here), not the host's.
        std::fs::remove_file(root.path().join("tmp")).unwrap();
        std::os::unix::fs::symlink("/etc", root.path().join("tmp")).unwrap();
        assert!(JvmTmp::open_in(root.path(), 12345).is_err());
    }

    #[test]
    fn files_are_made_only_in_a_shared_sticky_tmp_or_the_jvm_users_own() {
        let dir = libc::S_IFDIR;
        assert!(tmp_is_usable(dir | 0o1777, 0, 1000));
        assert!(tmp_is_usable(dir | 0o700, 1000, 1000));
        // A root directory (an /etc bind-mounted over the JVM's /tmp) is not.
        assert!(!tmp_is_usable(dir | 0o755, 0, 1000));
        // Writable by all but not sticky: anyone could swap jprof's files.
        assert!(!tmp_is_usable(dir | 0o777, 0, 1000));
        assert!(!tmp_is_usable(libc::S_IFREG | 0o1777, 0, 1000));
    }

    /// Attack 2 of docs/security.md: a container's user plants the agent copy's name as a link
    /// (an absolute link under /proc/PID/root resolves on the host); the copy goes elsewhere,
    /// and the trigger is never made through a link.
    #[test]
    fn the_agent_copy_never_goes_through_a_planted_link() {
        let work = tempfile::tempdir().unwrap();
        let tmp_dir = work.path().join("tmp");
        std::fs::create_dir(&tmp_dir).unwrap();
        let agent = work.path().join("agent.so");
        std::fs::write(&agent, b"agent bytes").unwrap();
        let victim = work.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let me = std::process::id();
        let planted = tmp_dir.join(format!("jprof-agent-77-{me}-0.so"));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        std::os::unix::fs::symlink(&victim, tmp_dir.join(".attach_pid77")).unwrap();
        let tmp = JvmTmp::at(&tmp_dir);
        let (made, inside) = copy_agent_into(&tmp, &agent, 77).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(inside, format!("/tmp/jprof-agent-77-{me}-1.so"));
        let copy = tmp_dir.join(&made.name);
        assert_eq!(std::fs::read(&copy).unwrap(), b"agent bytes");
        assert_eq!(std::fs::metadata(&copy).unwrap().mode() & 0o777, 0o444);
        assert!(tmp.create(".attach_pid77", 0o600).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // Removal takes only the file jprof made: not one put in its place.
        std::fs::remove_file(&copy).unwrap();
        std::fs::write(&copy, b"someone else's").unwrap();
        assert!(!tmp.remove(&made));
        assert!(copy.exists());
    }

    /// A server in this process playing the JVM's attach listener: it reads one request,
    /// then `answer` writes whatever it likes.
    fn listener(
        dir: &Path,
        answer: impl FnOnce(&mut UnixStream) + Send + 'static,
    ) -> std::thread::JoinHandle<Vec<u8>> {
        let server = UnixListener::bind(dir.join(".java_pid1")).unwrap();
        std::thread::spawn(move || {
            let (mut conn, _) = server.accept().unwrap();
            let mut request = vec![0u8; 1024];
            let n = conn.read(&mut request).unwrap();
            request.truncate(n);
            answer(&mut conn);
            request
        })
    }

    fn ask(dir: &Path, pid: u32, deadline: Duration, stop: &AtomicBool) -> Result<String, Failure> {
        let tmp = JvmTmp::at(dir);
        attach_request(
            &tmp,
            ".java_pid1",
            pid,
            ["load", "/a.so", "true", ""],
            deadline,
            stop,
        )
    }

    #[test]
    fn a_reply_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let server = listener(dir.path(), |c| c.write_all(b"0\nreturn code: 0\n").unwrap());
        let reply = ask(
            dir.path(),
            std::process::id(),
            QUERY_DEADLINE,
            &AtomicBool::new(false),
        );
        assert_eq!(reply.unwrap(), "0\nreturn code: 0\n");
        assert_eq!(server.join().unwrap(), b"1\0load\0/a.so\0true\0\0");
    }

    /// A fake JVM's endless reply: refused at the cap, not accumulated.
    #[test]
    fn an_endless_reply_is_cut_at_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let _server = listener(dir.path(), |c| {
            let block = vec![b'x'; 1 << 16];
            while c.write_all(&block).is_ok() {}
        });
        let reply = ask(
            dir.path(),
            std::process::id(),
            QUERY_DEADLINE,
            &AtomicBool::new(false),
        );
        assert!(matches!(reply, Err(Failure::TooLarge)), "{reply:?}");
    }

    /// A reply trickled a byte at a time: the total deadline ends it, and so does a stop.
    #[test]
    fn a_trickled_reply_ends_at_the_deadline_or_the_stop() {
        let trickle = |c: &mut UnixStream| {
            while c.write_all(b"0").is_ok() {
                std::thread::sleep(Duration::from_millis(30));
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let _server = listener(dir.path(), trickle);
        let started = Instant::now();
        let reply = ask(
            dir.path(),
            std::process::id(),
            Duration::from_millis(500),
            &AtomicBool::new(false),
        );
        assert!(matches!(reply, Err(Failure::TimedOut(_))), "{reply:?}");
        assert!(started.elapsed() < Duration::from_secs(2));

        let dir = tempfile::tempdir().unwrap();
        let _server = listener(dir.path(), trickle);
        let stop = Arc::new(AtomicBool::new(false));
        let stopper = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                stop.store(true, Ordering::Relaxed);
                Instant::now()
            })
        };
        let reply = ask(dir.path(), std::process::id(), LOAD_DEADLINE, &stop);
        let stopped_at = stopper.join().unwrap();
        assert!(matches!(reply, Err(Failure::Stopped)), "{reply:?}");
        assert!(stopped_at.elapsed() < SLICE * 3);
    }

    /// A socket at the JVM's name served by another process is not the JVM's.
    #[test]
    fn a_socket_served_by_another_process_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let _server = listener(dir.path(), |c| c.write_all(b"0\n").unwrap());
        let reply = ask(dir.path(), 1, QUERY_DEADLINE, &AtomicBool::new(false));
        assert!(
            matches!(reply, Err(Failure::Impostor(p)) if p == std::process::id() as i32),
            "{reply:?}"
        );
    }

    #[test]
    fn an_agent_loaded_by_another_recording_is_seen() {
        let line =
            |path: &str| format!("7f0000000000-7f0000001000 r-xp 00000000 fe:00 42   {path}\n");
        let agent = Path::new("/opt/jprof/lib/agent.so");
        let plain = line("/usr/lib/jvm/j17/lib/server/libjvm.so") + &line("[vdso]");
        assert!(!maps_jprofs_agent(&plain, agent));
        for path in [
            "/home/u/jprof/target/release/libjprof_agent.so",
            "/opt/jprof/lib/agent.so",
            "/tmp/jprof-agent-1-4242-0.so (deleted)",
        ] {
            assert!(
                maps_jprofs_agent(&(plain.clone() + &line(path)), agent),
                "{path}"
            );
        }
        assert!(!maps_jprofs_agent(&line("/opt/other/agent.so"), agent));
        // Another recording's is under way while its jitdump has its name; an earlier
        // session's was removed.
        assert!(maps_live_jitdump(&line("/work/app/jit-4242.dump")));
        assert!(!maps_live_jitdump(&line("/tmp/jit-4242.dump (deleted)")));
        assert!(!maps_live_jitdump(&(plain + &line("/tmp/jit-x.dump"))));
    }

    #[test]
    fn sigquit_is_caught_per_the_status_mask() {
        let status =
            |mask: &str| format!("Name:\tjava\nSigBlk:\t0000000000000000\nSigCgt:\t{mask}\n");
        // HotSpot's usual mask: SIGQUIT (3) among SIGHUP, SIGINT, SIGUSR2, SIGSEGV, ...
        assert_eq!(catches_sigquit(&status("0000000000004a07")), Some(true));
        assert_eq!(catches_sigquit(&status("0000000000004a03")), Some(false));
        assert_eq!(catches_sigquit(&status("zz")), None);
        assert_eq!(catches_sigquit("Name:\tjava\n"), None);
        // This test process (Rust's runtime catches no SIGQUIT) has no Service Thread either:
        // still starting as far as a JVM goes; a pid that does not exist is gone.
        assert_eq!(ready_for_sigquit(std::process::id()), None);
        assert_eq!(ready_for_sigquit(u32::MAX >> 1), Some(Err(Unready::Gone)));
    }

    #[test]
    fn attach_replies() {
        assert!(load_succeeded("0\nreturn code: 0\n"));
        assert!(load_succeeded("0\n0\n"));
        assert!(load_succeeded("0\n"));
        assert!(!load_succeeded("0\nreturn code: -1\n"));
        assert!(!load_succeeded("0\nFailed to load agent library\n"));
        assert!(!load_succeeded("101\n"));
        let starting = "0\nDynamic agent loading is only permitted in the live phase\n";
        assert!(not_live_yet(starting) && !load_succeeded(starting));
        // Before JDK 21 the JVM lets the agent say it (JNI_EDETACHED).
        for starting in ["0\nreturn code: -2\n", "0\n-2\n"] {
            assert!(not_live_yet(starting) && !load_succeeded(starting));
        }
        assert!(!not_live_yet("0\nreturn code: -1\n") && !not_live_yet("-2\n"));
        assert!(!not_live_yet("0\nreturn code: 0\n"));
    }

    /// "Loaded" needs the JVM's answer and the agent's jitdump.
    #[test]
    fn loaded_is_claimed_only_with_the_agents_jitdump() {
        let answered = |pid: u32| Attach {
            answered: vec![(pid, format!("HotSpot JVM {pid}: {LOADED}"))],
            notes: vec!["other".into()],
        };
        let (loaded, notes) = answered(5).confirm(|pid| pid == 5);
        assert_eq!(loaded, [5]);
        assert_eq!(
            notes,
            ["HotSpot JVM 5: loaded jprof's JVMTI agent", "other"]
        );
        let (loaded, notes) = answered(6).confirm(|pid| pid == 5);
        assert!(loaded.is_empty());
        assert!(!notes[0].contains(LOADED), "{notes:?}");
        assert!(notes[0].contains("no jitdump from the agent appeared"));
    }
}
