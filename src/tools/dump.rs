//! `jprof dump FILE`: a readable listing of a jitdump (header, then every record with its file
//! offset) or of a jprof recording (its chunks and what they say). For debugging producers and
//! recordings; the listing is plain text meant for people and grep, not a stable format.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use crate::error::{Error, Result};
use crate::format::jitdump::{self, Header, Record, RecordBody, RecordId, TierKind};
use crate::format::perf::{RecordIter, RecordKind};
use crate::format::recording::{self as container, ChunkKind, SideKind};
use crate::format::{Cursor, Endian, ParseError};
use crate::recording::{Meta, Summary};

/// How a listing ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// Everything was read (or the file merely stops mid-record, which a note says).
    Complete,
    /// A byte sequence that cannot be right; everything before it was listed.
    Corrupt(ParseError),
}

/// Lists `path` on `out`. A corrupt file is listed up to the damage, then the damage is
/// returned as an error naming its offset.
pub fn run(path: &Path, out: &mut dyn Write) -> Result<()> {
    let bytes = crate::foreign_file::named_file_bytes(path).map_err(|e| e.into_error(path))?;
    let ending = if bytes.starts_with(container::MAGIC) {
        dump_recording(
            &bytes,
            &|r: std::ops::Range<usize>| bytes.release(r.start, r.len()),
            out,
        )
    } else {
        dump_jitdump(&bytes, out)
    }
    .map_err(|e| Error::io(Path::new("<stdout>"), e))?;
    match ending {
        Ending::Complete => Ok(()),
        Ending::Corrupt(e) => {
            // The listing names offsets in hex; say where it broke off in both bases.
            writeln!(
                out,
                "error at offset {} ({:#x}): expected {}",
                e.offset, e.offset, e.expected
            )
            .map_err(|e| Error::io(Path::new("<stdout>"), e))?;
            Err(Error::parse(path, e))
        }
    }
}

fn id_name(id: RecordId) -> String {
    match id {
        RecordId::CODE_LOAD => "CODE_LOAD".into(),
        RecordId::CODE_MOVE => "CODE_MOVE".into(),
        RecordId::CODE_DEBUG_INFO => "DEBUG_INFO".into(),
        RecordId::CODE_CLOSE => "CODE_CLOSE".into(),
        RecordId::CODE_UNWINDING_INFO => "UNWINDING_INFO".into(),
        RecordId::SAMPLY_DEBUG_INFO2 => "DEBUG_INFO2".into(),
        RecordId::SAMPLY_JIT_TIER => "JIT_TIER".into(),
        RecordId::SAMPLY_EMBEDDED_SOURCE => "EMBEDDED_SOURCE".into(),
        RecordId::JPROF_CODE_UNLOAD => "JPROF_CODE_UNLOAD".into(),
        RecordId::JPROF_J9_METADATA => "JPROF_J9_METADATA".into(),
        RecordId::JPROF_METHOD_NAMES => "JPROF_METHOD_NAMES".into(),
        RecordId(other) => format!("UNKNOWN({other})"),
    }
}

fn machine_name(elf_mach: u32) -> &'static str {
    match elf_mach {
        3 => "i386",
        8 => "MIPS",
        20 => "PowerPC",
        21 => "PowerPC64",
        22 => "s390",
        40 => "ARM",
        62 => "x86-64",
        183 => "AArch64",
        243 => "RISC-V",
        258 => "LoongArch",
        _ => "unknown machine",
    }
}

fn tier_kind_name(kind: TierKind) -> &'static str {
    match kind {
        TierKind::INTERPRETER => "interpreter",
        TierKind::BASELINE => "baseline",
        TierKind::OPTIMIZED => "optimized",
        TierKind::STUB => "stub",
        _ => "unknown",
    }
}

/// `total_size` of the record prefix at `offset`, read in the file's byte order.
fn record_size(bytes: &[u8], offset: usize, endian: Endian) -> Option<u32> {
    let mut c = Cursor::with_endian(bytes.get(offset..)?, offset, endian);
    c.u32().ok()?;
    c.u32().ok()
}

