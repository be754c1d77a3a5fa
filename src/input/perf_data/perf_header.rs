//! The fixed header of a perf.data file and a check of its data section, done before the file
//! is handed to `linux-perf-data`: that crate gives up on a truncated or damaged file without
//! saying where, so jprof finds the last complete record itself and names the offset.

use crate::format::perf::RecordIter;
use crate::format::{Cursor, ParseError};
use crate::recording::MAX_INFLATION;

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
/// perf's own record that is followed by `size` bytes of AUX-area trace data.
const PERF_RECORD_AUXTRACE: u32 = 71;
/// perf's records of zstd-compressed records (`perf record -z`): the body is the next piece of
/// one zstd stream; COMPRESSED2 starts with the piece's size (the rest is padding).
const PERF_RECORD_COMPRESSED: u32 = 81;
const PERF_RECORD_COMPRESSED2: u32 = 83;
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
    let mut inflation = Inflation::default();
    let damaged = |at: usize, expected: &str| {
        Some(ParseError::new(
            offset + at,
            format!("{expected} (the data section is damaged or cut off here)"),
        ))
    };
    while readable_size < window.len() {
        let Some(record) = RecordIter::new(&window[readable_size..]).next() else {
            break;
        };
        let raw = match record {
            Ok(raw) => raw,
            Err(e) => {
                stopped = damaged(readable_size + e.offset, &e.expected);
                break;
            }
        };
        let mut end = readable_size + 8 + raw.body.len();
        if raw.kind.0 == PERF_RECORD_AUXTRACE {
            // The trace data follows the record, outside its size: linux-perf-data sizes a
            // buffer from this field.
            let trace = raw.body.get(..8).map_or(u64::MAX, |b| {
                u64::from_le_bytes(b.try_into().unwrap_or([0xff; 8]))
            });
            if trace > (window.len() - end) as u64 {
                stopped = damaged(
                    readable_size,
                    &format!(
                        "an AUXTRACE record whose {trace} bytes of trace data fit the data section"
                    ),
                );
                break;
            }
            end += trace as usize;
        }
        if let Err(expected) = inflation.follow(&raw) {
            stopped = Some(ParseError::new(offset + readable_size, expected));
            break;
        }
        readable_size = end;
    }
    if stopped.is_none() && declared_size > available {
        stopped = Some(ParseError::new(
            file.len(),
            format!(
                "the data section to run to byte {} (the file is truncated)",
                (offset as u64).saturating_add(declared_size)
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

/// The zstd stream of a perf.data's compressed records, decompressed into a scratch buffer
/// only to be measured: `linux-perf-data` decompresses each record whole into memory, so
/// records that would decompress to more than [`MAX_INFLATION`] bytes for each compressed
/// byte so far (a zstd bomb: a few KiB that stand for gigabytes) must not reach it.
#[derive(Default)]
struct Inflation {
    stream: Option<zstd::zstd_safe::DCtx<'static>>,
    scratch: Vec<u8>,
    compressed: u64,
    decompressed: u64,
}

impl Inflation {
    /// Follows the stream through `record` if it is a compressed record; the error says what
    /// was expected of it.
    fn follow(&mut self, record: &crate::format::perf::RawRecord<'_>) -> Result<(), String> {
        use zstd::zstd_safe::{InBuffer, OutBuffer};
        let piece = match record.kind.0 {
            PERF_RECORD_COMPRESSED => record.body,
            PERF_RECORD_COMPRESSED2 => {
                let size = record
                    .body
                    .get(..8)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0xff; 8])));
                match size {
                    Some(size) if size <= (record.body.len() - 8) as u64 => {
                        &record.body[8..8 + size as usize]
                    }
                    _ => return Err("a COMPRESSED2 record whose data size fits the record".into()),
                }
            }
            _ => return Ok(()),
        };
        self.compressed += piece.len() as u64;
        let limit = self.compressed.saturating_mul(MAX_INFLATION as u64);
        let stream = self
            .stream
            .get_or_insert_with(zstd::zstd_safe::DCtx::create);
        if self.scratch.is_empty() {
            self.scratch = vec![0; 128 << 10];
        }
        let mut input = InBuffer::around(piece);
        loop {
            let mut output = OutBuffer::around(&mut self.scratch[..]);
            stream
                .decompress_stream(&mut output, &mut input)
                .map_err(|code| {
                    format!(
                        "a compressed record that continues the zstd stream ({})",
                        zstd::zstd_safe::get_error_name(code)
                    )
                })?;
            let made = output.pos();
            self.decompressed += made as u64;
            if self.decompressed > limit {
                return Err(format!(
                    "compressed records that decompress to at most {MAX_INFLATION} bytes for \
                     each compressed byte ({limit} bytes up to the end of this one; it \
                     decompresses past that: a zstd bomb or a damaged record)"
                ));
            }
            if made < self.scratch.len() && input.pos() == piece.len() {
                return Ok(());
            }
        }
    }
}

