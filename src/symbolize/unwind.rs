//! From a sample to its address stack: the kernel part from the callchain, the user part from
//! the callchain (frame pointers, plus the frameless-leaf fix) or from framehop's DWARF/CFI
//! unwinder over the copied user stack. Addresses are innermost first.

use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::Cell;
use std::collections::BTreeMap;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};

use super::jit_index::{JitCode, JitIndex};
use super::native::BinaryCache;
use super::process::{Mapping, ProcessModel};
use crate::format::perf::{context, misc, Sample};
use crate::format::U64s;

/// Deepest user stack jprof unwinds; deeper stacks are cut (the root side is lost).
const MAX_FRAMES: usize = 1024;
/// How many frames fp mode unwinds over its stack copy (CFI, else frame pointers).
pub const MAX_FRAMELESS: usize = 64;

/// A DWARF walk of a sample's user stack, innermost first.
pub struct Walk {
    /// The IP, then return addresses.
    pub frames: Vec<u64>,
    /// Whether the walk ended at the outermost frame (CFI says the return address is
    /// undefined, as at `_start`, or a null frame pointer or return address), rather than
    /// where the stack copy or the unwind information ran out.
    pub reached_root: bool,
    /// Whether it stopped because it needed stack words past the end of the copy.
    pub copy_ended: bool,
}

/// dwarf mode: the DWARF walk, continued by the frame-pointer callchain past the deepest frame
/// both have when the walk stopped early (it ends where the stack copy does): frames the chain
/// skipped (callers of frameless code) come from the walk, frames past the copy from the chain.
/// A walk that reached the outermost frame is the whole stack: what the kernel's chain holds
/// beyond it is garbage read through a frame pointer that code without frame pointers left
/// (96% of Wasmtime's samples got a false root frame outside `_start` that way).
pub fn continue_walk(walk: Walk, chain: &[u64]) -> Vec<u64> {
    if walk.reached_root {
        return walk.frames;
    }
    extend_with_chain(walk.frames, chain)
}

/// The walk (`walked`, from the IP), continued by the chain after the deepest frame both have.
fn extend_with_chain(mut walked: Vec<u64>, chain: &[u64]) -> Vec<u64> {
    for j in (1..walked.len()).rev() {
        // The same return address recurs in recursion: match the same occurrence.
        let nth = walked[..j].iter().filter(|&&a| a == walked[j]).count();
        let found = chain
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, &c)| c == walked[j])
            .nth(nth)
            .map(|(i, _)| i);
        if let Some(i) = found {
            walked.extend_from_slice(&chain[i + 1..]);
            return walked;
        }
    }
    walked
}

/// Joins a walk of the top of the stack (`walked`, from the IP) with the frame-pointer
/// callchain: the walk up to its last address found in the chain, then the chain after that
/// address, or the rest of the walk when the chain ends there. A walk that never meets the
/// chain past the IP adds only its first return address (the one step that is sure). None when
/// the result is the chain itself.
/// [`Unwinders::fix_frameless_top`] from a walk of the same copy ([`Unwinders::walk_copy`])
/// that may have gone on further: a walk stops at its frame limit and nowhere else, so its
/// first [`MAX_FRAMELESS`] + 1 frames are the shorter walk's (a JVM's samples walk their copy
/// anyway, for interpreted frames: once serves both).
pub fn frameless_top_from(walked: &[(u64, u64)], callchain_user: &[u64]) -> Option<Vec<u64>> {
    let walked: Vec<u64> = walked
        .iter()
        .take(MAX_FRAMELESS + 1)
        .map(|&(addr, _)| addr)
        .collect();
    stitch(&walked, callchain_user)
}

