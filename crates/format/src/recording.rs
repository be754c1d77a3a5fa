//! The container format of a jprof recording (`jprof.data`): a 16-byte file header, then
//! self-delimiting chunks, each with a CRC. Written append-only, so a recorder killed mid-write
//! leaves every chunk before the last one intact. Layout: `docs/recording-format.md`.

use super::{Cursor, ParseError};

/// The first 8 bytes of every recording.
pub const MAGIC: &[u8; 8] = b"JPROFREC";
/// Written by this jprof: version 2 compresses perf records (PERF_RECORDS_ZSTD); version 3's
/// chunk CRCs cover the chunk's kind and length too, so a damaged kind is seen.
pub const VERSION: u32 = 3;
/// The oldest version still read.
pub const MIN_VERSION: u32 = 1;
const FILE_HEADER_LEN: usize = 16;
/// Bytes before each chunk's payload: kind, CRC and length.
pub const CHUNK_HEADER_LEN: usize = 16;

/// Chunk kind. Open set: readers skip kinds they do not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkKind(pub u32);

impl ChunkKind {
    /// JSON `recording::Meta`: command, host, event configuration. Always first.
    pub const META: Self = Self(1);
    /// JSON `timeline::ClockConversion`: the sample clock and TSC/wall-clock conversions.
    pub const CLOCK: Self = Self(2);
    /// Raw kernel perf records, back to back, as read from the rings.
    pub const PERF_RECORDS: Self = Self(3);
    /// JSON `recording::Summary`: counters and the end of the recording.
    pub const SUMMARY: Self = Self(4);
    /// JSON `symbolize::EmbeddedSymbols`: symbols for every sampled native address.
    pub const SYMBOLS: Self = Self(5);
    /// Empty: the recorder finished cleanly.
    pub const END: Self = Self(6);
    /// Side data from JIT runtimes (later issues): code load/move/unload events.
    pub const JIT_EVENTS: Self = Self(16);
    /// Side data: a whole side file (name + bytes).
    pub const SIDE_FILE: Self = Self(17);
    /// A SIDE_FILE piece stored compactly: the piece's header, what file bytes it stands
    /// for, then its bytes as one zstd frame (see [`PackedSide`]).
    pub const SIDE_FILE_ZSTD: Self = Self(18);
    /// PERF_RECORDS compressed as one zstd frame (with its content size); version 2.
    pub const PERF_RECORDS_ZSTD: Self = Self(7);
    /// u64 LE sample-clock ns: every perf record earlier than this is in a chunk before this
    /// one, so a reader can put records in time order a window at a time.
    pub const RECORDS_ORDER: Self = Self(8);
    /// The user stacks unwinding changed when symbols were embedded, in the embedding walk's
    /// order; a zstd frame of varint entries (`symbolize::unwound`).
    pub const UNWOUND_STACKS: Self = Self(9);
    /// SYMBOLS compressed as one zstd frame (with its content size).
    pub const SYMBOLS_ZSTD: Self = Self(10);
    /// The line and inline tables and method names a jitdump's pieces were stored without
    /// (`PackedSide::debug_deferred`), kept at the end of recording for the code and methods
    /// samples hit (see [`encode_jit_debug`]).
    pub const JIT_DEBUG: Self = Self(11);
    /// Per sample, in the embedding walk's order, the `Method*` of each interpreted frame and
    /// where the stack may have been cut short, as the embedding found them from the stack
    /// copies; a zstd frame of varint entries (`symbolize::interpreted_frames`).
    pub const INTERPRETED_FRAMES: Self = Self(12);
}

/// The 16-byte file header.
pub fn file_header() -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(FILE_HEADER_LEN as u32).to_le_bytes());
    h
}

/// Encodes one chunk: `u32 kind, u32 crc32(payload), u64 len, payload, zero pad to 8`.
pub fn encode_chunk(kind: ChunkKind, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(CHUNK_HEADER_LEN + payload.len() + 8);
    out.extend_from_slice(&chunk_header(kind, payload));
    out.extend_from_slice(payload);
    out.extend_from_slice(chunk_padding(payload.len()));
    out
}

/// A chunk's header: what [`encode_chunk`] writes before the payload.
pub fn chunk_header(kind: ChunkKind, payload: &[u8]) -> [u8; CHUNK_HEADER_LEN] {
    let mut header = [0; CHUNK_HEADER_LEN];
    header[..4].copy_from_slice(&kind.0.to_le_bytes());
    header[4..8].copy_from_slice(&chunk_crc(kind.0, payload).to_le_bytes());
    header[8..].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    header
}

/// The zeros after a payload of `len` bytes: what [`encode_chunk`] writes after it.
pub fn chunk_padding(len: usize) -> &'static [u8] {
    &[0; 8][..len.next_multiple_of(8) - len]
}

