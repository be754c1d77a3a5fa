//! The time-aware JIT index: reused addresses, moves, perf map vs jitdump, inline frames from
//! DEBUG_INFO2, V8 tiers, and both jitdump clocks (CLOCK_MONOTONIC and raw TSC) on this machine.

use jprof::format::jitdump::TierKind;
use jprof::format::jitdump_write as w;
use jprof::profile::{FrameKind, Tier, TierClass};
use jprof::symbolize::jit_index::{readable_name, JitIndex};
use jprof::timeline::{Calibration, ClockConversion};

const PID: u32 = 77;

fn load(ts: u64, addr: u64, name: &str, size: usize) -> Vec<u8> {
    w::code_load(
        ts,
        &w::CodeLoad {
            pid: PID,
            tid: PID,
            code_addr: addr,
            code_index: ts,
            name,
            code: &vec![0xc3; size],
        },
    )
}

#[test]
fn reused_address_resolves_by_time() {
    let mut f = w::header(PID, 0, false);
    f.extend(load(1_000, 0x5000, "first", 64));
    f.extend(load(2_000, 0x5000, "second", 64));
    let mut index = JitIndex::default();
    index.add_jitdump(PID, "/tmp/jit-77.dump", &f, &ClockConversion::default());
    let name = |t| index.lookup(PID, 0x5010, t).map(|c| c.name.clone());
    assert_eq!(name(1_500).as_deref(), Some("first"));
    assert_eq!(name(2_500).as_deref(), Some("second"));
    // Before any load: the first body loaded there afterwards.
    assert_eq!(name(500).as_deref(), Some("first"));
    assert_eq!(
        index.lookup(PID, 0x5040, 1_500).map(|c| c.name.as_str()),
        None
    );
    assert_eq!(
        index
            .lookup(PID + 1, 0x5010, 1_500)
            .map(|c| c.name.as_str()),
        None
    );
}

#[test]
fn moved_code_is_found_at_its_new_address_after_the_move() {
    let mut f = w::header(PID, 0, false);
    f.extend(load(1_000, 0x6000, "mover", 32));
    f.extend(w::code_move(3_000, PID, 0x6000, 0x9000, 32, 1));
    let mut index = JitIndex::default();
    index.add_jitdump(PID, "jit-77.dump", &f, &ClockConversion::default());
    assert_eq!(
        index.lookup(PID, 0x6004, 2_000).map(|c| c.name.as_str()),
        Some("mover")
    );
    assert!(index
        .lookup(PID, 0x6004, 4_000)
        .is_none_or(|c| c.until.is_some_and(|u| u <= 4_000)));
    assert_eq!(
        index.lookup(PID, 0x9004, 4_000).map(|c| c.name.as_str()),
        Some("mover")
    );
}

#[test]
fn jitdump_wins_over_perf_map() {
    let mut f = w::header(PID, 0, false);
    f.extend(load(1_000, 0x7000, "from_jitdump", 16));
    let mut index = JitIndex::default();
    index.add_perf_map(
        PID,
        "/tmp/perf-77.map",
        b"7000 10 from_map\n7100 10 only_map\n",
        &[(0, 900)],
    );
    index.add_jitdump(PID, "jit-77.dump", &f, &ClockConversion::default());
    assert_eq!(
        index.lookup(PID, 0x7008, 1_500).map(|c| c.name.as_str()),
        Some("from_jitdump")
    );
    assert_eq!(
        index.lookup(PID, 0x7108, 1_500).map(|c| c.name.as_str()),
        Some("only_map")
    );
}

