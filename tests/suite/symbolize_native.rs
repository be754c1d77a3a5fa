//! Symbolization of hand-built recordings that point at a real binary compiled here
//! (tests/fixtures/native): names, demangling, inline frames, lines, the frameless-leaf fix,
//! unknown addresses, kernel symbols, and embedded symbols outliving the binary.

use crate::symbolize_support;

use std::path::Path;
use std::process::Command;

use jprof::profile::{FrameKind, Profile};
use jprof::symbolize::{resolve, ResolveOptions};
use symbolize_support::*;

/// Where the fixture's PIE is "loaded" in the hand-built recordings.
const BASE: u64 = 0x5555_5555_0000;
const LEAF: &str = "frameless_leaf";
const CALLER: &str = "_ZN4demo6callerEl";
const WORK: &str = "_ZN4demo4workEl";

struct Fixture {
    _dir: tempfile::TempDir,
    bin: std::path::PathBuf,
    elf: Elf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = build_fixture(dir.path());
        let elf = Elf::read(&bin);
        Self {
            _dir: dir,
            bin,
            elf,
        }
    }

    fn addr(&self, symbol: &str, plus: u64) -> u64 {
        BASE + self.elf.symbol(symbol).0 + plus
    }

    fn ret(&self, from: &str, to: &str) -> u64 {
        BASE + self.elf.return_address_of_call(from, to)
    }

    /// COMM (exec) + MMAP2 of the binary's code segment.
    fn preamble(&self) -> Vec<Vec<u8>> {
        let (start, len, pgoff) = self.elf.mapping_for(BASE, self.elf.symbol(LEAF).0);
        vec![
            comm(PID, PID, "hot", true, 1),
            mmap2(PID, start, len, pgoff, self.bin.to_str().unwrap(), 2),
        ]
    }

    /// The frame-pointer callchain the kernel records for a sample in the frameless leaf:
    /// the leaf's caller (demo::caller) is missing.
    fn leaf_sample(&self, time: u64) -> Vec<u8> {
        let sp = 0x7ffc_0000_1000u64;
        let mut stack = Vec::new();
        stack.extend(self.ret(CALLER, LEAF).to_le_bytes()); // [sp]: leaf's return address
        stack.extend((sp + 0x40).to_le_bytes()); // caller's saved rbp
        stack.extend(self.ret(WORK, CALLER).to_le_bytes());
        stack.resize(1024, 0);
        let ip = self.addr(LEAF, 0x10);
        sample(
            PID,
            PID,
            time,
            1000,
            &[ip, self.ret(WORK, CALLER), self.ret("main", WORK)],
            &[],
            Some((sp + 8, sp, ip)),
            &stack,
        )
    }
}

fn names(profile: &Profile, sample: usize) -> Vec<(String, FrameKind)> {
    profile.samples[sample]
        .stack
        .iter()
        .map(|&id| {
            let f = profile.frame(id);
            (f.name.clone(), f.kind)
        })
        .collect()
}

#[test]
fn names_lines_and_demangled_cpp() {
    let fx = Fixture::new();
    let mut records = fx.preamble();
    records.push(sample(
        PID,
        PID,
        10,
        777,
        &[
            fx.addr(LEAF, 0x10),
            fx.ret(CALLER, LEAF),
            fx.ret(WORK, CALLER),
            fx.ret("main", WORK),
        ],
        &[],
        None,
        &[],
    ));
    let profile = resolve(
        &open(recording_bytes(&meta("fp"), &records)),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(
        folded(&profile),
        ["hot;main;demo::work(long);demo::caller(long);frameless_leaf"]
    );
    let s = &profile.samples[0];
    assert_eq!((s.pid, s.tid, s.time, s.weight), (PID, PID, 10, 777));
    let frames: Vec<_> = s.stack.iter().map(|&id| profile.frame(id)).collect();
    assert_eq!(frames[0].kind, FrameKind::Root);
    assert!(frames[1..].iter().all(|f| f.kind == FrameKind::Native));
    assert!(frames[1..]
        .iter()
        .all(|f| f.module.as_deref() == Some("hot")));
    // The caller's line is the call (return address - 1), not the instruction after it.
    assert!(frames[3].file.as_deref().unwrap().ends_with("main.cpp"));
    assert_eq!(frames[3].line, Some(20));
    assert!(frames[4].file.as_deref().unwrap().ends_with("leaf.c"));
    assert_eq!(frames[4].line, Some(7));
    assert_eq!(profile.threads[&PID].comm, "hot");
    assert!(profile.notes.is_empty(), "{:?}", profile.notes);
}

/// binutils' view of an address: (function, line) innermost first.
fn binutils_frames(bin: &Path, svmas: &[u64]) -> Vec<Vec<(String, u32)>> {
    let out = Command::new("addr2line")
        .args(["-f", "-i", "-C", "-a", "-e"])
        .arg(bin)
        .args(svmas.iter().map(|a| format!("{a:#x}")))
        .output()
        .expect("binutils addr2line");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut all = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        assert!(l.starts_with("0x"), "{l}");
        let mut frames = Vec::new();
        while let Some(next) = lines.peek() {
            if next.starts_with("0x") {
                break;
            }
            let function = lines.next().unwrap().to_string();
            let loc = lines.next().unwrap();
            let line = loc
                .rsplit(':')
                .next()
                .and_then(|l| l.split_whitespace().next())
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            frames.push((function, line));
        }
        all.push(frames);
    }
    all
}

