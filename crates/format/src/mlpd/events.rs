//! The typed events of an .mlpd file and the numeric constants of the format (event types,
//! exinfo sub-types, metadata kinds). Values are already resolved against the buffer's bases:
//! pointers and methods are absolute, object addresses are `(obj_base + delta) << 3`.

use std::borrow::Cow;

// Event types: the low 4 bits of an event's first byte.
pub(crate) const TYPE_ALLOC: u8 = 0;
pub(crate) const TYPE_GC: u8 = 1;
pub(crate) const TYPE_METADATA: u8 = 2;
pub(crate) const TYPE_METHOD: u8 = 3;
pub(crate) const TYPE_EXCEPTION: u8 = 4;
pub(crate) const TYPE_MONITOR: u8 = 5;
pub(crate) const TYPE_HEAP: u8 = 6;
pub(crate) const TYPE_SAMPLE: u8 = 7;
pub(crate) const TYPE_RUNTIME: u8 = 8;
pub(crate) const TYPE_COVERAGE: u8 = 9;
pub(crate) const TYPE_META: u8 = 10;

/// Exinfo values (already shifted into the high nibble).
pub mod exinfo {
    /// ALLOC flag: a backtrace follows the allocation.
    pub const ALLOC_BT: u8 = 0x10;
    /// GC: a collection phase changed (event type and generation follow).
    pub const GC_EVENT: u8 = 0x10;
    /// GC: the heap was resized (the new size in bytes follows).
    pub const GC_RESIZE: u8 = 0x20;
    /// GC: objects were moved (old/new address pairs follow).
    pub const GC_MOVE: u8 = 0x30;
    /// GC: a GC handle was created (handle type, handle, object follow).
    pub const GC_HANDLE_CREATED: u8 = 0x40;
    /// GC: a GC handle was destroyed (handle type and handle follow).
    pub const GC_HANDLE_DESTROYED: u8 = 0x50;
    /// GC: a GC handle was created, with a backtrace.
    pub const GC_HANDLE_CREATED_BT: u8 = 0x60;
    /// GC: a GC handle was destroyed, with a backtrace.
    pub const GC_HANDLE_DESTROYED_BT: u8 = 0x70;
    /// GC: the finalizer thread started a round.
    pub const GC_FINALIZE_START: u8 = 0x80;
    /// GC: the finalizer thread ended a round.
    pub const GC_FINALIZE_END: u8 = 0x90;
    /// GC: finalization of one object started.
    pub const GC_FINALIZE_OBJECT_START: u8 = 0xA0;
    /// GC: finalization of one object ended.
    pub const GC_FINALIZE_OBJECT_END: u8 = 0xB0;
    /// METADATA: a load finished (the plain event marks its start).
    pub const METADATA_END_LOAD: u8 = 0x20;
    /// METADATA: an unload finished.
    pub const METADATA_END_UNLOAD: u8 = 0x40;
    /// METHOD: a managed method returned.
    pub const LEAVE: u8 = 0x10;
    /// METHOD: a managed method was entered.
    pub const ENTER: u8 = 0x20;
    /// METHOD: a managed method was left by an exception.
    pub const EXC_LEAVE: u8 = 0x30;
    /// METHOD: a method's native code and full name (TYPE_JIT).
    pub const JIT: u8 = 0x40;
    /// EXCEPTION: an exception clause ran (in the low 3 bits of the exinfo).
    pub const CLAUSE: u8 = 0x10;
    /// EXCEPTION flag: a backtrace follows the throw.
    pub const THROW_BT: u8 = 0x80;
    /// MONITOR flag: a backtrace follows the monitor event.
    pub const MONITOR_BT: u8 = 0x80;
    /// HEAP: a heap walk starts.
    pub const HEAP_START: u8 = 0x00;
    /// HEAP: the heap walk ended.
    pub const HEAP_END: u8 = 0x10;
    /// HEAP: one object found by the heap walk, with its references.
    pub const HEAP_OBJECT: u8 = 0x20;
    /// HEAP: the roots found by a heap walk.
    pub const HEAP_ROOT: u8 = 0x30;
    /// HEAP: a root range was registered with the GC.
    pub const HEAP_ROOT_REGISTER: u8 = 0x40;
    /// HEAP: a root range was unregistered.
    pub const HEAP_ROOT_UNREGISTER: u8 = 0x50;
    /// SAMPLE: a statistical sample of a thread (its IP and backtrace).
    pub const SAMPLE_HIT: u8 = 0x00;
    /// SAMPLE: a native symbol (address, size, name) for sample IPs.
    pub const SAMPLE_USYM: u8 = 0x10;
    /// SAMPLE: a native binary mapped into the process.
    pub const SAMPLE_UBIN: u8 = 0x20;
    /// SAMPLE: descriptions of runtime counters.
    pub const SAMPLE_COUNTERS_DESC: u8 = 0x30;
    /// SAMPLE: values of runtime counters.
    pub const SAMPLE_COUNTERS: u8 = 0x40;
    /// RUNTIME: a JIT helper or trampoline was emitted (its code range follows).
    pub const JITHELPER: u8 = 0x10;
    /// COVERAGE: an assembly and its counts.
    pub const COVERAGE_ASSEMBLY: u8 = 0x00;
    /// COVERAGE: a method.
    pub const COVERAGE_METHOD: u8 = 0x10;
    /// COVERAGE: one statement of a method and its hit count.
    pub const COVERAGE_STATEMENT: u8 = 0x20;
    /// COVERAGE: a class and its counts.
    pub const COVERAGE_CLASS: u8 = 0x30;
    /// META: every buffer written before this point has been flushed (periodic, or at a world stop/start).
    pub const SYNC_POINT: u8 = 0x00;
    /// META: the identity of the AOT image in use.
    pub const AOT_ID: u8 = 0x10;
}

