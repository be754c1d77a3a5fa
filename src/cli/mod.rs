//! Command line (clap derive). Arguments become plain config structs; no logic lives here.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::input::{Request, Weight};
use crate::profile::{Filters, TimeRange};
use crate::record::{CallGraph, EventChoice, RecordConfig, Target};
use crate::report::diff::DiffConfig;
use crate::report::{Format, ReportConfig};
use crate::tools::symbolize::{parse_address, Source, SymbolizeConfig};

/// The `jprof` command line.
#[derive(Debug, Parser)]
#[command(
    name = "jprof",
    version,
    about = "Sampling profiler with JIT symbolization, on one timeline",
    after_help = "Examples:\n  jprof doctor                      # can this machine profile? what to fix\n  jprof record -- ./my-program arg1 # writes jprof.data\n  jprof report                      # flamegraph.svg + top functions\n  jprof diff before.data after.data -o diff.svg\n\nRun `jprof COMMAND --help` for each command's options and examples."
)]
pub struct Cli {
    /// The subcommand to run.
    #[command(subcommand)]
    pub command: Command,
}

/// A `jprof` subcommand with its arguments.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command (or attach to a process) and record samples into a recording file.
    #[command(
        after_help = "Examples:\n  jprof record -- ./my-program arg1\n  jprof record -F 4999 --call-graph dwarf -o run.data -- ./app\n  jprof record --duration 5 -- ./server"
    )]
    Record(RecordArgs),
    /// Read a recording (or a perf.data, Mono .mlpd or XRay log) and write a flame graph, folded
    /// stacks, a text summary, or a Firefox Profiler, pprof or speedscope profile.
    #[command(
        after_help = "Examples:\n  jprof report                         # flamegraph.svg + top 15 on stdout\n  jprof report --format collapsed -o - # folded stacks on stdout\n  jprof report --format text --tid 1234\n  jprof report -f text --sort total --limit 30\n  jprof report -f text --callers malloc   # who calls it, and how much\n  jprof report --serve                 # look around in the browser (speedscope)\n  jprof report --time 2..5 --comm worker --no-inline\n  jprof report --inverted --title 'checkout service' --min-width 0.5\n  jprof report --format firefox        # profile.json.gz for the Firefox Profiler\n  jprof report --format pprof -o cpu.pb.gz\n  jprof report -i perf.data --search-dir ./jit-files\n  jprof report --from clickhouse://127.0.0.1:8123/prof --label host=web-12 --time 0..60"
    )]
    Report(ReportArgs),
    /// Store profiles in ClickHouse (the fleet store): the symbolized samples of recordings,
    /// perf.data files, .mlpd files or XRay logs, with labels. Each file is stored once:
    /// pushing it again, or again after an interruption, completes it without doubling.
    #[command(
        after_help = "Examples:\n  jprof push --to clickhouse://db.example:8123/prof jprof.data\n  jprof push --to clickhouse://127.0.0.1:8123/prof --label service=checkout run1.data run2.data\n  jprof report --from clickhouse://127.0.0.1:8123/prof --label service=checkout\n\nLabels: host is this machine's name unless given. See docs/fleet.md for the tables."
    )]
    Push(PushArgs),
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
    /// Differential flame graph of two profiles (any input `report` reads, or folded stacks):
    /// B's shape, red where B spends more than A, blue where it spends less.
    #[command(
        after_help = "Examples:\n  jprof diff before.data after.data -o diff.svg\n  jprof diff --normalize old.folded new.folded   # compare shapes, not totals\n  jprof diff a.data b.data --comm worker --no-inline --inverted\n  jprof diff --from 'clickhouse://127.0.0.1:8123/prof' --from 'clickhouse://127.0.0.1:8123/prof?host=web-12'   # host against fleet"
    )]
    Diff(DiffArgs),
    /// A live view of the hottest functions (JIT names included) while a command or process
    /// runs: self and total time, refreshed every second. Keys: s (self), t (total), q or
    /// Ctrl-C (quit). The recording is kept.
    #[command(
        after_help = "Examples:\n  jprof top -- node server.js\n  jprof top -p 4242\n  jprof top -F 4999 -o top.data -- ./app"
    )]
    Top(TopArgs),
    /// Check whether this machine can profile (permissions, PMU, TSC, kernel symbols,
    /// runtimes, the Java agent) and print the exact fix for each problem. Exits 1 when
    /// profiling cannot work.
    #[command(
        after_help = "Examples:\n  jprof doctor\n  sudo jprof doctor   # what root would get"
    )]
    Doctor(DoctorArgs),
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  jprof completions bash > /etc/bash_completion.d/jprof\n  jprof completions zsh > \"${fpath[1]}/_jprof\"\n  jprof completions fish > ~/.config/fish/completions/jprof.fish"
    )]
    Completions(CompletionsArgs),
}

