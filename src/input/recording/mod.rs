//! A jprof recording, or a perf.data imported into one (`perf_data/`): read, symbolized
//! (`symbolize/`), its stored XRay logs correlated with the samples (`xray/live.rs`), filtered,
//! weighed. Its text report (`text.rs`) is the recording's summary and the top functions.

mod coverage;
pub(crate) mod text;

use crate::error::{Error, Result};
use crate::profile::context::first_sample_time;
use crate::profile::{filter, names, CodeLoad, Context, Profile, WeightUnit};
use crate::recording::Recording;
use crate::symbolize::jit_index::JitIndex;
use crate::symbolize::{self, ResolveOptions};

use super::kind::Kind;
use super::perf_data;
use super::request::{Loaded, Request, Weight};

/// Every format but text: the filtered, weighted profile and its context.
pub fn load(request: &Request, kind: Kind) -> Result<Loaded> {
    read(request, kind, false)
}

/// The text report: the summary (with the XRay correlation's table, when the recording stored
/// XRay logs) and the top functions.
pub fn text(request: &Request, kind: Kind) -> Result<Vec<u8>> {
    Ok(read(request, kind, true)?.summary)
}

/// Reads, symbolizes, correlates, filters, weighs: the recording's flow, top to bottom.
fn read(request: &Request, kind: Kind, xray_table: bool) -> Result<Loaded> {
    let (recording, mut profile, jit) = symbolized(request, kind)?;
    // XRay logs stored in the recording complete stacks before any filter looks at them.
    let xray = super::xray::live::correlate(&recording, &mut profile);
    filter::apply(&mut profile, &request.filters);
    let weighing = weigh(&recording, &mut profile, request.weight)?;
    let mut context = context(&recording, &profile, &jit);
    if let Some(w) = weighing {
        context.event = w.count_name;
        context.weight_unit = w.unit;
        context.time_kind = w.time_kind;
        context.shows = w.shows;
    }
    // A jprof recording made with frame pointers over the 1 KiB copy (`--call-graph fp`, or an
    // older jprof): when many interpreter frames stayed unnamed, the default that names more of
    // them is worth a note (a perf.data's come from perf's agent, which names none).
    if kind == Kind::Recording
        && recording.meta.event.call_graph == crate::recording::CallGraph::FramePointers
        && recording.meta.event.stack_user_bytes <= crate::recording::STACK_BYTES_FP
    {
        profile
            .notes
            .extend(text::unnamed_interpreter_hint(&profile));
    }
    let mut summary = Vec::new();
    text::write(&recording, &profile, &request.tables, &mut summary)
        .and_then(|()| match &xray {
            Some(x) if xray_table => x.write(&mut summary),
            Some(x) => {
                use std::io::Write;
                writeln!(summary, "\n{}", x.agreement_line())
            }
            None => Ok(()),
        })
        .map_err(|e| Error::io(std::path::Path::new("<memory>"), e))?;
    Ok(Loaded {
        profile,
        context,
        summary,
    })
}

/// Reads (or imports a perf.data) and symbolizes; of the filters only `--tid`/`--comm` are
/// applied (so filtered-out samples are never symbolized). Also returns the JIT index
/// symbolization used.
pub fn symbolized(request: &Request, kind: Kind) -> Result<(Recording, Profile, JitIndex)> {
    let path = &request.path;
    let recording = crate::progress::while_busy(
        &format!("reading {}", path.display()),
        || -> Result<Recording> {
            match kind {
                Kind::PerfData => {
                    let options = perf_data::ImportOptions {
                        search_dirs: request.search_dirs.clone(),
                    };
                    perf_data::import(path, &options)
                }
                _ => Recording::open(path),
            }
        },
    )?;
    let options = ResolveOptions {
        // Also applied here so filtered-out samples are never symbolized.
        tid: request.filters.tid,
        comm: request.filters.comm.clone(),
        debug_files: request.debug_files,
        search_dirs: request.search_dirs.clone(),
        progress: crate::progress::Progress::bar("symbolizing"),
    };
    let (mut profile, jit) = symbolize::resolve_with_jit(&recording, &options)?;
    options.progress.finish();
    if !request.signatures {
        names::shorten(&mut profile);
    }
    Ok((recording, profile, jit))
}

