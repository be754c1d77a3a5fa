//! FDR ("flight data recorder") mode, versions 1–5: a state machine over per-thread buffers of
//! 16-byte metadata records and 8-byte function records with 32-bit TSC deltas.
//!
//! Buffers: v1 buffers are `thread_buffer_size` bytes and end with EndOfBuffer; from v2 on each
//! buffer is a BufferExtents record stating how many bytes follow. Little-endian producers put
//! the record discriminant in bit 0 of the first byte, big-endian ones in bit 7 (the C
//! bitfields are allocated from the other end); multi-byte fields follow the header's order.

use super::log::{BufferStart, Event, EventKind, Log, HEADER_LEN};
use crate::{Cursor, Endian, ParseError};

/// Size of a metadata record in bytes (payloads of event markers come after it).
pub(crate) const METADATA_LEN: usize = 16;
/// Size of a function record in bytes.
const FUNCTION_LEN: usize = 8;

/// Metadata record kinds (bits 1–7 of the first byte, little-endian).
pub mod kind {
    /// NewBuffer: a thread's buffer starts; the data is its thread id.
    pub const NEW_BUFFER: u8 = 0;
    /// EndOfBuffer (v1 only): the rest of the fixed-size buffer is unused.
    pub const END_OF_BUFFER: u8 = 1;
    /// NewCPUId: the CPU changed; the data also sets the absolute base timestamp.
    pub const NEW_CPU_ID: u8 = 2;
    /// TSCWrap: a new absolute base timestamp, when a delta would not fit.
    pub const TSC_WRAP: u8 = 3;
    /// WalltimeMarker: CLOCK_MONOTONIC seconds and µs when the buffer started.
    pub const WALLTIME_MARKER: u8 = 4;
    /// CustomEventMarker: a custom event's size and time; its payload follows.
    pub const CUSTOM_EVENT_MARKER: u8 = 5;
    /// CallArgument: an argument of the preceding EnterArg function record.
    pub const CALL_ARGUMENT: u8 = 6;
    /// BufferExtents (v2+): how many bytes of buffer data follow.
    pub const BUFFER_EXTENTS: u8 = 7;
    /// TypedEventMarker (v5): a typed event's size, time delta and type; its payload follows.
    pub const TYPED_EVENT_MARKER: u8 = 8;
    /// Pid (v3+): the process id of the buffer's thread.
    pub const PID: u8 = 9;
}

/// The first byte of a metadata record of `kind` in this byte order.
pub fn metadata_introducer(kind: u8, endian: Endian) -> u8 {
    match endian {
        Endian::Little => (kind << 1) | 1,
        Endian::Big => 0x80 | (kind & 0x7f),
    }
}

/// `Some(kind)` when `byte` starts a metadata record, `None` for a function record.
fn metadata_kind(byte: u8, endian: Endian) -> Option<u8> {
    match endian {
        Endian::Little => (byte & 1 == 1).then_some(byte >> 1),
        Endian::Big => (byte & 0x80 != 0).then_some(byte & 0x7f),
    }
}

/// `(kind code, function id)` of a function record's first word.
fn function_fields(word: u32, endian: Endian) -> (u8, u32) {
    match endian {
        Endian::Little => (((word >> 1) & 7) as u8, word >> 4),
        Endian::Big => (((word >> 28) & 7) as u8, word & 0x0fff_ffff),
    }
}

