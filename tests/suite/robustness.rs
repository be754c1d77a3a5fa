//! Faults, signals and bad input (issue 15): one regression test per way jprof used to hang,
//! crash or lose data silently. Real recordings throughout.

use crate::cli_support;
use cli_support::{jprof, text, JPROF};

use crate::live_support;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use jprof::format::jitdump_write;
use jprof::format::perf::RecordKind;
use jprof::recording::Recording;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shared");

/// Waits for `child` up to `limit`; kills it and fails when it is still running.
fn wait_within(mut child: std::process::Child, limit: Duration, what: &str) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn damaged_perf_data_headers_are_errors_that_name_the_file() {
    let original = std::fs::read(format!("{FIXTURES}/java/perf-map.data")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.data");
    for at in (8..104).step_by(4) {
        let mut file = original.clone();
        file[at..at + 4].fill(0xff);
        std::fs::write(&bad, &file).unwrap();
        let out = jprof()
            .args(["report", "-f", "collapsed", "-o", "/dev/null", "-i"])
            .arg(&bad)
            .output()
            .unwrap();
        let code = out.status.code();
        assert!(
            code == Some(0) || code == Some(2),
            "offset {at}: exit {code:?} (a crash): {}",
            text(&out)
        );
        if code == Some(2) {
            assert!(
                text(&out).contains("bad.data"),
                "offset {at}: {}",
                text(&out)
            );
        }
    }
}

/// The fuzz corpus's perf.data crashes (`fuzz/seeds/perf_data/crash-*.data`): counts of
/// `u32::MAX` in a feature section made linux-perf-data ask for 64 GB and abort (rc 134); a
/// data size near 2^64 overflowed jprof's own feature-table arithmetic.
#[test]
fn hostile_feature_section_counts_do_not_abort() {
    let seeds = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/perf_data");
    for entry in std::fs::read_dir(seeds).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let out = jprof()
            .args(["report", "-f", "text", "-o", "-", "-i"])
            .arg(&path)
            .output()
            .unwrap();
        let report = text(&out);
        match out.status.code() {
            Some(0) => {}
            Some(2) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(stderr.trim().lines().count(), 1, "{name}: {stderr}");
                assert!(stderr.contains(&name), "{name}: {stderr}");
            }
            code => panic!("{name}: exit {code:?} (a crash): {report}"),
        }
        if name.ends_with("-count.data") {
            assert!(report.contains("Samples:   3 recorded"), "{report}");
            assert!(
                report.contains("the feature sections are damaged (feature section 1"),
                "{report}"
            );
        }
    }
}

#[test]
fn a_cut_perf_data_is_not_called_complete() {
    let original = std::fs::read(format!("{FIXTURES}/java/perf-map.data")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.data");
    std::fs::write(&cut, &original[..200_000]).unwrap();
    let out = jprof()
        .args(["report", "-f", "text", "-o", "-", "-i"])
        .arg(&cut)
        .output()
        .unwrap();
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!first.contains("(complete)"), "{first}");
    assert!(first.contains("truncated"), "{first}");
}

#[test]
fn one_flipped_bit_costs_only_its_chunk() {
    let dir = tempfile::tempdir().unwrap();
    // Long enough for several record chunks (the recorder writes one every 250 ms).
    let data = dir.path().join("flip.data");
    let out = jprof()
        .args(["record", "-o"])
        .arg(&data)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let intact = Recording::open(&data).unwrap();
    let samples = |r: &Recording| r.perf_records().filter_map(Result::ok).count();
    let all = samples(&intact);
    drop(intact);
    // Damage the first PERF_RECORDS chunk's payload.
    let mut bytes = std::fs::read(&data).unwrap();
    let (offset, len) = {
        let chunks = jprof::format::recording::parse_chunks(&bytes).unwrap();
        let c = chunks
            .chunks
            .iter()
            .find(|c| c.kind == jprof::format::recording::ChunkKind::PERF_RECORDS_ZSTD)
            .expect("records");
        (c.offset, c.payload.len())
    };
    bytes[offset + len / 2] ^= 0x10;
    std::fs::write(&data, &bytes).unwrap();
    let damaged = Recording::open(&data).unwrap();
    assert!(damaged.finished, "the END chunk after the damage was read");
    assert!(
        damaged.summary.is_some(),
        "the SUMMARY after the damage was read"
    );
    assert!(
        damaged.completeness().contains("skipped"),
        "{}",
        damaged.completeness()
    );
    let kept = samples(&damaged);
    assert!(kept > 0 && kept < all, "kept {kept} of {all} records");
}

