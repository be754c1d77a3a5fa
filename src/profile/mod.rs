//! The symbolized profile: interned frames and samples with root-first stacks, the filters
//! every output shares, and the context an input gives its writers. Built by `input/` (from a
//! recording through `symbolize::resolve`, or from a .mlpd or XRay log); consumed by the writers
//! in `report/`.

pub(crate) mod context;
pub(crate) mod filter;
pub mod names;
pub(crate) mod notes;
pub(crate) mod signatures;

pub use context::{CodeLoad, Context, WeightUnit};
pub use filter::{Filters, TimeRange};

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

/// What kind of code a frame is; drives the `_[k]`/`_[j]`/`_[i]` suffixes and colours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameKind {
    /// Process or thread name at the root of every stack.
    Root,
    /// Machine code of a binary or shared library.
    Native,
    /// Kernel code (named from kallsyms).
    Kernel,
    /// JIT-compiled code.
    Jit,
    /// A frame inlined into the frame below it (native or JIT).
    Inlined,
    /// A method run by a runtime's interpreter.
    Interpreter,
    /// Code at an address nothing names.
    Unknown,
}

/// One frame as shown to people.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    /// Function or method name; for a root frame, the process or thread name.
    pub name: String,
    /// What kind of code it is.
    pub kind: FrameKind,
    /// Binary (file name) the code belongs to, when known.
    pub module: Option<String>,
    /// Source file, when line information is known.
    pub file: Option<String>,
    /// Source line (1-based), when known.
    pub line: Option<u32>,
}

/// A frame interned in a [`Profile`]: its index in [`Profile::frames`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u32);

/// A stack of frames, root first. Cloning shares it: a profile built with
/// [`Profile::intern_stack`] holds each distinct stack once, however many samples have it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stack(Arc<[FrameId]>);

impl std::ops::Deref for Stack {
    type Target = [FrameId];

    fn deref(&self) -> &[FrameId] {
        &self.0
    }
}

/// Hashes and compares as the frames do (the derived impls of the one field), so a set of
/// stacks can be searched by a slice.
impl std::borrow::Borrow<[FrameId]> for Stack {
    fn borrow(&self) -> &[FrameId] {
        &self.0
    }
}

impl From<Vec<FrameId>> for Stack {
    fn from(frames: Vec<FrameId>) -> Self {
        Self(frames.into())
    }
}

impl From<&[FrameId]> for Stack {
    fn from(frames: &[FrameId]) -> Self {
        Self(frames.into())
    }
}

/// One sample: who, when, how much, and the stack (root first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileSample {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Sample-clock ns.
    pub time: u64,
    /// CPU the sample was taken on.
    pub cpu: u32,
    /// The event period (cycles or ns of cpu-clock); for an off-CPU sample, the ns the thread
    /// then stayed off the CPU.
    pub weight: u64,
    /// The frames, root first.
    pub stack: Stack,
    /// A switch off the CPU (`record --off-cpu`), not a CPU sample.
    pub off_cpu: bool,
}

/// What is known of a thread besides its id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadInfo {
    /// Process the thread belongs to.
    pub pid: u32,
    /// Thread name (`comm`).
    pub comm: String,
}

/// The JIT tier a body of code was compiled at: its runtime's name for it and what kind of
/// tier that is. Shown as the label.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tier {
    /// As shown: "C2 (optimized)", "Turbofan (optimized)", "warm".
    pub label: String,
    /// What kind of tier it is.
    pub class: TierClass,
}

/// What kind of tier a runtime's tier is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TierClass {
    /// Bytecode run by an interpreter (V8's Ignition).
    Interpreted,
    /// Compiled quickly, little optimized (HotSpot C1, V8's Sparkplug).
    Baseline,
    /// Compiled with optimizations (HotSpot C2, V8's Maglev and Turbofan, OpenJ9's levels).
    Optimized,
    /// Trampolines, stubs, runtime helpers.
    Stub,
    /// A tier of a kind jprof does not know.
    Unknown,
}