/// A chunk's CRC-32 since version 3: of its kind and length (little-endian, as in the header)
/// and then its payload.
fn chunk_crc(kind: u32, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&kind.to_le_bytes());
    h.update(&(payload.len() as u64).to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// One chunk, borrowed from the file bytes.
#[derive(Clone, Copy, Debug)]
pub struct Chunk<'a> {
    /// What the payload holds.
    pub kind: ChunkKind,
    /// The payload, without header or padding.
    pub payload: &'a [u8],
    /// Offset of the payload within the file.
    pub offset: usize,
}

/// Every complete chunk, plus why reading stopped early if it did (truncation or corruption).
#[derive(Debug, Default)]
pub struct Chunks<'a> {
    /// Format version from the file header.
    pub version: u32,
    /// The intact chunks, in file order.
    pub chunks: Vec<Chunk<'a>>,
    /// The first damage or truncation met, if any.
    pub stopped: Option<ParseError>,
    /// Damaged regions skipped to reach the next chunk whose length and CRC check
    /// (byte ranges, in file order).
    pub skipped: Vec<std::ops::Range<usize>>,
    /// Bytes of zeros that end the file after the last chunk (a file padded or preallocated
    /// past what was written): not damage, and not read further than needed to see them.
    pub zero_tail: usize,
    /// A damaged file header that was read anyway, and how.
    pub header_notes: Vec<String>,
    /// Whether the file ends inside a chunk (it was cut short), rather than in damage.
    pub truncated: bool,
}

/// How much of the file is read before [`parse_chunks_releasing`] says the bytes read so far
/// may leave memory.
const RELEASE_STEP: usize = 64 << 20;

/// Splits a recording into chunks. Fails only when the file header itself is unusable; a
/// damaged or cut-off chunk is skipped (the next intact chunk is looked for) and reported in
/// `stopped` and `skipped`.
pub fn parse_chunks(file: &[u8]) -> Result<Chunks<'_>, ParseError> {
    parse_chunks_releasing(file, |_| {})
}

/// [`parse_chunks`], calling `done` with each range of bytes it has finished reading (in
/// file order, every [`RELEASE_STEP`] bytes or so), so that a caller holding the file mapped
/// can let those pages go while a large file is checked.
pub fn parse_chunks_releasing(
    file: &[u8],
    mut done: impl FnMut(std::ops::Range<usize>),
) -> Result<Chunks<'_>, ParseError> {
    let (version, header_len, header_notes) = file_header_of(file)?;
    let mut out = Chunks {
        version,
        header_notes,
        ..Default::default()
    };
    // Zeros that end the file are padding, not chunks (an all-zero header would otherwise read
    // as an empty chunk every 16 bytes); they are read once, from the end, and let go.
    let data_end = end_of_data(file, &mut done);
    // Resynchronising checks CRCs at many candidate offsets; a file built so that every
    // offset looks like a long chunk would make that quadratic. The work is bounded instead.
    let mut budget = Budget(4 * file.len() as u64 + (64 << 20));
    let mut released = 0;
    let mut pos = header_len;
    while pos < file.len() {
        let problem = match chunk_at(file, pos) {
            Ok((chunk, next)) => {
                out.chunks.push(chunk);
                pos = next;
                if pos - released >= RELEASE_STEP {
                    done(released..pos);
                    released = pos;
                }
                continue;
            }
            Err(problem) => problem,
        };
        if pos >= data_end {
            out.zero_tail = file.len() - pos;
            break;
        }
        // Resynchronise on the next whole chunk (chunks start 8-byte aligned): one damaged
        // chunk costs only itself.
        let mut next_good = None;
        for p in (pos + 8..data_end).step_by(8) {
            if budget.0 == 0 {
                break;
            }
            if resync_point(file, p, data_end, &mut budget) {
                next_good = Some(p);
                break;
            }
            if p - released >= RELEASE_STEP {
                done(released..p);
                released = p;
            }
        }
        if out.stopped.is_none() {
            let mut e = problem.describe(pos, next_good.is_some());
            if next_good.is_none() && budget.0 == 0 {
                e.expected += "; the search for intact chunks after it gave up (the bytes \
                               after it look built to make it slow)";
            }
            out.stopped = Some(e);
        }
        match next_good {
            Some(p) => {
                out.skipped.push(pos..p);
                pos = p;
            }
            None => {
                out.truncated = matches!(problem, Problem::ShortHeader | Problem::TooLong { .. });
                // Zeros after the damage still end the file as padding.
                if file.len() > data_end {
                    out.zero_tail = file.len() - data_end.max(pos);
                }
                break;
            }
        }
    }
    done(released.min(file.len())..file.len());
    Ok(out)
}

