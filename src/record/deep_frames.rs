//! A JVM's frames past the sample's user-stack copy, read at sample time by a BPF program on
//! the sampling events (issue 27, issue 29). Interpreted Java frames are named by a slot of each
//! frame (`Method*`), which the kernel's callchain does not carry. Rather than copying the
//! largest user stack the kernel copies (64 KiB, in the target's context, at every sample), the
//! recorder asks for the 1 KiB copy a frameless leaf needs and this program
//! (BPF_PROG_TYPE_PERF_EVENT, attached with PERF_EVENT_IOC_SET_BPF to the events of the
//! profiled threads only) reads the rest: it takes the thread's user registers
//! (`bpf_task_pt_regs`, what the sample's REGS_USER holds), follows the frame-pointer chain with
//! `bpf_probe_read_user` past the frames the copy holds, and for each frame beyond the copy
//! (`skip_bytes` above the stack pointer) sends its frame pointer, saved frame pointer, return
//! address and the word three below it (HotSpot's `Method*` slot) into a ring buffer: 40 bytes
//! read per frame instead of the whole stack. It always returns 1: the kernel keeps every
//! sample. Where the kernel has `bpf_loop` (Linux 5.17+) the walk's loops are its callbacks,
//! which the verifier checks quickly (the load is on the path before the JVM starts); a kernel
//! that refuses that form gets the same walk as plain bounded loops: same records either way. A kernel that refuses the program gets the 64 KiB copy instead (`events::open`).
//!
//! The recorder joins each ring buffer record to its sample (same thread, same stack and frame
//! pointers, the sample taken just after on the same clock: `bpf_ktime_get_ns` and the events'
//! CLOCK_MONOTONIC are both the kernel's fast monotonic clock) and stores the frames the copy
//! does not hold as a jprof record ([`crate::format::perf::RecordKind::JPROF_DEEP_FRAMES`])
//! just before the sample. The program is GPL (bpf_probe_read_user is a GPL-only helper;
//! docs/security.md).

use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::format::perf::{Record, RecordIter, RecordKind, SampleLayout};
use crate::sys::bpf;

/// Frames the walk may follow below the stack pointer before it reaches the copy (see
/// [`max_skip`]).
const SKIP_BELOW_SP: i32 = 64;
/// Frames sent per sample at most (the per-CPU scratch record must stay within 32 KiB).
pub const MAX_FRAMES: i32 = 1000;
/// Bytes before the frames in a ring buffer record: pid and tid, time, sp, bp, frame count.
const HEAD: i32 = 40;
/// Bytes per frame: frame pointer, saved frame pointer, return address, `Method*` slot.
const FRAME: i32 = 32;
/// The ring buffer's size per CPU sampled: a record is ~3 KiB for a javac stack 100 frames
/// deep and ~26 KiB for one 800 deep; the reader drains the ring before it is a quarter full at
/// the rate it last filled ([`DeepFrames::drain_within`]), so what it must hold is the
/// records of a jump in that rate between two drains.
const RING_BYTES_PER_CPU: usize = 1 << 20;
/// The ring's size whatever the CPUs: the kernel maps a ring's pages into jprof whole (its data
/// twice), all counted in the recorder's resident memory (a 16 MiB ring was 32 MiB of it).
const RING_BYTES_MIN: usize = 2 << 20;
const RING_BYTES_MAX: usize = 16 << 20;

/// The ring's size for `cpus` CPUs sampled: a power of two, as the kernel requires.
pub fn ring_bytes(cpus: usize) -> usize {
    (cpus.max(1) * RING_BYTES_PER_CPU)
        .next_power_of_two()
        .clamp(RING_BYTES_MIN, RING_BYTES_MAX)
}

/// The longest the reader waits between two drains of the ring, whatever the rate.
const DRAIN_WITHIN_MAX: std::time::Duration = std::time::Duration::from_millis(100);
/// The shortest: drains more often than this would cost jprof more than the samples do.
const DRAIN_WITHIN_MIN: std::time::Duration = std::time::Duration::from_millis(2);

/// How soon the ring is drained again after a drain that found `bytes` written over
/// `elapsed` (and a rate of `before` bytes a second before that): before a quarter of its
/// `size` fills at the higher of the two rates, the earlier one halved for each drain (a
/// JVM that stops recursing deep does not keep the reader up). Returns the rate to keep.
fn next_drain(
    size: usize,
    bytes: usize,
    elapsed: std::time::Duration,
    before: f64,
) -> (std::time::Duration, f64) {
    let now = bytes as f64 / elapsed.as_secs_f64().max(1e-4);
    // Halved drain after drain, a rate that is gone reaches nothing (not an ever smaller
    // number whose quarter-ring time no Duration holds).
    let rate = match now.max(before / 2.0) {
        r if r >= 1.0 => r,
        _ => 0.0,
    };
    let within = std::time::Duration::try_from_secs_f64((size / 4) as f64 / rate)
        .unwrap_or(DRAIN_WITHIN_MAX);
    (within.clamp(DRAIN_WITHIN_MIN, DRAIN_WITHIN_MAX), rate)
}

/// bpf_probe_read_user and the task helpers are GPL-only.
const LICENSE: &CStr = c"GPL";

/// A minimal BPF assembler: the instructions the walk needs, with labels for jumps.
mod asm {
    /// Registers: r0 return value, r1–r5 arguments (clobbered by calls), r6–r9 kept across
    /// calls, r10 the read-only frame pointer of the program's 512-byte stack.
    pub type Reg = u8;
    pub const R0: Reg = 0;
    pub const R1: Reg = 1;
    pub const R2: Reg = 2;
    pub const R3: Reg = 3;
    pub const R4: Reg = 4;
    pub const R6: Reg = 6;
    pub const R7: Reg = 7;
    pub const R8: Reg = 8;
    pub const R9: Reg = 9;
    pub const R10: Reg = 10;

    /// Helper ids (uapi `enum bpf_func_id`).
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    pub const KTIME_GET_NS: i32 = 5;
    pub const GET_CURRENT_PID_TGID: i32 = 14;
    pub const PROBE_READ_USER: i32 = 112;
    pub const RINGBUF_OUTPUT: i32 = 130;
    pub const GET_CURRENT_TASK_BTF: i32 = 158;
    pub const TASK_PT_REGS: i32 = 175;
    pub const LOOP: i32 = 181;