fn stitch(walked: &[u64], chain: &[u64]) -> Option<Vec<u64>> {
    let meet = (1..walked.len()).rev().find_map(|j| {
        // The same return address recurs in recursion (a deep interpreted stack): match the
        // same occurrence, not the first, or the chain's frames between would be repeated.
        let nth = walked[1..j].iter().filter(|&&a| a == walked[j]).count();
        chain
            .iter()
            .enumerate()
            .skip(1)
            .filter(|&(_, &c)| c == walked[j])
            .nth(nth)
            .map(|(i, _)| (j, i))
    });
    let fixed: Vec<u64> = match meet {
        // The chain ends where the walk met it (frame pointers broken past there, as in
        // libc's futex paths): the walk knows more.
        Some((_, i)) if i + 1 == chain.len() => walked.to_vec(),
        Some((j, i)) => walked[..=j]
            .iter()
            .chain(&chain[i + 1..])
            .copied()
            .collect(),
        // A chain with nothing past the IP: the walk is all there is.
        None if chain.len() <= 1 => walked.to_vec(),
        None => match walked.get(1) {
            Some(&ra) => {
                let mut v = chain.to_vec();
                v.insert(1.min(v.len()), ra);
                v
            }
            None => return None,
        },
    };
    (fixed != chain).then_some(fixed)
}
/// Lowest kernel address on x86_64; used when a callchain has no context marker.
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// x86_64 perf register numbers (uapi `perf_regs.h`).
const REG_BP: u32 = 6;
const REG_SP: u32 = 7;
const REG_IP: u32 = 8;

/// The user registers unwinding needs, from a sample's REGS_USER.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserRegs {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

impl UserRegs {
    /// Picks BP, SP and IP out of the registers (stored in ascending mask-bit order).
    pub fn from_sample(regs: U64s<'_>, mask: u64) -> Option<Self> {
        let get = |reg: u32| {
            if mask & (1 << reg) == 0 {
                return None;
            }
            let index = (mask & ((1u64 << reg) - 1)).count_ones() as usize;
            regs.get(index)
        };
        Some(Self {
            ip: get(REG_IP)?,
            sp: get(REG_SP)?,
            bp: get(REG_BP)?,
        })
    }
}

/// Where a sample's thread was in user space: what unwinding starts from.
#[derive(Clone, Copy, Debug)]
pub struct UserState<'a> {
    pub pid: u32,
    /// Sample-clock time (which JIT code was live).
    pub time: u64,
    pub regs: UserRegs,
    /// The copied user stack, starting at `regs.sp`.
    pub stack: &'a [u8],
}

/// A sample's addresses, innermost first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressStack {
    pub kernel: Vec<u64>,
    /// `user[0]` is the user registers' instruction pointer, looked up as it is: where an
    /// interrupt or fault stopped the thread, or just past its syscall instruction. Neither is
    /// a return address (preemption can stop a thread on a function's first byte, which
    /// `addr - 1` would give to the function before it); the frames after it are.
    pub user: Vec<u64>,
}

/// Splits a callchain at its context markers; without a callchain the sample IP alone.
pub fn split_callchain(sample: &Sample<'_>) -> AddressStack {
    let mut out = AddressStack::default();
    if sample.callchain.is_empty() {
        if sample.cpumode == misc::KERNEL || sample.ip >= KERNEL_START {
            out.kernel.push(sample.ip);
        } else {
            out.user.push(sample.ip);
        }
        return out;
    }
    // None: a context jprof does not show (guest, hypervisor).
    let mut current = None;
    for (i, addr) in sample.callchain.iter().enumerate() {
        if addr >= context::MAX {
            current = match addr {
                context::KERNEL => Some(true),
                context::USER => Some(false),
                _ => None,
            };
            continue;
        }
        let kernel = match current {
            Some(k) => k,
            None if i == 0 => addr >= KERNEL_START,
            None => continue,
        };
        if kernel {
            out.kernel.push(addr);
        } else {
            out.user.push(addr);
        }
    }
    out
}

/// Reads a u64 from the copied user stack, which starts at `sp`; a read past the copy's end
/// sets `past_end` (the walk stopped because the copy is too short, not for want of CFI).
fn stack_reader<'a>(
    stack: &'a [u8],
    sp: u64,
    past_end: &'a Cell<bool>,
) -> impl FnMut(u64) -> Result<u64, ()> + 'a {
    move |addr| {
        let off = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
        let Some(bytes) = stack.get(off..off.checked_add(8).ok_or(())?) else {
            past_end.set(true);
            return Err(());
        };
        let mut word = [0u8; 8];
        word.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(word))
    }
}

