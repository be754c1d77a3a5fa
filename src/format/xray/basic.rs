//! Basic ("naive") mode records, versions 1–3: 32 bytes each, absolute timestamps.
//! `u16 record_type (0 function, 1 argument payload); u8 cpu; u8 kind; i32 func_id; u64 tsc;
//! u32 tid; u32 pid (v3; junk before); 8 bytes padding (not zeroed by the runtime)`.

use super::{Event, EventKind, Log, HEADER_LEN};
use crate::format::{Cursor, ParseError};

/// Size of every basic-mode record.
pub const RECORD_LEN: usize = 32;

/// Appends the records after the header to `log`; an undecodable record is listed in
/// `log.problems` and skipped, a truncated tail too.
pub fn parse_records(data: &[u8], log: &mut Log) {
    let endian = log.header.endian;
    let with_pid = log.header.version >= 3;
    let body = data.get(HEADER_LEN..).unwrap_or_default();
    let mut chunks = body.chunks_exact(RECORD_LEN);
    for (i, record) in chunks.by_ref().enumerate() {
        let offset = HEADER_LEN + i * RECORD_LEN;
        let mut c = Cursor::with_endian(record, offset, endian);
        // The slice is exactly RECORD_LEN, so these reads cannot fail; `?`-free defaults keep
        // the function total anyway.
        let record_type = c.u16().unwrap_or(u16::MAX);
        match record_type {
            0 => {
                let cpu = c.u8().unwrap_or(0);
                let code = c.u8().unwrap_or(u8::MAX);
                let func_id = c.i32().unwrap_or(0) as u32;
                let tsc = c.u64().unwrap_or(0);
                let tid = c.u32().unwrap_or(0);
                let pid = c.u32().unwrap_or(0);
                let Some(kind) = EventKind::from_code(code) else {
                    log.problems.push(ParseError::new(
                        offset + 3,
                        format!("record kind 0..=3 (enter, exit, tail exit, enter with args), found {code}"),
                    ));
                    continue;
                };
                log.events.push(Event {
                    tid,
                    pid: if with_pid { pid } else { 0 },
                    cpu: cpu as u16,
                    kind,
                    func_id,
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