/// A short real recording (`-- sh -c LOOP`, with `extra` options) and its bytes.
fn short_recording(dir: &std::path::Path, name: &str, extra: &[&str]) -> Vec<u8> {
    let data = dir.join(name);
    let out = jprof()
        .args(["record", "-o"])
        .arg(&data)
        .args(extra)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    std::fs::read(&data).unwrap()
}

fn perf_record_count(r: &Recording) -> usize {
    r.perf_records().filter_map(Result::ok).count()
}

/// One flipped bit anywhere in the file header or the first chunk (META, ~600 bytes) used to
/// lose the whole recording; the recorder now writes META again after the first records and
/// at the end, chunk CRCs cover the chunk kind (a META whose kind bit flipped was read as
/// perf records), and the reader reads a damaged header around.
#[test]
fn one_flipped_bit_in_the_first_chunk_or_the_file_header_loses_nothing() {
    use jprof::format::recording::{parse_chunks, ChunkKind};
    let dir = tempfile::tempdir().unwrap();
    let bytes = short_recording(dir.path(), "first.data", &[]);
    let chunks = parse_chunks(&bytes).unwrap();
    let metas = chunks.chunks.iter().filter(|c| c.kind == ChunkKind::META);
    assert_eq!(
        metas.count(),
        3,
        "META first, after the first records, at the end"
    );
    let first = &chunks.chunks[0];
    assert_eq!(first.kind, ChunkKind::META);
    let first_end = first.offset + first.payload.len();
    let intact = Recording::from_bytes("first.data".into(), bytes.clone()).unwrap();
    let records = perf_record_count(&intact);
    assert!(records > 10, "{records} records");
    for at in 0..first_end {
        let mut damaged = bytes.clone();
        let bit = at % 8;
        damaged[at] ^= 1 << bit;
        match Recording::from_bytes("damaged.data".into(), damaged) {
            Err(e) => panic!("byte {at} bit {bit}: {e}"),
            Ok(r) => {
                assert_eq!(r.meta, intact.meta, "byte {at} bit {bit}");
                assert_eq!(perf_record_count(&r), records, "byte {at} bit {bit}");
                assert!(r.summary.is_some() && r.finished, "byte {at} bit {bit}");
                // Version 3 with bit 0 flipped reads 2, which is read the same way (either
                // CRC form is taken): nothing to tell. Any other damage is told.
                if at != 8 {
                    assert_ne!(r.completeness(), "complete", "byte {at} bit {bit}");
                }
            }
        }
    }
}

/// A recording whose every META copy is gone (an older jprof wrote only one) is decoded with
/// jprof's own sample layout, the call graph told by the samples, and says so.
#[test]
fn a_recording_without_any_meta_is_read_with_jprofs_own_layout() {
    use jprof::format::recording::{encode_chunk, file_header, parse_chunks, ChunkKind};
    use jprof::recording::CallGraph;
    let dir = tempfile::tempdir().unwrap();
    for (extra, call_graph) in [
        (&[][..], CallGraph::FramePointers),
        (&["--call-graph", "dwarf"][..], CallGraph::Dwarf),
    ] {
        let bytes = short_recording(dir.path(), "meta.data", extra);
        let intact = Recording::from_bytes("meta.data".into(), bytes.clone()).unwrap();
        let mut without = file_header().to_vec();
        for c in parse_chunks(&bytes).unwrap().chunks {
            if c.kind != ChunkKind::META {
                without.extend(encode_chunk(c.kind, c.payload));
            }
        }
        let r = Recording::from_bytes("nometa.data".into(), without).unwrap();
        assert_eq!(r.meta.event.call_graph, call_graph);
        assert_eq!(r.meta.event.sample_type, intact.meta.event.sample_type);
        assert_eq!(
            r.meta.event.regs_user_mask,
            intact.meta.event.regs_user_mask
        );
        assert_eq!(perf_record_count(&r), perf_record_count(&intact));
        assert!(
            r.completeness().contains("every copy of its META chunk"),
            "{}",
            r.completeness()
        );
    }
}

