//! Node out of the box: `jprof record -- node script.js` with no flags on a CPU-bound script
//! (jprof sets NODE_OPTIONS itself), then `jprof report --format collapsed`. Most samples must
//! land in named JS functions, the hot ones by name, and the side files node wrote only because
//! jprof asked (jit-PID.dump, isolate-*-v8.log) must be gone afterwards — or kept with
//! `--keep-side-files`. Needs `node` on PATH and perf_event_open (root in CI).

use crate::cli_support;
use cli_support::jprof;

use std::path::{Path, PathBuf};

/// 1.5 s of the process's CPU time (not wall time: a loaded machine gives it as many samples):
/// recursive fib (JIT-compiled, optimized by Turbofan) and string work.
const SCRIPT: &str = r#"
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function spell(n) {
  let s = '';
  for (let i = 0; i < n; i++) s += String.fromCharCode(97 + (i * 7) % 26);
  return s.split('e').length;
}
const cpu = () => { const u = process.cpuUsage(); return u.user + u.system; };
const end = cpu() + 1.5e6;
let acc = 0;
while (cpu() < end) { acc += fib(22); acc += spell(500); }
console.log('done', acc > 0);
"#;

/// Writes the script into a fresh directory and records it from there (node writes its
/// jit-PID.dump into its working directory). Returns the directory and the recording.
fn record_node(keep_side_files: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("script.js"), SCRIPT).unwrap();
    let data = dir.path().join("node.data");
    let mut cmd = jprof();
    cmd.current_dir(dir.path())
        .args(["record", "-o"])
        .arg(&data);
    if keep_side_files {
        cmd.arg("--keep-side-files");
    }
    let out = cmd
        .args(["--", "node", "script.js"])
        .env_remove("NODE_OPTIONS")
        .output()
        .expect("run jprof record");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "jprof record failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("done true"),
        "the script did not finish:\n{stdout}"
    );
    assert!(
        stderr.contains("jitdump") && stderr.contains("records stored"),
        "node's jitdump was not taken in:\n{stderr}"
    );
    (dir, data)
}

/// The side files node left in `dir`.
fn side_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            (n.starts_with("jit-") && n.ends_with(".dump"))
                || (n.starts_with("isolate-") && n.ends_with(".log"))
        })
        .collect()
}

/// The function name inside the short label of a JS frame of the script
/// (`fib script.js:2_[j]` → `fib`), if it is a named JS frame.
fn js_function(label: &str) -> Option<&str> {
    let (name, place) = label.strip_suffix("_[j]")?.split_once(' ')?;
    (place.starts_with("script.js:") && name != "(anonymous)").then_some(name)
}

#[test]
fn node_without_flags_names_js_functions() {
    let (dir, data) = record_node(false);
    assert_eq!(
        side_files(dir.path()),
        Vec::<String>::new(),
        "side files left behind"
    );

    let out = jprof()
        .args(["report", "-i"])
        .arg(&data)
        .args(["--format", "collapsed", "-o", "-"])
        .output()
        .expect("run jprof report");
    assert!(out.status.success());
    let folded = String::from_utf8(out.stdout).unwrap();

    let (mut total, mut with_js, mut leaf_js, mut fib, mut spell) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for line in folded.lines() {
        let (stack, weight) = line.rsplit_once(' ').expect("folded line");
        let weight: u64 = weight.parse().expect("weight");
        total += weight;
        // The user-space leaf: interrupts and syscalls on top do not move a sample out of JS.
        let user: Vec<&str> = stack.split(';').filter(|f| !f.ends_with("_[k]")).collect();
        let names: Vec<&str> = user.iter().filter_map(|f| js_function(f)).collect();
        if !names.is_empty() {
            with_js += weight;
        }
        if user.last().and_then(|f| js_function(f)).is_some() {
            leaf_js += weight;
        }
        if names.contains(&"fib") {
            fib += weight;
        }
        if names.contains(&"spell") {
            spell += weight;
        }
    }
    assert!(total > 0, "no samples");
    let percent = |w: u64| w as f64 * 100.0 / total as f64;
    assert!(
        percent(leaf_js) >= 60.0,
        "{:.1}% of samples land in named JS frames:\n{folded}",
        percent(leaf_js)
    );
    assert!(percent(with_js) >= percent(leaf_js));
    assert!(percent(fib) >= 30.0, "fib has {:.1}%", percent(fib));
    assert!(spell > 0, "spell is never seen:\n{folded}");
}

#[test]
fn node_side_files_kept_on_request() {
    let (dir, _data) = record_node(true);
    let files = side_files(dir.path());
    assert!(
        files.iter().any(|f| f.starts_with("jit-")),
        "jit-PID.dump was not kept: {files:?}"
    );
    assert!(
        files.iter().any(|f| f.starts_with("isolate-")),
        "isolate log was not kept: {files:?}"
    );
}

