//! perf jitdump (versions 1 and 2) and the samply extension records, parsed incrementally: a
//! runtime is usually still writing the file, so [`parse_records`] returns the complete records
//! and the offset to resume from. Layouts: `docs/formats.md` and formats.md §2–§3 of the reference.

use super::{Cursor, Endian, ParseError};

/// `JITHEADER_MAGIC` as a u32 in the file's own byte order.
pub const MAGIC: u32 = 0x4A69_5444;
/// Size of the standard file header in bytes; records start after it (or after `total_size`).
pub const HEADER_LEN: usize = 40;
/// Header `flags` bit 0 (`JITDUMP_FLAGS_ARCH_TIMESTAMP`): timestamps are raw TSC values.
pub(crate) const FLAG_ARCH_TIMESTAMP: u64 = 1;
const PREFIX_LEN: usize = 16;

/// Record id. Open set: unknown ids are skipped by `total_size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecordId(pub u32);

impl RecordId {
    /// JIT_CODE_LOAD: a function's native code now lives at an address.
    pub const CODE_LOAD: Self = Self(0);
    /// JIT_CODE_MOVE: code loaded earlier moved to another address.
    pub const CODE_MOVE: Self = Self(1);
    /// JIT_CODE_DEBUG_INFO: source lines for the next CODE_LOAD.
    pub const CODE_DEBUG_INFO: Self = Self(2);
    /// JIT_CODE_CLOSE: the end of the stream; readers stop there.
    pub const CODE_CLOSE: Self = Self(3);
    /// JIT_CODE_UNWINDING_INFO: `.eh_frame` tables for the next CODE_LOAD.
    pub const CODE_UNWINDING_INFO: Self = Self(4);
    /// samply extension: inline tree + line table (the published gist's layout and id).
    pub const SAMPLY_DEBUG_INFO2: Self = Self(827_346_259);
    /// samply extension: JIT tier of the next CODE_LOAD (jprof's layout; see docs/formats.md).
    /// An unmerged samply branch used this id for its own DEBUG_INFO2 layout; records are told
    /// apart by validating their structure.
    pub const SAMPLY_JIT_TIER: Self = Self(827_346_260);
    /// samply extension: a source (or bytecode/IR listing) file embedded in the dump.
    pub const SAMPLY_EMBEDDED_SOURCE: Self = Self(827_346_261);
    /// jprof extension ("JPR1"): the code at an address was unloaded (see docs/formats.md).
    pub const JPROF_CODE_UNLOAD: Self = Self(827_478_090);
    /// jprof extension ("J9MD" in a little-endian file): an OpenJ9 J9JITExceptionTable image
    /// and the names of its methods, for the next CODE_LOAD (see docs/formats.md).
    pub const JPROF_J9_METADATA: Self = Self(0x444D_394A);
    /// jprof extension ("JPMN" in a little-endian file): VM method addresses (HotSpot's
    /// `Method*`) and their names, so interpreted frames can be named (see docs/formats.md).
    pub const JPROF_METHOD_NAMES: Self = Self(0x4E4D_504A);
}

/// JPROF_J9_METADATA `flags` bit 0: the struct begins with the className/methodName/
/// methodSignature eyecatchers.
pub const J9_FLAG_EYECATCHERS: u32 = 1;
/// JPROF_J9_METADATA `flags` bit 1: the JVM aligns stack maps (ARM builds).
pub const J9_FLAG_ALIGN_STACK_MAPS: u32 = 2;

/// A JPROF_J9_METADATA record: a copy of an OpenJ9 body's metadata and its method names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct J9Metadata {
    /// startPC of the body (matches the following CODE_LOAD).
    pub code_addr: u64,
    /// Address of the J9JITExceptionTable in the JVM.
    pub metadata_addr: u64,
    /// `sizeof(J9JITExceptionTable)` in the JVM build that wrote the record, in bytes.
    pub struct_size: u32,
    /// [`J9_FLAG_EYECATCHERS`] and [`J9_FLAG_ALIGN_STACK_MAPS`] bits; the others are 0.
    pub flags: u32,
    /// The struct and its variable-length section, as copied.
    pub image: Vec<u8>,
    /// File offset of the image's first byte.
    pub image_offset: usize,
    /// J9Method address → `pkg/Class.method(Sig)Ret`.
    pub methods: Vec<(u64, String)>,
}

impl J9Metadata {
    /// How the image was captured, as the decoder needs it.
    fn capture(&self) -> super::j9::Capture {
        super::j9::Capture {
            metadata_addr: self.metadata_addr,
            struct_size: self.struct_size,
            eyecatchers: self.flags & J9_FLAG_EYECATCHERS != 0,
            align_stack_maps: self.flags & J9_FLAG_ALIGN_STACK_MAPS != 0,
            base: self.image_offset,
        }
    }

    /// Decodes the image (see `format::j9`).
    pub fn decode(&self) -> Result<super::j9::Metadata, ParseError> {
        super::j9::decode(&self.image, self.capture())
    }

    /// The method names as a map, for [`crate::j9::Metadata::lookup`].
    pub fn names(&self) -> super::j9::MethodNames {
        self.methods.iter().cloned().collect()
    }
}

/// The file header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Byte order of every field in the file, told by how the magic reads.
    pub endian: Endian,
    /// Format version: 1 (perf and most runtimes) or 2 (Mono).
    pub version: u32,
    /// As written; Mono writes 8. Records start at `max(total_size, 40)`.
    pub total_size: u32,
    /// ELF `e_machine` of the code (62 = x86-64).
    pub elf_mach: u32,
    /// Process id of the runtime that wrote the file.
    pub pid: u32,
    /// When the file was created, in the records' clock (V8 writes wall-clock µs: unreliable).
    pub timestamp: u64,
    /// Flag bits; bit 0 is tested by [`Self::arch_timestamp`].
    pub flags: u64,
}

impl Header {
    /// Timestamps are raw TSC values rather than CLOCK_MONOTONIC ns.
    pub fn arch_timestamp(&self) -> bool {
        self.flags & FLAG_ARCH_TIMESTAMP != 0
    }

