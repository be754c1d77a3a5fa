//! Kernel symbols from /proc/kallsyms: sorted text symbols, looked up by address. When the
//! kernel hides addresses (kptr_restrict), every address reads as 0 and `hidden` says so.

use std::sync::{Arc, OnceLock};

use crate::format::procfs;

/// Module name shown for kernel frames.
pub(super) const KERNEL_MODULE: &str = "[kernel.kallsyms]";

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
    /// Read a block of lines at a time: the text (5 MB and more) is never held whole.
    pub fn load() -> Self {
        use std::io::Read;
        let Ok(mut file) = std::fs::File::open("/proc/kallsyms") else {
            return Self {
                hidden: true,
                ..Self::default()
            };
        };
        let mut table = Builder::default();
        let mut block = Vec::with_capacity(KALLSYMS_BLOCK);
        let mut chunk = vec![0u8; KALLSYMS_BLOCK];
        loop {
            let n = match file.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            block.extend_from_slice(&chunk[..n]);
            // Whole lines now, the partial last line with the next read.
            let Some(end) = block.iter().rposition(|&b| b == b'\n') else {
                continue;
            };
            if !table.add(&block[..=end]) {
                return table.finish();
            }
            block.drain(..=end);
        }
        table.add(&block);
        table.finish()
    }

    /// Text symbols (`t`, `T`, `W`, `w`) of a kallsyms text. A damaged line ends the table
    /// (the entries before it are kept sorted).
    #[cfg(test)]
    pub fn from_kallsyms(text: &[u8]) -> Self {
        let mut table = Builder::default();
        table.add(text);
        table.finish()
    }

    /// The symbol containing a kernel address (the nearest one at or below it).
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let idx = self.symbols.partition_point(|s| s.0 <= addr);
        let &(_, start, len) = self.symbols.get(idx.checked_sub(1)?)?;
        self.names.get(start as usize..(start + len) as usize)
    }
}

/// Bytes of /proc/kallsyms read at a time.
const KALLSYMS_BLOCK: usize = 256 * 1024;

/// The table as it is read.
#[derive(Default)]
struct Builder {
    any: bool,
    names: String,
    symbols: Vec<(u64, u32, u32)>,
}

impl Builder {
    /// Adds the text symbols of whole kallsyms lines; false once a line is damaged (the rest
    /// is not read).
    fn add(&mut self, text: &[u8]) -> bool {
        for entry in procfs::kallsyms_entries(text) {
            let Ok(e) = entry else { return false };
            self.any = true;
            if !matches!(e.kind, 't' | 'T' | 'W' | 'w') || e.addr == 0 {
                continue;
            }
            let (Ok(start), Ok(len)) =
                (u32::try_from(self.names.len()), u32::try_from(e.name.len()))
            else {
                return false;
            };
            self.names.push_str(e.name);
            self.symbols.push((e.addr, start, len));
        }
        true
    }

    fn finish(self) -> KernelSymbols {
        let Builder {
            any,
            mut names,
            mut symbols,
        } = self;
        // By address, then name (the first name of an address is kept).
        symbols.sort_by(|a, b| {
            let name = |s: &(u64, u32, u32)| &names[s.1 as usize..(s.1 + s.2) as usize];
            a.0.cmp(&b.0).then_with(|| name(a).cmp(name(b)))
        });
        symbols.dedup_by_key(|s| s.0);
        symbols.shrink_to_fit();
        names.shrink_to_fit();
        KernelSymbols {
            hidden: any && symbols.is_empty(),
            symbols,
            names,
        }
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
    fn reading_in_blocks_gives_the_table_of_the_whole_text() {
        // /proc/kallsyms changes while BPF programs load and unload (other tests load
        // jprof's own): compare a block read taken between two identical whole reads.
        let read_whole = || KernelSymbols::from_kallsyms(&std::fs::read("/proc/kallsyms").unwrap());
        let (whole, blocks) = (0..50)
            .find_map(|_| {
                let before = read_whole();
                let blocks = KernelSymbols::load();
                let after = read_whole();
                (before.symbols == after.symbols && before.names == after.names)
                    .then_some((after, blocks))
            })
            .expect("/proc/kallsyms never stayed the same across one block read");
        assert!(
            whole.symbols.len() > 1000,
            "{} symbols",
            whole.symbols.len()
        );
        assert_eq!(blocks.symbols, whole.symbols);
        assert_eq!(blocks.names, whole.names);
        assert_eq!(blocks.hidden, whole.hidden);
    }

    #[test]
    fn all_zero_means_hidden() {
        let k = KernelSymbols::from_kallsyms(b"0000000000000000 T a\n0000000000000000 t b\n");
        assert!(k.hidden);
        assert_eq!(k.lookup(0xffffffff81000000), None);
    }
}
