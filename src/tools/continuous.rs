//! `jprof record -a --rotate 60s --push clickhouse://…`: the host recorded in windows, each
//! a recording of its own (`OUTPUT.000001`, …) pushed to the fleet store while the next window
//! records. A pushed window's file is removed; while the store is unreachable the windows wait
//! on disk and are pushed, oldest first, once it answers, at most [`MAX_WAITING`] of them (the
//! oldest is dropped, with a warning, beyond that), so local disk stays bounded.

use std::collections::VecDeque;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::fleet::{Label, PushConfig, Store};
use crate::record::RecordConfig;

/// Windows kept on disk while the store cannot take them.
pub const MAX_WAITING: usize = 10;

/// Where and how often the windows go.
#[derive(Clone, Debug)]
pub struct Continuous {
    /// The length of a window (`--rotate`).
    pub rotate: Duration,
    /// The fleet store (`--push`).
    pub store: Store,
    /// The pushes' labels (`--label`; `host` is added as for `jprof push`).
    pub labels: Vec<Label>,
}

/// Records windows until Ctrl-C, SIGTERM or SIGHUP (or `--duration` in all), pushing each.
pub fn run(config: &RecordConfig, continuous: &Continuous) -> Result<i32> {
    if continuous.rotate < Duration::from_secs(1) {
        return Err(Error::Usage("--rotate must be at least 1s".into()));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| Error::Other(format!("cannot handle signal {signal}: {e}")))?;
    }
    let waiting: Arc<Mutex<VecDeque<Window>>> = Arc::default();
    let (tx, rx) = mpsc::channel::<()>();
    let pusher = {
        let waiting = Arc::clone(&waiting);
        let continuous = continuous.clone();
        std::thread::spawn(move || {
            // One round per finished window, and a last one when the sender is dropped.
            while rx.recv().is_ok() {
                push_waiting(&waiting, &continuous);
            }
            push_waiting(&waiting, &continuous);
        })
    };
    let end = config.duration.map(|d| Instant::now() + d);
    let mut code = 0;
    for window in 1u64.. {
        let left = end.map(|e| e.saturating_duration_since(Instant::now()));
        if stop.load(Ordering::Relaxed) || left.is_some_and(|l| l.is_zero()) {
            break;
        }
        let mut name = config.output.clone().into_os_string();
        name.push(format!(".{window:06}"));
        let window_config = RecordConfig {
            output: PathBuf::from(name),
            duration: Some(left.map_or(continuous.rotate, |l| l.min(continuous.rotate))),
            ..config.clone()
        };
        let recorded = crate::record::run(&window_config);
        {
            let mut waiting = waiting.lock().unwrap_or_else(|p| p.into_inner());
            // The window as written: a name replaced afterwards (another user's link or file in a
            // shared directory) is neither pushed as this window nor removed.
            if let Ok(m) = std::fs::symlink_metadata(&window_config.output) {
                let window = Window {
                    path: window_config.output.clone(),
                    file: Identity::of(&m),
                };
                if m.file_type().is_file() && window.file.uid == nix::unistd::geteuid().as_raw() {
                    waiting.push_back(window);
                }
            }
            while waiting.len() > MAX_WAITING {
                if let Some(oldest) = waiting.pop_front() {
                    eprintln!(
                        "jprof: warning: {} dropped: the store has not taken the last {MAX_WAITING} \
                         windows",
                        oldest.path.display()
                    );
                    oldest.remove();
                }
            }
        }
        let _ = tx.send(());
        match recorded {
            Ok(c) => code = c,
            Err(e) => {
                drop(tx);
                let _ = pusher.join();
                return Err(e);
            }
        }
    }
    drop(tx);
    let _ = pusher.join();
    let left = waiting.lock().unwrap_or_else(|p| p.into_inner()).len();
    if left > 0 {
        eprintln!(
            "jprof: {left} windows not pushed (the store did not answer) are kept: push them with \
             `jprof push --to {} {}.*`",
            continuous.store,
            config.output.display()
        );
    }
    Ok(code)
}

/// Pushes the waiting windows, oldest first; stops at the first failure (kept for next time).
fn push_waiting(waiting: &Mutex<VecDeque<Window>>, continuous: &Continuous) {
    loop {
        let Some(next) = waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .front()
            .cloned()
        else {
            return;
        };
        // In a directory other users can write, the window's name may have been given to
        // another file or link since: that is not this host's window, and not jprof's to remove.
        let Some(file) = next.open() else {
            eprintln!(
                "jprof: warning: {} is no longer the window jprof wrote (another file or link \
                 took its name): neither pushed nor removed",
                next.path.display()
            );
            let mut waiting = waiting.lock().unwrap_or_else(|p| p.into_inner());
            if waiting.front() == Some(&next) {
                waiting.pop_front();
            }
            continue;
        };
        // Pushed from a private copy of the very file: the push opens its input by name, and
        // the shared name could change again while it does.
        let copy = match private_copy(file, &next.path) {
            Ok(copy) => copy,
            Err(e) => {
                eprintln!(
                    "jprof: warning: {} kept for later: cannot copy it to push: {e}",
                    next.path.display()
                );
                return;
            }
        };
        let config = PushConfig {
            store: continuous.store.clone(),
            labels: continuous.labels.clone(),
            files: vec![copy.1.clone()],
            batch_rows: crate::fleet::DEFAULT_BATCH_ROWS,
        };
        let pushed = crate::fleet::push(&config);
        drop(copy);
        match pushed {
            Ok(()) => {
                next.remove();
                let mut waiting = waiting.lock().unwrap_or_else(|p| p.into_inner());
                if waiting.front() == Some(&next) {
                    waiting.pop_front();
                }
            }
            Err(e) => {
                eprintln!(
                    "jprof: warning: {} kept for later: {}",
                    next.path.display(),
                    e.terminal_message()
                );
                return;
            }
        }
    }
}

/// A recorded window waiting to be pushed: its path and the file it was when written.
#[derive(Clone, PartialEq)]
struct Window {
    path: PathBuf,
    file: Identity,
}

/// What tells the file jprof wrote from one put at its name later: device and inode (a new
/// file may get the inode of one just removed, so also) its owner, size and modification time.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    uid: u32,
    size: u64,
    mtime_ns: i128,
}

impl Identity {
    fn of(m: &std::fs::Metadata) -> Self {
        Self {
            dev: m.dev(),
            ino: m.ino(),
            uid: m.uid(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        }
    }
}

/// A copy of `file` under `name`'s file name in a new private directory (0700, removed with
/// the returned guard).
fn private_copy(
    mut file: std::fs::File,
    name: &std::path::Path,
) -> std::io::Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::Builder::new().prefix("jprof-push-").tempdir()?;
    let path = dir
        .path()
        .join(name.file_name().unwrap_or(name.as_os_str()));
    std::io::copy(&mut file, &mut std::fs::File::create_new(&path)?)?;
    Ok((dir, path))
}

impl Window {
    /// The window's file, if its name still is the file jprof wrote (opened without following
    /// a link, never blocking).
    fn open(&self) -> Option<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&self.path)
            .ok()?;
        let m = file.metadata().ok()?;
        (m.is_file() && Identity::of(&m) == self.file).then_some(file)
    }

    /// Removes the window's file, only if that name is still the file jprof wrote.
    fn remove(&self) {
        if self.open().is_some() {
            crate::foreign_file::remove_if_same(&self.path, self.file.dev, self.file.ino);
        }
    }
}