/// `truncate -s 1G` of a recording: the zeros used to be read as 67 M empty chunks (6.8 GB
/// resident for `report`); now they are padding, read from the end and let go. The address
/// space limit (which the 1 GiB mapping counts against) is far below what the old reader
/// needed.
#[test]
fn a_recording_padded_with_a_gigabyte_of_zeros_is_read_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = short_recording(dir.path(), "padded.data", &[]);
    let padded = dir.path().join("padded.data");
    std::fs::File::options()
        .write(true)
        .open(&padded)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let path = padded.to_str().unwrap();
    let jprof_bin = JPROF;
    for (args, says) in [
        (
            format!("report -f text -o - -i {path}"),
            "bytes of zeros after its last chunk",
        ),
        (format!("dump {path}"), "bytes of zeros end the file"),
        (format!("symbolize -i {path} 0x1000"), "0x1000"),
    ] {
        let start = Instant::now();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -v 2097152; exec {jprof_bin} {args}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{args}: {}", text(&out));
        assert!(text(&out).contains(says), "{args}: {}", text(&out));
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{args}: {:?}",
            start.elapsed()
        );
    }
    assert!(bytes.len() < 1 << 20);
}

/// A zstd frame that declares `len` bytes and decompresses to them: zeros in blocks of one
/// repeated byte (RLE), 4 bytes for every 128 KiB. What a hostile file holds to make a reader
/// allocate gigabytes.
fn zstd_bomb(len: u64) -> Vec<u8> {
    // Magic, a frame with an 8-byte content size and no checksum, and a 1 MiB window (a
    // streaming decoder refuses windows past 128 MiB).
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0xc0, 0x50];
    frame.extend(len.to_le_bytes());
    let mut left = len;
    while left > 0 {
        let block = left.min(128 << 10);
        left -= block;
        let header = u32::from(left == 0) | 1 << 1 | (block as u32) << 3;
        frame.extend(&header.to_le_bytes()[..3]);
        frame.push(0);
    }
    frame
}

/// Runs `jprof ARGS` with at most `mib` MiB of address space.
fn jprof_within(mib: u64, args: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {}; exec {JPROF} {args}", mib << 10))
        .output()
        .unwrap()
}

/// A recording whose last chunk is a 32 KiB zstd frame of 1 GiB: the reader allocated the
/// gigabyte it declares (and aborted under this limit); now a chunk may stand for at most 1024
/// times its size, so it is left out with the offset and why, and the rest is read.
#[test]
fn a_zstd_bomb_in_a_recording_is_left_out_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = short_recording(dir.path(), "intact.data", &[]);
    let bomb_at = bytes.len() + 16;
    bytes.extend(jprof::format::recording::encode_chunk(
        jprof::format::recording::ChunkKind::PERF_RECORDS_ZSTD,
        &zstd_bomb(1 << 30),
    ));
    assert!(bytes.len() < 1 << 20);
    let path = dir.path().join("bomb.data");
    std::fs::write(&path, &bytes).unwrap();
    let path = path.to_str().unwrap();
    let bomb_len = zstd_bomb(1 << 30).len();
    let why = format!(
        "a compressed chunk was left out (at byte offset {bomb_at}: expected a zstd frame that \
         decompresses to at most {} bytes (1024 for each of its {bomb_len} bytes, at most \
         1073741824); it declares 1073741824)",
        bomb_len * 1024
    );
    let out = jprof_within(512, &format!("report -f text -o - -i {path}"));
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains(&why), "{said}");
    assert!(said.contains(&format!("{path} is damaged")), "{said}");
    // The records before it are all there.
    let intact = Recording::open(&dir.path().join("intact.data")).unwrap();
    let samples = intact.summary.as_ref().unwrap().samples;
    assert!(samples > 0);
    assert!(
        said.contains(&format!("Samples:   {samples} recorded")),
        "{said}"
    );
    // Every reader of compressed chunks is bounded the same way.
    for args in [
        format!("report -f collapsed -o - -i {path}"),
        format!("dump {path}"),
        format!("symbolize -i {path} 0x1000"),
    ] {
        let out = jprof_within(512, &args);
        assert!(out.status.success(), "{args}: {}", text(&out));
    }
}

