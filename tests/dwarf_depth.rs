//! `--call-graph dwarf` copies 8 KiB of stack per sample (perf's default) and continues with the
//! kernel's frame-pointer chain where the copy ends: a 100-deep recursion (~20 KiB of stack)
//! still reaches `main`. (The kernel's chain stops at `kernel.perf_event_max_stack`, 127
//! frames by default, as perf's does.)

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
    for (int i = 0; i < rounds; i++) sink += descend(100, i);
    return 0;
}
"#;

#[test]
fn a_stack_deeper_than_the_copy_reaches_main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("deep.c");
    std::fs::write(&src, DEEP).unwrap();
    let bin = dir.path().join("deep");
    let status = Command::new("cc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer"])
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .status()
        .expect("cc");
    assert!(status.success());
    let data = dir.path().join("deep.data");
    let out = Command::new(env!("CARGO_BIN_EXE_jprof"))
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
    let folded = Command::new(env!("CARGO_BIN_EXE_jprof"))
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
