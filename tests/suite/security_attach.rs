//! Root's jprof attaching (`-p`) to a process that poses as a JVM (issue 24, docs/security.md
//! "Attaching to a process that poses as a JVM"). The fake JVM is a Python script run as an
//! unprivileged user the tests create: it maps a libjvm.so and serves its own `.java_pid`
//! socket, answering with an endless reply or a trickle of one byte every few seconds. jprof
//! must stay small, obey `--duration` and SIGTERM within seconds, leave a finished recording,
//! and never claim it loaded its agent. The tests need root (CI runs as root) and say so.

use crate::cli_support;
use cli_support::jprof;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jprof::recording::Recording;

use crate::jdk_support;

use crate::attacker_support;
use attacker_support::user;

/// One fake JVM at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The fake JVM: maps `lib` executable (a real HotSpot libjvm through the dynamic loader, or
/// any file named libjvm.so through mmap), serves /tmp/.java_pid<its pid>, prints "ready",
/// then "asked" for each request, and answers as `answer` says: "endless" or "trickle"; with
/// "none" it serves nothing.
const FAKE_JVM: &str = r#"
import ctypes, mmap, os, socket, sys, threading, time
answer, lib, how = sys.argv[1], sys.argv[2], sys.argv[3]
if how == 'dlopen':
    ctypes.CDLL(lib)
else:
    f = open(lib, 'rb')
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE)
if answer == 'none':
    print('ready', flush=True)
    while True:
        time.sleep(60)
path = '/tmp/.java_pid%d' % os.getpid()
try:
    os.unlink(path)
except FileNotFoundError:
    pass
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(8)
print('ready', flush=True)
def serve(c):
    c.recv(4096)
    print('asked', flush=True)
    try:
        if answer == 'endless':
            block = b'0\n' + b'x' * (1 << 20)
            while True:
                c.sendall(block)
        else:
            while True:
                c.sendall(b'0')
                time.sleep(5)
    except OSError:
        pass
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// The running fake JVM; killed (and its socket removed) when the test ends.
struct FakeJvm {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Drop for FakeJvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(format!("/tmp/.java_pid{}", self.child.id()));
    }
}

impl FakeJvm {
    fn start(answer: &str, lib: &Path, how: &str) -> Self {
        Self::start_after(&[], answer, lib, how)
    }

    /// The fake JVM, run as the user through `wrapper` (a command that ends by running its
    /// arguments).
    fn start_after(wrapper: &[&str], answer: &str, lib: &Path, how: &str) -> Self {
        let (uid, gid) = user();
        // A root JVM killed earlier (by this run's tests too) leaves its /tmp/.java_pid<pid>,
        // which the user's fake cannot replace when it gets that pid: it exits, and the next
        // one (another pid) is tried; dropping the failed one removes the stale name.
        for _ in 0..5 {
            // Debian's python3: a python3 earlier on root's PATH may live where the user
            // cannot go.
            let mut child = Command::new("setpriv")
                .args([
                    &format!("--reuid={uid}"),
                    &format!("--regid={gid}"),
                    "--clear-groups",
                    "--",
                ])
                .args(wrapper)
                .args(["/usr/bin/python3", "-c", FAKE_JVM, answer])
                .arg(lib)
                .arg(how)
                .stdout(Stdio::piped())
                .spawn()
                .expect("python3 as the user");
            let out = BufReader::new(child.stdout.take().unwrap());
            let mut fake = FakeJvm { child, out };
            if fake.next_line() == "ready" {
                return fake;
            }
        }
        panic!("the fake JVM did not start in 5 tries (its errors are above)");
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn next_line(&mut self) -> String {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        line.trim().to_string()
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

/// A real HotSpot libjvm for the fake to load (whichever JDK is installed).
fn hotspot_libjvm() -> PathBuf {
    let java = std::fs::canonicalize(jdk_support::java()).unwrap();
    let lib = java
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("lib/server/libjvm.so");
    assert!(lib.is_file(), "{} is missing", lib.display());
    lib
}

/// A directory for root's recording.
fn out_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn jprof_attached(pid: u32, data: &Path, extra: &[&str]) -> Child {
    jprof()
        .args(["record", "-o"])
        .arg(data)
        .args(extra)
        .args(["-p", &pid.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run jprof")
}

/// Waits for `child` to exit, at most `limit`; fails the test (and kills it) otherwise.
fn exits_within(child: Child, limit: Duration) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("jprof did not exit within {limit:?}");
        }
    }
}

/// The recording is finished (renamed into place, end marker written), with nothing left
/// under a partial name, and the summary claims no load.
fn assert_finished_without_a_claim(data: &Path, out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("loaded jprof's JVMTI agent"),
        "the summary claims a load: {stderr}"
    );
    let recording = Recording::open(data).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert!(recording.finished, "{}", recording.completeness());
    let partials: Vec<_> = std::fs::read_dir(data.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".partial"))
        .map(|e| e.path())
        .collect();
    assert!(partials.is_empty(), "left behind: {partials:?}");
}

/// jprof's own peak resident set (KiB), as its parent sees it through wait4: jprof runs
/// under a python3 parent that prints `max_rss_kib N` as the last stderr line. (This process's
/// RUSAGE_CHILDREN would count the children of every test of the suite, JVMs included.)
const MAX_RSS_OF: &str = "import os, subprocess, sys
p = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(p.pid, 0)
print('max_rss_kib', usage.ru_maxrss, file=sys.stderr)
sys.exit(os.waitstatus_to_exitcode(status))";

