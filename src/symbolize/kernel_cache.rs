//! This kernel's own text symbols, kept between runs. Writing /proc/kallsyms out costs the
//! kernel ~40 ms of CPU each time (100 000+ lines formatted one by one), and every recording
//! reads it. The text symbols of the kernel image (`_stext` to `_etext`, and its init text to
//! `_einittext`, which the idle tasks' stacks still reach) are fixed by that image, identified
//! by its build-id (/sys/kernel/notes), up to the boot's KASLR offset: they are kept as offsets
//! from `_stext`, and `_stext`'s address is read from the first lines of /proc/kallsyms (one
//! page, which is all the kernel then formats). Module, BPF and trampoline symbols come and go
//! while the kernel runs and lie outside the image: never cached; an address outside
//! `[_stext, _einittext)` (`_etext` without init text) is looked up in /proc/kallsyms itself.
//!
//! The file (`kernel-text-BUILDID`, zstd with a checksum): a header line, lines
//! `OFFSET t NAME` (hexadecimal offsets, kallsyms syntax), and `end END_OFFSET COUNT`. It
//! lives in `$JPROF_CACHE_DIR`, else `/var/cache/jprof` for root, else the user's cache
//! directory; a directory that is a link, or that another user owns or can write, is not used.
//! A damaged or foreign file is not used (and is replaced by the next complete read).

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::ops::Range;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::foreign_file::{self, Owner};
use crate::format::procfs;

// 2: the range ends at `_einittext` (1 ended at `_etext`).
const HEADER: &str = "jprof kernel text symbols 2";

/// The most a cache file may hold compressed (the text of a large kernel is ~4 MB, ~1 MB
/// compressed).
const FILE_LIMIT: u64 = 64 << 20;

const WINDOW_LOG: u32 = 17;

/// Bytes decoded at a time: the text is never held whole.
const BLOCK: usize = 256 * 1024;

/// What names this kernel's cache file: its build-id and where `_stext` is in this boot.
#[derive(Clone, Debug)]
pub(super) struct Probe {
    build_id: String,
    /// `_stext`'s address in this boot.
    pub(super) base: u64,
    dir: PathBuf,
}

impl Probe {
    /// This machine's: `None` when the kernel has no build-id note, hides kallsyms addresses,
    /// or no safe cache directory exists.
    pub(super) fn this_machine() -> Option<Self> {
        Self::this_kernel_in(cache_dir()?)
    }

    /// This kernel's, with the cache in `dir`.
    pub(super) fn this_kernel_in(dir: PathBuf) -> Option<Self> {
        let notes = std::fs::read("/sys/kernel/notes").ok()?;
        let build_id = hex(&build_id_of_notes(&notes)?);
        let mut first = vec![0u8; 4096];
        let n = File::open("/proc/kallsyms").ok()?.read(&mut first).ok()?;
        let base = stext_of(&first[..n])?;
        usable_dir(&dir).ok()?;
        Some(Self {
            build_id,
            base,
            dir,
        })
    }

