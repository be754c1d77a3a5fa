//! Tailing the files JIT runtimes write while they run (perf jitdump, perf maps): discovered from
//! MMAP2 records of `jit-<pid>.dump`, and from well-known places for each process seen. Only
//! complete records (lines) are stored, as SIDE_FILE chunks, so the stored bytes always parse.
//! Runs on the writer thread: the ring reader never waits for it.

use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::foreign_file::{ForeignFile, Owner, READ_STEP};
use crate::format::jitdump;
use crate::format::mlpd;
use crate::format::perf_map;
use crate::format::recording::{SideKind, SidePiece};
use crate::process_root;

/// One file being tailed.
struct Tailed {
    kind: SideKind,
    pid: u32,
    path: PathBuf,
    /// Bytes consumed and stored so far (always a record/line boundary).
    stored: u64,
    jitdump_header: Option<jitdump::Header>,
    records: u64,
    /// Why tailing stopped, when it did.
    problem: Option<String>,
    closed: bool,
    /// The file as first opened (checked once: no link, regular, the process's owner); later
    /// polls read this very file, whatever is put at its path meanwhile.
    handle: Option<ForeignFile>,
    /// A jitdump's deferrable records and where they belong (`jit_debug`).
    split: super::jit_debug::Splitter,
}

/// The side files of one recording.
#[derive(Default)]
pub struct SideFiles {
    files: Vec<Tailed>,
    known: HashSet<PathBuf>,
    /// (device, inode) of the files tailed: one file reached by two paths (a container's
    /// `/proc/PID/cwd` and `/proc/PID/root/tmp`, say) is tailed once.
    known_files: HashSet<(u64, u64)>,
    /// Processes seen in the recording, with the uid that owns them.
    pids: BTreeMap<u32, Option<u32>>,
    /// `/proc/PID/root` of the processes seen that live in another mount namespace.
    roots: BTreeMap<u32, PathBuf>,
    /// Where runtime files jprof will remove are listed, in case jprof is killed first; with
    /// the runtime's name.
    leftovers: Option<super::leftovers::Leftovers>,
    /// Processes that exited and were scanned a last time.
    gone: HashSet<u32>,
    /// The runtime each process showed itself to be by what it mapped.
    runtimes: BTreeMap<u32, &'static str>,
    /// Which runtimes jprof asked and where they write (the files it will remove are listed).
    asking: super::runtimes::Asking,
    /// The pid each process has in its own PID namespace (it names the process's files).
    nspids: BTreeMap<u32, u32>,
    /// Where jitdumps' line and inline tables and method names are set aside, when they are
    /// stored only for what samples hit (`defer_jit_debug`).
    deferred: Option<super::jit_debug::Spool>,
    /// Bytes read so far from the side files of each user other than root and jprof's own.
    others_bytes: BTreeMap<u32, u64>,
}

/// The most bytes read from the side files of one user other than root and jprof's own, in
/// one recording. Every entry stored is indexed when symbols are embedded (and by `report`), at
/// about four bytes of memory per byte read: a process of another user that flooded its own perf
/// map (2.6 GB in 12 s) made root's `record -p` grow to 10.5 GB and take two minutes to end.
/// Root's and jprof's user's own files are not bounded (they could do as much themselves); a
/// container's are, whoever owns them.
pub(crate) const OTHER_USERS_SIDE_BYTES: u64 = 128 << 20;

