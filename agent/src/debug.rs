//! Line and inline tables of one compiled method, from HotSpot's `compile_info`
//! (jvmticmlr.h `PCStackInfo`: for each recorded PC, the chain of methods inlined there,
//! innermost first, with the bytecode index in each).
//!
//! A PC descriptor marks the end of the instruction it describes (a call's return address, or
//! with `-XX:+DebugNonSafepoints` the end of most instructions), so descriptor `i` covers the
//! code offsets `[pc[i-1], pc[i])`. jprof looks up a leaf at its IP and a caller at its return
//! address minus one, both of which fall inside the right region. Each region becomes:
//! - a line record at its start for the innermost method's line (DEBUG_INFO and DEBUG_INFO2);
//! - a stretch of every inline call on its chain. Consecutive regions sharing a chain prefix
//!   share those calls, so each call is one contiguous range, emitted in DFS (opening) order
//!   with its depth, which is how `symbolize/jit_index.rs` walks them.

use std::collections::HashMap;
use std::hash::Hash;

use jprof_format::jitdump_write::Inline;

/// One PC descriptor: its code offset and the inline chain, innermost first (HotSpot's order).
#[derive(Debug, Clone)]
pub struct PcStack<M> {
    pub pc_offset: u32,
    pub frames: Vec<(M, i32)>,
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

/// The tables for DEBUG_INFO (`line_entries`, code offsets) and DEBUG_INFO2 (the rest).
#[derive(Default)]
pub struct DebugTables {
    pub line_entries: Vec<(u32, i32, String)>,
    pub files: Vec<String>,
    pub names: Vec<String>,
    /// `(name index, file index, first line)`; index 0 is the compiled method itself.
    pub functions: Vec<(u32, u32, u32)>,
    pub inlines: Vec<Inline>,
    /// `(code offset, file index, line)`.
    pub lines: Vec<(u32, u32, u32)>,
}

struct Interner {
    strings: Vec<String>,
    index: HashMap<String, u32>,
}

impl Interner {
    fn new() -> Self {
        Self {
            strings: Vec::new(),
            index: HashMap::new(),
        }
    }

