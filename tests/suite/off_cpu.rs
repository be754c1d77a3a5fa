//! `record --off-cpu` end to end on examples/offcpu/waits.c, whose waits are known: the main
//! thread sleeps 8 × 125 ms in `wait_in_sleeper`, a second thread spins for 1 s in
//! `spin_in_spinner`. Every output format carries the off-CPU and wall weights.

use crate::cli_support;
use crate::live_support;
use cli_support::{jprof, JPROF};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The tests measure time: one at a time, so they do not preempt each other's threads.
static SERIAL: Mutex<()> = Mutex::new(());

/// examples/offcpu/waits, built once (frame pointers kept, as the README asks of native code).
pub(crate) fn waits() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("offcpu-waits");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/offcpu/waits.c");
        let status = Command::new("cc")
            .args(["-O1", "-g", "-fno-omit-frame-pointer", "-pthread"])
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .status()
            .expect("run cc");
        assert!(status.success(), "cc failed on {}", src.display());
        out
    })
}

fn ok(out: Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{what} failed: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned() + &stderr
}

fn record(dir: &Path, extra: &[&str], args: &[&str]) -> (PathBuf, String) {
    let data = dir.join("off.data");
    let out = jprof()
        .args(["record", "-o"])
        .arg(&data)
        .args(extra)
        .arg("--")
        .arg(waits())
        .args(args)
        .output()
        .expect("run jprof record");
    (data, ok(out, "jprof record"))
}

/// `report --format collapsed` with `args`: folded line → weight.
fn folded(data: &Path, args: &[&str]) -> Vec<(String, u64)> {
    let out = jprof()
        .args(["report", "-f", "collapsed", "-i"])
        .arg(data)
        .args(args)
        .output()
        .expect("run jprof report");
    ok(out, "jprof report")
        .lines()
        .filter_map(|l| {
            let (stack, n) = l.rsplit_once(' ')?;
            Some((stack.to_string(), n.parse().ok()?))
        })
        .collect()
}

/// Total weight of the lines whose stack contains `frame`.
fn under(lines: &[(String, u64)], frame: &str) -> u64 {
    lines
        .iter()
        .filter(|(s, _)| s.split(';').any(|f| f == frame))
        .map(|(_, n)| n)
        .sum()
}

/// `report --weight off-cpu` on a recording without off-CPU data: a usage error (exit 2);
/// returns its message.
fn off_cpu_weight_refused(data: &Path) -> String {
    let out = jprof()
        .args(["report", "--weight", "off-cpu", "-i"])
        .arg(data)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn within(value: u64, expected: f64, tolerance: f64, what: &str) {
    let v = value as f64;
    assert!(
        (v - expected).abs() <= expected * tolerance,
        "{what}: {:.3} s, expected {:.3} s ± {:.0}%",
        v / 1e9,
        expected / 1e9,
        tolerance * 100.0
    );
}

#[test]
fn off_cpu_time_lands_under_the_waiting_function_and_wall_adds_up() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, summary) = record(dir.path(), &["--off-cpu"], &[]);
    assert!(
        summary.contains("off-CPU: ") && summary.contains("switches off the CPU"),
        "no off-CPU line in the summary: {summary}"
    );

    // 8 × 125 ms asleep, under the function that slept, with its callers (fp mode, libc's
    // frameless syscall wrappers recovered by CFI).
    let off = folded(&data, &["--weight", "off-cpu"]);
    let asleep = under(&off, "wait_in_sleeper");
    within(asleep, 1e9, 0.05, "off-CPU under wait_in_sleeper");
    assert!(
        off.iter()
            .any(|(s, _)| s.contains("main;wait_in_sleeper;usleep")),
        "the sleeping stack is not whole: {off:?}"
    );
    // The spinner never waits: what time it spent off the CPU (much on a loaded machine) was
    // preemption, entered from its own loop by an interrupt, never through a blocking call.
    for (stack, ns) in off.iter().filter(|(s, _)| s.contains("spin_in_spinner;")) {
        let next = stack
            .split("spin_in_spinner;")
            .nth(1)
            .and_then(|rest| rest.split(';').next())
            .unwrap_or_default();
        assert!(
            next.ends_with("_[k]") || next.contains("clock_gettime"),
            "the spinner waited ({ns} ns) in {stack}"
        );
    }

    // Wall time of each thread is its real time (1 s each).
    let wall = folded(&data, &["--weight", "wall"]);
    within(under(&wall, "main"), 1e9, 0.10, "wall of the main thread");
    within(
        under(&wall, "spin_in_spinner"),
        1e9,
        0.10,
        "wall of the spinning thread",
    );

    // The default view is the CPU samples alone: the sleep is not in it.
    let cpu = folded(&data, &[]);
    let cpu_total: u64 = cpu.iter().map(|(_, n)| n).sum();
    assert!(cpu_total > 0);
    assert!(
        under(&cpu, "wait_in_sleeper") < cpu_total / 20,
        "the default (CPU) view shows the sleep: {cpu:?}"
    );
    // Filters work on off-CPU samples too: the spinner thread alone has no sleep.
    let text = ok(
        jprof()
            .args(["report", "-f", "text", "--weight", "off-cpu", "-i"])
            .arg(&data)
            .output()
            .unwrap(),
        "report text",
    );
    assert!(text.contains("Off-CPU:"), "{text}");
    assert!(text.contains("weights: ns off the CPU"), "{text}");
    let late = folded(&data, &["--weight", "off-cpu", "--time", "0.6.."]);
    let late_asleep = under(&late, "wait_in_sleeper");
    assert!(
        late_asleep < asleep && late_asleep > asleep / 5,
        "--time 0.6.. kept {late_asleep} of {asleep} ns"
    );
}

