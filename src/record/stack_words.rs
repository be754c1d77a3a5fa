//! fp mode's deep stack copy (a JVM's, `StackCopy::DEEP_FP`), cut down at record time to the
//! words a report reads: the top of the stack (CFI of a frameless leaf: see [`reduce`]), then
//! along the frame-pointer chain only each frame's saved frame pointer, return address and the
//! word three below the frame pointer (HotSpot's `Method*` slot of an interpreted frame). Every other word
//! is zeroed and the copy ends after the deepest frame it holds, so a deep copy costs a few
//! bytes once compressed. The record stays a perf SAMPLE (its stack copy only shorter); a
//! zeroed `Method*` names nothing.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::deep_frames::Walked;
use crate::format::perf::{RawRecord, Record, RecordIter, RecordKind, SampleLayout};
use crate::symbolize::unwind::UserRegs;

/// Bytes at the top of the copy kept whole, at most: only up to the innermost frame's links
/// when the frame pointer register starts a chain there (see [`reduce`]).
pub const TOP_BYTES: usize = 1024;
/// Bytes below a frame pointer kept (the `Method*` slot).
const BELOW_FP: u64 = 24;

/// What the cut-down sample needs from the frames read at sample time (`deep_frames`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chain {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub sp: u64,
    pub bp: u64,
    /// Bytes the kernel copied from `sp`.
    pub copied: usize,
    /// Whether the frame chain, after at least one frame in the copy, went on past its end.
    pub past_copy: bool,
}

