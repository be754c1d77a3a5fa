//! Symbolization never panics: random records, and valid records with random bytes flipped,
//! go through `resolve` and `embedded_symbols` in both call-graph modes.

use crate::symbolize_support;

use jprof::format::recording::{encode_chunk, ChunkKind};
use jprof::symbolize::{embedded_symbols, resolve, ResolveOptions};
use proptest::collection::vec;
use proptest::prelude::*;
use symbolize_support::*;

fn valid_records() -> Vec<u8> {
    let mut stack = 0x5555_5555_1000u64.to_le_bytes().to_vec();
    stack.resize(256, 0xaa);
    [
        comm(PID, PID, "hot", true, 1),
        mmap2(PID, 0x5555_5555_0000, 0x10000, 0, "/bin/sh", 2),
        mmap2(PID, 0x7f00_0000_0000, 0x10000, 0, "[vdso]", 3),
        fork(PID + 1, PID, PID + 1, PID, 4),
        sample(
            PID,
            PID,
            5,
            1,
            &[0x5555_5555_1234, 0x7f00_0000_0100, 1],
            &[0xffff_ffff_8100_0000],
            Some((0, 0x7ffc_0000_0000, 0x5555_5555_1234)),
            &stack,
        ),
        sample(
            PID + 1,
            PID + 1,
            6,
            1,
            &[0x5555_5555_2000],
            &[],
            Some((1, 2, 3)),
            &stack,
        ),
    ]
    .concat()
}

fn check(bytes: Vec<u8>) {
    let rec = open(bytes);
    let _ = resolve(&rec, &ResolveOptions::default());
    if let Ok(symbols) = embedded_symbols(&rec) {
        let with = open_bytes_with_symbols(&rec, &symbols);
        let _ = resolve(&open(with), &ResolveOptions::default());
    }
}

/// `symbols`: the encoded chunks `embedded_symbols` made.
fn open_bytes_with_symbols(rec: &jprof::recording::Recording, symbols: &[u8]) -> Vec<u8> {
    let mut bytes = recording_bytes(&rec.meta, &[]);
    for (_, payload) in rec.payloads(ChunkKind::PERF_RECORDS) {
        bytes.extend(encode_chunk(ChunkKind::PERF_RECORDS, payload));
    }
    bytes.extend_from_slice(symbols);
    bytes
}