    /// Conditional jumps (BPF_JMP | op | BPF_K or BPF_X), unsigned comparisons.
    #[derive(Clone, Copy)]
    pub enum Cond {
        Eq = 0x10,
        Gt = 0x20,
        Ne = 0x50,
        Lt = 0xa0,
        Le = 0xb0,
    }

    /// Instructions with jump targets still to be resolved.
    #[derive(Default)]
    pub struct Asm {
        insns: Vec<u64>,
        /// (instruction index, label) of each jump.
        jumps: Vec<(usize, &'static str)>,
        /// (instruction index, label) of each callback's address.
        funcs: Vec<(usize, &'static str)>,
        labels: Vec<(&'static str, usize)>,
    }

    fn insn(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> u64 {
        u64::from(code)
            | u64::from(dst | (src << 4)) << 8
            | u64::from(off as u16) << 16
            | u64::from(imm as u32) << 32
    }

    impl Asm {
        fn push(&mut self, code: u8, dst: Reg, src: Reg, off: i16, imm: i32) {
            self.insns.push(insn(code, dst, src, off, imm));
        }
        /// The next instruction's index.
        pub fn next_index(&self) -> usize {
            self.insns.len()
        }
        /// Marks the next instruction's place.
        pub fn label(&mut self, name: &'static str) {
            self.labels.push((name, self.insns.len()));
        }
        /// dst = imm (BPF_ALU64 | BPF_MOV | BPF_K).
        pub fn mov_imm(&mut self, dst: Reg, imm: i32) {
            self.push(0xb7, dst, 0, 0, imm);
        }
        /// dst = src (BPF_ALU64 | BPF_MOV | BPF_X).
        pub fn mov(&mut self, dst: Reg, src: Reg) {
            self.push(0xbf, dst, src, 0, 0);
        }
        /// dst += imm.
        pub fn add_imm(&mut self, dst: Reg, imm: i32) {
            self.push(0x07, dst, 0, 0, imm);
        }
        /// dst += src.
        pub fn add(&mut self, dst: Reg, src: Reg) {
            self.push(0x0f, dst, src, 0, 0);
        }
        /// dst >>= imm, unsigned (BPF_ALU64 | BPF_RSH | BPF_K).
        pub fn rsh_imm(&mut self, dst: Reg, imm: i32) {
            self.push(0x77, dst, 0, 0, imm);
        }
        /// dst *= imm.
        pub fn mul_imm(&mut self, dst: Reg, imm: i32) {
            self.push(0x27, dst, 0, 0, imm);
        }
        /// dst &= imm.
        pub fn and_imm(&mut self, dst: Reg, imm: i32) {
            self.push(0x57, dst, 0, 0, imm);
        }
        /// dst = *(u64 *)(src + off).
        pub fn load(&mut self, dst: Reg, src: Reg, off: i16) {
            self.push(0x79, dst, src, off, 0);
        }
        /// *(u64 *)(dst + off) = src.
        pub fn store(&mut self, dst: Reg, off: i16, src: Reg) {
            self.push(0x7b, dst, src, off, 0);
        }
        /// *(u64 *)(dst + off) = imm.
        pub fn store_imm(&mut self, dst: Reg, off: i16, imm: i32) {
            self.push(0x7a, dst, 0, off, imm);
        }
        /// *(u32 *)(dst + off) = src.
        pub fn store32(&mut self, dst: Reg, off: i16, src: Reg) {
            self.push(0x63, dst, src, off, 0);
        }
        /// *(u32 *)(dst + off) = imm.
        pub fn store32_imm(&mut self, dst: Reg, off: i16, imm: i32) {
            self.push(0x62, dst, 0, off, imm);
        }
        /// dst = the map behind `fd` (BPF_LD | BPF_IMM | BPF_DW, src BPF_PSEUDO_MAP_FD): two
        /// instruction slots.
        pub fn load_map(&mut self, dst: Reg, fd: i32) {
            self.push(0x18, dst, 1, 0, fd);
            self.push(0, 0, 0, 0, 0);
        }
        /// dst = the subprogram at `label`, for a helper's callback (BPF_LD | BPF_IMM | BPF_DW,
        /// src BPF_PSEUDO_FUNC, imm its offset from the next instruction): two slots.
        pub fn load_func(&mut self, dst: Reg, label: &'static str) {
            self.funcs.push((self.insns.len(), label));
            self.push(0x18, dst, 4, 0, 0);
            self.push(0, 0, 0, 0, 0);
        }
        /// Calls helper `id`: arguments in r1–r5, result in r0.
        pub fn call(&mut self, id: i32) {
            self.push(0x85, 0, 0, 0, id);
        }
        /// if dst <cond> imm goto label.
        pub fn jump_imm(&mut self, cond: Cond, dst: Reg, imm: i32, label: &'static str) {
            self.jumps.push((self.insns.len(), label));
            self.push(0x05 | cond as u8, dst, 0, 0, imm);
        }
        /// if dst <cond> src goto label.
        pub fn jump_reg(&mut self, cond: Cond, dst: Reg, src: Reg, label: &'static str) {
            self.jumps.push((self.insns.len(), label));
            self.push(0x0d | cond as u8, dst, src, 0, 0);
        }
        /// goto label.
        pub fn goto(&mut self, label: &'static str) {
            self.jumps.push((self.insns.len(), label));
            self.push(0x05, 0, 0, 0, 0);
        }
        /// Returns r0.
        pub fn exit(&mut self) {
            self.push(0x95, 0, 0, 0, 0);
        }
        /// The encoded program, jump offsets filled in (relative to the next instruction).
        pub fn finish(mut self) -> Vec<u64> {
            let offset = |at: usize, name: &str| {
                let target = self
                    .labels
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|&(_, i)| i)
                    .unwrap_or_else(|| panic!("BPF label {name} is not defined"));
                target as i64 - at as i64 - 1
            };
            for &(at, name) in &self.jumps {
                let off = offset(at, name) as i16;
                self.insns[at] = (self.insns[at] & !(0xffff << 16)) | u64::from(off as u16) << 16;
            }
            for &(at, name) in &self.funcs {
                let imm = offset(at, name) as i32;
                self.insns[at] = (self.insns[at] & 0xffff_ffff) | u64::from(imm as u32) << 32;
            }
            self.insns
        }
    }
}

/// Frames followed inside a copy of `skip_bytes` before giving up. The chain climbs (each saved
/// frame pointer lies above the last and is 8-aligned), so from the stack pointer up it leaves
/// the copy within `skip_bytes / 8` frames; [`SKIP_BELOW_SP`] more let a chain that starts
/// below the stack pointer climb to it. The verifier follows the loop once per frame it
/// allows, at every start of a recording: with a fixed 2048 (as before) loading the program
/// took 79 ms of the kernel's CPU, with 192 (a 1 KiB copy) 42 ms (docs/performance.md).
fn max_skip(skip_bytes: i32) -> i32 {
    skip_bytes / 8 + SKIP_BELOW_SP
}

/// The walk. Every check is written "if fine, go on; else leave": the verifier explores the
/// branch not taken first and keeps the other pending, so leaving on the fall-through keeps its
/// pending states few while it follows the bounded loops frame by frame.
fn program(scratch_fd: i32, ring_fd: i32, skip_bytes: i32, watched_fd: Option<i32>) -> Vec<u64> {
    use asm::*;
    let mut a = Asm::default();
    start(&mut a, scratch_fd, watched_fd);
    // r6 = where sent frames begin; r8 = the frame pointer; r9 = frames passed.
    a.mov(R6, R9);
    a.add_imm(R6, skip_bytes);
    a.mov_imm(R9, 0);
    a.label("skip");
    a.jump_imm(Cond::Lt, R9, max_skip(skip_bytes), "skip_more");
    a.goto("exit");
    a.label("skip_more");
    // A frame pointer is 8-aligned.
    a.mov(R1, R8);
    a.and_imm(R1, 7);
    a.jump_imm(Cond::Eq, R1, 0, "aligned");
    a.goto("exit");
    a.label("aligned");
    a.mov(R1, R8);
    a.add_imm(R1, 16);
    a.jump_reg(Cond::Le, R1, R6, "inside");
    a.goto("send");
    a.label("inside");
    // The saved frame pointer, into the stack's top word.
    a.mov(R1, R10);
    a.add_imm(R1, -8);
    a.mov_imm(R2, 8);
    a.mov(R3, R8);
    a.call(PROBE_READ_USER);
    a.jump_imm(Cond::Eq, R0, 0, "read");
    a.goto("exit");
    a.label("read");
    // The chain goes up the stack; anything else ends it.
    a.load(R1, R10, -8);
    a.jump_reg(Cond::Gt, R1, R8, "up");
    a.goto("exit");
    a.label("up");
    a.mov(R8, R1);
    a.add_imm(R9, 1);
    a.goto("skip");

    // r9 = frames sent.
    a.label("send");
    a.mov_imm(R9, 0);
    a.label("frame");
    a.jump_imm(Cond::Lt, R9, MAX_FRAMES, "room");
    a.goto("submit");
    a.label("room");
    read_and_send_frame(&mut a, "submit", ["frame_aligned", "links", "next"]);
    a.goto("frame");

    submit(&mut a, ring_fd);
    a.finish()
}

/// Frames sent per call of the `bpf_loop` form's callback (a divisor of [`MAX_FRAMES`]).
const FRAMES_PER_CALL: i32 = 20;
const _: () = assert!(MAX_FRAMES % FRAMES_PER_CALL == 0);

/// The walk's state, on the main program's stack, that `bpf_loop` hands its callbacks: offsets
/// from r10.
const CTX: i16 = -40;
/// The frame pointer the next iteration looks at.
const CTX_FP: i16 = 0;
/// Where sent frames begin (stack pointer + `skip_bytes`).
const CTX_LIMIT: i16 = 8;
/// The scratch record (a map value pointer, spilled).
const CTX_SCRATCH: i16 = 16;
/// 1 once the walk inside the copy reached a frame past it.
const CTX_PAST_COPY: i16 = 24;
/// The callback counts the frames sent in the record's own count word, in the map value rather
/// than in `CTX`: the verifier tracks what a stack slot holds, and a count there (a different
/// range on each way out of the callback) kept it from seeing that the callback's states repeat
/// (7452 instructions checked instead of 433 on Linux 6.18, with 8 frames a call).
const SENT: i16 = 32;

/// The same walk with its two loops as `bpf_loop` callbacks (Linux 5.17+): the verifier checks
/// each callback's body until its state repeats instead of following the loop frame by frame,
/// so loading takes under 1 ms instead of 40–70 (docs/performance.md). Same records,
/// same bounds: `max_skip` frames inside the copy, [`MAX_FRAMES`] sent. Also returns the
/// callbacks' first instructions (skip_frame, send_frame), for their types ([`btf`]).
fn program_with_bpf_loop(
    scratch_fd: i32,
    ring_fd: i32,
    skip_bytes: i32,
    watched_fd: Option<i32>,
) -> (Vec<u64>, [u32; 2]) {
    use asm::*;
    let mut a = Asm::default();
    start(&mut a, scratch_fd, watched_fd);
    a.store(R10, CTX + CTX_FP, R8);
    a.mov(R1, R9);
    a.add_imm(R1, skip_bytes);
    a.store(R10, CTX + CTX_LIMIT, R1);
    a.store(R10, CTX + CTX_SCRATCH, R7);
    a.store_imm(R7, SENT, 0);
    a.store_imm(R10, CTX + CTX_PAST_COPY, 0);
    a.mov_imm(R1, max_skip(skip_bytes));
    a.load_func(R2, "skip_frame");
    a.mov(R3, R10);
    a.add_imm(R3, CTX.into());
    a.mov_imm(R4, 0);
    a.call(LOOP);
    a.load(R1, R10, CTX + CTX_PAST_COPY);
    a.jump_imm(Cond::Ne, R1, 0, "send");
    a.goto("exit");
    a.label("send");
    a.mov_imm(R1, MAX_FRAMES / FRAMES_PER_CALL);
    a.load_func(R2, "send_frame");
    a.mov(R3, R10);
    a.add_imm(R3, CTX.into());
    a.mov_imm(R4, 0);
    a.call(LOOP);
    // r9 = frames sent, bounded again for the verifier (the record's size depends on it).
    a.load(R9, R7, SENT);
    a.jump_imm(Cond::Le, R9, MAX_FRAMES, "submit");
    a.goto("exit");
    submit(&mut a, ring_fd);

    // skip_frame(index, ctx): one frame inside the copy; 0 goes on, 1 stops.
    let skip_frame = a.next_index() as u32;
    a.label("skip_frame");
    a.mov(R6, R2);
    a.load(R8, R6, CTX_FP);
    a.mov(R1, R8);
    a.and_imm(R1, 7);
    a.jump_imm(Cond::Eq, R1, 0, "skip_aligned");
    a.goto("skip_stop");
    a.label("skip_aligned");
    a.mov(R1, R8);
    a.add_imm(R1, 16);
    a.load(R2, R6, CTX_LIMIT);
    a.jump_reg(Cond::Le, R1, R2, "skip_inside");
    a.store_imm(R6, CTX_PAST_COPY, 1);
    a.goto("skip_stop");
    a.label("skip_inside");
    a.mov(R1, R10);
    a.add_imm(R1, -8);
    a.mov_imm(R2, 8);
    a.mov(R3, R8);
    a.call(PROBE_READ_USER);
    a.jump_imm(Cond::Eq, R0, 0, "skip_read");
    a.goto("skip_stop");
    a.label("skip_read");
    a.load(R1, R10, -8);
    a.jump_reg(Cond::Gt, R1, R8, "skip_up");
    a.goto("skip_stop");
    a.label("skip_up");
    a.store(R6, CTX_FP, R1);
    a.mov_imm(R0, 0);
    a.exit();
    a.label("skip_stop");
    a.mov_imm(R0, 1);
    a.exit();

    // send_frame(index, ctx): sends frames index * FRAMES_PER_CALL on, as many as
    // FRAMES_PER_CALL; 0 goes on, 1 stops. A batch of frames per call, not one: a call per
    // frame made a sample ~15% dearer (docs/performance.md).
    let send_frame = a.next_index() as u32;
    a.label("send_frame");
    a.jump_imm(Cond::Lt, R1, MAX_FRAMES / FRAMES_PER_CALL, "send_room");
    a.mov_imm(R0, 1);
    a.exit();
    a.label("send_room");
    a.mov(R6, R2);
    // Frames sent before this batch at r10-48; r7 = where this batch's frames go.
    a.mul_imm(R1, FRAMES_PER_CALL);
    a.store(R10, -48, R1);
    a.mul_imm(R1, FRAME);
    a.load(R7, R6, CTX_SCRATCH);
    a.add(R7, R1);
    a.load(R8, R6, CTX_FP);
    // r9 = frames of this batch sent.
    a.mov_imm(R9, 0);
    a.label("send_next_frame");
    a.jump_imm(Cond::Lt, R9, FRAMES_PER_CALL, "send_more");
    a.load(R1, R10, -48);
    a.add(R1, R9);
    a.load(R2, R6, CTX_SCRATCH);
    a.store(R2, SENT, R1);
    a.store(R6, CTX_FP, R8);
    a.mov_imm(R0, 0);
    a.exit();
    a.label("send_more");
    read_and_send_frame(
        &mut a,
        "send_stop",
        ["send_aligned", "send_read", "send_up"],
    );
    a.goto("send_next_frame");
    a.label("send_stop");
    a.load(R1, R10, -48);
    a.add(R1, R9);
    a.load(R2, R6, CTX_SCRATCH);
    a.store(R2, SENT, R1);
    a.mov_imm(R0, 1);
    a.exit();
    (a.finish(), [skip_frame, send_frame])
}

/// BTF type ids of the `bpf_loop` form's functions in [`btf`]: the program, skip_frame,
/// send_frame.
const BTF_FUNCS: [u32; 3] = [3, 4, 5];

/// The types of the `bpf_loop` form's functions, which the kernel requires of a program that
/// passes a subprogram's address: a BTF blob (uapi `linux/btf.h`) of `int`, a prototype
/// `int (void)`, and three static functions of it. Their arguments are not described: the
/// verifier checks a static function's body in its caller's context, not against its type.
fn btf() -> Vec<u8> {
    const KIND_INT: u32 = 1;
    const KIND_FUNC: u32 = 12;
    const KIND_FUNC_PROTO: u32 = 13;
    let strings = b"\0int\0jprof_frames\0skip_frame\0send_frame\0";
    let name = |s: &str| {
        let at = strings
            .windows(s.len() + 2)
            .position(|w| w[0] == 0 && &w[1..=s.len()] == s.as_bytes() && w[s.len() + 1] == 0)
            .expect("the name is in the strings");
        at as u32 + 1
    };
    let types: Vec<u32> = vec![
        // 1: int, 4 bytes, signed, 32 bits.
        name("int"),
        KIND_INT << 24,
        4,
        (1 << 24) | 32,
        // 2: int (void).
        0,
        KIND_FUNC_PROTO << 24,
        1,
        // 3–5: the functions, static (linkage 0 in the info's low bits), of type 2.
        name("jprof_frames"),
        KIND_FUNC << 24,
        2,
        name("skip_frame"),
        KIND_FUNC << 24,
        2,
        name("send_frame"),
        KIND_FUNC << 24,
        2,
    ];
    let types: Vec<u8> = types.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut blob = Vec::new();
    blob.extend(0xeb9f_u16.to_le_bytes()); // magic
    blob.extend([1, 0]); // version, flags
    for word in [24, 0, types.len(), types.len(), strings.len()] {
        blob.extend((word as u32).to_le_bytes()); // hdr_len, type_off/len, str_off/len
    }
    blob.extend(types);
    blob.extend(strings);
    blob
}

/// The program's start, shared by both forms: r7 = this CPU's scratch record, its sp and bp
/// words written; r8 = the frame pointer, r9 = the stack pointer. A kernel thread's sample (no
/// user registers) goes to `exit`, as does, with `watched_fd`, a sample of a process not in
/// that map (`DeepFrames::watch`).
fn start(a: &mut asm::Asm, scratch_fd: i32, watched_fd: Option<i32>) {
    use asm::*;
    if let Some(watched_fd) = watched_fd {
        // The process id (the upper half of pid_tgid) as the map's 4-byte key.
        a.call(GET_CURRENT_PID_TGID);
        a.rsh_imm(R0, 32);
        a.store32(R10, -4, R0);
        look_up_or_exit(a, watched_fd, "watched");
    }
    // The thread's user registers, saved where it entered the kernel (the interrupt of this
    // sample, or the system call it is in): what the sample's REGS_USER holds.
    a.call(GET_CURRENT_TASK_BTF);
    a.mov(R1, R0);
    a.call(TASK_PT_REGS);
    // struct pt_regs (x86_64): bp at 32, ip at 128, cs at 136, sp at 152.
    a.load(R8, R0, 32);
    a.load(R9, R0, 152);
    a.load(R1, R0, 136);
    // Only user-mode registers (a kernel thread has none).
    a.and_imm(R1, 3);
    a.jump_imm(Cond::Eq, R1, 3, "user");
    a.goto("exit");
    a.label("user");
    // r7 = this CPU's scratch record (key 0 of the per-CPU array).
    a.store32_imm(R10, -4, 0);
    look_up_or_exit(a, scratch_fd, "found");
    a.mov(R7, R0);
    a.store(R7, 16, R9);
    a.store(R7, 24, R8);
}

/// r0 = the value of the 4-byte key at r10-4 in the map `fd`, going on at `found`; a key
/// not in the map goes to `exit`.
fn look_up_or_exit(a: &mut asm::Asm, fd: i32, found: &'static str) {
    use asm::*;
    a.load_map(R1, fd);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.call(MAP_LOOKUP_ELEM);
    a.jump_imm(Cond::Ne, R0, 0, found);
    a.goto("exit");
    a.label(found);
}

/// The program's end, shared by both forms: `submit` sends the r9 frames in the scratch
/// record r7 (none: nothing), `exit` keeps the sample.
/// Sends the frame at r8 as frame r9 of the record at r7 (scratch) and moves r8 to its caller,
/// both forms' loop body: jumps to `stop` when the frame pointer is misaligned, unreadable or
/// does not grow toward the stack's base; `labels` are this copy's own three labels.
fn read_and_send_frame(a: &mut asm::Asm, stop: &'static str, labels: [&'static str; 3]) {
    use asm::*;
    let [aligned, read, up] = labels;
    a.mov(R1, R8);
    a.and_imm(R1, 7);
    a.jump_imm(Cond::Eq, R1, 0, aligned);
    a.goto(stop);
    a.label(aligned);
    // One read for the frame: the `Method*` slot at fp-24 to r10-40, the saved frame pointer
    // and return address at fp to r10-16 and r10-8.
    a.mov(R1, R10);
    a.add_imm(R1, -40);
    a.mov_imm(R2, 40);
    a.mov(R3, R8);
    a.add_imm(R3, -24);
    a.call(PROBE_READ_USER);
    a.jump_imm(Cond::Eq, R0, 0, read);
    a.goto(stop);
    a.label(read);
    // The frame goes to scratch + HEAD + n * FRAME: fp, saved fp, return address, Method*
    // slot.
    a.mov(R1, R9);
    a.mul_imm(R1, FRAME);
    a.add(R1, R7);
    a.store(R1, HEAD as i16, R8);
    a.load(R2, R10, -16);
    a.store(R1, HEAD as i16 + 8, R2);
    a.load(R2, R10, -8);
    a.store(R1, HEAD as i16 + 16, R2);
    a.load(R2, R10, -40);
    a.store(R1, HEAD as i16 + 24, R2);
    a.add_imm(R9, 1);
    a.load(R1, R10, -16);
    a.jump_reg(Cond::Gt, R1, R8, up);
    a.goto(stop);
    a.label(up);
    a.mov(R8, R1);
}

fn submit(a: &mut asm::Asm, ring_fd: i32) {
    use asm::*;
    a.label("submit");
    a.jump_imm(Cond::Ne, R9, 0, "some");
    a.goto("exit");
    a.label("some");
    a.store(R7, 32, R9);
    a.call(GET_CURRENT_PID_TGID);
    a.store(R7, 0, R0);
    a.call(KTIME_GET_NS);
    a.store(R7, 8, R0);
    a.mov(R3, R9);
    a.mul_imm(R3, FRAME);
    a.add_imm(R3, HEAD);
    a.load_map(R1, ring_fd);
    a.mov(R2, R7);
    a.mov_imm(R4, 0);
    a.call(RINGBUF_OUTPUT);
    a.label("exit");
    // Keep the sample.
    a.mov_imm(R0, 1);
    a.exit();
}

/// Which form of the walk the kernel took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Its loops as `bpf_loop` callbacks (Linux 5.17+), quick to verify.
    BpfLoop,
    /// Plain bounded loops, which the verifier follows frame by frame: the fallback for a
    /// kernel without `bpf_loop`.
    BoundedLoop,
}

/// The loaded program with its maps.
pub struct DeepFrames {
    program: OwnedFd,
    ring: bpf::RingBuf,
    /// Referenced by the program; kept open with it.
    _scratch: OwnedFd,
    /// For a launch jprof could not tell runs a JVM: the program reads the frames of these
    /// processes only, each added as it maps libjvm.so (`watch`).
    watched: Option<Watched>,
    /// The ring's size, and when it was last drained, at what rate it filled and how soon it
    /// should be drained again (`next_drain`).
    ring_bytes: usize,
    drained_at: std::time::Instant,
    rate: f64,
    drain_within: std::time::Duration,
    /// For the tests: which form was loaded.
    #[cfg(test)]
    form: Form,
}

impl DeepFrames {
    /// Creates the maps and loads the program, which sends the frames lying more than
    /// `skip_bytes` above the stack pointer (the stack copy's size): its `bpf_loop` form, or
    /// where the kernel refuses that, its bounded-loop form; the error says why the kernel
    /// refused both.
    pub fn load(skip_bytes: u32, cpus: usize) -> Result<Self, String> {
        Self::load_forms(skip_bytes, false, ring_bytes(cpus))
    }

