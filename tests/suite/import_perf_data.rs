//! `jprof report -i perf.data` on the real fixtures (`tests/fixtures/shared`): the perf.data import
//! must name the same leaf (self) functions as `perf inject --jit` + `perf script` +
//! `inferno-collapse-perf` on ≥ 99% of the period-weighted samples perf names; missing side
//! files and damaged files give clear notes or errors, never a panic.
//!
//! The comparison does not depend on what this machine has installed: the fixtures are
//! reported as on a machine without their binaries (their paths renamed), named from the
//! symbol files committed with them (`symbols/`, with the recorded build ids), and perf's
//! kernel leaves are told by a list taken from the recording machine (`kernel-leaves.txt`).

use crate::cli_support;
use cli_support::jprof;

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use jprof::input::perf_data::{import, import_bytes, ImportOptions};
use jprof::output::collapsed;
use jprof::symbolize::{resolve, ResolveOptions};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared");

fn fixture(rel: &str) -> PathBuf {
    Path::new(FIXTURES).join(rel)
}

fn options(dir: &str) -> ImportOptions {
    ImportOptions {
        search_dirs: vec![fixture(dir)],
    }
}

/// A fixture as it reports on a machine that has none of its binaries: every `/usr/` in the
/// perf.data (the paths of node, libc, libjvm, ...) becomes `/nxx/` (same length), and the
/// committed symbol files (`symbols/NAME.gz`: symbols only, for the addresses the samples hit,
/// with the recorded build id) are unpacked into a directory searched by file name. Whatever
/// libc, libjvm or node this machine has installed then changes nothing.
struct Portable {
    _dir: tempfile::TempDir,
    data: PathBuf,
    symbols: PathBuf,
}

impl Portable {
    fn new(perf_data: &[u8]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let symbols = dir.path().join("symbols");
        std::fs::create_dir(&symbols).unwrap();
        for entry in std::fs::read_dir(fixture("symbols")).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap();
            let mut bytes = Vec::new();
            flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
                .read_to_end(&mut bytes)
                .unwrap();
            std::fs::write(symbols.join(name), bytes).unwrap();
        }
        let mut bytes = perf_data.to_vec();
        let renamed = replace_all(&mut bytes, b"/usr/", b"/nxx/");
        assert!(renamed > 0, "the fixture names files under /usr");
        let data = dir.path().join("perf.data");
        std::fs::write(&data, bytes).unwrap();
        Self {
            _dir: dir,
            data,
            symbols,
        }
    }

    /// Side files from the fixture directory `dir`, binaries from the symbol files.
    fn options(&self, dir: &str) -> ImportOptions {
        ImportOptions {
            search_dirs: vec![fixture(dir), self.symbols.clone()],
        }
    }

    /// jprof's folded stacks, with the symbol files searched.
    fn folded(&self, dir: &str) -> String {
        let options = self.options(dir);
        let recording = import(&self.data, &options).expect("import");
        let resolve_options = ResolveOptions {
            search_dirs: options.search_dirs.clone(),
            ..Default::default()
        };
        let profile = resolve(&recording, &resolve_options).expect("resolve");
        let mut out = Vec::new();
        collapsed::write(&profile, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }
}

/// Replaces every occurrence of `needle` (same length as `with`); returns how many.
fn replace_all(bytes: &mut [u8], needle: &[u8], with: &[u8]) -> usize {
    assert_eq!(needle.len(), with.len());
    let mut n = 0;
    let mut i = 0;
    while let Some(pos) = bytes[i..].windows(needle.len()).position(|w| w == needle) {
        bytes[i + pos..i + pos + needle.len()].copy_from_slice(with);
        i += pos + needle.len();
        n += 1;
    }
    n
}