    /// Offset of the first record. A `total_size` above [`MAX_HEADER_LEN`] is no header size
    /// (a damaged or hostile file): the records are read after the 40 standard bytes instead,
    /// and [`Self::size_note`] says so.
    pub fn records_start(&self) -> usize {
        match self.total_size as usize {
            n if n > MAX_HEADER_LEN => HEADER_LEN,
            n => n.max(HEADER_LEN),
        }
    }

    /// A note when `total_size` was not believed.
    pub fn size_note(&self) -> Option<String> {
        (self.total_size as usize > MAX_HEADER_LEN).then(|| {
            format!(
                "the header's total_size says {} bytes, which is no header size (at most {MAX_HEADER_LEN}); records were read from byte {HEADER_LEN}",
                self.total_size
            )
        })
    }
}

/// The largest header size believed (the spec's header is 40 bytes; room for extensions).
pub const MAX_HEADER_LEN: usize = 4096;

/// Reads the 40-byte header. Accepts either byte order, versions 1 and 2, and a `total_size`
/// smaller than 40 (Mono's `sizeof(pointer)` bug).
pub fn parse_header(file: &[u8]) -> Result<Header, ParseError> {
    if file.len() < HEADER_LEN {
        return Err(ParseError::new(
            file.len(),
            "a complete 40-byte jitdump header (the file is shorter)",
        ));
    }
    let endian = match &file[..4] {
        [0x44, 0x54, 0x69, 0x4A] => Endian::Little,
        [0x4A, 0x69, 0x54, 0x44] => Endian::Big,
        _ => {
            return Err(ParseError::new(
                0,
                "the jitdump magic \"JiTD\" (0x4A695444)",
            ))
        }
    };
    let mut c = Cursor::with_endian(file, 0, endian);
    c.u32()?;
    let version = c.u32()?;
    if !(1..=2).contains(&version) {
        return Err(ParseError::new(
            4,
            format!("jitdump version 1 or 2, found {version}"),
        ));
    }
    Ok(Header {
        endian,
        version,
        total_size: c.u32()?,
        elf_mach: c.u32()?,
        pid: {
            c.u32()?; // pad1
            c.u32()?
        },
        timestamp: c.u64()?,
        flags: c.u64()?,
    })
}

/// One source position of a DEBUG_INFO record: the code from `addr` on comes from this line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebugEntry {
    /// Code address, as the producer wrote it (V8 adds an ELF header's size to it).
    pub addr: u64,
    /// Source line, 1-based.
    pub line: i32,
    /// Column discriminator; 0 when the producer has none.
    pub discrim: i32,
    /// Source file name; an entry written as `"\xff"` repeats the previous entry's name.
    pub file: String,
}

/// The file name of a DEBUG_INFO entry, as read.
enum EntryFile {
    Repeat,
    Name(String),
    Garbled,
}

/// How far past `code_addr` a line-table address may lie and still be taken for one.
const PLAUSIBLE_CODE_SPAN: u64 = 1 << 24;

/// Reads an entry's NUL-terminated file name. Node 20's V8 sometimes writes the name from
/// freed memory: the right length, but with NULs inside, which would make the rest of the
/// entries misaligned. So the name ends at the first NUL after which the next entry's address
/// is plausible for this code (or, for the last entry, after which only padding is left); a
/// name that needed this, or is not clean UTF-8 text, is `Garbled`: its line stays, the file
/// is dropped.
fn debug_entry_file(
    c: &mut Cursor<'_>,
    code_addr: u64,
    last: bool,
) -> Result<EntryFile, ParseError> {
    let (rest, endian) = (c.rest(), c.endian());
    let nuls = || {
        rest.iter()
            .enumerate()
            .filter(|(_, &b)| b == 0)
            .map(|(i, _)| i)
    };
    let Some(first) = nuls().next() else {
        return Err(c.error("a NUL-terminated string"));
    };
    let fits = |end: usize| -> bool {
        let after = &rest[end + 1..];
        if last {
            return after.iter().all(|&b| b == 0);
        }
        after.get(..8).is_some_and(|b| {
            let mut next = [0; 8];
            next.copy_from_slice(b);
            endian.u64(next).wrapping_sub(code_addr) < PLAUSIBLE_CODE_SPAN
        })
    };
    let end = nuls().find(|&end| fits(end)).unwrap_or(first);
    let raw = &c.bytes(end + 1)?[..end];
    Ok(match std::str::from_utf8(raw) {
        _ if raw == [0xff] => EntryFile::Repeat,
        Ok(name) if end == first && !name.chars().any(char::is_control) => {
            EntryFile::Name(name.to_string())
        }
        _ => EntryFile::Garbled,
    })
}

/// One function of a DEBUG_INFO2 record (the first is the outer function).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function2 {
    /// Function name, from the record's name list.
    pub name: String,
    /// Source file the function is declared in; `None` when the file index is out of range.
    pub file: Option<String>,
    /// Line the function starts at.
    pub start_line: u32,
    /// Column the function starts at.
    pub start_column: u32,
    /// Producer-defined flag bits, kept as written.
    pub flags: u32,
}

/// An inlined call with its code ranges (offsets from the function start).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineCall2 {
    /// Nesting depth: 0 when called from the outer function; the caller is the nearest
    /// earlier call one level up.
    pub depth: u32,
    /// Index of the called function in [`DebugInfo2::functions`].
    pub function: u32,
    /// Line of the call, in the caller's file.
    pub call_line: u32,
    /// Column of the call.
    pub call_column: u32,
    /// Code the call covers: `(start offset, size)` in bytes.
    pub ranges: Vec<(u32, u32)>,
}

/// One row of a DEBUG_INFO2 line table: the position in the deepest inlined function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineRecord2 {
    /// Offset in bytes from the function start where the row begins.
    pub code_offset: u32,
    /// Source file; `None` when the file index is out of range.
    pub file: Option<String>,
    /// Line, 1-based.
    pub line: u32,
    /// Column, 0-based.
    pub column: u32,
}

