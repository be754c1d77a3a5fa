//! Recording more than one process (issue 28): `-p PID,PID`, `--tid`, and the whole host with
//! `-a`, on real processes. Needs perf_event_open with kernel access (root in CI).

use crate::cli_support::{jprof, start_all_cpus};

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One recording at a time: `-a` sees every process, and the CPU is shared.
static SERIAL: Mutex<()> = Mutex::new(());

/// What a test holds while it records: first every JVM to itself (`-a` loads jprof's agent
/// into every JVM it meets, and a JVM whose agent serves a recording under way is left to it:
/// another test's `-p` would find it taken; see `jdk_support::whole_host_alone`), then this
/// module's lock.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    crate::jdk_support::whole_host_alone();
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A process the test started; killed (with what it started) when the test ends.
struct Running {
    child: Child,
    /// Further processes to kill (a sandbox's inner process).
    also: Vec<u32>,
}

impl Running {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for pid in &self.also {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `cmd` and waits until it prints its first line (it runs its hot loop then).
fn start_ready(cmd: Command) -> Running {
    start_ready_logging(cmd, Stdio::null())
}

/// [`start_ready`] with the command's stderr going to `stderr`.
fn start_ready_logging(mut cmd: Command, stderr: impl Into<Stdio>) -> Running {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "{cmd:?} did not start");
    Running {
        child,
        also: Vec::new(),
    }
}

/// A shell busy loop, printing `ready` first.
fn busy_shell() -> Running {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo ready; while :; do :; done"]);
    start_ready(cmd)
}

/// `jprof record ARGS -o DATA`, which must succeed; its stderr (the summary).
fn record(data: &Path, args: &[&str]) -> String {
    let out = jprof()
        .arg("record")
        .arg("-o")
        .arg(data)
        .args(args)
        .output()
        .expect("run jprof");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "jprof record {args:?}: {stderr}");
    stderr
}

/// `jprof report -i DATA ARGS -o -`.
fn report(data: &Path, args: &[&str]) -> Output {
    jprof()
        .arg("report")
        .arg("-i")
        .arg(data)
        .args(args)
        .args(["-o", "-"])
        .output()
        .expect("run jprof report")
}

/// The folded stacks of `data` limited by `filter` (e.g. `--pid 42`): (frames, weight).
fn folded(data: &Path, filter: &[&str]) -> Vec<(Vec<String>, u64)> {
    folded_by(data, "samples", filter)
}

/// [`folded`] by `weight` (samples, off-cpu, wall).
fn folded_by(data: &Path, weight: &str, filter: &[&str]) -> Vec<(Vec<String>, u64)> {
    let mut args = vec!["--format", "collapsed", "--weight", weight];
    args.extend(filter);
    let out = report(data, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (stack, n) = l.rsplit_once(' ')?;
            Some((
                stack.split(';').map(str::to_string).collect(),
                n.parse().ok()?,
            ))
        })
        .collect()
}

fn samples(stacks: &[(Vec<String>, u64)]) -> u64 {
    stacks.iter().map(|(_, n)| n).sum()
}

/// The share of `stacks`' samples with a frame `is_hot` says is the hot function.
fn hot_share(stacks: &[(Vec<String>, u64)], is_hot: impl Fn(&str) -> bool) -> f64 {
    let hot: u64 = stacks
        .iter()
        .filter(|(s, _)| s.iter().any(|f| is_hot(f)))
        .map(|(_, n)| n)
        .sum();
    hot as f64 / samples(stacks).max(1) as f64
}

/// "Samples: N recorded, M in this report" of `report -f text ARGS`: M.
fn samples_in_report(data: &Path, args: &[&str]) -> u64 {
    let mut all = vec!["--format", "text"];
    all.extend(args);
    let out = report(data, &all);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("Samples:"))
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no sample count in: {text}"))
}

/// `-p A,B` and `-p A -p B` record both processes, each with its samples, and the summary lists
/// them as the top processes.
#[test]
fn several_pids_are_recorded_together() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (busy_shell(), busy_shell());
    for (name, args) in [
        (
            "comma",
            vec!["-p".to_string(), format!("{},{}", a.pid(), b.pid())],
        ),
        (
            "repeated",
            vec![
                "-p".to_string(),
                a.pid().to_string(),
                "--pid".to_string(),
                b.pid().to_string(),
            ],
        ),
    ] {
        let data = dir.path().join(format!("{name}.data"));
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.extend(["--duration", "1.5"]);
        let stderr = record(&data, &args);
        assert!(stderr.contains("top processes by samples:"), "{stderr}");
        for pid in [a.pid(), b.pid()] {
            assert!(
                stderr.contains(&format!("    pid {pid} (sh): ")),
                "{pid} not among the top processes: {stderr}"
            );
            assert!(
                samples_in_report(&data, &["--pid", &pid.to_string()]) > 0,
                "no samples of {pid}"
            );
        }
        let text = String::from_utf8_lossy(&report(&data, &["-f", "text"]).stdout).into_owned();
        assert!(
            text.contains(&format!("Attached:  pids {}, {}", a.pid(), b.pid())),
            "{text}"
        );
        // A process not given is not recorded.
        assert_eq!(
            samples_in_report(&data, &["--pid", &std::process::id().to_string()]),
            0
        );
    }
}