/// The record (header included) with its stack copy cut down (a copy of [`TOP_BYTES`] or less
/// keeps its length), and what its frame chain did; None to keep it as it is (not a sample, no
/// copy).
///
/// Of the top [`TOP_BYTES`], with `mapped` (every mapping the target made is in the
/// recording: a launched target), a word stays only when a report's unwinder could take it for
/// a return address or a frame pointer ([`stand_in`]); the rest, the frames' locals, get a
/// stand-in that unwinds the same. Without it, the words above the innermost frame's links
/// are zeroed when the frame pointer register starts a chain there (two frames in the copy, or
/// one whose link goes on past it), except those that may be code or stack addresses
/// ([`may_be_address`]). `whole_top` keeps the top whole, as jprof did before. Code without a
/// frame pointer leaves the register alone, so a frameless leaf's or syscall wrapper's frames
/// lie below that frame; the CFI of frameless code reads return addresses and saved frame
/// pointers only.
pub fn reduce(
    layout: &SampleLayout,
    raw: &RawRecord<'_>,
    header: &[u8],
    whole_top: bool,
    mapped: Option<&Mapped>,
) -> Option<(Vec<u8>, Chain)> {
    let Ok(Record::Sample(s)) = layout.parse(raw) else {
        return None;
    };
    let regs = UserRegs::from_sample(s.regs_user, layout.regs_user_mask)?;
    // What the kernel copied (`dyn_size`), within the room it reserved (`size`).
    let stack = s.stack_user;
    let data_at = (stack.as_ptr() as usize).checked_sub(raw.body.as_ptr() as usize)?;
    let size_field = raw.body.get(data_at.checked_sub(8)?..data_at)?;
    let size = u64::from_le_bytes(size_field.try_into().ok()?) as usize;
    // A copy no larger than the top kept whole (the 1 KiB copy beside the BPF program) stays
    // as it is; its chain still says which frames the program's record adds.
    let whole = size <= TOP_BYTES;
    let word = |off: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            stack.get(off..off + 8)?.try_into().ok()?,
        ))
    };
    let mut kept = vec![false; stack.len().div_ceil(8)];
    // A frame's links and `Method*` slot, those of them in the copy (a frame just past it has
    // its slot in it).
    let keep_frame = |kept: &mut Vec<bool>, off: usize| {
        for o in [
            off.checked_sub(BELOW_FP as usize),
            Some(off),
            off.checked_add(8),
        ]
        .into_iter()
        .flatten()
        {
            if let Some(k) = kept.get_mut(o / 8) {
                *k = true;
            }
        }
    };
    let mut end = TOP_BYTES.min(stack.len());
    let (frames, past_copy) = follow_chain(stack, regs.sp, regs.bp, |off| {
        keep_frame(&mut kept, off);
        if off + 16 <= stack.len() {
            end = end.max(off + 16);
        }
    });
    let top = TOP_BYTES.min(stack.len()).div_ceil(8);
    // Stand-ins for the words of the top not kept (beyond it, zeros).
    let mut stand_ins: Vec<Option<u64>> = vec![None; top];
    match mapped {
        Some(mapped) if !whole_top => {
            let stored = if whole { stack.len() } else { end };
            for (i, slot) in stand_ins.iter_mut().enumerate() {
                let w = word(i * 8).unwrap_or(0);
                match stand_in(w, regs.sp, stored as u64, mapped) {
                    None => {
                        kept[i] = true;
                        // A word that may be a frame pointer into the copy: that frame's links
                        // and Method* slot, which the unwinder and the report then read.
                        if let Some(off) = w
                            .checked_sub(regs.sp)
                            .and_then(|o| usize::try_from(o).ok())
                            .filter(|o| o % 8 == 0)
                        {
                            keep_frame(&mut kept, off);
                        }
                    }
                    stand => *slot = stand,
                }
            }
        }
        _ => {
            let leaf = match regs.bp.checked_sub(regs.sp) {
                Some(off)
                    if !whole_top && (frames >= 2 || past_copy) && off + 16 <= TOP_BYTES as u64 =>
                {
                    off as usize + 16
                }
                _ => TOP_BYTES,
            };
            for (i, k) in kept.iter_mut().take(top).enumerate() {
                *k |= i * 8 < leaf || word(i * 8).is_some_and(may_be_address);
            }
        }
    }
    let chain = Chain {
        pid: s.pid,
        tid: s.tid,
        time: s.time,
        sp: regs.sp,
        bp: regs.bp,
        copied: stack.len(),
        past_copy,
    };
    let stored = |i: usize, original: &[u8]| -> Vec<u8> {
        if kept[i] {
            return original.to_vec();
        }
        let v = stand_ins.get(i).copied().flatten().unwrap_or(0);
        v.to_le_bytes()[..original.len()].to_vec()
    };
    if whole {
        let mut out = Vec::with_capacity(header.len() + raw.body.len());
        out.extend_from_slice(header);
        out.extend_from_slice(&raw.body[..data_at]);
        for (i, w) in stack.chunks(8).enumerate() {
            out.extend(stored(i, w));
        }
        out.extend_from_slice(&raw.body[data_at + stack.len()..]);
        return Some((out, chain));
    }
    let mut out = Vec::with_capacity(header.len() + data_at + end + 8);
    out.extend_from_slice(header);
    out.extend_from_slice(&raw.body[..data_at - 8]);
    out.extend_from_slice(&(end as u64).to_le_bytes());
    for (i, w) in stack[..end].chunks(8).enumerate() {
        out.extend(stored(i, w));
    }
    out.extend_from_slice(&(end as u64).to_le_bytes());
    // Anything after the stack copy (none in jprof's layout) is kept.
    out.extend_from_slice(raw.body.get(data_at + size + 8..)?);
    let total = u16::try_from(out.len()).ok()?;
    out[6..8].copy_from_slice(&total.to_le_bytes());
    Some((out, chain))
}

