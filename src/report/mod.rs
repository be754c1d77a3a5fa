//! Offline: recording → profile → outputs (flame graph SVG, folded stacks, text). This file
//! owns `jprof report`'s choice of outputs and where they go; the writers are in the submodules.

pub mod collapsed;
pub mod coverage;
pub mod diff;
pub mod export;
pub mod filter;
pub mod firefox;
pub mod flamegraph;
pub mod mlpd;
pub mod pprof;
pub mod signatures;
pub mod speedscope;
pub mod text;
pub mod xray_log;

pub use filter::{Filters, TimeRange};

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::import;
use crate::recording::Recording;
use crate::symbolize::jit_index::JitIndex;
use crate::symbolize::{self, ResolveOptions};

/// Output format of `jprof report`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Flamegraph,
    Collapsed,
    Text,
    /// Firefox Profiler processed profile, gzipped JSON.
    Firefox,
    /// pprof's profile.proto, gzipped.
    Pprof,
    /// speedscope's JSON file format.
    Speedscope,
}

/// What `jprof report` should do.
#[derive(Clone, Debug)]
pub struct ReportConfig {
    /// Default is `jprof.data`.
    pub input: PathBuf,
    /// Default is flamegraph.
    pub format: Format,
    /// `None` = the format's default (`flamegraph.svg`, or stdout for text/collapsed); `-` = stdout.
    pub output: Option<PathBuf>,
    pub tid: Option<u32>,
    pub comm: Option<String>,
    /// Where the side files of an imported perf.data are looked for by file name.
    pub search_dirs: Vec<PathBuf>,
    /// Lines and inlined frames from separate debug files (`--debug-files`).
    pub debug_files: bool,
    /// What a stack is weighted by; `None` = the input's natural weight (samples for
    /// recordings; for a Mono .mlpd samples when it has SAMPLE hits, else calls; time for XRay).
    pub weight: Option<Weight>,
    /// Only what happened in this range of seconds from the start of the input.
    pub time: Option<TimeRange>,
    /// The instrumented binary of an XRay log (`--binary`).
    pub binary: Option<PathBuf>,
    /// Only samples of this process (`--pid`).
    pub pid: Option<u32>,
    /// Append file:line to frame names (`--lines`).
    pub lines: bool,
    /// Drop inlined frames (`--no-inline`).
    pub no_inline: bool,
    /// Keep every Java signature (`--signatures`); by default only overloads keep theirs.
    pub signatures: bool,
    /// `--inverted`, `--title`, `--min-width` of the flame graph.
    pub flamegraph: flamegraph::Look,
}

impl ReportConfig {
    /// The filters shared by every format.
    pub fn filters(&self) -> Filters {
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

/// What the width of a stack in the outputs measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    /// Sampled hits (the event's period for perf samples).
    Samples,
    /// Number of calls of the leaf via that stack (instrumentation: Mono enter/leave, XRay).
    Calls,
    /// Self time in ns of the leaf via that stack (instrumentation).
    Time,
    /// Nanoseconds threads spent off the CPU after switching out at that stack
    /// (`record --off-cpu`).
    OffCpu,
    /// On-CPU ns (samples × their period in ns) plus off-CPU ns: where wall time went.
    Wall,
}

/// What kind of file `report -i` was given, told by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// A jprof recording (`jprof.data`).
    Recording,
    /// A perf.data from `perf record`.
    PerfData,
    /// A Mono log profiler file (`.mlpd`).
    Mlpd,
    /// An LLVM XRay log (FDR or basic mode).
    XrayLog,
}

impl InputKind {
    /// Tells the kind from the file's first bytes; anything unknown is treated as a recording,
    /// whose reader gives the precise error.
    pub fn detect(path: &Path) -> Self {
        if import::is_perf_data(path) {
            return Self::PerfData;
        }
        let mut head = [0u8; 8];
        let n = std::fs::File::open(path)
            .and_then(|mut f| {
                use std::io::Read;
                f.read(&mut head)
            })
            .unwrap_or(0);
        let head = &head[..n];
        // Mono's log header starts with the magic 0x4D505A01 stored little-endian.
        if head.starts_with(&[0x01, 0x5A, 0x50, 0x4D]) {
            return Self::Mlpd;
        }
        // XRay: u16 version (1..=5) then u16 type (0 = naive/basic, 1 = FDR), in the byte
        // order of the machine that wrote it.
        if n >= 4 {
            let le = (
                u16::from_le_bytes([head[0], head[1]]),
                u16::from_le_bytes([head[2], head[3]]),
            );
            let be = (
                u16::from_be_bytes([head[0], head[1]]),
                u16::from_be_bytes([head[2], head[3]]),
            );
            if [le, be]
                .iter()
                .any(|&(version, kind)| (1..=5).contains(&version) && kind <= 1)
            {
                return Self::XrayLog;
            }
        }
        Self::Recording
    }
}

