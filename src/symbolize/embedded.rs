//! The SYMBOLS chunk payload (`EmbeddedSymbols`, JSON): names for every native and kernel
//! address the samples hit, plus the user stacks that unwinding changed, so a recording is
//! reported without its binaries. Layout and rules: `docs/symbolization.md`.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::native::NativeFrame;

pub const VERSION: u32 = 1;

/// One frame as stored: a name and, from DWARF, where.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct EmbeddedFrame {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// Frames of one binary, by the file offset of the looked-up address (`addr - 1` for return
/// addresses), each list innermost (inlined) first.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct EmbeddedBinary {
    pub path: String,
    /// Lower-case hex, from the MMAP2 record or the ELF note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    pub frames: BTreeMap<u64, Vec<EmbeddedFrame>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct EmbeddedSymbols {
    pub version: u32,
    pub binaries: Vec<EmbeddedBinary>,
    /// Kernel address → symbol name, for every kernel address hit.
    pub kernel: BTreeMap<u64, String>,
    /// kallsyms addresses were hidden when the symbols were embedded.
    pub kernel_hidden: bool,
    /// Unwinding ran when embedding: `stacks` (or the UNWOUND_STACKS chunks) hold every sample
    /// whose user stack differs from its callchain's user part; every other sample's user
    /// stack is its callchain's.
    pub unwound: bool,
    /// Sample record's offset → user addresses after unwinding, innermost first (recordings of
    /// earlier jprof versions; now empty).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stacks: BTreeMap<u64, Vec<u64>>,
    /// The unwound stacks are in UNWOUND_STACKS chunks (`symbolize::unwound`), not `stacks`.
    #[serde(default)]
    pub stacks_in_chunks: bool,
}

impl From<&NativeFrame> for EmbeddedFrame {
    fn from(f: &NativeFrame) -> Self {
        Self {
            name: f.name.clone(),
            file: f.file.clone(),
            line: f.line,
        }
    }
}

impl From<&EmbeddedFrame> for NativeFrame {
    fn from(f: &EmbeddedFrame) -> Self {
        Self {
            name: f.name.clone(),
            file: f.file.clone(),
            line: f.line,
        }
    }
}

/// Embedded symbols with binaries findable by build id and by path.
#[derive(Debug, Default)]
pub struct EmbeddedIndex {
    pub symbols: EmbeddedSymbols,
    by_build_id: HashMap<String, usize>,
    by_path: HashMap<String, usize>,
}

impl EmbeddedIndex {
    pub fn new(symbols: EmbeddedSymbols) -> Self {
        let mut by_build_id = HashMap::new();
        let mut by_path = HashMap::new();
        for (i, b) in symbols.binaries.iter().enumerate() {
            if let Some(id) = &b.build_id {
                by_build_id.insert(id.clone(), i);
            }
            by_path.insert(b.path.clone(), i);
        }
        Self {
            symbols,
            by_build_id,
            by_path,
        }
    }

    /// The binary a mapping refers to: by build id when the mapping has one, else by path.
    pub fn binary(&self, path: &str, build_id: Option<&str>) -> Option<&EmbeddedBinary> {
        let i = match build_id {
            Some(id) => self.by_build_id.get(id)?,
            None => self.by_path.get(path)?,
        };
        self.symbols.binaries.get(*i)
    }
}
