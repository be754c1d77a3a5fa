//! `--format firefox`: the Firefox Profiler's processed profile (gzipped JSON), built with the
//! `fxprof-processed-profile` crate. One track per thread, grouped by process; every sample
//! with its timestamp and CPU time; categories by frame kind (JIT split by tier); a marker per
//! JIT code load; already symbolized, so the file opens without a symbol server.
//!
//! The crate leaves the source columns (`funcTable.fileName`, `frameTable.line`) empty, so the
//! JSON is patched after serialization. To know which of our frames each table row is, every
//! frame gets its own address (its `FrameId`) in a per-module library whose symbol table names
//! it: the crate then keeps one row per frame (so lines stay distinct) and one function per
//! (name, module) (so the call tree still merges lines of one function).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::sync::Arc;

use flate2::write::GzEncoder;
use flate2::Compression;
use fxprof_processed_profile::{
    debugid::DebugId, CategoryColor, CategoryHandle, CategoryPairHandle, CpuDelta, Frame,
    FrameFlags, FrameHandle, FrameInfo, LibraryHandle, LibraryInfo, MarkerFieldFlags,
    MarkerFieldFormat, MarkerTiming, Profile as FxProfile, ReferenceTimestamp, SamplingInterval,
    StackHandle, StaticSchemaMarker, StaticSchemaMarkerField, StringHandle, Symbol, SymbolTable,
    ThreadHandle, Timestamp,
};
use rustc_hash::FxHashMap;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::viewer;
use crate::profile::{Context, FrameId, FrameKind, Profile};

/// Default output file of the firefox format.
pub const DEFAULT_FILE: &str = "profile.json.gz";

/// Writes the profile as a gzipped Firefox Profiler profile.
pub fn write(profile: &Profile, ctx: &Context, out: impl Write) -> io::Result<()> {
    let json = serde_json::to_string(&build(profile, ctx))?;
    let mut gz = GzEncoder::new(out, Compression::fast());
    write_with_sources(&json, profile, &mut gz)?;
    gz.finish()?.flush()
}

/// Category of each frame kind; JIT frames get a subcategory per tier.
struct Categories {
    native: CategoryHandle,
    kernel: CategoryHandle,
    jit: CategoryHandle,
    interpreter: CategoryHandle,
    inlined: CategoryHandle,
    tiers: BTreeMap<String, CategoryPairHandle>,
}

impl Categories {
    fn new(fx: &mut FxProfile, profile: &Profile) -> Self {
        let jit = fx.add_category("JIT", CategoryColor::Green);
        let mut categories = Self {
            native: fx.add_category("Native", CategoryColor::Blue),
            kernel: fx.add_category("Kernel", CategoryColor::Orange),
            jit,
            interpreter: fx.add_category("Interpreter", CategoryColor::Yellow),
            inlined: fx.add_category("Inlined", CategoryColor::LightBlue),
            tiers: BTreeMap::new(),
        };
        let tiers: BTreeSet<&str> = (0..profile.frames().len())
            .filter_map(|i| profile.tier(FrameId(i as u32)))
            .map(|t| t.label.as_str())
            .collect();
        for tier in tiers {
            let pair = fx.add_subcategory(jit, tier);
            categories.tiers.insert(tier.to_string(), pair);
        }
        categories
    }

    fn of(&self, profile: &Profile, id: FrameId) -> CategoryPairHandle {
        match profile.frame(id).kind {
            FrameKind::Native => self.native.into(),
            FrameKind::Kernel => self.kernel.into(),
            FrameKind::Jit => profile
                .tier(id)
                .and_then(|t| self.tiers.get(&t.label).copied())
                .unwrap_or(self.jit.into()),
            FrameKind::Interpreter => self.interpreter.into(),
            FrameKind::Inlined => self.inlined.into(),
            FrameKind::Root | FrameKind::Unknown => CategoryHandle::OTHER.into(),
        }
    }
}