type SectionData = crate::sys::shared_bytes::SharedBytes;

/// One framehop unwinder per process, rebuilt when the process's mappings change; modules
/// are registered lazily from the binaries of the mappings.
struct ProcessUnwinder {
    generation: u64,
    unwinder: UnwinderX86_64<SectionData>,
    cache: CacheX86_64,
    registered: FxHashSet<u64>,
    /// JIT bodies registered as modules: start → (load time, end).
    jit: BTreeMap<u64, (u64, u64)>,
}

#[derive(Default)]
pub struct Unwinders {
    per_pid: FxHashMap<u32, ProcessUnwinder>,
}

impl Unwinders {
    fn process(&mut self, pid: u32, generation: u64) -> &mut ProcessUnwinder {
        let entry = self.per_pid.entry(pid).or_insert_with(|| ProcessUnwinder {
            generation,
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            registered: FxHashSet::default(),
            jit: BTreeMap::new(),
        });
        if entry.generation != generation {
            *entry = ProcessUnwinder {
                generation,
                unwinder: UnwinderX86_64::new(),
                cache: CacheX86_64::new(),
                registered: FxHashSet::default(),
                jit: BTreeMap::new(),
            };
        }
        entry
    }

    /// Frame-pointer mode's fix for frameless code at the top of the stack: the kernel's
    /// frame-pointer walk skips the callers of functions that have not set up a frame (a leaf,
    /// or a libc syscall wrapper and its callers). Their CFI, run over the stack copy, gives
    /// the real return addresses; the stack becomes that walk up to the last address it shares
    /// with the callchain, then the callchain from there. Returns None when nothing changes.
    /// JIT code is unwound the same way when its body came with an unwind table.
    pub fn fix_frameless_top(
        &mut self,
        model: &ProcessModel,
        binaries: &mut BinaryCache,
        jit: &JitIndex,
        at: &UserState<'_>,
        callchain_user: &[u64],
    ) -> Option<Vec<u64>> {
        let (walked, _) = self.walk_copy(model, binaries, jit, at, MAX_FRAMELESS);
        frameless_top_from(&walked, callchain_user)
    }

    /// Walks the stack copy from the sample's registers, frame by frame (CFI where a module or
    /// JIT body has it, else the frame pointer): each frame's address (the IP, then return
    /// addresses) with its frame-pointer register, at most `max_frames` frames; and whether the
    /// walk stopped at the end of the copy.
    pub fn walk_copy(
        &mut self,
        model: &ProcessModel,
        binaries: &mut BinaryCache,
        jit: &JitIndex,
        at: &UserState<'_>,
        max_frames: usize,
    ) -> (Vec<(u64, u64)>, bool) {
        let UserState {
            pid,
            time,
            regs,
            stack,
        } = *at;
        let p = self.process(pid, model.generation(pid));
        let mut uregs = UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp);
        let past_end = Cell::new(false);
        let mut read = stack_reader(stack, regs.sp, &past_end);
        let mut address = FrameAddress::from_instruction_pointer(regs.ip);
        let mut walked = vec![(regs.ip, regs.bp)];
        while walked.len() <= max_frames {
            let pc = address.address_for_lookup();
            match jit.lookup(pid, pc, time) {
                Some(code) if code.unwind.is_some() => register_jit(p, code),
                // JIT code without a table: framehop follows the frame pointer.
                Some(_) => {}
                None => match model.lookup(pid, pc) {
                    Some(mapping) => register(p, pid, mapping, binaries),
                    None => break,
                },
            }
            let Ok(Some(ra)) =
                p.unwinder
                    .unwind_frame(address, &mut uregs, &mut p.cache, &mut read)
            else {
                break;
            };
            // Only an address inside a mapped file or JIT code can be a return address.
            if jit.lookup(pid, ra.wrapping_sub(1), time).is_none()
                && model.lookup(pid, ra).is_none()
            {
                break;
            }
            walked.push((ra, uregs.bp()));
            let Some(next) = FrameAddress::from_return_address(ra) else {
                break;
            };
            address = next;
        }
        (walked, past_end.get())
    }

    /// DWARF mode: the whole user stack from the registers and the stack copy, through JIT
    /// code whose unwind table the JIT index holds (live at `time`). Always holds at least the
    /// IP.
    pub fn unwind(
        &mut self,
        model: &ProcessModel,
        binaries: &mut BinaryCache,
        jit: &JitIndex,
        at: &UserState<'_>,
    ) -> Walk {
        let UserState {
            pid,
            time,
            regs,
            stack,
        } = *at;
        let p = self.process(pid, model.generation(pid));
        for mapping in model.mappings(pid) {
            register(p, pid, mapping, binaries);
        }
        let past_end = Cell::new(false);
        let mut read = stack_reader(stack, regs.sp, &past_end);
        let mut uregs = UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp);
        let mut address = FrameAddress::from_instruction_pointer(regs.ip);
        let mut out = vec![regs.ip];
        let mut reached_root = false;
        while out.len() < MAX_FRAMES {
            let code = jit.lookup(pid, address.address_for_lookup(), time);
            if let Some(code) = code {
                register_jit(p, code);
            }
            let step = match code.and_then(|c| cpython_trampoline_sp_offset(c, address)) {
                Some(offset) => cpython_trampoline_step(offset, &mut uregs, &mut read),
                None => p
                    .unwinder
                    .unwind_frame(address, &mut uregs, &mut p.cache, &mut read),
            };
            match step {
                Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                    Some(next) => {
                        out.push(ra);
                        address = next;
                    }
                    // A null return address ends the stack.
                    None => {
                        reached_root = true;
                        break;
                    }
                },
                // The outermost frame.
                Ok(None) => {
                    reached_root = true;
                    break;
                }
                // No way on (the copy ended, or no unwind information): the caller continues
                // with the kernel's chain.
                Err(_) => break,
            }
        }
        Walk {
            frames: out,
            reached_root,
            copy_ended: !reached_root && past_end.get(),
        }
    }
}