/// Mono's perf map says `(null)` for code it cannot name; a timed record naming the same code
/// a little after the sample (its event was stamped late) names it instead.
#[test]
fn a_null_perf_map_name_gives_way_to_a_later_timed_name() {
    let mut f = w::header(PID, 0, false);
    f.extend(load(2_000, 0x7800, "Program:Main ()", 16));
    let mut index = JitIndex::default();
    index.add_perf_map(PID, "/tmp/perf-77.map", b"7800 40 (null)\n", &[(0, 900)]);
    index.add_jitdump(PID, "jit-77.dump", &f, &ClockConversion::default());
    assert_eq!(
        index.lookup(PID, 0x7808, 1_500).map(|c| c.name.as_str()),
        Some("Program:Main ()")
    );
    // Where nothing else names it, the perf map's entry stays.
    assert_eq!(
        index.lookup(PID, 0x7828, 1_500).map(|c| c.name.as_str()),
        Some("(null)")
    );
}

#[test]
fn inline_frames_lines_and_tier() {
    let mut f = w::header(PID, 0, false);
    f.extend(w::jit_tier(900, 0, TierKind::OPTIMIZED, "C2"));
    f.extend(w::debug_info2(
        900,
        &["Outer.java", "Inner.java"],
        &["Outer.run", "Inner.step", "Inner.leaf"],
        &[(0, 0, 10), (1, 1, 20), (2, 1, 30)],
        &[
            w::Inline {
                depth: 0,
                function: 1,
                call_line: 12,
                range: (0x10, 0x20),
            },
            w::Inline {
                depth: 1,
                function: 2,
                call_line: 22,
                range: (0x18, 0x8),
            },
        ],
        &[(0, 0, 11), (0x10, 1, 21), (0x18, 1, 31), (0x30, 0, 14)],
    ));
    f.extend(load(1_000, 0x8000, "Lpkg/Outer;run()V", 0x40));
    let mut index = JitIndex::default();
    index.add_jitdump(PID, "jit-77.dump", &f, &ClockConversion::default());

    let frames = index.frames(PID, 0x801a, 2_000).expect("frames");
    let names: Vec<_> = frames
        .iter()
        .map(|f| (f.name.as_str(), f.kind, f.file.as_deref(), f.line))
        .collect();
    assert_eq!(
        names,
        [
            (
                "Inner.leaf",
                FrameKind::Inlined,
                Some("Inner.java"),
                Some(31)
            ),
            (
                "Inner.step",
                FrameKind::Inlined,
                Some("Inner.java"),
                Some(22)
            ),
            (
                "pkg.Outer.run",
                FrameKind::Jit,
                Some("Outer.java"),
                Some(12)
            ),
        ]
    );
    let outer_only = index.frames(PID, 0x8032, 2_000).unwrap();
    assert_eq!(outer_only.len(), 1);
    assert_eq!(outer_only[0].line, Some(14));
    assert_eq!(
        index.lookup(PID, 0x8000, 2_000).unwrap().tier,
        Some(Tier::new(TierClass::Optimized, "C2 (optimized)"))
    );
}

#[test]
fn v8_names_keep_their_text_and_give_tiers() {
    assert_eq!(
        readable_name("JS:*tokenize /app/tokens.js:29:18"),
        (
            "JS:*tokenize /app/tokens.js:29:18".to_string(),
            Some(Tier::new(TierClass::Optimized, "Turbofan (optimized)"))
        )
    );
    assert_eq!(
        readable_name("JS:~main /a.js:1:1").1,
        Some(Tier::new(TierClass::Interpreted, "Ignition (interpreted)"))
    );
    assert_eq!(
        readable_name("JS:^f x.js:1:1").1,
        Some(Tier::new(TierClass::Baseline, "Sparkplug (baseline)"))
    );
    assert_eq!(
        readable_name("JS:+f x.js:1:1").1,
        Some(Tier::new(TierClass::Optimized, "Maglev (optimized)"))
    );
    // Newer V8 (Deno 2): `'` after the marker for code specialized to one closure's context,
    // `o` before it for on-stack replacement, `Script:` for a script's top level.
    let tier = |name| readable_name(name).1.map(|t| t.label);
    assert_eq!(
        tier("JS:*'fib file:///app/hot.ts:1:13").as_deref(),
        Some("Turbofan (optimized, context-specialized)")
    );
    assert_eq!(
        tier("JS:o+'fib file:///app/hot.ts:1:13").as_deref(),
        Some("Maglev (optimized, OSR, context-specialized)")
    );
    assert_eq!(
        tier("JS:o*fib file:///app/hot.ts:1:13").as_deref(),
        Some("Turbofan (optimized, OSR)")
    );
    assert_eq!(
        tier("Script:~ file:///app/hot.ts:1:1").as_deref(),
        Some("Ignition (interpreted)")
    );
    assert_eq!(readable_name("Builtin:ArrayMap").1, None);
    assert_eq!(
        readable_name("Ldemo/matrix/Matrix;multiply(Ldemo/matrix/Matrix;)Ldemo/matrix/Matrix;").0,
        "demo.matrix.Matrix.multiply"
    );
}

