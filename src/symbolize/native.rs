//! Native code symbols: one ELF binary, loaded lazily and cached per path. Reads the symbol
//! tables (.symtab + .dynsym) with `object`, DWARF functions, lines and inline frames with
//! `addr2line`, and keeps the unwind sections (.eh_frame, .eh_frame_hdr, .text) for framehop.
//! Also demangles (C++ via cpp_demangle, Rust via rustc-demangle) and reads this machine's vdso.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use gimli::{EndianReader, RunTimeEndian};
use object::read::elf::{ElfFile, FileHeader, SectionHeader, Sym};
use object::{Object, ObjectSection, ObjectSegment};
use thiserror::Error;

use crate::foreign_file::FileBytes;
use crate::format::procfs;
use crate::sys::shared_bytes::SharedBytes;

use super::build_id::{self, hex};
use super::symbol_table::{StringTable, Symbol, SymbolTable};

/// Why a binary could not be loaded.
#[derive(Debug, Error)]
pub(crate) enum LoadError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The foreign-file rules refused it (a FIFO, a link, a file too large to read).
    #[error("{0}")]
    Refused(#[from] crate::foreign_file::Refusal),
    #[error("not a readable ELF file ({0})")]
    Object(#[from] object::Error),
}

/// One frame of native code, innermost first in lists. Names are demangled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeFrame {
    pub(crate) name: String,
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
}

/// A loaded-segment's file range and its address in the ELF (PT_LOAD p_offset → p_vaddr).
#[derive(Clone, Copy, Debug)]
struct Segment {
    file_offset: u64,
    file_size: u64,
    address: u64,
    /// PF_X: the segment a text mapping (the only kind recordings have) comes from.
    executable: bool,
}

/// The sections framehop needs, as shared bytes and their addresses in the ELF.
#[derive(Clone, Debug, Default)]
pub struct UnwindSections {
    pub(crate) text: Option<(Range<u64>, SharedBytes)>,
    pub(crate) eh_frame: Option<(Range<u64>, SharedBytes)>,
    pub(crate) eh_frame_hdr: Option<(Range<u64>, SharedBytes)>,
    pub(crate) debug_frame: Option<SharedBytes>,
    pub(crate) got: Option<Range<u64>>,
}

type Dwarf = addr2line::Context<EndianReader<RunTimeEndian, SharedBytes>>;
/// A binary's DWARF sections, compressed ones inflated, before any unit is parsed.
type Sections = gimli::Dwarf<EndianReader<RunTimeEndian, SharedBytes>>;

/// What [`Binary::frames_of`] reads of a binary's DWARF before it knows which units it needs:
/// the sections, and every unit with what it covers (None: they could not be told apart).
struct Ahead {
    sections: Sections,
    units: Option<super::dwarf_units::Units<EndianReader<RunTimeEndian, SharedBytes>>>,
}

/// Reads the [`Ahead`] of the DWARF in `image`; None when it has none that loads.
fn read_ahead(image: &Image) -> Option<Ahead> {
    let sections = load_sections(image)?;
    // Compressed sections were read once, to inflate them (libc's debug file: 3 MB of pages).
    image.release_pages();
    let units = super::dwarf_units::units(&sections).ok();
    // Telling the units apart read every unit's first entry and abbreviations: with DWARF
    // stored uncompressed (`libpython3.11`'s), pages all over the file, megabytes.
    image.release_pages();
    Some(Ahead { sections, units })
}

/// A binary's DWARF read ahead of [`Binary::frames_of`] ([`DwarfAhead`]).
#[derive(Default)]
enum Prepared {
    #[default]
    NotYet,
    /// Read (None: the binary has none that load).
    Ready(Option<Box<Ahead>>),
    /// `frames_of` took them, or read them itself: not read ahead any more.
    Taken,
}

/// How many binaries of this thread hold their DWARF ([`held::DWARF`]) or their symbol table
/// ([`held::SYMBOLS`]) now, and the most that ever did at once (the end of `record` reads one
/// binary's DWARF at a time, and `record -a`'s one symbol table at a time: `lookup::tests`).
#[cfg(test)]
pub(crate) mod held {
    use std::cell::Cell;
    use std::thread::LocalKey;

    /// Held now, and the most held at once.
    pub(crate) struct Count {
        now: Cell<usize>,
        most: Cell<usize>,
    }

    thread_local! {
        pub(crate) static DWARF: Count = const { Count { now: Cell::new(0), most: Cell::new(0) } };
        pub(crate) static SYMBOLS: Count = const { Count { now: Cell::new(0), most: Cell::new(0) } };
    }

    pub(super) fn taken(count: &'static LocalKey<Count>) {
        count.with(|c| {
            c.now.set(c.now.get() + 1);
            c.most.set(c.most.get().max(c.now.get()));
        });
    }

    pub(super) fn freed(count: &'static LocalKey<Count>) {
        count.with(|c| c.now.set(c.now.get().saturating_sub(1)));
    }

    /// (held now, the most held at once).
    pub(crate) fn get(count: &'static LocalKey<Count>) -> (usize, usize) {
        count.with(|c| (c.now.get(), c.most.get()))
    }
}

#[cfg(test)]
impl Drop for Binary {
    fn drop(&mut self) {
        if self.dwarf.get().is_some_and(Option::is_some) {
            held::freed(&held::DWARF);
        }
    }
}

#[cfg(test)]
impl Drop for Symbols {
    fn drop(&mut self) {
        held::freed(&held::SYMBOLS);
    }
}

/// A binary's bytes: from its file (mapped when safe, since most of a large binary is never
/// read; read otherwise: see `FileBytes`), or owned (the vdso, copied from memory). Sections
/// handed to the unwinder and the DWARF reader are ranges of it, not copies.
type Image = SharedBytes;

fn image_of(bytes: FileBytes) -> Image {
    match bytes {
        FileBytes::Mapped(m) => SharedBytes::mapped(m),
        FileBytes::Read(v) => SharedBytes::owned(v),
    }
}

/// A section's bytes: a range of `image` when stored as they are, else decompressed.
fn section_bytes(image: &Image, data: Cow<'_, [u8]>) -> SharedBytes {
    match data {
        Cow::Borrowed(b) => image
            .offset_of(b)
            .and_then(|at| image.slice(at..at + b.len()))
            .unwrap_or_else(|| SharedBytes::owned(b.to_vec())),
        Cow::Owned(v) => SharedBytes::owned(v),
    }
}

/// Lets the pages of `bytes`, a part of `image`, go (see `SharedBytes::release_pages`).
fn release_pages_of(image: &Image, bytes: &[u8]) {
    if let Some(part) = image
        .offset_of(bytes)
        .and_then(|at| image.slice(at..at + bytes.len()))
    {
        part.release_pages();
    }
}

/// A section's bytes, decompressed when compressed. A hostile binary's compression header
/// (`ch_size`) is believed only up to [`MAX_INFLATION`](crate::recording::MAX_INFLATION)
/// bytes for each compressed byte, and zstd data is decompressed into exactly that size
/// (`object`'s own zstd path grows its buffer for as long as the data goes on), so a section
/// cannot make jprof allocate without bound.
fn uncompressed<'d>(section: &impl ObjectSection<'d>) -> Option<Cow<'d, [u8]>> {
    let compressed = section.compressed_data().ok()?;
    if compressed.format == object::CompressionFormat::None {
        return Some(Cow::Borrowed(compressed.data));
    }
    inflate_section(compressed)
}

fn inflate_section(compressed: object::CompressedData<'_>) -> Option<Cow<'_, [u8]>> {
    let size = inflated_size(&compressed)?;
    match compressed.format {
        object::CompressionFormat::Zstandard => {
            let out = zstd::bulk::decompress(compressed.data, size).ok()?;
            (out.len() == size).then_some(Cow::Owned(out))
        }
        // zlib decompresses into the size declared, no further.
        _ => compressed.decompress().ok(),
    }
}

/// The size a compressed section declares, when it is believable (see [`uncompressed`]).
fn inflated_size(compressed: &object::CompressedData<'_>) -> Option<usize> {
    let size = usize::try_from(compressed.uncompressed_size).ok()?;
    (size
        <= compressed
            .data
            .len()
            .saturating_mul(crate::recording::MAX_INFLATION))
    .then_some(size)
}

/// [`uncompressed`] for a section of `image`, whose pages of compressed bytes are let go of as
/// they are inflated (zlib, a piece at a time), else once it is inflated: they are not held
/// beside the inflated bytes (libc6-dbg's .debug_info: 2.3 MB inflated into 5.8).
fn uncompressed_letting_go<'d>(
    section: &impl ObjectSection<'d>,
    image: &Image,
) -> Option<Cow<'d, [u8]>> {
    let compressed = section.compressed_data().ok()?;
    match compressed.format {
        object::CompressionFormat::None => Some(Cow::Borrowed(compressed.data)),
        object::CompressionFormat::Zlib => {
            let size = inflated_size(&compressed)?;
            let inflated = inflate_zlib(compressed.data, size, |read| {
                release_pages_of(image, read);
            });
            // Whatever reading the pieces mapped around them as well.
            release_pages_of(image, compressed.data);
            inflated.map(Cow::Owned)
        }
        _ => {
            let inflated = inflate_section(compressed)?;
            release_pages_of(image, compressed.data);
            Some(inflated)
        }
    }
}