/// Follows the frame-pointer chain from `bp` through the stack copy `stack` taken at `sp`,
/// calling `frame` with each frame's offset in it (and the first one's past its end): the
/// frames in the copy, and whether the chain, after at least one of them, went on past it.
fn follow_chain(stack: &[u8], sp: u64, bp: u64, mut frame: impl FnMut(usize)) -> (usize, bool) {
    let word = |off: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            stack.get(off..off + 8)?.try_into().ok()?,
        ))
    };
    let mut fp = bp;
    let mut frames = 0;
    while let Some(off) = fp.checked_sub(sp).and_then(|o| usize::try_from(o).ok()) {
        if off % 8 != 0 {
            break;
        }
        if off + 16 > stack.len() {
            // A frame pointer that starts out past the copy is not one (a leaf using the
            // register for something else) or cannot be told from one: not counted.
            frame(off);
            return (frames, frames > 0);
        }
        frames += 1;
        frame(off);
        // The chain goes up the stack; anything else ends it.
        let Some(next) = word(off).filter(|&n| n > fp) else {
            break;
        };
        fp = next;
    }
    (frames, false)
}

/// What a sample's frame chain did (as [`reduce`] says it), its copy left as it is; None for
/// a record that is not a sample with registers and a copy.
pub fn chain_of(layout: &SampleLayout, raw: &RawRecord<'_>) -> Option<Chain> {
    let Ok(Record::Sample(s)) = layout.parse(raw) else {
        return None;
    };
    let regs = UserRegs::from_sample(s.regs_user, layout.regs_user_mask)?;
    let (_, past_copy) = follow_chain(s.stack_user, regs.sp, regs.bp, |_| {});
    Some(Chain {
        pid: s.pid,
        tid: s.tid,
        time: s.time,
        sp: regs.sp,
        bp: regs.bp,
        copied: s.stack_user.len(),
        past_copy,
    })
}

/// How far below the stack pointer a word is kept as a possible frame pointer: unwinding
/// rules add small offsets to it, which may bring it into the copy.
const BELOW_SP: u64 = 64 << 10;
/// How far past the copy's end a word is kept: the report reads a frame's `Method*` 24 bytes
/// below its frame pointer, and rules add small offsets.
const PAST_COPY: u64 = 64;
/// The stand-in of a word far above the copy: past any stack copy, so reading at it (or a
/// little below or above) goes past the copy, as reading at the word did.
const FAR_ABOVE: u64 = 1 << 62;
/// Words this close to 2^64 are kept: adding a frame's offset to them overflows, which the
/// unwinder treats otherwise than a read past the copy.
const NEAR_TOP: u64 = u64::MAX - (4 << 30);

/// None when a report may read stack word `w` (of a sample whose stack pointer is `sp` and
/// whose stored copy holds `copied` bytes) as a return address, or as a frame pointer into
/// the copy, so it stays: zero, a mapped address (code, as far as the recording can tell),
/// near the copy, or close to 2^64. Else the word that stands in for it, which unwinds the
/// same: framehop reads only return addresses (which must be mapped, or the walk stops) and
/// saved frame pointers; a frame pointer far below the stack pointer ends the walk whether it
/// is 0 or not, and reading at one far above goes past the copy whatever it is.
fn stand_in(w: u64, sp: u64, copied: u64, mapped: &Mapped) -> Option<u64> {
    let near_copy =
        w >= sp.saturating_sub(BELOW_SP) && w < sp.saturating_add(copied).saturating_add(PAST_COPY);
    if w == 0 || near_copy || w >= NEAR_TOP || mapped.contains(w) {
        None
    } else if w < sp {
        Some(0)
    } else {
        Some(FAR_ABOVE)
    }
}

/// Every address range the records so far mapped (MMAP and MMAP2, of any process): what a
/// report's process model can take a return address in. A launched target's mappings are
/// all in the recording, the kernel reporting each; code mapped before an attach that jprof
/// does not synthesize (anonymous JIT code) is not, so attaching keeps [`may_be_address`].
#[derive(Debug, Default)]
pub struct Mapped {
    /// Start → end, disjoint.
    ranges: BTreeMap<u64, u64>,
}