/// Both clocks on this machine: a MONOTONIC-stamped and a TSC-stamped jitdump written now
/// resolve a sample taken between two loads at the same address to the right one.
#[test]
fn monotonic_and_tsc_jitdumps_resolve_on_the_sample_clock() {
    use jprof::sys::clock;
    let calibration = Calibration::start();
    // A producer's stamp: the tightest of a few bracketed (TSC, MONOTONIC) reads.
    let stamp = || {
        let pair = clock::tightest_tsc_pair(clock::CLOCK_MONOTONIC, 20).expect("x86_64 RDTSCP");
        (pair.ns, pair.tsc)
    };
    let (m1, t1) = stamp();
    std::thread::sleep(std::time::Duration::from_millis(30));
    let (sample_between, _) = stamp();
    std::thread::sleep(std::time::Duration::from_millis(30));
    let (m2, t2) = stamp();
    std::thread::sleep(std::time::Duration::from_millis(30));
    let (sample_after, _) = stamp();
    let conv = calibration.finish();

    for (arch, (a, b)) in [(false, (m1, m2)), (true, (t1, t2))] {
        let mut f = w::header(PID, 0, arch);
        f.extend(load(a, 0xa000, "old", 32));
        f.extend(load(b, 0xa000, "new", 32));
        let mut index = JitIndex::default();
        index.add_jitdump(PID, "jit-77.dump", &f, &conv);
        assert!(index.notes.is_empty(), "{:?}", index.notes);
        let at = |t| index.lookup(PID, 0xa010, t).map(|c| c.name.clone());
        assert_eq!(
            at(sample_between).as_deref(),
            Some("old"),
            "arch timestamps: {arch}"
        );
        assert_eq!(
            at(sample_after).as_deref(),
            Some("new"),
            "arch timestamps: {arch}"
        );
        // The conversion puts the load within a microsecond of the MONOTONIC stamp.
        let from = index.lookup(PID, 0xa010, sample_after).unwrap().from;
        assert!(from.abs_diff(m2) < 1_000, "arch {arch}: {from} vs {m2}");
    }
}

/// HotSpot-style trees: the same callee inlined from several call sites, so a call that covers
/// the address is followed by siblings (and their children) that do not.
#[test]
fn inline_call_followed_by_siblings_still_resolves() {
    let mut f = w::header(PID, 0, false);
    let call = |depth, function, call_line, range| w::Inline {
        depth,
        function,
        call_line,
        range,
    };
    f.extend(w::debug_info2(
        900,
        &["Outer.java"],
        &["Outer.run", "Outer.dot", "Outer.mul"],
        &[(0, 0, 10), (1, 0, 20), (2, 0, 30)],
        &[
            call(0, 1, 11, (0x00, 0x10)),
            call(1, 2, 21, (0x04, 0x04)),
            call(0, 1, 12, (0x10, 0x10)),
            call(0, 1, 13, (0x20, 0x10)),
            call(1, 2, 22, (0x28, 0x04)),
        ],
        &[(0, 0, 20), (0x04, 0, 30), (0x08, 0, 20), (0x30, 0, 14)],
    ));
    f.extend(load(1_000, 0x8000, "Lpkg/Outer;run()V", 0x40));
    let mut index = JitIndex::default();
    index.add_jitdump(PID, "jit-77.dump", &f, &ClockConversion::default());
    let at = |addr| -> Vec<(String, Option<u32>)> {
        index
            .frames(PID, addr, 2_000)
            .unwrap()
            .into_iter()
            .map(|f| (f.name, f.line))
            .collect()
    };
    let names = |frames: &[(String, Option<u32>)]| -> Vec<String> {
        frames.iter().map(|f| f.0.clone()).collect()
    };
    assert_eq!(
        names(&at(0x8005)),
        ["Outer.mul", "Outer.dot", "pkg.Outer.run"]
    );
    let second = at(0x8012);
    assert_eq!(names(&second), ["Outer.dot", "pkg.Outer.run"]);
    assert_eq!(second[1].1, Some(12), "call site line of the second call");
    // Offset 0x2a is in the third dot's range and its mul child.
    assert_eq!(
        names(&at(0x802a)),
        ["Outer.mul", "Outer.dot", "pkg.Outer.run"]
    );
    assert_eq!(at(0x8032).len(), 1);
}

