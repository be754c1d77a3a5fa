//! Root's jprof against a hostile local user (issue 12, docs/security.md): each test replays one
//! attack an unprivileged user could make on a shared host where `fs.protected_symlinks` is 0,
//! and asserts root's files are untouched, secrets stay out of recordings, and planted files
//! are refused with a note. The tests create the user `jprofsec` and run its side as that user;
//! they need root (CI runs as root) and say so otherwise.

use crate::cli_support;
use cli_support::jprof;

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use jprof::format::jitdump_write::{self, CodeLoad};
use jprof::recording::Recording;

use crate::attacker_support;
use attacker_support::user;

/// One attack at a time across the security modules (`attacker_support::serial`).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    attacker_support::serial()
}

/// A command run as the unprivileged user.
fn as_user(program: &str) -> Command {
    let (uid, gid) = user();
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={uid}"),
        &format!("--regid={gid}"),
        "--clear-groups",
        "--",
        program,
    ]);
    c
}

/// A directory the user owns (its working directory in the attacks).
fn user_dir() -> tempfile::TempDir {
    let (uid, gid) = user();
    let dir = tempfile::Builder::new()
        .prefix("jprofsec-")
        .tempdir_in("/tmp")
        .unwrap();
    std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// A root-only file with known content, in a root-only directory.
struct Victim {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

const PRECIOUS: &[u8] = b"root's precious content, the SECRET-7f3a9 line\n";

fn victim() -> Victim {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let path = dir.path().join("precious");
    std::fs::write(&path, PRECIOUS).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    Victim { _dir: dir, path }
}

impl Victim {
    fn assert_intact(&self) {
        let meta = std::fs::metadata(&self.path).unwrap();
        assert_eq!(
            std::fs::read(&self.path).unwrap(),
            PRECIOUS,
            "root's file was changed"
        );
        assert_eq!(meta.uid(), 0, "root's file was given away");
        assert_eq!(meta.mode() & 0o777, 0o600, "root's file mode changed");
    }
}

/// Kills a process when the test ends, pass or fail.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

/// A long sleep run as the user, holding a few executable mappings.
fn user_process() -> Running {
    Running(
        as_user("sleep")
            .arg("60")
            .spawn()
            .expect("sleep as the user"),
    )
}

fn record_attached(pid: u32, data: &Path, secs: &str) -> Output {
    jprof()
        .args(["record", "--duration", secs, "-o"])
        .arg(data)
        .args(["-p", &pid.to_string()])
        .output()
        .expect("run jprof")
}

/// Runs `command`; fails the test with its stderr unless it succeeds.
fn succeeds(command: &mut Command) -> Output {
    let out = command.output().expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

use crate::jdk_support;
use jdk_support::java as find_java;

/// Compiles a Java class that spins until killed, into `dir` (readable by the user).
fn spin_class(dir: &Path) {
    std::fs::write(
        dir.join("Spin.java"),
        "public class Spin { static long x; public static void main(String[] a) throws Exception {\n\
         long end = System.nanoTime() + Long.parseLong(a[0]) * 1000000L;\n\
         while (System.nanoTime() < end) { for (int i = 0; i < 1000; i++) x += i * 7; } } }\n",
    )
    .unwrap();
    let javac = find_java().with_file_name("javac");
    let status = Command::new(javac)
        .arg("-d")
        .arg(dir)
        .arg(dir.join("Spin.java"))
        .status()
        .expect("javac");
    assert!(status.success());
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
}

/// Waits until `pid` maps libjvm.so (the JVM is up).
fn wait_for_jvm(pid: u32) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        if maps.contains("libjvm.so") {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the JVM {pid} did not start");
}

/// Attack 1: `.attach_pid<PID>` planted as a link to a root file in the JVM's working directory
/// and /tmp; attaching must neither truncate the root file nor remove anything it did not make.
#[test]
fn attach_trigger_link_does_not_truncate_a_root_file() {
    let _g = serial();
    let v = victim();
    let home = user_dir();
    spin_class(home.path());
    let jvm = Running(
        as_user(find_java().to_str().unwrap())
            .args(["-cp", ".", "Spin", "60000"])
            .current_dir(home.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("java as the user"),
    );
    wait_for_jvm(jvm.pid());
    let planted = [
        home.path().join(format!(".attach_pid{}", jvm.pid())),
        PathBuf::from(format!("/tmp/.attach_pid{}", jvm.pid())),
    ];
    for p in &planted {
        let ok = as_user("ln")
            .arg("-sf")
            .arg(&v.path)
            .arg(p)
            .status()
            .unwrap();
        assert!(ok.success());
    }
    let data = home.path().join("root.data");
    let out = record_attached(jvm.pid(), &data, "2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    v.assert_intact();
    assert!(
        stderr.contains("cannot create its attach trigger file"),
        "the refused trigger is not explained: {stderr}"
    );
    for p in &planted {
        assert!(p.symlink_metadata().is_ok(), "{} was removed", p.display());
        let _ = std::fs::remove_file(p);
    }
}

/// Attack 3: the user swaps `/tmp/perf-PID.map` between its own map and a link to a root-only
/// file while root records; no line of the secret may reach the recording.
#[test]
fn perf_map_swapped_with_a_link_never_leaks_a_root_file() {
    let _g = serial();
    let v = victim();
    let target = user_process();
    let map = PathBuf::from(format!("/tmp/perf-{}.map", target.pid()));
    // The secret is a valid perf-map line, so it would be stored if it were ever read.
    std::fs::write(&v.path, b"7f0000001000 10 SECRET-7f3a9\n").unwrap();
    // As fast as the user can: a file, then a link, then a file again, for 4 seconds.
    // Debian's python3: a python3 earlier on root's PATH may live where the user cannot go.
    let swapper = as_user("/usr/bin/python3")
        .arg("-c")
        .arg(format!(
            "import os, time\n\
             m, v = {m:?}, {v:?}\n\
             end = time.time() + 4\n\
             while time.time() < end:\n\
             \x20   open(m + '.f', 'w').write('1000 10 user_fn\\n'); os.rename(m + '.f', m)\n\
             \x20   os.symlink(v, m + '.l'); os.rename(m + '.l', m)\n",
            m = map.display().to_string(),
            v = v.path.display().to_string()
        ))
        .spawn()
        .expect("swapper");
    let mut swapper = Running(swapper);
    // Recording starts once the swapper is at work (the map exists).
    let start = Instant::now();
    while map.symlink_metadata().is_err() {
        assert!(
            swapper.0.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(20),
            "the swapper must be running as the user"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let home = user_dir();
    let data = home.path().join("root.data");
    let out = record_attached(target.pid(), &data, "3");
    drop(swapper);
    let _ = std::fs::remove_file(&map);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&data).unwrap();
    assert!(
        !contains(&bytes, b"SECRET-7f3a9"),
        "the secret reached the recording"
    );
}

/// Attack 4: outputs planted as links in a shared directory are replaced, never followed.
#[test]
fn planted_output_links_are_not_followed() {
    let _g = serial();
    let v = victim();
    let shared = user_dir();
    let data = shared.path().join("jprof.data");
    let svg = shared.path().join("flamegraph.svg");
    for link in [&data, &svg] {
        assert!(as_user("ln")
            .arg("-s")
            .arg(&v.path)
            .arg(link)
            .status()
            .unwrap()
            .success());
    }
    succeeds(jprof().args(["record", "-o"]).arg(&data).args([
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
    ]));
    v.assert_intact();
    assert!(data.symlink_metadata().unwrap().file_type().is_file());
    succeeds(
        jprof()
            .args(["report", "-i"])
            .arg(&data)
            .arg("-o")
            .arg(&svg),
    );
    v.assert_intact();
    assert!(svg.symlink_metadata().unwrap().file_type().is_file());
    // Attack 8: recordings hold raw stack bytes: only their owner may read them.
    let mode = std::fs::metadata(&data).unwrap().mode();
    assert_eq!(mode & 0o077, 0, "recording mode {mode:o}");
}

/// Attack 5: `jit-<pid>.dump` links planted for the next pids in /tmp and the working
/// directory must not redirect the agent inside root's JVM; the agent still writes its jitdump
/// somewhere private, so Java frames are still named.
#[test]
fn planted_jitdump_links_do_not_redirect_the_agent() {
    let _g = serial();
    let v = victim();
    let home = user_dir();
    spin_class(home.path());
    let mut planted = Vec::new();
    for pid in attacker_support::pids_ahead(400) {
        for dir in [home.path(), Path::new("/tmp")] {
            let link = dir.join(format!("jit-{pid}.dump"));
            if std::os::unix::fs::symlink(&v.path, &link).is_ok() {
                let (uid, gid) = user();
                let _ = std::os::unix::fs::lchown(&link, Some(uid), Some(gid));
                planted.push(link);
            }
        }
    }
    let data = home.path().join("java.data");
    let out = jprof()
        .args(["record", "-o"])
        .arg(&data)
        .args(["--", find_java().to_str().unwrap(), "-cp"])
        .arg(home.path())
        .args(["Spin", "3000"])
        .current_dir(home.path())
        .output()
        .unwrap();
    for link in &planted {
        let _ = std::fs::remove_file(link);
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    v.assert_intact();
    let folded = jprof()
        .args(["report", "-f", "collapsed", "-o", "-", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let folded = String::from_utf8_lossy(&folded.stdout);
    assert!(
        folded.contains("Spin.main"),
        "Java frames are no longer named: {}",
        &folded[..folded.len().min(2000)]
    );
}

/// `record_attached` with its stderr, and the recorder's peak resident set (kB), watched
/// until it exits.
fn record_attached_peak_rss(target: u32, data: &Path, secs: &str) -> (Output, u64) {
    let child = jprof()
        .args(["record", "--duration", secs, "-o"])
        .arg(data)
        .args(["-p", &target.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut peak_kb = 0u64;
    let started = Instant::now();
    let mut child = child;
    loop {
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            if let Some(kb) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
            {
                peak_kb = peak_kb.max(kb);
            }
        }
        if child.try_wait().unwrap().is_some() || started.elapsed() > Duration::from_secs(60) {
            return (child.wait_with_output().unwrap(), peak_kb);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The user's process writes a 512 MiB perf map of its own (1 KiB names) and root records it:
/// every byte read used to be indexed when symbols were embedded (1.18 GB peak for this one;
/// 10.5 GB for 2.6 GB flooded while recording). Now the side files of a user other than root
/// are read up to 128 MiB a recording, with a note, and jprof stays below 768 MiB.
#[test]
fn a_flooded_perf_map_is_read_only_up_to_a_bound() {
    let _g = serial();
    let target = user_process();
    let map = PathBuf::from(format!("/tmp/perf-{}.map", target.pid()));
    let script = format!(
        "import sys\n\
         name = 'N' * 1000\n\
         chunk = ''.join(f'{{0x7f0000000000 + i * 16:x}} 10 {{name}}_{{i}}\\n' for i in range(16384)).encode()\n\
         with open('{}', 'wb') as f:\n\
         \x20   for _ in range((512 << 20) // len(chunk) + 1): f.write(chunk)\n",
        map.display()
    );
    assert!(as_user("/usr/bin/python3")
        .arg("-c")
        .arg(&script)
        .status()
        .unwrap()
        .success());
    let home = user_dir();
    let data = home.path().join("root.data");
    let (out, peak_kb) = record_attached_peak_rss(target.pid(), &data, "5");
    let _ = std::fs::remove_file(&map);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(peak_kb < 768 * 1024, "peak RSS {peak_kb} kB: {stderr}");
    assert!(
        stderr.contains("passed 128 MiB in this recording"),
        "no note on the bound: {stderr}"
    );
    assert!(Recording::open(&data).unwrap().finished);
}

/// Attack 6: a 1 TiB sparse jitdump (valid header) for the user's process costs neither the
/// recording nor the memory.
#[test]
fn a_terabyte_sparse_jitdump_is_read_in_bounded_steps() {
    let _g = serial();
    let target = user_process();
    let dump = PathBuf::from(format!("/tmp/jit-{}.dump", target.pid()));
    let header = jitdump_write::header(target.pid(), 1, false);
    let script = format!(
        "printf '{}' > {d} && truncate -s 1T {d}",
        header
            .iter()
            .map(|b| format!("\\{b:03o}"))
            .collect::<String>(),
        d = dump.display()
    );
    assert!(as_user("sh")
        .arg("-c")
        .arg(&script)
        .status()
        .unwrap()
        .success());
    let home = user_dir();
    let data = home.path().join("root.data");
    let (out, peak_kb) = record_attached_peak_rss(target.pid(), &data, "2");
    let _ = std::fs::remove_file(&dump);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("jitdump"),
        "no note on the jitdump: {stderr}"
    );
    assert!(peak_kb < 512 * 1024, "peak RSS {peak_kb} kB");
    let rec = Recording::open(&data).expect("the recording is complete");
    assert!(rec.finished);
}

/// A jitdump naming one function at `addr` for process `pid`.
fn jitdump_naming(pid: u32, addr: u64, name: &str) -> Vec<u8> {
    let mut bytes = jitdump_write::header(pid, 1, false);
    bytes.extend(jitdump_write::code_load(
        2,
        &CodeLoad {
            pid,
            tid: pid,
            code_addr: addr,
            code_index: 1,
            name,
            code: &[0xc3; 64],
        },
    ));
    bytes
}

/// Attack 7: the user's `/tmp/jit-<pid>.dump` for root's process is refused (it would replace
/// real names), with a note saying why.
#[test]
fn another_users_jitdump_for_roots_process_is_refused() {
    let _g = serial();
    let root_process = Running(Command::new("sleep").arg("60").spawn().unwrap());
    let dump = PathBuf::from(format!("/tmp/jit-{}.dump", root_process.pid()));
    let spoof = jitdump_naming(root_process.pid(), 0x1000, "SPOOFED_by_user");
    let staged = user_dir();
    std::fs::write(staged.path().join("j"), &spoof).unwrap();
    assert!(as_user("cp")
        .arg(staged.path().join("j"))
        .arg(&dump)
        .status()
        .unwrap()
        .success());
    let data = staged.path().join("root.data");
    let out = record_attached(root_process.pid(), &data, "1");
    let _ = std::fs::remove_file(&dump);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("refused: owned by uid"), "{stderr}");
    let bytes = std::fs::read(&data).unwrap();
    assert!(!contains(&bytes, b"SPOOFED_by_user"));
}

/// Attack 7, perf.data: `report -i perf.data` (root's) takes no other user's perf map, and a
/// link to /dev/zero is refused at once instead of read until memory runs out.
#[test]
fn report_of_a_perf_data_refuses_other_users_perf_maps() {
    let _g = serial();
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared/java");
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("perf-map.data");
    std::fs::copy(format!("{fixture}/perf-map.data"), &data).unwrap();
    let map = Path::new("/tmp/perf-13573.map");
    let _ = std::fs::remove_file(map);
    let staged = user_dir();
    std::fs::write(
        staged.path().join("m"),
        std::fs::read_to_string(format!("{fixture}/perf-13573.map"))
            .unwrap()
            .lines()
            .map(|l| {
                format!(
                    "{} SPOOFED_by_user\n",
                    l.rsplit_once(' ').map_or(l, |x| x.0)
                )
            })
            .collect::<String>(),
    )
    .unwrap();
    assert!(as_user("cp")
        .arg(staged.path().join("m"))
        .arg(map)
        .status()
        .unwrap()
        .success());
    let report = || {
        jprof()
            .args(["report", "-f", "text", "-o", "-", "-i"])
            .arg(&data)
            .output()
            .unwrap()
    };
    let out = report();
    let _ = std::fs::remove_file(map);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("SPOOFED_by_user"), "{text}");
    assert!(text.contains("refused: owned by uid"), "{text}");

    assert!(as_user("ln")
        .args(["-s", "/dev/zero"])
        .arg(map)
        .status()
        .unwrap()
        .success());
    let started = Instant::now();
    let out = report();
    let _ = std::fs::remove_file(map);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("refused: it is a symbolic link"), "{text}");
}

/// Attack 9: a launch that fails, and a concurrent recorder, never destroy an existing
/// recording; a reader of a recording being replaced keeps its (old) file.
#[test]
fn existing_recordings_survive_failures_and_concurrent_runs() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().join("keep.data");
    let busy = [
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done",
    ];
    assert!(jprof()
        .args(["record", "-o"])
        .arg(&keep)
        .args(busy)
        .output()
        .unwrap()
        .status
        .success());
    let before = std::fs::read(&keep).unwrap();
    let failed = jprof()
        .args(["record", "-o"])
        .arg(&keep)
        .args(["--", "/nonexistent/cmd"])
        .output()
        .unwrap();
    assert!(!failed.status.success());
    assert_eq!(
        std::fs::read(&keep).unwrap(),
        before,
        "keep.data was changed"
    );
    assert!(jprof::foreign_file::leftover_partials(&keep).is_empty());

    // A reader maps the old recording while two recorders replace it at once.
    let old = Recording::open(&keep).unwrap();
    let spawn = || {
        jprof()
            .args(["record", "-o"])
            .arg(&keep)
            .args(busy)
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for mut c in [a, b] {
        assert!(c.wait().unwrap().success());
    }
    let records = old.perf_records().filter_map(Result::ok).count();
    assert!(records > 0, "the old mapping must stay readable");
    let new = Recording::open(&keep).expect("the replaced recording is whole");
    assert!(new.finished, "{}", new.completeness());
    assert!(jprof::foreign_file::leftover_partials(&keep).is_empty());
}

/// Runs jprof under `timeout`, so a test of a hang fails instead of hanging (exit 124).
fn jprof_within(secs: u32) -> Command {
    let mut c = Command::new("timeout");
    c.args(["-s", "KILL", &secs.to_string()])
        .arg(cli_support::JPROF);
    c
}

/// A small recording of root's, to report from.
fn small_recording(dir: &Path) -> PathBuf {
    let data = dir.join("small.data");
    succeeds(jprof().args(["record", "-o"]).arg(&data).args([
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
    ]));
    data
}

/// Issue 24: `report -o /dev/null` as root replaced the machine's /dev/null with a 0600 file.
/// A character device (a null device made for the test, so the machine's own is never at
/// risk) and a link to `/proc/self/fd/1` (what `/dev/stdout` is) are written in place; a
/// recording is refused at a device before the command runs; `-o DIR` is refused before the
/// input is read.
#[test]
fn devices_and_fd_links_at_outputs_are_written_in_place() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let data = small_recording(dir.path());
    let null = dir.path().join("null");
    nix::sys::stat::mknod(
        &null,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(1, 3),
    )
    .unwrap();
    let is_null = |p: &Path| {
        let m = p.symlink_metadata().unwrap();
        m.file_type().is_char_device() && m.rdev() == nix::sys::stat::makedev(1, 3)
    };
    for format in ["text", "collapsed", "flamegraph", "pprof"] {
        succeeds(
            jprof()
                .args(["report", "-f", format, "-i"])
                .arg(&data)
                .arg("-o")
                .arg(&null),
        );
        assert!(is_null(&null), "-f {format} replaced the device");
    }
    let marker = dir.path().join("ran");
    let refused = jprof()
        .args(["record", "-o"])
        .arg(&null)
        .args(["--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("a recording must be a regular file"), "{err}");
    assert!(is_null(&null));
    assert!(
        !marker.exists(),
        "the target ran though the output was refused"
    );

    // The user's own link to an fd: the report reaches our stdout, the link stays.
    let link = dir.path().join("stdout-link");
    std::os::unix::fs::symlink("/proc/self/fd/1", &link).unwrap();
    let out = succeeds(
        jprof()
            .args(["report", "-f", "collapsed", "-i"])
            .arg(&data)
            .arg("-o")
            .arg(&link),
    );
    assert!(
        contains(&out.stdout, b"sh"),
        "the folded stacks went to stdout"
    );
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    // A flame graph to our own stdout is like `-o -`: the SVG alone, the top list on stderr.
    let out = succeeds(
        jprof()
            .args(["report", "-i"])
            .arg(&data)
            .arg("-o")
            .arg(&link),
    );
    assert!(
        out.stdout.starts_with(b"<?xml"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(out.stdout.trim_ascii_end().ends_with(b"</svg>"));
    assert!(
        contains(&out.stderr, b"Top"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A directory: refused before the (here missing) input is even opened.
    let err = jprof()
        .args(["report", "-i", "/nonexistent/input.data", "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&err.stderr);
    assert!(text.contains("is a directory"), "{text}");
}

/// Issue 24: another user's FIFO or device at an output path is refused with a clear error and
/// left as it is (never written into, never replaced), with no hang; another user's link among
/// the output's directories is not followed, so nothing is created where it leads.
#[test]
fn other_users_fifos_and_directory_links_at_outputs_are_refused() {
    let _g = serial();
    let mine = tempfile::tempdir().unwrap();
    let data = small_recording(mine.path());
    let shared = user_dir();
    let fifo = shared.path().join("flamegraph.svg");
    assert!(as_user("mkfifo")
        .arg("-m")
        .arg("666")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = jprof_within(60)
        .args(["report", "-i"])
        .arg(&data)
        .arg("-o")
        .arg(&fifo)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(124), "jprof hung on the FIFO");
    assert!(!out.status.success());
    assert!(err.contains("a FIFO owned by uid"), "{err}");
    assert!(fifo.symlink_metadata().unwrap().file_type().is_fifo());

    // shared/sub -> a root directory: root's report must not create a file there.
    let root_dir = tempfile::tempdir().unwrap();
    let sub = shared.path().join("sub");
    assert!(as_user("ln")
        .arg("-s")
        .arg(root_dir.path())
        .arg(&sub)
        .status()
        .unwrap()
        .success());
    let out = jprof()
        .args(["report", "-f", "collapsed", "-i"])
        .arg(&data)
        .arg("-o")
        .arg(sub.join("out.txt"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("is a symbolic link owned by uid"), "{err}");
    assert_eq!(std::fs::read_dir(root_dir.path()).unwrap().count(), 0);
    let out = jprof()
        .args(["record", "-o"])
        .arg(sub.join("x.data"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(std::fs::read_dir(root_dir.path()).unwrap().count(), 0);
}

/// A C program of the user's: spins in `hot` for about a second; with the argument `fifo` it
/// then puts a FIFO where its own executable was. 16 MiB of initialized data put its symbol
/// table far into the file, so a truncated mapping of it faults.
const HOG_C: &str = r#"
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>
static char pad[16 << 20] = {1};
volatile long sink;
__attribute__((noinline)) void hot(void) {
    for (long i = 0; i < 400000000L; i++) sink += i ^ (sink >> 3);
}
int main(int argc, char **argv) {
    hot();
    sink += pad[sink & 1];
    if (argc > 1 && strcmp(argv[1], "fifo") == 0) {
        unlink(argv[0]);
        mkfifo(argv[0], 0666);
    }
    return 0;
}
"#;

/// Builds the hog into `dir` (the user's) as `name`, owned by the user.
fn user_hog(dir: &Path, name: &str) -> PathBuf {
    let build = tempfile::tempdir().unwrap();
    let src = build.path().join("hog.c");
    std::fs::write(&src, HOG_C).unwrap();
    let built = build.path().join("hog");
    succeeds(
        Command::new("cc")
            .args(["-O1", "-g", "-o"])
            .arg(&built)
            .arg(&src),
    );
    let hog = dir.join(name);
    std::fs::copy(&built, &hog).unwrap();
    let (uid, gid) = user();
    std::os::unix::fs::chown(&hog, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(&hog, std::fs::Permissions::from_mode(0o755)).unwrap();
    hog
}

/// Issue 24: a target that leaves a FIFO where the binary it ran was. Root's `record` hung
/// forever after the target exited (opening the FIFO to embed symbols; SIGTERM did not help),
/// and `report` of a recording naming it hung the same way. The FIFO is refused with a note.
#[test]
fn a_fifo_at_a_binarys_path_never_hangs_record_or_report() {
    let _g = serial();
    let shared = user_dir();
    let work = tempfile::tempdir().unwrap();
    let (uid, gid) = user();
    let as_user_args = |hog: &Path| {
        vec![
            "setpriv".to_string(),
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".into(),
            "--".into(),
            hog.display().to_string(),
            "fifo".into(),
        ]
    };
    let hog = user_hog(shared.path(), "hog");
    let data = work.path().join("embedded.data");
    let out = jprof_within(120)
        .args(["record", "-o"])
        .arg(&data)
        .arg("--")
        .args(as_user_args(&hog))
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(124), "record hung on the FIFO");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(hog.symlink_metadata().unwrap().file_type().is_fifo());

    // The same left for report: symbols not embedded, the binary read at report time.
    std::fs::remove_file(&hog).unwrap();
    let hog = user_hog(shared.path(), "hog");
    let data = work.path().join("plain.data");
    let out = jprof_within(120)
        .args(["record", "--no-embed-symbols", "-o"])
        .arg(&data)
        .arg("--")
        .args(as_user_args(&hog))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(hog.symlink_metadata().unwrap().file_type().is_fifo());
    let out = jprof_within(120)
        .args(["report", "-f", "text", "-o", "-", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(124), "report hung on the FIFO");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("not a regular file but a FIFO"), "{text}");
}

/// Issue 24: the owner truncates its binary while root's `report` reads it. jprof mapped
/// binaries and died of SIGBUS (9 of 10 tries); another user's binary is now read into memory,
/// so every run ends normally, whatever state the file is caught in.
#[test]
fn a_binary_truncated_during_report_never_kills_it() {
    use std::os::unix::process::ExitStatusExt;
    let _g = serial();
    let shared = user_dir();
    let work = tempfile::tempdir().unwrap();
    let hog = user_hog(shared.path(), "hog");
    let data = work.path().join("hog.data");
    succeeds(
        jprof()
            .args(["record", "--no-embed-symbols", "-o"])
            .arg(&data)
            .arg("--")
            .arg(&hog),
    );
    let copy = shared.path().join("hog.orig");
    std::fs::copy(&hog, &copy).unwrap();
    // The user empties the file and writes it back, in place, over and over.
    let _churn = Running(
        as_user("sh")
            .arg("-c")
            .arg(format!(
                "while :; do : > {hog}; cat {copy} > {hog}; done",
                hog = hog.display(),
                copy = copy.display()
            ))
            .spawn()
            .unwrap(),
    );
    for _ in 0..10 {
        let out = jprof_within(120)
            .args(["report", "-f", "collapsed", "-o", "-", "-i"])
            .arg(&data)
            .output()
            .unwrap();
        assert_eq!(
            out.status.signal(),
            None,
            "report was killed by a signal: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Issue 24: a process of the user's names itself (argv and comm) with terminal escapes; root's
/// `record -p`, `report -f text` and the flame graph's summary show them as `\x1b`, never send
/// them to root's terminal (and the SVG stays valid XML).
#[test]
fn terminal_escapes_in_process_names_never_reach_roots_terminal() {
    let _g = serial();
    let work = tempfile::tempdir().unwrap();
    let mut target = as_user("/usr/bin/python3");
    target.args([
        "-c",
        "import ctypes, sys, time\n\
         ctypes.CDLL(None).prctl(15, b'\\x1b[31mEVIL\\x07', 0, 0, 0)\n\
         print('ready', flush=True)\n\
         end = time.time() + 30\n\
         while time.time() < end: pass\n",
        "\x1b]0;pwned\x07",
    ]);
    let mut child = target.stdout(Stdio::piped()).spawn().unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    let target = Running(child);
    assert_eq!(ready.trim(), "ready");
    let comm = std::fs::read(format!("/proc/{}/comm", target.pid())).unwrap();
    assert!(
        contains(&comm, b"\x1b[31m"),
        "prctl did not name the process"
    );
    let data = work.path().join("esc.data");
    let recorded = record_attached(target.pid(), &data, "1");
    drop(target);
    let text = succeeds(
        jprof()
            .args(["report", "-f", "text", "-o", "-", "-i"])
            .arg(&data),
    );
    let svg = work.path().join("esc.svg");
    let graph = succeeds(
        jprof()
            .args(["report", "-i"])
            .arg(&data)
            .arg("-o")
            .arg(&svg),
    );
    let svg = std::fs::read(&svg).unwrap();
    for (what, bytes) in [
        ("record's stderr", &recorded.stderr),
        ("record's stdout", &recorded.stdout),
        ("the text report", &text.stdout),
        ("the flame graph summary", &graph.stdout),
        ("the SVG", &svg),
    ] {
        assert!(
            !bytes.iter().any(|&b| b == 0x1b || b == 0x07),
            "{what} carries a raw escape: {}",
            String::from_utf8_lossy(bytes)
        );
    }
    assert!(
        contains(&text.stdout, b"\\x1b]0;pwned\\x07"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
}

/// Another user who makes `$TMPDIR/jprof-0` before root's first run (a sticky `/tmp` lets
/// them) turns off the list that lets the next run remove what a killed jprof left: nothing
/// of root's goes into their directory, and the summary says why and how to fix it.
#[test]
fn another_users_leftovers_directory_is_not_written_and_is_reported() {
    let (uid, gid) = user();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let planted = tmp
        .path()
        .join(format!("jprof-{}", nix::unistd::geteuid().as_raw()));
    std::fs::create_dir(&planted).unwrap();
    std::os::unix::fs::chown(&planted, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o700)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = succeeds(
        jprof()
            .args(["record", "-o"])
            .arg(work.path().join("r.data"))
            .args(["--", "true"])
            .env("TMPDIR", tmp.path()),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "owned by uid {uid}, not this user's private directory"
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(&planted).unwrap().count(), 0);
}