fn dump_header(h: &Header, out: &mut dyn Write) -> io::Result<()> {
    let endian = match h.endian {
        Endian::Little => "little-endian",
        Endian::Big => "big-endian",
    };
    writeln!(out, "header @0x0 (40 bytes)")?;
    writeln!(out, "  magic       0x4a695444 \"JiTD\" ({endian})")?;
    writeln!(out, "  version     {}", h.version)?;
    let note = match h.size_note() {
        Some(n) => format!(" (note: {n})"),
        None if (h.total_size as usize) < jitdump::HEADER_LEN => {
            " (below 40: records start at 40)".to_string()
        }
        None => String::new(),
    };
    writeln!(out, "  total_size  {}{note}", h.total_size)?;
    writeln!(
        out,
        "  elf_mach    {} ({})",
        h.elf_mach,
        machine_name(h.elf_mach)
    )?;
    writeln!(out, "  pid         {}", h.pid)?;
    writeln!(out, "  timestamp   {}", h.timestamp)?;
    let clock = if h.arch_timestamp() {
        "ARCH_TIMESTAMP: timestamps are TSC ticks"
    } else {
        "timestamps are CLOCK_MONOTONIC ns"
    };
    writeln!(out, "  flags       {:#x} ({clock})", h.flags)?;
    Ok(())
}

fn opt(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("?")
}

fn dump_record(r: &Record, size: Option<u32>, out: &mut dyn Write) -> io::Result<()> {
    let size = size.map_or_else(|| "?".to_string(), |s| s.to_string());
    write!(
        out,
        "@{:#x} {} ts={} size={size}",
        r.offset,
        id_name(r.id),
        r.timestamp
    )?;
    match &r.body {
        RecordBody::CodeLoad {
            pid,
            tid,
            vma,
            code_addr,
            code_size,
            code_index,
            name,
        } => writeln!(
            out,
            " pid={pid} tid={tid} vma={vma:#x} code_addr={code_addr:#x} code_size={code_size:#x} \
             code_index={code_index} name={name:?}"
        ),
        RecordBody::CodeMove {
            pid,
            tid,
            vma,
            old_code_addr,
            new_code_addr,
            code_size,
            code_index,
        } => writeln!(
            out,
            " pid={pid} tid={tid} vma={vma:#x} old_code_addr={old_code_addr:#x} \
             new_code_addr={new_code_addr:#x} code_size={code_size:#x} code_index={code_index}"
        ),
        RecordBody::DebugInfo { code_addr, entries } => {
            writeln!(out, " code_addr={code_addr:#x} entries={}", entries.len())?;
            for e in entries {
                writeln!(
                    out,
                    "    {:#x} {}:{} discrim={}",
                    e.addr, e.file, e.line, e.discrim
                )?;
            }
            Ok(())
        }
        RecordBody::Close => writeln!(out),
        RecordBody::CodeUnload {
            code_addr,
            code_index,
        } => writeln!(out, " code_addr={code_addr:#x} code_index={code_index}"),
        RecordBody::UnwindingInfo {
            eh_frame,
            eh_frame_hdr,
            mapped_size,
        } => writeln!(
            out,
            " unwinding_size={} eh_frame={} eh_frame_hdr={} mapped_size={mapped_size:#x}",
            eh_frame.len() + eh_frame_hdr.len(),
            eh_frame.len(),
            eh_frame_hdr.len()
        ),
        RecordBody::DebugInfo2(info) => {
            writeln!(
                out,
                " functions={} inline_calls={} lines={}",
                info.functions.len(),
                info.inline_calls.len(),
                info.lines.len()
            )?;
            for (i, f) in info.functions.iter().enumerate() {
                writeln!(
                    out,
                    "    function[{i}] {:?} {}:{}:{} flags={:#x}",
                    f.name,
                    opt(&f.file),
                    f.start_line,
                    f.start_column,
                    f.flags
                )?;
            }
            for call in &info.inline_calls {
                let ranges: Vec<String> = call
                    .ranges
                    .iter()
                    .map(|&(start, len)| format!("+{start:#x}..+{:#x}", start as u64 + len as u64))
                    .collect();
                writeln!(
                    out,
                    "    {:indent$}inline depth={} function[{}] call_line={}:{} ranges=[{}]",
                    "",
                    call.depth,
                    call.function,
                    call.call_line,
                    call.call_column,
                    ranges.join(" "),
                    indent = 2 * call.depth as usize
                )?;
            }
            for l in &info.lines {
                writeln!(
                    out,
                    "    line +{:#x} {}:{}:{}",
                    l.code_offset,
                    opt(&l.file),
                    l.line,
                    l.column
                )?;
            }
            Ok(())
        }
        RecordBody::JitTier(t) => writeln!(
            out,
            " code_addr={:#x}{} kind={} ({}) name={:?}",
            t.code_addr,
            if t.code_addr == 0 {
                " (the next CODE_LOAD)"
            } else {
                ""
            },
            t.kind.0,
            tier_kind_name(t.kind),
            t.name
        ),
        RecordBody::EmbeddedSource {
            code_addr,
            path,
            content,
        } => writeln!(
            out,
            " code_addr={code_addr:#x} path={path:?} content={} bytes",
            content.len()
        ),
        RecordBody::J9Metadata(md) => super::dump_j9::dump_record(md, out),
        RecordBody::MethodNames(methods) => {
            writeln!(out, " {} methods", methods.len())?;
            for (method, name) in methods.iter().take(3) {
                writeln!(out, "    {method:#x} {name}")?;
            }
            if methods.len() > 3 {
                writeln!(out, "    ...")?;
            }
            Ok(())
        }
        RecordBody::Unknown(_) => writeln!(out, " (not interpreted; skipped by its size)"),
    }
}