/// Directories where runtimes put `jit-<pid>.dump` without a marker mmap jprof could see. The
/// file is named with the pid the process has in its own PID namespace; a process in another
/// mount namespace (a container) is looked for in its own working directory and `/tmp` only.
fn jitdump_candidates(pid: u32, root: Option<&Path>, private: Option<&Path>) -> Vec<PathBuf> {
    let name = format!("jit-{}.dump", process_root::namespace_pid(pid));
    let mut dirs = vec![
        PathBuf::from(format!("/proc/{pid}/cwd")),
        process_root::host_path(root, Path::new("/tmp")),
    ];
    if root.is_some() {
        return dirs.into_iter().map(|d| d.join(&name)).collect();
    }
    dirs.extend(private.map(Path::to_path_buf));
    if let Ok(d) = std::env::var("JITDUMPDIR") {
        dirs.push(PathBuf::from(&d));
        dirs.extend(subdirs(&Path::new(&d).join(".debug/jit")));
    }
    if let Ok(home) = std::env::var("HOME") {
        dirs.extend(subdirs(&Path::new(&home).join(".debug/jit")));
    }
    dirs.into_iter().map(|d| d.join(&name)).collect()
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

impl SideFiles {
    /// A process appeared in the recording; remember who owns it for the perf-map check.
    pub fn saw_pid(&mut self, pid: u32) {
        if self.pids.contains_key(&pid) {
            return;
        }
        let owner = std::fs::metadata(format!("/proc/{pid}"))
            .ok()
            .map(|m| m.uid());
        self.pids.insert(pid, owner);
        self.nspids.insert(pid, process_root::namespace_pid(pid));
        if let Some(root) = process_root::foreign_root(pid) {
            self.roots.insert(pid, root);
        }
    }

    /// An MMAP2 record named this file in process `pid` (a path in the process's namespace).
    pub fn saw_mapping(&mut self, pid: u32, filename: &str) {
        if let Some(runtime) = super::runtimes::runtime_of_mapping(filename) {
            self.runtimes.entry(pid).or_insert(runtime);
        }
        if jitdump::is_jitdump_path(filename).is_some() {
            self.saw_pid(pid);
            let path = process_root::host_path(
                self.roots.get(&pid).map(PathBuf::as_path),
                Path::new(filename),
            );
            self.add(SideKind::JITDUMP, pid, path);
        }
    }

    fn add(&mut self, kind: SideKind, pid: u32, path: PathBuf) {
        // /proc/PID/cwd is a link that dies with the process: resolve the directory. The file
        // itself stays as named, so a symlinked perf map is still seen (and refused) as one.
        // Not for a process in another mount namespace: its links resolve to paths of its own
        // namespace, which mean something else here.
        let path = match (path.parent(), path.file_name()) {
            (Some(dir), Some(name)) if !self.roots.contains_key(&pid) => {
                std::fs::canonicalize(dir).map_or_else(|_| path.clone(), |d| d.join(name))
            }
            _ => path,
        };
        if let Ok(meta) = std::fs::metadata(&path) {
            if self.known.contains(&path) || !self.known_files.insert((meta.dev(), meta.ino())) {
                return;
            }
        }
        if self.known.insert(path.clone()) {
            self.files.push(Tailed {
                kind,
                pid,
                path,
                stored: 0,
                jitdump_header: None,
                records: 0,
                problem: None,
                closed: false,
                handle: None,
                split: Default::default(),
            });
        }
    }

    /// Looks in the well-known places for files of the processes seen so far that still run
    /// (a process that exited is looked at one last time, then never again: a fork-heavy
    /// target sees tens of thousands).
    pub fn scan_known_places(&mut self) {
        let pids: Vec<u32> = self
            .pids
            .keys()
            .copied()
            .filter(|p| !self.gone.contains(p))
            .collect();
        for pid in pids {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                self.gone.insert(pid);
            }
            let root = self.roots.get(&pid).cloned();
            let private = self.asking.private_dir.clone();
            for path in jitdump_candidates(pid, root.as_deref(), private.as_deref()) {
                if path.is_file() {
                    self.add(SideKind::JITDUMP, pid, path);
                }
            }
            let map = process_root::host_path(
                root.as_deref(),
                &crate::format::perf_map::path_of(process_root::namespace_pid(pid)),
            );
            if map.exists() {
                self.add(SideKind::PERF_MAP, pid, map);
            }
            // .NET before 8 writes its perf map in $TMPDIR (jprof's, inherited) when set.
            let tmpdir = std::env::temp_dir();
            if root.is_none() && tmpdir != Path::new("/tmp") {
                let map = tmpdir.join(format!("perf-{pid}.map"));
                if map.exists() {
                    self.add(SideKind::PERF_MAP, pid, map);
                }
            }
            if let Some(dir) = &private {
                let map = dir.join(format!("perf-{pid}.map"));
                if map.exists() {
                    self.add(SideKind::PERF_MAP, pid, map);
                }
                let mono_log = super::runtimes::mono_log_path(dir, pid);
                if mono_log.is_file() {
                    self.add(SideKind::MLPD, pid, mono_log);
                }
            }
        }
    }

    /// From now on jitdumps' line and inline tables and method names are set aside instead of
    /// stored with the pieces (`jit_debug`); [`SideFiles::take_jit_debug`] gives them back.
    pub fn defer_jit_debug(&mut self) {
        self.deferred.get_or_insert_with(Default::default);
    }

    /// Everything set aside, once every file was read for the last time.
    pub fn take_jit_debug(&mut self) -> Option<super::jit_debug::Spool> {
        let mut spool = self.deferred.take()?;
        for f in &mut self.files {
            f.split
                .finish(&mut spool, (f.pid, f.path.to_str().unwrap_or_default()));
        }
        Some(spool)
    }

    /// Reads what was appended to every file since the last poll; calls `store` with each
    /// new piece of complete records, and the bytes to keep of it when they are fewer than the
    /// file's (a jitdump's records without their machine code: [`jitdump::without_code`], and
    /// without its deferrable records when they are set aside: then `store`'s flag is true).
    pub fn poll(&mut self, now: u64, mut store: impl FnMut(SidePiece<'_>, Option<&[u8]>, bool)) {
        let owners = self.pids.clone();
        for f in self
            .files
            .iter_mut()
            .filter(|f| f.problem.is_none() && !f.closed)
        {
            let owner = owners.get(&f.pid).copied().flatten();
            // A piece at a time, up to READ_STEP bytes a poll.
            let mut read = 0;
            while read < READ_STEP && f.problem.is_none() && !f.closed {
                let was_open = f.handle.is_some();
                let result = read_new(f, owner);
                // Only files jprof asked a runtime to write (the same the end of the recording
                // removes).
                let runtime = self.runtimes.get(&f.pid).copied();
                let nspid = self.nspids.get(&f.pid).copied().unwrap_or(f.pid);
                if let (false, Some(h), Some(list), Some(runtime)) =
                    (was_open, &f.handle, self.leftovers.as_mut(), runtime)
                {
                    if super::runtimes::asked_for(&self.asking, runtime, nspid, &f.path) {
                        list.add(runtime, &f.path, h.dev, h.ino);
                    }
                }
                // A container's files count as another user's, whoever owns them (its root
                // may be host uid 0).
                let other_user = f
                    .handle
                    .as_ref()
                    .filter(|h| h.in_container() || !crate::foreign_file::trusted_owner(h.uid))
                    .map(|h| h.uid);
                match result {
                    Ok((_, consumed))
                        if consumed > 0
                            && other_user.is_some_and(|uid| {
                                self.others_bytes.get(&uid).copied().unwrap_or(0) + consumed as u64
                                    > OTHER_USERS_SIDE_BYTES
                            }) =>
                    {
                        f.problem = Some(format!(
                            "refused: the side files of uid {} passed {} MiB in this recording; the rest is not read",
                            other_user.unwrap_or_default(),
                            OTHER_USERS_SIDE_BYTES >> 20
                        ));
                        break;
                    }
                    Ok((data, consumed)) if consumed > 0 => {
                        if let Some(uid) = other_user {
                            *self.others_bytes.entry(uid).or_default() += consumed as u64;
                        }
                        let compact = f.jitdump_header.as_ref().map(|h| {
                            // The file header (in the first piece) is kept as it is.
                            let records_from = if f.stored == 0 {
                                h.records_start().min(consumed)
                            } else {
                                0
                            };
                            let mut kept = data[..records_from].to_vec();
                            let records =
                                jitdump::without_code(&data[records_from..consumed], h.endian);
                            match &mut self.deferred {
                                Some(spool) => kept.extend(f.split.split(
                                    &records,
                                    h.endian,
                                    spool,
                                    (f.pid, f.path.to_str().unwrap_or_default()),
                                )),
                                None => kept.extend(records),
                            }
                            kept
                        });
                        let deferred = compact.is_some() && self.deferred.is_some();
                        store(
                            SidePiece {
                                kind: f.kind,
                                pid: f.pid,
                                read_at: now,
                                offset: f.stored,
                                path: f.path.to_str().unwrap_or_default(),
                                data: &data[..consumed],
                            },
                            compact.as_deref(),
                            deferred,
                        );
                        f.stored += consumed as u64;
                        read += data.len();
                        if data.len() < PIECE_STEP {
                            break;
                        }
                    }
                    Ok(_) => break,
                    Err(problem) => {
                        f.problem = Some(problem);
                        break;
                    }
                }
            }
        }
    }

    /// One line per side file for the record summary.
    pub fn notes(&self) -> Vec<String> {
        self.files
            .iter()
            .map(|f| {
                let (what, units) = match f.kind {
                    SideKind::JITDUMP => ("jitdump", "records"),
                    SideKind::MLPD => ("Mono log", "buffers"),
                    _ => ("perf map", "entries"),
                };
                match &f.problem {
                    Some(p) => format!(
                        "{what} {} (pid {}) could not be read: {p}; {} records kept",
                        f.path.display(),
                        f.pid,
                        f.records
                    ),
                    None => format!(
                        "{what} {} (pid {}): {} {units} stored",
                        f.path.display(),
                        f.pid,
                        f.records,
                    ),
                }
            })
            .collect()
    }

    /// The processes with a side file found (read from or not yet).
    pub fn pids_with_files(&self) -> std::collections::BTreeSet<u32> {
        self.files.iter().map(|f| f.pid).collect()
    }

    /// Every jitdump seen, by process.
    pub fn jitdump_paths(&self) -> BTreeMap<u32, Vec<PathBuf>> {
        let mut out: BTreeMap<u32, Vec<PathBuf>> = BTreeMap::new();
        for f in self.files.iter().filter(|f| f.kind == SideKind::JITDUMP) {
            out.entry(f.pid).or_default().push(f.path.clone());
        }
        out
    }

    /// The side files that gave something (jitdumps, Mono logs, perf maps), by process.
    pub fn runtime_files(&self) -> BTreeMap<u32, Vec<SideKind>> {
        let mut out: BTreeMap<u32, Vec<SideKind>> = BTreeMap::new();
        for f in self.files.iter().filter(|f| f.records > 0) {
            out.entry(f.pid).or_default().push(f.kind);
        }
        out
    }

    /// Lists the runtime files this recording will remove (written by `runtime`), so that a
    /// later jprof removes them if this one is killed.
    pub fn list_leftovers(&mut self, list: super::leftovers::Leftovers) {
        self.leftovers = Some(list);
    }

    /// Which runtimes jprof asked, and where they write.
    pub fn set_asking(&mut self, asking: super::runtimes::Asking) {
        self.asking = asking;
    }

    /// Every file read, with the process, its runtime, the pid in its namespace and the
    /// identity of the file read (device, inode).
    pub fn read_files(&self) -> Vec<ReadFile> {
        self.files
            .iter()
            .filter_map(|f| {
                let h = f.handle.as_ref()?;
                Some(ReadFile {
                    pid: f.pid,
                    nspid: self.nspids.get(&f.pid).copied().unwrap_or(f.pid),
                    runtime: self.runtimes.get(&f.pid).copied(),
                    kind: f.kind,
                    path: f.path.clone(),
                    dev: h.dev,
                    ino: h.ino,
                })
            })
            .collect()
    }

    /// The recording removed its runtime files itself: the list is no longer needed.
    pub fn finish_leftovers(&mut self) {
        if let Some(list) = self.leftovers.take() {
            list.finish();
        }
    }

    /// The runtimes seen, by process.
    pub fn runtimes(&self) -> &BTreeMap<u32, &'static str> {
        &self.runtimes
    }

    /// The uid process `pid` ran as when it was first seen.
    pub fn owner_of(&self, pid: u32) -> Option<u32> {
        self.pids.get(&pid).copied().flatten()
    }
}