/// A perf.data whose last record is a PERF_RECORD_COMPRESSED holding a 32 KiB zstd frame of
/// 1 GiB: linux-perf-data decompresses a record whole into memory (the import aborted under
/// this limit); now jprof follows the compressed stream first and reads the records before
/// the one that decompresses past 1024 bytes for each compressed byte, naming its offset.
#[test]
fn a_zstd_bomb_in_a_perf_data_is_refused_in_bounded_memory() {
    let seed = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/seeds/perf_data/sleep.data"
    );
    let original = std::fs::read(seed).unwrap();
    let word = |at: usize| u64::from_le_bytes(original[at..at + 8].try_into().unwrap()) as usize;
    let (data_at, data_len) = (word(40), word(48));
    let bomb = zstd_bomb(1 << 30);
    let record_at = data_at + data_len;
    let mut file = original[..record_at].to_vec();
    file.extend(81u32.to_le_bytes()); // PERF_RECORD_COMPRESSED
    file.extend(0u16.to_le_bytes());
    file.extend(u16::try_from(8 + bomb.len()).unwrap().to_le_bytes());
    file.extend(&bomb);
    let data_len = (file.len() - data_at) as u64;
    file[48..56].copy_from_slice(&data_len.to_le_bytes());
    file[72..104].fill(0); // no feature sections
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.data");
    std::fs::write(&path, &file).unwrap();
    let out = jprof_within(512, &format!("report -f text -o - -i {}", path.display()));
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "{} is truncated or damaged (at byte offset {record_at}: expected compressed records \
             that decompress to at most 1024 bytes for each compressed byte",
            path.display()
        )),
        "{said}"
    );
    assert!(said.contains("Samples:   3 recorded"), "{said}");
}

