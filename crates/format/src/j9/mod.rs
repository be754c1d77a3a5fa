//! OpenJ9 JIT metadata (`J9JITExceptionTable` and its variable-length section), decoded from a
//! copy of the JVM's memory: the image carried by jprof's JPROF_J9_METADATA jitdump record.
//! Pure over `&[u8]`; every pointer in the image is a JVM address and is found in the image by
//! subtracting the address the image was copied from. A pointer outside the image means the
//! section was not captured: that is reported and the other sections are still decoded.
//! Layouts: docs/openj9.md and formats.md §6 of the reference (LP64, little-endian).
//!
//! Bottom up: `image.rs` is the captured image (JVM addresses found in it), `header.rs` reads
//! the fixed struct (`flags.rs` its flag bits), `sections.rs` the variable sections; this file
//! puts them together into [`Metadata`], and `chain.rs` maps a PC to its inline chain.

pub mod flags;

mod chain;
mod header;
mod image;
mod sections;

pub use chain::{InlineFrame, LookupError, MethodNames};
pub use header::{ExceptionTableHeader, HAS_BYTECODE_PC, WIDE_EXCEPTIONS};
pub use image::Capture;
pub use sections::{
    ByteCodeInfo, ExceptionRange, FullMap, GpuInfo, InlinedCallSite, InternalPointerMap, MapKind,
    OsrInfo, OsrMapping, PinningArray, Problem, RegisterPinningArrays, ScratchBufferInfo,
    StackAllocMap, StackAtlas, StackMap, UNLOADED_METHOD,
};

use crate::ParseError;
use header::StructLayout;
use image::Image;

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
    let sections = sections::decode_all(&img, &layout, &header);
    Ok(Metadata {
        capture,
        header,
        exception_ranges: sections.exception_ranges,
        inlined_call_sites: sections.inlined_call_sites,
        stack_atlas: sections.stack_atlas,
        stack_alloc_map: sections.stack_alloc_map,
        internal_pointer_map: sections.internal_pointer_map,
        osr_info: sections.osr_info,
        gpu_info: sections.gpu_info,
        bytecode_pc_map: sections.bytecode_pc_map,
        problems: sections.problems,
    })
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
