//! minijit: a minimal JIT that generates x86-64 machine code at run time, runs it in a hot loop,
//! frees and reuses code addresses, and describes all of it in a perf jitdump — a producer whose
//! truth jprof's end-to-end tests know exactly (`tests/suite/jit_e2e.rs`, `docs/jit.md`).
//!
//! Three phases of `--millis` each (default 300):
//! 1. `hot_outer` compiled at tier "tier1" (baseline) into page A;
//! 2. `hot_outer` recompiled at tier "tier2" (optimized) into page B;
//! 3. page A unmapped, mapped again at the same address, and `second_tenant` written there.
//!
//! `hot_outer` carries a DEBUG_INFO2 record: `inlined_mid` is inlined into it and `inlined_leaf`
//! into that, each covering a known code range. Timestamps are CLOCK_MONOTONIC, or raw TSC with
//! `--arch-timestamp`. For each phase a line `minijit phase LABEL FUNCTION ADDR START END` goes
//! to stdout (CLOCK_MONOTONIC ns), so a test can check which function a sample at a time got.
//!
//! Unsafe code (mmap, mprotect, calling generated code, rdtsc) is allowed in this example crate
//! only; every block says why it is sound in a `// SAFETY:` comment.

mod asm;
mod dump;
mod frameless;
mod memory;

use std::path::PathBuf;

use jprof::format::jitdump::TierKind;
use jprof::format::jitdump_write::{self, CodeLoad, Inline};

use asm::Asm;
use dump::{monotonic_ns, JitDump};
use memory::{CodePage, JitFn};

/// Loop iterations per call of a generated function (≈ 0.1 ms): many calls per phase, so the
/// Rust caller shows up as the JIT frames' parent.
const ITERATIONS: u64 = 20_000;

/// The pretend source file the DEBUG_INFO2 records point into, and its line numbers.
const SOURCE: &str = "minijit/hot.mj";
const LINE_OUTER_START: u32 = 10;
const LINE_OUTER_LOOP: u32 = 11;
const LINE_CALL_MID: u32 = 12;
const LINE_OUTER_RETURN: u32 = 13;
const LINE_MID_START: u32 = 20;
const LINE_MID_MIX: u32 = 21;
const LINE_CALL_LEAF: u32 = 22;
const LINE_MID_TAIL: u32 = 23;
const LINE_LEAF_START: u32 = 30;
const LINE_LEAF_BODY: u32 = 31;

/// Generated code plus where its inlined parts are (offsets from the function start).
struct Generated {
    code: Vec<u8>,
    /// `(start, length)` of the code inlined from `inlined_mid` (includes the leaf).
    mid: (u32, u32),
    /// `(start, length)` of the code inlined from `inlined_leaf`.
    leaf: (u32, u32),
    /// `(offset, line)`: the line of the code from each offset on.
    lines: Vec<(u32, u32)>,
}

/// `hot_outer(n)`: a loop of `n` rounds; each round is the inlined `inlined_mid`, which mixes
/// the accumulator and runs the inlined `inlined_leaf` (`leaf_rounds` multiply-adds).
fn hot_outer(leaf_rounds: usize) -> Generated {
    let mut a = Asm::default();
    let mut lines = vec![(0, LINE_OUTER_START)];
    a.prologue();
    a.mov_rcx_rdi(); // rcx = n
    a.mov_eax_imm(1); // rax = accumulator
    a.mov_edx_imm(7); // rdx = mixing constant
    let top = a.offset();
    lines.push((top, LINE_OUTER_LOOP));
    a.add_rax_rcx();

    // inlined_mid, called at LINE_CALL_MID.
    let mid_start = a.offset();
    lines.push((mid_start, LINE_MID_MIX));
    a.imul_rax_imm8(31);
    a.xor_rax_rdx();

    // inlined_leaf, called from inlined_mid at LINE_CALL_LEAF: the hot part.
    let leaf_start = a.offset();
    lines.push((leaf_start, LINE_LEAF_BODY));
    for _ in 0..leaf_rounds {
        a.imul_rax_imm8(13);
        a.add_rax_imm8(5);
    }
    let leaf_end = a.offset();

    lines.push((leaf_end, LINE_MID_TAIL));
    a.imul_rax_imm8(7);
    let mid_end = a.offset();

    // Back in hot_outer: loop control and return.
    lines.push((mid_end, LINE_OUTER_LOOP));
    a.dec_rcx();
    a.jnz_to(top);
    lines.push((a.offset(), LINE_OUTER_RETURN));
    a.epilogue();
    Generated {
        code: a.code,
        mid: (mid_start, mid_end - mid_start),
        leaf: (leaf_start, leaf_end - leaf_start),
        lines,
    }
}