/// Lists a jitdump. A record cut off by the end of the file is a note (a runtime may still be
/// writing it); a record that cannot be right ends the listing as `Corrupt`.
pub fn dump_jitdump(bytes: &[u8], out: &mut dyn Write) -> io::Result<Ending> {
    writeln!(out, "jitdump, {} bytes", bytes.len())?;
    let header = match jitdump::parse_header(bytes) {
        Ok(h) => h,
        Err(e) => return Ok(Ending::Corrupt(e)),
    };
    dump_header(&header, out)?;
    let batch = jitdump::parse_records(bytes, &header, 0);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in &batch.records {
        dump_record(r, record_size(bytes, r.offset, header.endian), out)?;
        *counts.entry(id_name(r.id)).or_default() += 1;
    }
    let list: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
    writeln!(
        out,
        "{} records ({})",
        batch.records.len(),
        if list.is_empty() {
            "none".to_string()
        } else {
            list.join(", ")
        }
    )?;
    if let Some(e) = batch.error {
        return Ok(Ending::Corrupt(e));
    }
    let rest = bytes.len().saturating_sub(batch.resume_at);
    if batch.closed && rest > 0 {
        writeln!(
            out,
            "note: {rest} bytes after CODE_CLOSE at {:#x} were not read",
            batch.resume_at
        )?;
    } else if rest > 0 {
        let what = match record_size(bytes, batch.resume_at, header.endian) {
            Some(size) if rest >= 16 => format!("a {size}-byte record with {rest} bytes present"),
            _ => format!("{rest} bytes of a 16-byte record prefix"),
        };
        writeln!(
            out,
            "note: the file ends mid-record at offset {} ({:#x}): {what}; the runtime may still \
             be writing it",
            batch.resume_at, batch.resume_at
        )?;
    }
    Ok(Ending::Complete)
}

