//! Mono's log profiler format (`.mlpd`): the file header, the buffers, and an incremental
//! decoder that hands every event, typed, to a visitor. Reads the 2010 original (data format 1)
//! and what Mono writes today (header 3.0, data 13–17); `layout.rs` holds every per-version
//! difference. A file Mono is still writing can be fed again as it grows: an incomplete final
//! buffer is left for the next call. A bad value skips the rest of its buffer (as the format
//! says), is counted and kept with its offset; nothing decoded before it is lost.

mod decode;
pub mod events;
mod layout;
mod visitor;

pub use events::*;
use layout::Layout;
pub use visitor::{BufferHeader, Visitor};

use decode::{decode_event, Bases, Reader};

use super::{Cursor, ParseError};

/// `LOG_HEADER_ID`, the first 4 bytes of a file (little-endian).
pub const LOG_HEADER_ID: u32 = 0x4D50_5A01;
/// `BUF_ID`, the first 4 bytes of every buffer.
pub const BUF_ID: u32 = 0x4D50_4C01;
/// Size of a buffer header, bytes.
const BUFFER_HEADER_LEN: usize = 48;
/// The newest data version this reader knows (Mono 6.8 writes 17).
const MAX_DATA_VERSION: u8 = 17;
/// Larger "buffers" are taken for garbage (Mono's are a few MB at most).
const MAX_BUFFER_LEN: u32 = 1 << 30;
/// How many problems are kept with their text (all are counted).
const KEPT_PROBLEMS: usize = 100;

/// The file header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Log profiler major version (3 in what Mono writes today, 0 in 2010).
    pub major: u8,
    /// Log profiler minor version.
    pub minor: u8,
    /// Version of the event data format (1 in 2010 files, 13–17 today).
    pub data_version: u8,
    /// Pointer size of the profiled program, bytes (4 or 8).
    pub ptr_size: u8,
    /// Wall clock, ms since the Unix epoch (0 in data format 1).
    pub startup_ms: u64,
    /// CLOCK_MONOTONIC ns, the clock of event times (header 3.0+).
    pub startup_ns: Option<u64>,
    /// Approximate cost of one timer read, ns (0 in data format 1).
    pub timer_overhead_ns: u32,
    /// File format flags; always 0 (other values are rejected).
    pub flags: u32,
    /// Process id of the profiled program (0 in data format 1).
    pub pid: u32,
    /// The command server port (header 0.x from 2011 on, 1.0+).
    pub port: u16,
    /// The `sysid` of header 0.x files.
    pub sysid: Option<u32>,
    /// The profiler's option string, such as `log:calls,output=FILE` (header 1.0+).
    pub args: String,
    /// Architecture the program ran on, such as `x86_64` (header 1.0+).
    pub arch: String,
    /// Operating system the program ran on, such as `linux` (header 1.0+).
    pub os: String,
    /// Header length in bytes: where the first buffer starts.
    pub len: usize,
}