/// Parses the command line, or exits with clap's message (and status 2). A command given to
/// `record` without `--` (`jprof record ls -la`) gets the corrected command line as a tip.
pub fn parse() -> Cli {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) => {
            let tip = missing_dashes_tip(&error, &args);
            // Help and version requests print to stdout and exit 0, like any clap error.
            let _ = error.print();
            if let Some(tip) = tip {
                eprintln!("\n{tip}");
            }
            std::process::exit(error.exit_code());
        }
    }
}

/// For `jprof record [OPTIONS] CMD ARGS...` (or `top`), which clap refuses as an unexpected argument:
/// the same command line with `--` before CMD.
pub fn missing_dashes_tip(error: &clap::Error, args: &[std::ffi::OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(stray)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    if stray.starts_with('-') {
        return None;
    }
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let record = args.iter().position(|a| a == "record" || a == "top")?;
    if args.iter().any(|a| a == "--") {
        return None;
    }
    let at = record + 1 + args[record + 1..].iter().position(|a| a == stray)?;
    let mut fixed: Vec<String> = vec!["jprof".into()];
    fixed.extend(args[1..at].iter().cloned());
    fixed.push("--".into());
    fixed.extend(args[at..].iter().cloned());
    let shown: Vec<String> = fixed.iter().map(|a| shell_word(a)).collect();
    Some(format!(
        "tip: the command to profile goes after `--`: {}",
        shown.join(" ")
    ))
}

/// `word` as a shell would need it typed (quoted when it holds anything but plain characters).
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Writes the completion script of `shell` for the whole CLI.
pub fn write_completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    use clap::CommandFactory;
    clap_complete::generate(shell, &mut Cli::command(), "jprof", out);
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum EventArg {
    Cycles,
    CpuClock,
    TaskClock,
    PageFaults,
    ContextSwitches,
    CpuMigrations,
    Instructions,
    CacheMisses,
    BranchMisses,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum CallGraphArg {
    Fp,
    Dwarf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum XrayModeArg {
    Basic,
    Fdr,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum FormatArg {
    Flamegraph,
    Collapsed,
    Text,
    /// Firefox Profiler (profile.json.gz; open at profiler.firefox.com).
    Firefox,
    /// pprof profile.proto (profile.pb.gz; go tool pprof, Pyroscope, Parca).
    Pprof,
    /// speedscope JSON (profile.speedscope.json).
    Speedscope,
}

/// The longest `--duration` (a year): beyond it a typo, not a plan.
const MAX_DURATION_SECS: f64 = 365.0 * 24.0 * 3600.0;

/// `--duration SECS`: a positive, finite number of seconds, at most a year.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds (e.g. 10 or 0.5)"))?;
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!(
            "`{text}`: the duration must be a positive number of seconds"
        ));
    }
    if secs > MAX_DURATION_SECS {
        return Err(format!(
            "`{text}`: at most {MAX_DURATION_SECS} seconds (a year)"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// `--off-cpu-min 10us`: a duration with its unit (ns, us, ms, s), 0 to store every switch.
fn parse_off_cpu_min(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(0);
    }
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => {
            return Err(format!(
                "`{text}`: give a duration with its unit, e.g. 10us, 1ms, 500ns (or 0)"
            ))
        }
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * scale <= 3600e9 => Ok((v * scale) as u64),
        _ => Err(format!("`{text}`: a duration from 0 to an hour, e.g. 10us")),
    }
}

/// `record -o`: a file (stdout cannot hold a recording, which is rewritten when it ends).
fn parse_recording_path(text: &str) -> Result<PathBuf, String> {
    if text == "-" {
        return Err(
            "a recording cannot go to stdout (`-`): name a file, e.g. -o run.data, \
                    then `jprof report -i run.data -o -`"
                .into(),
        );
    }
    if text.is_empty() {
        return Err("an empty file name".into());
    }
    Ok(PathBuf::from(text))
}

/// An input file: a FIFO, a device or a directory is refused here (reading one would hang or
/// never end); a file that does not exist is left for the command to report.
fn parse_input_path(text: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::FileTypeExt;
    let path = PathBuf::from(text);
    match std::fs::metadata(&path) {
        Ok(m) if !m.is_file() => {
            let t = m.file_type();
            let what = if t.is_dir() {
                "a directory"
            } else if t.is_fifo() {
                "a FIFO"
            } else if t.is_char_device() || t.is_block_device() {
                "a device"
            } else if t.is_socket() {
                "a socket"
            } else {
                "not a regular file"
            };
            Err(format!(
                "{text} is {what}: jprof reads its inputs from regular files"
            ))
        }
        _ => Ok(path),
    }
}

/// Arguments of `jprof record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Sampling frequency in Hz.
    #[arg(short = 'F', long = "freq", default_value_t = 999,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) frequency: u64,
    /// Output recording file.
    #[arg(short, long, default_value = "jprof.data", value_parser = parse_recording_path)]
    pub(crate) output: PathBuf,
    /// Stop after this many seconds (the target keeps running in attach mode).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) duration: Option<std::time::Duration>,
    /// Sampling event; `cycles` falls back to `cpu-clock` when there is no PMU. Software events
    /// (cpu-clock, task-clock, page-faults, context-switches, cpu-migrations) exist everywhere;
    /// instructions, cache-misses and branch-misses need a PMU and are refused without one.
    #[arg(short, long, value_enum, default_value_t = EventArg::Cycles)]
    pub(crate) event: EventArg,
    /// How user stacks are collected: frame pointers, or a stack copy unwound with DWARF CFI.
    /// Default: chosen from the target (dwarf over a 64 KiB copy for CPython 3.12+, whose
    /// libpython has no frame pointers; fp otherwise).
    #[arg(long = "call-graph", value_enum)]
    pub(crate) call_graph: Option<CallGraphArg>,
    /// Do not store symbols of the sampled binaries in the recording.
    #[arg(long)]
    pub(crate) no_embed_symbols: bool,
    /// Keep the side files (e.g. Node's jit-PID.dump) jprof made the runtime write.
    #[arg(long)]
    pub(crate) keep_side_files: bool,
    /// XRay logging mode for an XRay-instrumented target: `basic` logs every call; `fdr` is
    /// for programs that start and flush FDR logging themselves.
    #[arg(long, value_enum, default_value_t = XrayModeArg::Basic, conflicts_with = "pid")]
    pub(crate) xray: XrayModeArg,
    /// Also record where threads wait: every switch off the CPU with its stack, and how long
    /// the thread stayed off (`report --weight off-cpu` or `--weight wall`).
    #[arg(long)]
    pub(crate) off_cpu: bool,
    /// With --off-cpu: switches shorter than this are counted, not stored with their stack.
    #[arg(long, value_name = "DURATION", default_value = "10us", value_parser = parse_off_cpu_min, requires = "off_cpu")]
    pub(crate) off_cpu_min: u64,
    /// Attach to these running processes (all their threads) instead of launching a command:
    /// `-p 4242`, `-p 4242,4243` or `-p 4242 -p 4243`.
    #[arg(short, long, value_name = "PID", value_delimiter = ',', num_args = 1,
          conflicts_with_all = ["command", "tid", "all_cpus"])]
    pub(crate) pid: Vec<u32>,
    /// Attach to these threads only (nothing they create later is followed).
    #[arg(long, value_name = "TID", value_delimiter = ',', num_args = 1,
          conflicts_with_all = ["command", "all_cpus"])]
    pub(crate) tid: Vec<u32>,
    /// The whole host: every process and thread on every CPU, kernel and user stacks, JIT
    /// code named per process.
    #[arg(short = 'a', long, conflicts_with = "command")]
    pub(crate) all_cpus: bool,
    /// The launched command starts a HotSpot JVM through a launcher jprof cannot see through
    /// (a script that runs "$JAVACMD", as Gradle's and Maven's wrappers do): its stacks are
    /// collected as for `java` from its first sample (without it, from when the JVM is seen
    /// mapping libjvm.so). Not needed for `java`, `javac` and other JDK launchers, nor through
    /// `env`, `time`, `timeout`, `nice` or `sh -c '… exec "$0" "$@"'`.
    #[arg(long, conflicts_with_all = ["pid", "tid", "all_cpus", "call_graph"])]
    pub(crate) jvm: bool,
    /// With -p, --tid or -a: do not load jprof's agent into running HotSpot JVMs (their
    /// compiled Java code then stays unnamed).
    #[arg(long, conflicts_with = "command")]
    pub(crate) no_java_agent: bool,
    /// With -a: record in windows of this length (`60s`, `5m`), each its own recording
    /// `OUTPUT.000001`, … pushed to --push while the next one records.
    #[arg(long, value_name = "DURATION", value_parser = parse_rotate, requires = "push")]
    pub(crate) rotate: Option<std::time::Duration>,
    /// With --rotate: the fleet store each window is pushed to, clickhouse://HOST:PORT/DB.
    /// Pushed windows are removed; while the store is unreachable at most 10 wait on disk.
    #[arg(long, value_name = "URL", requires_all = ["rotate", "all_cpus"])]
    pub(crate) push: Option<String>,
    /// With --push: a label of the pushes (repeatable; `host` is this machine's name unless
    /// given).
    #[arg(long = "label", value_name = "KEY=VALUE", requires = "push", value_parser = parse_label)]
    pub(crate) labels: Vec<crate::fleet::Label>,
    /// The command to run, after `--`.
    #[arg(last = true, required_unless_present_any = ["pid", "tid", "all_cpus"])]
    pub(crate) command: Vec<String>,
}

