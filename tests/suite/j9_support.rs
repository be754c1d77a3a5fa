//! A writer of OpenJ9 `J9JITExceptionTable` images for tests, built from the documented layouts
//! (docs/openj9.md, formats.md §6) independently of the decoder: the fixed struct, exception
//! ranges, inlined call sites with monitor masks, the stack atlas and its maps (both kinds,
//! 2- or 4-byte offsets), the stack-alloc map, the internal pointer map, OSR info, GPU info
//! and the bytecode-PC map. Every pointer is `metadata_addr + offset in the image`.
#![allow(dead_code)]

/// One stack map.
#[derive(Clone, Debug)]
pub struct MapSpec {
    pub low: u32,
    pub caller: i32,
    pub bci: i32,
    /// A full GC map (else bytecode info only).
    pub full: bool,
    pub live_monitors: bool,
    /// Internal pointer registers after the register map (needs the atlas's internal map).
    pub internal_ptr_regs: bool,
}

pub fn map(low: u32, caller: i32, bci: i32, full: bool) -> MapSpec {
    MapSpec {
        low,
        caller,
        bci,
        full,
        live_monitors: false,
        internal_ptr_regs: false,
    }
}

#[derive(Clone, Debug)]
pub struct Body {
    pub metadata_addr: u64,
    pub struct_size: u32,
    pub eyecatchers: bool,
    pub ram_method: u64,
    pub start_pc: u64,
    pub warm_size: u64,
    /// (offset of startColdPC from startPC, size).
    pub cold: Option<(u64, u64)>,
    pub four_byte_offsets: bool,
    pub wide_exceptions: bool,
    pub bytecode_pcs: bool,
    /// (start, end, handler, catch type, J9Method or caller index, bytecode PC).
    pub exceptions: Vec<(u32, u32, u32, u32, u64, u32)>,
    pub number_of_map_bytes: u16,
    /// (J9Method, caller index, call-site bci, monitor mask has bits).
    pub sites: Vec<(u64, i32, i32, bool)>,
    pub maps: Vec<MapSpec>,
    pub stack_alloc_map: bool,
    pub internal_pointer_map: bool,
    pub osr: bool,
    pub gpu: bool,
    pub bytecode_pc_map: Vec<(u64, u64)>,
}

impl Default for Body {
    fn default() -> Self {
        Self {
            metadata_addr: 0x7f00_1000_0000,
            struct_size: 232,
            eyecatchers: true,
            ram_method: 0xA000,
            start_pc: 0x7f00_2000_0000,
            warm_size: 0x100,
            cold: None,
            four_byte_offsets: false,
            wide_exceptions: false,
            bytecode_pcs: false,
            exceptions: Vec::new(),
            number_of_map_bytes: 2,
            sites: Vec::new(),
            maps: Vec::new(),
            stack_alloc_map: false,
            internal_pointer_map: false,
            osr: false,
            gpu: false,
            bytecode_pc_map: Vec::new(),
        }
    }
}

pub fn bytecode_info(caller: i32, bci: i32, do_not_profile: bool, same: bool) -> u32 {
    (do_not_profile as u32)
        | ((same as u32) << 1)
        | (((caller as u32) & 0x1FFF) << 2)
        | ((bci as u32) << 15)
}

fn put(img: &mut [u8], at: usize, bytes: &[u8]) {
    img[at..at + bytes.len()].copy_from_slice(bytes);
}

fn align8(v: &mut Vec<u8>) {
    v.resize(v.len().div_ceil(8) * 8, 0);
}

/// Field offsets without eyecatchers (formats.md §6.1 minus 24).
mod off {
    pub const CONSTANT_POOL: usize = 0;
    pub const RAM_METHOD: usize = 8;
    pub const START_PC: usize = 16;
    pub const END_WARM_PC: usize = 24;
    pub const START_COLD_PC: usize = 32;
    pub const END_PC: usize = 40;
    pub const TOTAL_FRAME_SIZE: usize = 48;
    pub const NUM_EXCEPTION_RANGES: usize = 66;
    pub const SIZE: usize = 68;
    pub const FLAGS: usize = 72;
    pub const GC_STACK_ATLAS: usize = 88;
    pub const INLINED_CALLS: usize = 96;
    pub const OSR_INFO: usize = 144;
    pub const HOTNESS: usize = 160;
    pub const GPU_CODE: usize = 176;
    pub const RI_DATA: usize = 184;
}

impl Body {
    fn field(&self, plain: usize) -> usize {
        plain + if self.eyecatchers { 24 } else { 0 }
    }

    fn ptr(&self, offset: usize) -> [u8; 8] {
        (self.metadata_addr + offset as u64).to_le_bytes()
    }

    pub fn end_pc(&self) -> u64 {
        match self.cold {
            Some((start, size)) => self.start_pc + start + size,
            None => self.start_pc + self.warm_size,
        }
    }

