//! The variable-length section after the fixed struct: exception ranges, inlined call sites
//! (each with its monitor mask), the stack atlas and its stack maps, the stack-alloc map, the
//! internal pointer map in J9 format, OSR info, GPU info and the bytecode-PC → instruction map.
//! Each decoder reads only through bounds-checked cursors and allocates no more entries than
//! the remaining bytes can hold, so a hostile count ends in an error, not an allocation.

use super::flags;
use super::header::{ExceptionTableHeader, StructLayout, HAS_BYTECODE_PC, WIDE_EXCEPTIONS};
use super::image::Image;
use crate::{Cursor, ParseError};

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

/// A section that could not be decoded (or not completely): which, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The section, as named to users ("stack atlas", "OSR info", ...).
    pub section: &'static str,
    /// What was wrong, and at which file offset.
    pub error: ParseError,
}

/// One exception table entry: a range of code and the handler that covers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExceptionRange {
    /// Offsets from startPC.
    pub start: u32,
    /// End of the covered code, as an offset from startPC.
    pub end: u32,
    /// Offset of the handler from startPC.
    pub handler: u32,
    /// Constant-pool index of the caught class; 0 catches everything.
    pub catch_type: u32,
    /// Wide entries only: the J9Method of the handler's method (a local compilation) or a
    /// caller index (an AOT or remote compilation).
    pub method_or_caller_index: Option<u64>,
    /// With HAS_BYTECODE_PC (FSD): the handler's bytecode PC.
    pub bytecode_pc: Option<u32>,
}

/// One inlined call (`TR_InlinedCallSite`) and the monitor mask after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlinedCallSite {
    /// J9Method* of the inlined callee ([`UNLOADED_METHOD`] once unloaded).
    pub method: u64,
    /// The call site: bytecode index in the caller and the caller's index.
    pub bytecode_info: ByteCodeInfo,
    /// `numberOfMapBytes` bytes; meaningful when `is_same_receiver` is set.
    pub monitor_mask: Vec<u8>,
}

/// `index, count, items[count]` groups of the internal pointer maps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinningArray {
    /// Temp index of the array that pins the others.
    pub index: u8,
    /// What derives from it: internal pointer temp indexes, or register numbers in a stack
    /// map's register block.
    pub items: Vec<u8>,
}

/// A stack map's internal pointer registers: the map size byte, then pinning arrays with the
/// registers derived from each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterPinningArrays {
    /// Bytes of the block after this size byte.
    pub map_size: u8,
    /// The pinning arrays, each with the registers derived from it.
    pub arrays: Vec<PinningArray>,
}

/// The GC part of a stack map: saved registers, reference registers and slots, monitors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FullMap {
    /// Register save description at these offsets (architecture bits).
    pub register_save_description: u32,
    /// Registers holding live references, one bit each; the top bit says internal pointer
    /// registers follow.
    pub register_map: u32,
    /// Internal pointer registers, when the register map and the atlas both announce them.
    pub internal_pointers: Option<RegisterPinningArrays>,
    /// One bit per mapped stack slot, set when it holds a live reference.
    pub map_bits: Vec<u8>,
    /// Slots holding live monitors, when bit 7 of the last map byte says they follow.
    pub live_monitor_bits: Option<Vec<u8>>,
}

/// What a stack map holds after its bytecode info.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapKind {
    /// `_doNotProfile` set: only the offset and the bytecode info.
    BytecodeInfoOnly,
    /// A full GC map.
    Full(FullMap),
}

/// One stack map: the inline position (and GC state) of a range of code offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackMap {
    /// Offset of the map in the image.
    pub image_offset: usize,
    /// First code offset the map covers, from startPC, in bytes.
    pub low_code_offset: u32,
    /// Last code offset the map covers (inclusive): the next map's low offset - 1, or
    /// `endPC - startPC - 1` for the last map. Negative when that underflows.
    pub range_end: i64,
    /// Bytecode index and caller index of the covered code.
    pub bytecode_info: ByteCodeInfo,
    /// Whether the map carries GC state, and that state.
    pub kind: MapKind,
}

