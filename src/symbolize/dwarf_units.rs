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

/// What addresses a unit names, by the ranges addr2line gives it (see the module's comment).
enum Covers {
    /// None: a partial unit (only referred to), or one without any range.
    Nothing,
    /// Its ranges (each counts only when not empty).
    Ranges(Vec<gimli::Range>),
    /// Any address: its line program could not be read to its end (kept: a unit too many
    /// changes no answer).
    Anything,
}

/// Every unit of a binary's DWARF (its byte range in .debug_info and its header) with what it
/// covers: read once, beside `record`'s walk over the samples, before the addresses are known
/// ([`units`]); the units a set of addresses needs are then told at once ([`Units::needed`]).
pub(super) struct Units<R: gimli::Reader<Offset = usize>> {
    units: Vec<(Range<usize>, gimli::UnitHeader<R>, Covers)>,
}

/// The units of `dwarf` and what each covers. An error where addr2line would fail too (reading
/// the whole DWARF then fails the same way).
pub(super) fn units<R: gimli::Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
) -> gimli::Result<Units<R>> {
    let mut aranges = Vec::new();
    let mut headers = dwarf.debug_aranges.headers();
    while let Some(header) = headers.next()? {
        aranges.push((header.debug_info_offset().0, header.offset()));
    }
    aranges.sort_unstable_by_key(|a| a.0);

    let mut units = Vec::new();
    let mut headers = dwarf.units();
    while let Some(header) = headers.next()? {
        let Some(offset) = header.debug_info_offset() else {
            continue;
        };
        let covers = match header.type_() {
            gimli::UnitType::Type { .. } | gimli::UnitType::SplitType { .. } => continue,
            // Only referred to: no addresses.
            gimli::UnitType::Partial => Covers::Nothing,
            _ => unit_covers(dwarf, header.clone(), offset.0, &aranges)?,
        };
        let range = offset.0..offset.0 + header.length_including_self();
        units.push((range, header, covers));
    }
    Ok(Units { units })
}

impl<R: gimli::Reader<Offset = usize>> Units<R> {
    /// The byte ranges in .debug_info of the units needed to name `addresses`, in section
    /// order, and how many units the section has.
    pub(super) fn needed(
        &self,
        dwarf: &gimli::Dwarf<R>,
        addresses: &[u64],
    ) -> gimli::Result<(Vec<Range<usize>>, usize)> {
        let mut probes = addresses.to_vec();
        probes.sort_unstable();
        probes.dedup();
        let covers = |r: &gimli::Range| {
            let i = probes.partition_point(|&p| p < r.begin);
            r.begin < r.end && i < probes.len() && probes[i] < r.end
        };
        let units = &self.units;
        let mut keep: Vec<bool> = units
            .iter()
            .map(|(_, _, c)| match c {
                Covers::Nothing => false,
                Covers::Ranges(ranges) => ranges.iter().any(covers),
                Covers::Anything => true,
            })
            .collect();

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
        let kept = units
            .iter()
            .zip(keep)
            .filter_map(|((range, _, _), keep)| keep.then_some(range.clone()))
            .collect();
        Ok((kept, units.len()))
    }
}

/// What the unit covers, by the ranges addr2line gives it (see the module's comment). A unit
/// addr2line skips covers nothing.
fn unit_covers<R: gimli::Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    header: gimli::UnitHeader<R>,
    offset: usize,
    aranges: &[(usize, gimli::DebugArangesOffset<usize>)],
) -> gimli::Result<Covers> {
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
                if let Some(ranges) = by_aranges(dwarf, offset, aranges)? {
                    return Ok(Covers::Ranges(ranges));
                }
            }
        }
    }
    let Ok(unit) = dwarf.unit(header) else {
        return Ok(Covers::Nothing);
    };
    let unit = gimli::UnitRef::new(dwarf, &unit);
    let mut entries = unit.entries_raw(None)?;
    let Some(abbrev) = entries.read_abbreviation()? else {
        return Ok(Covers::Nothing);
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
    if ranges_offset.is_none() {
        if let Some(ranges) = by_aranges(dwarf, offset, aranges)? {
            return Ok(Covers::Ranges(ranges));
        }
    }
    let mut declared = Vec::new();
    if let Some(at) = ranges_offset {
        let mut list = unit.ranges(at)?;
        while let Some(range) = list.next()? {
            declared.push(range);
        }
    } else if let (Some(begin), Some(end)) = (low_pc, high_pc) {
        declared.push(gimli::Range { begin, end });
    } else if let (Some(begin), Some(size)) = (low_pc, size) {
        declared.push(gimli::Range {
            begin,
            end: begin.wrapping_add(size),
        });
    }
    if declared.iter().any(|r| r.begin < r.end) {
        return Ok(Covers::Ranges(declared));
    }
    // No ranges declared: the line program's sequences, from each one's first row to its end.
    let Some(program) = unit.line_program.clone() else {
        return Ok(Covers::Nothing);
    };
    let mut rows = program.rows();
    let mut start = None;
    let mut sequences = Vec::new();
    loop {
        match rows.next_row() {
            Ok(Some((_, row))) if row.end_sequence() => {
                if let Some(begin) = start.take() {
                    sequences.push(gimli::Range {
                        begin,
                        end: row.address(),
                    });
                }
            }
            Ok(Some((_, row))) => {
                start.get_or_insert(row.address());
            }
            Ok(None) => return Ok(Covers::Ranges(sequences)),
            Err(_) => return Ok(Covers::Anything),
        }
    }
}

/// The unit at `offset`'s .debug_aranges entries that are not empty; None when it has none.
fn by_aranges<R: gimli::Reader<Offset = usize>>(
    dwarf: &gimli::Dwarf<R>,
    offset: usize,
    aranges: &[(usize, gimli::DebugArangesOffset<usize>)],
) -> gimli::Result<Option<Vec<gimli::Range>>> {
    let mut ranges = Vec::new();
    let mut i = aranges.partition_point(|a| a.0 < offset);
    while let Some((_, at)) = aranges.get(i).filter(|a| a.0 == offset) {
        i += 1;
        let mut entries = dwarf.debug_aranges.header(*at)?.entries();
        while let Some(arange) = entries.next().transpose() {
            // Skipped as addr2line skips them (the iterator stops at the errors it cannot go
            // past).
            let Ok(arange) = arange else { continue };
            if arange.length() != 0 {
                ranges.push(arange.range());
            }
        }
    }
    Ok((!ranges.is_empty()).then_some(ranges))
}
