//! XRay during `jprof record -- ./instrumented-binary`: notices the launched binary's
//! `xray_instr_map` section, makes the XRay runtime log every call into a directory jprof owns
//! (`XRAY_OPTIONS`: patch_premain, basic mode or FDR, `func_duration_threshold_us=0`), and after
//! the run stores the logs and the binary's path in the recording as SIDE_FILE pieces. The
//! directory is removed when the set-up is dropped, however the recording ended (unless the user
//! asked to keep side files). The report correlates the logs with the samples (`xray/live.rs`).

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

use crate::error::Result;
use crate::foreign_file::{self, Owner};
use crate::format::recording::{encode_side_piece, ChunkKind, SideKind, SidePiece};
use crate::format::xray::instr_map;
use crate::record::writer::ChunkWriter;
use crate::sys::clock;

/// Pieces of a log are stored at most this large, so no chunk gets huge.
const PIECE_BYTES: usize = 8 << 20;

/// The largest XRay log stored (basic mode logs every call: a long run can write gigabytes).
const MAX_LOG_BYTES: u64 = 4 << 30;

/// XRay logging set up for one launch. Dropping it removes the log directory unless `keep`.
#[derive(Debug)]
pub struct XraySetup {
    /// The instrumented binary (absolute).
    pub binary: PathBuf,
    /// The private directory the runtime writes its logs into.
    pub dir: PathBuf,
    pub fdr: bool,
    pub env: Vec<(String, String)>,
    /// `--keep-side-files`: the directory outlives the recording.
    keep: bool,
}

impl Drop for XraySetup {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The executable `argv[0]` names: a path, or the first match on `$PATH`.
fn resolve_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return std::fs::canonicalize(program).ok();
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
}

/// Appends `extra` to the variable's current value (later options win in XRay's flag parser,
/// so jprof's mode and log directory take effect).
fn extend_var(name: &str, extra: &str) -> (String, String) {
    let value = match std::env::var(name) {
        Ok(old) if !old.trim().is_empty() => format!("{old} {extra}"),
        _ => extra.to_string(),
    };
    (name.to_string(), value)
}

/// The set-up when `argv[0]` is an XRay-instrumented ELF file; None otherwise. `keep`: the log
/// directory stays after the recording.
pub fn prepare(argv: &[String], fdr: bool, keep: bool) -> Option<XraySetup> {
    let binary = resolve_program(argv.first()?)?;
    let image = crate::foreign_file::named_file_bytes(&binary).ok()?;
    if !instr_map::has_instr_map(&image) {
        return None;
    }
    let stamp = clock::clock_ns(clock::CLOCK_MONOTONIC).unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("jprof-xray-{}-{stamp}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&dir).ok()?;
    let base = format!("{}/xray-log.", dir.display());
    let mode = if fdr { "xray-fdr" } else { "xray-basic" };
    let mut env = vec![extend_var(
        "XRAY_OPTIONS",
        &format!("patch_premain=true xray_mode={mode} xray_logfile_base={base} verbosity=0"),
    )];
    let mode_options = if fdr {
        "XRAY_FDR_OPTIONS"
    } else {
        "XRAY_BASIC_OPTIONS"
    };
    env.push(extend_var(mode_options, "func_duration_threshold_us=0"));
    Some(XraySetup {
        binary,
        dir,
        fdr,
        env,
        keep,
    })
}

/// Stores every log in the directory (and the binary's path) into the recording. Returns notes
/// for the summary.
pub fn store(setup: &XraySetup, pid: u32, out: &mut ChunkWriter) -> Result<Vec<String>> {
    let now = clock::clock_ns(clock::CLOCK_MONOTONIC).unwrap_or(0);
    let binary = setup.binary.to_string_lossy().into_owned();
    let piece = |kind, path: &str, offset: usize, data: &[u8]| {
        encode_side_piece(&SidePiece {
            kind,
            pid,
            read_at: now,
            offset: offset as u64,
            path,
            data,
        })
    };
    out.write_chunk(
        ChunkKind::SIDE_FILE,
        &piece(SideKind::XRAY_BINARY, &binary, 0, &[]),
    )?;
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&setup.dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    logs.sort();
    let mut notes = Vec::new();
    let mut bytes_total = 0;
    for log in &logs {
        // Written by the target: a regular file read in bounded steps, never a FIFO or a link.
        let bytes = match foreign_file::read(log, Owner::Anyone, MAX_LOG_BYTES) {
            Ok(bytes) => bytes,
            Err(e) => {
                notes.push(format!("XRay log {} could not be read: {e}", log.display()));
                continue;
            }
        };
        let path = log.to_string_lossy();
        for (i, chunk) in bytes.chunks(PIECE_BYTES).enumerate() {
            out.write_chunk(
                ChunkKind::SIDE_FILE,
                &piece(SideKind::XRAY_LOG, &path, i * PIECE_BYTES, chunk),
            )?;
        }
        bytes_total += bytes.len();
    }
    let mode = if setup.fdr { "FDR" } else { "basic" };
    notes.push(match logs.len() {
        0 if setup.fdr => format!(
            "XRay ({mode} mode) wrote no log: in FDR mode the program must call \
             __xray_log_init_mode, __xray_log_finalize and __xray_log_flushLog itself"
        ),
        0 => format!("XRay ({mode} mode) wrote no log"),
        n => format!("XRay ({mode} mode): {n} log(s), {bytes_total} bytes stored"),
    });
    if setup.keep {
        notes.push(format!("XRay logs kept in {}", setup.dir.display()));
    }
    Ok(notes)
}
