//! Stable-toolchain fallback for cargo-fuzz: runs the same target bodies over generated inputs
//! for a number of seconds, from a fixed seed so a crash reproduces. No coverage guidance, so it
//! finds less than libFuzzer; it exists so `cargo xtask fuzz` does something useful without
//! nightly. Usage: `stable-fuzz TARGET SECONDS [SEED]`.

use std::time::{Duration, Instant};

use jprof_fuzz::{
    j9_metadata, jitdump_parser, mlpd_parser, perf_data, perf_map_parser, recording_reader,
    wrap_records, xray_parser, J9_METADATA_ADDR, JPROF_SAMPLE_TYPE,
};

/// The tests' OpenJ9 metadata image writer: well-formed bodies to damage.
#[path = "../../../tests/suite/j9_support.rs"]
mod j9_support;

use fastrand::Rng;

/// A number below `n`, or 0 when `n` is 0.
trait Below {
    fn below(&mut self, n: usize) -> usize;
}

impl Below for Rng {
    fn below(&mut self, n: usize) -> usize {
        self.usize(..n.max(1))
    }
}

/// A plausible perf record: a valid header (kind, misc, size) and a random body, so the
/// parser gets past the framing and into the record bodies.
fn record(rng: &mut Rng, out: &mut Vec<u8>) {
    const KINDS: [u32; 12] = [1, 2, 3, 4, 5, 6, 7, 9, 10, 13, 17, 99];
    let kind = KINDS[rng.below(KINDS.len())];
    let body_len = match rng.below(4) {
        0 => rng.below(16),
        1 => rng.below(64),
        _ => rng.below(400),
    } & !7;
    let misc = rng.u64(..) as u16 & if rng.below(2) == 0 { 0x7 } else { 0xffff };
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&misc.to_le_bytes());
    out.extend_from_slice(&((body_len + 8) as u16).to_le_bytes());
    for _ in 0..body_len {
        // Small numbers are the interesting ones for lengths and counts (nr, size, dyn_size).
        out.push(match rng.below(4) {
            0 => 0,
            1 => rng.below(8) as u8,
            _ => rng.u64(..) as u8,
        });
    }
}

/// One input for `recording_reader`: layout words, then records; sometimes mutated further.
fn input(rng: &mut Rng) -> Vec<u8> {
    let mut data = Vec::new();
    let sample_type = if rng.below(2) == 0 {
        JPROF_SAMPLE_TYPE
    } else {
        rng.u64(..) & 0x3_ffff
    };
    let regs = if rng.below(2) == 0 {
        0x1c0
    } else {
        rng.u64(..)
    };
    data.extend_from_slice(&sample_type.to_le_bytes());
    data.extend_from_slice(&regs.to_le_bytes());
    for _ in 0..rng.below(20) {
        record(rng, &mut data);
    }
    match rng.below(6) {
        // A whole recording with flipped bytes: exercises the container and the JSON.
        0 => {
            let mut file = wrap_records(sample_type, regs, &data[16..]);
            for _ in 0..=rng.below(4) {
                let i = rng.below(file.len());
                file[i] ^= 1 << rng.below(8);
            }
            file
        }
        // Cut off anywhere.
        1 => {
            let keep = rng.below(data.len() + 1);
            data.truncate(keep);
            data
        }
        _ => data,
    }
}

/// A byte that is often a small number: lengths, counts and indexes are the interesting ones.
fn small_byte(rng: &mut Rng) -> u8 {
    match rng.below(4) {
        0 => 0,
        1 => rng.below(8) as u8,
        _ => rng.u64(..) as u8,
    }
}

/// One input for `jitdump_parser`: a choice byte (endianness, TSC flag), then records with
/// plausible prefixes (known ids, sizes mostly right) and bodies of small numbers and text.
fn jitdump_input(rng: &mut Rng) -> Vec<u8> {
    const IDS: [u32; 11] = [
        0,
        1,
        2,
        3,
        4,
        827_346_259,
        827_346_260,
        827_346_261,
        0x444D_394A,
        5,
        77,
    ];
    let mut data = vec![rng.u64(..) as u8 & 2];
    for _ in 0..rng.below(12) {
        let id = IDS[rng.below(IDS.len())];
        let body_len = match rng.below(3) {
            0 => rng.below(24),
            1 => rng.below(96),
            _ => rng.below(400),
        };
        let total = match rng.below(8) {
            0 => rng.below(40) as u32,
            1 => rng.u64(..) as u32,
            _ => (16 + body_len) as u32,
        };
        data.extend_from_slice(&id.to_le_bytes());
        data.extend_from_slice(&total.to_le_bytes());
        data.extend_from_slice(&rng.u64(..).to_le_bytes());
        for _ in 0..body_len {
            let b = match rng.below(6) {
                0 => b'a' + rng.below(26) as u8,
                1 => 0,
                _ => small_byte(rng),
            };
            data.push(b);
        }
    }
    if rng.below(4) == 0 {
        let keep = rng.below(data.len() + 1);
        data.truncate(keep);
    }
    data
}

