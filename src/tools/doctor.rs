//! `jprof doctor`: can this machine profile, and what would make it profile better? Gathers
//! the facts (sysctls, capabilities, trial perf events, TSC, runtimes, the JVMTI agent) in
//! `Facts::probe`, then `checks` judges them — a pure function, so every verdict and fix is
//! tested without changing the machine. Exits non-zero when sampling cannot work at all.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::record::{attr_for, find_agent, CallGraph, EventChoice, StackCopy, AGENT_FILE};
use crate::sys::perf_event;
use crate::timeline::TscFacts;

/// Capability bits (linux/capability.h).
const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;

/// Ring pages per CPU that `jprof record` maps (fp mode, plus the metadata page), for the
/// locked-memory estimate.
const RING_PAGES: u64 = 256 + 1;

/// `jprof record`'s default sampling frequency.
const DEFAULT_FREQUENCY_HZ: i64 = 999;

/// What the machine says, gathered once.
#[derive(Clone, Debug)]
pub(crate) struct Facts {
    pub(crate) euid: u32,
    /// CapEff of this process.
    pub(crate) capabilities: u64,
    pub(crate) perf_event_paranoid: Option<i32>,
    pub(crate) perf_event_mlock_kb: Option<i32>,
    /// RLIMIT_MEMLOCK of this process in KiB (the kernel charges rings beyond the sysctl here).
    pub(crate) memlock_limit_kb: u64,
    pub(crate) perf_event_max_sample_rate: Option<i32>,
    pub(crate) kptr_restrict: Option<i32>,
    /// /proc/kallsyms shows real (non-zero) addresses to this user.
    pub(crate) kallsyms_readable: bool,
    /// None: no Yama LSM.
    pub(crate) ptrace_scope: Option<i32>,
    pub(crate) cpus: u64,
    pub(crate) page_size: u64,
    /// Sampling cpu-clock on this process, user space only: the minimum jprof needs.
    pub(crate) user_sampling: Result<(), Refusal>,
    /// The same with kernel frames.
    pub(crate) kernel_sampling: Result<(), Refusal>,
    /// Sampling the hardware cycles event (a PMU).
    pub(crate) cycles_sampling: Result<(), Refusal>,
    pub(crate) tsc: TscFacts,
    /// TSC ticks per second of CLOCK_MONOTONIC, measured over 100 ms (None without rdtscp).
    pub(crate) measured_tsc_hz: Option<f64>,
    /// Whether the perf mmap page publishes `cap_user_time_zero` (None: the page was unreadable).
    pub(crate) cap_user_time_zero: Option<bool>,
    /// `(runtime, first line of its version output)` for each runtime found on PATH.
    pub(crate) runtimes: Vec<(String, String)>,
    /// clang's XRay runtime library, when clang is installed and ships it.
    pub(crate) xray_runtime: Option<PathBuf>,
    /// Whether Mono's log profiler library (`libmono-profiler`) is installed.
    pub(crate) mono_log_profiler: bool,
    /// The kernel refuses names planted in `/tmp` (`fs.protected_symlinks`/`protected_regular`/
    /// `protected_fifos`).
    pub(crate) tmp_guarded: bool,
    /// Where jprof looks for its JVMTI agent, and whether a file is there.
    pub(crate) agent: Option<(PathBuf, bool)>,
}

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Status {
    Ok,
    /// Profiling works, but something is missing (kernel frames, cycles, a runtime's names).
    Warn,
    /// Profiling cannot work.
    Fail,
}

impl Status {
    fn tag(self) -> &'static str {
        match self {
            Self::Ok => "[ok]  ",
            Self::Warn => "[warn]",
            Self::Fail => "[FAIL]",
        }
    }
}

/// One verdict: what was checked, what was found, and the exact fix when it is not ok.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Check {
    pub(crate) status: Status,
    pub(crate) name: &'static str,
    pub(crate) found: String,
    pub(crate) fix: Option<String>,
}

fn check(status: Status, name: &'static str, found: impl Into<String>) -> Check {
    Check {
        status,
        name,
        found: found.into(),
        fix: None,
    }
}