/// Compressed bytes inflated at a time by [`inflate_zlib`].
const INFLATE_PIECE: usize = 256 * 1024;

/// A zlib stream inflated into exactly `size` bytes (None when it is damaged or holds fewer),
/// as `object` inflates it, but [`INFLATE_PIECE`] bytes at a time: `read` is handed each part
/// of `data` once it is inflated.
fn inflate_zlib(data: &[u8], size: usize, mut read: impl FnMut(&[u8])) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    out.try_reserve_exact(size).ok()?;
    let mut inflater = flate2::Decompress::new(true);
    let mut at = 0usize;
    loop {
        let end = at.saturating_add(INFLATE_PIECE).min(data.len());
        let flush = if end == data.len() {
            flate2::FlushDecompress::Finish
        } else {
            flate2::FlushDecompress::None
        };
        let (total_in, written) = (inflater.total_in(), out.len());
        let status = inflater
            .decompress_vec(&data[at..end], &mut out, flush)
            .ok()?;
        let taken = usize::try_from(inflater.total_in() - total_in).ok()?;
        read(&data[at..at + taken]);
        at += taken;
        let stuck = taken == 0 && out.len() == written;
        if status == flate2::Status::StreamEnd || out.len() == size || stuck {
            break;
        }
    }
    (out.len() == size).then_some(out)
}

/// A binary's image and where its DWARF sections read ahead go ([`Binary::dwarf_ahead`]):
/// sent to another thread, as the binary itself, with its parsed DWARF, is not shared.
pub(crate) struct DwarfAhead {
    image: Image,
    prepared: Arc<Mutex<Prepared>>,
}

impl DwarfAhead {
    /// Reads the sections (inflating the compressed ones: libc's debug file, 8 MB) and tells
    /// the units apart, unless `frames_of` got to them first. For the end of `record`, on another core while the walk
    /// over the samples runs.
    pub(crate) fn read(self) {
        let mut prepared = self
            .prepared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if matches!(*prepared, Prepared::NotYet) {
            *prepared = Prepared::Ready(read_ahead(&self.image).map(Box::new));
        }
    }
}

/// Names read by string table and offset in it.
type NamesRead = rustc_hash::FxHashMap<(u8, u32), Box<[u8]>>;

/// A binary's function symbols (with its separate debug file's) and the string tables their
/// names are in.
struct Symbols {
    table: SymbolTable,
    strings: Vec<StringTable>,
}

/// One ELF file's symbols, DWARF and unwind sections, each read on first use: many binaries
/// are only named (no unwinding) and some only unwound, and the end of `record -a` reads the
/// symbol tables after its walk one binary at a time (`Symbolizer::name_symbols_later`), so
/// the tables of every binary sampled (`node`'s 150 000 symbols, `libjvm`'s 48 000) are not
/// all held at once.
pub struct Binary {
    pub(crate) build_id: Option<Vec<u8>>,
    segments: Vec<Segment>,
    symbols: OnceLock<Symbols>,
    image: Image,
    /// The separate debug file, for symbol names (see [`Binary::parse`]).
    debug_image: Option<Image>,
    /// Whether the separate debug file's DWARF is used.
    debug_dwarf: bool,
    dwarf: OnceLock<Option<Dwarf>>,
    /// The DWARF sections read ahead, on another thread, for [`Binary::frames_of`]; locked
    /// while they are read, so `frames_of` waits for them rather than reading them again.
    prepared: Arc<Mutex<Prepared>>,
    /// The size of the .debug_info section the DWARF is read from (0: none).
    dwarf_size: OnceLock<u64>,
    unwind: OnceLock<UnwindSections>,
    /// Demangled names by mangled name: the addresses hit in one function (and the functions
    /// inlined in many places) share them, and demangling C++ costs more than the lookup.
    demangled: Mutex<HashMap<Box<str>, String>>,
    /// The names read from the file apart from its mapping (`name_in`), by string table and
    /// offset: a function hit at many addresses, and its aliases, are read once.
    names_read: Mutex<NamesRead>,
}

impl Binary {
    /// Opens an ELF file a process or a recording names, by the foreign-file rules (never a
    /// FIFO or device, no link into the host from a container's root); `debug_files` as for
    /// [`Binary::parse`].
    pub(crate) fn open(path: &Path, debug_files: bool) -> Result<Self, LoadError> {
        let bytes = crate::foreign_file::binary_bytes(path)?;
        Self::from_image(image_of(bytes), debug_files)
    }

    /// Parses an ELF image. When it has no DWARF but a build id, the separate debug file
    /// `/usr/lib/debug/.build-id/xx/yyyy.debug` (Debian's -dbg packages) is used if present:
    /// its symbol table always, its DWARF (lines and inlined frames) only with `debug_files`,
    /// as decompressing it costs more than the rest of a report.
    pub(crate) fn parse(bytes: &[u8], debug_files: bool) -> Result<Self, LoadError> {
        Self::from_image(SharedBytes::owned(bytes.to_vec()), debug_files)
    }

    fn from_image(image: Image, debug_files: bool) -> Result<Self, LoadError> {
        let obj = object::File::parse(&*image)?;
        let build_id = obj.build_id().ok().flatten().map(<[u8]>::to_vec);
        let segments = obj
            .segments()
            .map(|s| {
                let (file_offset, file_size) = s.file_range();
                Segment {
                    file_offset,
                    file_size,
                    address: s.address(),
                    executable: matches!(
                        s.flags(),
                        object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0
                    ),
                }
            })
            .collect();
        let mut debug_image = None;
        if obj.section_by_name(".debug_info").is_none() {
            if let Some(debug) = build_id.as_deref().and_then(open_debug_file) {
                // The file at the build id's path must be that build.
                let same = object::File::parse(&*debug)
                    .is_ok_and(|dobj| dobj.build_id().ok().flatten() == build_id.as_deref());
                if same {
                    debug.release_pages();
                    debug_image = Some(debug);
                }
            }
        }
        drop(obj);
        let debug_dwarf = debug_files && debug_image.is_some();
        image.release_pages();
        Ok(Self {
            build_id,
            segments,
            symbols: OnceLock::new(),
            image,
            debug_image,
            debug_dwarf,
            dwarf: OnceLock::new(),
            prepared: Arc::default(),
            dwarf_size: OnceLock::new(),
            unwind: OnceLock::new(),
            demangled: Mutex::default(),
            names_read: Mutex::default(),
        })
    }

    /// The sections framehop needs, read on first use.
    pub fn unwind(&self) -> &UnwindSections {
        self.unwind.get_or_init(|| {
            let Ok(obj) = object::File::parse(&*self.image) else {
                return UnwindSections::default();
            };
            // An empty section counts as absent: Mono's AOT images have an empty .eh_frame
            // and their CFI in .debug_frame, which framehop reads only without .eh_frame.
            let section = |name: &str| {
                let s = obj.section_by_name(name)?;
                let data = uncompressed(&s)?;
                (!data.is_empty()).then(|| {
                    (
                        s.address()..s.address() + s.size(),
                        section_bytes(&self.image, data),
                    )
                })
            };
            UnwindSections {
                text: section(".text"),
                eh_frame: section(".eh_frame"),
                eh_frame_hdr: section(".eh_frame_hdr"),
                debug_frame: section(".debug_frame").map(|s| s.1),
                got: obj
                    .section_by_name(".got")
                    .map(|s| s.address()..s.address() + s.size()),
            }
        })
    }

    /// The image the DWARF is read from: the separate debug file's when it is used.
    fn dwarf_image(&self) -> &Image {
        match &self.debug_image {
            Some(debug) if self.debug_dwarf => debug,
            _ => &self.image,
        }
    }

