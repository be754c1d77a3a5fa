//! The arrows of docs/architecture.md as a test: every top-level module of `src/` may use only
//! modules of its own layer or below. A `crate::X` path (or `crate::{X, …}` import) from a
//! module to a module of a higher layer fails here, naming the file and line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Layers, lowest first (docs/architecture.md draws the same).
const LAYERS: &[&[&str]] = &[
    // Pure leaves: byte formats, names, the profile model (with its filters and context),
    // progress drawing.
    &["format", "demangle", "process_root", "profile", "progress"],
    // The platform: syscalls (the only `unsafe`), clocks, the crate error.
    &["sys", "timeline", "error"],
    // Files opened on behalf of other processes, and outputs.
    &["foreign_file"],
    // A loaded recording.
    &["recording"],
    // Recordings into profiles (process model, unwinding, symbols, JIT index).
    &["symbolize"],
    // Every kind of input file, each with its analysis, handing report/ one loaded profile.
    &["input"],
    // The two commands' engines.
    &["record", "report"],
    // The small tools (dump, symbolize, doctor) and the command line.
    &["tools"],
    &["cli", "lib", "main"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for e in std::fs::read_dir(path).unwrap().flatten() {
            rust_files(&e.path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The top-level modules a line names through `crate::`.
fn crate_uses(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::B, c}`: the first path segment of each item (nesting is rare).
            let inner = group.split('}').next().unwrap_or("");
            out.extend(inner.split(',').filter_map(|item| {
                let name = item.trim().split("::").next()?.trim();
                (!name.is_empty()).then(|| name.to_string())
            }));
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

#[test]
fn every_arrow_points_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut back_arrows = Vec::new();
    let mut unknown = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap().flatten() {
        let path = entry.path();
        let module = path.file_stem().unwrap().to_string_lossy().into_owned();
        let Some(from) = layer_of(&module) else {
            unknown.insert(module, "a top-level module missing from LAYERS");
            continue;
        };
        let mut files = Vec::new();
        rust_files(&path, &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for used in crate_uses(line) {
                    if used == module || used == "Error" || used == "Result" {
                        continue;
                    }
                    match layer_of(&used) {
                        Some(to) if to > from => back_arrows.push(format!(
                            "{}:{}: {module} (layer {from}) uses {used} (layer {to})",
                            file.strip_prefix(&src).unwrap().display(),
                            n + 1
                        )),
                        Some(_) => {}
                        None => {
                            unknown.insert(used, "used but missing from LAYERS");
                        }
                    }
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "modules not placed in a layer: {unknown:?}"
    );
    assert!(
        back_arrows.is_empty(),
        "arrows that point up (move the code down, or the shared piece into a lower module):\n{}",
        back_arrows.join("\n")
    );
}

#[test]
fn the_checker_sees_grouped_and_plain_paths() {
    assert_eq!(
        crate_uses("use crate::{error::Error, format::perf, report};"),
        ["error", "format", "report"]
    );
    assert_eq!(crate_uses("let x = crate::record::run(c);"), ["record"]);
}

/// The crate's public top level does not grow unnoticed: a new `pub mod` in `src/lib.rs` must
/// be added here on purpose (and to docs/architecture.md's layers).
#[test]
fn no_new_public_top_level_module() {
    const PUBLIC: &[&str] = &[
        "cli",
        "demangle",
        "error",
        "foreign_file",
        "format",
        "input",
        "process_root",
        "profile",
        "progress",
        "record",
        "recording",
        "report",
        "symbolize",
        "sys",
        "timeline",
        "tools",
    ];
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let public: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';'))
        .collect();
    let new: Vec<&&str> = public.iter().filter(|m| !PUBLIC.contains(m)).collect();
    assert!(new.is_empty(), "new public top-level modules: {new:?}");
    for m in &public {
        assert!(layer_of(m).is_some(), "{m} is in no layer");
    }
}
