//! Pure parsers for the procfs text files symbolization reads: `/proc/kallsyms` (kernel
//! symbols) and `/proc/PID/maps` (a process's mappings, used to find the vdso image).

use super::ParseError;

/// One `/proc/kallsyms` line: `ffffffff81000000 T _stext` or `... t name\t[module]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KallsymsEntry<'a> {
    /// Symbol address (0 when `kptr_restrict` hides addresses).
    pub addr: u64,
    /// Symbol type letter (`t`/`T` text, `W` weak, `d`/`D` data, ...).
    pub kind: char,
    /// Symbol name.
    pub name: &'a str,
    /// Module name without brackets, for symbols of loadable modules.
    pub module: Option<&'a str>,
}

/// Parses all of `/proc/kallsyms`. Errors name the byte offset of the bad line.
pub fn parse_kallsyms(text: &[u8]) -> Result<Vec<KallsymsEntry<'_>>, ParseError> {
    kallsyms_entries(text).collect()
}

/// The entries of `/proc/kallsyms` one at a time (a table of 100 000+ symbols need not be
/// held twice); an error names the byte offset of the bad line.
pub fn kallsyms_entries(
    text: &[u8],
) -> impl Iterator<Item = Result<KallsymsEntry<'_>, ParseError>> + '_ {
    lines(text)
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(offset, line)| {
            let bad = || ParseError::new(offset, "a kallsyms line \"ADDRESS TYPE NAME [MODULE]\"");
            let mut fields = line.split_ascii_whitespace();
            let addr = fields.next().and_then(|a| u64::from_str_radix(a, 16).ok());
            let kind = fields.next().and_then(|k| {
                let mut chars = k.chars();
                chars.next().filter(|_| chars.next().is_none())
            });
            let name = fields.next();
            let (Some(addr), Some(kind), Some(name)) = (addr, kind, name) else {
                return Err(bad());
            };
            let module = fields
                .next()
                .map(|m| m.trim_start_matches('[').trim_end_matches(']'));
            Ok(KallsymsEntry {
                addr,
                kind,
                name,
                module,
            })
        })
}

/// One `/proc/PID/maps` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsEntry<'a> {
    /// First address of the mapping.
    pub start: u64,
    /// Address just past the mapping.
    pub end: u64,
    /// `rwxp`-style permissions.
    pub perms: &'a str,
    /// File offset in bytes mapped at `start`.
    pub offset: u64,
    /// Path or pseudo name (`[vdso]`, `[heap]`); empty for anonymous memory.
    pub path: &'a str,
}

/// Parses all of `/proc/PID/maps`. Errors name the byte offset of the bad line.
pub fn parse_maps(text: &[u8]) -> Result<Vec<MapsEntry<'_>>, ParseError> {
    let mut out = Vec::new();
    for (offset, line) in lines(text) {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || {
            ParseError::new(
                offset,
                "a maps line \"START-END PERMS OFFSET DEV INODE [PATH]\"",
            )
        };
        let mut rest = line;
        let mut field = || {
            let trimmed = rest.trim_start_matches(' ');
            let end = trimmed.find(' ').unwrap_or(trimmed.len());
            let (f, r) = trimmed.split_at(end);
            rest = r;
            f
        };
        let range = field();
        let perms = field();
        let file_offset = field();
        let _dev = field();
        let _inode = field();
        let path = rest.trim_start_matches(' ');
        let (start, end) = range.split_once('-').ok_or_else(bad)?;
        let parse = |s: &str| u64::from_str_radix(s, 16).map_err(|_| bad());
        out.push(MapsEntry {
            start: parse(start)?,
            end: parse(end)?,
            perms,
            offset: parse(file_offset)?,
            path,
        });
    }
    Ok(out)
}

/// Lines with their byte offsets; a line that is not UTF-8 is read lossily as empty so a
/// single odd symbol name cannot hide the rest of the file.
fn lines(text: &[u8]) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split(|&b| b == b'\n').map(move |line| {
        let here = offset;
        offset += line.len() + 1;
        (here, std::str::from_utf8(line).unwrap_or(""))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    #[test]
    fn kallsyms_lines() {
        let text = b"ffffffff81000000 T _stext\nffffffffc0000000 t foo\t[ext4]\n0000000000000000 A fixed_percpu_data\n";
        let e = parse_kallsyms(text).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(
            e[1],
            KallsymsEntry {
                addr: 0xffffffffc0000000,
                kind: 't',
                name: "foo",
                module: Some("ext4")
            }
        );
        let err = parse_kallsyms(b"ffffffff81000000 T _stext\nzz T x\n").unwrap_err();
        assert_eq!(err.offset, 26);
    }

    #[test]
    fn maps_lines() {
        let text = b"55d0c8a00000-55d0c8a01000 r-xp 00001000 08:01 1234                       /usr/bin/cat\n7ffd5a1f0000-7ffd5a1f2000 r-xp 00000000 00:00 0                          [vdso]\n7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n";
        let m = parse_maps(text).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].path, "/usr/bin/cat");
        assert_eq!(m[0].offset, 0x1000);
        assert_eq!(m[1].path, "[vdso]");
        assert_eq!((m[1].start, m[1].end), (0x7ffd5a1f0000, 0x7ffd5a1f2000));
        assert_eq!(m[2].path, "");
        assert!(parse_maps(b"nonsense\n").is_err());
    }

    /// An error names the start of the line it is about.
    fn at_a_line_start(text: &[u8], e: &ParseError) -> bool {
        e.offset < text.len().max(1) && (e.offset == 0 || text[e.offset - 1] == b'\n')
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Text made of what both files are made of: never a panic, and an error points at the
        /// start of a line.
        #[test]
        fn any_text_is_read_or_refused_at_a_line_start(
            text in vec(prop::sample::select(b"0123456789abcdef- \n\tTt[]/".to_vec()), 0..400)
        ) {
            if let Err(e) = parse_kallsyms(&text) {
                prop_assert!(at_a_line_start(&text, &e), "{e:?}");
            }
            if let Err(e) = parse_maps(&text) {
                prop_assert!(at_a_line_start(&text, &e), "{e:?}");
            }
        }

        /// Lines written the way the kernel writes /proc/PID/maps read back as they were.
        #[test]
        fn maps_lines_read_back(
            lines in vec(
                (
                    any::<u64>(),
                    any::<u64>(),
                    "[r-][w-][x-][ps]",
                    any::<u64>(),
                    any::<u32>(),
                    prop_oneof![Just(String::new()), "\\[[a-z]{1,8}\\]", "/[^\\n]{0,40}"],
                ),
                0..8,
            )
        ) {
            let mut text = String::new();
            for (start, end, perms, offset, inode, path) in &lines {
                text += &format!("{start:x}-{end:x} {perms} {offset:08x} 08:01 {inode:<26} {path}\n");
            }
            let read = parse_maps(text.as_bytes()).unwrap();
            let read: Vec<_> = read.iter().map(|m| (m.start, m.end, m.perms, m.offset, m.path)).collect();
            let written: Vec<_> = lines
                .iter()
                .map(|(start, end, perms, offset, _, path)| (*start, *end, perms.as_str(), *offset, path.as_str()))
                .collect();
            prop_assert_eq!(read, written);
        }
    }
}
