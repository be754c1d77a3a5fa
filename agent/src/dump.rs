//! The jitdump file: created with its header and the executable marker mapping jprof's
//! recorder discovers, then appended to by every event. Compiler threads build their records
//! outside the lock and only copy them into a `BufWriter` under it; the buffer is flushed every
//! [`FLUSH_RECORDS`] writes, when a write comes [`FLUSH_AFTER`] after the last flush, by a small
//! background thread [`FLUSH_AFTER`] after writes stop (it sleeps until there is something to
//! flush: an idle JVM is not woken), and at VM death — never fsync'd, so no thread waits on
//! the disk for long. Timestamps are stamped under the lock, so file order is time order, but
//! for the method names of prepared classes: named later on the agent's own thread, they carry
//! the time their class was prepared ([`Dump::write_at`]).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use jprof_format::jitdump_write;

use crate::clock::Clock;
use crate::ffi;

const FLUSH_RECORDS: usize = 64;
const FLUSH_AFTER: Duration = Duration::from_millis(50);

struct State {
    out: Option<BufWriter<File>>,
    unflushed: usize,
    last_flush: Instant,
    /// The flusher waits for a write (see [`Dump::start_flusher`]).
    flusher_waits: bool,
    /// Live compiled code by start address: (owner method, code index), to match unloads.
    live: HashMap<u64, (usize, u64)>,
}

pub struct Dump {
    clock: Clock,
    state: Mutex<State>,
    /// Signalled when a write leaves something unflushed while the flusher waits, and at close.
    written: Condvar,
    next_index: AtomicU64,
}

/// Creates the jitdump as a new file, mode 0600, never through a link (the agent runs inside
/// the target, as its user; a link planted in `/tmp` must not redirect its writes). A regular
/// file of this user left by an earlier session with the same pid is replaced; anything else
/// already there is refused.
fn create_private(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let create = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
    };
    match create() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let m = std::fs::symlink_metadata(path)?;
            if m.file_type().is_file() && m.uid() == nix::unistd::geteuid().as_raw() {
                std::fs::remove_file(path)?;
                create()
            } else {
                Err(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "already exists and is not this user's regular file: not used",
                ))
            }
        }
        other => other,
    }
}

/// Sets the timestamp of every record in `records` (a run of complete jitdump records).
fn restamp(records: &mut [u8], timestamp: u64) {
    let mut at = 0;
    while records.len() - at >= 16 {
        let size = records[at + 4..at + 8]
            .try_into()
            .map(u32::from_le_bytes)
            .unwrap_or(0) as usize;
        records[at + 8..at + 16].copy_from_slice(&timestamp.to_le_bytes());
        if size < 16 {
            break;
        }
        at += size;
    }
}

