//! Which compilation units of a binary's DWARF can name a set of addresses, so the end of
//! `record` parses only those (libc's debug file has thousands of units; addr2line parses the
//! header, abbreviations and line-program header of every one when a context is opened).
//!
//! A unit is needed when it covers an address the way addr2line decides it (its DW_AT_ranges,
//! else its .debug_aranges entries, else DW_AT_low_pc/high_pc, else its line program's
//! sequences), and so is every unit a needed unit refers into (DW_FORM_ref_addr: names of
//! inlined and out-of-line functions may live in another unit). Keeping more units than
//! needed changes no answer; each unit is looked at and let go of one at a time.

use std::ops::Range;

/// The byte ranges in .debug_info of the units needed to name `addresses`, in section order,
/// and how many units the section has. An error where addr2line would fail too (reading the
/// whole DWARF then fails the same way).
pub(super) fn units_for<R: gimli::Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    addresses: &[u64],
) -> gimli::Result<(Vec<Range<usize>>, usize)> {
    let mut probes = addresses.to_vec();
    probes.sort_unstable();
    probes.dedup();
    let covers = |r: gimli::Range| {
        let i = probes.partition_point(|&p| p < r.begin);
        r.begin < r.end && i < probes.len() && probes[i] < r.end
    };
    let mut aranges = Vec::new();
    let mut headers = dwarf.debug_aranges.headers();
    while let Some(header) = headers.next()? {
        aranges.push((header.debug_info_offset().0, header.offset()));
    }
    aranges.sort_unstable_by_key(|a| a.0);

    let mut units = Vec::new();
    let mut keep = Vec::new();
    let mut headers = dwarf.units();
    while let Some(header) = headers.next()? {
        let Some(offset) = header.debug_info_offset() else {
            continue;
        };
        let needed = match header.type_() {
            gimli::UnitType::Type { .. } | gimli::UnitType::SplitType { .. } => continue,
            // Only referred to: no addresses.
            gimli::UnitType::Partial => false,
            _ => covers_any(dwarf, header.clone(), offset.0, &aranges, &covers)?,
        };
        units.push((offset.0..offset.0 + header.length_including_self(), header));
        keep.push(needed);
    }

    // Every unit a kept unit refers into, and so on.
    let mut walk: Vec<usize> = (0..units.len()).filter(|&i| keep[i]).collect();
    while let Some(i) = walk.pop() {
        let Ok(unit) = dwarf.unit(units[i].1.clone()) else {
            continue;
        };
        let mut entries = unit.entries_raw(None)?;
        while !entries.is_empty() {
            let Some(abbrev) = entries.read_abbreviation()? else {
                continue;
            };
            for spec in abbrev.attributes() {
                let attr = entries.read_attribute(*spec)?;
                if let gimli::AttributeValue::DebugInfoRef(target) = attr.value() {
                    let j = units.partition_point(|u| u.0.start <= target.0);
                    if j > 0 && !keep[j - 1] {
                        keep[j - 1] = true;
                        walk.push(j - 1);
                    }
                }
            }
        }
    }
    let total = units.len();
    let kept = units
        .into_iter()
        .zip(keep)
        .filter_map(|((range, _), keep)| keep.then_some(range))
        .collect();
    Ok((kept, total))
}

