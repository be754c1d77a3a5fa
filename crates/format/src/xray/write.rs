//! Builds XRay logs from their layouts: FDR versions 1–5 and basic versions 1–3, in either byte
//! order. No runtime here writes FDR v1–v4 or big-endian logs, so tests make them with this;
//! the fuzzer and the benchmark use it for well-formed starting points.

use super::fdr::{kind, metadata_introducer, METADATA_LEN};
use super::log::{EventKind, HEADER_LEN};
use crate::Endian;

fn put_u16(out: &mut Vec<u8>, v: u16, e: Endian) {
    out.extend_from_slice(&match e {
        Endian::Little => v.to_le_bytes(),
        Endian::Big => v.to_be_bytes(),
    });
}

fn put_u32(out: &mut Vec<u8>, v: u32, e: Endian) {
    out.extend_from_slice(&match e {
        Endian::Little => v.to_le_bytes(),
        Endian::Big => v.to_be_bytes(),
    });
}

fn put_u64(out: &mut Vec<u8>, v: u64, e: Endian) {
    out.extend_from_slice(&match e {
        Endian::Little => v.to_le_bytes(),
        Endian::Big => v.to_be_bytes(),
    });
}

fn kind_code(kind: EventKind) -> u8 {
    match kind {
        EventKind::Enter => 0,
        EventKind::Exit => 1,
        EventKind::TailExit => 2,
        EventKind::EnterArg => 3,
    }
}

/// The 32-byte file header. `tail` fills bytes 16..32 (FDR: the buffer size, then zeros).
pub fn header(
    version: u16,
    fdr: bool,
    endian: Endian,
    cycle_frequency: u64,
    tail: [u8; 16],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN);
    put_u16(&mut out, version, endian);
    put_u16(&mut out, fdr as u16, endian);
    // Bits 0-1 set (constant, nonstop TSC) plus junk above them, as basic-mode runtimes write.
    put_u32(&mut out, if fdr { 3 } else { 0x7fff }, endian);
    put_u64(&mut out, cycle_frequency, endian);
    out.extend_from_slice(&tail);
    out
}

/// One basic-mode function record (32 bytes; the padding is deliberately not zero).
#[allow(clippy::too_many_arguments)]
pub fn basic_record(
    out: &mut Vec<u8>,
    endian: Endian,
    kind: EventKind,
    cpu: u8,
    func_id: i32,
    tsc: u64,
    tid: u32,
    pid: u32,
) {
    put_u16(out, 0, endian);
    out.push(cpu);
    out.push(kind_code(kind));
    put_u32(out, func_id as u32, endian);
    put_u64(out, tsc, endian);
    put_u32(out, tid, endian);
    put_u32(out, pid, endian);
    out.extend_from_slice(&[0x5a; 8]);
}

/// One basic-mode argument payload record (32 bytes).
pub fn basic_arg_payload(
    out: &mut Vec<u8>,
    endian: Endian,
    func_id: i32,
    tid: u32,
    pid: u32,
    arg: u64,
) {
    put_u16(out, 1, endian);
    out.extend_from_slice(&[0, 0]);
    put_u32(out, func_id as u32, endian);
    put_u32(out, tid, endian);
    put_u32(out, pid, endian);
    put_u64(out, arg, endian);
    out.extend_from_slice(&[0x5a; 8]);
}

/// Writes an FDR log buffer by buffer, record by record.
pub struct FdrWriter {
    version: u16,
    endian: Endian,
    buffer_size: u64,
    out: Vec<u8>,
    /// Where the open buffer's data starts (after its BufferExtents record for v2+).
    buffer_start: Option<usize>,
    /// Typed events in the open buffer (the runtime leaves their markers out of the extents).
    typed_in_buffer: usize,
}

impl FdrWriter {
    /// A log with its header; `buffer_size` is the header's thread buffer size (v1 buffers are
    /// padded to it).
    pub fn new(version: u16, endian: Endian, cycle_frequency: u64, buffer_size: u64) -> Self {
        let mut tail = [0u8; 16];
        let size = match endian {
            Endian::Little => buffer_size.to_le_bytes(),
            Endian::Big => buffer_size.to_be_bytes(),
        };
        tail[..8].copy_from_slice(&size);
        Self {
            version,
            endian,
            buffer_size,
            out: header(version, true, endian, cycle_frequency, tail),
            buffer_start: None,
            typed_in_buffer: 0,
        }
    }

    fn metadata(&mut self, kind: u8, fill: impl FnOnce(&mut Vec<u8>, Endian)) {
        let start = self.out.len();
        self.out.push(metadata_introducer(kind, self.endian));
        fill(&mut self.out, self.endian);
        self.out.resize(start + METADATA_LEN, 0);
    }