/// How many functions the text tables list.
pub const TOP_N: usize = 15;

/// Default output file of the flamegraph format.
pub const DEFAULT_SVG: &str = "flamegraph.svg";

/// Where one output goes.
pub(crate) enum Destination {
    Stdout,
    File(PathBuf),
}

impl Destination {
    pub(crate) fn of(output: Option<&Path>, default_file: Option<&str>) -> Self {
        match (output, default_file) {
            (Some(p), _) if p == Path::new("-") => Self::Stdout,
            (Some(p), _) => Self::File(p.to_path_buf()),
            (None, Some(f)) => Self::File(PathBuf::from(f)),
            (None, None) => Self::Stdout,
        }
    }

    /// Runs `write` on a buffered writer for the destination; I/O errors name the file.
    pub(crate) fn write_with(
        &self,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<()> {
        match self {
            Self::Stdout => {
                let stdout = io::stdout();
                let mut w = BufWriter::new(stdout.lock());
                write(&mut w)
                    .and_then(|()| w.flush())
                    .map_err(|e| Error::io(Path::new("<stdout>"), e))
            }
            Self::File(path) => crate::foreign_file::write_atomically(path, write),
        }
    }
}

/// The flame graph's title and count name for a recording.
pub fn labels(recording: &Recording) -> flamegraph::Labels {
    let meta = &recording.meta;
    let what = if !meta.command.is_empty() {
        meta.command.join(" ")
    } else if let Some(pid) = meta.attached_pid {
        format!("pid {pid}")
    } else {
        recording.path.display().to_string()
    };
    flamegraph::Labels {
        title: format!("jprof: {what}"),
        count_name: meta.event.event.clone(),
        subtitle: losses(recording),
    }
}

/// What the recording lost, for every output's title or subtitle: a flame graph missing a
/// share of its samples must say so where the user looks.
pub fn losses(recording: &Recording) -> Option<String> {
    let s = recording.summary.as_ref()?;
    let mut parts = Vec::new();
    if s.lost_samples > 0 || s.lost_records > 0 {
        parts.push(format!(
            "{} samples lost ({} records dropped by the kernel)",
            s.lost_samples, s.lost_records
        ));
    }
    if s.throttles > 0 {
        parts.push(format!("throttled {} times", s.throttles));
    }
    if s.dropped_batches > 0 {
        parts.push(format!(
            "{} samples in {} batches dropped by jprof",
            s.dropped_samples, s.dropped_batches
        ));
    }
    (!parts.is_empty()).then(|| format!("incomplete: {}", parts.join(", ")))
}

/// Reads a recording (or imports a perf.data), symbolizes it, applies the filters and the
/// weight.
pub fn load(config: &ReportConfig) -> Result<(Recording, crate::profile::Profile)> {
    let (recording, mut profile, _) = load_unfiltered(config)?;
    filter::apply(&mut profile, &config.filters());
    weigh(&recording, &mut profile, config.weight)?;
    Ok((recording, profile))
}

/// What widths count under `weight`, when not the recording's event.
pub fn weigh_name(weight: Option<Weight>) -> Option<&'static str> {
    match weight? {
        Weight::Samples => Some("samples"),
        Weight::OffCpu => Some("off-CPU ns"),
        Weight::Wall => Some("wall ns"),
        Weight::Calls => Some("calls"),
        Weight::Time => Some("ns"),
    }
}

/// What the widths of a weighed profile count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Weighing {
    /// The flame graph's count name and the exports' event name.
    pub count_name: String,
    pub unit: export::WeightUnit,
    /// Said in titles: what the graph shows, when not the CPU samples.
    pub shows: Option<&'static str>,
    /// What the ns count, for formats that name it (pprof's sample type).
    pub time_kind: &'static str,
}

