//! LLVM XRay logs: the entry point that picks the FDR (`fdr.rs`) or basic (`basic.rs`) reader;
//! the header, the decoded event type and the log they fill are `log.rs`. `instr_map.rs`
//! reads the `xray_instr_map` section of an instrumented binary; `write.rs` builds logs (tests,
//! fuzzing, benchmarks). Layouts: `docs/xray.md` and reference formats.md §5.

pub mod basic;
pub mod fdr;
pub mod instr_map;
mod log;
pub mod write;

pub use log::{parse_header, BufferStart, Event, EventKind, Header, Log, LogMode, HEADER_LEN};

use super::ParseError;

/// Decodes a whole log. Fails only when the header is unreadable; see [`Log::problems`].
pub fn parse(data: &[u8]) -> Result<Log, ParseError> {
    let mut events = Vec::with_capacity(data.len() / basic::RECORD_LEN);
    let mut log = parse_streaming(data, |e| events.push(e))?;
    log.events = events;
    Ok(log)
}

/// Like [`parse`], but hands each event to `on_event` (file order) instead of keeping it: the
/// returned log's `events` is empty. For logs too big to hold decoded.
pub fn parse_streaming(data: &[u8], mut on_event: impl FnMut(Event)) -> Result<Log, ParseError> {
    let header = parse_header(data)?;
    let mut log = Log {
        header,
        events: Vec::new(),
        buffers: Vec::new(),
        call_arguments: 0,
        custom_events: 0,
        typed_events: 0,
        problems: Vec::new(),
        event_count: 0,
        first_tsc: None,
    };
    let (mut count, mut first) = (0, None);
    let mut sink = |e: Event| {
        count += 1;
        first.get_or_insert(e.tsc);
        on_event(e);
    };
    match log.header.mode {
        LogMode::Basic => basic::parse_records(data, &mut log, &mut sink),
        LogMode::Fdr => fdr::parse_buffers(data, &mut log, &mut sink),
    }
    log.event_count = count;
    log.first_tsc = first;
    Ok(log)
}