#[test]
fn inline_frames_match_binutils() {
    let fx = Fixture::new();
    let (work, size) = fx.elf.symbol(WORK);
    let svmas: Vec<u64> = (work..work + size).collect();
    let reference = binutils_frames(&fx.bin, &svmas);
    let (i, expected) = reference
        .iter()
        .enumerate()
        .find(|(_, f)| f.len() == 2 && f[0].0.contains("mix"))
        .expect("an address where demo::mix is inlined into demo::work");
    let mut records = fx.preamble();
    records.push(sample(PID, PID, 10, 1, &[BASE + svmas[i]], &[], None, &[]));
    let profile = resolve(
        &open(recording_bytes(&meta("fp"), &records)),
        &Default::default(),
    )
    .unwrap();
    let stack = &profile.samples[0].stack;
    let work_frame = profile.frame(stack[1]);
    let mix_frame = profile.frame(stack[2]);
    assert_eq!(stack.len(), 3);
    assert_eq!(work_frame.name, "demo::work(long)");
    assert_eq!(work_frame.kind, FrameKind::Native);
    assert_eq!(work_frame.line, Some(expected[1].1));
    // GCC gives the static inline function no linkage name: DWARF's plain name, as binutils.
    assert_eq!(mix_frame.name, expected[0].0);
    assert_eq!(mix_frame.name, "mix");
    assert_eq!(mix_frame.kind, FrameKind::Inlined);
    assert_eq!(mix_frame.line, Some(expected[0].1));
    assert!(mix_frame.file.as_deref().unwrap().ends_with("main.cpp"));
}

#[test]
fn frameless_leaf_gets_its_caller_back() {
    let fx = Fixture::new();
    let mut records = fx.preamble();
    records.push(fx.leaf_sample(10));
    // A sample in demo::caller after its frame is set up: nothing to add.
    let ip = fx.addr(CALLER, 4);
    let sp = 0x7ffc_0000_2000u64;
    let mut stack = (sp + 0x40).to_le_bytes().to_vec(); // [rbp]: saved rbp
    stack.extend(fx.ret(WORK, CALLER).to_le_bytes()); // [rbp+8]
    stack.resize(1024, 0);
    records.push(sample(
        PID,
        PID,
        11,
        1,
        &[ip, fx.ret(WORK, CALLER), fx.ret("main", WORK)],
        &[],
        Some((sp, sp, ip)),
        &stack,
    ));
    let profile = resolve(
        &open(recording_bytes(&meta("fp"), &records)),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(
        folded(&profile),
        [
            "hot;main;demo::work(long);demo::caller(long);frameless_leaf",
            "hot;main;demo::work(long);demo::caller(long)",
        ]
    );
}

#[test]
fn unknown_addresses_are_named_by_module_or_address() {
    let fx = Fixture::new();
    let mut records = fx.preamble();
    records.push(mmap2(
        PID,
        0x7f00_0000_0000,
        0x10000,
        0x1000,
        "/nonexistent/libgone.so",
        3,
    ));
    records.push(sample(
        PID,
        PID,
        10,
        1,
        &[0x7f00_0000_0123, 0x1234, fx.ret("main", WORK)],
        &[],
        None,
        &[],
    ));
    let profile = resolve(
        &open(recording_bytes(&meta("fp"), &records)),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(
        folded(&profile),
        ["hot;main;[unknown] (0x1234);[unknown] (libgone.so+0x1123)"]
    );
    let unknown = profile.frame(profile.samples[0].stack[3]);
    assert_eq!(unknown.kind, FrameKind::Unknown);
    assert_eq!(unknown.module.as_deref(), Some("libgone.so"));
    let notes = profile.notes.join("\n");
    assert!(
        notes.contains("cannot read /nonexistent/libgone.so"),
        "{notes}"
    );
    assert!(
        notes.contains("1 frames outside any mapped file"),
        "{notes}"
    );
}

#[test]
fn embedded_symbols_survive_deleting_the_binary() {
    let fx = Fixture::new();
    let mut records = fx.preamble();
    records.push(fx.leaf_sample(10));
    records.push(sample(
        PID,
        PID,
        11,
        1,
        &[fx.addr(WORK, 1), fx.ret("main", WORK)],
        &[],
        None,
        &[],
    ));
    let bytes = recording_bytes(&meta("fp"), &records);
    let options = ResolveOptions::default();
    let from_disk = resolve(&open(bytes.clone()), &options).unwrap();
    let embedded = with_embedded_symbols(bytes.clone());
    std::fs::remove_file(&fx.bin).unwrap();

    let from_embedded = resolve(&open(embedded), &options).unwrap();
    assert_eq!(folded(&from_embedded), folded(&from_disk));
    assert_eq!(
        folded(&from_embedded)[0],
        "hot;main;demo::work(long);demo::caller(long);frameless_leaf"
    );
    let lines = |p: &Profile| -> Vec<_> {
        p.frames()
            .iter()
            .map(|f| (f.name.clone(), f.line))
            .collect()
    };
    assert_eq!(lines(&from_embedded), lines(&from_disk));
    assert!(from_embedded.notes.is_empty(), "{:?}", from_embedded.notes);

    // Without the SYMBOLS chunk the names are gone, and the report says why.
    let bare = resolve(&open(bytes), &options).unwrap();
    assert!(
        folded(&bare)[0].contains("[unknown] (hot+0x"),
        "{:?}",
        folded(&bare)
    );
    assert!(
        bare.notes.join("\n").contains("cannot read"),
        "{:?}",
        bare.notes
    );
}

/// A text symbol of this machine's kernel, if kallsyms shows addresses.
fn some_kernel_symbol() -> Option<(u64, String)> {
    let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let addr = u64::from_str_radix(f.next()?, 16).ok()?;
        let kind = f.next()?;
        let name = f.next()?;
        (kind == "T" && addr != 0 && name == "schedule").then(|| (addr, name.to_string()))
    })
}