/// A side file that was read into the recording.
pub struct ReadFile {
    /// The process it belongs to.
    pub pid: u32,
    /// That process's pid in its own namespace.
    pub nspid: u32,
    /// The runtime the process showed itself to be.
    pub runtime: Option<&'static str>,
    /// What it is.
    pub kind: SideKind,
    /// Where it was read.
    pub path: PathBuf,
    /// Its device, as read.
    pub dev: u64,
    /// Its inode, as read.
    pub ino: u64,
}

/// The most one piece of a side file takes, unless one record is longer (then up to
/// [`READ_STEP`]): a JVM's agent writes megabytes at once when it attaches, and each byte read
/// is held two or three times over while its piece is stored (the file's, without the machine
/// code, gathered for compression) beside a zstd context sized to the input; read whole, a
/// 3 MB jitdump raised `record -a`'s start-up high-water mark by about 10 MB (issue 28).
const PIECE_STEP: usize = 1 << 20;

/// Reads the unconsumed tail of a file (at most [`PIECE_STEP`] bytes, or [`READ_STEP`] when no
/// record ends within those) and returns it with the length of its complete part. The file is
/// opened once, as a hostile file: a link, a FIFO, a device or a file of another user is
/// refused (docs/security.md).
fn read_new(f: &mut Tailed, owner: Option<u32>) -> Result<(Vec<u8>, usize), String> {
    if f.handle.is_none() {
        let owner = owner.map_or(Owner::Anyone, Owner::Uid);
        match ForeignFile::open(&f.path, owner) {
            Ok(h) => f.handle = Some(h),
            // Not there yet (a runtime creates its file when it starts): try again next poll.
            Err(e) if e.is_not_found() => return Ok((Vec::new(), 0)),
            Err(e) => return Err(e.to_string()),
        }
    }
    let Some(handle) = &f.handle else {
        return Ok((Vec::new(), 0));
    };
    if f.kind == SideKind::JITDUMP && f.jitdump_header.is_none() {
        // The 40-byte header is checked before anything else of the file is read.
        let head = handle
            .read_at(0, jitdump::HEADER_LEN)
            .map_err(|e| e.to_string())?;
        if head.len() < jitdump::HEADER_LEN {
            return Ok((Vec::new(), 0));
        }
        jitdump::parse_header(&head).map_err(|e| e.to_string())?;
    }
    let data = handle
        .read_at(f.stored, PIECE_STEP)
        .map_err(|e| e.to_string())?;
    if data.is_empty() {
        return Ok((data, 0));
    }
    let header_known = f.jitdump_header.is_some();
    let (mut data, mut consumed) = parse_complete(f, data)?;
    if consumed == 0 && data.len() == PIECE_STEP && f.problem.is_none() {
        // One record longer than a piece: read again, further. Nothing was counted; a
        // jitdump's header, if read just now, is read again with the rest.
        if !header_known {
            f.jitdump_header = None;
        }
        let longer = match &f.handle {
            Some(handle) => handle.read_at(f.stored, READ_STEP),
            None => Ok(Vec::new()),
        }
        .map_err(|e| e.to_string())?;
        (data, consumed) = parse_complete(f, longer)?;
    }
    if consumed == 0 && data.len() == READ_STEP {
        return Err(format!(
            "refused: no complete record in {READ_STEP} bytes at offset {}",
            f.stored
        ));
    }
    Ok((data, consumed))
}

