//! Shared by the symbolize_* tests: builds the native fixture with the system compilers,
//! encodes perf records by hand, and wraps them into an in-memory recording.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use jprof::format::perf::{context, misc, sample_type};
use jprof::format::recording::{encode_chunk, file_header, ChunkKind};
use jprof::recording::{EventConfig, HostFacts, Meta, Recording};
use object::{Object, ObjectSegment, ObjectSymbol};

pub const PID: u32 = 4242;
pub const SAMPLE_TYPE: u64 = sample_type::IP
    | sample_type::TID
    | sample_type::TIME
    | sample_type::CPU
    | sample_type::PERIOD
    | sample_type::CALLCHAIN
    | sample_type::REGS_USER
    | sample_type::STACK_USER;

/// Builds tests/fixtures/native (main.cpp + frameless leaf.c) into `dir`; returns the binary.
pub fn build_fixture(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/native");
    let leaf_o = dir.join("leaf.o");
    let bin = dir.join("hot");
    run(Command::new("cc")
        .args(["-O2", "-g", "-fomit-frame-pointer", "-c"])
        .arg(src.join("leaf.c"))
        .arg("-o")
        .arg(&leaf_o));
    run(Command::new("g++")
        .args(["-O2", "-g", "-fno-omit-frame-pointer"])
        .arg(src.join("main.cpp"))
        .arg(&leaf_o)
        .arg("-o")
        .arg(&bin));
    bin
}

fn run(cmd: &mut Command) {
    let status = cmd.status().expect("compiler runs");
    assert!(status.success(), "{cmd:?} failed");
}

/// Symbols and the executable segment of an ELF, for computing addresses in tests.
pub struct Elf {
    pub bytes: Vec<u8>,
}

impl Elf {
    pub fn read(path: &Path) -> Self {
        Self {
            bytes: std::fs::read(path).unwrap(),
        }
    }

    /// (address, size) of a symbol by its (mangled) name.
    pub fn symbol(&self, name: &str) -> (u64, u64) {
        let obj = object::File::parse(&*self.bytes).unwrap();
        let s = obj
            .symbols()
            .find(|s| s.name() == Ok(name))
            .unwrap_or_else(|| panic!("no symbol {name}"));
        (s.address(), s.size())
    }

    /// The PT_LOAD segment holding `svma`, as an mmap would map it at `base`:
    /// (start, len, pgoff), page aligned.
    pub fn mapping_for(&self, base: u64, svma: u64) -> (u64, u64, u64) {
        let obj = object::File::parse(&*self.bytes).unwrap();
        let seg = obj
            .segments()
            .find(|s| s.address() <= svma && svma < s.address() + s.size())
            .expect("segment");
        let (off, _) = seg.file_range();
        let skew = seg.address() & 0xfff;
        (
            base + seg.address() - skew,
            seg.size() + skew,
            off - (off & 0xfff),
        )
    }

    /// The return address (svma) of the first `call` in `from` that targets `to`.
    pub fn return_address_of_call(&self, from: &str, to: &str) -> u64 {
        let (start, size) = self.symbol(from);
        let (target, _) = self.symbol(to);
        let obj = object::File::parse(&*self.bytes).unwrap();
        let seg = obj
            .segments()
            .find(|s| s.address() <= start && start < s.address() + s.size())
            .unwrap();
        let data = seg.data().unwrap();
        let code = &data[(start - seg.address()) as usize..][..size as usize];
        for i in 0..code.len().saturating_sub(5) {
            if code[i] == 0xe8 {
                let rel = i32::from_le_bytes(code[i + 1..i + 5].try_into().unwrap());
                let next = start + i as u64 + 5;
                if next.wrapping_add(rel as i64 as u64) == target {
                    return next;
                }
            }
        }
        panic!("no call from {from} to {to}");
    }
}

fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut v = kind.to_le_bytes().to_vec();
    v.extend(misc.to_le_bytes());
    v.extend(((body.len() + 8) as u16).to_le_bytes());
    v.extend(body);
    v
}

fn trailer(pid: u32, tid: u32, time: u64) -> Vec<u8> {
    let mut v = pid.to_le_bytes().to_vec();
    v.extend(tid.to_le_bytes());
    v.extend(time.to_le_bytes());
    v.extend(0u64.to_le_bytes()); // cpu + res
    v
}

fn padded(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v.resize(v.len().div_ceil(8) * 8, 0);
    v
}

pub fn mmap2(pid: u32, start: u64, len: u64, pgoff: u64, path: &str, time: u64) -> Vec<u8> {
    let mut b = pid.to_le_bytes().to_vec();
    b.extend(pid.to_le_bytes());
    b.extend(start.to_le_bytes());
    b.extend(len.to_le_bytes());
    b.extend(pgoff.to_le_bytes());
    b.extend([0u8; 24]); // maj, min, ino, ino_generation
    b.extend(5u32.to_le_bytes()); // PROT_READ|PROT_EXEC
    b.extend(2u32.to_le_bytes()); // MAP_PRIVATE
    b.extend(padded(path));
    b.extend(trailer(pid, pid, time));
    record(10, misc::USER, &b)
}

