//! `--format pprof`: the gzipped `profile.proto` that `go tool pprof`, Pyroscope and Parca read.
//! The messages are declared here with prost's derive (no protoc needed); field numbers are
//! those of pprof's `profile.proto`.
//!
//! Mapping of jprof's profile: a Location is a frame together with the frames inlined into it
//! (its `Line` list, innermost first, as pprof represents inlining); a Function is a name in a
//! file; a Mapping is a module (binary, jitdump, `[kernel]`). Samples are merged per (thread,
//! stack) and carry two values, `samples/count` and `cpu/nanoseconds`, plus `pid`, `tid` and
//! `thread` labels. jprof keeps no addresses in the profile, so addresses and mapping ranges
//! are 0.

use std::collections::BTreeMap;
use std::io::{self, Write};

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;
use rustc_hash::FxHashMap;

use super::viewer;
use crate::profile::{Context, FrameId, FrameKind, Profile};

/// Default output file of the pprof format.
pub const DEFAULT_FILE: &str = "profile.pb.gz";

/// The whole message (`perftools.profiles.Profile`), as [`read`] returns it.
#[derive(Clone, PartialEq, Message)]
pub struct PprofProfile {
    /// What each entry of a sample's `value` measures, in order.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples (here one per distinct thread and stack).
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// The modules code was found in; the first is taken for the main binary.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// Code locations the samples' stacks refer to by id.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// Functions the locations' lines refer to by id.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string the other fields index; entry 0 is always `""`.
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// String index of a regex of frames a viewer should hide with their callees (0: none).
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// String index of a regex of frames exempt from `drop_frames` (0: none).
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// When the profile starts, in ns since the Unix epoch.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// How long the profile covers, in ns.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What `period` counts (here `cpu` in `nanoseconds`).
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// Distance between two samples, in units of `period_type`.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// String indices of free-form notes shown by viewers (here the title).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// String index of the `sample_type` viewers show first.
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// A pprof `ValueType`: what a value measures and in which unit.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// String index of what is measured, e.g. `samples` or `cpu`.
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// String index of its unit, e.g. `count` or `nanoseconds`.
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// A pprof `Sample`: a stack and the values recorded for it.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// Ids of the stack's locations, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per `sample_type` entry.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Extra facts about the sample (here pid, tid and thread name).
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// A pprof `Label`: a named text or number attached to a sample.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    /// String index of the label's name.
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// String index of a text value (0 when the label is a number).
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// A numeric value (when `str` is 0).
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// String index of `num`'s unit (0: none).
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// A pprof `Mapping`: a module (binary, jitdump, `[kernel]`).
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    /// Nonzero id that locations refer to.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// First address of the mapped range (0 here: jprof keeps no addresses).
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// End of the mapped range (0 here).
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// File offset of `memory_start` (0 here).
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// String index of the module's path or name.
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// String index of the module's build id (0: unknown).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Whether its locations name their functions.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// Whether its functions carry source file names.
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// Whether its lines carry line numbers.
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// Whether its locations list inlined functions.
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// A pprof `Location`: a frame with the frames inlined into it.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// Nonzero id that samples refer to.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The mapping the code belongs to.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// Instruction address (0 here).
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Innermost (inlined) function first; the last line is the function the code belongs to.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    /// Whether the linker folded several functions into this address (never here).
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// A pprof `Line`: one function and source line of a location.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// The function this line is in.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Source line number (0: unknown).
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// Source column (0: unknown).
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// A pprof `Function`: a name in a source file.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// Nonzero id that lines refer to.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// String index of the name as shown.
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// String index of the name as the system knows it (here the same).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// String index of the source file (`""`: unknown).
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// Line where the function starts (0: unknown).
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

/// Writes the profile as gzipped profile.proto.
pub fn write(profile: &Profile, ctx: &Context, out: impl Write) -> io::Result<()> {
    let bytes = build(profile, ctx).encode_to_vec();
    let mut gz = GzEncoder::new(out, Compression::fast());
    gz.write_all(&bytes)?;
    gz.finish()?.flush()
}

/// Reads back what [`write()`] wrote (gzipped or not).
pub fn read(bytes: &[u8]) -> io::Result<PprofProfile> {
    let raw = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut raw = Vec::new();
        io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut raw)?;
        raw
    } else {
        bytes.to_vec()
    };
    PprofProfile::decode(&raw[..]).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The string table (index 0 is the empty string, as pprof requires).
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: FxHashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Self::default();
        s.get("");
        s
    }

    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// Interns functions, mappings and locations; ids are 1-based in order of first use.