/// jprof's folded stacks for a perf.data.
fn jprof_folded(perf_data: &Path, options: &ImportOptions) -> String {
    let recording = import(perf_data, options).expect("import");
    let profile = resolve(&recording, &ResolveOptions::default()).expect("resolve");
    let mut out = Vec::new();
    collapsed::write(&profile, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// What a sample's leaf is, for the comparison.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Leaf {
    Named(String),
    /// A kernel function. This machine runs another kernel than the fixtures were recorded on
    /// (KASLR and symbols differ), so nothing here can name the fixtures' kernel addresses;
    /// these samples are counted but not compared.
    Kernel,
    /// `[unknown]`, or inferno's `[module]` for an address perf could not name.
    Unknown,
}

/// The part of a name both tools agree on. inferno-collapse-perf cuts a name at its first `(`
/// (our names keep the signature). perf's demangler leaves out the return type of C++ template
/// functions, ours writes it (`void v8::internal::LookupIterator::Start<false>`): a C++ name
/// (with `::`) is taken from its last space outside `<>`. glibc exports one function under
/// several names and perf shows another alias than jprof (`malloc`/`__libc_malloc`,
/// `pthread_mutex_lock@@GLIBC_2.2.5`/`__pthread_mutex_lock`): symbol versions, leading
/// underscores and the `__libc_`/`__GI_` prefixes are dropped.
fn normalize(name: &str) -> String {
    let mut name = name.split('(').next().unwrap_or(name).trim();
    let mut depth = 0i32;
    let mut last_space = None;
    for (i, c) in name.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ' ' if depth == 0 => last_space = Some(i),
            _ => {}
        }
    }
    if let Some(i) = last_space {
        if name[i + 1..].contains("::") {
            name = &name[i + 1..];
        }
    }
    let name = name.split('@').next().unwrap_or(name);
    let mut name = name.trim_start_matches('_');
    for prefix in ["libc_", "GI_"] {
        name = name
            .strip_prefix(prefix)
            .unwrap_or(name)
            .trim_start_matches('_');
    }
    name.to_string()
}

/// The leaf of one of jprof's folded stacks: inlined frames (`_[i]`, which perf script does not
/// show) are dropped, `_[j]` is only a marker.
fn jprof_leaf(stack: &str) -> Leaf {
    let frames: Vec<&str> = stack.split(';').collect();
    let Some(leaf) = frames.iter().rev().find(|f| !f.ends_with("_[i]")) else {
        return Leaf::Unknown;
    };
    if leaf.ends_with("_[k]") {
        return Leaf::Kernel;
    }
    let name = leaf.strip_suffix("_[j]").unwrap_or(leaf);
    if name.starts_with("[unknown]") {
        return Leaf::Unknown;
    }
    Leaf::Named(normalize(name))
}

/// The leaf of one of perf's folded stacks. perf script marks no kernel frames, so a kernel
/// function is recognized by its name in the list taken from the recording machine's kallsyms
/// (`kernel-leaves.txt`).
fn perf_leaf(stack: &str, kernel_names: &HashSet<String>) -> Leaf {
    let leaf = stack.rsplit(';').next().unwrap_or(stack);
    if leaf.starts_with('[') && leaf.trim_end().ends_with(']') {
        return Leaf::Unknown;
    }
    if kernel_names.contains(leaf.trim()) {
        return Leaf::Kernel;
    }
    Leaf::Named(normalize(leaf))
}