fn chunk_name(kind: ChunkKind) -> String {
    match kind {
        ChunkKind::META => "META".into(),
        ChunkKind::CLOCK => "CLOCK".into(),
        ChunkKind::PERF_RECORDS => "PERF_RECORDS".into(),
        ChunkKind::PERF_RECORDS_ZSTD => "PERF_RECORDS_ZSTD".into(),
        ChunkKind::SUMMARY => "SUMMARY".into(),
        ChunkKind::SYMBOLS => "SYMBOLS".into(),
        ChunkKind::SYMBOLS_ZSTD => "SYMBOLS_ZSTD".into(),
        ChunkKind::JIT_DEBUG => "JIT_DEBUG".into(),
        ChunkKind::INTERPRETED_FRAMES => "INTERPRETED_FRAMES".into(),
        ChunkKind::END => "END".into(),
        ChunkKind::JIT_EVENTS => "JIT_EVENTS".into(),
        ChunkKind::SIDE_FILE => "SIDE_FILE".into(),
        ChunkKind::SIDE_FILE_ZSTD => "SIDE_FILE_ZSTD".into(),
        ChunkKind::RECORDS_ORDER => "RECORDS_ORDER".into(),
        ChunkKind::UNWOUND_STACKS => "UNWOUND_STACKS".into(),
        ChunkKind(other) => format!("UNKNOWN({other})"),
    }
}

fn perf_kind_name(kind: RecordKind) -> String {
    match kind {
        RecordKind::MMAP => "MMAP".into(),
        RecordKind::LOST => "LOST".into(),
        RecordKind::COMM => "COMM".into(),
        RecordKind::EXIT => "EXIT".into(),
        RecordKind::THROTTLE => "THROTTLE".into(),
        RecordKind::UNTHROTTLE => "UNTHROTTLE".into(),
        RecordKind::FORK => "FORK".into(),
        RecordKind::SAMPLE => "SAMPLE".into(),
        RecordKind::MMAP2 => "MMAP2".into(),
        RecordKind::LOST_SAMPLES => "LOST_SAMPLES".into(),
        RecordKind::KSYMBOL => "KSYMBOL".into(),
        RecordKind(other) => format!("type {other}"),
    }
}

/// Lists a jprof recording's chunks (kind, offsets, sizes) and a summary of what they hold;
/// `release` is told which bytes the container check is done with (a mapped file lets them go).
/// A truncated file is a note; a chunk with a bad CRC or a bad file header is `Corrupt`.
pub fn dump_recording(
    bytes: &[u8],
    release: &dyn Fn(std::ops::Range<usize>),
    out: &mut dyn Write,
) -> io::Result<Ending> {
    writeln!(out, "jprof recording, {} bytes", bytes.len())?;
    let parsed = match container::parse_chunks_releasing(bytes, release) {
        Ok(p) => p,
        Err(e) => return Ok(Ending::Corrupt(e)),
    };
    writeln!(out, "format version {}", parsed.version)?;
    let mut contents = Contents::default();
    for chunk in &parsed.chunks {
        dump_chunk(chunk, &mut contents, out)?;
    }
    writeln!(out, "{} chunks", parsed.chunks.len())?;
    contents.write(out)?;
    write_ending(parsed, out)
}

/// What a recording's chunks held, for the lines after the list of chunks.
#[derive(Default)]
struct Contents {
    /// Perf records by kind.
    perf_kinds: BTreeMap<String, usize>,
    /// Where reading perf records stopped, per chunk.
    perf_errors: Vec<ParseError>,
    meta: Option<Meta>,
    summary: Option<Summary>,
    /// Executable files the MMAP2 records map: (path, build id in hex or None) → mappings.
    mapped: BTreeMap<(String, Option<String>), usize>,
}

/// The mapped file and its build id (hex, when the record carries one) of an MMAP2 record;
/// None for a data mapping or one too short to read.
fn mapped_file(raw: &crate::format::perf::RawRecord<'_>) -> Option<(String, Option<String>)> {
    use crate::format::perf::misc;
    // pid, tid, addr, len, pgoff (32 bytes), the device/inode or build id union (24), prot,
    // flags, then the NUL-terminated path.
    let body = raw.body;
    let union = body.get(32..56)?;
    let prot = u32::from_le_bytes(body.get(56..60)?.try_into().ok()?);
    if prot & libc::PROT_EXEC as u32 == 0 {
        return None;
    }
    let name = body.get(64..)?;
    let name = &name[..name.iter().position(|&b| b == 0)?];
    let id = (raw.misc & misc::MMAP_BUILD_ID != 0).then(|| {
        let n = usize::from(union[0]).min(20);
        crate::symbolize::build_id::hex(&union[4..4 + n])
    });
    Some((String::from_utf8_lossy(name).into_owned(), id))
}