/// Another user's `perf record` keeps working while `jprof record -a` runs: an event on every
/// CPU asking the kernel for build ids made Debian's perf 6.1 abort on its own recording
/// ("assertion failed at util/build-id.c", "stack smashing detected"), so -a does not ask.
#[test]
fn perf_keeps_working_while_all_cpus_records() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("all.jprof");
    let (mut run, _stderr) = start_all_cpus(&data, &["--no-java-agent", "--duration", "30"]);
    let perf_data = dir.path().join("perf.data");
    let outcomes: Vec<Output> = (0..3)
        .map(|_| {
            Command::new("perf")
                .args(["record", "-g", "-o"])
                .arg(&perf_data)
                .args(["--", "/bin/ls", "/"])
                .env("HOME", dir.path())
                .stdout(Stdio::null())
                .output()
                .expect("perf (linux-perf) installed")
        })
        .collect();
    // SIGINT ends the recording as Ctrl-C would.
    let _ = Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status();
    let _ = run.wait();
    for out in outcomes {
        assert!(
            out.status.success(),
            "perf record failed while jprof -a ran: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `--tid` samples the named thread only, not its process's other threads.
#[test]
fn tid_records_only_that_thread() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    // Two busy threads besides the main one, which waits.
    let script = "import threading\n\
def spin():\n    while True: pass\n\
for _ in range(2): threading.Thread(target=spin, daemon=True).start()\n\
print('ready', flush=True)\n\
threading.Event().wait()\n";
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.args(["-c", script]);
    let py = start_ready(cmd);
    let pid = py.pid();
    let mut threads: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&t| t != pid)
        .collect();
    threads.sort_unstable();
    assert_eq!(threads.len(), 2, "{threads:?}");
    let (chosen, other) = (threads[0], threads[1]);
    let data = dir.path().join("tid.data");
    let stderr = record(&data, &["--tid", &chosen.to_string(), "--duration", "1.5"]);
    assert!(stderr.contains("threads 1, processes 1"), "{stderr}");
    assert!(samples_in_report(&data, &["--tid", &chosen.to_string()]) > 0);
    assert_eq!(samples_in_report(&data, &["--tid", &other.to_string()]), 0);
    assert_eq!(samples_in_report(&data, &["--tid", &pid.to_string()]), 0);
    let text = String::from_utf8_lossy(&report(&data, &["-f", "text"]).stdout).into_owned();
    assert!(
        text.contains(&format!("Attached:  tids {chosen}")),
        "{text}"
    );
}

/// `-a` records processes that ran before it started (from /proc) and processes that start
/// while it records (from the kernel's records), each with its executable's mappings.
#[test]
fn all_cpus_records_old_and_new_processes() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    // A shell under a name of its own, so its frames name their binary.
    let probe = dir.path().join("hostprobe");
    std::fs::copy("/bin/sh", &probe).unwrap();
    let mut cmd = Command::new(&probe);
    cmd.args(["-c", "echo ready; while :; do :; done"]);
    let before = start_ready(cmd);
    let data = dir.path().join("all.data");
    let jprof_run = start_recording(&data, &["-a", "--duration", "4"]);
    let newer = dir.path().join("newprobe");
    std::fs::copy("/bin/sh", &newer).unwrap();
    let mut cmd = Command::new(&newer);
    cmd.args(["-c", "echo ready; while :; do :; done"]);
    let after = start_ready(cmd);
    let out = jprof_run.wait_with_output_stderr();
    assert!(out.0.success(), "{}", out.1);
    let stderr = out.1;
    assert!(stderr.contains("top processes by samples:"), "{stderr}");
    assert!(stderr.contains("kernel frames on"), "{stderr}");
    for (running, binary) in [(&before, "hostprobe"), (&after, "newprobe")] {
        let stacks = folded(&data, &["--pid", &running.pid().to_string()]);
        assert!(samples(&stacks) > 0, "no samples of {binary}: {stderr}");
        // Its frames are in its own binary: the mapping was known.
        let in_binary = hot_share(&stacks, |f| f.contains(&format!("({binary}+0x")));
        assert!(
            in_binary > 0.5,
            "{binary}: {in_binary:.2} of its samples in its binary: {stacks:?}"
        );
    }
    // Kernel threads and other processes are there too.
    assert!(stderr.contains(&format!("    pid {} (hostprobe)", before.pid())));
    let text = String::from_utf8_lossy(&report(&data, &["-f", "text"]).stdout).into_owned();
    assert!(text.contains("Attached:  whole host (-a)"), "{text}");
    let processes: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|l| l.split(" in ").nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(processes > 10, "{text}");
}