/// Metadata kinds (the `mtype` byte).
pub mod mtype {
    /// A class (MonoClass*): its image and full name.
    pub const CLASS: u8 = 1;
    /// An image (MonoImage*): a loaded module file.
    pub const IMAGE: u8 = 2;
    /// An assembly (MonoAssembly*).
    pub const ASSEMBLY: u8 = 3;
    /// An application domain (MonoDomain*).
    pub const DOMAIN: u8 = 4;
    /// A thread and, where set, its name.
    pub const THREAD: u8 = 5;
    /// A remoting context (MonoAppContext*).
    pub const CONTEXT: u8 = 6;
    /// A vtable: a class in one domain.
    pub const VTABLE: u8 = 7;
}

/// `MonoProfilerCodeBufferType::SPECIFIC_TRAMPOLINE`: the only JIT helper that carries a name.
pub(crate) const CODE_BUFFER_SPECIFIC_TRAMPOLINE: u8 = 5;
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
pub(crate) const COUNTER_SECTION_PERFCOUNTERS: u64 = 1 << 15;
/// Counter value types (`MONO_COUNTER_*`).
pub mod counter_type {
    /// A 32-bit signed integer.
    pub const INT: u64 = 0;
    /// A 32-bit unsigned integer.
    pub const UINT: u64 = 1;
    /// A pointer-sized integer.
    pub const WORD: u64 = 2;
    /// A 64-bit signed integer.
    pub const LONG: u64 = 3;
    /// A 64-bit unsigned integer.
    pub const ULONG: u64 = 4;
    /// A 64-bit float.
    pub const DOUBLE: u64 = 5;
    /// A string (NUL-terminated).
    pub const STRING: u64 = 6;
    /// A time interval: a 64-bit signed integer of µs.
    pub const TIME_INTERVAL: u64 = 7;
}

/// One decoded event: where it starts in the file, its time (ns, the producer's clock —
/// CLOCK_MONOTONIC for Mono on Linux), and what it says.
#[derive(Clone, Debug, PartialEq)]
pub struct Event<'a> {
    /// File offset of the event's first byte.
    pub offset: usize,
    /// When it happened, ns on the producer's clock.
    pub time: u64,
    /// What happened, with the event's fields.
    pub kind: EventKind<'a>,
}

/// Metadata load phase from the exinfo bits (0 = a name/description event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataPhase {
    /// Exinfo 0: the item is named or described, outside any load/unload phase.
    Described,
    /// END_LOAD: the item finished loading.
    EndLoad,
    /// END_UNLOAD: the item was unloaded.
    EndUnload,
    /// Any other exinfo (data format 1's TYPE_LOAD_ERR flag, for instance).
    Other(u8),
}

impl MetadataPhase {
    pub(crate) fn from_exinfo(exinfo: u8) -> Self {
        match exinfo {
            0 => Self::Described,
            exinfo::METADATA_END_LOAD => Self::EndLoad,
            exinfo::METADATA_END_UNLOAD => Self::EndUnload,
            other => Self::Other(other),
        }
    }

