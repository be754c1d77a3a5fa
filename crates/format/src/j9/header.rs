//! The fixed `J9JITExceptionTable` struct (LP64). Its size changed across OpenJ9 versions (216,
//! 224, 232 bytes; 24 less in builds without the className/methodName/methodSignature
//! eyecatchers), so offsets are computed from the capture's `struct_size` and flag.

use super::image::Image;
use crate::ParseError;

/// `numExcptionRanges` bit: 32-bit exception range entries, each with a method or caller index.
pub const WIDE_EXCEPTIONS: u16 = 0x8000;
/// `numExcptionRanges` bit: a u32 bytecode PC follows each exception range entry.
pub const HAS_BYTECODE_PC: u16 = 0x4000;

/// Field offsets for one JVM build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StructLayout {
    /// `sizeof(J9JITExceptionTable)` in bytes.
    pub(crate) struct_size: u32,
    /// The struct begins with the three eyecatcher pointers.
    pub(crate) eyecatchers: bool,
}

/// Size without eyecatchers of the oldest layout jprof reads (riData is its last field).
const BASE_SIZE: u32 = 192;
const EYECATCHERS: u32 = 24;

impl StructLayout {
    /// The layout for a struct of `struct_size` bytes; an error says what size was expected.
    pub(crate) fn new(struct_size: u32, eyecatchers: bool) -> Result<Self, String> {
        let least = BASE_SIZE + if eyecatchers { EYECATCHERS } else { 0 };
        if struct_size < least || !struct_size.is_multiple_of(8) {
            return Err(format!(
                "a struct_size of at least {least} and a multiple of 8 (found {struct_size})"
            ));
        }
        Ok(Self {
            struct_size,
            eyecatchers,
        })
    }

    /// Offset of a field given its offset in a build without eyecatchers.
    pub(super) fn at(&self, plain: usize) -> usize {
        plain
            + if self.eyecatchers {
                EYECATCHERS as usize
            } else {
                0
            }
    }

    /// Whether a field at `plain` (8 bytes) exists in this build.
    fn has(&self, plain: usize) -> bool {
        self.at(plain) + 8 <= self.struct_size as usize
    }
}

/// The struct's fields. Pointers are JVM addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExceptionTableHeader {
    /// className, methodName, methodSignature (J9UTF8*), when the build has them.
    pub eyecatchers: Option<[u64; 3]>,
    /// `constantPool`: the J9ConstantPool of the method's class.
    pub constant_pool: u64,
    /// `ramMethod`: J9Method of the compiled method, the outermost frame of every chain.
    pub ram_method: u64,
    /// `startPC`: first byte of the warm code.
    pub start_pc: u64,
    /// `endWarmPC`: end of the warm code (exclusive).
    pub end_warm_pc: u64,
    /// `startColdPC`: first byte of the cold code; 0 when the body has none.
    pub start_cold_pc: u64,
    /// `endPC`: end of the body (exclusive); the cold code ends here when there is some.
    pub end_pc: u64,
    /// `totalFrameSize`: size of the compiled frame, in pointer-sized slots.
    pub total_frame_size: u64,
    /// `slots`: the method's parameter slots.
    pub slots: i16,
    /// `scalarTempSlots`: frame slots for temporaries that hold no references.
    pub scalar_temp_slots: i16,
    /// `objectTempSlots`: frame slots for temporaries that hold references.
    pub object_temp_slots: i16,
    /// `prologuePushes`: slots the prologue pushes (saved registers).
    pub prologue_pushes: u16,
    /// `tempOffset`: the frame's pending-push slots (the JIT stores that count here).
    pub temp_offset: i16,
    /// Raw, with the WIDE_EXCEPTIONS and HAS_BYTECODE_PC bits.
    pub num_exception_ranges: u16,
    /// `size`: bytes of the whole metadata, struct and variable-length section.
    pub size: i32,
    /// `flags`: [`super::flags`] bits.
    pub flags: u64,
    /// `registerSaveDescription`: which registers the prologue saves (architecture bits).
    pub register_save_description: u64,
    /// `gcStackAtlas`: the stack atlas; 0 when there is none.
    pub gc_stack_atlas: u64,
    /// `inlinedCalls`: the first inlined call site; 0 when nothing was inlined.
    pub inlined_calls: u64,
    /// `bodyInfo`: the body's TR_PersistentJittedBodyInfo.
    pub body_info: u64,
    /// `nextMethod`: the next metadata in the JVM's list of compiled bodies.
    pub next_method: u64,
    /// `prevMethod`: the previous metadata in that list.
    pub prev_method: u64,
    /// `debugSlot1`: a word OpenJ9 reserves for debugging.
    pub debug_slot1: u64,
    /// `debugSlot2`: a second word reserved for debugging.
    pub debug_slot2: u64,
    /// `osrInfo`: the OSR info section; 0 when the body has none.
    pub osr_info: u64,
    /// `runtimeAssumptionList`: the runtime assumptions whose failure invalidates the body.
    pub runtime_assumption_list: u64,
    /// `hotness`: the optimization level the body was compiled at (OpenJ9's TR_Hotness).
    pub hotness: i32,
    /// `codeCacheAlloc`: start of the code cache allocation holding the body.
    pub code_cache_alloc: u64,
    /// `gpuCode`: the GPU info section; 0 when there is none.
    pub gpu_code: u64,
    /// `riData`: the bytecode-PC → instruction map; 0 when there is none.
    pub ri_data: u64,
    /// Added 2025-04 (struct_size ≥ 224 with eyecatchers).
    pub invoke_basic_call_info: Option<u64>,
    /// Added 2025-08 (struct_size ≥ 232 with eyecatchers).
    pub const_ref_arrays: Option<u64>,
}