/// jprof's CODE_UNLOAD ends the body at that address from its time on.
#[test]
fn unload_ends_the_code() {
    let mut f = w::header(PID, 0, false);
    f.extend(load(1_000, 0x9000, "Lpkg/A;f()V", 0x40));
    f.extend(w::code_unload(3_000, 0x9000, 1_000));
    let mut index = JitIndex::default();
    index.add_jitdump(PID, "jit-77.dump", &f, &ClockConversion::default());
    assert!(index.lookup(PID, 0x9010, 2_000).is_some());
    assert!(index.lookup(PID, 0x9010, 3_500).is_none());
}

/// V8's unwind tables (node fixture, `--perf-prof-unwinding-info`): each one that has an FDE
/// is placed where its FDE starts the code, right after the code (V8 puts the table there).
#[test]
fn node_unwind_tables_are_placed_right_after_their_code() {
    use jprof::format::jitdump::{self, RecordBody};
    use jprof::symbolize::jit_unwind::JitUnwind;
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/shared/node/jit-13228.dump"
    ))
    .expect("fixture present (tests/fixtures/shared)");
    let header = jitdump::parse_header(&bytes).unwrap();
    let batch = jitdump::parse_records(&bytes, &header, 0);
    let mut pending = None;
    let (mut placed, mut gaps) = (0, std::collections::BTreeSet::new());
    for r in batch.records {
        match r.body {
            RecordBody::UnwindingInfo { eh_frame, .. } => pending = Some(eh_frame),
            RecordBody::CodeLoad { code_size, .. } => {
                if let Some(table) = pending.take() {
                    if let Some(u) = JitUnwind::place(&table, code_size) {
                        placed += 1;
                        assert!(u.eh_frame_offset >= code_size, "table inside the code");
                        gaps.insert(u.eh_frame_offset - code_size);
                    }
                }
            }
            _ => {}
        }
    }
    assert!(
        placed >= 10,
        "only {placed} bodies had an unwind table with an FDE"
    );
    assert!(
        gaps.iter().all(|&g| g < 8),
        "gaps between code and table: {gaps:?}"
    );
}