#[test]
fn kernel_frames_from_kallsyms_and_embedded() {
    let fx = Fixture::new();
    let Some((addr, name)) = some_kernel_symbol() else {
        // kptr_restrict hides addresses for this user: the profile must say so.
        let mut records = fx.preamble();
        records.push(sample(
            PID,
            PID,
            10,
            1,
            &[fx.addr(WORK, 1)],
            &[0xffff_ffff_8100_0000],
            None,
            &[],
        ));
        let p = resolve(
            &open(recording_bytes(&meta("fp"), &records)),
            &Default::default(),
        )
        .unwrap();
        assert!(
            p.notes.join("\n").contains("kptr_restrict"),
            "{:?}",
            p.notes
        );
        return;
    };
    let mut records = fx.preamble();
    records.push(sample(
        PID,
        PID,
        10,
        1,
        &[fx.addr(WORK, 1), fx.ret("main", WORK)],
        &[addr + 4, addr + 0x10],
        None,
        &[],
    ));
    let bytes = recording_bytes(&meta("fp"), &records);
    let p = resolve(&open(bytes.clone()), &Default::default()).unwrap();
    let n = names(&p, 0);
    assert_eq!(n[n.len() - 1], (name.clone(), FrameKind::Kernel));
    assert_eq!(n[n.len() - 2], (name.clone(), FrameKind::Kernel));
    assert_eq!(
        n[n.len() - 3],
        ("demo::work(long)".to_string(), FrameKind::Native)
    );

    // Embedded: another machine's kernel (a different release) still gets the names.
    let mut other = meta("fp");
    other.host.kernel_release = "0.0.0-elsewhere".into();
    let embedded = with_embedded_symbols(recording_bytes(&other, &records));
    let p = resolve(&open(embedded), &Default::default()).unwrap();
    assert_eq!(names(&p, 0).last().unwrap().0, name);
    let bare = resolve(
        &open(recording_bytes(&other, &records)),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(
        names(&bare, 0).last().unwrap().0,
        format!("[unknown] ({:#x})", addr + 4)
    );
}

/// A whole-host recording's end (and `embedded_symbols`) reads this machine's kallsyms keeping
/// only the symbols of the kernel addresses its samples hit: every kernel frame still gets the
/// name the whole table gives
/// (addresses all over the kernel's text; symbol starts, as the leaf and as return addresses,
/// among them).
#[test]
fn embedded_kernel_names_are_those_of_the_whole_kallsyms() {
    let fx = Fixture::new();
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    // The kernel's own text symbols (not modules' or BPF programs', which come and go).
    let starts: Vec<u64> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            let kind = f.next()?;
            f.next()?;
            (matches!(kind, "t" | "T") && addr != 0 && f.next().is_none()).then_some(addr)
        })
        .collect();
    if starts.is_empty() {
        eprintln!("skipped: /proc/kallsyms shows no addresses here (kptr_restrict)");
        return;
    }
    let mut rng = fastrand::Rng::with_seed(28);
    let mut records = fx.preamble();
    for t in 0..60 {
        let kernel: Vec<u64> = (0..8)
            .map(|_| starts[rng.usize(..starts.len())] + [0, 1, rng.u64(2..200)][rng.usize(..3)])
            .collect();
        records.push(sample(
            PID,
            PID,
            10 + t,
            1,
            &[fx.addr(WORK, 1)],
            &kernel,
            None,
            &[],
        ));
    }
    let whole = resolve(
        &open(recording_bytes(&meta("fp"), &records)),
        &Default::default(),
    )
    .unwrap();
    // Another machine's kernel: the report names kernel frames from the embedded names alone.
    let mut other = meta("fp");
    other.host.kernel_release = "0.0.0-elsewhere".into();
    let embedded = resolve(
        &open(with_embedded_symbols(recording_bytes(&other, &records))),
        &Default::default(),
    )
    .unwrap();
    let (whole, embedded) = (folded(&whole), folded(&embedded));
    assert_eq!(whole.len(), 60);
    assert!(
        whole.iter().all(|s| !s.contains("[unknown]")),
        "{:?}",
        &whole[..3]
    );
    assert_eq!(embedded.len(), whole.len());
    for (i, (e, w)) in embedded.iter().zip(&whole).enumerate() {
        assert_eq!(e, w, "sample {i}");
    }
}