/// The `J9JITStackAtlas` and the stack maps after it. Pointers are JVM addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackAtlas {
    /// `stackAllocMap`: the stack-alloc map; 0 when there is none.
    pub stack_alloc_map: u64,
    /// `internalPointerMap`: the internal pointer map; 0 when there is none.
    pub internal_pointer_map: u64,
    /// `numberOfMaps`: how many stack maps follow.
    pub number_of_maps: u16,
    /// `numberOfMapBytes`: bytes of every slot bitmap (map bits, monitor masks).
    pub number_of_map_bytes: u16,
    /// `parmBaseOffset`: offset of the parameter slots from the frame base, in bytes.
    pub parm_base_offset: i16,
    /// `numberOfParmSlots`: parameter slots the maps describe.
    pub number_of_parm_slots: u16,
    /// `localBaseOffset`: offset of the local slots from the frame base, in bytes.
    pub local_base_offset: i16,
    /// `paddingTo32`: OpenJ9 keeps the sync object temp's byte offset from the frame base
    /// here (0xffff = none).
    pub padding_to_32: u16,
    /// Slots holding monitor objects, one bit each (`numberOfMapBytes` bytes).
    pub monitor_autos_map: Vec<u8>,
    /// In image order (ascending low offsets as OpenJ9 writes them).
    pub maps: Vec<StackMap>,
}

/// The stack-alloc map: the slots of objects allocated on the stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackAllocMap {
    /// JVM address of the first stack map.
    pub first_stack_map: u64,
    /// `numberOfMapBytes` bytes.
    pub bits: Vec<u8>,
}

/// The internal pointer map in J9 format: temps that point inside arrays, grouped by the array
/// that pins them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InternalPointerMap {
    /// The parameter map's address (internal pointers are not initialized at that map).
    pub first_stack_map: u64,
    /// Length of the map in bytes, as OpenJ9 stores it.
    pub map_size: u8,
    /// Temp index of the first internal pointer slot.
    pub index_of_first_internal_pointer: i16,
    /// Offset of the internal pointer slots from the frame base, in bytes.
    pub offset_of_first_internal_pointer: i16,
    /// Distinct pinning array temps (with their internal pointer temps), then the pinning
    /// arrays of internal pointer registers (with no items).
    pub arrays: Vec<PinningArray>,
}

/// Where one value live at an OSR point is copied from and to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScratchBufferInfo {
    /// Inlined call site whose frame the value belongs to.
    pub inlined_site_index: i32,
    /// Offset of the value in the OSR buffer, in bytes.
    pub osr_buffer_offset: u32,
    /// Offset of the value in the scratch buffer, in bytes.
    pub scratch_buffer_offset: u32,
    /// Size of the value in bytes.
    pub sym_size: u32,
}

/// The shared slots live at one instruction, for on-stack replacement there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsrMapping {
    /// Offset of the instruction from startPC, in bytes.
    pub instruction_pc_offset: u32,
    /// One entry per live value.
    pub scratch_buffer_infos: Vec<ScratchBufferInfo>,
}

/// On-stack-replacement info: live slots per instruction (section 0) and OSR catch blocks
/// (section 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsrInfo {
    /// Bytes of section 0; section 1 starts this far after its start.
    pub section0_size: u32,
    /// The largest scratch buffer any mapping needs, in bytes.
    pub max_scratch_buffer_size: u32,
    /// Instructions and the values live at each.
    pub mappings: Vec<OsrMapping>,
    /// Bytes of section 1.
    pub section1_size: u32,
    /// OSR catch block start offsets, indexed by caller index + 1 (0 = none).
    pub catch_blocks: Vec<u32>,
}

/// GPU kernels compiled from the method (`GpuMetaData` and the arrays it points to).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    /// The method's signature; `None` for a null pointer.
    pub method_signature: Option<String>,
    /// How many PTX kernels the method has.
    pub num_ptx_kernels: i32,
    /// How many devices each kernel's CUmodule cache has room for.
    pub max_num_cached_devices: i32,
    /// Source line of each kernel.
    pub line_numbers: Vec<i32>,
    /// Each kernel's PTX text; `None` for a null pointer.
    pub ptx: Vec<Option<String>>,
    /// JVM address of the CUmodule cache (filled in at run time).
    pub cu_module_array: u64,
}

const ATLAS_SIZE: usize = 32;
const CALL_SITE_SIZE: usize = 16;
/// `INTERNAL_PTR_REG_MASK` on x86: the register map says internal pointer registers follow.
const INTERNAL_PTR_REG_MASK: u32 = 0x8000_0000;
const METADATA_MAPPING_EYECATCHER: u64 = 0xBC1A_FFFF;