/// Starts `jprof record ARGS -o DATA` and returns once it writes the recording (its events are
/// open by then: what starts after is recorded).
fn start_recording(data: &Path, args: &[&str]) -> Child {
    let mut run = jprof()
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(data)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let dir = data.parent().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().contains(".partial-"))
    {
        if let Ok(Some(status)) = run.try_wait() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            panic!("jprof record {args:?} ended ({status}) before writing: {stderr}");
        }
        assert!(
            Instant::now() < deadline,
            "jprof record {args:?} wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    run
}

/// A child's exit status and its stderr as text.
trait WaitStderr {
    fn wait_with_output_stderr(self) -> (std::process::ExitStatus, String);
}

impl WaitStderr for Child {
    fn wait_with_output_stderr(self) -> (std::process::ExitStatus, String) {
        let out = self.wait_with_output().unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// Whether the kernel shows a CPU PMU (hardware events exist).
fn has_pmu() -> bool {
    ["cpu", "cpu_core", "cpu_atom", "armv8_pmuv3_0"]
        .iter()
        .any(|d| Path::new("/sys/bus/event_source/devices").join(d).exists())
}

/// Touches 300 MiB page by page (page faults) and sleeps 300 times (context switches).
const FAULTS_AND_SWITCHES: &str = "import time\n\
x = [bytearray(1 << 20) for _ in range(300)]\n\
for _ in range(300): time.sleep(0.001)\n";

/// `-e page-faults` (and the other software events): the event and what its weights count are
/// in the summary, the text report, the flame graph's title, pprof's sample type and
/// speedscope's unit; never called CPU time.
#[test]
fn software_events_are_recorded_and_named_with_their_unit() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("faults.data");
    let stderr = record(
        &data,
        &[
            "-e",
            "page-faults",
            "--",
            "/usr/bin/python3",
            "-c",
            FAULTS_AND_SWITCHES,
        ],
    );
    assert!(
        stderr.contains("(page-faults @ 999 Hz, weights count page faults,"),
        "{stderr}"
    );
    let stacks = folded(&data, &[]);
    assert!(samples(&stacks) > 10, "{stacks:?}");
    // The faults happen where the new pages are first written: filling the bytearrays.
    assert!(
        hot_share(&stacks, |f| f.contains("memset")) > 0.3,
        "{stacks:?}"
    );
    let text = String::from_utf8_lossy(&report(&data, &["-f", "text"]).stdout).into_owned();
    assert!(
        text.contains("Event:     page-faults at 999 Hz, weights count page faults"),
        "{text}"
    );
    let svg = String::from_utf8_lossy(&report(&data, &[]).stdout).into_owned();
    assert!(
        svg.contains("— page-faults (page faults)"),
        "the flame graph's title does not name the event"
    );
    let pb = dir.path().join("faults.pb.gz");
    let out = jprof()
        .args(["report", "-f", "pprof", "-i"])
        .arg(&data)
        .arg("-o")
        .arg(&pb)
        .output()
        .unwrap();
    assert!(out.status.success());
    let profile = jprof::output::pprof::read(&std::fs::read(&pb).unwrap()).unwrap();
    let dump = jprof::output::pprof::dump(&profile);
    assert!(
        dump.starts_with("sample types: samples/count, page-faults/count\n"),
        "{}",
        &dump[..dump.len().min(200)]
    );
    let speedscope =
        String::from_utf8_lossy(&report(&data, &["-f", "speedscope"]).stdout).into_owned();
    assert!(
        speedscope.contains("\"unit\":\"none\""),
        "{speedscope:.300}"
    );
    assert!(!speedscope.contains("nanoseconds"));
    assert!(speedscope.contains("page-faults (page faults)"));

    for (event, unit) in [
        ("context-switches", "context switches"),
        ("cpu-migrations", "CPU migrations"),
    ] {
        let data = dir.path().join(format!("{event}.data"));
        let stderr = record(
            &data,
            &[
                "-e",
                event,
                "--",
                "/usr/bin/python3",
                "-c",
                FAULTS_AND_SWITCHES,
            ],
        );
        assert!(
            stderr.contains(&format!("({event} @ 999 Hz, weights count {unit},")),
            "{stderr}"
        );
        if event == "context-switches" {
            // 300 sleeps: each a switch, inside the sleep.
            let stacks = folded(&data, &[]);
            assert!(samples(&stacks) >= 10, "{stacks:?}");
        }
    }
    // task-clock is CPU time like cpu-clock: no count unit, times in ns.
    let data = dir.path().join("task.data");
    let busy = busy_shell();
    let pid = busy.pid().to_string();
    let stderr = record(&data, &["-e", "task-clock", "--duration", "1", "-p", &pid]);
    assert!(
        stderr.contains("(task-clock @ 999 Hz, call graph"),
        "{stderr}"
    );
}

/// Hardware events are recorded when the kernel has a PMU, and refused with the reason and the
/// events that do work when it has none (what this kernel says decides which is asserted).
#[test]
fn hardware_events_are_recorded_or_clearly_refused() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let pmu = has_pmu();
    for event in ["instructions", "cache-misses", "branch-misses"] {
        let data = dir.path().join(format!("{event}.data"));
        let out = jprof()
            .args(["record", "-e", event, "-o"])
            .arg(&data)
            .args(["--", "/usr/bin/python3", "-c", FAULTS_AND_SWITCHES])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if pmu {
            assert!(out.status.success(), "{event} with a PMU: {stderr}");
            assert!(
                stderr.contains(&format!("({event} @ 999 Hz, weights count ")),
                "{stderr}"
            );
        } else {
            eprintln!("no PMU here: -e {event} must be refused");
            assert!(!out.status.success(), "{event} without a PMU: {stderr}");
            assert!(
                stderr.contains(&format!("-e {event}: the kernel has no such event here"))
                    && stderr.contains("-e cpu-clock, task-clock, page-faults"),
                "{stderr}"
            );
            assert!(!data.exists(), "a recording was left");
        }
    }
}