/// Where the zeros that end the file begin (the file's length if it does not end in zeros),
/// 8-byte aligned as chunks are; the zeros read are handed to `done`.
fn end_of_data(file: &[u8], done: &mut impl FnMut(std::ops::Range<usize>)) -> usize {
    /// Compared a block at a time (a `memcmp`: fast even in a debug build).
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let mut end = file.len();
    let mut zeros_from = end;
    while end > 0 {
        let start = end.saturating_sub(ZEROS.len());
        let block = &file[start..end];
        if block != &ZEROS[..block.len()] {
            let last = block.iter().rposition(|&b| b != 0).unwrap_or(0);
            return ((start + last + 1).div_ceil(8) * 8).min(file.len());
        }
        end = start;
        if zeros_from - end >= RELEASE_STEP {
            done(end..zeros_from);
            zeros_from = end;
        }
    }
    0
}

/// Reads the 16-byte file header: the format version and where the chunks start. A header
/// with one damaged bit in its magic, an impossible version no jprof wrote (one bit away from
/// a version this reader knows), or a length that does not lead to a chunk is read with a
/// note; anything else is refused.
fn file_header_of(file: &[u8]) -> Result<(u32, usize, Vec<String>), ParseError> {
    let mut notes = Vec::new();
    let mut c = Cursor::new(file, 0);
    let magic = c
        .bytes(8)
        .map_err(|_| ParseError::new(0, "the jprof recording magic \"JPROFREC\""))?;
    if magic != MAGIC {
        if differing_bits(magic, MAGIC) != 1 {
            return Err(ParseError::new(
                0,
                "the jprof recording magic \"JPROFREC\" (is this a jprof.data file?)",
            ));
        }
        notes.push(format!(
            "one bit of the file's magic is damaged (it reads {:?})",
            String::from_utf8_lossy(magic)
        ));
    }
    let found = c.u32()?;
    let version = if (MIN_VERSION..=VERSION).contains(&found) {
        found
    } else if (MIN_VERSION..=VERSION).any(|v| (v ^ found).count_ones() == 1)
        && (found == 0 || found > 0xff)
    {
        notes.push(format!(
            "the file's format version is damaged (it reads {found:#x}, one bit away from a \
             version this jprof reads); read as version {VERSION}"
        ));
        VERSION
    } else {
        return Err(ParseError::new(
            8,
            format!(
                "recording format version {MIN_VERSION} to {VERSION}, found {found} (a newer jprof wrote it, or the header is damaged)"
            ),
        ));
    };
    let declared = c.u32()? as usize;
    let plausible = (FILE_HEADER_LEN..=file.len()).contains(&declared)
        && (declared == FILE_HEADER_LEN
            || declared == file.len()
            || chunk_at(file, declared).is_ok());
    let header_len = if plausible {
        declared
    } else if file.len() < FILE_HEADER_LEN {
        return Err(ParseError::new(12, "a file header length of at least 16"));
    } else {
        notes.push(format!(
            "the file header's length is damaged (it reads {declared}); chunks read from byte {FILE_HEADER_LEN}"
        ));
        FILE_HEADER_LEN
    };
    Ok((version, header_len, notes))
}