/// Whether the unit covers one of the addresses, by the ranges addr2line gives it (see the
/// module's comment). A unit addr2line skips covers none.
fn covers_any<R: gimli::Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    header: gimli::UnitHeader<R>,
    offset: usize,
    aranges: &[(usize, gimli::DebugArangesOffset<usize>)],
    covers: &impl Fn(gimli::Range) -> bool,
) -> gimli::Result<bool> {
    // Most units are told by their .debug_aranges entries, from the root DIE's abbreviation
    // alone (no DW_AT_ranges): without parsing the unit's line-program header.
    if let Ok(abbreviations) = dwarf.abbreviations(&header) {
        let mut entries = header.entries_raw(&abbreviations, None)?;
        if let Some(abbrev) = entries.read_abbreviation()? {
            let mut ranges = false;
            for spec in abbrev.attributes() {
                ranges |= entries.read_attribute(*spec)?.name() == gimli::DW_AT_ranges;
            }
            if !ranges {
                if let (true, covered) = by_aranges(dwarf, offset, aranges, covers)? {
                    return Ok(covered);
                }
            }
        }
    }
    let Ok(unit) = dwarf.unit(header) else {
        return Ok(false);
    };
    let unit = gimli::UnitRef::new(dwarf, &unit);
    let mut entries = unit.entries_raw(None)?;
    let Some(abbrev) = entries.read_abbreviation()? else {
        return Ok(false);
    };
    let (mut low_pc, mut high_pc, mut size, mut ranges_offset) = (None, None, None, None);
    for spec in abbrev.attributes() {
        let attr = entries.read_attribute(*spec)?;
        match (attr.name(), attr.value()) {
            (gimli::DW_AT_low_pc, gimli::AttributeValue::Addr(a)) => low_pc = Some(a),
            (gimli::DW_AT_low_pc, gimli::AttributeValue::DebugAddrIndex(i)) => {
                low_pc = Some(unit.address(i)?);
            }
            (gimli::DW_AT_high_pc, gimli::AttributeValue::Addr(a)) => high_pc = Some(a),
            (gimli::DW_AT_high_pc, gimli::AttributeValue::DebugAddrIndex(i)) => {
                high_pc = Some(unit.address(i)?);
            }
            (gimli::DW_AT_high_pc, gimli::AttributeValue::Udata(n)) => size = Some(n),
            (gimli::DW_AT_ranges, value) => ranges_offset = unit.attr_ranges_offset(value)?,
            _ => {}
        }
    }
    let (mut has_ranges, mut covered) = match ranges_offset {
        None => by_aranges(dwarf, offset, aranges, covers)?,
        Some(_) => (false, false),
    };
    if !has_ranges {
        let mut add = |range: gimli::Range| {
            if range.begin < range.end {
                has_ranges = true;
                covered |= covers(range);
            }
        };
        if let Some(at) = ranges_offset {
            let mut list = unit.ranges(at)?;
            while let Some(range) = list.next()? {
                add(range);
            }
        } else if let (Some(begin), Some(end)) = (low_pc, high_pc) {
            add(gimli::Range { begin, end });
        } else if let (Some(begin), Some(size)) = (low_pc, size) {
            add(gimli::Range {
                begin,
                end: begin.wrapping_add(size),
            });
        }
    }
    if has_ranges {
        return Ok(covered);
    }
    // No ranges declared: the line program's sequences, from each one's first row to its end.
    let Some(program) = unit.line_program.clone() else {
        return Ok(false);
    };
    let mut rows = program.rows();
    let mut start = None;
    loop {
        match rows.next_row() {
            Ok(Some((_, row))) if row.end_sequence() => {
                if let Some(begin) = start.take() {
                    if covers(gimli::Range {
                        begin,
                        end: row.address(),
                    }) {
                        return Ok(true);
                    }
                }
            }
            Ok(Some((_, row))) => {
                start.get_or_insert(row.address());
            }
            Ok(None) => return Ok(false),
            // Kept: a unit too many changes no answer.
            Err(_) => return Ok(true),
        }
    }
}

/// Whether the unit at `offset` has .debug_aranges entries, and whether they cover an address.
fn by_aranges<R: gimli::Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    offset: usize,
    aranges: &[(usize, gimli::DebugArangesOffset<usize>)],
    covers: &impl Fn(gimli::Range) -> bool,
) -> gimli::Result<(bool, bool)> {
    let (mut has_ranges, mut covered) = (false, false);
    let mut i = aranges.partition_point(|a| a.0 < offset);
    while let Some((_, at)) = aranges.get(i).filter(|a| a.0 == offset) {
        i += 1;
        let mut entries = dwarf.debug_aranges.header(*at)?.entries();
        while let Some(arange) = entries.next().transpose() {
            // Skipped as addr2line skips them (the iterator stops at the errors it cannot go
            // past).
            let Ok(arange) = arange else { continue };
            if arange.length() != 0 {
                has_ranges = true;
                covered |= covers(arange.range());
            }
        }
    }
    Ok((has_ranges, covered))
}