/// A JVM's hot method, printing `ready` once it runs (a source-file program: no javac step).
/// The runtimes below loop until the test kills them; the JVM says `ready` once warmed up.
const JAVA_HOT: &str = "public class Hot {\n\
  static long spin(long n) { long s = 0; for (long i = 0; i < n; i++) { s += i * i % 7; } return s; }\n\
  public static void main(String[] a) {\n\
    long x = 0;\n\
    for (int i = 0; i < 500; i++) { x += spin(100000); }\n\
    System.out.println(\"ready\");\n\
    for (;;) { x += spin(100000); if (x == 42) System.out.println(x); }\n\
  }\n\
}\n";

/// Node's hot function `NAME` (`fib` or `nsfib`), printing `ready` once it runs.
fn node_hot(name: &str) -> String {
    format!(
        "function {name}(n) {{ return n < 2 ? n : {name}(n - 1) + {name}(n - 2); }}\n\
         let acc = 0; console.log('ready');\n\
         for (;;) {{ acc += {name}(20); }}\n"
    )
}

const PYTHON_HOT: &str = "import time\n\
def pyfib(n): return n if n < 2 else pyfib(n - 1) + pyfib(n - 2)\n\
print('ready', flush=True)\n\
while True: pyfib(18)\n";

/// The CPython 3.12 of pyenv (these machines have it), found without depending on PATH.
fn python_3_12() -> std::path::PathBuf {
    let root = std::env::var("PYENV_ROOT").map_or_else(
        |_| Path::new(&std::env::var("HOME").unwrap()).join(".pyenv"),
        std::path::PathBuf::from,
    );
    std::fs::read_dir(root.join("versions"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/python3.12"))
        .find(|p| p.is_file())
        .expect("CPython 3.12 under ~/.pyenv/versions (these machines have it)")
}

/// Tells a frame of the hot function.
type IsHot = dyn Fn(&str) -> bool;

/// The "done when": a JVM started with no flags, a Node with --perf-basic-prof, a
/// CPython 3.12 with -X perf and a Node in its own pid + mount namespace run at once; `jprof
/// record -a --duration 4` names each one's hot function in its `report --pid`, in about as
/// many of its samples as attaching to that process alone (`-p PID`) does.
#[test]
fn all_cpus_names_every_runtimes_hot_functions_like_attaching_alone() {
    let _g = serial();
    crate::java_e2e::agent();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Hot.java"), JAVA_HOT).unwrap();
    std::fs::write(dir.path().join("hot.py"), PYTHON_HOT).unwrap();

    let mut java = Command::new(crate::jdk_support::java());
    java.current_dir(dir.path())
        .env_remove("JAVA_TOOL_OPTIONS")
        .arg("Hot.java");
    let java = start_ready(java);
    let mut node = Command::new("node");
    node.current_dir(dir.path())
        .env_remove("NODE_OPTIONS")
        .args(["--perf-basic-prof", "-e", &node_hot("fib")]);
    let node = start_ready(node);
    let mut python = Command::new(python_3_12());
    python
        .current_dir(dir.path())
        .env_remove("PYTHONPERFSUPPORT")
        .args(["-X", "perf", "hot.py"]);
    let python = start_ready(python);
    // Pid 1 of its own pid namespace, with its own /tmp (where V8 writes perf-1.map).
    let script = "mount -t tmpfs tmpfs /tmp && cd /tmp && exec node --perf-basic-prof -e \"$0\"";
    let mut sandbox = Command::new("unshare");
    sandbox
        .args([
            "--mount",
            "--pid",
            "--fork",
            "--mount-proc",
            "--propagation",
            "private",
        ])
        .args(["sh", "-c", script, &node_hot("nsfib")])
        .env_remove("NODE_OPTIONS");
    let mut sandbox = start_ready(sandbox);
    let unshare = sandbox.pid();
    let inner: u32 = std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children"))
        .unwrap()
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .expect("unshare's child, the sandboxed node");
    sandbox.also.push(inner);
    let status = std::fs::read_to_string(format!("/proc/{inner}/status")).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("NSpid:") && l.ends_with("\t1")),
        "the sandboxed node is not pid 1 of its namespace: {status}"
    );

    let data = dir.path().join("all.data");
    let summary = record(&data, &["-a", "--duration", "4"]);
    assert!(summary.contains("loaded jprof's JVMTI agent"), "{summary}");
    assert!(
        summary.contains(&format!(
            "perf map /proc/{inner}/root/tmp/perf-1.map (pid {inner})"
        )),
        "the sandboxed node's perf map was not read in its own root: {summary}"
    );
    let cases: [(&str, u32, &IsHot); 4] = [
        ("java", java.pid(), &|f: &str| f.starts_with("Hot.spin")),
        ("node", node.pid(), &|f: &str| f.starts_with("fib ")),
        ("python", python.pid(), &|f: &str| f.contains("pyfib")),
        ("namespaced node", inner, &|f: &str| f.starts_with("nsfib ")),
    ];
    for (what, pid, is_hot) in cases {
        let pid_arg = pid.to_string();
        let in_all = folded(&data, &["--pid", &pid_arg]);
        let share_all = hot_share(&in_all, is_hot);
        let alone_data = dir.path().join(format!("{pid}.data"));
        record(&alone_data, &["-p", &pid_arg, "--duration", "2"]);
        let alone = folded(&alone_data, &["--pid", &pid_arg]);
        let share_alone = hot_share(&alone, is_hot);
        eprintln!(
            "{what} (pid {pid}): hot function in {:.1}% of {} samples with -a, {:.1}% of {} alone",
            100.0 * share_all,
            samples(&in_all),
            100.0 * share_alone,
            samples(&alone)
        );
        assert!(samples(&in_all) >= 50, "{what}: too few samples with -a");
        assert!(share_alone > 0.3, "{what} alone: {alone:?}");
        // Python: -a unwinds with frame pointers (one event per CPU for every process), -p a
        // CPython 3.12 with DWARF (docs/python.md), so a share of its callers is lost with -a.
        let tolerance = if what == "python" { 0.35 } else { 0.15 };
        assert!(
            share_all >= share_alone - tolerance && share_all > 0.3,
            "{what}: hot function in {share_all:.2} of the samples with -a, {share_alone:.2} \
             alone: {in_all:?}"
        );
    }
}