impl RecordArgs {
    /// `--rotate` with `--push`: the continuous mode's settings (None without them), or a usage
    /// error for a bad store address.
    pub fn continuous(&self) -> crate::Result<Option<crate::tools::continuous::Continuous>> {
        let (Some(rotate), Some(url)) = (self.rotate, &self.push) else {
            return Ok(None);
        };
        let (store, labels) =
            crate::fleet::Store::parse_with_labels(url).map_err(crate::Error::Usage)?;
        if !labels.is_empty() {
            return Err(crate::Error::Usage(
                "--push takes no ?labels: give them with --label KEY=VALUE".into(),
            ));
        }
        Ok(Some(crate::tools::continuous::Continuous {
            rotate,
            store,
            labels: self.labels.clone(),
        }))
    }
}

/// `--rotate 60s`: a window length with its unit (s, m, h), at least a second.
fn parse_rotate(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit {
        "s" | "" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("`{text}`: give a duration like 60s, 5m or 1h")),
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v * scale >= 1.0 && v * scale <= 86_400.0 => {
            Ok(std::time::Duration::from_secs_f64(v * scale))
        }
        _ => Err(format!("`{text}`: a window from 1s to 24h, e.g. 60s")),
    }
}

/// Arguments of `jprof top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Sampling frequency in Hz.
    #[arg(short = 'F', long = "freq", default_value_t = 999,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) frequency: u64,
    /// The recording top makes (kept when it ends).
    #[arg(short, long, default_value = "jprof.data", value_parser = parse_recording_path)]
    pub(crate) output: PathBuf,
    /// Rows of the table.
    #[arg(long, value_name = "N", default_value_t = 25, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub(crate) limit: u64,
    /// Watch this running process (all its threads) instead of launching a command.
    #[arg(short, long, conflicts_with = "command")]
    pub(crate) pid: Option<u32>,
    /// The command to run, after `--`.
    #[arg(last = true, required_unless_present = "pid")]
    pub(crate) command: Vec<String>,
}