fn kernel_names() -> HashSet<String> {
    let text = std::fs::read_to_string(fixture("kernel-leaves.txt")).expect("kernel-leaves.txt");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Period-weighted leaf totals of a folded file (`stack weight` per line).
fn leaf_weights(folded: &str, leaf: impl Fn(&str) -> Leaf) -> BTreeMap<Leaf, u64> {
    let mut out = BTreeMap::new();
    for line in folded.lines() {
        let (stack, weight) = line.rsplit_once(' ').expect("stack weight");
        *out.entry(leaf(stack)).or_default() += weight.parse::<u64>().expect("weight");
    }
    out
}

/// The agreement on the samples perf names (user-space leaves): for each function, the weight
/// both give it, over the weight perf gives all named functions.
struct Agreement {
    agreed: u64,
    perf_named: u64,
    perf_total: u64,
    jprof_total: u64,
    perf_kernel: u64,
    jprof_kernel: u64,
    worst: Vec<(String, u64, u64)>,
}

impl Agreement {
    fn ratio(&self) -> f64 {
        self.agreed as f64 / self.perf_named as f64
    }
}

fn compare(jprof: &str, reference: &str) -> Agreement {
    let kernel = kernel_names();
    let ours = leaf_weights(jprof, jprof_leaf);
    let theirs = leaf_weights(reference, |s| perf_leaf(s, &kernel));
    let mut a = Agreement {
        agreed: 0,
        perf_named: 0,
        perf_total: theirs.values().sum(),
        jprof_total: ours.values().sum(),
        perf_kernel: theirs.get(&Leaf::Kernel).copied().unwrap_or(0),
        jprof_kernel: ours.get(&Leaf::Kernel).copied().unwrap_or(0),
        worst: Vec::new(),
    };
    for (leaf, &weight) in &theirs {
        let Leaf::Named(name) = leaf else { continue };
        let mine = ours.get(leaf).copied().unwrap_or(0);
        a.perf_named += weight;
        a.agreed += weight.min(mine);
        if mine != weight {
            a.worst.push((name.clone(), weight, mine));
        }
    }
    a.worst
        .sort_by_key(|(_, perf, mine)| std::cmp::Reverse(perf.abs_diff(*mine)));
    a.worst.truncate(8);
    a
}

/// Imports, compares with the reference, prints the measurement and checks it.
fn check_agreement(perf_data: &Path, dir: &str, reference: &str) {
    let portable = Portable::new(&std::fs::read(perf_data).unwrap());
    let folded = portable.folded(dir);
    let reference = std::fs::read_to_string(fixture(reference)).expect("reference");
    let a = compare(&folded, &reference);
    println!(
        "{}: agreement {:.2}% of the {:.1}% of the weight perf names; kernel leaves perf {:.2}% / \
         jprof {:.2}% (not compared: another kernel build)",
        perf_data.display(),
        a.ratio() * 100.0,
        a.perf_named as f64 * 100.0 / a.perf_total as f64,
        a.perf_kernel as f64 * 100.0 / a.perf_total as f64,
        a.jprof_kernel as f64 * 100.0 / a.jprof_total as f64,
    );
    for (name, perf, mine) in &a.worst {
        println!("  differs: {name:?} perf {perf} jprof {mine}");
    }
    // Same samples, same periods. inferno-collapse-perf drops a few of perf script's stacks
    // (0.2% of the Mono file's weight), so the totals are close, not equal.
    let total_gap = a.jprof_total.abs_diff(a.perf_total) as f64 / a.perf_total as f64;
    assert!(
        total_gap < 0.005,
        "total period weight differs by {total_gap:.4}"
    );
    assert!(
        a.perf_named as f64 >= 0.9 * a.perf_total as f64,
        "the comparison must cover most samples"
    );
    assert!(a.ratio() >= 0.99, "agreement {:.4} < 0.99", a.ratio());
    // The kernel leaves are not compared by name, but their share must match.
    let kernel_gap = a.perf_kernel.abs_diff(a.jprof_kernel) as f64 / a.perf_total as f64;
    assert!(kernel_gap < 0.01, "kernel share differs by {kernel_gap:.4}");
}

#[test]
fn node_jitdump_agrees_with_perf_inject() {
    check_agreement(&fixture("node/perf.data"), "node", "node/perf-jit.folded");
}

#[test]
fn java_jvmti_jitdump_agrees_with_perf_inject() {
    check_agreement(
        &fixture("java/perf-jvmti.data"),
        "java",
        "java/perf-jvmti-jit.folded",
    );
}

#[test]
fn java_perf_map_agrees_with_perf() {
    check_agreement(
        &fixture("java/perf-map.data"),
        "java",
        "java/perf-map.folded",
    );
}

fn gunzip(gz: &Path, dir: &Path) -> PathBuf {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(gz).unwrap())
        .read_to_end(&mut bytes)
        .unwrap();
    let out = dir.join("perf.data");
    std::fs::write(&out, bytes).unwrap();
    out
}

#[test]
fn mono_perf_map_agrees_with_perf() {
    let tmp = tempfile::tempdir().unwrap();
    let data = gunzip(&fixture("mono/perf.data.gz"), tmp.path());
    check_agreement(&data, "mono", "mono/perf.folded");
}

#[test]
fn node_names_the_hot_js_functions() {
    let folded = jprof_folded(&fixture("node/perf.data"), &options("node"));
    for name in ["JS:*tokenize", "JS:*scoreToken", "JS:*weigh", "JS:*lookup"] {
        assert!(
            folded.lines().any(|l| l.contains(name)),
            "{name} missing from the folded stacks"
        );
    }
    // Frame pointers go through V8 code: main → scoreToken → lookup.
    assert!(folded.lines().any(|l| {
        let main = l.find("JS:*main");
        let score = l.find("JS:*scoreToken");
        let lookup = l.find("JS:*lookup");
        matches!((main, score, lookup), (Some(a), Some(b), Some(c)) if a < b && b < c)
    }));
}

#[test]
fn missing_jitdump_gives_a_clear_note() {
    // No search directory: the recorded path is in /tmp/jprof-fixtures-work, which the
    // benchmark may have filled; an empty search dir list and a renamed copy avoid that.
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("perf.data");
    let mut bytes = std::fs::read(fixture("node/perf.data")).unwrap();
    let n = replace_all(
        &mut bytes,
        b"/tmp/jprof-fixtures-work/node/jit-13228.dump",
        b"/nonexistent/jprof-fixtu/node/jit-13228.dump",
    );
    assert!(n >= 1, "the fixture names its jitdump");
    std::fs::write(&copy, &bytes).unwrap();
    let recording = import(
        &copy,
        &ImportOptions {
            search_dirs: vec![tmp.path().to_path_buf()],
        },
    )
    .unwrap();
    let notes = &recording.summary.as_ref().unwrap().notes;
    assert!(
        notes.iter().any(|n| n.contains("jitdump of pid 13228")
            && n.contains("/nonexistent/jprof-fixtu/node/jit-13228.dump")
            && n.contains("--search-dir")),
        "{notes:#?}"
    );
}

