//! The layout of the tests themselves (tests/README.md): every Rust file under tests/ is
//! compiled into a test target (a file no target includes runs nothing, silently), the only
//! target is `tests/suite` (each extra binary links jprof again, the bulk of a clean build),
//! and the README's test command is the one CI runs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Test targets cargo builds from tests/: `tests/NAME.rs` and `tests/NAME/main.rs`.
const TARGETS: &[&str] = &["tests/suite/main.rs"];

/// Folders under tests/ that hold data, not test code.
const DATA_DIRS: &[&str] = &["tests/fixtures", "tests/golden"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let path = e.path();
        let rel = path.strip_prefix(root()).unwrap().to_path_buf();
        if path.is_dir() {
            if !DATA_DIRS.iter().any(|d| rel == Path::new(d)) {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.insert(rel);
        }
    }
}

/// The files `mod NAME;` lines in `file` (relative to the repository) bring in, honouring a
/// `#[path = "…"]` on the line before.
fn declared_modules(file: &Path, text: &str) -> Vec<PathBuf> {
    let dir = file.parent().unwrap();
    let stem = file.file_stem().unwrap().to_str().unwrap();
    // A crate root or mod.rs declares its children beside it; `a.rs` declares them in `a/`.
    let child_dir = if matches!(stem, "main" | "lib" | "mod") {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    let mut out = Vec::new();
    let mut path_attr: Option<String> = None;
    for line in text.lines().map(str::trim) {
        if let Some(p) = line
            .strip_prefix("#[path = \"")
            .and_then(|r| r.strip_suffix("\"]"))
        {
            path_attr = Some(p.to_string());
            continue;
        }
        let decl = line.strip_prefix("pub ").unwrap_or(line);
        if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
            out.push(match path_attr.take() {
                Some(p) => dir.join(p),
                None if root().join(child_dir.join(format!("{name}.rs"))).exists() => {
                    child_dir.join(format!("{name}.rs"))
                }
                None => child_dir.join(name).join("mod.rs"),
            });
        } else if !line.starts_with("#[") {
            path_attr = None;
        }
    }
    out
}

/// Every file reachable from the test targets through `mod` declarations.
fn included_files() -> BTreeSet<PathBuf> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<PathBuf> = TARGETS.iter().map(PathBuf::from).collect();
    while let Some(file) = todo.pop() {
        let Ok(text) = std::fs::read_to_string(root().join(&file)) else {
            panic!(
                "{} is declared as a module but does not exist",
                file.display()
            );
        };
        todo.extend(declared_modules(&file, &text));
        seen.insert(file);
    }
    seen
}

#[test]
fn mod_declarations_resolve_like_rustc() {
    let text = "mod a;\n#[path = \"x/y.rs\"]\nmod b;\npub mod c;\n";
    let got = declared_modules(Path::new("tests/suite/main.rs"), text);
    assert_eq!(got[1], Path::new("tests/suite/x/y.rs"));
    assert_eq!(got[2], Path::new("tests/suite/c/mod.rs"));
    let nested = declared_modules(Path::new("tests/suite/area.rs"), "mod inner;");
    assert_eq!(nested, [Path::new("tests/suite/area/inner/mod.rs")]);
}

/// Cargo makes a test target of every `tests/*.rs` and `tests/*/main.rs`; only the suite is
/// one, and every Rust file under tests/ is a module of it.
#[test]
fn every_test_file_is_in_the_suite() {
    let tests = root().join("tests");
    let mut targets = BTreeSet::new();
    for e in std::fs::read_dir(&tests).unwrap().flatten() {
        let path = e.path();
        let rel = path.strip_prefix(root()).unwrap().to_path_buf();
        if path.extension().is_some_and(|x| x == "rs") {
            targets.insert(rel);
        } else if path.join("main.rs").exists() {
            targets.insert(rel.join("main.rs"));
        }
    }
    let expected: BTreeSet<PathBuf> = TARGETS.iter().map(PathBuf::from).collect();
    assert_eq!(
        targets, expected,
        "the integration tests are one binary (tests/README.md): make a new test file \
         tests/suite/NAME.rs with `mod NAME;` in tests/suite/main.rs, not a test target of its own"
    );
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(
        !manifest.contains("[[test]]") && !manifest.contains("autotests"),
        "Cargo.toml declares test targets by hand; this check knows only cargo's own discovery"
    );

    let mut all = BTreeSet::new();
    rust_files(&tests, &mut all);
    let included = included_files();
    let orphans: Vec<_> = all.difference(&included).collect();
    assert!(
        orphans.is_empty(),
        "these files compile into no test target, so their tests never run; add a `mod` line \
         for each (tests/suite/main.rs): {orphans:?}"
    );
    assert!(included.len() > 40, "{included:?}");
}

/// README's quick start gives the test command CI runs (.ci/run), word for word.
#[test]
fn readme_test_command_is_what_ci_runs() {
    let read = |p: &str| std::fs::read_to_string(root().join(p)).unwrap();
    let command = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("cargo test"))
            .map(|l| l.split('#').next().unwrap().trim().to_string())
            .collect()
    };
    let ci = command(&read(".ci/run"));
    let readme = command(&read("README.md"));
    assert_eq!(ci.len(), 1, "{ci:?}");
    assert!(
        readme.contains(&ci[0]),
        "README.md gives {readme:?}, CI runs {ci:?}"
    );
    assert!(ci[0].contains("--include-ignored"), "CI runs the soaks too");
}
