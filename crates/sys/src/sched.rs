//! Scheduling classes of jprof's own threads: work that may wait for CPU time nothing else
//! wants (SCHED_IDLE), and back.

use std::io;

/// The calling thread's id (its tid).
pub fn thread_id() -> i32 {
    nix::unistd::gettid().as_raw()
}

/// Puts thread `tid` (0: the calling thread) in SCHED_IDLE, where it runs only on a CPU no
/// other thread wants, with `idle`; back in SCHED_OTHER (the normal class) without.
pub fn set_idle(tid: i32, idle: bool) -> io::Result<()> {
    let policy = if idle {
        libc::SCHED_IDLE
    } else {
        libc::SCHED_OTHER
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler only reads `param`, a valid sched_param that outlives the
    // call, and changes nothing but the scheduling of thread `tid`.
    let r = unsafe { libc::sched_setscheduler(tid, policy, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_goes_idle_and_back() {
        std::thread::spawn(|| {
            let tid = thread_id();
            // SAFETY: sched_getscheduler only reads the thread's policy.
            let policy = || unsafe { libc::sched_getscheduler(tid) };
            set_idle(0, true).unwrap();
            assert_eq!(policy(), libc::SCHED_IDLE);
            set_idle(tid, false).unwrap();
            assert_eq!(policy(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }
}
