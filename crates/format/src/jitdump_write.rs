//! Encoding jitdump files (little-endian), for jprof's own producers (the JVMTI agent, the
//! example JIT) and for tests. The layouts are the ones `jitdump.rs` reads.

use super::jitdump::{
    DebugEntry, DebugInfo2, RecordId, TierKind, FLAG_ARCH_TIMESTAMP, HEADER_LEN, MAGIC,
};

/// The 40-byte header. `arch_timestamp`: record timestamps are raw TSC values.
pub fn header(pid: u32, timestamp: u64, arch_timestamp: bool) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_LEN);
    h.extend(MAGIC.to_le_bytes());
    h.extend(1u32.to_le_bytes());
    h.extend((HEADER_LEN as u32).to_le_bytes());
    h.extend(62u32.to_le_bytes()); // EM_X86_64
    h.extend(0u32.to_le_bytes());
    h.extend(pid.to_le_bytes());
    h.extend(timestamp.to_le_bytes());
    h.extend(
        (if arch_timestamp {
            FLAG_ARCH_TIMESTAMP
        } else {
            0
        })
        .to_le_bytes(),
    );
    h
}

/// Prefix + body, padded to a multiple of 8 (`total_size` includes the padding).
fn record(id: RecordId, timestamp: u64, body: &[u8]) -> Vec<u8> {
    let mut r = Vec::with_capacity((16 + body.len()).div_ceil(8) * 8);
    record_into(&mut r, id, timestamp, |r| r.extend(body));
    r
}

/// Appends to `out` a record whose body `body` appends, padded to a multiple of 8: the
/// producer that writes many records (the JVMTI agent) fills one reused buffer, with no
/// allocation or copy per record.
fn record_into(out: &mut Vec<u8>, id: RecordId, timestamp: u64, body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend(id.0.to_le_bytes());
    out.extend(0u32.to_le_bytes());
    out.extend(timestamp.to_le_bytes());
    body(out);
    let total = (out.len() - start).div_ceil(8) * 8;
    out.resize(start + total, 0);
    out[start + 4..start + 8].copy_from_slice(&(total as u32).to_le_bytes());
}

/// What a CODE_LOAD record says; its `vma` is written equal to `code_addr`.
pub struct CodeLoad<'a> {
    /// Process id of the runtime.
    pub pid: u32,
    /// Thread that loaded the code.
    pub tid: u32,
    /// Address of the code's first byte.
    pub code_addr: u64,
    /// Unique id of this load.
    pub code_index: u64,
    /// Function name (written NUL-terminated).
    pub name: &'a str,
    /// The code bytes; their length is the record's `code_size`.
    pub code: &'a [u8],
}

/// CODE_LOAD, stamped `timestamp` in the file's clock.
pub fn code_load(timestamp: u64, load: &CodeLoad<'_>) -> Vec<u8> {
    let mut b = Vec::with_capacity(40 + load.name.len() + 1 + load.code.len());
    b.extend(load.pid.to_le_bytes());
    b.extend(load.tid.to_le_bytes());
    b.extend(load.code_addr.to_le_bytes()); // vma
    b.extend(load.code_addr.to_le_bytes());
    b.extend((load.code.len() as u64).to_le_bytes());
    b.extend(load.code_index.to_le_bytes());
    b.extend(load.name.as_bytes());
    b.push(0);
    b.extend(load.code);
    record(RecordId::CODE_LOAD, timestamp, &b)
}

/// CODE_LOAD of `code_size` bytes at `load.code_addr` without the machine code itself (the
/// record ends after the name; `load.code` is not written): the form
/// [`super::jitdump::without_code`] leaves, which every jprof reader takes. jprof's JVMTI agent
/// writes this, since no reader looks at the code bytes.
pub fn code_load_without_code(timestamp: u64, load: &CodeLoad<'_>, code_size: u64) -> Vec<u8> {
    let mut r = Vec::with_capacity((16 + 40 + load.name.len() + 1).div_ceil(8) * 8);
    code_load_without_code_into(&mut r, timestamp, load, code_size);
    r
}

