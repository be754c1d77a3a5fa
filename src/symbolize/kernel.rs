//! Kernel symbols from /proc/kallsyms: sorted text symbols, looked up by address; the whole
//! table (reports), or only the symbols some addresses need (`jprof record`'s end). When the
//! kernel hides addresses (kptr_restrict), every address reads as 0 and `hidden` says so.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use super::kernel_cache::{CacheWriter, Probe};
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
    /// Read from the kernel text cache (`kernel_cache`): the symbols are those of the kernel
    /// image, `[_stext, _einittext)` in this boot; other addresses are looked up in `rest`.
    image: Option<Range<u64>>,
    /// The whole /proc/kallsyms, read when an address outside `image` is looked up.
    rest: OnceLock<Box<KernelSymbols>>,
}

impl KernelSymbols {
    /// This machine's kernel symbols: the kernel image's from the cache when it has them
    /// (the rest from /proc/kallsyms when needed), else /proc/kallsyms read whole (and the
    /// cache written). An unreadable file gives an empty, hidden table.
    pub fn load() -> Self {
        Self::load_with(Probe::this_machine())
    }

    fn load_with(probe: Option<Probe>) -> Self {
        if let Some(probe) = &probe {
            let mut table = Builder::relative_to(probe.base);
            if let Some(image) = probe.read(|text| table.add(text)) {
                return Self {
                    image: Some(image),
                    ..table.finish()
                };
            }
        }
        Self::from_proc(probe.and_then(|p| p.writer()))
    }

    /// /proc/kallsyms read whole, its image's text symbols written to `cache` as it is read.
    fn from_proc(cache: Option<CacheWriter>) -> Self {
        let mut table = Builder::default();
        if !read_proc(|text| table.add(text), cache) {
            return Self {
                hidden: true,
                ..Self::default()
            };
        }
        table.finish()
    }

    /// The symbols of this machine's /proc/kallsyms that `addrs` need: a lookup of one of them
    /// gives what a lookup in the whole table gives, but only the symbol of each is kept (a
    /// recording hits a few thousand kernel addresses; the table has 100 000 symbols and more,
    /// 5 MB). An unreadable file gives an empty, hidden table.
    pub fn of_addresses(addrs: &[u64]) -> Self {
        Self::of_addresses_with(addrs, Probe::this_machine())
    }

    /// From the kernel text cache when all of `addrs` lie in the kernel image.
    fn of_addresses_with(addrs: &[u64], probe: Option<Probe>) -> Self {
        let mut cached = false;
        if let Some(probe) = &probe {
            let mut table = Selection::new(addrs).relative_to(probe.base);
            let image = probe.read(|text| table.add(text));
            if image
                .as_ref()
                .is_some_and(|image| addrs.iter().all(|a| image.contains(a)))
            {
                return table.finish();
            }
            cached = image.is_some();
        }
        // A whole cache file is not written again.
        let cache = probe.filter(|_| !cached).and_then(|p| p.writer());
        let mut table = Selection::new(addrs);
        if !read_proc(|text| table.add(text), cache) {
            return Self {
                hidden: true,
                ..Self::default()
            };
        }
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

    /// [`KernelSymbols::of_addresses`] of a kallsyms text, handed over `blocks` lines at a time.
    #[cfg(test)]
    fn of_addresses_in(text: &[u8], addrs: &[u64], blocks: usize) -> Self {
        let mut table = Selection::new(addrs);
        let lines: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
        for block in lines.chunks(blocks.max(1)) {
            if !table.add(&block.concat()) {
                break;
            }
        }
        table.finish()
    }

    /// The symbol containing a kernel address (the nearest one at or below it).
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        if self
            .image
            .as_ref()
            .is_some_and(|image| !image.contains(&addr))
        {
            return self
                .rest
                .get_or_init(|| Box::new(Self::from_proc(None)))
                .lookup(addr);
        }
        let idx = self.symbols.partition_point(|s| s.0 <= addr);
        let &(_, start, len) = self.symbols.get(idx.checked_sub(1)?)?;
        self.names.get(start as usize..(start + len) as usize)
    }
}

/// Bytes of /proc/kallsyms read at a time.
const KALLSYMS_BLOCK: usize = 256 * 1024;

