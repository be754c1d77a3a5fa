//! Command line (clap derive). Arguments become plain config structs; no logic lives here.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::record::{CallGraph, EventChoice, RecordConfig, Target};
use crate::report::{Format, ReportConfig, TimeRange, Weight};
use crate::tools::symbolize::{parse_address, Source, SymbolizeConfig};

#[derive(Debug, Parser)]
#[command(
    name = "jprof",
    version,
    about = "Sampling profiler with JIT symbolization, on one timeline"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command (or attach to a process) and record samples into a recording file.
    #[command(
        after_help = "Examples:\n  jprof record -- ./my-program arg1\n  jprof record -F 4999 --call-graph dwarf -o run.data -- ./app\n  jprof record --duration 5 -- ./server"
    )]
    Record(RecordArgs),
    /// Read a recording and write a flame graph, folded stacks or a text summary.
    #[command(
        after_help = "Examples:\n  jprof report                         # flamegraph.svg + top 15 on stdout\n  jprof report --format collapsed -o - # folded stacks on stdout\n  jprof report --format text --tid 1234\n  jprof report -i perf.data --search-dir ./jit-files"
    )]
    Report(ReportArgs),
    /// List a jitdump (header and every record with its offset) or a recording's chunks.
    #[command(
        after_help = "Examples:\n  jprof dump /tmp/jit-1234.dump\n  jprof dump jprof.data | less"
    )]
    Dump(DumpArgs),
    /// Name addresses, innermost frame first (addr2line for JIT code).
    #[command(
        after_help = "Examples:\n  jprof symbolize -i jprof.data 0x7f3a12345678\n  jprof symbolize -i jprof.data --pid 4242 --time 1.5 7f3a12345678 55d0c0de1234\n  jprof symbolize --jitdump /tmp/jit-1234.dump 0x7f0295412345"
    )]
    Symbolize(SymbolizeArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EventArg {
    Cycles,
    CpuClock,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CallGraphArg {
    Fp,
    Dwarf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum XrayModeArg {
    Basic,
    Fdr,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    Flamegraph,
    Collapsed,
    Text,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Sampling frequency in Hz.
    #[arg(short = 'F', long = "freq", default_value_t = 999)]
    pub frequency: u64,
    /// Output recording file.
    #[arg(short, long, default_value = "jprof.data")]
    pub output: PathBuf,
    /// Stop after this many seconds (the target keeps running in attach mode).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Sampling event; `cycles` falls back to `cpu-clock` when there is no PMU.
    #[arg(short, long, value_enum, default_value_t = EventArg::Cycles)]
    pub event: EventArg,
    /// How user stacks are collected: frame pointers, or a stack copy unwound with DWARF CFI.
    #[arg(long = "call-graph", value_enum, default_value_t = CallGraphArg::Fp)]
    pub call_graph: CallGraphArg,
    /// Do not store symbols of the sampled binaries in the recording.
    #[arg(long)]
    pub no_embed_symbols: bool,
    /// Keep the side files (e.g. Node's jit-PID.dump) jprof made the runtime write.
    #[arg(long)]
    pub keep_side_files: bool,
    /// XRay logging mode for an XRay-instrumented target: `basic` logs every call; `fdr` is
    /// for programs that start and flush FDR logging themselves.
    #[arg(long, value_enum, default_value_t = XrayModeArg::Basic)]
    pub xray: XrayModeArg,
    /// Attach to this running process (all its threads) instead of launching a command.
    #[arg(short, long, conflicts_with = "command")]
    pub pid: Option<u32>,
    /// The command to run, after `--`.
    #[arg(last = true, required_unless_present = "pid")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Input recording: a jprof.data, or a perf.data from `perf record -k 1 -g`.
    #[arg(short, long, default_value = "jprof.data")]
    pub input: PathBuf,
    /// For a perf.data: also look for its jitdumps and perf-PID.map files in DIR (repeatable).
    #[arg(long = "search-dir", value_name = "DIR")]
    pub search_dirs: Vec<PathBuf>,
    /// Also read lines and inlined frames from separate debug files (/usr/lib/debug/.build-id)
    /// of binaries without DWARF of their own. Slower; their symbol tables are always read.
    #[arg(long)]
    pub debug_files: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = FormatArg::Flamegraph)]
    pub format: FormatArg,
    /// Output file (`-` for stdout). Default: flamegraph.svg for flamegraph, stdout otherwise.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Only samples of this thread id.
    #[arg(long)]
    pub tid: Option<u32>,
    /// Only samples of threads with this name.
    #[arg(long, visible_alias = "thread")]
    pub comm: Option<String>,
    /// What widths measure: samples, calls or self time (calls/time need instrumentation:
    /// a Mono .mlpd with enter/leave events, or an XRay log).
    #[arg(long, value_enum)]
    pub weight: Option<WeightArg>,
    /// Only this range of seconds from the start: `START..END` (or `START-END`; either end may
    /// be left out).
    #[arg(long, value_name = "START..END", value_parser = parse_time_range)]
    pub time: Option<TimeRange>,
    /// The XRay-instrumented binary whose log `-i` names (for function names).
    #[arg(long, value_name = "ELF")]
    pub binary: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum WeightArg {
    Samples,
    Calls,
    Time,
}

fn parse_time_range(text: &str) -> Result<TimeRange, String> {
    TimeRange::parse(text)
}

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// A jitdump (`jit-PID.dump`) or a jprof recording (`jprof.data`).
    pub file: PathBuf,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["input", "jitdump"])))]
