//! Line and inline tables of one compiled method, from HotSpot's `compile_info`
//! (jvmticmlr.h `PCStackInfo`: for each recorded PC, the chain of methods inlined there,
//! innermost first, with the bytecode index in each).
//!
//! A PC descriptor marks the end of the instruction it describes (a call's return address, or
//! with `-XX:+DebugNonSafepoints` the end of most instructions), so descriptor `i` covers the
//! code offsets `[pc[i-1], pc[i])`. jprof looks up a leaf at its IP and a caller at its return
//! address minus one, both of which fall inside the right region. Each region becomes:
//! - a line record at its start for the innermost method's line;
//! - a stretch of every inline call on its chain. Consecutive regions sharing a chain prefix
//!   share those calls, so each call is one contiguous range, emitted in DFS (opening) order
//!   with its depth, which is how `symbolize/jit_index.rs` walks them.
//!
//! This runs for every compiled method on the VM's service thread, so it allocates nothing per
//! PC descriptor (a C2 method with `-XX:+DebugNonSafepoints` has thousands), and the tables are
//! reused from one method to the next.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

use jprof_format::jitdump_write::Inline;

/// A hash for the method ids the agent's maps are keyed by: one multiply per word, where
/// std's SipHash (made against keys chosen by an attacker) showed in the VM's CPU time; ids
/// come from the VM.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A `HashMap` keyed by method ids, hashed with [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The PC descriptors of one compiled method: each one's code offset and inline chain,
/// innermost first (HotSpot's order), the chains back to back in one vector.
#[derive(Debug, Clone)]
pub struct PcStacks<M> {
    /// `(code offset, first frame in frames, frame count)` per descriptor.
    pcs: Vec<(u32, u32, u32)>,
    frames: Vec<(M, i32)>,
}

impl<M> Default for PcStacks<M> {
    fn default() -> Self {
        Self {
            pcs: Vec::new(),
            frames: Vec::new(),
        }
    }
}

impl<M: Copy> PcStacks<M> {
    /// Empties it, keeping its capacity.
    pub fn clear(&mut self) {
        self.pcs.clear();
        self.frames.clear();
    }

    /// Adds the descriptor at `pc_offset` with its chain `(method, bci)`, innermost first.
    pub fn push(&mut self, pc_offset: u32, chain: impl IntoIterator<Item = (M, i32)>) {
        let first = self.frames.len();
        self.frames.extend(chain);
        self.pcs
            .push((pc_offset, first as u32, (self.frames.len() - first) as u32));
    }

    /// The chain of descriptor `i`, innermost first.
    fn chain(&self, i: usize) -> &[(M, i32)] {
        let (_, first, n) = self.pcs[i];
        &self.frames[first as usize..(first + n) as usize]
    }
}

/// What the agent knows about a method.
#[derive(Debug, Clone, Default)]
pub struct MethodInfo {
    /// `pkg.Class.method`.
    pub name: String,
    /// `pkg/Class.java`, when the class has a SourceFile attribute.
    pub file: Option<String>,
    /// `(start bci, line)` sorted by bci.
    pub lines: Vec<(i64, i32)>,
}

impl MethodInfo {
    /// The line of `bci`: the entry with the greatest start at or before it.
    pub fn line_at(&self, bci: i32) -> u32 {
        let i = self
            .lines
            .partition_point(|&(start, _)| start <= i64::from(bci));
        let entry = if i == 0 {
            self.lines.first()
        } else {
            self.lines.get(i - 1)
        };
        entry.map_or(0, |&(_, line)| line.max(0) as u32)
    }

    fn first_line(&self) -> u32 {
        self.lines
            .iter()
            .map(|&(_, l)| l.max(0) as u32)
            .min()
            .unwrap_or(0)
    }
}

/// File index meaning "no file" (out of range for every reader).
const NO_FILE: u32 = u32::MAX;