#[test]
fn records_are_replayed_in_time_order_and_filtered() {
    let fx = Fixture::new();
    let pre = fx.preamble();
    // The sample comes first in the file (another CPU's ring) but after the mappings in time.
    let records = vec![
        sample(PID, PID, 10, 1, &[fx.addr(WORK, 1)], &[], None, &[]),
        pre[0].clone(),
        pre[1].clone(),
        fork(PID, PID, PID + 1, PID, 11),
        comm(PID, PID + 1, "worker", false, 12),
        sample(PID, PID + 1, 13, 1, &[fx.addr(LEAF, 0x10)], &[], None, &[]),
    ];
    let rec = open(recording_bytes(&meta("fp"), &records));
    let p = resolve(&rec, &Default::default()).unwrap();
    assert_eq!(
        folded(&p),
        ["hot;demo::work(long)", "worker;frameless_leaf"]
    );
    assert_eq!(p.threads[&(PID + 1)].pid, PID);
    assert_eq!(p.threads[&(PID + 1)].comm, "worker");
    let by_comm = resolve(
        &rec,
        &ResolveOptions {
            comm: Some("worker".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(folded(&by_comm), ["worker;frameless_leaf"]);
    let by_tid = resolve(
        &rec,
        &ResolveOptions {
            tid: Some(PID),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(folded(&by_tid), ["hot;demo::work(long)"]);
}

#[test]
fn vdso_frames_are_named_from_this_machines_vdso() {
    use object::{Object, ObjectSymbol};
    let image = jprof::symbolize::native::own_vdso().expect("vdso readable");
    let obj = object::File::parse(&*image).unwrap();
    let sym = obj
        .dynamic_symbols()
        .find(|s| s.name().is_ok_and(|n| n.contains("clock_gettime")) && s.size() > 4)
        .expect("a clock_gettime symbol in the vdso");
    let start = 0x7fff_f7fc_0000u64;
    let records = vec![
        comm(PID, PID, "hot", true, 1),
        mmap2(PID, start, image.len() as u64, 0, "[vdso]", 2),
        sample(
            PID,
            PID,
            10,
            1,
            &[start + sym.address() + 2],
            &[],
            None,
            &[],
        ),
    ];
    let bytes = recording_bytes(&meta("fp"), &records);
    let p = resolve(&open(bytes.clone()), &Default::default()).unwrap();
    let frame = p.frame(p.samples[0].stack[1]);
    assert!(frame.name.contains("clock_gettime"), "{frame:?}");
    assert_eq!(frame.module.as_deref(), Some("[vdso]"));
    // Another kernel's vdso is not this one: unknown, unless the symbols were embedded.
    let mut other = meta("fp");
    other.host.kernel_release = "0.0.0-elsewhere".into();
    let p = resolve(
        &open(recording_bytes(&other, &records)),
        &Default::default(),
    )
    .unwrap();
    assert!(p
        .frame(p.samples[0].stack[1])
        .name
        .starts_with("[unknown] ([vdso]+0x"));
    let embedded = with_embedded_symbols(recording_bytes(&other, &records));
    let p = resolve(&open(embedded), &Default::default()).unwrap();
    assert_eq!(p.frame(p.samples[0].stack[1]).name, frame.name);
}
