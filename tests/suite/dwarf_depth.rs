//! `--call-graph dwarf` copies 8 KiB of stack per sample (perf's default) and continues with the
//! kernel's frame-pointer chain where the copy ends: a 100-deep recursion (~20 KiB of stack)
//! still reaches `main`. (The kernel's chain stops at `kernel.perf_event_max_stack`, 127
//! frames by default, as perf's does.) A walk that reaches `_start` takes nothing from that
//! chain: past a frame without a frame pointer it holds garbage.

use crate::cli_support;
use cli_support::jprof;

use std::path::Path;
use std::process::Command;

const DEEP: &str = r#"
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) unsigned long spin(unsigned long n) {
    unsigned long h = n;
    for (unsigned long i = 0; i < 2000000; i++) h = h * 31 + i;
    return h;
}
__attribute__((noinline)) unsigned long descend(int depth, unsigned long n) {
    volatile char pad[160];
    pad[0] = (char)n;
    if (depth == 0) return spin(n + pad[0]);
    return descend(depth - 1, n + 1) + pad[0];
}
int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 300;
    int depth = argc > 2 ? atoi(argv[2]) : 100;
    for (int i = 0; i < rounds; i++) sink += descend(depth, i);
    return 0;
}
"#;

/// [`DEEP`] built with frame pointers in `dir`.
fn build_deep(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("deep.c");
    std::fs::write(&src, DEEP).unwrap();
    let bin = dir.join("deep");
    let status = Command::new("cc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer"])
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .status()
        .expect("cc");
    assert!(status.success());
    bin
}

#[test]
fn a_stack_deeper_than_the_copy_reaches_main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = build_deep(dir.path());
    let data = dir.path().join("deep.data");
    let out = jprof()
        .args(["record", "--call-graph", "dwarf", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&bin)
        .output()
        .expect("jprof record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folded = jprof()
        .args(["report", "-f", "collapsed", "-i"])
        .arg(&data)
        .output()
        .expect("jprof report");
    let text = String::from_utf8_lossy(&folded.stdout);
    let (mut all, mut whole) = (0u64, 0u64);
    for line in text.lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let n: u64 = n.parse().unwrap();
        if !stack.contains(";spin") {
            continue;
        }
        all += n;
        let depth = stack.split(';').filter(|f| *f == "descend").count();
        if stack.contains(";main;") && depth == 101 {
            whole += n;
        }
    }
    assert!(all > 0, "no samples in spin: {text}");
    assert!(
        whole * 10 >= all * 9,
        "{whole} of {all} weight in spin has all 101 descend frames under main"
    );
    // The recording holds 8 KiB stack copies, not 32.
    let rec = jprof::recording::Recording::open(Path::new(&data)).unwrap();
    assert_eq!(rec.meta.event.stack_user_bytes, 8192);
}

/// `spin` runs with its frame pointer pointing at a made-up chain, as code without frame
/// pointers leaves it: the kernel's chain meets the DWARF walk at main's return address and
/// then goes on to an address that is no code at all.
const GARBAGE_CHAIN: &str = r#"
#include <stdlib.h>
static unsigned long garbage[2] = {0, 0x5555deadbeefUL};
static unsigned long first[2];
__attribute__((noinline)) void spin(unsigned long *frame, long n) {
    __asm__ volatile(
        "push %%rbp\n\t"
        ".cfi_adjust_cfa_offset 8\n\t"
        ".cfi_rel_offset %%rbp, 0\n\t"
        "mov %0, %%rbp\n\t"
        "1: dec %1\n\t"
        "jnz 1b\n\t"
        "pop %%rbp\n\t"
        ".cfi_adjust_cfa_offset -8\n\t"
        ".cfi_restore %%rbp\n\t"
        : "+r"(frame), "+r"(n) : : "memory", "cc");
}
int main(int argc, char **argv) {
    first[0] = (unsigned long)garbage;
    first[1] = (unsigned long)__builtin_return_address(0);
    long rounds = argc > 1 ? atol(argv[1]) : 10;
    for (long i = 0; i < rounds; i++) spin(first, 100000000);
    return 0;
}
"#;