#[test]
fn a_target_that_ignores_signals_is_killed_on_the_second_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("stubborn.data");
    let child = jprof()
        .args(["record", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c", "trap '' INT TERM; while :; do :; done"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let target = live_support::wait_until_target_runs(child.id(), "sh");
    live_support::wait_for("the target's trap", Duration::from_secs(20), || {
        (live_support::ignores(target, libc::SIGINT)
            && live_support::ignores(target, libc::SIGTERM))
        .then_some(())
    });
    // Two different signals, so they cannot merge into one pending signal.
    let jprof_pid = Pid::from_raw(child.id() as i32);
    kill(jprof_pid, Signal::SIGINT).unwrap();
    kill(jprof_pid, Signal::SIGTERM).unwrap();
    let out = wait_within(
        child,
        Duration::from_secs(10),
        "jprof after two stop signals",
    );
    assert_eq!(out.status.code(), Some(128 + 9), "{}", text(&out));
    let rec = Recording::open(&data).unwrap();
    assert!(rec.finished);
    assert!(text(&out).contains("second stop signal"), "{}", text(&out));
}

#[test]
fn sighup_stops_the_recording_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("hup.data");
    let child = jprof()
        .args(["record", "-o"])
        .arg(&data)
        // SIGHUP at its default whatever the tests were started under (nohup ignores it, and
        // an ignored signal stays ignored across exec): the shell must die of it.
        .args([
            "--",
            "env",
            "--default-signal=HUP",
            "sh",
            "-c",
            "while :; do :; done",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    live_support::wait_until_target_runs(child.id(), "sh");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGHUP).unwrap();
    let out = wait_within(child, Duration::from_secs(10), "jprof after SIGHUP");
    assert_eq!(out.status.code(), Some(128 + 1), "{}", text(&out));
    let rec = Recording::open(&data).expect("the recording was finished and renamed");
    assert!(rec.finished);
    assert!(rec.summary.unwrap().stopped_by.contains("SIGHUP"));
}

#[test]
fn duration_stops_the_whole_tree_not_just_the_shell() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("yes.data");
    let marker = format!("jprof-yes-{}", std::process::id());
    let out = jprof()
        .args(["record", "--duration", "1", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c"])
        .arg(format!("exec -a {marker} yes > /dev/null & wait"))
        .output()
        .unwrap();
    assert!(Recording::open(&data).unwrap().finished, "{}", text(&out));
    // jprof stops recording only once the whole tree has exited (it reaps it as subreaper).
    let left = Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "orphans still running after jprof exited: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

#[test]
fn children_that_outlive_their_parent_are_still_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("tree.data");
    let out = jprof()
        .args(["record", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c"])
        .arg("for i in 1 2 3 4; do (sleep 0.3; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done) & done; exit 0")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("recording followed the rest of its process tree"),
        "{}",
        text(&out)
    );
    let rec = Recording::open(&data).unwrap();
    let summary = rec.summary.unwrap();
    assert!(summary.processes >= 5, "{} processes", summary.processes);
    // The parent exits at once; the children's work after it is in the recording.
    assert!(summary.samples > 200, "{} samples", summary.samples);
}

#[test]
fn attaching_to_a_thread_records_its_process() {
    let script = "import threading, time\nt = threading.Thread(target=lambda: time.sleep(30))\nt.start()\nprint(t.native_id, flush=True)\nt.join()\n";
    let mut target = Command::new("python3")
        .args(["-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(target.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let tid: u32 = line.trim().parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("tid.data");
    let out = jprof()
        .args(["record", "--duration", "0.5", "-o"])
        .arg(&data)
        .args(["-p", &tid.to_string()])
        .output()
        .unwrap();
    let _ = target.kill();
    let _ = target.wait();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("{tid} is a thread of process {}", target.id())),
        "{}",
        text(&out)
    );
    let rec = Recording::open(&data).unwrap();
    assert_eq!(rec.meta.target_pid, Some(target.id()));
}

#[test]
fn bad_arguments_are_usage_errors_and_touch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().join("keep.data");
    std::fs::write(&keep, b"precious").unwrap();
    for bad in [
        vec!["--duration=-1"],
        vec!["--duration=nan"],
        vec!["--duration=inf"],
        vec!["--duration=1e30"],
        vec!["--duration=1e19"],
        vec!["-F", "0"],
    ] {
        let out = jprof()
            .arg("record")
            .args(&bad)
            .arg("-o")
            .arg(&keep)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out));
        assert!(
            text(&out).contains("invalid value"),
            "{bad:?}: {}",
            text(&out)
        );
    }
    assert_eq!(std::fs::read(&keep).unwrap(), b"precious");
    let out = jprof()
        .args(["record", "-o", "-", "--", "true"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("cannot go to stdout"), "{}", text(&out));
    assert!(!dir.path().join("-").exists());
}

#[test]
fn non_regular_inputs_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let fifo = fifo.to_str().unwrap();
    for args in [
        vec!["dump", "/dev/zero"],
        vec!["symbolize", "--jitdump", "/dev/zero", "0x1"],
        vec!["dump", fifo],
        vec!["report", "-i", fifo],
        vec!["symbolize", "-i", fifo, "0x1"],
        vec!["diff", fifo, fifo],
    ] {
        let child = jprof()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_within(child, Duration::from_secs(10), &format!("{args:?}"));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            text(&out).contains("regular files"),
            "{args:?}: {}",
            text(&out)
        );
    }
}

#[test]
fn a_cut_mlpd_says_it_was_cut() {
    let full = std::fs::read(format!("{FIXTURES}/mono/shapes-sample.mlpd")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.mlpd");
    std::fs::write(&cut, &full[..full.len() / 2]).unwrap();
    let out = jprof()
        .args(["report", "-f", "text", "-o", "-", "-i"])
        .arg(&cut)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("ends inside a buffer"),
        "{}",
        text(&out)
    );
}