impl Dump {
    /// Creates `jit-<pid>.dump` in the first of `dirs` where the file and its marker mapping
    /// can be made (a `noexec` mount refuses the mapping).
    pub fn create(dirs: &[PathBuf], pid: u32, clock: Clock) -> Result<Arc<Dump>, String> {
        let mut errors = Vec::new();
        for dir in dirs {
            let path = dir.join(format!("jit-{pid}.dump"));
            match Self::open(&path, pid, clock) {
                Ok(file) => return Ok(Self::started(file, clock)),
                Err(e) => errors.push(format!("{}: {e}", path.display())),
            }
        }
        // Every directory had a `jit-<pid>.dump` that is not ours (planted by another user, a
        // link): write into a new private directory instead; jprof finds the file through its
        // marker mapping.
        let private = std::env::temp_dir().join(format!(
            "jprof-jit-{pid}-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        match std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&private)
        {
            Ok(()) => {
                let path = private.join(format!("jit-{pid}.dump"));
                match Self::open(&path, pid, clock) {
                    Ok(file) => return Ok(Self::started(file, clock)),
                    Err(e) => errors.push(format!("{}: {e}", path.display())),
                }
            }
            Err(e) => errors.push(format!("{}: {e}", private.display())),
        }
        Err(errors.join("; "))
    }

    fn started(file: File, clock: Clock) -> Arc<Dump> {
        let dump = Arc::new(Dump {
            clock,
            state: Mutex::new(State {
                out: Some(BufWriter::with_capacity(256 * 1024, file)),
                unflushed: 0,
                last_flush: Instant::now(),
                flusher_waits: false,
                live: HashMap::new(),
            }),
            written: Condvar::new(),
            next_index: AtomicU64::new(1),
        });
        Self::start_flusher(&dump);
        dump
    }

    fn open(path: &Path, pid: u32, clock: Clock) -> std::io::Result<File> {
        let mut file = create_private(path)?;
        file.write_all(&jitdump_write::header(pid, clock.now(), clock.is_tsc()))?;
        if let Err(e) = ffi::map_marker(&file) {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Ok(file)
    }

    /// Flushes writes that would otherwise wait for the next event: it waits until a write
    /// leaves something unflushed, gives later writes [`FLUSH_AFTER`] to join it, and flushes
    /// what is still unflushed then. It never wakes while nothing is written (a long-running
    /// JVM the agent stays in after an attach), and ends at [`Dump::close`].
    fn start_flusher(dump: &Arc<Dump>) {
        let dump = dump.clone();
        let _ = std::thread::Builder::new()
            .name("jprof-jitdump".into())
            .spawn(move || loop {
                {
                    let mut state = dump.lock();
                    while state.out.is_some() && state.unflushed == 0 {
                        state.flusher_waits = true;
                        state = dump.written.wait(state).unwrap_or_else(|e| e.into_inner());
                        state.flusher_waits = false;
                    }
                    if state.out.is_none() {
                        break;
                    }
                }
                std::thread::sleep(FLUSH_AFTER);
                let mut state = dump.lock();
                if state.out.is_none() {
                    break;
                }
                if state.unflushed > 0 {
                    Self::flush_locked(&mut state);
                }
            });
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves the state usable: records are whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn flush_locked(state: &mut State) {
        if let Some(out) = &mut state.out {
            if out.flush().is_err() {
                // Disk full or similar: stop writing rather than leave a torn stream behind.
                state.out = None;
            }
        }
        state.unflushed = 0;
        state.last_flush = Instant::now();
    }

    fn append(&self, state: &mut State, records: &mut [u8]) {
        restamp(records, self.clock.now());
        self.append_stamped(state, records);
    }

    /// Appends records whose timestamps are set already.
    fn append_stamped(&self, state: &mut State, records: &[u8]) {
        let Some(out) = &mut state.out else { return };
        if out.write_all(records).is_err() {
            state.out = None;
            return;
        }
        state.unflushed += 1;
        if state.unflushed >= FLUSH_RECORDS || state.last_flush.elapsed() >= FLUSH_AFTER {
            Self::flush_locked(state);
        } else if state.flusher_waits {
            state.flusher_waits = false;
            self.written.notify_one();
        }
    }

    /// Writes the records of one code load with code index `index`. `owner` identifies the
    /// method for a later unload.
    pub fn write_load(&self, code_addr: u64, owner: usize, index: u64, records: &mut [u8]) {
        let mut state = self.lock();
        state.live.insert(code_addr, (owner, index));
        self.append(&mut state, records);
    }

    /// Writes an unload record if `owner`'s code still starts at `code_addr`: HotSpot posts
    /// unloads late, and the address may already hold newer code, which must stay.
    pub fn write_unload(&self, code_addr: u64, owner: usize, build: impl FnOnce(u64) -> Vec<u8>) {
        let mut state = self.lock();
        match state.live.get(&code_addr) {
            Some(&(o, index)) if o == owner => {
                state.live.remove(&code_addr);
                self.append(&mut state, &mut build(index));
            }
            _ => {}
        }
    }

    /// Writes records not tied to compiled code (generated stubs).
    pub fn write(&self, mut records: Vec<u8>) {
        let mut state = self.lock();
        self.append(&mut state, &mut records);
    }

    /// Writes records stamped `timestamp` (a time taken earlier with [`Dump::now`]).
    pub fn write_at(&self, mut records: Vec<u8>, timestamp: u64) {
        restamp(&mut records, timestamp);
        self.append_stamped(&mut self.lock(), &records);
    }

    /// The time now, as records are stamped.
    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// A fresh CODE_LOAD index (perf names its ELF files by it), from 1.
    pub fn next_index(&self) -> u64 {
        self.next_index.fetch_add(1, Ordering::Relaxed)
    }

    pub fn flush(&self) {
        Self::flush_locked(&mut self.lock());
    }

    /// Flushes and stops writing (VM death / unload); later events are dropped.
    pub fn close(&self) {
        let mut state = self.lock();
        Self::flush_locked(&mut state);
        state.out = None;
        self.written.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jprof_format::jitdump::{self, RecordBody};

    /// The tests here look for their Dump's flusher thread by name: one at a time.
    static ONE_DUMP: Mutex<()> = Mutex::new(());

    /// Threads of this process named `jprof-jitdump`, with their voluntary context switches.
    fn flushers() -> HashMap<u32, u64> {
        let mut found = HashMap::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.trim_end() != "jprof-jitdump" {
                continue;
            }
            let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
            let switches = status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            let tid = task.file_name().to_string_lossy().parse().unwrap();
            found.insert(tid, switches);
        }
        found
    }

    #[test]
    fn the_flusher_flushes_a_lone_write_and_sleeps_while_nothing_is_written() {
        let _one = ONE_DUMP.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("jprof-agent-flush-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let before = flushers();
        let dump = Dump::create(std::slice::from_ref(&dir), 4343, Clock::detect()).unwrap();
        // A new thread names itself once it runs.
        let deadline = Instant::now() + Duration::from_secs(5);
        let tid = loop {
            if let Some(&tid) = flushers().keys().find(|tid| !before.contains_key(tid)) {
                break tid;
            }
            assert!(Instant::now() < deadline, "no flusher thread");
            std::thread::sleep(Duration::from_millis(1));
        };
        let file = dir.join("jit-4343.dump");
        let header_len = std::fs::metadata(&file).unwrap().len();
        // One write, nothing after it: the flusher writes it out FLUSH_AFTER later.
        dump.write(jitdump_write::close(0));
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::metadata(&file).unwrap().len() == header_len {
            assert!(Instant::now() < deadline, "a lone write was never flushed");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Then it waits for the next write: a window of 10 flush periods passes without it
        // waking once (it used to wake every period). Up to 5 windows, so a busy machine that
        // delays its getting back to the wait does not fail the test.
        let quiet_window = (0..5).any(|_| {
            let from = flushers()[&tid];
            std::thread::sleep(FLUSH_AFTER * 10);
            flushers()[&tid] == from
        });
        assert!(quiet_window, "the flusher woke with nothing to flush");
        // close() ends it.
        dump.close();
        let deadline = Instant::now() + Duration::from_secs(5);
        while flushers().contains_key(&tid) {
            assert!(Instant::now() < deadline, "the flusher outlived close()");
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn records_reach_the_file_with_increasing_timestamps() {
        let _one = ONE_DUMP.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("jprof-agent-dump-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let clock = Clock::detect();
        let dump = Dump::create(std::slice::from_ref(&dir), 4242, clock).unwrap();
        for i in 0..3u64 {
            let index = dump.next_index();
            let load = jitdump_write::CodeLoad {
                pid: 4242,
                tid: 1,
                code_addr: 0x1000 * (i + 1),
                code_index: index,
                name: "demo.A.f",
                code: &[0x90; 5],
            };
            let mut records = jitdump_write::code_load(0, &load);
            dump.write_load(0x1000 * (i + 1), i as usize, index, &mut records);
        }
        // Only the matching owner unloads.
        dump.write_unload(0x1000, 7, |_| jitdump_write::close(0));
        dump.close();
        let bytes = std::fs::read(dir.join("jit-4242.dump")).unwrap();
        let header = jitdump::parse_header(&bytes).unwrap();
        assert_eq!(header.pid, 4242);
        assert_eq!(header.arch_timestamp(), clock.is_tsc());
        let batch = jitdump::parse_records(&bytes, &header, 0);
        assert!(batch.error.is_none());
        assert_eq!(batch.records.len(), 3);
        let stamps: Vec<u64> = batch.records.iter().map(|r| r.timestamp).collect();
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]) && stamps[0] > 0);
        assert!(matches!(
            batch.records[2].body,
            RecordBody::CodeLoad { code_index: 3, .. }
        ));
        let _ = std::fs::remove_dir_all(dir);
    }
}