impl Mapped {
    /// Notes the mappings among `records` (whole perf records; before their samples are cut
    /// down: the records of one batch are not in time order).
    pub fn note(&mut self, layout: &SampleLayout, records: &[u8]) {
        for raw in RecordIter::new(records).map_while(Result::ok) {
            if !matches!(raw.kind, RecordKind::MMAP | RecordKind::MMAP2) {
                continue;
            }
            match layout.parse(&raw) {
                Ok(Record::Mmap2 { addr, len, .. }) | Ok(Record::Mmap { addr, len, .. }) => {
                    self.add(addr, addr.saturating_add(len));
                }
                _ => {}
            }
        }
    }

    fn add(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        let (mut s, mut e) = (start, end);
        let touching: Vec<u64> = self
            .ranges
            .range(..=end)
            .rev()
            .take_while(|(_, &oe)| oe >= start)
            .map(|(&os, _)| os)
            .collect();
        for os in touching {
            let oe = self.ranges.remove(&os).unwrap_or(os);
            s = s.min(os);
            e = e.max(oe);
        }
        self.ranges.insert(s, e);
    }

    fn contains(&self, w: u64) -> bool {
        self.ranges
            .range(..=w)
            .next_back()
            .is_some_and(|(_, &e)| w < e)
    }
}

/// `records` (a records chunk's perf records) with each sample's stack copy cut down as the
/// recorder cuts a JVM's (`reduce`): for a launched target when `mapped` is given (the
/// mappings of the chunks before; this chunk's are added), else as for an attached one. The
/// 1 KiB copies beside the BPF program keep their length, so a recording's records keep their
/// numbers. For comparing the reports of a recording with its stacks whole
/// (`JPROF_WHOLE_STACK_TOP=1`) and cut.
pub fn cut_stack_copies(
    layout: &SampleLayout,
    records: &[u8],
    mapped: Option<&mut Mapped>,
) -> Vec<u8> {
    let mapped = mapped.map(|m| {
        m.note(layout, records);
        &*m
    });
    let mut out = Vec::with_capacity(records.len());
    let mut done = 0;
    for raw in RecordIter::new(records).map_while(Result::ok) {
        let end = raw.offset + 8 + raw.body.len();
        let header = &records[raw.offset..raw.offset + 8];
        match reduce(layout, &raw, header, false, mapped) {
            Some((small, _)) => out.extend_from_slice(&small),
            None => out.extend_from_slice(&records[raw.offset..end]),
        }
        done = end;
    }
    out.extend_from_slice(&records[done..]);
    out
}

/// Whether a stack word may be a return address or a frame pointer that the CFI of frameless
/// code above the innermost frame reads: a user-space address where programs, libraries, JIT
/// code and thread stacks are mapped (a non-PIE program from 4 MiB up, the mmap area from
/// 16 TiB up). What goes: small integers and Java heap pointers (from 4 GiB up to 16 TiB; a
/// compressed-oops heap lies below 32 GiB), which no unwinder follows.
fn may_be_address(word: u64) -> bool {
    (0x40_0000..0x1_0000_0000).contains(&word)
        || (0x1000_0000_0000..0x8000_0000_0000).contains(&word)
}

/// How far apart a sample's time and the program's record of it may be (they are taken in
/// the same interrupt; the sample's time can come first).
const MAX_LAG_NS: u64 = 50_000_000;
/// Records whose sample never came (lost, or dropped with a batch) are let go this long after.
const KEEP_NS: u64 = 2_000_000_000;

/// Joins the frames the program read at sample time to their samples.
#[derive(Default)]
pub struct DeepJoin {
    /// Per thread, in time order.
    waiting: HashMap<u32, VecDeque<Walked>>,
    newest: u64,
    /// Samples whose frame chain went on past the copy.
    pub past_copy: u64,
    /// Of those, the samples that got their frames beyond it.
    pub joined: u64,
    /// The largest stack copy seen (1 KiB beside the program, 64 KiB without it).
    copy_bytes: usize,
    /// The program read a JVM's frames only from when the records showed it mapping
    /// libjvm.so (`DeepFrames::watch`): its samples before that have none.
    pub found_late: bool,
}

