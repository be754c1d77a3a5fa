//! Which of the jitdump records `jprof record` set aside (line tables, inline trees, VM method
//! names: `record::jit_debug`) a recording keeps: those of the code bodies and VM methods some
//! sample hit, any sample (CPU or off-CPU, every frame of its stack), so a report of the
//! recording names and places every frame as it would with all of them.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

use super::jit_index::{
    debug_bias, placed_lines, CodeOrigin, JitCode, JitDebug as BodyDebug, JitIndex,
};
use crate::format::jitdump::{self, DebugEntry, DebugInfo2, RecordBody, RecordId};
use crate::format::jitdump_write;
use crate::format::recording::{encode_jit_debug, encode_jit_debug_groups, JitDebug};
use crate::format::Endian;
use crate::recording::DeferredDebug;

/// The ordinal of deferred records no stored CODE_LOAD followed (the file ended, or the runtime
/// had not written the load yet): they go after the last one, and are always kept.
pub const AFTER_LAST_LOAD: u64 = u64::MAX;

/// The code bodies and VM methods the samples hit.
#[derive(Debug, Default)]
pub struct JitHits {
    /// Per body (asked once per JIT frame of every sample: one map, hashed once).
    code: FxHashMap<(u32, CodeOrigin), BodyHits>,
    methods: FxHashSet<(u32, u64)>,
}

/// What the samples hit of one body.
#[derive(Debug, Default)]
struct BodyHits {
    /// The offsets in it that frames were looked up at.
    offsets: BTreeSet<u32>,
    /// Where it was when hit (start, size): a body moved since its load has several.
    placed: BTreeSet<(u64, u64)>,
}

impl JitHits {
    /// A frame of process `pid` is in `code`, looked up at `probe` (as the report looks it up:
    /// `JitIndex::code_frames`).
    pub fn code(&mut self, pid: u32, code: &JitCode, probe: u64) {
        if let Some(origin) = &code.origin {
            let offset = probe.wrapping_sub(code.start) as u32;
            let hits = self.code.entry((pid, origin.clone())).or_default();
            hits.placed.insert((code.start, code.size));
            hits.offsets.insert(offset);
        }
    }

    /// Whether a frame of process `pid` was found in code of load `origin`.
    pub fn hit(&self, pid: u32, origin: &CodeOrigin) -> bool {
        self.code.contains_key(&(pid, origin.clone()))
    }

    /// An interpreted frame of process `pid` runs VM method `method`.
    pub fn method(&mut self, pid: u32, method: u64) {
        self.methods.insert((pid, method));
    }
}

/// Of `deferred`, the VM method names (METHOD_NAMES records), the only deferred records the
/// embedding's walk reads: an interpreted frame is named by them, which decides whether its
/// stack is whole. Line tables and inline trees name and place frames only in reports; merged
/// into the walk's JIT index and parsed there they took a third of its time (V8's 4.5 MB of
/// DEBUG_INFO in tsc's recording).
#[cfg(test)]
pub fn method_names_only(deferred: &DeferredDebug) -> DeferredDebug {
    let mut out = DeferredDebug::new();
    for (file, groups) in deferred {
        for (&ordinal, records) in groups {
            let names = method_names_of(records);
            if !names.is_empty() {
                out.entry(file.clone()).or_default().insert(ordinal, names);
            }
        }
    }
    out
}

/// [`method_names_into`] a new vector.
#[cfg(test)]
pub fn method_names_of(records: &[u8]) -> Vec<u8> {
    let mut names = Vec::new();
    method_names_into(records, &mut names);
    names
}

/// Appends to `out` the METHOD_NAMES records of a group of deferred records, and the bytes
/// after its last whole record (records that do not read are passed on as they are).
pub fn method_names_into(records: &[u8], out: &mut Vec<u8>) {
    let (records_read, tail) = jitdump::split_records(records, Endian::Little);
    for (_, record) in records_read
        .into_iter()
        .filter(|(id, _)| *id == RecordId::JPROF_METHOD_NAMES)
    {
        out.extend_from_slice(record);
    }
    out.extend_from_slice(tail);
}

/// By jitdump (process, path).
pub type ByJitdump<T> = BTreeMap<(u32, String), T>;