/// One input for `perf_map_parser`: lines in every producer's style, with damage.
fn perf_map_input(rng: &mut Rng) -> Vec<u8> {
    let mut text = String::new();
    for _ in 0..rng.below(30) {
        let start = rng.u64(..) >> rng.below(64);
        let size = rng.u64(..) >> (32 + rng.below(32));
        match rng.below(8) {
            0 => text.push_str(&format!("0x{start:016x} 0x{size:016x} Interpreter\n")),
            1 => text.push_str(&format!(
                "{start:X} {size:X} java/lang/String.hashCode()I\n"
            )),
            2 => text.push_str(&format!("{start:x}\t{size:x}\tJS:*main /app.js:1:1\r\n")),
            3 => text.push_str(&format!("  {start:x} {size:x}\n")),
            4 => text.push('\n'),
            5 => text.push_str(&format!("0x {size:x} zz\n")),
            6 => text.push_str(&format!("{start:x} {size:x} \u{fffd}name with spaces")),
            _ => text.push_str(&format!("{start:x} 0X{size:x} f\n")),
        }
    }
    let mut data = text.into_bytes();
    for _ in 0..rng.below(3) {
        if !data.is_empty() {
            let i = rng.below(data.len());
            data[i] = rng.u64(..) as u8;
        }
    }
    data
}

/// One input for `j9_metadata`: a build choice byte, then a well-formed image of one of the
/// test bodies with a few bytes changed or cut off.
fn j9_input(rng: &mut Rng) -> Vec<u8> {
    let mut body = if rng.below(2) == 0 {
        j9_support::three_levels()
    } else {
        j9_support::wide_body()
    };
    body.metadata_addr = J9_METADATA_ADDR;
    // The choice byte's encoding (see `j9_metadata`): 0x01 = eyecatchers; 232 is index 0,
    // 192 (no eyecatchers) index 5.
    let choice = if body.eyecatchers { 0x01 } else { 5 << 1 };
    let mut data = vec![choice];
    data.extend(body.build());
    for _ in 0..rng.below(6) {
        let i = 1 + rng.below(data.len() - 1);
        data[i] = small_byte(rng);
    }
    if rng.below(4) == 0 {
        let keep = rng.below(data.len() + 1);
        data.truncate(keep);
    }
    data
}

/// One input for `mlpd_parser`: a version choice byte, then events that start with plausible
/// event bytes (every type and sub-type) followed by LEB128 numbers and strings.
fn mlpd_input(rng: &mut Rng) -> Vec<u8> {
    let mut data = vec![rng.u64(..) as u8];
    for _ in 0..rng.below(40) {
        data.push((rng.below(11) as u8) | ((rng.below(12) as u8) << 4));
        for _ in 0..rng.below(8) {
            match rng.below(5) {
                0 => data.extend_from_slice(b"Name:M ()\0"),
                1 => data.extend_from_slice(&[0x80 | rng.u64(..) as u8, rng.u64(..) as u8 & 0x7f]),
                2 => data.push(0x7f),
                _ => data.push(small_byte(rng) & 0x7f),
            }
        }
    }
    if rng.below(4) == 0 && data.len() > 1 {
        let i = 1 + rng.below(data.len() - 1);
        data[i] = rng.u64(..) as u8;
    }
    data
}

/// One input for `xray_parser`: a choice byte (mode, version, byte order), then a mix of FDR
/// metadata records (known kinds, small sizes), function records and basic-mode records.
fn xray_input(rng: &mut Rng) -> Vec<u8> {
    let mut data = vec![rng.u64(..) as u8];
    for _ in 0..rng.below(40) {
        match rng.below(4) {
            0 => {
                let kind = rng.below(11) as u8;
                data.push(if rng.below(2) == 0 {
                    (kind << 1) | 1
                } else {
                    0x80 | kind
                });
                for _ in 0..15 {
                    data.push(small_byte(rng));
                }
            }
            1 => {
                let word = ((rng.below(5) as u32) << 1) | ((rng.below(12) as u32) << 4);
                data.extend_from_slice(&word.to_le_bytes());
                data.extend_from_slice(&(rng.u64(..) as u32 >> rng.below(32)).to_le_bytes());
            }
            2 => {
                data.extend_from_slice(&[0, 0, 0, rng.below(5) as u8]);
                data.extend_from_slice(&(rng.below(12) as u32).to_le_bytes());
                data.extend_from_slice(&rng.u64(..).to_le_bytes());
                data.extend_from_slice(&[7, 0, 0, 0, 7, 0, 0, 0]);
                data.extend_from_slice(&rng.u64(..).to_le_bytes());
            }
            _ => data.push(small_byte(rng)),
        }
    }
    if rng.below(4) == 0 {
        let keep = rng.below(data.len() + 1);
        data.truncate(keep);
    }
    data
}

