//! Address → names, with sources in order: the recording's embedded symbols, then the files
//! on disk (binaries, vdso, /proc/kallsyms). Results are cached per (binary, offset); what
//! could not be named is counted for the profile's notes.

use std::collections::BTreeMap;
use std::sync::mpsc::Sender;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::build_id::hex;
use super::embedded::EmbeddedIndex;
use super::kernel::{self, KernelSymbols};
use super::native::{Binary, BinaryCache, DwarfAhead, NativeFrame};
use super::process::{Mapping, ProcessModel};
use crate::profile::{Frame, FrameKind};

/// What one user address resolved to.
#[derive(Clone, Debug)]
pub struct UserLookup {
    /// The mapping's path, when the address is in a mapping.
    pub path: Option<Arc<str>>,
    /// Build id (hex) from the MMAP2 record, else from the binary on disk.
    pub build_id: Option<Arc<str>>,
    /// File offset of the looked-up address (`addr - 1` for return addresses).
    pub offset: u64,
    /// File offset of the address itself, for `[unknown] (module+0xoff)`.
    pub shown_offset: u64,
    /// Innermost first; empty when nothing names the address.
    pub frames: Arc<[NativeFrame]>,
    /// For an address its binary's symbol table does not name, in a binary with DWARF, while
    /// DWARF is read later ([`Symbolizer::name_dwarf_later`]), or for any address in a binary
    /// while symbols are read later too ([`Symbolizer::name_symbols_later`]): what
    /// [`Symbolizer::frames_later`] gives its frames (none yet) by, once
    /// [`Symbolizer::name_later`] read them.
    pub pending: Option<PendingId>,
}

/// Why addresses stayed unknown, for notes.
#[derive(Debug, Default)]
pub struct UnknownCounts {
    /// Frames per mapped path that no symbol source could name.
    pub by_module: BTreeMap<String, u64>,
    /// Frames outside every known mapping.
    pub unmapped: u64,
    /// Kernel frames without a symbol.
    pub kernel: u64,
}

/// A binary's build id (hex), the frames at one offset, and, when they are to come after the
/// walk, which address left for then they are (`UserLookup::pending`).
type Named = (Option<Arc<str>>, Arc<[NativeFrame]>, Option<PendingId>);
/// What [`Named`] is cached by: path, recorded build id, file offset.
pub type NamedKey = (Arc<str>, Option<Arc<[u8]>>, u64);
/// An address left for [`Symbolizer::name_later`]: 4 bytes, not its 40-byte [`NamedKey`], as
/// the end of `record -a` keeps one per frame of each distinct stack until then.
pub type PendingId = u32;

/// An address named for now by its binary's symbol table alone (or not named yet), whose
/// frames [`Symbolizer::name_later`] reads.
struct Later {
    binary: Arc<Binary>,
    svma: u64,
    id: PendingId,
}

/// The frames [`Symbolizer::name_later`] read: a binary's path, its build id (hex), the file
/// offset and the frames there.
pub type NamedLater = (Arc<str>, Option<Arc<str>>, u64, Arc<[NativeFrame]>);

pub struct Symbolizer<'e> {
    embedded: Option<&'e EmbeddedIndex>,
    /// Whether this machine's kallsyms and binaries may be used (same kernel release).
    kernel_from_disk: bool,
    kernel: Option<Arc<KernelSymbols>>,
    cache: FxHashMap<NamedKey, Named>,
    pub unknown: UnknownCounts,
    /// When set (`name_dwarf_later`), the addresses named for now by their symbol alone.
    later: Option<Vec<Later>>,
    /// The key of each address left for later, by [`PendingId`].
    later_keys: Vec<NamedKey>,
    /// Whether the symbol tables too are read after the walk (`name_symbols_later`).
    symbols_later: bool,
    /// Where each binary with addresses left for [`Self::name_later`] goes, once, to have its
    /// DWARF sections read meanwhile ([`Self::prepare_dwarf_beside`]); the binaries sent, by
    /// address.
    prepare: Option<(Sender<DwarfAhead>, FxHashSet<usize>)>,
}