impl Contents {
    /// Counts the perf records of one chunk (`records`, from file offset `at`) and ends its
    /// line with how many there are.
    fn count_perf_records(
        &mut self,
        records: &[u8],
        at: usize,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let mut n = 0usize;
        for raw in RecordIter::new(records) {
            match raw {
                Ok(raw) => {
                    n += 1;
                    *self.perf_kinds.entry(perf_kind_name(raw.kind)).or_default() += 1;
                    if raw.kind == RecordKind::MMAP2 {
                        if let Some(file) = mapped_file(&raw) {
                            *self.mapped.entry(file).or_default() += 1;
                        }
                    }
                }
                Err(mut e) => {
                    e.offset += at;
                    self.perf_errors.push(e);
                }
            }
        }
        writeln!(out, ": {n} perf records")
    }

    /// The meta, the perf records by kind and the summary.
    fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        if let Some(m) = &self.meta {
            writeln!(
                out,
                "meta: command {:?}, target pid {}, event {} at {} Hz, call graph {}, host {} ({})",
                m.command,
                m.target_pid
                    .or(m.attached_pid)
                    .map_or("?".into(), |p| p.to_string()),
                m.event.event,
                m.event.frequency_hz,
                m.event.call_graph,
                m.host.hostname,
                m.host.kernel_release
            )?;
        }
        if !self.perf_kinds.is_empty() {
            let list: Vec<String> = self
                .perf_kinds
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            writeln!(out, "perf records: {}", list.join(", "))?;
        }
        for e in &self.perf_errors {
            writeln!(out, "perf records stopped: {e}")?;
        }
        for ((path, id), n) in &self.mapped {
            let id = id.as_deref().unwrap_or("none");
            writeln!(out, "mapped: {path} build id {id} ({n} mappings)")?;
        }
        if let Some(s) = &self.summary {
            writeln!(
                out,
                "summary: {} samples, {} lost records, {} lost samples, {} dropped batches, {} threads, \
                 {} processes, {:.3} s, stopped by {}, exit code {}",
                s.samples,
                s.lost_records,
                s.lost_samples,
                s.dropped_batches,
                s.threads,
                s.processes,
                s.end_time.saturating_sub(s.start_time) as f64 / 1e9,
                s.stopped_by,
                s.exit_code.map_or("?".into(), |c| c.to_string())
            )?;
            for note in &s.notes {
                writeln!(out, "  note: {note}")?;
            }
        }
        Ok(())
    }
}

