//! PC → inline chain, the way OpenJ9's stack walker does it (MethodMetaData.c): find the map
//! whose range covers the PC's offset from startPC (warm and cold code alike), then follow
//! caller indexes through the inlined call sites out to the compiled method. A caller index
//! past the table or one that repeats ends the walk with an error.

use std::collections::BTreeMap;

use thiserror::Error;

use super::{Metadata, StackMap, UNLOADED_METHOD};

/// J9Method address → `pkg/Class.method(Sig)Ret`.
pub type MethodNames = BTreeMap<u64, String>;

/// One frame of a chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineFrame {
    /// J9Method address of the frame's method ([`super::UNLOADED_METHOD`] once unloaded).
    pub method: u64,
    /// The method's name, or a bracketed placeholder when the names do not have it.
    pub name: String,
    /// Bytecode index in the method where the frame is.
    pub bytecode_index: i32,
    /// The inlined call site this frame is; `None` for the compiled (outermost) method.
    pub call_site: Option<usize>,
}

/// Why an address has no inline chain.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum LookupError {
    /// The address is in neither the warm nor the cold code of the body.
    #[error("{pc:#x} is outside the body's warm and cold ranges")]
    OutsideBody {
        /// The address looked up.
        pc: u64,
    },
    /// The metadata has no stack atlas, so no stack maps.
    #[error("the metadata has no stack atlas")]
    NoStackAtlas,
    /// No stack map's range covers the address.
    #[error("no stack map covers offset {offset:#x}")]
    NoMap {
        /// Offset of the address from startPC, in bytes.
        offset: u64,
    },
    /// A caller index points past the inlined call sites.
    #[error("caller index {index} is past the {count} inlined call sites")]
    BadCallerIndex {
        /// The caller index read.
        index: i32,
        /// How many inlined call sites the metadata has.
        count: usize,
        /// The frames found before it, innermost first.
        partial: Vec<InlineFrame>,
    },
    /// The caller indexes lead back to a call site already visited.
    #[error("caller index {index} repeats: the inlined call sites form a cycle")]
    CallerCycle {
        /// The call site reached twice.
        index: usize,
        /// The frames found before it, innermost first.
        partial: Vec<InlineFrame>,
    },
}

impl Metadata {
    /// The chain at `pc`, an exact instruction address (a sampled IP), innermost first.
    pub fn lookup(&self, pc: u64, names: &MethodNames) -> Result<Vec<InlineFrame>, LookupError> {
        if !self.contains(pc) {
            return Err(LookupError::OutsideBody { pc });
        }
        let map = self.map_at(pc.wrapping_sub(self.header.start_pc))?;
        self.chain(map, names)
    }

    /// The chain at a return address (a caller frame): the offset is `ret - startPC - 1`, the
    /// call instruction's last byte; like OpenJ9, retry at `ret - startPC` when no map has it.
    pub fn lookup_return_address(
        &self,
        ret: u64,
        names: &MethodNames,
    ) -> Result<Vec<InlineFrame>, LookupError> {
        let pc = ret.wrapping_sub(1);
        if !self.contains(pc) {
            return Err(LookupError::OutsideBody { pc: ret });
        }
        let offset = pc.wrapping_sub(self.header.start_pc);
        let map = match self.map_at(offset) {
            Err(LookupError::NoMap { .. }) => self.map_at(offset.wrapping_add(1))?,
            other => other?,
        };
        self.chain(map, names)
    }

    /// The first map whose range covers `offset` (maps are in ascending order).
    fn map_at(&self, offset: u64) -> Result<&StackMap, LookupError> {
        let atlas = self.stack_atlas.as_ref().ok_or(LookupError::NoStackAtlas)?;
        let off = offset as i64;
        atlas
            .maps
            .iter()
            .find(|m| m.low_code_offset as i64 <= off && off <= m.range_end)
            .ok_or(LookupError::NoMap { offset })
    }

    fn frame(
        &self,
        method: u64,
        bci: i32,
        site: Option<usize>,
        names: &MethodNames,
    ) -> InlineFrame {
        let name = match names.get(&method) {
            Some(n) => n.clone(),
            None if method == UNLOADED_METHOD => "[unloaded inlined method]".to_string(),
            None => format!("[J9Method {method:#x}]"),
        };
        InlineFrame {
            method,
            name,
            bytecode_index: bci,
            call_site: site,
        }
    }

    fn chain(&self, map: &StackMap, names: &MethodNames) -> Result<Vec<InlineFrame>, LookupError> {
        let sites = &self.inlined_call_sites;
        let mut frames = Vec::new();
        let mut seen = vec![false; sites.len()];
        let mut caller = map.bytecode_info.caller_index();
        let mut bci = map.bytecode_info.bytecode_index();
        while caller >= 0 {
            let index = caller as usize;
            let Some(site) = sites.get(index) else {
                return Err(LookupError::BadCallerIndex {
                    index: caller,
                    count: sites.len(),
                    partial: frames,
                });
            };
            if std::mem::replace(&mut seen[index], true) {
                return Err(LookupError::CallerCycle {
                    index,
                    partial: frames,
                });
            }
            frames.push(self.frame(site.method, bci, Some(index), names));
            caller = site.bytecode_info.caller_index();
            bci = site.bytecode_info.bytecode_index();
        }
        frames.push(self.frame(self.header.ram_method, bci, None, names));
        Ok(frames)
    }
}
