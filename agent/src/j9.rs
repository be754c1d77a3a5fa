//! OpenJ9: the JPROF_J9_METADATA record from CompiledMethodLoad's `compile_info`, which OpenJ9
//! sets to the body's `J9JITExceptionTable*` (formats.md §6.6). Safe Rust over bytes `ffi`
//! copied out of the VM: which struct layout this JVM build uses, how many bytes to copy, the
//! J9Methods the metadata names (found with jprof's own decoder) and their names.
//!
//! The layout is not announced by the VM, so it is inferred: the eyecatcher fields are present
//! when `startPC` (known from the event) sits at offset 40 rather than 16, and the struct size
//! is the candidate after which the exception table ends where the first variable section
//! (inlinedCalls, else gcStackAtlas) begins.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jprof_format::j9;
use jprof_format::jitdump::J9_FLAG_EYECATCHERS;
use jprof_format::jitdump_write;

/// Bytes every build's struct has (the oldest layout without eyecatchers): safe to read first.
pub const MIN_STRUCT: usize = 192;
/// The most copied for one body; larger `size` values are not believed.
pub const MAX_IMAGE: usize = 1 << 20;

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_le_bytes(a))
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at + 2)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

/// Whether the struct starts with the eyecatchers, from where `startPC` is; `None` when
/// neither place holds `code_addr` (not a J9JITExceptionTable).
pub fn eyecatchers(head: &[u8], code_addr: u64) -> Option<bool> {
    if u64_at(head, 40) == Some(code_addr) {
        Some(true)
    } else if u64_at(head, 16) == Some(code_addr) {
        Some(false)
    } else {
        None
    }
}

