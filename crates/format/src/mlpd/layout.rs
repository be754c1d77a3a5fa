//! Every difference between .mlpd data versions, in one place: the decoder asks a `Layout` how a
//! field is encoded instead of comparing version numbers itself. Data format 1 is the 2010
//! original (proflog.c); 13–17 are what Mono 5.x–6.x write (log.h's version history).

/// How a field whose width changed between versions is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Width {
    Byte,
    Uleb,
}

/// How the fields of one data version are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub data_version: u8,
    /// v13+: HEAP_OBJECT, HEAP_ROOT, SAMPLE_USYM, COUNTERS_DESC and COVERAGE carry a time diff,
    /// and SAMPLE_HIT/COUNTERS use a regular time diff instead of their own timestamp.
    pub uniform_time: bool,
    /// < v13: backtraces start with a `uleb flags` (0), and metadata has a `uleb flags` too.
    pub flags_fields: bool,
    /// v13+: backtrace methods are deltas from the running method base; before, from ptr_base.
    pub backtrace_method_delta: bool,
    /// GC event type/generation, JITHELPER type, CLAUSE type: bytes from v13, uleb before.
    pub small_fields: Width,
    /// SAMPLE_HIT sample type: uleb before v13, a byte in v13, gone from v14.
    pub sample_type: Option<Width>,
    /// v11+: SAMPLE_HIT names its thread.
    pub sample_thread: bool,
    /// v6+: SAMPLE_HIT carries a managed backtrace.
    pub sample_backtrace: bool,
    /// < v13: each managed sample frame also has il and native offsets.
    pub sample_frame_offsets: bool,
    /// v14+: MONITOR has an event byte; before, the event is in exinfo bits 4–5.
    pub monitor_event_byte: bool,
    /// v14+: CLAUSE ends with the exception object.
    pub clause_exception: bool,
    /// v14+: ASSEMBLY metadata names its image.
    pub assembly_image: bool,
    /// HEAP_ROOT: v15+ `{addr, obj}` pairs; before, `{obj, root_type, extra}` with a gc count.
    pub heap_root_pairs: bool,
    /// HEAP_ROOT root_type width before v15 (a byte only in v13).
    pub root_type: Width,
    /// v2+: HEAP_OBJECT references carry an offset delta.
    pub heap_ref_offsets: bool,
    /// v16+: HEAP_OBJECT carries the object's generation.
    pub heap_object_generation: bool,
    /// ≤ v15: SAMPLE_UBIN exists; v14+ its address is a ptr_base delta.
    pub ubin: bool,
    pub ubin_ptr_delta: bool,
    /// Counter type/unit/variance (COUNTERS_DESC) and type (COUNTERS): bytes in v13–14.
    pub counter_fields: Width,
    /// v10–15: TYPE_COVERAGE events.
    pub coverage: bool,
    /// v15+: ALLOC and HEAP_OBJECT name a vtable, not a class.
    pub alloc_vtable: bool,
}

impl Layout {
    pub(crate) fn new(data_version: u8) -> Self {
        let v = data_version;
        Self {
            data_version: v,
            uniform_time: v >= 13,
            flags_fields: v < 13,
            backtrace_method_delta: v >= 13,
            small_fields: if v >= 13 { Width::Byte } else { Width::Uleb },
            sample_type: match v {
                0..=12 => Some(Width::Uleb),
                13 => Some(Width::Byte),
                _ => None,
            },
            sample_thread: v >= 11,
            sample_backtrace: v >= 6,
            sample_frame_offsets: v < 13,
            monitor_event_byte: v >= 14,
            clause_exception: v >= 14,
            assembly_image: v >= 14,
            heap_root_pairs: v >= 15,
            root_type: if v == 13 { Width::Byte } else { Width::Uleb },
            heap_ref_offsets: v >= 2,
            heap_object_generation: v >= 16,
            ubin: v <= 15,
            ubin_ptr_delta: v >= 14,
            counter_fields: if v == 13 || v == 14 {
                Width::Byte
            } else {
                Width::Uleb
            },
            coverage: (10..=15).contains(&v),
            alloc_vtable: v >= 15,
        }
    }
}
