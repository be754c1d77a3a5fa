//! HotSpot's interpreted Java frames. The template interpreter keeps a frame pointer, and every
//! interpreter frame holds its `Method*` three words below it (x86_64
//! `frame::interpreter_frame_method_offset = -3`, in JDK 17 and 25 alike). jprof's agent names
//! every `Method*` (JPROF_METHOD_NAMES), so a frame in the `Interpreter` code whose frame
//! pointer lies in the sample's stack copy is named by the method it runs. Anything less sure
//! (a frame outside the copy, a `Method*` the agent never named) stays `Interpreter`: never a
//! wrong name.

use rustc_hash::FxHashMap;

/// HotSpot's name for its template interpreter's code (a DynamicCodeGenerated blob).
pub(super) const INTERPRETER: &str = "Interpreter";

/// Bytes below an interpreter frame's frame pointer where its `Method*` is.
pub const METHOD_BELOW_FP: u64 = 24;

/// Frames followed along the frame-pointer chain (the unwinder's own limit).
const MAX_CHAIN: usize = 1024;

/// The words of a sample's stack jprof has: its copy (from `sp`), then those the recorder's
/// BPF program read past the copy at sample time (a JPROF_DEEP_FRAMES record: per frame its
/// frame pointer, the saved frame pointer and return address at it, the word three below).
pub struct StackWords<'a> {
    sp: u64,
    copy: &'a [u8],
    deep: FxHashMap<u64, u64>,
}

impl<'a> StackWords<'a> {
    /// `deep`: the record's values, four per frame.
    pub fn new(sp: u64, copy: &'a [u8], deep: &[u64]) -> Self {
        let mut words = FxHashMap::default();
        for f in deep.chunks_exact(4) {
            words.insert(f[0], f[1]);
            words.insert(f[0].wrapping_add(8), f[2]);
            words.insert(f[0].wrapping_sub(METHOD_BELOW_FP), f[3]);
        }
        Self {
            sp,
            copy,
            deep: words,
        }
    }

    /// The word at `addr`, if jprof has it.
    pub fn read(&self, addr: u64) -> Option<u64> {
        let in_copy = addr
            .checked_sub(self.sp)
            .and_then(|at| usize::try_from(at).ok())
            .and_then(|at| self.copy.get(at..at.checked_add(8)?));
        match in_copy {
            Some(word) => Some(u64::from_le_bytes(word.try_into().ok()?)),
            None => self.deep.get(&addr).copied(),
        }
    }

    /// The frame-pointer chain from `bp`, as the kernel walks it for the callchain: the IP
    /// with `bp`, then each return address with its frame's frame pointer (the saved one).
    /// It ends where a frame pointer does not go up the stack or a word is missing.
    pub fn chain(&self, ip: u64, bp: u64) -> Vec<(u64, u64)> {
        let mut out = vec![(ip, bp)];
        let mut fp = bp;
        while out.len() < MAX_CHAIN && fp.is_multiple_of(8) {
            let (Some(saved), Some(ra)) = (self.read(fp), self.read(fp.wrapping_add(8))) else {
                break;
            };
            if ra == 0 {
                break;
            }
            out.push((ra, saved));
            if saved <= fp {
                break;
            }
            fp = saved;
        }
        out
    }
}

/// The `Method*` of each interpreted frame of `user` (the sample's stack, innermost first)
/// from the frame-pointer chain (`chain`, from [`StackWords::chain`]), where `callchain` (the
/// kernel's user callchain, which is that same chain walked by the kernel) agrees with it
/// entry for entry from the IP on. `user` is `callchain` with frames the frameless-leaf fix
/// found inserted among its first entries (docs/symbolization.md): its entries are matched to
/// the callchain's from the outermost end while they are equal, and the rest in order, the
/// callchain's being a subsequence of `user`'s; a stack that is not so gets nothing there.
pub fn methods_on_chain(
    user: &[u64],
    callchain: &[u64],
    chain: &[(u64, u64)],
    interpreted: impl Fn(usize) -> bool,
    read: impl Fn(u64) -> Option<u64>,
) -> Vec<Option<u64>> {
    let mut out = vec![None; user.len()];
    // How much of the callchain the chain explains, from the IP.
    let agree = callchain
        .iter()
        .zip(chain)
        .take_while(|(&c, &(a, _))| c == a)
        .count();
    let shared_tail = user
        .iter()
        .rev()
        .zip(callchain.iter().rev())
        .take_while(|(u, c)| u == c)
        .count();
    // Pairs (user index, callchain index): the shared tail, then the head in order.
    let mut pairs: Vec<(usize, usize)> = (0..shared_tail)
        .map(|t| (user.len() - 1 - t, callchain.len() - 1 - t))
        .collect();
    let (user_head, chain_head) = (user.len() - shared_tail, callchain.len() - shared_tail);
    let mut head = Vec::with_capacity(chain_head);
    let mut i = 0;
    for (j, &c) in callchain[..chain_head].iter().enumerate() {
        match user[i..user_head].iter().position(|&u| u == c) {
            Some(k) => {
                head.push((i + k, j));
                i += k + 1;
            }
            None => break,
        }
    }
    if head.len() == chain_head {
        pairs.extend(head);
    }
    for (i, j) in pairs {
        if j < agree && interpreted(i) {
            out[i] = chain[j]
                .1
                .checked_sub(METHOD_BELOW_FP)
                .and_then(&read)
                .filter(|&m| m != 0);
        }
    }
    out
}

