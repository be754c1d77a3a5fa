//! Attaching to a running process: events for every existing thread (`inherit` only reaches
//! threads created later), and the COMM/MMAP2 records the kernel will never send for what
//! existed before (threads, names, executable mappings, including jitdump marker mappings).

use crate::error::Error;
use crate::format::perf::SampleLayout;
use crate::format::{perf_write, procfs};
use crate::sys::clock;

use super::events::{self, Events};
use super::RecordConfig;

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

/// Opens events on every thread of `pid`, re-reading the thread list until it is stable.
pub fn open_events(pid: i32, config: &RecordConfig) -> Result<Events, Error> {
    let first = tids(pid);
    if first.is_empty() {
        return Err(Error::Usage(format!(
            "process {pid} has no threads (has it exited?)"
        )));
    }
    let mut events = events::open(
        &first,
        config.event,
        config.frequency_hz,
        config.call_graph,
        false,
    )?;
    for _ in 0..THREAD_SCAN_ROUNDS {
        let now = tids(pid);
        let before = events.thread_count();
        events.add_threads(&now)?;
        if events.thread_count() == before {
            break;
        }
    }
    Ok(events)
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

/// COMM records for every thread and MMAP2 records for every executable mapping, as the
/// kernel would have sent them had the events been open from the start.
pub fn synthesize(pid: u32, layout: &SampleLayout) -> Vec<u8> {
    let now = clock::clock_ns(clock::CLOCK_MONOTONIC).unwrap_or(0);
    let mut out = Vec::new();
    for tid in tids(pid as i32) {
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
    for m in entries {
        let executable = m.perms.as_bytes().get(2) == Some(&b'x');
        let named = m.path.starts_with('/') || m.path == "[vdso]";
        if executable && named && !m.path.ends_with(" (deleted)") {
            let prot = libc::PROT_READ as u32 | libc::PROT_EXEC as u32;
            out.extend(perf_write::mmap2(
                layout,
                pid,
                m.start,
                m.end - m.start,
                m.offset,
                prot,
                m.path,
                now,
            ));
        }
    }
    out
}