    /// The size of the .debug_info section [`Binary::frames`] reads (0 when there is none, and
    /// the frames come from the symbol table alone).
    pub(crate) fn dwarf_size(&self) -> u64 {
        *self.dwarf_size.get_or_init(|| {
            object::File::parse(&**self.dwarf_image())
                .ok()
                .and_then(|obj| obj.section_by_name(".debug_info").map(|s| s.size()))
                .unwrap_or(0)
        })
    }

    /// The symbols of the file and of its separate debug file, read on first use.
    fn symbols(&self) -> &Symbols {
        self.symbols.get_or_init(|| {
            let mut symbols = Vec::new();
            let mut strings = Vec::new();
            if let Ok(obj) = object::File::parse(&*self.image) {
                collect_symbols(&obj, &self.image, false, &mut symbols, &mut strings);
            }
            if let Some(debug) = &self.debug_image {
                if let Ok(dobj) = object::File::parse(&**debug) {
                    collect_symbols(&dobj, debug, true, &mut symbols, &mut strings);
                }
            }
            // The symbol tables were read through once; lookups read only the names hit.
            self.image.release_pages();
            if let Some(debug) = &self.debug_image {
                debug.release_pages();
            }
            #[cfg(test)]
            held::taken(&held::SYMBOLS);
            Symbols {
                table: SymbolTable::new(symbols),
                strings,
            }
        })
    }

    /// The DWARF of the file itself, else of its separate debug file; read on first use.
    fn dwarf(&self) -> Option<&Dwarf> {
        self.dwarf
            .get_or_init(|| {
                let image = self.dwarf_image();
                let dwarf = load_dwarf(image);
                #[cfg(test)]
                if dwarf.is_some() {
                    held::taken(&held::DWARF);
                }
                // Every unit's header was read; lookups read only the units hit.
                image.release_pages();
                dwarf
            })
            .as_ref()
    }

    /// Whether this is a separate debug file (`objcopy --only-keep-debug`): symbols and DWARF
    /// at the original addresses, but no code, and file offsets that are not the original's.
    pub(crate) fn is_debug_only(&self) -> bool {
        let mut code = self.segments.iter().filter(|s| s.executable).peekable();
        code.peek().is_some() && code.all(|s| s.file_size == 0)
    }

    /// The ELF address of file offset `file_offset` of a text mapping at file offset `pgoff`.
    /// A separate debug file's offsets are not the original's, but its text segment keeps its
    /// address, which the mapping starts at the page of (p_offset and p_vaddr agree modulo
    /// the page size).
    pub(crate) fn svma_in_mapping(&self, file_offset: u64, pgoff: u64) -> Option<u64> {
        if self.is_debug_only() {
            return self
                .svma_of_mapping(pgoff)
                .map(|base| base.wrapping_add(file_offset.wrapping_sub(pgoff)));
        }
        self.svma_of_offset(file_offset)
    }

    /// The ELF virtual address (SVMA) of a file offset, through the PT_LOAD segments.
    pub fn svma_of_offset(&self, file_offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| {
                file_offset >= s.file_offset && file_offset - s.file_offset < s.file_size.max(1)
            })
            .map(|s| file_offset - s.file_offset + s.address)
    }

    /// The address the first byte of a mapping at page-aligned file offset `pgoff` has in the
    /// file's address space. The kernel maps a segment from the page its file offset falls
    /// in, and that page may also hold the end of the segment before it (the linker packs
    /// segments by file offset but page-aligns their addresses), so the segment is the one
    /// that starts in that page, not the first one covering `pgoff`.
    pub fn svma_of_mapping(&self, pgoff: u64) -> Option<u64> {
        const PAGE: u64 = 4096;
        if self.is_debug_only() {
            // The text segment the mapping comes from: the one at the same distance from the
            // first segment (file offset 0) as the mapping's offset, as linkers lay out
            // several text segments; else the only (first) one.
            let base = self.segments.first().map_or(0, |s| s.address);
            let code = self.segments.iter().filter(|s| s.executable);
            let start = |s: &Segment| s.address & !(PAGE - 1);
            return code
                .clone()
                .find(|s| start(s).wrapping_sub(base) == pgoff)
                .or_else(|| code.clone().next())
                .map(start);
        }
        self.segments
            .iter()
            .find(|s| s.file_offset & !(PAGE - 1) == pgoff)
            .map(|s| s.address.wrapping_sub(s.file_offset - pgoff))
            .or_else(|| self.svma_of_offset(pgoff))
    }

    /// Frames for an ELF address, innermost (inlined) first; empty when nothing names it.
    /// The outermost frame is named from the symbol table when it has the address, as
    /// `perf report` does (so `.cold`/`.part.0` clones keep their names); inlined frames
    /// come from DWARF. Lines come from DWARF.
    pub fn frames(&self, svma: u64) -> Vec<NativeFrame> {
        self.frames_in(self.dwarf(), svma)
    }

    /// [`Binary::frames`] of each address, reading only the DWARF units that name them when
    /// the whole DWARF was not read yet (the same frames: `dwarf_units.rs`); that DWARF is
    /// let go of before returning.
    pub(crate) fn frames_of(&self, svmas: &[u64]) -> Vec<Vec<NativeFrame>> {
        if self.dwarf.get().is_none() {
            if let Some(units) = load_dwarf_units(self.dwarf_image(), self.take_ahead(), svmas) {
                #[cfg(test)]
                held::taken(&held::DWARF);
                let frames = svmas.iter().map(|&a| self.frames_in(Some(&units), a));
                let frames = frames.collect();
                #[cfg(test)]
                held::freed(&held::DWARF);
                self.dwarf_image().release_pages();
                return frames;
            }
        }
        svmas.iter().map(|&a| self.frames(a)).collect()
    }

    /// What reads the DWARF sections [`Binary::frames_of`] will need on another thread.
    pub(crate) fn dwarf_ahead(&self) -> DwarfAhead {
        DwarfAhead {
            image: self.dwarf_image().clone(),
            prepared: self.prepared.clone(),
        }
    }

    /// What [`DwarfAhead::read`] read (waiting while it reads), else read now.
    fn take_ahead(&self) -> Option<Ahead> {
        let mut prepared = self
            .prepared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match std::mem::replace(&mut *prepared, Prepared::Taken) {
            Prepared::Ready(ahead) => ahead.map(|a| *a),
            Prepared::NotYet | Prepared::Taken => {
                drop(prepared);
                read_ahead(self.dwarf_image())
            }
        }
    }

    fn frames_in(&self, dwarf: Option<&Dwarf>, svma: u64) -> Vec<NativeFrame> {
        let symbol = self.symbol_name(svma);
        let mut frames = Vec::new();
        if let Some(dwarf) = dwarf {
            if let Ok(mut iter) = dwarf.find_frames(svma).skip_all_loads() {
                while let Ok(Some(f)) = iter.next() {
                    let name = f
                        .function
                        .as_ref()
                        .and_then(|n| n.raw_name().ok())
                        .map(|n| self.demangle(&n));
                    let (file, line) = match &f.location {
                        Some(l) => (l.file.map(str::to_string), l.line),
                        None => (None, None),
                    };
                    frames.push((name, file, line));
                    if frames.len() > 256 {
                        break;
                    }
                }
            }
        }
        let mut out: Vec<NativeFrame> = Vec::with_capacity(frames.len().max(1));
        let n = frames.len();
        for (i, (name, file, line)) in frames.into_iter().enumerate() {
            let outermost = i + 1 == n;
            let name = if outermost {
                symbol.clone().or(name)
            } else {
                name
            };
            // An inlined frame without a name still tells the line; keep it under the
            // symbol name rather than dropping the position.
            let Some(name) = name.or_else(|| symbol.clone()) else {
                continue;
            };
            out.push(NativeFrame { name, file, line });
        }
        if out.is_empty() {
            if let Some(name) = symbol {
                out.push(NativeFrame {
                    name,
                    file: None,
                    line: None,
                });
            }
        }
        out
    }

    /// The demangled name of the symbol table's function at an ELF address. When there is one,
    /// it is the outermost of [`Binary::frames`] (which DWARF adds inlined frames and lines to).
    pub(crate) fn symbol_name(&self, svma: u64) -> Option<String> {
        self.symbol_at(svma)
            .map(|s| self.name(&s))
            .filter(|n| !n.is_empty())
            .map(|n| self.demangle(&n))
    }

    /// `demangle`, once per name.
    fn demangle(&self, mangled: &str) -> String {
        let mut known = self
            .demangled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(name) = known.get(mangled) {
            return name.clone();
        }
        let name = demangle(mangled);
        known.insert(mangled.into(), name.clone());
        name
    }

    /// A symbol's name; names are checked to be UTF-8 only when shown (rare invalid bytes
    /// are replaced), since checking every name of a large binary costs more than naming.
    fn name(&self, symbol: &Symbol) -> Cow<'_, str> {
        match self.name_bytes(symbol) {
            Cow::Borrowed(bytes) => String::from_utf8_lossy(bytes),
            Cow::Owned(bytes) => Cow::Owned(
                String::from_utf8(bytes)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            ),
        }
    }

    fn name_bytes(&self, symbol: &Symbol) -> Cow<'_, [u8]> {
        let mut read = self
            .names_read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (symbol.strings(), symbol.name());
        if let Some(name) = read.get(&key) {
            return Cow::Owned(name.to_vec());
        }
        let name = name_in(
            &self.image,
            self.debug_image.as_ref(),
            &self.symbols().strings,
            symbol,
        );
        if let Cow::Owned(bytes) = &name {
            read.insert(key, bytes.as_slice().into());
        }
        name
    }

    fn symbol_at(&self, svma: u64) -> Option<Symbol> {
        self.symbols().table.at(svma, |s| self.name_bytes(s))
    }
}