/// The samply DEBUG_INFO2 record: inline tree and line table for the next CODE_LOAD.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DebugInfo2 {
    /// The outer function first, then the functions inlined into it.
    pub functions: Vec<Function2>,
    /// In DFS order; depth 0 = called from the outer function.
    pub inline_calls: Vec<InlineCall2>,
    /// Sorted by code offset as written.
    pub lines: Vec<LineRecord2>,
}

/// A JIT tier (jprof's SAMPLY_JIT_TIER layout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JitTier {
    /// The code the tier applies to; 0 = the next CODE_LOAD.
    pub code_addr: u64,
    /// The tier's class, comparable across runtimes.
    pub kind: TierKind,
    /// The runtime's own name for the tier ("C2", "Turbofan", "baseline", ...).
    pub name: String,
}

/// The `kind` of a SAMPLY_JIT_TIER record (below 16; 0 = unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TierKind(pub u32);

impl TierKind {
    /// Interpreted code, or the interpreter itself.
    pub const INTERPRETER: Self = Self(1);
    /// A quick, lightly optimizing compiler (C1, Sparkplug, Maglev).
    pub const BASELINE: Self = Self(2);
    /// The optimizing compiler (C2, Turbofan).
    pub const OPTIMIZED: Self = Self(3);
    /// Trampolines, stubs, runtime helpers.
    pub const STUB: Self = Self(4);
}

/// A decoded record body, by record kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordBody {
    /// JIT_CODE_LOAD: a function's code was placed at `code_addr`.
    CodeLoad {
        /// Process id of the runtime.
        pid: u32,
        /// Thread that loaded the code.
        tid: u32,
        /// Virtual address of the code; normally equal to `code_addr`.
        vma: u64,
        /// Address of the code's first byte.
        code_addr: u64,
        /// Size of the code in bytes.
        code_size: u64,
        /// Unique id of this load, named again by CODE_MOVE and CODE_UNLOAD.
        code_index: u64,
        /// Function name.
        name: String,
    },
    /// JIT_CODE_MOVE: code loaded earlier now lives at `new_code_addr`.
    CodeMove {
        /// Process id of the runtime.
        pid: u32,
        /// Thread that moved the code.
        tid: u32,
        /// New virtual address of the code.
        vma: u64,
        /// Where the code was.
        old_code_addr: u64,
        /// Where the code is now.
        new_code_addr: u64,
        /// Size of the code in bytes (a move does not change it).
        code_size: u64,
        /// Id of the CODE_LOAD that placed the code.
        code_index: u64,
    },
    /// JIT_CODE_DEBUG_INFO: source lines for the next CODE_LOAD.
    DebugInfo {
        /// Start of the code the lines describe.
        code_addr: u64,
        /// Source positions, in the order written.
        entries: Vec<DebugEntry>,
    },
    /// JIT_CODE_CLOSE: the runtime finished the file.
    Close,
    /// JIT_CODE_UNWINDING_INFO: unwind tables for the next CODE_LOAD.
    UnwindingInfo {
        /// `.eh_frame` followed by `.eh_frame_hdr` (perf's and V8's order).
        eh_frame: Vec<u8>,
        /// The `.eh_frame_hdr` search table (the record's last `eh_frame_hdr_size` bytes).
        eh_frame_hdr: Vec<u8>,
        /// Bytes of the tables mapped in the process right after the code (0 = none).
        mapped_size: u64,
    },
    /// SAMPLY_JIT_CODE_DEBUG_INFO2 (or the samply-branch layout under the JIT_TIER id).
    DebugInfo2(DebugInfo2),
    /// SAMPLY_JIT_TIER in jprof's layout.
    JitTier(JitTier),
    /// SAMPLY_EMBEDDED_SOURCE_FILE: a source, bytecode or IR file carried in the dump.
    EmbeddedSource {
        /// The code the file belongs to; 0 = not tied to one body.
        code_addr: u64,
        /// Path of the file, up to its first NUL.
        path: String,
        /// The file's bytes.
        content: Vec<u8>,
    },
    /// jprof's CODE_UNLOAD: the body loaded at `code_addr` (with `code_index`) is gone.
    CodeUnload {
        /// Start of the code that was unloaded.
        code_addr: u64,
        /// Id of the CODE_LOAD that placed it.
        code_index: u64,
    },
    /// jprof's JPROF_J9_METADATA: OpenJ9 metadata for the next CODE_LOAD.
    J9Metadata(J9Metadata),
    /// jprof's JPROF_METHOD_NAMES: (method address in the VM, name), valid from the record's
    /// time.
    MethodNames(Vec<(u64, String)>),
    /// A record id jprof does not interpret (skipped by its size).
    Unknown(RecordId),
}

/// One complete record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Offset of the record prefix in the file.
    pub offset: usize,
    /// Id from the record prefix.
    pub id: RecordId,
    /// In the file's clock (TSC when the header says ARCH_TIMESTAMP).
    pub timestamp: u64,
    /// The decoded body.
    pub body: RecordBody,
}

/// What one pass over the bytes gave.
#[derive(Debug, Default)]
pub struct Batch {
    /// The complete records, in file order.
    pub records: Vec<Record>,
    /// Where the next pass should start: the first record not yet complete.
    pub resume_at: usize,
    /// A CODE_CLOSE was read: nothing follows.
    pub closed: bool,
    /// A record that cannot be right; parsing stopped before it, `resume_at` points at it.
    pub error: Option<ParseError>,
}

/// Parses the complete records in `file[from..]`. A record cut off by the end of the bytes is
/// not an error: the runtime may still be writing it.
pub fn parse_records(file: &[u8], header: &Header, from: usize) -> Batch {
    let start = from.max(header.records_start()).min(file.len());
    parse_record_stream(&file[start..], start, header.endian)
}

