//! What the decoder hands over, in file order: each buffer's header and its events, to a
//! [`Visitor`].

use std::mem::ManuallyDrop;

use super::events::{Event, EventKind};

/// The 48-byte header of one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferHeader {
    /// File offset of the buffer header.
    pub offset: usize,
    /// Bytes of events after the header.
    pub len: u32,
    /// Start of the buffer's running event time, ns on the event clock.
    pub time_base: u64,
    /// Base that pointer deltas in the buffer add to.
    pub ptr_base: u64,
    /// Base of object address deltas, in 8-byte units (an address shifted right by 3).
    pub obj_base: u64,
    /// The writing thread's pthread_t (not the kernel TID).
    pub thread_id: u64,
    /// First value of the buffer's running MonoMethod*, which method deltas update.
    pub method_base: u64,
}

/// Receives what the decoder reads, in file order.
pub trait Visitor {
    /// A complete buffer is about to be decoded.
    fn buffer(&mut self, _buffer: &BufferHeader) {}
    /// An event of `buffer`; enter/leave events come here too unless the two methods below
    /// are overridden.
    fn event(&mut self, buffer: &BufferHeader, event: &Event<'_>);
    /// A METHOD enter event. Calls-mode files are mostly enter/leave events, so the decoder
    /// hands them over without building an [`Event`]; override these two to skip it too.
    #[inline]
    fn method_enter(&mut self, buffer: &BufferHeader, offset: usize, time: u64, method: u64) {
        let kind = EventKind::MethodEnter { method };
        // Nothing to drop in this event; without ManuallyDrop the compiler still calls the
        // event's (out-of-line) drop glue.
        self.event(buffer, &ManuallyDrop::new(Event { offset, time, kind }));
    }
    /// A METHOD leave event (not an exception leave, which goes to `event`).
    #[inline]
    fn method_leave(&mut self, buffer: &BufferHeader, offset: usize, time: u64, method: u64) {
        let kind = EventKind::MethodLeave { method };
        // Nothing to drop in this event; without ManuallyDrop the compiler still calls the
        // event's (out-of-line) drop glue.
        self.event(buffer, &ManuallyDrop::new(Event { offset, time, kind }));
    }
}

impl<F: FnMut(&BufferHeader, &Event<'_>)> Visitor for F {
    fn event(&mut self, buffer: &BufferHeader, event: &Event<'_>) {
        self(buffer, event)
    }
}
