//! The OpenJ9 metadata decoder against images built from the documented layouts
//! (tests/suite/j9_support.rs): every section, the inline chain at every PC of warm and cold code, and
//! hostile images (pointers outside the image, overflowing counts, caller-index cycles,
//! truncations and bit flips).

use crate::j9_support;

use j9_support::*;
use jprof::format::j9::{self, LookupError, MapKind, Metadata, MethodNames};
use proptest::collection::vec;
use proptest::prelude::*;

fn method_names() -> MethodNames {
    names()
        .into_iter()
        .map(|(m, n)| (m, n.to_string()))
        .collect()
}

fn decode(body: &Body) -> Metadata {
    j9::decode(&body.build(), body.capture()).expect("decodes")
}

fn chain(md: &Metadata, pc: u64) -> Result<Vec<(u64, i32)>, LookupError> {
    md.lookup(pc, &method_names()).map(|frames| {
        frames
            .iter()
            .map(|f| (f.method, f.bytecode_index))
            .collect()
    })
}

/// Every PC of the body's warm and cold ranges maps to the expected chain; PCs around the
/// ranges are outside the body.
fn check_every_pc(body: &Body, expected: fn(u64) -> Vec<(u64, i32)>, step: u64) {
    let md = decode(body);
    assert!(md.problems.is_empty(), "{:?}", md.problems);
    let mut ranges = vec![(0, body.warm_size)];
    if let Some((start, size)) = body.cold {
        ranges.push((start, start + size));
    }
    for &(from, to) in &ranges {
        let mut offset = from;
        while offset < to {
            for o in [offset, (offset + step - 1).min(to - 1)] {
                let pc = body.start_pc + o;
                assert_eq!(chain(&md, pc), Ok(expected(o)), "offset {o:#x}");
            }
            offset += step;
        }
        let after = body.start_pc + to;
        if !ranges.iter().any(|&(f, t)| to >= f && to < t) {
            assert!(matches!(
                chain(&md, after),
                Err(LookupError::OutsideBody { .. })
            ));
        }
    }
    assert!(matches!(
        chain(&md, body.start_pc - 1),
        Err(LookupError::OutsideBody { .. })
    ));
}

#[test]
fn three_levels_of_inlining_at_every_pc() {
    check_every_pc(&three_levels(), three_levels_expected, 1);
}

#[test]
fn wide_offsets_at_every_pc() {
    check_every_pc(&wide_body(), wide_body_expected, 0x80);
}

#[test]
fn names_and_return_addresses() {
    let body = three_levels();
    let md = decode(&body);
    let frames = md.lookup(body.start_pc + 0x15, &method_names()).unwrap();
    let shown: Vec<String> = frames
        .iter()
        .map(|f| format!("{} bci={}", f.name, f.bytecode_index))
        .collect();
    assert_eq!(
        shown,
        [
            "java/lang/Math.sqrt(D)D bci=2",
            "app/Shape.area()D bci=4",
            "app/Main.run()V bci=10"
        ]
    );
    assert_eq!(frames[0].call_site, Some(1));
    assert_eq!(frames[2].call_site, None);
    // A return address at the start of a map's range belongs to the map before it.
    let ret = md
        .lookup_return_address(body.start_pc + 0x10, &method_names())
        .unwrap();
    assert_eq!(ret.len(), 1);
    assert_eq!(ret[0].bytecode_index, 0);
    // Unknown methods get a placeholder, not a failure.
    let frames = md
        .lookup(body.start_pc + 0x15, &MethodNames::new())
        .unwrap();
    assert_eq!(frames[0].name, "[J9Method 0xc000]");
}

