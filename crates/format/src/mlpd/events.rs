//! The typed events of an .mlpd file and the numeric constants of the format (event types,
//! exinfo sub-types, metadata kinds). Values are already resolved against the buffer's bases:
//! pointers and methods are absolute, object addresses are `(obj_base + delta) << 3`.

use std::borrow::Cow;

pub const TYPE_ALLOC: u8 = 0;
pub const TYPE_GC: u8 = 1;
pub const TYPE_METADATA: u8 = 2;
pub const TYPE_METHOD: u8 = 3;
pub const TYPE_EXCEPTION: u8 = 4;
pub const TYPE_MONITOR: u8 = 5;
pub const TYPE_HEAP: u8 = 6;
pub const TYPE_SAMPLE: u8 = 7;
pub const TYPE_RUNTIME: u8 = 8;
pub const TYPE_COVERAGE: u8 = 9;
pub const TYPE_META: u8 = 10;

/// Exinfo values (already shifted into the high nibble).
pub mod exinfo {
    pub const ALLOC_BT: u8 = 0x10;
    pub const GC_EVENT: u8 = 0x10;
    pub const GC_RESIZE: u8 = 0x20;
    pub const GC_MOVE: u8 = 0x30;
    pub const GC_HANDLE_CREATED: u8 = 0x40;
    pub const GC_HANDLE_DESTROYED: u8 = 0x50;
    pub const GC_HANDLE_CREATED_BT: u8 = 0x60;
    pub const GC_HANDLE_DESTROYED_BT: u8 = 0x70;
    pub const GC_FINALIZE_START: u8 = 0x80;
    pub const GC_FINALIZE_END: u8 = 0x90;
    pub const GC_FINALIZE_OBJECT_START: u8 = 0xA0;
    pub const GC_FINALIZE_OBJECT_END: u8 = 0xB0;
    pub const METADATA_END_LOAD: u8 = 0x20;
    pub const METADATA_END_UNLOAD: u8 = 0x40;
    pub const LEAVE: u8 = 0x10;
    pub const ENTER: u8 = 0x20;
    pub const EXC_LEAVE: u8 = 0x30;
    pub const JIT: u8 = 0x40;
    pub const CLAUSE: u8 = 0x10;
    pub const THROW_BT: u8 = 0x80;
    pub const MONITOR_BT: u8 = 0x80;
    pub const HEAP_START: u8 = 0x00;
    pub const HEAP_END: u8 = 0x10;
    pub const HEAP_OBJECT: u8 = 0x20;
    pub const HEAP_ROOT: u8 = 0x30;
    pub const HEAP_ROOT_REGISTER: u8 = 0x40;
    pub const HEAP_ROOT_UNREGISTER: u8 = 0x50;
    pub const SAMPLE_HIT: u8 = 0x00;
    pub const SAMPLE_USYM: u8 = 0x10;
    pub const SAMPLE_UBIN: u8 = 0x20;
    pub const SAMPLE_COUNTERS_DESC: u8 = 0x30;
    pub const SAMPLE_COUNTERS: u8 = 0x40;
    pub const JITHELPER: u8 = 0x10;
    pub const COVERAGE_ASSEMBLY: u8 = 0x00;
    pub const COVERAGE_METHOD: u8 = 0x10;
    pub const COVERAGE_STATEMENT: u8 = 0x20;
    pub const COVERAGE_CLASS: u8 = 0x30;
    pub const SYNC_POINT: u8 = 0x00;
    pub const AOT_ID: u8 = 0x10;
}

/// Metadata kinds (the `mtype` byte).
pub mod mtype {
    pub const CLASS: u8 = 1;
    pub const IMAGE: u8 = 2;
    pub const ASSEMBLY: u8 = 3;
    pub const DOMAIN: u8 = 4;
    pub const THREAD: u8 = 5;
    pub const CONTEXT: u8 = 6;
    pub const VTABLE: u8 = 7;
}