/// Bytes of a name read at a time from a file (most names are shorter).
const NAME_PIECE: usize = 256;

/// A symbol's name bytes, from the string table `strings` lists for it (in range: checked
/// when collected). Read from the file apart from its mapping when it can be
/// ([`SharedBytes::reads_apart`]): the names a recording hits are spread over string tables of
/// megabytes (`node`'s 7.5 MB, `librustc_driver`'s tens), and reading each through the mapping
/// mapped the 64 KiB around it (the kernel's fault-around), pages held to the end.
fn name_in<'a>(
    image: &'a Image,
    debug_image: Option<&'a Image>,
    strings: &[StringTable],
    symbol: &Symbol,
) -> Cow<'a, [u8]> {
    let Some(table) = strings.get(usize::from(symbol.strings())) else {
        return Cow::Borrowed(&[]);
    };
    let bytes = match debug_image {
        Some(debug) if table.in_debug_file => debug,
        _ => image,
    };
    let start = table.start + symbol.name() as usize;
    if !bytes.reads_apart() {
        let rest = bytes.get(start..table.end).unwrap_or(&[]);
        // A name without its NUL is unreadable (as `object` reads names): none.
        return Cow::Borrowed(
            rest.iter()
                .position(|&b| b == 0)
                .map_or(&[][..], |nul| &rest[..nul]),
        );
    }
    let mut name = Vec::new();
    let mut at = start;
    while at < table.end {
        let piece = (table.end - at).min(NAME_PIECE);
        let old = name.len();
        name.resize(old + piece, 0);
        let got = bytes.read_at(at, &mut name[old..]);
        name.truncate(old + got);
        if let Some(nul) = name[old..].iter().position(|&b| b == 0) {
            name.truncate(old + nul);
            return Cow::Owned(name);
        }
        if got < piece {
            break;
        }
        at += got;
    }
    Cow::Borrowed(&[])
}

/// Collects the defined functions of the symbol tables (.symtab, .dynsym). A name is kept as
/// where it starts in its string table, not read: large binaries have hundreds of thousands
/// of symbols whose string tables (tens of MiB of mangled names) would otherwise all be read
/// to find where each name ends, while a recording needs the names of the few it hit.
fn collect_symbols(
    obj: &object::File<'_>,
    image: &Image,
    in_debug_file: bool,
    out: &mut Vec<Symbol>,
    strings: &mut Vec<StringTable>,
) {
    match obj {
        object::File::Elf32(elf) => collect_elf_symbols(elf, image, in_debug_file, out, strings),
        object::File::Elf64(elf) => collect_elf_symbols(elf, image, in_debug_file, out, strings),
        // Recordings are of Linux processes: their binaries are ELF.
        _ => {}
    }
}

/// [`collect_symbols`] for one ELF class: what `object`'s generic symbols call a defined text
/// symbol (`STT_FUNC` in a section), at a non-zero address and with a name.
fn collect_elf_symbols<Elf: FileHeader>(
    elf: &ElfFile<'_, Elf>,
    image: &Image,
    in_debug_file: bool,
    out: &mut Vec<Symbol>,
    string_tables: &mut Vec<StringTable>,
) {
    let endian = elf.endian();
    let base = image.as_ptr() as usize;
    let tables = [elf.elf_symbol_table(), elf.elf_dynamic_symbol_table()];
    // At most one symbol per entry: reserved at once for both tables, never grown (growing
    // copies the symbols; `node`'s are megabytes).
    out.reserve_exact(tables.iter().map(|t| t.symbols().len()).sum());
    for table in tables {
        if table.is_empty() {
            continue;
        }
        // The string table's bytes in `image` (checked, so names from anywhere else are
        // dropped rather than misread).
        let Ok(strings) = elf
            .elf_section_table()
            .section(table.string_section())
            .and_then(|h| h.data(endian, &**image))
        else {
            continue;
        };
        let Some(start) = (strings.as_ptr() as usize).checked_sub(base) else {
            continue;
        };
        let end = start + strings.len();
        let Ok(index) = u8::try_from(string_tables.len()) else {
            continue;
        };
        if usize::from(index) >= super::symbol_table::MAX_STRING_TABLES {
            continue;
        }
        if end > image.len() {
            continue;
        }
        string_tables.push(StringTable {
            start,
            end,
            in_debug_file,
        });
        for entries in table.symbols().chunks(RELEASED_EVERY) {
            collect_functions(entries, endian, strings.len(), index, out);
            // Entries are read once (lookups read only names): their pages are let go of as
            // the table is read, so a large table (`node`'s 4.4 MB, `libLLVM`'s tens) is never
            // resident whole beside the symbols taken from it.
            let bytes = object::pod::bytes_of_slice(entries);
            #[cfg(test)]
            table_pages::read(bytes.len());
            if let Some(read) = image
                .offset_of(bytes)
                .and_then(|at| image.slice(at..at + bytes.len()))
            {
                read.release_pages();
                #[cfg(test)]
                table_pages::released();
            }
        }
    }
}

/// The most symbol table bytes this thread read without letting their pages go, and all it
/// read (`tests::a_symbol_table_is_never_resident_whole`).
#[cfg(test)]
mod table_pages {
    use std::cell::Cell;

    thread_local! {
        static HELD: Cell<usize> = const { Cell::new(0) };
        static MOST: Cell<usize> = const { Cell::new(0) };
        static ALL: Cell<usize> = const { Cell::new(0) };
    }

    pub(super) fn read(bytes: usize) {
        HELD.set(HELD.get() + bytes);
        MOST.set(MOST.get().max(HELD.get()));
        ALL.set(ALL.get() + bytes);
    }

    pub(super) fn released() {
        HELD.set(0);
    }

    /// (the most held at once, all read).
    pub(super) fn get() -> (usize, usize) {
        (MOST.get(), ALL.get())
    }
}

/// Symbol table entries let go of at a time while a table is read (192 KiB of ELF64 entries).
const RELEASED_EVERY: usize = 8192;

/// The defined functions among `entries` of a symbol table whose string table (table `index`
/// of the binary's) is `strings_len` bytes long.
fn collect_functions<S: Sym>(
    entries: &[S],
    endian: S::Endian,
    strings_len: usize,
    index: u8,
    out: &mut Vec<Symbol>,
) {
    for sym in entries {
        let shndx = sym.st_shndx(endian);
        let defined = shndx != object::elf::SHN_UNDEF
            && (shndx < object::elf::SHN_LORESERVE || shndx == object::elf::SHN_XINDEX);
        let address: u64 = sym.st_value(endian).into();
        // Name 0 is the empty name (the table starts with a NUL).
        let name = sym.st_name(endian);
        if sym.st_type() != object::elf::STT_FUNC
            || !defined
            || address == 0
            || name == 0
            || name as usize >= strings_len
        {
            continue;
        }
        let rank = match sym.st_bind() {
            object::elf::STB_WEAK => 1,
            object::elf::STB_LOCAL => 2,
            _ => 0,
        };
        // A name past 1 GiB of its table: none (no real string table is that large).
        out.extend(Symbol::new(
            address,
            sym.st_size(endian).into(),
            name,
            index,
            rank,
        ));
    }
}