/// `-a --off-cpu` (CPU-wide switch records): a program started during the recording that
/// sleeps 8 × 125 ms in `wait_in_sleeper` has that second off the CPU under that function, and
/// its threads' wall time is their real time, as when jprof launches it (not the recording's
/// end: a switch-out never paired would wait until then).
#[test]
fn all_cpus_off_cpu_time_lands_under_the_waiting_function() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("off.data");
    let waits = crate::off_cpu::waits();
    let jprof_run = start_recording(&data, &["-a", "--off-cpu", "--duration", "4"]);
    let started = Instant::now();
    let mut program = Command::new(waits).spawn().unwrap();
    let pid = program.id().to_string();
    assert!(program.wait().unwrap().success());
    // On a busy machine a thread woken from its sleep may wait for a CPU, which counts as off
    // the CPU: each time is at least 1 s and at most the program's whole life (+10%: the
    // cpu-clock periods of the wall time's CPU samples are the kernel's estimates).
    let lifetime = started.elapsed().as_secs_f64();
    let (status, summary) = jprof_run.wait_with_output_stderr();
    assert!(status.success(), "{summary}");
    assert!(
        summary.contains("off-CPU: ") && summary.contains("switches off the CPU"),
        "{summary}"
    );
    // The idle tasks (pid 0: a CPU idles while the sleeper sleeps) are kernel threads, with no
    // user stack to be whole or cut: they get no stacks line.
    assert!(
        summary.contains("    pid 0 (") && !summary.contains("note: stacks: pid 0 ("),
        "{summary}"
    );
    let weighed = |weight: &str| {
        let stacks = folded_by(&data, weight, &["--pid", &pid]);
        let under = |frame: &str| -> u64 {
            stacks
                .iter()
                .filter(|(s, _)| s.iter().any(|f| f == frame))
                .map(|(_, n)| n)
                .sum()
        };
        (
            under("wait_in_sleeper"),
            under("main"),
            under("spin_in_spinner"),
            stacks,
        )
    };
    let (asleep, main_off, spinner_off, off) = weighed("off-cpu");
    let (_, main_on, spinner_on, _) = weighed("samples");
    // What a failure needs to be understood: each thread's time off the CPU (from the switch
    // records) and its CPU samples (each weighs one period in the wall time), and the summary.
    // While the kernel throttles sampling (a loaded machine), a thread on the CPU goes
    // unsampled: its wall can be short by as much as the summary says went without samples.
    let throttled = throttled_seconds(&summary);
    let within = |ns: u64, what: &str| {
        let s = ns as f64 / 1e9;
        assert!(
            (0.97 - throttled..=lifetime * 1.1).contains(&s),
            "{what}: {s:.3} s, expected between 1 s (less {throttled:.3} s throttled) and the \
             program's {lifetime:.3} s (+10%); \
             off the CPU: main {main_off} ns, spinner {spinner_off} ns; CPU samples: main \
             {main_on}, spinner {spinner_on}\n{summary}"
        );
    };
    within(asleep, "off-CPU under wait_in_sleeper");
    assert!(
        off.iter()
            .any(|(s, _)| s.join(";").contains("main;wait_in_sleeper;usleep")),
        "the sleeping stack is not whole: {off:?}"
    );
    // Every wait of its two threads fits in their lives, their last switches as they exit
    // included (the kernel names a dead task's tid -1; it waited until the recording's end).
    let waited = samples(&off) as f64 / 1e9;
    assert!(
        waited <= 2.0 * lifetime * 1.1,
        "{waited:.3} s off the CPU in two threads that lived {lifetime:.3} s: {off:?}"
    );
    let (_, main, spinner, _) = weighed("wall");
    within(main, "wall of the main thread");
    within(spinner, "wall of the spinning thread");
}