    /// Starts a thread's buffer: (BufferExtents,) NewBuffer, WalltimeMarker, (Pid,).
    pub fn begin_buffer(&mut self, tid: u32, pid: u32, monotonic_ns: u64) {
        self.end_buffer();
        if self.version >= 2 {
            self.metadata(kind::BUFFER_EXTENTS, |o, e| put_u64(o, 0, e));
        }
        self.buffer_start = Some(self.out.len());
        self.typed_in_buffer = 0;
        self.metadata(kind::NEW_BUFFER, |o, e| put_u32(o, tid, e));
        self.metadata(kind::WALLTIME_MARKER, |o, e| {
            put_u64(o, monotonic_ns / 1_000_000_000, e);
            put_u32(o, (monotonic_ns % 1_000_000_000 / 1000) as u32, e);
        });
        if self.version >= 3 {
            self.metadata(kind::PID, |o, e| put_u32(o, pid, e));
        }
    }

    /// NewCPUId: the thread is on `cpu`, and later deltas count from `tsc`.
    pub fn new_cpu(&mut self, cpu: u16, tsc: u64) {
        self.metadata(kind::NEW_CPU_ID, |o, e| {
            put_u16(o, cpu, e);
            put_u64(o, tsc, e);
        });
    }

    /// TSCWrap: later deltas count from `tsc`.
    pub fn tsc_wrap(&mut self, tsc: u64) {
        self.metadata(kind::TSC_WRAP, |o, e| put_u64(o, tsc, e));
    }

    /// CallArgument carrying `arg` (follows an EnterArg function record).
    pub fn call_argument(&mut self, arg: u64) {
        self.metadata(kind::CALL_ARGUMENT, |o, e| put_u64(o, arg, e));
    }

    /// A function record `delta` ticks after the previous timestamp.
    pub fn function(&mut self, kind: EventKind, func_id: u32, delta: u32) {
        let code = kind_code(kind) as u32;
        let word = match self.endian {
            Endian::Little => (code << 1) | (func_id << 4),
            Endian::Big => (code << 28) | (func_id & 0x0fff_ffff),
        };
        put_u32(&mut self.out, word, self.endian);
        put_u32(&mut self.out, delta, self.endian);
    }

    /// A custom event: v1–v3 carry an absolute TSC, v4 also the CPU, v5 a delta instead.
    pub fn custom_event(&mut self, tsc_or_delta: u64, cpu: u16, payload: &[u8]) {
        let version = self.version;
        self.metadata(kind::CUSTOM_EVENT_MARKER, |o, e| {
            put_u32(o, payload.len() as u32, e);
            if version >= 5 {
                put_u32(o, tsc_or_delta as u32, e);
            } else {
                put_u64(o, tsc_or_delta, e);
                if version == 4 {
                    put_u16(o, cpu, e);
                }
            }
        });
        self.out.extend_from_slice(payload);
    }

    /// A typed event (v5): size, TSC delta, event type, then the payload.
    pub fn typed_event(&mut self, delta: u32, event_type: u16, payload: &[u8]) {
        self.metadata(kind::TYPED_EVENT_MARKER, |o, e| {
            put_u32(o, payload.len() as u32, e);
            put_u32(o, delta, e);
            put_u16(o, event_type, e);
        });
        self.out.extend_from_slice(payload);
        self.typed_in_buffer += 1;
    }

    /// Closes the open buffer: v1 writes EndOfBuffer and pads to the buffer size with junk;
    /// v2+ fills in the BufferExtents size the way the runtime does (typed event markers left
    /// out).
    pub fn end_buffer(&mut self) {
        let Some(start) = self.buffer_start.take() else {
            return;
        };
        if self.version == 1 {
            self.metadata(kind::END_OF_BUFFER, |_, _| {});
            let end = start + self.buffer_size as usize;
            if self.out.len() < end {
                self.out.resize(end, 0xee);
            }
            return;
        }
        let size = (self.out.len() - start - self.typed_in_buffer * METADATA_LEN) as u64;
        let field = start - METADATA_LEN + 1;
        let bytes = match self.endian {
            Endian::Little => size.to_le_bytes(),
            Endian::Big => size.to_be_bytes(),
        };
        self.out[field..field + 8].copy_from_slice(&bytes);
    }

    /// Closes the open buffer and returns the whole log.
    pub fn finish(mut self) -> Vec<u8> {
        self.end_buffer();
        self.out
    }
}