/// Parses the file header. `Ok(None)`: not enough bytes yet (a file still being written).
pub fn parse_header(data: &[u8]) -> Result<Option<Header>, ParseError> {
    let fixed = 32usize;
    if data.len() < fixed {
        return if data.len() >= 4 && !data.starts_with(&LOG_HEADER_ID.to_le_bytes()) {
            Err(ParseError::new(0, "the .mlpd header id 0x4D505A01"))
        } else {
            Ok(None)
        };
    }
    let mut c = Cursor::new(data, 0);
    if c.u32()? != LOG_HEADER_ID {
        return Err(ParseError::new(0, "the .mlpd header id 0x4D505A01"));
    }
    let (major, minor, data_version, ptr_size) = (c.u8()?, c.u8()?, c.u8()?, c.u8()?);
    if data_version == 0 || data_version > MAX_DATA_VERSION {
        return Err(ParseError::new(
            6,
            format!("a data format version from 1 to {MAX_DATA_VERSION} (got {data_version})"),
        ));
    }
    if ptr_size != 4 && ptr_size != 8 {
        return Err(ParseError::new(
            7,
            format!("pointer size 4 or 8 (got {ptr_size})"),
        ));
    }
    let startup_ms = c.u64()?;
    let startup_ns = if major >= 3 {
        if data.len() < 38 {
            return Ok(None);
        }
        Some(c.u64()?)
    } else {
        None
    };
    let timer_overhead_ns = c.u32()?;
    let flags_at = c.position();
    let flags = c.u32()?;
    if flags != 0 {
        return Err(ParseError::new(
            flags_at,
            format!("flags 0 (got {flags:#x})"),
        ));
    }
    let pid = c.u32()?;
    let mut header = Header {
        major,
        minor,
        data_version,
        ptr_size,
        startup_ms,
        startup_ns,
        timer_overhead_ns,
        flags,
        pid,
        port: 0,
        sysid: None,
        args: String::new(),
        arch: String::new(),
        os: String::new(),
        len: 0,
    };
    if major == 0 {
        // 2010: u32 sysid; 0.x after it: u16 port, u16 sysid.
        if data_version == 1 {
            header.sysid = Some(c.u32()?);
        } else {
            header.port = c.u16()?;
            header.sysid = Some(u32::from(c.u16()?));
        }
        header.len = c.position();
        return Ok(Some(header));
    }
    header.port = c.u16()?;
    let mut strings = [String::new(), String::new(), String::new()];
    for s in &mut strings {
        match header_string(&mut c)? {
            Some(text) => *s = text,
            None => return Ok(None),
        }
    }
    let [args, arch, os] = strings;
    header.args = args;
    header.arch = arch;
    header.os = os;
    header.len = c.position();
    Ok(Some(header))
}

/// A `u32 length` (counting the NUL) and the string; `None` when the bytes are not there yet.
fn header_string(c: &mut Cursor<'_>) -> Result<Option<String>, ParseError> {
    if c.remaining() < 4 {
        return Ok(None);
    }
    let at = c.offset();
    let len = c.u32()? as usize;
    if len > 1 << 20 {
        return Err(ParseError::new(
            at,
            format!("a header string length (got {len})"),
        ));
    }
    if c.remaining() < len {
        return Ok(None);
    }
    let bytes = c.bytes(len)?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Ok(Some(String::from_utf8_lossy(&bytes[..end]).into_owned()))
}

fn parse_buffer_header(data: &[u8], offset: usize) -> Result<BufferHeader, ParseError> {
    let mut c = Cursor::new(data, offset);
    let id = c.u32()?;
    if id != BUF_ID {
        return Err(ParseError::new(
            offset,
            format!("the buffer id 0x4D504C01 (got {id:#010x})"),
        ));
    }
    let len = c.u32()?;
    if len > MAX_BUFFER_LEN {
        return Err(ParseError::new(
            offset + 4,
            format!("a buffer length below 1 GiB (got {len})"),
        ));
    }
    Ok(BufferHeader {
        offset,
        len,
        time_base: c.u64()?,
        ptr_base: c.u64()?,
        obj_base: c.u64()?,
        thread_id: c.u64()?,
        method_base: c.u64()?,
    })
}

/// What the decoder found wrong, and how many bytes it skipped because of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// What was wrong, and at which file offset.
    pub error: ParseError,
    /// Bytes left undecoded because of it (the rest of its buffer, or up to the next buffer id).
    pub skipped_bytes: usize,
}

/// Incremental decoder: call `feed` with the file's bytes so far (each call a longer prefix of
/// the same file); it decodes the complete buffers it has not seen yet.
#[derive(Debug, Default)]
pub struct Decoder {
    header: Option<Header>,
    layout: Option<Layout>,
    /// Offset of the next unread buffer.
    pos: usize,
    problems: Vec<Problem>,
    problem_count: u64,
    buffers: u64,
    scratch: Vec<u64>,
}

impl Decoder {
    /// A decoder that has read nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The file header, once enough bytes have been fed.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    /// Bytes consumed: everything before this offset has been decoded.
    pub fn consumed(&self) -> usize {
        self.pos
    }

    /// Complete buffers decoded so far.
    pub fn buffers(&self) -> u64 {
        self.buffers
    }

    /// The first problems (at most 100) with their offsets.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Every problem found, also those past the first 100 that are not kept.
    pub fn problem_count(&self) -> u64 {
        self.problem_count
    }

    fn problem(&mut self, error: ParseError, skipped_bytes: usize) {
        self.problem_count += 1;
        if self.problems.len() < KEPT_PROBLEMS {
            self.problems.push(Problem {
                error,
                skipped_bytes,
            });
        }
    }

