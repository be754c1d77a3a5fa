//! `/tmp/perf-<pid>.map` files: one `START SIZE name` line per JIT code range, hex numbers with or
//! without `0x`, any case (HotSpot `0x%016lx`, OpenJ9 `%p %lX`, Mono `%llx %x`, V8 plain hex).
//! Parsed incrementally like jitdump: the runtime appends while it runs.

use super::ParseError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapEntry {
    pub start: u64,
    pub size: u64,
    pub name: String,
    /// Byte offset of the line in the file.
    pub offset: usize,
}

/// Entries of the complete lines in `file[from..]`, where to resume (after the last newline),
/// and the lines that could not be read (with their offsets); a bad line never stops the rest.
#[derive(Debug, Default)]
pub struct MapBatch {
    pub entries: Vec<MapEntry>,
    pub resume_at: usize,
    pub bad_lines: Vec<ParseError>,
}

fn hex(field: &str) -> Option<u64> {
    let digits = field
        .strip_prefix("0x")
        .or_else(|| field.strip_prefix("0X"))
        .unwrap_or(field);
    u64::from_str_radix(digits, 16).ok()
}

/// Parses the complete lines of `file[from..]`. A last line without a newline is left for the
/// next pass (it may still be being written).
pub fn parse(file: &[u8], from: usize) -> MapBatch {
    let mut batch = MapBatch {
        resume_at: from.min(file.len()),
        ..Default::default()
    };
    let mut pos = batch.resume_at;
    while let Some(nl) = file[pos..].iter().position(|&b| b == b'\n') {
        let line = &file[pos..pos + nl];
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches('\r');
        if !text.trim().is_empty() {
            let mut parts = text.trim_start().splitn(3, [' ', '\t']);
            match (
                parts.next().and_then(hex),
                parts.next().and_then(hex),
                parts.next(),
            ) {
                (Some(start), Some(size), Some(name)) => batch.entries.push(MapEntry {
                    start,
                    size,
                    name: name.trim().to_string(),
                    offset: pos,
                }),
                _ => batch.bad_lines.push(ParseError::new(
                    pos,
                    "a perf map line `START SIZE name` with hexadecimal START and SIZE",
                )),
            }
        }
        pos += nl + 1;
        batch.resume_at = pos;
    }
    batch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_producer_style() {
        let text = b"0x00007f0295400000 0x0000000000000180 Interpreter\n\
7F01A2B3C000 1A0 java/lang/String.hashCode()I_hot\n\
7fd3a4e00 2c Shapes.Circle:Area ()\n\
bad line\n\
55d0 10 LazyCompile:~main /app.js:1\npartial 1";
        let b = parse(text, 0);
        assert_eq!(b.entries.len(), 4);
        assert_eq!(b.entries[0].start, 0x7f0295400000);
        assert_eq!(b.entries[0].size, 0x180);
        assert_eq!(b.entries[1].name, "java/lang/String.hashCode()I_hot");
        assert_eq!(b.entries[2].name, "Shapes.Circle:Area ()");
        assert_eq!(b.entries[3].name, "LazyCompile:~main /app.js:1");
        assert_eq!(b.bad_lines.len(), 1);
        assert_eq!(&text[b.resume_at..], b"partial 1");
    }
}