    /// [`Self::load`] for the JVMs a launch may start without jprof telling from its command
    /// line (a script that runs "$JAVACMD"): the program does nothing for a process until
    /// [`Self::watch`] sees it map libjvm.so.
    pub fn load_watching(skip_bytes: u32, cpus: usize) -> Result<Self, String> {
        Self::load_forms(skip_bytes, true, ring_bytes(cpus))
    }

    fn load_forms(skip_bytes: u32, watching: bool, ring_bytes: usize) -> Result<Self, String> {
        Self::load_form(skip_bytes, Form::BpfLoop, watching, ring_bytes).or_else(
            |why_not_bpf_loop| {
                Self::load_form(skip_bytes, Form::BoundedLoop, watching, ring_bytes)
                    .map_err(|why| format!("{why}; its bpf_loop form: {why_not_bpf_loop}"))
            },
        )
    }

    /// [`Self::load`] of one form.
    fn load_form(
        skip_bytes: u32,
        form: Form,
        watching: bool,
        ring_bytes: usize,
    ) -> Result<Self, String> {
        let value_size = (HEAD + MAX_FRAMES * FRAME) as u32;
        let scratch = bpf::create_map(
            bpf::MAP_TYPE_PERCPU_ARRAY,
            4,
            value_size,
            1,
            "jprof_scratch",
        )
        .map_err(|e| format!("creating its per-CPU map: {e}"))?;
        let ring = bpf::RingBuf::new(ring_bytes, "jprof_frames")
            .map_err(|e| format!("creating its ring buffer: {e}"))?;
        let skip_bytes =
            i32::try_from(skip_bytes).map_err(|_| "a stack copy that large".to_string())?;
        let watched = match watching {
            true => Some(Watched {
                pids: bpf::PidSet::new(MAX_WATCHED, "jprof_jvms")
                    .map_err(|e| format!("creating its process map: {e}"))?,
                seen: Default::default(),
            }),
            false => None,
        };
        let watched_fd = watched.as_ref().map(|w| w.pids.fd().as_raw_fd());
        let (scratch_fd, ring_fd) = (scratch.as_raw_fd(), ring.fd().as_raw_fd());
        let load = |insns: &[u64], functions| {
            bpf::load_program(
                bpf::PROG_TYPE_PERF_EVENT,
                insns,
                LICENSE,
                "jprof_frames",
                functions,
            )
            .map_err(|e| format!("loading the program: {e}"))
        };
        let program = match form {
            Form::BpfLoop => {
                let (insns, [skip_frame, send_frame]) =
                    program_with_bpf_loop(scratch_fd, ring_fd, skip_bytes, watched_fd);
                let btf = bpf::load_btf(&btf()).map_err(|e| format!("loading its types: {e}"))?;
                let starts = [0, skip_frame, send_frame];
                let funcs: Vec<[u32; 2]> = starts
                    .into_iter()
                    .zip(BTF_FUNCS)
                    .map(|(at, id)| [at, id])
                    .collect();
                load(
                    &insns,
                    Some(&bpf::Functions {
                        btf: &btf,
                        funcs: &funcs,
                    }),
                )?
            }
            Form::BoundedLoop => load(&program(scratch_fd, ring_fd, skip_bytes, watched_fd), None)?,
        };
        Ok(Self {
            program,
            ring,
            _scratch: scratch,
            watched,
            ring_bytes,
            drained_at: std::time::Instant::now(),
            rate: 0.0,
            drain_within: DRAIN_WITHIN_MAX,
            #[cfg(test)]
            form,
        })
    }

