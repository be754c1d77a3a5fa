//! Attaching to a running process: events for every existing thread (`inherit` only reaches
//! threads created later), and the COMM/MMAP2 records the kernel will never send for what
//! existed before (threads, names, executable mappings, including jitdump marker mappings).

use std::path::Path;

use crate::error::Error;
use crate::format::perf::SampleLayout;
use crate::format::{perf_write, procfs};
use crate::sys::clock;

use super::config::RecordConfig;
use super::events::{self, Events};

/// How often the thread list is re-read while opening events, to catch threads created
/// meanwhile (their creators' events did not exist yet, so inherit does not cover them).
const THREAD_SCAN_ROUNDS: usize = 5;

fn tids(pid: i32) -> Vec<i32> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|it| {
            it.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    tids.sort_unstable();
    // The main thread first: its events own the rings.
    if let Some(i) = tids.iter().position(|&t| t == pid) {
        tids.swap(0, i);
    }
    tids
}

/// The target's command line, for the recording's META.
pub fn command_line(pid: u32) -> Result<Vec<String>, Error> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).map_err(|e| {
        Error::Usage(format!(
            "cannot attach to process {pid}: {e} (is the PID right and the process running?)"
        ))
    })?;
    Ok(raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect())
}

/// Whether this user may profile `pid` at all, decided before anything is opened so that jprof
/// never half-attaches. perf_event_open on another process needs ptrace access to it; Yama's
/// `ptrace_scope` and the process's owner decide that (root passes everything but scope 3).
fn check_permission(pid: i32) -> Result<(), Error> {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    let euid = nix::unistd::geteuid().as_raw();
    let owner = std::fs::metadata(format!("/proc/{pid}"))
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .map_err(|e| Error::Usage(format!("cannot attach to process {pid}: {e}")))?;
    permission_verdict(pid, euid, owner, scope).map_err(Error::Usage)
}

/// The rule of [`check_permission`], pure for testing: `Err` is the refusal to show.
fn permission_verdict(pid: i32, euid: u32, owner: u32, scope: Option<u32>) -> Result<(), String> {
    if scope == Some(3) {
        return Err(format!(
            "cannot attach to process {pid}: kernel.yama.ptrace_scope is 3, which forbids attaching to any process until reboot"
        ));
    }
    if euid == 0 {
        return Ok(());
    }
    if owner != euid {
        return Err(format!(
            "cannot attach to process {pid}: it belongs to uid {owner} and jprof runs as uid {euid}; run jprof as that user or as root"
        ));
    }
    if scope.is_some_and(|s| s >= 1) {
        return Err(format!(
            "cannot attach to process {pid}: kernel.yama.ptrace_scope is {} (only a parent may attach); run jprof as root, give it CAP_SYS_PTRACE, or `sysctl kernel.yama.ptrace_scope=0`",
            scope.unwrap_or(1)
        ));
    }
    Ok(())
}