/// Like [`parse_records`], over bytes that begin at a record boundary found at file offset
/// `base` (a tailer keeps only the bytes it has not consumed yet). Offsets are file offsets.
pub fn parse_record_stream(bytes: &[u8], base: usize, endian: Endian) -> Batch {
    let mut batch = Batch {
        resume_at: base,
        ..Batch::default()
    };
    loop {
        let pos = batch.resume_at - base;
        if bytes.len() < pos + PREFIX_LEN {
            break;
        }
        let file = bytes;
        let mut c = Cursor::with_endian(&file[pos..], base + pos, endian);
        let (id, total_size, timestamp) = match (c.u32(), c.u32(), c.u64()) {
            (Ok(id), Ok(size), Ok(ts)) => (RecordId(id), size as usize, ts),
            _ => break,
        };
        if total_size < PREFIX_LEN {
            batch.error = Some(ParseError::new(
                base + pos + 4,
                format!("a record total_size of at least 16, found {total_size}"),
            ));
            break;
        }
        if file.len() < pos + total_size {
            break; // still being written
        }
        let body_bytes = &file[pos + PREFIX_LEN..pos + total_size];
        let mut body = Cursor::with_endian(body_bytes, base + pos + PREFIX_LEN, endian);
        match parse_body(id, &mut body) {
            Ok(body) => {
                let closed = body == RecordBody::Close;
                batch.records.push(Record {
                    offset: base + pos,
                    id,
                    timestamp,
                    body,
                });
                batch.resume_at = base + pos + total_size;
                if closed {
                    batch.closed = true;
                    break;
                }
            }
            Err(e) => {
                batch.error = Some(e);
                break;
            }
        }
    }
    batch
}

/// Bytes of a CODE_LOAD body before its name: pid, tid, vma, code_addr, code_size, code_index.
const CODE_LOAD_FIXED: usize = 40;

/// `records` (whole records back to back, as [`parse_record_stream`] consumed them) with the
/// machine code of every CODE_LOAD left out: each such record ends after its name's NUL and its
/// `total_size` says so; `code_size` is kept, so the code's range is still known. Nothing jprof
/// reads is lost (no reader looks at the code bytes), and most of a JIT's jitdump is code. A
/// record that is not whole, or a CODE_LOAD without a NUL-ended name, is kept as it is.
pub fn without_code(records: &[u8], endian: Endian) -> Vec<u8> {
    let mut out = Vec::with_capacity(records.len() / 4);
    let (whole, rest) = split_records(records, endian);
    for (id, record) in whole {
        let name_start = PREFIX_LEN + CODE_LOAD_FIXED;
        let name_end = (id == RecordId::CODE_LOAD)
            .then(|| record.get(name_start..)?.iter().position(|&b| b == 0))
            .flatten()
            .map(|nul| name_start + nul + 1);
        match name_end {
            Some(end) => {
                out.extend_from_slice(&record[..4]);
                out.extend_from_slice(&endian.u32_bytes(end as u32));
                out.extend_from_slice(&record[8..end]);
            }
            None => out.extend_from_slice(record),
        }
    }
    out.extend_from_slice(rest);
    out
}

/// The stored pieces of a jitdump (the first from the file's start, each ending on a record
/// boundary) without the CODE_LOAD records `leave_out` says yes to (by ordinal among the
/// file's CODE_LOADs, from 0), nor the records only such a load reads: a jitdump reader gives
/// the DEBUG_INFO, DEBUG_INFO2, UNWINDING_INFO, J9 metadata and JIT_TIER (for the next load)
/// records since the previous CODE_LOAD to the next one, and a JIT_TIER by address to the
/// next load at that address that has no tier of its own, so those go with their load and
/// every other load reads what it read before. Every other record stays where it was, so
/// pieces keep their order and count. An error for a header that does not read, or a piece
/// that does not end on a record boundary (records would then span pieces).
pub fn without_loads(
    pieces: &[&[u8]],
    leave_out: impl Fn(u64) -> bool,
) -> Result<Vec<Vec<u8>>, ParseError> {
    let first = pieces
        .first()
        .ok_or_else(|| ParseError::new(0, "a jitdump piece"))?;
    let header = parse_header(first)?;
    let start = header.records_start();
    if start > first.len() {
        return Err(ParseError::new(
            first.len(),
            format!("a first piece holding the {start}-byte header"),
        ));
    }
    // Each piece's records; a record is named by (piece, index).
    let mut split = Vec::with_capacity(pieces.len());
    let mut at = 0;
    for (i, piece) in pieces.iter().enumerate() {
        let from = if i == 0 { start } else { 0 };
        let (records, tail) = split_records(&piece[from..], header.endian);
        if !tail.is_empty() {
            return Err(ParseError::new(
                at + piece.len() - tail.len(),
                "a piece that ends on a record boundary",
            ));
        }
        at += piece.len();
        split.push(records);
    }
    let mut dropped: Vec<Vec<bool>> = split.iter().map(|r| vec![false; r.len()]).collect();
    // Records since the previous CODE_LOAD that the next one reads, whether one of them is a
    // JIT_TIER for it, and the JIT_TIERs by address no load has read yet.
    let mut pending: Vec<(usize, usize)> = Vec::new();
    let mut tier_pending = false;
    let mut tiers_by_addr: std::collections::HashMap<u64, Vec<(usize, usize)>> = Default::default();
    let mut loads = 0u64;
    for (i, records) in split.iter().enumerate() {
        for (j, &(id, record)) in records.iter().enumerate() {
            let body = &record[PREFIX_LEN..];
            match id {
                RecordId::CODE_DEBUG_INFO
                | RecordId::SAMPLY_DEBUG_INFO2
                | RecordId::CODE_UNWINDING_INFO
                | RecordId::JPROF_J9_METADATA => pending.push((i, j)),
                // Read as the reader reads it: a tier, or else samply's other DEBUG_INFO2.
                RecordId::SAMPLY_JIT_TIER => match as_tier(body) {
                    Some(tier) if tier.code_addr != 0 => {
                        tiers_by_addr
                            .entry(tier.code_addr)
                            .or_default()
                            .push((i, j));
                    }
                    Some(_) => {
                        tier_pending = true;
                        pending.push((i, j));
                    }
                    None => pending.push((i, j)),
                },
                RecordId::CODE_LOAD => {
                    let code_addr = body
                        .get(16..24)
                        .and_then(|b| b.try_into().ok())
                        .map(|b| header.endian.u64(b));
                    // A tier for the next load wins over one by address, which then waits
                    // for the next load there.
                    let by_addr = match (tier_pending, code_addr) {
                        (false, Some(addr)) => tiers_by_addr.remove(&addr).unwrap_or_default(),
                        _ => Vec::new(),
                    };
                    if leave_out(loads) {
                        dropped[i][j] = true;
                        for &(pi, pj) in pending.iter().chain(&by_addr) {
                            dropped[pi][pj] = true;
                        }
                    }
                    pending.clear();
                    tier_pending = false;
                    loads += 1;
                }
                _ => {}
            }
        }
    }
    Ok(pieces
        .iter()
        .zip(split)
        .zip(dropped)
        .enumerate()
        .map(|(i, ((piece, records), dropped))| {
            let mut out = Vec::with_capacity(piece.len());
            if i == 0 {
                out.extend_from_slice(&piece[..start]);
            }
            for ((_, record), dropped) in records.into_iter().zip(dropped) {
                if !dropped {
                    out.extend_from_slice(record);
                }
            }
            out
        })
        .collect())
}