type Target = (&'static str, fn(&mut Rng) -> Vec<u8>, fn(&[u8]));

const TARGETS: [Target; 7] = [
    ("recording_reader", input, recording_reader),
    ("jitdump_parser", jitdump_input, jitdump_parser),
    ("perf_map_parser", perf_map_input, perf_map_parser),
    ("j9_metadata", j9_input, j9_metadata),
    ("mlpd_parser", mlpd_input, mlpd_parser),
    ("xray_parser", xray_input, xray_parser),
    ("perf_data", perf_data_input, perf_data),
];

/// A real perf.data (perf record -g of a JVM), cut into its parts for [`perf_data_input`].
const PERF_DATA: &[u8] = include_bytes!("../../../tests/fixtures/shared/java/perf-map.data");

/// One input for `perf_data`: the fixture's header and attributes, some of its real records
/// and some generated ones, with the header's sizes patched to fit; then, sometimes, header
/// bytes flipped (section offsets and sizes, feature bits) or the file cut short.
fn perf_data_input(rng: &mut Rng) -> Vec<u8> {
    if rng.below(4) == 0 {
        return perf_data_features_input(rng);
    }
    let word = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&PERF_DATA[at..at + 8]);
        u64::from_le_bytes(b) as usize
    };
    let (data_at, data_size) = (word(40), word(48));
    let mut out = PERF_DATA[..data_at].to_vec();
    let records = &PERF_DATA[data_at..data_at + data_size];
    let mut at = rng.below(records.len() / 2) & !7;
    // Real records from a random place: walk to a record boundary from the start.
    let mut pos = 0;
    while pos < at {
        let size = u16::from_le_bytes([records[pos + 6], records[pos + 7]]) as usize;
        pos += size.max(8);
    }
    at = pos;
    for _ in 0..rng.below(40) {
        if at + 8 > records.len() {
            break;
        }
        let size = u16::from_le_bytes([records[at + 6], records[at + 7]]) as usize;
        if size < 8 || at + size > records.len() {
            break;
        }
        out.extend_from_slice(&records[at..at + size]);
        at += size;
    }
    for _ in 0..rng.below(6) {
        record(rng, &mut out);
    }
    let size = (out.len() - data_at) as u64;
    out[48..56].copy_from_slice(&size.to_le_bytes());
    out[72..104].fill(0);
    match rng.below(5) {
        0 => {
            for _ in 0..=rng.below(3) {
                let i = rng.below(data_at);
                out[i] = match rng.below(3) {
                    0 => 0xff,
                    1 => small_byte(rng),
                    _ => out[i] ^ (1 << rng.below(8)),
                };
            }
        }
        1 => {
            let keep = rng.below(out.len() + 1);
            out.truncate(keep);
        }
        2 => out[72 + rng.below(32)] = rng.u64(..) as u8,
        _ => {}
    }
    out
}

/// A small whole perf.data (header, records and 16 feature sections), from the seeds.
const PERF_DATA_SMALL: &[u8] = include_bytes!("../../seeds/perf_data/sleep.data");

/// The small perf.data with a few words of its feature sections (after the records) set to
/// counts and sizes the fuzzer likes: all ones, large, small.
fn perf_data_features_input(rng: &mut Rng) -> Vec<u8> {
    let mut out = PERF_DATA_SMALL.to_vec();
    let word = |at: usize| u64::from_le_bytes(out[at..at + 8].try_into().unwrap_or_default());
    let data_end = (word(40) + word(48)) as usize;
    for _ in 0..=rng.below(3) {
        let at = data_end + (rng.below(out.len() - data_end - 4) & !3);
        let word: u32 = match rng.below(4) {
            0 => u32::MAX,
            1 => 1 << rng.below(32),
            2 => small_byte(rng).into(),
            _ => rng.u64(..) as u32,
        };
        out[at..at + 4].copy_from_slice(&word.to_le_bytes());
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let target = args
        .first()
        .map(String::as_str)
        .unwrap_or("recording_reader");
    let seconds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(60);
    let seed: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x006a_7072_6f66);
    let Some(&(_, generate, body)) = TARGETS.iter().find(|t| t.0 == target) else {
        let known: Vec<&str> = TARGETS.iter().map(|t| t.0).collect();
        eprintln!(
            "stable-fuzz: unknown target {target:?} (known: {})",
            known.join(", ")
        );
        std::process::exit(2);
    };
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut rng = Rng::with_seed(seed);
    let mut executions = 0u64;
    while Instant::now() < deadline {
        for _ in 0..1000 {
            let data = generate(&mut rng);
            // A panic here aborts with the backtrace; rerun with the same seed to reproduce.
            body(&data);
            executions += 1;
        }
    }
    println!("stable-fuzz {target}: {executions} inputs in {seconds} s (seed {seed}), no panic");
}
