//! `jprof report -i XRAY_LOG --binary ELF`: an XRay log on its own becomes a [`Profile`] whose
//! stacks are the replayed call paths (aggregated over threads, like `llvm-xray stack
//! -aggregate-threads`) weighted by calls or by self time, so every output works on it;
//! `--format text` prints the log's summary and the account table.

use std::io::{self, Write};
use std::path::Path;

use rustc_hash::FxHashMap;

use super::account;
use super::replay::{Call, Replay};
use crate::error::{Error, Result};
use crate::format::xray::{self, instr_map::InstrMap, Log, LogMode};
use crate::format::Endian;
use crate::profile::{Frame, FrameId, FrameKind, Profile, ProfileSample};
use crate::report::{
    collapsed, flamegraph, Destination, Format, ReportConfig, Weight, DEFAULT_SVG,
};

/// A loaded log with its binary's map.
pub struct Input {
    pub log: Log,
    pub map: Option<InstrMap>,
    /// The binary's file name (the frames' module).
    pub module: Option<String>,
    pub replay: Replay,
}

impl Input {
    /// Reads and decodes the log, and the binary's instrumentation map when given.
    pub fn load(log_path: &Path, binary: Option<&Path>) -> Result<Self> {
        let bytes = std::fs::read(log_path).map_err(|e| Error::io(log_path, e))?;
        let log = xray::parse(&bytes).map_err(|e| Error::parse(log_path, e))?;
        let map = match binary {
            Some(path) => {
                let elf = std::fs::read(path).map_err(|e| Error::io(path, e))?;
                Some(xray::instr_map::parse(&elf).map_err(|e| Error::parse(path, e))?)
            }
            None => None,
        };
        let module = binary
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        let replay = Replay::run(&log.events);
        Ok(Self {
            log,
            map,
            module,
            replay,
        })
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

    /// Finished calls that pass the thread and time filters.
    pub fn calls<'a>(
        &'a self,
        config: &'a ReportConfig,
    ) -> impl Iterator<Item = &'a (u32, Call)> + 'a {
        let start = self.start_tsc();
        self.replay.calls.iter().filter(move |(tid, call)| {
            config.tid.is_none_or(|t| t == *tid)
                && config.time.is_none_or(|r| {
                    r.contains_ns(
                        self.log
                            .header
                            .ticks_to_ns(call.entry.saturating_sub(start)),
                    )
                })
        })
    }

    /// The profile: one sample per finished call, its stack the call's path, weighted by 1
    /// (`Weight::Calls`) or the call's self time in ns (`Weight::Time`).
    pub fn profile(&self, config: &ReportConfig, weight: Weight) -> Profile {
        let mut profile = Profile::default();
        let mut stacks: FxHashMap<u32, Vec<FrameId>> = FxHashMap::default();
        let mut frames: FxHashMap<u32, FrameId> = FxHashMap::default();
        let start = self.start_tsc();
        let pids: FxHashMap<u32, u32> = self
            .replay
            .threads
            .iter()
            .map(|(&tid, (pid, _))| (tid, *pid))
            .collect();
        for &(tid, call) in self.calls(config) {
            let stack = stacks.entry(call.node).or_insert_with(|| {
                self.replay
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
                    .collect()
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
            });
        }
        profile.notes = self.notes();
        profile
    }

    /// What the reader should know about the log and the replay.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let r = &self.replay;
        if r.unmatched_exits() > 0 {
            notes.push(format!(
                "{} exits without a matching entry were ignored",
                r.unmatched_exits()
            ));
        }
        if r.deduced_exits() > 0 {
            notes.push(format!(
                "{} calls had no exit record and were closed by their caller's exit",
                r.deduced_exits()
            ));
        }
        if r.open_at_end() > 0 {
            notes.push(format!(
                "{} calls were still open at the end of the log (not counted)",
                r.open_at_end()
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
    pub fn write_summary(
        &self,
        log_path: &Path,
        binary: Option<&Path>,
        mut out: impl Write,
    ) -> io::Result<()> {
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
        let pids: std::collections::BTreeSet<u32> =
            self.replay.threads.values().map(|(p, _)| *p).collect();
        writeln!(
            out,
            "Events:    {} in {} threads of {} process(es); {} calls replayed",
            self.log.events.len(),
            self.replay.threads.len(),
            pids.len(),
            self.replay.calls.len()
        )?;
        for note in self.notes() {
            writeln!(out, "Note:      {note}")?;
        }
        Ok(())
    }
}

/// Runs `jprof report` on an XRay log.
pub fn run(config: &ReportConfig) -> Result<()> {
    let input = Input::load(&config.input, config.binary.as_deref())?;
    let weight = match config.weight {
        None | Some(Weight::Time) => Weight::Time,
        Some(Weight::Calls) => Weight::Calls,
        Some(Weight::Samples) => {
            return Err(Error::Usage(
                "an XRay log has calls, not samples: use --weight calls or --weight time".into(),
            ))
        }
    };
    if config.comm.is_some() {
        return Err(Error::Usage(
            "an XRay log has no thread names: select a thread with --tid".into(),
        ));
    }
    let output = config.output.as_deref();
    match config.format {
        Format::Text => Destination::of(output, None).write_with(|w| {
            input.write_summary(&config.input, config.binary.as_deref(), &mut *w)?;
            writeln!(w)?;
            let calls = input.calls(config).map(|(_, c)| c);
            let rows = account::rows(calls, input.log.header.cycle_frequency, |f| input.name(f));
            account::write(&rows, w)
        }),
        Format::Collapsed => {
            let profile = input.profile(config, weight);
            Destination::of(output, None).write_with(|w| collapsed::write(&profile, w))
        }
        Format::Flamegraph => {
            let profile = input.profile(config, weight);
            let folded = collapsed::lines(&profile);
            if folded.is_empty() {
                return Err(Error::Other(
                    "no calls to draw, no flame graph written".into(),
                ));
            }
            let labels = flamegraph::Labels {
                title: format!("jprof: XRay {}", config.input.display()),
                count_name: match weight {
                    Weight::Calls => "calls".into(),
                    _ => "ns (self time)".into(),
                },
            };
            let svg = Destination::of(output, Some(DEFAULT_SVG));
            svg.write_with(|w| flamegraph::write(&folded, &labels, w))?;
            if let Destination::File(path) = &svg {
                let mut out = io::stdout();
                input
                    .write_summary(&config.input, config.binary.as_deref(), &mut out)
                    .and_then(|()| writeln!(out, "\nFlame graph: {}", path.display()))
                    .map_err(|e| Error::io(Path::new("<stdout>"), e))?;
            }
            Ok(())
        }
    }
}