/// The largest `perf_event_attr` entry accepted (the kernel's is 136 bytes today).
const MAX_ATTR_SIZE: u64 = 4096;
/// The smallest `perf_event_attr` (PERF_ATTR_SIZE_VER0).
const MIN_ATTR_SIZE: u64 = 64;

/// Checks every header section `linux-perf-data` sizes allocations from, before it does: the
/// attributes and the old event-type table (and each entry's id list) must lie inside the
/// file, or the file is refused with the offset of the bad field. The feature sections are
/// checked by [`check_features`].
pub fn check_sections(file: &[u8]) -> Result<(), ParseError> {
    let attr_size = Cursor::new(&file[ATTR_SIZE_AT..], ATTR_SIZE_AT).u64()?;
    let entry_size_ok = (17..=MAX_ATTR_SIZE).contains(&attr_size);
    let (attrs_at, attrs_size) = section_in_file(file, ATTRS_AT, "an attribute section")?;
    let (types_at, types_size) = section_in_file(file, EVENT_TYPES_AT, "an event-type section")?;
    // Checked even with no attribute section: the crate divides that section's size by it.
    if !entry_size_ok {
        return Err(ParseError::new(
            ATTR_SIZE_AT,
            format!("an attribute entry size of 17 to {MAX_ATTR_SIZE} bytes (it says {attr_size})"),
        ));
    }
    // Attribute entries are a perf_event_attr whose last 16 bytes are the (offset, size) of
    // its id list; event-type entries are a perf_event_attr followed by those 16 bytes.
    for (at, size, entry, ids_at) in [
        (
            attrs_at,
            attrs_size,
            attr_size,
            attr_size.saturating_sub(16),
        ),
        (types_at, types_size, attr_size + 16, attr_size),
    ] {
        let mut pos = at;
        while size > 0 && pos + entry <= at + size {
            section_in_file(file, (pos + ids_at) as usize, "an event's id list")?;
            pos += entry;
        }
    }
    Ok(())
}

/// The `(offset, size)` pair at `at`, if the section it names lies inside the file.
fn section_in_file(file: &[u8], at: usize, what: &str) -> Result<(u64, u64), ParseError> {
    let len = file.len() as u64;
    let mut c = Cursor::new(file.get(at..).unwrap_or_default(), at);
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
}

/// perf's feature numbers (`HEADER_*` in perf's `util/header.h`) of the sections whose counts
/// `linux-perf-data` allocates from when jprof reads them: the command line and the event
/// descriptions. jprof reads no other counted feature; one it starts reading belongs here.
const FEATURE_CMDLINE: usize = 11;
const FEATURE_EVENT_DESC: usize = 12;

/// Feature sections jprof leaves out, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamagedFeatures {
    /// What is wrong, with byte offsets.
    pub why: String,
    /// The feature numbers left out (every one present when the table itself is damaged).
    pub dropped: Vec<usize>,
}

/// Checks the feature-section table that follows the data section, and the contents of the
/// counted sections jprof reads. `None`: all good; otherwise the damaged sections, to be left
/// out by [`without_features`].
pub fn check_features(file: &[u8], data: &DataSection) -> Option<DamagedFeatures> {
    let bits = &file[FEATURES_AT..FEATURES_AT + FEATURES_LEN];
    let present: Vec<usize> = (0..FEATURES_LEN * 8)
        .filter(|i| bits[i / 8] & (1 << (i % 8)) != 0)
        .collect();
    if present.is_empty() {
        return None;
    }
    // A declared data size past the end of the file (or of u64) puts the table nowhere.
    let table = (data.offset as u64).saturating_add(data.declared_size);
    let len = file.len() as u64;
    let all = |why: String| {
        Some(DamagedFeatures {
            why,
            dropped: present.clone(),
        })
    };
    if table
        .checked_add(present.len() as u64 * 16)
        .is_none_or(|end| end > len)
    {
        return all(format!(
            "{} feature sections declared, but their table at byte offset {table} runs past the end of the file",
            present.len()
        ));
    }
    let mut damaged = Vec::new();
    let mut dropped = Vec::new();
    for (i, &feature) in present.iter().enumerate() {
        let at = (table + i as u64 * 16) as usize;
        let (offset, size) = match section_in_file(file, at, "a feature section") {
            Ok(section) => section,
            Err(e) => return all(e.to_string()),
        };
        let section = &file[offset as usize..(offset + size) as usize];
        let checked = match feature {
            FEATURE_CMDLINE => check_string_list(section).map_err(|e| ("command line", e)),
            FEATURE_EVENT_DESC => check_event_desc(section).map_err(|e| ("event descriptions", e)),
            _ => Ok(()),
        };
        if let Err((name, why)) = checked {
            damaged.push(format!(
                "feature section {feature} ({name}) at byte offset {offset}: {why}"
            ));
            dropped.push(feature);
        }
    }
    (!dropped.is_empty()).then(|| DamagedFeatures {
        why: damaged.join("; "),
        dropped,
    })
}

