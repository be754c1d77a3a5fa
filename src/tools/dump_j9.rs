//! `jprof dump` of a JPROF_J9_METADATA record: the record's fields, then every decoded section
//! of the OpenJ9 metadata image (the fixed struct, exception ranges, inlined call sites, the
//! stack atlas with every map, the stack-alloc and internal pointer maps, OSR, GPU, the
//! bytecode-PC map), the problems met, and the method names.

use std::io::{self, Write};

use crate::format::j9::{MapKind, Metadata, PinningArray};
use crate::format::jitdump::J9Metadata;

fn hex_bytes(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "-".to_string();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn arrays(list: &[PinningArray]) -> String {
    let shown: Vec<String> = list
        .iter()
        .map(|a| format!("{}:{:?}", a.index, a.items))
        .collect();
    format!("[{}]", shown.join(" "))
}

/// Writes the record's body lines (the caller wrote the record's first line).
pub fn dump_record(r: &J9Metadata, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        " code_addr={:#x} metadata_addr={:#x} struct_size={} flags={:#x} image={} bytes methods={}",
        r.code_addr,
        r.metadata_addr,
        r.struct_size,
        r.flags,
        r.image.len(),
        r.methods.len()
    )?;
    for (method, name) in &r.methods {
        writeln!(out, "    method {method:#x} {name}")?;
    }
    match r.decode() {
        Ok(md) => dump_metadata(&md, out),
        Err(e) => writeln!(out, "    metadata not decodable: {e}"),
    }
}

fn dump_metadata(md: &Metadata, out: &mut dyn Write) -> io::Result<()> {
    header_and_exception_ranges(md, out)?;
    inlined_call_sites(md, out)?;
    stack_atlas(md, out)?;
    pointer_maps(md, out)?;
    osr_info(md, out)?;
    gpu_info_and_bytecode_pcs(md, out)?;
    for p in &md.problems {
        writeln!(out, "    problem in {}: {}", p.section, p.error)?;
    }
    Ok(())
}