impl ExceptionTableHeader {
    /// Number of exception ranges (the low 14 bits).
    pub fn exception_range_count(&self) -> usize {
        (self.num_exception_ranges & 0x3FFF) as usize
    }

    /// Every field as `(name, value)` text, in struct order (for `jprof dump`).
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let hex = |v: u64| format!("{v:#x}");
        let mut out = Vec::new();
        if let Some([c, m, s]) = self.eyecatchers {
            out.extend([
                ("className", hex(c)),
                ("methodName", hex(m)),
                ("methodSignature", hex(s)),
            ]);
        }
        out.extend([
            ("constantPool", hex(self.constant_pool)),
            ("ramMethod", hex(self.ram_method)),
            ("startPC", hex(self.start_pc)),
            ("endWarmPC", hex(self.end_warm_pc)),
            ("startColdPC", hex(self.start_cold_pc)),
            ("endPC", hex(self.end_pc)),
            ("totalFrameSize", self.total_frame_size.to_string()),
            ("slots", self.slots.to_string()),
            ("scalarTempSlots", self.scalar_temp_slots.to_string()),
            ("objectTempSlots", self.object_temp_slots.to_string()),
            ("prologuePushes", self.prologue_pushes.to_string()),
            ("tempOffset", self.temp_offset.to_string()),
            (
                "numExcptionRanges",
                format!(
                    "{:#06x} (count {}{}{})",
                    self.num_exception_ranges,
                    self.exception_range_count(),
                    if self.num_exception_ranges & WIDE_EXCEPTIONS != 0 {
                        ", wide"
                    } else {
                        ""
                    },
                    if self.num_exception_ranges & HAS_BYTECODE_PC != 0 {
                        ", bytecode PCs"
                    } else {
                        ""
                    }
                ),
            ),
            ("size", self.size.to_string()),
            ("flags", hex(self.flags)),
            (
                "registerSaveDescription",
                hex(self.register_save_description),
            ),
            ("gcStackAtlas", hex(self.gc_stack_atlas)),
            ("inlinedCalls", hex(self.inlined_calls)),
            ("bodyInfo", hex(self.body_info)),
            ("nextMethod", hex(self.next_method)),
            ("prevMethod", hex(self.prev_method)),
            ("debugSlot1", hex(self.debug_slot1)),
            ("debugSlot2", hex(self.debug_slot2)),
            ("osrInfo", hex(self.osr_info)),
            ("runtimeAssumptionList", hex(self.runtime_assumption_list)),
            ("hotness", self.hotness.to_string()),
            ("codeCacheAlloc", hex(self.code_cache_alloc)),
            ("gpuCode", hex(self.gpu_code)),
            ("riData", hex(self.ri_data)),
        ]);
        if let Some(v) = self.invoke_basic_call_info {
            out.push(("invokeBasicCallInfo", hex(v)));
        }
        if let Some(v) = self.const_ref_arrays {
            out.push(("constRefArrays", hex(v)));
        }
        out
    }
}

/// Reads the fixed struct from the start of the image.
pub(super) fn read(
    img: &Image<'_>,
    layout: &StructLayout,
) -> Result<ExceptionTableHeader, ParseError> {
    let need = layout.struct_size as usize;
    if img.bytes.len() < need {
        return Err(ParseError::new(
            img.capture.base + img.bytes.len(),
            format!(
                "a {need}-byte J9JITExceptionTable (the image has {} bytes)",
                img.bytes.len()
            ),
        ));
    }
    let mut c = img.cursor(0);
    let eyecatchers = if layout.eyecatchers {
        Some([c.u64()?, c.u64()?, c.u64()?])
    } else {
        None
    };
    let mut h = ExceptionTableHeader {
        eyecatchers,
        constant_pool: c.u64()?,
        ram_method: c.u64()?,
        start_pc: c.u64()?,
        end_warm_pc: c.u64()?,
        start_cold_pc: c.u64()?,
        end_pc: c.u64()?,
        total_frame_size: c.u64()?,
        slots: c.u16()? as i16,
        scalar_temp_slots: c.u16()? as i16,
        object_temp_slots: c.u16()? as i16,
        prologue_pushes: c.u16()?,
        temp_offset: c.u16()? as i16,
        num_exception_ranges: c.u16()?,
        size: c.i32()?,
        flags: c.u64()?,
        register_save_description: c.u64()?,
        gc_stack_atlas: c.u64()?,
        inlined_calls: c.u64()?,
        body_info: c.u64()?,
        next_method: c.u64()?,
        prev_method: c.u64()?,
        debug_slot1: c.u64()?,
        debug_slot2: c.u64()?,
        osr_info: c.u64()?,
        runtime_assumption_list: c.u64()?,
        hotness: {
            let h = c.i32()?;
            c.u32()?; // padding
            h
        },
        code_cache_alloc: c.u64()?,
        gpu_code: c.u64()?,
        ri_data: c.u64()?,
        ..Default::default()
    };
    if layout.has(192) {
        h.invoke_basic_call_info = Some(c.u64()?);
    }
    if layout.has(200) {
        h.const_ref_arrays = Some(c.u64()?);
    }
    Ok(h)
}
