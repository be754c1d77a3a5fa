//! Kernel symbols from /proc/kallsyms: sorted text symbols, looked up by address. When the
//! kernel hides addresses (kptr_restrict), every address reads as 0 and `hidden` says so.

use std::sync::{Arc, OnceLock};

use crate::format::procfs;

/// This machine's kallsyms, read once per jprof process (reading and parsing it takes tens of
/// milliseconds; it only changes when modules load).
pub fn this_machine() -> Arc<KernelSymbols> {
    static KALLSYMS: OnceLock<Arc<KernelSymbols>> = OnceLock::new();
    KALLSYMS
        .get_or_init(|| Arc::new(KernelSymbols::load()))
        .clone()
}

/// The note shown when kallsyms addresses are hidden.
pub const HIDDEN_NOTE: &str = "kernel symbols hidden: /proc/kallsyms shows only zero addresses \
     (kptr_restrict); fix: `sysctl kernel.kptr_restrict=0` or run jprof as root";

#[derive(Debug, Default)]
pub struct KernelSymbols {
    /// (address, name), sorted by address.
    symbols: Vec<(u64, String)>,
    /// kallsyms was readable but every address was 0.
    pub hidden: bool,
}

impl KernelSymbols {
    /// Reads this machine's /proc/kallsyms; an unreadable file gives an empty, hidden table.
    pub fn load() -> Self {
        match std::fs::read("/proc/kallsyms") {
            Ok(text) => Self::from_kallsyms(&text),
            Err(_) => Self {
                symbols: Vec::new(),
                hidden: true,
            },
        }
    }

    /// Text symbols (`t`, `T`, `W`, `w`) of a kallsyms text. A damaged line ends the table
    /// (the entries before it are kept sorted).
    pub fn from_kallsyms(text: &[u8]) -> Self {
        let entries = procfs::parse_kallsyms(text).unwrap_or_else(|e| {
            let good = &text[..e.offset.min(text.len())];
            procfs::parse_kallsyms(good).unwrap_or_default()
        });
        let any = !entries.is_empty();
        let mut symbols: Vec<(u64, String)> = entries
            .into_iter()
            .filter(|e| matches!(e.kind, 't' | 'T' | 'W' | 'w') && e.addr != 0)
            .map(|e| (e.addr, e.name.to_string()))
            .collect();
        symbols.sort();
        symbols.dedup_by_key(|s| s.0);
        Self {
            hidden: any && symbols.is_empty(),
            symbols,
        }
    }

    /// The symbol containing a kernel address (the nearest one at or below it).
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let idx = self.symbols.partition_point(|s| s.0 <= addr);
        self.symbols.get(idx.checked_sub(1)?).map(|s| s.1.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_nearest_below() {
        let k = KernelSymbols::from_kallsyms(
            b"ffffffff81000100 T b\nffffffff81000000 t a\nffffffff82000000 D data\n",
        );
        assert!(!k.hidden);
        assert_eq!(k.lookup(0xffffffff81000050), Some("a"));
        assert_eq!(k.lookup(0xffffffff81000100), Some("b"));
        assert_eq!(k.lookup(0x1000), None);
    }

    #[test]
    fn all_zero_means_hidden() {
        let k = KernelSymbols::from_kallsyms(b"0000000000000000 T a\n0000000000000000 t b\n");
        assert!(k.hidden);
        assert_eq!(k.lookup(0xffffffff81000000), None);
    }
}