/// The recording's name in titles: `jprof: COMMAND` (or the attached pid, or the file).
fn title(recording: &Recording) -> String {
    let meta = &recording.meta;
    let what = if !meta.command.is_empty() {
        meta.command.join(" ")
    } else if let Some(targets) = meta.targets.describe() {
        targets
    } else if let Some(pid) = meta.attached_pid {
        format!("pid {pid}")
    } else {
        recording.path.display().to_string()
    };
    // An event other than CPU time is named in every title: the widths count it.
    match meta.event.unit() {
        Some(unit) if meta.event.counts_occurrences() => {
            format!("jprof: {what} — {} ({unit})", meta.event.event)
        }
        _ => format!("jprof: {what}"),
    }
}

/// What the recording lost, for every output's title or subtitle: a flame graph missing a
/// share of its samples must say so where the user looks.
pub fn losses(recording: &Recording) -> Option<String> {
    let parts = recording.summary.as_ref()?.losses();
    (!parts.is_empty()).then(|| format!("incomplete: {}", parts.join("; ")))
}

/// What the widths of a weighed profile count.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Weighing {
    /// The flame graph's count name and the exports' event name.
    pub count_name: String,
    pub unit: WeightUnit,
    /// Said in titles: what the graph shows, when not the CPU samples.
    pub shows: Option<&'static str>,
    /// What the ns count, for formats that name it (pprof's sample type).
    pub time_kind: &'static str,
}

/// Sets every sample's weight for `weight` and keeps the samples it counts: CPU samples by
/// default; switch-outs (`record --off-cpu`) for off-cpu; both, in ns, for wall.
fn weigh(
    recording: &Recording,
    profile: &mut Profile,
    weight: Option<Weight>,
) -> Result<Option<Weighing>> {
    let event = &recording.meta.event;
    if matches!(weight, Some(Weight::OffCpu | Weight::Wall)) && event.off_cpu_ids.is_empty() {
        return Err(Error::Usage(format!(
            "{} has no off-CPU data: record with `jprof record --off-cpu`",
            recording.path.display()
        )));
    }
    let ns = WeightUnit::Nanoseconds;
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
                unit: WeightUnit::Events,
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
                count_name: "off-CPU ns".into(),
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
                count_name: "wall ns".into(),
                unit: ns,
                shows: Some("wall time: on-CPU + off-CPU"),
                time_kind: "wall",
            })
        }
    };
    Ok(weighing)
}

/// The context of a recording: its command, event, start and JIT code loads.
/// `jit`: the index symbolization built from the recording.
fn context(recording: &Recording, profile: &Profile, jit: &JitIndex) -> Context {
    let meta = &recording.meta;
    let recorded_start = recording
        .summary
        .as_ref()
        .map(|s| s.start_time)
        .filter(|&t| t > 0);
    let start_time = match (recorded_start, first_sample_time(profile)) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b).unwrap_or(0),
    };
    let mut code_loads: Vec<CodeLoad> = jit
        .code()
        .map(|(pid, code)| CodeLoad {
            pid,
            time: code.from,
            name: code.name.clone(),
            tier: code.tier.clone(),
            address: code.start,
            size: code.size,
            source: code.source.to_string(),
        })
        .collect();
    code_loads.sort_by(|a, b| {
        (a.pid, a.time, a.address, &a.name).cmp(&(b.pid, b.time, b.address, &b.name))
    });
    Context {
        title: title(recording),
        subtitle: losses(recording),
        shows: None,
        event: meta.event.event.clone(),
        weight_unit: if meta.event.periods_are_ns() {
            WeightUnit::Nanoseconds
        } else if meta.event.counts_occurrences() {
            WeightUnit::Occurrences
        } else {
            WeightUnit::Events
        },
        frequency_hz: meta.event.frequency_hz,
        start_time,
        start_unix_ns: meta.start_unix_ns,
        code_loads,
        program: meta
            .command
            .first()
            .map(|c| c.rsplit('/').next().unwrap_or(c).to_string()),
        time_kind: "cpu",
    }
}