/// Sets every sample's weight for `weight` and keeps the samples it counts: CPU samples by
/// default; switch-outs (`record --off-cpu`) for off-cpu; both, in ns, for wall.
pub fn weigh(
    recording: &Recording,
    profile: &mut crate::profile::Profile,
    weight: Option<Weight>,
) -> Result<Option<Weighing>> {
    let event = &recording.meta.event;
    if matches!(weight, Some(Weight::OffCpu | Weight::Wall)) && event.off_cpu_ids.is_empty() {
        return Err(Error::Usage(format!(
            "{} has no off-CPU data: record with `jprof record --off-cpu`",
            recording.path.display()
        )));
    }
    let ns = export::WeightUnit::Nanoseconds;
    let weighing = match weight {
        None | Some(Weight::Calls | Weight::Time) => {
            profile.samples.retain(|s| !s.off_cpu);
            None
        }
        Some(Weight::Samples) => {
            // One per sample, like `perf script | inferno-collapse-perf`.
            profile.samples.retain(|s| !s.off_cpu);
            for sample in &mut profile.samples {
                sample.weight = 1;
            }
            profile.notes.insert(
                0,
                "weights: samples (1 per sample, --weight samples)".into(),
            );
            Some(Weighing {
                count_name: "samples".into(),
                unit: export::WeightUnit::Events,
                shows: None,
                time_kind: "cpu",
            })
        }
        Some(Weight::OffCpu) => {
            profile.samples.retain(|s| s.off_cpu);
            profile.notes.insert(
                0,
                "weights: ns off the CPU after each switch-out (--weight off-cpu)".into(),
            );
            Some(Weighing {
                count_name: weigh_name(weight).unwrap_or_default().into(),
                unit: ns,
                shows: Some("off-CPU time"),
                time_kind: "off-cpu",
            })
        }
        Some(Weight::Wall) => {
            // cpu-clock periods are ns; a cycles sample stands for one sampling interval.
            let per_sample =
                (!event.periods_are_ns()).then(|| 1_000_000_000 / event.frequency_hz.max(1));
            for sample in profile.samples.iter_mut().filter(|s| !s.off_cpu) {
                sample.weight = per_sample.unwrap_or(sample.weight);
            }
            profile.notes.insert(
                0,
                match per_sample {
                    Some(ns) => format!(
                        "weights: wall ns (--weight wall): off-CPU ns, and {ns} ns per CPU \
                         sample ({} Hz)",
                        event.frequency_hz
                    ),
                    None => "weights: wall ns (--weight wall): off-CPU ns, and each CPU \
                             sample's cpu-clock period"
                        .into(),
                },
            );
            Some(Weighing {
                count_name: weigh_name(weight).unwrap_or_default().into(),
                unit: ns,
                shows: Some("wall time: on-CPU + off-CPU"),
                time_kind: "wall",
            })
        }
    };
    Ok(weighing)
}

/// Reads and symbolizes; only `--tid`/`--comm` are applied already (so filtered-out samples
/// are never symbolized), the rest of the filters are the caller's. Also returns the JIT index
/// symbolization used.
pub fn load_unfiltered(
    config: &ReportConfig,
) -> Result<(Recording, crate::profile::Profile, JitIndex)> {
    let recording = crate::progress::while_busy(
        &format!("reading {}", config.input.display()),
        || -> Result<Recording> {
            if import::is_perf_data(&config.input) {
                let options = import::ImportOptions {
                    search_dirs: config.search_dirs.clone(),
                };
                import::import(&config.input, &options)
            } else {
                Recording::open(&config.input)
            }
        },
    )?;
    let options = ResolveOptions {
        // Also applied here so filtered-out samples are never symbolized.
        tid: config.tid,
        comm: config.comm.clone(),
        debug_files: config.debug_files,
        progress: crate::progress::Progress::bar("symbolizing"),
    };
    let (mut profile, jit) = symbolize::resolve_with_jit(&recording, &options)?;
    options.progress.finish();
    if !config.signatures {
        signatures::shorten(&mut profile);
    }
    Ok((recording, profile, jit))
}