/// Whether records of kind `id` may be left out of a stored jitdump until the end of recording
/// and kept only for the code or methods samples hit: line tables (DEBUG_INFO), inline trees
/// (DEBUG_INFO2) and VM method names (METHOD_NAMES). Nothing else reads them before then.
pub fn is_deferrable(id: RecordId) -> bool {
    matches!(
        id,
        RecordId::CODE_DEBUG_INFO | RecordId::SAMPLY_DEBUG_INFO2 | RecordId::JPROF_METHOD_NAMES
    )
}

/// The whole records at the start of `records`, each with its id, and the bytes after them
/// (an incomplete or damaged record).
pub fn split_records(records: &[u8], endian: Endian) -> (Vec<(RecordId, &[u8])>, &[u8]) {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + PREFIX_LEN <= records.len() {
        let word = |at: usize| endian.u32(records[at..at + 4].try_into().unwrap_or_default());
        let (id, total_size) = (word(pos), word(pos + 4) as usize);
        if total_size < PREFIX_LEN || pos + total_size > records.len() {
            break;
        }
        out.push((RecordId(id), &records[pos..pos + total_size]));
        pos += total_size;
    }
    (out, &records[pos..])
}

/// `file` (a jitdump from its header) with deferred record groups put back: `groups[n]` right
/// before the file's CODE_LOAD record `n` (counted from 0), groups past the last CODE_LOAD at
/// the end of the whole records, in order.
pub fn with_groups(
    file: &[u8],
    header: &Header,
    groups: &std::collections::BTreeMap<u64, Vec<u8>>,
) -> Vec<u8> {
    let start = header.records_start().min(file.len());
    let extra: usize = groups.values().map(Vec::len).sum();
    let mut out = Vec::with_capacity(file.len() + extra);
    out.extend_from_slice(&file[..start]);
    let (records, tail) = split_records(&file[start..], header.endian);
    let mut loads = 0u64;
    for (id, record) in records {
        if id == RecordId::CODE_LOAD {
            if let Some(g) = groups.get(&loads) {
                out.extend_from_slice(g);
            }
            loads += 1;
        }
        out.extend_from_slice(record);
    }
    for g in groups.range(loads..).map(|(_, g)| g) {
        out.extend_from_slice(g);
    }
    out.extend_from_slice(tail);
    out
}

fn parse_body(id: RecordId, c: &mut Cursor<'_>) -> Result<RecordBody, ParseError> {
    Ok(match id {
        RecordId::CODE_LOAD => {
            let pid = c.u32()?;
            let tid = c.u32()?;
            let vma = c.u64()?;
            let code_addr = c.u64()?;
            let code_size = c.u64()?;
            let code_index = c.u64()?;
            let name = c.cstr()?;
            RecordBody::CodeLoad {
                pid,
                tid,
                vma,
                code_addr,
                code_size,
                code_index,
                name,
            }
        }
        RecordId::CODE_MOVE => RecordBody::CodeMove {
            pid: c.u32()?,
            tid: c.u32()?,
            vma: c.u64()?,
            old_code_addr: c.u64()?,
            new_code_addr: c.u64()?,
            code_size: c.u64()?,
            code_index: c.u64()?,
        },
        RecordId::CODE_DEBUG_INFO => {
            let code_addr = c.u64()?;
            let nr = c.u64()?;
            // Each entry takes at least 17 bytes; a larger count cannot be right.
            if nr > (c.remaining() / 17) as u64 {
                return Err(c.error(format!("{nr} debug entries to fit in the record")));
            }
            let mut entries: Vec<DebugEntry> = Vec::with_capacity(nr as usize);
            for i in 0..nr {
                let addr = c.u64()?;
                let line = c.i32()?;
                let discrim = c.i32()?;
                let file = match debug_entry_file(c, code_addr, i + 1 == nr)? {
                    // "\xff\0" means: the same file as the previous entry.
                    EntryFile::Repeat => entries.last().map(|e| e.file.clone()).unwrap_or_default(),
                    EntryFile::Name(name) => name,
                    EntryFile::Garbled => String::new(),
                };
                entries.push(DebugEntry {
                    addr,
                    line,
                    discrim,
                    file,
                });
            }
            RecordBody::DebugInfo { code_addr, entries }
        }
        RecordId::CODE_CLOSE => RecordBody::Close,
        RecordId::CODE_UNWINDING_INFO => {
            let unwinding_size = c.u64()?;
            let hdr_size = c.u64()?;
            let mapped_size = c.u64()?;
            if hdr_size > unwinding_size || unwinding_size > c.remaining() as u64 {
                return Err(c.error("unwinding data sizes that fit in the record"));
            }
            let data = c.bytes(unwinding_size as usize)?;
            let split = (unwinding_size - hdr_size) as usize;
            RecordBody::UnwindingInfo {
                eh_frame: data[..split].to_vec(),
                eh_frame_hdr: data[split..].to_vec(),
                mapped_size,
            }
        }
        RecordId::SAMPLY_DEBUG_INFO2 => RecordBody::DebugInfo2(parse_debug_info2(c)?),
        RecordId::SAMPLY_JIT_TIER => parse_tier_or_branch_record(c)?,
        RecordId::SAMPLY_EMBEDDED_SOURCE => {
            let code_addr = c.u64()?;
            let path_size = c.u32()? as usize;
            let content_size = c.u32()? as usize;
            let path = c.bytes(path_size)?;
            let path =
                String::from_utf8_lossy(path.split(|&b| b == 0).next().unwrap_or(&[])).into_owned();
            RecordBody::EmbeddedSource {
                code_addr,
                path,
                content: c.bytes(content_size)?.to_vec(),
            }
        }
        RecordId::JPROF_CODE_UNLOAD => RecordBody::CodeUnload {
            code_addr: c.u64()?,
            code_index: c.u64()?,
        },
        RecordId::JPROF_J9_METADATA => RecordBody::J9Metadata(parse_j9_metadata(c)?),
        RecordId::JPROF_METHOD_NAMES => RecordBody::MethodNames(parse_method_names(c)?),
        other => RecordBody::Unknown(other),
    })
}