fn differing_bits(a: &[u8], b: &[u8]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// Bytes of CRC work resynchronisation may still do.
struct Budget(u64);

/// Why there is no intact chunk at some offset.
#[derive(Debug)]
enum Problem {
    /// Fewer than 16 bytes remain.
    ShortHeader,
    /// Kind 0 is no chunk.
    NoKind,
    /// The length runs past the end of the file.
    TooLong { len: u64, avail: u64 },
    /// The payload does not match its CRC.
    BadCrc,
}

impl Problem {
    /// The error for this problem at `pos`; `more` says whether intact chunks follow (then a
    /// length that runs past the end is damage, not truncation).
    fn describe(&self, pos: usize, more: bool) -> ParseError {
        let expected = match self {
            Problem::ShortHeader => {
                "a complete 16-byte chunk header (the file is truncated)".to_string()
            }
            Problem::NoKind => "a chunk kind (it reads 0: the chunk header is damaged)".to_string(),
            Problem::TooLong { len, avail } if more => format!(
                "a chunk length that fits the file (it reads {len} bytes, {avail} remain and \
                 intact chunks follow: the chunk header is damaged)"
            ),
            Problem::TooLong { len, avail } => {
                format!("a chunk of {len} bytes, but only {avail} remain (the file is truncated)")
            }
            Problem::BadCrc => {
                "a chunk whose CRC matches its payload (the chunk is corrupt)".to_string()
            }
        };
        ParseError::new(pos, expected)
    }
}

/// The header at `pos` (kind, CRC, length) and where its payload starts, if the kind is one
/// and the length fits the file.
fn header_at(file: &[u8], pos: usize) -> Result<(ChunkKind, u32, usize, usize), Problem> {
    let mut c = Cursor::new(file.get(pos..).unwrap_or_default(), pos);
    let (Ok(kind), Ok(crc), Ok(len)) = (c.u32(), c.u32(), c.u64()) else {
        return Err(Problem::ShortHeader);
    };
    if kind == 0 {
        return Err(Problem::NoKind);
    }
    let start = pos + CHUNK_HEADER_LEN;
    let avail = (file.len() - start) as u64;
    if len > avail {
        return Err(Problem::TooLong { len, avail });
    }
    Ok((ChunkKind(kind), crc, start, len as usize))
}

/// The chunk at `pos` and where the next one starts, if its header is whole, its kind is not
/// 0, its length fits the file and its CRC matches.
fn chunk_at(file: &[u8], pos: usize) -> Result<(Chunk<'_>, usize), Problem> {
    let (kind, crc, start, len) = header_at(file, pos)?;
    let payload = &file[start..start + len];
    // Versions 1 and 2 checked the payload alone. Either form is taken whatever the header's
    // version says (it may be the damaged part); a version 3 chunk whose kind or length is
    // damaged matches neither.
    if chunk_crc(kind.0, payload) != crc && crc32fast::hash(payload) != crc {
        return Err(Problem::BadCrc);
    }
    let next = start.saturating_add(len.div_ceil(8) * 8).min(file.len());
    Ok((
        Chunk {
            kind,
            payload,
            offset: start,
        },
        next,
    ))
}

/// Whether a whole chunk starts at `pos` after damage: its own length and CRC check, its
/// padding is zeros, it is not an empty chunk inside other data (an empty payload has CRC 0)
/// unless it ends the file (`data_end`: only zeros follow), and the next chunk checks too, or
/// the file ends there. CRCs are paid from `budget`.
fn resync_point(file: &[u8], pos: usize, data_end: usize, budget: &mut Budget) -> bool {
    let checked = |p: usize, budget: &mut Budget| -> Option<(Chunk<'_>, usize)> {
        let (_, _, start, len) = header_at(file, p).ok()?;
        let padding_end = (start + len.div_ceil(8) * 8).min(file.len());
        if file[start + len..padding_end].iter().any(|&b| b != 0) {
            return None;
        }
        budget.0 = budget
            .0
            .saturating_sub(len as u64 + CHUNK_HEADER_LEN as u64);
        chunk_at(file, p).ok()
    };
    let Some((chunk, next)) = checked(pos, budget) else {
        return false;
    };
    let ends = next >= data_end;
    ends || (!chunk.payload.is_empty() && checked(next, budget).is_some())
}

/// What a side file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SideKind(pub u32);

impl SideKind {
    /// A perf jitdump file (`jit-<pid>.dump`).
    pub const JITDUMP: Self = Self(1);
    /// A perf map (`/tmp/perf-<pid>.map`).
    pub const PERF_MAP: Self = Self(2);
    /// A Mono log profiler file (.mlpd).
    pub const MLPD: Self = Self(3);
    /// An LLVM XRay log (basic or FDR mode) written during the recording.
    pub const XRAY_LOG: Self = Self(4);
    /// The XRay-instrumented binary: the piece's path names it, its data is empty.
    pub const XRAY_BINARY: Self = Self(5);
}

/// A piece of a side file (SIDE_FILE chunk): `data` is the file's bytes at `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SidePiece<'a> {
    /// What the file is.
    pub kind: SideKind,
    /// The process the file belongs to.
    pub pid: u32,
    /// Sample-clock time at which jprof read these bytes.
    pub read_at: u64,
    /// Byte offset of `data` within the file.
    pub offset: u64,
    /// The file's path, as the recorder opened it.
    pub path: &'a str,
    /// The bytes read.
    pub data: &'a [u8],
}

/// SIDE_FILE payload: `u32 kind, u32 pid, u64 read_at, u64 offset, u32 path_len, path, data`.
pub fn encode_side_piece(piece: &SidePiece<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(28 + piece.path.len() + piece.data.len());
    out.extend_from_slice(&piece.kind.0.to_le_bytes());
    out.extend_from_slice(&piece.pid.to_le_bytes());
    out.extend_from_slice(&piece.read_at.to_le_bytes());
    out.extend_from_slice(&piece.offset.to_le_bytes());
    out.extend_from_slice(&(piece.path.len() as u32).to_le_bytes());
    out.extend_from_slice(piece.path.as_bytes());
    out.extend_from_slice(piece.data);
    out
}

/// Reads a SIDE_FILE payload found at file offset `base`.
pub fn parse_side_piece(payload: &[u8], base: usize) -> Result<SidePiece<'_>, ParseError> {
    let mut c = Cursor::new(payload, base);
    let kind = SideKind(c.u32()?);
    let pid = c.u32()?;
    let read_at = c.u64()?;
    let offset = c.u64()?;
    let path_len = c.u32()? as usize;
    let path = std::str::from_utf8(c.bytes(path_len)?)
        .map_err(|_| ParseError::new(base + 28, "a UTF-8 side file path"))?;
    Ok(SidePiece {
        kind,
        pid,
        read_at,
        offset,
        path,
        data: c.rest(),
    })
}