    /// Decodes what `data` (the file so far) adds. An error means the file header is bad and
    /// nothing can be read; problems inside buffers are recorded instead.
    pub fn feed(&mut self, data: &[u8], visitor: &mut impl Visitor) -> Result<(), ParseError> {
        let layout = match self.layout {
            Some(l) => l,
            None => match parse_header(data)? {
                Some(header) => {
                    let layout = Layout::new(header.data_version);
                    self.pos = header.len;
                    self.header = Some(header);
                    self.layout = Some(layout);
                    layout
                }
                None => return Ok(()),
            },
        };
        while data.len() - self.pos.min(data.len()) >= BUFFER_HEADER_LEN {
            let at = self.pos;
            let buffer = match parse_buffer_header(&data[at..], at) {
                Ok(b) => b,
                Err(error) => {
                    let next = find_buffer_id(data, at + 1);
                    let resume = next.unwrap_or(data.len().saturating_sub(3).max(at + 1));
                    self.problem(error, resume - at);
                    self.pos = resume;
                    continue;
                }
            };
            let start = at + BUFFER_HEADER_LEN;
            let end = start + buffer.len as usize;
            if end > data.len() {
                break; // incomplete: Mono is still writing it
            }
            self.buffers += 1;
            visitor.buffer(&buffer);
            self.decode_buffer(&data[start..end], start, &buffer, &layout, visitor);
            self.pos = end;
        }
        Ok(())
    }

    fn decode_buffer(
        &mut self,
        events: &[u8],
        start: usize,
        buffer: &BufferHeader,
        layout: &Layout,
        visitor: &mut impl Visitor,
    ) {
        let events_len = events.len();
        let mut reader = Reader::new(events, start);
        let mut bases = Bases::of(buffer);
        let mut scratch = std::mem::take(&mut self.scratch);
        while !reader.at_end() {
            let decoded = decode_event(
                &mut reader,
                layout,
                &mut bases,
                buffer,
                &mut scratch,
                visitor,
            );
            if let Err(error) = decoded {
                let end = start + events_len;
                let skipped = end - error.offset.min(end);
                self.problem(error, skipped);
                break;
            }
        }
        self.scratch = scratch;
    }
}

/// The next offset at or after `from` where a buffer id starts.
fn find_buffer_id(data: &[u8], from: usize) -> Option<usize> {
    let id = BUF_ID.to_le_bytes();
    data.get(from..)?
        .windows(4)
        .position(|w| w == id)
        .map(|p| from + p)
}

/// The whole units at the start of some bytes of a file (see [`whole_units`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WholeUnits {
    /// Bytes that are whole units.
    pub len: usize,
    /// Whole buffers among them.
    pub buffers: u64,
    /// What stopped the walk before the end, if it was not an incomplete last buffer.
    pub error: Option<ParseError>,
}

/// How many bytes of `data` (the file's bytes from `offset`) are whole units: the header when
/// `offset` is 0, then whole buffers. A tailer stores only these, so stored bytes always decode.
pub fn whole_units(data: &[u8], offset: usize) -> WholeUnits {
    let mut units = WholeUnits {
        len: 0,
        buffers: 0,
        error: None,
    };
    if offset == 0 {
        match parse_header(data) {
            Ok(Some(h)) => units.len = h.len,
            Ok(None) => return units,
            Err(e) => {
                units.error = Some(e);
                return units;
            }
        }
    }
    while data.len() - units.len >= BUFFER_HEADER_LEN {
        let buffer = match parse_buffer_header(&data[units.len..], offset + units.len) {
            Ok(b) => b,
            Err(e) => {
                units.error = Some(e);
                return units;
            }
        };
        let end = units.len + BUFFER_HEADER_LEN + buffer.len as usize;
        if end > data.len() {
            break;
        }
        units.len = end;
        units.buffers += 1;
    }
    units
}

/// Decodes a whole file; the returned decoder tells the header, counts and problems.
pub fn decode_all(data: &[u8], visitor: &mut impl Visitor) -> Result<Decoder, ParseError> {
    let mut decoder = Decoder::new();
    decoder.feed(data, visitor)?;
    Ok(decoder)
}