fn load_dwarf(image: &Image) -> Option<Dwarf> {
    let mut dwarf = load_sections(image)?;
    // addr2line parses every unit up front, each with its abbreviations; in libc's debug file
    // (4126 units, 2063 abbreviation tables) two units share each table, parsed once so.
    dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
    addr2line::Context::from_dwarf(dwarf).ok()
}

/// The units of the DWARF in `image` that name `svmas` (`ahead`: its sections and units,
/// read) for addr2line, which reads every unit of .debug_info: it gets a copy of the section
/// with those units at their places (references between units are offsets in it) and, in
/// place of each run of other units, one unit it skips (its abbreviations are past the
/// section's end). The rest of the copy is pages never written. None when the units cannot be
/// told apart.
fn load_dwarf_units(image: &Image, ahead: Option<Ahead>, svmas: &[u64]) -> Option<Dwarf> {
    let Ahead {
        sections: mut dwarf,
        units,
    } = ahead?;
    let (kept, _total) = units?.needed(&dwarf, svmas).ok()?;
    #[cfg(test)]
    units_count::set(kept.len(), _total);
    use gimli::{Reader, Section};
    let section = dwarf.debug_info.reader().clone();
    let endian = section.endian();
    let info: &[u8] = &section;
    let mut sparse = vec![0u8; info.len()];
    let mut at = 0;
    for unit in kept {
        skipped_unit(sparse.get_mut(at..unit.start)?, endian)?;
        sparse
            .get_mut(unit.clone())?
            .copy_from_slice(info.get(unit.clone())?);
        at = unit.end;
    }
    skipped_unit(sparse.get_mut(at..)?, endian)?;
    drop(section);
    dwarf.debug_info = EndianReader::new(SharedBytes::owned(sparse), endian).into();
    // Finding the units read every unit's first entry and abbreviations: with DWARF stored
    // uncompressed (`libpython3.11`'s), pages all over the file, megabytes. The units kept are
    // copied: those pages are let go before addr2line reads the rest, which faults back what it
    // reads.
    image.release_pages();
    #[cfg(test)]
    units_count::released_before_parse();
    addr2line::Context::from_dwarf(dwarf).ok()
}

/// Writes over `gap` a DWARF 4 unit header of its length whose abbreviations are past the end
/// of any .debug_abbrev, so readers skip the unit. None when the gap cannot be one unit.
fn skipped_unit(gap: &mut [u8], endian: RunTimeEndian) -> Option<()> {
    use gimli::Endianity;
    if gap.is_empty() {
        return Some(());
    }
    let length = u32::try_from(gap.len().checked_sub(4)?)
        .ok()
        .filter(|l| (7..0xffff_fff0).contains(l))?;
    endian.write_u32(&mut gap[0..4], length);
    endian.write_u16(&mut gap[4..6], 4);
    endian.write_u32(&mut gap[6..10], u32::MAX);
    gap[10] = 8;
    Some(())
}

/// How many units the last [`load_dwarf_units`] of this thread kept, and how many there were.
#[cfg(test)]
pub(crate) mod units_count {
    use std::cell::Cell;

    thread_local! {
        static LAST: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
        static RELEASED: Cell<bool> = const { Cell::new(false) };
    }

    pub(super) fn set(kept: usize, total: usize) {
        LAST.set((kept, total));
        RELEASED.set(false);
    }

    pub(super) fn released_before_parse() {
        RELEASED.set(true);
    }

    /// Whether the last [`load_dwarf_units`](super::load_dwarf_units) let the pages it read
    /// go before addr2line parsed the units kept.
    pub(crate) fn released() -> bool {
        RELEASED.get()
    }

    /// (kept, in the section).
    pub(crate) fn get() -> (usize, usize) {
        LAST.get()
    }
}

/// The DWARF sections of `image`, read in place when stored uncompressed.
fn load_sections(image: &Image) -> Option<Sections> {
    let obj = object::File::parse(&**image).ok()?;
    obj.section_by_name(".debug_info")?;
    let endian = if obj.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let load =
        |id: gimli::SectionId| -> Result<EndianReader<RunTimeEndian, SharedBytes>, gimli::Error> {
            // Location lists (where variables live) are never read for names and lines; libc's
            // are a sixth of its compressed DWARF, so they are not decompressed.
            if matches!(
                id,
                gimli::SectionId::DebugLoc | gimli::SectionId::DebugLocLists
            ) {
                return Ok(EndianReader::new(SharedBytes::owned(Vec::new()), endian));
            }
            // Uncompressed sections stay in the file's mapping: only the parts of the units
            // looked up are read.
            let data = obj
                .section_by_name(id.name())
                // A compressed section's pages are let go of as it is inflated, not held beside
                // every section's inflated bytes (libc6-dbg's: 3 MB beside 8.6).
                .and_then(|s| uncompressed_letting_go(&s, image))
                .map_or_else(
                    || SharedBytes::owned(Vec::new()),
                    |d| section_bytes(image, d),
                );
            Ok(EndianReader::new(data, endian))
        };
    gimli::Dwarf::load(load).ok()
}

fn open_debug_file(build_id: &[u8]) -> Option<Image> {
    if build_id.len() < 2 {
        return None;
    }
    let hex = hex(build_id);
    let path = format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..]);
    open_debug_image(Path::new(&path))
}

/// A separate debug file's bytes.
fn open_debug_image(path: &Path) -> Option<Image> {
    crate::foreign_file::named_file_bytes(path)
        .ok()
        .map(image_of)
}

impl Binary {
    /// For a binary at `path` without DWARF and without a debug file found by build id: the
    /// debug file its `.gnu_debuglink` names, looked for where gdb looks (beside it, in
    /// `.debug/` beside it, under `/usr/lib/debug` + its directory) and used, as the one found
    /// by build id is, only when it shows the binary's build id.
    pub(crate) fn with_debuglink(mut self, path: &Path, debug_files: bool) -> Self {
        if self.debug_image.is_some() || self.build_id.is_none() {
            return self;
        }
        let Ok(obj) = object::File::parse(&*self.image) else {
            return self;
        };
        if obj.section_by_name(".debug_info").is_some() {
            return self;
        }
        let Ok(Some((name, _crc))) = obj.gnu_debuglink() else {
            return self;
        };
        let name = String::from_utf8_lossy(name).into_owned();
        drop(obj);
        for place in build_id::debuglink_places(path, &name) {
            // Beside the binary is where its process's user may write: the foreign-file rules.
            let Ok(debug) = crate::foreign_file::binary_bytes(&place).map(image_of) else {
                continue;
            };
            let same = object::File::parse(&*debug)
                .is_ok_and(|dobj| dobj.build_id().ok().flatten() == self.build_id.as_deref());
            if !same {
                continue;
            }
            debug.release_pages();
            self.debug_image = Some(debug);
            self.debug_dwarf = debug_files;
            // Read again with the debug file's symbols, if they were read without them.
            self.symbols = OnceLock::new();
            break;
        }
        self
    }
}

pub use crate::demangle::demangle;

/// Binaries by path, loaded on first use; failures are remembered (and reported as notes).
#[derive(Default)]
pub struct BinaryCache {
    loaded: HashMap<Arc<str>, Result<Arc<Binary>, String>>,
    /// The vdso image of this machine, used when the recording was made on this kernel.
    pub vdso_allowed: bool,
    /// Whether the DWARF of separate debug files is read (see `Binary::parse`).
    pub debug_files: bool,
    /// Whether binaries of live processes in another mount namespace (containers) are read
    /// through `/proc/PID/root` (while recording), with each process's answer kept.
    pub live_roots: bool,
    roots: HashMap<u32, Option<std::path::PathBuf>>,
    /// Where copies of binaries are looked for by build id (see `build_id.rs`).
    pub(super) by_build_id: build_id::Lookup,
    /// The copy found for each build id looked for (None: none found).
    copies_by_build_id: HashMap<Vec<u8>, Option<Arc<Binary>>>,
}

impl BinaryCache {
    pub(crate) fn new(vdso_allowed: bool, debug_files: bool) -> Self {
        Self {
            loaded: HashMap::new(),
            vdso_allowed,
            debug_files,
            live_roots: false,
            roots: HashMap::new(),
            by_build_id: build_id::Lookup::new(),
            copies_by_build_id: HashMap::new(),
        }
    }

    /// The binary for a mapping's path in process `pid`; `[vdso]` is read from this process's
    /// memory.
    pub fn get(&mut self, pid: u32, path: &Arc<str>) -> Result<Arc<Binary>, String> {
        if self.live_roots && path.starts_with('/') {
            let root = self
                .roots
                .entry(pid)
                .or_insert_with(|| crate::process_root::foreign_root(pid));
            if let Some(root) = root {
                let inside = crate::process_root::host_path(Some(root), Path::new(&**path));
                return self.get_path(&Arc::from(inside.to_string_lossy()));
            }
        }
        self.get_path(path)
    }

