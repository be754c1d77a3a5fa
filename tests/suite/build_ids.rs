//! A library rebuilt after recording: its frames get no names from the new build (the
//! recording's build id says it is another file), only `[unknown]` with one note naming the
//! file and both build ids; a copy of the recorded build (`--search-dir`, perf's build-id
//! cache in `~/.debug`, a separate debug file) names them again. For a perf.data (perf's
//! build-id table) and for a jprof recording without embedded symbols (MMAP2 build ids).

use crate::cli_support;
use crate::symbolize_support::{build_id, cc};

use std::path::{Path, PathBuf};
use std::process::Command;

use cli_support::{jprof, stdout_ok};

/// The recorded build: a hot `alpha_work` called through `alpha_entry`.
const V1: &str = r#"
__attribute__((noinline)) unsigned long alpha_work(unsigned long n) {
    unsigned long h = n;
    for (unsigned long i = 0; i < 300000000UL; i++) h = h * 31 + i;
    return h;
}
unsigned long alpha_entry(unsigned long n) { return alpha_work(n) + 1; }
"#;

/// The build on disk at report time: other functions at the same addresses.
const V2: &str = r#"
#define BIG(name) __attribute__((noinline)) unsigned long name(unsigned long n) { \
    unsigned long h = n; \
    for (unsigned long i = 0; i < n; i++) { h = h * 7 + i; h ^= h >> 3; h += i * i; h -= h << 2; } \
    return h; }
BIG(zulu_a) BIG(zulu_b) BIG(zulu_c) BIG(zulu_d) BIG(zulu_e) BIG(zulu_f) BIG(zulu_g) BIG(zulu_h)
unsigned long alpha_entry(unsigned long n) {
    return zulu_a(n) + zulu_b(n) + zulu_c(n) + zulu_d(n) + zulu_e(n) + zulu_f(n) + zulu_g(n);
}
"#;

const MAIN: &str = r#"
unsigned long alpha_entry(unsigned long n);
int main(void) { return (int)(alpha_entry(3) & 1); }
"#;

/// The names of the functions a binary defines (`nm`).
fn functions(path: &Path) -> Vec<String> {
    let out = Command::new("nm")
        .arg("--defined-only")
        .arg(path)
        .output()
        .expect("nm");
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, kind, name) = (f.next()?, f.next()?, f.next()?);
            matches!(kind, "T" | "t").then(|| name.to_string())
        })
        .collect();
    names
}

