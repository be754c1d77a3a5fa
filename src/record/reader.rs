//! The ring reader loop: poll the rings, hand batches to the writer, and decide when to stop
//! (the target's tree exited, `--duration`, a signal to jprof). It never touches the disk.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::TrySendError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags};

use super::{attach, events, jvm_starts, tree, writer};
use crate::error::{Error, Result};
use crate::sys::child::{self, ChildExit};
use crate::sys::perf_event::PerfMmap;

/// How long the reader sleeps in poll when no ring reached its watermark.
const POLL_INTERVAL_MS: u16 = 20;
/// The same for a launched target whose exit wakes the reader (a pidfd in the poll set):
/// only signals, `--duration` and the JVM watch are then checked at this pace, and the
/// reader wakes five times less often beside the target.
const POLL_INTERVAL_NOTIFIED_MS: u16 = 100;
/// Once the target exited and nothing else of its tree was seen running: the pace of the
/// passes that make sure the tree is empty, so the recording ends soon after the target.
const SETTLE_INTERVAL_MS: u16 = 5;
/// After `--duration`, how long the target gets to exit after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(5);

/// The process being profiled.
pub(super) enum Profiled {
    /// Launched by jprof: held before exec until released.
    Child(child::SuspendedChild),
    /// Attached to these processes (every thread, or the threads `only`): they are not ours
    /// to signal or wait for.
    Attached {
        pids: Vec<i32>,
        only: Option<Vec<i32>>,
    },
    /// Every process (`-a`).
    System,
}

impl Profiled {
    /// The launched target, or the first attached process.
    pub(super) fn pid(&self) -> Option<i32> {
        match self {
            Profiled::Child(c) => Some(c.pid),
            Profiled::Attached { pids, .. } => pids.first().copied(),
            Profiled::System => None,
        }
    }
}

/// The signals jprof was sent, as flags the loop polls.
pub(super) struct StopFlags {
    interrupt: Arc<AtomicBool>,
    terminate: Arc<AtomicBool>,
    hangup: Arc<AtomicBool>,
    /// Set by the writer thread when it cannot write the recording (a full disk).
    writer_failed: Arc<AtomicBool>,
}

impl StopFlags {
    pub(super) fn install() -> Result<Self> {
        let flags = Self {
            interrupt: Arc::default(),
            terminate: Arc::default(),
            hangup: Arc::default(),
            writer_failed: Arc::default(),
        };
        for (sig, flag) in [
            (libc::SIGINT, &flags.interrupt),
            (libc::SIGTERM, &flags.terminate),
            (libc::SIGHUP, &flags.hangup),
        ] {
            signal_hook::flag::register(sig, Arc::clone(flag))
                .map_err(|e| Error::Other(format!("cannot install the signal handler: {e}")))?;
        }
        Ok(flags)
    }

    /// The flag the writer thread sets when it fails: recording then stops as for
    /// `--duration`, since nothing more can be kept.
    pub(super) fn writer_failed(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.writer_failed)
    }
}

/// How the loop ended.
pub(super) struct Stopped {
    /// The launched target's exit, when it exited.
    pub exit: Option<ChildExit>,
    pub stopped_by: String,
    /// Batches the writer was too far behind to take.
    pub dropped_batches: u64,
    pub dropped_samples: u64,
    /// About the launched target's process tree at the end.
    pub tree_notes: Vec<String>,
    pub jvm_watch: tree::JvmWatch,
    /// `-a`: the JVMs that started while recording.
    pub jvm_starts: Option<jvm_starts::JvmStarts>,
}

/// What one pass decided.
enum Pass {
    Continue,
    Stop(Option<ChildExit>),
}