    /// The exinfo bits (high nibble of the event byte) that encode this phase.
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
    /// A class (MonoClass*).
    Class {
        /// The MonoImage* the class comes from.
        image: u64,
        /// Full class name, namespace included.
        name: Cow<'a, str>,
    },
    /// An image (MonoImage*): a loaded module file.
    Image {
        /// File name of the image.
        name: Cow<'a, str>,
        /// Module version id; only in end-load events from data v16.
        mvid: Option<Cow<'a, str>>,
    },
    /// An assembly (MonoAssembly*).
    Assembly {
        /// The assembly's MonoImage* (data v14+).
        image: Option<u64>,
        /// Assembly name.
        name: Cow<'a, str>,
    },
    /// An application domain (MonoDomain*).
    Domain {
        /// Friendly name; only in the name event (phase `Described`).
        name: Option<Cow<'a, str>>,
    },
    /// A remoting context (MonoAppContext*).
    Context {
        /// The MonoDomain* the context belongs to.
        domain: u64,
    },
    /// A thread. The pointer is the thread's pthread_t, the same value as a buffer's `thread_id`.
    Thread {
        /// Thread name; only in the name event (phase `Described`).
        name: Option<Cow<'a, str>>,
    },
    /// A vtable (MonoVTable*, data v15+): a class as instantiated in one domain.
    VTable {
        /// The MonoDomain* of the vtable.
        domain: u64,
        /// The MonoClass* of the vtable.
        class: u64,
    },
}

/// One root of a HEAP_ROOT event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeapRoot {
    /// v15+: the root's address and the object.
    Address {
        /// Address of the slot that holds the reference.
        address: u64,
        /// Address of the object it references.
        object: u64,
    },
    /// Before v15: the object, its root type and extra info.
    Typed {
        /// Address of the object kept alive.
        object: u64,
        /// Kind of root (Mono's GC root type flags).
        root_type: u64,
        /// Additional data whose meaning depends on the root type.
        extra: u64,
    },
}

/// One counter description of COUNTERS_DESC.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterDesc<'a> {
    /// Section the counter belongs to (a `MONO_COUNTER_*` section bit: JIT, GC, …).
    pub section: u64,
    /// Section name; only for the PERFCOUNTERS section (bit 15).
    pub section_name: Option<Cow<'a, str>>,
    /// Counter name, as mprof-report shows it.
    pub name: Cow<'a, str>,
    /// Value type, one of [`counter_type`].
    pub kind: u64,
    /// Unit of the values (a `MONO_COUNTER_*` unit: raw, bytes, time, count, percentage).
    pub unit: u64,
    /// How the value changes (a `MONO_COUNTER_*` variance: monotonic, constant, variable).
    pub variance: u64,
    /// Number that COUNTERS events name this counter by.
    pub index: u64,
}

/// An encoded counter value: integers are deltas from the counter's previous value.
#[derive(Clone, Debug, PartialEq)]
pub enum CounterRaw<'a> {
    /// Signed integer types: the change since the counter's previous value.
    Signed(i64),
    /// Unsigned integer types: the change since the counter's previous value.
    Unsigned(u64),
    /// A double: the value itself.
    Double(f64),
    /// A string value; `None` when the counter's string is null.
    String(Option<Cow<'a, str>>),
}

/// One counter value of a COUNTERS event.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterSample<'a> {
    /// Which counter: the index its COUNTERS_DESC gave.
    pub index: u64,
    /// Value type, one of [`counter_type`].
    pub kind: u64,
    /// The value as encoded.
    pub value: CounterRaw<'a>,
}

