//! Decodes the events of one buffer. The field layout comes from `Layout`; the delta bases
//! (time, pointer, object, method) are kept here exactly as the format defines them, with
//! wrapping arithmetic (the writer's JIT events carry times older than the buffer's base).

use std::borrow::Cow;

use super::events::*;
use super::layout::{Layout, Width};
use super::visitor::{BufferHeader, Visitor};
use crate::ParseError;

/// Byte reader over one buffer's events; offsets in errors are absolute file offsets.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8], base: usize) -> Self {
        Self { data, pos: 0, base }
    }

    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn error(&self, expected: &str) -> ParseError {
        ParseError::new(self.offset(), expected)
    }

    #[inline]
    pub(crate) fn u8(&mut self) -> Result<u8, ParseError> {
        let b = *self
            .data
            .get(self.pos)
            .ok_or_else(|| self.error("a byte before the end of the buffer"))?;
        self.pos += 1;
        Ok(b)
    }

    /// The unread bytes.
    #[inline(always)]
    fn rest(&self) -> &'a [u8] {
        self.data.get(self.pos..).unwrap_or_default()
    }

    /// The value bits of a LEB128 value of up to 3 bytes, and its length; `None` for longer
    /// or truncated values. Almost all values (time deltas, method deltas, sizes) are this
    /// short, and decoding them without a loop is what makes the hot path fast.
    #[inline(always)]
    fn short_leb(&self) -> Option<(u64, usize)> {
        let low = |b: u8| u64::from(b & 0x7f);
        match *self.rest() {
            [b0, ..] if b0 < 0x80 => Some((u64::from(b0), 1)),
            [b0, b1, ..] if b1 < 0x80 => Some((low(b0) | u64::from(b1) << 7, 2)),
            [b0, b1, b2, ..] if b2 < 0x80 => {
                Some((low(b0) | low(b1) << 7 | u64::from(b2) << 14, 3))
            }
            _ => None,
        }
    }

    #[inline(always)]
    pub(crate) fn uleb(&mut self) -> Result<u64, ParseError> {
        match self.short_leb() {
            Some((value, len)) => {
                self.pos += len;
                Ok(value)
            }
            None => self.uleb_long(),
        }
    }

    fn uleb_long(&mut self) -> Result<u64, ParseError> {
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.data.get(self.pos) else {
                return Err(self.error("the rest of an unsigned LEB128 value"));
            };
            self.pos += 1;
            if shift < 64 {
                value |= u64::from(b & 0x7f) << shift;
            }
            if b & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
            if shift >= 70 {
                return Err(self.error("an unsigned LEB128 value of at most 10 bytes"));
            }
        }
    }

    #[inline(always)]
    pub(crate) fn sleb(&mut self) -> Result<i64, ParseError> {
        match self.short_leb() {
            Some((value, len)) => {
                self.pos += len;
                // The top bit of the 7 * len value bits is the sign.
                let unused = 64 - 7 * len as u32;
                Ok(((value << unused) as i64) >> unused)
            }
            None => self.sleb_long(),
        }
    }

    fn sleb_long(&mut self) -> Result<i64, ParseError> {
        let mut value = 0i64;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.data.get(self.pos) else {
                return Err(self.error("the rest of a signed LEB128 value"));
            };
            self.pos += 1;
            if shift < 64 {
                value |= i64::from(b & 0x7f) << shift;
            }
            shift += 7;
            if b & 0x80 == 0 {
                if shift < 64 && b & 0x40 != 0 {
                    value |= -1i64 << shift;
                }
                return Ok(value);
            }
            if shift >= 70 {
                return Err(self.error("a signed LEB128 value of at most 10 bytes"));
            }
        }
    }

    fn width(&mut self, width: Width) -> Result<u64, ParseError> {
        match width {
            Width::Byte => self.u8().map(u64::from),
            Width::Uleb => self.uleb(),
        }
    }

    fn str(&mut self) -> Result<Cow<'a, str>, ParseError> {
        let rest = &self.data[self.pos.min(self.data.len())..];
        let Some(len) = rest.iter().position(|&b| b == 0) else {
            return Err(self.error("a NUL-terminated string"));
        };
        self.pos += len + 1;
        Ok(String::from_utf8_lossy(&rest[..len]))
    }

    fn f64(&mut self) -> Result<f64, ParseError> {
        let end = self.pos + 8;
        let Some(b) = self.data.get(self.pos..end) else {
            return Err(self.error("an 8-byte double"));
        };
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        self.pos = end;
        Ok(f64::from_le_bytes(a))
    }
}

