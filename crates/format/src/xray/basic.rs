//! Basic ("naive") mode records, versions 1–3: 32 bytes each, absolute timestamps.
//! `u16 record_type (0 function, 1 argument payload); u8 cpu; u8 kind; i32 func_id; u64 tsc;
//! u32 tid; u32 pid (v3; junk before); 8 bytes padding (not zeroed by the runtime)`.

use super::log::{Event, EventKind, Log, HEADER_LEN};
use crate::{Endian, ParseError};

/// Size of every basic-mode record.
pub const RECORD_LEN: usize = 32;

/// Hands every function record after the header to `sink`, in file order; an undecodable
/// record is listed in `log.problems` and skipped, a truncated tail too.
pub fn parse_records(data: &[u8], log: &mut Log, sink: &mut impl FnMut(Event)) {
    // One loop per byte order and pid presence, so the hot loop has no per-field branches.
    match (log.header.endian, log.header.version >= 3) {
        (Endian::Little, true) => records::<false, true>(data, log, sink),
        (Endian::Little, false) => records::<false, false>(data, log, sink),
        (Endian::Big, true) => records::<true, true>(data, log, sink),
        (Endian::Big, false) => records::<true, false>(data, log, sink),
    }
}

fn records<const BIG: bool, const WITH_PID: bool>(
    data: &[u8],
    log: &mut Log,
    sink: &mut impl FnMut(Event),
) {
    let endian = if BIG { Endian::Big } else { Endian::Little };
    let body = data.get(HEADER_LEN..).unwrap_or_default();
    let mut chunks = body.chunks_exact(RECORD_LEN);
    for (i, r) in chunks.by_ref().enumerate() {
        let offset = HEADER_LEN + i * RECORD_LEN;
        // Fixed offsets inside an exact 32-byte chunk: read directly (the hot loop of big logs).
        let u16_at = |at: usize| endian.u16([r[at], r[at + 1]]);
        let u32_at = |at: usize| endian.u32([r[at], r[at + 1], r[at + 2], r[at + 3]]);
        match u16_at(0) {
            0 => {
                let code = r[3];
                let Some(kind) = EventKind::from_code(code) else {
                    log.problems.push(ParseError::new(
                        offset + 3,
                        format!("record kind 0..=3 (enter, exit, tail exit, enter with args), found {code}"),
                    ));
                    continue;
                };
                let tsc = endian.u64([r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]]);
                sink(Event {
                    tid: u32_at(16),
                    pid: if WITH_PID { u32_at(20) } else { 0 },
                    cpu: r[2] as u16,
                    kind,
                    func_id: u32_at(4),
                    tsc,
                });
            }
            1 => log.call_arguments += 1,
            other => log.problems.push(ParseError::new(
                offset,
                format!("record type 0 (function) or 1 (argument payload), found {other}"),
            )),
        }
    }
    let tail = chunks.remainder().len();
    if tail > 0 {
        log.problems.push(ParseError::new(
            data.len() - tail,
            format!("a {RECORD_LEN}-byte record ({tail} bytes left: truncated log)"),
        ));
    }
}
