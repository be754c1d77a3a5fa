//! Which of the jitdump records `jprof record` set aside (line tables, inline trees, VM method
//! names: `record::jit_debug`) a recording keeps: those of the code bodies and VM methods some
//! sample hit, any sample (CPU or off-CPU, every frame of its stack), so a report of the
//! recording names and places every frame as it would with all of them.

use std::collections::HashSet;

use super::jit_index::{CodeOrigin, JitCode};
use crate::format::jitdump::{self, RecordBody, RecordId};
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
    code: HashSet<(u32, CodeOrigin)>,
    methods: HashSet<(u32, u64)>,
}

impl JitHits {
    /// A frame of process `pid` is in `code`.
    pub fn code(&mut self, pid: u32, code: &JitCode) {
        if let Some(origin) = &code.origin {
            if !self.code.contains(&(pid, origin.clone())) {
                self.code.insert((pid, origin.clone()));
            }
        }
    }

    /// An interpreted frame of process `pid` runs VM method `method`.
    pub fn method(&mut self, pid: u32, method: u64) {
        self.methods.insert((pid, method));
    }
}

/// The JIT_DEBUG chunk payloads keeping what `hits` hit of `deferred` (everything without
/// `hits`), one per jitdump that keeps something.
pub fn jit_debug_chunks(deferred: &DeferredDebug, hits: Option<&JitHits>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
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
            let code_hit =
                ordinal == AFTER_LAST_LOAD || hits.code.contains(&(*pid, origin(ordinal)));
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
        let groups = encode_jit_debug_groups(kept.iter().map(|(o, g)| (*o, &g[..])));
        let Ok(frame) = zstd::bulk::compress(&groups, 9) else {
            continue;
        };
        out.push(encode_jit_debug(&JitDebug {
            pid: *pid,
            path,
            data: &frame,
        }));
    }
    out
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