/// What a SIDE_FILE_ZSTD piece stands for in the file it was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedSide {
    /// Bytes of the file the piece covers, from its offset.
    pub file_len: u64,
    /// CRC-32 of those file bytes (to tell whether a file on disk is still the one read).
    pub file_crc: u32,
    /// The jitdump's CODE_LOAD records were stored without their machine code
    /// (`jitdump::without_code`), so the stored bytes are fewer than `file_len`.
    pub code_left_out: bool,
    /// The jitdump's DEBUG_INFO, DEBUG_INFO2 and METHOD_NAMES records were taken out of the
    /// stored bytes; those a report can use are in JIT_DEBUG chunks.
    pub debug_deferred: bool,
    /// The jitdump's CODE_LOAD records no sample's frame lies in were left out at the end of
    /// recording, with the records only they read (`jitdump::without_loads`), so the stored
    /// bytes are fewer than `file_len` and JIT_DEBUG ordinals count the loads kept.
    pub loads_left_out: bool,
}

/// `PackedSide::code_left_out` in the flags word.
const FLAG_CODE_LEFT_OUT: u32 = 1;
/// `PackedSide::debug_deferred` in the flags word.
const FLAG_DEBUG_DEFERRED: u32 = 2;
/// `PackedSide::loads_left_out` in the flags word.
const FLAG_LOADS_LEFT_OUT: u32 = 4;

/// SIDE_FILE_ZSTD payload: the SIDE_FILE header (`u32 kind, u32 pid, u64 read_at, u64 offset,
/// u32 path_len, path`), then `u64 file_len, u32 file_crc, u32 flags` and `piece.data`, which
/// is the zstd frame of the stored bytes.
pub fn encode_packed_side_piece(piece: &SidePiece<'_>, packed: &PackedSide) -> Vec<u8> {
    let header = encode_side_piece(&SidePiece {
        data: &[],
        ..*piece
    });
    let mut out = Vec::with_capacity(header.len() + 16 + piece.data.len());
    out.extend_from_slice(&header);
    out.extend_from_slice(&packed.file_len.to_le_bytes());
    out.extend_from_slice(&packed.file_crc.to_le_bytes());
    let mut flags = 0;
    if packed.code_left_out {
        flags |= FLAG_CODE_LEFT_OUT;
    }
    if packed.debug_deferred {
        flags |= FLAG_DEBUG_DEFERRED;
    }
    if packed.loads_left_out {
        flags |= FLAG_LOADS_LEFT_OUT;
    }
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(piece.data);
    out
}

/// Reads a SIDE_FILE_ZSTD payload found at file offset `base`; the piece's `data` is the
/// zstd frame, still compressed.
pub fn parse_packed_side_piece(
    payload: &[u8],
    base: usize,
) -> Result<(SidePiece<'_>, PackedSide), ParseError> {
    let head = parse_side_piece(payload, base)?;
    let at = base + (payload.len() - head.data.len());
    let mut c = Cursor::new(head.data, at);
    let file_len = c.u64()?;
    let file_crc = c.u32()?;
    let flags = c.u32()?;
    let packed = PackedSide {
        file_len,
        file_crc,
        code_left_out: flags & FLAG_CODE_LEFT_OUT != 0,
        debug_deferred: flags & FLAG_DEBUG_DEFERRED != 0,
        loads_left_out: flags & FLAG_LOADS_LEFT_OUT != 0,
    };
    Ok((
        SidePiece {
            data: c.rest(),
            ..head
        },
        packed,
    ))
}

/// The deferred records of one jitdump (a JIT_DEBUG chunk): the process, the file's path as
/// its SIDE_FILE_ZSTD pieces name it, and the records' groups. A group is every deferred
/// record that stood between the CODE_LOAD records `ordinal - 1` and `ordinal` (counted from
/// 0 in the file), so it goes back right before CODE_LOAD `ordinal`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JitDebug<'a> {
    /// The process the jitdump belongs to.
    pub pid: u32,
    /// The jitdump's path.
    pub path: &'a str,
    /// The groups' encoding (see [`encode_jit_debug_groups`]), as one zstd frame.
    pub data: &'a [u8],
}

/// JIT_DEBUG payload: `u32 pid, u32 path_len, path`, then the zstd frame of the groups.
pub fn encode_jit_debug(debug: &JitDebug<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + debug.path.len() + debug.data.len());
    out.extend_from_slice(&debug.pid.to_le_bytes());
    out.extend_from_slice(&(debug.path.len() as u32).to_le_bytes());
    out.extend_from_slice(debug.path.as_bytes());
    out.extend_from_slice(debug.data);
    out
}