/// One chunk's line: where it is, its kind and size, and what it says.
fn dump_chunk(
    chunk: &container::Chunk<'_>,
    contents: &mut Contents,
    out: &mut dyn Write,
) -> io::Result<()> {
    let header_at = chunk.offset - container::CHUNK_HEADER_LEN;
    write!(
        out,
        "@{header_at:#x} {} payload @{:#x} {} bytes",
        chunk_name(chunk.kind),
        chunk.offset,
        chunk.payload.len()
    )?;
    match chunk.kind {
        ChunkKind::PERF_RECORDS => contents.count_perf_records(chunk.payload, chunk.offset, out)?,
        ChunkKind::PERF_RECORDS_ZSTD => {
            match crate::recording::inflate(chunk.payload, chunk.offset) {
                Ok(bytes) => {
                    write!(out, " ({} bytes decompressed)", bytes.len())?;
                    contents.count_perf_records(&bytes, chunk.offset, out)?;
                }
                Err(e) => {
                    contents.perf_errors.push(e);
                    contents.count_perf_records(&[], chunk.offset, out)?;
                }
            }
        }
        ChunkKind::SIDE_FILE => match container::parse_side_piece(chunk.payload, chunk.offset) {
            Ok(p) => writeln!(
                out,
                ": {} {:?} pid={} bytes {}..{} read_at={}",
                side_kind_name(p.kind),
                p.path,
                p.pid,
                p.offset,
                p.offset + p.data.len() as u64,
                p.read_at
            )?,
            Err(e) => writeln!(out, ": unreadable side piece ({e})")?,
        },
        ChunkKind::SIDE_FILE_ZSTD => {
            match container::parse_packed_side_piece(chunk.payload, chunk.offset) {
                Ok((p, packed)) => writeln!(
                    out,
                    ": {} {:?} pid={} bytes {}..{} read_at={}, {} compressed bytes{}{}",
                    side_kind_name(p.kind),
                    p.path,
                    p.pid,
                    p.offset,
                    p.offset + packed.file_len,
                    p.read_at,
                    p.data.len(),
                    if packed.code_left_out {
                        ", machine code left out"
                    } else {
                        ""
                    },
                    if packed.loads_left_out {
                        ", code loads no sample hit left out"
                    } else {
                        ""
                    }
                )?,
                Err(e) => writeln!(out, ": unreadable side piece ({e})")?,
            }
        }
        ChunkKind::RECORDS_ORDER => match chunk.payload.get(..8) {
            Some(b) => writeln!(
                out,
                ": every record before time {} is above",
                u64::from_le_bytes(b.try_into().unwrap_or_default())
            )?,
            None => writeln!(out, ": too short (8 bytes expected)")?,
        },
        ChunkKind::META => {
            contents.meta = serde_json::from_slice(chunk.payload).ok();
            writeln!(
                out,
                "{}",
                if contents.meta.is_some() {
                    ""
                } else {
                    " (bad JSON)"
                }
            )?;
        }
        ChunkKind::SUMMARY => {
            contents.summary = serde_json::from_slice(chunk.payload).ok();
            writeln!(
                out,
                "{}",
                if contents.summary.is_some() {
                    ""
                } else {
                    " (bad JSON)"
                }
            )?;
        }
        _ => writeln!(out)?,
    }
    Ok(())
}

/// The notes on how the file ends (damage skipped, zero padding, truncation, no END chunk);
/// damage that ends the listing is `Corrupt`.
fn write_ending(chunks: container::Chunks<'_>, out: &mut dyn Write) -> io::Result<Ending> {
    let finished = chunks.chunks.iter().any(|c| c.kind == ChunkKind::END);
    for note in &chunks.header_notes {
        writeln!(out, "note: the file header is damaged: {note}")?;
    }
    for r in &chunks.skipped {
        writeln!(
            out,
            "note: bytes {:#x}..{:#x} are damaged and were skipped",
            r.start, r.end
        )?;
    }
    let zeros = chunks.zero_tail;
    if zeros > 0 {
        writeln!(
            out,
            "note: {zeros} bytes of zeros end the file after the last chunk (padding, not chunks)"
        )?;
    }
    match chunks.stopped {
        Some(e) if chunks.truncated && chunks.skipped.is_empty() => {
            writeln!(
                out,
                "note: the file is truncated: {e}; the chunks before it are listed"
            )?;
        }
        Some(e) => return Ok(Ending::Corrupt(e)),
        None if !finished => writeln!(out, "note: no END chunk (the recorder did not finish)")?,
        None => {}
    }
    Ok(Ending::Complete)
}

/// How a side file's kind is shown.
fn side_kind_name(kind: SideKind) -> String {
    match kind {
        SideKind::JITDUMP => "jitdump".to_string(),
        SideKind::PERF_MAP => "perf map".to_string(),
        SideKind::MLPD => "Mono log".to_string(),
        SideKind::XRAY_LOG => "XRay log".to_string(),
        SideKind::XRAY_BINARY => "XRay binary".to_string(),
        SideKind(k) => format!("kind {k}"),
    }
}