/// CPython's perf trampoline on x86_64 (Python/asm_trampoline.S, 3.12 and 3.13): `sub $8,%rsp;
/// call *%rcx; add $8,%rsp; ret`, 11 bytes (15 with the `endbr64` of CET builds), copied for
/// every Python function and named `py::…` in its perf map, with neither frame pointer nor
/// unwind table. Returns how far above the stack pointer its caller's frame starts at
/// `address`: 16 bytes between the `sub` and the `add` (a return address is always there),
/// else 8. None for any other code.
fn cpython_trampoline_sp_offset(code: &JitCode, address: FrameAddress) -> Option<u64> {
    if code.unwind.is_some() || !code.name.starts_with("py::") || !matches!(code.size, 11 | 15) {
        return None;
    }
    let end = code.start + code.size;
    // `call` is 2 bytes, `add` 4 and `ret` 1.
    let after_sub = end - 7;
    let at_ret = end - 1;
    let pc = address.address();
    Some(
        if address.is_return_address() || (after_sub..at_ret).contains(&pc) {
            16
        } else {
            8
        },
    )
}

/// Unwinds one CPython trampoline frame: the return address is the word below the caller's
/// stack pointer; the frame pointer is untouched.
fn cpython_trampoline_step(
    sp_offset: u64,
    regs: &mut UnwindRegsX86_64,
    read: &mut impl FnMut(u64) -> Result<u64, ()>,
) -> Result<Option<u64>, framehop::Error> {
    let caller_sp = regs.sp() + sp_offset;
    let ra = read(caller_sp - 8).map_err(|_| framehop::Error::CouldNotReadStack(caller_sp - 8))?;
    regs.set_sp(caller_sp);
    Ok(Some(ra))
}