/// Hands /proc/kallsyms to `add` a block of whole lines at a time (the text, 5 MB and more, is
/// never held whole) until `add` says stop; false when the file cannot be opened.
fn read_kallsyms(mut add: impl FnMut(&[u8]) -> bool) -> bool {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open("/proc/kallsyms") else {
        return false;
    };
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
        if !add(&block[..=end]) {
            return true;
        }
        block.drain(..=end);
    }
    add(&block);
    true
}

/// [`read_kallsyms`] handing each block to `cache` too, which is put in place when `add` took
/// the whole file; false when the file cannot be opened.
fn read_proc(mut add: impl FnMut(&[u8]) -> bool, mut cache: Option<CacheWriter>) -> bool {
    let mut whole = true;
    let readable = read_kallsyms(|text| {
        if let Some(cache) = &mut cache {
            cache.add(text);
        }
        whole = add(text);
        whole
    });
    if let Some(cache) = cache.filter(|_| readable && whole) {
        cache.finish();
    }
    readable
}

/// Calls `symbol` with each text symbol (`t`, `T`, `W`, `w`, address not 0) of whole kallsyms
/// lines; sets `any` when a line was read; false once a line is damaged (the rest is not read).
/// With a `base`, the lines are the kernel text cache's: addresses are offsets from it.
fn text_symbols(
    text: &[u8],
    base: Option<u64>,
    any: &mut bool,
    mut symbol: impl FnMut(u64, &str) -> bool,
) -> bool {
    for entry in procfs::kallsyms_entries(text) {
        let Ok(e) = entry else { return false };
        *any = true;
        if !matches!(e.kind, 't' | 'T' | 'W' | 'w') {
            continue;
        }
        let addr = match base {
            None if e.addr == 0 => continue,
            None => e.addr,
            Some(base) => match base.checked_add(e.addr) {
                Some(addr) => addr,
                None => return false,
            },
        };
        if !symbol(addr, e.name) {
            return false;
        }
    }
    true
}

/// The symbols some addresses need, found as kallsyms is read (its symbols are not sorted
/// across modules). Slot `i` keeps the best symbol starting in `(addrs[i - 1], addrs[i]]`:
/// the highest start, then the smallest name (as the whole table keeps one name an address);
/// the symbol of `addrs[i]` is then the last slot at or before `i` that holds one.
struct Selection {
    /// Sorted, without repeats.
    addrs: Vec<u64>,
    slots: Vec<Option<(u64, Box<str>)>>,
    any: bool,
    /// Whether any text symbol had an address.
    some_text: bool,
    /// The kernel text cache's base (`text_symbols`).
    base: Option<u64>,
}

impl Selection {
    fn new(addrs: &[u64]) -> Self {
        let mut addrs = addrs.to_vec();
        addrs.sort_unstable();
        addrs.dedup();
        Self {
            slots: vec![None; addrs.len()],
            addrs,
            any: false,
            some_text: false,
            base: None,
        }
    }

    fn relative_to(self, base: u64) -> Self {
        Self {
            base: Some(base),
            ..self
        }
    }

    /// Takes in whole kallsyms lines; false once a line is damaged.
    fn add(&mut self, text: &[u8]) -> bool {
        let Self {
            addrs,
            slots,
            any,
            some_text,
            base,
        } = self;
        text_symbols(text, *base, any, |addr, name| {
            *some_text = true;
            let i = addrs.partition_point(|&a| a < addr);
            if let Some(slot) = slots.get_mut(i) {
                let better = slot.as_ref().is_none_or(|(best, best_name)| {
                    addr > *best || (addr == *best && name < &**best_name)
                });
                if better {
                    *slot = Some((addr, name.into()));
                }
            }
            true
        })
    }

    fn finish(self) -> KernelSymbols {
        let mut names = String::new();
        let mut symbols: Vec<(u64, u32, u32)> = Vec::new();
        for slot in self.slots.into_iter().flatten() {
            // Slots hold ascending starts; each name is stored once.
            let (Ok(start), Ok(len)) = (u32::try_from(names.len()), u32::try_from(slot.1.len()))
            else {
                break;
            };
            names.push_str(&slot.1);
            symbols.push((slot.0, start, len));
        }
        KernelSymbols {
            hidden: self.any && !self.some_text,
            symbols,
            names,
            ..KernelSymbols::default()
        }
    }
}