/// The JIT_DEBUG chunk payloads keeping what `hits` hit of `deferred` (everything without
/// `hits`), one per jitdump that keeps something; and, by jitdump, its payload once the
/// CODE_LOADs `leave_out` names are left out (`groups_without_loads`), for the finished
/// recording: packed here, beside the end's DWARF, rather than unpacked and packed again
/// (13 ms of javac's at level 9) on the way to the exit. `rewritten`: the finished recording
/// is written again, so a jitdump's payload numbered for every load is read only if that
/// fails, and is packed at zstd's fastest level (2 ms of javac's, not 13).
pub fn jit_debug_chunks(
    deferred: &DeferredDebug,
    hits: Option<&JitHits>,
    leave_out: &ByJitdump<BTreeSet<u64>>,
    rewritten: bool,
) -> (Vec<Vec<u8>>, ByJitdump<Vec<u8>>) {
    let mut out = Vec::new();
    let mut without_loads = BTreeMap::new();
    let mut packer = packer();
    let mut pack = |groups: &[(u64, Vec<u8>)], pid: u32, path: &str, fast: bool| {
        let groups = encode_jit_debug_groups(groups.iter().map(|(o, g)| (*o, &g[..])));
        let frame = match packer.as_mut().filter(|_| !fast) {
            Some(p) => p.compress(&groups),
            None => zstd::bulk::compress(&groups, if fast { 1 } else { JIT_DEBUG_ZSTD_LEVEL }),
        };
        frame.ok().map(|data| {
            encode_jit_debug(&JitDebug {
                pid,
                path,
                data: &data,
            })
        })
    };
    for ((pid, path), groups) in deferred {
        let origin = |ordinal| CodeOrigin {
            path: path.as_str().into(),
            ordinal,
        };
        let mut kept: Vec<(u64, Vec<u8>)> = Vec::new();
        // One method name is always kept, so the report still sees that the runtime names
        // its methods (it then reads interpreted frames' methods) when no sample hit one.
        let mut named_one = false;
        for (&ordinal, records) in groups {
            let Some(hits) = hits else {
                kept.push((ordinal, records.clone()));
                continue;
            };
            let body = hits.code.get(&(*pid, origin(ordinal)));
            let offsets = body.map(|b| &b.offsets);
            let placed = body.map(|b| &b.placed);
            let code_hit = ordinal == AFTER_LAST_LOAD || offsets.is_some();
            let mut group = Vec::new();
            // Deferred records are the file's; jitdumps are little-endian on the machines jprof
            // records on. Records that do not read so are kept whole.
            let (records_read, tail) = jitdump::split_records(records, Endian::Little);
            // A body with an inline tree (DEBUG_INFO2) is named and placed from it alone: its
            // plain line table (DEBUG_INFO) is never read (`JitIndex::code_frames`).
            let has_tree = records_read
                .iter()
                .any(|(id, _)| *id == RecordId::SAMPLY_DEBUG_INFO2);
            for (id, record) in records_read {
                if id == RecordId::JPROF_METHOD_NAMES {
                    group.extend(names_hit(record, *pid, hits, &mut named_one));
                } else if id == RecordId::CODE_DEBUG_INFO && has_tree {
                    continue;
                } else if let (RecordId::SAMPLY_DEBUG_INFO2, Some(offsets)) = (id, offsets) {
                    group.extend(tree_for(record, offsets));
                } else if let (RecordId::CODE_DEBUG_INFO, Some(offsets), Some(placed)) =
                    (id, offsets, placed)
                {
                    group.extend(lines_for(record, offsets, placed));
                } else if code_hit || !jitdump::is_deferrable(id) {
                    group.extend_from_slice(record);
                }
            }
            group.extend_from_slice(tail);
            if !group.is_empty() {
                kept.push((ordinal, group));
            }
        }
        if kept.is_empty() {
            continue;
        }
        let left_out = leave_out.get(&(*pid, path.clone()));
        let Some(payload) = pack(&kept, *pid, path, rewritten && left_out.is_some()) else {
            continue;
        };
        out.push(payload);
        if let Some(left_out) = left_out {
            let left_out: Vec<u64> = left_out.iter().copied().collect();
            let read: Vec<(u64, &[u8])> = kept.iter().map(|(o, g)| (*o, &g[..])).collect();
            let renumbered = groups_without_loads(&read, &left_out);
            if let Some(payload) = pack(&renumbered, *pid, path, false) {
                without_loads.insert((*pid, path.clone()), payload);
            }
        }
    }
    (out, without_loads)
}