/// Reads the rings until the recording should stop; `jvm_starts` (`-a`) sees every batch.
pub(super) fn read_until_stopped(
    events: &mut events::Events,
    feed: &writer::Feed,
    profiled: &Profiled,
    stop: &StopFlags,
    duration: Option<Duration>,
    mut jvm_starts: Option<jvm_starts::JvmStarts>,
) -> Stopped {
    let started = Instant::now();
    let mut dropped_batches = 0u64;
    let mut dropped_samples = 0u64;
    let mut stopped_by = String::from("target exited");
    let mut launched = match profiled {
        Profiled::Child(child) => Some(Launched::new(child.pid)),
        _ => None,
    };
    // Readable from the target's exit on: dropped once the exit is seen.
    let mut exit_notifier = match profiled {
        Profiled::Child(child) => child::exit_notifier(child.pid),
        _ => None,
    };
    let mut waited = Waited::new(events.rings.len());
    let exit = loop {
        let interval = match &launched {
            Some(launched) => launched.poll_interval(exit_notifier.is_some()),
            None => POLL_INTERVAL_MS,
        };
        // The deep frames' ring wakes nobody: drained before it fills at the rate it fills.
        let interval = match events.deep_drain_within() {
            Some(within) => interval.min(u16::try_from(within.as_millis()).unwrap_or(u16::MAX)),
            None => interval,
        };
        let timeout = until_duration(interval, started, duration);
        let _ = waited.poll(&events.rings, exit_notifier.as_ref(), timeout);
        let batch = drain_all(events, feed.buffer());
        if let Some(starts) = &mut jvm_starts {
            starts.look(&batch.records);
        }
        if !batch.records.is_empty() {
            if let Err(TrySendError::Full(batch) | TrySendError::Disconnected(batch)) =
                feed.batches.try_send(batch)
            {
                dropped_batches += 1;
                dropped_samples += writer::samples_in(&batch.records);
            }
        }
        let now = Instant::now();
        let pass = match &mut launched {
            Some(launched) => launched.pass(stop, events, now, started, duration, &mut stopped_by),
            None => attached_pass(profiled, stop, now, started, duration, &mut stopped_by),
        };
        if let Pass::Stop(exit) = pass {
            break exit;
        }
        if launched
            .as_ref()
            .is_some_and(|l| l.tree.target_exit.is_some())
        {
            exit_notifier = None;
        }
    };
    let (tree_notes, jvm_watch) = match launched {
        Some(launched) => (launched.notes(), launched.jvm_watch),
        None => (Vec::new(), tree::JvmWatch::default()),
    };
    Stopped {
        exit,
        stopped_by,
        dropped_batches,
        dropped_samples,
        tree_notes,
        jvm_watch,
        jvm_starts,
    }
}

/// The rings the reader sleeps on. A ring whose events have all ended (the task it was opened
/// on and every task that inherited it exited: a launched target's whole tree, before jprof
/// reaps it) reports POLLHUP from then on, so a poll on it returns at once: the reader would
/// spin until the exit is reaped (tens of milliseconds of a CPU while the target's exit tears
/// its memory down beside it). Such a ring is left out of the poll; every pass still drains it
/// (`drain_all`), as an attached process's other threads may write into it.
struct Waited {
    hung_up: Vec<bool>,
}

impl Waited {
    fn new(rings: usize) -> Self {
        Self {
            hung_up: vec![false; rings],
        }
    }

    /// Sleeps until a ring reaches its watermark, `notifier` is readable or `timeout_ms` passed;
    /// how many of them woke it.
    fn poll(&mut self, rings: &[PerfMmap], notifier: Option<&OwnedFd>, timeout_ms: u16) -> usize {
        let waited: Vec<usize> = (0..rings.len()).filter(|&i| !self.hung_up[i]).collect();
        let mut fds: Vec<PollFd> = waited
            .iter()
            .map(|&i| PollFd::new(rings[i].fd().as_fd(), PollFlags::POLLIN))
            .chain(notifier.map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN)))
            .collect();
        let Ok(ready) = poll(&mut fds, timeout_ms) else {
            return 0;
        };
        let ended = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
        for (&i, fd) in waited.iter().zip(&fds) {
            if fd.revents().is_some_and(|r| r.intersects(ended)) {
                self.hung_up[i] = true;
            }
        }
        usize::try_from(ready).unwrap_or(0)
    }
}