/// `u32 count`, then per method `u64 address, u32 length, name bytes`.
fn parse_method_names(c: &mut Cursor<'_>) -> Result<Vec<(u64, String)>, ParseError> {
    let count = c.u32()?;
    // Each method takes at least 12 bytes.
    if count as u64 * 12 > c.remaining() as u64 {
        return Err(c.error(format!("{count} method names to fit in the record")));
    }
    let mut methods = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let method = c.u64()?;
        let len = c.u32()? as usize;
        methods.push((method, String::from_utf8_lossy(c.bytes(len)?).into_owned()));
    }
    Ok(methods)
}

fn parse_j9_metadata(c: &mut Cursor<'_>) -> Result<J9Metadata, ParseError> {
    let code_addr = c.u64()?;
    let metadata_addr = c.u64()?;
    let struct_size = c.u32()?;
    let flags = c.u32()?;
    let image_size = c.u64()?;
    if image_size > c.remaining() as u64 {
        return Err(c.error(format!(
            "an image of {image_size} bytes to fit in the {} bytes left",
            c.remaining()
        )));
    }
    let image_offset = c.offset();
    let image = c.bytes(image_size as usize)?.to_vec();
    let methods = parse_method_names(c)?;
    Ok(J9Metadata {
        code_addr,
        metadata_addr,
        struct_size,
        flags,
        image,
        image_offset,
        methods,
    })
}

/// A list of `count` NUL-terminated strings occupying exactly `size` bytes (padding included).
fn string_list(c: &mut Cursor<'_>, count: u32, size: u32) -> Result<Vec<String>, ParseError> {
    let start = c.offset();
    let bytes = c.bytes(size as usize)?;
    let mut list = Cursor::new(bytes, start);
    let mut out = Vec::new();
    for _ in 0..count {
        out.push(list.cstr()?);
    }
    Ok(out)
}

fn parse_debug_info2(c: &mut Cursor<'_>) -> Result<DebugInfo2, ParseError> {
    let file_count = c.u32()?;
    let file_list_size = c.u32()?;
    let name_count = c.u32()?;
    let name_list_size = c.u32()?;
    let function_count = c.u32()?;
    let inline_count = c.u32()?;
    let range_count = c.u32()?;
    let line_count = c.u32()?;
    let fixed = 20u64 * function_count as u64
        + 20 * inline_count as u64
        + 8 * range_count as u64
        + 16 * line_count as u64
        + file_list_size as u64
        + name_list_size as u64;
    if fixed > c.remaining() as u64 {
        return Err(c.error("DEBUG_INFO2 lists that fit in the record"));
    }
    let files = string_list(c, file_count, file_list_size)?;
    let names = string_list(c, name_count, name_list_size)?;
    let file_at = |i: u32| files.get(i as usize).cloned();
    let mut info = DebugInfo2::default();
    for _ in 0..function_count {
        let name_index = c.u32()?;
        let name = names
            .get(name_index as usize)
            .cloned()
            .ok_or_else(|| c.error(format!("a function name index below {}", names.len())))?;
        info.functions.push(Function2 {
            name,
            file: file_at(c.u32()?),
            start_line: c.u32()?,
            start_column: c.u32()?,
            flags: c.u32()?,
        });
    }
    let mut ranges_wanted = Vec::with_capacity(inline_count as usize);
    let mut prev_depth: Option<u32> = None;
    for _ in 0..inline_count {
        let depth = c.u32()?;
        if depth > prev_depth.map_or(0, |d| d + 1) {
            return Err(c.error("an inline call depth at most one deeper than the previous call"));
        }
        prev_depth = Some(depth);
        let n = c.u32()?;
        let function = c.u32()?;
        if function >= function_count {
            return Err(c.error(format!("a function index below {function_count}")));
        }
        ranges_wanted.push(n);
        info.inline_calls.push(InlineCall2 {
            depth,
            function,
            call_line: c.u32()?,
            call_column: c.u32()?,
            ranges: Vec::new(),
        });
    }
    if ranges_wanted.iter().map(|&n| n as u64).sum::<u64>() != range_count as u64 {
        return Err(c.error("inline calls whose range counts add up to range_count"));
    }
    for (call, n) in info.inline_calls.iter_mut().zip(ranges_wanted) {
        for _ in 0..n {
            call.ranges.push((c.u32()?, c.u32()?));
        }
    }
    for _ in 0..line_count {
        info.lines.push(LineRecord2 {
            code_offset: c.u32()?,
            file: file_at(c.u32()?),
            line: c.u32()?,
            column: c.u32()?,
        });
    }
    Ok(info)
}

