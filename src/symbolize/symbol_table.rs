//! A binary's function symbols by address, sorted only where addresses are looked up. A large
//! binary (`node`, `libLLVM`) has a few hundred thousand symbols, most of them listed twice
//! (.symtab and .dynsym), while a recording hits a few hundred of its addresses: sorting the
//! whole table and comparing the names of every alias (which reads most of its tens of MiB of
//! string tables) cost more than all the naming. The symbols are instead put in buckets of
//! addresses in one pass (a counting sort, no comparisons), and a bucket is sorted by address
//! the first time an address in it is looked up; the aliases at one address are chosen between
//! (their names compared) only when a lookup reaches that address, so only the names of the
//! functions hit are read, not those of their neighbours in the bucket. The answers are those
//! of the whole table sorted (`tests::lookups_match_the_whole_sorted_table`).

use std::borrow::Cow;
use std::cmp::Reverse;
use std::sync::OnceLock;

/// One function symbol: 16 bytes (a large binary has a few hundred thousand; `node`'s 150 000
/// took 3.7 MB at 24 bytes, held through the end's walk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Symbol {
    pub(super) addr: u64,
    /// The size (at most [`MAX_SIZE`]) and, in the top 2 bits, the rank.
    size_rank: u32,
    /// Where the name starts in its string table (ELF's `st_name`, below [`MAX_NAME`]) and, in
    /// the top 2 bits, which of the binary's string tables holds it.
    name_strings: u32,
}

/// The largest size a symbol keeps (1 GiB less a byte): a function larger than that is
/// counted as that large.
const MAX_SIZE: u64 = (1 << 30) - 1;
/// Names start below this offset of their string table (1 GiB).
pub(super) const MAX_NAME: u32 = 1 << 30;
/// How many string tables a binary's symbols name (`.symtab`'s and `.dynsym`'s, in the binary
/// and in its separate debug file).
pub(super) const MAX_STRING_TABLES: usize = 4;

impl Symbol {
    /// A symbol of `size` bytes (cut to [`MAX_SIZE`]) named at `name` (below [`MAX_NAME`],
    /// else None) of string table `strings` (below [`MAX_STRING_TABLES`]); `rank`: which alias
    /// wins at one address, 0 global, 1 weak, 2 local.
    pub(super) fn new(addr: u64, size: u64, name: u32, strings: u8, rank: u8) -> Option<Self> {
        if name >= MAX_NAME || usize::from(strings) >= MAX_STRING_TABLES || rank > 3 {
            return None;
        }
        Some(Self {
            addr,
            size_rank: size.min(MAX_SIZE) as u32 | u32::from(rank) << 30,
            name_strings: name | u32::from(strings) << 30,
        })
    }

    /// Its size in bytes (0: unknown).
    pub(super) fn size(&self) -> u64 {
        u64::from(self.size_rank & MAX_SIZE as u32)
    }

    /// Which alias wins at one address: 0 global, 1 weak, 2 local.
    pub(super) fn rank(&self) -> u8 {
        (self.size_rank >> 30) as u8
    }

    /// Where the name starts in its string table: the name ends at the first NUL (found when
    /// it is shown).
    pub(super) fn name(&self) -> u32 {
        self.name_strings & (MAX_NAME - 1)
    }

    /// Which of the binary's string tables (`StringTable`) holds the name.
    pub(super) fn strings(&self) -> u8 {
        (self.name_strings >> 30) as u8
    }
}

/// A string table of a binary (or of its separate debug file) that symbol names are read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct StringTable {
    /// Where it starts and ends in its file's image.
    pub(super) start: usize,
    pub(super) end: usize,
    /// Whether that file is the separate debug file.
    pub(super) in_debug_file: bool,
}

/// Symbols per bucket, on average: small enough that sorting the buckets of the addresses
/// hit costs nothing, large enough that the bucket index stays a fraction of the table.
const PER_BUCKET: usize = 8;

/// How many symbols back a lookup looks for a sized symbol containing the address (nested or
/// overlapping sized symbols are rare).
const LOOK_BACK: usize = 8;

