//! The arrows of docs/architecture.md as a test: every top-level module of `src/` may use only
//! modules of its own layer or below. A `crate::X` path (or `crate::{X, …}` import) from a
//! module to a module of a higher layer fails here, naming the file and line. The workspace's
//! crates depend only downward too (jprof-format and jprof-sys on no workspace crate, the agent
//! on jprof-format alone), and `unsafe` stays in jprof-sys and the agent's `ffi`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers, lowest first (docs/architecture.md draws the same).
/// `format` and `demangle` are the jprof-format crate (crates/format) and `sys` the jprof-sys
/// crate (crates/sys); src/lib.rs re-exports them under these names, so `crate::format::…`,
/// `crate::demangle::…` and `crate::sys::…` paths still name their layer here.
const LAYERS: &[&[&str]] = &[
    // Pure leaves: byte formats, names, the profile model (with its filters and context),
    // progress drawing, text made safe for a terminal.
    &[
        "format",
        "demangle",
        "process_root",
        "profile",
        "progress",
        "terminal",
    ],
    // The platform: syscalls (the only `unsafe`), clocks, the crate error.
    &["sys", "timeline", "error"],
    // Files opened on behalf of other processes, and outputs.
    &["foreign_file"],
    // The output writers: a profile into a file format (flame graph, folded, viewers).
    &["output"],
    // A loaded recording.
    &["recording"],
    // Recordings into profiles (process model, unwinding, symbols, JIT index).
    &["symbolize"],
    // Every kind of input file, each with its analysis, handing report/ one loaded profile;
    // the fleet store (ClickHouse), which stores such profiles and hands them back the same way.
    &["input", "fleet"],
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

/// The public API, as modules: every `pub mod` of the jprof crate and of the two crates it
/// re-exports (`format` = jprof-format, `sys` = jprof-sys). What nothing outside the crate
/// uses is `pub(crate)`. A new public module anywhere, or one made private, fails
/// `the_public_modules_are_the_documented_api` until this list (and docs/architecture.md's
/// "Public API") says so on purpose.
const PUBLIC_MODULES: &[&str] = &[
    "cli",
    "fleet",
    "foreign_file",
    "format",
    "format::demangle",
    "format::j9",
    "format::j9::flags",
    "format::jitdump",
    "format::jitdump_write",
    "format::mlpd",
    "format::mlpd::events",
    "format::mlpd::events::counter_type",
    "format::mlpd::events::exinfo",
    "format::mlpd::events::mtype",
    "format::perf",
    "format::perf::context",
    "format::perf::misc",
    "format::perf::sample_type",
    "format::perf_map",
    "format::perf_write",
    "format::procfs",
    "format::recording",
    "format::xray",
    "format::xray::basic",
    "format::xray::fdr",
    "format::xray::fdr::kind",
    "format::xray::instr_map",
    "format::xray::write",
    "input",
    "input::perf_data",
    "input::xray",
    "input::xray::account",
    "input::xray::replay",
    "output",
    "output::collapsed",
    "output::firefox",
    "output::flamegraph",
    "output::pprof",
    "output::speedscope",
    "profile",
    "profile::names",
    "record",
    "recording",
    "report",
    "report::diff",
    "symbolize",
    "symbolize::jit_index",
    "symbolize::jit_unwind",
    "symbolize::native",
    "symbolize::records",
    "sys",
    "sys::bpf",
    "sys::child",
    "sys::clock",
    "sys::mapped_file",
    "sys::memory",
    "sys::perf_event",
    "sys::sched",
    "sys::shared_bytes",
    "timeline",
    "tools",
    "tools::continuous",
    "tools::doctor",
    "tools::dump",
    "tools::symbolize",
    "tools::top",
];

/// `pub mod NAME` declarations (`;` or inline `{`) under `root`, as paths below `prefix`.
fn public_modules(root: &Path, prefix: &str, out: &mut Vec<String>) {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    for file in files {
        let rel = file.strip_prefix(root).unwrap().with_extension("");
        let mut path: Vec<String> = prefix
            .split("::")
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        path.extend(rel.iter().map(|p| p.to_string_lossy().into_owned()));
        if matches!(
            path.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            path.pop();
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for line in text.lines() {
            let Some(rest) = line.trim_start().strip_prefix("pub mod ") else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push(
                path.iter()
                    .chain([&name])
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("::"),
            );
        }
    }
}

#[test]
fn the_public_modules_are_the_documented_api() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut public = vec!["format".to_string(), "sys".to_string()];
    public_modules(&root.join("src"), "", &mut public);
    public_modules(&root.join("crates/format/src"), "format", &mut public);
    public_modules(&root.join("crates/sys/src"), "sys", &mut public);
    public.sort();
    public.dedup();
    let new: Vec<&String> = public
        .iter()
        .filter(|m| !PUBLIC_MODULES.contains(&m.as_str()))
        .collect();
    assert!(
        new.is_empty(),
        "new public modules (make them pub(crate), or add them to PUBLIC_MODULES on purpose): {new:?}"
    );
    let gone: Vec<&&str> = PUBLIC_MODULES
        .iter()
        .filter(|m| !public.iter().any(|p| p == *m))
        .collect();
    assert!(
        gone.is_empty(),
        "no longer public (remove from PUBLIC_MODULES): {gone:?}"
    );
    // The crate's top level: each public module is in a layer.
    for m in public.iter().filter(|m| !m.contains("::")) {
        assert!(layer_of(m).is_some(), "{m} is in no layer");
    }
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    for re_export in [
        "pub use jprof_format as format;",
        "pub use jprof_sys as sys;",
    ] {
        assert!(
            lib.contains(re_export),
            "src/lib.rs no longer has `{re_export}`"
        );
    }
}

/// The packages of the workspace whose manifest is `manifest` (relative to this crate), as
/// `cargo metadata` reads them.
fn packages(manifest: &str) -> Vec<serde_json::Value> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
            "--manifest-path",
            manifest,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    metadata["packages"].as_array().expect("packages").clone()
}