impl Check {
    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

impl Facts {
    fn has_cap(&self, cap: u32) -> bool {
        self.euid == 0 || self.capabilities & (1u64 << cap) != 0
    }

    fn may_perfmon(&self) -> bool {
        self.has_cap(CAP_PERFMON) || self.has_cap(CAP_SYS_ADMIN)
    }

    /// Reads this machine. Opens (and closes) a few perf events on this process; runs each
    /// runtime's `--version`.
    pub(crate) fn probe() -> Self {
        let sysctl = crate::record::read_sysctl;
        let mut tsc = TscFacts::probe();
        let page = crate::sys::clock::probe_perf_page_time().ok();
        if let Some(page) = page.filter(|p| p.cap_user_time() && p.time_mult != 0) {
            tsc.page_tsc_hz =
                Some(1e9 * f64::from(1u32 << page.time_shift.min(31)) / f64::from(page.time_mult));
        }
        Self {
            euid: nix::unistd::geteuid().as_raw(),
            capabilities: effective_capabilities(),
            perf_event_paranoid: sysctl("perf_event_paranoid"),
            perf_event_mlock_kb: sysctl("perf_event_mlock_kb"),
            memlock_limit_kb: memlock_limit_kb(),
            perf_event_max_sample_rate: sysctl("perf_event_max_sample_rate"),
            kptr_restrict: sysctl("kptr_restrict"),
            kallsyms_readable: kallsyms_readable(),
            ptrace_scope: sysctl("yama/ptrace_scope"),
            cpus: crate::record::online_cpus().len() as u64,
            page_size: perf_event::page_size() as u64,
            user_sampling: try_sampling(EventChoice::CpuClock, false),
            kernel_sampling: try_sampling(EventChoice::CpuClock, true),
            cycles_sampling: try_sampling(EventChoice::Cycles, false),
            tsc,
            cap_user_time_zero: page.map(|p| p.cap_user_time_zero()),
            measured_tsc_hz: measure_tsc_hz(),
            runtimes: runtimes(),
            xray_runtime: xray_runtime(),
            mono_log_profiler: crate::record::mono_log_profiler_installed(),
            tmp_guarded: crate::record::tmp_guarded(),
            agent: find_agent().map(|p| {
                let found = p.is_file();
                (p, found)
            }),
        }
    }
}

/// CapEff from /proc/self/status (0 when unreadable).
fn effective_capabilities() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// "Max locked memory" soft limit from /proc/self/limits, in KiB (unlimited: u64::MAX / 1024).
fn memlock_limit_kb() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Max locked memory"))?;
            let soft = line["Max locked memory".len()..]
                .split_whitespace()
                .next()?;
            Some(match soft {
                "unlimited" => u64::MAX / 1024,
                bytes => bytes.parse::<u64>().ok()? / 1024,
            })
        })
        .unwrap_or(0)
}

/// The kernel shows kallsyms addresses as zeros to users kptr_restrict hides them from.
fn kallsyms_readable() -> bool {
    std::fs::read_to_string("/proc/kallsyms").is_ok_and(|text| {
        text.lines().take(1000).any(|l| {
            l.split(' ')
                .next()
                .is_some_and(|a| a.bytes().any(|b| b != b'0'))
        })
    })
}

/// Why the kernel refused a test event: its message, and whether it was a permission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) message: String,
    /// EACCES or EPERM: a matter of privileges, not of what the kernel supports.
    pub(crate) denied: bool,
}

