//! Live recordings with the real kernel (perf_event_open works as root in CI): the recording is
//! complete and parseable, the target's exit code is passed through, exec failures are clear
//! errors, and a SIGKILLed recorder leaves a readable file.

use crate::cli_support;
use cli_support::jprof;

use crate::live_support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use jprof::format::perf::{Record, RecordKind};
use jprof::recording::Recording;

const BUSY: &str = "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done";

fn temp_data(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    (dir, path)
}

/// `jprof record -o DATA ARGS...`, its output collected.
fn record_to(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    jprof()
        .args(["record", "-o"])
        .arg(data)
        .args(args)
        .output()
        .expect("run jprof")
}

#[test]
fn records_a_shell_loop_completely() {
    let (_dir, data) = temp_data("run.data");
    let out = record_to(&data, &["--", "sh", "-c", BUSY]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "jprof failed: {stderr}");
    assert!(stderr.contains("recorded"), "no summary: {stderr}");

    let rec = Recording::open(&data).expect("open recording");
    assert!(rec.finished, "{}", rec.completeness());
    assert!(rec.stopped.is_none());
    let summary = rec.summary.clone().expect("summary chunk");
    let layout = rec.layout();
    let mut samples = 0u64;
    let mut comms = Vec::new();
    let mut first = u64::MAX;
    let mut last = 0;
    for raw in rec.perf_records() {
        let raw = raw.expect("every record splits");
        let record = layout.parse(&raw).expect("every record parses");
        match record {
            Record::Sample(s) => {
                samples += 1;
                assert!(s.period > 0);
                assert!(!s.callchain.is_empty(), "fp mode always has a callchain");
                first = first.min(s.time);
                last = last.max(s.time);
            }
            Record::Comm { comm, .. } => comms.push(comm),
            _ => {}
        }
    }
    assert!(samples > 100, "only {samples} samples of a ~1 s busy loop");
    assert_eq!(samples, summary.samples);
    assert!(comms.iter().any(|c| c == "sh"), "comm records: {comms:?}");
    // Sample times are CLOCK_MONOTONIC ns: the span matches the wall time of the run.
    let span = Duration::from_nanos(last - first);
    let wall = Duration::from_nanos(summary.wall_duration_ns);
    assert!(
        span <= wall && span * 2 > wall,
        "span {span:?} vs wall {wall:?}"
    );
    // Periodic checkpoints plus the final one; the last wins.
    assert!(
        rec.payloads(jprof::format::recording::ChunkKind::CLOCK)
            .count()
            >= 1
    );
    assert!(rec.clock.as_ref().is_some_and(|c| c.has_tsc_conversion()));
}