/// Each workspace package's dependencies on other workspace packages (normal, dev and build),
/// as `cargo metadata` reads the manifests.
fn workspace_dependencies() -> BTreeMap<String, Vec<String>> {
    let packages = &packages("Cargo.toml");
    let names: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d["name"].as_str())
                .filter(|d| names.contains(d))
                .map(str::to_string)
                .collect();
            (p["name"].as_str().unwrap_or_default().to_string(), deps)
        })
        .collect()
}

/// The crate arrows of docs/architecture.md ("## Crates"): the pure formats and the syscall
/// layer depend on no workspace crate, and the agent loaded into every JVM links only the
/// formats, never the profiler.
#[test]
fn crates_depend_only_downward() {
    let workspace = workspace_dependencies();
    let deps = |name: &str| -> &Vec<String> {
        workspace
            .get(name)
            .unwrap_or_else(|| panic!("{name} is not a workspace member: {workspace:?}"))
    };
    for leaf in ["jprof-format", "jprof-sys"] {
        assert!(
            deps(leaf).is_empty(),
            "{leaf} must depend on no workspace crate, depends on {:?}",
            deps(leaf)
        );
    }
    let agent = deps("jprof-agent");
    assert!(
        agent.iter().any(|d| d == "jprof-format"),
        "agent must depend on jprof-format ({agent:?})"
    );
    assert!(
        !agent.iter().any(|d| d == "jprof"),
        "agent must not depend on jprof (it is loaded into every JVM): {agent:?}"
    );
    for dep in ["jprof-format", "jprof-sys"] {
        assert!(
            deps("jprof").iter().any(|d| d == dep),
            "jprof must depend on {dep}"
        );
    }
}

/// The line's code (before a `//` comment, string literals blanked) declares or opens
/// something unsafe.
fn has_unsafe_code(line: &str) -> bool {
    let mut code = String::new();
    let mut in_string = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_string => {
                chars.next();
            }
            '"' => in_string = !in_string,
            '/' if !in_string && chars.peek() == Some(&'/') => break,
            _ if in_string => {}
            _ => code.push(c),
        }
    }
    [
        "unsafe {",
        "unsafe fn",
        "unsafe impl",
        "unsafe extern",
        "unsafe trait",
    ]
    .iter()
    .any(|t| code.contains(t))
}