/// The recorder stores V8's jitdump compressed and without its machine code; a recording of
/// the same run stored the way jprof did before (every piece as the file's own bytes, in
/// SIDE_FILE chunks) reports exactly the same.
#[test]
fn node_jitdump_is_stored_compactly_and_the_older_form_reads_the_same() {
    use jprof::format::recording::{
        encode_chunk, encode_side_piece, parse_chunks, parse_packed_side_piece, ChunkKind,
        SideKind, SidePiece,
    };
    let (dir, data) = record_node(true);
    let dump = side_files(dir.path())
        .into_iter()
        .find(|f| f.starts_with("jit-"))
        .expect("jit-PID.dump kept");
    let jitdump = std::fs::read(dir.path().join(&dump)).unwrap();
    let new = std::fs::read(&data).unwrap();
    let chunks = parse_chunks(&new).unwrap();
    assert!(chunks.stopped.is_none());

    let mut old = new[..16].to_vec();
    // The old form without the line tables the recorder cut to what the samples hit: the
    // report reads V8's whole ones from the jitdump.
    let mut whole_lines = new[..16].to_vec();
    let (mut packed_bytes, mut covered) = (0, 0);
    for c in &chunks.chunks {
        if c.kind != ChunkKind::JIT_DEBUG && c.kind != ChunkKind::SIDE_FILE_ZSTD {
            whole_lines.extend(encode_chunk(c.kind, c.payload));
        }
        assert_ne!(
            c.kind,
            ChunkKind::SIDE_FILE,
            "a side piece stored uncompressed"
        );
        if c.kind != ChunkKind::SIDE_FILE_ZSTD {
            old.extend(encode_chunk(c.kind, c.payload));
            continue;
        }
        let (piece, packed) = parse_packed_side_piece(c.payload, c.offset).unwrap();
        assert_eq!(piece.kind, SideKind::JITDUMP);
        assert!(packed.code_left_out);
        assert_eq!(piece.offset, covered, "pieces in file order, none missing");
        let file_bytes = &jitdump[piece.offset as usize..(piece.offset + packed.file_len) as usize];
        assert_eq!(crc32fast::hash(file_bytes), packed.file_crc);
        packed_bytes += c.payload.len();
        covered += packed.file_len;
        let raw = SidePiece {
            data: file_bytes,
            ..piece
        };
        old.extend(encode_chunk(ChunkKind::SIDE_FILE, &encode_side_piece(&raw)));
        whole_lines.extend(encode_chunk(ChunkKind::SIDE_FILE, &encode_side_piece(&raw)));
    }
    assert!(covered > 0, "no jitdump stored");
    // V8's jitdump is mostly machine code, which compresses poorly; what is kept is names,
    // addresses and unwind tables.
    assert!(
        packed_bytes * 8 < covered as usize,
        "{packed_bytes} bytes stored for {covered} bytes of jitdump"
    );
    let old_path = dir.path().join("old.data");
    std::fs::write(&old_path, &old).unwrap();

    let whole_path = dir.path().join("whole-lines.data");
    std::fs::write(&whole_path, &whole_lines).unwrap();

    let folded = |path: &Path, lines: bool| {
        let out = jprof()
            .args(["report", "-i"])
            .arg(path)
            .args(["--format", "collapsed", "-o", "-"])
            .args(lines.then_some("--lines"))
            .output()
            .expect("run jprof report");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let (new_folded, old_folded) = (folded(&data, false), folded(&old_path, false));
    assert!(new_folded.contains("fib script.js"), "{new_folded}");
    assert_eq!(new_folded, old_folded);
    // The line tables kept for what the samples hit place every frame as V8's whole ones.
    let (cut, whole) = (folded(&data, true), folded(&whole_path, true));
    assert!(cut.contains("script.js:"), "{cut}");
    assert_eq!(cut, whole);
}

/// The record end reads back and packs the set-aside JIT tables on another core while the
/// binaries' DWARF is read: the chunks it stores are the same, in the same order, as when it
/// packs them after (as a whole-host recording's end does).
#[test]
fn the_end_packs_jit_tables_beside_the_dwarf_into_the_same_chunks() {
    use jprof::format::recording::{encode_chunk, parse_chunks, ChunkKind};
    use jprof::recording::Recording;
    let (_dir, data) = record_node(false);
    let bytes = std::fs::read(&data).unwrap();
    // The recording as it was before its end embedded anything; the JIT tables it kept stand
    // for the records set aside while recording.
    let embedded = [
        ChunkKind::UNWOUND_STACKS,
        ChunkKind::INTERPRETED_FRAMES,
        ChunkKind::JIT_DEBUG,
        ChunkKind::SYMBOLS,
        ChunkKind::SYMBOLS_ZSTD,
        ChunkKind::END,
    ];
    let mut before = bytes[..16].to_vec();
    for c in &parse_chunks(&bytes).unwrap().chunks {
        if !embedded.contains(&c.kind) {
            before.extend(encode_chunk(c.kind, c.payload));
        }
    }
    let set_aside = Recording::from_bytes(data.clone(), bytes)
        .unwrap()
        .jit_debug(&mut Vec::new());
    assert!(
        !set_aside.is_empty(),
        "node's recording keeps no JIT tables"
    );
    let recording = Recording::from_bytes(data, before).unwrap();
    let end = |beside_dwarf: bool| {
        let mut chunks = Vec::new();
        let mut all = || set_aside.clone();
        let facts = jprof::symbolize::embedded_symbols_and_coverage(
            &recording,
            &mut |kind, payload| {
                chunks.push((kind, payload.to_vec()));
                Ok(())
            },
            jprof::symbolize::SetAside {
                method_names: Default::default(),
                any: true,
                all: &mut all,
                beside_dwarf,
                rewritten: false,
            },
        )
        .unwrap();
        (chunks, facts.depth_lines)
    };
    let (beside, after) = (end(true), end(false));
    assert!(
        beside
            .0
            .iter()
            .any(|(kind, _)| *kind == ChunkKind::JIT_DEBUG),
        "no JIT_DEBUG chunk stored"
    );
    assert!(
        beside == after,
        "the chunks differ with the packing beside the DWARF"
    );
}
