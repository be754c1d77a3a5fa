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
    /// (address, where the name starts in `names`, its length), sorted by address: 16 bytes
    /// a symbol, as the table has 100 000 or more.
    symbols: Vec<(u64, u32, u32)>,
    names: String,
    /// kallsyms was readable but every address was 0.
    pub hidden: bool,
}

impl KernelSymbols {
    /// Reads this machine's /proc/kallsyms; an unreadable file gives an empty, hidden table.
    pub fn load() -> Self {
        match std::fs::read("/proc/kallsyms") {
            Ok(text) => Self::from_kallsyms(&text),
            Err(_) => Self {
                hidden: true,
                ..Self::default()
            },
        }
    }

    /// Text symbols (`t`, `T`, `W`, `w`) of a kallsyms text. A damaged line ends the table
    /// (the entries before it are kept sorted).
    pub fn from_kallsyms(text: &[u8]) -> Self {
        let mut any = false;
        let mut names = String::new();
        let mut symbols = Vec::new();
        for entry in procfs::kallsyms_entries(text) {
            let Ok(e) = entry else { break };
            any = true;
            if !matches!(e.kind, 't' | 'T' | 'W' | 'w') || e.addr == 0 {
                continue;
            }
            let (Ok(start), Ok(len)) = (u32::try_from(names.len()), u32::try_from(e.name.len()))
            else {
                break;
            };
            names.push_str(e.name);
            symbols.push((e.addr, start, len));
        }
        // By address, then name (the first name of an address is kept).
        symbols.sort_by(|a, b| {
            let name = |s: &(u64, u32, u32)| &names[s.1 as usize..(s.1 + s.2) as usize];
            a.0.cmp(&b.0).then_with(|| name(a).cmp(name(b)))
        });
        symbols.dedup_by_key(|s| s.0);
        symbols.shrink_to_fit();
        Self {
            hidden: any && symbols.is_empty(),
            symbols,
            names,
        }
    }

    /// The symbol containing a kernel address (the nearest one at or below it).
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let idx = self.symbols.partition_point(|s| s.0 <= addr);
        let &(_, start, len) = self.symbols.get(idx.checked_sub(1)?)?;
        self.names.get(start as usize..(start + len) as usize)
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