/// A jitdump's JIT_DEBUG groups (`ordinal`, records) once the CODE_LOADs `left_out` names
/// (sorted) are left out of its pieces (`jitdump::without_loads`): a group goes before the
/// same load as before, its ordinal less the loads left out before it. A group of a load left
/// out keeps only its VM method names (the only records not read by that load alone), and
/// goes before the next load kept, after that load's earlier groups.
pub fn groups_without_loads(groups: &[(u64, &[u8])], left_out: &[u64]) -> Vec<(u64, Vec<u8>)> {
    let mut out: std::collections::BTreeMap<u64, Vec<u8>> = Default::default();
    for &(ordinal, records) in groups {
        let before = left_out.partition_point(|&o| o < ordinal) as u64;
        let new = match ordinal {
            AFTER_LAST_LOAD => AFTER_LAST_LOAD,
            o => o - before,
        };
        let group = out.entry(new).or_default();
        if left_out.binary_search(&ordinal).is_ok() {
            method_names_into(records, group);
        } else {
            group.extend_from_slice(records);
        }
    }
    out.into_iter().filter(|(_, g)| !g.is_empty()).collect()
}

/// zstd level of the JIT_DEBUG chunks.
pub(crate) const JIT_DEBUG_ZSTD_LEVEL: i32 = 9;

/// The compressor of the JIT_DEBUG chunks: level 9 with its match tables kept small. For an
/// input of megabytes level 9 sizes them for megabytes too (11 MB, allocated at the end of
/// `record` while every binary named is still loaded); tables of 2^18 and 2^17 entries (1.5 MB)
/// pack a JVM's jitdump records 0.1% larger.
pub(crate) fn packer() -> Option<zstd::bulk::Compressor<'static>> {
    use zstd::zstd_safe::CParameter;
    let mut packer = zstd::bulk::Compressor::new(JIT_DEBUG_ZSTD_LEVEL).ok()?;
    packer.set_parameter(CParameter::HashLog(18)).ok()?;
    packer.set_parameter(CParameter::ChainLog(17)).ok()?;
    Some(packer)
}

/// A DEBUG_INFO2 record (inline tree and line table) cut down to the rows the report reads at
/// `offsets` of its body: the inline calls that cover one of them (with their callers), only
/// their ranges that hold one, the functions those calls and the outer function name, and the
/// line rows `code_frames` stops at. Kept whole when it does not parse, or when the cut-down
/// tree would give any of those offsets other frames (never, by the rules above: checked all the
/// same, since a report must read the same).
fn tree_for(record: &[u8], offsets: &BTreeSet<u32>) -> Vec<u8> {
    let batch = jitdump::parse_record_stream(record, 0, Endian::Little);
    let [r] = &batch.records[..] else {
        return record.to_vec();
    };
    let RecordBody::DebugInfo2(info) = &r.body else {
        return record.to_vec();
    };
    let cut = trimmed(info, offsets);
    let body = |info: &DebugInfo2| JitCode {
        name: String::new(),
        start: 0,
        size: u64::from(u32::MAX),
        from: 0,
        until: None,
        tier: None,
        debug: Some(Arc::new(BodyDebug {
            info2: Some(info.clone()),
            ..Default::default()
        })),
        source: Arc::from(""),
        from_jitdump: true,
        unwind: None,
        origin: None,
    };
    let (whole, small) = (body(info), body(&cut));
    let same = offsets.iter().all(|&o| {
        JitIndex::code_frames(&whole, u64::from(o)) == JitIndex::code_frames(&small, u64::from(o))
    });
    if !same {
        return record.to_vec();
    }
    jitdump_write::debug_info2_of(r.timestamp, &cut)
}