    /// Whether the program works only for the processes [`Self::watch`] adds.
    pub fn watching(&self) -> bool {
        self.watched.is_some()
    }

    /// When the program works only for the processes it is given: those `records` show
    /// mapping libjvm.so for the first time are added to its map, so that their next samples
    /// get their frames read, and those they show ending are taken out (a process that later
    /// gets the pid is no JVM until it maps one; the map has room for new JVMs). Nothing
    /// otherwise.
    pub fn watch(&mut self, layout: &SampleLayout, records: &[u8]) -> JvmChanges {
        let mut changes = JvmChanges::default();
        let Some(watched) = &mut self.watched else {
            return changes;
        };
        for raw in RecordIter::new(records).flatten() {
            if let Some(pid) = super::jvm_starts::libjvm_mapped(layout, &raw) {
                // A full map leaves later JVMs without their deep frames (their samples
                // count as not read in the summary).
                if watched.seen.insert(pid) && watched.pids.insert(pid).is_ok() {
                    changes.started.push(pid);
                }
            } else if raw.kind == RecordKind::EXIT {
                if let Ok(Record::Exit { pid, tid, .. }) = layout.parse(&raw) {
                    if pid == tid && watched.seen.remove(&pid) {
                        let _ = watched.pids.remove(pid);
                        changes.ended.push(pid);
                    }
                }
            }
        }
        changes
    }