/// Id 827346260 is jprof's JIT_TIER; an unmerged samply branch used it for another DEBUG_INFO2
/// layout (`u64 code_addr, u64 N, u64 M, u64 S, {u32,u32}[N], 28-byte positions[M], strings[S]`).
/// Tell them apart by structure: a tier record is `u64 code_addr; u32 kind; u32 0; name\0` with a
/// small kind, and its name fills the record up to padding.
fn parse_tier_or_branch_record(c: &mut Cursor<'_>) -> Result<RecordBody, ParseError> {
    let body = c.rest();
    let offset = c.offset();
    if let Some(tier) = as_tier(body) {
        return Ok(RecordBody::JitTier(tier));
    }
    if let Some(info) = as_branch_debug_info2(body) {
        return Ok(RecordBody::DebugInfo2(info));
    }
    Err(ParseError::new(
        offset,
        "a SAMPLY_JIT_TIER record (u64 code_addr, u32 kind < 16, u32 0, NUL-terminated name) or the samply-branch DEBUG_INFO2 layout",
    ))
}

fn as_tier(body: &[u8]) -> Option<JitTier> {
    let mut c = Cursor::new(body, 0);
    let code_addr = c.u64().ok()?;
    let kind = c.u32().ok()?;
    let reserved = c.u32().ok()?;
    let name = c.cstr().ok()?;
    let padding_ok = c.remaining() < 8 && c.rest().iter().all(|&b| b == 0);
    (kind < 16 && reserved == 0 && padding_ok && name.len() < 256).then_some(JitTier {
        code_addr,
        kind: TierKind(kind),
        name,
    })
}

fn as_branch_debug_info2(body: &[u8]) -> Option<DebugInfo2> {
    let mut c = Cursor::new(body, 0);
    let _code_addr = c.u64().ok()?;
    let n = c.u64().ok()?;
    let m = c.u64().ok()?;
    let s = c.u64().ok()?;
    if n.checked_mul(8)?.checked_add(m.checked_mul(28)?)? > c.remaining() as u64 {
        return None;
    }
    let offsets: Vec<(u32, u32)> = (0..n)
        .map(|_| Some((c.u32().ok()?, c.u32().ok()?)))
        .collect::<Option<_>>()?;
    let mut positions = Vec::with_capacity(m as usize);
    for _ in 0..m {
        let p: [u32; 7] = std::array::from_fn(|_| c.u32().unwrap_or(u32::MAX));
        positions.push(p);
    }
    if s > c.remaining() as u64 {
        return None;
    }
    let strings: Vec<String> = (0..s).map(|_| c.cstr().ok()).collect::<Option<_>>()?;
    if c.remaining() >= 8 {
        return None;
    }
    // Validate every index before accepting the structure.
    for p in &positions {
        let caller_ok = p[0] as i32 == -1 || (p[0] as u64) < m;
        let name_ok = (p[1] as u64) < s;
        let file_ok = p[2] as i32 == -1 || (p[2] as u64) < s;
        if !(caller_ok && name_ok && file_ok) {
            return None;
        }
    }
    if offsets.iter().any(|&(_, pos)| pos as u64 >= m) {
        return None;
    }
    // Convert to the gist model: one function per position, lines from the code offsets
    // (the innermost position's line), inline calls from the caller chains.
    let string = |i: u32| strings.get(i as usize).cloned();
    let mut info = DebugInfo2::default();
    for p in &positions {
        info.functions.push(Function2 {
            name: string(p[1]).unwrap_or_default(),
            file: if p[2] as i32 == -1 {
                None
            } else {
                string(p[2])
            },
            start_line: p[3],
            start_column: p[4],
            flags: 0,
        });
    }
    for (i, &(code_offset, pos)) in offsets.iter().enumerate() {
        let p = positions[pos as usize];
        info.lines.push(LineRecord2 {
            code_offset,
            file: if p[2] as i32 == -1 {
                None
            } else {
                string(p[2])
            },
            line: p[5],
            column: p[6],
        });
        // Each inlined position on the chain covers this offset range.
        let end = offsets.get(i + 1).map_or(u32::MAX, |o| o.0);
        let mut chain = Vec::new();
        let mut cur = pos as usize;
        let mut guard = 0;
        while positions[cur][0] as i32 != -1 && guard < positions.len() {
            chain.push(cur);
            cur = positions[cur][0] as usize;
            guard += 1;
        }
        for (depth, &callee) in chain.iter().rev().enumerate() {
            let caller = positions[callee][0] as usize;
            info.inline_calls.push(InlineCall2 {
                depth: depth as u32,
                function: callee as u32,
                call_line: positions[caller][5],
                call_column: positions[caller][6],
                ranges: vec![(code_offset, end.saturating_sub(code_offset))],
            });
        }
    }
    Some(info)
}