pub struct SymbolizeArgs {
    /// Name addresses from this recording (JIT side data, then native symbols).
    #[arg(short, long)]
    pub input: Option<PathBuf>,
    /// Name addresses from this jitdump alone.
    #[arg(long)]
    pub jitdump: Option<PathBuf>,
    /// The process (default: the recording's target, or the jitdump's pid).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Seconds after the recording's first sample (default: the end of the recording).
    #[arg(long, value_name = "T")]
    pub time: Option<f64>,
    /// Print each address before its frames.
    #[arg(short, long)]
    pub addresses: bool,
    /// Addresses in hex (`0x` optional).
    #[arg(required = true, value_name = "ADDR")]
    pub addrs: Vec<String>,
}

impl SymbolizeArgs {
    /// The config, or a usage error for an address that is not hex or a bad --time.
    pub fn into_config(self) -> crate::Result<SymbolizeConfig> {
        let addresses = self
            .addrs
            .iter()
            .map(|a| parse_address(a))
            .collect::<Result<Vec<_>, _>>()
            .map_err(crate::Error::Usage)?;
        if self.time.is_some_and(|t| !t.is_finite() || t < 0.0) {
            return Err(crate::Error::Usage(
                "--time must be a number of seconds, 0 or more".into(),
            ));
        }
        let source = match (self.input, self.jitdump) {
            (Some(path), _) => Source::Recording(path),
            (None, Some(path)) => Source::Jitdump(path),
            (None, None) => {
                return Err(crate::Error::Usage(
                    "give a recording (-i FILE) or a jitdump (--jitdump FILE)".into(),
                ))
            }
        };
        if self.time.is_some() && matches!(source, Source::Jitdump(_)) {
            return Err(crate::Error::Usage(
                "--time needs a recording (-i); a jitdump alone is named at its latest state"
                    .into(),
            ));
        }
        Ok(SymbolizeConfig {
            source,
            pid: self.pid,
            time: self.time,
            show_addresses: self.addresses,
            addresses,
        })
    }
}

impl From<RecordArgs> for RecordConfig {
    fn from(a: RecordArgs) -> Self {
        RecordConfig {
            target: match a.pid {
                Some(pid) => Target::Pid(pid),
                None => Target::Launch(a.command),
            },
            frequency_hz: a.frequency,
            output: a.output,
            duration: a.duration.map(std::time::Duration::from_secs_f64),
            event: match a.event {
                EventArg::Cycles => EventChoice::Cycles,
                EventArg::CpuClock => EventChoice::CpuClock,
            },
            call_graph: match a.call_graph {
                CallGraphArg::Fp => CallGraph::FramePointers,
                CallGraphArg::Dwarf => CallGraph::Dwarf,
            },
            embed_symbols: !a.no_embed_symbols,
            keep_side_files: a.keep_side_files,
            xray_fdr: a.xray == XrayModeArg::Fdr,
        }
    }
}

impl From<ReportArgs> for ReportConfig {
    fn from(a: ReportArgs) -> Self {
        ReportConfig {
            input: a.input,
            format: match a.format {
                FormatArg::Flamegraph => Format::Flamegraph,
                FormatArg::Collapsed => Format::Collapsed,
                FormatArg::Text => Format::Text,
            },
            output: a.output,
            tid: a.tid,
            comm: a.comm,
            search_dirs: a.search_dirs,
            debug_files: a.debug_files,
            weight: a.weight.map(|w| match w {
                WeightArg::Samples => Weight::Samples,
                WeightArg::Calls => Weight::Calls,
                WeightArg::Time => Weight::Time,
            }),
            time: a.time,
            binary: a.binary,
        }
    }
}