/// [`code_load_without_code`] appended to `out`.
pub fn code_load_without_code_into(
    out: &mut Vec<u8>,
    timestamp: u64,
    load: &CodeLoad<'_>,
    code_size: u64,
) {
    record_into(out, RecordId::CODE_LOAD, timestamp, |b| {
        b.extend(load.pid.to_le_bytes());
        b.extend(load.tid.to_le_bytes());
        b.extend(load.code_addr.to_le_bytes()); // vma
        b.extend(load.code_addr.to_le_bytes());
        b.extend(code_size.to_le_bytes());
        b.extend(load.code_index.to_le_bytes());
        b.extend(load.name.as_bytes());
        b.push(0);
    });
}

/// CODE_MOVE of the `size`-byte code loaded with id `index` from `old` to `new` (tid = pid).
pub fn code_move(timestamp: u64, pid: u32, old: u64, new: u64, size: u64, index: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(48);
    b.extend(pid.to_le_bytes());
    b.extend(pid.to_le_bytes());
    for v in [new, old, new, size, index] {
        b.extend(v.to_le_bytes());
    }
    record(RecordId::CODE_MOVE, timestamp, &b)
}

/// DEBUG_INFO: `(address, line, file)` per entry.
pub fn debug_info(timestamp: u64, code_addr: u64, entries: &[(u64, i32, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(code_addr.to_le_bytes());
    b.extend((entries.len() as u64).to_le_bytes());
    for (addr, line, file) in entries {
        b.extend(addr.to_le_bytes());
        b.extend(line.to_le_bytes());
        b.extend(0i32.to_le_bytes());
        b.extend(file.as_bytes());
        b.push(0);
    }
    record(RecordId::CODE_DEBUG_INFO, timestamp, &b)
}

/// DEBUG_INFO of `entries` as parsed: each entry's file name written out (none repeats the
/// previous one's), discriminators kept.
pub fn debug_info_of(timestamp: u64, code_addr: u64, entries: &[DebugEntry]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(code_addr.to_le_bytes());
    b.extend((entries.len() as u64).to_le_bytes());
    for e in entries {
        b.extend(e.addr.to_le_bytes());
        b.extend(e.line.to_le_bytes());
        b.extend(e.discrim.to_le_bytes());
        b.extend(e.file.as_bytes());
        b.push(0);
    }
    record(RecordId::CODE_DEBUG_INFO, timestamp, &b)
}

/// SAMPLY_JIT_TIER in jprof's layout (docs/formats.md).
pub fn jit_tier(timestamp: u64, code_addr: u64, kind: TierKind, name: &str) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(code_addr.to_le_bytes());
    b.extend(kind.0.to_le_bytes());
    b.extend(0u32.to_le_bytes());
    b.extend(name.as_bytes());
    b.push(0);
    record(RecordId::SAMPLY_JIT_TIER, timestamp, &b)
}

/// An inlined call for [`debug_info2`]: depth, function index, call line, one code range.
pub struct Inline {
    /// Nesting depth: 0 when called from the outer function.
    pub depth: u32,
    /// Index of the called function in [`debug_info2`]'s `functions`.
    pub function: u32,
    /// Line of the call, in the caller's file.
    pub call_line: u32,
    /// The code the call covers: `(offset from the function start, size)` in bytes.
    pub range: (u32, u32),
}

/// The length of `strings` NUL-terminated back to back, padded to a multiple of 4.
fn string_list_len(strings: &[&str]) -> usize {
    strings
        .iter()
        .map(|s| s.len() + 1)
        .sum::<usize>()
        .div_ceil(4)
        * 4
}

fn string_list(strings: &[&str]) -> Vec<u8> {
    let mut b = Vec::with_capacity(string_list_len(strings));
    push_string_list(&mut b, strings);
    b
}

/// Appends `strings` NUL-terminated back to back, padded to a multiple of 4.
fn push_string_list(out: &mut Vec<u8>, strings: &[&str]) {
    let start = out.len();
    for s in strings {
        out.extend(s.as_bytes());
        out.push(0);
    }
    out.resize(start + (out.len() - start).div_ceil(4) * 4, 0);
}

/// SAMPLY_JIT_CODE_DEBUG_INFO2. `functions[i] = (name index, file index, start line)`;
/// `lines = (code offset, file index, line)`.
pub fn debug_info2(
    timestamp: u64,
    files: &[&str],
    names: &[&str],
    functions: &[(u32, u32, u32)],
    inlines: &[Inline],
    lines: &[(u32, u32, u32)],
) -> Vec<u8> {
    let mut r = Vec::new();
    debug_info2_into(&mut r, timestamp, files, names, functions, inlines, lines);
    r
}

/// [`debug_info2`] appended to `out`.
pub fn debug_info2_into(
    out: &mut Vec<u8>,
    timestamp: u64,
    files: &[&str],
    names: &[&str],
    functions: &[(u32, u32, u32)],
    inlines: &[Inline],
    lines: &[(u32, u32, u32)],
) {
    let (files_len, names_len) = (string_list_len(files), string_list_len(names));
    out.reserve(
        16 + 32
            + files_len
            + names_len
            + 20 * (functions.len() + inlines.len())
            + 8 * inlines.len()
            + 16 * lines.len()
            + 8,
    );
    record_into(out, RecordId::SAMPLY_DEBUG_INFO2, timestamp, |b| {
        for v in [
            files.len() as u32,
            files_len as u32,
            names.len() as u32,
            names_len as u32,
            functions.len() as u32,
            inlines.len() as u32,
            inlines.len() as u32,
            lines.len() as u32,
        ] {
            b.extend(v.to_le_bytes());
        }
        push_string_list(b, files);
        push_string_list(b, names);
        for &(name, file, line) in functions {
            for v in [name, file, line, 0, 0] {
                b.extend(v.to_le_bytes());
            }
        }
        for i in inlines {
            for v in [i.depth, 1, i.function, i.call_line, 0] {
                b.extend(v.to_le_bytes());
            }
        }
        for i in inlines {
            b.extend(i.range.0.to_le_bytes());
            b.extend(i.range.1.to_le_bytes());
        }
        for &(offset, file, line) in lines {
            for v in [offset, file, line, 0] {
                b.extend(v.to_le_bytes());
            }
        }
    });
}

/// SAMPLY_JIT_CODE_DEBUG_INFO2 written from a parsed [`DebugInfo2`], every field kept (each
/// name and file once in its list; a file that was missing stays missing).
pub fn debug_info2_of(timestamp: u64, info: &DebugInfo2) -> Vec<u8> {
    struct Strings<'a> {
        list: Vec<&'a str>,
        index: std::collections::HashMap<&'a str, u32>,
    }
    impl<'a> Strings<'a> {
        fn of(&mut self, s: &'a str) -> u32 {
            *self.index.entry(s).or_insert_with(|| {
                self.list.push(s);
                self.list.len() as u32 - 1
            })
        }
        /// A missing file is an index past the list (`u32::MAX`), as the reader takes it.
        fn of_file(&mut self, s: &'a Option<String>) -> u32 {
            s.as_deref().map_or(u32::MAX, |s| self.of(s))
        }
    }
    let new = || Strings {
        list: Vec::new(),
        index: std::collections::HashMap::new(),
    };
    let (mut files, mut names) = (new(), new());
    let mut rows: Vec<u32> = Vec::new();
    for f in &info.functions {
        let name = names.of(&f.name);
        let file = files.of_file(&f.file);
        rows.extend([name, file, f.start_line, f.start_column, f.flags]);
    }
    for c in &info.inline_calls {
        rows.extend([
            c.depth,
            c.ranges.len() as u32,
            c.function,
            c.call_line,
            c.call_column,
        ]);
    }
    for c in &info.inline_calls {
        rows.extend(c.ranges.iter().flat_map(|&(start, len)| [start, len]));
    }
    for l in &info.lines {
        let file = files.of_file(&l.file);
        rows.extend([l.code_offset, file, l.line, l.column]);
    }
    let (file_list, name_list) = (string_list(&files.list), string_list(&names.list));
    let mut b = Vec::new();
    for v in [
        files.list.len() as u32,
        file_list.len() as u32,
        names.list.len() as u32,
        name_list.len() as u32,
        info.functions.len() as u32,
        info.inline_calls.len() as u32,
        info.inline_calls
            .iter()
            .map(|c| c.ranges.len() as u32)
            .sum(),
        info.lines.len() as u32,
    ] {
        b.extend(v.to_le_bytes());
    }
    b.extend(file_list);
    b.extend(name_list);
    b.extend(rows.iter().flat_map(|v| v.to_le_bytes()));
    record(RecordId::SAMPLY_DEBUG_INFO2, timestamp, &b)
}