/// `MonoProfilerCodeBufferType::SPECIFIC_TRAMPOLINE`: the only JIT helper that carries a name.
pub const CODE_BUFFER_SPECIFIC_TRAMPOLINE: u8 = 5;
/// What a JIT helper is (`MonoProfilerCodeBufferType`, numbering of data v14+).
pub fn code_buffer_name(kind: u64) -> &'static str {
    match kind {
        0 => "method",
        1 => "method trampoline",
        2 => "unbox trampoline",
        3 => "imt trampoline",
        4 => "generics trampoline",
        5 => "specific trampoline",
        6 => "misc helper",
        7 => "monitor/lock",
        8 => "delegate invoke",
        9 => "exception handling",
        _ => "unspecified",
    }
}

/// The counter section whose name is a string in the event.
pub const COUNTER_SECTION_PERFCOUNTERS: u64 = 1 << 15;
/// Counter value types (`MONO_COUNTER_*`).
pub mod counter_type {
    pub const INT: u64 = 0;
    pub const UINT: u64 = 1;
    pub const WORD: u64 = 2;
    pub const LONG: u64 = 3;
    pub const ULONG: u64 = 4;
    pub const DOUBLE: u64 = 5;
    pub const STRING: u64 = 6;
    pub const TIME_INTERVAL: u64 = 7;
}

/// One decoded event: where it starts in the file, its time (ns, the producer's clock —
/// CLOCK_MONOTONIC for Mono on Linux), and what it says.
#[derive(Clone, Debug, PartialEq)]
pub struct Event<'a> {
    pub offset: usize,
    pub time: u64,
    pub kind: EventKind<'a>,
}

/// Metadata load phase from the exinfo bits (0 = a name/description event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataPhase {
    Described,
    EndLoad,
    EndUnload,
    /// Any other exinfo (data format 1's TYPE_LOAD_ERR flag, for instance).
    Other(u8),
}

impl MetadataPhase {
    pub fn from_exinfo(exinfo: u8) -> Self {
        match exinfo {
            0 => Self::Described,
            exinfo::METADATA_END_LOAD => Self::EndLoad,
            exinfo::METADATA_END_UNLOAD => Self::EndUnload,
            other => Self::Other(other),
        }
    }

    pub fn exinfo(self) -> u8 {
        match self {
            Self::Described => 0,
            Self::EndLoad => exinfo::METADATA_END_LOAD,
            Self::EndUnload => exinfo::METADATA_END_UNLOAD,
            Self::Other(b) => b,
        }
    }
}

/// What a METADATA event describes (after `mtype` and the pointer).
#[derive(Clone, Debug, PartialEq)]
pub enum Metadata<'a> {
    Class {
        image: u64,
        name: Cow<'a, str>,
    },
    /// `mvid` exists from data v16.
    Image {
        name: Cow<'a, str>,
        mvid: Option<Cow<'a, str>>,
    },
    Assembly {
        image: Option<u64>,
        name: Cow<'a, str>,
    },
    /// The friendly name is present only in the name event (phase `Described`).
    Domain {
        name: Option<Cow<'a, str>>,
    },
    Context {
        domain: u64,
    },
    /// The pointer is the thread's pthread_t, the same value as a buffer's `thread_id`.
    Thread {
        name: Option<Cow<'a, str>>,
    },
    VTable {
        domain: u64,
        class: u64,
    },
}

/// One root of a HEAP_ROOT event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeapRoot {
    /// v15+: the root's address and the object.
    Address { address: u64, object: u64 },
    /// Before v15: the object, its root type and extra info.
    Typed {
        object: u64,
        root_type: u64,
        extra: u64,
    },
}

/// One counter description of COUNTERS_DESC.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterDesc<'a> {
    pub section: u64,
    /// Only for the PERFCOUNTERS section.
    pub section_name: Option<Cow<'a, str>>,
    pub name: Cow<'a, str>,
    pub kind: u64,
    pub unit: u64,
    pub variance: u64,
    pub index: u64,
}