/// A program and the library it runs in, in a fresh directory; the recorded library is kept
/// aside as `original/libw.so`.
struct Setup {
    dir: tempfile::TempDir,
    program: PathBuf,
    library: PathBuf,
    original: PathBuf,
    /// A HOME with no `.debug`.
    empty_home: PathBuf,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let library = cc(dir.path(), V1, "libw.so", &["-shared", "-fPIC"]);
        let rpath = format!("-Wl,-rpath,{}", dir.path().display());
        let program = cc(dir.path(), MAIN, "prog", &["-L.", "-lw", &rpath]);
        let original = dir.path().join("original");
        std::fs::create_dir(&original).unwrap();
        std::fs::copy(&library, original.join("libw.so")).unwrap();
        let empty_home = dir.path().join("empty-home");
        std::fs::create_dir(&empty_home).unwrap();
        Self {
            dir,
            program,
            library,
            original,
            empty_home,
        }
    }

    /// Replaces the library on disk with another build (a package update).
    fn rebuild_library(&self) {
        let staging = self.dir.path().join("staging");
        std::fs::create_dir_all(&staging).unwrap();
        let v2 = cc(&staging, V2, "libw.so", &["-shared", "-fPIC"]);
        std::fs::rename(v2, &self.library).unwrap();
        assert_ne!(build_id(&self.library), self.original_id());
    }

    fn original_id(&self) -> String {
        build_id(&self.original.join("libw.so"))
    }

    /// `jprof report` of `data` in `format` with HOME set to `home`.
    fn report(&self, data: &Path, home: &Path, format: &str, extra: &[&str]) -> String {
        let out = jprof()
            .env("HOME", home)
            .args(["report", "-f", format, "-o", "-", "-i"])
            .arg(data)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The folded stacks' frames in libw.so's code: named ones and `[unknown] (libw.so+…)`.
    fn library_frames(&self, data: &Path, home: &Path, extra: &[&str]) -> (u64, u64) {
        let folded = self.report(data, home, "collapsed", extra);
        let (mut named, mut unknown) = (0, 0);
        for line in folded.lines() {
            let (stack, n) = line.rsplit_once(' ').unwrap();
            let n: u64 = n.parse().unwrap();
            // Nothing of the build on disk may name a frame.
            assert!(
                !stack.contains("zulu_"),
                "a name from the other build: {line}"
            );
            if stack.contains(";alpha_work") {
                named += n;
            } else if stack.contains("[unknown] (libw.so+") {
                unknown += n;
            }
        }
        (named, unknown)
    }

    /// Checks the report of `data` after the rebuild: unknown with the note, then named from
    /// a copy in a search directory, a debug-only copy, and (for perf) perf's cache in `home`.
    fn check_after_rebuild(&self, data: &Path, perf_home: Option<&Path>) {
        let (named, unknown) = self.library_frames(data, &self.empty_home, &[]);
        assert_eq!(named, 0, "alpha_work named from another build");
        assert!(unknown > 0, "libw.so's frames are shown as unknown");
        // No function of the library on disk names any frame.
        let folded = self.report(data, &self.empty_home, "collapsed", &[]);
        let names = functions(&self.library);
        assert!(names.len() > 8, "{names:?}");
        for name in names {
            assert!(
                !folded.split([';', ' ', '\n']).any(|frame| frame == name),
                "{name} of the build on disk named a frame: {folded}"
            );
        }
        let text = self.report(data, &self.empty_home, "text", &[]);
        let recorded = self.original_id();
        let on_disk = build_id(&self.library);
        let notes: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(&self.library.display().to_string()))
            .collect();
        assert_eq!(notes.len(), 1, "one note for the changed library: {text}");
        assert!(
            notes[0].contains(&recorded) && notes[0].contains(&on_disk),
            "the note names both build ids: {}",
            notes[0]
        );

        // The recorded build in a search directory names them again.
        let dir = self.original.to_str().unwrap();
        let (named, unknown) = self.library_frames(data, &self.empty_home, &["--search-dir", dir]);
        assert!(
            named > 0 && unknown * 10 < named,
            "{named} named, {unknown} not"
        );

        // So does its separate debug file alone (no code, other file offsets).
        let debug_dir = self.dir.path().join("debug-only");
        std::fs::create_dir(&debug_dir).unwrap();
        let status = Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(self.original.join("libw.so"))
            .arg(debug_dir.join("libw.so"))
            .status()
            .expect("objcopy");
        assert!(status.success());
        let dir = debug_dir.to_str().unwrap();
        let (named, unknown) = self.library_frames(data, &self.empty_home, &["--search-dir", dir]);
        assert!(
            named > 0 && unknown * 10 < named,
            "{named} named, {unknown} not"
        );

        if let Some(home) = perf_home {
            let (named, unknown) = self.library_frames(data, home, &[]);
            assert!(
                named > 0 && unknown * 10 < named,
                "{named} named, {unknown} not"
            );
        }
    }
}