/// The running delta bases of one buffer.
pub(crate) struct Bases {
    pub time: u64,
    pub ptr: u64,
    pub obj: u64,
    pub method: u64,
}

impl Bases {
    pub(crate) fn of(header: &BufferHeader) -> Self {
        Self {
            time: header.time_base,
            ptr: header.ptr_base,
            obj: header.obj_base,
            method: header.method_base,
        }
    }

    fn ptr(&self, d: i64) -> u64 {
        self.ptr.wrapping_add(d as u64)
    }

    fn obj(&self, d: i64) -> u64 {
        self.obj.wrapping_add(d as u64) << 3
    }

    #[inline(always)]
    fn method(&mut self, d: i64) -> u64 {
        self.method = self.method.wrapping_add(d as u64);
        self.method
    }
}

/// Decodes the event at the reader's position and hands it to the visitor. Backtrace frames
/// and sample IPs are collected in `scratch`, which the event borrows. The event is passed by
/// reference from here rather than returned: moving it out costs more than decoding it.
///
/// Method enter/leave events, most of a calls-mode file, are decoded right here and handed to
/// the visitor's `method_enter`/`method_leave` without an `Event`; this stays small enough
/// to inline into the buffer loop, while the big decoder of the rest is a call.
#[inline(always)]
pub(crate) fn decode_event<V: Visitor>(
    r: &mut Reader<'_>,
    layout: &Layout,
    bases: &mut Bases,
    buffer: &BufferHeader,
    scratch: &mut Vec<u64>,
    visitor: &mut V,
) -> Result<(), ParseError> {
    let offset = r.offset();
    let byte = r.u8()?;
    // The fast path of calls-mode files: no `Event` is built.
    if byte == TYPE_METHOD | exinfo::ENTER || byte == TYPE_METHOD | exinfo::LEAVE {
        bases.time = bases.time.wrapping_add(r.uleb()?);
        let method = bases.method(r.sleb()?);
        if byte & 0xf0 == exinfo::ENTER {
            visitor.method_enter(buffer, offset, bases.time, method);
        } else {
            visitor.method_leave(buffer, offset, bases.time, method);
        }
        return Ok(());
    }
    decode_other_event(r, offset, byte, layout, bases, buffer, scratch, visitor)
}

/// Decodes every event but method enter/leave (`byte`, its first byte, is read).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn decode_other_event<V: Visitor>(
    r: &mut Reader<'_>,
    offset: usize,
    byte: u8,
    layout: &Layout,
    bases: &mut Bases,
    buffer: &BufferHeader,
    scratch: &mut Vec<u64>,
    visitor: &mut V,
) -> Result<(), ParseError> {
    scratch.clear();
    let (kind, sub) = (byte & 0x0f, byte & 0xf0);
    let mut decoder = EventDecoder {
        r,
        layout,
        bases,
        scratch: &mut *scratch,
        offset,
        n_ips: 0,
    };
    let kind = match kind {
        TYPE_ALLOC => decoder.alloc(sub)?,
        TYPE_GC => decoder.gc(sub)?,
        TYPE_METADATA => decoder.metadata(sub)?,
        TYPE_METHOD => decoder.method_event(sub)?,
        TYPE_EXCEPTION => decoder.exception(sub)?,
        TYPE_MONITOR => decoder.monitor(sub)?,
        TYPE_HEAP => decoder.heap(sub)?,
        TYPE_SAMPLE => decoder.sample(sub, buffer.thread_id)?,
        TYPE_RUNTIME if layout.data_version >= 8 => decoder.runtime(sub)?,
        TYPE_COVERAGE if layout.coverage => decoder.coverage(sub)?,
        TYPE_META if layout.data_version >= 13 => decoder.meta(sub)?,
        _ => return Err(ParseError::new(offset, unknown(byte))),
    };
    let (time, n_ips) = (decoder.bases.time, decoder.n_ips);
    let mut event = Event { offset, time, kind };
    attach_lists(&mut event.kind, scratch, n_ips);
    visitor.event(buffer, &event);
    Ok(())
}