impl<'e> Symbolizer<'e> {
    pub fn new(embedded: Option<&'e EmbeddedIndex>, kernel_from_disk: bool) -> Self {
        Self {
            embedded,
            kernel_from_disk,
            kernel: None,
            cache: FxHashMap::default(),
            unknown: UnknownCounts::default(),
            later: None,
            later_keys: Vec::new(),
            symbols_later: false,
            prepare: None,
        }
    }

    /// From now on, for each binary an address is left in for [`Self::name_later`], what
    /// reads its DWARF sections is sent to `to` the first time, for a thread that reads them
    /// while the walk goes on; until [`Self::stop_preparing`].
    pub fn prepare_dwarf_beside(&mut self, to: Sender<DwarfAhead>) {
        self.prepare = Some((to, FxHashSet::default()));
    }

    /// No more binaries are sent (the channel closes).
    pub fn stop_preparing(&mut self) {
        self.prepare = None;
    }

    /// From now on, an address in a binary with DWARF that its symbol table names gets that
    /// one frame, its function (the outermost frame the DWARF would give: see
    /// [`Binary::symbol_name`]); [`Self::name_later`] reads the rest. So the DWARF of every
    /// binary is read one binary at a time at the end, not held all together until then.
    pub fn name_dwarf_later(&mut self) {
        self.later.get_or_insert_with(Vec::new);
    }

    /// [`Self::name_dwarf_later`], and from now on every address in a binary is left for
    /// [`Self::name_later`] unnamed, its symbol table not read: so the end of `record -a` holds
    /// one binary's symbol table at a time, after its walk, instead of those of every binary
    /// sampled through it (`node`'s, `libjvm`'s, jprof's own: ≈ 4.5 MB).
    pub fn name_symbols_later(&mut self) {
        self.name_dwarf_later();
        self.symbols_later = true;
    }

