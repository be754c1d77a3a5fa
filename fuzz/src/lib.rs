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
        host: HostFacts::default(),
        event: EventConfig {
            event: "cycles".into(),
            event_note: None,
            frequency_hz: 999,
            sample_type,
            regs_user_mask,
            stack_user_bytes: 1024,
            call_graph: "fp".into(),
            kernel_callchains: true,
            clockid: 1,
        },
        start_unix_ns: 0,
    };
    let meta = serde_json::to_vec(&meta).unwrap_or_default();
    let mut file = file_header().to_vec();
    file.extend(encode_chunk(ChunkKind::META, &meta));
    file.extend(encode_chunk(ChunkKind::PERF_RECORDS, records));
    file
}