#[test]
fn the_checker_sees_unsafe_code_only() {
    assert!(has_unsafe_code("    let p = unsafe { libc::fork() };"));
    assert!(has_unsafe_code("pub unsafe fn f() {}"));
    assert!(has_unsafe_code("unsafe impl Send for T {}"));
    assert!(!has_unsafe_code("// SAFETY: unsafe { is fine here"));
    assert!(!has_unsafe_code("    x(); // unsafe fn in a comment"));
    assert!(!has_unsafe_code(r#"    let s = "unsafe { in a string"; "#));
    assert!(!has_unsafe_code("#![forbid(unsafe_code)]"));
}

/// `unsafe` lives in jprof-sys (crates/sys) and the agent's `ffi` module only; the jprof crate,
/// jprof-format and the rest of the agent have none. The compiler enforces this too
/// (`#![forbid(unsafe_code)]` in src/lib.rs, src/main.rs and crates/format/src/lib.rs, `deny`
/// in the agent); this test names the file if someone removes the attribute.
#[test]
fn unsafe_only_in_sys_and_agent_ffi() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unsafe_lines = |dir: &str| -> Vec<String> {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        files.sort();
        let mut out = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                if has_unsafe_code(line) {
                    let rel = file.strip_prefix(root).unwrap().display();
                    out.push(format!("{rel}:{}: {}", n + 1, line.trim()));
                }
            }
        }
        out
    };
    let mut found = Vec::new();
    for dir in ["src", "crates/format/src", "agent/src"] {
        found.extend(unsafe_lines(dir));
    }
    found.retain(|l| !l.starts_with("agent/src/ffi.rs:"));
    assert!(
        found.is_empty(),
        "unsafe outside crates/sys and agent/src/ffi.rs (move it into jprof-sys behind a safe \
         API):\n{}",
        found.join("\n")
    );
    // The checker is not blind: the syscall layer does have unsafe blocks.
    assert!(!unsafe_lines("crates/sys/src").is_empty());
}

/// Every public item of the three library crates is documented: each crate root turns the
/// `missing_docs` lint on, and CI's clippy runs with `-D warnings`, so an undocumented public
/// item fails CI. This test keeps the lint from being dropped quietly.
#[test]
fn library_crates_require_docs_on_public_items() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for lib in [
        "src/lib.rs",
        "crates/format/src/lib.rs",
        "crates/sys/src/lib.rs",
    ] {
        let text = std::fs::read_to_string(root.join(lib)).unwrap();
        assert!(
            text.lines().any(|l| l.trim() == "#![warn(missing_docs)]"),
            "{lib} must keep #![warn(missing_docs)]: the public API is documented item by item"
        );
    }
}

/// docs/dependencies.md explains every crate jprof's packages (the workspace and `fuzz/`)
/// depend on, and names none that nothing uses.
#[test]
fn every_dependency_is_explained_in_docs_dependencies_md() {
    let mut used = BTreeMap::<String, Vec<String>>::new();
    for manifest in ["Cargo.toml", "fuzz/Cargo.toml"] {
        let packages = packages(manifest);
        let ours: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
        for p in &packages {
            for d in p["dependencies"].as_array().into_iter().flatten() {
                let name = d["name"].as_str().unwrap_or_default();
                if !ours.contains(&name) && !name.starts_with("jprof") {
                    let by = p["name"].as_str().unwrap_or_default().to_string();
                    used.entry(name.to_string()).or_default().push(by);
                }
            }
        }
    }
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/dependencies.md"))
        .unwrap();
    // The crates a table row is about: the backquoted names in its first column.
    let explained: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix('|')?.split('|').next())
        .flat_map(|first| first.split('`').skip(1).step_by(2).map(str::to_string))
        .collect();
    let unexplained: Vec<_> = used
        .iter()
        .filter(|(name, _)| !explained.contains(*name))
        .collect();
    assert!(
        unexplained.is_empty(),
        "add a row for each of these (crate: packages using it) to docs/dependencies.md, \
         saying what it is used for and why: {unexplained:?}"
    );
    let stale: Vec<_> = explained
        .iter()
        .filter(|name| !used.contains_key(*name))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/dependencies.md has rows for crates no package depends on any more: {stale:?}"
    );
}

/// The source folders of the workspace's crates, each with its crate's root module.
const CRATE_SOURCES: &[&str] = &[
    "src",
    "crates/format/src",
    "crates/sys/src",
    "agent/src",
    "xtask/src",
    "examples/minijit/src",
];