impl Tier {
    /// A tier of `class` shown as `label`.
    pub fn new(class: TierClass, label: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            class,
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

/// A symbolized profile: its samples, their interned frames and stacks, and thread names.
#[derive(Debug, Default)]
pub struct Profile {
    frames: Vec<Frame>,
    /// Keyed by frame and JIT tier: the same JIT function at two tiers is two frames.
    index: FxHashMap<(Frame, Option<Tier>), FrameId>,
    /// The JIT tier of frames whose runtime named one ("Turbofan (optimized)", ...).
    tiers: FxHashMap<FrameId, Tier>,
    /// The samples, each with its interned stack.
    pub samples: Vec<ProfileSample>,
    /// Every distinct stack [`Profile::intern_stack`] has seen.
    stacks: FxHashSet<Stack>,
    /// Thread info by tid.
    pub threads: BTreeMap<u32, ThreadInfo>,
    /// Things the reader should know (unknown addresses, missing kernel symbols, ...).
    pub notes: Vec<String>,
    /// Sample-clock ns where the input starts (its first sample before any filter), when the
    /// builder knows it; `--time` counts from here.
    pub start_time: Option<u64>,
    /// The names as written of frames [`Profile::rename_frames`] renamed, by their new name
    /// (several for C++ overloads shown as one function).
    full_names: BTreeMap<String, std::collections::BTreeSet<String>>,
}

impl Profile {
    /// The id of `frame`, added on first sight (no JIT tier).
    pub fn intern(&mut self, frame: Frame) -> FrameId {
        self.intern_tiered(frame, None)
    }

    /// Interns a frame of JIT code compiled at `tier` (None: no tier known).
    pub fn intern_tiered(&mut self, frame: Frame, tier: Option<Tier>) -> FrameId {
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

    /// The shared copy of `frames` (made on first sight): samples with the same stack share
    /// one allocation, so memory grows with distinct stacks rather than with samples.
    pub fn intern_stack(&mut self, frames: &[FrameId]) -> Stack {
        if let Some(stack) = self.stacks.get(frames) {
            return stack.clone();
        }
        let stack = Stack::from(frames);
        self.stacks.insert(stack.clone());
        stack
    }

    /// The JIT tier the frame's code was compiled at, when known.
    pub fn tier(&self, id: FrameId) -> Option<&Tier> {
        self.tiers.get(&id)
    }

    /// The frame `id` stands for (panics if `id` is out of range).
    pub fn frame(&self, id: FrameId) -> &Frame {
        &self.frames[id.0 as usize]
    }

    /// The names as written (by the runtime, the demangler) of the frames now called `name`;
    /// none when the name was not shortened.
    pub fn full_names(&self, name: &str) -> impl Iterator<Item = &str> {
        self.full_names
            .get(name)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// Every shortened name with the names it stands for.
    pub fn all_full_names(&self) -> &BTreeMap<String, std::collections::BTreeSet<String>> {
        &self.full_names
    }

    /// Every interned frame, indexed by [`FrameId`].
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// Renames frames: `rename` returns a frame's new name, or None to keep it. Frame ids stay;
    /// frames that get the same name and kind are one function in every output. The old name
    /// is kept as the new one's full name ([`Profile::full_names`]).
    pub fn rename_frames(&mut self, mut rename: impl FnMut(&Frame) -> Option<String>) {
        for frame in &mut self.frames {
            let Some(name) = rename(frame).filter(|n| *n != frame.name) else {
                continue;
            };
            let old = std::mem::replace(&mut frame.name, name);
            // A name renamed twice keeps the name as first written.
            let originals = match self.full_names.get(&old) {
                Some(set) => set.clone(),
                None => std::iter::once(old).collect(),
            };
            self.full_names
                .entry(frame.name.clone())
                .or_default()
                .extend(originals);
        }
        self.reindex();
    }

    /// Gives frames without a source file the file (and line) `locate` finds for them, e.g.
    /// from a runtime's name that holds its location. Frame ids stay.
    pub fn locate_frames(
        &mut self,
        mut locate: impl FnMut(&Frame) -> Option<(String, Option<u32>)>,
    ) {
        for frame in self.frames.iter_mut().filter(|f| f.file.is_none()) {
            if let Some((file, line)) = locate(frame) {
                frame.file = Some(file);
                frame.line = frame.line.or(line);
            }
        }
        self.reindex();
    }

    /// Rebuilds the interning index after frames changed in place.
    fn reindex(&mut self) {
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

/// The label of a frame in folded output: the name made safe for the format plus the kind
/// suffix that inferno's `java` palette colours by (`_[k]` kernel, `_[j]` JIT, `_[i]` inlined).
pub fn frame_label(frame: &Frame) -> String {
    let mut label: String = frame
        .name
        .chars()
        .filter(|c| *c != '\n' && *c != '\r')
        // `;` separates frames in the format, so it cannot appear inside one; other control
        // characters (from damaged runtime files) would make the SVG invalid XML.
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => '\u{fffd}',
            c => c,
        })
        .collect();
    if label.is_empty() {
        label.push_str("[unknown]");
    }
    label.push_str(match frame.kind {
        FrameKind::Kernel => "_[k]",
        FrameKind::Jit => "_[j]",
        FrameKind::Inlined => "_[i]",
        // An interpreted method: its own mark, as async-profiler's `_[0]`.
        FrameKind::Interpreter => "_[int]",
        FrameKind::Root | FrameKind::Native | FrameKind::Unknown => "",
    });
    label
}

/// Small profiles for unit tests across the crate.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    pub(crate) fn frame(name: &str, kind: FrameKind) -> Frame {
        Frame {
            name: name.to_string(),
            kind,
            module: None,
            file: None,
            line: None,
        }
    }

    /// A profile from `(stack root-first, weight)` pairs; every stack starts with a `prog` root.
    pub(crate) fn profile(stacks: &[(&[(&str, FrameKind)], u64)]) -> Profile {
        let mut p = Profile::default();
        let root = p.intern(frame("prog", FrameKind::Root));
        for (i, (stack, weight)) in stacks.iter().enumerate() {
            let mut ids = vec![root];
            ids.extend(stack.iter().map(|(n, k)| p.intern(frame(n, *k))));
            let ids = p.intern_stack(&ids);
            p.samples.push(ProfileSample {
                pid: 1,
                tid: 1,
                time: i as u64,
                cpu: 0,
                weight: *weight,
                stack: ids,
                off_cpu: false,
            });
        }
        p
    }

    /// `stack weight` lines sorted by stack, as the collapsed writer prints them.
    pub(crate) fn lines(p: &Profile) -> Vec<String> {
        let mut folded: BTreeMap<String, u64> = BTreeMap::new();
        for s in &p.samples {
            let stack: Vec<String> = s.stack.iter().map(|&id| frame_label(p.frame(id))).collect();
            *folded.entry(stack.join(";")).or_default() += s.weight;
        }
        folded
            .into_iter()
            .map(|(s, w)| format!("{s} {w}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::frame;
    use super::*;

    /// Names come from runtime files that may be damaged: a label never carries a frame
    /// separator, a line break or another control character (invalid in the SVG's XML).
    #[test]
    fn labels_are_one_clean_line() {
        let f = frame("a;b\nc\u{3}d\te", FrameKind::Jit);
        assert_eq!(frame_label(&f), "a:bc\u{fffd}d\u{fffd}e_[j]");
    }
}