/// The tables of a DEBUG_INFO2 record. No DEBUG_INFO (a plain line table) is made: a body with
/// an inline tree is named and placed from the tree alone (`symbolize/jit_index.rs`). One is
/// kept and filled again for every compiled method ([`DebugTables::fill`]), so building the
/// next method's tables allocates nothing once the vectors have grown.
pub struct DebugTables<M> {
    /// `(name index, file index, first line)`; index 0 is the compiled method itself. A
    /// function's name index is its own index.
    pub functions: Vec<(u32, u32, u32)>,
    /// What the VM said of each function's method.
    infos: Vec<Arc<MethodInfo>>,
    /// For each file index, the function whose file it is.
    file_owners: Vec<u32>,
    pub inlines: Vec<Inline>,
    /// `(code offset, file index, line)`.
    pub lines: Vec<(u32, u32, u32)>,
    /// Scratch space of [`DebugTables::fill`], kept for its capacity: the function index of
    /// each method, and the method asked for last with its index.
    index: IdMap<M, u32>,
    last: Option<(M, u32)>,
    sorted: Vec<(u32, u32)>,
    open: Vec<((i32, M), usize)>,
}

impl<M> Default for DebugTables<M> {
    fn default() -> Self {
        Self {
            functions: Vec::new(),
            infos: Vec::new(),
            file_owners: Vec::new(),
            inlines: Vec::new(),
            lines: Vec::new(),
            index: IdMap::default(),
            last: None,
            sorted: Vec::new(),
            open: Vec::new(),
        }
    }
}

impl<M> DebugTables<M> {
    /// The names, by name index.
    pub fn names(&self) -> Vec<&str> {
        self.infos.iter().map(|i| i.name.as_str()).collect()
    }

    /// The files, by file index.
    pub fn files(&self) -> Vec<&str> {
        self.file_owners
            .iter()
            .map(|&f| self.infos[f as usize].file.as_deref().unwrap_or_default())
            .collect()
    }
}

impl<M: Copy + Eq + Hash> DebugTables<M> {
    /// The function index of `m` and what is known about it; `info` is asked the first time.
    fn function(
        &mut self,
        m: M,
        info: &mut impl FnMut(M) -> Option<Arc<MethodInfo>>,
    ) -> (u32, &MethodInfo) {
        let known = match self.last {
            Some((last, i)) if last == m => Some(i),
            _ => self.index.get(&m).copied(),
        };
        let i = match known {
            Some(i) => i,
            None => {
                let i = info(m).unwrap_or_else(|| {
                    Arc::new(MethodInfo {
                        name: "[unknown Java method]".to_string(),
                        ..MethodInfo::default()
                    })
                });
                let function = self.infos.len() as u32;
                // Files are few per compiled method: a look through them beats hashing strings.
                let file = i.file.as_deref().map_or(NO_FILE, |f| {
                    let known = self
                        .file_owners
                        .iter()
                        .position(|&o| self.infos[o as usize].file.as_deref() == Some(f));
                    match known {
                        Some(k) => k as u32,
                        None => {
                            self.file_owners.push(function);
                            self.file_owners.len() as u32 - 1
                        }
                    }
                });
                self.functions.push((function, file, i.first_line()));
                self.infos.push(i);
                self.index.insert(m, function);
                function
            }
        };
        // Neighbouring regions mostly end in the same method: asked again at once.
        self.last = Some((m, i));
        (i, &self.infos[i as usize])
    }