impl From<TopArgs> for crate::tools::top::TopConfig {
    fn from(a: TopArgs) -> Self {
        let target = match a.pid {
            Some(pid) => vec!["-p".to_string(), pid.to_string()],
            None => std::iter::once("--".to_string()).chain(a.command).collect(),
        };
        Self {
            target,
            frequency_hz: a.frequency,
            output: a.output,
            rows: a.limit as usize,
        }
    }
}

/// Arguments of `jprof report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Input: a jprof recording (jprof.data), a perf.data from `perf record -k 1 -g`, a Mono log
    /// profiler file (.mlpd) or an LLVM XRay log (`--binary` names its functions).
    #[arg(short, long, default_value = "jprof.data", value_parser = parse_input_path)]
    pub(crate) input: PathBuf,
    /// Read the fleet store instead of a file: the samples `jprof push` stored at
    /// clickhouse://HOST:PORT/DB (its HTTP port), of every push whose labels match --label.
    #[arg(long, value_name = "URL", conflicts_with = "input")]
    pub(crate) from: Option<String>,
    /// With --from: only pushes with this label (repeatable; the same key twice means either
    /// value).
    #[arg(long = "label", value_name = "KEY=VALUE", requires = "from", value_parser = parse_label)]
    pub(crate) labels: Vec<crate::fleet::Label>,
    /// Also look in DIR (repeatable) for binaries whose file on disk is another build than the
    /// recording's (by build id), and for a perf.data's jitdumps and perf-PID.map files.
    #[arg(long = "search-dir", value_name = "DIR")]
    pub(crate) search_dirs: Vec<PathBuf>,
    /// Also read lines and inlined frames from separate debug files (/usr/lib/debug/.build-id)
    /// of binaries without DWARF of their own. Slower; their symbol tables are always read.
    #[arg(long)]
    pub(crate) debug_files: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = FormatArg::Flamegraph)]
    pub(crate) format: FormatArg,
    /// Output file (`-` for stdout). Default: flamegraph.svg for flamegraph, profile.json.gz for
    /// firefox, profile.pb.gz for pprof, profile.speedscope.json for speedscope, stdout otherwise.
    #[arg(short, long)]
    pub(crate) output: Option<PathBuf>,
    /// What widths measure: samples, calls or self time (calls/time need instrumentation:
    /// a Mono .mlpd with enter/leave events, or an XRay log); off-cpu (ns threads waited) or
    /// wall (on-CPU plus off-CPU ns) for a recording made with `record --off-cpu`.
    #[arg(long, value_enum)]
    pub(crate) weight: Option<WeightArg>,
    /// The XRay-instrumented binary whose log `-i` names (for function names).
    #[arg(long, value_name = "ELF")]
    pub(crate) binary: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) filters: FilterArgs,
    #[command(flatten)]
    pub(crate) flame: FlameArgs,
    #[command(flatten)]
    pub(crate) tables: TableArgs,
    /// Show the profile in the browser: speedscope (built in, works offline) served on
    /// 127.0.0.1 under a random token; open the printed URL. Runs until Ctrl-C.
    #[arg(long, conflicts_with_all = ["output", "format"])]
    pub(crate) serve: bool,
}