    fn get_path(&mut self, path: &Arc<str>) -> Result<Arc<Binary>, String> {
        if let Some(r) = self.loaded.get(path) {
            return r.clone();
        }
        let result = if &**path == "[vdso]" {
            if self.vdso_allowed {
                own_vdso()
                    .ok_or_else(|| "the vdso image of this process is not readable".to_string())
                    .and_then(|b| Binary::parse(&b, self.debug_files).map_err(|e| e.to_string()))
            } else {
                Err("the recording was made on another kernel".to_string())
            }
        } else if path.starts_with('/') {
            Binary::open(Path::new(&**path), self.debug_files)
                .map(|b| b.with_debuglink(Path::new(&**path), self.debug_files))
                .map_err(|e| e.to_string())
        } else {
            Err("not a file".to_string())
        };
        let result = result.map(Arc::new);
        self.loaded.insert(path.clone(), result.clone());
        result
    }

    /// Lets go of every binary loaded (each is freed once no one else holds it); what could not
    /// be loaded is still remembered.
    pub(crate) fn release(&mut self) {
        self.loaded.retain(|_, r| r.is_err());
        self.copies_by_build_id.clear();
    }

    /// Every path that could not be loaded, with the reason.
    pub fn failures(&self) -> impl Iterator<Item = (&str, &str)> {
        self.loaded.iter().filter_map(|(p, r)| match r {
            Err(e) => Some((&**p, e.as_str())),
            Ok(_) => None,
        })
    }
}

/// The vdso of this process, read through /proc/self/maps and /proc/self/mem (plain file
/// I/O; every process on one kernel maps the same vdso image).
pub fn own_vdso() -> Option<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read("/proc/self/maps").ok()?;
    let entries = procfs::parse_maps(&maps).ok()?;
    let vdso = entries.iter().find(|e| e.path == "[vdso]")?;
    let len = usize::try_from(vdso.end.checked_sub(vdso.start)?).ok()?;
    let mut mem = std::fs::File::open("/proc/self/mem").ok()?;
    mem.seek(SeekFrom::Start(vdso.start)).ok()?;
    let mut buf = vec![0u8; len];
    mem.read_exact(&mut buf).ok()?;
    Some(buf)
}

impl BinaryCache {
    /// The binary for a mapping of `path` in process `pid` that the recording says has build
    /// id `recorded`: the file at the path when it is that build (or no build id was
    /// recorded), else a copy of that build found elsewhere (`build_id::places`). The file at
    /// the path being another build (a file without a build id cannot be the recorded one)
    /// with no copy found is an error, and remembered for the notes.
    pub fn get_built(
        &mut self,
        pid: u32,
        path: &Arc<str>,
        recorded: Option<&[u8]>,
    ) -> Result<Arc<Binary>, String> {
        let at_path = self.get(pid, path);
        let Some(recorded) = recorded.filter(|id| !id.is_empty()) else {
            return at_path;
        };
        let on_disk = match &at_path {
            Ok(binary) => match binary.build_id.as_deref() {
                Some(id) if id == recorded => return at_path,
                Some(id) => Some(hex(id)),
                None => Some(String::new()),
            },
            Err(_) => None,
        };
        // Pseudo files ([vdso]) have no copies elsewhere.
        if path.starts_with('/') {
            if let Some(copy) = self.copy_of(path, recorded) {
                return Ok(copy);
            }
        }
        let Some(on_disk) = on_disk else {
            self.by_build_id
                .not_found
                .insert(path.to_string(), hex(recorded));
            return at_path;
        };
        let mismatch = build_id::Mismatch {
            recorded: hex(recorded),
            on_disk,
        };
        let why = format!(
            "the file on disk is not build {} (the recording's)",
            mismatch.recorded
        );
        self.by_build_id
            .mismatches
            .entry(path.to_string())
            .or_insert(mismatch);
        Err(why)
    }

    /// A copy of the binary mapped from `path` with build id `id`, looked for once per id.
    fn copy_of(&mut self, path: &str, id: &[u8]) -> Option<Arc<Binary>> {
        if let Some(found) = self.copies_by_build_id.get(id) {
            return found.clone();
        }
        let lookup = &self.by_build_id;
        let found = build_id::places(path, id, &lookup.search_dirs, lookup.home.as_deref())
            .into_iter()
            .find_map(|place| {
                let binary = Binary::open(&place, self.debug_files).ok()?;
                let same = binary.build_id.as_deref() == Some(id);
                same.then_some(binary).map(Arc::new)
            });
        self.copies_by_build_id.insert(id.to_vec(), found.clone());
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zstd frame of `len` zeros in blocks of one repeated byte (4 bytes for each 128 KiB).
    fn zstd_bomb(len: u64) -> Vec<u8> {
        let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0xc0, 0x50];
        frame.extend(len.to_le_bytes());
        let mut left = len;
        while left > 0 {
            let block = left.min(128 << 10);
            left -= block;
            let header = u32::from(left == 0) | 1 << 1 | (block as u32) << 3;
            frame.extend(&header.to_le_bytes()[..3]);
            frame.push(0);
        }
        frame
    }

    /// Sections of a hostile binary: a 32 KiB zstd frame of 1 GiB. Run by
    /// `compressed_sections_are_inflated_in_bounded_memory` under a 256 MiB address-space
    /// limit (alone, it passes quickly too).
    #[test]
    #[ignore = "run under a memory limit by compressed_sections_are_inflated_in_bounded_memory"]
    fn compressed_section_bombs() {
        let bomb = zstd_bomb(1 << 30);
        let section = |format, uncompressed_size| object::CompressedData {
            format,
            data: &bomb,
            uncompressed_size,
        };
        use object::CompressionFormat::{Zlib, Zstandard};
        // Its header says what it holds: more than 1024 bytes for each compressed byte.
        assert!(inflate_section(section(Zstandard, 1 << 30)).is_none());
        assert!(inflate_section(section(Zlib, 1 << 30)).is_none());
        // Its header says less than it holds: decompressed no further than that.
        assert!(inflate_section(section(Zstandard, 1 << 20)).is_none());
        // An honest section reads back.
        let text = b"DWARF ".repeat(1000);
        let packed = zstd::bulk::compress(&text, 3).unwrap();
        let honest = object::CompressedData {
            format: Zstandard,
            data: &packed,
            uncompressed_size: text.len() as u64,
        };
        assert_eq!(inflate_section(honest).as_deref(), Some(&text[..]));
    }