/// The length of the complete records (lines, buffers) at the start of `data`, read at `f.stored`.
fn parse_complete(f: &mut Tailed, data: Vec<u8>) -> Result<(Vec<u8>, usize), String> {
    let base = f.stored as usize;
    let consumed = match f.kind {
        SideKind::JITDUMP => {
            let mut header_len = 0;
            let header = match &f.jitdump_header {
                Some(h) => h.clone(),
                None => {
                    if data.len() < jitdump::HEADER_LEN {
                        return Ok((data, 0));
                    }
                    let h = jitdump::parse_header(&data).map_err(|e| e.to_string())?;
                    header_len = h.records_start().min(data.len());
                    f.jitdump_header = Some(h.clone());
                    h
                }
            };
            let batch =
                jitdump::parse_record_stream(&data[header_len..], base + header_len, header.endian);
            f.records += batch.records.len() as u64;
            f.closed = batch.closed;
            if let Some(e) = batch.error {
                // Keep what was complete before the damage, then stop tailing this file.
                let consumed = batch.resume_at - base;
                f.problem = Some(e.to_string());
                return Ok((data, consumed));
            }
            batch.resume_at - base
        }
        SideKind::MLPD => {
            let units = mlpd::whole_units(&data, base);
            f.records += units.buffers;
            if let Some(e) = units.error {
                // Keep the whole buffers before the damage, then stop tailing this file.
                f.problem = Some(e.to_string());
            }
            units.len
        }
        _ => {
            let batch = perf_map::parse(&data, 0);
            f.records += batch.entries.len() as u64;
            batch.resume_at
        }
    };
    Ok((data, consumed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notes_after_poll(side: &mut SideFiles) -> (Vec<String>, usize) {
        let mut pieces = 0;
        side.poll(1, |_, _, _| pieces += 1);
        (side.notes(), pieces)
    }

    /// A jitdump of megabytes (a JVM's agent writes one at once when it attaches) is read a
    /// piece of at most PIECE_STEP bytes at a time, all in the same poll, a record longer than
    /// a piece whole; the pieces are the file, in order (issue 28: read whole, each byte was
    /// held several times over at once).
    #[test]
    fn a_large_jitdump_is_read_a_piece_at_a_time_in_one_poll() {
        use crate::format::jitdump_write as w;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jit-4245.dump");
        let mut file = w::header(4245, 1, false);
        for i in 0..3000u64 {
            let name = format!("Lcom/example/Widget{i};method{i}");
            let code = vec![0x90; 900];
            file.extend(w::code_load(
                2 + i,
                &w::CodeLoad {
                    pid: 4245,
                    tid: 4245,
                    code_addr: 0x10_0000 + 0x1000 * i,
                    code_index: i,
                    name: &name,
                    code: &code,
                },
            ));
        }
        // One record longer than a piece.
        let long_at = file.len();
        file.extend(w::code_load(
            9000,
            &w::CodeLoad {
                pid: 4245,
                tid: 4245,
                code_addr: 0x9000_0000,
                code_index: 9000,
                name: "long",
                code: &vec![0xcc; PIECE_STEP + 4096],
            },
        ));
        let long_end = file.len();
        for i in 0..1000u64 {
            file.extend(w::jit_tier(
                10_000 + i,
                0x10_0000 + 0x1000 * i,
                crate::format::jitdump::TierKind::OPTIMIZED,
                "c2",
            ));
        }
        assert!(file.len() > 3 * PIECE_STEP, "{} bytes", file.len());
        std::fs::write(&path, &file).unwrap();

        let mut side = SideFiles::default();
        let me = std::fs::metadata(&path).unwrap().uid();
        side.pids.insert(4245, Some(me));
        side.add(SideKind::JITDUMP, 4245, path);
        let mut pieces: Vec<(u64, Vec<u8>)> = Vec::new();
        side.poll(1, |piece, _, _| {
            pieces.push((piece.offset, piece.data.to_vec()))
        });
        assert!(pieces.len() >= 4, "{} pieces", pieces.len());
        let mut at = 0u64;
        for (offset, data) in &pieces {
            assert_eq!(*offset, at);
            let holds_the_long_record =
                (*offset as usize) <= long_at && long_end <= *offset as usize + data.len();
            assert!(
                data.len() <= PIECE_STEP || holds_the_long_record,
                "a piece of {} bytes at {offset}",
                data.len()
            );
            at += data.len() as u64;
        }
        assert_eq!(
            pieces
                .iter()
                .flat_map(|(_, d)| d.iter().copied())
                .collect::<Vec<u8>>(),
            file
        );
        // Read to its end: the next poll has nothing new.
        let mut more = 0;
        side.poll(2, |_, _, _| more += 1);
        assert_eq!(more, 0);
        assert!(
            side.notes()[0].contains("4001 records stored"),
            "{:?}",
            side.notes()
        );
    }

    #[test]
    fn perf_maps_through_symlinks_or_of_other_users_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.map");
        std::fs::write(&real, "1000 10 f\n").unwrap();
        let link = dir.path().join("perf-4242.map");
        std::os::unix::fs::symlink(&real, &link).unwrap();

        let mut side = SideFiles::default();
        side.pids.insert(4242, None);
        side.add(SideKind::PERF_MAP, 4242, link);
        let (notes, pieces) = notes_after_poll(&mut side);
        assert_eq!(pieces, 0);
        assert!(
            notes[0].contains("refused: it is a symbolic link"),
            "{notes:?}"
        );

        // Root's files are accepted for any process: as root, give the file to another user.
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::chown(&real, Some(54321), None).unwrap();
        }
        let mut side = SideFiles::default();
        let me = std::fs::metadata(&real).unwrap().uid();
        side.pids.insert(4243, Some(me + 1));
        side.add(SideKind::PERF_MAP, 4243, real.clone());
        let (notes, pieces) = notes_after_poll(&mut side);
        assert_eq!(pieces, 0);
        assert!(notes[0].contains("refused: owned by uid"), "{notes:?}");

        let mut side = SideFiles::default();
        side.pids.insert(4244, Some(me));
        side.add(SideKind::PERF_MAP, 4244, real);
        let (notes, pieces) = notes_after_poll(&mut side);
        assert_eq!(pieces, 1);
        assert!(notes[0].contains("1 entries stored"), "{notes:?}");
    }
}
