//! `jprof report -i XRAY_LOG --binary ELF`: an XRay log on its own becomes a [`Profile`] whose
//! stacks are the replayed call paths (aggregated over threads, like `llvm-xray stack
//! -aggregate-threads`) weighted by calls or by self time, so every output works on it;
//! `--format text` prints the log's summary and the account table.

use std::io::{self, Write};
use std::path::Path;

use rustc_hash::FxHashMap;

use super::account::{self, Accounting};
use super::replay::{Call, Replay, StackCounts, Threads};
use crate::error::{Error, Result};
use crate::foreign_file::FileBytes;
use crate::format::xray::{self, instr_map::InstrMap, Header, Log, LogMode};
use crate::format::Endian;
use crate::input::request::{Loaded, Request, Weight};
use crate::profile::{filter, Context, Filters, WeightUnit};
use crate::profile::{Frame, FrameId, FrameKind, Profile, ProfileSample, Stack};

/// A loaded log with its binary's map.
pub struct Input {
    pub log: Log,
    pub map: Option<InstrMap>,
    /// The binary's file name (the frames' module).
    pub module: Option<String>,
}

/// The log file's bytes (mapped when safe: see `FileBytes`).
fn map_log(path: &Path) -> Result<FileBytes> {
    crate::foreign_file::named_file_bytes(path).map_err(|e| e.into_error(path))
}

/// Whether a finished call on `tid` passes the thread and time filters (`start` is the log's
/// earliest timestamp).
fn keep(filters: &Filters, header: &Header, start: u64, tid: u32, call: &Call) -> bool {
    filters.tid.is_none_or(|t| t == tid)
        && filters
            .time
            .is_none_or(|r| r.contains_ns(header.ticks_to_ns(call.entry.saturating_sub(start))))
}

impl Input {
    /// Reads and decodes the log, and the binary's instrumentation map when given.
    pub fn load(log_path: &Path, binary: Option<&Path>) -> Result<Self> {
        let log = xray::parse(&map_log(log_path)?).map_err(|e| Error::parse(log_path, e))?;
        Self::with_log(log, binary)
    }

    fn with_log(log: Log, binary: Option<&Path>) -> Result<Self> {
        let map = match binary {
            Some(path) => {
                let elf = map_log(path)?;
                Some(xray::instr_map::parse(&elf).map_err(|e| Error::parse(path, e))?)
            }
            None => None,
        };
        let module = binary
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        Ok(Self { log, map, module })
    }

    /// The account table's data, computed while the log is decoded (the decoded events are
    /// not kept: a log of any size needs memory only for the durations).
    pub fn account(request: &Request) -> Result<(Self, Accounting)> {
        let path = &request.path;
        let bytes = map_log(path)?;
        let header = xray::parse_header(&bytes).map_err(|e| Error::parse(path, e))?;
        let mut start = 0;
        if request.filters.time.is_some() {
            // `--time` counts from the earliest timestamp: one more pass to find it.
            let mut min = u64::MAX;
            let _ = xray::parse_streaming(&bytes, |e| min = min.min(e.tsc));
            start = min;
        }
        let mut accounting = Accounting::default();
        let log = xray::parse_streaming(&bytes, |e| {
            accounting.add(&e, |tid, call| {
                keep(&request.filters, &header, start, tid, call)
            })
        })
        .map_err(|e| Error::parse(path, e))?;
        Ok((
            Self::with_log(log, request.binary.as_deref())?,
            accounting.finish(),
        ))
    }

    /// The function's name from the map, or `#ID`.
    pub fn name(&self, func: u32) -> String {
        match &self.map {
            Some(map) => map.name(func),
            None => format!("#{func}"),
        }
    }

    /// The earliest timestamp of the log: time 0 of `--time` and of the profile.
    pub fn start_tsc(&self) -> u64 {
        self.log.events.iter().map(|e| e.tsc).min().unwrap_or(0)
    }

    /// The profile: one sample per finished call, its stack the call's path, weighted by 1
    /// (`Weight::Calls`) or the call's self time in ns (`Weight::Time`).
    pub fn profile(&self, filters: &Filters, weight: Weight) -> (Profile, Threads) {
        let replay = Replay::run(&self.log.events);
        let mut profile = Profile::default();
        let mut stacks: FxHashMap<u32, Stack> = FxHashMap::default();
        let mut frames: FxHashMap<u32, FrameId> = FxHashMap::default();
        let start = self.start_tsc();
        let pids: FxHashMap<u32, u32> = replay
            .threads
            .iter()
            .map(|(&tid, (pid, _))| (tid, *pid))
            .collect();
        let kept = replay
            .calls
            .iter()
            .filter(|(tid, call)| keep(filters, &self.log.header, start, *tid, call));
        for &(tid, call) in kept {
            let stack = stacks.entry(call.node).or_insert_with(|| {
                replay
                    .tree
                    .path(call.node)
                    .into_iter()
                    .map(|func| {
                        *frames.entry(func).or_insert_with(|| {
                            profile.intern(Frame {
                                name: self.name(func),
                                kind: FrameKind::Native,
                                module: self.module.clone(),
                                file: None,
                                line: None,
                            })
                        })
                    })
                    .collect::<Vec<_>>()
                    .into()
            });
            profile.samples.push(ProfileSample {
                pid: pids.get(&tid).copied().unwrap_or(0),
                tid,
                time: self
                    .log
                    .header
                    .ticks_to_ns(call.entry.saturating_sub(start)),
                cpu: 0,
                weight: match weight {
                    Weight::Time => self.log.header.ticks_to_ns(call.self_ticks),
                    _ => 1,
                },
                stack: stack.clone(),
                off_cpu: false,
            });
        }
        profile.notes = self.notes(StackCounts::of(&replay.threads));
        (profile, replay.threads)
    }

