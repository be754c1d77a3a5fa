//! Root's jprof makes runtimes write side files (issue 24, docs/security.md "Runtime side
//! files"): another local user must not be able to redirect those writes (a planted link) or
//! receive them (a planted regular file). Each test plants, as the unprivileged user
//! `jprofsec`, a link to a root-only file and a regular file of its own at every name the
//! runtime would write for the next few thousand pids, then runs root's `jprof record` with no
//! flags and asserts root's file is untouched and the planted files received nothing. Needs
//! root (CI runs as root), node and mono.

use crate::cli_support;
use cli_support::jprof;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::attacker_support;
use attacker_support::user;

/// One attack at a time across the security modules (`attacker_support::serial`).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    attacker_support::serial()
}

const PRECIOUS: &[u8] = b"root's precious content\n";

/// A root-only file with known content.
struct Victim {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

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
        assert_eq!(meta.uid(), 0);
        assert_eq!(meta.mode() & 0o777, 0o600);
    }
}

/// The names the user planted: links to the victim and empty regular files of the user's,
/// removed when the test ends.
struct Planted {
    links: Vec<PathBuf>,
    files: Vec<PathBuf>,
}

impl Drop for Planted {
    fn drop(&mut self) {
        for p in self.links.iter().chain(&self.files) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// How many pids ahead are planted: other work on the machine takes pids meanwhile.
const AHEAD: u32 = 3000;

/// Plants, as the user, `pattern` (`{pid}` replaced) in `dir` for the next [`AHEAD`] pids:
/// even pids get a link to `victim`, odd ones an empty file of the user's.
fn plant(dir: &Path, pattern: &str, victim: &Path) -> Planted {
    plant_for(dir, pattern, victim, attacker_support::pids_ahead(AHEAD))
}

/// [`plant`] for the given pids.
fn plant_for(
    dir: &Path,
    pattern: &str,
    victim: &Path,
    pids: impl IntoIterator<Item = u32>,
) -> Planted {
    let (links, files) = plant_each(dir, pattern, pids, |path| {
        std::os::unix::fs::symlink(victim, path).unwrap()
    });
    Planted { links, files }
}

/// For each pid whose name is free in `dir`, plants the user's name: `even` makes it for an
/// even pid (a link, a FIFO), an empty 0666 file for an odd one. Returns (even ones, files).
fn plant_each(
    dir: &Path,
    pattern: &str,
    pids: impl IntoIterator<Item = u32>,
    mut even: impl FnMut(&Path),
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (uid, gid) = user();
    let (mut evens, mut files) = (Vec::new(), Vec::new());
    for pid in pids {
        let path = dir.join(pattern.replace("{pid}", &pid.to_string()));
        if std::fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        // Made as root, then given to the user: the same as the user making them.
        if pid % 2 == 0 {
            even(&path);
            std::os::unix::fs::lchown(&path, Some(uid), Some(gid)).unwrap();
            evens.push(path);
        } else {
            std::fs::write(&path, b"").unwrap();
            std::os::unix::fs::chown(&path, Some(uid), Some(gid)).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
            files.push(path);
        }
    }
    (evens, files)
}

/// The pid `recorder` (a `jprof record` launching a command) launched, once it has.
fn launched_by(recorder: &std::process::Child) -> u32 {
    let children = format!("/proc/{}/task/{}/children", recorder.id(), recorder.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&children).unwrap_or_default();
        if let Some(pid) = text.split_whitespace().next().and_then(|p| p.parse().ok()) {
            return pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "jprof launched nothing"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

impl Planted {
    /// Every planted name is still the user's: links unchanged, files empty.
    fn assert_untouched(&self, victim: &Victim) {
        for link in &self.links {
            assert_eq!(std::fs::read_link(link).unwrap(), victim.path);
        }
        for file in &self.files {
            let m = std::fs::symlink_metadata(file).unwrap();
            assert_eq!(m.len(), 0, "{} received root's data", file.display());
            assert_eq!(m.uid(), user().0);
        }
        victim.assert_intact();
    }
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run jprof");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The pid jprof launched, from the recording.
fn target_pid(data: &Path) -> u32 {
    jprof::recording::Recording::open(data)
        .unwrap()
        .meta
        .target_pid
        .unwrap()
}

const NODE_SCRIPT: &str = "function hot(n){let s=0;for(let i=0;i<n;i++)s+=i%7;return s}\n\
     let x=0;const end=Date.now()+300;while(Date.now()<end)x+=hot(1e4);console.log(x>0);\n";

/// Issue 24: `jprof record -- node …` in a directory another user can write used to add
/// `--perf-prof`, and V8 opened `./jit-PID.dump` through the user's link (a root file became a
/// jitdump) or wrote root's jitdump into the user's file. V8 lets no one choose that place, so
/// jprof does not ask V8 there, and says why with the fix.
#[test]
fn node_in_a_directory_another_user_can_write_is_not_asked() {
    let _serial = serial();
    let (uid, gid) = user();
    // The user's own directory, and a root directory anyone may write (not sticky).
    for (owner, why) in [(uid, "belongs to uid"), (0, "other users can write")] {
        let shared = tempfile::Builder::new()
            .prefix("jprofsec-")
            .tempdir_in("/tmp")
            .unwrap();
        std::os::unix::fs::chown(shared.path(), Some(owner), Some(gid)).unwrap();
        std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let scripts = tempfile::tempdir().unwrap();
        let script = scripts.path().join("hot.js");
        std::fs::write(&script, NODE_SCRIPT).unwrap();
        let victim = victim();
        let planted = plant(shared.path(), "jit-{pid}.dump", &victim.path);
        let data = scripts.path().join("node.data");
        let out = run(jprof()
            .current_dir(shared.path())
            .args(["record", "-o"])
            .arg(&data)
            .arg("--")
            .arg("node")
            .arg(&script)
            .env_remove("NODE_OPTIONS"));
        let pid = target_pid(&data);
        let text = stderr(&out);
        planted.assert_untouched(&victim);
        assert!(
            text.contains(&format!("node (pid {pid}): jprof did not ask it")),
            "{text}"
        );
        assert!(text.contains(why), "{text}");
        assert!(
            text.contains("from a directory only you can write"),
            "{text}"
        );
        // Root wrote nothing in that directory (no jitdump, no V8 log).
        let roots: Vec<String> = std::fs::read_dir(shared.path())
            .unwrap()
            .flatten()
            .filter(|e| e.metadata().is_ok_and(|m| m.uid() == 0))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(roots.is_empty(), "root wrote {roots:?} (target pid {pid})");
    }
}

/// The gap of the test above through a shell: jprof started in a directory only root can
/// write, and the command `sh -c 'cd SHARED && exec node …'` changed into a directory the user
/// can write (the user's own, a root one anyone may write, a sticky one the kernel does not
/// guard). V8 (`NODE_OPTIONS` was given, judged by jprof's directory) opened
/// `./jit-PID.dump` there through the user's link: root's file became the jitdump. jprof now
/// judges the directories the command line's shell changes into, and does not ask V8.
#[test]
fn node_started_by_a_shell_that_changes_into_a_shared_directory_is_not_asked() {
    let _serial = serial();
    let (uid, gid) = user();
    let scripts = tempfile::tempdir().unwrap();
    let script = scripts.path().join("hot.js");
    std::fs::write(&script, NODE_SCRIPT).unwrap();
    for (owner, mode, why) in [
        (uid, 0o777, "belongs to uid"),
        (0, 0o777, "other users can write"),
        (0, 0o1777, "other users can write"),
    ] {
        if mode == 0o1777 && tmp_guarded() {
            // The kernel refuses the planted names there: V8 may be asked.
            continue;
        }
        let shared = tempfile::Builder::new()
            .prefix("jprofsec-")
            .tempdir_in("/tmp")
            .unwrap();
        std::os::unix::fs::chown(shared.path(), Some(owner), Some(gid)).unwrap();
        std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        let victim = victim();
        let planted = plant(shared.path(), "jit-{pid}.dump", &victim.path);
        let data = scripts.path().join("node.data");
        let line = format!(
            "cd {} && exec node {}",
            shared.path().display(),
            script.display()
        );
        let out = run(jprof()
            .current_dir(scripts.path())
            .args(["record", "-o"])
            .arg(&data)
            .args(["--", "sh", "-c", &line])
            .env_remove("NODE_OPTIONS"));
        let pid = target_pid(&data);
        let text = stderr(&out);
        planted.assert_untouched(&victim);
        assert!(
            text.contains(&format!("node (pid {pid}): jprof did not ask it"))
                && text.contains("the command changes into")
                && text.contains(why),
            "{text}"
        );
        let roots: Vec<String> = std::fs::read_dir(shared.path())
            .unwrap()
            .flatten()
            .filter(|e| e.metadata().is_ok_and(|m| m.uid() == 0))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(roots.is_empty(), "root wrote {roots:?} (target pid {pid})");
    }
}

/// A C# program that runs ~0.5 s of managed code.
fn mono_program(dir: &Path) -> PathBuf {
    let src = dir.join("Hot.cs");
    std::fs::write(
        &src,
        "class Hot { static long Spin(int n) { long s = 0; for (int i = 0; i < n; i++) s += i % 7; return s; }\n\
         static void Main() { long x = 0; var end = System.DateTime.Now.AddMilliseconds(500);\n\
         while (System.DateTime.Now < end) x += Spin(100000); System.Console.WriteLine(x > 0); } }\n",
    )
    .unwrap();
    let exe = dir.join("Hot.exe");
    let ok = Command::new("mcs")
        .arg(format!("-out:{}", exe.display()))
        .arg(&src)
        .status()
        .expect("mcs (apt-get install mono-mcs)");
    assert!(ok.success());
    exe
}

/// Issue 24: Mono's perf map is `/tmp/perf-PID.map` (no option moves it), and jprof's Mono
/// log used to be `/tmp/jprof-mono-PID.mlpd`. With names planted for every pid jprof could
/// get, root's Mono writes through none of them: the log goes to jprof's private directory,
/// and the perf map is asked for only where the kernel guards /tmp.
#[test]
fn mono_never_writes_through_names_planted_in_tmp() {
    let _serial = serial();
    let work = tempfile::tempdir().unwrap();
    let exe = mono_program(work.path());
    let victim = victim();
    let maps = plant(Path::new("/tmp"), "perf-{pid}.map", &victim.path);
    let logs = plant(Path::new("/tmp"), "jprof-mono-{pid}.mlpd", &victim.path);
    let data = work.path().join("mono.data");
    let out = run(jprof()
        .current_dir(work.path())
        .args(["record", "-o"])
        .arg(&data)
        .args(["--", "mono"])
        .arg(&exe)
        .env_remove("MONO_ENV_OPTIONS"));
    let text = stderr(&out);
    let pid = target_pid(&data);
    maps.assert_untouched(&victim);
    logs.assert_untouched(&victim);
    // The launched pid was one of those planted, or jprof took a fresh one: either way the
    // program ran with managed code named from the log in the private directory.
    assert!(text.contains("Mono log"), "{text}");
    assert!(
        !Path::new(&format!("/tmp/perf-{pid}.map")).exists()
            || maps
                .links
                .iter()
                .chain(&maps.files)
                .any(|p| p.ends_with(format!("perf-{pid}.map"))),
        "jprof's own perf map was left behind"
    );
    // jprof's private directory is gone.
    let left: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("jprof-rt-"))
        .filter(|n| {
            std::fs::read_dir(std::env::temp_dir().join(n)).is_ok_and(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().contains(&pid.to_string()))
            })
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Issue 24 (lower): a `/tmp/jit-PID.dump` jprof never asked for (here root's own, for the
/// pids jprof will launch) used to be deleted after `jprof record -- node …`. Only the files
/// jprof asked a runtime to write at that very name are removed.
#[test]
fn a_tmp_jitdump_jprof_did_not_ask_for_stays() {
    let _serial = serial();
    let work = tempfile::tempdir().unwrap();
    let script = work.path().join("hot.js");
    std::fs::write(&script, NODE_SCRIPT).unwrap();
    // A valid jitdump header (root's, as a root process's would be), for each pid ahead.
    let header = {
        let mut h = Vec::new();
        h.extend_from_slice(&0x4A69_5444u32.to_le_bytes());
        h.extend_from_slice(&1u32.to_le_bytes());
        h.extend_from_slice(&40u32.to_le_bytes());
        h.extend_from_slice(&62u32.to_le_bytes());
        h.extend_from_slice(&1u32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&1u64.to_le_bytes());
        h.extend_from_slice(&0u64.to_le_bytes());
        h
    };
    let theirs = Planted {
        links: Vec::new(),
        files: attacker_support::pids_ahead(AHEAD)
            .into_iter()
            .map(|p| PathBuf::from(format!("/tmp/jit-{p}.dump")))
            .filter(|p| std::fs::symlink_metadata(p).is_err())
            .inspect(|p| std::fs::write(p, &header).unwrap())
            .collect(),
    };
    let data = work.path().join("node.data");
    let out = run(jprof()
        .current_dir(work.path())
        .args(["record", "-o"])
        .arg(&data)
        .arg("--")
        .arg("node")
        .arg(&script)
        .env_remove("NODE_OPTIONS"));
    let pid = target_pid(&data);
    assert!(
        stderr(&out).contains("V8 wrote its jitdump"),
        "{}",
        stderr(&out)
    );
    let gone: Vec<&PathBuf> = theirs.files.iter().filter(|p| !p.exists()).collect();
    assert!(gone.is_empty(), "removed {gone:?} (target pid {pid})");
    // Node's own jitdump, which jprof asked for, is removed.
    assert!(!work.path().join(format!("jit-{pid}.dump")).exists());
}

/// CPython 3.12 (from pyenv), found without depending on PATH.
fn python312() -> PathBuf {
    let home = std::env::var("PYENV_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".pyenv"));
    std::fs::read_dir(home.join("versions"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/python3.12"))
        .find(|p| p.is_file())
        .expect("CPython 3.12 under ~/.pyenv/versions (these machines have it)")
}

/// Issue 24 with CPython 3.12's `/tmp/perf-PID.map` (a fixed name): with links and files of
/// the user's at that name for every pid jprof could get, root's Python writes through none:
/// in an unguarded /tmp jprof does not ask it, and says why (where the kernel guards /tmp,
/// jprof asks, and the kernel refuses the planted names).
#[test]
fn python_never_writes_through_perf_maps_planted_in_tmp() {
    let _serial = serial();
    let work = tempfile::tempdir().unwrap();
    let script = work.path().join("app.py");
    std::fs::write(
        &script,
        "import time\ndef hot(n):\n    return sum(i * i % 7 for i in range(n))\n\
         end = time.time() + 0.5\nwhile time.time() < end: hot(10000)\n",
    )
    .unwrap();
    let victim = victim();
    let maps = plant(Path::new("/tmp"), "perf-{pid}.map", &victim.path);
    let data = work.path().join("py.data");
    let out = run(jprof()
        .current_dir(work.path())
        .args(["record", "-o"])
        .arg(&data)
        .arg("--")
        .arg(python312())
        .arg(&script)
        .env_remove("PYTHONPERFSUPPORT"));
    let text = stderr(&out);
    let pid = target_pid(&data);
    maps.assert_untouched(&victim);
    if !tmp_guarded() {
        assert!(
            text.contains(&format!("python (pid {pid}): jprof did not ask it"))
                && text.contains("fs.protected_fifos"),
            "{text}"
        );
        let planted_here = maps
            .links
            .iter()
            .chain(&maps.files)
            .any(|p| p.ends_with(format!("perf-{pid}.map")));
        assert!(
            planted_here,
            "the launched pid {pid} was not among those planted: {text}"
        );
    }
}

/// Issue 24 with Deno: its V8 takes a path, so it writes into jprof's private directory
/// whatever the working directory is. Run from a directory the user owns (names planted for
/// every pid there, and perf maps in /tmp): nothing is written there, nothing planted is
/// touched, and the JavaScript is still named.
#[test]
fn deno_writes_only_into_the_private_directory() {
    let _serial = serial();
    let (uid, gid) = user();
    let shared = tempfile::Builder::new()
        .prefix("jprofsec-")
        .tempdir_in("/tmp")
        .unwrap();
    std::os::unix::fs::chown(shared.path(), Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let script = work.path().join("hot.js");
    std::fs::write(&script, NODE_SCRIPT).unwrap();
    let victim = victim();
    let planted = plant(shared.path(), "jit-{pid}.dump", &victim.path);
    // V8's perf map (asked for too: docs/jit.md) goes there as well, never to /tmp's name.
    let maps = plant(Path::new("/tmp"), "perf-{pid}.map", &victim.path);
    let data = work.path().join("deno.data");
    let out = run(jprof()
        .current_dir(shared.path())
        .args(["record", "-o"])
        .arg(&data)
        .args(["--", "deno", "run"])
        .arg(&script)
        .env_remove("DENO_V8_FLAGS"));
    let text = stderr(&out);
    let pid = target_pid(&data);
    planted.assert_untouched(&victim);
    maps.assert_untouched(&victim);
    assert!(
        text.contains(&format!("deno (pid {pid}): it wrote its JIT names")),
        "{text}"
    );
    let roots: Vec<String> = std::fs::read_dir(shared.path())
        .unwrap()
        .flatten()
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == 0))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(roots.is_empty(), "root wrote {roots:?}");
}

/// Issue 24 with the BEAM JIT's `/tmp/perf-PID.map` (`+JPperf map` truncates through links):
/// planted for every pid jprof could get, none is written through; jprof says why (in an
/// unguarded /tmp it no longer asks the BEAM at all: see
/// `a_runtime_started_by_the_launched_one_never_writes_through_planted_names`).
#[test]
fn erlang_never_writes_through_perf_maps_planted_in_tmp() {
    let _serial = serial();
    let work = tempfile::tempdir().unwrap();
    let victim = victim();
    let maps = plant(Path::new("/tmp"), "perf-{pid}.map", &victim.path);
    let data = work.path().join("erl.data");
    let out = run(jprof()
        .current_dir(work.path())
        .args(["record", "-o"])
        .arg(&data)
        .args([
            "--",
            "erl",
            "-noshell",
            "-eval",
            "erlang:display(ok), halt().",
        ])
        .env_remove("ERL_FLAGS"));
    let text = stderr(&out);
    let pid = target_pid(&data);
    maps.assert_untouched(&victim);
    let planted_here = maps
        .links
        .iter()
        .chain(&maps.files)
        .any(|p| p.ends_with(format!("perf-{pid}.map")));
    // Where the kernel guards /tmp, jprof asks, and the kernel refuses the planted names.
    if !tmp_guarded() {
        assert!(
            planted_here,
            "the launched pid {pid} was not planted: {text}"
        );
        assert!(
            text.contains(&format!("erlang (pid {pid}): jprof did not ask it"))
                && text.contains("every erlang process the command starts"),
            "{text}"
        );
    }
}

/// A runtime the launched one starts inherits jprof's request but writes its fixed `/tmp` name
/// for its own pid, which jprof could not create first. The user watches for the launched
/// process (jprof's own `/tmp/perf-PID.map` announces it) and plants links to a root-only file
/// and files of its own for the pids after it: root's child BEAM (`+JPperf map` from the
/// inherited `ERL_FLAGS`) truncated root's file through the link. Now, in an unguarded `/tmp`,
/// jprof asks no runtime that opens its fixed name through links (the BEAM, Mono's `--jitmap`,
/// .NET, CPython 3.13's jitdump), and says why; where the kernel guards /tmp it refuses the links.
#[test]
fn a_runtime_started_by_the_launched_one_never_writes_through_planted_names() {
    let _serial = serial();
    let work = tempfile::tempdir().unwrap();
    let victim = victim();
    let data = work.path().join("erl.data");
    // The child node starts after the user has planted (0.8 s on).
    let recorder = jprof()
        .current_dir(work.path())
        .args(["record", "-o"])
        .arg(&data)
        .args([
            "--",
            "erl",
            "-noshell",
            "-eval",
            "timer:sleep(800), os:cmd(\"erl -noshell -eval 'halt().'\"), halt().",
        ])
        .env_remove("ERL_FLAGS")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The launched pid: jprof's child.
    let launched = launched_by(&recorder);
    let maps = plant_for(
        Path::new("/tmp"),
        "perf-{pid}.map",
        &victim.path,
        launched + 1..launched + 1 + AHEAD,
    );
    let out = recorder.wait_with_output().unwrap();
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    maps.assert_untouched(&victim);
    let pid = target_pid(&data);
    assert_eq!(pid, launched, "{text}");
    if !tmp_guarded() {
        assert!(
            text.contains(&format!("erlang (pid {pid}): jprof did not ask it"))
                && text.contains("every erlang process the command starts"),
            "{text}"
        );
    }
}

/// Whether the kernel refuses names planted in /tmp (`fs.protected_symlinks`,
/// `fs.protected_regular` and `fs.protected_fifos`); these machines have all three off.
fn tmp_guarded() -> bool {
    let read = |n: &str| std::fs::read_to_string(format!("/proc/sys/fs/{n}")).unwrap_or_default();
    read("protected_symlinks").trim() == "1"
        && read("protected_regular").trim() != "0"
        && read("protected_fifos").trim() != "0"
}

/// The .NET runtime of PyPI's `dotnetcore2`, found through the Python that installed it.
fn dotnet() -> PathBuf {
    for python in ["python3", "/usr/bin/python3"] {
        let out = Command::new(python)
            .args([
                "-c",
                "import dotnetcore2, os; print(os.path.join(os.path.dirname(dotnetcore2.__file__), 'bin', 'dotnet'))",
            ])
            .output();
        if let Some(out) = out.ok().filter(|o| o.status.success()) {
            let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if path.is_file() {
                return path;
            }
        }
    }
    panic!("dotnetcore2 is not installed (.ci/run: pip install dotnetcore2)")
}

/// Issue 24 with .NET Core 3.1, which writes `/tmp/perf-PID.map` and `/tmp/perfinfo-PID.map`
/// (truncating through links): both planted for every pid jprof could get, neither is written
/// through.
#[test]
fn dotnet_never_writes_through_names_planted_in_tmp() {
    let _serial = serial();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("App.cs"),
        "class App { static void Main() { System.Console.WriteLine(6 * 7); } }\n",
    )
    .unwrap();
    let made = Command::new("mcs")
        .args(["-out:App.dll", "App.cs"])
        .current_dir(work.path())
        .status()
        .expect("mcs (apt-get install mono-mcs)");
    assert!(made.success());
    std::fs::write(
        work.path().join("App.runtimeconfig.json"),
        r#"{ "runtimeOptions": { "tfm": "netcoreapp3.1",
  "framework": { "name": "Microsoft.NETCore.App", "version": "3.1.0" },
  "configProperties": { "System.Globalization.Invariant": true } } }"#,
    )
    .unwrap();
    let victim = victim();
    let maps = plant(Path::new("/tmp"), "perf-{pid}.map", &victim.path);
    let infos = plant(Path::new("/tmp"), "perfinfo-{pid}.map", &victim.path);
    let data = work.path().join("dotnet.data");
    let out = run(jprof()
        .current_dir(work.path())
        .args(["record", "-o"])
        .arg(&data)
        .arg("--")
        .arg(dotnet())
        .arg("App.dll")
        .env_remove("TMPDIR")
        .env_remove("DOTNET_PerfMapEnabled")
        .env_remove("COMPlus_PerfMapEnabled"));
    let text = stderr(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("42"),
        "{text}"
    );
    let pid = target_pid(&data);
    maps.assert_untouched(&victim);
    infos.assert_untouched(&victim);
    if !tmp_guarded() {
        assert!(
            text.contains(&format!("dotnet (pid {pid}): jprof did not ask it"))
                && text.contains("every dotnet process the command starts"),
            "{text}"
        );
    }
}

/// FIFOs (even pids) and empty regular files of the user's (odd pids) at `pattern` in `dir` for
/// `pids`, removed when dropped; a writer still blocked opening a FIFO is let go first.
struct PlantedFifos {
    fifos: Vec<PathBuf>,
    files: Vec<PathBuf>,
}

fn plant_fifos_and_files(
    dir: &Path,
    pattern: &str,
    pids: impl IntoIterator<Item = u32>,
) -> PlantedFifos {
    let (fifos, files) = plant_each(dir, pattern, pids, |path| {
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).unwrap();
    });
    PlantedFifos { fifos, files }
}

impl PlantedFifos {
    /// Opens every FIFO for reading and closes it: a process blocked opening one for writing
    /// goes on (as when the user who planted it reads it).
    fn release_writers(&self) {
        use std::os::unix::fs::OpenOptionsExt;
        for fifo in &self.fifos {
            let _ = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(fifo);
        }
    }
}

impl Drop for PlantedFifos {
    fn drop(&mut self) {
        self.release_writers();
        for p in self.fifos.iter().chain(&self.files) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// CPython opens `/tmp/perf-PID.map` with `O_NOFOLLOW|O_APPEND` but blocking, and every
/// CPython the launched one starts does so for its own pid: a process it forks
/// (`multiprocessing`'s default on Linux re-opens the map after `fork`) and one it runs
/// (`subprocess`, inheriting `PYTHONPERFSUPPORT`). The user watches for the launched pid and
/// plants FIFOs and files of its own for the pids after it. Root's forked child used to block
/// forever opening the user's FIFO (`open(O_WRONLY)` waits for a reader: root's job hung, or
/// went on only when the user chose to read its perf map), and a child whose pid held the
/// user's file appended its function names and code addresses to it. In an unguarded `/tmp`
/// jprof now asks no CPython for the perf map, and says why and the fix.
#[test]
fn a_python_started_by_the_launched_one_is_neither_blocked_nor_read_by_planted_names() {
    let _serial = serial();
    let work = tempfile::tempdir().unwrap();
    let go = work.path().join("go");
    let script = work.path().join("app.py");
    std::fs::write(
        &script,
        "import os, subprocess, sys, time\n\
         def hot(n):\n    return sum(i * i % 7 for i in range(n))\n\
         end = time.time() + 20\n\
         while not os.path.exists(sys.argv[1]) and time.time() < end: time.sleep(0.01)\n\
         hot(20000)\n\
         child = os.fork()\n\
         if child == 0:\n    hot(20000)\n    os._exit(0)\n\
         os.waitpid(child, 0)\n\
         subprocess.run([sys.executable, '-c', 'sum(range(100000))'], check=True)\n\
         print('children done', flush=True)\n",
    )
    .unwrap();
    let data = work.path().join("py.data");
    let mut recorder = jprof()
        .current_dir(work.path())
        .args(["record", "-o"])
        .arg(&data)
        .arg("--")
        .arg(python312())
        .arg(&script)
        .arg(&go)
        .env_remove("PYTHONPERFSUPPORT")
        .env_remove("PYTHON_PERF_JIT_SUPPORT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let launched = launched_by(&recorder);
    let planted = plant_fifos_and_files(
        Path::new("/tmp"),
        "perf-{pid}.map",
        launched + 1..launched + 1 + AHEAD,
    );
    std::fs::write(&go, b"").unwrap();
    // The program takes well under a second; a minute is a hang.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while recorder.try_wait().unwrap().is_none() {
        if std::time::Instant::now() >= deadline {
            // Let the blocked child go so that the tree can end, then fail.
            planted.release_writers();
            let out = recorder.wait_with_output().unwrap();
            panic!(
                "root's child Python blocked opening a FIFO the user planted:\n{}",
                stderr(&out)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = recorder.wait_with_output().unwrap();
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("children done"),
        "{text}"
    );
    for file in &planted.files {
        let m = std::fs::symlink_metadata(file).unwrap();
        assert_eq!(
            m.len(),
            0,
            "{} received root's perf map: {:?}",
            file.display(),
            String::from_utf8_lossy(&std::fs::read(file).unwrap_or_default())
                .lines()
                .take(3)
                .collect::<Vec<_>>()
        );
    }
    assert_eq!(target_pid(&data), launched);
    if !tmp_guarded() {
        assert!(
            text.contains(&format!("python (pid {launched}): jprof did not ask it"))
                && text.contains("every python process the command starts")
                && text.contains("fs.protected_fifos"),
            "{text}"
        );
    }
}