/// One library per module; each frame is a one-byte symbol at the address `FrameId`.
fn libraries(fx: &mut FxProfile, profile: &Profile) -> Vec<Option<LibraryHandle>> {
    let mut symbols: BTreeMap<&str, Vec<Symbol>> = BTreeMap::new();
    for (i, frame) in profile.frames().iter().enumerate() {
        if frame.kind != FrameKind::Root {
            symbols
                .entry(viewer::module_name(frame))
                .or_default()
                .push(Symbol {
                    address: i as u32,
                    size: Some(1),
                    name: viewer::frame_name(frame).to_string(),
                });
        }
    }
    let mut handles: BTreeMap<&str, LibraryHandle> = BTreeMap::new();
    for (module, symbols) in symbols {
        let handle = fx.add_lib(LibraryInfo {
            name: module.to_string(),
            debug_name: module.to_string(),
            path: module.to_string(),
            debug_path: module.to_string(),
            debug_id: DebugId::nil(),
            code_id: None,
            arch: None,
            symbol_table: Some(Arc::new(SymbolTable::new(symbols))),
        });
        handles.insert(module, handle);
    }
    profile
        .frames()
        .iter()
        .map(|f| (f.kind != FrameKind::Root).then(|| handles[viewer::module_name(f)]))
        .collect()
}

/// The crate's profile, before the source columns are added.
fn build(profile: &Profile, ctx: &Context) -> FxProfile {
    let interval = if ctx.frequency_hz > 0 {
        SamplingInterval::from_hz(ctx.frequency_hz as f32)
    } else {
        SamplingInterval::from_millis(1)
    };
    let reference =
        ReferenceTimestamp::from_millis_since_unix_epoch(ctx.start_unix_ns as f64 / 1e6);
    let mut fx = FxProfile::new(&ctx.export_title(), reference, interval);
    fx.set_os_name("Linux");
    fx.set_symbolicated(true);
    let categories = Categories::new(&mut fx, profile);
    let libs = libraries(&mut fx, profile);
    let frame_info = |id: FrameId| -> Option<FrameInfo> {
        Some(FrameInfo {
            frame: Frame::RelativeAddressFromAdjustedReturnAddress(libs[id.0 as usize]?, id.0),
            category_pair: categories.of(profile, id),
            flags: FrameFlags::empty(),
        })
    };
    let at = |t: u64| Timestamp::from_nanos_since_reference(ctx.offset_ns(t));

    let tracks = viewer::threads(profile);
    let mut processes = BTreeMap::new();
    let mut main_threads: BTreeMap<u32, ThreadHandle> = BTreeMap::new();
    let mut stacks: FxHashMap<(ThreadHandle, &[FrameId]), Option<StackHandle>> =
        FxHashMap::default();
    let mut frame_handles: Vec<Option<FrameHandle>> = Vec::new();
    for track in &tracks {
        let first = at(profile.samples[track.samples[0]].time);
        let process = *processes.entry(track.pid).or_insert_with(|| {
            let name = tracks
                .iter()
                .find(|t| t.pid == track.pid && t.tid == track.pid)
                .unwrap_or(track);
            fx.add_process(&name.name, track.pid, first)
        });
        let thread = fx.add_thread(process, track.tid, first, track.tid == track.pid);
        fx.set_thread_name(thread, &track.name);
        main_threads
            .entry(track.pid)
            .and_modify(|t| {
                if track.tid == track.pid {
                    *t = thread;
                }
            })
            .or_insert(thread);
        // Frame handles belong to a thread; each is interned once per thread.
        frame_handles.clear();
        frame_handles.resize(profile.frames().len(), None);
        for &i in &track.samples {
            let sample = &profile.samples[i];
            let frames = viewer::code_frames(profile, &sample.stack);
            let stack = *stacks.entry((thread, frames)).or_insert_with(|| {
                let mut stack = None;
                for &id in frames {
                    let handle = match frame_handles[id.0 as usize] {
                        Some(h) => Some(h),
                        None => frame_info(id).map(|info| fx.intern_frame(thread, info)),
                    };
                    frame_handles[id.0 as usize] = handle;
                    if let Some(h) = handle {
                        stack = Some(fx.intern_stack(thread, stack, h));
                    }
                }
                stack
            });
            // An off-CPU sample used no CPU; its weight counts sampling intervals of waiting,
            // so on- and off-CPU samples add up to time in the call tree (--weight wall).
            let (cpu, weight) = if sample.off_cpu {
                let interval = 1e9 / ctx.frequency_hz.max(1) as f64;
                let intervals = (sample.weight as f64 / interval).round();
                (0, intervals.min(i32::MAX as f64) as i32)
            } else if ctx.weight_unit == crate::profile::WeightUnit::Occurrences {
                // Page faults, instructions, …: the sample weighs its count (the title names
                // the event); it says nothing about CPU time.
                (0, sample.weight.min(i32::MAX as u64) as i32)
            } else {
                (ctx.cpu_ns(sample.weight), 1)
            };
            fx.add_sample(
                thread,
                at(sample.time),
                stack,
                CpuDelta::from_nanos(cpu),
                weight,
            );
        }
    }
    for load in &ctx.code_loads {
        let Some(&thread) = main_threads.get(&load.pid) else {
            continue;
        };
        let marker = CodeLoadMarker {
            name: fx.intern_string(&load.name),
            tier: fx.intern_string(load.tier.as_ref().map_or("", |t| t.label.as_str())),
            address: fx.intern_string(&format!("{:#x}", load.address)),
            source: fx.intern_string(&load.source),
            size: load.size as f64,
            category: categories.jit,
        };
        fx.add_marker(thread, MarkerTiming::Instant(at(load.time)), marker);
    }
    fx
}