/// Where the kernel's callchain stopped at its limit (`kernel.perf_event_max_stack`) but the
/// frame-pointer chain over the copy and the words read past it goes on: the rest of the
/// chain's return addresses, appended to `user`. Returns whether it added any.
pub fn extend_past_limit(user: &mut Vec<u64>, chain: &[(u64, u64)]) -> bool {
    let mut next = 0;
    let mut last = None;
    for &addr in user.iter() {
        if let Some(k) = chain[next.min(chain.len())..]
            .iter()
            .position(|&(a, _)| a == addr)
        {
            next += k + 1;
            last = Some(next);
        }
    }
    // Only when the stack's outermost entry is the chain's.
    let (Some(from), Some(&outermost)) = (last, user.last()) else {
        return false;
    };
    if chain[from - 1].0 != outermost || from >= chain.len() {
        return false;
    }
    user.extend(chain[from..].iter().map(|&(a, _)| a));
    true
}

/// For each entry of `user` (the sample's user stack, innermost first), the `Method*` of the
/// interpreted frame it is, where the walk of the stack copy (`walked`: address and frame
/// pointer of each frame, in the same order) reached that frame. `interpreted(i)` says whether
/// entry `i` is in the interpreter's code; `read` reads a word of the stack copy.
pub fn methods(
    user: &[u64],
    walked: &[(u64, u64)],
    interpreted: impl Fn(usize) -> bool,
    read: impl Fn(u64) -> Option<u64>,
) -> Vec<Option<u64>> {
    let mut out = vec![None; user.len()];
    let mut next = 0;
    for (i, &addr) in user.iter().enumerate() {
        // The walk and the stack agree frame by frame where both reach; a frame the walk did
        // not see (past the copy) ends the matching.
        let Some(k) = walked[next.min(walked.len())..]
            .iter()
            .position(|&(a, _)| a == addr)
            .map(|k| k + next)
        else {
            break;
        };
        next = k + 1;
        if interpreted(i) {
            let fp = walked[k].1;
            out[i] = fp
                .checked_sub(METHOD_BELOW_FP)
                .and_then(&read)
                .filter(|&m| m != 0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_pointers_of_interpreted_frames_in_the_copy() {
        // Frames: native leaf, two interpreted frames (fp 0x1100, 0x1200), then one past the copy.
        let user = [0x10, 0x20, 0x20, 0x30];
        let walked = [(0x10, 0x1000), (0x20, 0x1100), (0x20, 0x1200)];
        let read = |addr: u64| match addr {
            0x10e8 => Some(0xaaa),
            0x11e8 => Some(0xbbb),
            _ => None,
        };
        let got = methods(&user, &walked, |i| user[i] == 0x20, read);
        assert_eq!(got, vec![None, Some(0xaaa), Some(0xbbb), None]);
    }

    /// A stack deeper than its copy: the chain goes on through the words read past the copy,
    /// names the interpreted frames there, and continues a callchain cut at the kernel's limit.
    #[test]
    fn the_chain_goes_on_past_the_copy() {
        let sp = 0x1000u64;
        // The copy: frame at 0x1010 (saved fp 0x1040, ra 0x20), Method* 0xaaa at 0x1028.
        let mut copy = vec![0u8; 0x40];
        let put = |c: &mut Vec<u8>, at: u64, v: u64| {
            let at = (at - sp) as usize;
            c[at..at + 8].copy_from_slice(&v.to_le_bytes());
        };
        put(&mut copy, 0x1040 - 24, 0xaaa);
        put(&mut copy, 0x1010, 0x1040);
        put(&mut copy, 0x1018, 0x20);
        // Past the copy: frames at 0x1040 (→ 0x1100, ra 0x20, its own slot 0xaaa) and 0x1100
        // (the root: saved 0, ra 0x30, slot 0xbbb).
        let deep = [0x1040, 0x1100, 0x20, 0xaaa, 0x1100, 0, 0x30, 0xbbb];
        let words = StackWords::new(sp, &copy, &deep);
        let chain = words.chain(0x10, 0x1010);
        assert_eq!(
            chain,
            vec![(0x10, 0x1010), (0x20, 0x1040), (0x20, 0x1100), (0x30, 0)]
        );
        // A callchain cut after two entries gets the rest; the frameless-leaf fix's extra
        // entry (0x15) is passed over.
        let mut user = vec![0x10, 0x15, 0x20];
        assert!(extend_past_limit(&mut user, &chain));
        assert_eq!(user, vec![0x10, 0x15, 0x20, 0x20, 0x30]);
        let callchain = [0x10, 0x20, 0x20, 0x30];
        let named = methods_on_chain(
            &user,
            &callchain,
            &chain,
            |i| user[i] == 0x20,
            |a| words.read(a),
        );
        assert_eq!(named, vec![None, None, Some(0xaaa), Some(0xbbb), None]);
        // A callchain the chain does not explain gets nothing.
        let other = [0x10, 0x99, 0x20, 0x30];
        let named = methods_on_chain(&user, &other, &chain, |_| true, |a| words.read(a));
        assert_eq!(named, vec![None; 5]);
        // Nothing more to add once whole.
        assert!(!extend_past_limit(&mut user, &chain));
    }

    #[test]
    fn a_stack_the_walk_does_not_match_gets_nothing() {
        let got = methods(&[0x10, 0x20], &[(0x99, 0x1000)], |_| true, |_| Some(1));
        assert_eq!(got, vec![None, None]);
    }
}