    #[cfg(test)]
    pub(super) fn in_dir(build_id: &str, base: u64, dir: &Path) -> Self {
        Self {
            build_id: build_id.to_string(),
            base,
            dir: dir.to_path_buf(),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join(format!("kernel-text-{}", self.build_id))
    }

    fn header(&self) -> String {
        format!("{HEADER} {}\n", self.build_id)
    }

    /// Hands this kernel's cached text symbols to `add` a block of whole lines at a time
    /// (addresses relative to `base`) until `add` says a line does not read; the image's text
    /// range in this boot when the file was whole and right. `None`: no file, or a damaged or
    /// foreign one (`add` may have been given part of it: what it made is to be dropped).
    pub(super) fn read(&self, mut add: impl FnMut(&[u8]) -> bool) -> Option<Range<u64>> {
        let file = foreign_file::ForeignFile::open(&self.path(), Owner::Uid(euid())).ok()?;
        if file.size().ok()? > FILE_LIMIT {
            return None;
        }
        let mut decoder = zstd::stream::read::Decoder::new(file.into_file()).ok()?;
        let header = self.header();
        let mut block: Vec<u8> = Vec::with_capacity(BLOCK);
        let mut chunk = vec![0u8; BLOCK];
        let (mut started, mut count) = (false, 0u64);
        loop {
            let n = decoder.read(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            block.extend_from_slice(&chunk[..n]);
            if !started {
                if block.len() < header.len() {
                    continue;
                }
                block.strip_prefix(header.as_bytes())?;
                block.drain(..header.len());
                started = true;
            }
            // Whole lines but the last one, which may be the trailer.
            let Some(last) = block.iter().rposition(|&b| b == b'\n') else {
                continue;
            };
            let Some(cut) = block[..last]
                .iter()
                .rposition(|&b| b == b'\n')
                .map(|i| i + 1)
            else {
                continue;
            };
            count += block[..cut].iter().filter(|&&b| b == b'\n').count() as u64;
            // Only this writer's lines are in the file: one that does not read is damage.
            if !add(&block[..cut]) {
                return None;
            }
            block.drain(..cut);
        }
        if !started {
            return None;
        }
        let (lines, end, total) = split_trailer(&block)?;
        count += lines.iter().filter(|&&b| b == b'\n').count() as u64;
        (add(lines) && count == total).then_some(self.base..self.base.checked_add(end)?)
    }

    /// A writer of the cache file from a whole /proc/kallsyms read (`None` when the file
    /// cannot be created).
    pub(super) fn writer(&self) -> Option<CacheWriter> {
        remove_abandoned(&self.dir);
        let tmp = self.dir.join(format!(
            "kernel-text-{}.new-{}",
            self.build_id,
            std::process::id()
        ));
        let created = foreign_file::create_new(&tmp, 0o600).ok()?;
        let mut encoder =
            zstd::stream::write::Encoder::new(BufWriter::new(created.file), 3).ok()?;
        encoder.include_checksum(true).ok()?;
        // A 128 KiB window: the reader's decoder holds a window's worth (at the end of
        // `record -a`, where memory peaks), 2 MiB at this level's default.
        encoder.window_log(WINDOW_LOG).ok()?;
        encoder.write_all(self.header().as_bytes()).ok()?;
        Some(CacheWriter {
            encoder: Some(encoder),
            tmp,
            dest: self.path(),
            base: self.base,
            end: None,
            count: 0,
        })
    }
}

/// Writes the image's text symbols of a /proc/kallsyms read as it goes; the file is renamed
/// into place only when the read was whole and `_etext` was among them.
pub(super) struct CacheWriter {
    encoder: Option<zstd::stream::write::Encoder<'static, BufWriter<File>>>,
    tmp: PathBuf,
    dest: PathBuf,
    base: u64,
    end: Option<u64>,
    count: u64,
}

impl CacheWriter {
    /// Takes in whole kallsyms lines; a damaged line or a failed write stops the file.
    pub(super) fn add(&mut self, text: &[u8]) {
        let Some(encoder) = &mut self.encoder else {
            return;
        };
        for entry in procfs::kallsyms_entries(text) {
            let Ok(e) = entry else {
                self.encoder = None;
                return;
            };
            if e.module.is_some() || !matches!(e.kind, 't' | 'T' | 'W' | 'w') || e.addr < self.base
            {
                continue;
            }
            let offset = e.addr - self.base;
            // The image's text ends at `_etext`, its init text (still on the stacks of the
            // idle tasks: `start_kernel`) at `_einittext`; nothing else lies in between.
            if matches!(e.name, "_etext" | "_einittext") {
                self.end = self.end.max(Some(offset));
            }
            if writeln!(encoder, "{offset:x} t {}", e.name).is_err() {
                self.encoder = None;
                return;
            }
            self.count += 1;
        }
    }

    /// Ends the file and puts it in place, or removes it.
    pub(super) fn finish(mut self) {
        let done = match (self.encoder.take(), self.end) {
            (Some(mut encoder), Some(end)) => {
                let trailer = writeln!(encoder, "end {end:x} {}", self.count);
                trailer.is_ok()
                    && encoder.finish().and_then(|mut w| w.flush()).is_ok()
                    && std::fs::rename(&self.tmp, &self.dest).is_ok()
            }
            _ => false,
        };
        if !done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl Drop for CacheWriter {
    fn drop(&mut self) {
        if self.encoder.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Removes the unfinished files of writers that are gone (a recorder that exited, or was
/// killed, while its kallsyms thread was still writing): `kernel-text-*.new-PID` whose PID is
/// not running. The directory is this user's alone (`usable_dir`).
fn remove_abandoned(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.starts_with("kernel-text-"))
            .and_then(|n| n.rsplit_once(".new-"))
            .and_then(|(_, pid)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let gone = pid > 0
            && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
                == Err(nix::errno::Errno::ESRCH);
        if gone {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The lines before the trailer `end END_OFFSET COUNT\n` (always the last line), and its two
/// numbers. No symbol line starts with `end `: `n` is not a hexadecimal digit.
fn split_trailer(body: &[u8]) -> Option<(&[u8], u64, u64)> {
    let body = body.strip_suffix(b"\n")?;
    let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let trailer = std::str::from_utf8(&body[start..]).ok()?;
    let mut fields = trailer.strip_prefix("end ")?.split(' ');
    let end = u64::from_str_radix(fields.next()?, 16).ok()?;
    let count = fields.next()?.parse().ok()?;
    fields
        .next()
        .is_none()
        .then_some((&body[..start], end, count))
}

/// The GNU build-id in an ELF note section (/sys/kernel/notes): `namesz`, `descsz`, `type`,
/// then the name and the descriptor, each padded to 4 bytes.
fn build_id_of_notes(notes: &[u8]) -> Option<Vec<u8>> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let pad = |n: usize| n.checked_add(3).map(|n| n & !3);
    let mut at = 0usize;
    while at.checked_add(12)? <= notes.len() {
        let word = |i: usize| u32::from_ne_bytes(notes[at + i..at + i + 4].try_into().unwrap());
        let (namesz, descsz, kind) = (word(0) as usize, word(4) as usize, word(8));
        let name_at = at + 12;
        let desc_at = name_at.checked_add(pad(namesz)?)?;
        let next = desc_at.checked_add(pad(descsz)?)?;
        let desc = notes.get(desc_at..desc_at.checked_add(descsz)?)?;
        if kind == NT_GNU_BUILD_ID && notes.get(name_at..name_at + namesz)? == b"GNU\0" {
            return (!desc.is_empty()).then(|| desc.to_vec());
        }
        at = next;
    }
    None
}

/// `_stext`'s address among the first whole lines of /proc/kallsyms; `None` when absent or
/// hidden (0).
fn stext_of(first: &[u8]) -> Option<u64> {
    let whole = &first[..first.iter().rposition(|&b| b == b'\n')? + 1];
    procfs::kallsyms_entries(whole)
        .map_while(Result::ok)
        .find(|e| e.name == "_stext" && e.module.is_none())
        .map(|e| e.addr)
        .filter(|&a| a != 0)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// `$JPROF_CACHE_DIR`, else `/var/cache/jprof` for root, else `$XDG_CACHE_HOME/jprof` or
/// `~/.cache/jprof`.
fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("JPROF_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(dir.into());
    }
    if euid() == 0 {
        return Some("/var/cache/jprof".into());
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| Path::new(d).is_absolute())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(base.join("jprof"))
}

/// Creates `dir` (0700) if missing; refuses a link, a non-directory, a directory of another
/// user's or one others can write (they could plant the names jprof would show).
pub(super) fn usable_dir(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        let _ = std::fs::DirBuilder::new().mode(0o700).create(dir);
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.file_type().is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    if meta.uid() != euid() {
        return Err(format!("{} belongs to uid {}", dir.display(), meta.uid()));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(format!("{} is writable by others", dir.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A note section: a `Linux` note, then the GNU build-id.
    fn notes(id: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        for (name, kind, desc) in [(&b"Linux\0"[..], 6u32, &b"abcd"[..]), (b"GNU\0", 3, id)] {
            v.extend((name.len() as u32).to_ne_bytes());
            v.extend((desc.len() as u32).to_ne_bytes());
            v.extend(kind.to_ne_bytes());
            v.extend(name);
            v.resize(v.len().next_multiple_of(4), 0);
            v.extend(desc);
            v.resize(v.len().next_multiple_of(4), 0);
        }
        v
    }

    #[test]
    fn the_build_id_is_read_from_the_notes_and_damage_gives_none() {
        let id = [0x4a, 0x5a, 0x9b, 0x0a, 0xff, 0x01, 0x02];
        let good = notes(&id);
        assert_eq!(build_id_of_notes(&good).as_deref(), Some(&id[..]));
        for cut in 0..good.len() - 4 {
            // Cut inside the GNU note: nothing (never a shorter id).
            assert!(build_id_of_notes(&good[..cut]).is_none(), "cut at {cut}");
        }
        let mut huge = good.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(build_id_of_notes(&huge).is_none());
        if let Ok(this) = std::fs::read("/sys/kernel/notes") {
            assert!(build_id_of_notes(&this).is_some_and(|id| id.len() >= 16));
        }
    }

    #[test]
    fn stext_is_found_in_the_first_lines_and_hidden_means_none() {
        let text =
            b"ffffffff81000000 T srso\nffffffff81000000 T _stext\nffffffff81000010 t x [m]\nffff";
        assert_eq!(stext_of(text), Some(0xffffffff81000000));
        assert_eq!(stext_of(b"0000000000000000 T _stext\n"), None);
        assert_eq!(stext_of(b"ffffffff81000000 T _text\n"), None);
    }

    #[test]
    fn the_trailer_is_the_last_line_only() {
        assert_eq!(
            split_trailer(b"0 t a\n10 t b\nend 20 2\n"),
            Some((&b"0 t a\n10 t b\n"[..], 0x20, 2))
        );
        assert_eq!(split_trailer(b"end 20 0\n"), Some((&b""[..], 0x20, 0)));
        assert_eq!(split_trailer(b"0 t a\nend 20 2"), None);
        assert_eq!(split_trailer(b"0 t a\nend 20 2 x\n"), None);
        assert_eq!(split_trailer(b"0 t a\n"), None);
    }

    #[test]
    fn a_linked_foreign_or_open_directory_is_refused() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        let fresh = tmp.path().join("fresh");
        assert_eq!(usable_dir(&fresh), Ok(()));
        assert_eq!(
            std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let link = tmp.path().join("link");
        symlink(&fresh, &link).unwrap();
        assert!(usable_dir(&link).is_err());
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(usable_dir(&open)
            .unwrap_err()
            .contains("writable by others"));
        if euid() == 0 {
            let theirs = tmp.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
            assert!(usable_dir(&theirs).unwrap_err().contains("uid 65534"));
        }
        let file = tmp.path().join("file");
        std::fs::write(&file, b"").unwrap();
        assert!(usable_dir(&file).is_err());
    }

    /// Writes `text` (kallsyms lines) through a writer for `probe`; whether the file was put in
    /// place.
    fn write(probe: &Probe, text: &[u8]) -> bool {
        let mut w = probe.writer().unwrap();
        w.add(text);
        w.finish();
        probe.path().exists()
    }

    /// The lines the reader hands over, and the range.
    fn read(probe: &Probe) -> Option<(Vec<u8>, Range<u64>)> {
        let mut lines = Vec::new();
        let range = probe.read(|text| {
            lines.extend_from_slice(text);
            true
        })?;
        Some((lines, range))
    }

    const TEXT: &[u8] = b"ffffffff80ff0000 T before\n\
        ffffffff81000000 T srso\nffffffff81000000 T _stext\nffffffff81000040 t b\n\
        ffffffff81000080 d data\nffffffffa0000000 t modfn [mod]\nffffffff82000000 T _etext\n\
        ffffffff82000100 T start_kernel\nffffffff82000200 T _einittext\n";

    #[test]
    fn the_image_symbols_are_kept_relative_to_stext_and_rebased() {
        let tmp = tempfile::tempdir().unwrap();
        let probe = Probe::in_dir("abcd", 0xffffffff81000000, tmp.path());
        assert!(write(&probe, TEXT));
        let (lines, range) = read(&probe).unwrap();
        // Text symbols from _stext on, no module's, no data.
        assert_eq!(
            String::from_utf8(lines).unwrap(),
            "0 t srso\n0 t _stext\n40 t b\n1000000 t _etext\n1000100 t start_kernel\n\
             1000200 t _einittext\n"
        );
        // Text and init text (the idle tasks' stacks start in `start_kernel`).
        assert_eq!(range, 0xffffffff81000000..0xffffffff82000200);
        // Another boot of the same kernel: the same offsets from its _stext.
        let moved = Probe::in_dir("abcd", 0xffffffff9a000000, tmp.path());
        assert_eq!(
            read(&moved).unwrap().1,
            0xffffffff9a000000..0xffffffff9b000200
        );
        // Another kernel's file is not this one's.
        assert!(read(&Probe::in_dir("abce", 0xffffffff81000000, tmp.path())).is_none());
        let mut other = std::fs::read(probe.path()).unwrap();
        std::fs::write(tmp.path().join("kernel-text-abce"), &other).unwrap();
        assert!(read(&Probe::in_dir("abce", 0xffffffff81000000, tmp.path())).is_none());
        // Damage anywhere in the file, or a cut, is never a table.
        let whole = other.clone();
        for at in (0..whole.len()).step_by(7) {
            other.clone_from(&whole);
            other[at] ^= 0x20;
            std::fs::write(probe.path(), &other).unwrap();
            assert!(read(&probe).is_none(), "byte {at} changed");
            std::fs::write(probe.path(), &whole[..at]).unwrap();
            assert!(read(&probe).is_none(), "cut at {at}");
        }
    }

    #[test]
    fn unfinished_files_of_writers_that_are_gone_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let probe = Probe::in_dir("abcd", 0xffffffff81000000, tmp.path());
        // A pid that is not running: a child that was waited for.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let abandoned = tmp.path().join(format!("kernel-text-abcd.new-{gone}"));
        // Pid 1 always runs (this process's own name is the one the writer takes).
        let running = tmp.path().join("kernel-text-abce.new-1");
        let other = tmp.path().join(format!("something.new-{gone}"));
        for p in [&abandoned, &running, &other] {
            std::fs::write(p, b"x").unwrap();
        }
        assert!(write(&probe, TEXT));
        assert!(!abandoned.exists());
        assert!(running.exists(), "pid 1 runs");
        assert!(other.exists(), "not a cache file");
    }

    #[test]
    fn no_file_without_etext_and_never_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let probe = Probe::in_dir("abcd", 0xffffffff81000000, tmp.path());
        assert!(!write(
            &probe,
            b"ffffffff81000000 T _stext\nffffffff81000040 t b\n"
        ));
        assert_eq!(
            std::fs::read_dir(tmp.path()).unwrap().count(),
            0,
            "nothing left"
        );
        // A link planted where the file goes is replaced, never followed.
        let target = tmp.path().join("target");
        std::fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, probe.path()).unwrap();
        assert!(read(&probe).is_none());
        assert!(write(&probe, TEXT));
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(read(&probe).is_some());
        assert!(!std::fs::symlink_metadata(probe.path())
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