/// Whether a mapped file name is a jitdump marker: basename `jit-<digits>.dump`.
pub fn is_jitdump_path(path: &str) -> Option<u32> {
    let base = path.rsplit('/').next()?;
    let digits = base.strip_prefix("jit-")?.strip_suffix(".dump")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Left out with a CODE_LOAD: the records since the load before it that a reader gives to
    /// it (line table, unwind table, a tier for the next load) and the tier by address it took;
    /// everything else stays in its piece, and a tier by address no load took, or one a load
    /// with its own tier did not take, waits for the next load there as before.
    #[test]
    fn loads_left_out_take_only_their_own_records() {
        use crate::jitdump_write as w;
        let load = |i: u64, addr: u64| {
            w::code_load(
                10 + i,
                &w::CodeLoad {
                    pid: 1,
                    tid: 1,
                    code_addr: addr,
                    code_index: i,
                    name: "f",
                    code: &[],
                },
            )
        };
        let lines = w::debug_info(1, 0x1000, &[(0x1000, 3, "F.java")]);
        let unwind = w::unwinding_info(1, &[1, 2, 3, 4], &[5, 6, 7, 8], 0);
        let next_tier = w::jit_tier(1, 0, TierKind::OPTIMIZED, "C2");
        let tier_at = |addr| w::jit_tier(1, addr, TierKind::STUB, "stub");
        let names = w::method_names(2, &[(0x77, "Lp/A;run".to_string())]);
        let moved = w::code_move(3, 1, 0x5000, 0x6000, 16, 9);
        // Load 0 at 0x1000 (left out) with its lines, unwind table and tier; a tier for 0x2000
        // before it, taken by load 1 (kept); load 2 at 0x3000 (left out) takes the tier by
        // address there; load 3 at 0x4000 (left out) has its own tier, so the one by address
        // waits for load 4 there (kept).
        let piece_a = [
            w::header(1, 0, false),
            tier_at(0x2000),
            lines.clone(),
            names.clone(),
            unwind.clone(),
            next_tier.clone(),
            load(0, 0x1000),
            load(1, 0x2000),
        ]
        .concat();
        let piece_b = [
            tier_at(0x3000),
            moved.clone(),
            load(2, 0x3000),
            tier_at(0x4000),
            next_tier.clone(),
            load(3, 0x4000),
            lines.clone(),
            load(4, 0x4000),
            names.clone(),
        ]
        .concat();
        let out = without_loads(&[&piece_a, &piece_b], |o| [0, 2, 3].contains(&o)).unwrap();
        let expected_a = [
            w::header(1, 0, false),
            tier_at(0x2000),
            names.clone(),
            load(1, 0x2000),
        ]
        .concat();
        let expected_b = [moved, tier_at(0x4000), lines, load(4, 0x4000), names].concat();
        assert_eq!(out, [expected_a, expected_b]);
        // Nothing left out: the same bytes.
        let same = without_loads(&[&piece_a, &piece_b], |_| false).unwrap();
        assert_eq!(same, [piece_a.clone(), piece_b.clone()]);

        // Bad input is an error, never a panic.
        assert!(without_loads(&[], |_| true).is_err());
        assert!(without_loads(&[&piece_a[..30]], |_| true).is_err());
        let cut = &piece_b[..piece_b.len() - 3];
        let e = without_loads(&[&piece_a, cut], |_| true).unwrap_err();
        assert!(e.to_string().contains("record boundary"), "{e}");
        let mut bad = piece_a.clone();
        bad[0] ^= 0xff;
        assert!(without_loads(&[&bad], |_| true).is_err());
        for end in 0..piece_a.len() {
            let _ = without_loads(&[&piece_a[..end], &piece_b], |o| o % 2 == 0);
        }
    }

    #[test]
    fn deferred_groups_go_back_before_their_code_load() {
        use crate::jitdump_write as w;
        let load = |i: u64| {
            w::code_load(
                i,
                &w::CodeLoad {
                    pid: 1,
                    tid: 1,
                    code_addr: 0x1000 * (i + 1),
                    code_index: i,
                    name: "f",
                    code: &[0x90; 16],
                },
            )
        };
        let mut file = w::header(1, 0, false);
        file.extend(load(0));
        file.extend(load(1));
        let lines = w::debug_info(1, 0x2000, &[(0x2000, 3, "F.java")]);
        let names = w::method_names(2, &[(0x77, "F.g".to_string())]);
        let groups =
            std::collections::BTreeMap::from([(1, lines.clone()), (u64::MAX, names.clone())]);
        let header = parse_header(&file).unwrap();
        let merged = with_groups(&file, &header, &groups);
        let ids: Vec<RecordId> = parse_records(&merged, &header, 0)
            .records
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(
            ids,
            [
                RecordId::CODE_LOAD,
                RecordId::CODE_DEBUG_INFO,
                RecordId::CODE_LOAD,
                RecordId::JPROF_METHOD_NAMES
            ]
        );
        assert!(is_deferrable(RecordId::CODE_DEBUG_INFO) && !is_deferrable(RecordId::CODE_LOAD));
    }

    /// V8's jitdump of a real Node run: every record parses the same without the code, which
    /// was most of the file.
    #[test]
    fn leaving_the_code_out_keeps_every_record_jprof_reads() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/shared/node/jit-13228.dump"
        );
        let file = std::fs::read(path).unwrap();
        let header = parse_header(&file).unwrap();
        let start = header.records_start();
        let full = parse_record_stream(&file[start..], start, header.endian);
        assert!(full.error.is_none());
        let compact = without_code(&file[start..], header.endian);
        assert!(
            compact.len() * 4 < file.len(),
            "{} bytes left",
            compact.len()
        );
        let kept = parse_record_stream(&compact, start, header.endian);
        assert!(kept.error.is_none());
        let bodies = |b: &Batch| -> Vec<(RecordId, u64, RecordBody)> {
            b.records
                .iter()
                .map(|r| (r.id, r.timestamp, r.body.clone()))
                .collect()
        };
        assert_eq!(bodies(&kept), bodies(&full));
        assert!(full
            .records
            .iter()
            .any(|r| matches!(r.body, RecordBody::CodeLoad { code_size, .. } if code_size > 0)));
    }

    #[test]
    fn a_cut_record_or_a_nameless_code_load_is_kept_as_it_is() {
        let load = |name: &[u8]| {
            let mut r = Vec::new();
            r.extend(0u32.to_be_bytes());
            let size = PREFIX_LEN + CODE_LOAD_FIXED + name.len() + 3;
            r.extend((size as u32).to_be_bytes());
            r.extend([0; 8 + CODE_LOAD_FIXED]);
            r.extend(name);
            r.extend([0x90; 3]);
            r
        };
        let named = load(b"f\0");
        let mut stream = named.clone();
        stream.extend(load(b"nameless"));
        stream.extend(&named[..20]);
        let out = without_code(&stream, Endian::Big);
        let first = PREFIX_LEN + CODE_LOAD_FIXED + 2;
        assert_eq!(out[4..8], (first as u32).to_be_bytes());
        assert_eq!(out[..4], named[..4]);
        assert_eq!(out[8..first], named[8..first]);
        assert_eq!(out[first..], stream[named.len()..]);
    }
}