/// The text report's tables (`--format text`, and the summary next to a flame graph).
#[derive(Debug, Args)]
#[command(next_help_heading = "Text report")]
pub(crate) struct TableArgs {
    /// Only the top table by this weight (by default both: self, then total).
    #[arg(long, value_enum, value_name = "self|total")]
    pub(crate) sort: Option<SortArg>,
    /// Rows per table.
    #[arg(long, value_name = "N", default_value_t = crate::input::DEFAULT_LIMIT as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) limit: u64,
    /// Who calls FUNC, with the share of FUNC's time each caller accounts for, instead of the
    /// top tables. FUNC is a name as the tables show it, or a part of one.
    #[arg(long, value_name = "FUNC", conflicts_with = "callees")]
    pub(crate) callers: Option<String>,
    /// What FUNC calls (and `[self]`, its own time), instead of the top tables.
    #[arg(long, value_name = "FUNC")]
    pub(crate) callees: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum SortArg {
    /// Time in the function itself.
    #[value(name = "self")]
    SelfTime,
    /// Time in the function and everything it calls.
    Total,
}

impl From<TableArgs> for crate::input::Tables {
    fn from(a: TableArgs) -> Self {
        use crate::input::SortBy;
        Self {
            sort: a.sort.map(|s| match s {
                SortArg::SelfTime => SortBy::SelfWeight,
                SortArg::Total => SortBy::Total,
            }),
            limit: usize::try_from(a.limit).unwrap_or(usize::MAX),
            callers: a.callers,
            callees: a.callees,
        }
    }
}

/// The filters every output format shares (report and diff).
#[derive(Debug, Args)]
#[command(next_help_heading = "Filters (every format)")]
pub(crate) struct FilterArgs {
    /// Only samples of this thread id.
    #[arg(long)]
    pub(crate) tid: Option<u32>,
    /// Only samples of this process id.
    #[arg(long)]
    pub(crate) pid: Option<u32>,
    /// Only samples of threads with this name (as it was when sampled).
    #[arg(long, visible_alias = "thread", value_name = "NAME")]
    pub(crate) comm: Option<String>,
    /// Only this range of seconds from the start: `START..END` (or `START-END`; either end may
    /// be left out).
    #[arg(long, value_name = "START..END", value_parser = parse_time_range)]
    pub(crate) time: Option<TimeRange>,
    /// Append `(file:line)` to frame names, so each line of a function is its own frame.
    #[arg(long)]
    pub(crate) lines: bool,
    /// Drop inlined frames; their samples go to the function they were inlined into.
    #[arg(long)]
    pub(crate) no_inline: bool,
    /// Show names in full, as the runtime or demangler wrote them: C++ parameter lists, return
    /// types and template arguments, Java and C# parameter types, JS and Python full paths.
    /// By default names are short (`ns::Class::method`, `fn file.js:12`, `pkg.Class.method`).
    #[arg(long)]
    pub(crate) signatures: bool,
}

impl FilterArgs {
    fn filters(&self) -> Filters {
        Filters {
            tid: self.tid,
            pid: self.pid,
            comm: self.comm.clone(),
            time: self.time,
            lines: self.lines,
            no_inline: self.no_inline,
        }
    }
}

/// How a flame graph is drawn (report's flamegraph format, and diff).
#[derive(Debug, Args)]
#[command(next_help_heading = "Flame graph")]
pub(crate) struct FlameArgs {
    /// Icicle graph: roots at the top, stacks growing down.
    #[arg(long)]
    pub(crate) inverted: bool,
    /// Title at the top of the graph (default: jprof and the profiled command).
    #[arg(long)]
    pub(crate) title: Option<String>,
    /// Leave out frames narrower than this percentage of the width (default 0.01).
    #[arg(long, value_name = "PERCENT", value_parser = parse_min_width)]
    pub(crate) min_width: Option<f64>,
}

impl From<FlameArgs> for crate::output::flamegraph::Look {
    fn from(a: FlameArgs) -> Self {
        Self {
            inverted: a.inverted,
            title: a.title,
            min_width: a.min_width,
        }
    }
}

fn parse_min_width(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("{text:?} is not a percentage from 0 to 100")),
    }
}