/// The symbols, grouped by address bucket.
#[derive(Debug, Default)]
pub(super) struct SymbolTable {
    /// Bucket `b` holds `symbols[starts[b]..starts[b + 1]]`, in no order.
    symbols: Vec<Symbol>,
    starts: Vec<usize>,
    /// The lowest address; bucket of `addr`: `(addr - base) >> shift`.
    base: u64,
    shift: u32,
    /// Each bucket sorted by address then rank (aliases kept), made on first use.
    sorted: Vec<OnceLock<Box<[Symbol]>>>,
}

impl SymbolTable {
    /// The table of `symbols` (any order, aliases included).
    pub(super) fn new(mut symbols: Vec<Symbol>) -> Self {
        let (Some(low), Some(high)) = (
            symbols.iter().map(|s| s.addr).min(),
            symbols.iter().map(|s| s.addr).max(),
        ) else {
            return Self::default();
        };
        let wanted = (symbols.len() / PER_BUCKET).max(1) as u64;
        let span = high - low;
        // The smallest shift giving at most `wanted` buckets.
        let mut shift = 0;
        while (span >> shift) >= wanted {
            shift += 1;
        }
        let buckets = (span >> shift) as usize + 1;
        let bucket = |s: &Symbol| ((s.addr - low) >> shift) as usize;
        let mut starts = vec![0usize; buckets + 1];
        for s in &symbols {
            starts[bucket(s) + 1] += 1;
        }
        for b in 0..buckets {
            starts[b + 1] += starts[b];
        }
        // Each symbol is swapped into its bucket in place: the table is never held twice.
        let mut next = starts.clone();
        for b in 0..buckets {
            while next[b] < starts[b + 1] {
                let home = bucket(&symbols[next[b]]);
                if home == b {
                    next[b] += 1;
                } else {
                    symbols.swap(next[b], next[home]);
                    next[home] += 1;
                }
            }
        }
        symbols.shrink_to_fit();
        Self {
            symbols,
            starts,
            base: low,
            shift,
            sorted: (0..buckets).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Every symbol as given (aliases included, in no order).
    #[cfg(test)]
    pub(super) fn all(&self) -> &[Symbol] {
        &self.symbols
    }

    /// Bucket `b` sorted by address, then rank: the aliases of one address side by side, the
    /// best ranked first.
    fn bucket(&self, b: usize) -> &[Symbol] {
        self.sorted[b].get_or_init(|| {
            let mut symbols = self.symbols[self.starts[b]..self.starts[b + 1]].to_vec();
            symbols.sort_unstable_by_key(|s| (s.addr, s.rank()));
            symbols.into_boxed_slice()
        })
    }

    /// The symbol naming `addr`: among the few nearest symbols at or below it, the nearest
    /// sized one containing it; else the nearest when it has no size (hand-written assembly
    /// extends to the next symbol). `name` reads a symbol's name (to choose between aliases).
    pub(super) fn at<'a>(
        &self,
        addr: u64,
        name: impl Fn(&Symbol) -> Cow<'a, [u8]>,
    ) -> Option<Symbol> {
        let first = usize::try_from(addr.checked_sub(self.base)? >> self.shift)
            .unwrap_or(usize::MAX)
            .min(self.sorted.len().checked_sub(1)?);
        // The aliases of each address at or below `addr`, nearest first, across buckets.
        let mut nearest = (0..=first).rev().flat_map(|b| {
            let sorted = self.bucket(b);
            let below = sorted.partition_point(|s| s.addr <= addr);
            sorted[..below].chunk_by(|x, y| x.addr == y.addr).rev()
        });
        let closest = chosen(nearest.next()?, &name);
        if closest.size() > 0 && addr < closest.addr.saturating_add(closest.size()) {
            return Some(closest);
        }
        for aliases in nearest.take(LOOK_BACK - 1) {
            let s = chosen(aliases, &name);
            if s.size() > 0 && addr < s.addr.saturating_add(s.size()) {
                return Some(s);
            }
        }
        (closest.size() == 0).then_some(closest)
    }
}

/// The symbol kept of the aliases at one address (sorted by rank): the best rank, then the
/// smallest name, then the largest size (as `finish_symbols` keeps). Names are read only
/// when two of the best rank are left to choose between.
fn chosen<'a>(aliases: &[Symbol], name: &impl Fn(&Symbol) -> Cow<'a, [u8]>) -> Symbol {
    let mut best = aliases[0];
    let rank = best.rank();
    let mut rivals = aliases[1..]
        .iter()
        .take_while(|s| s.rank() == rank)
        .peekable();
    if rivals.peek().is_none() {
        return best;
    }
    let mut best_name = name(&best);
    for s in rivals {
        let this = name(s);
        if (&this, Reverse(s.size())) < (&best_name, Reverse(best.size())) {
            best = *s;
            best_name = this;
        }
    }
    best
}