#[test]
fn passes_the_exit_code_through() {
    let (_dir, data) = temp_data("exit.data");
    let status = jprof()
        .args(["record", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c", "exit 7"])
        .status()
        .expect("run jprof");
    assert_eq!(status.code(), Some(7));
}

/// The target starts with default signal dispositions: jprof's own ignored SIGPIPE (Rust's
/// runtime sets it) must not leak through exec, or `yes | head -1` prints "Broken pipe".
#[test]
fn the_target_does_not_inherit_an_ignored_sigpipe() {
    let (_dir, data) = temp_data("sigpipe.data");
    let out = record_to(&data, &["--", "grep", "^SigIgn", "/proc/self/status"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mask = u64::from_str_radix(line.trim_start_matches("SigIgn:").trim(), 16).unwrap();
    assert_eq!(mask & (1 << (libc::SIGPIPE - 1)), 0, "{line}");
}

/// A target that leaves nothing behind gets no "followed the rest of its tree" note (the
/// tree test in robustness.rs checks the note is there when children outlive the target).
#[test]
fn a_lone_target_is_not_said_to_leave_a_tree() {
    let (_dir, data) = temp_data("lone.data");
    let out = record_to(&data, &["--", "sleep", "0.2"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stopped by: target exited"), "{stderr}");
    assert!(!stderr.contains("rest of its process tree"), "{stderr}");
}

#[test]
fn exec_failure_is_a_clear_error() {
    let (_dir, data) = temp_data("missing.data");
    let out = record_to(&data, &["--", "/definitely/not/a/program"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("cannot run") && stderr.contains("No such file"),
        "unclear error: {stderr}"
    );
}

/// `jprof record` of a shell loop of `rounds` iterations, running in the background (stderr
/// captured, so it can be read when the recorder is reaped).
fn spawn_busy_recording(data: &std::path::Path, rounds: u64) -> std::process::Child {
    jprof()
        .args(["record", "-o"])
        .arg(data)
        // SIGINT at its default whatever the tests were started under: a shell script's `cmd &`
        // (or nohup) hands its children an ignored SIGINT, and the shell would outlive it.
        .args(["--", "env", "--default-signal=INT", "sh", "-c"])
        .arg(format!(
            "i=0; while [ $i -lt {rounds} ]; do i=$((i+1)); done"
        ))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run jprof")
}

#[test]
fn sigkilled_recorder_leaves_a_readable_recording() {
    let (_dir, data) = temp_data("killed.data");
    let mut child = spawn_busy_recording(&data, 30_000_000);
    // Killed once the file holds 200 samples: they must all survive.
    live_support::wait_for("200 samples written", Duration::from_secs(60), || {
        (live_support::records_in_partial(&data, RecordKind::SAMPLE) >= 200).then_some(())
    });
    child.kill().expect("SIGKILL jprof");
    child.wait().expect("reap jprof");

    // The recording is renamed into place only when complete: a killed recorder leaves it
    // under its partial name, and opening the destination says where it is.
    let Err(missing) = Recording::open(&data) else {
        panic!("no complete recording should have been written");
    };
    assert!(missing.to_string().contains(".partial-"), "{missing}");
    let partials = jprof::foreign_file::leftover_partials(&data);
    assert_eq!(partials.len(), 1, "{partials:?}");
    let rec = Recording::open(&partials[0]).expect("a killed recording still opens");
    assert!(!rec.finished);
    assert!(rec.completeness().contains("killed") || rec.completeness().contains("truncated"));
    let samples = rec
        .perf_records()
        .filter_map(Result::ok)
        .filter(|r| r.kind == RecordKind::SAMPLE)
        .count();
    assert!(samples >= 200, "only {samples} samples survived");
    if let Some(pid) = rec.meta.target_pid {
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    }
}

#[test]
fn sigint_is_forwarded_and_the_recording_finalized() {
    let (_dir, data) = temp_data("int.data");
    let child = spawn_busy_recording(&data, 30_000_000);
    live_support::wait_until_target_runs(child.id(), "sh");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("signal jprof");
    let out = child.wait_with_output().expect("reap jprof");
    // sh dies of the forwarded SIGINT: 128 + 2.
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec = Recording::open(&data).expect("open");
    assert!(rec.finished, "{}", rec.completeness());
    assert!(rec.summary.expect("summary").stopped_by.contains("SIGINT"));
}

#[test]
fn duration_stops_the_recording() {
    let (_dir, data) = temp_data("duration.data");
    let out = jprof()
        .args(["record", "--duration", "0.5", "-o"])
        .arg(&data)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 30000000 ]; do i=$((i+1)); done",
        ])
        .output()
        .expect("run jprof");
    // The loop alone runs for minutes: ended by jprof's SIGTERM, not by finishing (a wall-clock
    // bound would depend on the machine's load).
    assert_eq!(out.status.code(), Some(128 + 15), "target ends by SIGTERM");
    let rec = Recording::open(&data).expect("open");
    assert!(rec.finished);
    let summary = rec.summary.expect("summary");
    assert!(
        summary.stopped_by.contains("--duration"),
        "{}",
        summary.stopped_by
    );
    // How many depends on the CPU the loop got in those 0.5 s (little on a loaded machine).
    assert!(summary.samples > 0, "no samples");
    assert!(
        summary.wall_duration_ns >= 500_000_000,
        "stopped before the duration: {} ns",
        summary.wall_duration_ns
    );
}

/// Every record's (time, offset) as the time-ordered reader hands them over.
fn time_order(rec: &Recording) -> Vec<(u64, usize)> {
    let mut seen = Vec::new();
    let errors = jprof::symbolize::records::in_time_order(rec, |t| seen.push((t.time, t.offset)));
    assert!(errors.is_empty(), "{errors:?}");
    seen
}

/// The recorder's RECORDS_ORDER marks let readers sort a window at a time (bounded memory);
/// the order must be exactly the one sorting the whole recording gives.
#[test]
fn reading_a_window_at_a_time_gives_the_order_of_sorting_everything() {
    use jprof::format::recording::{encode_chunk, file_header, parse_chunks, ChunkKind};
    let (dir, data) = temp_data("window.data");
    // Three loops on two CPUs: rings interleave and threads migrate.
    let loops = format!("({BUSY}) & ({BUSY}) & ({BUSY}); wait");
    let out = jprof()
        .args(["record", "-F", "4999", "--no-embed-symbols", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c", &loops])
        .output()
        .expect("run jprof");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let bytes = std::fs::read(&data).unwrap();
    let parsed = parse_chunks(&bytes).unwrap();
    let marks = parsed
        .chunks
        .iter()
        .filter(|c| c.kind == ChunkKind::RECORDS_ORDER)
        .count();
    assert!(marks >= 2, "only {marks} RECORDS_ORDER marks");
    let mut unmarked = file_header().to_vec();
    for c in parsed
        .chunks
        .iter()
        .filter(|c| c.kind != ChunkKind::RECORDS_ORDER)
    {
        unmarked.extend(encode_chunk(c.kind, c.payload));
    }
    let whole = Recording::from_bytes(dir.path().join("unmarked.data"), unmarked).unwrap();
    let windowed = Recording::open(&data).unwrap();

    let sorted = time_order(&whole);
    assert!(sorted.len() > 1000, "{} records", sorted.len());
    assert!(sorted.windows(2).all(|w| w[0].0 <= w[1].0));
    assert_eq!(time_order(&windowed), sorted);
}

/// Options that would be silently ignored are refused before anything starts.
#[test]
fn options_that_would_do_nothing_are_refused() {
    let (_dir, data) = temp_data("refused.data");
    for (args, says) in [
        (&["--off-cpu-min", "5ms", "--", "true"][..], "--off-cpu"),
        (&["-p", "1", "--xray", "fdr"][..], "cannot be used with"),
        // A running process's JVM is found from its mappings; --jvm is for launches.
        (&["-p", "1", "--jvm"][..], "cannot be used with"),
        (&["-a", "--jvm"][..], "cannot be used with"),
        (
            &["--jvm", "--call-graph", "fp", "--", "true"][..],
            "cannot be used with",
        ),
    ] {
        let out = record_to(&data, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!data.exists(), "{args:?}: nothing recorded");
    }
}

/// The kernel frames (`NAME_[k]`) of a recording's collapsed report.
fn kernel_frames(data: &std::path::Path) -> Vec<String> {
    let report =
        cli_support::stdout_ok(&["report", "-i", data.to_str().unwrap(), "-f", "collapsed"]);
    report
        .lines()
        .flat_map(|l| l.rsplit_once(' ').map_or(l, |(s, _)| s).split(';'))
        .filter_map(|f| f.strip_suffix("_[k]").map(str::to_string))
        .collect()
}

/// A recording of `dd` (most of its time in read and write system calls) with the kernel
/// text cache in `cache`.
fn record_dd(cache: &std::path::Path, data: &std::path::Path) -> Vec<String> {
    let out = jprof()
        .env("JPROF_CACHE_DIR", cache)
        .args(["record", "-o"])
        .arg(data)
        .args([
            "--",
            "dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=64k",
            "count=150000",
        ])
        .output()
        .expect("run jprof");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frames = kernel_frames(data);
    assert!(frames.len() >= 3, "kernel frames: {frames:?}");
    frames
}

#[test]
fn kernel_frames_are_named_from_the_kernel_text_cache_and_a_damaged_one_is_replaced() {
    if std::fs::read("/sys/kernel/notes").is_err() {
        eprintln!("skipped: this kernel has no /sys/kernel/notes (no build-id to key a cache)");
        return;
    }
    let (dir, data) = temp_data("dd.jprof");
    let cache = dir.path().join("cache");
    // The first recording reads /proc/kallsyms and writes the cache.
    let real = record_dd(&cache, &data);
    let files: Vec<_> = std::fs::read_dir(&cache).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let file = files[0].path();
    assert!(file
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("kernel-text-"));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(file.metadata().unwrap().permissions().mode() & 0o777, 0o600);
    // The same file with every name marked: the next recording's kernel names come from it.
    let text = zstd::decode_all(&std::fs::read(&file).unwrap()[..]).unwrap();
    let text = String::from_utf8(text).unwrap();
    let marked: String = text
        .lines()
        .map(|l| match l.split_once(" t ") {
            Some((offset, name)) if !l.starts_with("jprof ") => {
                format!("{offset} t cached_{name}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    let mut encoder = zstd::Encoder::new(Vec::new(), 3).unwrap();
    encoder.include_checksum(true).unwrap();
    std::io::Write::write_all(&mut encoder, marked.as_bytes()).unwrap();
    let marked_file = encoder.finish().unwrap();
    std::fs::write(&file, &marked_file).unwrap();
    let from_cache = record_dd(&cache, &data);
    assert!(
        from_cache.iter().all(|f| f.starts_with("cached_")),
        "{from_cache:?}"
    );
    // Rebased right: the names are those of the kernel, where the first recording saw them.
    let unmarked: Vec<&str> = from_cache.iter().map(|f| &f["cached_".len()..]).collect();
    assert!(
        unmarked.iter().any(|f| real.iter().any(|r| r == f)),
        "{unmarked:?} vs {real:?}"
    );
    // One byte changed: not used, the names come from /proc/kallsyms, and the file is replaced.
    let mut damaged = marked_file.clone();
    let at = damaged.len() / 2;
    damaged[at] ^= 1;
    std::fs::write(&file, &damaged).unwrap();
    let after = record_dd(&cache, &data);
    assert!(after.iter().all(|f| !f.starts_with("cached_")), "{after:?}");
    let rewritten = zstd::decode_all(&std::fs::read(&file).unwrap()[..]).unwrap();
    assert_eq!(
        rewritten,
        text.as_bytes(),
        "the cache written again from kallsyms"
    );
}