/// Arguments of `jprof diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The baseline: any input `report -i` reads (jprof.data, perf.data, .mlpd, XRay log) or a
    /// folded-stacks file.
    #[arg(value_name = "A", value_parser = parse_input_path, required_unless_present = "from")]
    pub(crate) before: Option<PathBuf>,
    /// The profile compared with A (same kinds of input); the graph has its shape.
    #[arg(value_name = "B", value_parser = parse_input_path, required_unless_present = "from")]
    pub(crate) after: Option<PathBuf>,
    /// Compare two selections of the fleet store instead of files: give it twice, A then B,
    /// each clickhouse://HOST:PORT/DB with its labels as `?KEY=VALUE&…` (--label adds to both).
    #[arg(long, value_name = "URL", num_args = 1, conflicts_with_all = ["before", "after"])]
    pub(crate) from: Vec<String>,
    /// With --from: only pushes with this label, on both sides (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE", requires = "from", value_parser = parse_label)]
    pub(crate) labels: Vec<crate::fleet::Label>,
    /// Output SVG (`-` for stdout).
    #[arg(short, long, default_value = crate::report::diff::DEFAULT_DIFF_SVG)]
    pub(crate) output: PathBuf,
    /// Scale A's counts so both inputs have the same total: compare where time goes, not how
    /// much there was.
    #[arg(long)]
    pub(crate) normalize: bool,
    /// Also look in DIR (repeatable) for binaries by build id, and for a perf.data's jitdumps
    /// and perf maps.
    #[arg(long = "search-dir", value_name = "DIR")]
    pub(crate) search_dirs: Vec<PathBuf>,
    /// Also read separate debug files (/usr/lib/debug/.build-id) for lines and inlined frames.
    #[arg(long)]
    pub(crate) debug_files: bool,
    /// What widths measure, as in `report --weight`: samples; calls or time (a Mono .mlpd with
    /// enter/leave events, or an XRay log); off-cpu or wall (recordings made with
    /// `record --off-cpu`).
    #[arg(long, value_enum)]
    pub(crate) weight: Option<WeightArg>,
    #[command(flatten)]
    pub(crate) filters: FilterArgs,
    #[command(flatten)]
    pub(crate) flame: FlameArgs,
}

/// Arguments of `jprof push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The store: clickhouse://HOST:PORT/DB, the port of ClickHouse's HTTP interface (8123 by
    /// default). The database and jprof's tables are created on first use.
    #[arg(long, value_name = "URL")]
    pub(crate) to: String,
    /// A label of these pushes, to select them by later (repeatable). `host` is this machine's
    /// name unless given.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub(crate) labels: Vec<crate::fleet::Label>,
    /// Samples per insert (at most).
    #[arg(long, value_name = "N", default_value_t = crate::fleet::DEFAULT_BATCH_ROWS as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) batch_rows: u64,
    /// The inputs: jprof recordings, perf.data files, Mono .mlpd files, XRay logs.
    #[arg(required = true, value_name = "FILE", value_parser = parse_input_path)]
    pub(crate) files: Vec<PathBuf>,
}