/// The node of a folder's graph that stands for its root file (mod.rs, lib.rs, main.rs, or
/// `foo.rs` beside `foo/`).
const ROOT: &str = "(mod.rs)";

/// One file of a crate: its module path (a root file's is its folder's) and what its code
/// (not its comments nor its `#[cfg(test)]` tail) names.
struct SourceFile {
    module: Vec<String>,
    is_root: bool,
    text: String,
}

fn source_files(crate_src: &Path) -> Vec<SourceFile> {
    let mut files = Vec::new();
    rust_files(crate_src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let rel = file.strip_prefix(crate_src).unwrap();
            let mut module: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            let is_root_file = matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            );
            if is_root_file {
                module.pop();
            }
            // `foo.rs` beside a folder `foo/` is that folder's root file too.
            let is_root = is_root_file || file.with_extension("").is_dir();
            let full = std::fs::read_to_string(&file).unwrap();
            let mut text = String::new();
            for line in full.lines() {
                let code = line.trim_start();
                if code.starts_with("#[cfg(test)]") {
                    break;
                }
                // Comments, and a root's re-exports (its front door: they name what the
                // folder offers, they do not use it).
                if code.starts_with("//") || (is_root && code.starts_with("pub use ")) {
                    continue;
                }
                text.push_str(line);
                text.push('\n');
            }
            SourceFile {
                module,
                is_root,
                text,
            }
        })
        .collect()
}

/// The module paths `text` names (`crate::a::b`, `super::c`, `self::d`, and in a root file
/// its children's `child::x`), absolute from the crate root, with grouped imports expanded
/// one level (`super::{a, b::C}`).
fn named_paths(file: &SourceFile, children: &BTreeSet<String>) -> Vec<Vec<String>> {
    // `super::` of a root file is its folder's parent; of a plain file, its own folder: in
    // both cases the module path less its last part.
    let super_of = &file.module[..file.module.len().saturating_sub(1)];
    let self_of = &file.module[..];
    let mut out = Vec::new();
    let bytes = file.text.as_bytes();
    let word_start = |at: usize| {
        at == 0
            || !(bytes[at - 1].is_ascii_alphanumeric()
                || bytes[at - 1] == b'_'
                || bytes[at - 1] == b':')
    };
    // `a::b::C`, or `a::b::{C, d::E}` (each item of the group after the common path).
    let path_at = |from: usize| -> Vec<Vec<String>> {
        let rest = &file.text[from..];
        let lead_text: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let lead: Vec<String> = lead_text
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let Some(group) = rest[lead_text.len()..].strip_prefix('{') else {
            return vec![lead];
        };
        let inner = group.split('}').next().unwrap_or("");
        inner
            .split(',')
            .map(|item| {
                let tail = item
                    .split("::")
                    .map(|s| {
                        let s = s.trim().trim_start_matches('{');
                        s.split(' ').next().unwrap_or("").to_string()
                    })
                    .take_while(|s| !s.is_empty() && s != "*" && s != "self");
                lead.iter().cloned().chain(tail).collect()
            })
            .collect()
    };
    for (prefix, base) in [
        ("crate::", &[][..]),
        ("super::", super_of),
        ("self::", self_of),
    ] {
        let mut from = 0;
        while let Some(at) = file.text[from..].find(prefix) {
            let at = from + at;
            from = at + prefix.len();
            if !word_start(at) {
                continue;
            }
            let mut base = base.to_vec();
            let mut start = from;
            // `super::super::`
            while prefix == "super::" && file.text[start..].starts_with("super::") {
                base.pop();
                start += "super::".len();
            }
            for tail in path_at(start) {
                out.push(base.iter().cloned().chain(tail).collect());
            }
        }
    }
    if file.is_root {
        for child in children {
            let needle = format!("{child}::");
            let mut from = 0;
            while let Some(at) = file.text[from..].find(&needle) {
                let at = from + at;
                from = at + needle.len();
                if word_start(at) {
                    out.push(file.module.iter().cloned().chain([child.clone()]).collect());
                }
            }
        }
    }
    out
}

/// Per folder (as a module path), the arrows between its files: `from` uses `to`.
type FolderGraphs = BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>>;