/// Decodes every buffer after the header: events go to `sink` in file order, the rest into
/// `log`.
pub fn parse_buffers<S: FnMut(Event)>(data: &[u8], log: &mut Log, sink: &mut S) {
    let header = log.header.clone();
    let mut pos = HEADER_LEN;
    if header.version == 1 {
        // Fixed-size buffers; a size of 0 (or more than is left) means one buffer to the end.
        let size = usize::try_from(header.thread_buffer_size).unwrap_or(usize::MAX);
        while pos < data.len() {
            let end = match size {
                0 => data.len(),
                s => pos.saturating_add(s).min(data.len()),
            };
            let mut buffer = BufferReader::new(data, end, log, sink);
            buffer.read(pos);
            pos = end;
        }
        return;
    }
    let extents = metadata_introducer(kind::BUFFER_EXTENTS, header.endian);
    while pos < data.len() {
        if data[pos] != extents {
            // Resynchronise on the next BufferExtents introducer, as llvm-xray does.
            let skip = data[pos..]
                .iter()
                .position(|&b| b == extents)
                .unwrap_or(data.len() - pos);
            log.problems.push(ParseError::new(
                pos,
                format!("a BufferExtents record (skipped {skip} bytes)"),
            ));
            pos += skip;
            continue;
        }
        let Some(record) = data.get(pos..pos + METADATA_LEN) else {
            log.problems.push(ParseError::new(
                pos,
                "a 16-byte BufferExtents record (truncated log)",
            ));
            return;
        };
        let size = Cursor::with_endian(&record[1..], pos + 1, header.endian)
            .u64()
            .unwrap_or(0);
        let start = pos + METADATA_LEN;
        let want_end = usize::try_from(size)
            .ok()
            .and_then(|s| start.checked_add(s))
            .unwrap_or(usize::MAX);
        if want_end > data.len() {
            log.problems.push(ParseError::new(
                pos,
                format!(
                    "a buffer of {size} bytes (only {} left: truncated log)",
                    data.len() - start
                ),
            ));
        }
        let mut buffer = BufferReader::new(data, want_end.min(data.len()), log, sink);
        let stopped = buffer.read(start);
        pos = stopped.max(start);
    }
}

/// The state machine over one buffer.
struct BufferReader<'a, 'l, S> {
    data: &'a [u8],
    /// Exclusive end of the buffer's bytes.
    end: usize,
    log: &'l mut Log,
    sink: &'l mut S,
    endian: Endian,
    version: u16,
    tid: u32,
    pid: u32,
    cpu: u16,
    base_tsc: u64,
}

impl<'a, 'l, S: FnMut(Event)> BufferReader<'a, 'l, S> {
    fn new(data: &'a [u8], end: usize, log: &'l mut Log, sink: &'l mut S) -> Self {
        Self {
            data,
            end,
            sink,
            endian: log.header.endian,
            version: log.header.version,
            log,
            tid: 0,
            pid: 0,
            cpu: 0,
            base_tsc: 0,
        }
    }

    fn problem(&mut self, offset: usize, expected: impl Into<String>) {
        self.log.problems.push(ParseError::new(offset, expected));
    }

    /// Reads records from `pos` to the buffer's end; returns where the next buffer starts.
    fn read(&mut self, mut pos: usize) -> usize {
        while pos < self.end {
            let first = self.data[pos];
            let step = match metadata_kind(first, self.endian) {
                None => self.function(pos),
                Some(kind) => self.metadata(pos, kind),
            };
            match step {
                Step::Next(len) => pos += len,
                Step::EndBuffer => return self.end,
                Step::NewBufferHere => return pos,
            }
        }
        self.end
    }

    fn function(&mut self, pos: usize) -> Step {
        let Some(bytes) = self
            .data
            .get(pos..pos + FUNCTION_LEN)
            .filter(|_| pos + FUNCTION_LEN <= self.end)
        else {
            self.problem(pos, "an 8-byte function record (truncated buffer)");
            return Step::EndBuffer;
        };
        let mut c = Cursor::with_endian(bytes, pos, self.endian);
        let word = c.u32().unwrap_or(0);
        let delta = c.u32().unwrap_or(0);
        let (code, func_id) = function_fields(word, self.endian);
        self.base_tsc = self.base_tsc.wrapping_add(delta as u64);
        match EventKind::from_code(code) {
            Some(kind) => (self.sink)(Event {
                tid: self.tid,
                pid: self.pid,
                cpu: self.cpu,
                kind,
                func_id,
                tsc: self.base_tsc,
            }),
            None => self.problem(
                pos,
                format!("function record kind 0..=3 (enter, exit, tail exit, enter with args), found {code}"),
            ),
        }
        Step::Next(FUNCTION_LEN)
    }