    /// The image: struct, then the sections in the documented order.
    pub fn build(&self) -> Vec<u8> {
        let mut img = vec![0u8; self.struct_size as usize];
        let f = |plain| self.field(plain);
        put(&mut img, f(off::CONSTANT_POOL), &0xC0_0000u64.to_le_bytes());
        put(&mut img, f(off::RAM_METHOD), &self.ram_method.to_le_bytes());
        put(&mut img, f(off::START_PC), &self.start_pc.to_le_bytes());
        put(
            &mut img,
            f(off::END_WARM_PC),
            &(self.start_pc + self.warm_size).to_le_bytes(),
        );
        let cold_start = self.cold.map_or(0, |(s, _)| self.start_pc + s);
        put(&mut img, f(off::START_COLD_PC), &cold_start.to_le_bytes());
        put(&mut img, f(off::END_PC), &self.end_pc().to_le_bytes());
        put(&mut img, f(off::TOTAL_FRAME_SIZE), &48u64.to_le_bytes());
        let mut count = self.exceptions.len() as u16;
        if self.wide_exceptions {
            count |= 0x8000;
        }
        if self.bytecode_pcs {
            count |= 0x4000;
        }
        put(&mut img, f(off::NUM_EXCEPTION_RANGES), &count.to_le_bytes());
        let flags: u64 = if self.four_byte_offsets { 0x2 } else { 0 };
        put(&mut img, f(off::FLAGS), &flags.to_le_bytes());
        put(&mut img, f(off::HOTNESS), &3i32.to_le_bytes());

        // (1) exception ranges
        for &(s, e, h, t, m, bc) in &self.exceptions {
            if self.wide_exceptions {
                for v in [s, e, h, t] {
                    img.extend(v.to_le_bytes());
                }
                img.extend(m.to_le_bytes());
            } else {
                for v in [s, e, h, t] {
                    img.extend((v as u16).to_le_bytes());
                }
            }
            if self.bytecode_pcs {
                img.extend(bc.to_le_bytes());
            }
        }
        align8(&mut img);
        // (2) inlined call sites, each followed by its monitor mask
        let nmb = self.number_of_map_bytes as usize;
        if !self.sites.is_empty() {
            let at = img.len();
            put(&mut img, f(off::INLINED_CALLS), &self.ptr(at));
            for &(method, caller, bci, same) in &self.sites {
                img.extend(method.to_le_bytes());
                img.extend(bytecode_info(caller, bci, false, same).to_le_bytes());
                img.extend(0u32.to_le_bytes());
                img.extend((0..nmb).map(|i| if same { 1 << (i % 8) } else { 0 }));
            }
        }
        // (3) stack atlas, monitor autos map, stack maps
        let atlas = img.len();
        put(&mut img, f(off::GC_STACK_ATLAS), &self.ptr(atlas));
        img.extend([0u8; 32]);
        put(
            &mut img,
            atlas + 16,
            &(self.maps.len() as u16).to_le_bytes(),
        );
        put(&mut img, atlas + 18, &(nmb as u16).to_le_bytes());
        put(&mut img, atlas + 20, &(-16i16).to_le_bytes());
        put(&mut img, atlas + 22, &2u16.to_le_bytes());
        put(&mut img, atlas + 24, &(-40i16).to_le_bytes());
        put(&mut img, atlas + 26, &0xFFFFu16.to_le_bytes());
        img.extend((0..nmb).map(|i| 0x10 + i as u8));
        let first_map = img.len();
        for m in &self.maps {
            if self.four_byte_offsets {
                img.extend(m.low.to_le_bytes());
            } else {
                img.extend((m.low as u16).to_le_bytes());
            }
            img.extend(bytecode_info(m.caller, m.bci, !m.full, false).to_le_bytes());
            if !m.full {
                continue;
            }
            img.extend(0x0000_0005u32.to_le_bytes()); // register save description
            let mut regmap: u32 = 0x0000_0003;
            if m.internal_ptr_regs {
                regmap |= 0x8000_0000;
            }
            img.extend(regmap.to_le_bytes());
            if m.internal_ptr_regs {
                // size, then [count, index, n, regs...]
                let block = [1u8, 4, 2, 7, 9];
                img.push(block.len() as u8);
                img.extend(block);
            }
            let mut bits: Vec<u8> = (0..nmb).map(|i| (i as u8) & 0x7F).collect();
            if m.live_monitors {
                if let Some(last) = bits.last_mut() {
                    *last |= 0x80;
                }
                img.extend(&bits);
                img.extend((0..nmb).map(|_| 0x01u8));
            } else {
                img.extend(&bits);
            }
        }
        align8(&mut img);
        // (4) stack alloc map
        if self.stack_alloc_map {
            let at = img.len();
            put(&mut img, atlas, &self.ptr(at));
            img.extend(self.ptr(first_map));
            img.extend((0..nmb).map(|_| 0xA5u8));
            align8(&mut img);
        }
        // (5) internal pointer map in J9 format
        if self.internal_pointer_map {
            let at = img.len();
            put(&mut img, atlas + 8, &self.ptr(at));
            img.extend(self.ptr(first_map));
            img.push(9); // map size
            img.extend(3i16.to_le_bytes());
            img.extend((-24i16).to_le_bytes());
            img.push(2); // one pinning array temp + one register pinning array
            img.extend([1u8, 2, 5, 6]); // index 1, two internal pointer temps
            img.extend([4u8, 0]); // register pinning array 4
            align8(&mut img);
        }
        // (6) OSR info: section 0 then section 1
        if self.osr {
            let at = img.len();
            put(&mut img, f(off::OSR_INFO), &self.ptr(at));
            let mut s0 = Vec::new();
            s0.extend(64u32.to_le_bytes()); // max scratch buffer size
            s0.extend(2u32.to_le_bytes());
            for (pc, infos) in [(0x10u32, 1u32), (0x30, 2)] {
                s0.extend(pc.to_le_bytes());
                s0.extend(infos.to_le_bytes());
                for i in 0..infos {
                    for v in [i as i32 - 1, 8 * i as i32, 16, 8] {
                        s0.extend(v.to_le_bytes());
                    }
                }
            }
            img.extend((s0.len() as u32 + 4).to_le_bytes());
            img.extend(s0);
            img.extend(16u32.to_le_bytes());
            img.extend(2u32.to_le_bytes());
            img.extend(0x40u32.to_le_bytes());
            img.extend(0u32.to_le_bytes());
            align8(&mut img);
        }
        // (7) GPU info
        if self.gpu {
            let at = img.len();
            put(&mut img, f(off::GPU_CODE), &self.ptr(at));
            img.extend([0u8; 40]);
            let sig = img.len();
            img.extend(b"Lk;run()V\0");
            let lines = img.len();
            img.extend(12i32.to_le_bytes());
            img.extend(34i32.to_le_bytes());
            let ptx_array = img.len();
            img.extend([0u8; 16]);
            let ptx0 = img.len();
            img.extend(b".version 1\0");
            let ptx1 = img.len();
            img.extend(b".version 2\0");
            put(&mut img, ptx_array, &self.ptr(ptx0));
            put(&mut img, ptx_array + 8, &self.ptr(ptx1));
            put(&mut img, at, &self.ptr(sig));
            put(&mut img, at + 8, &2i32.to_le_bytes());
            put(&mut img, at + 12, &1i32.to_le_bytes());
            put(&mut img, at + 16, &self.ptr(lines));
            put(&mut img, at + 24, &self.ptr(ptx_array));
            align8(&mut img);
        }
        // (8) bytecode PC → instruction address map
        if !self.bytecode_pc_map.is_empty() {
            let at = img.len();
            put(&mut img, f(off::RI_DATA), &self.ptr(at));
            img.extend(0xBC1A_FFFFu64.to_le_bytes());
            img.extend((self.bytecode_pc_map.len() as u64).to_le_bytes());
            for &(bc, ia) in &self.bytecode_pc_map {
                img.extend(bc.to_le_bytes());
                img.extend(ia.to_le_bytes());
            }
        }
        let size = img.len() as i32;
        put(&mut img, f(off::SIZE), &size.to_le_bytes());
        img
    }