/// A lookup finds what looking at every body would: a JVM's interpreter (256 KiB) among
/// thousands of small bodies before and after it, addresses reused and moved over time, a
/// perf map's bodies beside the jitdump's. (The index skips the bodies that end before the
/// address; this checks the skip against all bodies, at random addresses and times.)
#[test]
fn a_lookup_finds_what_a_look_at_every_body_finds() {
    let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
    let mut next = move |n: u64| rng.u64(..n);
    let mut f = w::header(PID, 0, false);
    f.extend(load(10, 0x20_0000, "Interpreter", 0x4_0000));
    let mut map = String::new();
    for i in 0..3_000u64 {
        let t = 100 + i * 10;
        // Before the interpreter, inside its range's neighbourhood and after it.
        let base = [0x10_0000, 0x23_0000, 0x30_0000][next(3) as usize];
        let addr = base + next(0x1_0000) / 16 * 16;
        match next(10) {
            0 => f.extend(w::code_move(t, PID, addr, addr + 0x800, 0x40, i)),
            1 => f.extend(w::code_unload(t, addr, i)),
            2 => map.push_str(&format!("{addr:x} {:x} map_{i}\n", 0x20 + next(0x200))),
            _ => f.extend(load(
                t,
                addr,
                &format!("body_{i}"),
                0x20 + next(0x400) as usize,
            )),
        }
    }
    let mut index = JitIndex::default();
    index.add_perf_map(PID, "/tmp/perf-77.map", map.as_bytes(), &[(0, 5_000)]);
    index.add_jitdump(PID, "jit-77.dump", &f, &ClockConversion::default());
    // Every body, in the index's order, looked at from the last (the index's rules).
    let all: Vec<_> = index.code().map(|(_, c)| c).collect();
    let reference = |addr: u64, t: u64| {
        let live_at = |c: &&jprof::symbolize::jit_index::JitCode| {
            c.from <= t && c.until.is_none_or(|u| t < u)
        };
        let (mut live, mut later) = (None, None);
        for c in all
            .iter()
            .rev()
            .filter(|c| c.start <= addr && addr - c.start < c.size)
        {
            if live_at(c) {
                if live.is_none_or(|b: &&jprof::symbolize::jit_index::JitCode| {
                    (c.from_jitdump, c.from) > (b.from_jitdump, b.from)
                }) {
                    live = Some(c);
                }
            } else if c.from > t
                && later.is_none_or(|b: &&jprof::symbolize::jit_index::JitCode| {
                    (c.from_jitdump, std::cmp::Reverse(c.from))
                        > (b.from_jitdump, std::cmp::Reverse(b.from))
                })
            {
                later = Some(c);
            }
        }
        live.or(later).map(|c| (c.name.clone(), c.start, c.from))
    };
    let mut found = 0;
    for _ in 0..20_000 {
        let base = [0x10_0000, 0x20_0000, 0x23_0000, 0x30_0000][next(4) as usize];
        let addr = base + next(0x1_1000);
        let t = next(40_000);
        let got = index
            .lookup(PID, addr, t)
            .map(|c| (c.name.clone(), c.start, c.from));
        assert_eq!(got, reference(addr, t), "{addr:#x} at {t}");
        found += usize::from(got.is_some());
    }
    // Most probes land in some body: the check is not of empty answers.
    assert!(found > 10_000, "{found} of 20000 found");
}

/// A VM method's name is the latest naming at or before the sample (an address reused after
/// its class was unloaded names another method), whether the address was named once, twice
/// in one record or again in later records; every naming of a record goes to its time.
#[test]
fn a_vm_method_is_named_by_its_latest_naming_before_the_sample() {
    let names = |list: &[(u64, &str)]| -> Vec<(u64, String)> {
        list.iter().map(|&(m, n)| (m, n.to_string())).collect()
    };
    let mut f = w::header(PID, 0, false);
    f.extend(w::method_names(
        1_000,
        &names(&[(0x10, "LA;a"), (0x20, "LB;b"), (0x10, "LA;a2")]),
    ));
    f.extend(w::method_names(2_000, &names(&[(0x20, "LC;c")])));
    f.extend(w::method_names(
        3_000,
        &names(&[(0x20, "LD;d"), (0x30, "LE;e")]),
    ));
    f.extend(w::method_names(3_000, &names(&[(0x30, "LF;f")])));
    let mut index = JitIndex::default();
    index.add_jitdump(PID, "/tmp/jit-77.dump", &f, &ClockConversion::default());
    assert!(index.has_method_names(PID));
    assert!(!index.has_method_names(PID + 1));
    let name = |m, t| index.method_name(PID, m, t);
    assert_eq!(name(0x10, 999), None);
    // Two namings at one time: the later one.
    assert_eq!(name(0x10, 1_000), Some("LA;a2"));
    assert_eq!(name(0x10, 9_000), Some("LA;a2"));
    assert_eq!(name(0x20, 1_500), Some("LB;b"));
    assert_eq!(name(0x20, 2_000), Some("LC;c"));
    assert_eq!(name(0x20, 2_999), Some("LC;c"));
    assert_eq!(name(0x20, 3_000), Some("LD;d"));
    assert_eq!(name(0x30, 2_999), None);
    assert_eq!(name(0x30, 3_000), Some("LF;f"));
    assert_eq!(name(0x40, 3_000), None);
    assert_eq!(index.method_name(PID + 1, 0x10, 3_000), None);
}

