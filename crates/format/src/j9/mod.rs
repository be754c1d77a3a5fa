//! OpenJ9 JIT metadata (`J9JITExceptionTable` and its variable-length section), decoded from a
//! copy of the JVM's memory: the image carried by jprof's JPROF_J9_METADATA jitdump record.
//! Pure over `&[u8]`; every pointer in the image is a JVM address and is found in the image by
//! subtracting the address the image was copied from. A pointer outside the image means the
//! section was not captured: that is reported and the other sections are still decoded.
//! Layouts: docs/openj9.md and formats.md §6 of the reference (LP64, little-endian).
//!
//! `header.rs` reads the fixed struct, `sections.rs` the variable sections, `chain.rs` maps a PC
//! to its inline chain.

mod chain;
mod header;
mod sections;

pub use chain::{InlineFrame, LookupError, MethodNames};
pub use header::ExceptionTableHeader;
pub use sections::{
    ExceptionRange, FullMap, GpuInfo, InlinedCallSite, InternalPointerMap, MapKind, OsrInfo,
    OsrMapping, PinningArray, RegisterPinningArrays, ScratchBufferInfo, StackAllocMap, StackAtlas,
    StackMap,
};

use super::ParseError;
use header::StructLayout;

/// `flags` bits of the fixed struct (j9nonbuilder.h).
pub mod flags {
    /// `GC_MAP_32_BIT_OFFSETS` is authoritative (without it the body's size decides).
    pub const USED_FOR_SIZE: u64 = 0x1;
    /// Stack maps use 4-byte low-code offsets.
    pub const GC_MAP_32_BIT_OFFSETS: u64 = 0x2;
    /// The metadata describes a stub, not a compiled method.
    pub const IS_STUB: u64 = 0x4;
    /// The metadata is not completely filled in yet.
    pub const NOT_INITIALIZED: u64 = 0x8;
    /// Compiled by a JITServer (remote compilation).
    pub const IS_REMOTE_COMP: u64 = 0x10;
    /// AOT code deserialized from a JITServer cache.
    pub const IS_DESERIALIZED_COMP: u64 = 0x20;
    /// Compiled before a CRIU checkpoint.
    pub const IS_PRECHECKPOINT_COMP: u64 = 0x40;
    /// Compiled for full-speed debug (FSD).
    pub const IS_FSD_COMP: u64 = 0x80;
    /// The body contains vectorized code.
    pub const VECTORIZED_CODE: u64 = 0x100;
}

/// `numExcptionRanges` bit: 32-bit exception range entries, each with a method or caller index.
pub const WIDE_EXCEPTIONS: u16 = 0x8000;
/// `numExcptionRanges` bit: a u32 bytecode PC follows each exception range entry.
pub const HAS_BYTECODE_PC: u16 = 0x4000;

/// An `_methodInfo` of an inlined call site whose method was unloaded (x86: all ones).
pub const UNLOADED_METHOD: u64 = u64::MAX;

/// `TR_ByteCodeInfo`: one little-endian 32-bit bitfield word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteCodeInfo {
    /// The word as stored.
    pub(crate) raw: u32,
}

impl ByteCodeInfo {
    /// Bit 0. In a stack map: the map carries bytecode info only.
    pub fn do_not_profile(self) -> bool {
        self.raw & 1 != 0
    }

    /// Bit 1. On an inlined call site: its monitor mask has bits set.
    pub fn is_same_receiver(self) -> bool {
        self.raw & 2 != 0
    }

    /// Bits 2..14, signed; -1 (any negative) = the outermost method.
    pub fn caller_index(self) -> i32 {
        ((self.raw << 17) as i32) >> 19
    }

    /// Bits 15..31, signed.
    pub fn bytecode_index(self) -> i32 {
        (self.raw as i32) >> 15
    }

    /// Packs the fields (for writers and tests).
    pub fn new(caller_index: i32, bytecode_index: i32, do_not_profile: bool, same: bool) -> Self {
        let raw = (do_not_profile as u32)
            | ((same as u32) << 1)
            | (((caller_index as u32) & 0x1FFF) << 2)
            | ((bytecode_index as u32) << 15);
        Self { raw }
    }
}

/// How the image was captured (the record's fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capture {
    /// JVM address the image was copied from.
    pub metadata_addr: u64,
    /// `sizeof(J9JITExceptionTable)` in that JVM build.
    pub struct_size: u32,
    /// The struct begins with className/methodName/methodSignature.
    pub eyecatchers: bool,
    /// Stack-map offsets are 4 bytes with 2 bytes of alignment after 16-bit ones (ARM builds).
    pub align_stack_maps: bool,
    /// File offset of the image's first byte, so errors name offsets in the file.
    pub base: usize,
}

/// A section that could not be decoded (or not completely): which, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The section, as named to users ("stack atlas", "OSR info", ...).
    pub section: &'static str,
    /// What was wrong, and at which file offset.
    pub error: ParseError,
}