struct Builder<'p> {
    profile: &'p Profile,
    strings: Strings,
    functions: Vec<Function>,
    function_ids: FxHashMap<(&'p str, Option<&'p str>), u64>,
    mappings: Vec<Mapping>,
    mapping_ids: FxHashMap<&'p str, u64>,
    locations: Vec<Location>,
    location_ids: FxHashMap<&'p [FrameId], u64>,
}

impl<'p> Builder<'p> {
    fn function(&mut self, id: FrameId) -> u64 {
        let frame = self.profile.frame(id);
        let key = (viewer::frame_name(frame), frame.file.as_deref());
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let function = Function {
            id: self.functions.len() as u64 + 1,
            name: self.strings.get(key.0),
            // The name as written (with parameters, full path) when the shown one is short.
            system_name: self
                .strings
                .get(self.profile.full_names(key.0).next().unwrap_or(key.0)),
            filename: self.strings.get(key.1.unwrap_or("")),
            start_line: 0,
        };
        self.functions.push(function);
        self.function_ids.insert(key, self.functions.len() as u64);
        self.functions.len() as u64
    }

    fn mapping(&mut self, id: FrameId) -> u64 {
        let frame = self.profile.frame(id);
        let module = viewer::module_name(frame);
        if let Some(&id) = self.mapping_ids.get(module) {
            return id;
        }
        let mapping = Mapping {
            id: self.mappings.len() as u64 + 1,
            filename: self.strings.get(module),
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
            ..Mapping::default()
        };
        self.mappings.push(mapping);
        self.mapping_ids.insert(module, self.mappings.len() as u64);
        self.mappings.len() as u64
    }

    /// The location of a frame and the frames inlined into it (`group`, outermost first).
    fn location(&mut self, group: &'p [FrameId]) -> u64 {
        if let Some(&id) = self.location_ids.get(group) {
            return id;
        }
        let line = group
            .iter()
            .rev()
            .map(|&id| Line {
                function_id: self.function(id),
                line: self.profile.frame(id).line.map_or(0, i64::from),
                column: 0,
            })
            .collect();
        let location = Location {
            id: self.locations.len() as u64 + 1,
            mapping_id: self.mapping(group[0]),
            address: 0,
            line,
            is_folded: false,
        };
        self.locations.push(location);
        self.location_ids.insert(group, self.locations.len() as u64);
        self.locations.len() as u64
    }
}

/// Splits a root-first stack into locations: each frame with the `Inlined` frames after it.
fn inline_groups<'a>(profile: &Profile, frames: &'a [FrameId]) -> Vec<&'a [FrameId]> {
    let mut groups = Vec::new();
    let mut start = 0;
    for i in 1..=frames.len() {
        if i == frames.len() || profile.frame(frames[i]).kind != FrameKind::Inlined {
            groups.push(&frames[start..i]);
            start = i;
        }
    }
    groups
}

/// A frame of the program's own binary, else of the module most stacks start in.
fn main_module_frame(profile: &Profile, program: Option<&str>) -> Option<FrameId> {
    let of_program = profile
        .frames()
        .iter()
        .position(|f| f.kind != FrameKind::Root && program == Some(viewer::module_name(f)));
    if let Some(i) = of_program {
        return Some(FrameId(i as u32));
    }
    let mut counts: BTreeMap<&str, (u64, FrameId)> = BTreeMap::new();
    for s in &profile.samples {
        if let Some(&id) = viewer::code_frames(profile, &s.stack).first() {
            counts
                .entry(viewer::module_name(profile.frame(id)))
                .or_insert((0, id))
                .0 += 1;
        }
    }
    counts
        .into_values()
        .max_by_key(|&(n, id)| (n, std::cmp::Reverse(id)))
        .map(|(_, id)| id)
}