/// Loads end the bodies they overlap as a look at every body loaded before ends them, with
/// large bodies (a JVM's buffers of hundreds of KiB) among small ones, moves and unloads: each
/// body gets the same end (or none).
#[test]
fn loads_end_what_a_look_at_every_earlier_body_ends() {
    let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
    let mut next = move |n: u64| rng.u64(..n);
    // (name, start, size, from, until), in the order loaded.
    let mut reference: Vec<(String, u64, u64, u64, Option<u64>)> = Vec::new();
    fn ends_overlapped(
        bodies: &mut [(String, u64, u64, u64, Option<u64>)],
        start: u64,
        size: u64,
        t: u64,
    ) {
        for b in bodies.iter_mut().filter(|b| b.4.is_none()) {
            if b.1 < start + size && start < b.1 + b.2 && b.3 <= t {
                b.4 = Some(t);
            }
        }
    }
    let mut f = w::header(PID, 0, false);
    for i in 0..4_000u64 {
        let t = 100 + i * 10;
        let addr = 0x40_0000 + next(0x20_0000) / 16 * 16;
        match next(12) {
            0 | 1 => {
                // An address loaded before, now and then.
                let Some(old) = reference.get(next(reference.len().max(1) as u64) as usize) else {
                    continue;
                };
                let (old, size) = (old.1, old.2);
                let new = addr;
                f.extend(w::code_move(t, PID, old, new, size, i));
                if let Some(b) = reference
                    .iter_mut()
                    .rev()
                    .find(|b| b.1 == old && b.4.is_none())
                {
                    b.4 = Some(t);
                    let moved = (b.0.clone(), new, size, t, None);
                    ends_overlapped(&mut reference, new, size, t);
                    reference.push(moved);
                }
            }
            2 => {
                let Some(old) = reference.get(next(reference.len().max(1) as u64) as usize) else {
                    continue;
                };
                let old = old.1;
                f.extend(w::code_unload(t, old, i));
                if let Some(b) = reference
                    .iter_mut()
                    .rev()
                    .find(|b| b.1 == old && b.4.is_none() && b.3 <= t)
                {
                    b.4 = Some(t);
                }
            }
            _ => {
                let size = if next(40) == 0 {
                    0x4000 + next(0x8_0000)
                } else {
                    0x20 + next(0x800)
                };
                let name = format!("body_{i}");
                f.extend(load(t, addr, &name, size as usize));
                ends_overlapped(&mut reference, addr, size, t);
                reference.push((name, addr, size, t, None));
            }
        }
    }
    let mut index = JitIndex::default();
    index.add_jitdump(PID, "jit-77.dump", &f, &ClockConversion::default());
    let built: Vec<_> = index
        .code()
        .map(|(_, c)| (c.name.clone(), c.start, c.size, c.from, c.until))
        .collect();
    // The index keeps its bodies by start, then load time (a stable sort).
    reference.sort_by_key(|b| (b.1, b.3));
    assert!(reference.iter().filter(|b| b.2 > 0x4000).count() > 50);
    assert!(reference.iter().filter(|b| b.4.is_some()).count() > 1_000);
    assert_eq!(built.len(), reference.len());
    for (b, r) in built.iter().zip(&reference) {
        assert_eq!(b, r);
    }
}