#[test]
fn truncated_perf_data_keeps_what_was_read_and_names_the_offset() {
    let bytes = std::fs::read(fixture("node/perf.data")).unwrap();
    let path = Path::new("cut.data");
    let options = options("node");
    let full = import_bytes(path, &bytes, &options).unwrap();
    let all = full.summary.as_ref().unwrap().samples;
    // Inside the data section (264..359848): the records before the cut survive.
    let cut = 200_000;
    let recording = import_bytes(path, &bytes[..cut], &options).unwrap();
    let summary = recording.summary.as_ref().unwrap();
    assert!(
        summary.samples > 0 && summary.samples < all,
        "{}",
        summary.samples
    );
    // The note names the offset of the record the cut went through.
    let note = summary
        .notes
        .iter()
        .find(|n| n.contains("truncated or damaged"))
        .expect("a truncation note");
    let offset: usize = note
        .rsplit("the records before byte offset ")
        .next()
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("an offset in the note");
    assert!(offset <= cut && offset + 65536 > cut, "{note}");
    let profile = resolve(&recording, &ResolveOptions::default()).unwrap();
    assert_eq!(profile.samples.len() as u64, summary.samples);
    // Every cut point is safe: an error naming an offset, or notes; never a panic.
    for cut in (0..bytes.len())
        .step_by(2999)
        .chain([0, 7, 8, 103, 104, 263, 264, 272, 359_848, 359_849, 359_856])
    {
        match import_bytes(path, &bytes[..cut], &options) {
            Ok(r) => {
                if cut < bytes.len() {
                    let s = r.summary.unwrap();
                    assert!(
                        s.notes.iter().any(|n| n.contains("byte offset")),
                        "cut {cut}"
                    );
                }
            }
            Err(e) => assert!(e.to_string().contains("byte offset"), "cut {cut}: {e}"),
        }
    }
}

#[test]
fn report_command_reads_perf_data() {
    let tmp = tempfile::tempdir().unwrap();
    let out = jprof()
        .args(["report", "--format", "collapsed", "-o", "-", "-i"])
        .arg(fixture("node/perf.data"))
        .arg("--search-dir")
        .arg(tmp.path())
        .arg("--search-dir")
        .arg(fixture("node"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // The short form of `JS:*tokenize /tmp/jprof-fixtures-work/node/tokens.js:29:18`.
    assert!(text.contains("tokenize tokens.js:29_[j]"), "{text}");
    // And as a text report, with the import's provenance.
    let out = jprof()
        .args(["report", "--format", "text", "-i"])
        .arg(fixture("java/perf-jvmti.data"))
        .arg("--search-dir")
        .arg(fixture("java"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("imported from perf.data"), "{text}");
    assert!(text.contains("demo.matrix.Matrix.multiply_[j]"), "{text}");
}

/// `--weight samples` counts samples (1 each), as `perf script | inferno-collapse-perf` does;
/// without it, stacks weigh the event's period.
#[test]
fn weight_samples_counts_what_perf_script_lists() {
    for fixture_path in ["node/perf.data", "java/perf-map.data"] {
        let data = fixture(fixture_path);
        let perf = Command::new("perf")
            .args(["script", "-F", "tid", "-i"])
            .arg(&data)
            .output()
            .expect("perf (linux-perf) is installed");
        let perf_samples = String::from_utf8_lossy(&perf.stdout).lines().count() as u64;
        assert!(
            perf_samples > 100,
            "{fixture_path}: perf script listed {perf_samples}"
        );
        let total = |extra: &[&str]| -> u64 {
            let out = jprof()
                .args(["report", "-f", "collapsed", "-o", "-", "-i"])
                .arg(&data)
                .args(extra)
                .output()
                .unwrap();
            assert!(out.status.success());
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
                .sum()
        };
        assert_eq!(
            total(&["--weight", "samples"]),
            perf_samples,
            "{fixture_path}"
        );
        assert!(
            total(&[]) > perf_samples * 1000,
            "{fixture_path}: period weights"
        );
    }
}