/// The sections of one image, each `None` (or empty) when its pointer is null or it could not
/// be read; `problems` says why for the latter.
#[derive(Default)]
pub(super) struct Sections {
    pub exception_ranges: Vec<ExceptionRange>,
    pub inlined_call_sites: Vec<InlinedCallSite>,
    pub stack_atlas: Option<StackAtlas>,
    pub stack_alloc_map: Option<StackAllocMap>,
    pub internal_pointer_map: Option<InternalPointerMap>,
    pub osr_info: Option<OsrInfo>,
    pub gpu_info: Option<GpuInfo>,
    pub bytecode_pc_map: Option<Vec<(u64, u64)>>,
    pub problems: Vec<Problem>,
}

/// Decodes every section the fixed struct `h` points to, recording problems per section.
pub(super) fn decode_all(
    img: &Image<'_>,
    layout: &StructLayout,
    h: &ExceptionTableHeader,
) -> Sections {
    let mut md = Sections::default();
    let mut problems = Vec::new();
    let mut note =
        |section: &'static str, error: ParseError| problems.push(Problem { section, error });

    if let Err(e) = exception_ranges(img, layout, h, &mut md.exception_ranges) {
        note("exception ranges", e);
    }
    match img.locate(h.gc_stack_atlas, "gcStackAtlas", layout.at(88)) {
        Ok(Some(at)) => {
            let mut atlas = None;
            if let Err(e) = stack_atlas(img, at, h, &mut atlas) {
                note("stack atlas", e);
            }
            md.stack_atlas = atlas;
        }
        Ok(None) => {}
        Err(e) => note("stack atlas", e),
    }
    if h.inlined_calls != 0 {
        match inlined_call_sites(
            img,
            layout,
            h,
            md.stack_atlas.as_ref(),
            &mut md.inlined_call_sites,
        ) {
            Ok(()) => {}
            Err(e) => note("inlined call sites", e),
        }
    }
    if let Some(atlas) = &md.stack_atlas {
        let atlas_at = h.gc_stack_atlas.wrapping_sub(img.capture.metadata_addr) as usize;
        match img.locate(atlas.stack_alloc_map, "stackAllocMap", atlas_at) {
            Ok(Some(at)) => match stack_alloc_map(img, at, atlas.number_of_map_bytes) {
                Ok(m) => md.stack_alloc_map = Some(m),
                Err(e) => note("stack alloc map", e),
            },
            Ok(None) => {}
            Err(e) => note("stack alloc map", e),
        }
        match img.locate(
            atlas.internal_pointer_map,
            "internalPointerMap",
            atlas_at + 8,
        ) {
            Ok(Some(at)) => match internal_pointer_map(img, at) {
                Ok(m) => md.internal_pointer_map = Some(m),
                Err(e) => note("internal pointer map", e),
            },
            Ok(None) => {}
            Err(e) => note("internal pointer map", e),
        }
    }
    match img
        .locate(h.osr_info, "osrInfo", layout.at(144))
        .and_then(|at| at.map(|at| osr_info(img, at)).transpose())
    {
        Ok(info) => md.osr_info = info,
        Err(e) => note("OSR info", e),
    }
    match img
        .locate(h.gpu_code, "gpuCode", layout.at(176))
        .and_then(|at| at.map(|at| gpu_info(img, at)).transpose())
    {
        Ok(info) => md.gpu_info = info,
        Err(e) => note("GPU info", e),
    }
    match img
        .locate(h.ri_data, "riData", layout.at(184))
        .and_then(|at| at.map(|at| bytecode_pc_map(img, at)).transpose())
    {
        Ok(map) => md.bytecode_pc_map = map,
        Err(e) => note("bytecode PC map", e),
    }
    md.problems = problems;
    md
}

/// Ensures `count` entries of at least `each` bytes can fit in what `c` has left.
fn fits(c: &Cursor<'_>, count: u64, each: u64, what: &str) -> Result<usize, ParseError> {
    if count.saturating_mul(each) > c.remaining() as u64 {
        return Err(c.error(format!(
            "{count} {what} of {each} bytes to fit in the {} bytes left",
            c.remaining()
        )));
    }
    Ok(count as usize)
}