/// A launched target's process tree, followed until it exits.
struct Launched {
    tree: tree::Tree,
    jvm_watch: tree::JvmWatch,
    /// When the target exited while other processes of its tree kept running.
    following_since: Option<Instant>,
    term_sent_at: Option<Instant>,
}

impl Launched {
    fn new(pid: i32) -> Self {
        Self {
            tree: tree::Tree::new(pid),
            jvm_watch: tree::JvmWatch::default(),
            following_since: None,
            term_sent_at: None,
        }
    }

    /// Signals to jprof go to the target's processes; `--duration` sends SIGTERM, then
    /// SIGKILL after a grace period; the loop stops when the whole tree has exited.
    fn pass(
        &mut self,
        stop: &StopFlags,
        events: &events::Events,
        now: Instant,
        started: Instant,
        duration: Option<Duration>,
        stopped_by: &mut String,
    ) -> Pass {
        let tree = &mut self.tree;
        for (flag, sig, why) in [
            (
                &stop.interrupt,
                libc::SIGINT,
                "Ctrl-C (SIGINT sent to the target's processes)",
            ),
            (
                &stop.terminate,
                libc::SIGTERM,
                "SIGTERM (sent to the target's processes)",
            ),
            (
                &stop.hangup,
                libc::SIGHUP,
                "SIGHUP (the terminal closed; sent to the target's processes)",
            ),
        ] {
            if flag.swap(false, Ordering::SeqCst) {
                match tree.stop_signal(sig, now) {
                    None => *stopped_by = why.into(),
                    Some(more) => *stopped_by = format!("{stopped_by}; {more}"),
                }
            }
        }
        tree.escalate(now);
        self.jvm_watch.poll(tree, now);
        if let Err(e) = tree.reap() {
            // Stop recording, but finish the file like any other stop.
            *stopped_by = format!("waiting for the target failed ({e})");
            return Pass::Stop(None);
        }
        if tree.target_exit.is_some() {
            if tree.settled() {
                return Pass::Stop(tree.target_exit);
            }
            if tree.others_were_running() {
                self.following_since.get_or_insert(now);
            }
        }
        if stop.writer_failed.load(Ordering::SeqCst) && self.term_sent_at.is_none() {
            *stopped_by =
                "the recording could not be written (SIGTERM sent to the target's processes)"
                    .into();
            events::disable_all(events);
            tree.signal_all(libc::SIGTERM);
            self.term_sent_at = Some(now);
        }
        if let Some(duration) = duration.filter(|&d| now >= started + d) {
            if self.term_sent_at.is_none() {
                *stopped_by = format!(
                    "--duration {:.1}s reached (SIGTERM sent to the target's processes)",
                    duration.as_secs_f64()
                );
                events::disable_all(events);
                tree.signal_all(libc::SIGTERM);
                self.term_sent_at = Some(now);
            }
        }
        if self
            .term_sent_at
            .is_some_and(|t| now.duration_since(t) > TERM_GRACE)
        {
            tree.signal_all(libc::SIGKILL);
        }
        Pass::Continue
    }

    /// How long the next poll may sleep (`notified`: the target's exit wakes it).
    fn poll_interval(&self, notified: bool) -> u16 {
        if self.tree.target_exit.is_some() && self.following_since.is_none() {
            SETTLE_INTERVAL_MS
        } else if notified {
            POLL_INTERVAL_NOTIFIED_MS
        } else {
            POLL_INTERVAL_MS
        }
    }

    fn notes(&self) -> Vec<String> {
        let tree = &self.tree;
        let mut notes = Vec::new();
        let pids = |p: Vec<i32>| p.iter().map(i32::to_string).collect::<Vec<_>>().join(", ");
        let running = tree.followed();
        if !running.is_empty() {
            notes.push(format!(
                "processes of the target's tree still running when recording stopped: {}",
                pids(running)
            ));
        }
        if let (Some(since), true) = (self.following_since, tree.finished()) {
            notes.push(format!(
                "the target exited first; recording followed the rest of its process tree for {:.2} s until it exited",
                since.elapsed().as_secs_f64()
            ));
        }
        let detached = tree.detached();
        if !detached.is_empty() {
            notes.push(format!(
                "processes that left the session (daemons) were not followed: {}",
                pids(detached)
            ));
        }
        notes
    }
}