/// Runs `jprof report`.
pub fn run(config: &ReportConfig) -> Result<()> {
    match InputKind::detect(&config.input) {
        InputKind::Mlpd => return mlpd::run(config),
        InputKind::XrayLog => return xray_log::run(config),
        InputKind::Recording | InputKind::PerfData => {}
    }
    if matches!(config.weight, Some(Weight::Calls | Weight::Time)) {
        return Err(Error::Usage(
            "--weight calls|time needs instrumentation data: a Mono .mlpd or an XRay log \
             (`jprof report -i FILE`); a recording or perf.data is weighted by samples"
                .into(),
        ));
    }
    let (recording, mut profile, jit) = load_unfiltered(config)?;
    // XRay logs stored in the recording complete stacks before any filter looks at them.
    let xray = crate::xray::live::correlate(&recording, &mut profile);
    filter::apply(&mut profile, &config.filters());
    let weighing = weigh(&recording, &mut profile, config.weight)?;
    let mut labels = labels(&recording);
    if let Some(w) = &weighing {
        labels.count_name = w.count_name.clone();
        if let Some(shows) = w.shows {
            labels.title = format!("{} — {shows}", labels.title);
        }
    }
    let mut summary = Vec::new();
    text::write(&recording, &profile, TOP_N, &mut summary)
        .and_then(|()| match &xray {
            Some(x) if config.format == Format::Text => x.write(&mut summary),
            Some(x) => writeln!(summary, "\n{}", x.agreement_line()),
            None => Ok(()),
        })
        .map_err(|e| Error::io(Path::new("<memory>"), e))?;
    if config.format == Format::Text {
        return Destination::of(config.output.as_deref(), None)
            .write_with(|w| w.write_all(&summary));
    }
    let mut context = export::ExportContext::from_recording(&recording, &profile, &jit);
    if let Some(w) = &weighing {
        context.event = w.count_name.clone();
        context.weight_unit = w.unit;
        context.time_kind = w.time_kind;
        if let Some(shows) = w.shows {
            context.title = format!("{} — {shows}", context.title);
        }
    }
    write_profile(config, &profile, &labels, &context, summary)
}

/// Writes a profile in `config.format` (any format but text, which each input kind writes
/// its own way). `summary` is printed next to a flame graph written to a file.
pub fn write_profile(
    config: &ReportConfig,
    profile: &crate::profile::Profile,
    labels: &flamegraph::Labels,
    context: &export::ExportContext,
    mut summary: Vec<u8>,
) -> Result<()> {
    let output = config.output.as_deref();
    match config.format {
        Format::Collapsed | Format::Text => {
            Destination::of(output, None).write_with(|w| collapsed::write(profile, w))
        }
        Format::Firefox | Format::Pprof | Format::Speedscope => {
            let file = export::default_file(config.format);
            let destination = Destination::of(output, file);
            destination.write_with(|w| export::write(config.format, profile, context, w))?;
            if let Destination::File(path) = &destination {
                println!(
                    "{} samples written to {}",
                    profile.samples.len(),
                    path.display()
                );
            }
            Ok(())
        }
        Format::Flamegraph => {
            let svg = Destination::of(output, Some(DEFAULT_SVG));
            let folded = collapsed::lines_to_draw(profile, config.flamegraph.min_width_percent());
            let drawn = if folded.is_empty() {
                // Checked before creating the file, so no empty SVG is left behind.
                Err(Error::Other(
                    "no samples to draw, no flame graph written (see the summary above and the \
                     --tid/--pid/--comm/--time filters)"
                        .into(),
                ))
            } else {
                let mut palette = flamegraph::kind_palette(profile);
                svg.write_with(|w| {
                    flamegraph::write(&folded, labels, &config.flamegraph, Some(&mut palette), w)
                })
            };
            // The text top list goes to stdout next to the SVG file, or to stderr when the SVG
            // itself is on stdout, so it never corrupts the SVG.
            match &svg {
                Destination::Stdout => io::stderr().write_all(&summary),
                Destination::File(path) => {
                    if drawn.is_ok() {
                        summary.extend_from_slice(
                            format!("\nFlame graph: {}\n", path.display()).as_bytes(),
                        );
                    }
                    io::stdout().write_all(&summary)
                }
            }
            .map_err(|e| Error::io(Path::new("<stdout>"), e))?;
            drawn
        }
    }
}
