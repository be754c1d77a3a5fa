//! What the user reads besides the profile, end to end: a program whose time is in three
//! stripped libraries gets one note naming the three (not a note per library), and a command
//! given to `record` without `--` gets the corrected command line.

use crate::cli_support;
use cli_support::{jprof, run, stdout_ok};

use std::path::Path;
use std::process::Command;

fn compile(dir: &Path, args: &[&str]) {
    let status = Command::new("gcc")
        .current_dir(dir)
        .args(args)
        .status()
        .expect("gcc");
    assert!(status.success(), "gcc {args:?}");
}

/// `main` calling a hidden (so, once stripped, nameless) hot loop in each of three stripped
/// shared libraries.
fn build(dir: &Path) {
    for i in 1..=3 {
        let source = format!(
            "__attribute__((visibility(\"hidden\"), noinline)) unsigned long spin{i}(unsigned \
             long n) {{ volatile unsigned long x = 0; for (unsigned long k = 0; k < n; k++) x \
             += k; return x; }}\nunsigned long work{i}(unsigned long n) {{ return spin{i}(n) + \
             1; }}\n"
        );
        std::fs::write(dir.join(format!("l{i}.c")), source).unwrap();
        let (src, lib) = (format!("l{i}.c"), format!("libl{i}.so"));
        compile(
            dir,
            &[
                "-O1",
                "-fno-omit-frame-pointer",
                "-shared",
                "-fPIC",
                "-s",
                &src,
                "-o",
                &lib,
            ],
        );
    }
    std::fs::write(
        dir.join("m.c"),
        "unsigned long work1(unsigned long), work2(unsigned long), work3(unsigned long);\n\
         int main(void) { unsigned long s = 0; for (int r = 0; r < 60; r++) s += \
         work1(3000000) + work2(3000000) + work3(3000000); return (int)(s & 1); }\n",
    )
    .unwrap();
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    compile(
        dir,
        &[
            "-O1",
            "-fno-omit-frame-pointer",
            "m.c",
            "-o",
            "m",
            "-L.",
            "-ll1",
            "-ll2",
            "-ll3",
            &rpath,
        ],
    );
}

#[test]
fn stripped_binaries_are_one_note() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let data = dir.path().join("r.data");
    let data = data.to_str().unwrap();
    let program = dir.path().join("m");
    stdout_ok(&["record", "-o", data, "--", program.to_str().unwrap()]);
    let text = stdout_ok(&["report", "-i", data, "-f", "text"]);
    let notes: Vec<&str> = text.lines().filter(|l| l.starts_with("Note:")).collect();
    let grouped: Vec<&&str> = notes
        .iter()
        // The three libraries, and sometimes the dynamic loader too: a sample may land in
        // ld.so while it maps them, and Debian's ld.so has no symbols for every address.
        .filter(|n| n.contains(" binaries have no symbols for the addresses sampled in them"))
        .collect();
    assert_eq!(grouped.len(), 1, "{notes:#?}");
    for lib in ["libl1.so (", "libl2.so (", "libl3.so ("] {
        assert!(grouped[0].contains(lib), "{lib} missing: {}", grouped[0]);
    }
    assert!(
        !notes.iter().any(|n| n.contains("(libl1.so+0x...)")),
        "a note per library: {notes:#?}"
    );
}

#[test]
fn a_command_without_dashes_gets_a_tip() {
    let out = run(&["record", "-F", "99", "ls", "-la"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unexpected argument 'ls'"), "{stderr}");
    assert!(
        stderr
            .contains("tip: the command to profile goes after `--`: jprof record -F 99 -- ls -la"),
        "{stderr}"
    );
    // Nothing was run or written.
    let dir = tempfile::tempdir().unwrap();
    let out = jprof()
        .current_dir(dir.path())
        .args(["record", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