#[test]
fn a_walk_that_reaches_start_gets_no_root_frame_from_the_chain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("garbage.c");
    std::fs::write(&src, GARBAGE_CHAIN).unwrap();
    let bin = dir.path().join("garbage");
    let status = Command::new("cc")
        .args(["-O1", "-g", "-fomit-frame-pointer"])
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .status()
        .expect("cc");
    assert!(status.success());
    let data = dir.path().join("garbage.data");
    let out = jprof()
        .args(["record", "--call-graph", "dwarf", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&bin)
        .output()
        .expect("jprof record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folded = jprof()
        .args(["report", "-f", "collapsed", "-i"])
        .arg(&data)
        .output()
        .expect("jprof report");
    let text = String::from_utf8_lossy(&folded.stdout);
    let (mut all, mut from_start) = (0u64, 0u64);
    for line in text.lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let n: u64 = n.parse().unwrap();
        assert!(!stack.contains("0x5555deadbeef"), "{line}");
        if !stack.contains(";spin") {
            continue;
        }
        all += n;
        // The thread's name, then `_start` as the outermost frame.
        if stack.split(';').nth(1) == Some("_start") && stack.contains(";main;spin") {
            from_start += n;
        }
    }
    assert!(all > 0, "no samples in spin: {text}");
    assert!(
        from_start * 10 >= all * 9,
        "{from_start} of {all} weight in spin is under _start;...;main: {text}"
    );
}

/// The record summary's `stacks:` line for the process `deep`: (share of whole stacks, the
/// whole line).
fn depth_line(stderr: &str) -> (f64, String) {
    let line = stderr
        .lines()
        .find(|l| l.contains("note: stacks: pid ") && l.contains("(deep)"))
        .unwrap_or_else(|| panic!("no stacks line for deep: {stderr}"))
        .to_string();
    let share = line
        .split("(deep): ")
        .nth(1)
        .and_then(|rest| rest.split('%').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no share in {line}"));
    (share, line)
}

/// The summary says how deep stacks reach: a shallow recursion is whole (from `_start` to the
/// leaf, every frame named), and one deeper than the kernel's callchain limit is counted as cut
/// there, with the limit named. The report says the same in its notes.
/// The `N cut at the kernel's LIMIT-frame callchain limit` count of a depth line (0 if absent).
fn cut_count(line: &str, limit: usize) -> u64 {
    let marker = format!(" cut at the kernel's {limit}-frame callchain limit");
    line.split_once(&marker)
        .and_then(|(before, _)| before.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The `of N samples` count of a depth line.
fn sample_count(line: &str) -> u64 {
    line.split(" of ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no sample count in {line}"))
}

#[test]
fn the_summary_counts_stacks_cut_at_the_kernels_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = build_deep(dir.path());
    let limit: usize = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack")
        .expect("kernel.perf_event_max_stack")
        .trim()
        .parse()
        .unwrap();
    let record = |depth: usize, name: &str| {
        let data = dir.path().join(name);
        let out = jprof()
            .args(["record", "-o"])
            .arg(&data)
            .arg("--")
            .arg(&bin)
            .args(["150", &depth.to_string()])
            .output()
            .expect("jprof record");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        (data, stderr)
    };
    let (_, shallow) = record(20, "shallow.data");
    let (share, line) = depth_line(&shallow);
    assert!(share >= 90.0, "{line}");
    // A rare sample may still reach the limit: the kernel's frame-pointer walk can follow a
    // stale chain (a leaf in libc without frame pointers) until it stops. Rare, not the rule.
    let shallow_cut = cut_count(&line, limit);
    assert!(shallow_cut * 50 <= sample_count(&line), "{line}");

    let (data, deep) = record(limit + 50, "deep.data");
    let (share, line) = depth_line(&deep);
    assert!(share <= 10.0, "{line}");
    let cut = cut_count(&line, limit);
    assert!(cut > 0, "no cut count in {line}");
    assert!(cut * 10 >= sample_count(&line) * 9, "{line}");
    let text = jprof()
        .args(["report", "-f", "text", "-o", "-", "-i"])
        .arg(&data)
        .output()
        .expect("jprof report");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("Note:")
            && l.contains("stacks: pid")
            && l.contains(&format!("cut at the kernel's {limit}-frame"))),
        "{text}"
    );
}