/// Sorts by address and keeps one symbol per address: the best rank, then the smallest name,
/// then the largest size (the same name listed twice with different sizes; which one won
/// was left to the sort's order before). How the whole table was sorted before the buckets,
/// for the tests.
#[cfg(test)]
pub(super) fn finish_symbols<'a>(
    symbols: &mut Vec<Symbol>,
    name: impl Fn(&Symbol) -> Cow<'a, [u8]>,
) {
    symbols.sort_unstable_by_key(|s| (s.addr, s.rank()));
    // Within one address the first has the best rank; names are compared only among those
    // of that rank (most are the same name from .symtab and .dynsym).
    let mut kept = 0;
    let mut i = 0;
    while i < symbols.len() {
        let (addr, rank) = (symbols[i].addr, symbols[i].rank());
        let mut best = i;
        let mut j = i + 1;
        while j < symbols.len() && symbols[j].addr == addr {
            let (this, that) = (&symbols[j], &symbols[best]);
            if this.rank() == rank
                && (name(this), Reverse(this.size())) < (name(that), Reverse(that.size()))
            {
                best = j;
            }
            j += 1;
        }
        symbols.swap(kept, best);
        kept += 1;
        i = j;
    }
    symbols.truncate(kept);
}

/// The lookup over the whole table sorted at once by [`finish_symbols`] (how every lookup was
/// answered before the buckets), for the tests.
#[cfg(test)]
pub(super) fn whole_table_at(sorted: &[Symbol], addr: u64) -> Option<Symbol> {
    let idx = sorted.partition_point(|s| s.addr <= addr);
    let nearest = sorted.get(idx.checked_sub(1)?)?;
    for s in sorted[..idx].iter().rev().take(LOOK_BACK) {
        if s.size() > 0 && addr < s.addr.saturating_add(s.size()) {
            return Some(*s);
        }
    }
    (nearest.size() == 0).then_some(*nearest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbol(addr: u64, size: u64, name: u32, rank: u8) -> Symbol {
        Symbol::new(addr, size, name, 0, rank).unwrap()
    }

    /// Every address at, inside, just past and between the symbols of a table with aliases
    /// (same address: ranks and names to choose between), nested and overlapping sizes, size-0
    /// symbols, runs of symbols in one bucket and gaps of empty buckets, named as the whole
    /// table sorted names them. The symbols of real binaries are compared in
    /// `native::tests::lookups_match_the_whole_sorted_table`.
    #[test]
    fn lookups_match_the_whole_sorted_table() {
        // Names are their `name` as bytes (so which name is smaller is known).
        let names: Vec<[u8; 4]> = (0..100u32).map(u32::to_be_bytes).collect();
        let name = |s: &Symbol| Cow::Borrowed(&names[s.name() as usize][..]);
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        let mut random = move |n: u64| rng.u64(..n);
        for round in 0..40 {
            let count = 1 + random(600) as usize;
            let spread = [64, 4096, 1 << 20, 1 << 40][round % 4];
            let mut symbols = Vec::new();
            for i in 0..count {
                let addr = 0x1000 + random(spread);
                let size = match random(4) {
                    0 => 0,
                    1 => random(64) + 1,
                    2 => random(spread / 8 + 1),
                    _ => random(4096) + 1,
                };
                symbols.push(symbol(
                    addr,
                    size,
                    random(50) as u32 + i as u32 % 3,
                    random(3) as u8,
                ));
                // Aliases: another name or rank at the same address.
                if random(3) == 0 {
                    symbols.push(symbol(
                        addr,
                        random(128),
                        random(50) as u32,
                        random(3) as u8,
                    ));
                }
            }
            let mut sorted = symbols.clone();
            finish_symbols(&mut sorted, name);
            let table = SymbolTable::new(symbols);
            let mut probes = vec![0, 0xfff, u64::MAX];
            for s in &sorted {
                probes.extend([
                    s.addr,
                    s.addr.saturating_sub(1),
                    s.addr + 1,
                    s.addr.saturating_add(s.size()),
                    s.addr.saturating_add(s.size() / 2),
                ]);
            }
            probes.extend((0..200).map(|_| 0x1000 + random(spread + 4096)));
            for addr in probes {
                assert_eq!(
                    table.at(addr, name),
                    whole_table_at(&sorted, addr),
                    "round {round}, address {addr:#x}"
                );
            }
        }
    }

    /// A large binary's table holds a few hundred thousand symbols for as long as the end
    /// names: each takes 16 bytes (it took 40, then 24).
    #[test]
    fn a_symbol_takes_16_bytes() {
        assert_eq!(std::mem::size_of::<Symbol>(), 16);
    }

    /// What a symbol is made of reads back as given; a size past 1 GiB is cut, a name past
    /// 1 GiB of its string table or a fifth string table has no symbol.
    #[test]
    fn a_symbol_keeps_what_it_is_made_of() {
        for (size, name, strings, rank) in
            [(0, 1, 0, 0), (16, 7, 3, 2), (MAX_SIZE, MAX_NAME - 1, 2, 1)]
        {
            let s = Symbol::new(0x1234, size, name, strings, rank).unwrap();
            assert_eq!(
                (s.addr, s.size(), s.name(), s.strings(), s.rank()),
                (0x1234, size, name, strings, rank)
            );
        }
        assert_eq!(Symbol::new(1, 1 << 40, 1, 0, 0).unwrap().size(), MAX_SIZE);
        assert_eq!(Symbol::new(1, 1, MAX_NAME, 0, 0), None);
        assert_eq!(Symbol::new(1, 1, 1, 4, 0), None);
    }

    /// A lookup reads the names of the aliases at the address it names and of no other
    /// symbol: a large binary's names are spread over megabytes, and sorting a bucket by name
    /// read those of every alias in it (issue 28).
    #[test]
    fn a_lookup_reads_only_the_names_of_the_aliases_it_chooses_between() {
        let read = std::cell::RefCell::new(Vec::new());
        let name = |s: &Symbol| {
            read.borrow_mut().push(s.name());
            Cow::Owned(s.name().to_be_bytes().to_vec())
        };
        // 64 functions of 16 bytes, each listed twice (.symtab and .dynsym) with equal rank.
        let mut symbols = Vec::new();
        for i in 0..64u32 {
            let addr = 0x1000 + 16 * u64::from(i);
            symbols.push(symbol(addr, 16, 1000 + i, 0));
            symbols.push(symbol(addr, 16, 2000 + i, 0));
        }
        // A local alias of function 10: the global ones win without reading it.
        symbols.push(symbol(0x1000 + 16 * 10, 16, 3010, 2));
        let table = SymbolTable::new(symbols);
        let found = table.at(0x1000 + 16 * 10 + 5, name).unwrap();
        assert_eq!((found.addr, found.name()), (0x1000 + 16 * 10, 1010));
        let mut names = read.take();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names, [1010, 2010]);
        // A function listed once: no name is read.
        let single = SymbolTable::new(vec![symbol(0x1000, 16, 7, 0), symbol(0x1010, 16, 8, 0)]);
        assert_eq!(single.at(0x1012, name).map(|s| s.name()), Some(8));
        assert!(read.borrow().is_empty());
    }

    #[test]
    fn an_empty_table_names_nothing() {
        let table = SymbolTable::new(Vec::new());
        assert_eq!(table.at(0x1000, |_| Cow::Borrowed(&[][..])), None);
    }
}