#[test]
fn a_perf_data_whose_library_changed_gets_names_only_from_the_recorded_build() {
    let setup = Setup::new();
    // perf record keeps the binaries it saw in its build-id cache under $HOME/.debug.
    let perf_home = setup.dir.path().join("perf-home");
    std::fs::create_dir(&perf_home).unwrap();
    let data = setup.dir.path().join("perf.data");
    let perf_record = || {
        Command::new("perf")
            .env("HOME", &perf_home)
            .args(["record", "-q", "-e", "cpu-clock", "-g", "-o"])
            .arg(&data)
            .arg(&setup.program)
            .output()
            .expect("perf (linux-perf) is installed")
    };
    let mut out = perf_record();
    // Debian's perf 6.1 has been seen to abort in its own build-id code ("assertion failed at
    // util/build-id.c", stack smashing) once under heavy load; that is perf's bug, not the
    // subject here, so it gets one more run, said aloud. A second failure fails the test.
    if std::os::unix::process::ExitStatusExt::signal(&out.status).is_some() {
        eprintln!(
            "perf record died ({:?}): {}; running it once more",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out = perf_record();
    }
    assert!(
        out.status.success(),
        "perf record: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Before the rebuild the library names its frames.
    let (named, _) = setup.library_frames(&data, &setup.empty_home, &[]);
    assert!(named > 0);
    setup.rebuild_library();
    setup.check_after_rebuild(&data, Some(&perf_home));

    // Reported where the library is not installed at all: the note says which build to
    // find, and a copy in a search directory names the frames.
    std::fs::remove_file(&setup.library).unwrap();
    let text = setup.report(&data, &setup.empty_home, "text", &[]);
    let recorded = setup.original_id();
    assert!(
        text.lines().any(|l| l.contains("cannot read")
            && l.contains(&setup.library.display().to_string())
            && l.contains(&format!("no copy with its build id {recorded}"))),
        "{text}"
    );
    let dir = setup.original.to_str().unwrap();
    let (named, _) = setup.library_frames(&data, &setup.empty_home, &["--search-dir", dir]);
    assert!(named > 0);
}

#[test]
fn a_recording_without_embedded_symbols_gets_names_only_from_the_recorded_build() {
    let setup = Setup::new();
    let data = setup.dir.path().join("jprof.data");
    stdout_ok(&[
        "record",
        "--no-embed-symbols",
        "-o",
        data.to_str().unwrap(),
        "--",
        setup.program.to_str().unwrap(),
    ]);
    let (named, _) = setup.library_frames(&data, &setup.empty_home, &[]);
    assert!(named > 0);
    setup.rebuild_library();
    setup.check_after_rebuild(&data, None);
}

/// A library stripped of its symbol table, with a `.gnu_debuglink` to `libw.so.debug`.
const STRIPPED: &str = r#"
static __attribute__((noinline)) unsigned long hidden_spin(unsigned long n) {
    unsigned long h = n;
    for (unsigned long i = 0; i < 300000000UL; i++) h = h * 31 + i;
    return h;
}
unsigned long alpha_entry(unsigned long n) { return hidden_spin(n) + 1; }
"#;

fn run(dir: &Path, program: &str, args: &[&str]) {
    let status = Command::new(program)
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(status.success(), "{program} {args:?}");
}

#[test]
fn a_debug_file_named_by_gnu_debuglink_is_used_only_with_the_same_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let library = cc(d, STRIPPED, "libw.so", &["-g", "-shared", "-fPIC"]);
    run(
        d,
        "objcopy",
        &["--only-keep-debug", "libw.so", "libw.so.debug"],
    );
    run(d, "strip", &["--strip-all", "libw.so"]);
    run(
        d,
        "objcopy",
        &["--add-gnu-debuglink=libw.so.debug", "libw.so"],
    );
    // gdb's second place: .debug/ beside the binary.
    std::fs::create_dir(d.join(".debug")).unwrap();
    std::fs::rename(d.join("libw.so.debug"), d.join(".debug/libw.so.debug")).unwrap();
    let rpath = format!("-Wl,-rpath,{}", d.display());
    let program = cc(d, MAIN, "prog", &["-L.", "-lw", &rpath]);
    assert!(
        !functions(&library).contains(&"hidden_spin".to_string()),
        "stripped"
    );
    let data = d.join("jprof.data");
    stdout_ok(&[
        "record",
        "--no-embed-symbols",
        "-o",
        data.to_str().unwrap(),
        "--",
        program.to_str().unwrap(),
    ]);
    let report = || {
        stdout_ok(&[
            "report",
            "-f",
            "collapsed",
            "-o",
            "-",
            "-i",
            data.to_str().unwrap(),
        ])
    };
    let weight_in = |folded: &str, name: &str| -> u64 {
        folded
            .lines()
            .filter(|l| l.contains(name))
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum()
    };
    let folded = report();
    assert!(
        weight_in(&folded, ";hidden_spin") > 0,
        "named from the debug file: {folded}"
    );

    // Another build's debug file at the same place names nothing.
    let other = d.join("other");
    std::fs::create_dir(&other).unwrap();
    cc(&other, V2, "libw.so", &["-g", "-shared", "-fPIC"]);
    run(
        &other,
        "objcopy",
        &["--only-keep-debug", "libw.so", "libw.so.debug"],
    );
    std::fs::rename(other.join("libw.so.debug"), d.join(".debug/libw.so.debug")).unwrap();
    let folded = report();
    assert_eq!(weight_in(&folded, ";hidden_spin"), 0, "{folded}");
    assert_eq!(weight_in(&folded, "zulu_"), 0, "{folded}");
    assert!(weight_in(&folded, "[unknown] (libw.so+") > 0, "{folded}");
}