/// An .mlpd cut inside its file header used to report as an empty profile with exit 0.
#[test]
fn an_mlpd_cut_inside_its_header_is_an_error() {
    let full = std::fs::read(format!("{FIXTURES}/mono/shapes-sample.mlpd")).unwrap();
    let header_len = jprof::format::mlpd::parse_header(&full)
        .unwrap()
        .unwrap()
        .len;
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.mlpd");
    for len in [4, 20, 33, header_len - 1] {
        std::fs::write(&cut, &full[..len]).unwrap();
        let out = jprof()
            .args(["report", "-f", "text", "-o", "-", "-i"])
            .arg(&cut)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "cut at {len}: {}", text(&out));
        assert!(
            text(&out).contains(&format!(
                "cut.mlpd: at byte offset {len}: expected a complete .mlpd file header"
            )),
            "cut at {len}: {}",
            text(&out)
        );
    }
}

#[test]
fn a_jitdump_header_size_that_is_no_size_is_noted() {
    let mut bytes = jitdump_write::header(4242, 1, false);
    bytes[8..12].copy_from_slice(&0xffff_ffffu32.to_le_bytes());
    bytes.extend(jitdump_write::code_load(
        2,
        &jitdump_write::CodeLoad {
            pid: 4242,
            tid: 4242,
            code_addr: 0x1000,
            code_index: 1,
            name: "still_found",
            code: &[0xc3; 16],
        },
    ));
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("jit-4242.dump");
    std::fs::write(&dump, &bytes).unwrap();
    let out = jprof().arg("dump").arg(&dump).output().unwrap();
    let listing = text(&out);
    assert!(listing.contains("no header size"), "{listing}");
    assert!(listing.contains("still_found"), "{listing}");
}