/// A JIT code load, shown in the marker chart and table of the process's main thread.
struct CodeLoadMarker {
    name: StringHandle,
    tier: StringHandle,
    address: StringHandle,
    source: StringHandle,
    size: f64,
    category: CategoryHandle,
}

impl StaticSchemaMarker for CodeLoadMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "JitCodeLoad";
    const DESCRIPTION: Option<&'static str> = Some("JIT-compiled code appeared at an address");
    const CHART_LABEL: Option<&'static str> = Some("{marker.name}");
    const TABLE_LABEL: Option<&'static str> =
        Some("{marker.name} {marker.data.tier} at {marker.data.address}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "tier",
            label: "Tier",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "address",
            label: "Address",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "source",
            label: "Announced by",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "size",
            label: "Code size",
            format: MarkerFieldFormat::Bytes,
            flags: MarkerFieldFlags::empty(),
        },
    ];

    fn name(&self, _: &mut FxProfile) -> StringHandle {
        self.name
    }

    fn category(&self, _: &mut FxProfile) -> CategoryHandle {
        self.category
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.tier,
            1 => self.address,
            _ => self.source,
        }
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        self.size
    }
}

/// A top-level or thread entry: the crate's JSON untouched, or a patched table.
#[derive(Serialize)]
#[serde(untagged)]
enum Part<'a> {
    Raw(&'a RawValue),
    Patched(Value),
    Threads(Vec<BTreeMap<String, Part<'a>>>),
}

/// Writes the crate's `json` with each thread's source columns filled in from `profile`:
/// `frameTable.line` per frame, `funcTable.fileName` per function (strings are appended to
/// the thread's `stringArray`). Everything else is copied through unparsed.
fn write_with_sources(json: &str, profile: &Profile, out: impl Write) -> io::Result<()> {
    let top: BTreeMap<String, &RawValue> = serde_json::from_str(json)?;
    let mut doc: BTreeMap<String, Part<'_>> = BTreeMap::new();
    for (key, raw) in top {
        let part = if key == "threads" {
            let threads: Vec<BTreeMap<String, &RawValue>> = serde_json::from_str(raw.get())?;
            Part::Threads(
                threads
                    .into_iter()
                    .map(|t| patch_thread(t, profile))
                    .collect::<io::Result<_>>()?,
            )
        } else {
            Part::Raw(raw)
        };
        doc.insert(key, part);
    }
    serde_json::to_writer(out, &doc).map_err(io::Error::from)
}

fn patch_thread<'a>(
    thread: BTreeMap<String, &'a RawValue>,
    profile: &Profile,
) -> io::Result<BTreeMap<String, Part<'a>>> {
    let table = |key: &str| -> io::Result<Value> {
        let raw = thread.get(key).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, format!("no {key} in a thread"))
        })?;
        Ok(serde_json::from_str(raw.get())?)
    };
    let mut frames = table("frameTable")?;
    let mut funcs = table("funcTable")?;
    let mut strings: Vec<String> = serde_json::from_value(table("stringArray")?)?;
    let column = |v: &Value, key: &str| -> Vec<Option<u64>> {
        v[key]
            .as_array()
            .map(|a| a.iter().map(Value::as_u64).collect())
            .unwrap_or_default()
    };
    // Our frame behind each row: its address is the FrameId (see `libraries`).
    let ours: Vec<Option<&crate::profile::Frame>> = column(&frames, "address")
        .into_iter()
        .map(|a| a.and_then(|a| profile.frames().get(usize::try_from(a).ok()?)))
        .collect();
    let lines: Vec<Value> = ours
        .iter()
        .map(|f| f.and_then(|f| f.line).map_or(Value::Null, Value::from))
        .collect();
    let func_count = funcs["name"].as_array().map_or(0, Vec::len);
    let mut file_names = vec![Value::Null; func_count];
    let mut string_index: FxHashMap<String, usize> = strings
        .iter()
        .enumerate()
        .map(|(i, s)| (s.clone(), i))
        .collect();
    for (func, frame) in column(&frames, "func").into_iter().zip(&ours) {
        let (Some(func), Some(file)) = (func, frame.and_then(|f| f.file.as_ref())) else {
            continue;
        };
        let Some(slot) = file_names.get_mut(func as usize).filter(|s| s.is_null()) else {
            continue;
        };
        let index = *string_index.entry(file.clone()).or_insert_with(|| {
            strings.push(file.clone());
            strings.len() - 1
        });
        *slot = Value::from(index);
    }
    frames["line"] = Value::Array(lines);
    funcs["fileName"] = Value::Array(file_names);
    let mut out: BTreeMap<String, Part<'a>> =
        thread.into_iter().map(|(k, v)| (k, Part::Raw(v))).collect();
    out.insert("frameTable".into(), Part::Patched(frames));
    out.insert("funcTable".into(), Part::Patched(funcs));
    out.insert("stringArray".into(), Part::Patched(Value::from(strings)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::viewer::tests::{sample_context, sample_profile};
    use flate2::read::GzDecoder;

    /// The decoded JSON of the sample profile.
    fn decoded() -> Value {
        let p = sample_profile();
        let mut gz = Vec::new();
        write(&p, &sample_context(&p), &mut gz).unwrap();
        serde_json::from_reader(GzDecoder::new(&gz[..])).unwrap()
    }

    fn strings(thread: &Value) -> Vec<&str> {
        thread["stringArray"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect()
    }

    #[test]
    fn threads_samples_and_timestamps() {
        let v = decoded();
        let threads = v["threads"].as_array().unwrap();
        assert_eq!(threads.len(), 2);
        assert_eq!(threads[0]["name"], "app");
        assert_eq!(threads[0]["tid"], "100");
        assert_eq!(threads[0]["pid"], "100");
        assert_eq!(threads[0]["isMainThread"], true);
        assert_eq!(threads[1]["name"], "worker");
        assert_eq!(threads[0]["samples"]["length"], 3);
        // ms since the first sample: 0, 1, 2.
        let deltas: Vec<f64> = threads[0]["samples"]["timeDeltas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_f64().unwrap())
            .collect();
        assert_eq!(deltas, vec![0.0, 1.0, 1.0]);
        assert_eq!(v["meta"]["symbolicated"], true);
        assert_eq!(v["meta"]["product"], "jprof: app");
    }

    #[test]
    fn categories_include_jit_tiers() {
        let v = decoded();
        let names: Vec<&str> = v["meta"]["categories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            vec!["Other", "JIT", "Native", "Kernel", "Interpreter", "Inlined"]
        );
        let jit = &v["meta"]["categories"][1]["subcategories"];
        assert_eq!(jit, &serde_json::json!(["Other", "C2 (optimized)"]));
    }

    #[test]
    fn jit_frames_carry_file_and_line() {
        let v = decoded();
        let t = &v["threads"][0];
        let strings = strings(t);
        let funcs = &t["funcTable"];
        let frames = &t["frameTable"];
        let name_of = |func: usize| strings[funcs["name"][func].as_u64().unwrap() as usize];
        let row = (0..frames["length"].as_u64().unwrap() as usize)
            .find(|&i| name_of(frames["func"][i].as_u64().unwrap() as usize) == "Demo.run")
            .expect("a Demo.run frame");
        assert_eq!(frames["line"][row], 20);
        let func = frames["func"][row].as_u64().unwrap() as usize;
        let file = funcs["fileName"][func].as_u64().unwrap() as usize;
        assert_eq!(strings[file], "Demo.java");
        // The JIT tier's subcategory.
        assert_eq!(frames["category"][row], 1);
        assert_eq!(frames["subcategory"][row], 1);
    }

    #[test]
    fn code_loads_become_markers_on_the_main_thread() {
        let v = decoded();
        let markers = &v["threads"][0]["markers"];
        assert_eq!(markers["length"], 1);
        assert_eq!(markers["data"][0]["type"], "JitCodeLoad");
        assert_eq!(markers["data"][0]["size"], 256.0);
        assert_eq!(v["threads"][1]["markers"]["length"], 0);
        let schema = v["meta"]["markerSchema"].as_array().unwrap();
        assert!(schema.iter().any(|s| s["name"] == "JitCodeLoad"));
    }
}