/// Everything an event can say. Backtraces are method pointers, the leaf first.
#[derive(Clone, Debug, PartialEq)]
pub enum EventKind<'a> {
    /// An object was allocated (TYPE_ALLOC).
    Alloc {
        /// The object's MonoClass* up to v14, its MonoVTable* from v15.
        class: u64,
        /// Address of the new object.
        object: u64,
        /// Size of the object, bytes.
        size: u64,
        /// Where it was allocated, when the event has a backtrace.
        backtrace: Option<&'a [u64]>,
    },
    /// A garbage collection changed phase (GC_EVENT).
    GcEvent {
        /// What happened (Mono's GC event number: start, end, world stop/restart, …).
        event: u64,
        /// Generation the collection works on.
        generation: u64,
    },
    /// The GC heap was resized.
    GcResize {
        /// New heap size, bytes.
        heap_size: u64,
    },
    /// Objects were moved by the GC.
    GcMove {
        /// Old/new address pairs, flattened.
        objects: Vec<u64>,
    },
    /// A GC handle was created.
    GcHandleCreated {
        /// Kind of handle (Mono's numbering: weak, weak tracking resurrection, normal, pinned).
        handle_type: u64,
        /// The handle's value.
        handle: u64,
        /// Address of the object the handle refers to.
        object: u64,
        /// Where it was created, when the event has a backtrace.
        backtrace: Option<&'a [u64]>,
    },
    /// A GC handle was freed.
    GcHandleDestroyed {
        /// Kind of handle (Mono's numbering: weak, weak tracking resurrection, normal, pinned).
        handle_type: u64,
        /// The handle's value, as its creation event gave it.
        handle: u64,
        /// Where it was freed, when the event has a backtrace.
        backtrace: Option<&'a [u64]>,
    },
    /// The finalizer thread starts running finalizers.
    GcFinalizeStart,
    /// The finalizer thread is done running finalizers.
    GcFinalizeEnd,
    /// One object's finalizer is about to run.
    GcFinalizeObjectStart {
        /// Address of the object being finalized.
        object: u64,
    },
    /// One object's finalizer returned.
    GcFinalizeObjectEnd {
        /// Address of the finalized object.
        object: u64,
    },
    /// A runtime item (class, image, thread, …) was named, loaded or unloaded (TYPE_METADATA).
    Metadata {
        /// Load phase, from the exinfo bits.
        phase: MetadataPhase,
        /// Address of the item's runtime structure (a pthread_t for threads).
        pointer: u64,
        /// What the item is, and what the event says about it.
        what: Metadata<'a>,
    },
    /// A managed method was entered (calls mode).
    MethodEnter {
        /// The MonoMethod* entered.
        method: u64,
    },
    /// A managed method returned (calls mode).
    MethodLeave {
        /// The MonoMethod* left.
        method: u64,
    },
    /// A managed method was left by an exception (calls mode).
    MethodExcLeave {
        /// The MonoMethod* left.
        method: u64,
    },
    /// A method's native code and name (TYPE_JIT). `code`/`size` are 0 when Mono had no code
    /// range (methods seen only in backtraces).
    Jit {
        /// The MonoMethod* described.
        method: u64,
        /// Start address of its native code.
        code: u64,
        /// Size of its native code, bytes.
        size: u64,
        /// Full method name, such as `Namespace.Class:Method (int,string)`.
        name: Cow<'a, str>,
    },
    /// An exception was thrown.
    Throw {
        /// Address of the exception object.
        object: u64,
        /// Where it was thrown, when the event has a backtrace.
        backtrace: Option<&'a [u64]>,
    },
    /// An exception handling clause ran.
    Clause {
        /// Kind of clause (catch, filter, finally or fault, in Mono's numbering).
        clause_type: u64,
        /// Number of the clause in the method header.
        index: u64,
        /// The MonoMethod* the clause belongs to.
        method: u64,
        /// Address of the exception object (data v14+).
        exception: Option<u64>,
    },
    /// A monitor (lock) event.
    Monitor {
        /// What happened: 1 contention, 2 acquired after contention, 3 gave up.
        event: u64,
        /// Address of the lock object.
        object: u64,
        /// Where, when the event has a backtrace.
        backtrace: Option<&'a [u64]>,
    },
    /// A heap walk (heapshot) starts.
    HeapStart,
    /// The heap walk ended.
    HeapEnd,
    /// One live object found by the heap walk.
    HeapObject {
        /// Address of the object.
        object: u64,
        /// Its MonoClass* up to v14, its MonoVTable* from v15.
        class: u64,
        /// Size of the object, bytes.
        size: u64,
        /// The GC generation it is in (data v16+).
        generation: Option<u8>,
        /// `(offset, object)` pairs flattened; offsets are u64::MAX in data format 1.
        references: Vec<u64>,
    },
    /// GC roots, reported during a heap walk.
    HeapRoots {
        /// Number of collections so far, which the roots belong to (before data v15).
        gc_count: Option<u64>,
        /// The roots.
        roots: Vec<HeapRoot>,
    },
    /// A memory range was registered as a GC root (data v15+).
    HeapRootRegister {
        /// Start address of the range.
        start: u64,
        /// Length of the range, bytes.
        size: u64,
        /// What registered it (Mono's root source number: stack, static data, handles, …).
        source: u8,
        /// A pointer that identifies the owner of the root.
        key: u64,
        /// Description of the root.
        name: Cow<'a, str>,
    },
    /// A GC root range was unregistered (data v15+).
    HeapRootUnregister {
        /// Start address of the range.
        start: u64,
    },
    /// A statistical sample of one thread (sampling mode).
    SampleHit {
        /// Sample source (cycles, instructions, …) before data v14; `None` from v14.
        sample_type: Option<u64>,
        /// The sampled thread's pthread_t (the buffer's thread before v11).
        thread: u64,
        /// The interrupted instruction pointers (Mono writes one).
        ips: &'a [u64],
        /// Managed backtrace, MonoMethod* pointers, leaf first.
        frames: &'a [u64],
    },
    /// The name of native (unmanaged) code seen in samples.
    SampleUsym {
        /// Start address of the symbol.
        address: u64,
        /// Size of the symbol, bytes (0 when unknown).
        size: u64,
        /// Symbol name.
        name: Cow<'a, str>,
    },
    /// A native binary mapped into the process (data ≤ 15).
    SampleUbin {
        /// Address the binary is loaded at.
        address: u64,
        /// File offset of the mapping.
        offset: u64,
        /// Size of the mapping, bytes.
        size: u64,
        /// Path of the binary.
        name: Cow<'a, str>,
    },
    /// Descriptions of newly registered counters.
    CountersDesc {
        /// The counters described.
        counters: Vec<CounterDesc<'a>>,
    },
    /// Counter values sampled together.
    Counters {
        /// Sample time, ms since startup, for data < 13; later versions use the event time.
        timestamp_ms: Option<u64>,
        /// The sampled values.
        values: Vec<CounterSample<'a>>,
    },
    /// Native code the runtime generated that is no method: a trampoline or helper (data v8+).
    JitHelper {
        /// What it is (`MonoProfilerCodeBufferType`; see [`code_buffer_name`]).
        kind: u64,
        /// Start address of the code.
        address: u64,
        /// Size of the code, bytes.
        size: u64,
        /// Name; only for specific trampolines.
        name: Option<Cow<'a, str>>,
    },
    /// Code coverage (data 10–15), boxed: rare and large.
    Coverage(Box<Coverage<'a>>),
    /// Every buffer written before this one has been flushed (data v13+).
    SyncPoint {
        /// Why it was written: 0 periodic, 1 world stop, 2 world start.
        kind: u8,
    },
    /// The runtime's AOT identifier (data v16+).
    AotId {
        /// The AOT id string.
        id: Cow<'a, str>,
    },
}