impl DeepJoin {
    /// Records read from the program's ring buffer.
    pub fn add(&mut self, walked: Vec<Walked>) {
        if walked.is_empty() {
            return;
        }
        for w in walked {
            self.newest = self.newest.max(w.time);
            self.waiting.entry(w.tid).or_default().push_back(w);
        }
        let oldest = self.newest.saturating_sub(KEEP_NS);
        self.waiting.retain(|_, q| {
            while q.front().is_some_and(|w| w.time < oldest) {
                q.pop_front();
            }
            !q.is_empty()
        });
    }

    /// The JPROF_DEEP_FRAMES record to write just before the sample whose chain is `chain`:
    /// the frames the program read past the copy. None when there are none.
    pub fn record_for(&mut self, chain: &Chain) -> Option<Vec<u8>> {
        let found = self.take(chain);
        let frames: Vec<[u64; 4]> = found
            .map(|w| w.frames)
            .unwrap_or_default()
            .into_iter()
            .filter(|f| {
                f[0].checked_sub(chain.sp)
                    .is_none_or(|off| off.saturating_add(16) > chain.copied as u64)
            })
            .collect();
        self.copy_bytes = self.copy_bytes.max(chain.copied);
        if chain.past_copy {
            self.past_copy += 1;
            self.joined += u64::from(!frames.is_empty());
        }
        if frames.is_empty() {
            return None;
        }
        let size = 8 + 16 + frames.len() * 32;
        let mut out = Vec::with_capacity(size);
        out.extend(RecordKind::JPROF_DEEP_FRAMES.0.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(u16::try_from(size).ok()?.to_le_bytes());
        out.extend(chain.pid.to_le_bytes());
        out.extend(chain.tid.to_le_bytes());
        out.extend(chain.time.to_le_bytes());
        for word in frames.iter().flatten() {
            out.extend(word.to_le_bytes());
        }
        Some(out)
    }

    /// The program's record of this sample: same thread, same registers, read in the same
    /// interrupt (the nearest in time when the thread stood still). A batch holds each CPU's
    /// ring in turn, so a thread that moved between CPUs has its samples out of time order:
    /// records before the match stay for the samples still to come (those of lost samples
    /// leave with [`KEEP_NS`]).
    fn take(&mut self, chain: &Chain) -> Option<Walked> {
        let q = self.waiting.get_mut(&chain.tid)?;
        let (at, _) = q
            .iter()
            .enumerate()
            .filter(|(_, w)| w.sp == chain.sp && w.bp == chain.bp)
            .map(|(i, w)| (i, w.time.abs_diff(chain.time)))
            .filter(|&(_, lag)| lag <= MAX_LAG_NS)
            .min_by_key(|&(_, lag)| lag)?;
        q.remove(at)
    }

    /// The summary's line, when some stacks went past the copy.
    pub fn note(&self) -> Option<String> {
        (self.past_copy > 0).then(|| {
            let lost = self.past_copy - self.joined;
            format!(
                "java: {} samples' frame chains went past the {} KiB stack copy; their frames \
                 beyond it were read at sample time for {}{}",
                self.past_copy,
                self.copy_bytes.div_ceil(1024),
                self.joined,
                if lost > 0 {
                    format!(
                        " ({lost} without: {}the kernel refused the program or its ring buffer \
                         was full)",
                        if self.found_late {
                            "taken before the JVM was found, or "
                        } else {
                            ""
                        }
                    )
                } else {
                    String::new()
                }
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::perf::{sample_type as st, RecordIter};

    const LAYOUT: SampleLayout = SampleLayout {
        sample_type: st::IP
            | st::TID
            | st::TIME
            | st::CPU
            | st::PERIOD
            | st::CALLCHAIN
            | st::REGS_USER
            | st::STACK_USER,
        // BP, SP, IP (x86-64's perf register numbers 6, 7, 8).
        regs_user_mask: 0x1c0,
        sample_id_all: true,
    };
    const SP: u64 = 0x7fff_0000_0000;

    /// A SAMPLE record whose user stack copy (`size` bytes reserved: below 64 KiB, as the kernel
    /// leaves room for the record's other fields) is `stack`.
    fn sample(bp: u64, stack: &[u8], size: usize) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(0x40_1000u64.to_le_bytes()); // ip
        b.extend([7u32, 7].iter().flat_map(|v| v.to_le_bytes())); // pid, tid
        for v in [5u64, 0, 1, 1, 0x40_1000] {
            // time, cpu, period, callchain of one ip
            b.extend(v.to_le_bytes());
        }
        for v in [2u64, bp, SP, 0x40_1000] {
            // regs: abi, bp, sp, ip
            b.extend(v.to_le_bytes());
        }
        b.extend((size as u64).to_le_bytes());
        b.extend(stack);
        b.resize(b.len() + size - stack.len(), 0);
        b.extend((stack.len() as u64).to_le_bytes());
        let mut r = 9u32.to_le_bytes().to_vec();
        r.extend(0u16.to_le_bytes());
        r.extend(((8 + b.len()) as u16).to_le_bytes());
        r.extend(b);
        r
    }

    fn reduced(record: &[u8]) -> Option<Vec<u8>> {
        let raw = RecordIter::new(record).next().unwrap().unwrap();
        reduce(&LAYOUT, &raw, &record[..8], false, None).map(|(r, _)| r)
    }

    fn stack_of(record: &[u8]) -> Vec<u8> {
        let raw = RecordIter::new(record).next().unwrap().unwrap();
        match LAYOUT.parse(&raw).unwrap() {
            Record::Sample(s) => s.stack_user.to_vec(),
            _ => panic!("not a sample"),
        }
    }

    #[test]
    fn only_the_top_and_each_frames_links_and_method_slot_are_kept() {
        // 40 KiB of stack, every word non-zero; frames at 2 KiB, 10 KiB and 30 KiB above sp,
        // the last one's saved fp pointing down (the end of the chain).
        let mut stack: Vec<u8> = (0..40 * 1024 / 8)
            .flat_map(|i| (0xa000_0000u64 + i).to_le_bytes())
            .collect();
        let frames = [2048usize, 10 * 1024, 30 * 1024];
        let put = |stack: &mut Vec<u8>, off: usize, v: u64| {
            stack[off..off + 8].copy_from_slice(&v.to_le_bytes());
        };
        for pair in frames.windows(2) {
            put(&mut stack, pair[0], SP + pair[1] as u64);
        }
        put(&mut stack, frames[2], 1);
        let before = stack.clone();
        let record = sample(SP + frames[0] as u64, &stack, 60000);
        let small = reduced(&record).expect("cut down");
        assert!(small.len() < 31 * 1024, "{} bytes", small.len());
        // Still a SAMPLE the reader parses, with the regs it had.
        let copy = stack_of(&small);
        assert_eq!(copy.len(), frames[2] + 16, "ends after the deepest frame");
        let kept: Vec<usize> = (0..copy.len() / 8)
            .map(|i| i * 8)
            .filter(|&o| copy[o..o + 8] != [0; 8])
            .collect();
        let mut expected: Vec<usize> = (0..TOP_BYTES / 8).map(|i| i * 8).collect();
        for f in frames {
            expected.extend([f - 24, f, f + 8]);
        }
        assert_eq!(kept, expected);
        for o in kept {
            assert_eq!(copy[o..o + 8], before[o..o + 8], "word at {o} changed");
        }
    }

    /// The frame pointer starts a chain inside the top KiB: the top is kept whole only up to
    /// that frame's links; above them, the frames' links and `Method*` slots, and words that
    /// may be code or stack addresses. With `whole_top`, or when the register starts no chain
    /// (a frameless leaf using it for something else), the whole KiB stays. The same holds for
    /// a 1 KiB copy, whose length stays.
    #[test]
    fn the_top_is_kept_up_to_the_innermost_frame_when_a_chain_starts_there() {
        // Small integers, Java heap pointers, and every 16th word a library address.
        let mut stack: Vec<u8> = (0..8 * 1024 / 8u64)
            .map(|i| match i % 16 {
                0 => 0x7f00_1234_0000 + i,
                1..8 => i,
                _ => 0x7_0000_0000 + i,
            })
            .flat_map(u64::to_le_bytes)
            .collect();
        let frames = [256usize, 512, 4096];
        let put = |stack: &mut Vec<u8>, off: usize, v: u64| {
            stack[off..off + 8].copy_from_slice(&v.to_le_bytes());
        };
        for pair in frames.windows(2) {
            put(&mut stack, pair[0], SP + pair[1] as u64);
        }
        put(&mut stack, frames[2], 1);
        let kept = |stack: &[u8], size: usize, whole_top: bool| -> Vec<usize> {
            // A copy of the top KiB alone is the kernel's whole copy (beside the BPF program).
            let reserved = if size <= TOP_BYTES { size } else { 60000 };
            let record = sample(SP + frames[0] as u64, &stack[..size], reserved);
            let raw = RecordIter::new(&record).next().unwrap().unwrap();
            let (small, _) = reduce(&LAYOUT, &raw, &record[..8], whole_top, None).unwrap();
            let copy = stack_of(&small);
            for o in (0..copy.len()).step_by(8) {
                assert!(copy[o..o + 8] == [0; 8] || copy[o..o + 8] == stack[o..o + 8]);
            }
            (0..copy.len() / 8)
                .map(|i| i * 8)
                .filter(|&o| copy[o..o + 8] != [0; 8])
                .collect()
        };
        let mut top: Vec<usize> = (0..(frames[0] + 16) / 8).map(|i| i * 8).collect();
        top.extend((frames[0] + 16..TOP_BYTES).filter(|o| o % 128 == 0));
        top.extend([frames[1] - 24, frames[1], frames[1] + 8]);
        top.sort();
        top.dedup();
        let deep = [frames[2] - 24, frames[2], frames[2] + 8];
        assert_eq!(kept(&stack, stack.len(), false), [&top[..], &deep].concat());
        let whole: Vec<usize> = (0..TOP_BYTES / 8).map(|i| i * 8).collect();
        assert_eq!(
            kept(&stack, stack.len(), true),
            [&whole[..], &deep].concat()
        );
        // A 1 KiB copy: the chain goes on past it.
        assert_eq!(kept(&stack, TOP_BYTES, false), top);
        assert_eq!(kept(&stack, TOP_BYTES, true), whole);
        // A register pointing into the top whose "frame" links nowhere: no chain, the whole KiB.
        let mut lone = stack.clone();
        put(&mut lone, frames[0], 0);
        let copy = stack_of(&reduced(&sample(SP + frames[0] as u64, &lone, 60000)).unwrap());
        assert_eq!(copy, lone[..TOP_BYTES]);
    }

    #[test]
    fn a_short_or_broken_chain_keeps_the_top_only() {
        // The frame pointer is below sp (no frame in the copy): only the top 1 KiB stays.
        let stack = vec![0x11u8; 16 * 1024];
        let copy = stack_of(&reduced(&sample(SP - 8, &stack, 60000)).unwrap());
        assert_eq!(copy, vec![0x11u8; TOP_BYTES]);
        // A thread near its stack's end: the kernel copied less than 1 KiB of the 64 KiB
        // reserved; the empty room goes.
        let copy = stack_of(&reduced(&sample(SP + 4096, &stack[..300], 60000)).unwrap());
        assert_eq!(copy, vec![0x11u8; 300]);
        // A 1 KiB copy (`--call-graph fp`, or beside the BPF program) is left as it is.
        let small = sample(SP, &stack[..1024], 1024);
        assert_eq!(reduced(&small), Some(small));
    }

    /// Beside the BPF program the kernel copies 1 KiB: the sample is written as it came, after
    /// the program's frames past the copy (those in the copy left out), and its chain is
    /// counted as going past the copy.
    #[test]
    fn a_1_kib_copy_gets_the_frames_past_it() {
        // Frames at 256 bytes (in the copy, its saved fp pointing past it) and at 4 KiB.
        let mut stack = vec![0u8; 1024];
        stack[256..264].copy_from_slice(&(SP + 4096).to_le_bytes());
        let record = sample(SP + 256, &stack, 1024);
        let raw = RecordIter::new(&record).next().unwrap().unwrap();
        let (kept, chain) = reduce(&LAYOUT, &raw, &record[..8], false, None).unwrap();
        assert_eq!(kept, record);
        assert!(chain.past_copy && chain.copied == 1024);
        let mut join = DeepJoin::default();
        join.add(vec![Walked {
            pid: 7,
            tid: 7,
            time: 5,
            sp: SP,
            bp: SP + 256,
            frames: vec![
                [SP + 256, SP + 4096, 0x40_2000, 0],
                [SP + 4096, SP + 8192, 0x40_3000, 0x9000],
            ],
        }]);
        let deep = join.record_for(&chain).expect("a deep-frames record");
        let words: Vec<u64> = deep[24..]
            .chunks(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
            .collect();
        assert_eq!(words, [SP + 4096, SP + 8192, 0x40_3000, 0x9000]);
        assert_eq!((join.past_copy, join.joined), (1, 1));
        assert!(join.note().unwrap().contains("past the 1 KiB stack copy"));
    }

    /// A batch holds each CPU's ring in turn: a thread that moved has a later sample read
    /// before an earlier one, and both still find their frames.
    #[test]
    fn samples_out_of_time_order_find_their_frames() {
        let walked = |time: u64, bp: u64| Walked {
            pid: 7,
            tid: 7,
            time,
            sp: SP,
            bp,
            frames: vec![[bp, 0, 0x40_2000, 0]],
        };
        let chain = |time: u64, bp: u64| Chain {
            pid: 7,
            tid: 7,
            time,
            sp: SP,
            bp,
            copied: 1024,
            past_copy: true,
        };
        let mut join = DeepJoin::default();
        join.add(vec![walked(10, SP + 2048), walked(20, SP + 4096)]);
        assert!(join.record_for(&chain(21, SP + 4096)).is_some());
        assert!(join.record_for(&chain(11, SP + 2048)).is_some());
        assert_eq!(join.joined, 2);
    }

    /// A recording whose every META copy is damaged is read with the layout guessed from its
    /// samples: cut-down fp copies (some longer than 8 KiB) are not taken for DWARF's.
    #[test]
    fn damaged_meta_tells_cut_fp_copies_from_dwarf_ones() {
        use crate::recording::{default_meta, CallGraph};
        let guess = |records: Vec<Vec<u8>>| {
            let event = default_meta(&records.concat()).unwrap().event;
            (event.call_graph, event.stack_user_bytes)
        };
        let stack = vec![0x11u8; 40 * 1024];
        let chain = |top: usize| {
            let mut s = stack.clone();
            s[2048..2056].copy_from_slice(&(SP + top as u64).to_le_bytes());
            s[top..top + 8].copy_from_slice(&1u64.to_le_bytes());
            reduced(&sample(SP + 2048, &s, 60000)).unwrap()
        };
        assert_eq!(
            guess(vec![chain(20 * 1024), chain(12 * 1024), chain(30 * 1024)]),
            (CallGraph::FramePointers, 65528)
        );
        assert_eq!(
            guess(vec![sample(SP, &stack[..1024], 1024)]),
            (CallGraph::FramePointers, 1024)
        );
        assert_eq!(
            guess(vec![sample(SP, &stack[..8192], 8192); 2]),
            (CallGraph::Dwarf, 8192)
        );
        assert_eq!(
            guess(vec![
                sample(SP, &stack, 60000),
                sample(SP, &stack[..9000], 60000)
            ]),
            (CallGraph::Dwarf, 65528)
        );
    }
}