/// Opens events on every thread of `pids` (re-reading their thread lists until they are
/// stable), or on the threads `only` alone (`--tid`: nothing they create is followed).
pub fn open_events(
    pids: &[i32],
    only: Option<&[i32]>,
    config: &RecordConfig,
    stacks: events::StackCopy,
) -> Result<Events, Error> {
    for &pid in pids {
        check_permission(pid)?;
    }
    let all_tids = || -> Vec<i32> { pids.iter().flat_map(|&pid| tids(pid)).collect() };
    let (first, scope) = match only {
        Some(threads) => (threads.to_vec(), events::Scope::ThreadsOnly),
        None => (all_tids(), events::Scope::Attached),
    };
    if first.is_empty() {
        let list = pids
            .iter()
            .map(i32::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        return Err(Error::Usage(format!(
            "process {list} has no threads (has it exited?)"
        )));
    }
    let mut events = events::open(
        &first,
        config.event,
        config.frequency_hz,
        stacks,
        scope,
        config.off_cpu_min_ns,
        false,
    )?;
    if only.is_some() {
        return Ok(events);
    }
    for _ in 0..THREAD_SCAN_ROUNDS {
        let now = all_tids();
        let before = events.thread_count();
        events.add_threads(&now)?;
        if events.thread_count() == before {
            break;
        }
    }
    Ok(events)
}

/// Opens one event per CPU for every process (`-a`).
pub fn open_system_events(
    config: &RecordConfig,
    stacks: events::StackCopy,
) -> Result<Events, Error> {
    let mut events = events::open(
        &[-1],
        config.event,
        config.frequency_hz,
        stacks,
        events::Scope::AllCpus,
        config.off_cpu_min_ns,
        false,
    )?;
    // Every JVM on the machine gets its frames past the copy read (those running now, then
    // each as it maps libjvm.so), by a program loaded at the first; `--call-graph` given is
    // kept as given.
    events.deep_at_first_jvm = config.call_graph.is_none() && !events::bpf_refused_by_env();
    Ok(events)
}

/// Every process running now (the numeric entries of /proc), in pid order.
pub fn all_processes() -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .map(|it| {
            it.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}

/// Whether process `pid` maps a `libjvm.so` (a JVM jprof may load its agent into).
pub fn maps_libjvm(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .is_ok_and(|maps| maps.lines().any(|l| l.ends_with("/libjvm.so")))
}

/// Whether the attached process still runs (a zombie counts as gone).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// COMM records for every thread (or the threads `only`) and MMAP2 records for every
/// executable mapping of `pid`, as the kernel would have sent them had the events been open
/// from the start; stamped `now` (sample clock).
pub fn synthesize(
    pid: u32,
    only: Option<&[i32]>,
    layout: &SampleLayout,
    now: u64,
    build_ids: &mut BuildIds,
) -> Vec<u8> {
    let mut out = Vec::new();
    for tid in tids(pid as i32) {
        if only.is_some_and(|only| !only.contains(&tid)) {
            continue;
        }
        let comm =
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default();
        out.extend(perf_write::comm(
            layout,
            pid,
            tid as u32,
            comm.trim_end(),
            now,
        ));
    }
    let maps = std::fs::read(format!("/proc/{pid}/maps")).unwrap_or_default();
    // A line that cannot be read ends the list; the mappings before it are still reported.
    let entries = procfs::parse_maps(&maps).unwrap_or_default();
    let mut root = None;
    for m in entries {
        let executable = m.perms.as_bytes().get(2) == Some(&b'x');
        let named = m.path.starts_with('/') || m.path == "[vdso]";
        if executable && named && !m.path.ends_with(" (deleted)") {
            let prot = libc::PROT_READ as u32 | libc::PROT_EXEC as u32;
            // The build id of the file as it is now, as the kernel would have read it at
            // mmap time (a report then knows whether the file on disk is still this build).
            let build_id = if m.path.starts_with('/') {
                let root = root.get_or_insert_with(|| crate::process_root::foreign_root(pid));
                let file = crate::process_root::host_path(root.as_deref(), Path::new(m.path));
                build_ids.of_file(&file)
            } else {
                None
            };
            out.extend(perf_write::mmap2(
                layout,
                pid,
                m.start,
                m.end - m.start,
                m.offset,
                prot,
                m.path,
                build_id.as_deref(),
                now,
            ));
        }
    }
    out
}

/// Build ids of the files mapped, read once per file (`-a` synthesizes hundreds of processes
/// mapping the same libraries).
#[derive(Default)]
pub struct BuildIds(std::collections::HashMap<std::path::PathBuf, Option<Vec<u8>>>);

impl BuildIds {
    fn of_file(&mut self, file: &Path) -> Option<Vec<u8>> {
        self.0
            .entry(file.to_path_buf())
            .or_insert_with(|| crate::symbolize::build_id::of_file(file))
            .clone()
    }
}

/// The sample clock now.
pub fn now() -> u64 {
    clock::clock_ns(clock::CLOCK_MONOTONIC).unwrap_or(0)
}

/// The process `tid` belongs to when it is not the main thread of its process (None when it
/// is); an error when no such thread exists.
pub fn process_of_thread(tid: u32) -> Result<Option<u32>, Error> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))
        .map_err(|e| Error::Other(format!("-p {tid}: no such process or thread ({e})")))?;
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse::<u32>().ok());
    Ok(tgid.filter(|&pid| pid != tid))
}

#[cfg(test)]
mod tests {
    use super::permission_verdict;

    #[test]
    fn ptrace_rules_are_checked_before_attaching() {
        assert!(permission_verdict(7, 0, 1000, Some(1)).is_ok());
        assert!(permission_verdict(7, 0, 0, Some(3))
            .unwrap_err()
            .contains("ptrace_scope is 3"));
        assert!(permission_verdict(7, 1000, 1001, Some(0))
            .unwrap_err()
            .contains("uid 1001"));
        assert!(permission_verdict(7, 1000, 1000, Some(1))
            .unwrap_err()
            .contains("CAP_SYS_PTRACE"));
        assert!(permission_verdict(7, 1000, 1000, Some(0)).is_ok());
        assert!(permission_verdict(7, 1000, 1000, None).is_ok());
    }
}