/// Everything decoded from one image. Sections are `None` when their pointer is null or they
/// could not be read; `problems` says why for the latter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    /// How the image was captured.
    pub capture: Capture,
    /// The fixed struct.
    pub header: ExceptionTableHeader,
    /// Exception ranges, in table order.
    pub exception_ranges: Vec<ExceptionRange>,
    /// Inlined call sites; a caller index is an index in this list.
    pub inlined_call_sites: Vec<InlinedCallSite>,
    /// The stack atlas and its stack maps.
    pub stack_atlas: Option<StackAtlas>,
    /// The atlas's stack-alloc map.
    pub stack_alloc_map: Option<StackAllocMap>,
    /// The atlas's internal pointer map, in J9 format.
    pub internal_pointer_map: Option<InternalPointerMap>,
    /// On-stack-replacement info.
    pub osr_info: Option<OsrInfo>,
    /// GPU kernels compiled from the method.
    pub gpu_info: Option<GpuInfo>,
    /// `(bytecode PC, instruction address)` pairs of the hardware-profiling map.
    pub bytecode_pc_map: Option<Vec<(u64, u64)>>,
    /// Sections that could not be decoded, or not completely.
    pub problems: Vec<Problem>,
}

/// The image and how to find JVM addresses in it.
pub(crate) struct Image<'a> {
    pub bytes: &'a [u8],
    pub capture: Capture,
}

impl<'a> Image<'a> {
    /// Offset in the image of JVM address `ptr`, read from the field at image offset
    /// `field_at` (named in the error); `Ok(None)` for a null pointer.
    pub fn locate(
        &self,
        ptr: u64,
        what: &str,
        field_at: usize,
    ) -> Result<Option<usize>, ParseError> {
        if ptr == 0 {
            return Ok(None);
        }
        match ptr.checked_sub(self.capture.metadata_addr) {
            Some(off) if off < self.bytes.len() as u64 => Ok(Some(off as usize)),
            _ => Err(ParseError::new(
                self.capture.base + field_at,
                format!(
                    "{what} {ptr:#x} inside the captured image [{:#x}, {:#x}) (the section was not captured)",
                    self.capture.metadata_addr,
                    self.capture.metadata_addr.wrapping_add(self.bytes.len() as u64)
                ),
            )),
        }
    }

    /// A little-endian cursor from image offset `at`.
    pub fn cursor(&self, at: usize) -> super::Cursor<'a> {
        let at = at.min(self.bytes.len());
        super::Cursor::new(&self.bytes[at..], self.capture.base + at)
    }
}

/// Decodes the fixed struct and every section. Only an image too short for the fixed struct is
/// an error; a section that cannot be read becomes a [`Problem`] and the rest is decoded.
pub fn decode(image: &[u8], capture: Capture) -> Result<Metadata, ParseError> {
    let img = Image {
        bytes: image,
        capture,
    };
    let layout = StructLayout::new(capture.struct_size, capture.eyecatchers)
        .map_err(|e| ParseError::new(capture.base, e))?;
    let header = header::read(&img, &layout)?;
    let mut md = Metadata {
        capture,
        header,
        exception_ranges: Vec::new(),
        inlined_call_sites: Vec::new(),
        stack_atlas: None,
        stack_alloc_map: None,
        internal_pointer_map: None,
        osr_info: None,
        gpu_info: None,
        bytecode_pc_map: None,
        problems: Vec::new(),
    };
    sections::decode_all(&img, &layout, &mut md);
    Ok(md)
}

impl Metadata {
    /// Whether `pc` is in the body: the warm range or the cold one.
    pub fn contains(&self, pc: u64) -> bool {
        let h = &self.header;
        let warm = pc >= h.start_pc && pc < h.end_warm_pc;
        let cold = h.start_cold_pc != 0 && pc >= h.start_cold_pc && pc < h.end_pc;
        warm || cold
    }

    /// Every J9Method the chains can name: ramMethod, then each inlined call site's method.
    pub fn methods(&self) -> Vec<u64> {
        let mut out = vec![self.header.ram_method];
        for site in &self.inlined_call_sites {
            if site.method != UNLOADED_METHOD && !out.contains(&site.method) {
                out.push(site.method);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytecode_info_bitfields() {
        for (cix, bci, dnp, same) in [
            (-1, 0, false, false),
            (0, 5, true, false),
            (4095, 65535, false, true),
            (-1, -1, true, true),
            (17, 131071 / 2, false, false),
        ] {
            let b = ByteCodeInfo::new(cix, bci, dnp, same);
            assert_eq!(b.caller_index(), cix);
            assert_eq!(b.bytecode_index(), bci);
            assert_eq!(b.do_not_profile(), dnp);
            assert_eq!(b.is_same_receiver(), same);
        }
        // callerIndex -1 in bits 2..14, bci 7 in 15..31.
        assert_eq!(
            ByteCodeInfo::new(-1, 7, false, false).raw,
            (7 << 15) | (0x1FFF << 2)
        );
    }
}