/// Records to symbolize: random bytes behind plausible headers (so the decoder goes deeper),
/// or the valid records with a few bytes overwritten.
fn garbage_records() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => (vec(any::<u8>(), 8..600), prop::sample::select(vec![1u8, 3, 4, 7, 9, 10])).prop_map(
            |(mut buf, kind)| {
                buf[0] = kind;
                buf[1..4].fill(0);
                let size = (buf.len() as u16).to_le_bytes();
                buf[6..8].copy_from_slice(&size);
                buf
            }
        ),
        2 => vec((any::<prop::sample::Index>(), any::<u8>()), 1..=8).prop_map(|damage| {
            let mut buf = valid_records();
            for (at, byte) in damage {
                let i = at.index(buf.len());
                buf[i] = byte;
            }
            buf
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Garbage records go through `resolve` and `embedded_symbols` without a panic, in both
    /// call-graph modes.
    #[test]
    fn garbage_records_never_panic(dwarf: bool, records in garbage_records()) {
        let meta = meta(if dwarf { "dwarf" } else { "fp" });
        check(recording_bytes(&meta, &[records]));
    }
}

#[test]
fn garbage_symbols_chunk_is_a_note() {
    let mut bytes = recording_bytes(&meta("fp"), &[valid_records()]);
    bytes.extend(encode_chunk(ChunkKind::SYMBOLS, b"{not json"));
    let p = resolve(&open(bytes), &ResolveOptions::default()).unwrap();
    assert!(
        p.notes.iter().any(|n| n.contains("embedded symbols")),
        "{:?}",
        p.notes
    );
    assert_eq!(p.samples.len(), 2);
}

#[test]
fn a_compressed_symbols_chunk_that_does_not_decompress_is_a_note() {
    let mut frame = zstd::bulk::compress(br#"{"version":1}"#, 3).unwrap();
    let last = frame.len() - 1;
    frame[last] ^= 0xff;
    for payload in [frame, b"not zstd".to_vec()] {
        let mut bytes = recording_bytes(&meta("fp"), &[valid_records()]);
        bytes.extend(encode_chunk(ChunkKind::SYMBOLS_ZSTD, &payload));
        let p = resolve(&open(bytes), &ResolveOptions::default()).unwrap();
        assert!(
            p.notes.iter().any(|n| n.contains("embedded symbols")),
            "{:?}",
            p.notes
        );
        assert_eq!(p.samples.len(), 2);
    }
}

/// A frame chain that loops on itself (Mono's AOT code without frame pointers) repeats one
/// unmapped address dozens of times: it is kept once, with a note; a recursion through a named
/// frame is not touched.
#[test]
fn a_frame_chain_looping_on_itself_is_cut() {
    let garbage = 0x55a5_bd0f_ad88u64;
    let mut chain = vec![0x1234u64];
    chain.extend(std::iter::repeat_n(garbage, 12));
    let records = vec![
        comm(PID, PID, "mono", true, 1),
        sample(PID, PID, 1_000, 1, &chain, &[], None, &[]),
    ];
    let recording = open(recording_bytes(&meta("fp"), &records));
    let profile = resolve(&recording, &ResolveOptions::default()).unwrap();
    let stack = folded(&profile).join("\n");
    assert_eq!(stack.matches("0x55a5bd0fad88").count(), 1, "{stack}");
    assert!(
        profile
            .notes
            .iter()
            .any(|n| n.contains("loop on themselves")),
        "{:?}",
        profile.notes
    );
}

/// RECORDS_ORDER marks are hints from the recorder; hostile ones (too short, going backwards,
/// 0, u64::MAX, before any record) must not lose, repeat or panic: every record is handed over
/// once, and time order holds wherever the marks told the truth.
#[test]
fn hostile_order_marks_lose_nothing() {
    let meta = meta("fp");
    let records: Vec<Vec<u8>> = (0..40u64)
        .map(|i| comm(PID, PID, "t", false, 1000 - i * 7 % 300))
        .collect();
    let marks: [&[u8]; 6] = [
        &u64::MAX.to_le_bytes(),
        &0u64.to_le_bytes(),
        b"short",
        &900u64.to_le_bytes(),
        &100u64.to_le_bytes(),
        &[0xff; 8],
    ];
    let mut bytes = recording_bytes(&meta, &[]);
    bytes.extend(encode_chunk(ChunkKind::RECORDS_ORDER, marks[0]));
    for (i, chunk) in records.chunks(7).enumerate() {
        bytes.extend(encode_chunk(ChunkKind::PERF_RECORDS, &chunk.concat()));
        bytes.extend(encode_chunk(
            ChunkKind::RECORDS_ORDER,
            marks[i % marks.len()],
        ));
    }
    let rec = open(bytes);
    let mut seen = Vec::new();
    let errors = jprof::symbolize::records::in_time_order(&rec, |t| seen.push((t.time, t.offset)));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(seen.len(), records.len());
    let mut offsets: Vec<usize> = seen.iter().map(|s| s.1).collect();
    offsets.sort_unstable();
    offsets.dedup();
    assert_eq!(
        offsets.len(),
        records.len(),
        "a record was handed over twice"
    );
    // Without marks the same records come out fully sorted.
    let mut plain = recording_bytes(&meta, &[]);
    plain.extend(encode_chunk(ChunkKind::PERF_RECORDS, &records.concat()));
    let mut sorted = Vec::new();
    jprof::symbolize::records::in_time_order(&open(plain), |t| sorted.push(t.time));
    assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(sorted.len(), records.len());
    // Resolving with the hostile marks works too.
    let _ = resolve(&rec, &ResolveOptions::default());
}