impl PushArgs {
    /// The config, or a usage error for a bad store address.
    pub fn into_config(self) -> crate::Result<crate::fleet::PushConfig> {
        let (store, labels) =
            crate::fleet::Store::parse_with_labels(&self.to).map_err(crate::Error::Usage)?;
        if !labels.is_empty() {
            return Err(crate::Error::Usage(
                "--to takes no ?labels: give them with --label KEY=VALUE".into(),
            ));
        }
        Ok(crate::fleet::PushConfig {
            store,
            labels: self.labels,
            files: self.files,
            batch_rows: usize::try_from(self.batch_rows).unwrap_or(usize::MAX),
        })
    }
}

fn parse_label(text: &str) -> Result<crate::fleet::Label, String> {
    crate::fleet::Label::parse(text)
}

/// Arguments of `jprof doctor` (none).
#[derive(Debug, Args)]
pub struct DoctorArgs {}

/// Arguments of `jprof completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to write a completion script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum WeightArg {
    Samples,
    Calls,
    Time,
    OffCpu,
    Wall,
}

impl From<WeightArg> for Weight {
    fn from(w: WeightArg) -> Self {
        match w {
            WeightArg::Samples => Weight::Samples,
            WeightArg::Calls => Weight::Calls,
            WeightArg::Time => Weight::Time,
            WeightArg::OffCpu => Weight::OffCpu,
            WeightArg::Wall => Weight::Wall,
        }
    }
}

fn parse_time_range(text: &str) -> Result<TimeRange, String> {
    TimeRange::parse(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tip(line: &[&str]) -> Option<String> {
        let args: Vec<std::ffi::OsString> = line.iter().map(Into::into).collect();
        let error = Cli::try_parse_from(&args).expect_err("refused");
        missing_dashes_tip(&error, &args)
    }

    #[test]
    fn a_command_without_dashes_gets_the_fixed_command_line() {
        assert_eq!(
            tip(&["jprof", "record", "ls"]).as_deref(),
            Some("tip: the command to profile goes after `--`: jprof record -- ls")
        );
        assert_eq!(
            tip(&["jprof", "record", "-F", "99", "ls", "-la", "my dir"]).as_deref(),
            Some("tip: the command to profile goes after `--`: jprof record -F 99 -- ls -la 'my dir'")
        );
        // Other mistakes get clap's message alone.
        assert_eq!(
            tip(&["jprof", "top", "node", "app.js"]).as_deref(),
            Some("tip: the command to profile goes after `--`: jprof top -- node app.js")
        );
        assert_eq!(tip(&["jprof", "record", "--frobnicate", "ls"]), None);
        assert_eq!(tip(&["jprof", "report", "extra"]), None);
    }
}

/// Arguments of `jprof dump`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    /// A jitdump (`jit-PID.dump`) or a jprof recording (`jprof.data`).
    #[arg(value_parser = parse_input_path)]
    pub file: PathBuf,
}