#[test]
fn every_section_of_the_narrow_body() {
    let body = three_levels();
    let md = decode(&body);
    let h = &md.header;
    assert_eq!(h.start_pc, body.start_pc);
    assert_eq!(h.end_warm_pc, body.start_pc + 0x100);
    assert_eq!(h.start_cold_pc, body.start_pc + 0x400);
    assert_eq!(h.end_pc, body.start_pc + 0x440);
    assert_eq!(h.ram_method, OUTER);
    assert_eq!(h.hotness, 3);
    assert!(h.eyecatchers.is_some() && h.invoke_basic_call_info.is_some());
    assert!(h.const_ref_arrays.is_some());
    assert_eq!(md.exception_ranges.len(), 2);
    let e = &md.exception_ranges[0];
    assert_eq!(
        (e.start, e.end, e.handler, e.catch_type),
        (0x10, 0x30, 0x400, 3)
    );
    assert_eq!((e.method_or_caller_index, e.bytecode_pc), (None, None));
    assert_eq!(md.inlined_call_sites.len(), 3);
    assert_eq!(md.inlined_call_sites[0].monitor_mask, vec![1, 2]);
    assert!(md.inlined_call_sites[0].bytecode_info.is_same_receiver());
    let atlas = md.stack_atlas.as_ref().unwrap();
    assert_eq!(atlas.maps.len(), 6);
    assert_eq!(atlas.monitor_autos_map, vec![0x10, 0x11]);
    assert_eq!(
        (atlas.parm_base_offset, atlas.local_base_offset),
        (-16, -40)
    );
    assert_eq!(atlas.maps[1].range_end, 0x1F);
    assert_eq!(atlas.maps[5].range_end, 0x43F);
    match &atlas.maps[1].kind {
        MapKind::Full(full) => {
            assert_eq!(full.register_map, 3);
            assert_eq!(full.map_bits, vec![0, 0x81]);
            assert_eq!(full.live_monitor_bits, Some(vec![1, 1]));
        }
        other => panic!("map 1 should be a full map, found {other:?}"),
    }
    assert!(matches!(atlas.maps[0].kind, MapKind::Full(ref f) if f.live_monitor_bits.is_none()));
    assert_eq!(atlas.maps[2].kind, MapKind::BytecodeInfoOnly);
    let alloc = md.stack_alloc_map.as_ref().unwrap();
    assert_eq!(alloc.bits, vec![0xA5, 0xA5]);
    assert_eq!(
        alloc.first_stack_map,
        body.metadata_addr + atlas.maps[0].image_offset as u64
    );
    let osr = md.osr_info.as_ref().unwrap();
    assert_eq!(osr.max_scratch_buffer_size, 64);
    assert_eq!(osr.mappings.len(), 2);
    assert_eq!(osr.mappings[1].instruction_pc_offset, 0x30);
    assert_eq!(osr.mappings[1].scratch_buffer_infos.len(), 2);
    assert_eq!(
        osr.mappings[1].scratch_buffer_infos[0].inlined_site_index,
        -1
    );
    assert_eq!(osr.catch_blocks, vec![0x40, 0]);
    let gpu = md.gpu_info.as_ref().unwrap();
    assert_eq!(gpu.method_signature.as_deref(), Some("Lk;run()V"));
    assert_eq!(gpu.line_numbers, vec![12, 34]);
    assert_eq!(
        gpu.ptx,
        vec![
            Some(".version 1".to_string()),
            Some(".version 2".to_string())
        ]
    );
    assert_eq!(md.bytecode_pc_map, Some(vec![(0xE00A, 0x7f00_2000_0010)]));
    assert_eq!(md.methods(), vec![OUTER, MID, LEAF, OTHER]);
}