/// Makes a JIT body with an unwind table a module of the process's unwinder, replacing
/// bodies that were at its addresses before (code memory is reused).
fn register_jit(p: &mut ProcessUnwinder, code: &JitCode) {
    let Some(unwind) = &code.unwind else {
        return;
    };
    let end = code.start.saturating_add(code.size);
    if p.jit.get(&code.start) == Some(&(code.from, end)) {
        return;
    }
    let stale: Vec<u64> = p
        .jit
        .range(..end)
        .filter(|(&start, &(_, old_end))| start < end && code.start < old_end)
        .map(|(&start, _)| start)
        .collect();
    for start in stale {
        p.jit.remove(&start);
        p.unwinder.remove_module(start);
    }
    let table = unwind.eh_frame_offset;
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: None,
        text: None,
        stubs_svma: None,
        stub_helper_svma: None,
        got_svma: None,
        unwind_info: None,
        eh_frame_svma: Some(table..table + unwind.eh_frame.len() as u64),
        eh_frame: Some(unwind.eh_frame.clone()),
        eh_frame_hdr_svma: None,
        eh_frame_hdr: None,
        debug_frame: None,
        text_segment_svma: None,
        text_segment: None,
    };
    // Section addresses are relative to the code start (framehop keeps 32-bit offsets).
    p.unwinder.add_module(Module::new(
        code.name.clone(),
        code.start..end,
        code.start,
        info,
    ));
    p.jit.insert(code.start, (code.from, end));
}

