//! Launching the target suspended: fork, let the parent open perf events on the child's pid,
//! then release it to exec. An exec failure comes back through a close-on-exec pipe as an errno.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{pipe2, Pid};

/// A forked child that waits for [`SuspendedChild::release`] before it execs. Dropped before
/// it was released (set-up failed), it is killed and reaped: it never runs.
pub struct SuspendedChild {
    /// Process id of the forked child (the profiling target once it execs).
    pub pid: i32,
    go_tx: Option<OwnedFd>,
    err_rx: OwnedFd,
}

/// How the child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildExit {
    /// Exited normally with this status code.
    Code(i32),
    /// Killed by this signal number.
    Signal(i32),
}

impl ChildExit {
    /// The shell convention: the code, or 128 + signal number.
    pub fn shell_code(self) -> i32 {
        match self {
            ChildExit::Code(c) => c,
            ChildExit::Signal(s) => 128 + s,
        }
    }
}

/// Forks a child that will run `argv` (PATH is searched) once released, with the current
/// environment plus `env` (which replaces variables of the same name).
///
/// Must be called while the process has a single thread: between fork and exec the child only
/// calls async-signal-safe functions on memory prepared before the fork.
pub fn spawn_suspended(argv: &[String], env: &[(String, String)]) -> io::Result<SuspendedChild> {
    if argv.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no command given",
        ));
    }
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "argument contains a NUL byte"))?;
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let mut vars: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| {
            !env.iter()
                .any(|(name, _)| k.as_encoded_bytes() == name.as_bytes())
        })
        .filter_map(|(k, v)| {
            let mut kv = k.into_encoded_bytes();
            kv.push(b'=');
            kv.extend(v.into_encoded_bytes());
            CString::new(kv).ok()
        })
        .collect();
    for (k, v) in env {
        vars.push(
            CString::new(format!("{k}={v}"))
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in environment"))?,
        );
    }
    let mut envp: Vec<*const libc::c_char> = vars.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());

    let (go_rx, go_tx) = pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let (err_rx, err_tx) = pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;

    // SAFETY: jprof is single-threaded when it launches the target (documented precondition);
    // the child below only uses read/write/execvpe/_exit on buffers allocated before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let mut byte = 0u8;
        // SAFETY: async-signal-safe calls only (signal() included); `go_rx` is a valid fd; `byte` is a 1-byte buffer;
        // `ptrs` and `envp` are NUL-terminated arrays of pointers into CStrings that outlive exec.
        unsafe {
            libc::close(go_tx.as_raw_fd());
            libc::close(err_rx.as_raw_fd());
            // Wait for the parent: 1 byte means "go", EOF means the parent gave up.
            if libc::read(
                go_rx.as_raw_fd(),
                &mut byte as *mut u8 as *mut libc::c_void,
                1,
            ) != 1
            {
                libc::_exit(127);
            }
            // Rust's runtime ignores SIGPIPE in jprof, and an ignored signal stays ignored
            // across exec: give the target the default, as a shell would (`yes | head -1`).
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::execvpe(ptrs[0], ptrs.as_ptr(), envp.as_ptr());
            // Only reached when exec failed: report errno, then exit.
            let errno = *libc::__errno_location();
            let bytes = errno.to_le_bytes();
            libc::write(err_tx.as_raw_fd(), bytes.as_ptr() as *const libc::c_void, 4);
            libc::_exit(127);
        }
    }
    drop(go_rx);
    drop(err_tx);
    Ok(SuspendedChild {
        pid,
        go_tx: Some(go_tx),
        err_rx,
    })
}

impl SuspendedChild {
    /// Lets the child exec. Returns the exec error if exec failed (the child has then exited and
    /// been reaped).
    pub fn release(&mut self) -> io::Result<()> {
        if let Some(tx) = self.go_tx.take() {
            nix::unistd::write(&tx, &[1u8])?;
        }
        let mut buf = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match nix::unistd::read(&self.err_rx, &mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        if got == 4 {
            let _ = waitpid(Pid::from_raw(self.pid), None);
            return Err(io::Error::from_raw_os_error(i32::from_le_bytes(buf)));
        }
        Ok(())
    }

    /// Kills and reaps a child that was never released (set-up failed); the same as dropping it.
    pub fn abandon(self) {}
}

impl Drop for SuspendedChild {
    fn drop(&mut self) {
        // Released: the target is running and is the user's, not jprof's, to stop.
        if self.go_tx.take().is_some() {
            let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
            let _ = waitpid(Pid::from_raw(self.pid), None);
        }
    }
}

/// Non-blocking check whether `pid` has exited; reaps it if so.
pub fn try_wait(pid: i32) -> io::Result<Option<ChildExit>> {
    match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG))? {
        WaitStatus::Exited(_, code) => Ok(Some(ChildExit::Code(code))),
        WaitStatus::Signaled(_, sig, _) => Ok(Some(ChildExit::Signal(sig as i32))),
        _ => Ok(None),
    }
}

/// Sends `signal` (a raw signal number) to `pid`, ignoring a process that is already gone.
pub fn send_signal(pid: i32, signal: i32) {
    if let Ok(sig) = Signal::try_from(signal) {
        let _ = kill(Pid::from_raw(pid), sig);
    }
}

/// A descriptor that polls readable once child `pid` has exited (every thread of it), so a
/// loop sleeping in poll wakes at the exit instead of at its next timeout (pidfd_open, Linux
/// 5.3+). None where the kernel has no pidfds: the caller then notices the exit at a timeout.
pub fn exit_notifier(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags (no memory) and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes jprof the reaper of its orphaned descendants: a process whose parent exits is
/// reparented to jprof instead of init, so the launched tree stays visible and waitable.
pub fn become_subreaper() -> io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(io::Error::from)
}

/// What [`reap_exited`] found.
#[derive(Debug, Default)]
pub struct Reaped {
    /// The children that had exited, now reaped.
    pub exited: Vec<(i32, ChildExit)>,
    /// No child is left, running or not (the kernel said ECHILD).
    pub none_left: bool,
}

/// Reaps every child that has exited (the target, or orphans reparented to jprof), without
/// blocking.
pub fn reap_exited() -> io::Result<Reaped> {
    let mut out = Reaped::default();
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => {
                out.exited.push((pid.as_raw(), ChildExit::Code(code)))
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) => out
                .exited
                .push((pid.as_raw(), ChildExit::Signal(sig as i32))),
            Ok(WaitStatus::StillAlive) => return Ok(out),
            Err(nix::errno::Errno::ECHILD) => {
                out.none_left = true;
                return Ok(out);
            }
            Ok(_) => {}
            Err(e) => return Err(e.into()),
        }
    }
}