    pub fn capture(&self) -> jprof_format::j9::Capture {
        jprof_format::j9::Capture {
            metadata_addr: self.metadata_addr,
            struct_size: self.struct_size,
            eyecatchers: self.eyecatchers,
            align_stack_maps: false,
            base: 0,
        }
    }
}

/// Method names of the canned bodies.
pub const OUTER: u64 = 0xA000;
pub const MID: u64 = 0xB000;
pub const LEAF: u64 = 0xC000;
pub const OTHER: u64 = 0xD000;

pub fn names() -> Vec<(u64, &'static str)> {
    vec![
        (OUTER, "app/Main.run()V"),
        (MID, "app/Shape.area()D"),
        (LEAF, "java/lang/Math.sqrt(D)D"),
        (OTHER, "app/Log.debug(Ljava/lang/String;)V"),
    ]
}

/// Three levels of inlining (Main.run → Shape.area → Math.sqrt, and Main.run → Log.debug),
/// both map kinds, a cold range, narrow exception ranges, OSR, GPU and a bytecode-PC map.
///
/// Expected chain by code offset (innermost first, (method, bci)):
/// - 0x00..0x10: run@0
/// - 0x10..0x20: sqrt@2 ← area@4 ← run@10
/// - 0x20..0x30: area@7 ← run@10
/// - 0x30..0x100: debug@1 ← run@20
/// - cold 0x400..0x420: run@30; 0x420..0x440: sqrt@5 ← area@4 ← run@10
pub fn three_levels() -> Body {
    Body {
        cold: Some((0x400, 0x40)),
        exceptions: vec![(0x10, 0x30, 0x400, 3, 0, 0), (0x30, 0x40, 0x410, 0, 0, 0)],
        sites: vec![
            (MID, -1, 10, true),
            (LEAF, 0, 4, false),
            (OTHER, -1, 20, false),
        ],
        maps: vec![
            map(0x00, -1, 0, true),
            MapSpec {
                live_monitors: true,
                ..map(0x10, 1, 2, true)
            },
            map(0x20, 0, 7, false),
            map(0x30, 2, 1, false),
            map(0x400, -1, 30, true),
            map(0x420, 1, 5, false),
        ],
        osr: true,
        gpu: true,
        bytecode_pc_map: vec![(0xE000 + 10, 0x7f00_2000_0010)],
        stack_alloc_map: true,
        ..Body::default()
    }
}

