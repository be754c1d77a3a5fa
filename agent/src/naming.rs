//! The queue of prepared classes whose methods the agent's own thread names
//! (JPROF_METHOD_NAMES), so the thread that loads a class (javac's main thread, on its critical
//! path) only takes a weak reference to it and the time. Each batch keeps the time its classes
//! were prepared, which its names are stamped with: a report names an interpreted frame by a
//! name given at or before the sample's time, as when the names were written in the callback.
//!
//! The naming thread is woken only when it has found nothing to do for [`GATHER`], and then
//! gathers for that long before taking what is queued, so a burst of class loading wakes it
//! once rather than once per class. At VM death what is left is named by the dying thread, and the naming
//! thread's batch in hand is waited for (at most [`FINISH_WAIT`]), so no name is lost at exit.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::ffi::WeakClass;

/// How long the naming thread, once woken, lets classes gather before naming them. Each
/// wake-up costs that thread ~13 µs of CPU and, on a busy machine, preempts a JVM thread: over
/// javac, 5 ms gave ~280 wake-ups and 50 ms ~50, for 3.5 ms less of its CPU
/// (docs/performance.md). Names carry their class's preparation time, so the wait changes
/// no report; VM death ends it at once.
const GATHER: Duration = Duration::from_millis(50);

/// How long VM death waits for the batch the naming thread is naming.
const FINISH_WAIT: Duration = Duration::from_secs(2);

/// Classes prepared at one time (one ClassPrepare, or those loaded before VM init).
pub struct Batch {
    pub classes: Vec<WeakClass>,
    /// The agent's clock when they were prepared: their names' timestamp.
    pub prepared_at: u64,
}

/// Where the naming thread stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worker {
    /// Not started yet (the VM's start phase, before VM init).
    NotStarted,
    Running,
    /// It could not attach to the VM: classes are named by the thread that prepares them.
    Failed,
    /// Closed, it detached from the VM.
    Detached,
}

struct State {
    batches: Vec<Batch>,
    /// Batches the naming thread took and has not finished.
    in_hand: usize,
    /// The naming thread waits for work (a push wakes it).
    waiting: bool,
    closed: bool,
    worker: Worker,
}

pub struct Queue {
    state: Mutex<State>,
    /// Wakes the naming thread.
    wake: Condvar,
    /// Tells VM death the naming thread finished a batch.
    finished: Condvar,
}