/// An encoded counter value: integers are deltas from the counter's previous value.
#[derive(Clone, Debug, PartialEq)]
pub enum CounterRaw<'a> {
    Signed(i64),
    Unsigned(u64),
    Double(f64),
    String(Option<Cow<'a, str>>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct CounterSample<'a> {
    pub index: u64,
    pub kind: u64,
    pub value: CounterRaw<'a>,
}

/// Everything an event can say. Backtraces are method pointers, the leaf first.
#[derive(Clone, Debug, PartialEq)]
pub enum EventKind<'a> {
    /// `class` is a MonoClass* up to v14 and a MonoVTable* from v15.
    Alloc {
        class: u64,
        object: u64,
        size: u64,
        backtrace: Option<&'a [u64]>,
    },
    GcEvent {
        event: u64,
        generation: u64,
    },
    GcResize {
        heap_size: u64,
    },
    /// Old/new address pairs, flattened.
    GcMove {
        objects: Vec<u64>,
    },
    GcHandleCreated {
        handle_type: u64,
        handle: u64,
        object: u64,
        backtrace: Option<&'a [u64]>,
    },
    GcHandleDestroyed {
        handle_type: u64,
        handle: u64,
        backtrace: Option<&'a [u64]>,
    },
    GcFinalizeStart,
    GcFinalizeEnd,
    GcFinalizeObjectStart {
        object: u64,
    },
    GcFinalizeObjectEnd {
        object: u64,
    },
    Metadata {
        phase: MetadataPhase,
        pointer: u64,
        what: Metadata<'a>,
    },
    MethodEnter {
        method: u64,
    },
    MethodLeave {
        method: u64,
    },
    MethodExcLeave {
        method: u64,
    },
    /// `code`/`size` are 0 when Mono had no code range (methods seen only in backtraces).
    Jit {
        method: u64,
        code: u64,
        size: u64,
        name: Cow<'a, str>,
    },
    Throw {
        object: u64,
        backtrace: Option<&'a [u64]>,
    },
    Clause {
        clause_type: u64,
        index: u64,
        method: u64,
        exception: Option<u64>,
    },
    Monitor {
        event: u64,
        object: u64,
        backtrace: Option<&'a [u64]>,
    },
    HeapStart,
    HeapEnd,
    HeapObject {
        object: u64,
        class: u64,
        size: u64,
        generation: Option<u8>,
        /// `(offset, object)` pairs flattened; offsets are u64::MAX in data format 1.
        references: Vec<u64>,
    },
    HeapRoots {
        gc_count: Option<u64>,
        roots: Vec<HeapRoot>,
    },
    HeapRootRegister {
        start: u64,
        size: u64,
        source: u8,
        key: u64,
        name: Cow<'a, str>,
    },
    HeapRootUnregister {
        start: u64,
    },
    /// `thread` is a pthread_t (the buffer's thread before v11); `ips` the interrupted IPs;
    /// `frames` the managed backtrace, leaf first.
    SampleHit {
        sample_type: Option<u64>,
        thread: u64,
        ips: &'a [u64],
        frames: &'a [u64],
    },
    SampleUsym {
        address: u64,
        size: u64,
        name: Cow<'a, str>,
    },
    SampleUbin {
        address: u64,
        offset: u64,
        size: u64,
        name: Cow<'a, str>,
    },
    CountersDesc {
        counters: Vec<CounterDesc<'a>>,
    },
    /// `timestamp_ms` is set for data < 13 (ms since startup); later versions use the event time.
    Counters {
        timestamp_ms: Option<u64>,
        values: Vec<CounterSample<'a>>,
    },
    JitHelper {
        kind: u64,
        address: u64,
        size: u64,
        name: Option<Cow<'a, str>>,
    },
    /// Code coverage (data 10–15), boxed: rare and large.
    Coverage(Box<Coverage<'a>>),
    SyncPoint {
        kind: u8,
    },
    AotId {
        id: Cow<'a, str>,
    },
}

/// TYPE_COVERAGE events (data 10–15).
#[derive(Clone, Debug, PartialEq)]
pub enum Coverage<'a> {
    Assembly {
        name: Cow<'a, str>,
        guid: Cow<'a, str>,
        filename: Cow<'a, str>,
        methods: u64,
        fully_covered: u64,
        partially_covered: u64,
    },
    Method {
        assembly: Cow<'a, str>,
        class: Cow<'a, str>,
        name: Cow<'a, str>,
        signature: Cow<'a, str>,
        filename: Cow<'a, str>,
        token: u64,
        method_id: u64,
        statements: u64,
    },
    Statement {
        method_id: u64,
        offset: u64,
        counter: u64,
        line: u64,
        column: u64,
    },
    Class {
        assembly: Cow<'a, str>,
        class: Cow<'a, str>,
        methods: u64,
        fully_covered: u64,
        partially_covered: u64,
    },
}