/// UNWINDING_INFO for the next CODE_LOAD: `.eh_frame` then `.eh_frame_hdr` (perf's and V8's
/// order); `mapped_size` = how many of those bytes the process has right after the code.
pub fn unwinding_info(
    timestamp: u64,
    eh_frame: &[u8],
    eh_frame_hdr: &[u8],
    mapped_size: u64,
) -> Vec<u8> {
    let size = eh_frame.len() + eh_frame_hdr.len();
    let mut b = Vec::with_capacity(24 + size);
    b.extend((size as u64).to_le_bytes());
    b.extend((eh_frame_hdr.len() as u64).to_le_bytes());
    b.extend(mapped_size.to_le_bytes());
    b.extend(eh_frame);
    b.extend(eh_frame_hdr);
    record(RecordId::CODE_UNWINDING_INFO, timestamp, &b)
}

/// jprof's CODE_UNLOAD (docs/formats.md).
pub fn code_unload(timestamp: u64, code_addr: u64, code_index: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(16);
    b.extend(code_addr.to_le_bytes());
    b.extend(code_index.to_le_bytes());
    record(RecordId::JPROF_CODE_UNLOAD, timestamp, &b)
}

/// The fields of a JPROF_J9_METADATA record (docs/formats.md).
pub struct J9Metadata<'a> {
    /// startPC of the body; the CODE_LOAD written next has the same address.
    pub code_addr: u64,
    /// JVM address the image was copied from.
    pub metadata_addr: u64,
    /// `sizeof(J9JITExceptionTable)` in the JVM build, in bytes.
    pub struct_size: u32,
    /// `jitdump::J9_FLAG_*` bits.
    pub flags: u32,
    /// The struct and its variable-length section, copied from `metadata_addr`.
    pub image: &'a [u8],
    /// J9Method address and `pkg/Class.method(Sig)Ret` name.
    pub methods: &'a [(u64, String)],
}