#[test]
fn every_format_carries_the_off_cpu_weight() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, _) = record(dir.path(), &["--off-cpu"], &[]);
    let report = |format: &str, file: &str, weight: &str| -> Vec<u8> {
        let path = dir.path().join(file);
        ok(
            jprof()
                .args(["report", "-f", format, "--weight", weight, "-i"])
                .arg(&data)
                .arg("-o")
                .arg(&path)
                .output()
                .unwrap(),
            format,
        );
        std::fs::read(&path).unwrap()
    };
    // The text report's top list names the user-level function that waited, not the
    // scheduler every wait ends in; the kernel paths get their own table.
    let text = String::from_utf8(report("text", "off.txt", "off-cpu")).unwrap();
    let by_self = &text[text
        .find("Top 15 functions by self time")
        .expect("self table")..];
    let by_self = &by_self[..by_self.find("\n\n").unwrap_or(by_self.len())];
    let first = by_self.lines().nth(2).expect("a row");
    assert!(
        first.contains("sleep") && !first.ends_with("_[k]"),
        "the top waiting function is not the user-level sleep: {by_self}"
    );
    assert!(!by_self.contains("schedule_[k]"), "{by_self}");
    let paths = &text[text
        .find("kernel paths of the waits off the CPU:")
        .expect("kernel paths")..];
    assert!(
        paths.contains("nanosleep") && paths.contains("> schedule"),
        "{paths}"
    );

    let svg = String::from_utf8(report("flamegraph", "off.svg", "off-cpu")).unwrap();
    assert!(svg.contains("off-CPU time"), "the SVG's title says nothing");
    // Tooltips give the time with its unit: `wait_in_sleeper (1.00 s off-CPU, 49.95%)`.
    let has_unit = |svg: &str| {
        ["s off-CPU, ", " ns off-CPU, "]
            .iter()
            .any(|u| svg.contains(u))
    };
    assert!(has_unit(&svg), "the SVG's counts have no unit");
    assert!(svg.contains("wait_in_sleeper"));
    let wall_svg = String::from_utf8(report("flamegraph", "wall.svg", "wall")).unwrap();
    assert!(
        wall_svg.contains("wall time"),
        "the wall SVG's title says nothing"
    );

    let gunzip = |bytes: Vec<u8>| {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes.as_slice())
            .read_to_end(&mut out)
            .unwrap();
        out
    };
    let pprof = gunzip(report("pprof", "off.pb.gz", "off-cpu"));
    let pprof_text = String::from_utf8_lossy(&pprof);
    assert!(pprof_text.contains("off-cpu"), "pprof sample type");
    assert!(pprof_text.contains("nanoseconds"), "pprof unit");
    let speedscope = String::from_utf8(report("speedscope", "off.json", "off-cpu")).unwrap();
    assert!(
        speedscope.contains("\"unit\":\"nanoseconds\""),
        "speedscope unit"
    );
    assert!(speedscope.contains("wait_in_sleeper"));
    let firefox = String::from_utf8(gunzip(report("firefox", "off.json.gz", "wall"))).unwrap();
    assert!(firefox.contains("wait_in_sleeper"));
    assert!(firefox.contains("wall time"), "firefox profile name");

    // jprof diff compares two off-CPU recordings by the same weight.
    let svg = dir.path().join("diff.svg");
    ok(
        jprof()
            .args(["diff", "--weight", "off-cpu", "-o"])
            .arg(&svg)
            .arg(&data)
            .arg(&data)
            .output()
            .unwrap(),
        "diff",
    );
    let diff = std::fs::read_to_string(&svg).unwrap();
    assert!(diff.contains("wait_in_sleeper") && has_unit(&diff));
}