/// The table as it is read.
#[derive(Default)]
struct Builder {
    any: bool,
    names: String,
    symbols: Vec<(u64, u32, u32)>,
    /// The kernel text cache's base (`text_symbols`).
    base: Option<u64>,
}

impl Builder {
    fn relative_to(base: u64) -> Self {
        Self {
            base: Some(base),
            ..Self::default()
        }
    }

    /// Adds the text symbols of whole kallsyms lines; false once a line is damaged (the rest
    /// is not read).
    fn add(&mut self, text: &[u8]) -> bool {
        let Self {
            any,
            names,
            symbols,
            base,
        } = self;
        text_symbols(text, *base, any, |addr, name| {
            let (Ok(start), Ok(len)) = (u32::try_from(names.len()), u32::try_from(name.len()))
            else {
                return false;
            };
            names.push_str(name);
            symbols.push((addr, start, len));
            true
        })
    }

    fn finish(self) -> KernelSymbols {
        let Builder {
            any,
            mut names,
            mut symbols,
            ..
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
            ..KernelSymbols::default()
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
                let blocks = KernelSymbols::from_proc(None);
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
        let text = b"0000000000000000 T a\n0000000000000000 t b\n";
        let k = KernelSymbols::from_kallsyms(text);
        assert!(k.hidden);
        assert_eq!(k.lookup(0xffffffff81000000), None);
        let some = KernelSymbols::of_addresses_in(text, &[0xffffffff81000000], 1);
        assert!(some.hidden);
        assert_eq!(some.lookup(0xffffffff81000000), None);
        // Nothing read is not hidden; text symbols with addresses, none of them needed, are not.
        assert!(!KernelSymbols::of_addresses_in(b"", &[1], 1).hidden);
        assert!(!KernelSymbols::of_addresses_in(b"ffffffff81000000 T a\n", &[1], 1).hidden);
    }

    /// A kallsyms text of `n` symbols in no order: text and other kinds, repeated addresses
    /// with other names, zero addresses, module symbols.
    fn random_kallsyms(rng: &mut fastrand::Rng, n: usize) -> (Vec<u8>, u64, u64) {
        let (low, high) = (0xffffffff81000000u64, 0xffffffff81000000u64 + 64 * n as u64);
        let mut text = String::new();
        let mut starts: Vec<u64> = Vec::new();
        for i in 0..n {
            let addr = match rng.u8(..10) {
                0 if !starts.is_empty() => starts[rng.usize(..starts.len())],
                1 => 0,
                _ => rng.u64(low..high),
            };
            starts.push(addr);
            let kind = ['t', 'T', 'W', 'w', 'd', 'D', 'b', 'r'][rng.usize(..8)];
            let name = format!("f{}_{}", rng.u32(..1000), i);
            let module = if rng.bool() { " [mod]" } else { "" };
            text.push_str(&format!("{addr:016x} {kind} {name}{module}\n"));
        }
        (text.into_bytes(), low, high)
    }

    #[test]
    fn a_selection_names_its_addresses_as_the_whole_table_does() {
        let mut rng = fastrand::Rng::with_seed(28);
        for round in 0..200 {
            let n = rng.usize(1..400);
            let (text, low, high) = random_kallsyms(&mut rng, n);
            let whole = KernelSymbols::from_kallsyms(&text);
            // Addresses below, inside and past the symbols, the starts themselves among them.
            let mut addrs: Vec<u64> = (0..rng.usize(1..60))
                .map(|_| rng.u64(low - 1000..high + 1000))
                .collect();
            addrs.extend(whole.symbols.iter().take(5).map(|s| s.0));
            addrs.push(addrs[0]);
            let some = KernelSymbols::of_addresses_in(&text, &addrs, rng.usize(1..50));
            assert_eq!(some.hidden, whole.hidden, "round {round}");
            for &a in &addrs {
                assert_eq!(some.lookup(a), whole.lookup(a), "round {round}, {a:#x}");
            }
            // One symbol kept per address at most.
            assert!(some.symbols.len() <= addrs.len());
        }
    }

    #[test]
    fn a_selection_of_this_machines_kallsyms_names_as_the_whole_table_does() {
        let text = std::fs::read("/proc/kallsyms").unwrap();
        let whole = KernelSymbols::from_kallsyms(&text);
        assert!(whole.symbols.len() > 1000, "{}", whole.symbols.len());
        let (low, high) = (whole.symbols[0].0, whole.symbols[whole.symbols.len() - 1].0);
        let mut rng = fastrand::Rng::with_seed(5);
        let addrs: Vec<u64> = (0..5000).map(|_| rng.u64(low - 16..high + 4096)).collect();
        let some = KernelSymbols::of_addresses_in(&text, &addrs, 4096);
        for &a in &addrs {
            assert_eq!(some.lookup(a), whole.lookup(a), "{a:#x}");
        }
        assert!(some.symbols.len() <= addrs.len());
    }

    #[test]
    fn a_damaged_line_ends_the_selection_as_it_ends_the_table() {
        let text =
            b"ffffffff81000000 T a\nffffffff81000100 T b\nnot a line\nffffffff81000080 T c\n";
        let whole = KernelSymbols::from_kallsyms(text);
        let some = KernelSymbols::of_addresses_in(text, &[0xffffffff81000090], 1);
        assert_eq!(whole.lookup(0xffffffff81000090), Some("a"));
        assert_eq!(some.lookup(0xffffffff81000090), Some("a"));
    }

    #[test]
    fn the_kernel_text_cache_names_as_kallsyms_does() {
        let tmp = tempfile::tempdir().unwrap();
        let probe = || Probe::this_kernel_in(tmp.path().to_path_buf());
        let Some(first) = probe() else {
            // Not an error: this kernel has no build-id note or hides its addresses.
            eprintln!("no kernel text cache on this machine (no build-id or hidden addresses)");
            return;
        };
        let written = KernelSymbols::load_with(Some(first));
        assert!(written.image.is_none(), "read from /proc/kallsyms");
        assert_eq!(
            std::fs::read_dir(tmp.path()).unwrap().count(),
            1,
            "the cache file"
        );
        let cached = KernelSymbols::load_with(probe());
        let image = cached.image.clone().expect("read from the cache");
        assert!(image.end - image.start > 1 << 20, "{image:x?}");
        assert!(cached.rest.get().is_none(), "kallsyms not read");
        // The idle tasks' stacks start in the init text: inside the range.
        let start_kernel = written.symbols.iter().find(|s| {
            written.names.get(s.1 as usize..(s.1 + s.2) as usize) == Some("start_kernel")
        });
        if let Some(&(addr, ..)) = start_kernel {
            assert!(image.contains(&(addr + 1)), "{addr:#x} outside {image:x?}");
        }
        // Every symbol of the image, each address between and both ends, name the same.
        let mut addrs: Vec<u64> = written
            .symbols
            .iter()
            .filter(|s| image.contains(&s.0))
            .flat_map(|s| [s.0, s.0 + 1])
            .collect();
        addrs.extend([image.start, image.end - 1]);
        assert!(addrs.len() > 2000, "{}", addrs.len());
        for &a in &addrs {
            assert_eq!(cached.lookup(a), written.lookup(a), "{a:#x}");
        }
        assert!(
            cached.rest.get().is_none(),
            "kallsyms not read for the image"
        );
        // Past the image: /proc/kallsyms, read then.
        assert_eq!(cached.lookup(image.end), written.lookup(image.end));
        assert!(cached.rest.get().is_some());
        // The end's selection from the cache names its addresses as the whole table does.
        let some = KernelSymbols::of_addresses_with(&addrs[..4000.min(addrs.len())], probe());
        for &a in &addrs[..4000.min(addrs.len())] {
            assert_eq!(some.lookup(a), written.lookup(a), "{a:#x}");
        }
        // An address outside the image sends the selection to /proc/kallsyms.
        let beyond = [image.start + 64, image.end + 16];
        let some = KernelSymbols::of_addresses_with(&beyond, probe());
        for a in beyond {
            assert_eq!(some.lookup(a), written.lookup(a), "{a:#x}");
        }
    }
}