/// `interval`, cut short so that the first pass after `--duration` ends comes on time.
fn until_duration(interval: u16, started: Instant, duration: Option<Duration>) -> u16 {
    let left = duration.map(|d| (started + d).saturating_duration_since(Instant::now()));
    match left {
        // Reached: that pass has come (the loop now waits for the target to exit).
        Some(left) if !left.is_zero() => {
            interval.min(u16::try_from(left.as_millis() + 1).unwrap_or(u16::MAX))
        }
        _ => interval,
    }
}

/// Attached processes are not ours: signals stop the recording, not them. The recording
/// stops by itself when every attached process (or `--tid` thread) has exited; `-a` only on a
/// signal or `--duration`.
fn attached_pass(
    profiled: &Profiled,
    stop: &StopFlags,
    now: Instant,
    started: Instant,
    duration: Option<Duration>,
    stopped_by: &mut String,
) -> Pass {
    let keeps = match profiled {
        Profiled::System => "the processes keep running",
        Profiled::Attached { pids, .. } if pids.len() > 1 => "the targets keep running",
        _ => "the target keeps running",
    };
    if stop.interrupt.swap(false, Ordering::SeqCst) {
        *stopped_by = format!("Ctrl-C ({keeps})");
        return Pass::Stop(None);
    }
    if stop.terminate.swap(false, Ordering::SeqCst) {
        *stopped_by = format!("SIGTERM ({keeps})");
        return Pass::Stop(None);
    }
    if stop.hangup.swap(false, Ordering::SeqCst) {
        *stopped_by = format!("SIGHUP (the terminal closed; {keeps})");
        return Pass::Stop(None);
    }
    if let Some(duration) = duration.filter(|&d| now >= started + d) {
        *stopped_by = format!(
            "--duration {:.1}s reached ({keeps})",
            duration.as_secs_f64()
        );
        return Pass::Stop(None);
    }
    if stop.writer_failed.load(Ordering::SeqCst) {
        *stopped_by = format!("the recording could not be written ({keeps})");
        return Pass::Stop(None);
    }
    let gone = match profiled {
        Profiled::Attached {
            only: Some(tids), ..
        } => !tids.iter().any(|&t| attach::alive(t)),
        Profiled::Attached { pids, .. } => !pids.iter().any(|&p| attach::alive(p)),
        _ => false,
    };
    if gone {
        *stopped_by = match profiled {
            Profiled::Attached { only: Some(_), .. } => "the threads exited".into(),
            Profiled::Attached { pids, .. } if pids.len() > 1 => "the targets exited".into(),
            _ => "the target exited".into(),
        };
        return Pass::Stop(None);
    }
    Pass::Continue
}

/// How far before a pass's start a record may still be in flight (written by another CPU).
const IN_FLIGHT_NS: u64 = 1_000_000;

