//! `record -a` does not ask the kernel for build ids (other profilers break: host_record), so
//! jprof reads the build id of each file mapped while it records from the mapping itself and
//! writes it into the MMAP2 record: a program started during `-a` has its build id in the
//! recording, and when its binary is replaced on disk before the end, no frame is named from
//! the new file (a note names both builds). Needs root (every CPU, `/proc/PID/map_files`).

use crate::cli_support::{jprof, start_all_cpus};
use crate::symbolize_support::{build_id, cc};

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStderr, Command, Stdio};

/// The build that runs: a hot `alpha_work`.
const V1: &str = r#"
#include <stdio.h>
__attribute__((noinline)) unsigned long alpha_work(unsigned long n) {
    unsigned long h = n;
    for (unsigned long i = 0; i < 100000000UL; i++) h = h * 31 + i;
    return h;
}
int main(void) {
    puts("ready");
    fflush(stdout);
    volatile unsigned long sink = 0;
    for (;;) sink += alpha_work(sink);
}
"#;

/// The build put at its path while it runs: other functions at the same addresses.
const V2: &str = r#"
#include <stdio.h>
#define BIG(name) __attribute__((noinline)) unsigned long name(unsigned long n) { \
    unsigned long h = n; \
    for (unsigned long i = 0; i < n; i++) { h = h * 7 + i; h ^= h >> 3; h += i * i; h -= h << 2; } \
    return h; }
BIG(zulu_a) BIG(zulu_b) BIG(zulu_c) BIG(zulu_d) BIG(zulu_e) BIG(zulu_f) BIG(zulu_g) BIG(zulu_h)
int main(void) {
    puts("ready");
    unsigned long n = 3;
    return (int)(zulu_a(n) + zulu_b(n) + zulu_c(n) + zulu_d(n) + zulu_e(n) + zulu_f(n) + zulu_g(n)
        + zulu_h(n));
}
"#;

/// A program the test started; killed when the test ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `program` and returns once it runs its hot loop (it printed `ready`).
fn start_ready(program: &Path) -> Running {
    let mut child = Command::new(program)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    Running(child)
}

/// Waits for the recording to end by its duration; its summary.
fn finish((mut run, mut stderr): (Child, BufReader<ChildStderr>)) -> String {
    let mut summary = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut summary).unwrap();
    assert!(run.wait().unwrap().success(), "{summary}");
    summary
}

/// `jprof report -i DATA ARGS -o -` with HOME set to `home` (no perf build-id cache there).
fn report(data: &Path, home: &Path, args: &[&str]) -> String {
    let out = jprof()
        .env("HOME", home)
        .args(["report", "-i"])
        .arg(data)
        .args(args)
        .args(["-o", "-"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The `mapped:` lines of `jprof dump DATA` for `program`.
fn dumped_mappings(data: &Path, program: &Path) -> Vec<String> {
    let out = jprof().arg("dump").arg(data).output().unwrap();
    assert!(out.status.success());
    let wanted = format!("mapped: {} build id ", program.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&wanted))
        .map(str::to_string)
        .collect()
}

/// A program started during `-a` has its build id in its MMAP2 record (as `jprof dump` lists
/// it), and its hot function is named.
#[test]
fn a_program_started_during_all_cpus_has_its_build_id_recorded() {
    crate::jdk_support::whole_host_alone();
    let dir = tempfile::tempdir().unwrap();
    let program = cc(dir.path(), V1, "idprobe", &[]);
    let data = dir.path().join("all.data");
    let recording = start_all_cpus(&data, &["--duration", "2"]);
    let running = start_ready(&program);
    let summary = finish(recording);

    let mapped = dumped_mappings(&data, &program);
    let expected = format!(
        "mapped: {} build id {} ",
        program.display(),
        build_id(&program)
    );
    assert!(
        !mapped.is_empty() && mapped.iter().all(|l| l.starts_with(&expected)),
        "{expected}: {mapped:?}\n{summary}"
    );
    let folded = report(
        &data,
        dir.path(),
        &["-f", "collapsed", "--pid", &running.0.id().to_string()],
    );
    assert!(folded.contains(";alpha_work "), "{folded}");
}

/// A program started during `-a` whose binary is replaced on disk (same path, another build)
/// before the recording ends: none of its frames is named from the new file, and the report
/// says why, naming both builds.
#[test]
fn a_binary_replaced_during_all_cpus_names_nothing_from_the_new_file() {
    crate::jdk_support::whole_host_alone();
    let dir = tempfile::tempdir().unwrap();
    let program = cc(dir.path(), V1, "swapprobe", &[]);
    let recorded = build_id(&program);
    let staging = dir.path().join("staging");
    std::fs::create_dir(&staging).unwrap();
    let replacement = cc(&staging, V2, "swapprobe", &[]);
    let data = dir.path().join("all.data");
    let recording = start_all_cpus(&data, &["--duration", "3"]);
    let running = start_ready(&program);
    // A package update: the new build renamed over the path the process runs from.
    std::fs::rename(&replacement, &program).unwrap();
    let on_disk = build_id(&program);
    assert_ne!(recorded, on_disk);
    let summary = finish(recording);

    let pid = running.0.id().to_string();
    let folded = report(&data, dir.path(), &["-f", "collapsed", "--pid", &pid]);
    let mut in_program = 0;
    for line in folded.lines() {
        assert!(
            !line.contains("zulu_"),
            "a name from the new file: {line}\n{summary}"
        );
        if line.contains("[unknown] (swapprobe+0x") {
            in_program += line.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap();
        }
    }
    assert!(in_program > 0, "the program's frames: {folded}\n{summary}");
    let text = report(&data, dir.path(), &["-f", "text", "--pid", &pid]);
    let note = text
        .lines()
        .find(|l| l.contains(&program.display().to_string()) && l.contains("another build"))
        .unwrap_or_else(|| panic!("no note on the replaced binary: {text}"));
    assert!(
        note.contains(&recorded) && note.contains(&on_disk),
        "the note names both builds: {note}"
    );
    assert_eq!(
        dumped_mappings(&data, &program),
        [format!(
            "mapped: {} build id {recorded} (1 mappings)",
            program.display()
        )]
    );
}
