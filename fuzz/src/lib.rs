//! Fuzz target bodies, shared by the cargo-fuzz targets (`fuzz_targets/`) and the
//! stable-toolchain driver (`src/bin/stable-fuzz.rs`). Each body must return normally on any
//! input: a panic is the bug being looked for.

use std::path::PathBuf;

use jprof::format::perf::sample_type;
use jprof::format::recording::{encode_chunk, file_header, ChunkKind};
use jprof::recording::{EventConfig, HostFacts, Meta, Recording};

/// The recording reader, fed two ways: the input as a whole file (container, chunk CRCs, JSON
/// chunks), and the input as the perf records of an otherwise valid recording, so that the
/// record parser is reached without the fuzzer having to forge CRC32s. The first 16 bytes
/// choose the sample layout in that second form.
pub fn recording_reader(data: &[u8]) {
    read_everything(data.to_vec());
    if let (Some(layout), Some(records)) = (data.get(..16), data.get(16..)) {
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&layout[i..i + 8]);
            u64::from_le_bytes(b)
        };
        read_everything(wrap_records(word(0), word(8), records));
        // The same records compressed, as the recorder writes them; the input's last byte,
        // when odd, also damages the frame (under a valid CRC) at a place the input chooses.
        if let Ok(mut packed) = zstd::bulk::compress(records, 1) {
            if let Some(&last) = data.last() {
                if last & 1 == 1 && !packed.is_empty() {
                    let at = (last as usize * 31) % packed.len();
                    packed[at] ^= last;
                }
            }
            let mut file = wrap_records(word(0), word(8), &[]);
            file.extend(encode_chunk(ChunkKind::PERF_RECORDS_ZSTD, &packed));
            read_everything(file);
        }
    }
}

/// Opens a recording from bytes and decodes every record it holds.
fn read_everything(bytes: Vec<u8>) {
    let Ok(recording) = Recording::from_bytes(PathBuf::from("fuzz.data"), bytes) else {
        return;
    };
    let layout = recording.layout();
    for raw in recording.perf_records().flatten() {
        let _ = layout.parse(&raw);
        let _ = layout.time_of(&raw);
    }
    // The windowed time-order reader (RECORDS_ORDER marks, lazily decompressed chunks).
    let mut handed = 0usize;
    let _ = jprof::symbolize::records::in_time_order(&recording, |_| handed += 1);
    let _ = recording.completeness();
}

/// The sample layout jprof records with (see `record/`), the most useful one to fuzz.
pub const JPROF_SAMPLE_TYPE: u64 = sample_type::IP
    | sample_type::TID
    | sample_type::TIME
    | sample_type::CPU
    | sample_type::PERIOD
    | sample_type::CALLCHAIN
    | sample_type::REGS_USER
    | sample_type::STACK_USER;

/// A well-formed recording whose PERF_RECORDS chunk is `records`, decoded with the given
/// `sample_type` and user register mask.
pub fn wrap_records(sample_type: u64, regs_user_mask: u64, records: &[u8]) -> Vec<u8> {
    let meta = Meta {
        jprof_version: "fuzz".into(),
        command: vec!["fuzz".into()],
        attached_pid: None,
        target_pid: Some(1),
        targets: Default::default(),
        host: HostFacts::default(),
        event: EventConfig {
            event: "cycles".into(),
            event_note: None,
            frequency_hz: 999,
            sample_type,
            regs_user_mask,
            stack_user_bytes: 1024,
            call_graph: jprof::recording::CallGraph::FramePointers,
            kernel_callchains: true,
            clockid: 1,
            off_cpu_ids: Vec::new(),
            off_cpu_min_ns: 0,
        },
        start_unix_ns: 0,
    };
    let meta = serde_json::to_vec(&meta).unwrap_or_default();
    let mut file = file_header().to_vec();
    file.extend(encode_chunk(ChunkKind::META, &meta));
    file.extend(encode_chunk(ChunkKind::PERF_RECORDS, records));
    file
}

/// Byte order chosen by a byte of the input.
fn endian_of(b: u8) -> jprof::format::Endian {
    if b & 1 == 0 {
        jprof::format::Endian::Little
    } else {
        jprof::format::Endian::Big
    }
}