/// A DEBUG_INFO record (a body's line table, as V8 writes it) cut down to the entries
/// `JitIndex::code_frames` stops at for `offsets` of the body: for each, the last entry at or
/// before it and the first after. Kept whole when it does not parse, when the body was hit at
/// more than one place (moved) or elsewhere than the record says, when a file name is not one
/// the record can hold again, when the cut entries would be placed otherwise (V8's shift,
/// `debug_bias`) or would give any of the offsets other frames.
fn lines_for(record: &[u8], offsets: &BTreeSet<u32>, placed: &BTreeSet<(u64, u64)>) -> Vec<u8> {
    let whole = || record.to_vec();
    let [(start, size)] = placed.iter().copied().collect::<Vec<_>>()[..] else {
        return whole();
    };
    let batch = jitdump::parse_record_stream(record, 0, Endian::Little);
    let [r] = &batch.records[..] else {
        return whole();
    };
    let RecordBody::DebugInfo { code_addr, entries } = &r.body else {
        return whole();
    };
    if *code_addr != start
        || entries
            .iter()
            .any(|e| e.file.is_empty() || e.file.contains('\0'))
    {
        return whole();
    }
    // The entries in the order lookups read them (the shift taken off, sorted by address).
    let bias = debug_bias(entries, start, size);
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| entries[i].addr.wrapping_sub(bias));
    let at = |k: usize| entries[order[k]].addr.wrapping_sub(bias);
    let mut kept = BTreeSet::new();
    for &o in offsets {
        let probe = start.wrapping_add(u64::from(o));
        let stop = (0..order.len())
            .position(|k| at(k) > probe)
            .unwrap_or(order.len());
        kept.extend(stop.checked_sub(1));
        if stop < order.len() {
            kept.insert(stop);
        }
    }
    let small: Vec<DebugEntry> = kept.iter().map(|&k| entries[order[k]].clone()).collect();
    if debug_bias(&small, start, size) != bias {
        return whole();
    }
    let (all, cut) = (
        body_with_lines(start, size, entries),
        body_with_lines(start, size, &small),
    );
    let same = offsets.iter().all(|&o| {
        let probe = start.wrapping_add(u64::from(o));
        JitIndex::code_frames(&all, probe) == JitIndex::code_frames(&cut, probe)
    });
    if !same {
        return whole();
    }
    jitdump_write::debug_info_of(r.timestamp, *code_addr, &small)
}

/// `info` with only what `JitIndex::code_frames` reads at `offsets` (see [`tree_for`]).
/// A nameless jitdump body at `start..start + size` with only the line table `lines`, to ask
/// which frames an address gets from it.
fn body_with_lines(start: u64, size: u64, lines: &[DebugEntry]) -> JitCode {
    JitCode {
        name: String::new(),
        start,
        size,
        from: 0,
        until: None,
        tier: None,
        debug: Some(Arc::new(BodyDebug {
            lines: placed_lines(lines.to_vec(), start, size),
            ..Default::default()
        })),
        source: Arc::from(""),
        from_jitdump: true,
        unwind: None,
        origin: None,
    }
}

fn trimmed(info: &DebugInfo2, offsets: &BTreeSet<u32>) -> DebugInfo2 {
    let holds = |&(start, len): &(u32, u32), o: u32| o >= start && o - start < len;
    // code_frames's walk: a call covers an offset when its ranges and all its callers' do.
    // Calls kept are closed under their callers, and a call left out takes its callees along,
    // so each kept call's caller is still the nearest earlier kept call one level up.
    let mut kept_calls = vec![false; info.inline_calls.len()];
    for &o in offsets {
        let mut path: Vec<bool> = Vec::new();
        for (i, call) in info.inline_calls.iter().enumerate() {
            let depth = call.depth as usize;
            if depth > path.len() {
                continue;
            }
            path.truncate(depth);
            let covers = path.last().is_none_or(|&c| c) && call.ranges.iter().any(|r| holds(r, o));
            path.push(covers);
            kept_calls[i] |= covers;
        }
    }
    // The outer function (callers' names and files at depth 0) and the called ones, renumbered.
    let mut index = vec![None; info.functions.len()];
    let mut functions = Vec::new();
    let called = info
        .inline_calls
        .iter()
        .zip(&kept_calls)
        .filter(|(_, &k)| k)
        .map(|(c, _)| c.function as usize);
    for f in std::iter::once(0).chain(called) {
        if let Some(slot @ None) = index.get_mut(f) {
            *slot = Some(functions.len() as u32);
            functions.push(f);
        }
    }
    let inline_calls = info
        .inline_calls
        .iter()
        .zip(&kept_calls)
        .filter(|(_, &k)| k)
        .map(|(c, _)| jitdump::InlineCall2 {
            function: index[c.function as usize].unwrap_or(c.function),
            ranges: c
                .ranges
                .iter()
                .filter(|r| offsets.iter().any(|&o| holds(r, o)))
                .copied()
                .collect(),
            ..c.clone()
        })
        .collect();
    // code_frames takes the last row before the first one past the offset: both are kept, so
    // the rows left out between kept ones change no lookup, sorted or not.
    let mut kept_lines = BTreeSet::new();
    for &o in offsets {
        let stop = info
            .lines
            .iter()
            .position(|l| l.code_offset > o)
            .unwrap_or(info.lines.len());
        kept_lines.extend(stop.checked_sub(1));
        if stop < info.lines.len() {
            kept_lines.insert(stop);
        }
    }
    DebugInfo2 {
        functions: functions
            .into_iter()
            .map(|f| info.functions[f].clone())
            .collect(),
        inline_calls,
        lines: kept_lines
            .into_iter()
            .map(|i| info.lines[i].clone())
            .collect(),
    }
}