    /// The form the kernel took.
    #[cfg(test)]
    fn form(&self) -> Form {
        self.form
    }

    /// Runs the program on `event`'s samples (and its inherited copies').
    pub fn attach(&self, event: &OwnedFd) -> std::io::Result<()> {
        bpf::attach_to_perf_event(event, &self.program)
    }

    /// Appends the records sent since the last call.
    pub fn drain(&mut self, out: &mut Vec<Walked>) {
        let mut bytes = 0;
        self.ring.drain(|record| {
            bytes += (record.len() + bpf::RINGBUF_HEADER).next_multiple_of(8);
            out.extend(Walked::decode(record));
        });
        let now = std::time::Instant::now();
        (self.drain_within, self.rate) = next_drain(
            self.ring_bytes,
            bytes,
            now.duration_since(self.drained_at),
            self.rate,
        );
        self.drained_at = now;
    }

    /// How long the reader may sleep before the ring needs draining again (it is not woken by
    /// the ring: each wakeup would cost the sampled thread, as perf's do).
    pub fn drain_within(&self) -> std::time::Duration {
        self.drain_within.saturating_sub(self.drained_at.elapsed())
    }
}

/// The JVMs a watching program started and stopped working for in one batch of records.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct JvmChanges {
    /// Processes found mapping libjvm.so.
    pub started: Vec<u32>,
    /// Of the processes watched, those whose main thread ended.
    pub ended: Vec<u32>,
}

