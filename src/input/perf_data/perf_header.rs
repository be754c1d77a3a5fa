//! The fixed header of a perf.data file and a check of its data section, done before the file
//! is handed to `linux-perf-data`: that crate gives up on a truncated or damaged file without
//! saying where, so jprof finds the last complete record itself and names the offset.

use crate::format::perf::RecordIter;
use crate::format::{Cursor, ParseError};

/// "PERFILE2": a little-endian perf.data file.
pub const MAGIC: &[u8; 8] = b"PERFILE2";
/// The magic of a big-endian file (written on a big-endian machine).
pub const MAGIC_BIG_ENDIAN: &[u8; 8] = b"2ELIFREP";

/// Byte offsets of the fields jprof reads or patches in `struct perf_file_header`.
const ATTR_SIZE_AT: usize = 16;
const ATTRS_AT: usize = 24;
const DATA_OFFSET_AT: usize = 40;
const EVENT_TYPES_AT: usize = 56;
const DATA_SIZE_AT: usize = 48;
const FEATURES_AT: usize = 72;
const FEATURES_LEN: usize = 32;
const HEADER_MIN_LEN: usize = FEATURES_AT + FEATURES_LEN;

/// Where the records are, and how much of that is readable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataSection {
    pub offset: usize,
    /// The size the header declares.
    pub declared_size: u64,
    /// Bytes from `offset` that hold complete, well-formed record headers.
    pub readable_size: usize,
    /// Why reading has to stop before `declared_size`, with the absolute offset.
    pub stopped: Option<ParseError>,
}

/// Reads the header and walks the record headers of the data section (sizes only, so it is
/// cheap). Fails only when the header itself is unusable.
pub fn check(file: &[u8]) -> Result<DataSection, ParseError> {
    let magic = file
        .get(..8)
        .ok_or_else(|| ParseError::new(0, "the perf.data magic"))?;
    if magic == MAGIC_BIG_ENDIAN {
        return Err(ParseError::new(
            0,
            "a little-endian perf.data (this one was written on a big-endian machine, \
             which jprof does not read)",
        ));
    }
    if magic != MAGIC {
        return Err(ParseError::new(0, "the perf.data magic \"PERFILE2\""));
    }
    if file.len() < HEADER_MIN_LEN {
        return Err(ParseError::new(
            file.len(),
            format!("a {HEADER_MIN_LEN}-byte perf.data header (the file is truncated)"),
        ));
    }
    let mut c = Cursor::new(&file[DATA_OFFSET_AT..], DATA_OFFSET_AT);
    let offset = c.u64()?;
    let declared_size = c.u64()?;
    if offset > file.len() as u64 || offset < HEADER_MIN_LEN as u64 {
        return Err(ParseError::new(
            DATA_OFFSET_AT,
            format!(
                "a data section offset inside the file (it says {offset}, the file has {} bytes)",
                file.len()
            ),
        ));
    }
    let offset = offset as usize;
    let available = (file.len() - offset) as u64;
    let window = &file[offset..offset + declared_size.min(available) as usize];
    let mut readable_size = 0;
    let mut stopped = None;
    for record in RecordIter::new(window) {
        match record {
            Ok(raw) => readable_size = raw.offset + 8 + raw.body.len(),
            Err(e) => {
                stopped = Some(ParseError::new(
                    offset + e.offset,
                    format!(
                        "{} (the data section is damaged or cut off here)",
                        e.expected
                    ),
                ));
                break;
            }
        }
    }
    if stopped.is_none() && declared_size > available {
        stopped = Some(ParseError::new(
            file.len(),
            format!(
                "the data section to run to byte {} (the file is truncated)",
                offset as u64 + declared_size
            ),
        ));
    }
    Ok(DataSection {
        offset,
        declared_size,
        readable_size,
        stopped,
    })
}

/// A copy of the file whose header declares only the readable records and no feature sections
/// (those live after the declared data section, which is exactly what is missing), so the
/// crate reads what is there.
/// The largest `perf_event_attr` entry accepted (the kernel's is 136 bytes today).
const MAX_ATTR_SIZE: u64 = 4096;