#[test]
fn the_floor_counts_short_switches_without_storing_them() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    // Every sleep is 125 ms: a 200 ms floor stores none of them.
    let (data, summary) = record(dir.path(), &["--off-cpu", "--off-cpu-min", "200ms"], &[]);
    assert!(
        summary.contains("shorter than 200ms counted only"),
        "{summary}"
    );
    let rec = jprof::recording::Recording::open(&data).unwrap();
    let counts = rec.summary.unwrap().off_cpu.expect("off-CPU counts");
    assert!(counts.short >= 8, "{counts:?}");
    // The 1 s of sleeps is among them (with whatever preempted the spinner on a busy machine).
    assert!(
        counts.short_ns >= 950_000_000,
        "short switches' total {} ns misses the sleeps",
        counts.short_ns
    );
    let off = folded(&data, &["--weight", "off-cpu"]);
    assert_eq!(under(&off, "wait_in_sleeper"), 0, "{off:?}");
}

#[test]
fn off_cpu_weights_need_an_off_cpu_recording_and_say_so() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, _) = record(dir.path(), &[], &[]);
    let stderr = off_cpu_weight_refused(&data);
    assert!(stderr.contains("jprof record --off-cpu"), "{stderr}");
    let bad = jprof()
        .args(["record", "--off-cpu", "--off-cpu-min", "10", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("10us"));
}