/// `-a` reads every JVM's frames past the 1 KiB stack copy, as a launched `java` gets them: one
/// running before the recording (found in /proc) and one started during it (found as it maps
/// libjvm.so). `Deep` runs 800 interpreted frames deep, far past the copy and the kernel's
/// 127-frame callchain; before, none of its samples reached `main`. Now ≥ 90% of `spin`'s
/// weight in each JVM has the whole named stack, and the summary counts the frames read.
#[test]
fn all_cpus_reads_every_jvms_frames_past_the_stack_copy() {
    const DEPTH: usize = 800;
    let _g = serial();
    crate::java_e2e::agent();
    let classes = crate::java_e2e::example_classes("examples/java/deep/Deep.java");
    let deep = || {
        let mut java = Command::new(crate::jdk_support::java());
        java.env_remove("JAVA_TOOL_OPTIONS")
            .args(["-Xint", "-cp"])
            .arg(classes.path())
            .args(["Deep", &DEPTH.to_string(), "60"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Running {
            child: java.spawn().unwrap(),
            also: Vec::new(),
        }
    };
    let before = deep();
    // Running before: the recording finds it in /proc, not by its mapping libjvm.so.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !maps_libjvm(before.pid()) {
        assert!(Instant::now() < deadline, "the JVM did not map libjvm.so");
        std::thread::sleep(Duration::from_millis(20));
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("deep.data");
    let recording = start_recording(&data, &["-a", "--duration", "6"]);
    let during = deep();
    let (status, summary) = recording.wait_with_output_stderr();
    assert!(status.success(), "{summary}");
    let (past, read) = crate::java_e2e::deep_frames_read(&summary);
    assert!(
        past >= 1000 && read * 10 >= past * 9,
        "frames read for {read} of {past} deep samples\n{summary}"
    );
    for (jvm, when) in [(&before, "running before"), (&during, "started during")] {
        let stacks = folded(&data, &["--pid", &jvm.pid().to_string()]);
        let in_spin = |s: &[String]| s.iter().any(|f| f == "Deep.spin_[int]");
        let weight = |pred: &dyn Fn(&[String]) -> bool| -> u64 {
            stacks.iter().filter(|(s, _)| pred(s)).map(|(_, n)| n).sum()
        };
        let spin = weight(&in_spin);
        let whole = weight(&|s| {
            in_spin(s)
                && s.iter().any(|f| f == "Deep.main_[int]")
                && s.iter().filter(|f| *f == "Deep.descend_[int]").count() == DEPTH + 1
                && !s.iter().any(|f| f == "Interpreter_[j]")
        });
        assert!(
            spin > 0 && whole * 10 >= spin * 9,
            "the JVM {when} the recording: {whole} of {spin} weight in spin has the whole \
             named stack\n{summary}"
        );
    }
}

/// Whether process `pid` maps a libjvm.so.
fn maps_libjvm(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .is_ok_and(|maps| maps.lines().any(|l| l.ends_with("/libjvm.so")))
}

/// The time the summary says sampling was throttled, in seconds (0 when it was not).
fn throttled_seconds(summary: &str) -> f64 {
    let Some(at) = summary.find(" ms without samples in all") else {
        return 0.0;
    };
    let number = summary[..at].rsplit('(').next().unwrap();
    number.parse::<f64>().unwrap() / 1e3
}

/// `Hot.java` in `dir`, run by the first JDK without jprof's environment, until it says ready;
/// its stderr goes to `dir/NAME.err`.
fn start_hot_jvm(dir: &Path, name: &str) -> Running {
    std::fs::write(dir.join("Hot.java"), JAVA_HOT).unwrap();
    let mut java = Command::new(crate::jdk_support::java());
    java.current_dir(dir)
        .env_remove("JAVA_TOOL_OPTIONS")
        .arg("Hot.java");
    let stderr = std::fs::File::create(dir.join(format!("{name}.err"))).unwrap();
    start_ready_logging(java, stderr)
}

/// Whether process `pid` maps jprof's agent.
fn maps_agent(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .is_ok_and(|maps| maps.contains(jprof::record::AGENT_FILE))
}

/// The CPU time process `pid` has used so far, all its threads (user and system time in
/// `/proc/PID/stat`); zero once it is gone.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command's `)`: the state (field 3), ..., utime (14), stime (15).
    let ticks: u64 = stat.rsplit_once(')').map_or(0, |(_, fields)| {
        fields
            .split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|t| t.parse::<u64>().ok())
            .sum()
    });
    let per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

/// A `record -a` without `--duration` that the test stops itself: SIGKILLed if the test fails
/// first, so a failed assertion does not leave a host-wide recording running after the tests.
struct Unstopped(Option<(Child, BufReader<std::process::ChildStderr>)>);

impl Unstopped {
    fn start(data: &Path, args: &[&str]) -> Self {
        Unstopped(Some(start_all_cpus(data, args)))
    }

    /// [`stop_recording`].
    fn stop(mut self) -> String {
        stop_recording(self.0.take().expect("stopped once"))
    }
}

impl Drop for Unstopped {
    fn drop(&mut self) {
        if let Some((mut run, _)) = self.0.take() {
            let _ = run.kill();
            let _ = run.wait();
        }
    }
}

/// Stops a recording [`start_all_cpus`] started (SIGINT, as Ctrl-C) and returns its summary.
fn stop_recording((mut run, mut stderr): (Child, BufReader<std::process::ChildStderr>)) -> String {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let mut summary = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut summary).unwrap();
    let status = run.wait().unwrap();
    assert!(status.success(), "{summary}");
    summary
}