/// `second_tenant(n)`: a different loop, written where `hot_outer`'s first code was freed.
fn second_tenant() -> Vec<u8> {
    let mut a = Asm::default();
    a.prologue();
    a.mov_rcx_rdi();
    a.mov_eax_imm(3);
    a.mov_edx_imm(0x9e37);
    let top = a.offset();
    a.xor_rax_rdx();
    a.imul_rax_imm8(3);
    a.add_rax_rcx();
    a.imul_rax_imm8(5);
    a.dec_rcx();
    a.jnz_to(top);
    a.epilogue();
    a.code
}

/// The DEBUG_INFO2 record for a `hot_outer` body.
fn hot_outer_debug_info(timestamp: u64, g: &Generated) -> Vec<u8> {
    let names = ["hot_outer", "inlined_mid", "inlined_leaf"];
    // (name index, file index, first line); function 0 is the outer one.
    let functions = [
        (0, 0, LINE_OUTER_START),
        (1, 0, LINE_MID_START),
        (2, 0, LINE_LEAF_START),
    ];
    let inlines = [
        Inline {
            depth: 0,
            function: 1,
            call_line: LINE_CALL_MID,
            range: g.mid,
        },
        Inline {
            depth: 1,
            function: 2,
            call_line: LINE_CALL_LEAF,
            range: g.leaf,
        },
    ];
    let lines: Vec<(u32, u32, u32)> = g.lines.iter().map(|&(off, line)| (off, 0, line)).collect();
    jitdump_write::debug_info2(timestamp, &[SOURCE], &names, &functions, &inlines, &lines)
}

struct Options {
    millis: u64,
    arch_timestamp: bool,
    dir: PathBuf,
    /// Run the fourth phase (a frameless leaf called from JIT code).
    frameless: bool,
    /// Leave out the leaf's UNWINDING_INFO.
    no_unwind_info: bool,
}

const USAGE: &str = "usage: minijit [--millis N] [--arch-timestamp] [--dir DIR]
  --millis N         run each of the three phases for N ms (default 300)
  --arch-timestamp   stamp jitdump records with raw TSC (default CLOCK_MONOTONIC)
  --dir DIR          where jit-<pid>.dump goes (default: the current directory)
  --frameless        a fourth phase: frameless_caller calls frameless_leaf, which keeps no
                     frame pointer; its .eh_frame goes into an UNWINDING_INFO record
  --no-unwind-info   with --frameless: leave the UNWINDING_INFO record out";

fn parse_options() -> Result<Options, String> {
    let mut o = Options {
        millis: 300,
        arch_timestamp: false,
        dir: PathBuf::from("."),
        frameless: false,
        no_unwind_info: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--millis" => {
                o.millis = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--millis needs a number")?
            }
            "--arch-timestamp" => o.arch_timestamp = true,
            "--frameless" => o.frameless = true,
            "--no-unwind-info" => o.no_unwind_info = true,
            "--dir" => o.dir = args.next().ok_or("--dir needs a directory")?.into(),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok(o)
}

/// Calls `f` until `millis` have passed; returns (start, end) in CLOCK_MONOTONIC ns.
#[inline(never)]
fn run_phase(f: JitFn, millis: u64) -> (u64, u64) {
    let start = monotonic_ns();
    let end = start + millis * 1_000_000;
    let mut acc = 0u64;
    let mut now = start;
    while now < end {
        acc = acc.wrapping_add(f(std::hint::black_box(ITERATIONS)));
        now = monotonic_ns();
    }
    std::hint::black_box(acc);
    (start, now)
}

fn report_phase(label: &str, function: &str, addr: u64, (start, end): (u64, u64)) {
    println!("minijit phase {label} {function} {addr:#x} {start} {end}");
}