impl Default for Queue {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                batches: Vec::new(),
                in_hand: 0,
                waiting: false,
                closed: false,
                worker: Worker::NotStarted,
            }),
            wake: Condvar::new(),
            finished: Condvar::new(),
        }
    }
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `batch` for the naming thread, or hands it back, with anything still queued, to
    /// be named by the caller: when that thread failed or the queue is closed.
    pub fn push(&self, batch: Batch) -> Vec<Batch> {
        let mut state = self.lock();
        if state.closed || state.worker == Worker::Failed {
            let mut now = std::mem::take(&mut state.batches);
            now.push(batch);
            return now;
        }
        state.batches.push(batch);
        if state.waiting {
            self.wake.notify_one();
        }
        Vec::new()
    }

    /// Says where the naming thread stands.
    pub fn set_worker(&self, worker: Worker) {
        self.lock().worker = worker;
        self.finished.notify_all();
    }

    /// For the naming thread: every batch queued, once there is one; `None` once the queue is
    /// closed. Each call but the first ends the batch in hand. After a batch it looks again
    /// [`GATHER`] later without asking to be woken, and only then waits to be woken (and
    /// gathers after that): class loading comes in bursts, and waking this thread costs the
    /// loading thread a system call and often its CPU, where a timer costs it nothing.
    pub fn next(&self, finished_one: bool) -> Option<Vec<Batch>> {
        let mut state = self.lock();
        if finished_one {
            state.in_hand -= 1;
            self.finished.notify_all();
            if state.batches.is_empty() && !state.closed {
                state = self.gather(state);
            }
        }
        while state.batches.is_empty() && !state.closed {
            state.waiting = true;
            state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner());
            state.waiting = false;
            if !state.closed {
                state = self.gather(state);
            }
        }
        if state.closed {
            return None;
        }
        state.in_hand += 1;
        Some(std::mem::take(&mut state.batches))
    }

    /// Lets [`GATHER`] pass (or the queue close), unlocked meanwhile.
    fn gather<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.wake
            .wait_timeout(state, GATHER)
            .unwrap_or_else(|e| e.into_inner())
            .0
    }

    /// Closes the queue: later pushes are handed back. What was queued is returned, for the
    /// caller to name.
    pub fn close(&self) -> Vec<Batch> {
        let mut state = self.lock();
        state.closed = true;
        self.wake.notify_all();
        std::mem::take(&mut state.batches)
    }

    /// Waits until the naming thread has finished its batch in hand and detached from the VM,
    /// at most [`FINISH_WAIT`] (the VM's exit must never hang on the agent). Detached, it no
    /// longer delays the exit: HotSpot's last safepoint waits up to 300 ms for every Java
    /// thread in native code, which an idle attached thread is.
    pub fn wait_idle(&self) {
        let deadline = Instant::now() + FINISH_WAIT;
        let mut state = self.lock();
        while state.in_hand > 0 || state.worker == Worker::Running {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            state = self
                .finished
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn batch(at: u64) -> Batch {
        Batch {
            classes: Vec::new(),
            prepared_at: at,
        }
    }

    fn times(batches: &[Batch]) -> Vec<u64> {
        batches.iter().map(|b| b.prepared_at).collect()
    }

    /// What is queued before the naming thread starts waits for it, in order, with its times.
    #[test]
    fn batches_wait_for_the_thread_in_order() {
        let queue = Queue::default();
        for at in [5, 7, 9] {
            assert!(queue.push(batch(at)).is_empty());
        }
        queue.set_worker(Worker::Running);
        assert_eq!(times(&queue.next(false).unwrap()), [5, 7, 9]);
        assert!(queue.push(batch(11)).is_empty());
        assert_eq!(times(&queue.next(true).unwrap()), [11]);
    }

    /// A thread that could not attach leaves the naming to whoever prepares the next class,
    /// with what was queued before.
    #[test]
    fn a_failed_thread_hands_everything_back() {
        let queue = Queue::default();
        assert!(queue.push(batch(1)).is_empty());
        queue.set_worker(Worker::Failed);
        assert_eq!(times(&queue.push(batch(2))), [1, 2]);
        assert_eq!(times(&queue.push(batch(3))), [3]);
    }

    /// Closing hands back what is queued and every later batch, and ends the thread's loop.
    #[test]
    fn closing_hands_back_the_rest() {
        let queue = Queue::default();
        queue.set_worker(Worker::Running);
        assert!(queue.push(batch(1)).is_empty());
        assert_eq!(times(&queue.close()), [1]);
        assert_eq!(times(&queue.push(batch(2))), [2]);
        assert!(queue.next(false).is_none());
        queue.set_worker(Worker::Detached);
        queue.wait_idle();
    }

    /// A batch pushed while the thread waits wakes it.
    #[test]
    fn a_push_wakes_the_waiting_thread() {
        let queue = Arc::new(Queue::default());
        queue.set_worker(Worker::Running);
        let thread = {
            let queue = queue.clone();
            std::thread::spawn(move || queue.next(false).map(|b| times(&b)))
        };
        assert!(queue.push(batch(4)).is_empty());
        assert_eq!(thread.join().unwrap(), Some(vec![4]));
    }

    /// VM death waits for the batch the thread is naming.
    #[test]
    fn vm_death_waits_for_the_batch_in_hand() {
        let queue = Arc::new(Queue::default());
        queue.set_worker(Worker::Running);
        assert!(queue.push(batch(1)).is_empty());
        assert_eq!(times(&queue.next(false).unwrap()), [1]);
        let named = Arc::new(AtomicBool::new(false));
        let thread = {
            let (queue, named) = (queue.clone(), named.clone());
            std::thread::spawn(move || {
                named.store(true, Ordering::SeqCst);
                let closed = queue.next(true).is_none();
                queue.set_worker(Worker::Detached);
                closed
            })
        };
        assert!(queue.close().is_empty());
        queue.wait_idle();
        assert!(
            named.load(Ordering::SeqCst),
            "returned before the batch was named"
        );
        assert!(thread.join().unwrap());
    }
}
