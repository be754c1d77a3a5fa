//! Interned frames per named address, so an address seen again costs one cheap hash instead of
//! building its frames (strings included) and interning each of them again. Only for sources
//! whose answer does not depend on time: native code (keyed by its mapping and offset) and the
//! kernel. JIT code is looked up every time.
//!
//! In front of that, `by_address` answers an address of one process in one state of its
//! mappings (its generation) without finding the mapping or its path at all.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::profile::FrameId;

/// A mapping path compared by identity. Holding the `Arc` keeps its address from being reused
/// by another path while the key exists.
#[derive(Clone, Debug)]
pub struct SamePath(pub Arc<str>);

impl PartialEq for SamePath {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SamePath {}

impl Hash for SamePath {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.0) as *const u8 as usize).hash(state);
    }
}

/// (mapping path, looked-up file offset, shown file offset); without a mapping, the address.
pub type UserKey = (Option<SamePath>, u64, u64);

/// (pid, mapping generation, address, exact): fixes the mapping, hence the answer.
pub type AddressKey = (u32, u64, u64, bool);

/// A user address's answer in one process state.
#[derive(Debug)]
pub struct AddressHit {
    /// Root-first frame ids.
    pub ids: Box<[FrameId]>,
    /// When the address stayed unknown: the mapping's path, or None outside every mapping.
    pub unknown: Option<Option<Arc<str>>>,
    /// Times it was answered from here, so the unknown-frame counts can be completed.
    pub repeats: u64,
}

#[derive(Debug, Default)]
pub struct FrameCache {
    /// Per thread: its name as last seen and that root frame.
    pub roots: FxHashMap<u32, (String, FrameId)>,
    pub by_address: FxHashMap<AddressKey, AddressHit>,
    /// Root-first frame ids of one user address.
    pub user: FxHashMap<UserKey, Box<[FrameId]>>,
    /// (address, exact) → the frame and whether a symbol named it.
    pub kernel: FxHashMap<(u64, bool), (FrameId, bool)>,
}