/// jprof's JPROF_J9_METADATA, written before the CODE_LOAD of the same body.
pub fn j9_metadata(timestamp: u64, md: &J9Metadata<'_>) -> Vec<u8> {
    let names: usize = md.methods.iter().map(|(_, n)| 12 + n.len()).sum();
    let mut b = Vec::with_capacity(36 + md.image.len() + 4 + names);
    b.extend(md.code_addr.to_le_bytes());
    b.extend(md.metadata_addr.to_le_bytes());
    b.extend(md.struct_size.to_le_bytes());
    b.extend(md.flags.to_le_bytes());
    b.extend((md.image.len() as u64).to_le_bytes());
    b.extend(md.image);
    b.extend((md.methods.len() as u32).to_le_bytes());
    for (method, name) in md.methods {
        b.extend(method.to_le_bytes());
        b.extend((name.len() as u32).to_le_bytes());
        b.extend(name.as_bytes());
    }
    record(RecordId::JPROF_J9_METADATA, timestamp, &b)
}

/// jprof's JPROF_METHOD_NAMES: VM method addresses and their names.
pub fn method_names(timestamp: u64, methods: &[(u64, String)]) -> Vec<u8> {
    let names: usize = methods.iter().map(|(_, n)| 12 + n.len()).sum();
    let mut b = Vec::with_capacity(4 + names);
    b.extend((methods.len() as u32).to_le_bytes());
    for (method, name) in methods {
        b.extend(method.to_le_bytes());
        b.extend((name.len() as u32).to_le_bytes());
        b.extend(name.as_bytes());
    }
    record(RecordId::JPROF_METHOD_NAMES, timestamp, &b)
}