pub fn comm(pid: u32, tid: u32, name: &str, exec: bool, time: u64) -> Vec<u8> {
    let mut b = pid.to_le_bytes().to_vec();
    b.extend(tid.to_le_bytes());
    b.extend(padded(name));
    b.extend(trailer(pid, tid, time));
    record(3, if exec { misc::COMM_EXEC } else { 0 }, &b)
}

pub fn fork(pid: u32, ppid: u32, tid: u32, ptid: u32, time: u64) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [pid, ppid, tid, ptid] {
        b.extend(v.to_le_bytes());
    }
    b.extend(time.to_le_bytes());
    b.extend(trailer(pid, tid, time));
    record(7, 0, &b)
}

/// A sample (kernel mode when `kernel` is not empty). `callchain` are user addresses (the USER marker is added);
/// `regs` = (bp, sp, ip) with the stack copied from sp.
#[allow(clippy::too_many_arguments)] // one parameter per record field reads best in tests
pub fn sample(
    pid: u32,
    tid: u32,
    time: u64,
    period: u64,
    callchain: &[u64],
    kernel: &[u64],
    regs: Option<(u64, u64, u64)>,
    stack: &[u8],
) -> Vec<u8> {
    let ip = kernel.first().or(callchain.first()).copied().unwrap_or(0);
    let mut b = ip.to_le_bytes().to_vec();
    b.extend(pid.to_le_bytes());
    b.extend(tid.to_le_bytes());
    b.extend(time.to_le_bytes());
    b.extend(0u64.to_le_bytes()); // cpu + res
    b.extend(period.to_le_bytes());
    let mut chain = Vec::new();
    if !kernel.is_empty() {
        chain.push(context::KERNEL);
        chain.extend(kernel);
    }
    if !callchain.is_empty() {
        chain.push(context::USER);
        chain.extend(callchain);
    }
    b.extend((chain.len() as u64).to_le_bytes());
    for a in chain {
        b.extend(a.to_le_bytes());
    }
    match regs {
        Some((bp, sp, ip)) => {
            b.extend(2u64.to_le_bytes());
            for r in [bp, sp, ip] {
                b.extend(r.to_le_bytes());
            }
        }
        None => b.extend(0u64.to_le_bytes()),
    }
    b.extend((stack.len() as u64).to_le_bytes());
    if !stack.is_empty() {
        b.extend(stack);
        b.extend((stack.len() as u64).to_le_bytes());
    }
    let misc = if kernel.is_empty() {
        misc::USER
    } else {
        misc::KERNEL
    };
    record(9, misc, &b)
}

pub fn meta(call_graph: &str) -> Meta {
    Meta {
        jprof_version: "test".into(),
        command: vec!["hot".into()],
        attached_pid: None,
        target_pid: Some(PID),
        targets: Default::default(),
        host: HostFacts {
            kernel_release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap()
                .trim()
                .to_string(),
            ..Default::default()
        },
        event: EventConfig {
            event: "cycles".into(),
            event_note: None,
            frequency_hz: 999,
            sample_type: SAMPLE_TYPE,
            regs_user_mask: 0x1c0,
            stack_user_bytes: if call_graph == "dwarf" { 32768 } else { 1024 },
            call_graph: call_graph.parse().unwrap(),
            kernel_callchains: true,
            clockid: 1,
            off_cpu_ids: Vec::new(),
            off_cpu_min_ns: 0,
        },
        start_unix_ns: 0,
    }
}

/// The bytes of a recording: META, one PERF_RECORDS chunk, and optionally SYMBOLS.
pub fn recording_bytes(meta: &Meta, records: &[Vec<u8>]) -> Vec<u8> {
    let mut f = file_header().to_vec();
    f.extend(encode_chunk(
        ChunkKind::META,
        &serde_json::to_vec(meta).unwrap(),
    ));
    f.extend(encode_chunk(ChunkKind::PERF_RECORDS, &records.concat()));
    f
}

pub fn open(bytes: Vec<u8>) -> Recording {
    Recording::from_bytes(PathBuf::from("test.jprof"), bytes).unwrap()
}

/// Appends the embedded symbols (and unwound stacks) the way the recorder does.
pub fn with_embedded_symbols(bytes: Vec<u8>) -> Vec<u8> {
    let chunks = jprof::symbolize::embedded_symbols(&open(bytes.clone())).unwrap();
    let mut bytes = bytes;
    bytes.extend(chunks);
    bytes
}

/// Each sample's stack as `name;name;...` (root first).
pub fn folded(profile: &jprof::profile::Profile) -> Vec<String> {
    profile
        .samples
        .iter()
        .map(|s| {
            s.stack
                .iter()
                .map(|&id| profile.frame(id).name.clone())
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect()
}

/// Compiles `source` as `dir/name` with frame pointers and a GNU build id, `args` added.
pub fn cc(dir: &Path, source: &str, name: &str, args: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let status = Command::new("cc")
        .args(["-O1", "-fno-omit-frame-pointer", "-Wl,--build-id"])
        .arg(&src)
        .args(args)
        .arg("-o")
        .arg(&out)
        .current_dir(dir)
        .status()
        .expect("cc");
    assert!(status.success(), "cc {name}");
    out
}

/// The GNU build id of `path`, as readelf prints it.
pub fn build_id(path: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(path)
        .output()
        .expect("readelf");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("a build id")
        .trim()
        .to_string()
}