/// Checks every section the header declares against the file, before `linux-perf-data` sizes
/// allocations from them: the attributes (and each one's id list) must lie inside the file, or
/// the file is refused with the offset of the bad field. A damaged feature-section table (after
/// the data section) is not fatal: the returned note says so and the caller reads the records
/// without the features ([`without_features`]).
pub fn check_sections(file: &[u8], data: &DataSection) -> Result<Option<String>, ParseError> {
    let len = file.len() as u64;
    let in_file = |at: usize, what: &str| -> Result<(u64, u64), ParseError> {
        let mut c = Cursor::new(&file[at..], at);
        let (offset, size) = (c.u64()?, c.u64()?);
        if offset.checked_add(size).is_none_or(|end| end > len) {
            return Err(ParseError::new(
                at,
                format!(
                    "{what} inside the file (it says {size} bytes at offset {offset}, the file has {len} bytes)"
                ),
            ));
        }
        Ok((offset, size))
    };
    let attr_size = Cursor::new(&file[ATTR_SIZE_AT..], ATTR_SIZE_AT).u64()?;
    let (attrs_at, attrs_size) = in_file(ATTRS_AT, "an attribute section")?;
    if attrs_size > 0 && (attr_size <= 16 || attr_size > MAX_ATTR_SIZE) {
        return Err(ParseError::new(
            ATTR_SIZE_AT,
            format!("an attribute entry size of 17 to {MAX_ATTR_SIZE} bytes (it says {attr_size})"),
        ));
    }
    if attrs_size > 0 {
        // Each entry is a perf_event_attr followed by the (offset, size) of its id list.
        let mut entry = attrs_at;
        while entry + attr_size <= attrs_at + attrs_size {
            in_file((entry + attr_size - 16) as usize, "an event's id list")?;
            entry += attr_size;
        }
    }
    in_file(EVENT_TYPES_AT, "an event-type section")?;
    let bits = &file[FEATURES_AT..FEATURES_AT + FEATURES_LEN];
    let features = bits.iter().map(|b| b.count_ones() as u64).sum::<u64>();
    let table = data.offset as u64 + data.declared_size;
    let damaged = |why: String| Ok(Some(why));
    if features == 0 {
        return Ok(None);
    }
    if table.checked_add(features * 16).is_none_or(|end| end > len) {
        return damaged(format!(
            "{features} feature sections declared, but their table at byte offset {table} runs past the end of the file"
        ));
    }
    for i in 0..features {
        let at = (table + i * 16) as usize;
        if let Err(e) = in_file(at, "a feature section") {
            return damaged(e.to_string());
        }
    }
    Ok(None)
}

/// The file with its feature bitmap cleared: the records alone, for a file whose feature
/// sections are damaged.
pub fn without_features(file: &[u8]) -> Vec<u8> {
    let mut out = file.to_vec();
    out[FEATURES_AT..FEATURES_AT + FEATURES_LEN].fill(0);
    out
}

pub fn readable_prefix(file: &[u8], data: &DataSection) -> Vec<u8> {
    let end = data.offset + data.readable_size;
    let mut out = file[..end].to_vec();
    out[DATA_SIZE_AT..DATA_SIZE_AT + 8].copy_from_slice(&(data.readable_size as u64).to_le_bytes());
    out[FEATURES_AT..FEATURES_AT + FEATURES_LEN].fill(0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header with `records` as the data section and one feature section after it.
    fn file(records: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend(MAGIC);
        f.extend(104u64.to_le_bytes()); // header size
        f.extend(136u64.to_le_bytes()); // attr size
        f.extend([0u8; 16]); // attrs
        f.extend(104u64.to_le_bytes());
        f.extend((records.len() as u64).to_le_bytes());
        f.extend([0u8; 16]); // event types
        f.extend([1u8; 32]); // features
        f.extend(records);
        f.extend([0xEEu8; 16]); // a feature section header
        f
    }

    fn record(kind: u32, body_len: usize) -> Vec<u8> {
        let mut r = kind.to_le_bytes().to_vec();
        r.extend(0u16.to_le_bytes());
        r.extend(((body_len + 8) as u16).to_le_bytes());
        r.extend(vec![0u8; body_len]);
        r
    }

    #[test]
    fn complete_file_is_fully_readable() {
        let records = [record(9, 16), record(3, 8)].concat();
        let f = file(&records);
        let d = check(&f).unwrap();
        assert_eq!((d.offset, d.readable_size), (104, 40));
        assert!(d.stopped.is_none());
    }

    #[test]
    fn every_cut_names_an_offset_and_keeps_whole_records() {
        let records = [record(9, 16), record(3, 8)].concat();
        let f = file(&records);
        for cut in 104..104 + records.len() {
            let d = check(&f[..cut]).unwrap();
            let e = d.stopped.clone().expect("a cut file is reported");
            assert!(e.offset <= cut, "cut {cut}: {e}");
            assert!(d.readable_size <= cut - 104);
            assert!([0, 24, 40].contains(&d.readable_size));
            let patched = readable_prefix(&f[..cut], &d);
            let again = check(&patched).unwrap();
            assert!(again.stopped.is_none());
            assert_eq!(again.readable_size, d.readable_size);
        }
        for cut in 0..104 {
            assert!(check(&f[..cut]).is_err());
        }
    }

    #[test]
    fn damaged_record_size_stops_there() {
        let mut records = [record(9, 16), record(3, 8)].concat();
        records[24 + 6] = 4; // size 4 < 8
        let f = file(&records);
        let d = check(&f).unwrap();
        assert_eq!(d.readable_size, 24);
        assert_eq!(d.stopped.unwrap().offset, 104 + 24);
    }

    #[test]
    fn other_files_are_refused_with_offset_zero() {
        assert_eq!(check(b"JPROFREC........").unwrap_err().offset, 0);
        assert!(check(b"2ELIFREP")
            .unwrap_err()
            .expected
            .contains("big-endian"));
    }
}
