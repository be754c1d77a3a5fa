//! Test-side writer of data-format-1 `.mlpd` files, written from the 2010 format description
//! (`specs/mono-log-profiler-format-2010.txt`): no 2010-era Mono can run here, so round trips
//! through this writer are how the decoder's format-1 paths are checked.
// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use jprof::format::mlpd::{exinfo, mtype, EventKind, Metadata, BUF_ID, LOG_HEADER_ID};

/// Writes a data-format-1 file: the 32-byte 2010 header, then buffers of events.
pub struct V1Writer {
    out: Vec<u8>,
    events: Vec<u8>,
    time: u64,
    ptr_base: u64,
    obj_base: u64,
    method: u64,
    header_at: usize,
}

fn uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn sleb(out: &mut Vec<u8>, mut v: i64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        let done = (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0);
        if done {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

impl Default for V1Writer {
    fn default() -> Self {
        Self::new()
    }
}

impl V1Writer {
    /// The 2010 header: id, major 0, minor 1, format 1, pointer size 8, and zeros for startup,
    /// overhead, flags, pid and sysid (what proflog.c wrote then).
    pub fn new() -> Self {
        let mut out = Vec::new();
        out.extend_from_slice(&LOG_HEADER_ID.to_le_bytes());
        out.extend_from_slice(&[0, 1, 1, 8]);
        out.extend_from_slice(&[0u8; 24]);
        Self {
            out,
            events: Vec::new(),
            time: 0,
            ptr_base: 0,
            obj_base: 0,
            method: 0,
            header_at: 0,
        }
    }

    /// Starts a buffer; `obj_base` is already shifted right by 3, as the format stores it.
    pub fn begin_buffer(
        &mut self,
        time_base: u64,
        ptr_base: u64,
        obj_base: u64,
        thread: u64,
        method_base: u64,
    ) {
        self.header_at = self.out.len();
        self.out.extend_from_slice(&BUF_ID.to_le_bytes());
        self.out.extend_from_slice(&0u32.to_le_bytes());
        for v in [time_base, ptr_base, obj_base, thread, method_base] {
            self.out.extend_from_slice(&v.to_le_bytes());
        }
        self.events.clear();
        (self.time, self.ptr_base, self.obj_base, self.method) =
            (time_base, ptr_base, obj_base, method_base);
    }

    pub fn end_buffer(&mut self) {
        let len = self.events.len() as u32;
        self.out[self.header_at + 4..self.header_at + 8].copy_from_slice(&len.to_le_bytes());
        self.out.extend_from_slice(&self.events);
        self.events.clear();
    }

    pub fn finish(self) -> Vec<u8> {
        self.out
    }

    fn time(&mut self, t: u64) {
        uleb(&mut self.events, t.wrapping_sub(self.time));
        self.time = t;
    }

    fn ptr(&mut self, p: u64) {
        sleb(&mut self.events, p.wrapping_sub(self.ptr_base) as i64);
    }

    fn obj(&mut self, o: u64) {
        sleb(
            &mut self.events,
            (o >> 3).wrapping_sub(self.obj_base) as i64,
        );
    }

    fn method(&mut self, m: u64) {
        sleb(&mut self.events, m.wrapping_sub(self.method) as i64);
        self.method = m;
    }

    /// Format 1 backtraces: `uleb flags (0); uleb num; sleb frame - ptr_base`.
    fn backtrace(&mut self, frames: Option<&[u64]>) {
        if let Some(frames) = frames {
            uleb(&mut self.events, 0);
            uleb(&mut self.events, frames.len() as u64);
            for &f in frames {
                self.ptr(f);
            }
        }
    }

    /// Writes one event at time `t`. HEAP_OBJECT has no time field in format 1, so `t` must be
    /// the previous event's time for it.
    pub fn event(&mut self, t: u64, kind: &EventKind<'_>) {
        match kind {
            EventKind::Alloc {
                class,
                object,
                size,
                backtrace,
            } => {
                let bt = if backtrace.is_some() {
                    exinfo::ALLOC_BT
                } else {
                    0
                };
                self.events.push(bt);
                self.time(t);
                self.ptr(*class);
                self.obj(*object);
                uleb(&mut self.events, *size);
                self.backtrace(*backtrace);
            }
            EventKind::GcEvent { event, generation } => {
                self.events.push(1 | exinfo::GC_EVENT);
                self.time(t);
                uleb(&mut self.events, *event);
                uleb(&mut self.events, *generation);
            }
            EventKind::GcResize { heap_size } => {
                self.events.push(1 | exinfo::GC_RESIZE);
                self.time(t);
                uleb(&mut self.events, *heap_size);
            }
            EventKind::GcMove { objects } => {
                self.events.push(1 | exinfo::GC_MOVE);
                self.time(t);
                uleb(&mut self.events, objects.len() as u64);
                for &o in objects {
                    self.obj(o);
                }
            }
            EventKind::Metadata {
                phase,
                pointer,
                what,
            } => {
                self.events.push(2 | phase.exinfo());
                self.time(t);
                match what {
                    Metadata::Class { image, name } => {
                        self.events.push(mtype::CLASS);
                        self.ptr(*pointer);
                        self.ptr(*image);
                        uleb(&mut self.events, 0);
                        string(&mut self.events, name);
                    }
                    Metadata::Image { name, .. } => {
                        self.events.push(mtype::IMAGE);
                        self.ptr(*pointer);
                        uleb(&mut self.events, 0);
                        string(&mut self.events, name);
                    }
                    other => panic!("format 1 has no {other:?} metadata"),
                }
            }
            EventKind::MethodEnter { method } => self.method_event(t, exinfo::ENTER, *method),
            EventKind::MethodLeave { method } => self.method_event(t, exinfo::LEAVE, *method),
            EventKind::MethodExcLeave { method } => {
                self.method_event(t, exinfo::EXC_LEAVE, *method)
            }
            EventKind::Jit {
                method,
                code,
                size,
                name,
            } => {
                self.method_event(t, exinfo::JIT, *method);
                self.ptr(*code);
                uleb(&mut self.events, *size);
                string(&mut self.events, name);
            }
            EventKind::Throw { object, backtrace } => {
                let bt = if backtrace.is_some() {
                    exinfo::THROW_BT
                } else {
                    0
                };
                self.events.push(4 | bt);
                self.time(t);
                self.obj(*object);
                self.backtrace(*backtrace);
            }
            EventKind::Clause {
                clause_type,
                index,
                method,
                ..
            } => {
                self.events.push(4 | exinfo::CLAUSE);
                self.time(t);
                uleb(&mut self.events, *clause_type);
                uleb(&mut self.events, *index);
                self.method(*method);
            }
            EventKind::Monitor {
                event,
                object,
                backtrace,
            } => {
                let bt = if backtrace.is_some() {
                    exinfo::MONITOR_BT
                } else {
                    0
                };
                self.events.push(5 | ((*event as u8) << 4) | bt);
                self.time(t);
                self.obj(*object);
                self.backtrace(*backtrace);
            }
            EventKind::HeapStart => {
                self.events.push(6 | exinfo::HEAP_START);
                self.time(t);
            }
            EventKind::HeapEnd => {
                self.events.push(6 | exinfo::HEAP_END);
                self.time(t);
            }
            EventKind::HeapObject {
                object,
                class,
                size,
                references,
                ..
            } => {
                assert_eq!(t, self.time, "format 1 HEAP_OBJECT has no time field");
                self.events.push(6 | exinfo::HEAP_OBJECT);
                self.obj(*object);
                self.ptr(*class);
                uleb(&mut self.events, *size);
                uleb(&mut self.events, references.len() as u64 / 2);
                for pair in references.chunks(2) {
                    self.obj(pair[1]);
                }
            }
            other => panic!("format 1 has no {other:?} event"),
        }
    }

    fn method_event(&mut self, t: u64, sub: u8, method: u64) {
        self.events.push(3 | sub);
        self.time(t);
        self.method(method);
    }

    /// Appends raw event bytes (for damaged-input tests).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.events.extend_from_slice(bytes);
    }
}