fn build(profile: &Profile, ctx: &Context) -> PprofProfile {
    let mut b = Builder {
        profile,
        strings: Strings::new(),
        functions: Vec::new(),
        function_ids: FxHashMap::default(),
        mappings: Vec::new(),
        mapping_ids: FxHashMap::default(),
        locations: Vec::new(),
        location_ids: FxHashMap::default(),
    };
    // pprof takes the first mapping for the main binary (`File:` in its reports).
    if let Some(main) = main_module_frame(profile, ctx.program.as_deref()) {
        b.mapping(main);
    }
    // The second value: ns of CPU time, or the count of the sampled event when it is not time
    // (`page-faults`/`count`).
    let occurrences = ctx.weight_unit == crate::profile::WeightUnit::Occurrences;
    let (value_name, value_unit) = match occurrences {
        true => (ctx.event.as_str(), "count"),
        false => (ctx.time_kind, "nanoseconds"),
    };
    let sample_type = vec![
        ValueType {
            r#type: b.strings.get("samples"),
            unit: b.strings.get("count"),
        },
        ValueType {
            r#type: b.strings.get(value_name),
            unit: b.strings.get(value_unit),
        },
    ];
    let (pid_key, tid_key, thread_key) = (
        b.strings.get("pid"),
        b.strings.get("tid"),
        b.strings.get("thread"),
    );
    // Merge samples per (thread, stack) in first-seen order of the time-ordered tracks.
    let mut merged: Vec<Sample> = Vec::new();
    let mut sample_index: FxHashMap<(u32, &[FrameId]), usize> = FxHashMap::default();
    let (mut first, mut last) = (u64::MAX, 0);
    for track in viewer::threads(profile) {
        let thread_name = b.strings.get(&track.name);
        for i in track.samples {
            let s = &profile.samples[i];
            first = first.min(s.time);
            last = last.max(s.time);
            let frames = viewer::code_frames(profile, &s.stack);
            let cpu = match occurrences {
                true => s.weight.min(i64::MAX as u64) as i64,
                false => ctx.cpu_ns(s.weight) as i64,
            };
            if let Some(&m) = sample_index.get(&(s.tid, frames)) {
                merged[m].value[0] += 1;
                merged[m].value[1] += cpu;
                continue;
            }
            let mut location_id: Vec<u64> = inline_groups(profile, frames)
                .into_iter()
                .map(|group| b.location(group))
                .collect();
            location_id.reverse();
            let num = |key, num| Label {
                key,
                num,
                ..Label::default()
            };
            sample_index.insert((s.tid, frames), merged.len());
            merged.push(Sample {
                location_id,
                value: vec![1, cpu],
                label: vec![
                    num(pid_key, i64::from(s.pid)),
                    num(tid_key, i64::from(s.tid)),
                    Label {
                        key: thread_key,
                        str: thread_name,
                        ..Label::default()
                    },
                ],
            });
        }
    }
    let period_ns = match ctx.frequency_hz {
        0 => 0,
        hz => 1_000_000_000 / hz as i64,
    };
    let comment = vec![b.strings.get(&ctx.export_title())];
    let period_type = Some(match occurrences {
        true => ValueType {
            r#type: b.strings.get(value_name),
            unit: b.strings.get(value_unit),
        },
        false => ValueType {
            r#type: b.strings.get("cpu"),
            unit: b.strings.get("nanoseconds"),
        },
    });
    let (time_nanos, duration_nanos) = match (first, last) {
        (u64::MAX, _) => (ctx.start_unix_ns as i64, 0),
        (first, last) => (
            (ctx.start_unix_ns + ctx.offset_ns(first)) as i64,
            (last - first) as i64,
        ),
    };
    let default_sample_type = b.strings.get(value_name);
    PprofProfile {
        sample_type,
        sample: merged,
        mapping: b.mappings,
        location: b.locations,
        function: b.functions,
        string_table: b.strings.table,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos,
        duration_nanos,
        period_type,
        period: if occurrences { 0 } else { period_ns },
        comment,
        default_sample_type,
    }
}

