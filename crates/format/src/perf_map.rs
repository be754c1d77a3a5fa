//! `/tmp/perf-<pid>.map` files: one `START SIZE name` line per JIT code range, hex numbers with or
//! without `0x`, any case (HotSpot `0x%016lx`, OpenJ9 `%p %lX`, Mono `%llx %x`, V8 plain hex).
//! Parsed incrementally like jitdump: the runtime appends while it runs. OpenJ9's own map
//! (`-Xjit:perfTool`) names code `pkg/Class.method(Sig)Ret_<hotness>[_fsd]`, with a separate line
//! for a body's cold section; the hotness is split off as the entry's tier.

use super::ParseError;

/// Where a runtime writes process `pid`'s perf map (the pid as the process itself sees it).
pub fn path_of(pid: u32) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/tmp/perf-{pid}.map"))
}

/// One code range of a perf map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapEntry {
    /// Start address of the code.
    pub start: u64,
    /// Length of the code in bytes.
    pub size: u64,
    /// Name of the code, tier suffix removed.
    pub name: String,
    /// Byte offset of the line in the file.
    pub offset: usize,
    /// The JIT tier the line names (OpenJ9's hotness), with `name` then without it.
    pub tier: Option<String>,
}

/// OpenJ9's hotness names (OMR's getHotnessName), in both spellings seen across versions.
const OPENJ9_HOTNESS: [&str; 12] = [
    "no-opt",
    "noOpt",
    "cold",
    "warm",
    "hot",
    "very-hot",
    "veryHot",
    "scorching",
    "reduced-warm",
    "reducedWarm",
    "unknown",
    "unknownHotness",
];

/// `pkg/Class.method(Sig)Ret_hotness[_fsd]` (OpenJ9 perfTool) → (`pkg/Class.method(Sig)Ret`,
/// tier `hotness` or `hotness, FSD`). Other names are not OpenJ9's: `None`.
pub fn openj9_name(name: &str) -> Option<(&str, String)> {
    let (rest, fsd) = match name.strip_suffix("_fsd") {
        Some(rest) => (rest, true),
        None => (name, false),
    };
    let (method, hotness) = rest.rsplit_once('_')?;
    let is_java_method = method.contains('(') && method.contains(')') && !method.contains(' ');
    if !is_java_method || !OPENJ9_HOTNESS.contains(&hotness) {
        return None;
    }
    let tier = if fsd {
        format!("{hotness}, FSD")
    } else {
        hotness.to_string()
    };
    Some((method, tier))
}

/// Entries of the complete lines in `file[from..]`, where to resume (after the last newline),
/// and the lines that could not be read (with their offsets); a bad line never stops the rest.
#[derive(Debug, Default)]
pub struct MapBatch {
    /// The entries read, in file order.
    pub entries: Vec<MapEntry>,
    /// Byte offset just past the last complete line: where the next pass starts.
    pub resume_at: usize,
    /// One error per line that is not `START SIZE name`, at the line's offset.
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
                (Some(start), Some(size), Some(name)) => {
                    let name = name.trim();
                    let (name, tier) = match openj9_name(name) {
                        Some((method, tier)) => (method, Some(tier)),
                        None => (name, None),
                    };
                    batch.entries.push(MapEntry {
                        start,
                        size,
                        name: name.to_string(),
                        offset: pos,
                        tier,
                    })
                }
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
        assert_eq!(b.entries[1].name, "java/lang/String.hashCode()I");
        assert_eq!(b.entries[1].tier.as_deref(), Some("hot"));
        assert_eq!(b.entries[0].tier, None);
        assert_eq!(b.entries[2].name, "Shapes.Circle:Area ()");
        assert_eq!(b.entries[3].name, "LazyCompile:~main /app.js:1");
        assert_eq!(b.bad_lines.len(), 1);
        assert_eq!(&text[b.resume_at..], b"partial 1");
    }

    #[test]
    fn openj9_perf_tool_lines() {
        // `%p %lX %s_%s%s`: warm body, its cold section, an FSD body, and a helper.
        let text = b"0x7f3c2a400100 1A4 demo/Main.loop(I)J_scorching
0x7f3c2a4f0000 3C demo/Main.loop(I)J_scorching
0x7f3c2a400400 80 demo/Util.pad(Ljava/lang/String;I)Ljava/lang/String;_very-hot_fsd
0x7f3c2a400500 20 my_helper_cold
";
        let b = parse(text, 0);
        let shown: Vec<(u64, u64, &str, Option<&str>)> = b
            .entries
            .iter()
            .map(|e| (e.start, e.size, e.name.as_str(), e.tier.as_deref()))
            .collect();
        assert_eq!(
            shown,
            [
                (
                    0x7f3c2a400100,
                    0x1a4,
                    "demo/Main.loop(I)J",
                    Some("scorching")
                ),
                (
                    0x7f3c2a4f0000,
                    0x3c,
                    "demo/Main.loop(I)J",
                    Some("scorching")
                ),
                (
                    0x7f3c2a400400,
                    0x80,
                    "demo/Util.pad(Ljava/lang/String;I)Ljava/lang/String;",
                    Some("very-hot, FSD")
                ),
                (0x7f3c2a400500, 0x20, "my_helper_cold", None),
            ]
        );
        assert_eq!(
            openj9_name("a/B.c()V_noOpt").map(|n| n.1),
            Some("noOpt".into())
        );
        assert_eq!(openj9_name("JS:*f app.js:1_hot"), None);
    }
}