/// Reads a JIT_DEBUG payload found at file offset `base` (its `data` still compressed).
pub fn parse_jit_debug(payload: &[u8], base: usize) -> Result<JitDebug<'_>, ParseError> {
    let mut c = Cursor::new(payload, base);
    let pid = c.u32()?;
    let path_len = c.u32()? as usize;
    let path = std::str::from_utf8(c.bytes(path_len)?)
        .map_err(|_| ParseError::new(base + 8, "a UTF-8 jitdump path"))?;
    Ok(JitDebug {
        pid,
        path,
        data: c.rest(),
    })
}

/// Groups of records, each `u64 ordinal, u32 len, len bytes` (little-endian).
pub fn encode_jit_debug_groups<'a>(groups: impl IntoIterator<Item = (u64, &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    for (ordinal, records) in groups {
        out.extend_from_slice(&ordinal.to_le_bytes());
        out.extend_from_slice(&(records.len() as u32).to_le_bytes());
        out.extend_from_slice(records);
    }
    out
}

/// The groups of [`encode_jit_debug_groups`] read back from `bytes` (found at offset `base`
/// of the decompressed data); a damaged group ends the list with its error.
pub fn parse_jit_debug_groups(
    bytes: &[u8],
    base: usize,
) -> (Vec<(u64, &[u8])>, Option<ParseError>) {
    let mut c = Cursor::new(bytes, base);
    let mut groups = Vec::new();
    while !c.rest().is_empty() {
        let group = (|| {
            let ordinal = c.u64()?;
            let len = c.u32()? as usize;
            Ok((ordinal, c.bytes(len)?))
        })();
        match group {
            Ok(g) => groups.push(g),
            Err(e) => return (groups, Some(e)),
        }
    }
    (groups, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    fn sample_file() -> Vec<u8> {
        let mut f = file_header().to_vec();
        f.extend(encode_chunk(ChunkKind::META, b"{\"a\":1}"));
        f.extend(encode_chunk(
            ChunkKind::PERF_RECORDS,
            &[1, 2, 3, 4, 5, 6, 7, 8, 9],
        ));
        f.extend(encode_chunk(ChunkKind(999), b""));
        f
    }

    #[test]
    fn round_trip() {
        let f = sample_file();
        let c = parse_chunks(&f).unwrap();
        assert!(c.stopped.is_none());
        let kinds: Vec<_> = c.chunks.iter().map(|c| c.kind).collect();
        assert_eq!(
            kinds,
            [ChunkKind::META, ChunkKind::PERF_RECORDS, ChunkKind(999)]
        );
        assert_eq!(c.chunks[1].payload.len(), 9);
    }

    #[test]
    fn every_truncation_keeps_the_complete_chunks() {
        let f = sample_file();
        for cut in FILE_HEADER_LEN..f.len() {
            let c = parse_chunks(&f[..cut]).unwrap();
            let complete = [16 + 24, 16 + 24 + 32, 16 + 24 + 32 + 16]
                .iter()
                .filter(|&&end| end <= cut)
                .count();
            assert!(c.chunks.len() >= complete.min(2), "cut {cut}");
            assert!(c.chunks.len() <= complete.max(1) + 1, "cut {cut}");
        }
    }

    /// A recording of the given chunks, and where each one's payload is.
    fn file_of(chunks: &[(u32, Vec<u8>)]) -> (Vec<u8>, Vec<(u32, usize, usize)>) {
        let mut f = file_header().to_vec();
        let mut at = Vec::new();
        for (kind, payload) in chunks {
            at.push((*kind, f.len() + CHUNK_HEADER_LEN, payload.len()));
            f.extend(encode_chunk(ChunkKind(*kind), payload));
        }
        (f, at)
    }

    /// (kind, payload offset, payload length) of what was read.
    fn read(chunks: &Chunks<'_>) -> Vec<(u32, usize, usize)> {
        chunks
            .chunks
            .iter()
            .map(|c| (c.kind.0, c.offset, c.payload.len()))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Written chunks read back as they were; a file cut anywhere after its header keeps
        /// exactly the chunks that were whole before the cut.
        #[test]
        fn chunks_read_back_and_a_cut_keeps_every_whole_chunk(
            chunks in vec((1u32..=20, vec(any::<u8>(), 0..100)), 0..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let (file, written) = file_of(&chunks);
            let whole = parse_chunks(&file).unwrap();
            prop_assert_eq!(read(&whole), written.clone());
            for (c, (_, payload)) in whole.chunks.iter().zip(&chunks) {
                prop_assert_eq!(c.payload, &payload[..]);
            }
            prop_assert!(whole.stopped.is_none() && whole.skipped.is_empty() && !whole.truncated);

            let cut = FILE_HEADER_LEN + cut.index(file.len() - FILE_HEADER_LEN + 1);
            let before_cut: Vec<_> = written
                .iter()
                .copied()
                .filter(|&(_, offset, len)| offset + len <= cut)
                .collect();
            prop_assert_eq!(read(&parse_chunks(&file[..cut]).unwrap()), before_cut);
        }

        /// One flipped bit anywhere after the file header (whose damage has its own test above)
        /// loses at most the chunk it is in: every chunk read is one that was written, and at
        /// most one is missing.
        #[test]
        fn one_flipped_bit_costs_at_most_one_chunk(
            chunks in vec((1u32..=20, vec(any::<u8>(), 1..100)), 1..6),
            at in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let (mut file, written) = file_of(&chunks);
            let at = FILE_HEADER_LEN + at.index(file.len() - FILE_HEADER_LEN);
            file[at] ^= 1 << bit;
            let damaged = parse_chunks(&file).unwrap();
            let got = read(&damaged);
            prop_assert!(got.iter().all(|c| written.contains(c)), "{got:?} vs {written:?}");
            prop_assert!(got.len() + 1 >= written.len(), "{got:?} vs {written:?}");
        }
    }

    #[test]
    fn corruption_is_reported_with_offset() {
        let mut f = sample_file();
        f[16 + 16 + 24 + 2] ^= 0xff; // inside the second chunk's payload
        let c = parse_chunks(&f).unwrap();
        // The chunks before and after the damaged one are read; the damage is skipped.
        assert_eq!(c.chunks.len(), 2);
        assert_eq!(c.skipped, vec![16 + 24..16 + 24 + 32]);
        let e = c.stopped.unwrap();
        assert_eq!(e.offset, 16 + 24);
        assert!(e.expected.contains("corrupt"));
    }

    /// Versions 1 and 2 checked the payload alone: their files are still read.
    #[test]
    fn a_version_2_file_is_still_read() {
        let mut f = file_header().to_vec();
        f[8..12].copy_from_slice(&2u32.to_le_bytes());
        for (kind, payload) in [(ChunkKind::META, &b"{\"a\":1}"[..]), (ChunkKind::END, b"")] {
            let mut chunk = encode_chunk(kind, payload);
            chunk[4..8].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
            f.extend(chunk);
        }
        let c = parse_chunks(&f).unwrap();
        assert_eq!(c.version, 2);
        assert!(c.stopped.is_none());
        assert_eq!(c.chunks.len(), 2);
        // Version 3 chunks tell a damaged kind; version 2 ones cannot.
        let mut v3 = sample_file();
        v3[16] ^= 2; // META becomes kind 3
        assert_eq!(parse_chunks(&v3).unwrap().skipped.len(), 1);
    }

    #[test]
    fn a_zero_tail_is_padding_not_chunks() {
        let mut f = sample_file();
        let intact = f.len();
        f.resize(intact + (3 << 20) + 5, 0);
        let mut released = 0;
        let c = parse_chunks_releasing(&f, |r| released += r.len()).unwrap();
        assert_eq!(c.chunks.len(), 3);
        assert!(c.stopped.is_none() && c.skipped.is_empty());
        assert_eq!(c.zero_tail, f.len() - intact);
        assert_eq!(released, f.len(), "every byte read is handed back");
    }

    #[test]
    fn a_damaged_length_with_chunks_after_it_is_damage_not_truncation() {
        let mut f = sample_file();
        let second = 16 + 24;
        f[second + 8 + 5] = 0x40; // the PERF_RECORDS chunk's length: now far past the end
        let c = parse_chunks(&f).unwrap();
        assert_eq!(c.chunks.len(), 2, "the chunks before and after");
        let e = c.stopped.unwrap();
        assert_eq!(e.offset, second);
        assert!(e.expected.contains("the chunk header is damaged"), "{e}");
        assert!(!e.expected.contains("truncated"), "{e}");
        // The same length in the last chunk of a cut file is truncation.
        let cut = &f[..second + 16 + 4];
        let e = parse_chunks(cut).unwrap().stopped.unwrap();
        assert!(e.expected.contains("the file is truncated"), "{e}");
    }

    #[test]
    fn one_damaged_bit_in_the_magic_or_header_length_is_read_around() {
        for (byte, bit) in [(0, 0), (7, 6), (12, 3), (13, 0), (15, 7)] {
            let mut f = sample_file();
            f[byte] ^= 1 << bit;
            let c = parse_chunks(&f).unwrap();
            assert_eq!(c.chunks.len(), 3, "byte {byte} bit {bit}");
            assert_eq!(c.header_notes.len(), 1, "byte {byte} bit {bit}");
        }
        // Two damaged bits in the magic: not a recording.
        let mut f = sample_file();
        f[0] ^= 3;
        assert!(parse_chunks(&f).is_err());
        // Version 0x1003 is no version; version 4 may be a newer jprof's.
        let mut f = sample_file();
        f[9] ^= 1 << 4;
        assert_eq!(parse_chunks(&f).unwrap().header_notes.len(), 1);
        f = sample_file();
        f[8] = 4;
        assert!(parse_chunks(&f)
            .unwrap_err()
            .expected
            .contains("newer jprof"));
    }

    /// Found by libFuzzer: a header length that is not a multiple of 8 put the search for
    /// intact chunks past the end of the file (a panic).
    #[test]
    fn any_header_length_and_any_cut_is_read_without_a_panic() {
        let crash =
            include_bytes!("../../../fuzz/seeds/recording_reader/crash-header-length-resync.data");
        assert!(parse_chunks(crash).is_ok());
        for header_len in 16..40u32 {
            // Chunks right after a header of that length, the second one damaged.
            let mut f = file_header().to_vec();
            f[12..16].copy_from_slice(&header_len.to_le_bytes());
            f.resize(header_len as usize, 0);
            f.extend(encode_chunk(ChunkKind::META, b"{}"));
            let second = f.len();
            f.extend(encode_chunk(ChunkKind::PERF_RECORDS, &[7; 20]));
            f.extend(encode_chunk(ChunkKind::SUMMARY, b"{}"));
            f[second + 20] ^= 1;
            for cut in 0..=f.len() {
                let _ = parse_chunks(&f[..cut]);
            }
        }
    }

    #[test]
    fn bytes_built_to_make_resynchronising_slow_are_given_up_on() {
        // Every 8-byte word reads as a chunk header of kind 65536 whose 64 KiB payload fits
        // the file: without a bound, each of 2 M offsets would checksum 64 KiB.
        let mut f = file_header().to_vec();
        f.extend(encode_chunk(ChunkKind::META, b"{}"));
        f.extend([1u8; 8]); // damage
        for _ in 0..(2 << 20) {
            f.extend(0x1_0000u64.to_le_bytes());
        }
        let start = std::time::Instant::now();
        let c = parse_chunks(&f).unwrap();
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
        assert_eq!(c.chunks.len(), 1);
        assert!(c.stopped.unwrap().expected.contains("gave up"));
    }

    #[test]
    fn side_piece_round_trip() {
        let piece = SidePiece {
            kind: SideKind::JITDUMP,
            pid: 42,
            read_at: 7,
            offset: 40,
            path: "/tmp/jit-42.dump",
            data: &[1, 2, 3],
        };
        let bytes = encode_side_piece(&piece);
        assert_eq!(parse_side_piece(&bytes, 0).unwrap(), piece);
        assert!(parse_side_piece(&bytes[..30], 0).is_err());
    }

    #[test]
    fn packed_side_piece_round_trip() {
        let piece = SidePiece {
            kind: SideKind::JITDUMP,
            pid: 42,
            read_at: 7,
            offset: 40,
            path: "/tmp/jit-42.dump",
            data: &[9, 8, 7],
        };
        let packed = PackedSide {
            file_len: 1000,
            file_crc: 0xdead_beef,
            code_left_out: true,
            debug_deferred: true,
            loads_left_out: true,
        };
        let bytes = encode_packed_side_piece(&piece, &packed);
        assert_eq!(parse_packed_side_piece(&bytes, 0).unwrap(), (piece, packed));
        // Cut inside the packed fields: an error at the offset where they were expected.
        let e = parse_packed_side_piece(&bytes[..28 + piece.path.len() + 10], 100).unwrap_err();
        assert_eq!(e.offset, 100 + 28 + piece.path.len() + 8);
    }

    #[test]
    fn jit_debug_round_trips_and_a_cut_group_is_an_error() {
        let groups = encode_jit_debug_groups([(0, &b"ab"[..]), (7, &b"cde"[..])]);
        let (read, error) = parse_jit_debug_groups(&groups, 100);
        assert_eq!(read, vec![(0, &b"ab"[..]), (7, &b"cde"[..])]);
        assert!(error.is_none());
        let (read, error) = parse_jit_debug_groups(&groups[..groups.len() - 1], 100);
        assert_eq!(read, vec![(0, &b"ab"[..])]);
        assert_eq!(error.unwrap().offset, 100 + 14 + 12);
        let debug = JitDebug {
            pid: 9,
            path: "/w/jit-9.dump",
            data: b"frame",
        };
        let payload = encode_jit_debug(&debug);
        assert_eq!(parse_jit_debug(&payload, 0).unwrap(), debug);
        assert!(parse_jit_debug(&payload[..10], 0).is_err());
    }

    #[test]
    fn wrong_magic_is_an_error() {
        let e = parse_chunks(b"PERFILE2xxxxxxxxxxxxxxxx").unwrap_err();
        assert_eq!(e.offset, 0);
    }
}
