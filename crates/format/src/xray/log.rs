//! A decoded XRay log: the 32-byte file header shared by both modes, the event type, the log
//! the FDR and basic readers fill.

use crate::{Cursor, Endian, ParseError};

/// Size of the file header in both modes.
pub const HEADER_LEN: usize = 32;

/// Which writer produced the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogMode {
    /// "Naive" mode: 32-byte records with absolute timestamps (header type 0).
    Basic,
    /// Flight data recorder: per-thread buffers of delta-encoded records (header type 1).
    Fdr,
}

/// The `XRayFileHeader`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Log format version: 1–3 in basic mode, 1–5 in FDR mode.
    pub version: u16,
    /// Which writer produced the log.
    pub mode: LogMode,
    /// Byte order of the log, told by which order gives a valid version and type.
    pub endian: Endian,
    /// Bit 0 of the bitfield; the other bits hold junk in basic mode and are ignored.
    pub constant_tsc: bool,
    /// Bit 1 of the bitfield.
    pub nonstop_tsc: bool,
    /// Ticks per second of every timestamp in the log. 1e9 when the runtime could not find
    /// the TSC frequency and stored CLOCK_REALTIME nanoseconds instead ("emulated").
    pub cycle_frequency: u64,
    /// FDR: bytes per thread buffer (v1 buffers are exactly this long). Basic: 0 (junk there).
    pub thread_buffer_size: u64,
}

/// CLOCK_REALTIME ns have been above this since 2001; a TSC at 1 GHz would need 31 years of
/// uptime to get there.
const REALTIME_NS_FLOOR: u64 = 1_000_000_000_000_000_000;

impl Header {
    /// Nanoseconds in `ticks` of this log's clock (ticks are taken as ns when the frequency
    /// is 0).
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        match self.cycle_frequency {
            0 | 1_000_000_000 => ticks,
            f => ((ticks as u128 * 1_000_000_000) / f as u128).min(u64::MAX as u128) as u64,
        }
    }
}

/// What a function record says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The function was entered.
    Enter,
    /// The function returned.
    Exit,
    /// The function left through a tail call: it is popped before the callee is entered.
    TailExit,
    /// An entry followed by call-argument records.
    EnterArg,
}

impl EventKind {
    /// The kind numbering shared by basic records and FDR function records.
    pub(super) fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => Self::Enter,
            1 => Self::Exit,
            2 => Self::TailExit,
            3 => Self::EnterArg,
            _ => return None,
        })
    }

    /// Whether the event enters a function (`Enter` or `EnterArg`).
    pub fn is_entry(self) -> bool {
        matches!(self, Self::Enter | Self::EnterArg)
    }
}

/// One function entry or exit, with its absolute timestamp in the log's ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Kernel thread id.
    pub tid: u32,
    /// Process id; 0 when the log does not record it (basic v1–2, FDR v1–2).
    pub pid: u32,
    /// CPU the event was recorded on (FDR: the latest NewCPUId's).
    pub cpu: u16,
    /// Entry or exit.
    pub kind: EventKind,
    /// The id from the instrumentation map (1-based; 28 bits in FDR logs).
    pub func_id: u32,
    /// Absolute timestamp, in ticks of [`Header::cycle_frequency`].
    pub tsc: u64,
}

/// Where an FDR buffer starts: its thread and the CLOCK_MONOTONIC time its WalltimeMarker
/// says, paired with the first timestamp after it (the coarse anchor of the log's clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferStart {
    /// File offset of the buffer's NewBuffer record.
    pub offset: usize,
    /// Kernel thread id of the thread that owns the buffer.
    pub tid: u32,
    /// Process id from the buffer's Pid record; 0 when it has none (before v3).
    pub pid: u32,
    /// WalltimeMarker in ns (the runtime reads CLOCK_MONOTONIC despite the record's name).
    pub monotonic_ns: Option<u64>,
    /// The base timestamp set by the buffer's first NewCPUId.
    pub first_tsc: Option<u64>,
}

/// A decoded log. Damage does not stop the reader: what was read before and after a bad
/// region is kept and each problem is listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    /// The file header.
    pub header: Header,
    /// Function events in file order (per thread in time order; threads interleave in chunks).
    pub events: Vec<Event>,
    /// FDR buffers in file order (empty for basic logs).
    pub buffers: Vec<BufferStart>,
    /// Logged function arguments (CallArgument records, basic ARG_PAYLOAD records).
    pub call_arguments: usize,
    /// Custom event records (their payloads are skipped).
    pub custom_events: usize,
    /// Typed event records (their payloads are skipped).
    pub typed_events: usize,
    /// Regions that could not be decoded, each with its offset; the reader skipped them.
    pub problems: Vec<ParseError>,
    /// Function events decoded (also when they were streamed, not kept).
    pub event_count: usize,
    /// The first event's timestamp.
    pub first_tsc: Option<u64>,
}

impl Log {
    /// Whether the timestamps are CLOCK_REALTIME nanoseconds rather than TSC ticks. The runtime
    /// then writes exactly 1e9 as the frequency; a real 1 GHz TSC is told apart by its values.
    pub fn is_emulated_clock(&self) -> bool {
        self.header.cycle_frequency == 1_000_000_000
            && self
                .events
                .first()
                .is_none_or(|e| e.tsc >= REALTIME_NS_FLOOR)
    }
}

/// Reads the header: version then type tell the byte order (a version of 1..=5 in one order).
pub fn parse_header(data: &[u8]) -> Result<Header, ParseError> {
    if data.len() < HEADER_LEN {
        return Err(ParseError::new(
            0,
            format!(
                "a {HEADER_LEN}-byte XRay file header (file has {} bytes)",
                data.len()
            ),
        ));
    }
    let endian = [Endian::Little, Endian::Big]
        .into_iter()
        .find(|&e| {
            let mut c = Cursor::with_endian(data, 0, e);
            let version = c.u16().unwrap_or(0);
            let kind = c.u16().unwrap_or(u16::MAX);
            (1..=5).contains(&version) && kind <= 1
        })
        .ok_or_else(|| {
            ParseError::new(
                0,
                "an XRay header: version 1..=5 then type 0 (basic) or 1 (FDR)",
            )
        })?;
    let mut c = Cursor::with_endian(&data[..HEADER_LEN], 0, endian);
    let version = c.u16()?;
    let mode = if c.u16()? == 1 {
        LogMode::Fdr
    } else {
        LogMode::Basic
    };
    let bits = c.u32()?;
    let cycle_frequency = c.u64()?;
    let thread_buffer_size = match mode {
        LogMode::Fdr => c.u64()?,
        LogMode::Basic => 0,
    };
    if mode == LogMode::Basic && version > 3 {
        return Err(ParseError::new(
            0,
            format!("basic-mode XRay log version 1..=3 (found {version})"),
        ));
    }
    Ok(Header {
        version,
        mode,
        endian,
        constant_tsc: bits & 1 != 0,
        nonstop_tsc: bits & 2 != 0,
        cycle_frequency,
        thread_buffer_size,
    })
}
