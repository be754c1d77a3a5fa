//! `jprof symbolize`: addr2line for JIT code. Names addresses from a recording (JIT side data,
//! then native symbols through the process model at a chosen time) or from a jitdump alone.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::j9::InlineFrame;
use crate::profile::Frame;
use crate::recording::Recording;
use crate::symbolize::at_time::AddressNamer;
use crate::symbolize::jit_index::JitIndex;
use crate::timeline::ClockConversion;

/// Where the names come from.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    /// A recording: its JIT side data, then native symbols.
    Recording(PathBuf),
    /// A jitdump alone.
    Jitdump(PathBuf),
}

/// What `jprof symbolize` should do (made by `cli::SymbolizeArgs::into_config`).
#[derive(Clone, Debug)]
pub struct SymbolizeConfig {
    /// Where the names come from.
    pub(crate) source: Source,
    /// The process; default: the recording's target, or the jitdump's own pid.
    pub(crate) pid: Option<u32>,
    /// Seconds from the recording's first sample; default: the end of the recording.
    pub(crate) time: Option<f64>,
    /// Print each address (`0x...`) on a line of its own before its frames.
    pub(crate) show_addresses: bool,
    /// The addresses to name, in the order given.
    pub(crate) addresses: Vec<u64>,
}

/// Reads an address in hex, with or without `0x`.
pub(crate) fn parse_address(text: &str) -> std::result::Result<u64, String> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    u64::from_str_radix(digits, 16).map_err(|_| format!("{text:?} is not a hexadecimal address"))
}

/// One frame as a line: `name`, then ` at file:line` where known.
fn frame_line(frame: &Frame) -> String {
    match (&frame.file, frame.line) {
        (Some(file), Some(line)) => format!("{} at {file}:{line}", frame.name),
        (Some(file), None) => format!("{} at {file}", frame.name),
        _ => frame.name.clone(),
    }
}

/// An OpenJ9 inline chain (JPROF_J9_METADATA), one frame a line: `name bci=N`.
fn j9_lines(chain: &[InlineFrame]) -> Vec<String> {
    chain
        .iter()
        .map(|f| format!("{} bci={}", f.name, f.bytecode_index))
        .collect()
}

fn print(
    config: &SymbolizeConfig,
    mut lines_of: impl FnMut(u64) -> Vec<String>,
    out: &mut dyn Write,
) -> io::Result<()> {
    for &addr in &config.addresses {
        if config.show_addresses {
            writeln!(out, "{addr:#x}")?;
        }
        let lines = lines_of(addr);
        if lines.is_empty() {
            writeln!(out, "?? ({addr:#x})")?;
        }
        for line in &lines {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// The OpenJ9 chain when there is one, else the frames.
fn lines(chain: Option<Vec<InlineFrame>>, frames: impl FnOnce() -> Vec<Frame>) -> Vec<String> {
    match chain {
        Some(chain) if !chain.is_empty() => j9_lines(&chain),
        _ => frames().iter().map(frame_line).collect(),
    }
}

/// Runs `jprof symbolize`, writing to `out`.
pub fn run(config: &SymbolizeConfig, out: &mut dyn Write) -> Result<()> {
    let stdout = |e| Error::io(Path::new("<stdout>"), e);
    match &config.source {
        Source::Jitdump(path) => {
            let bytes =
                crate::foreign_file::named_file_bytes(path).map_err(|e| e.into_error(path))?;
            let header =
                crate::format::jitdump::parse_header(&bytes).map_err(|e| Error::parse(path, e))?;
            let pid = config.pid.unwrap_or(header.pid);
            let mut index = JitIndex::default();
            index.add_jitdump(
                pid,
                &path.to_string_lossy(),
                &bytes,
                &ClockConversion::default(),
            );
            for note in &index.notes {
                eprintln!("jprof: note: {}", crate::terminal::safe(note.as_bytes()));
            }
            // Every body loaded at any time counts: the latest one at an address wins.
            print(
                config,
                |addr| {
                    lines(index.j9_chain(pid, addr, u64::MAX), || {
                        index.frames(pid, addr, u64::MAX).unwrap_or_default()
                    })
                },
                out,
            )
            .map_err(stdout)
        }
        Source::Recording(path) => {
            let recording = Recording::open(path)?;
            let pid = match config
                .pid
                .or(recording.meta.target_pid)
                .or(recording.meta.attached_pid)
            {
                Some(pid) => pid,
                None => {
                    return Err(Error::Usage(format!(
                        "{} names no target process; give one with --pid",
                        path.display()
                    )))
                }
            };
            let mut namer = AddressNamer::new(&recording, config.time);
            if config.time.is_some() && namer.time > namer.end {
                eprintln!(
                    "jprof: note: --time is past the end of the recording ({:.3} s); using the \
                     state at its end",
                    namer.end.saturating_sub(namer.first_sample) as f64 / 1e9
                );
            }
            let lines_of = |addr| {
                let chain = namer.j9_chain(pid, addr);
                lines(chain, || namer.frames(pid, addr))
            };
            print(config, lines_of, out).map_err(stdout)
        }
    }
}