fn exception_ranges(
    img: &Image<'_>,
    layout: &StructLayout,
    h: &ExceptionTableHeader,
    out: &mut Vec<ExceptionRange>,
) -> Result<(), ParseError> {
    let wide = h.num_exception_ranges & WIDE_EXCEPTIONS != 0;
    let bytecode_pc = h.num_exception_ranges & HAS_BYTECODE_PC != 0;
    let mut c = img.cursor(layout.struct_size as usize);
    let each = if wide { 24 } else { 8 } + if bytecode_pc { 4 } else { 0 };
    let n = fits(
        &c,
        h.exception_range_count() as u64,
        each,
        "exception ranges",
    )?;
    for _ in 0..n {
        let field = |c: &mut Cursor<'_>| -> Result<u32, ParseError> {
            if wide {
                c.u32()
            } else {
                c.u16().map(u32::from)
            }
        };
        let (start, end, handler, catch_type) = (
            field(&mut c)?,
            field(&mut c)?,
            field(&mut c)?,
            field(&mut c)?,
        );
        let method_or_caller_index = if wide { Some(c.u64()?) } else { None };
        let bytecode_pc = if bytecode_pc { Some(c.u32()?) } else { None };
        out.push(ExceptionRange {
            start,
            end,
            handler,
            catch_type,
            method_or_caller_index,
            bytecode_pc,
        });
    }
    Ok(())
}

fn inlined_call_sites(
    img: &Image<'_>,
    layout: &StructLayout,
    h: &ExceptionTableHeader,
    atlas: Option<&StackAtlas>,
    out: &mut Vec<InlinedCallSite>,
) -> Result<(), ParseError> {
    let Some(at) = img.locate(h.inlined_calls, "inlinedCalls", layout.at(96))? else {
        return Ok(());
    };
    let Some(atlas) = atlas else {
        return Err(ParseError::new(
            img.capture.base + at,
            "a stack atlas: the inlined call sites' size and count come from it",
        ));
    };
    // The sites fill the space up to the atlas.
    let elem = CALL_SITE_SIZE + atlas.number_of_map_bytes as usize;
    let Some(span) = h.gc_stack_atlas.checked_sub(h.inlined_calls) else {
        return Err(ParseError::new(
            img.capture.base + at,
            format!(
                "inlinedCalls {:#x} below gcStackAtlas {:#x}",
                h.inlined_calls, h.gc_stack_atlas
            ),
        ));
    };
    let mut c = img.cursor(at);
    let n = fits(&c, span / elem as u64, elem as u64, "inlined call sites")?;
    for _ in 0..n {
        let method = c.u64()?;
        let bytecode_info = ByteCodeInfo { raw: c.u32()? };
        c.u32()?; // padding
        let monitor_mask = c.bytes(atlas.number_of_map_bytes as usize)?.to_vec();
        out.push(InlinedCallSite {
            method,
            bytecode_info,
            monitor_mask,
        });
    }
    Ok(())
}

/// Reads the atlas; `out` holds it with every map read before an error.
fn stack_atlas(
    img: &Image<'_>,
    at: usize,
    h: &ExceptionTableHeader,
    out: &mut Option<StackAtlas>,
) -> Result<(), ParseError> {
    let mut c = img.cursor(at);
    if c.remaining() < ATLAS_SIZE {
        return Err(c.error("a 32-byte J9JITStackAtlas"));
    }
    let mut atlas = StackAtlas {
        stack_alloc_map: c.u64()?,
        internal_pointer_map: c.u64()?,
        number_of_maps: c.u16()?,
        number_of_map_bytes: c.u16()?,
        parm_base_offset: c.u16()? as i16,
        number_of_parm_slots: c.u16()?,
        local_base_offset: c.u16()? as i16,
        padding_to_32: c.u16()?,
        monitor_autos_map: Vec::new(),
        maps: Vec::new(),
    };
    c.u32()?;
    let nmb = atlas.number_of_map_bytes as usize;
    let result = c
        .bytes(nmb)
        .map(|m| atlas.monitor_autos_map = m.to_vec())
        .and_then(|()| {
            let four = h.flags & flags::GC_MAP_32_BIT_OFFSETS != 0;
            stack_maps(img, &mut c, &mut atlas, four)
        });
    // Each map ends where the next begins; the last one at the end of the body.
    let body_end = (h.end_pc.wrapping_sub(h.start_pc) as i64).saturating_sub(1);
    let lows: Vec<u32> = atlas.maps.iter().map(|m| m.low_code_offset).collect();
    for (i, map) in atlas.maps.iter_mut().enumerate() {
        map.range_end = lows.get(i + 1).map_or(body_end, |&next| next as i64 - 1);
    }
    *out = Some(atlas);
    result
}