/// Backtraces and sample IPs are decoded into the scratch list while the event is built; this
/// points the event's placeholders at it.
fn attach_lists<'a>(kind: &mut EventKind<'a>, collected: &'a [u64], n_ips: usize) {
    match kind {
        EventKind::Alloc { backtrace, .. }
        | EventKind::GcHandleCreated { backtrace, .. }
        | EventKind::GcHandleDestroyed { backtrace, .. }
        | EventKind::Throw { backtrace, .. }
        | EventKind::Monitor { backtrace, .. }
            if backtrace.is_some() =>
        {
            *backtrace = Some(collected);
        }
        EventKind::SampleHit { ips, frames, .. } => {
            let (i, f) = collected.split_at(n_ips.min(collected.len()));
            *ips = i;
            *frames = f;
        }
        _ => {}
    }
}

fn unknown(byte: u8) -> String {
    format!("a known event type (got byte 0x{byte:02x})")
}

struct EventDecoder<'r, 'a> {
    r: &'r mut Reader<'a>,
    layout: &'r Layout,
    bases: &'r mut Bases,
    scratch: &'r mut Vec<u64>,
    offset: usize,
    /// How many of the scratch values are sample IPs (the rest are frames).
    n_ips: usize,
}

/// Placeholder for a list that `attach_lists` fills in.
const PENDING: &[u64] = &[];

type Decoded<'a> = Result<EventKind<'a>, ParseError>;

