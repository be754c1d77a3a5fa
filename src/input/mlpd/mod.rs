//! `jprof report -i FILE.mlpd`: Mono's own profile, no perf needed. The file is decoded once
//! (`analysis.rs` keeps mprof-report's accounting); `--format text` prints mprof-report's
//! summaries (`text.rs`), and the other formats draw a `Profile` weighted by `--weight`:
//! sample hits (managed backtraces; the default when the file has any), calls per call path,
//! or self time per call path (from the enter/leave replay, so widths add up).

pub(crate) mod analysis;
pub(crate) mod text;

use std::io::Write;
use std::path::Path;

use analysis::{Analysis, Filter};
use text::{IpResolver, Resolved};

use super::request::{Loaded, Request, Weight};
use crate::error::{Error, Result};
use crate::format::mlpd::{self, BufferHeader, Decoder, Event, EventKind, Metadata};
use crate::profile::{filter, Context, Filters, WeightUnit};
use crate::profile::{Frame, FrameId, FrameKind, Profile, ProfileSample, ThreadInfo};

/// Decodes `data` with the filter; the analysis and the decoder (header, problems).
pub fn analyze(
    data: &[u8],
    filter: Filter,
) -> std::result::Result<(Analysis, Decoder), crate::format::ParseError> {
    let mut analysis = Analysis::new(filter);
    let decoder = mlpd::decode_all(data, &mut analysis)?;
    analysis.header = decoder.header().cloned();
    analysis.finish();
    Ok((analysis, decoder))
}

/// The pthread_t values of threads named `name` (names come from METADATA events).
fn threads_named(data: &[u8], name: &str) -> Vec<u64> {
    let mut ids = Vec::new();
    let _ = mlpd::decode_all(data, &mut |_: &BufferHeader, e: &Event<'_>| {
        if let EventKind::Metadata {
            pointer,
            what: Metadata::Thread { name: Some(n) },
            ..
        } = &e.kind
        {
            if n == name {
                ids.push(*pointer);
            }
        }
    });
    ids
}

/// The filter `--thread/--comm` and `--time` ask for.
fn filter_for(filters: &Filters, data: &[u8]) -> Filter {
    let mut filter = Filter::all();
    if let Some(name) = &filters.comm {
        filter.threads = Some(threads_named(data, name));
    }
    if let Some(range) = &filters.time {
        let ns = |s: f64| (s * 1e9) as u64;
        filter.timed = true;
        filter.from_ns = range.start_s.map_or(0, ns);
        filter.to_ns = range.end_s.map_or(u64::MAX, ns);
    }
    filter
}

/// Builds the profile every output format reads. Thread ids are 1, 2, ... in the order Mono's
/// threads first appear (the file records pthread_t values, not kernel TIDs).
pub fn profile(a: &Analysis, weight: Weight, filters: &Filters) -> Profile {
    let mut p = Profile::default();
    let pid = a.header.as_ref().map_or(0, |h| h.pid);
    let start = a.startup_time.unwrap_or(0);
    let tid_of = |thread: u64| {
        a.threads
            .iter()
            .position(|t| t.id == thread)
            .map_or(0, |i| i as u32 + 1)
    };
    let keep = |thread: u64| {
        let name = || {
            a.threads
                .iter()
                .find(|t| t.id == thread)
                .and_then(|t| t.name.as_deref())
        };
        filters.comm.as_deref().is_none_or(|c| name() == Some(c))
            && filters.tid.is_none_or(|t| tid_of(thread) == t)
    };
    for (i, t) in a.threads.iter().enumerate() {
        let comm = t
            .name
            .clone()
            .unwrap_or_else(|| format!("thread {:#x}", t.id));
        p.threads.insert(i as u32 + 1, ThreadInfo { pid, comm });
    }
    let mut method_frames: rustc_hash::FxHashMap<u64, FrameId> = Default::default();
    let mut managed = |p: &mut Profile, m: u64| {
        *method_frames.entry(m).or_insert_with(|| {
            let name = a
                .methods
                .get(&m)
                .map_or_else(|| format!("unknown method {m:#x}"), |x| x.display_name(m));
            p.intern(Frame {
                name,
                kind: FrameKind::Jit,
                module: None,
                file: None,
                line: None,
            })
        })
    };
    let push = |p: &mut Profile, thread: u64, time: u64, weight: u64, stack: Vec<FrameId>| {
        let tid = tid_of(thread);
        let stack = p.intern_stack(&stack);
        p.samples.push(ProfileSample {
            pid,
            tid,
            time: time.wrapping_sub(start),
            cpu: 0,
            weight,
            stack,
            off_cpu: false,
        });
    };
    match weight {
        // Refused in `run`: an .mlpd has no context switches.
        Weight::OffCpu | Weight::Wall => {}
        Weight::Samples => {
            let resolver = IpResolver::new(a);
            for hit in a.hits.iter().filter(|h| keep(h.thread)) {
                let mut stack: Vec<FrameId> = hit
                    .frames
                    .iter()
                    .rev()
                    .map(|&m| managed(&mut p, m))
                    .collect();
                let leaf = match resolver.resolve(hit.ip) {
                    Resolved::Managed(m) if hit.frames.first() == Some(&m) => None,
                    Resolved::Managed(m) => Some(managed(&mut p, m)),
                    Resolved::Symbol(name, parent, _) => Some(p.intern(Frame {
                        name: name.to_string(),
                        kind: FrameKind::Native,
                        module: parent.map(str::to_string),
                        file: None,
                        line: None,
                    })),
                    Resolved::Unresolved => Some(p.intern(Frame {
                        name: format!("[unknown] {:#x}", hit.ip),
                        kind: FrameKind::Unknown,
                        module: None,
                        file: None,
                        line: None,
                    })),
                };
                stack.extend(leaf);
                push(&mut p, hit.thread, hit.time, 1, stack);
            }
        }
        Weight::Calls | Weight::Time => {
            for (i, node) in a.call_tree.nodes.iter().enumerate() {
                let w = if weight == Weight::Calls {
                    node.calls
                } else {
                    node.self_ns
                };
                let (thread, methods) = a.call_tree.path(i as u32);
                if w == 0 || !keep(thread) {
                    continue;
                }
                let stack = methods.iter().map(|&m| managed(&mut p, m)).collect();
                push(&mut p, thread, node.last, w, stack);
            }
        }
    }
    p
}