    /// Fills the tables for the method `outer` whose code is `code_size` bytes long, replacing
    /// what they held. `info` is asked once per distinct method; `None` (an unreadable method)
    /// gives an unnamed function.
    pub fn fill(
        &mut self,
        outer: M,
        code_size: u32,
        pcs: &PcStacks<M>,
        mut info: impl FnMut(M) -> Option<Arc<MethodInfo>>,
    ) {
        self.functions.clear();
        self.infos.clear();
        self.file_owners.clear();
        self.inlines.clear();
        self.lines.clear();
        self.index.clear();
        self.last = None;
        self.function(outer, &mut info);

        // (code offset, descriptor): the first descriptor at each offset, in offset order.
        let mut sorted = std::mem::take(&mut self.sorted);
        sorted.clear();
        sorted.extend(
            pcs.pcs
                .iter()
                .enumerate()
                .filter(|(_, p)| p.2 > 0 && p.0 <= code_size)
                .map(|(i, p)| (p.0, i as u32)),
        );
        sorted.sort_unstable();
        sorted.dedup_by_key(|p| p.0);

        // The inline calls open over the previous region: (caller bci, callee, index in
        // `inlines`).
        let mut open = std::mem::take(&mut self.open);
        open.clear();
        let mut start = 0u32;
        for &(end, i) in &sorted {
            if end == start {
                continue;
            }
            let frames = pcs.chain(i as usize);
            // Call `d` (outermost first) is made by frame `n - 1 - d` at its bci, into frame
            // `n - 2 - d`; frame `n - 1` is the compiled method itself.
            let n = frames.len();
            let call = |d: usize| (frames[n - 1 - d].1, frames[n - 2 - d].0);
            let shared = open
                .iter()
                .enumerate()
                .take_while(|&(d, o)| d + 1 < n && o.0 == call(d))
                .count();
            open.truncate(shared);
            for &(_, i) in &open {
                let call = &mut self.inlines[i];
                call.range.1 = end - call.range.0;
            }
            for depth in shared..n - 1 {
                let (bci, callee) = call(depth);
                let call_line = self
                    .function(frames[n - 1 - depth].0, &mut info)
                    .1
                    .line_at(bci);
                let function = self.function(callee, &mut info).0;
                self.inlines.push(Inline {
                    depth: depth as u32,
                    function,
                    call_line,
                    range: (start, end - start),
                });
                open.push(((bci, callee), self.inlines.len() - 1));
            }
            let (leaf, leaf_bci) = frames[0];
            let (index, leaf_info) = self.function(leaf, &mut info);
            let line = leaf_info.line_at(leaf_bci);
            let file = self.functions[index as usize].1;
            if self.lines.last().is_none_or(|l| (l.1, l.2) != (file, line)) {
                self.lines.push((start, file, line));
            }
            start = end;
        }
        self.sorted = sorted;
        self.open = open;
    }
}