/// JPROF_METHOD_NAMES records appended to a buffer one name at a time, at most `per_record`
/// names to a record: the bytes [`method_names`] makes of the same names cut into chunks of
/// `per_record`, without a list of owned names first (the JVMTI agent names every method of
/// every class the VM prepares).
pub struct MethodNamesInto {
    timestamp: u64,
    per_record: usize,
    /// The record being filled: where it starts in the buffer, and its names so far.
    open: Option<(usize, usize)>,
}

impl MethodNamesInto {
    /// Records stamped `timestamp`, each with at most `per_record` (at least 1) names.
    pub fn new(timestamp: u64, per_record: usize) -> Self {
        Self {
            timestamp,
            per_record: per_record.max(1),
            open: None,
        }
    }

    /// Appends the name of the VM method at `method` to `out`, in a new record when the last
    /// one is full.
    pub fn push(&mut self, out: &mut Vec<u8>, method: u64, name: &str) {
        let (start, count) = match self.open {
            Some((start, count)) if count < self.per_record => (start, count),
            _ => {
                self.finish_record(out);
                let start = out.len();
                out.extend(RecordId::JPROF_METHOD_NAMES.0.to_le_bytes());
                out.extend(0u32.to_le_bytes());
                out.extend(self.timestamp.to_le_bytes());
                out.extend(0u32.to_le_bytes());
                (start, 0)
            }
        };
        out.extend(method.to_le_bytes());
        out.extend((name.len() as u32).to_le_bytes());
        out.extend(name.as_bytes());
        self.open = Some((start, count + 1));
    }

    /// Ends the last record (its count, padding and size); nothing when no name was pushed.
    pub fn finish(mut self, out: &mut Vec<u8>) {
        self.finish_record(out);
    }

    fn finish_record(&mut self, out: &mut Vec<u8>) {
        let Some((start, count)) = self.open.take() else {
            return;
        };
        out[start + 16..start + 20].copy_from_slice(&(count as u32).to_le_bytes());
        let total = (out.len() - start).div_ceil(8) * 8;
        out.resize(start + total, 0);
        out[start + 4..start + 8].copy_from_slice(&(total as u32).to_le_bytes());
    }
}