/// A METHOD_NAMES record cut down to the methods hit (and the first name of the file when
/// `named_one` is not yet set); empty when nothing is left. A record that does not parse is
/// kept as it is.
fn names_hit(record: &[u8], pid: u32, hits: &JitHits, named_one: &mut bool) -> Vec<u8> {
    let batch = jitdump::parse_record_stream(record, 0, Endian::Little);
    let [r] = &batch.records[..] else {
        return record.to_vec();
    };
    let RecordBody::MethodNames(list) = &r.body else {
        return record.to_vec();
    };
    let kept: Vec<(u64, String)> = list
        .iter()
        .enumerate()
        .filter(|(i, (m, _))| (*i == 0 && !*named_one) || hits.methods.contains(&(pid, *m)))
        .map(|(_, e)| e.clone())
        .collect();
    if kept.is_empty() {
        return Vec::new();
    }
    *named_one = true;
    jitdump_write::method_names(r.timestamp, &kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::jitdump::{Function2, InlineCall2, LineRecord2};

    /// A load left out takes its group's records along but its VM method names, which go
    /// before the next load kept; later groups' ordinals drop by the loads left out before
    /// them.
    #[test]
    fn groups_follow_the_loads_kept() {
        let lines = |a: u64| jitdump_write::debug_info(1, a, &[(a, 7, "A.java")]);
        let names = |m: u64| jitdump_write::method_names(2, &[(m, format!("Lp/A;m{m}"))]);
        let groups: Vec<(u64, Vec<u8>)> = vec![
            (0, [names(1), lines(0x1000)].concat()),
            (1, lines(0x2000)),
            (2, names(2)),
            (3, [lines(0x3000), names(3)].concat()),
            (5, lines(0x5000)),
            (AFTER_LAST_LOAD, names(9)),
        ];
        let read: Vec<(u64, &[u8])> = groups.iter().map(|(o, g)| (*o, &g[..])).collect();
        let out = groups_without_loads(&read, &[0, 2, 4]);
        let expected: Vec<(u64, Vec<u8>)> = vec![
            (0, [names(1), lines(0x2000)].concat()),
            (1, [names(2), lines(0x3000), names(3)].concat()),
            (2, lines(0x5000)),
            (AFTER_LAST_LOAD, names(9)),
        ];
        assert_eq!(out, expected);
        // Nothing left out: the same groups.
        assert_eq!(groups_without_loads(&read, &[]), groups);
    }

    fn call(depth: u32, function: u32, ranges: &[(u32, u32)]) -> InlineCall2 {
        InlineCall2 {
            depth,
            function,
            call_line: 100 + function,
            call_column: 0,
            ranges: ranges.to_vec(),
        }
    }

    /// A V8 line table (addresses shifted by 0x40, unsorted) keeps the entries read at the
    /// offsets hit, which get the same frames; a moved body's table stays whole.
    #[test]
    fn a_line_table_keeps_the_entries_read_at_the_sampled_offsets() {
        let (start, size) = (0x7000_0000u64, 0x100u64);
        let mut raw: Vec<DebugEntry> = (0..16u64)
            .map(|i| DebugEntry {
                addr: start + 0x40 + i * 0x10,
                line: 10 + i as i32,
                discrim: i as i32,
                file: format!("node:f{}", i % 3),
            })
            .collect();
        raw.swap(3, 9);
        let record = jitdump_write::debug_info_of(7, start, &raw);
        let offsets: BTreeSet<u32> = [0x25, 0x80, 0xf8].into();
        let placed: BTreeSet<(u64, u64)> = [(start, size)].into();
        let cut = lines_for(&record, &offsets, &placed);
        assert!(
            cut.len() < record.len() / 2,
            "{} of {}",
            cut.len(),
            record.len()
        );
        let batch = jitdump::parse_record_stream(&cut, 0, Endian::Little);
        let RecordBody::DebugInfo { code_addr, entries } = &batch.records[0].body else {
            panic!("not a DEBUG_INFO: {batch:?}");
        };
        assert_eq!(*code_addr, start);
        let lines: Vec<i32> = entries.iter().map(|e| e.line).collect();
        // 0x25 reads 0x20 (line 12) and stops at 0x30; 0x80 reads 0x80 and stops at 0x90;
        // 0xf8 reads 0xf0, the last.
        assert_eq!(lines, [12, 13, 18, 19, 25]);
        assert!(
            entries.iter().all(|e| e.discrim == e.line - 10),
            "{entries:?}"
        );
        let body = |entries: &[DebugEntry]| body_with_lines(start, size, entries);
        for &o in &offsets {
            let probe = start + u64::from(o);
            let frames = JitIndex::code_frames(&body(entries), probe);
            assert_eq!(frames, JitIndex::code_frames(&body(&raw), probe));
            assert!(frames[0].line.is_some(), "{frames:?}");
        }
        // Hit at two places (moved), or elsewhere than the record says: kept whole.
        let moved: BTreeSet<(u64, u64)> = [(start, size), (start + 0x1000, size)].into();
        assert_eq!(lines_for(&record, &offsets, &moved), record);
        let elsewhere: BTreeSet<(u64, u64)> = [(start + 0x1000, size)].into();
        assert_eq!(lines_for(&record, &offsets, &elsewhere), record);
    }

    /// The walk's JIT index gets the method names only: groups without any are left out.
    #[test]
    fn the_walk_gets_only_the_method_names() {
        let lines =
            jitdump_write::debug_info(1, 0x1000, &[(0x1000, 7, "a.js"), (0x1010, 8, "a.js")]);
        let names = jitdump_write::method_names(2, &[(0x77, "A.run".to_string())]);
        let tree = jitdump_write::debug_info2_of(3, &DebugInfo2::default());
        let file = (42, "/tmp/jit-42.dump".to_string());
        let mut deferred = DeferredDebug::new();
        let groups = deferred.entry(file.clone()).or_default();
        groups.insert(0, [lines.clone(), names.clone(), tree.clone()].concat());
        groups.insert(1, [lines.clone(), tree].concat());
        groups.insert(
            AFTER_LAST_LOAD,
            [names.clone(), lines[..9].to_vec()].concat(),
        );
        let only = method_names_only(&deferred);
        let groups = &only[&file];
        assert_eq!(
            groups.keys().copied().collect::<Vec<_>>(),
            [0, AFTER_LAST_LOAD]
        );
        assert_eq!(groups[&0], names);
        // A record cut short is passed on as it came.
        assert_eq!(
            groups[&AFTER_LAST_LOAD],
            [names, lines[..9].to_vec()].concat()
        );
    }

    /// Only the rows read at the sampled offsets stay, and those offsets get the same frames.
    #[test]
    fn a_tree_keeps_the_rows_read_at_the_sampled_offsets() {
        let functions = (0..5)
            .map(|i| Function2 {
                name: format!("f{i}"),
                file: Some(format!("F{i}.java")),
                start_line: i,
                start_column: 0,
                flags: 0,
            })
            .collect();
        // f1 covers 0..40 (f2 inside it at 10..20, f3 at 30..40), f4 covers 50..60.
        let info = DebugInfo2 {
            functions,
            inline_calls: vec![
                call(0, 1, &[(0, 40), (70, 5)]),
                call(1, 2, &[(10, 10)]),
                call(1, 3, &[(30, 10)]),
                call(0, 4, &[(50, 10)]),
            ],
            lines: (0..10)
                .map(|i| LineRecord2 {
                    code_offset: i * 8,
                    file: None,
                    line: i,
                    column: 0,
                })
                .collect(),
        };
        let offsets: BTreeSet<u32> = [12, 33].into();
        let cut = trimmed(&info, &offsets);
        let names: Vec<&str> = cut.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["f0", "f1", "f2", "f3"]);
        assert_eq!(
            cut.inline_calls,
            [
                call(0, 1, &[(0, 40)]),
                call(1, 2, &[(10, 10)]),
                call(1, 3, &[(30, 10)])
            ]
        );
        let rows: Vec<u32> = cut.lines.iter().map(|l| l.code_offset).collect();
        assert_eq!(rows, [8, 16, 32, 40]);
        let record = jitdump_write::debug_info2_of(5, &info);
        let small = tree_for(&record, &offsets);
        assert!(small.len() < record.len());
        let read = |bytes: &[u8]| match &jitdump::parse_record_stream(bytes, 0, Endian::Little)
            .records[0]
            .body
        {
            RecordBody::DebugInfo2(info) => info.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(read(&small), cut);
        // An offset no call covers keeps only its line rows.
        let cut = trimmed(&info, &[45].into());
        assert_eq!((cut.functions.len(), cut.inline_calls.len()), (1, 0));
        assert_eq!(cut.lines.len(), 2);
    }
}