    /// The frames of every address named for now by its symbol alone, with its DWARF: one
    /// binary after the other, each binary let go of (with its DWARF and symbol table) before
    /// the next one's DWARF is read, the binaries with the least DWARF first. Every binary
    /// `binaries` holds is let go of. The cache then holds the whole frames. Returned in the
    /// order the addresses were first looked up in.
    pub fn name_later(&mut self, binaries: &mut BinaryCache) -> Vec<NamedLater> {
        let Some(later) = self.later.take() else {
            return Vec::new();
        };
        binaries.release();
        // Grouped by binary, in the order they were first looked up in.
        // Each binary with its addresses: (which lookup, ELF address, id).
        type Group = (Arc<Binary>, Vec<(usize, u64, PendingId)>);
        let mut groups: Vec<Group> = Vec::new();
        let mut group_of: FxHashMap<*const Binary, usize> = FxHashMap::default();
        for (i, Later { binary, svma, id }) in later.into_iter().enumerate() {
            let g = *group_of.entry(Arc::as_ptr(&binary)).or_insert_with(|| {
                groups.push((binary.clone(), Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push((i, svma, id));
        }
        drop(group_of);
        groups.sort_by_key(|(binary, _)| binary.dwarf_size());
        let mut named = Vec::new();
        for (binary, addresses) in groups {
            let svmas: Vec<u64> = addresses.iter().map(|a| a.1).collect();
            // A binary without DWARF to read by units (left here only with its symbols) is
            // named as the walk would have named it.
            let all_frames = if binary.dwarf_size() > 0 {
                binary.frames_of(&svmas)
            } else {
                svmas.iter().map(|&a| binary.frames(a)).collect()
            };
            for ((i, _, id), frames) in addresses.into_iter().zip(all_frames) {
                let frames: Arc<[NativeFrame]> = frames.into();
                let Some(key) = self.later_keys.get(id as usize) else {
                    continue;
                };
                let Some(entry) = self.cache.get_mut(key) else {
                    continue;
                };
                entry.1 = frames.clone();
                entry.2 = None;
                named.push((i, (key.0.clone(), entry.0.clone(), key.2, frames)));
            }
            // The last holder of the binary: its symbol table, DWARF and the rest are freed
            // here, before the next binary's are read.
            drop(binary);
        }
        // In the order they were first looked up in.
        named.sort_unstable_by_key(|(i, _)| *i);
        named.into_iter().map(|(_, n)| n).collect()
    }

    /// Names a user address of process `pid`. `exact` is false for return addresses, which
    /// are looked up at `addr - 1` so the call's line and function are found.
    pub fn user(
        &mut self,
        model: &ProcessModel,
        binaries: &mut BinaryCache,
        pid: u32,
        addr: u64,
        exact: bool,
    ) -> UserLookup {
        let probe = if exact { addr } else { addr.wrapping_sub(1) };
        // A memfd (JIT code mapped twice through one: the BEAM's `/memfd:vmem`, .NET's
        // `doublemapper`) is anonymous memory with a name, no binary: an address no JIT name
        // covers is shown by its address, like other JIT code, not by an offset into the memfd.
        let file_backed = |m: &&Mapping| !m.path.starts_with("/memfd:");
        let Some(mapping) = model.lookup(pid, probe).filter(file_backed) else {
            self.unknown.unmapped += 1;
            return UserLookup {
                path: None,
                build_id: None,
                offset: probe,
                shown_offset: addr,
                frames: Arc::from([]),
                pending: None,
            };
        };
        let offset = mapping.file_offset(probe);
        let key = (mapping.path.clone(), mapping.build_id.clone(), offset);
        let (build_id, frames, pending) = match self.cache.get(&key) {
            Some(hit) => hit.clone(),
            None => {
                let (id, frames, pending) = self.native(binaries, pid, mapping, offset);
                let found: Named = (id.map(Arc::from), frames, pending);
                self.cache.insert(key, found.clone());
                found
            }
        };
        if frames.is_empty() && pending.is_none() {
            // Counted without a copy of the path once it is known (every frame in a JVM's
            // JIT code is one of these).
            match self.unknown.by_module.get_mut(&*mapping.path) {
                Some(count) => *count += 1,
                None => {
                    self.unknown.by_module.insert(mapping.path.to_string(), 1);
                }
            }
        }
        UserLookup {
            path: Some(mapping.path.clone()),
            build_id,
            offset,
            shown_offset: mapping.file_offset(addr),
            frames,
            pending,
        }
    }

    /// The frames of an address [`Self::user`] left pending, once [`Self::name_later`] read
    /// them.
    pub fn frames_later(&self, id: PendingId) -> Option<&Arc<[NativeFrame]>> {
        let key = self.later_keys.get(id as usize)?;
        self.cache.get(key).map(|named| &named.1)
    }

    fn native(
        &mut self,
        binaries: &mut BinaryCache,
        pid: u32,
        mapping: &Mapping,
        offset: u64,
    ) -> (Option<String>, Arc<[NativeFrame]>, Option<PendingId>) {
        let path = &mapping.path;
        let record_id = mapping.build_id.as_deref().map(hex);
        if let Some(e) = self.embedded {
            if let Some(b) = e.binary(path, record_id.as_deref()) {
                if let Some(frames) = b.frames.get(&offset) {
                    let frames: Vec<NativeFrame> = frames.iter().map(NativeFrame::from).collect();
                    return (b.build_id.clone().or(record_id), frames.into(), None);
                }
            }
        }
        // Only the recorded build names the address (build_id.rs).
        let Ok(binary) = binaries.get_built(pid, path, mapping.build_id.as_deref()) else {
            return (record_id, Arc::from([]), None);
        };
        let disk_id = binary.build_id.as_deref().map(hex);
        let mut pending = None;
        let id = PendingId::try_from(self.later_keys.len()).ok();
        let frames = match (binary.svma_in_mapping(offset, mapping.pgoff), id) {
            (Some(svma), Some(id))
                if self.later.is_some() && (self.symbols_later || binary.dwarf_size() > 0) =>
            {
                if let Some((to, sent)) = &mut self.prepare {
                    if binary.dwarf_size() > 0 && sent.insert(Arc::as_ptr(&binary) as usize) {
                        let _ = to.send(binary.dwarf_ahead());
                    }
                }
                let later = self.later.as_mut().expect("checked above");
                later.push(Later {
                    binary: binary.clone(),
                    svma,
                    id,
                });
                self.later_keys
                    .push((mapping.path.clone(), mapping.build_id.clone(), offset));
                let symbol = if self.symbols_later {
                    None
                } else {
                    binary.symbol_name(svma)
                };
                match symbol {
                    Some(name) => vec![NativeFrame {
                        name,
                        file: None,
                        line: None,
                    }],
                    // Without a symbol (a PLT stub, libc's signal return trampoline), only
                    // the DWARF may name it: read after the walk too (reading it now held
                    // a binary's whole DWARF, libc's 30 MB parsed, through the walk). With
                    // the symbols read later, every address waits.
                    None => {
                        pending = Some(id);
                        Vec::new()
                    }
                }
            }
            (Some(svma), _) => binary.frames(svma),
            (None, _) => Vec::new(),
        };
        (record_id.or(disk_id), frames.into(), pending)
    }

    /// Names a kernel address (`exact` as for [`Self::user`]); None when unknown.
    pub fn kernel(&mut self, addr: u64, exact: bool) -> Option<String> {
        let probe = if exact { addr } else { addr.wrapping_sub(1) };
        if let Some(name) = self.embedded.and_then(|e| e.symbols.kernel.get(&probe)) {
            return Some(name.clone());
        }
        let name = if self.kernel_from_disk {
            self.kallsyms().lookup(probe).map(str::to_string)
        } else {
            None
        };
        if name.is_none() {
            self.unknown.kernel += 1;
        }
        name
    }

    /// This machine's kallsyms, read on first use.
    pub fn kallsyms(&mut self) -> &KernelSymbols {
        self.kernel.get_or_insert_with(kernel::this_machine)
    }

    /// Whether kernel names were hidden (by the embedded table or this machine's kallsyms).
    pub fn kernel_hidden(&self) -> bool {
        self.embedded.is_some_and(|e| e.symbols.kernel_hidden)
            || self.kernel.as_ref().is_some_and(|k| k.hidden)
    }
}
/// Root-first profile frames for one user address: the function, then what is inlined into
/// it; or one `[unknown] (module+0xoff)` / `[unknown] (0xaddr)` frame.
pub(super) fn user_frames(found: &UserLookup, addr: u64) -> Vec<Frame> {
    let module = found
        .path
        .as_deref()
        .map(|p| p.rsplit('/').next().unwrap_or(p).to_string());
    if found.frames.is_empty() {
        let name = match &module {
            Some(m) => format!("[unknown] ({m}+{:#x})", found.shown_offset),
            None => format!("[unknown] ({addr:#x})"),
        };
        return vec![Frame {
            name,
            kind: FrameKind::Unknown,
            module,
            file: None,
            line: None,
        }];
    }
    let mut frames = native_frames(found);
    frames.reverse();
    frames
}

/// The frames of a found native address, innermost first: what is inlined, then the function.
pub(super) fn native_frames(found: &UserLookup) -> Vec<Frame> {
    let module = found
        .path
        .as_deref()
        .map(|p| p.rsplit('/').next().unwrap_or(p).to_string());
    let n = found.frames.len();
    found
        .frames
        .iter()
        .enumerate()
        .map(|(i, f)| Frame {
            name: f.name.clone(),
            kind: if i + 1 == n {
                FrameKind::Native
            } else {
                FrameKind::Inlined
            },
            module: module.clone(),
            file: f.file.clone(),
            line: f.line,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbolize::native::{held, Binary};

    /// This process's mappings of `exe`: start, end, file offset, executable.
    fn exe_mappings(exe: &std::path::Path) -> Vec<(u64, u64, u64, bool)> {
        let maps = std::fs::read("/proc/self/maps").unwrap();
        crate::format::procfs::parse_maps(&maps)
            .unwrap()
            .into_iter()
            .filter(|m| std::path::Path::new(m.path) == exe)
            .map(|m| (m.start, m.end, m.offset, m.perms.contains('x')))
            .collect()
    }

    /// The end of `record` names every address first by its symbol alone, then reads each
    /// binary's DWARF after the walk, one binary after the other: here two binaries with DWARF
    /// (two links to this test binary, so two binaries to the cache), one address in each.
    /// While the samples are walked no DWARF is read; at the end never more than one binary
    /// holds its DWARF, each is freed, and the frames are those of the DWARF read at once.
    #[test]
    fn the_end_reads_one_binarys_dwarf_at_a_time() {
        #[inline(never)]
        fn marker() -> u64 {
            std::hint::black_box(11)
        }
        let here = marker as fn() -> u64 as usize as u64;
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let (start, end, pgoff) = exe_mappings(&exe)
            .into_iter()
            .find(|&(a, b, _, _)| (a..b).contains(&here))
            .map(|(a, b, pgoff, _)| (a, b, pgoff))
            .expect("the mapping of this test's code");
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<std::path::PathBuf> = (1..=2)
            .map(|i| {
                let path = dir.path().join(format!("copy-{i}"));
                if std::fs::hard_link(&exe, &path).is_err() {
                    std::fs::copy(&exe, &path).unwrap();
                }
                path
            })
            .collect();
        let mut model = ProcessModel::default();
        for (pid, path) in (1u32..).zip(&paths) {
            let path = path.to_str().unwrap();
            let mapping = Mapping {
                start,
                end,
                pgoff,
                path: path.into(),
                build_id: None,
            };
            model.add_mapping(pid, mapping);
        }
        let mut binaries = BinaryCache::new(true, true);
        let mut symbolizer = Symbolizer::new(None, true);
        symbolizer.name_dwarf_later();
        for pid in [1, 2] {
            let found = symbolizer.user(&model, &mut binaries, pid, here, true);
            // For now, the function alone, from the symbol table.
            assert_eq!(found.frames.len(), 1, "{:?}", found.frames);
            assert!(
                found.frames[0].name.ends_with("marker"),
                "{:?}",
                found.frames
            );
            assert_eq!(found.frames[0].line, None);
        }
        assert_eq!(
            held::get(&held::DWARF),
            (0, 0),
            "DWARF read during the walk"
        );
        let named = symbolizer.name_later(&mut binaries);
        assert_eq!(
            held::get(&held::DWARF),
            (0, 1),
            "(binaries holding their DWARF after the end, the most at once)"
        );
        let offset = here - start + pgoff;
        let whole = Binary::open(&exe, true).unwrap();
        let expected = whole.frames(whole.svma_in_mapping(offset, pgoff).unwrap());
        assert!(expected.iter().any(|f| f.line.is_some()), "{expected:?}");
        assert_eq!(named.len(), 2);
        for ((path, _, at, frames), copy) in named.iter().zip(&paths) {
            assert_eq!(Some(&**path), copy.to_str());
            assert_eq!(*at, offset);
            assert_eq!(&frames[..], &expected[..]);
        }
        // Looked up again: the whole frames.
        let again = symbolizer.user(&model, &mut binaries, 1, here, true);
        assert_eq!(&again.frames[..], &expected[..]);
    }

    /// The end of `record -a` reads no symbol table during its walk, then one binary's at a
    /// time after it: every address gets the frames its binary's whole table (and DWARF) give.
    /// Here addresses spread over the code of this test binary (twice, through two links: two
    /// binaries to the cache) and of the C library it runs with (its debug file's symbols and
    /// DWARF too when installed), as calls and as return addresses.
    #[test]
    fn the_end_reads_one_symbol_table_at_a_time() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = std::fs::read("/proc/self/maps").unwrap();
        let maps = crate::format::procfs::parse_maps(&maps).unwrap();
        let code = |wanted: &dyn Fn(&str) -> bool| {
            maps.iter()
                .find(|m| m.perms.contains('x') && wanted(m.path))
                .map(|m| (m.start, m.end, m.offset, m.path.to_string()))
        };
        let exe_code = code(&|p| std::path::Path::new(p) == exe).expect("this binary's code");
        let libc_code = code(&|p| {
            p.rsplit('/')
                .next()
                .is_some_and(|f| f.starts_with("libc.so"))
        })
        .expect("the C library's code");
        let dir = tempfile::tempdir().unwrap();
        let mut binaries_mapped = Vec::new();
        for i in 1..=2 {
            let path = dir.path().join(format!("copy-{i}"));
            if std::fs::hard_link(&exe, &path).is_err() {
                std::fs::copy(&exe, &path).unwrap();
            }
            let (start, end, pgoff, _) = exe_code.clone();
            binaries_mapped.push((
                start,
                end,
                pgoff,
                path.to_str().unwrap().to_string(),
                exe.clone(),
            ));
        }
        let (start, end, pgoff, libc) = libc_code;
        binaries_mapped.push((start, end, pgoff, libc.clone(), libc.into()));
        let mut model = ProcessModel::default();
        for (pid, (start, end, pgoff, path, _)) in (1u32..).zip(&binaries_mapped) {
            let mapping = Mapping {
                start: *start,
                end: *end,
                pgoff: *pgoff,
                path: path.as_str().into(),
                build_id: None,
            };
            model.add_mapping(pid, mapping);
        }
        let mut binaries = BinaryCache::new(true, true);
        let mut symbolizer = Symbolizer::new(None, true);
        symbolizer.name_symbols_later();
        // (pid, address, exact, what the walk left pending)
        let mut looked_up = Vec::new();
        for (pid, (start, end, ..)) in (1u32..).zip(&binaries_mapped) {
            let step = ((end - start) / 400).max(1);
            for (k, addr) in (start + 1..*end).step_by(step as usize).enumerate() {
                let exact = k % 2 == 0;
                let found = symbolizer.user(&model, &mut binaries, pid, addr, exact);
                assert!(found.frames.is_empty(), "named during the walk: {found:?}");
                // Looked up again during the walk: the same address left for later (none when
                // it is past the binary's segments: nothing names it).
                let again = symbolizer.user(&model, &mut binaries, pid, addr, exact);
                assert_eq!(again.pending, found.pending);
                looked_up.push((pid, addr, exact, found.pending));
            }
        }
        assert_eq!(
            held::get(&held::SYMBOLS),
            (0, 0),
            "symbol tables read during the walk"
        );
        assert_eq!(
            held::get(&held::DWARF),
            (0, 0),
            "DWARF read during the walk"
        );
        symbolizer.name_later(&mut binaries);
        assert_eq!(
            held::get(&held::SYMBOLS),
            (0, 1),
            "(symbol tables held after the end, the most at once)"
        );
        let whole: Vec<Binary> = binaries_mapped
            .iter()
            .map(|(.., file)| Binary::open(file, true).unwrap())
            .collect();
        let mut named = [0usize; 3];
        for (pid, addr, exact, id) in looked_up {
            let (_, _, pgoff, ..) = &binaries_mapped[pid as usize - 1];
            let whole = &whole[pid as usize - 1];
            let probe = if exact { addr } else { addr - 1 };
            let mapping = model.lookup(pid, probe).unwrap();
            let svma = whole.svma_in_mapping(mapping.file_offset(probe), *pgoff);
            let Some(id) = id else {
                assert_eq!(svma, None, "pid {pid} at {addr:#x} not left for later");
                continue;
            };
            let expected = whole.frames(svma.expect("in the binary"));
            let later = symbolizer.frames_later(id).map(|f| f.to_vec());
            assert_eq!(later.as_ref(), Some(&expected), "pid {pid} at {addr:#x}");
            let after = symbolizer.user(&model, &mut binaries, pid, addr, exact);
            assert_eq!((after.pending, &after.frames[..]), (None, &expected[..]));
            named[pid as usize - 1] += usize::from(!expected.is_empty());
        }
        assert!(named.iter().all(|&n| n > 100), "addresses named: {named:?}");
    }

    /// An address in a memfd mapping (the BEAM's JIT code) that no JIT name covers is shown by
    /// its address and counted with the unmapped ones, not as `memfd:vmem (deleted)+0x…`.
    #[test]
    fn an_address_in_a_memfd_is_shown_by_its_address() {
        let mut model = ProcessModel::default();
        model.add_mapping(
            1,
            Mapping {
                start: 0x7f00_0000_0000,
                end: 0x7f00_0100_0000,
                pgoff: 0,
                path: "/memfd:vmem (deleted)".into(),
                build_id: None,
            },
        );
        let mut binaries = BinaryCache::new(true, true);
        let mut symbolizer = Symbolizer::new(None, true);
        let addr = 0x7f00_0037_0b38;
        let found = symbolizer.user(&model, &mut binaries, 1, addr, true);
        assert_eq!(found.path, None);
        let frames = user_frames(&found, addr);
        assert_eq!(frames[0].name, format!("[unknown] ({addr:#x})"));
        assert_eq!(frames[0].module, None);
        assert!(symbolizer.unknown.by_module.is_empty());
        assert_eq!(symbolizer.unknown.unmapped, 1);
    }

    /// An address the symbol table does not name (here the padding after a function of this
    /// test binary; in `record -a`, libc's signal return trampoline, PLT stubs) is left pending
    /// through the walk, so no DWARF is read then (reading it held libc's whole parsed DWARF,
    /// 30 MB, through the walk), and gets the frames the DWARF read at once gives after it.
    #[test]
    fn an_address_without_a_symbol_waits_for_the_dwarf() {
        use object::{Object, ObjectSymbol, SymbolKind};
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let whole = Binary::open(&exe, true).unwrap();
        let bytes = std::fs::read(&exe).unwrap();
        let obj = object::File::parse(&*bytes).unwrap();
        let svma = obj
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
            .map(|s| s.address() + s.size())
            .find(|&a| whole.symbol_name(a).is_none())
            .expect("an address past a function that no symbol names");
        let (start, end, pgoff) = exe_mappings(&exe)
            .into_iter()
            .find(|&(a, b, pgoff, executable)| {
                let base = whole.svma_of_mapping(pgoff);
                executable && base.is_some_and(|base| (base..base + (b - a)).contains(&svma))
            })
            .map(|(a, b, pgoff, _)| (a, b, pgoff))
            .expect("the text mapping holding the PLT");
        let here = start + (svma - whole.svma_of_mapping(pgoff).unwrap());
        let mut model = ProcessModel::default();
        let mapping = Mapping {
            start,
            end,
            pgoff,
            path: exe.to_str().unwrap().into(),
            build_id: None,
        };
        model.add_mapping(1, mapping);
        let mut binaries = BinaryCache::new(true, true);
        let mut symbolizer = Symbolizer::new(None, true);
        symbolizer.name_dwarf_later();
        let found = symbolizer.user(&model, &mut binaries, 1, here, true);
        let key = found.pending.expect("left pending");
        assert!(found.frames.is_empty());
        // Looked up again during the walk: still pending, still no DWARF read.
        let again = symbolizer.user(&model, &mut binaries, 1, here, true);
        assert_eq!(again.pending, Some(key));
        assert_eq!(
            held::get(&held::DWARF),
            (0, 0),
            "DWARF read during the walk"
        );
        // Not counted as unknown before the DWARF had its say.
        assert!(symbolizer.unknown.by_module.is_empty());
        symbolizer.name_later(&mut binaries);
        let expected = whole.frames(svma);
        assert_eq!(
            symbolizer.frames_later(key).map(|f| f.to_vec()),
            Some(expected.clone())
        );
        let after = symbolizer.user(&model, &mut binaries, 1, here, true);
        assert_eq!((after.pending, &after.frames[..]), (None, &expected[..]));
    }
}