/// One pass of the ring reader: every ring drained into `records` (empty), after the time the
/// batch says.
pub(super) fn drain_all(events: &mut events::Events, mut records: Vec<u8>) -> writer::Batch {
    let started = crate::sys::clock::clock_ns(crate::sys::clock::CLOCK_MONOTONIC);
    for ring in &mut events.rings {
        ring.drain_into(&mut records);
    }
    // After the rings: the program sends a sample's frames before the kernel writes the
    // sample, so every sample read here has its frames in this batch or an earlier one.
    let mut deep = Vec::new();
    // A JVM the launch (or, with -a, anyone) started: its next samples get their frames read.
    let jvms = events.watch_jvms(&events.config.layout(), &records);
    if let Some(d) = &mut events.deep {
        d.drain(&mut deep);
    }
    writer::Batch {
        records,
        deep,
        jvms,
        complete_before: started.map(|t| t.saturating_sub(IN_FLIGHT_NS)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The launched target's exit wakes the reader's poll at once, not at its next timeout.
    #[test]
    fn the_targets_exit_wakes_the_poll() {
        let mut target = std::process::Command::new("sh")
            .args(["-c", "read line"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let Some(notifier) = child::exit_notifier(target.id() as i32) else {
            drop(target.stdin.take());
            target.wait().unwrap();
            eprintln!("skipped: this kernel has no pidfd_open (Linux < 5.3)");
            return;
        };
        let mut fds = [PollFd::new(notifier.as_fd(), PollFlags::POLLIN)];
        assert_eq!(
            poll(&mut fds, 0u16).unwrap(),
            0,
            "readable while the target runs"
        );
        // The target exits when its stdin closes.
        drop(target.stdin.take());
        let waited = Instant::now();
        assert_eq!(poll(&mut fds, 10_000u16).unwrap(), 1);
        assert!(waited.elapsed() < Duration::from_secs(10));
        assert!(
            target.try_wait().unwrap().is_some(),
            "woken before the exit"
        );
    }

    /// A ring whose task exited (not yet reaped) reports POLLHUP at every poll: the reader
    /// leaves it out of its poll from then on and sleeps instead of spinning.
    #[test]
    fn a_ring_whose_task_exited_is_not_waited_on() {
        let mut target = std::process::Command::new("sh")
            .args(["-c", "read line"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut attr = crate::sys::perf_event::new_attr();
        attr.type_ = crate::sys::perf_event::abi::PERF_TYPE_SOFTWARE;
        attr.config = crate::sys::perf_event::abi::PERF_COUNT_SW_CPU_CLOCK as u64;
        attr.sample_period = 1_000_000;
        let event = match crate::sys::perf_event::open(&mut attr, target.id() as i32, -1) {
            Ok(fd) => fd,
            Err(e) => {
                drop(target.stdin.take());
                target.wait().unwrap();
                eprintln!("skipped: the kernel refuses perf events to this user: {e}");
                return;
            }
        };
        let rings = vec![PerfMmap::new(event, 1).unwrap()];
        let Some(exited) = child::exit_notifier(target.id() as i32) else {
            drop(target.stdin.take());
            target.wait().unwrap();
            eprintln!("skipped: this kernel has no pidfd_open (Linux < 5.3)");
            return;
        };
        let mut waited = Waited::new(rings.len());
        assert_eq!(waited.poll(&rings, None, 0), 0, "quiet while the task runs");
        // The target exits when its stdin closes; it stays a zombie (not reaped) meanwhile.
        drop(target.stdin.take());
        let mut fds = [PollFd::new(exited.as_fd(), PollFlags::POLLIN)];
        assert_eq!(poll(&mut fds, 10_000u16).unwrap(), 1);
        let mut raw = [PollFd::new(rings[0].fd().as_fd(), PollFlags::POLLIN)];
        assert_eq!(poll(&mut raw, 10_000u16).unwrap(), 1);
        assert!(
            raw[0].revents().unwrap().contains(PollFlags::POLLHUP),
            "the kernel hangs the ring up: a poll on it returns at once"
        );
        assert_eq!(
            waited.poll(&rings, None, 10_000),
            1,
            "the hang-up is seen once"
        );
        let slept = Instant::now();
        assert_eq!(waited.poll(&rings, None, 30), 0, "then the poll times out");
        assert!(slept.elapsed() >= Duration::from_millis(30));
        target.wait().unwrap();
    }

    #[test]
    fn the_pass_after_the_duration_comes_on_time() {
        let started = Instant::now();
        // Far from the end: the whole interval.
        assert_eq!(
            until_duration(100, started, Some(Duration::from_secs(60))),
            100
        );
        assert_eq!(until_duration(100, started, None), 100);
        // Close to it: no later than the end (and a millisecond).
        let short = until_duration(100, started, Some(Duration::from_millis(30)));
        assert!((1..=31).contains(&short), "{short}");
        // Reached: the loop waits for the target at the usual pace, it does not spin.
        let past = Instant::now() - Duration::from_secs(2);
        assert_eq!(until_duration(100, past, Some(Duration::from_secs(1))), 100);
    }
}