fn folder_graphs(crate_src: &Path) -> FolderGraphs {
    let files = source_files(crate_src);
    // Each folder's children: its files and subfolders.
    let mut children: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        if let Some((last, folder)) = f.module.split_last() {
            children
                .entry(folder.to_vec())
                .or_default()
                .insert(last.clone());
        }
    }
    let mut graphs = FolderGraphs::new();
    for f in &files {
        let own = children.get(&f.module).cloned().unwrap_or_default();
        for target in named_paths(f, &own) {
            let k = f
                .module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            let folder = f.module[..k].to_vec();
            let Some(kids) = children.get(&folder) else {
                continue;
            };
            // The file's own node in `folder`: the child it sits in, or the folder's root.
            let from = match f.module.get(k) {
                Some(child) => child.clone(),
                None if f.is_root => ROOT.to_string(),
                None => continue,
            };
            // A target that is no child module of `folder` is an item of its root file.
            let to = match target.get(k) {
                Some(child) if kids.contains(child) => child.clone(),
                Some(_) => ROOT.to_string(),
                None => continue,
            };
            if from != to {
                graphs
                    .entry(folder)
                    .or_default()
                    .entry(from)
                    .or_default()
                    .insert(to);
            }
        }
    }
    graphs
}

/// The circles of a graph: its strongly connected components of more than one node.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = graph.keys().chain(graph.values().flatten()).collect();
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(n) = todo.pop() {
            for next in graph.get(n).into_iter().flatten() {
                if seen.insert(next) {
                    todo.push(next);
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<&String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for n in &nodes {
        let component: Vec<String> = nodes
            .iter()
            .filter(|m| reachable[n].contains(*m) && reachable[*m].contains(*n))
            .map(|m| m.to_string())
            .collect();
        if component.len() > 1 && !out.contains(&component) {
            out.push(component);
        }
    }
    out
}

/// Within each folder, the files use each other in one direction only: no file uses a file
/// that (through others) uses it back. The folder's root file (mod.rs, lib.rs) counts as one
/// of its files (so does `foo.rs` beside its folder `foo/`), its re-exports (`pub use`) aside;
/// test modules are not counted.
#[test]
fn no_import_circle_within_a_folder() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for crate_src in CRATE_SOURCES {
        for (folder, graph) in folder_graphs(&root.join(crate_src)) {
            let name = format!("{crate_src}/{}", folder.join("/"));
            for circle in circles(&graph) {
                let arrows: Vec<String> = circle
                    .iter()
                    .flat_map(|from| {
                        graph[from]
                            .iter()
                            .filter(|to| circle.contains(to))
                            .map(move |to| format!("{from} → {to}"))
                    })
                    .collect();
                found.push(format!("{name}: {}", arrows.join(", ")));
            }
        }
    }
    assert!(
        found.is_empty(),
        "files of one folder that use each other in a circle (move what both need into a \
         lower file, or pass it in):\n{}",
        found.join("\n")
    ); // The checker is not blind: it sees record/'s files use each other (downward).
    let record = &folder_graphs(&root.join("src"))[&vec!["record".to_string()]];
    assert!(record["session"].contains("reader") && record[ROOT].contains("session"));
}

#[test]
fn the_circle_checker_follows_super_crate_and_child_paths() {
    let file = |module: &[&str], is_root: bool, text: &str| SourceFile {
        module: module.iter().map(|s| s.to_string()).collect(),
        is_root,
        text: text.to_string(),
    };
    let kids: BTreeSet<String> = ["a", "b"].map(String::from).into();
    let paths = |f: &SourceFile| -> Vec<String> {
        named_paths(f, &kids)
            .into_iter()
            .map(|p| p.join("::"))
            .collect()
    };
    assert_eq!(
        paths(&file(&["report", "a"], false, "use super::{b::X, Format};")),
        ["report::b::X", "report::Format"]
    );
    assert_eq!(
        paths(&file(
            &["input", "mlpd"],
            true,
            "use crate::input::{Loaded, recording::text::Tables};"
        )),
        ["input::Loaded", "input::recording::text::Tables"]
    );
    assert_eq!(
        paths(&file(
            &["report"],
            true,
            "let x = b::write(crate::output::pprof::F);"
        )),
        ["output::pprof::F", "report::b"]
    );
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(circles(&graph), [["a", "b", "c"]]);
}