/// Bytes to copy: the struct's `size` field (the metadata's allocation, struct included),
/// when it is plausible; else just the smallest struct.
pub fn image_len(head: &[u8], eyecatchers: bool) -> usize {
    let at = 68 + if eyecatchers { 24 } else { 0 };
    let size = head
        .get(at..at + 4)
        .map_or(0, |b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    match usize::try_from(size) {
        Ok(size) if (MIN_STRUCT..=MAX_IMAGE).contains(&size) => size,
        _ => MIN_STRUCT,
    }
}

/// `sizeof(J9JITExceptionTable)`: the candidate for this eyecatcher setting whose exception
/// table ends (8-aligned) at the first variable section; the newest layout if none fits.
pub fn struct_size(image: &[u8], metadata_addr: u64, eyecatchers: bool) -> u32 {
    let extra = if eyecatchers { 24 } else { 0 };
    let candidates = [232 - 24 + extra, 224 - 24 + extra, 216 - 24 + extra];
    let ranges = u16_at(image, 66 + extra as usize).unwrap_or(0);
    let each = if ranges & j9::WIDE_EXCEPTIONS != 0 {
        24
    } else {
        8
    } + if ranges & j9::HAS_BYTECODE_PC != 0 {
        4
    } else {
        0
    };
    let exceptions = (ranges & 0x3FFF) as u64 * each;
    let first_section = [96usize, 88]
        .iter()
        .filter_map(|&plain| u64_at(image, plain + extra as usize))
        .find(|&p| p != 0)
        .and_then(|p| p.checked_sub(metadata_addr));
    let Some(first) = first_section else {
        return candidates[0];
    };
    candidates
        .into_iter()
        .find(|&size| {
            let end = size as u64 + exceptions;
            first >= end && first - end < 8
        })
        .unwrap_or(candidates[0])
}

/// The JPROF_J9_METADATA record for the body at `code_addr` whose metadata (`image`) was copied
/// from `metadata_addr`. `name_of` names a J9Method (`pkg/Class.method(Sig)Ret`); methods it
/// cannot name are left out. `None` when the image is not this body's metadata.
pub fn record(
    image: &[u8],
    metadata_addr: u64,
    code_addr: u64,
    mut name_of: impl FnMut(u64) -> Option<String>,
) -> Option<Vec<u8>> {
    let eyecatchers = eyecatchers(image, code_addr)?;
    let struct_size = struct_size(image, metadata_addr, eyecatchers);
    let flags = if eyecatchers { J9_FLAG_EYECATCHERS } else { 0 };
    let capture = j9::Capture {
        metadata_addr,
        struct_size,
        eyecatchers,
        align_stack_maps: false,
        base: 0,
    };
    let methods: Vec<(u64, String)> = match j9::decode(image, capture) {
        Ok(md) => md
            .methods()
            .into_iter()
            .filter_map(|m| name_of(m).map(|n| (m, n)))
            .collect(),
        Err(_) => Vec::new(),
    };
    Some(jitdump_write::j9_metadata(
        0,
        &jitdump_write::J9Metadata {
            code_addr,
            metadata_addr,
            struct_size,
            flags,
            image,
            methods: &methods,
        },
    ))
}

/// J9Method → name, for the methods inlined into compiled bodies. OpenJ9 gives no jmethodID
/// for them, so the loaded classes' methods are listed (their jmethodIDs lead to J9Methods)
/// when one is missing, at most once per `REFRESH` so a method that cannot be found does not
/// cost a class walk per compilation.
pub struct MethodNames<Id> {
    ids: HashMap<u64, Id>,
    names: HashMap<u64, String>,
    refreshed: Option<Instant>,
}

const REFRESH: Duration = Duration::from_millis(500);

impl<Id: Copy> Default for MethodNames<Id> {
    fn default() -> Self {
        Self {
            ids: HashMap::new(),
            names: HashMap::new(),
            refreshed: None,
        }
    }
}

impl<Id: Copy> MethodNames<Id> {
    /// Remembers a method the VM named directly (the compiled method of an event).
    pub fn insert(&mut self, j9method: u64, name: String) {
        self.names.insert(j9method, name);
    }

    /// The name of `j9method`: cached, or through its id (`list` gives every loaded method's
    /// J9Method and id; `name_of` names an id).
    pub fn name(
        &mut self,
        j9method: u64,
        list: impl FnOnce() -> Vec<(u64, Id)>,
        name_of: impl Fn(Id) -> Option<String>,
    ) -> Option<String> {
        if let Some(n) = self.names.get(&j9method) {
            return Some(n.clone());
        }
        if !self.ids.contains_key(&j9method)
            && self.refreshed.is_none_or(|t| t.elapsed() >= REFRESH)
        {
            self.ids.extend(list());
            self.refreshed = Some(Instant::now());
        }
        let name = name_of(*self.ids.get(&j9method)?)?;
        self.names.insert(j9method, name.clone());
        Some(name)
    }
}

/// The tests' metadata image writer (from the documented layouts).
#[cfg(test)]
#[path = "../../tests/suite/j9_support.rs"]
mod j9_support;

#[cfg(test)]
mod tests {
    use super::*;
    use jprof_format::jitdump::{self, RecordBody};

    use super::j9_support::*;

    /// `body` built as a live struct in this process's memory, pointers and all.
    fn in_memory(mut body: Body) -> (Body, Vec<u8>) {
        let len = body.build().len();
        let mut memory = vec![0u8; len];
        body.metadata_addr = memory.as_ptr() as u64;
        memory.copy_from_slice(&body.build());
        (body, memory)
    }

    fn name_of(m: u64) -> Option<String> {
        names()
            .into_iter()
            .find(|&(id, _)| id == m)
            .map(|(_, n)| n.to_string())
    }

    #[test]
    fn a_fake_metadata_struct_in_memory_becomes_a_record_that_decodes() {
        for (body, struct_size, chain_at, expected) in [
            (three_levels(), 232, 0x15, three_levels_expected(0x15)),
            (wide_body(), 192, 0x12345, wide_body_expected(0x12345)),
        ] {
            let (body, memory) = in_memory(body);
            let image = crate::ffi::copy_openj9_metadata(memory.as_ptr().cast(), body.start_pc)
                .expect("recognized as this body's metadata");
            assert_eq!(image, memory, "the whole table is copied (its size field)");
            let record = record(&image, body.metadata_addr, body.start_pc, name_of).unwrap();
            let batch = jitdump::parse_record_stream(&record, 0, Default::default());
            assert!(batch.error.is_none());
            let RecordBody::J9Metadata(md) = &batch.records[0].body else {
                panic!("{:?}", batch.records[0].body);
            };
            assert_eq!(md.struct_size, struct_size);
            assert_eq!(md.flags & J9_FLAG_EYECATCHERS != 0, body.eyecatchers);
            assert_eq!(
                (md.code_addr, md.metadata_addr),
                (body.start_pc, body.metadata_addr)
            );
            let decoded = md.decode().unwrap();
            assert!(decoded.problems.is_empty(), "{:?}", decoded.problems);
            let chain: Vec<(u64, i32)> = decoded
                .lookup(body.start_pc + chain_at, &md.names())
                .unwrap()
                .iter()
                .map(|f| (f.method, f.bytecode_index))
                .collect();
            assert_eq!(chain, expected);
            // Every method the chains can name, with its name.
            assert_eq!(md.methods.len(), decoded.methods().len());
        }
    }

    #[test]
    fn other_memory_is_not_taken_for_metadata() {
        let (body, memory) = in_memory(three_levels());
        assert!(
            crate::ffi::copy_openj9_metadata(memory.as_ptr().cast(), body.start_pc + 1).is_none()
        );
        assert!(crate::ffi::copy_openj9_metadata(std::ptr::null(), body.start_pc).is_none());
        // An implausible size field: only the smallest struct is copied.
        let mut bad = memory.clone();
        bad[92..96].copy_from_slice(&(-1i32).to_le_bytes());
        assert_eq!(image_len(&bad, true), MIN_STRUCT);
    }

    #[test]
    fn names_come_from_the_cache_then_from_one_listing() {
        let mut names: MethodNames<u32> = MethodNames::default();
        names.insert(1, "a/A.run()V".into());
        let listed = std::cell::Cell::new(0);
        let list = || {
            listed.set(listed.get() + 1);
            vec![(2u64, 20u32), (3, 30)]
        };
        let name_of = |id: u32| Some(format!("m{id}"));
        assert_eq!(names.name(1, list, name_of).as_deref(), Some("a/A.run()V"));
        assert_eq!(listed.get(), 0);
        assert_eq!(names.name(2, list, name_of).as_deref(), Some("m20"));
        assert_eq!(names.name(3, list, name_of).as_deref(), Some("m30"));
        assert_eq!(listed.get(), 1);
        // Unknown: the listing is not repeated right away.
        assert_eq!(names.name(4, list, name_of), None);
        assert_eq!(listed.get(), 1);
    }
}