/// CODE_CLOSE: the file's last record.
pub fn close(timestamp: u64) -> Vec<u8> {
    record(RecordId::CODE_CLOSE, timestamp, &[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jitdump::{parse_record_stream, Function2, InlineCall2, LineRecord2, RecordBody};
    use crate::Endian;

    /// Every field of a parsed DEBUG_INFO2 reads back as it was, a missing file included.
    /// The appending forms add to a buffer exactly the bytes of the allocating ones, and the
    /// records read back (the agent writes its records through them).
    /// Names pushed one by one make the records `method_names` makes of the same chunks.
    #[test]
    fn method_names_pushed_one_by_one_are_the_same_bytes() {
        let names: Vec<(u64, String)> = (0..7u64)
            .map(|i| {
                (
                    0x1000 + i,
                    format!("p.C{i}.m{}(int)", "x".repeat(i as usize)),
                )
            })
            .collect();
        for per_record in [1, 3, 7, 100] {
            let mut out = vec![0xAA; 3];
            let mut writer = MethodNamesInto::new(42, per_record);
            for (method, name) in &names {
                writer.push(&mut out, *method, name);
            }
            writer.finish(&mut out);
            let mut expected = vec![0xAA; 3];
            for chunk in names.chunks(per_record) {
                expected.extend(method_names(42, chunk));
            }
            assert_eq!(out, expected, "{per_record} a record");
        }
        let mut out = Vec::new();
        MethodNamesInto::new(1, 4).finish(&mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn appended_records_are_the_same_bytes() {
        let inlines = [Inline {
            depth: 0,
            function: 1,
            call_line: 7,
            range: (4, 12),
        }];
        let (files, names) = (["p/A.java", "p/B.java"], ["p.A.f()", "p.B.g(int)"]);
        let functions = [(0, 0, 3), (1, 1, 9)];
        let lines = [(0, 0, 3), (4, 1, 9), (16, 0, 4)];
        let load = CodeLoad {
            pid: 7,
            tid: 8,
            code_addr: 0x1000,
            code_index: 3,
            name: "p.A.f()",
            code: &[],
        };
        let mut out = vec![0xAA; 5];
        debug_info2_into(&mut out, 11, &files, &names, &functions, &inlines, &lines);
        code_load_without_code_into(&mut out, 12, &load, 0x40);
        let mut expected = vec![0xAA; 5];
        expected.extend(debug_info2(
            11, &files, &names, &functions, &inlines, &lines,
        ));
        expected.extend(code_load_without_code(12, &load, 0x40));
        assert_eq!(out, expected);
        let records = parse_record_stream(&out[5..], 0, Endian::Little);
        assert!(records.error.is_none(), "{:?}", records.error);
        assert_eq!(records.records.len(), 2);
        let RecordBody::DebugInfo2(info) = &records.records[0].body else {
            panic!("{:?}", records.records[0].body);
        };
        assert_eq!(info.functions[1].name, "p.B.g(int)");
        assert_eq!(info.functions[1].file.as_deref(), Some("p/B.java"));
        assert_eq!(info.inline_calls[0].ranges, [(4, 12)]);
        assert_eq!(info.lines.len(), 3);
        assert!(matches!(
            records.records[1].body,
            RecordBody::CodeLoad { code_index: 3, .. }
        ));
    }

    #[test]
    fn debug_info2_of_round_trips() {
        let function = |name: &str, file: Option<&str>, flags| Function2 {
            name: name.into(),
            file: file.map(str::to_string),
            start_line: 10,
            start_column: 3,
            flags,
        };
        let info = DebugInfo2 {
            functions: vec![
                function("outer", Some("A.java"), 0),
                function("inner", Some("B.java"), 5),
                function("lost", None, 1),
            ],
            inline_calls: vec![
                InlineCall2 {
                    depth: 0,
                    function: 1,
                    call_line: 7,
                    call_column: 2,
                    ranges: vec![(0, 4), (16, 8)],
                },
                InlineCall2 {
                    depth: 1,
                    function: 2,
                    call_line: 9,
                    call_column: 0,
                    ranges: vec![(16, 2)],
                },
            ],
            lines: vec![
                LineRecord2 {
                    code_offset: 0,
                    file: Some("B.java".into()),
                    line: 12,
                    column: 1,
                },
                LineRecord2 {
                    code_offset: 16,
                    file: None,
                    line: 3,
                    column: 0,
                },
            ],
        };
        let bytes = debug_info2_of(42, &info);
        let batch = parse_record_stream(&bytes, 0, Endian::Little);
        assert!(batch.error.is_none(), "{:?}", batch.error);
        let [r] = &batch.records[..] else {
            panic!("one record: {:?}", batch.records);
        };
        assert_eq!(r.timestamp, 42);
        assert_eq!(r.body, RecordBody::DebugInfo2(info));
    }
}