/// Reads the `u32` count at the start of `rest` and moves past it.
fn take_u32(rest: &mut &[u8], what: &str) -> Result<u32, String> {
    let (word, tail) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| format!("{what}, but the section ends"))?;
    *rest = tail;
    Ok(u32::from_le_bytes(*word))
}

/// Moves past `n` bytes of `rest`, if it holds them.
fn skip(rest: &mut &[u8], n: u64, what: &str) -> Result<(), String> {
    if n > rest.len() as u64 {
        return Err(format!(
            "{what} of {n} bytes, but only {} remain in the section",
            rest.len()
        ));
    }
    *rest = &rest[n as usize..];
    Ok(())
}

/// `perf_header_string`: `u32 len; char str[len]`.
fn skip_string(rest: &mut &[u8]) -> Result<(), String> {
    let len = take_u32(rest, "a string length")?;
    skip(rest, len.into(), "a string")
}

/// `perf_header_string_list`: `u32 nr; perf_header_string strings[nr]`. Each string takes at
/// least 4 bytes, so a count the section cannot hold is refused before anything is sized
/// from it.
fn check_string_list(section: &[u8]) -> Result<(), String> {
    let mut rest = section;
    let nr = take_u32(&mut rest, "a string count")?;
    if u64::from(nr) * 4 > rest.len() as u64 {
        return Err(format!("{nr} strings, more than the section can hold"));
    }
    for _ in 0..nr {
        skip_string(&mut rest)?;
    }
    Ok(())
}

/// HEADER_EVENT_DESC: `u32 nr; u32 attr_size;` then `nr` times `perf_event_attr (attr_size
/// bytes); u32 nr_ids; perf_header_string name; u64 ids[nr_ids]`.
fn check_event_desc(section: &[u8]) -> Result<(), String> {
    let mut rest = section;
    let nr = take_u32(&mut rest, "an event count")?;
    let attr_size = u64::from(take_u32(&mut rest, "an attribute size")?);
    if !(MIN_ATTR_SIZE..=MAX_ATTR_SIZE).contains(&attr_size) {
        return Err(format!(
            "an attribute size of {MIN_ATTR_SIZE} to {MAX_ATTR_SIZE} bytes (it says {attr_size})"
        ));
    }
    if u64::from(nr) * (attr_size + 8) > rest.len() as u64 {
        return Err(format!("{nr} events, more than the section can hold"));
    }
    for _ in 0..nr {
        skip(&mut rest, attr_size, "an event attribute")?;
        let ids = take_u32(&mut rest, "an id count")?;
        skip_string(&mut rest)?;
        skip(&mut rest, u64::from(ids) * 8, "an id list")?;
    }
    Ok(())
}

/// The file without the `dropped` feature sections: their bits cleared and the table of the
/// others closed up (it lists the present features' sections in bit order).
pub fn without_features(file: &[u8], data: &DataSection, dropped: &[usize]) -> Vec<u8> {
    let mut out = file.to_vec();
    // Saturating: with every feature dropped the table may be nowhere (then it is not read).
    let table = data.offset.saturating_add(data.declared_size as usize);
    // Where the feature's entry is in the table as written, and where it goes.
    let (mut entry, mut kept) = (table, table);
    for feature in 0..FEATURES_LEN * 8 {
        let (byte, bit) = (FEATURES_AT + feature / 8, 1 << (feature % 8));
        if out[byte] & bit == 0 {
            continue;
        }
        if dropped.contains(&feature) {
            out[byte] &= !bit;
        } else {
            // Only reached for a table check_features found inside the file.
            out.copy_within(entry..entry + 16, kept);
            kept += 16;
        }
        entry = entry.saturating_add(16);
    }
    out
}

/// A copy of the file whose header declares only the readable records and no feature sections
/// (those live after the declared data section, which is exactly what is missing), so the
/// crate reads what is there.
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