fn stack_maps(
    img: &Image<'_>,
    c: &mut Cursor<'_>,
    atlas: &mut StackAtlas,
    four_byte_offsets: bool,
) -> Result<(), ParseError> {
    let nmb = atlas.number_of_map_bytes as usize;
    let align = img.capture.align_stack_maps;
    // The smallest map is 4 bytes (2-byte offset + bytecode info).
    let n = fits(c, atlas.number_of_maps as u64, 4, "stack maps")?;
    for _ in 0..n {
        let image_offset = c.offset() - img.capture.base;
        let low_code_offset = if four_byte_offsets {
            c.u32()?
        } else {
            let low = c.u16()?;
            if align {
                c.u16()?; // alignment
            }
            low as u32
        };
        let bytecode_info = ByteCodeInfo { raw: c.u32()? };
        let kind = if bytecode_info.do_not_profile() {
            MapKind::BytecodeInfoOnly
        } else {
            MapKind::Full(full_map(c, nmb, atlas.internal_pointer_map != 0)?)
        };
        atlas.maps.push(StackMap {
            image_offset,
            low_code_offset,
            range_end: 0,
            bytecode_info,
            kind,
        });
    }
    Ok(())
}

/// The part of a full map after its bytecode info (x86 layout; OpenJ9's GET_NEXT_STACK_MAP).
fn full_map(c: &mut Cursor<'_>, nmb: usize, atlas_has_ipm: bool) -> Result<FullMap, ParseError> {
    let register_save_description = c.u32()?;
    let register_map = c.u32()?;
    let internal_pointers = if register_map & INTERNAL_PTR_REG_MASK != 0 && atlas_has_ipm {
        let map_size = c.u8()?;
        let block_at = c.offset();
        let block = c.bytes(map_size as usize)?;
        let mut b = Cursor::new(block, block_at);
        let count = b.u8()?;
        Some(RegisterPinningArrays {
            map_size,
            arrays: pinning_arrays(&mut b, count)?,
        })
    } else {
        None
    };
    // Bit 7 of the last map-bits byte says live monitor bits follow (with no map bits OpenJ9
    // reads the byte before them; so does this).
    let map_bits = c.bytes(nmb)?.to_vec();
    let flag = c.consumed().last().copied().unwrap_or(0);
    let live_monitor_bits = if flag & 0x80 != 0 {
        Some(c.bytes(nmb)?.to_vec())
    } else {
        None
    };
    Ok(FullMap {
        register_save_description,
        register_map,
        internal_pointers,
        map_bits,
        live_monitor_bits,
    })
}

fn pinning_arrays(c: &mut Cursor<'_>, count: u8) -> Result<Vec<PinningArray>, ParseError> {
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let index = c.u8()?;
        let n = c.u8()?;
        out.push(PinningArray {
            index,
            items: c.bytes(n as usize)?.to_vec(),
        });
    }
    Ok(out)
}

fn stack_alloc_map(img: &Image<'_>, at: usize, nmb: u16) -> Result<StackAllocMap, ParseError> {
    let mut c = img.cursor(at);
    Ok(StackAllocMap {
        first_stack_map: c.u64()?,
        bits: c.bytes(nmb as usize)?.to_vec(),
    })
}

fn internal_pointer_map(img: &Image<'_>, at: usize) -> Result<InternalPointerMap, ParseError> {
    let mut c = img.cursor(at);
    let first_stack_map = c.u64()?;
    let map_size = c.u8()?;
    if img.capture.align_stack_maps {
        c.u8()?;
    }
    let index_of_first_internal_pointer = c.u16()? as i16;
    let offset_of_first_internal_pointer = c.u16()? as i16;
    let count = c.u8()?;
    Ok(InternalPointerMap {
        first_stack_map,
        map_size,
        index_of_first_internal_pointer,
        offset_of_first_internal_pointer,
        arrays: pinning_arrays(&mut c, count)?,
    })
}