/// The jitdump parser, fed three ways: the input as a whole file (header checks), the input as
/// the records after a valid header (so the record bodies are reached without forging the
/// magic), and the record stream from offsets the input chooses (a tailer resumes anywhere).
/// The JIT index then builds from what was parsed and names a few addresses.
pub fn jitdump_parser(data: &[u8]) {
    use jprof::format::jitdump;
    if let Ok(header) = jitdump::parse_header(data) {
        let batch = jitdump::parse_records(data, &header, 0);
        assert!(batch.resume_at <= data.len().max(header.records_start()));
    }
    let Some((&choice, records)) = data.split_first() else {
        return;
    };
    let endian = endian_of(choice);
    let mut file = jprof::format::jitdump_write::header(4242, 1, choice & 2 != 0);
    if endian == jprof::format::Endian::Big {
        // The writer emits little-endian; swap the header's fields for a big-endian file.
        for field in [0..4, 4..8, 8..12, 12..16, 16..20, 20..24] {
            file[field].reverse();
        }
        file[24..32].reverse();
        file[32..40].reverse();
    }
    file.extend_from_slice(records);
    if let Ok(header) = jitdump::parse_header(&file) {
        let batch = jitdump::parse_records(&file, &header, 0);
        assert!(batch.resume_at <= file.len());
        for r in &batch.records {
            assert!(r.offset < file.len());
        }
    }
    for (i, window) in records.chunks(7).take(4).enumerate() {
        let from = window.first().map_or(0, |&b| b as usize * (i + 1)) % (records.len() + 1);
        let batch = jitdump::parse_record_stream(&records[from..], from, endian);
        assert!(batch.resume_at >= from && batch.resume_at <= records.len());
    }
    let mut index = jprof::symbolize::jit_index::JitIndex::default();
    let clock = jprof::timeline::ClockConversion::default();
    index.add_jitdump(4242, "/tmp/jit-4242.dump", &file, &clock);
    for addr in addresses(records) {
        let _ = index.frames(4242, addr, u64::MAX);
        let _ = index.frames(4242, addr, 0);
    }
}

/// A few addresses taken from the input, so lookups hit the code it declared.
fn addresses(data: &[u8]) -> Vec<u64> {
    data.chunks_exact(8)
        .take(8)
        .map(|w| {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            u64::from_le_bytes(b)
        })
        .collect()
}

/// The perf map parser from the start and from offsets the input chooses; then the JIT index
/// built from the map names a few addresses.
pub fn perf_map_parser(data: &[u8]) {
    use jprof::format::perf_map;
    let batch = perf_map::parse(data, 0);
    assert!(batch.resume_at <= data.len());
    for e in &batch.entries {
        assert!(e.offset < data.len());
    }
    for &b in data.iter().take(4) {
        let from = (b as usize * 7) % (data.len() + 1);
        let batch = perf_map::parse(data, from);
        assert!(batch.resume_at >= from && batch.resume_at <= data.len());
    }
    let mut index = jprof::symbolize::jit_index::JitIndex::default();
    index.add_perf_map(
        7,
        "/tmp/perf-7.map",
        data,
        &[(0, 1), (data.len() as u64 / 2, 5)],
    );
    for e in batch.entries.iter().take(8) {
        let _ = index.frames(7, e.start, 3);
        let _ = index.frames(7, e.start.wrapping_add(e.size / 2), 9);
    }
}

/// JVM address the `j9_metadata` target's images were copied from.
pub const J9_METADATA_ADDR: u64 = 0x7f00_1000_0000;

/// The OpenJ9 metadata decoder: the first byte chooses the build (struct size, eyecatchers,
/// stack-map alignment), the rest is the image copied from [`J9_METADATA_ADDR`]; then chains
/// are looked up at PCs around the body the image declares.
pub fn j9_metadata(data: &[u8]) {
    use jprof::format::j9;
    let Some((&choice, image)) = data.split_first() else {
        return;
    };
    let eyecatchers = choice & 1 != 0;
    let struct_size = [232, 224, 216, 208, 200, 192][(choice as usize >> 1) % 6];
    let capture = j9::Capture {
        metadata_addr: J9_METADATA_ADDR,
        struct_size: if eyecatchers && struct_size < 216 {
            struct_size + 24
        } else {
            struct_size
        },
        eyecatchers,
        align_stack_maps: choice & 0x80 != 0,
        base: 1,
    };
    let Ok(md) = j9::decode(image, capture) else {
        return;
    };
    let names = j9::MethodNames::new();
    let start = md.header.start_pc;
    let span = md.header.end_pc.wrapping_sub(start).min(1 << 20);
    for o in (0..span.saturating_add(2)).step_by((span / 32).max(1) as usize) {
        let _ = md.lookup(start.wrapping_add(o), &names);
        let _ = md.lookup_return_address(start.wrapping_add(o), &names);
    }
    let _ = md.header.fields();
    let _ = md.methods();
}