    #[test]
    fn compressed_sections_are_inflated_in_bounded_memory() {
        let me = std::env::current_exe().unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -v {}; exec \"$0\" --exact symbolize::native::tests::compressed_section_bombs \
                 --include-ignored --test-threads 1",
                256 << 10
            ))
            .arg(&me)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{said}");
        assert!(said.contains("1 passed"), "{said}");
    }

    #[test]
    fn demangles_cpp_rust_and_leaves_c() {
        assert_eq!(demangle("_ZN3foo3barEi"), "foo::bar(int)");
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
    }

    #[test]
    fn vdso_of_this_process_has_symbols() {
        let image = own_vdso().expect("vdso readable");
        let b = Binary::parse(&image, false).unwrap();
        let all = b.symbols().table.all();
        assert!(
            all.iter().any(|s| b.name(s).contains("clock_gettime")),
            "vdso symbols: {:?}",
            all.iter().map(|s| b.name(s)).collect::<Vec<_>>()
        );
    }

    /// The sections handed to the unwinder and the DWARF reader are ranges of the binary's
    /// mapping, not copies (a host's binaries have hundreds of MiB of text and DWARF).
    #[test]
    fn sections_are_read_in_place() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let binary = Binary::open(&exe, false).unwrap();
        let unwind = binary.unwind();
        let (_, text) = unwind.text.as_ref().expect("a .text section");
        assert_eq!(
            binary.image.offset_of(text).map(|_| text.len()),
            Some(text.len())
        );
        let (_, eh_frame) = unwind.eh_frame.as_ref().expect("an .eh_frame section");
        assert!(binary.image.offset_of(eh_frame).is_some());
        // This test binary has line tables (the dev profile's debug info), read in place.
        let frames = binary.frames(
            binary
                .symbols()
                .table
                .all()
                .iter()
                .find(|s| binary.name(s).contains("sections_are_read_in_place"))
                .expect("this test's symbol")
                .addr,
        );
        assert!(frames.iter().any(|f| f.line.is_some()), "{frames:?}");
    }

    /// This test binary and the C library it runs with, whichever builds they are.
    fn this_binary_and_its_libc() -> Vec<std::path::PathBuf> {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
            .map(std::path::PathBuf::from);
        std::iter::once(exe).chain(libc).collect()
    }

    /// A binary's symbol tables are let go of page by page as they are read (issue 28: `node`'s
    /// 4.4 MB, `libLLVM`'s tens, were resident whole beside the symbols taken from them): this
    /// test binary's (megabytes of entries) are never held more than 192 KiB at a time.
    #[test]
    fn a_symbol_table_is_never_resident_whole() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let binary = Binary::open(&exe, false).unwrap();
        let symbols = binary.symbols().table.all().len();
        let (most, all) = table_pages::get();
        assert!(all > 1 << 20, "{all} bytes of symbol table entries");
        assert!(most <= RELEASED_EVERY * 24, "{most} bytes held at once");
        assert!(symbols > 1000, "{symbols} symbols");
    }

    /// The resident bytes of this process's mapping that starts at `start` (/proc/self/smaps).
    fn resident_of_mapping(start: *const u8) -> usize {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let head = format!("{:x}-", start as usize);
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&head));
        assert!(lines.next().is_some(), "no mapping at {head}");
        let rss = lines.find(|l| l.starts_with("Rss:")).unwrap();
        rss.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<usize>()
            .unwrap()
            * 1024
    }

    /// An inflated DWARF section's compressed pages are let go of as soon as it is inflated
    /// (issue 28: libc6-dbg's 3 MB of zlib pages stayed resident beside its 8.6 MB of inflated
    /// sections at the peak of `record -a`'s end): after reading the sections of a library
    /// built with compressed DWARF, its mapping holds a fraction of the compressed bytes.
    #[test]
    fn compressed_dwarf_pages_are_let_go_once_inflated() {
        use object::{Object, ObjectSection};
        let dir = tempfile::tempdir().unwrap();
        let source: String = (0..12_000)
            .map(|i| {
                format!(
                    "struct s{i} {{ int a{i}; long b{i}; }};\n\
                     int f{i}(struct s{i} *p) {{ return p->a{i} + {i}; }}\n"
                )
            })
            .collect();
        let src = dir.path().join("many.c");
        std::fs::write(&src, source).unwrap();
        let lib = dir.path().join("libmany.so");
        let status = std::process::Command::new("cc")
            .args(["-g", "-gz=zlib", "-O0", "-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(&src)
            .status()
            .unwrap();
        assert!(status.success(), "cc");
        let binary = Binary::open(&lib, false).unwrap();
        let obj = object::File::parse(&*binary.image).unwrap();
        let compressed: usize = obj
            .sections()
            .filter(|s| s.name().is_ok_and(|n| n.starts_with(".debug")))
            .filter_map(|s| s.compressed_data().ok())
            .filter(|c| c.format != object::CompressionFormat::None)
            .map(|c| c.data.len())
            .sum();
        assert!(
            compressed > 400 << 10,
            "{compressed} bytes of compressed DWARF"
        );
        binary.image.release_pages();
        let sections = load_sections(&binary.image).unwrap();
        let resident = resident_of_mapping(binary.image.as_ptr());
        assert!(
            resident < compressed / 2,
            "{resident} bytes resident of {compressed} compressed"
        );
        // Inflated whole all the same.
        let info = gimli::Section::reader(&sections.debug_info).len();
        assert!(info > compressed, "{info} bytes of .debug_info");
    }

    /// zlib inflated a piece at a time gives what `object` inflates at once: the same bytes,
    /// and None where `object` fails (the stream cut short, a byte damaged, a size declared
    /// larger or smaller than the stream's); the pieces handed back cover the compressed bytes
    /// in order, a piece at a time.
    #[test]
    fn zlib_inflated_a_piece_at_a_time_is_what_object_inflates() {
        use std::io::Write;
        let mut rng = fastrand::Rng::with_seed(28);
        // Compresses to well over one piece.
        let plain: Vec<u8> = (0..3_000_000u32)
            .map(|i| {
                if rng.u8(..4) == 0 {
                    rng.u8(..)
                } else {
                    (i / 7) as u8
                }
            })
            .collect();
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&plain).unwrap();
        let packed = z.finish().unwrap();
        assert!(
            packed.len() > 2 * INFLATE_PIECE,
            "{} bytes packed",
            packed.len()
        );
        let by_object = |data: &[u8], size: usize| {
            object::CompressedData {
                format: object::CompressionFormat::Zlib,
                data,
                uncompressed_size: size as u64,
            }
            .decompress()
            .ok()
            .map(Cow::into_owned)
        };
        let mut damaged = packed.clone();
        damaged[packed.len() / 2] ^= 0x55;
        let cases: [(&[u8], usize); 5] = [
            (&packed, plain.len()),
            (&packed[..packed.len() / 2], plain.len()),
            (&damaged, plain.len()),
            (&packed, plain.len() + 1),
            (&packed, plain.len() - 1),
        ];
        for (i, (data, size)) in cases.into_iter().enumerate() {
            let mut pieces = Vec::new();
            let ours = inflate_zlib(data, size, |read| {
                pieces.push((read.as_ptr() as usize - data.as_ptr() as usize, read.len()))
            });
            assert_eq!(ours, by_object(data, size), "case {i}");
            if i == 0 {
                assert_eq!(ours.as_deref(), Some(&plain[..]));
                let mut at = 0;
                for &(start, len) in &pieces {
                    assert_eq!(start, at);
                    assert!(len <= INFLATE_PIECE);
                    at += len;
                }
                assert_eq!(at, packed.len());
                assert!(pieces.len() > 2, "{pieces:?}");
            }
        }
    }

    /// Names are read from a mapped binary's file apart from its mapping (issue 28: each name
    /// read through the mapping mapped the 64 KiB around it, and the few hundred names a
    /// recording hits in `node` kept 7.5 MB of its string tables resident to the end): naming
    /// every function of this test binary (megabytes of names) maps none of its pages, and
    /// gives the names read through the mapping.
    #[test]
    fn names_are_read_without_mapping_their_pages() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let binary = Binary::open(&exe, false).unwrap();
        assert!(binary.image.reads_apart());
        let in_place = |s: &Symbol| {
            let table = binary.symbols().strings[usize::from(s.strings())];
            let rest = &binary.image[table.start + s.name() as usize..table.end];
            let nul = rest.iter().position(|&b| b == 0).unwrap();
            rest[..nul].to_vec()
        };
        binary.image.release_pages();
        let resident_before = resident_of_mapping(binary.image.as_ptr());
        let mut named = 0;
        let mut expected = Vec::new();
        for s in binary.symbols().table.all() {
            let found = binary.symbol_at(s.addr).unwrap();
            expected.push((found, binary.name_bytes(&found).into_owned()));
            named += 1;
        }
        let resident_after = resident_of_mapping(binary.image.as_ptr());
        assert!(named > 1000, "{named} functions");
        assert!(
            resident_after <= resident_before + (64 << 10),
            "{resident_before} bytes resident before naming, {resident_after} after"
        );
        for (found, name) in expected {
            assert!(!name.is_empty());
            assert_eq!(name, in_place(&found));
        }
    }

    /// The symbol table, read without its names, names every function exactly as reading every
    /// symbol through `object` (its generic symbols, the way they were read before) does: the
    /// same addresses, and at each the same name (best rank, then the smallest name). Checked
    /// on this test binary (Rust, thousands of symbols) and on the C library it runs with,
    /// whichever build they are.
    #[test]
    fn symbols_read_without_their_names_name_like_object_does() {
        use super::super::symbol_table::finish_symbols;
        use object::{ObjectSymbol, SymbolKind};
        for path in this_binary_and_its_libc() {
            let bytes = std::fs::read(&path).unwrap();
            let obj = object::File::parse(&*bytes).unwrap();
            // (address, rank, name) of each text symbol, as object's generic API gives them.
            let mut expected: Vec<(u64, u8, Vec<u8>)> = obj
                .symbols()
                .chain(obj.dynamic_symbols())
                .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
                .filter_map(|s| {
                    let name = s.name_bytes().ok().filter(|n| !n.is_empty())?;
                    let rank = if s.is_weak() {
                        1
                    } else if s.is_global() {
                        0
                    } else {
                        2
                    };
                    Some((s.address(), rank, name.to_vec()))
                })
                .collect();
            expected.sort();
            expected.dedup_by_key(|e| e.0);
            let mut symbols = Vec::new();
            let mut strings = Vec::new();
            // Mapped, as binaries are read, with the names read apart from the mapping.
            let file = std::fs::File::open(&path).unwrap();
            let image = SharedBytes::mapped(
                crate::sys::mapped_file::MappedFile::map_keeping(file).unwrap(),
            );
            assert!(image.reads_apart());
            collect_symbols(&obj, &image, false, &mut symbols, &mut strings);
            finish_symbols(&mut symbols, |s| name_in(&image, None, &strings, s));
            let own: Vec<(u64, u8, Vec<u8>)> = symbols
                .iter()
                .map(|s| {
                    (
                        s.addr,
                        s.rank(),
                        name_in(&image, None, &strings, s).to_vec(),
                    )
                })
                .collect();
            assert!(
                expected.len() > 100,
                "{}: {}",
                path.display(),
                expected.len()
            );
            assert_eq!(own.len(), expected.len(), "{}", path.display());
            for (own, expected) in own.iter().zip(&expected) {
                assert_eq!(own, expected, "{}", path.display());
            }
        }
    }

    /// At every address probed (each symbol's start, the bytes around it, its middle and its
    /// end), the bucketed table names the symbol the whole table sorted at once names (how
    /// every address was named before). On this test binary and the C library it runs with
    /// (with its separate debug file's symbols when installed), whichever builds they are.
    #[test]
    fn lookups_match_the_whole_sorted_table() {
        use super::super::symbol_table::{finish_symbols, whole_table_at};
        for path in this_binary_and_its_libc() {
            let binary = Binary::open(&path, false).unwrap();
            let name = |s: &Symbol| binary.name_bytes(s);
            let mut sorted = binary.symbols().table.all().to_vec();
            finish_symbols(&mut sorted, name);
            assert!(sorted.len() > 100, "{}: {}", path.display(), sorted.len());
            let mut named = 0;
            for s in &sorted {
                for addr in [
                    s.addr,
                    s.addr - 1,
                    s.addr + 1,
                    s.addr + s.size() / 2,
                    s.addr + s.size(),
                ] {
                    // The same name may be read from the binary or its debug file.
                    let shown =
                        |s: Option<Symbol>| s.map(|s| (s.addr, s.size(), s.rank(), name(&s)));
                    let expected = shown(whole_table_at(&sorted, addr));
                    named += usize::from(expected.is_some());
                    assert_eq!(
                        shown(binary.symbol_at(addr)),
                        expected,
                        "{} at {addr:#x}",
                        path.display()
                    );
                }
            }
            assert!(named > sorted.len(), "{}: {named}", path.display());
        }
    }

    /// Reading only the units that name some addresses gives, at every address probed (each
    /// function's start and middle, a few hundred addresses at a time), the frames reading the
    /// whole DWARF gives: names, inlined frames, files and lines. On this test binary (its dev
    /// profile's DWARF) and on the C library it runs with (with its separate debug file's
    /// DWARF when installed), whichever builds they are.
    #[test]
    fn frames_of_the_units_hit_match_the_whole_dwarfs() {
        for path in this_binary_and_its_libc() {
            let whole = Binary::open(&path, true).unwrap();
            let by_units = Binary::open(&path, true).unwrap();
            let mut addresses: Vec<u64> = whole
                .symbols()
                .table
                .all()
                .iter()
                .flat_map(|s| [s.addr, s.addr + s.size() / 2])
                .collect();
            addresses.sort_unstable();
            addresses.dedup();
            assert!(addresses.len() > 100, "{}", path.display());
            let mut with_lines = 0;
            for chunk in addresses.chunks(512) {
                let frames = by_units.frames_of(chunk);
                assert!(by_units.dwarf.get().is_none(), "the whole DWARF was read");
                for (&address, frames) in chunk.iter().zip(frames) {
                    with_lines += usize::from(frames.iter().any(|f| f.line.is_some()));
                    assert_eq!(
                        frames,
                        whole.frames(address),
                        "{} at {address:#x}",
                        path.display()
                    );
                }
            }
            // This test binary has DWARF whatever libc has.
            if path == std::fs::read_link("/proc/self/exe").unwrap() {
                assert!(with_lines * 2 > addresses.len(), "{with_lines}");
            }
            if whole.dwarf_size() > 0 {
                assert!(with_lines > 0, "{}", path.display());
            }
        }
    }

    /// The DWARF sections read ahead on another thread (`record`'s end, while its walk runs)
    /// give `frames_of` the same frames, whichever of the two gets to the sections first; read
    /// ahead, `frames_of` does not read them again.
    #[test]
    fn frames_of_sections_read_ahead_match_frames_of_its_own() {
        for path in this_binary_and_its_libc() {
            let own = Binary::open(&path, true).unwrap();
            let mut addresses: Vec<u64> = own
                .symbols()
                .table
                .all()
                .iter()
                .step_by(7)
                .flat_map(|s| [s.addr, s.addr + s.size() / 2])
                .collect();
            addresses.sort_unstable();
            addresses.dedup();
            let expected = own.frames_of(&addresses);
            assert!(
                own.dwarf_size() == 0
                    || expected.iter().any(|f| f.iter().any(|f| f.line.is_some())),
                "{}",
                path.display()
            );

            let ahead = Binary::open(&path, true).unwrap();
            let reading = ahead.dwarf_ahead();
            std::thread::spawn(move || reading.read()).join().unwrap();
            assert!(
                matches!(*ahead.prepared.lock().unwrap(), Prepared::Ready(Some(_)))
                    || ahead.dwarf_size() == 0,
                "{}",
                path.display()
            );
            assert_eq!(ahead.frames_of(&addresses), expected, "{}", path.display());
            assert!(matches!(*ahead.prepared.lock().unwrap(), Prepared::Taken));

            // Read ahead too late: `frames_of` read them itself, and the thread does nothing.
            let late = Binary::open(&path, true).unwrap();
            let reading = late.dwarf_ahead();
            assert_eq!(late.frames_of(&addresses), expected, "{}", path.display());
            std::thread::spawn(move || reading.read()).join().unwrap();
            assert!(matches!(*late.prepared.lock().unwrap(), Prepared::Taken));
        }
    }

    /// A few addresses: only the units around them are read, each freed after.
    #[test]
    fn frames_of_a_few_addresses_read_a_few_units() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let binary = Binary::open(&exe, true).unwrap();
        let here: Vec<u64> = binary
            .symbols()
            .table
            .all()
            .iter()
            .filter(|s| binary.name(s).contains("frames_of_a_few_addresses"))
            .map(|s| s.addr)
            .collect();
        assert!(!here.is_empty());
        let frames = binary.frames_of(&here);
        assert!(frames[0].iter().any(|f| f.line.is_some()), "{frames:?}");
        let (kept, total) = units_count::get();
        assert!(kept >= 1 && kept * 10 < total, "{kept} of {total} units");
        // The pages finding them read were let go before the units kept were parsed.
        assert!(units_count::released());
        assert_eq!(held::get(&held::DWARF).0, 0, "DWARF still held");
    }

    /// The text mapping of this test binary: its page-aligned file offset shares a page with
    /// the end of the read-only segment before it, and the address of a function in it must
    /// come out as that function's symbol address.
    #[test]
    fn text_mapping_svma_is_that_of_the_segment_starting_in_its_page() {
        #[inline(never)]
        fn marker() -> u64 {
            std::hint::black_box(7)
        }
        let here = marker as fn() -> u64 as usize as u64;
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let (start, pgoff) = maps
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let (range, offset, path) = (f[0], f[2], f.get(5)?);
                let (a, b) = range.split_once('-')?;
                let (a, b) = (
                    u64::from_str_radix(a, 16).ok()?,
                    u64::from_str_radix(b, 16).ok()?,
                );
                (Path::new(path) == exe && (a..b).contains(&here))
                    .then(|| (a, u64::from_str_radix(offset, 16).unwrap()))
            })
            .expect("the mapping of this test's code");
        let binary = Binary::open(&exe, false).unwrap();
        let svma = binary.svma_of_mapping(pgoff).unwrap() + (here - start);
        let symbol = binary.symbol_at(svma).map(|s| demangle(&binary.name(&s)));
        assert!(
            symbol.as_deref().is_some_and(|n| n.contains("marker")),
            "{symbol:?} at svma {svma:#x}"
        );
    }
}