/// Adds the module for a mapping's binary once; mappings whose binary is unreadable are
/// left out (framehop then falls back to frame pointers there).
fn register(p: &mut ProcessUnwinder, pid: u32, mapping: &Mapping, binaries: &mut BinaryCache) {
    if !p.registered.insert(mapping.start) {
        return;
    }
    // Another build's CFI would unwind wrongly: only the recorded build is used.
    let Ok(binary) = binaries.get_built(pid, &mapping.path, mapping.build_id.as_deref()) else {
        return;
    };
    let Some(svma) = binary.svma_of_mapping(mapping.pgoff) else {
        return;
    };
    let u = binary.unwind();
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: u.text.as_ref().map(|t| t.0.clone()),
        text: u.text.as_ref().map(|t| t.1.clone()),
        stubs_svma: None,
        stub_helper_svma: None,
        got_svma: u.got.clone(),
        unwind_info: None,
        eh_frame_svma: u.eh_frame.as_ref().map(|t| t.0.clone()),
        eh_frame: u.eh_frame.as_ref().map(|t| t.1.clone()),
        eh_frame_hdr_svma: u.eh_frame_hdr.as_ref().map(|t| t.0.clone()),
        eh_frame_hdr: u.eh_frame_hdr.as_ref().map(|t| t.1.clone()),
        debug_frame: u.debug_frame.clone(),
        text_segment_svma: None,
        text_segment: None,
    };
    let base_avma = mapping.start.wrapping_sub(svma);
    p.unwinder.add_module(Module::new(
        mapping.path.to_string(),
        mapping.start..mapping.end,
        base_avma,
        info,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Endian;

    #[test]
    fn a_dwarf_walk_continues_with_the_chain() {
        // The copy ended after 0x40; the chain skipped 0x30 and goes on past the copy.
        assert_eq!(
            extend_with_chain(
                vec![0x10, 0x20, 0x30, 0x40],
                &[0x10, 0x20, 0x40, 0x50, 0x60]
            ),
            vec![0x10, 0x20, 0x30, 0x40, 0x50, 0x60]
        );
        // Nothing shared: the walk alone.
        assert_eq!(
            extend_with_chain(vec![0x10, 0x20], &[0x10, 0x99]),
            vec![0x10, 0x20]
        );
        // No chain (an older recording): the walk alone.
        assert_eq!(extend_with_chain(vec![0x10, 0x20], &[]), vec![0x10, 0x20]);
        // Recursion: the walk's second 0x20 is the chain's second.
        assert_eq!(
            extend_with_chain(vec![0x10, 0x20, 0x20], &[0x10, 0x20, 0x20, 0x20, 0x30]),
            vec![0x10, 0x20, 0x20, 0x20, 0x30]
        );
    }

    /// CPython's trampolines (11 bytes each in its perf map, no frame pointer, no unwind
    /// table): a sample in one, between its `call` and `add`, whose caller is another one
    /// (called by code that returns to 0, the end): the walk goes through both.
    #[test]
    fn cpython_trampolines_are_unwound_without_frame_pointers() {
        let mut jit = JitIndex::default();
        let map = b"7f0000001000 b py::inner:/app.py\n7f0000002000 b py::outer:/app.py\n";
        jit.add_perf_map(7, "/tmp/perf-7.map", map, &[]);
        let sp = 0x7ffd_0000_0000u64;
        // Sample at inner's `add` (end - 5); its frame: 8 bytes of padding, then the return
        // address into outer after its `call`; outer's frame the same, returning to 0.
        let ip = 0x7f00_0000_1000 + 11 - 5;
        let into_outer = 0x7f00_0000_2000 + 11 - 5;
        let words = [0xdead, into_outer, 0xdead, 0];
        let stack: Vec<u8> = words.iter().flat_map(|w: &u64| w.to_le_bytes()).collect();
        let at = UserState {
            pid: 7,
            time: 1,
            regs: UserRegs {
                ip,
                sp,
                // Garbage, as libpython leaves it: no frame-pointer walk may use it.
                bp: 0x1234,
            },
            stack: &stack,
        };
        let walk = Unwinders::default().unwind(
            &ProcessModel::default(),
            &mut BinaryCache::default(),
            &jit,
            &at,
        );
        assert_eq!(walk.frames, vec![ip, into_outer]);
        assert!(walk.reached_root);
    }

    #[test]
    fn only_cpython_trampolines_get_their_rule() {
        let code = |name: &str, size: u64| JitCode {
            name: name.into(),
            start: 0x1000,
            size,
            from: 0,
            until: None,
            tier: None,
            debug: None,
            source: std::sync::Arc::from("perf-1.map"),
            from_jitdump: false,
            unwind: None,
            origin: None,
        };
        let ret = |a| FrameAddress::from_return_address(a).unwrap();
        let ip = FrameAddress::from_instruction_pointer;
        let t = code("py::f:/a.py", 11);
        assert_eq!(cpython_trampoline_sp_offset(&t, ret(0x1006)), Some(16));
        assert_eq!(cpython_trampoline_sp_offset(&t, ip(0x1000)), Some(8)); // at `sub`
        assert_eq!(cpython_trampoline_sp_offset(&t, ip(0x1004)), Some(16)); // at `call`
        assert_eq!(cpython_trampoline_sp_offset(&t, ip(0x100a)), Some(8)); // at `ret`
                                                                           // CET builds start with a 4-byte endbr64.
        let cet = code("py::f:/a.py", 15);
        assert_eq!(cpython_trampoline_sp_offset(&cet, ip(0x1004)), Some(8));
        assert_eq!(cpython_trampoline_sp_offset(&cet, ip(0x1008)), Some(16));
        // Anything else is left to framehop.
        assert_eq!(
            cpython_trampoline_sp_offset(&code("py::f:/a.py", 64), ret(0x1006)),
            None
        );
        assert_eq!(
            cpython_trampoline_sp_offset(&code("LazyCompile:f", 11), ret(0x1006)),
            None
        );
    }

    #[test]
    fn a_walk_that_reached_the_root_takes_nothing_from_the_chain() {
        // The chain shares 0x30 with the walk, then holds garbage read through a frame
        // pointer that code without frame pointers left behind.
        let chain = [0x10, 0x30, 0x5555_dead_beef];
        let walk = |reached_root| Walk {
            frames: vec![0x10, 0x20, 0x30, 0x40],
            reached_root,
            copy_ended: false,
        };
        assert_eq!(
            continue_walk(walk(true), &chain),
            vec![0x10, 0x20, 0x30, 0x40]
        );
        assert_eq!(
            continue_walk(walk(false), &chain),
            vec![0x10, 0x20, 0x30, 0x40, 0x5555_dead_beef]
        );
    }

    #[test]
    fn stitching_a_cfi_walk_onto_the_frame_pointer_chain() {
        // A syscall wrapper and its callers without frames: the chain skips two of them.
        let chain = [0x10, 0x20, 0x50, 0x60];
        let walked = [0x10, 0x20, 0x30, 0x40, 0x50];
        assert_eq!(
            stitch(&walked, &chain),
            Some(vec![0x10, 0x20, 0x30, 0x40, 0x50, 0x60])
        );
        // A frameless leaf: its caller is missing from the chain.
        assert_eq!(
            stitch(&[0x10, 0x15, 0x20], &[0x10, 0x20, 0x30]),
            Some(vec![0x10, 0x15, 0x20, 0x30])
        );
        // Nothing missing.
        assert_eq!(stitch(&[0x10, 0x20], &[0x10, 0x20, 0x30]), None);
        // A walk that never meets the chain adds only its first step.
        assert_eq!(
            stitch(&[0x10, 0x15, 0x16], &[0x10, 0x20]),
            Some(vec![0x10, 0x15, 0x20])
        );
        assert_eq!(stitch(&[0x10], &[0x10, 0x20]), None);
        // The chain ends at the meeting point: the walk goes on.
        assert_eq!(
            stitch(&[0x10, 0x20, 0x30, 0x40], &[0x10, 0x20]),
            Some(vec![0x10, 0x20, 0x30, 0x40])
        );
        // Garbage chain entries before the meeting point are dropped.
        assert_eq!(
            stitch(&[0x10, 0x11, 0x12, 0x30], &[0x10, 0x99, 0x30, 0x40]),
            Some(vec![0x10, 0x11, 0x12, 0x30, 0x40])
        );
        // Recursion: the walk's second 0x20 is the chain's second, so nothing repeats.
        assert_eq!(
            stitch(&[0x10, 0x15, 0x20, 0x20], &[0x10, 0x20, 0x20, 0x20, 0x30]),
            Some(vec![0x10, 0x15, 0x20, 0x20, 0x20, 0x30])
        );
    }

    fn sample(callchain: Vec<u64>, cpumode: u16) -> Sample<'static> {
        let bytes: Vec<u8> = callchain.iter().flat_map(|v| v.to_le_bytes()).collect();
        let callchain = U64s::new(Box::leak(bytes.into_boxed_slice()), Endian::Little);
        Sample {
            id: None,
            ip: callchain.iter().find(|&a| a < context::MAX).unwrap_or(0),
            pid: 1,
            tid: 1,
            time: 0,
            cpu: 0,
            period: 1,
            callchain,
            regs_user: U64s::default(),
            stack_user: &[],
            cpumode,
        }
    }

    #[test]
    fn callchain_split_at_markers() {
        let s = sample(
            vec![
                context::KERNEL,
                0xffffffff81000010,
                0xffffffff81000020,
                context::USER,
                0x401000,
                0x402000,
            ],
            misc::KERNEL,
        );
        let a = split_callchain(&s);
        assert_eq!(a.kernel, vec![0xffffffff81000010, 0xffffffff81000020]);
        assert_eq!(a.user, vec![0x401000, 0x402000]);
        let g = split_callchain(&sample(vec![context::GUEST, 0x1, context::USER, 0x5], 2));
        assert_eq!(g.user, vec![0x5]);
        assert!(g.kernel.is_empty());
    }

    #[test]
    fn regs_in_mask_order() {
        let le = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let (three, two, small) = (le(&[10, 20, 30]), le(&[10, 20]), le(&[1, 2, 3]));
        fn regs(b: &[u8]) -> U64s<'_> {
            U64s::new(b, Endian::Little)
        }
        let r = UserRegs::from_sample(regs(&three), 0x1c0).unwrap();
        assert_eq!((r.bp, r.sp, r.ip), (10, 20, 30));
        assert!(UserRegs::from_sample(regs(&two), 0x1c0).is_none());
        assert!(UserRegs::from_sample(regs(&small), 0x7).is_none());
    }

    #[test]
    fn stack_reader_bounds() {
        let stack: Vec<u8> = (0u8..16).collect();
        let past_end = Cell::new(false);
        let mut read = stack_reader(&stack, 0x1000, &past_end);
        assert_eq!(
            read(0x1000),
            Ok(u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]))
        );
        assert_eq!(read(0x1008).map(|v| v as u8), Ok(8));
        assert!(read(0xfff).is_err());
        assert!(!past_end.get(), "below the copy is not past its end");
        assert!(read(0x1009).is_err());
        assert!(past_end.get());
        assert!(read(u64::MAX).is_err());
    }
}