#[test]
fn every_section_of_the_wide_body() {
    let body = wide_body();
    let md = decode(&body);
    assert!(md.header.eyecatchers.is_none());
    assert!(md.header.invoke_basic_call_info.is_none());
    let e = &md.exception_ranges[0];
    assert_eq!((e.start, e.end, e.handler), (0x100, 0x12000, 0x30010));
    assert_eq!(
        (e.method_or_caller_index, e.bytecode_pc),
        (Some(0xA000), Some(17))
    );
    let atlas = md.stack_atlas.as_ref().unwrap();
    match &atlas.maps[0].kind {
        MapKind::Full(full) => {
            let regs = full
                .internal_pointers
                .as_ref()
                .expect("internal pointer registers");
            assert_eq!(regs.map_size, 5);
            assert_eq!(regs.arrays.len(), 1);
            assert_eq!(
                (regs.arrays[0].index, &regs.arrays[0].items),
                (4, &vec![7, 9])
            );
        }
        other => panic!("{other:?}"),
    }
    let ipm = md.internal_pointer_map.as_ref().unwrap();
    assert_eq!(ipm.map_size, 9);
    assert_eq!(ipm.index_of_first_internal_pointer, 3);
    assert_eq!(ipm.offset_of_first_internal_pointer, -24);
    assert_eq!(ipm.arrays.len(), 2);
    assert_eq!(ipm.arrays[0].items, vec![5, 6]);
    assert!(ipm.arrays[1].items.is_empty());
    assert!(md.osr_info.is_none() && md.gpu_info.is_none() && md.bytecode_pc_map.is_none());
}