fn osr_info(img: &Image<'_>, at: usize) -> Result<OsrInfo, ParseError> {
    let mut c = img.cursor(at);
    let section0_size = c.u32()?;
    let max_scratch_buffer_size = c.u32()?;
    let n = c.u32()?;
    let n = fits(&c, n as u64, 8, "OSR instruction mappings")?;
    let mut mappings = Vec::with_capacity(n);
    for _ in 0..n {
        let instruction_pc_offset = c.u32()?;
        let k = c.u32()?;
        let k = fits(&c, k as u64, 16, "OSR scratch buffer infos")?;
        let mut scratch_buffer_infos = Vec::with_capacity(k);
        for _ in 0..k {
            scratch_buffer_infos.push(ScratchBufferInfo {
                inlined_site_index: c.i32()?,
                osr_buffer_offset: c.u32()?,
                scratch_buffer_offset: c.u32()?,
                sym_size: c.u32()?,
            });
        }
        mappings.push(OsrMapping {
            instruction_pc_offset,
            scratch_buffer_infos,
        });
    }
    // Section 1 starts `section0_size` bytes after section 0.
    let s1 = at
        .checked_add(section0_size as usize)
        .filter(|&s| s < img.bytes.len());
    let Some(s1) = s1 else {
        return Err(c.error(format!(
            "OSR section 1 inside the image ({section0_size}-byte section 0 at image offset {at})"
        )));
    };
    let mut c = img.cursor(s1);
    let section1_size = c.u32()?;
    let n = c.u32()?;
    let n = fits(&c, n as u64, 4, "OSR catch block offsets")?;
    let mut catch_blocks = Vec::with_capacity(n);
    for _ in 0..n {
        catch_blocks.push(c.u32()?);
    }
    Ok(OsrInfo {
        section0_size,
        max_scratch_buffer_size,
        mappings,
        section1_size,
        catch_blocks,
    })
}

fn cstr_at(
    img: &Image<'_>,
    ptr: u64,
    what: &str,
    field_at: usize,
) -> Result<Option<String>, ParseError> {
    img.locate(ptr, what, field_at)?
        .map(|at| img.cursor(at).cstr())
        .transpose()
}

fn gpu_info(img: &Image<'_>, at: usize) -> Result<GpuInfo, ParseError> {
    let mut c = img.cursor(at);
    let signature = c.u64()?;
    let num_ptx_kernels = c.i32()?;
    let max_num_cached_devices = c.i32()?;
    let line_number_array = c.u64()?;
    let ptx_array = c.u64()?;
    let cu_module_array = c.u64()?;
    let count = u64::try_from(num_ptx_kernels).map_err(|_| {
        ParseError::new(img.capture.base + at + 8, "a non-negative PTX kernel count")
    })?;
    let mut info = GpuInfo {
        method_signature: cstr_at(img, signature, "GPU methodSignature", at)?,
        num_ptx_kernels,
        max_num_cached_devices,
        line_numbers: Vec::new(),
        ptx: Vec::new(),
        cu_module_array,
    };
    if let Some(at) = img.locate(line_number_array, "GPU lineNumberArray", at + 16)? {
        let mut c = img.cursor(at);
        for _ in 0..fits(&c, count, 4, "GPU line numbers")? {
            info.line_numbers.push(c.i32()?);
        }
    }
    if let Some(at) = img.locate(ptx_array, "GPU ptxArray", at + 24)? {
        let mut c = img.cursor(at);
        for _ in 0..fits(&c, count, 8, "GPU PTX pointers")? {
            let ptr = c.u64()?;
            let field_at = c.offset() - img.capture.base - 8;
            info.ptx.push(cstr_at(img, ptr, "GPU PTX entry", field_at)?);
        }
    }
    Ok(info)
}

fn bytecode_pc_map(img: &Image<'_>, at: usize) -> Result<Vec<(u64, u64)>, ParseError> {
    let mut c = img.cursor(at);
    let eyecatcher = c.u64()?;
    if eyecatcher != METADATA_MAPPING_EYECATCHER {
        return Err(ParseError::new(
            img.capture.base + at,
            format!("the bytecode-PC map eyecatcher {METADATA_MAPPING_EYECATCHER:#x}, found {eyecatcher:#x}"),
        ));
    }
    let n = c.u64()?;
    let n = fits(&c, n, 16, "bytecode-PC map entries")?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push((c.u64()?, c.u64()?));
    }
    Ok(out)
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