fn run(o: &Options) -> std::io::Result<()> {
    let mut dump = JitDump::create(&o.dir, o.arch_timestamp)?;
    let pid = std::process::id();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let mut index = 0u64;
    let mut load = |dump: &mut JitDump, addr: u64, name: &str, code: &[u8]| {
        index += 1;
        let record = jitdump_write::code_load(
            dump.now(),
            &CodeLoad {
                pid,
                tid,
                code_addr: addr,
                code_index: index,
                name,
                code,
            },
        );
        dump.write(&record)
    };

    // Phase 1: baseline hot_outer in page A. The tier record (address 0) applies to the next
    // CODE_LOAD, as does DEBUG_INFO2; both are written before the code runs.
    let baseline = hot_outer(3);
    let mut page_a = CodePage::new()?;
    let addr_a = page_a.addr();
    dump.write(&jitdump_write::jit_tier(
        dump.now(),
        0,
        TierKind::BASELINE,
        "tier1",
    ))?;
    dump.write(&hot_outer_debug_info(dump.now(), &baseline))?;
    page_a.install(&baseline.code)?;
    load(&mut dump, addr_a, "hot_outer", &baseline.code)?;
    let times = run_phase(page_a.entry(), o.millis);
    report_phase("baseline", "hot_outer", addr_a, times);

    // Phase 2: hot_outer recompiled at the optimized tier into page B (tier record by address).
    let optimized = hot_outer(2);
    let mut page_b = CodePage::new()?;
    let addr_b = page_b.addr();
    dump.write(&jitdump_write::jit_tier(
        dump.now(),
        addr_b,
        TierKind::OPTIMIZED,
        "tier2",
    ))?;
    dump.write(&hot_outer_debug_info(dump.now(), &optimized))?;
    page_b.install(&optimized.code)?;
    load(&mut dump, addr_b, "hot_outer", &optimized.code)?;
    let times = run_phase(page_b.entry(), o.millis);
    report_phase("optimized", "hot_outer", addr_b, times);

    // Phase 3: free page A (the baseline code is dead) and reuse its address for new code.
    drop(page_a);
    let mut page_a2 = CodePage::at(addr_a)?;
    let tenant = second_tenant();
    page_a2.install(&tenant)?;
    load(&mut dump, addr_a, "second_tenant", &tenant)?;
    let times = run_phase(page_a2.entry(), o.millis);
    report_phase("reused", "second_tenant", addr_a, times);

    // Phase 4 (--frameless): a frameless leaf in page C, its caller in page D.
    if o.frameless {
        let (leaf, after_sub, after_add) = frameless::leaf();
        let mut page_c = CodePage::new()?;
        let leaf_addr = page_c.addr();
        if !o.no_unwind_info {
            let eh_frame = frameless::leaf_eh_frame(leaf.len() as u32, after_sub, after_add);
            dump.write(&jitdump_write::unwinding_info(
                dump.now(),
                &eh_frame,
                &[],
                0,
            ))?;
        }
        page_c.install(&leaf)?;
        load(&mut dump, leaf_addr, "frameless_leaf", &leaf)?;
        let caller = frameless::caller(leaf_addr);
        let mut page_d = CodePage::new()?;
        page_d.install(&caller)?;
        load(&mut dump, page_d.addr(), "frameless_caller", &caller)?;
        let times = run_phase(page_d.entry(), o.millis);
        report_phase("frameless", "frameless_leaf", leaf_addr, times);
    }

    eprintln!("minijit: wrote {}", dump.path().display());
    Ok(())
}

fn main() {
    let options = match parse_options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("minijit: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&options) {
        eprintln!("minijit: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test, so no other test thread maps memory between the unmap and the remap.
    #[test]
    fn generated_code_runs_and_freed_address_is_reused() {
        let g = hot_outer(3);
        assert!(g.mid.0 <= g.leaf.0 && g.leaf.0 + g.leaf.1 <= g.mid.0 + g.mid.1);
        for code in [g.code.clone(), hot_outer(2).code, second_tenant()] {
            let mut page = CodePage::new().unwrap();
            page.install(&code).unwrap();
            let f = page.entry();
            // Deterministic: same input, same output; different work, different output.
            assert_eq!(f(1000), f(1000));
            assert_ne!(f(1000), f(1001));
            let addr = page.addr();
            drop(page);
            let mut again = CodePage::at(addr).unwrap();
            assert_eq!(again.addr(), addr);
            again.install(&second_tenant()).unwrap();
            assert_eq!(again.entry()(10), again.entry()(10));
        }
    }
}