/// The fixed struct's fields and the exception ranges.
fn header_and_exception_ranges(md: &Metadata, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "    J9JITExceptionTable:")?;
    for (name, value) in md.header.fields() {
        writeln!(out, "      {name} = {value}")?;
    }
    writeln!(out, "    exception ranges: {}", md.exception_ranges.len())?;
    for e in &md.exception_ranges {
        write!(
            out,
            "      [{:#x}, {:#x}) handler={:#x} catchType={}",
            e.start, e.end, e.handler, e.catch_type
        )?;
        if let Some(m) = e.method_or_caller_index {
            write!(out, " method/callerIndex={m:#x}")?;
        }
        if let Some(pc) = e.bytecode_pc {
            write!(out, " bytecodePC={pc}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The inlined call sites, each with its caller and bytecode index.
fn inlined_call_sites(md: &Metadata, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "    inlined call sites: {}",
        md.inlined_call_sites.len()
    )?;
    for (i, s) in md.inlined_call_sites.iter().enumerate() {
        writeln!(
            out,
            "      [{i}] method={:#x} callerIndex={} bci={} sameReceiver={} monitorMask={}",
            s.method,
            s.bytecode_info.caller_index(),
            s.bytecode_info.bytecode_index(),
            s.bytecode_info.is_same_receiver(),
            hex_bytes(&s.monitor_mask)
        )?;
    }
    Ok(())
}

/// The stack atlas and each of its GC maps.
fn stack_atlas(md: &Metadata, out: &mut dyn Write) -> io::Result<()> {
    if let Some(a) = &md.stack_atlas {
        writeln!(
            out,
            "    stack atlas: maps={} mapBytes={} parmBaseOffset={} parmSlots={} localBaseOffset={} \
             paddingTo32={:#x} stackAllocMap={:#x} internalPointerMap={:#x} monitorAutos={}",
            a.number_of_maps,
            a.number_of_map_bytes,
            a.parm_base_offset,
            a.number_of_parm_slots,
            a.local_base_offset,
            a.padding_to_32,
            a.stack_alloc_map,
            a.internal_pointer_map,
            hex_bytes(&a.monitor_autos_map)
        )?;
        for m in &a.maps {
            write!(
                out,
                "      map +{:#x}..=+{:#x} callerIndex={} bci={}",
                m.low_code_offset,
                m.range_end,
                m.bytecode_info.caller_index(),
                m.bytecode_info.bytecode_index()
            )?;
            match &m.kind {
                MapKind::BytecodeInfoOnly => writeln!(out, " (bytecode info only)")?,
                MapKind::Full(f) => {
                    write!(
                        out,
                        " registerSaveDescription={:#x} registerMap={:#x} bits={}",
                        f.register_save_description,
                        f.register_map,
                        hex_bytes(&f.map_bits)
                    )?;
                    if let Some(ip) = &f.internal_pointers {
                        write!(
                            out,
                            " internalPointerRegisters(size={})={}",
                            ip.map_size,
                            arrays(&ip.arrays)
                        )?;
                    }
                    if let Some(live) = &f.live_monitor_bits {
                        write!(out, " liveMonitors={}", hex_bytes(live))?;
                    }
                    writeln!(out)?;
                }
            }
        }
    }
    Ok(())
}

/// The stack allocation map and the internal pointer map.
fn pointer_maps(md: &Metadata, out: &mut dyn Write) -> io::Result<()> {
    if let Some(s) = &md.stack_alloc_map {
        writeln!(
            out,
            "    stack alloc map: firstStackMap={:#x} bits={}",
            s.first_stack_map,
            hex_bytes(&s.bits)
        )?;
    }
    if let Some(m) = &md.internal_pointer_map {
        writeln!(
            out,
            "    internal pointer map: firstStackMap={:#x} size={} indexOfFirst={} offsetOfFirst={} \
             pinningArrays={}",
            m.first_stack_map,
            m.map_size,
            m.index_of_first_internal_pointer,
            m.offset_of_first_internal_pointer,
            arrays(&m.arrays)
        )?;
    }
    Ok(())
}

/// The OSR sections: the PC mappings and the catch blocks.
fn osr_info(md: &Metadata, out: &mut dyn Write) -> io::Result<()> {
    if let Some(o) = &md.osr_info {
        writeln!(
            out,
            "    OSR section 0: size={} maxScratchBufferSize={} mappings={}",
            o.section0_size,
            o.max_scratch_buffer_size,
            o.mappings.len()
        )?;
        for m in &o.mappings {
            let infos: Vec<String> = m
                .scratch_buffer_infos
                .iter()
                .map(|i| {
                    format!(
                        "(site={} osr={} scratch={} size={})",
                        i.inlined_site_index,
                        i.osr_buffer_offset,
                        i.scratch_buffer_offset,
                        i.sym_size
                    )
                })
                .collect();
            writeln!(
                out,
                "      +{:#x} {}",
                m.instruction_pc_offset,
                infos.join(" ")
            )?;
        }
        writeln!(
            out,
            "    OSR section 1: size={} catchBlocks(by callerIndex+1)={:?}",
            o.section1_size, o.catch_blocks
        )?;
    }
    Ok(())
}

/// The GPU section and the bytecode PC map.
fn gpu_info_and_bytecode_pcs(md: &Metadata, out: &mut dyn Write) -> io::Result<()> {
    if let Some(g) = &md.gpu_info {
        writeln!(
            out,
            "    GPU: signature={:?} ptxKernels={} maxCachedDevices={} lines={:?} cuModuleArray={:#x}",
            g.method_signature.as_deref().unwrap_or("?"),
            g.num_ptx_kernels,
            g.max_num_cached_devices,
            g.line_numbers,
            g.cu_module_array
        )?;
        for (i, p) in g.ptx.iter().enumerate() {
            writeln!(out, "      ptx[{i}] {:?}", p.as_deref().unwrap_or("?"))?;
        }
    }
    if let Some(map) = &md.bytecode_pc_map {
        writeln!(out, "    bytecode PC map: {} entries", map.len())?;
        for (bc, ia) in map {
            writeln!(out, "      bytecodePC={bc:#x} -> {ia:#x}")?;
        }
    }
    Ok(())
}
