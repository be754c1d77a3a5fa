//! The symbolized profile: interned frames and samples with root-first stacks. Built by
//! `symbolize::resolve` from a recording; consumed by the writers in `report/`.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

/// What kind of code a frame is; drives the `_[k]`/`_[j]`/`_[i]` suffixes and colours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameKind {
    /// Process or thread name at the root of every stack.
    Root,
    Native,
    Kernel,
    /// JIT-compiled code.
    Jit,
    /// A frame inlined into the frame below it (native or JIT).
    Inlined,
    Interpreter,
    Unknown,
}

/// One frame as shown to people.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    pub name: String,
    pub kind: FrameKind,
    /// Binary (file name) the code belongs to, when known.
    pub module: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u32);

/// One sample: who, when, how much, and the stack (root first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileSample {
    pub pid: u32,
    pub tid: u32,
    /// Sample-clock ns.
    pub time: u64,
    pub cpu: u32,
    /// The event period (cycles or ns of cpu-clock); for an off-CPU sample, the ns the thread
    /// then stayed off the CPU.
    pub weight: u64,
    pub stack: Vec<FrameId>,
    /// A switch off the CPU (`record --off-cpu`), not a CPU sample.
    pub off_cpu: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadInfo {
    pub pid: u32,
    pub comm: String,
}

#[derive(Debug, Default)]
pub struct Profile {
    frames: Vec<Frame>,
    /// Keyed by frame and JIT tier: the same JIT function at two tiers is two frames.
    index: FxHashMap<(Frame, Option<String>), FrameId>,
    /// The JIT tier of frames whose runtime named one ("Turbofan (optimized)", ...).
    tiers: FxHashMap<FrameId, String>,
    pub samples: Vec<ProfileSample>,
    pub threads: BTreeMap<u32, ThreadInfo>,
    /// Things the reader should know (unknown addresses, missing kernel symbols, ...).
    pub notes: Vec<String>,
    /// Sample-clock ns where the input starts (its first sample before any filter), when the
    /// builder knows it; `--time` counts from here.
    pub start_time: Option<u64>,
}

impl Profile {
    pub fn intern(&mut self, frame: Frame) -> FrameId {
        self.intern_tiered(frame, None)
    }

    /// Interns a frame of JIT code compiled at `tier` (None: no tier known).
    pub fn intern_tiered(&mut self, frame: Frame, tier: Option<String>) -> FrameId {
        let key = (frame, tier);
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let id = FrameId(self.frames.len() as u32);
        self.frames.push(key.0.clone());
        if let Some(tier) = &key.1 {
            self.tiers.insert(id, tier.clone());
        }
        self.index.insert(key, id);
        id
    }

    /// The JIT tier the frame's code was compiled at, when known.
    pub fn tier(&self, id: FrameId) -> Option<&str> {
        self.tiers.get(&id).map(String::as_str)
    }

    pub fn frame(&self, id: FrameId) -> &Frame {
        &self.frames[id.0 as usize]
    }

    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// Renames frames: `rename` returns a frame's new name, or None to keep it. Frame ids stay;
    /// the caller must not give two different frames the same name and kind.
    pub fn rename_frames(&mut self, mut rename: impl FnMut(&Frame) -> Option<String>) {
        for frame in &mut self.frames {
            if let Some(name) = rename(frame) {
                frame.name = name;
            }
        }
        let tiers = &self.tiers;
        self.index = self
            .frames
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let id = FrameId(i as u32);
                ((f.clone(), tiers.get(&id).cloned()), id)
            })
            .collect();
    }
}