fn set_u64(img: &mut [u8], at: usize, v: u64) {
    img[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn set_u32(img: &mut [u8], at: usize, v: u32) {
    img[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn pointers_outside_the_image_are_reported_and_the_rest_decodes() {
    let body = three_levels();
    let mut img = body.build();
    // osrInfo (plain offset 144 + 24 eyecatchers) far beyond the image.
    set_u64(&mut img, 168, body.metadata_addr + 0x10_0000);
    // riData below the image.
    set_u64(&mut img, 208, body.metadata_addr - 8);
    let md = j9::decode(&img, body.capture()).unwrap();
    let sections: Vec<&str> = md.problems.iter().map(|p| p.section).collect();
    assert_eq!(sections, ["OSR info", "bytecode PC map"]);
    assert!(md.problems[0].error.expected.contains("not captured"));
    // Errors name the offset of the pointer field.
    assert_eq!(md.problems[0].error.offset, 168);
    assert_eq!(md.problems[1].error.offset, 208);
    assert!(md.osr_info.is_none() && md.bytecode_pc_map.is_none());
    assert!(md.gpu_info.is_some());
    assert_eq!(
        chain(&md, body.start_pc + 0x12),
        Ok(three_levels_expected(0x12))
    );

    // Without the atlas there are no chains, and the sites cannot be sized.
    set_u64(&mut img, 112, 0xdead_0000);
    let md = j9::decode(&img, body.capture()).unwrap();
    assert!(md.problems.iter().any(|p| p.section == "stack atlas"));
    assert!(md
        .problems
        .iter()
        .any(|p| p.section == "inlined call sites"));
    assert_eq!(chain(&md, body.start_pc), Err(LookupError::NoStackAtlas));
}

#[test]
fn overflowing_counts_end_in_errors() {
    let body = three_levels();
    let clean = body.build();
    let md = decode(&body);
    let atlas_at = (md.header.gc_stack_atlas - body.metadata_addr) as usize;
    let osr_at = (md.header.osr_info - body.metadata_addr) as usize;
    let ri_at = (md.header.ri_data - body.metadata_addr) as usize;

    let mut img = clean.clone();
    img[atlas_at + 16..atlas_at + 18].copy_from_slice(&0xFFFFu16.to_le_bytes());
    let md = j9::decode(&img, body.capture()).unwrap();
    assert!(md.problems.iter().any(|p| p.section == "stack atlas"));
    // The maps read before the damage are kept... or none were (the count check is first).
    assert!(md.stack_atlas.is_some());

    let mut img = clean.clone();
    set_u32(&mut img, osr_at + 8, u32::MAX);
    let md = j9::decode(&img, body.capture()).unwrap();
    let osr = md
        .problems
        .iter()
        .find(|p| p.section == "OSR info")
        .unwrap();
    assert!(osr
        .error
        .expected
        .contains("4294967295 OSR instruction mappings"));

    let mut img = clean.clone();
    set_u64(&mut img, ri_at + 8, u64::MAX / 2);
    let md = j9::decode(&img, body.capture()).unwrap();
    assert!(md.problems.iter().any(|p| p.section == "bytecode PC map"));

    // Exception count with the wide bit on a narrow table: runs past the image.
    let mut img = clean;
    img[90..92].copy_from_slice(&0xBFFFu16.to_le_bytes());
    let md = j9::decode(&img, body.capture()).unwrap();
    assert!(md.problems.iter().any(|p| p.section == "exception ranges"));
}

#[test]
fn caller_index_cycles_and_bad_indexes_end_the_walk() {
    let leaf_at = |sites: Vec<(u64, i32, i32, bool)>| Body {
        sites,
        maps: vec![map(0, 0, 1, false)],
        ..Body::default()
    };
    // A site that is its own caller.
    let md = decode(&leaf_at(vec![(MID, 0, 3, false)]));
    match chain(&md, 0x7f00_2000_0000) {
        Err(LookupError::CallerCycle { index: 0, .. }) => {}
        other => panic!("{other:?}"),
    }
    // A loop 0 → 1 → 0.
    let md = decode(&leaf_at(vec![(MID, 1, 3, false), (LEAF, 0, 4, false)]));
    match md.lookup(0x7f00_2000_0000, &method_names()) {
        Err(LookupError::CallerCycle { index: 0, partial }) => assert_eq!(partial.len(), 2),
        other => panic!("{other:?}"),
    }
    // A caller index past the table.
    let md = decode(&leaf_at(vec![(MID, 7, 3, false)]));
    assert!(matches!(
        chain(&md, 0x7f00_2000_0000),
        Err(LookupError::BadCallerIndex {
            index: 7,
            count: 1,
            ..
        })
    ));
    // An unloaded inlined method is named as such.
    let md = decode(&leaf_at(vec![(u64::MAX, -1, 3, false)]));
    let frames = md.lookup(0x7f00_2000_0000, &method_names()).unwrap();
    assert_eq!(frames[0].name, "[unloaded inlined method]");
}

#[test]
fn struct_size_is_checked() {
    let body = three_levels();
    let img = body.build();
    let mut capture = body.capture();
    capture.struct_size = 100;
    assert!(j9::decode(&img, capture).is_err());
    assert!(j9::decode(&img[..200], body.capture()).is_err());
}

/// Decodes and looks up every PC of a damaged image; only returning normally is checked.
fn exercise(img: &[u8], body: &Body) {
    if let Ok(md) = j9::decode(img, body.capture()) {
        let names = method_names();
        let span = body.end_pc() - body.start_pc;
        let lows = body.maps.iter().map(|m| m.low as u64);
        let offsets = lows.flat_map(|l| [l.wrapping_sub(1), l, l + 1]);
        for o in offsets.chain((0..span + 2).step_by((span / 16).max(1) as usize)) {
            let _ = md.lookup(body.start_pc.wrapping_add(o), &names);
            let _ = md.lookup_return_address(body.start_pc.wrapping_add(o), &names);
        }
        let _ = md.methods();
        let _ = md.header.fields();
    }
}

/// Every truncation of both images decodes or is refused without a panic.
#[test]
fn never_panics_on_truncations() {
    for body in [three_levels(), wide_body()] {
        let img = body.build();
        for len in 0..img.len() {
            exercise(&img[..len], &body);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Three flipped bits anywhere in either image: decoding and every lookup return.
    #[test]
    fn never_panics_on_bit_flips(
        wide: bool,
        flips in vec((any::<prop::sample::Index>(), 0u8..8), 3),
    ) {
        let body = if wide { wide_body() } else { three_levels() };
        let mut damaged = body.build();
        for (at, bit) in flips {
            let i = at.index(damaged.len());
            damaged[i] ^= 1 << bit;
        }
        exercise(&damaged, &body);
    }
}