fn max_rss_kib(stderr: &str) -> i64 {
    let last = stderr.lines().last().unwrap_or_default();
    last.strip_prefix("max_rss_kib ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no max_rss_kib line: {stderr}"))
}

/// Endless reply: jprof takes at most its cap and stays small (the attack grew it to 2.95 GB).
#[test]
fn an_endless_reply_leaves_jprof_small() {
    let _g = serial();
    let mut fake = FakeJvm::start("endless", &hotspot_libjvm(), "dlopen");
    let dir = out_dir();
    let data = dir.path().join("root.data");
    let jprof = Command::new("/usr/bin/python3")
        .args(["-c", MAX_RSS_OF, cli_support::JPROF, "record", "-o"])
        .arg(&data)
        .args(["--duration", "2", "-p", &fake.pid().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run jprof under python3");
    let out = exits_within(jprof, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fake.next_line(), "asked", "jprof never asked the fake JVM");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("its answer exceeded 64 KiB"), "{stderr}");
    assert_finished_without_a_claim(&data, &out);
    let rss = max_rss_kib(&stderr);
    assert!(rss < 512 * 1024, "jprof reached {rss} KiB");
}

/// A trickled reply: `--duration 2` still ends the recording within seconds.
#[test]
fn a_trickled_reply_does_not_outlast_the_duration() {
    let _g = serial();
    let mut fake = FakeJvm::start("trickle", &hotspot_libjvm(), "dlopen");
    let dir = out_dir();
    let data = dir.path().join("root.data");
    let started = Instant::now();
    let jprof = jprof_attached(fake.pid(), &data, &["--duration", "2"]);
    let out = exits_within(jprof, Duration::from_secs(60));
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fake.next_line(), "asked");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the recording stopped before the JVM answered"),
        "{stderr}"
    );
    assert_finished_without_a_claim(&data, &out);
    // 2 s of recording, the attach given up at once, then the usual finishing work.
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

/// A trickled reply: SIGTERM to jprof ends it within seconds, the recording finished.
#[test]
fn a_trickled_reply_does_not_outlast_sigterm() {
    let _g = serial();
    let mut fake = FakeJvm::start("trickle", &hotspot_libjvm(), "dlopen");
    let dir = out_dir();
    let data = dir.path().join("root.data");
    let jprof = jprof_attached(fake.pid(), &data, &[]);
    // jprof is in the middle of the exchange once the fake has its request.
    assert_eq!(fake.next_line(), "asked");
    let signalled = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(jprof.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = exits_within(jprof, Duration::from_secs(60));
    let took = signalled.elapsed();
    assert_finished_without_a_claim(&data, &out);
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert!(fake.alive(), "the fake JVM was killed");
}

/// A file merely named libjvm.so is no JVM: no SIGQUIT (which would kill the process), no
/// request, and the summary says why.
#[test]
fn a_file_named_libjvm_is_not_a_jvm() {
    let _g = serial();
    let lib_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(lib_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let lib = lib_dir.path().join("libjvm.so");
    std::fs::write(&lib, vec![0x90u8; 8192]).unwrap();
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut fake = FakeJvm::start("endless", &lib, "mmap");
    let dir = out_dir();
    let data = dir.path().join("root.data");
    let jprof = jprof_attached(fake.pid(), &data, &["--duration", "1"]);
    let out = exits_within(jprof, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("is not a HotSpot JVM library"), "{stderr}");
    assert_finished_without_a_claim(&data, &out);
    assert!(fake.alive(), "the process was sent SIGQUIT");
}

/// The user puts a root directory (`/etc`, bind-mounted in its own user and mount namespace)
/// in place of its `/tmp`: root's jprof must create neither the attach trigger nor the agent
/// copy there, and sends no SIGQUIT.
#[test]
fn a_root_directory_as_the_jvms_tmp_is_not_written() {
    let _g = serial();
    let probe = Command::new("setpriv")
        .args([
            &format!("--reuid={}", user().0),
            &format!("--regid={}", user().1),
            "--clear-groups",
            "--",
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "true",
        ])
        .status()
        .expect("unshare");
    if !probe.success() {
        eprintln!("skipped: this kernel does not let an unprivileged user make a user namespace");
        return;
    }
    let wrapper = [
        "unshare",
        "--user",
        "--map-root-user",
        "--mount",
        "sh",
        "-c",
        "mount --bind /etc /tmp && exec \"$0\" \"$@\"",
    ];
    let mut fake = FakeJvm::start_after(&wrapper, "none", &hotspot_libjvm(), "dlopen");
    let pid = fake.pid();
    let trigger = PathBuf::from(format!("/etc/.attach_pid{pid}"));
    let dir = out_dir();
    let data = dir.path().join("root.data");
    let jprof = jprof_attached(pid, &data, &["--duration", "2"]);
    let out = exits_within(jprof, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!trigger.exists(), "{} was created", trigger.display());
    assert!(
        stderr.contains("jprof does not use its /tmp"),
        "the refusal is not explained: {stderr}"
    );
    assert!(fake.alive(), "the process was sent SIGQUIT");
    assert_finished_without_a_claim(&data, &out);
    let leftovers: Vec<_> = std::fs::read_dir("/etc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("jprof-agent-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