/// The .mlpd decoder three ways: the input as a whole file; the input as the events of one
/// buffer behind a valid header whose data version the first byte picks (1 or 13–17); and the
/// file fed incrementally in pieces, which must decode the same events as the whole.
pub fn mlpd_parser(data: &[u8]) {
    use jprof::format::mlpd;
    let mut whole = 0u64;
    let _ = mlpd::decode_all(data, &mut |_: &mlpd::BufferHeader, _: &mlpd::Event<'_>| {
        whole += 1
    });
    let Some((&choice, events)) = data.split_first() else {
        return;
    };
    let version = [1u8, 13, 14, 15, 16, 17][choice as usize % 6];
    let file = mlpd_file(version, events);
    let mut counted = 0u64;
    let decoder = mlpd::decode_all(&file, &mut |_: &mlpd::BufferHeader, e: &mlpd::Event<'_>| {
        assert!(e.offset < file.len());
        counted += 1;
    })
    .expect("a valid header");
    assert!(decoder.consumed() <= file.len());
    let mut decoder = mlpd::Decoder::new();
    let mut pieces = 0u64;
    let step = 1 + choice as usize % 97;
    let mut end = 0;
    while end < file.len() {
        end = (end + step).min(file.len());
        decoder
            .feed(
                &file[..end],
                &mut |_: &mlpd::BufferHeader, _: &mlpd::Event<'_>| pieces += 1,
            )
            .expect("a valid header");
    }
    assert_eq!(pieces, counted, "incremental and whole decoding differ");
}

/// A header of `version` (3.0 layout for 13+, the 2010 layout for 1) and one buffer of `events`.
pub fn mlpd_file(version: u8, events: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&0x4D50_5A01u32.to_le_bytes());
    if version == 1 {
        f.extend_from_slice(&[0, 1, 1, 8]);
        f.extend_from_slice(&[0u8; 24]);
    } else {
        f.extend_from_slice(&[3, 0, version, 8]);
        f.extend_from_slice(&[0u8; 16 + 4 + 4 + 4]);
        f.extend_from_slice(&[0u8; 2]);
        for s in ["log:fuzz\0", "x86-64\0", "linux\0"] {
            f.extend_from_slice(&(s.len() as u32).to_le_bytes());
            f.extend_from_slice(s.as_bytes());
        }
    }
    f.extend_from_slice(&0x4D50_4C01u32.to_le_bytes());
    f.extend_from_slice(&(events.len() as u32).to_le_bytes());
    for base in [
        1_000_000u64,
        0x7f00_0000_0000,
        0x7f00_0000,
        0x7f12_3456_7000,
        0x5555_0000,
    ] {
        f.extend_from_slice(&base.to_le_bytes());
    }
    f.extend_from_slice(events);
    f
}

/// The XRay readers, fed three ways: the input as a whole log (header checks), and the input as
/// the body after a valid FDR or basic header whose version and byte order the first byte
/// chooses (so the record state machines are reached). Every decoded log is replayed into
/// stacks and accounted; the input is also read as an ELF file's instrumentation map.
pub fn xray_parser(data: &[u8]) {
    use jprof::format::xray::{self, write};
    replay_log(data);
    let _ = xray::instr_map::parse(data);
    let Some((&choice, body)) = data.split_first() else {
        return;
    };
    let endian = endian_of(choice);
    let fdr = choice & 2 != 0;
    let version = if fdr {
        1 + (choice >> 2) as u16 % 5
    } else {
        1 + (choice >> 2) as u16 % 3
    };
    let mut tail = [0u8; 16];
    tail[..8].copy_from_slice(&(64 + (choice as u64 >> 5) * 64).to_le_bytes());
    let mut file = write::header(version, fdr, endian, 2_000_000_000, tail);
    file.extend_from_slice(body);
    replay_log(&file);
}

fn replay_log(bytes: &[u8]) {
    let Ok(log) = jprof::format::xray::parse(bytes) else {
        return;
    };
    for p in &log.problems {
        assert!(p.offset <= bytes.len());
    }
    let replay = jprof::input::xray::replay::Replay::run(&log.events);
    let accounting = jprof::input::xray::account::Accounting::run(&log.events, |_, _| true);
    assert_eq!(accounting.calls, replay.calls.len());
    for row in accounting.rows(log.header.cycle_frequency, |f| f.to_string()) {
        assert!(row.min <= row.max);
    }
    for (_, call) in replay.calls.iter().take(16) {
        let _ = replay.tree.path(call.node);
    }
}

/// `jprof report -i perf.data`'s reader (header and section checks, linux-perf-data, the
/// import), called without the guard that turns a dependency's panic into an error, so the
/// fuzzer sees every panic.
pub fn perf_data(data: &[u8]) {
    let options = jprof::input::perf_data::ImportOptions {
        search_dirs: Vec::new(),
    };
    let _ =
        jprof::input::perf_data::import_bytes_unguarded(std::path::Path::new("fuzz.data"), data, &options);
}
