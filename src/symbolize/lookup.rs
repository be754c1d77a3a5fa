//! Address → names, with sources in order: the recording's embedded symbols, then the files
//! on disk (binaries, vdso, /proc/kallsyms). Results are cached per (binary, offset); what
//! could not be named is counted for the profile's notes.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::build_id::hex;
use super::embedded::EmbeddedIndex;
use super::kernel::{self, KernelSymbols};
use super::native::{BinaryCache, NativeFrame};
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

/// A binary's build id (hex) and the frames at one offset.
type Named = (Option<Arc<str>>, Arc<[NativeFrame]>);
/// What [`Named`] is cached by: path, recorded build id, file offset.
type NamedKey = (Arc<str>, Option<Arc<[u8]>>, u64);

pub struct Symbolizer<'e> {
    embedded: Option<&'e EmbeddedIndex>,
    /// Whether this machine's kallsyms and binaries may be used (same kernel release).
    kernel_from_disk: bool,
    kernel: Option<Arc<KernelSymbols>>,
    cache: FxHashMap<NamedKey, Named>,
    pub unknown: UnknownCounts,
}

impl<'e> Symbolizer<'e> {
    pub fn new(embedded: Option<&'e EmbeddedIndex>, kernel_from_disk: bool) -> Self {
        Self {
            embedded,
            kernel_from_disk,
            kernel: None,
            cache: FxHashMap::default(),
            unknown: UnknownCounts::default(),
        }
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
        let Some(mapping) = model.lookup(pid, probe) else {
            self.unknown.unmapped += 1;
            return UserLookup {
                path: None,
                build_id: None,
                offset: probe,
                shown_offset: addr,
                frames: Arc::from([]),
            };
        };
        let offset = mapping.file_offset(probe);
        let key = (mapping.path.clone(), mapping.build_id.clone(), offset);
        let (build_id, frames) = match self.cache.get(&key) {
            Some(hit) => hit.clone(),
            None => {
                let (id, frames) = self.native(binaries, pid, mapping, offset);
                let found: Named = (id.map(Arc::from), frames);
                self.cache.insert(key, found.clone());
                found
            }
        };
        if frames.is_empty() {
            *self
                .unknown
                .by_module
                .entry(mapping.path.to_string())
                .or_default() += 1;
        }
        UserLookup {
            path: Some(mapping.path.clone()),
            build_id,
            offset,
            shown_offset: mapping.file_offset(addr),
            frames,
        }
    }

    fn native(
        &mut self,
        binaries: &mut BinaryCache,
        pid: u32,
        mapping: &Mapping,
        offset: u64,
    ) -> (Option<String>, Arc<[NativeFrame]>) {
        let path = &mapping.path;
        let record_id = mapping.build_id.as_deref().map(hex);
        if let Some(e) = self.embedded {
            if let Some(b) = e.binary(path, record_id.as_deref()) {
                if let Some(frames) = b.frames.get(&offset) {
                    let frames: Vec<NativeFrame> = frames.iter().map(NativeFrame::from).collect();
                    return (b.build_id.clone().or(record_id), frames.into());
                }
            }
        }
        // Only the recorded build names the address (build_id.rs).
        let Ok(binary) = binaries.get_built(pid, path, mapping.build_id.as_deref()) else {
            return (record_id, Arc::from([]));
        };
        let disk_id = binary.build_id.as_deref().map(hex);
        let frames = match binary.svma_in_mapping(offset, mapping.pgoff) {
            Some(svma) => binary.frames(svma),
            None => Vec::new(),
        };
        (record_id.or(disk_id), frames.into())
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
