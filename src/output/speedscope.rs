//! `--format speedscope`: speedscope's JSON file format, one sampled profile per thread. The
//! stacks are streamed from the profile while serializing, so memory stays at the profile's.
//!
//! A speedscope frame is a function: a name in a file (or, for code without source
//! information, in its module). Its line is given only when every sampled frame of that
//! function has the same one, so lines never split a function in the views.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;

use super::viewer::{self, ThreadTrack};
use crate::profile::{Context, Frame, FrameKind, Profile, WeightUnit};

/// Default output file of the speedscope format.
pub const DEFAULT_FILE: &str = "profile.speedscope.json";

const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

#[derive(Serialize)]
struct File<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    shared: Shared,
    profiles: Vec<SampledProfile<'a>>,
    name: &'a str,
    #[serde(rename = "activeProfileIndex")]
    active_profile_index: usize,
    exporter: String,
}

#[derive(Serialize)]
struct Shared {
    frames: Vec<SpeedscopeFrame>,
}

#[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
struct SpeedscopeFrame {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

#[derive(Serialize)]
struct SampledProfile<'a> {
    r#type: &'static str,
    name: String,
    unit: &'static str,
    #[serde(rename = "startValue")]
    start_value: u64,
    #[serde(rename = "endValue")]
    end_value: u64,
    samples: Stacks<'a>,
    weights: Vec<u64>,
}

/// A thread's stacks as lists of indices into `shared.frames`, root first.
struct Stacks<'a> {
    profile: &'a Profile,
    track: &'a ThreadTrack,
    frame_index: &'a [Option<u32>],
}

impl Serialize for Stacks<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.track.samples.len()))?;
        for &i in &self.track.samples {
            let stack = &self.profile.samples[i].stack;
            let indices: Vec<u32> = viewer::code_frames(self.profile, stack)
                .iter()
                .filter_map(|id| self.frame_index[id.0 as usize])
                .collect();
            seq.serialize_element(&indices)?;
        }
        seq.end()
    }
}

/// Where a frame's function lives: its source file, else its module.
fn place(frame: &Frame) -> &str {
    frame
        .file
        .as_deref()
        .unwrap_or_else(|| viewer::module_name(frame))
}

/// Speedscope frames for the profile's frames (`None` for roots), in sorted order.
fn frames(profile: &Profile) -> (Vec<SpeedscopeFrame>, Vec<Option<u32>>) {
    // (name, place) → Some(line) while every frame of the function agrees, else None.
    let mut functions: BTreeMap<(&str, &str), Option<Option<u32>>> = BTreeMap::new();
    for f in profile
        .frames()
        .iter()
        .filter(|f| f.kind != FrameKind::Root)
    {
        functions
            .entry((viewer::frame_name(f), place(f)))
            .and_modify(|line| {
                if *line != Some(f.line) {
                    *line = None;
                }
            })
            .or_insert(Some(f.line));
    }
    let position: BTreeMap<(&str, &str), u32> = functions
        .keys()
        .enumerate()
        .map(|(i, &key)| (key, i as u32))
        .collect();
    let shared = functions
        .iter()
        .map(|(&(name, place), line)| SpeedscopeFrame {
            name: name.to_string(),
            file: Some(place.to_string()),
            line: line.flatten(),
        })
        .collect();
    let index = profile
        .frames()
        .iter()
        .map(|f| (f.kind != FrameKind::Root).then(|| position[&(viewer::frame_name(f), place(f))]))
        .collect();
    (shared, index)
}

/// Writes the profile as speedscope JSON.
pub fn write(profile: &Profile, ctx: &Context, out: impl Write) -> io::Result<()> {
    let (shared, frame_index) = frames(profile);
    let tracks = viewer::threads(profile);
    // Occurrences of an event (page faults, …) are not time: counted as they are.
    let in_ns = ctx.weight_unit == WeightUnit::Nanoseconds
        || (ctx.weight_unit == WeightUnit::Events && ctx.frequency_hz > 0);
    let profiles = tracks
        .iter()
        .map(|track| {
            let weights: Vec<u64> = track
                .samples
                .iter()
                .map(|&i| {
                    let w = profile.samples[i].weight;
                    if in_ns {
                        ctx.cpu_ns(w)
                    } else {
                        w
                    }
                })
                .collect();
            SampledProfile {
                r#type: "sampled",
                name: format!("{} (pid {}, tid {})", track.name, track.pid, track.tid),
                unit: if in_ns { "nanoseconds" } else { "none" },
                start_value: 0,
                end_value: weights.iter().sum(),
                samples: Stacks {
                    profile,
                    track,
                    frame_index: &frame_index,
                },
                weights,
            }
        })
        .collect();
    let title = ctx.export_title();
    let file = File {
        schema: SCHEMA,
        shared: Shared { frames: shared },
        profiles,
        name: &title,
        active_profile_index: 0,
        exporter: format!("jprof {}", env!("CARGO_PKG_VERSION")),
    };
    let mut out = io::BufWriter::new(out);
    serde_json::to_writer(&mut out, &file)?;
    out.write_all(b"\n")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::viewer::tests::{sample_context, sample_profile};
    use serde_json::{json, Value};

    fn decoded() -> Value {
        let p = sample_profile();
        let mut out = Vec::new();
        write(&p, &sample_context(&p), &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn one_sampled_profile_per_thread() {
        let v = decoded();
        assert_eq!(v["$schema"], SCHEMA);
        let profiles = v["profiles"].as_array().unwrap();
        assert_eq!(profiles.len(), 2);
        assert_eq!(profiles[0]["type"], "sampled");
        assert_eq!(profiles[0]["name"], "app (pid 100, tid 100)");
        assert_eq!(profiles[0]["unit"], "nanoseconds");
        assert_eq!(
            profiles[0]["weights"],
            json!([1_001_001, 1_001_001, 1_001_001])
        );
        assert_eq!(profiles[0]["endValue"], 3_003_003);
        assert_eq!(profiles[1]["samples"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn stacks_are_root_first_indices_into_shared_frames() {
        let v = decoded();
        let frames = v["shared"]["frames"].as_array().unwrap();
        let names: Vec<&str> = v["profiles"][0]["samples"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                frames[i.as_u64().unwrap() as usize]["name"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(names, vec!["main", "Demo.run", "Demo.step"]);
        let run = frames.iter().find(|f| f["name"] == "Demo.run").unwrap();
        assert_eq!(
            run,
            &json!({"name": "Demo.run", "file": "Demo.java", "line": 20})
        );
        let read = frames.iter().find(|f| f["name"] == "sys_read").unwrap();
        assert_eq!(read["file"], "[kernel]");
        assert!(frames.iter().any(|f| f["name"] == "[unknown]"));
    }

    #[test]
    fn a_function_seen_at_two_lines_has_no_line() {
        let mut p = sample_profile();
        let mut other = p.frame(p.samples[0].stack[1]).clone();
        other.line = Some(11);
        let id = p.intern(other);
        let mut longer = p.samples[4].stack.to_vec();
        longer.push(id);
        p.samples[4].stack = longer.into();
        let mut out = Vec::new();
        write(&p, &sample_context(&p), &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        let main: Vec<&Value> = v["shared"]["frames"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["name"] == "main")
            .collect();
        assert_eq!(main, vec![&json!({"name": "main", "file": "main.c"})]);
    }
}