/// Arguments of `jprof symbolize`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["input", "jitdump"])))]
pub struct SymbolizeArgs {
    /// Name addresses from this recording (JIT side data, then native symbols).
    #[arg(short, long, value_parser = parse_input_path)]
    pub(crate) input: Option<PathBuf>,
    /// Name addresses from this jitdump alone.
    #[arg(long, value_parser = parse_input_path)]
    pub(crate) jitdump: Option<PathBuf>,
    /// The process (default: the recording's target, or the jitdump's pid).
    #[arg(long)]
    pub(crate) pid: Option<u32>,
    /// Seconds after the recording's first sample (default: the end of the recording).
    #[arg(long, value_name = "T")]
    pub(crate) time: Option<f64>,
    /// Print each address before its frames.
    #[arg(short, long)]
    pub(crate) addresses: bool,
    /// Addresses in hex (`0x` optional).
    #[arg(required = true, value_name = "ADDR")]
    pub(crate) addrs: Vec<String>,
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
            target: if a.all_cpus {
                Target::System
            } else if !a.tid.is_empty() {
                Target::Tids(a.tid)
            } else if !a.pid.is_empty() {
                Target::Pids(a.pid)
            } else {
                Target::Launch(a.command)
            },
            frequency_hz: a.frequency,
            output: a.output,
            duration: a.duration,
            event: match a.event {
                EventArg::Cycles => EventChoice::Cycles,
                EventArg::CpuClock => EventChoice::CpuClock,
                EventArg::TaskClock => EventChoice::TaskClock,
                EventArg::PageFaults => EventChoice::PageFaults,
                EventArg::ContextSwitches => EventChoice::ContextSwitches,
                EventArg::CpuMigrations => EventChoice::CpuMigrations,
                EventArg::Instructions => EventChoice::Instructions,
                EventArg::CacheMisses => EventChoice::CacheMisses,
                EventArg::BranchMisses => EventChoice::BranchMisses,
            },
            call_graph: a.call_graph.map(|c| match c {
                CallGraphArg::Fp => CallGraph::FramePointers,
                CallGraphArg::Dwarf => CallGraph::Dwarf,
            }),
            embed_symbols: !a.no_embed_symbols,
            keep_side_files: a.keep_side_files,
            xray_fdr: a.xray == XrayModeArg::Fdr,
            off_cpu_min_ns: a.off_cpu.then_some(a.off_cpu_min),
            java_agent: !a.no_java_agent,
            jvm: a.jvm,
        }
    }
}

impl ReportArgs {
    /// The config, or a usage error for a bad `--from`.
    pub fn into_config(self) -> crate::Result<ReportConfig> {
        let from = match &self.from {
            Some(url) => Some(
                crate::fleet::Selection::parse(url, &self.labels).map_err(crate::Error::Usage)?,
            ),
            None => None,
        };
        Ok(ReportConfig {
            from,
            ..self.into()
        })
    }
}

impl From<ReportArgs> for ReportConfig {
    fn from(a: ReportArgs) -> Self {
        ReportConfig {
            from: None,
            input: Request {
                path: a.input,
                weight: a.weight.map(Weight::from),
                filters: a.filters.filters(),
                search_dirs: a.search_dirs,
                debug_files: a.debug_files,
                binary: a.binary,
                signatures: a.filters.signatures,
                tables: a.tables.into(),
            },
            format: match a.format {
                FormatArg::Flamegraph => Format::Flamegraph,
                FormatArg::Collapsed => Format::Collapsed,
                FormatArg::Text => Format::Text,
                FormatArg::Firefox => Format::Firefox,
                FormatArg::Pprof => Format::Pprof,
                FormatArg::Speedscope => Format::Speedscope,
            },
            output: a.output,
            flamegraph: a.flame.into(),
            serve: a.serve,
        }
    }
}

impl DiffArgs {
    /// The config, or a usage error for `--from` given other than twice, or a bad address.
    pub fn into_config(self) -> crate::Result<DiffConfig> {
        use crate::report::diff::DiffInput;
        let (before, after) = match (&self.before, &self.after, self.from.as_slice()) {
            (Some(a), Some(b), []) => (DiffInput::File(a.clone()), DiffInput::File(b.clone())),
            (None, None, [a, b]) => {
                let parse = |url: &str| {
                    crate::fleet::Selection::parse(url, &self.labels)
                        .map(DiffInput::Store)
                        .map_err(crate::Error::Usage)
                };
                (parse(a)?, parse(b)?)
            }
            _ => {
                return Err(crate::Error::Usage(
                    "give two inputs (A B), or --from twice (A, then B)".into(),
                ))
            }
        };
        let mut config = DiffConfig::from(self);
        config.before = before;
        config.after = after;
        Ok(config)
    }
}

impl From<DiffArgs> for DiffConfig {
    fn from(a: DiffArgs) -> Self {
        use crate::report::diff::DiffInput;
        let report = ReportConfig {
            from: None,
            input: Request {
                path: a.before.clone().unwrap_or_default(),
                weight: a.weight.map(Weight::from),
                filters: a.filters.filters(),
                search_dirs: a.search_dirs,
                debug_files: a.debug_files,
                binary: None,
                signatures: a.filters.signatures,
                tables: Default::default(),
            },
            format: Format::Flamegraph,
            output: None,
            flamegraph: a.flame.into(),
            serve: false,
        };
        DiffConfig {
            before: DiffInput::File(a.before.unwrap_or_default()),
            after: DiffInput::File(a.after.unwrap_or_default()),
            output: Some(a.output),
            normalize: a.normalize,
            report,
        }
    }
}