/// Processes that map libjvm.so (a launch's, or any with `-a`), at most this many watched at
/// once.
const MAX_WATCHED: u32 = 1024;

/// The JVMs a watching program works for.
struct Watched {
    pids: bpf::PidSet,
    seen: rustc_hash::FxHashSet<u32>,
}

/// One sample's frames past the copy, as the program sent them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walked {
    pub pid: u32,
    pub tid: u32,
    /// CLOCK_MONOTONIC ns, just before the sample's own time.
    pub time: u64,
    pub sp: u64,
    pub bp: u64,
    /// Innermost first: frame pointer, saved frame pointer, return address, word at fp-24.
    pub frames: Vec<[u64; 4]>,
}

impl Walked {
    /// A record's bytes; None when they are not one (never from the program).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(
                bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?,
            ))
        };
        let pid_tgid = word(0)?;
        let n = usize::try_from(word(4)?).ok()?;
        if n > MAX_FRAMES as usize {
            return None;
        }
        let frames = (0..n)
            .map(|i| {
                let at = 5 + 4 * i;
                Some([word(at)?, word(at + 1)?, word(at + 2)?, word(at + 3)?])
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            pid: (pid_tgid >> 32) as u32,
            tid: pid_tgid as u32,
            time: word(1)?,
            sp: word(2)?,
            bp: word(3)?,
            frames,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_land_on_their_labels() {
        let insns = program(3, 4, 1024, None);
        // The last two: r0 = 1; exit.
        let n = insns.len();
        assert_eq!(insns[n - 1] & 0xff, 0x95);
        assert_eq!(insns[n - 2], 0xb7 | (1u64 << 32));
        // Every `goto exit` lands on `r0 = 1`.
        for (i, &insn) in insns.iter().enumerate() {
            if insn & 0xff == 0x05 {
                let off = (insn >> 16) as u16 as i16 as i64;
                let target = (i as i64 + 1 + off) as usize;
                assert!(target < n, "jump at {i} leaves the program");
            }
        }
    }

    /// The walk inside the copy is bounded by what a climbing chain can take in it (and a
    /// margin below the stack pointer), not by a fixed 2048 the verifier would follow.
    #[test]
    fn the_walk_inside_the_copy_is_bounded_by_the_copy() {
        assert_eq!(max_skip(1024), 128 + SKIP_BELOW_SP);
        // `r9 < bound`: a conditional jump on r9 against an immediate (BPF_JMP | BPF_JLT |
        // BPF_K, 0xa5), the skip loop's head.
        let bounds: Vec<i32> = program(3, 4, 1024, None)
            .iter()
            .filter(|&&insn| insn & 0xff == 0xa5 && (insn >> 8) & 0xf == 9)
            .map(|&insn| (insn >> 32) as i32)
            .collect();
        assert_eq!(bounds, vec![max_skip(1024), MAX_FRAMES], "{bounds:?}");
    }

    /// The ring grows with the CPUs sampled, within its bounds, a power of two.
    #[test]
    fn the_ring_is_sized_to_the_cpus() {
        assert_eq!(ring_bytes(0), 2 << 20);
        assert_eq!(ring_bytes(2), 2 << 20);
        assert_eq!(ring_bytes(3), 4 << 20);
        assert_eq!(ring_bytes(8), 8 << 20);
        assert_eq!(ring_bytes(256), 16 << 20);
    }

    /// The next drain comes before a quarter of the ring fills at the rate it last filled;
    /// a rate that falls is let go of by halves; no data waits the longest.
    #[test]
    fn the_ring_is_drained_before_it_fills() {
        use std::time::Duration;
        let size = 2 << 20;
        // 52 MB/s (a JVM 800 frames deep on two CPUs at 999 Hz): 512 KiB in ~10 ms.
        let (within, rate) = next_drain(size, 520_000, Duration::from_millis(10), 0.0);
        assert_eq!(rate, 52_000_000.0);
        assert_eq!(within.as_millis(), 10);
        // Nothing since: the reader still comes soon (half the rate), then later and later.
        let (within, rate) = next_drain(size, 0, Duration::from_millis(10), rate);
        assert_eq!(within.as_millis(), 20);
        let (within, _) = next_drain(size, 0, Duration::from_millis(20), rate);
        assert_eq!(within.as_millis(), 40);
        // A rate that rises counts at once.
        let (within, _) = next_drain(size, 5_000_000, Duration::from_millis(10), 1000.0);
        assert_eq!(within, DRAIN_WITHIN_MIN);
        // Nothing ever written: the longest wait.
        assert_eq!(next_drain(size, 0, Duration::ZERO, 0.0).0, DRAIN_WITHIN_MAX);
        // A rate let go of drain after drain ends at nothing (`record -a` beside a JVM that
        // sleeps: ~70 halvings took its quarter-ring time past what a Duration holds, and the
        // reader panicked).
        let mut rate = 52_000_000.0;
        for _ in 0..5000 {
            let within;
            (within, rate) = next_drain(size, 0, Duration::from_millis(100), rate);
            assert!(within <= DRAIN_WITHIN_MAX);
        }
        assert_eq!(rate, 0.0);
        // A rate so small its quarter-ring time overflows: the longest wait.
        assert_eq!(
            next_drain(size, 1, Duration::from_secs(1_000_000), 0.0).0,
            DRAIN_WITHIN_MAX
        );
    }

    #[test]
    fn records_decode() {
        let words: Vec<u64> = vec![
            (7u64 << 32) | 9,
            100,
            0x7000,
            0x7100,
            2,
            1,
            2,
            3,
            4,
            5,
            6,
            7,
            8,
        ];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let w = Walked::decode(&bytes).unwrap();
        assert_eq!(
            (w.pid, w.tid, w.time, w.sp, w.bp),
            (7, 9, 100, 0x7000, 0x7100)
        );
        assert_eq!(w.frames, vec![[1, 2, 3, 4], [5, 6, 7, 8]]);
        assert_eq!(Walked::decode(&bytes[..bytes.len() - 8]), None);
    }

    /// The kernel's verifier accepts both forms of the program (run as root, as CI does; a
    /// kernel or user without BPF says why and the test ends there), and the `bpf_loop` form
    /// is the one loaded where the kernel has `bpf_loop` (Linux 5.17+).
    #[test]
    fn the_verifier_accepts_the_program() {
        let deep = match DeepFrames::load(1024, 2) {
            Ok(deep) => deep,
            Err(e) if e.contains("Operation not permitted") => {
                eprintln!("skipped: the kernel refuses BPF to this user: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        if kernel_has_bpf_loop() {
            let bpf_loop = DeepFrames::load_form(1024, Form::BpfLoop, false, RING_BYTES_MIN)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(bpf_loop.form(), Form::BpfLoop);
            assert_eq!(deep.form(), Form::BpfLoop);
        }
        let fallback =
            DeepFrames::load_form(1024, Form::BoundedLoop, false, RING_BYTES_MIN).unwrap();
        assert_eq!(fallback.form(), Form::BoundedLoop);
        // The watching form (its process map looked up first) passes too, in both forms, and
        // takes the processes it is given.
        for form in [Form::BpfLoop, Form::BoundedLoop] {
            if form == Form::BpfLoop && !kernel_has_bpf_loop() {
                continue;
            }
            let watching = DeepFrames::load_form(1024, form, true, RING_BYTES_MIN)
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(watching.watching() && !deep.watching());
            let watched = watching.watched.as_ref().unwrap();
            watched.pids.insert(std::process::id()).unwrap();
        }
    }

    /// A watching program works for each process from the record of it mapping libjvm.so
    /// (once, however often it maps one) until the record of its main thread ending; a pid
    /// seen again afterwards is watched again.
    #[test]
    fn a_watched_jvm_is_taken_out_when_it_ends() {
        use crate::format::perf_write;
        let mut deep = match DeepFrames::load_watching(1024, 2) {
            Ok(deep) => deep,
            Err(e) if e.contains("Operation not permitted") => {
                eprintln!("skipped: the kernel refuses BPF to this user: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let layout = SampleLayout {
            sample_type: crate::format::perf::sample_type::TID
                | crate::format::perf::sample_type::TIME,
            regs_user_mask: 0,
            sample_id_all: true,
        };
        let libjvm = |pid, file: &str| {
            let prot = (libc::PROT_READ | libc::PROT_EXEC) as u32;
            perf_write::mmap2(&layout, pid, 0x7000_0000, 0x1000, 0, prot, file, None, 5)
        };
        let changes =
            |deep: &mut DeepFrames, records: Vec<Vec<u8>>| deep.watch(&layout, &records.concat());
        let jvm = "/usr/lib/jvm/x/lib/server/libjvm.so";
        let started = changes(
            &mut deep,
            vec![
                libjvm(41, jvm),
                libjvm(42, jvm),
                libjvm(41, jvm),
                libjvm(43, "/lib/libc.so.6"),
            ],
        );
        assert_eq!(
            started,
            JvmChanges {
                started: vec![41, 42],
                ended: vec![]
            }
        );
        // A thread of 41 ends, and a process never watched.
        let none = changes(
            &mut deep,
            vec![
                perf_write::exit(&layout, 41, 44, 6),
                perf_write::exit(&layout, 43, 43, 6),
            ],
        );
        assert_eq!(none, JvmChanges::default());
        let ended = changes(&mut deep, vec![perf_write::exit(&layout, 41, 41, 7)]);
        assert_eq!(
            ended,
            JvmChanges {
                started: vec![],
                ended: vec![41]
            }
        );
        let watched = deep.watched.as_ref().unwrap();
        // Out of the kernel's map: removing it again finds nothing; 42 is still in.
        let gone = watched.pids.remove(41).unwrap_err();
        assert_eq!(gone.raw_os_error(), Some(libc::ENOENT), "{gone}");
        watched.pids.remove(42).unwrap();
        watched.pids.insert(42).unwrap();
        let again = changes(&mut deep, vec![libjvm(41, jvm)]);
        assert_eq!(
            again,
            JvmChanges {
                started: vec![41],
                ended: vec![]
            }
        );
    }

    /// Linux 5.17 or later, from uname's release ("6.18.44-…").
    fn kernel_has_bpf_loop() -> bool {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut parts = release.trim().split(['.', '-']);
        let mut number = || {
            parts
                .next()
                .and_then(|p| p.parse::<u32>().ok())
                .unwrap_or(0)
        };
        (number(), number()) >= (5, 17)
    }

    /// Both forms make the same record: the same start (registers, scratch record, sp and bp
    /// words) and the same end (frame count, pid and tid, time, ring buffer output), so the
    /// decoder reads either.
    #[test]
    fn both_forms_share_the_records_start_and_end() {
        let bounded = program(3, 4, 1024, None);
        let (bpf_loop, _) = program_with_bpf_loop(3, 4, 1024, None);
        // Jump offsets aside (BPF_JMP instructions' 16-bit `off`).
        let no_offsets = |insns: &[u64]| -> Vec<u64> {
            insns
                .iter()
                .map(|&i| match i & 0x07 {
                    0x05 => i & !(0xffff << 16),
                    _ => i,
                })
                .collect()
        };
        let mut a = asm::Asm::default();
        start(&mut a, 3, None);
        a.label("exit");
        let head = no_offsets(&a.finish());
        assert_eq!(no_offsets(&bounded[..head.len()]), head);
        assert_eq!(no_offsets(&bpf_loop[..head.len()]), head);
        // The end: the frame count, pid and tid, time, size, ring buffer output.
        let ringbuf_output = |insns: &[u64]| {
            insns
                .iter()
                .position(|&i| i & 0xff == 0x85 && (i >> 32) as i32 == asm::RINGBUF_OUTPUT)
                .unwrap()
        };
        let (b, l) = (ringbuf_output(&bounded), ringbuf_output(&bpf_loop));
        assert_eq!(
            no_offsets(&bounded[b - 14..b + 3]),
            no_offsets(&bpf_loop[l - 14..l + 3])
        );
        // Two callbacks, each loaded as a BPF_PSEUDO_FUNC address, each passed to bpf_loop.
        let funcs = bpf_loop
            .iter()
            .filter(|&&i| i & 0xff == 0x18 && (i >> 12) & 0xf == 4)
            .count();
        let loops = bpf_loop
            .iter()
            .filter(|&&i| i & 0xff == 0x85 && (i >> 32) as i32 == asm::LOOP)
            .count();
        assert_eq!((funcs, loops), (2, 2));
    }
}