#[test]
fn diff_takes_folded_files_with_long_lines() {
    let dir = tempfile::tempdir().unwrap();
    let deep: Vec<String> = (0..600).map(|i| format!("frame_number_{i}")).collect();
    let line = format!("{} 10\n", deep.join(";"));
    assert!(line.len() > 6 * 1024);
    let a = dir.path().join("a.folded");
    let b = dir.path().join("b.folded");
    std::fs::write(&a, &line).unwrap();
    std::fs::write(&b, line.replace(" 10", " 20")).unwrap();
    let out = jprof()
        .arg("diff")
        .arg(&a)
        .arg(&b)
        .args(["-o", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("<svg"));
}

/// `diff` used to drop a line it could not read without a word (inferno skips it), and to
/// add counts without checking.
#[test]
fn diff_names_the_file_and_line_of_a_bad_folded_line() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.folded");
    let b = dir.path().join("b.folded");
    std::fs::write(&a, "main;f 10\nmain;g 5\n").unwrap();
    for (content, says) in [
        (
            "main;f 10\nmain;g five\n",
            "b.folded:2: expected a folded line",
        ),
        (
            "main;f 18446744073709551615\nmain;g 1\n",
            "b.folded:2: the counts up to this line add up to more than",
        ),
    ] {
        std::fs::write(&b, content).unwrap();
        let out = jprof()
            .arg("diff")
            .arg(&a)
            .arg(&b)
            .args(["-o", "-"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{content:?}");
        assert!(out.stdout.is_empty(), "{content:?}: no graph");
        assert!(text(&out).contains(says), "{content:?}: {}", text(&out));
    }
}

#[test]
fn losses_show_in_the_flame_graph_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("stopped.data");
    let child = jprof()
        .args(["record", "-F", "10000", "-o"])
        .arg(&data)
        .args([
            "--",
            "sh",
            "-c",
            "(while :; do :; done) & while :; do :; done",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(child.id() as i32);
    live_support::wait_until_target_runs(child.id(), "sh");
    // jprof stopped while its target runs: the rings fill and the kernel loses what follows.
    let target_cpu_ns = || {
        live_support::descendants(child.id())
            .into_iter()
            .map(live_support::cpu_ns)
            .sum::<u64>()
    };
    kill(pid, Signal::SIGSTOP).unwrap();
    let before = target_cpu_ns();
    // 2 CPU-seconds at 10 kHz: about 20,000 samples, several times what the rings hold.
    live_support::wait_for(
        "2 CPU-seconds of the target while jprof is stopped",
        Duration::from_secs(120),
        || (target_cpu_ns() >= before + 2_000_000_000).then_some(()),
    );
    kill(pid, Signal::SIGCONT).unwrap();
    // The kernel writes its LOST record once the reader has made room again.
    live_support::wait_for("a LOST record in the file", Duration::from_secs(60), || {
        (live_support::records_in_partial(&data, RecordKind::LOST) > 0).then_some(())
    });
    // SIGINT ends the shell; the background loop ignores it, so the second stop signal
    // (another signal, so the two cannot merge) kills it.
    kill(pid, Signal::SIGINT).unwrap();
    kill(pid, Signal::SIGTERM).unwrap();
    let out = wait_within(child, Duration::from_secs(20), "jprof");
    let rec = Recording::open(&data).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let s = rec.summary.clone().unwrap();
    assert!(
        s.lost_samples + s.lost_records + s.dropped_batches > 0,
        "a 4 s stop at 10 kHz lost nothing?"
    );
    let svg = jprof()
        .args(["report", "-o", "-", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&svg.stdout).contains("incomplete:"));
    let speedscope = jprof()
        .args(["report", "-f", "speedscope", "-o", "-", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&speedscope.stdout).contains("incomplete:"));
}

/// CPU-seconds each of the soak's two busy processes runs (CPU time, not wall time: a loaded
/// machine makes the soak longer, not smaller).
const SOAK_CPU_SECONDS: u64 = 20;

/// Soak: 4999 Hz on two busy processes and a loop that forks and execs all the time until they
/// are done. Every sample the kernel wrote is either in the file or counted as lost: the file's
/// SAMPLE records equal the summary's count, and nothing was dropped without being counted.
#[test]
#[ignore = "soak (about a minute): CI runs it, `cargo test --workspace -- --include-ignored`"]
fn soak_with_fork_and_exec_loses_nothing_unaccounted() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("soak.data");
    let spin = format!(
        "/usr/bin/python3 -c 'import time\nwhile time.process_time() < {SOAK_CPU_SECONDS}: pass'"
    );
    let out = jprof()
        .args(["record", "-F", "4999", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "{spin} & a=$!; {spin} & b=$!; \
             while kill -0 $a 2>/dev/null || kill -0 $b 2>/dev/null; do /bin/true; done; wait"
        ))
        .output()
        .unwrap();
    let rec = Recording::open(&data).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert!(rec.finished, "{}", text(&out));
    let s = rec.summary.clone().unwrap();
    let in_file = rec
        .perf_records()
        .filter_map(Result::ok)
        .filter(|r| r.kind == jprof::format::perf::RecordKind::SAMPLE)
        .count() as u64;
    assert_eq!(in_file, s.samples, "samples in the file vs the summary");
    // Batches jprof had to drop (a writer behind on a loaded machine) are counted with their
    // samples, and said in the summary.
    if s.dropped_batches > 0 {
        assert!(s.dropped_samples > 0, "{}", text(&out));
        let said = format!(
            "{} samples in {} batches dropped by jprof",
            s.dropped_samples, s.dropped_batches
        );
        assert!(text(&out).contains(&said), "{}", text(&out));
    }
    // Relative to the CPU time the busy processes certainly ran (at least 4999 samples per
    // CPU-second, less a margin for the kernel's frequency adjustment), so it holds on a loaded
    // machine too; the fork loop's samples come on top.
    let expected = 2 * SOAK_CPU_SECONDS * 4999;
    assert!(
        s.samples + s.lost_samples + s.dropped_samples >= expected * 9 / 10,
        "{} samples (+{} lost, {} dropped) for {} CPU-seconds at 4999 Hz",
        s.samples,
        s.lost_samples,
        s.dropped_samples,
        2 * SOAK_CPU_SECONDS
    );
    assert!(
        s.processes > 100,
        "{} processes: the fork loop ran",
        s.processes
    );
    // The kernel's own losses are counted where the user looks.
    if s.lost_samples > 0 {
        assert!(text(&out).contains(&format!("lost samples {}", s.lost_samples)));
    }
    eprintln!(
        "soak: {} samples, {} processes, lost {} samples / {} records, throttled {}, dropped {} samples in {} batches",
        s.samples, s.processes, s.lost_samples, s.lost_records, s.throttles, s.dropped_samples, s.dropped_batches
    );
}
