//! Mono out of the box: `jprof record -- mono Hot.exe` with no flags on a CPU-bound C# program
//! (examples/mono/Hot.cs, compiled here with mcs). jprof sets MONO_ENV_OPTIONS (log profiler
//! JIT events into a .mlpd it tails, `--jitmap`) and MONO_DEBUG=disable_omit_fp itself; the
//! report must name the managed frames, with whole managed call chains, and the names must come
//! from the .mlpd kept in the recording. Needs mono, mcs, libmono-profiler and perf_event_open
//! (root in CI).

use crate::cli_support;
use cli_support::jprof;

use std::path::{Path, PathBuf};
use std::process::Command;

use jprof::format::mlpd;
use jprof::format::recording::SideKind;
use jprof::recording::Recording;
use jprof::symbolize::jit_index::JitIndex;

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/mono/Hot.cs");

fn compile(dir: &Path) -> PathBuf {
    let exe = dir.join("Hot.exe");
    let status = Command::new("mcs")
        .arg("-optimize+")
        .arg(format!("-out:{}", exe.display()))
        .arg(SOURCE)
        .status()
        .expect("mcs (apt-get install mono-mcs)");
    assert!(status.success(), "mcs failed");
    exe
}

fn record(dir: &Path, exe: &Path) -> PathBuf {
    let data = dir.join("mono.data");
    let out = jprof()
        .current_dir(dir)
        .args(["record", "-o"])
        .arg(&data)
        .args(["--", "mono"])
        .arg(exe)
        .arg("3000000")
        .env_remove("MONO_ENV_OPTIONS")
        .env_remove("MONO_DEBUG")
        .output()
        .expect("run jprof record");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "jprof record failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("hot done"),
        "Hot.exe did not finish:\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("Mono log") && stderr.contains("buffers stored"),
        "the .mlpd was not taken in (libmono-profiler installed?):\n{stderr}"
    );
    data
}

/// The .mlpd stored in the recording, reassembled, with its pid.
fn stored_mlpd(recording: &Recording) -> (u32, Vec<u8>) {
    let mut pid = 0;
    let mut bytes = Vec::new();
    for stored in recording.side_pieces() {
        let stored = stored.expect("side piece");
        let piece = &stored.piece;
        if piece.kind == SideKind::MLPD {
            assert_eq!(piece.offset, bytes.len() as u64, "pieces in file order");
            pid = piece.pid;
            bytes.extend_from_slice(&stored.data);
        }
    }
    (pid, bytes)
}

#[test]
fn managed_frames_are_named_from_the_mono_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = compile(dir.path());
    let data = record(dir.path(), &exe);

    let folded = jprof()
        .args(["report", "--format", "collapsed", "-o", "-", "-i"])
        .arg(&data)
        .output()
        .expect("jprof report");
    assert!(folded.status.success());
    let folded = String::from_utf8_lossy(&folded.stdout);
    let weight = |needle: &str| -> u64 {
        folded
            .lines()
            .filter(|l| l.contains(needle))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum()
    };
    let total = weight("");
    // Reports show Mono names without their parameter list unless overloads need it.
    let leaf = weight("JprofFixture.HotMath:LeafMix_[j]");
    assert!(leaf * 2 > total, "LeafMix {leaf} of {total}:\n{folded}");
    // Frame pointers carry the walk through the managed callers.
    let chain = weight(
        "JprofFixture.HotMath:Run_[j];JprofFixture.Mixer:Round_[j];JprofFixture.HotMath:LeafMix_[j]",
    );
    assert!(
        chain * 2 > leaf,
        "whole managed chains {chain} of {leaf}:\n{folded}"
    );
    assert!(
        folded.lines().any(|l| l.starts_with("hot-worker;")),
        "{folded}"
    );

    // The recording keeps the .mlpd, and it is what names the code.
    let recording = Recording::open(&data).expect("open recording");
    let (pid, bytes) = stored_mlpd(&recording);
    let mut leaf_code = None;
    let decoder = mlpd::decode_all(
        &bytes,
        &mut |_: &mlpd::BufferHeader, e: &mlpd::Event<'_>| {
            if let mlpd::EventKind::Jit { name, code, .. } = &e.kind {
                if name == "JprofFixture.HotMath:LeafMix (ulong)" && *code != 0 {
                    leaf_code = Some(*code);
                }
            }
        },
    )
    .expect("stored .mlpd decodes");
    assert_eq!(decoder.problem_count(), 0);
    let code = leaf_code.expect("a TYPE_JIT event for LeafMix with its code address");
    let index = JitIndex::from_recording(&recording);
    let frames = index
        .frames(pid, code + 1, u64::MAX / 2)
        .expect("LeafMix indexed");
    assert_eq!(frames[0].name, "JprofFixture.HotMath:LeafMix (ulong)");
    assert!(
        frames[0]
            .module
            .as_deref()
            .is_some_and(|m| m.ends_with(".mlpd")),
        "{frames:?}"
    );
    // The temporary .mlpd and perf map were removed (their bytes are in the recording).
    assert!(!mlpd_file_exists(pid));
}

fn mlpd_file_exists(pid: u32) -> bool {
    std::env::temp_dir()
        .join(format!("jprof-mono-{pid}.mlpd"))
        .exists()
        || Path::new(&format!("/tmp/perf-{pid}.map")).exists()
}

/// A user's own log profiler in MONO_ENV_OPTIONS stays theirs: jprof adds only `--jitmap`,
/// names managed code from the perf map, says so once without contradicting itself, and
/// removes the perf map it asked for (its lines are in the recording), leaving the user's .mlpd.
/// Run in a private /tmp: Mono opens its perf map through links, so in a shared /tmp without
/// `fs.protected_symlinks` jprof does not ask for it (tests/suite/security_runtimes.rs).
#[test]
fn a_users_own_log_profiler_is_left_alone_and_the_perf_map_removed() {
    let dir = cli_support::dir_outside_tmp();
    let exe = compile(dir.path());
    let data = dir.path().join("own.data");
    let out = cli_support::in_private_tmp(
        jprof()
            .current_dir(dir.path())
            .args(["record", "-o"])
            .arg(&data)
            .args(["--", "mono"])
            .arg(&exe)
            .arg("3000000")
            .env("MONO_ENV_OPTIONS", "--profile=log:sample,output=own.mlpd")
            .env_remove("MONO_DEBUG"),
    )
    .output()
    .expect("run jprof record");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("jprof added only --jitmap"), "{stderr}");
    assert!(!stderr.contains("overridden or cleared"), "{stderr}");
    assert!(dir.path().join("own.mlpd").exists(), "the user's log stays");
    let recording = Recording::open(&data).unwrap();
    let pid = recording.meta.target_pid.expect("a launched target");
    assert!(
        stderr.contains(&format!("/tmp/perf-{pid}.map")),
        "jprof read the perf map it asked for:\n{stderr}"
    );
    assert!(
        !stderr.contains(cli_support::LEFT_IN_PRIVATE_TMP),
        "the perf map jprof asked for is removed:\n{stderr}"
    );
}