    fn get(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.strings.len() as u32;
        self.strings.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// The function table being built: one entry per distinct method, asked about once.
struct Functions<M, F> {
    methods: HashMap<M, (u32, MethodInfo)>,
    files: Interner,
    names: Interner,
    table: Vec<(u32, u32, u32)>,
    info: F,
}

impl<M: Copy + Eq + Hash, F: FnMut(M) -> Option<MethodInfo>> Functions<M, F> {
    /// The function index of `m` and what is known about it.
    fn get(&mut self, m: M) -> (u32, &MethodInfo) {
        let Self {
            methods,
            files,
            names,
            table,
            info,
        } = self;
        let (index, method) = methods.entry(m).or_insert_with(|| {
            let i = info(m).unwrap_or_else(|| MethodInfo {
                name: "[unknown Java method]".to_string(),
                ..MethodInfo::default()
            });
            let name = names.get(&i.name);
            let file = i.file.as_deref().map_or(NO_FILE, |f| files.get(f));
            table.push((name, file, i.first_line()));
            (table.len() as u32 - 1, i)
        });
        (*index, method)
    }
}

/// Builds the tables for the method `outer` whose code is `code_size` bytes long. `info` is
/// asked once per distinct method; `None` (an unreadable method) gives an unnamed function.
pub fn build<M: Copy + Eq + Hash>(
    outer: M,
    code_size: u32,
    pcs: &[PcStack<M>],
    info: impl FnMut(M) -> Option<MethodInfo>,
) -> DebugTables {
    let mut functions = Functions {
        methods: HashMap::new(),
        files: Interner::new(),
        names: Interner::new(),
        table: Vec::new(),
        info,
    };
    functions.get(outer);

    let mut sorted: Vec<&PcStack<M>> = pcs
        .iter()
        .filter(|p| !p.frames.is_empty() && p.pc_offset <= code_size)
        .collect();
    sorted.sort_by_key(|p| p.pc_offset);
    sorted.dedup_by_key(|p| p.pc_offset);

    let mut tables = DebugTables::default();
    // The inline calls open over the previous region: (caller bci, callee, index in `inlines`).
    let mut open: Vec<((i32, M), usize)> = Vec::new();
    let mut start = 0u32;
    for pc in sorted {
        let end = pc.pc_offset;
        if end == start {
            continue;
        }
        // Outermost first; element 0 is the compiled method itself.
        let chain: Vec<(M, i32)> = pc.frames.iter().rev().copied().collect();
        let path: Vec<(i32, M)> = chain.windows(2).map(|w| (w[0].1, w[1].0)).collect();
        let shared = open
            .iter()
            .zip(&path)
            .take_while(|(o, p)| o.0 == **p)
            .count();
        open.truncate(shared);
        for &(_, i) in &open {
            let call = &mut tables.inlines[i];
            call.range.1 = end - call.range.0;
        }
        for (depth, &(bci, callee)) in path.iter().enumerate().skip(shared) {
            let call_line = functions.get(chain[depth].0).1.line_at(bci);
            let function = functions.get(callee).0;
            tables.inlines.push(Inline {
                depth: depth as u32,
                function,
                call_line,
                range: (start, end - start),
            });
            open.push(((bci, callee), tables.inlines.len() - 1));
        }
        let (leaf, leaf_bci) = pc.frames[0];
        let (index, leaf_info) = functions.get(leaf);
        let line = leaf_info.line_at(leaf_bci);
        let file_name = leaf_info.file.clone().unwrap_or_default();
        let file = functions.table[index as usize].1;
        if tables
            .lines
            .last()
            .is_none_or(|l| (l.1, l.2) != (file, line))
        {
            tables.lines.push((start, file, line));
        }
        if tables
            .line_entries
            .last()
            .is_none_or(|e| (e.1, &e.2) != (line as i32, &file_name))
        {
            tables.line_entries.push((start, line as i32, file_name));
        }
        start = end;
    }
    tables.files = functions.files.strings;
    tables.names = functions.names.strings;
    tables.functions = functions.table;
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

    fn info(m: u32) -> Option<MethodInfo> {
        match m {
            1 => Some(method("multiply", &[(0, 10), (5, 11), (20, 12)])),
            2 => Some(method("dot", &[(0, 30), (4, 31)])),
            3 => Some(method("mul", &[(0, 40)])),
            _ => None,
        }
    }

    fn pc(offset: u32, frames: &[(u32, i32)]) -> PcStack<u32> {
        PcStack {
            pc_offset: offset,
            frames: frames.to_vec(),
        }
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
        let pcs = [
            pc(0x10, &[(1, 0)]),
            pc(0x20, &[(2, 0), (1, 6)]),
            pc(0x30, &[(3, 0), (2, 4), (1, 6)]),
            pc(0x38, &[(2, 5), (1, 6)]),
            pc(0x50, &[(1, 21)]),
            pc(0x60, &[(2, 0), (1, 22)]),
        ];
        let t = build(1u32, 0x100, &pcs, info);
        let names: Vec<&str> = t
            .functions
            .iter()
            .map(|f| t.names[f.0 as usize].as_str())
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
        assert_eq!(t.line_entries[1], (0x10, 30, "demo/dot.java".to_string()));
    }

    #[test]
    fn same_callee_from_two_call_sites_is_two_calls() {
        let pcs = [pc(0x10, &[(2, 0), (1, 6)]), pc(0x20, &[(2, 0), (1, 21)])];
        let t = build(1u32, 0x100, &pcs, info);
        assert_eq!(t.inlines.len(), 2);
        assert_eq!(t.inlines[0].range, (0, 0x10));
        assert_eq!(t.inlines[1].range, (0x10, 0x10));
        assert_eq!(t.functions.len(), 2);
    }

    #[test]
    fn odd_input_is_tolerated() {
        // Unsorted, duplicated, past the end, empty chains, unknown methods.
        let pcs = [
            pc(0x30, &[(9, 3), (1, 0)]),
            pc(0x10, &[(1, 0)]),
            pc(0x10, &[(1, 5)]),
            pc(0x500, &[(1, 0)]),
            pc(0x20, &[]),
        ];
        let t = build(1u32, 0x100, &pcs, info);
        assert_eq!(t.inlines.len(), 1);
        assert_eq!(t.inlines[0].range, (0x10, 0x20));
        assert_eq!(t.names[t.functions[1].0 as usize], "[unknown Java method]");
        assert_eq!(t.functions[1].1, NO_FILE);
    }
}