#[test]
fn attach_records_off_cpu_time_of_a_running_process() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    // A long ping-pong: both threads block on pipes all the time.
    let mut target = Command::new(waits())
        .args(["pingpong", "400000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Attached once both threads exist (before, only the pinger could be seen waiting).
    let tasks = format!("/proc/{}/task", target.id());
    live_support::wait_for("the ponger thread", Duration::from_secs(20), || {
        (std::fs::read_dir(&tasks).map_or(0, Iterator::count) >= 2).then_some(())
    });
    let data = dir.path().join("attach.data");
    let out = jprof()
        .args(["record", "--off-cpu", "--duration", "1", "-o"])
        .arg(&data)
        .args(["-p", &target.id().to_string()])
        .output()
        .unwrap();
    let _ = target.kill();
    let _ = target.wait();
    ok(out, "jprof record -p --off-cpu");
    let off = folded(&data, &["--weight", "off-cpu"]);
    let pinger = under(&off, "serve_in_pinger");
    let ponger = under(&off, "echo_in_ponger");
    assert!(
        pinger > 100_000_000 && ponger > 100_000_000,
        "the ping-pong threads wait on each other: pinger {pinger} ns, ponger {ponger} ns"
    );
}

/// Unprivileged with perf_event_paranoid 2, kernel-mode events are refused, and a switch-out
/// (which happens in the kernel) would never fire: jprof says so and records CPU samples, not
/// a program that seems never to wait. Run as `nobody` (the suite runs as root, as CI does).
#[test]
fn unprivileged_off_cpu_says_why_it_recorded_cpu_samples_only() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(2);
    if paranoid < 2 {
        eprintln!(
            "skipped: perf_event_paranoid is {paranoid}, so unprivileged users get kernel events"
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let data = dir.path().join("user.data");
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
        .arg(JPROF)
        .args(["record", "--off-cpu", "-o"])
        .arg(&data)
        .arg("--")
        .arg(waits())
        .current_dir(dir.path())
        .output()
        .expect("run setpriv");
    let stderr = ok(out, "unprivileged jprof record --off-cpu");
    assert!(
        stderr.contains("--off-cpu needs kernel-mode events")
            && stderr.contains("CPU samples only"),
        "{stderr}"
    );
    off_cpu_weight_refused(&data);
}

/// A Node thread blocked in `Atomics.wait` (examples/offcpu/waits.js: 8 × 125 ms) has its wait
/// under its JavaScript frames, named through V8's jitdump: the time under `waitInSleeper`
/// matches what the script measured itself within 5%.
#[test]
fn node_waits_are_under_their_javascript_frames() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("node.data");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/offcpu/waits.js");
    let out = jprof()
        .args(["record", "--off-cpu", "-o"])
        .arg(&data)
        .arg("--")
        .arg("node")
        .arg(&script)
        .current_dir(dir.path())
        .output()
        .expect("run jprof record -- node");
    let text = ok(out, "jprof record -- node");
    let waited_ms: f64 = text
        .split_whitespace()
        .skip_while(|w| *w != "waited")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `waited N ms` line: {text}"));
    let off = folded(&data, &["--weight", "off-cpu"]);
    let named = off
        .iter()
        .filter(|(s, _)| {
            s.split(';')
                .any(|f| f.contains("waitInSleeper") && f.ends_with("_[j]"))
        })
        .map(|(_, n)| n)
        .sum::<u64>();
    within(
        named,
        waited_ms * 1e6,
        0.05,
        "off-CPU under JS waitInSleeper",
    );
}

/// How many CPUs are online (`/sys/devices/system/cpu/online`, e.g. `0-1` or `0,2-3`): jprof
/// opens one ring on each.
fn online_cpus() -> usize {
    let list = std::fs::read_to_string("/sys/devices/system/cpu/online").expect("online CPUs");
    list.trim()
        .split(',')
        .map(|range| match range.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// The sizes of jprof's perf rings (its `anon_inode:[perf_event]` mappings) once it has mapped
/// one on every online CPU (they are mapped one after the other: read too early, the list
/// held the first alone), while it records `cat`, which waits on jprof's stdin until the test
/// closes it.
fn ring_sizes(extra: &[&str]) -> Vec<u64> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut recorder = Command::new(JPROF)
        .args(["record", "-o"])
        .arg(dir.path().join("rings.data"))
        .args(extra)
        .args(["--", "cat"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run jprof record");
    let maps = format!("/proc/{}/maps", recorder.id());
    let sizes = live_support::wait_for("jprof's rings mapped", Duration::from_secs(20), || {
        let text = std::fs::read_to_string(&maps).ok()?;
        let sizes: Vec<u64> = text
            .lines()
            .filter(|l| l.ends_with("anon_inode:[perf_event]"))
            .filter_map(|l| {
                let (start, end) = l.split_whitespace().next()?.split_once('-')?;
                let (start, end) = (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16));
                Some(end.ok()? - start.ok()?)
            })
            .collect();
        (sizes.len() >= online_cpus()).then_some(sizes)
    });
    drop(recorder.stdin.take());
    let out = recorder.wait_with_output().expect("wait for jprof record");
    ok(out, "jprof record");
    sizes
}

/// `--off-cpu` writes a sample with its stack at every switch: jprof gives each CPU a 4 MiB
/// ring (woken at 256 KiB, unit-tested in record::events) rather than the 1 MiB of CPU
/// sampling, so its reader wakes four times less often beside a switch-heavy target with as
/// much room left after a wakeup (docs/performance.md#off-cpu).
#[test]
fn off_cpu_records_into_larger_rings() {
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .expect("the page size") as u64;
    let cpu_only = ring_sizes(&[]);
    assert!(
        cpu_only.iter().all(|&s| s == page + (1 << 20)),
        "CPU sampling: a 1 MiB ring per CPU (and its header page), got {cpu_only:?}"
    );
    let off_cpu = ring_sizes(&["--off-cpu"]);
    assert_eq!(off_cpu.len(), cpu_only.len(), "one ring per CPU either way");
    assert!(
        off_cpu.iter().all(|&s| s == page + (4 << 20)),
        "--off-cpu: a 4 MiB ring per CPU (and its header page), got {off_cpu:?}"
    );
}

/// A thread that goes off the CPU on the first byte of a function (a page fault there, held
/// for 300 ms by a userfaultfd handler) is charged to that function: the first user address
/// of a switch-out is where the thread stood, not a return address (at `addr - 1` it would
/// be the one-byte function assembled just before).
#[test]
fn a_thread_stopped_on_a_functions_first_byte_is_charged_to_that_function() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("first_byte.c");
    std::fs::write(
        &src,
        r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Two functions back to back: the load is the first byte of load_at_first_byte. */
__asm__(".text\n"
        ".globl before_first_byte\n.type before_first_byte,@function\n"
        "before_first_byte:\n.cfi_startproc\nret\n.cfi_endproc\n"
        ".size before_first_byte,.-before_first_byte\n"
        ".globl load_at_first_byte\n.type load_at_first_byte,@function\n"
        "load_at_first_byte:\n.cfi_startproc\nmovzbl (%rdi),%eax\nret\n.cfi_endproc\n"
        ".size load_at_first_byte,.-load_at_first_byte\n");
int load_at_first_byte(const char *p);

static int uffd;
static char *page;

static void *resolve(void *unused) {
    struct uffd_msg msg;
    struct pollfd p = {.fd = uffd, .events = POLLIN};
    poll(&p, 1, -1);
    if (read(uffd, &msg, sizeof msg) != sizeof msg) exit(3);
    usleep(300000);
    static char src[4096] __attribute__((aligned(4096))) = {7};
    struct uffdio_copy copy = {.dst = (unsigned long)page, .src = (unsigned long)src, .len = 4096};
    if (ioctl(uffd, UFFDIO_COPY, &copy)) exit(4);
    return unused;
}

int main(void) {
    uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
    struct uffdio_api api = {.api = UFFD_API};
    if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api)) { perror("userfaultfd"); return 2; }
    page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct uffdio_register reg = {.range = {(unsigned long)page, 4096},
                                  .mode = UFFDIO_REGISTER_MODE_MISSING};
    if (ioctl(uffd, UFFDIO_REGISTER, &reg)) { perror("UFFDIO_REGISTER"); return 2; }
    pthread_t t;
    pthread_create(&t, NULL, resolve, NULL);
    int v = load_at_first_byte(page);
    pthread_join(t, NULL);
    return v == 7 ? 0 : 5;
}
"#,
    )
    .unwrap();
    let bin = dir.path().join("first_byte");
    let status = Command::new("cc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-pthread"])
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed on {}", src.display());
    let data = dir.path().join("off.data");
    let out = jprof()
        .args(["record", "--off-cpu", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&bin)
        .output()
        .expect("run jprof record");
    ok(out, "jprof record");

    let off = folded(&data, &["--weight", "off-cpu"]);
    let faulted = under(&off, "load_at_first_byte");
    within(faulted, 0.3e9, 0.25, "off-CPU under load_at_first_byte");
    assert!(
        off.iter()
            .any(|(s, _)| s.contains("main;load_at_first_byte;")),
        "the faulting frame is not under main: {off:?}"
    );
    assert_eq!(
        under(&off, "before_first_byte"),
        0,
        "charged to the function before: {off:?}"
    );
}
