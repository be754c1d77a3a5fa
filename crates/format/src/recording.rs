//! The container format of a jprof recording (`jprof.data`): a 16-byte file header, then
//! self-delimiting chunks, each with a CRC. Written append-only, so a recorder killed mid-write
//! leaves every chunk before the last one intact. Layout: `docs/recording-format.md`.

use super::{Cursor, ParseError};

/// The first 8 bytes of every recording.
pub const MAGIC: &[u8; 8] = b"JPROFREC";
/// Written by this jprof: version 2 compresses perf records (PERF_RECORDS_ZSTD).
pub const VERSION: u32 = 2;
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
    /// PERF_RECORDS compressed as one zstd frame (with its content size); version 2.
    pub const PERF_RECORDS_ZSTD: Self = Self(7);
    /// u64 LE sample-clock ns: every perf record earlier than this is in a chunk before this
    /// one, so a reader can put records in time order a window at a time.
    pub const RECORDS_ORDER: Self = Self(8);
    /// The user stacks unwinding changed when symbols were embedded, in the embedding walk's
    /// order; a zstd frame of varint entries (`symbolize::unwound`).
    pub const UNWOUND_STACKS: Self = Self(9);
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
    let padded = payload.len().div_ceil(8) * 8;
    let mut out = Vec::with_capacity(CHUNK_HEADER_LEN + padded);
    out.extend_from_slice(&kind.0.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    out.resize(CHUNK_HEADER_LEN + padded, 0);
    out
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
}

/// Splits a recording into chunks. Fails only when the file header itself is wrong; a damaged
/// or cut-off chunk ends the list and is reported in `stopped`.
pub fn parse_chunks(file: &[u8]) -> Result<Chunks<'_>, ParseError> {
    let mut c = Cursor::new(file, 0);
    let magic = c
        .bytes(8)
        .map_err(|_| ParseError::new(0, "the jprof recording magic \"JPROFREC\""))?;
    if magic != MAGIC {
        return Err(ParseError::new(
            0,
            "the jprof recording magic \"JPROFREC\" (is this a jprof.data file?)",
        ));
    }
    let version = c.u32()?;
    if !(MIN_VERSION..=VERSION).contains(&version) {
        return Err(ParseError::new(
            8,
            format!(
                "recording format version {MIN_VERSION} to {VERSION}, found {version} (a newer jprof wrote it?)"
            ),
        ));
    }
    let header_len = c.u32()? as usize;
    if header_len < FILE_HEADER_LEN || header_len > file.len() {
        return Err(ParseError::new(12, "a file header length of at least 16"));
    }
    let mut out = Chunks {
        version,
        ..Default::default()
    };
    let mut pos = header_len;
    while pos < file.len() {
        match chunk_at(file, pos) {
            Ok((chunk, next)) => {
                out.chunks.push(chunk);
                pos = next;
            }
            Err(e) => {
                // Resynchronise on the next whole chunk (chunks start 8-byte aligned): one
                // damaged chunk costs only itself.
                let next_good = (pos + 8..file.len())
                    .step_by(8)
                    .find(|&p| resync_point(file, p));
                if out.stopped.is_none() {
                    out.stopped = Some(e);
                }
                match next_good {
                    Some(p) => {
                        out.skipped.push(pos..p);
                        pos = p;
                    }
                    None => break,
                }
            }
        }
    }
    Ok(out)
}

/// The chunk at `pos` and where the next one starts, if its header is whole, its length fits
/// the file and its CRC matches.
fn chunk_at(file: &[u8], pos: usize) -> Result<(Chunk<'_>, usize), ParseError> {
    let mut c = Cursor::new(&file[pos..], pos);
    let header = (|| Ok::<_, ParseError>((c.u32()?, c.u32()?, c.u64()?)))();
    let Ok((kind, crc, len)) = header else {
        return Err(ParseError::new(
            pos,
            "a complete 16-byte chunk header (the file is truncated)",
        ));
    };
    let start = pos + CHUNK_HEADER_LEN;
    let avail = (file.len() - start) as u64;
    if len > avail {
        return Err(ParseError::new(
            pos,
            format!("a chunk of {len} bytes, but only {avail} remain (the file is truncated)"),
        ));
    }
    let payload = &file[start..start + len as usize];
    if crc32fast::hash(payload) != crc {
        return Err(ParseError::new(
            pos,
            "a chunk whose CRC matches its payload (the chunk is corrupt)",
        ));
    }
    let padded = (len as usize).div_ceil(8) * 8;
    let next = start.saturating_add(padded).min(file.len());
    Ok((
        Chunk {
            kind: ChunkKind(kind),
            payload,
            offset: start,
        },
        next,
    ))
}

/// Whether a whole chunk starts at `pos` after damage: its own length and CRC check, it is not
/// an empty chunk inside other data (an empty payload has CRC 0, which zeroed bytes imitate)
/// unless it ends the file, and the next chunk checks too, or the file ends there.
fn resync_point(file: &[u8], pos: usize) -> bool {
    let Ok((chunk, next)) = chunk_at(file, pos) else {
        return false;
    };
    let ends = next >= file.len();
    chunk.kind.0 != 0
        && (!chunk.payload.is_empty() || ends)
        && (ends || chunk_at(file, next).is_ok())
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn wrong_magic_is_an_error() {
        let e = parse_chunks(b"PERFILE2xxxxxxxxxxxxxxxx").unwrap_err();
        assert_eq!(e.offset, 0);
    }
}