/// The tables for the method `outer` whose code is `code_size` bytes long, in new tables
/// ([`DebugTables::fill`]).
#[cfg(test)]
pub fn build<M: Copy + Eq + Hash>(
    outer: M,
    code_size: u32,
    pcs: &PcStacks<M>,
    info: impl FnMut(M) -> Option<Arc<MethodInfo>>,
) -> DebugTables<M> {
    let mut tables = DebugTables::default();
    tables.fill(outer, code_size, pcs, info);
    tables
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(name: &str, lines: &[(i64, i32)]) -> MethodInfo {
        MethodInfo {
            name: name.to_string(),
            file: Some(format!("demo/{name}.java")),
            lines: lines.to_vec(),
        }
    }

    fn info(m: u32) -> Option<Arc<MethodInfo>> {
        match m {
            1 => Some(method("multiply", &[(0, 10), (5, 11), (20, 12)])),
            2 => Some(method("dot", &[(0, 30), (4, 31)])),
            3 => Some(method("mul", &[(0, 40)])),
            _ => None,
        }
        .map(Arc::new)
    }

    fn stacks(pcs: &[(u32, &[(u32, i32)])]) -> PcStacks<u32> {
        let mut out = PcStacks::default();
        for (offset, frames) in pcs {
            out.push(*offset, frames.iter().copied());
        }
        out
    }

    #[test]
    fn line_at_takes_the_last_entry_at_or_before_the_bci() {
        let m = method("x", &[(0, 10), (5, 11), (20, 12)]);
        assert_eq!(m.line_at(0), 10);
        assert_eq!(m.line_at(4), 10);
        assert_eq!(m.line_at(5), 11);
        assert_eq!(m.line_at(100), 12);
        assert_eq!(MethodInfo::default().line_at(3), 0);
    }

    #[test]
    fn inline_calls_are_contiguous_dfs_ranges() {
        // multiply (1) inlines dot (2) at bci 6 (line 11), dot inlines mul (3) at bci 4 (line 31).
        let pcs = stacks(&[
            (0x10, &[(1, 0)]),
            (0x20, &[(2, 0), (1, 6)]),
            (0x30, &[(3, 0), (2, 4), (1, 6)]),
            (0x38, &[(2, 5), (1, 6)]),
            (0x50, &[(1, 21)]),
            (0x60, &[(2, 0), (1, 22)]),
        ]);
        let t = build(1u32, 0x100, &pcs, info);
        let names: Vec<&str> = t
            .functions
            .iter()
            .map(|f| t.names()[f.0 as usize])
            .collect();
        assert_eq!(names, ["multiply", "dot", "mul"]);
        let calls: Vec<(u32, u32, u32, (u32, u32))> = t
            .inlines
            .iter()
            .map(|i| (i.depth, i.function, i.call_line, i.range))
            .collect();
        assert_eq!(
            calls,
            [
                (0, 1, 11, (0x10, 0x28)), // dot over [0x10, 0x38)
                (1, 2, 31, (0x20, 0x10)), // mul inside it over [0x20, 0x30)
                (0, 1, 12, (0x50, 0x10)), // dot again, from another call site
            ]
        );
        let dot_file = t.functions[1].1;
        let lines: Vec<(u32, u32, u32)> = t.lines.clone();
        assert_eq!(
            lines,
            [
                (0, t.functions[0].1, 10),
                (0x10, dot_file, 30),
                (0x20, t.functions[2].1, 40),
                (0x30, dot_file, 31),
                (0x38, t.functions[0].1, 12),
                (0x50, dot_file, 30),
            ]
        );
    }

    #[test]
    fn same_callee_from_two_call_sites_is_two_calls() {
        let pcs = stacks(&[(0x10, &[(2, 0), (1, 6)]), (0x20, &[(2, 0), (1, 21)])]);
        let t = build(1u32, 0x100, &pcs, info);
        assert_eq!(t.inlines.len(), 2);
        assert_eq!(t.inlines[0].range, (0, 0x10));
        assert_eq!(t.inlines[1].range, (0x10, 0x10));
        assert_eq!(t.functions.len(), 2);
    }

    /// Tables filled again for another method hold what new tables would, nothing left over.
    #[test]
    fn reused_tables_equal_new_ones() {
        let first = stacks(&[
            (0x10, &[(1, 0)]),
            (0x20, &[(2, 0), (1, 6)]),
            (0x30, &[(3, 0), (2, 4), (1, 6)]),
        ]);
        let second = stacks(&[(0x8, &[(2, 0)]), (0x18, &[(3, 0), (2, 4)])]);
        let mut reused = build(1u32, 0x100, &first, info);
        reused.fill(2u32, 0x40, &second, info);
        let new = build(2u32, 0x40, &second, info);
        assert_eq!(reused.functions, new.functions);
        assert_eq!(reused.names(), new.names());
        assert_eq!(reused.files(), new.files());
        assert_eq!(reused.lines, new.lines);
        let calls = |t: &DebugTables<u32>| -> Vec<(u32, u32, u32, (u32, u32))> {
            t.inlines
                .iter()
                .map(|i| (i.depth, i.function, i.call_line, i.range))
                .collect()
        };
        assert_eq!(calls(&reused), calls(&new));
        assert_eq!(new.names(), ["dot", "mul"]);
        assert_eq!(new.inlines.len(), 1);
    }

    #[test]
    fn odd_input_is_tolerated() {
        // Unsorted, duplicated, past the end, empty chains, unknown methods.
        let pcs = stacks(&[
            (0x30, &[(9, 3), (1, 0)]),
            (0x10, &[(1, 0)]),
            (0x10, &[(1, 5)]),
            (0x500, &[(1, 0)]),
            (0x20, &[]),
        ]);
        let t = build(1u32, 0x100, &pcs, info);
        assert_eq!(t.inlines.len(), 1);
        assert_eq!(t.inlines[0].range, (0x10, 0x20));
        assert_eq!(
            t.names()[t.functions[1].0 as usize],
            "[unknown Java method]"
        );
        assert_eq!(t.functions[1].1, NO_FILE);
    }
}