/// A JVM that starts during `-a` gets jprof's agent: the kernel's MMAP2 record of its libjvm.so
/// starts an attach, which waits until the JVM can take one; its hot method is named in its
/// `report --pid`. With `--no-java-agent` a JVM that starts is left alone.
#[test]
fn all_cpus_gives_the_agent_to_jvms_that_start_during_the_recording() {
    let _g = serial();
    crate::java_e2e::agent();
    let dir = tempfile::tempdir().unwrap();

    let off = dir.path().join("off.data");
    let run = Unstopped::start(&off, &["--no-java-agent"]);
    let jvm = start_hot_jvm(dir.path(), "off");
    // With the agent on, the attach comes before `ready` (the source launcher compiles Hot.java
    // first; the test below waits for it): two seconds more show that none comes.
    std::thread::sleep(Duration::from_secs(2));
    assert!(!maps_agent(jvm.pid()), "--no-java-agent loaded the agent");
    let summary = run.stop();
    assert!(
        !summary.contains(&format!("HotSpot JVM {}", jvm.pid())),
        "{summary}"
    );
    drop(jvm);

    let on = dir.path().join("on.data");
    let run = Unstopped::start(&on, &[]);
    let jvm = start_hot_jvm(dir.path(), "on");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !maps_agent(jvm.pid()) {
        if Instant::now() > deadline {
            let summary = run.stop();
            let stderr = std::fs::read_to_string(dir.path().join("on.err")).unwrap_or_default();
            panic!(
                "no agent in JVM {} started during -a; its stderr: {stderr}; jprof: {summary}",
                jvm.pid()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Samples of the hot loop with its JIT names known: the recording goes on until the JVM
    // has used as much CPU time again as its start took (the source launcher compiling
    // Hot.java, the JIT warming up), and 2 s more. The start is a fixed amount of work; a fixed
    // wall time for the loop gave it 28% of the JVM's samples on a machine at load 13.
    let pid = jvm.pid();
    let until = cpu_time(pid) * 2 + Duration::from_secs(2);
    let deadline = Instant::now() + Duration::from_secs(300);
    while cpu_time(pid) < until {
        if Instant::now() > deadline {
            let summary = run.stop();
            panic!(
                "JVM {pid} used only {:?} of CPU time in 300 s, {until:?} awaited; jprof: {summary}",
                cpu_time(pid)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let summary = run.stop();
    assert!(
        summary.contains(&format!(
            "HotSpot JVM {pid}: loaded jprof's JVMTI agent (it started during the recording)"
        )),
        "{summary}"
    );
    let stacks = folded(&on, &["--pid", &pid.to_string()]);
    let hot = hot_share(&stacks, |f| f.starts_with("Hot.spin"));
    eprintln!(
        "JVM started during -a: Hot.spin in {:.1}% of {} samples",
        100.0 * hot,
        samples(&stacks)
    );
    assert!(samples(&stacks) >= 50, "{stacks:?}");
    assert!(hot > 0.3, "{stacks:?}");
}

/// `-a` keeps a JVM's line tables, inline trees and method names only for what the samples hit
/// (JIT_DEBUG), and its reports read as they do with the whole jitdumps put back: every
/// process, with lines, on- and off-CPU.
#[test]
fn all_cpus_keeps_jit_tables_only_for_what_samples_hit() {
    let _serial = serial();
    crate::java_e2e::agent();
    let dir = tempfile::tempdir().unwrap();
    let jvm = start_hot_jvm(dir.path(), "hot");
    let data = dir.path().join("host.data");
    let summary = record(
        &data,
        &["-a", "--duration", "3", "--keep-side-files", "--off-cpu"],
    );
    let pid = jvm.pid().to_string();
    let whole = crate::java_e2e::with_whole_jitdumps(&std::fs::read(&data).unwrap());
    assert!(
        whole
            .dumps
            .iter()
            .any(|d| d.ends_with(format!("jit-{pid}.dump"))),
        "the JVM's jitdump stored and kept: {:?}\n{summary}",
        whole.dumps
    );
    assert!(
        whole.trees_kept > 0 && whole.trees_kept < whole.trees_in_files,
        "{} of {} inline trees kept",
        whole.trees_kept,
        whole.trees_in_files
    );
    let full = dir.path().join("full.data");
    std::fs::write(&full, &whole.bytes).unwrap();
    for args in [
        &["--lines"][..],
        &["--lines", "--pid", &pid],
        &["--lines", "--weight", "off-cpu"],
    ] {
        let mut args = args.to_vec();
        args.extend(["--format", "collapsed"]);
        let (kept, all) = (report(&data, &args), report(&full, &args));
        assert!(kept.status.success() && all.status.success(), "{kept:?}");
        assert_eq!(
            String::from_utf8_lossy(&kept.stdout),
            String::from_utf8_lossy(&all.stdout),
            "report {args:?}"
        );
    }
    let hot = folded(&data, &["--pid", &pid]);
    assert!(
        hot.iter()
            .any(|(s, _)| s.iter().any(|f| f.starts_with("Hot.spin"))),
        "{hot:?}"
    );
}