    /// What the reader should know about the log and the replay.
    pub fn notes(&self, counts: StackCounts) -> Vec<String> {
        let mut notes = Vec::new();
        if counts.unmatched_exits > 0 {
            notes.push(format!(
                "{} exits without a matching entry were ignored",
                counts.unmatched_exits
            ));
        }
        if counts.deduced_exits > 0 {
            notes.push(format!(
                "{} calls had no exit record and were closed by their caller's exit",
                counts.deduced_exits
            ));
        }
        if counts.open_at_end > 0 {
            notes.push(format!(
                "{} calls were still open at the end of the log (not counted)",
                counts.open_at_end
            ));
        }
        for p in self.log.problems.iter().take(5) {
            notes.push(format!("damaged log: {p}"));
        }
        if self.log.problems.len() > 5 {
            notes.push(format!(
                "... and {} more damaged regions",
                self.log.problems.len() - 5
            ));
        }
        if self.map.is_none() {
            notes.push("no --binary given: functions are shown by XRay id".into());
        }
        notes
    }

    /// The summary lines of the text report.
    /// `threads` and `calls` come from the replay that made the report.
    pub fn write_summary(
        &self,
        request: &Request,
        threads: &Threads,
        calls: usize,
        mut out: impl Write,
    ) -> io::Result<()> {
        let (log_path, binary) = (&request.path, request.binary.as_deref());
        let h = &self.log.header;
        let mode = match h.mode {
            LogMode::Basic => "basic",
            LogMode::Fdr => "FDR",
        };
        let endian = match h.endian {
            Endian::Little => "little-endian",
            Endian::Big => "big-endian",
        };
        writeln!(
            out,
            "XRay log:  {} ({mode} mode v{}, {endian})",
            log_path.display(),
            h.version
        )?;
        let clock = if self.log.is_emulated_clock() {
            "CLOCK_REALTIME ns (emulated TSC: the runtime found no TSC frequency)".to_string()
        } else {
            format!("TSC at {} Hz (header)", h.cycle_frequency)
        };
        writeln!(out, "Clock:     {clock}")?;
        if let (Some(path), Some(map)) = (binary, &self.map) {
            writeln!(
                out,
                "Binary:    {} ({} instrumented functions)",
                path.display(),
                map.functions.len()
            )?;
        }
        let pids: std::collections::BTreeSet<u32> = threads.values().map(|(p, _)| *p).collect();
        writeln!(
            out,
            "Events:    {} in {} threads of {} process(es); {calls} calls in this report",
            self.log.event_count,
            threads.len(),
            pids.len(),
        )?;
        for note in self.notes(StackCounts::of(threads)) {
            writeln!(out, "Note:      {note}")?;
        }
        Ok(())
    }
}

/// The log's summary and the account table (`--format text`), like `llvm-xray account`.
pub fn text(request: &Request) -> Result<Vec<u8>> {
    let (input, accounting) = Input::account(request)?;
    let mut out = Vec::new();
    input
        .write_summary(request, &accounting.threads, accounting.calls, &mut out)
        .and_then(|()| {
            writeln!(out)?;
            let rows = accounting.rows(input.log.header.cycle_frequency, |f| input.name(f));
            account::write(&rows, &mut out)
        })
        .map_err(|e| Error::io(Path::new("<memory>"), e))?;
    Ok(out)
}

/// The profile every other format draws: call paths weighted by self time (the default) or
/// by calls.
pub fn load(request: &Request) -> Result<Loaded> {
    let weight = match request.weight {
        Some(Weight::Calls) => Weight::Calls,
        _ => Weight::Time,
    };
    let input = Input::load(&request.path, request.binary.as_deref())?;
    let (mut profile, threads) = input.profile(&request.filters, weight);
    if !request.signatures {
        crate::profile::names::shorten(&mut profile);
    }
    filter::apply(&mut profile, &request.filters.left_after_reading());
    let (count_name, unit) = match weight {
        Weight::Calls => ("calls", WeightUnit::Events),
        _ => ("ns (self time)", WeightUnit::Nanoseconds),
    };
    let title = format!("jprof: XRay {}", request.path.display());
    let context = Context::for_profile(&profile, &title, count_name, unit);
    let mut summary = Vec::new();
    input
        .write_summary(request, &threads, profile.samples.len(), &mut summary)
        .map_err(|e| Error::io(Path::new("<memory>"), e))?;
    Ok(Loaded {
        profile,
        context,
        summary,
    })
}