impl<'a> EventDecoder<'_, 'a> {
    #[inline(always)]
    fn time(&mut self) -> Result<(), ParseError> {
        let diff = self.r.uleb()?;
        self.bases.time = self.bases.time.wrapping_add(diff);
        Ok(())
    }

    /// The time diff of events that gained one in v13.
    fn time_since_v13(&mut self) -> Result<(), ParseError> {
        if self.layout.uniform_time {
            self.time()?;
        }
        Ok(())
    }

    #[inline(always)]
    fn ptr(&mut self) -> Result<u64, ParseError> {
        let d = self.r.sleb()?;
        Ok(self.bases.ptr(d))
    }

    #[inline(always)]
    fn obj(&mut self) -> Result<u64, ParseError> {
        let d = self.r.sleb()?;
        Ok(self.bases.obj(d))
    }

    fn method(&mut self) -> Result<u64, ParseError> {
        let d = self.r.sleb()?;
        Ok(self.bases.method(d))
    }

    fn bad(&self, what: &str, sub: u8) -> ParseError {
        ParseError::new(
            self.offset,
            format!("a known {what} sub-type (got 0x{sub:02x})"),
        )
    }

    /// Reads `n` frames into the scratch list.
    fn frames(&mut self, n: u64) -> Result<(), ParseError> {
        for _ in 0..n {
            let d = self.r.sleb()?;
            let m = if self.layout.backtrace_method_delta {
                self.bases.method(d)
            } else {
                self.bases.ptr(d)
            };
            self.scratch.push(m);
        }
        Ok(())
    }

    fn backtrace(&mut self, present: bool) -> Result<Option<&'a [u64]>, ParseError> {
        if !present {
            return Ok(None);
        }
        if self.layout.flags_fields {
            self.r.uleb()?;
        }
        let n = self.r.uleb()?;
        self.frames(n)?;
        Ok(Some(PENDING))
    }

    #[inline(always)]
    fn alloc(&mut self, sub: u8) -> Decoded<'a> {
        self.time()?;
        let class = self.ptr()?;
        let object = self.obj()?;
        let size = self.r.uleb()?;
        let backtrace = self.backtrace(sub & exinfo::ALLOC_BT != 0)?;
        Ok(EventKind::Alloc {
            class,
            object,
            size,
            backtrace,
        })
    }

    #[inline(always)]
    fn gc(&mut self, sub: u8) -> Decoded<'a> {
        self.time()?;
        let small = self.layout.small_fields;
        Ok(match sub {
            exinfo::GC_EVENT => EventKind::GcEvent {
                event: self.r.width(small)?,
                generation: self.r.width(small)?,
            },
            exinfo::GC_RESIZE => EventKind::GcResize {
                heap_size: self.r.uleb()?,
            },
            exinfo::GC_MOVE => {
                let n = self.r.uleb()?;
                let mut objects = Vec::new();
                for _ in 0..n {
                    objects.push(self.obj()?);
                }
                EventKind::GcMove { objects }
            }
            exinfo::GC_HANDLE_CREATED | exinfo::GC_HANDLE_CREATED_BT => {
                let handle_type = self.r.uleb()?;
                let handle = self.r.uleb()?;
                let object = self.obj()?;
                let backtrace = self.backtrace(sub == exinfo::GC_HANDLE_CREATED_BT)?;
                EventKind::GcHandleCreated {
                    handle_type,
                    handle,
                    object,
                    backtrace,
                }
            }
            exinfo::GC_HANDLE_DESTROYED | exinfo::GC_HANDLE_DESTROYED_BT => {
                let handle_type = self.r.uleb()?;
                let handle = self.r.uleb()?;
                let backtrace = self.backtrace(sub == exinfo::GC_HANDLE_DESTROYED_BT)?;
                EventKind::GcHandleDestroyed {
                    handle_type,
                    handle,
                    backtrace,
                }
            }
            exinfo::GC_FINALIZE_START => EventKind::GcFinalizeStart,
            exinfo::GC_FINALIZE_END => EventKind::GcFinalizeEnd,
            exinfo::GC_FINALIZE_OBJECT_START => EventKind::GcFinalizeObjectStart {
                object: self.obj()?,
            },
            exinfo::GC_FINALIZE_OBJECT_END => EventKind::GcFinalizeObjectEnd {
                object: self.obj()?,
            },
            _ => return Err(self.bad("GC", sub)),
        })
    }

    fn flags(&mut self) -> Result<(), ParseError> {
        if self.layout.flags_fields {
            self.r.uleb()?;
        }
        Ok(())
    }

    #[inline(always)]
    fn metadata(&mut self, sub: u8) -> Decoded<'a> {
        self.time()?;
        let kind = self.r.u8()?;
        let pointer = self.ptr()?;
        let phase = MetadataPhase::from_exinfo(sub);
        let named = phase == MetadataPhase::Described;
        let what = match kind {
            mtype::CLASS => {
                let image = self.ptr()?;
                self.flags()?;
                Metadata::Class {
                    image,
                    name: self.r.str()?,
                }
            }
            mtype::IMAGE => {
                self.flags()?;
                let name = self.r.str()?;
                let mvid = if self.layout.data_version >= 16 && phase == MetadataPhase::EndLoad {
                    Some(self.r.str()?)
                } else {
                    None
                };
                Metadata::Image { name, mvid }
            }
            mtype::ASSEMBLY => {
                let image = if self.layout.assembly_image {
                    Some(self.ptr()?)
                } else {
                    None
                };
                self.flags()?;
                Metadata::Assembly {
                    image,
                    name: self.r.str()?,
                }
            }
            mtype::DOMAIN => {
                self.flags()?;
                Metadata::Domain {
                    name: if named { Some(self.r.str()?) } else { None },
                }
            }
            mtype::CONTEXT => {
                self.flags()?;
                Metadata::Context {
                    domain: self.ptr()?,
                }
            }
            mtype::THREAD => {
                self.flags()?;
                Metadata::Thread {
                    name: if named { Some(self.r.str()?) } else { None },
                }
            }
            mtype::VTABLE if self.layout.data_version >= 15 => Metadata::VTable {
                domain: self.ptr()?,
                class: self.ptr()?,
            },
            _ => {
                return Err(ParseError::new(
                    self.offset,
                    format!("a known metadata kind (got {kind})"),
                ))
            }
        };
        Ok(EventKind::Metadata {
            phase,
            pointer,
            what,
        })
    }

    #[inline(always)]
    fn method_event(&mut self, sub: u8) -> Decoded<'a> {
        self.time()?;
        let method = self.method()?;
        Ok(match sub {
            exinfo::ENTER => EventKind::MethodEnter { method },
            exinfo::LEAVE => EventKind::MethodLeave { method },
            exinfo::EXC_LEAVE => EventKind::MethodExcLeave { method },
            exinfo::JIT => EventKind::Jit {
                method,
                code: self.ptr()?,
                size: self.r.uleb()?,
                name: self.r.str()?,
            },
            _ => return Err(self.bad("METHOD", sub)),
        })
    }

    #[inline(always)]
    fn exception(&mut self, sub: u8) -> Decoded<'a> {
        self.time()?;
        match sub & 0x70 {
            exinfo::CLAUSE => {
                let clause_type = self.r.width(self.layout.small_fields)?;
                let index = self.r.uleb()?;
                let method = self.method()?;
                let exception = if self.layout.clause_exception {
                    Some(self.obj()?)
                } else {
                    None
                };
                Ok(EventKind::Clause {
                    clause_type,
                    index,
                    method,
                    exception,
                })
            }
            0 => {
                let object = self.obj()?;
                let backtrace = self.backtrace(sub & exinfo::THROW_BT != 0)?;
                Ok(EventKind::Throw { object, backtrace })
            }
            _ => Err(self.bad("EXCEPTION", sub)),
        }
    }

    #[inline(always)]
    fn monitor(&mut self, sub: u8) -> Decoded<'a> {
        self.time()?;
        let event = if self.layout.monitor_event_byte {
            u64::from(self.r.u8()?)
        } else {
            u64::from((sub >> 4) & 0x3)
        };
        let object = self.obj()?;
        let backtrace = self.backtrace(sub & exinfo::MONITOR_BT != 0)?;
        Ok(EventKind::Monitor {
            event,
            object,
            backtrace,
        })
    }

    #[inline(always)]
    fn heap(&mut self, sub: u8) -> Decoded<'a> {
        match sub {
            exinfo::HEAP_START => {
                self.time()?;
                Ok(EventKind::HeapStart)
            }
            exinfo::HEAP_END => {
                self.time()?;
                Ok(EventKind::HeapEnd)
            }
            exinfo::HEAP_OBJECT => {
                self.time_since_v13()?;
                let object = self.obj()?;
                let class = self.ptr()?;
                let size = self.r.uleb()?;
                let generation = if self.layout.heap_object_generation {
                    Some(self.r.u8()?)
                } else {
                    None
                };
                let n = self.r.uleb()?;
                let mut references = Vec::new();
                let mut last_offset = 0u64;
                for _ in 0..n {
                    let offset = if self.layout.heap_ref_offsets {
                        last_offset = last_offset.wrapping_add(self.r.uleb()?);
                        last_offset
                    } else {
                        u64::MAX
                    };
                    references.push(offset);
                    references.push(self.obj()?);
                }
                Ok(EventKind::HeapObject {
                    object,
                    class,
                    size,
                    generation,
                    references,
                })
            }
            exinfo::HEAP_ROOT => {
                self.time_since_v13()?;
                let n = self.r.uleb()?;
                let mut roots = Vec::new();
                if self.layout.heap_root_pairs {
                    for _ in 0..n {
                        let address = self.ptr()?;
                        let object = self.obj()?;
                        roots.push(HeapRoot::Address { address, object });
                    }
                    return Ok(EventKind::HeapRoots {
                        gc_count: None,
                        roots,
                    });
                }
                let gc_count = self.r.uleb()?;
                for _ in 0..n {
                    let object = self.obj()?;
                    let root_type = self.r.width(self.layout.root_type)?;
                    let extra = self.r.uleb()?;
                    roots.push(HeapRoot::Typed {
                        object,
                        root_type,
                        extra,
                    });
                }
                Ok(EventKind::HeapRoots {
                    gc_count: Some(gc_count),
                    roots,
                })
            }
            exinfo::HEAP_ROOT_REGISTER if self.layout.data_version >= 15 => {
                self.time()?;
                Ok(EventKind::HeapRootRegister {
                    start: self.ptr()?,
                    size: self.r.uleb()?,
                    source: self.r.u8()?,
                    key: self.ptr()?,
                    name: self.r.str()?,
                })
            }
            exinfo::HEAP_ROOT_UNREGISTER if self.layout.data_version >= 15 => {
                self.time()?;
                Ok(EventKind::HeapRootUnregister { start: self.ptr()? })
            }
            _ => Err(self.bad("HEAP", sub)),
        }
    }

    #[inline(always)]
    fn sample(&mut self, sub: u8, buffer_thread: u64) -> Decoded<'a> {
        match sub {
            exinfo::SAMPLE_HIT => self.sample_hit(buffer_thread),
            exinfo::SAMPLE_USYM => {
                self.time_since_v13()?;
                Ok(EventKind::SampleUsym {
                    address: self.ptr()?,
                    size: self.r.uleb()?,
                    name: self.r.str()?,
                })
            }
            exinfo::SAMPLE_UBIN if self.layout.ubin => {
                self.time()?;
                let d = self.r.sleb()?;
                let address = if self.layout.ubin_ptr_delta {
                    self.bases.ptr(d)
                } else {
                    d as u64
                };
                Ok(EventKind::SampleUbin {
                    address,
                    offset: self.r.uleb()?,
                    size: self.r.uleb()?,
                    name: self.r.str()?,
                })
            }
            exinfo::SAMPLE_COUNTERS_DESC => self.counters_desc(),
            exinfo::SAMPLE_COUNTERS => self.counters(),
            _ => Err(self.bad("SAMPLE", sub)),
        }
    }

    #[inline(always)]
    fn sample_hit(&mut self, buffer_thread: u64) -> Decoded<'a> {
        let layout = *self.layout;
        let sample_type = if layout.uniform_time {
            self.time()?;
            match layout.sample_type {
                Some(w) => Some(self.r.width(w)?),
                None => None,
            }
        } else {
            // Old hits carry their own absolute timestamp and leave the running time alone.
            let sample_type = self.r.uleb()?;
            let timestamp = self.r.uleb()?;
            self.bases.time = timestamp;
            Some(sample_type)
        };
        let thread = if layout.sample_thread {
            self.ptr()?
        } else {
            buffer_thread
        };
        let n = self.r.uleb()?;
        for _ in 0..n {
            let ip = self.ptr()?;
            self.scratch.push(ip);
        }
        let n_ips = self.scratch.len();
        if layout.sample_backtrace {
            let n = self.r.uleb()?;
            // Sample frames are always method deltas from the running method base.
            for _ in 0..n {
                let m = self.method()?;
                self.scratch.push(m);
                if layout.sample_frame_offsets {
                    self.r.sleb()?;
                    self.r.sleb()?;
                }
            }
        }
        self.n_ips = n_ips;
        Ok(EventKind::SampleHit {
            sample_type,
            thread,
            ips: PENDING,
            frames: PENDING,
        })
    }

    fn counters_desc(&mut self) -> Decoded<'a> {
        self.time_since_v13()?;
        let n = self.r.uleb()?;
        let w = self.layout.counter_fields;
        let mut counters = Vec::new();
        for _ in 0..n {
            let section = self.r.uleb()?;
            let section_name = if section == COUNTER_SECTION_PERFCOUNTERS {
                Some(self.r.str()?)
            } else {
                None
            };
            counters.push(CounterDesc {
                section,
                section_name,
                name: self.r.str()?,
                kind: self.r.width(w)?,
                unit: self.r.width(w)?,
                variance: self.r.width(w)?,
                index: self.r.uleb()?,
            });
        }
        Ok(EventKind::CountersDesc { counters })
    }

    fn counters(&mut self) -> Decoded<'a> {
        let timestamp_ms = if self.layout.uniform_time {
            self.time()?;
            None
        } else {
            Some(self.r.uleb()?)
        };
        let mut values = Vec::new();
        loop {
            let index = self.r.uleb()?;
            if index == 0 {
                break;
            }
            let kind = self.r.width(self.layout.counter_fields)?;
            let value = match kind {
                counter_type::INT | counter_type::WORD | counter_type::LONG => {
                    CounterRaw::Signed(self.r.sleb()?)
                }
                counter_type::TIME_INTERVAL => CounterRaw::Signed(self.r.sleb()?),
                counter_type::UINT | counter_type::ULONG => CounterRaw::Unsigned(self.r.uleb()?),
                counter_type::DOUBLE => CounterRaw::Double(self.r.f64()?),
                counter_type::STRING => {
                    if self.r.u8()? == 0 {
                        CounterRaw::String(None)
                    } else {
                        CounterRaw::String(Some(self.r.str()?))
                    }
                }
                _ => {
                    return Err(ParseError::new(
                        self.offset,
                        format!("a known counter type (got {kind})"),
                    ))
                }
            };
            values.push(CounterSample { index, kind, value });
        }
        Ok(EventKind::Counters {
            timestamp_ms,
            values,
        })
    }

    #[inline(always)]
    fn runtime(&mut self, sub: u8) -> Decoded<'a> {
        self.time()?;
        if sub != exinfo::JITHELPER {
            return Err(self.bad("RUNTIME", sub));
        }
        let kind = self.r.width(self.layout.small_fields)?;
        let address = self.ptr()?;
        let size = self.r.uleb()?;
        let name = if kind == u64::from(CODE_BUFFER_SPECIFIC_TRAMPOLINE) {
            Some(self.r.str()?)
        } else {
            None
        };
        Ok(EventKind::JitHelper {
            kind,
            address,
            size,
            name,
        })
    }

    fn coverage(&mut self, sub: u8) -> Decoded<'a> {
        self.time_since_v13()?;
        let coverage = match sub {
            exinfo::COVERAGE_ASSEMBLY => Coverage::Assembly {
                name: self.r.str()?,
                guid: self.r.str()?,
                filename: self.r.str()?,
                methods: self.r.uleb()?,
                fully_covered: self.r.uleb()?,
                partially_covered: self.r.uleb()?,
            },
            exinfo::COVERAGE_METHOD => Coverage::Method {
                assembly: self.r.str()?,
                class: self.r.str()?,
                name: self.r.str()?,
                signature: self.r.str()?,
                filename: self.r.str()?,
                token: self.r.uleb()?,
                method_id: self.r.uleb()?,
                statements: self.r.uleb()?,
            },
            exinfo::COVERAGE_STATEMENT => Coverage::Statement {
                method_id: self.r.uleb()?,
                offset: self.r.uleb()?,
                counter: self.r.uleb()?,
                line: self.r.uleb()?,
                column: self.r.uleb()?,
            },
            exinfo::COVERAGE_CLASS => Coverage::Class {
                assembly: self.r.str()?,
                class: self.r.str()?,
                methods: self.r.uleb()?,
                fully_covered: self.r.uleb()?,
                partially_covered: self.r.uleb()?,
            },
            _ => return Err(self.bad("COVERAGE", sub)),
        };
        Ok(EventKind::Coverage(Box::new(coverage)))
    }

    #[inline(always)]
    fn meta(&mut self, sub: u8) -> Decoded<'a> {
        self.time()?;
        match sub {
            exinfo::SYNC_POINT => Ok(EventKind::SyncPoint { kind: self.r.u8()? }),
            exinfo::AOT_ID if self.layout.data_version >= 16 => {
                Ok(EventKind::AotId { id: self.r.str()? })
            }
            _ => Err(self.bad("META", sub)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Reader;

    /// The loop-free short path (up to 3 bytes) and the loop agree on both sides of each length.
    #[test]
    fn leb128_short_and_long_values() {
        let unsigned: [(&[u8], u64); 5] = [
            (&[0x7f], 127),
            (&[0x80, 0x01], 128),
            (&[0xff, 0x7f], 0x3fff),
            (&[0x80, 0x80, 0x01], 0x4000),
            (&[0x80, 0x80, 0x80, 0x01], 0x20_0000),
        ];
        for (bytes, value) in unsigned {
            let mut r = Reader::new(bytes, 0);
            assert_eq!(r.uleb().ok(), Some(value), "{bytes:x?}");
            assert!(r.at_end());
        }
        let signed: [(&[u8], i64); 7] = [
            (&[0x3f], 63),
            (&[0x40], -64),
            (&[0x80, 0x7f], -128),
            (&[0xff, 0x00], 127),
            (&[0x80, 0x80, 0x7f], -0x4000),
            (&[0xff, 0xff, 0x3f], 0xf_ffff),
            (&[0x80, 0x80, 0x80, 0x7f], -0x20_0000),
        ];
        for (bytes, value) in signed {
            let mut r = Reader::new(bytes, 0);
            assert_eq!(r.sleb().ok(), Some(value), "{bytes:x?}");
            assert!(r.at_end());
        }
        assert!(Reader::new(&[0x80, 0x80], 0).uleb().is_err());
        assert!(Reader::new(&[0x80, 0x80, 0x80], 0).sleb().is_err());
    }
}
