//! Real samples of a real program: the fixture (a C++ caller of a frameless C leaf) is
//! sampled with perf_event_open in frame-pointer mode and in DWARF mode; the leaf's caller
//! must be present in at least 95% of the leaf's samples. Needs perf_event_open (root in CI).

use crate::symbolize_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use jprof::format::procfs::parse_maps;
use jprof::profile::Profile;
use jprof::symbolize::{resolve, ResolveOptions};
use jprof::sys::perf_event::{self, abi, new_attr, PerfMmap};
use symbolize_support::*;

/// Samples the running fixture for a while; returns the recording's bytes and the binary.
fn sample_fixture(call_graph: &str, dir: &Path) -> (Vec<u8>, PathBuf) {
    let bin = build_fixture(dir);
    let mut child = Command::new(&bin).arg("100000000").spawn().unwrap();
    let pid = child.id();
    // Wait until the exec is done (the maps name the fixture).
    let deadline = Instant::now() + Duration::from_secs(5);
    let maps = loop {
        let maps = std::fs::read(format!("/proc/{pid}/maps")).unwrap();
        if String::from_utf8_lossy(&maps).contains(bin.to_str().unwrap()) {
            break maps;
        }
        assert!(Instant::now() < deadline, "fixture did not start");
        std::thread::sleep(Duration::from_millis(5));
    };
    // What a recorder attaching to a running process synthesizes from /proc/PID/maps.
    let mut records = vec![comm(pid, pid, "hot", true, 0)];
    for m in parse_maps(&maps).unwrap() {
        if m.perms.contains('x') && (m.path.starts_with('/') || m.path == "[vdso]") {
            records.push(mmap2(pid, m.start, m.end - m.start, m.offset, m.path, 0));
        }
    }

    let dwarf = call_graph == "dwarf";
    let mut attr = new_attr();
    attr.type_ = abi::PERF_TYPE_SOFTWARE;
    attr.config = abi::PERF_COUNT_SW_CPU_CLOCK as u64;
    attr.sample_freq = 999;
    attr.set_freq(1);
    attr.sample_type = SAMPLE_TYPE;
    attr.sample_regs_user = 0x1c0;
    attr.sample_stack_user = if dwarf { 32768 } else { 1024 };
    attr.set_sample_id_all(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_callchain_user(u64::from(dwarf));
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    let fd = perf_event::open(&mut attr, pid as i32, -1).expect("perf_event_open (run as root)");
    let mut ring = PerfMmap::new(fd, 512).unwrap();
    let mut bytes = Vec::new();
    // 0.6 s of the fixture's CPU time (not wall time: on a loaded machine it gets less CPU,
    // and cpu-clock samples follow its CPU time), at most a minute.
    let end = Instant::now() + Duration::from_secs(60);
    while cpu_seconds(pid) < 0.6 && Instant::now() < end {
        ring.drain_into(&mut bytes);
        std::thread::sleep(Duration::from_millis(5));
    }
    ring.drain_into(&mut bytes);
    child.kill().unwrap();
    child.wait().unwrap();
    records.push(bytes);

    let mut meta = meta(call_graph);
    meta.target_pid = Some(pid);
    (recording_bytes(&meta, &records), bin)
}

/// User plus system CPU time of process `pid` so far, in seconds (/proc/PID/stat).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the parenthesised comm; utime and stime are the 14th and 15th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap_or(100);
    ticks as f64 / per_second as f64
}

fn profile_of(bytes: Vec<u8>) -> Profile {
    resolve(&open(bytes), &ResolveOptions::default()).unwrap()
}

/// (samples in the leaf, of those with demo::caller then demo::work above it).
fn leaf_callers(profile: &Profile) -> (usize, usize) {
    let mut in_leaf = 0;
    let mut with_caller = 0;
    for stack in folded(profile) {
        let frames: Vec<&str> = stack.split(';').collect();
        if frames.last() != Some(&"frameless_leaf") {
            continue;
        }
        in_leaf += 1;
        let n = frames.len();
        if n >= 3 && frames[n - 2] == "demo::caller(long)" && frames[n - 3] == "demo::work(long)" {
            with_caller += 1;
        }
    }
    (in_leaf, with_caller)
}

/// Samples the fixture, checks the leaf's callers, and checks that the embedded symbols
/// (and, in DWARF mode, the embedded unwound stacks) give the same profile without the binary.
fn check(call_graph: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, bin) = sample_fixture(call_graph, dir.path());
    let profile = profile_of(bytes.clone());
    let (in_leaf, with_caller) = leaf_callers(&profile);
    eprintln!(
        "{call_graph}: {} samples, {in_leaf} in the leaf, {with_caller} with its caller",
        profile.samples.len()
    );
    assert!(in_leaf >= 100, "too few leaf samples: {in_leaf}");
    assert!(
        with_caller * 100 >= in_leaf * 95,
        "{with_caller} of {in_leaf}: {:?}",
        folded(&profile).iter().take(5).collect::<Vec<_>>()
    );
    // The stacks reach main through the fixture's frames.
    assert!(folded(&profile)
        .iter()
        .any(|s| s.contains("main;demo::work(long)")));

    let embedded = with_embedded_symbols(bytes);
    std::fs::remove_file(&bin).unwrap();
    assert_eq!(folded(&profile_of(embedded)), folded(&profile));
}

#[test]
fn frame_pointer_mode_recovers_the_frameless_leafs_caller() {
    check("fp");
}

#[test]
fn dwarf_mode_unwinds_through_the_frameless_leaf() {
    check("dwarf");
}