    fn metadata(&mut self, pos: usize, kind: u8) -> Step {
        let Some(record) = self
            .data
            .get(pos..pos + METADATA_LEN)
            .filter(|_| pos + METADATA_LEN <= self.end)
        else {
            self.problem(pos, "a 16-byte metadata record (truncated buffer)");
            return Step::EndBuffer;
        };
        let mut c = Cursor::with_endian(&record[1..], pos + 1, self.endian);
        match kind {
            kind::NEW_BUFFER => {
                self.tid = c.i32().unwrap_or(0) as u32;
                self.pid = 0;
                self.base_tsc = 0;
                self.log.buffers.push(BufferStart {
                    offset: pos,
                    tid: self.tid,
                    pid: 0,
                    monotonic_ns: None,
                    first_tsc: None,
                });
            }
            kind::END_OF_BUFFER => {
                if self.version >= 2 {
                    self.problem(pos, "no EndOfBuffer record (they end v1 buffers only)");
                }
                return Step::EndBuffer;
            }
            kind::NEW_CPU_ID => {
                self.cpu = c.u16().unwrap_or(0);
                self.base_tsc = c.u64().unwrap_or(0);
                let tsc = self.base_tsc;
                if let Some(b) = self.current_buffer() {
                    b.first_tsc.get_or_insert(tsc);
                }
            }
            kind::TSC_WRAP => self.base_tsc = c.u64().unwrap_or(0),
            kind::WALLTIME_MARKER => {
                let seconds = c.u64().unwrap_or(0);
                let micros = c.u32().unwrap_or(0) as u64;
                let ns = seconds
                    .checked_mul(1_000_000_000)
                    .and_then(|s| s.checked_add(micros.saturating_mul(1000)));
                if let Some(b) = self.current_buffer() {
                    b.monotonic_ns = ns;
                }
            }
            kind::CUSTOM_EVENT_MARKER | kind::TYPED_EVENT_MARKER => {
                return self.event_marker(pos, kind, c);
            }
            kind::CALL_ARGUMENT => self.log.call_arguments += 1,
            kind::BUFFER_EXTENTS => {
                if self.version == 1 {
                    self.problem(pos, "no BufferExtents record in a v1 log");
                } else {
                    return Step::NewBufferHere;
                }
            }
            kind::PID => {
                self.pid = c.i32().unwrap_or(0) as u32;
                let pid = self.pid;
                if let Some(b) = self.current_buffer() {
                    b.pid = pid;
                }
            }
            other => self.problem(
                pos,
                format!("a metadata record kind 0..=9, found {other} (skipped)"),
            ),
        }
        Step::Next(METADATA_LEN)
    }

    /// Custom and typed events: a marker, then `size` bytes of payload that are skipped. From
    /// v5 the marker holds a TSC delta that moves the base like a function record's.
    fn event_marker(&mut self, pos: usize, kind: u8, mut c: Cursor<'_>) -> Step {
        let size = c.i32().unwrap_or(-1);
        if kind == kind::TYPED_EVENT_MARKER || self.version >= 5 {
            let delta = c.u32().unwrap_or(0);
            self.base_tsc = self.base_tsc.wrapping_add(delta as u64);
        }
        if kind == kind::TYPED_EVENT_MARKER {
            self.log.typed_events += 1;
            // The runtime counts only the payload of a typed event in the buffer's extents,
            // not its 16-byte marker: the buffer really ends 16 bytes later, unless the next
            // buffer visibly starts at the stated end.
            let extents = metadata_introducer(kind::BUFFER_EXTENTS, self.endian);
            if self.version >= 2 && self.data.get(self.end) != Some(&extents) {
                self.end = (self.end + METADATA_LEN).min(self.data.len());
            }
        } else {
            self.log.custom_events += 1;
        }
        let payload = usize::try_from(size).ok();
        match payload.and_then(|p| (pos + METADATA_LEN).checked_add(p)) {
            Some(next) if next <= self.end => Step::Next(next - pos),
            _ => {
                self.problem(
                    pos + 1,
                    format!("an event payload size that fits the buffer (found {size})"),
                );
                Step::EndBuffer
            }
        }
    }

    fn current_buffer(&mut self) -> Option<&mut BufferStart> {
        self.log.buffers.last_mut()
    }
}

/// What the reader does after a record.
enum Step {
    /// Move this many bytes on.
    Next(usize),
    /// The buffer is over (EndOfBuffer, damage): continue at its end.
    EndBuffer,
    /// A BufferExtents record starts here, inside the stated extent: a new buffer begins.
    NewBufferHere,
}