impl From<std::io::Error> for Refusal {
    fn from(e: std::io::Error) -> Self {
        Self {
            denied: e.kind() == std::io::ErrorKind::PermissionDenied,
            message: e.to_string(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Opens `record`'s own sampling event (launch-mode settings, frame-pointer call graph) on
/// this process, then closes it.
fn try_sampling(event: EventChoice, kernel: bool) -> Result<(), Refusal> {
    let mut attr = attr_for(
        event,
        DEFAULT_FREQUENCY_HZ as u64,
        StackCopy::of(CallGraph::FramePointers),
        kernel,
        false,
    );
    perf_event::open(&mut attr, 0, -1)
        .map(drop)
        .map_err(Refusal::from)
}

/// TSC ticks between two tight TSC/CLOCK_MONOTONIC pairs 100 ms apart, per second.
fn measure_tsc_hz() -> Option<f64> {
    use crate::sys::clock::tightest_tsc_pair;
    let first = tightest_tsc_pair(libc::CLOCK_MONOTONIC, 50)?;
    std::thread::sleep(std::time::Duration::from_millis(100));
    let last = tightest_tsc_pair(libc::CLOCK_MONOTONIC, 50)?;
    let ns = last.ns.checked_sub(first.ns).filter(|&ns| ns > 0)?;
    Some(last.tsc.wrapping_sub(first.tsc) as f64 * 1e9 / ns as f64)
}

/// The first line of `program args…` output (stdout, else stderr), if it runs.
fn first_line(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    String::from_utf8_lossy(&text)
        .lines()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

fn runtimes() -> Vec<(String, String)> {
    [
        ("java", &["-version"][..]),
        ("node", &["--version"]),
        ("mono", &["--version"]),
        ("clang", &["--version"]),
    ]
    .into_iter()
    .filter_map(|(name, args)| first_line(name, args).map(|v| (name.to_string(), v)))
    .collect()
}

fn xray_runtime() -> Option<PathBuf> {
    let resource_dir = first_line("clang", &["-print-resource-dir"])?;
    let lib = Path::new(&resource_dir).join("lib/linux/libclang_rt.xray-x86_64.a");
    lib.is_file().then_some(lib)
}

/// Judges the facts: one check per line of `jprof doctor`'s output, in the order printed.
pub(crate) fn checks(f: &Facts) -> Vec<Check> {
    let who = who(f);
    let mut out = vec![sampling_check(f, &who)];
    if f.user_sampling.is_ok() {
        out.push(kernel_frames_check(f));
    }
    out.push(pmu_check(f));
    out.push(mlock_check(f, &who));
    out.extend(sample_rate_check(f));
    out.push(tsc_check(f));
    out.push(kallsyms_check(f, &who));
    out.push(attach_check(f));
    out.extend(runtime_checks(f));
    out
}

/// Who jprof runs as, in the checks' words.
fn who(f: &Facts) -> String {
    if f.euid == 0 {
        "root".to_string()
    } else if f.may_perfmon() {
        "CAP_PERFMON".to_string()
    } else {
        format!("uid {} without CAP_PERFMON", f.euid)
    }
}

fn sampling_check(f: &Facts, who: &str) -> Check {
    let paranoid = f
        .perf_event_paranoid
        .map_or("unknown".to_string(), |p| p.to_string());
    match &f.user_sampling {
        Ok(()) => check(
            Status::Ok,
            "perf_event_open",
            format!("sampling works (perf_event_paranoid {paranoid}, running as {who})"),
        ),
        Err(e) => check(
            Status::Fail,
            "perf_event_open",
            format!("cannot sample even user space: {e} (perf_event_paranoid {paranoid}, running as {who})"),
        )
        .fix(if e.denied {
            "run jprof as root, or `sudo setcap cap_perfmon,cap_sys_ptrace,cap_syslog+ep $(command -v jprof)`, or `sudo sysctl -w kernel.perf_event_paranoid=1`"
        } else {
            "the kernel lacks perf events or use_clockid (Linux 4.1+); in a container, allow perf_event_open in its seccomp profile (docker run --cap-add PERFMON --security-opt seccomp=unconfined)"
        }),
    }
}

fn kernel_frames_check(f: &Facts) -> Check {
    match &f.kernel_sampling {
        Ok(()) => check(Status::Ok, "kernel frames", "stacks include kernel frames"),
        Err(e) => check(
            Status::Warn,
            "kernel frames",
            format!("only user-space stacks ({e}); time in the kernel shows without its frames"),
        )
        .fix("`sudo sysctl -w kernel.perf_event_paranoid=1`, or run as root / with CAP_PERFMON"),
    }
}

fn pmu_check(f: &Facts) -> Check {
    match &f.cycles_sampling {
        Ok(()) => check(Status::Ok, "PMU", "hardware cycles event available (-e cycles)"),
        Err(e) => check(
            Status::Warn,
            "PMU",
            format!("no hardware cycles event ({e}); jprof falls back to cpu-clock (timer-based, fine for CPU profiles)"),
        )
        .fix("nothing needed; for cycles on a VM, give it a virtual PMU (QEMU/KVM: -cpu host, VMware: enable 'virtualize CPU performance counters')"),
    }
}

fn mlock_check(f: &Facts, who: &str) -> Check {
    let ring_kb = RING_PAGES * f.page_size / 1024;
    let needed_kb = f.cpus * ring_kb;
    match f.perf_event_mlock_kb {
        _ if f.has_cap(CAP_IPC_LOCK) => check(
            Status::Ok,
            "perf_event_mlock_kb",
            format!("no limit for {who} (CAP_IPC_LOCK); the rings need ~{needed_kb} KiB"),
        ),
        Some(kb) => {
            // The kernel allows mlock_kb per online CPU, then charges RLIMIT_MEMLOCK.
            let allowed_kb = kb.max(0) as u64 * f.cpus + f.memlock_limit_kb;
            let found = format!(
                "{kb} KiB per CPU + RLIMIT_MEMLOCK {} KiB = {allowed_kb} KiB; the rings need ~{needed_kb} KiB ({} CPUs × {ring_kb} KiB)",
                f.memlock_limit_kb, f.cpus
            );
            if allowed_kb >= needed_kb {
                check(Status::Ok, "perf_event_mlock_kb", found)
            } else {
                check(Status::Fail, "perf_event_mlock_kb", found).fix(format!(
                    "`sudo sysctl -w kernel.perf_event_mlock_kb={ring_kb}`, or raise `ulimit -l`, or run as root"
                ))
            }
        }
        None => check(Status::Warn, "perf_event_mlock_kb", "unreadable"),
    }
}

fn sample_rate_check(f: &Facts) -> Option<Check> {
    let rate = f.perf_event_max_sample_rate?;
    Some(if i64::from(rate) >= DEFAULT_FREQUENCY_HZ {
        check(
            Status::Ok,
            "sample rate",
            format!("kernel.perf_event_max_sample_rate {rate} Hz (jprof default -F {DEFAULT_FREQUENCY_HZ})"),
        )
    } else {
        check(
            Status::Warn,
            "sample rate",
            format!("kernel.perf_event_max_sample_rate is {rate} Hz, below jprof's default -F {DEFAULT_FREQUENCY_HZ}"),
        )
        .fix(format!("record with `-F {rate}`, or `sudo sysctl -w kernel.perf_event_max_sample_rate=10000`"))
    })
}

fn kallsyms_check(f: &Facts, who: &str) -> Check {
    match (f.kptr_restrict, f.kallsyms_readable) {
        (_, true) => check(
            Status::Ok,
            "kptr_restrict",
            format!(
                "{}: /proc/kallsyms shows addresses, kernel frames get names",
                f.kptr_restrict.map_or("unknown".into(), |k| k.to_string())
            ),
        ),
        (k, false) => check(
            Status::Warn,
            "kptr_restrict",
            format!(
                "{}: /proc/kallsyms hides addresses from {who}; kernel frames stay unnamed",
                k.map_or("unknown".into(), |k| k.to_string())
            ),
        )
        .fix(match k {
            // At 0 the kernel shows addresses to perf users only when paranoid is 1 or less.
            Some(0) => "`sudo sysctl -w kernel.perf_event_paranoid=1`, or run jprof report as root (or with CAP_SYSLOG)",
            Some(2) => "`sudo sysctl -w kernel.kptr_restrict=1` and run jprof report as root (or with CAP_SYSLOG), or `sudo sysctl -w kernel.kptr_restrict=0`",
            _ => "run jprof report as root (or with CAP_SYSLOG), or `sudo sysctl -w kernel.kptr_restrict=0`",
        }),
    }
}

fn attach_check(f: &Facts) -> Check {
    let may_read_others = f.has_cap(CAP_SYS_PTRACE);
    let found = match f.ptrace_scope {
        None => check(
            Status::Ok,
            "attach (-p)",
            format!("no Yama LSM; {}", attach_scope(may_read_others)),
        ),
        Some(scope) => check(
            Status::Ok,
            "attach (-p)",
            format!(
                "yama ptrace_scope {scope} (it limits ptrace attach, not the read access perf events and jprof -p use); {}",
                attach_scope(may_read_others)
            ),
        ),
    };
    if may_read_others {
        found
    } else {
        found.fix(
            "to attach to other users' processes: run as root or `sudo setcap cap_perfmon,cap_sys_ptrace+ep $(command -v jprof)`",
        )
    }
}

fn attach_scope(may_read_others: bool) -> &'static str {
    if may_read_others {
        "jprof -p can attach to any process (CAP_SYS_PTRACE)"
    } else {
        "jprof -p can attach to processes of your own user"
    }
}

fn tsc_check(f: &Facts) -> Check {
    let t = &f.tsc;
    if !t.x86_64 {
        return check(
            Status::Ok,
            "TSC",
            "not x86_64: side files are put on the timeline by CLOCK_MONOTONIC only",
        );
    }
    let nominal = t.nominal_tsc_hz().map_or(
        "no nominal frequency in CPUID or the perf page".to_string(),
        |(hz, src)| format!("{:.3} GHz from {src}", hz / 1e9),
    );
    let frequency = match f.measured_tsc_hz {
        Some(hz) => format!("{nominal}, measured {:.3} GHz", hz / 1e9),
        None => nominal,
    };
    let page = match f.cap_user_time_zero {
        Some(true) => "the kernel publishes cap_user_time_zero (exact TSC conversion)",
        Some(false) => "the kernel does not publish cap_user_time_zero; jprof calibrates TSC → CLOCK_MONOTONIC from paired reads",
        None => "the perf mmap page was unreadable; jprof calibrates TSC → CLOCK_MONOTONIC from paired reads",
    };
    if t.tsc_usable() {
        check(
            Status::Ok,
            "TSC",
            format!("invariant, rdtscp, {frequency}; {page}"),
        )
    } else {
        check(
            Status::Warn,
            "TSC",
            format!("not usable as a clock (invariant {}, rdtscp {}, {frequency}); runtimes that stamp TSC (jitdump -k 2 style) are placed by their CLOCK_MONOTONIC records only", t.tsc_is_invariant(), t.has_rdtscp),
        )
        .fix("nothing to do for CLOCK_MONOTONIC runtimes; on a VM, expose an invariant TSC (QEMU: -cpu host,+invtsc)")
    }
}

fn runtime_checks(f: &Facts) -> Vec<Check> {
    let version = |name: &str| {
        f.runtimes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let mut out = Vec::new();
    out.push(match (version("java"), &f.agent) {
        (None, _) => check(Status::Ok, "java", "not installed"),
        (Some(v), Some((path, true))) => check(
            Status::Ok,
            "java",
            format!("{v}; JVMTI agent {}", path.display()),
        ),
        (Some(v), agent) => check(
            Status::Warn,
            "java",
            format!(
                "{v}; jprof's JVMTI agent not found{}: Java JIT frames stay unnamed",
                agent
                    .as_ref()
                    .map_or(String::new(), |(p, _)| format!(" (no file at {})", p.display()))
            ),
        )
        .fix(format!(
            "`cargo build --release -p jprof-agent` and put {AGENT_FILE} next to the jprof binary, or set JPROF_AGENT=/path/to/{AGENT_FILE}"
        )),
    });
    out.push(match version("node") {
        Some(v) => check(
            Status::Ok,
            "node",
            format!("{v}; jprof passes --perf-prof (jitdump) where no other user can write the working directory"),
        ),
        None => check(Status::Ok, "node", "not installed"),
    });
    out.push(match version("mono") {
        Some(v) if f.mono_log_profiler => check(
            Status::Ok,
            "mono",
            format!("{v}; log profiler installed (jprof names managed code from it)"),
        ),
        Some(v) => check(
            Status::Warn,
            "mono",
            format!("{v}; Mono's log profiler library (libmono-profiler-log.so) is missing: managed frames are named from --jitmap only"),
        )
        .fix("apt-get install libmono-profiler"),
        None => check(Status::Ok, "mono", "not installed"),
    });
    out.push(if f.tmp_guarded {
        check(
            Status::Ok,
            "runtime side files",
            "the kernel refuses names planted in /tmp: every runtime of a launched tree is asked for its /tmp perf map",
        )
    } else {
        check(
            Status::Warn,
            "runtime side files",
            "fs.protected_symlinks/protected_regular/protected_fifos are off: CPython, Erlang, .NET before 8 and Mono's --jitmap are not asked for their /tmp perf maps (every process the command starts would open its name for its own pid, where another user's link is followed, file filled or FIFO blocks it) (docs/jit.md)",
        )
        .fix("sysctl -w fs.protected_symlinks=1 fs.protected_regular=1 fs.protected_fifos=1 (systemd's default)")
    });
    out.push(match (version("clang"), &f.xray_runtime) {
        (None, _) => check(Status::Ok, "clang xray", "clang not installed"),
        (Some(v), Some(lib)) => check(
            Status::Ok,
            "clang xray",
            format!("{v}; XRay runtime {}", lib.display()),
        ),
        (Some(v), None) => check(
            Status::Warn,
            "clang xray",
            format!("{v}; no XRay runtime (libclang_rt.xray): -fxray-instrument cannot link"),
        )
        .fix(
            "Debian/Ubuntu: `apt-get install libclang-rt-dev` (or libclang-rt-NN-dev for clang-NN)",
        ),
    });
    out
}

/// Writes the checks, one per line (fix indented below), and a closing verdict; the exit code
/// is 1 when a check failed (profiling cannot work), else 0.
pub(crate) fn report(checks: &[Check], out: &mut dyn Write) -> io::Result<u8> {
    for c in checks {
        writeln!(out, "{} {:<20} {}", c.status.tag(), c.name, c.found)?;
        if let Some(fix) = &c.fix {
            writeln!(out, "       {:<20} fix: {fix}", "")?;
        }
    }
    let worst = checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok);
    let warnings = checks.iter().filter(|c| c.status == Status::Warn).count();
    match worst {
        Status::Fail => {
            writeln!(
                out,
                "\njprof cannot profile on this machine: apply the FAIL fixes above."
            )?;
            Ok(1)
        }
        _ if warnings > 0 => {
            writeln!(out, "\njprof can profile here ({warnings} warning(s): less detail, see the fixes above).")?;
            Ok(0)
        }
        _ => {
            writeln!(out, "\njprof can profile here.")?;
            Ok(0)
        }
    }
}

/// Runs `jprof doctor`; returns the exit code.
pub fn run(out: &mut dyn Write) -> crate::Result<u8> {
    let facts = Facts::probe();
    report(&checks(&facts), out).map_err(|e| crate::Error::io(Path::new("<stdout>"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unprivileged user on a default Debian VM: paranoid 2, no PMU, no agent.
    fn user_on_vm() -> Facts {
        Facts {
            euid: 1000,
            capabilities: 0,
            perf_event_paranoid: Some(2),
            perf_event_mlock_kb: Some(516),
            memlock_limit_kb: 8192,
            perf_event_max_sample_rate: Some(100_000),
            kptr_restrict: Some(0),
            kallsyms_readable: false,
            ptrace_scope: Some(1),
            cpus: 2,
            page_size: 4096,
            user_sampling: Ok(()),
            kernel_sampling: Err(std::io::Error::from_raw_os_error(libc::EACCES).into()),
            cycles_sampling: Err(std::io::Error::from_raw_os_error(libc::ENOENT).into()),
            tsc: TscFacts::default(),
            cap_user_time_zero: Some(false),
            measured_tsc_hz: None,
            runtimes: vec![("java".into(), "openjdk version \"17\"".into())],
            xray_runtime: None,
            mono_log_profiler: false,
            tmp_guarded: false,
            agent: Some(("/opt/jprof/libjprof_agent.so".into(), false)),
        }
    }

    fn find<'a>(checks: &'a [Check], name: &str) -> &'a Check {
        checks.iter().find(|c| c.name == name).unwrap()
    }

    fn text(checks: &[Check]) -> (String, u8) {
        let mut out = Vec::new();
        let code = report(checks, &mut out).unwrap();
        (String::from_utf8(out).unwrap(), code)
    }

    #[test]
    fn unprivileged_user_can_profile_with_warnings() {
        let checks = checks(&user_on_vm());
        assert_eq!(find(&checks, "perf_event_open").status, Status::Ok);
        let kernel = find(&checks, "kernel frames");
        assert_eq!(kernel.status, Status::Warn);
        assert!(kernel
            .fix
            .as_ref()
            .unwrap()
            .contains("perf_event_paranoid=1"));
        assert_eq!(find(&checks, "PMU").status, Status::Warn);
        assert_eq!(find(&checks, "kptr_restrict").status, Status::Warn);
        let java = find(&checks, "java");
        assert_eq!(java.status, Status::Warn);
        assert!(java.fix.as_ref().unwrap().contains("JPROF_AGENT"));
        assert!(find(&checks, "attach (-p)").fix.is_some());
        // 2 CPUs × 257 pages × 4 KiB = 2056 KiB ≤ 2 × 516 KiB + 8192 KiB.
        let mlock = find(&checks, "perf_event_mlock_kb");
        assert_eq!(mlock.status, Status::Ok, "{mlock:?}");
        let (text, code) = text(&checks);
        assert_eq!(code, 0);
        assert!(text.contains("[warn] kernel frames"), "{text}");
        assert!(text.contains("can profile here"), "{text}");
    }

    #[test]
    fn no_perf_events_fails_with_the_fix() {
        let facts = Facts {
            perf_event_paranoid: Some(3),
            user_sampling: Err(std::io::Error::from_raw_os_error(libc::EACCES).into()),
            ..user_on_vm()
        };
        let checks = checks(&facts);
        let open = find(&checks, "perf_event_open");
        assert_eq!(open.status, Status::Fail);
        assert!(open.found.contains("perf_event_paranoid 3"));
        assert!(open.fix.as_ref().unwrap().contains("cap_perfmon"));
        assert!(checks.iter().all(|c| c.name != "kernel frames"));
        let (text, code) = text(&checks);
        assert_eq!(code, 1);
        assert!(text.contains("[FAIL] perf_event_open"), "{text}");
        assert!(text.contains("fix: run jprof as root"), "{text}");
        assert!(text.contains("cannot profile"), "{text}");
    }

    #[test]
    fn root_on_bare_metal_is_all_ok() {
        let facts = Facts {
            euid: 0,
            capabilities: u64::MAX,
            kallsyms_readable: true,
            ptrace_scope: None,
            kernel_sampling: Ok(()),
            cycles_sampling: Ok(()),
            tsc: TscFacts {
                x86_64: true,
                has_tsc: true,
                invariant_tsc: true,
                has_rdtscp: true,
                cpuid_tsc_hz: Some(2_400_000_000),
                ..TscFacts::default()
            },
            cap_user_time_zero: Some(true),
            measured_tsc_hz: Some(2.4e9),
            agent: Some(("/opt/jprof/libjprof_agent.so".into(), true)),
            tmp_guarded: true,
            ..user_on_vm()
        };
        let checks = checks(&facts);
        let bad: Vec<_> = checks.iter().filter(|c| c.status != Status::Ok).collect();
        assert!(bad.is_empty(), "{bad:?}");
        let tsc = find(&checks, "TSC");
        assert!(
            tsc.found
                .contains("2.400 GHz from cpuid 0x15, measured 2.400 GHz"),
            "{tsc:?}"
        );
        assert!(tsc.found.contains("publishes cap_user_time_zero"));
        assert_eq!(text(&checks).1, 0);
    }

    #[test]
    fn small_mlock_allowance_fails_with_the_sysctl() {
        let facts = Facts {
            cpus: 64,
            perf_event_mlock_kb: Some(516),
            ..user_on_vm()
        };
        let mlock = checks(&facts)
            .into_iter()
            .find(|c| c.name == "perf_event_mlock_kb")
            .unwrap();
        assert_eq!(mlock.status, Status::Fail, "{mlock:?}");
        assert!(mlock
            .fix
            .unwrap()
            .contains("sysctl -w kernel.perf_event_mlock_kb=1028"));
    }
}