/// A readable dump (for golden files and debugging): samples as leaf-last stacks of
/// `function (file:line)` entries, inline chains joined with `+`.
pub fn dump(p: &PprofProfile) -> String {
    let s = |i: i64| p.string_table.get(i as usize).map_or("?", String::as_str);
    let functions: BTreeMap<u64, &Function> = p.function.iter().map(|f| (f.id, f)).collect();
    let locations: BTreeMap<u64, &Location> = p.location.iter().map(|l| (l.id, l)).collect();
    let mut out = String::new();
    let types: Vec<String> = p
        .sample_type
        .iter()
        .map(|t| format!("{}/{}", s(t.r#type), s(t.unit)))
        .collect();
    out.push_str(&format!("sample types: {}\n", types.join(", ")));
    for m in &p.mapping {
        out.push_str(&format!("mapping {}: {}\n", m.id, s(m.filename)));
    }
    for sample in &p.sample {
        let labels: Vec<String> = sample
            .label
            .iter()
            .map(|l| match l.str {
                0 => format!("{}={}", s(l.key), l.num),
                v => format!("{}={}", s(l.key), s(v)),
            })
            .collect();
        let frames: Vec<String> = sample
            .location_id
            .iter()
            .rev()
            .map(|id| {
                let Some(loc) = locations.get(id) else {
                    return format!("<location {id}?>");
                };
                let lines: Vec<String> = loc
                    .line
                    .iter()
                    .rev()
                    .map(|l| match functions.get(&l.function_id) {
                        Some(f) => format!("{} ({}:{})", s(f.name), s(f.filename), l.line),
                        None => format!("<function {}?>", l.function_id),
                    })
                    .collect();
                format!("[m{}] {}", loc.mapping_id, lines.join(" + "))
            })
            .collect();
        out.push_str(&format!(
            "{:?} {}\n  {}\n",
            sample.value,
            labels.join(" "),
            frames.join("\n  ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::viewer::tests::{sample_context, sample_profile};

    fn round_trip() -> PprofProfile {
        let p = sample_profile();
        let mut gz = Vec::new();
        write(&p, &sample_context(&p), &mut gz).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b], "gzipped");
        read(&gz).unwrap()
    }

    #[test]
    fn round_trip_equals_the_built_message() {
        let p = sample_profile();
        assert_eq!(round_trip(), build(&p, &sample_context(&p)));
    }

    #[test]
    fn sample_types_and_merged_values() {
        let pp = round_trip();
        let s = |i: i64| pp.string_table[i as usize].as_str();
        assert_eq!(pp.string_table[0], "");
        let types: Vec<(&str, &str)> = pp
            .sample_type
            .iter()
            .map(|t| (s(t.r#type), s(t.unit)))
            .collect();
        assert_eq!(types, vec![("samples", "count"), ("cpu", "nanoseconds")]);
        // 5 samples, two of them with the same thread and stack.
        assert_eq!(pp.sample.len(), 4);
        assert_eq!(pp.sample[0].value, vec![2, 2_002_002]);
        let total: i64 = pp.sample.iter().map(|s| s.value[0]).sum();
        assert_eq!(total, 5);
        assert_eq!(pp.period, 1_001_001);
    }

    #[test]
    fn inlined_frames_share_the_location_of_their_caller() {
        let pp = round_trip();
        let s = |i: i64| pp.string_table[i as usize].as_str();
        let leaf = pp.sample[0].location_id[0];
        let loc = pp.location.iter().find(|l| l.id == leaf).unwrap();
        let names: Vec<(&str, &str, i64)> = loc
            .line
            .iter()
            .map(|l| {
                let f = pp.function.iter().find(|f| f.id == l.function_id).unwrap();
                (s(f.name), s(f.filename), l.line)
            })
            .collect();
        assert_eq!(
            names,
            vec![
                ("Demo.step", "Demo.java", 33),
                ("Demo.run", "Demo.java", 20)
            ]
        );
        let mapping = pp.mapping.iter().find(|m| m.id == loc.mapping_id).unwrap();
        assert_eq!(s(mapping.filename), "jit-100.dump");
        // main is the outermost (last) location; the root frame (thread name) is a label.
        assert_eq!(pp.sample[0].location_id.len(), 2);
        let labels: Vec<(&str, i64, &str)> = pp.sample[0]
            .label
            .iter()
            .map(|l| (s(l.key), l.num, s(l.str)))
            .collect();
        assert_eq!(
            labels,
            vec![("pid", 100, ""), ("tid", 100, ""), ("thread", 0, "app")]
        );
    }

    #[test]
    fn the_program_is_the_first_mapping() {
        let p = sample_profile();
        let mut ctx = sample_context(&p);
        let first = |ctx: &Context| {
            let pp = build(&p, ctx);
            pp.string_table[pp.mapping[0].filename as usize].clone()
        };
        // Without a program name: the module most stacks start in.
        assert_eq!(first(&ctx), "app");
        ctx.program = Some("jit-100.dump".into());
        assert_eq!(first(&ctx), "jit-100.dump");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(read(&[0x1f, 0x8b, 1, 2, 3]).is_err());
        assert!(read(&[0xff; 16]).is_err());
    }
}