/// TYPE_COVERAGE events (data 10–15).
#[derive(Clone, Debug, PartialEq)]
pub enum Coverage<'a> {
    /// Coverage totals of one assembly.
    Assembly {
        /// Assembly name.
        name: Cow<'a, str>,
        /// The assembly's GUID, as text.
        guid: Cow<'a, str>,
        /// File the assembly was loaded from.
        filename: Cow<'a, str>,
        /// Number of methods.
        methods: u64,
        /// Methods whose every statement ran.
        fully_covered: u64,
        /// Methods partly run (Mono writes 0).
        partially_covered: u64,
    },
    /// A method with coverage data; its statements follow.
    Method {
        /// Assembly name.
        assembly: Cow<'a, str>,
        /// Class name.
        class: Cow<'a, str>,
        /// Method name.
        name: Cow<'a, str>,
        /// Method signature.
        signature: Cow<'a, str>,
        /// Source file name.
        filename: Cow<'a, str>,
        /// Metadata token of the method.
        token: u64,
        /// Id that the method's statement events use.
        method_id: u64,
        /// Number of statements.
        statements: u64,
    },
    /// Coverage of one statement of a method.
    Statement {
        /// Id of the method, from its method event.
        method_id: u64,
        /// IL offset, relative to the previous statement.
        offset: u64,
        /// How many times the statement ran.
        counter: u64,
        /// Source line.
        line: u64,
        /// Source column.
        column: u64,
    },
    /// Coverage totals of one class.
    Class {
        /// Assembly name.
        assembly: Cow<'a, str>,
        /// Class name.
        class: Cow<'a, str>,
        /// Number of methods.
        methods: u64,
        /// Methods whose every statement ran.
        fully_covered: u64,
        /// Methods partly run.
        partially_covered: u64,
    },
}