/// The flame graph's count name for a weight.
fn count_name(weight: Weight) -> &'static str {
    match weight {
        Weight::Samples => "samples",
        Weight::Calls => "calls",
        Weight::Time | Weight::OffCpu | Weight::Wall => "ns",
    }
}

/// The file, mapped and decoded once; the note a truncated file gets.
struct Decoded {
    analysis: Analysis,
    decoder: Decoder,
    truncated: Option<String>,
}

fn decode(request: &Request) -> Result<Decoded> {
    let path = &request.path;
    // Mapped rather than read: copying a large file into the heap costs as much as decoding it.
    let data = crate::foreign_file::named_file_bytes(path).map_err(|e| e.into_error(path))?;
    let filter = filter_for(&request.filters, &data);
    let (analysis, decoder) = analyze(&data, filter).map_err(|source| Error::Parse {
        path: path.clone(),
        source,
    })?;
    // A file at rest cut inside its header holds nothing: an error, not an empty profile.
    if decoder.header().is_none() {
        return Err(Error::Parse {
            path: path.clone(),
            source: crate::format::ParseError::new(
                data.len(),
                "a complete .mlpd file header (the file ends inside it: it was cut short, or is \
                 not a Mono log profiler file)",
            ),
        });
    }
    // A file at rest that ends inside a buffer: Mono was killed (or is still writing).
    let truncated = (decoder.consumed() < data.len()).then(|| {
        format!(
            "{} ends inside a buffer at byte offset {}: the last {} bytes (an incomplete buffer; \
             the profiler was killed or is still writing) were not read; what comes before was",
            path.display(),
            decoder.consumed(),
            data.len() - decoder.consumed()
        )
    });
    Ok(Decoded {
        analysis,
        decoder,
        truncated,
    })
}

/// mprof-report's summaries (`--format text`).
pub fn text(request: &Request) -> Result<Vec<u8>> {
    let Decoded {
        analysis,
        decoder,
        truncated,
    } = decode(request)?;
    let mut out = Vec::new();
    text::write(&analysis, &decoder, &mut out)
        .and_then(|()| match &truncated {
            Some(note) => writeln!(out, "\nNote: {note}"),
            None => Ok(()),
        })
        .map_err(|e| Error::io(Path::new("<memory>"), e))?;
    Ok(out)
}

/// The profile every other format draws, weighted by samples, calls or self time.
pub fn load(request: &Request) -> Result<Loaded> {
    let path = &request.path;
    let Decoded {
        analysis,
        decoder,
        truncated,
    } = decode(request)?;
    let weight = request.weight.unwrap_or(if analysis.hits.is_empty() {
        Weight::Calls
    } else {
        Weight::Samples
    });
    let mut profile = profile(&analysis, weight, &request.filters);
    profile.notes.extend(truncated);
    if decoder.problem_count() > 0 {
        profile.notes.push(format!(
            "{} decoding problem(s) in {}; see --format text",
            decoder.problem_count(),
            path.display()
        ));
    }
    if !request.signatures {
        crate::profile::names::shorten(&mut profile);
    }
    filter::apply(&mut profile, &request.filters.left_after_reading());
    let unit = if weight == Weight::Time {
        WeightUnit::Nanoseconds
    } else {
        WeightUnit::Events
    };
    let title = format!("jprof: {}", path.display());
    let context = Context::for_profile(&profile, &title, count_name(weight), unit);
    let total: u64 = profile.samples.iter().map(|s| s.weight).sum();
    let mut summary = format!(
        "{}: {} stacks, {total} {} in total\n",
        path.display(),
        profile.samples.len(),
        count_name(weight)
    );
    if profile.samples.is_empty() {
        summary.push_str(&format!(
            "nothing to draw with --weight {} (sample hits: {}, calls: {})\n",
            count_name(weight),
            analysis.hits.len(),
            analysis
                .call_tree
                .nodes
                .iter()
                .map(|n| n.calls)
                .sum::<u64>()
        ));
    }
    for n in &profile.notes {
        summary.push_str(&format!("note: {n}\n"));
    }
    Ok(Loaded {
        profile,
        context,
        summary: summary.into_bytes(),
    })
}