/// The expected chain of [`three_levels`] at a code offset.
pub fn three_levels_expected(offset: u64) -> Vec<(u64, i32)> {
    match offset {
        0x00..=0x0F => vec![(OUTER, 0)],
        0x10..=0x1F => vec![(LEAF, 2), (MID, 4), (OUTER, 10)],
        0x20..=0x2F => vec![(MID, 7), (OUTER, 10)],
        0x30..=0xFF => vec![(OTHER, 1), (OUTER, 20)],
        0x400..=0x41F => vec![(OUTER, 30)],
        0x420..=0x43F => vec![(LEAF, 5), (MID, 4), (OUTER, 10)],
        _ => vec![],
    }
}

/// A large body: 4-byte map offsets, wide exception ranges with bytecode PCs, an internal
/// pointer map, internal pointer registers, no eyecatchers, the oldest struct size.
///
/// Expected: 0..0x12000 run@3; 0x12000..0x20000 area@9 ← run@40; cold 0x30000..0x30100 run@50.
pub fn wide_body() -> Body {
    Body {
        struct_size: 192,
        eyecatchers: false,
        warm_size: 0x20000,
        cold: Some((0x30000, 0x100)),
        four_byte_offsets: true,
        wide_exceptions: true,
        bytecode_pcs: true,
        exceptions: vec![(0x100, 0x12000, 0x30010, 7, 0xA000, 17)],
        sites: vec![(MID, -1, 40, false)],
        maps: vec![
            MapSpec {
                internal_ptr_regs: true,
                ..map(0, -1, 3, true)
            },
            map(0x12000, 0, 9, false),
            map(0x30000, -1, 50, true),
        ],
        internal_pointer_map: true,
        number_of_map_bytes: 1,
        ..Body::default()
    }
}

pub fn wide_body_expected(offset: u64) -> Vec<(u64, i32)> {
    match offset {
        0..=0x11FFF => vec![(OUTER, 3)],
        0x12000..=0x1FFFF => vec![(MID, 9), (OUTER, 40)],
        0x30000..=0x300FF => vec![(OUTER, 50)],
        _ => vec![],
    }
}

/// A jitdump holding, for each body, a JPROF_J9_METADATA record (with [`names`]) and the
/// CODE_LOAD of its warm code named `name`.
pub fn jitdump(pid: u32, bodies: &[(&Body, &str)]) -> Vec<u8> {
    use jprof_format::jitdump_write as w;
    let methods: Vec<(u64, String)> = names()
        .into_iter()
        .map(|(m, n)| (m, n.to_string()))
        .collect();
    let mut f = w::header(pid, 0, false);
    for (i, (body, name)) in bodies.iter().enumerate() {
        let image = body.build();
        f.extend(w::j9_metadata(
            10 + i as u64,
            &w::J9Metadata {
                code_addr: body.start_pc,
                metadata_addr: body.metadata_addr,
                struct_size: body.struct_size,
                flags: body.eyecatchers as u32,
                image: &image,
                methods: &methods,
            },
        ));
        f.extend(w::code_load(
            10 + i as u64,
            &w::CodeLoad {
                pid,
                tid: pid,
                code_addr: body.start_pc,
                code_index: i as u64 + 1,
                name,
                code: &vec![0x90; body.warm_size as usize],
            },
        ));
    }
    f.extend(w::close(100));
    f
}

/// [`wide_body`] at addresses of its own, so both canned bodies can live in one process.
pub fn wide_body_elsewhere() -> Body {
    Body {
        metadata_addr: 0x7f00_1100_0000,
        start_pc: 0x7f00_3000_0000,
        ..wide_body()
    }
}
