//! `jprof report -i perf.data`: turns a perf.data written by `perf record -k 1 -g` into an
//! in-memory jprof [`Recording`] (made from its parts: no container is encoded and parsed
//! back), so the usual symbolizer and writers run on it unchanged. The kernel records are
//! handed over byte for byte as the kernel wrote them (read with `linux-perf-data`); the
//! jitdumps its MMAP records name and the perf maps of its processes are found on disk and
//! stored as side files, which replaces `perf inject --jit`. See `docs/perf-data-import.md`.

pub(crate) mod perf_header;
pub(crate) mod side_files;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use linux_perf_data::linux_perf_event_reader::{
    AttrFlags, ClockId, PerfClock, PerfEventAttr, SampleFormat, SamplingPolicy,
};
use linux_perf_data::{PerfFileReader, PerfFileRecord};

use crate::error::{Error, Result};
use crate::format::jitdump;
use crate::format::perf::{sample_type, RawRecord, Record, RecordKind};
use crate::format::recording::{encode_side_piece, ChunkKind, SideKind, SidePiece};
use crate::format::Cursor;
use crate::recording::{EventConfig, HostFacts, Meta, Recording, Summary};
use crate::timeline::ClockConversion;

use side_files::{candidates, list, read_first, trusted_owners, SideFile};

/// How to import a perf.data.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Directories where side files are looked for by file name when they are not at the path
    /// the recording names (e.g. the files were copied from another machine).
    pub search_dirs: Vec<PathBuf>,
}

/// Whether the file starts like a perf.data (either byte order, so a big-endian file gets a
/// clear refusal instead of "not a jprof recording").
pub fn is_perf_data(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    crate::foreign_file::open_named(path).is_ok_and(|mut f| f.read_exact(&mut magic).is_ok())
        && (&magic == perf_header::MAGIC || &magic == perf_header::MAGIC_BIG_ENDIAN)
}

/// Reads a perf.data file and its side files into a recording.
pub fn import(path: &Path, options: &ImportOptions) -> Result<Recording> {
    let file = crate::foreign_file::named_file_bytes(path).map_err(|e| e.into_error(path))?;
    import_bytes(path, &file, options)
}

/// What the scan of the records found.
#[derive(Default)]
struct Scan {
    samples: u64,
    lost_records: u64,
    lost_samples: u64,
    threads: BTreeSet<u32>,
    processes: BTreeSet<u32>,
    /// (pid, recorded path) of every jitdump marker mapping.
    jitdumps: BTreeSet<(u32, String)>,
    first_time: Option<u64>,
    last_time: u64,
    /// Records of events whose layout differs from the first event's, by event index.
    skipped: BTreeMap<usize, u64>,
    undecodable: u64,
}

impl Scan {
    /// Notes the records left out: those of events with another layout, and undecodable ones.
    fn note_skipped(
        &self,
        attrs: &[linux_perf_data::AttributeDescription],
        first_event: &str,
        notes: &mut Vec<String>,
    ) {
        for (index, count) in &self.skipped {
            let name = attrs.get(*index).and_then(|a| a.name.as_deref());
            notes.push(format!(
                "{count} records of event {} were skipped: its sample layout differs from the \
                 first event's ({first_event})",
                name.unwrap_or("?"),
            ));
        }
        if self.undecodable > 0 {
            notes.push(format!(
                "{} records of the perf.data could not be decoded",
                self.undecodable
            ));
        }
    }

    /// The recording's summary: the counts the scan found, and `notes`.
    fn summary(&self, notes: Vec<String>) -> Summary {
        Summary {
            samples: self.samples,
            lost_records: self.lost_records,
            lost_samples: self.lost_samples,
            threads: self.threads.len() as u64,
            processes: self.processes.len() as u64,
            start_time: self.first_time.unwrap_or(0),
            end_time: self.last_time,
            wall_duration_ns: self.last_time.saturating_sub(self.first_time.unwrap_or(0)),
            stopped_by: "imported from perf.data".to_string(),
            notes,
            ..Default::default()
        }
    }

    fn note_record(&mut self, record: &Record<'_>) {
        match record {
            Record::Sample(s) => {
                self.samples += 1;
                self.threads.insert(s.tid);
                self.processes.insert(s.pid);
                self.first_time = Some(self.first_time.map_or(s.time, |t| t.min(s.time)));
                self.last_time = self.last_time.max(s.time);
            }
            Record::Mmap2 { pid, filename, .. } | Record::Mmap { pid, filename, .. }
                if jitdump::is_jitdump_path(filename).is_some() =>
            {
                self.jitdumps.insert((*pid, filename.clone()));
            }
            Record::Comm { pid, .. } | Record::Fork { pid, .. } => {
                self.processes.insert(*pid);
            }
            // Counts from the file: a damaged one must not overflow them.
            Record::Lost { lost, .. } => {
                self.lost_records = self.lost_records.saturating_add(*lost)
            }
            Record::LostSamples { lost, .. } => {
                self.lost_samples = self.lost_samples.saturating_add(*lost)
            }
            _ => {}
        }
    }
}

/// The same as [`import`], for a file already in memory; `path` names it in messages.
pub fn import_bytes(path: &Path, file: &[u8], options: &ImportOptions) -> Result<Recording> {
    // linux-perf-data sizes allocations from the header: a hostile or damaged header must not
    // reach it (an allocation failure aborts the process), and a panic inside it becomes an
    // error that names the file.
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let imported = std::panic::catch_unwind(|| import_checked(path, file, options));
    std::panic::set_hook(quiet);
    imported.unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Error::Other(format!(
            "{}: not a readable perf.data file (the reader failed: {why})",
            path.display()
        )))
    })
}

/// [`import_bytes`] without its panic guard: for the fuzzer, which must see every panic.
#[doc(hidden)]
pub fn import_bytes_unguarded(
    path: &Path,
    file: &[u8],
    options: &ImportOptions,
) -> Result<Recording> {
    import_checked(path, file, options)
}

fn import_checked(path: &Path, file: &[u8], options: &ImportOptions) -> Result<Recording> {
    let mut notes = Vec::new();
    let (data, file) = without_damaged_features(path, file, &mut notes)?;
    let input = without_damaged_records(path, &file, &data, &mut notes);
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = open_reader(path, &file, &input, &data, &mut notes)?;

    let attrs = perf_file.event_attributes().to_vec();
    let Some(first) = attrs.first() else {
        return Err(Error::Other(format!(
            "{}: the perf.data describes no event",
            path.display()
        )));
    };
    let event = event_config(&first.attr, first.name.as_deref(), path)?;
    let same_layout: Vec<bool> = attrs
        .iter()
        .map(|a| {
            a.attr.sample_format.bits() == event.sample_type
                && a.attr.sample_regs_user == event.regs_user_mask
                && a.attr.flags.contains(AttrFlags::SAMPLE_ID_ALL)
        })
        .collect();
    let (records, scan) = copy_perf_records(
        &mut perf_file,
        &mut record_iter,
        &event,
        &same_layout,
        input.len(),
        path,
        &mut notes,
    );
    scan.note_skipped(&attrs, &event.event, &mut notes);

    let monotonic = event.clockid == ClockId::Monotonic as i32 && uses_clockid(&first.attr);
    let side = side_files(&scan, options, path, monotonic, &mut notes);
    let build_ids = build_ids(&perf_file);
    let meta = meta(&perf_file, event);
    let mut recording = Recording::in_memory(
        path.to_path_buf(),
        meta,
        Some(ClockConversion::default()),
        Some(scan.summary(notes)),
        payloads(records, &side),
    );
    // The in-memory recording is whole; the perf.data it came from may not be.
    recording.stopped = data.stopped;
    recording.build_ids = build_ids;
    Ok(recording)
}

/// Checks the header and its sections; a file whose feature sections are damaged is read
/// without the damaged ones (noted).
fn without_damaged_features<'a>(
    path: &Path,
    file: &'a [u8],
    notes: &mut Vec<String>,
) -> Result<(perf_header::DataSection, Cow<'a, [u8]>)> {
    let data = perf_header::check(file).map_err(|e| Error::parse(path, e))?;
    perf_header::check_sections(file).map_err(|e| Error::parse(path, e))?;
    let file = match perf_header::check_features(file, &data) {
        Some(damaged) => {
            notes.push(format!(
                "{}: the feature sections are damaged ({}); the records were read without the \
                 damaged ones",
                path.display(),
                damaged.why
            ));
            Cow::Owned(perf_header::without_features(file, &data, &damaged.dropped))
        }
        None => Cow::Borrowed(file),
    };
    Ok((data, file))
}

/// The file, cut after its last whole perf record when it is truncated or damaged (noted).
fn without_damaged_records<'a>(
    path: &Path,
    file: &'a [u8],
    data: &perf_header::DataSection,
    notes: &mut Vec<String>,
) -> Cow<'a, [u8]> {
    match &data.stopped {
        Some(e) => {
            notes.push(format!(
                "{} is truncated or damaged ({e}); the records before byte offset {} were read",
                path.display(),
                data.offset + data.readable_size
            ));
            Cow::Owned(perf_header::readable_prefix(file, data))
        }
        None => Cow::Borrowed(file),
    }
}

/// linux-perf-data's reader over `input`; when the records are whole but what follows them
/// is not, over the records alone (noted).
fn open_reader<'a>(
    path: &Path,
    file: &[u8],
    input: &'a [u8],
    data: &perf_header::DataSection,
    notes: &mut Vec<String>,
) -> Result<PerfFileReader<std::io::Cursor<Cow<'a, [u8]>>>> {
    let parsed = match PerfFileReader::parse_file(std::io::Cursor::new(Cow::Borrowed(input))) {
        Err(e) if data.stopped.is_none() => {
            let end = data.offset + data.readable_size;
            notes.push(format!(
                "{}: the feature sections after byte offset {end} are damaged or cut off \
                 ({e}); the records were read without them (no host facts, no event name)",
                path.display()
            ));
            let records = perf_header::readable_prefix(file, data);
            PerfFileReader::parse_file(std::io::Cursor::new(Cow::Owned(records)))
        }
        other => other,
    };
    parsed.map_err(|e| {
        Error::Other(format!(
            "{}: not a readable perf.data file: {e}",
            path.display()
        ))
    })
}

/// The perf records of the events whose layout is the first event's (`same_layout`, by
/// event index), re-encoded exactly as the kernel wrote them (header + body), and what a scan
/// of them found. A read error ends them (noted).
fn copy_perf_records<R: Read>(
    perf_file: &mut linux_perf_data::PerfFile,
    record_iter: &mut linux_perf_data::PerfRecordIter<R>,
    event: &EventConfig,
    same_layout: &[bool],
    capacity: usize,
    path: &Path,
    notes: &mut Vec<String>,
) -> (Vec<u8>, Scan) {
    let layout = event.layout();
    let mut records = Vec::with_capacity(capacity);
    let mut scan = Scan::default();
    loop {
        match record_iter.next_record(perf_file) {
            Ok(Some(PerfFileRecord::EventRecord { attr_index, record })) => {
                if !same_layout.get(attr_index).copied().unwrap_or(false) {
                    *scan.skipped.entry(attr_index).or_default() += 1;
                    continue;
                }
                let body = record.data.as_slice();
                let Ok(size) = u16::try_from(body.len() + 8) else {
                    scan.undecodable += 1;
                    continue;
                };
                let start = records.len();
                records.extend_from_slice(&record.record_type.0.to_le_bytes());
                records.extend_from_slice(&record.misc.to_le_bytes());
                records.extend_from_slice(&size.to_le_bytes());
                records.extend_from_slice(&body);
                let raw = RawRecord {
                    kind: RecordKind(record.record_type.0),
                    misc: record.misc,
                    body: &records[start + 8..],
                    offset: start,
                };
                match layout.parse(&raw) {
                    Ok(r) => scan.note_record(&r),
                    Err(_) => scan.undecodable += 1,
                }
            }
            Ok(Some(PerfFileRecord::UserRecord(_))) => {}
            Ok(None) => break,
            Err(e) => {
                notes.push(format!(
                    "{}: reading the records stopped early ({e}); the records before were used",
                    path.display()
                ));
                break;
            }
        }
    }
    (records, scan)
}

/// The side files of the records' processes. Without `monotonic` sample times, jitdump times
/// cannot be matched with samples: they are zeroed (noted), so the JIT code is used
/// regardless of time.
fn side_files(
    scan: &Scan,
    options: &ImportOptions,
    path: &Path,
    monotonic: bool,
    notes: &mut Vec<String>,
) -> Vec<SideFile> {
    let mut side = find_side_files(scan, options, &trusted_owners(path), notes);
    if !monotonic && side.iter().any(|f| f.kind == SideKind::JITDUMP) {
        notes.push(
            "the perf.data was recorded without `-k 1` (its timestamps are not \
             CLOCK_MONOTONIC), so jitdump times cannot be matched with samples: the JIT \
             code is used regardless of time (the last code loaded at an address wins)"
                .to_string(),
        );
        for f in side.iter_mut().filter(|f| f.kind == SideKind::JITDUMP) {
            zero_jitdump_times(&mut f.bytes);
        }
    }
    side
}

/// perf's build-id table (HEADER_BUILD_ID): the build id of every file the samples hit, read
/// from the files at the end of `perf record` (the MMAP2 records carry none unless recorded
/// with `--buildid-mmap`). The kernel's own entry is left out (kernel names follow the
/// kernel release). An unreadable table is no table.
fn build_ids(perf_file: &linux_perf_data::PerfFile) -> BTreeMap<String, Vec<u8>> {
    let Ok(table) = perf_file.build_ids() else {
        return BTreeMap::new();
    };
    table
        .into_values()
        .filter(|dso| !dso.build_id.is_empty())
        .map(|dso| {
            (
                String::from_utf8_lossy(&dso.path).into_owned(),
                dso.build_id,
            )
        })
        .filter(|(path, _)| !path.starts_with("[kernel"))
        .collect()
}

/// The jitdumps the records name and the perf maps of the processes seen.
fn find_side_files(
    scan: &Scan,
    options: &ImportOptions,
    owners: &[u32],
    notes: &mut Vec<String>,
) -> Vec<SideFile> {
    let dirs = &options.search_dirs;
    let mut found = Vec::new();
    for (pid, recorded) in &scan.jitdumps {
        let places = candidates(Path::new(recorded), dirs);
        match read_first(SideKind::JITDUMP, *pid, &places, owners, notes) {
            Some(f) => found.push(f),
            None => notes.push(format!(
                "the jitdump of pid {pid} was not found at {}: its JIT frames show as \
                 [unknown] (pass --search-dir with the directory that holds it)",
                list(&places)
            )),
        }
    }
    let mut maps = 0;
    for &pid in &scan.processes {
        let places = candidates(&crate::format::perf_map::path_of(pid), dirs);
        if let Some(mut f) = read_first(SideKind::PERF_MAP, pid, &places, owners, notes) {
            // A map is complete at rest; its last line may just lack the newline.
            if f.bytes.last().is_some_and(|&b| b != b'\n') {
                f.bytes.push(b'\n');
            }
            found.push(f);
            maps += 1;
        }
    }
    if scan.jitdumps.is_empty() && maps == 0 && !scan.processes.is_empty() {
        let pids: Vec<String> = scan.processes.iter().map(u32::to_string).collect();
        let mut places = vec![PathBuf::from("/tmp")];
        places.extend(dirs.iter().cloned());
        notes.push(format!(
            "no jitdump is named in the perf.data and no perf-PID.map was found for pid {} \
             in {}: JIT code, if any, shows as [unknown]",
            pids.join(", "),
            list(&places)
        ));
    }
    found
}

fn uses_clockid(attr: &PerfEventAttr) -> bool {
    attr.flags.contains(AttrFlags::USE_CLOCKID)
}

/// The Linux clockid of the sample timestamps, or -1 for perf's default clock.
fn clockid(attr: &PerfEventAttr) -> i32 {
    match attr.clock {
        PerfClock::ClockId(id) if uses_clockid(attr) => id as i32,
        _ => -1,
    }
}

/// The event configuration in jprof's terms. Refuses sample layouts the perf record parser
/// cannot decode.
fn event_config(attr: &PerfEventAttr, name: Option<&str>, path: &Path) -> Result<EventConfig> {
    let bits = attr.sample_format.bits();
    let unsupported = bits & (sample_type::READ | sample_type::RAW | sample_type::BRANCH_STACK);
    if unsupported != 0 {
        return Err(Error::Other(format!(
            "{}: its samples carry {:?}, which jprof does not read; record with \
             `perf record -k 1 -g` (no -b, no group reads, no tracepoints)",
            path.display(),
            SampleFormat::from_bits_truncate(unsupported)
        )));
    }
    if !attr.flags.contains(AttrFlags::SAMPLE_ID_ALL) {
        return Err(Error::Other(format!(
            "{}: recorded without sample_id_all (a perf older than Linux 2.6.38?); jprof \
             needs the timestamps of mmap and comm records",
            path.display()
        )));
    }
    let dwarf = attr.sample_format.contains(SampleFormat::STACK_USER)
        && attr.sample_format.contains(SampleFormat::REGS_USER);
    Ok(EventConfig {
        event: name.unwrap_or("perf event").to_string(),
        event_note: Some("imported from perf.data".to_string()),
        frequency_hz: match attr.sampling_policy {
            SamplingPolicy::Frequency(hz) => hz,
            _ => 0,
        },
        sample_type: bits,
        regs_user_mask: attr.sample_regs_user,
        stack_user_bytes: attr.sample_stack_user,
        call_graph: if dwarf {
            crate::recording::CallGraph::Dwarf
        } else {
            crate::recording::CallGraph::FramePointers
        },
        kernel_callchains: !attr.flags.contains(AttrFlags::EXCLUDE_CALLCHAIN_KERNEL),
        clockid: clockid(attr),
        off_cpu_ids: Vec::new(),
        off_cpu_min_ns: 0,
    })
}

/// META from the perf.data's feature sections (absent ones stay empty).
fn meta(perf_file: &linux_perf_data::PerfFile, event: EventConfig) -> Meta {
    let text = |r: std::result::Result<Option<&str>, linux_perf_data::Error>| {
        r.ok().flatten().unwrap_or_default().to_string()
    };
    let cmdline: Vec<String> = perf_file
        .cmdline()
        .ok()
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .map(str::to_string)
        .collect();
    // `perf record ... -- cmd args`: the profiled command is what follows `--`.
    let command = match cmdline.iter().position(|a| a == "--") {
        Some(i) => cmdline[i + 1..].to_vec(),
        None => cmdline,
    };
    Meta {
        jprof_version: env!("CARGO_PKG_VERSION").to_string(),
        command,
        attached_pid: None,
        target_pid: None,
        targets: Default::default(),
        host: HostFacts {
            hostname: text(perf_file.hostname()),
            kernel_release: text(perf_file.os_release()),
            arch: text(perf_file.arch()),
            cpus: perf_file
                .nr_cpus()
                .ok()
                .flatten()
                .map_or(0, |n| n.nr_cpus_online),
            ..Default::default()
        },
        event,
        start_unix_ns: 0,
    }
}

/// The in-memory recording's chunks: the records as the kernel wrote them, then the side
/// files.
fn payloads(records: Vec<u8>, side: &[SideFile]) -> Vec<(ChunkKind, Vec<u8>)> {
    let mut out = vec![(ChunkKind::PERF_RECORDS, records)];
    out.extend(side.iter().map(|f| {
        let path = f.path.to_string_lossy();
        let piece = SidePiece {
            kind: f.kind,
            pid: f.pid,
            read_at: 0,
            offset: 0,
            path: &path,
            data: &f.bytes,
        };
        (ChunkKind::SIDE_FILE, encode_side_piece(&piece))
    }));
    out
}

/// Sets every record timestamp of a jitdump to 0, so each address resolves to the last code
/// loaded there whatever the sample's time. Zero is the same in both byte orders.
fn zero_jitdump_times(bytes: &mut [u8]) {
    let Ok(header) = jitdump::parse_header(bytes) else {
        return;
    };
    let mut pos = header.records_start();
    while pos + 16 <= bytes.len() {
        let mut c = Cursor::with_endian(&bytes[pos + 4..pos + 8], pos + 4, header.endian);
        let Ok(total) = c.u32() else { return };
        let total = total as usize;
        if total < 16 || total > bytes.len() - pos {
            return;
        }
        bytes[pos + 8..pos + 16].fill(0);
        pos += total;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `perf record -g -o sleep.data -- sleep 0.1` (perf 6.1): 3 samples, 16 feature sections.
    const SLEEP: &[u8] = include_bytes!("../../../fuzz/seeds/perf_data/sleep.data");

    fn import_in_memory(file: &[u8]) -> Result<Recording> {
        import_bytes_unguarded(Path::new("bad.data"), file, &ImportOptions::default())
    }

    /// Loss counts come from the file: huge ones (found by the stable fuzzer) saturate instead
    /// of overflowing.
    #[test]
    fn huge_loss_counts_saturate() {
        let id = crate::format::perf::SampleId {
            pid: 1,
            tid: 1,
            time: None,
            cpu: None,
        };
        let mut scan = Scan::default();
        for _ in 0..2 {
            scan.note_record(&Record::Lost { lost: u64::MAX, id });
            scan.note_record(&Record::LostSamples { lost: u64::MAX, id });
        }
        assert_eq!((scan.lost_records, scan.lost_samples), (u64::MAX, u64::MAX));
    }

    #[test]
    fn every_header_and_feature_section_word_set_to_all_ones_is_read_or_refused() {
        let data = perf_header::check(SLEEP).unwrap();
        let features_at = data.offset + data.declared_size as usize;
        // Counts of u32::MAX made linux-perf-data ask for 64 GB and abort the process; any
        // such allocation would end this test the same way.
        let header = (8..104).step_by(4);
        for at in header.chain((features_at..SLEEP.len() - 3).step_by(4)) {
            let mut file = SLEEP.to_vec();
            file[at..at + 4].fill(0xff);
            match import_in_memory(&file) {
                Ok(recording) => assert!(recording.summary.is_some(), "offset {at}"),
                Err(e) => assert!(e.to_string().contains("bad.data"), "offset {at}: {e}"),
            }
        }
    }

    /// Every input the fuzzers found a crash with (`fuzz/seeds/perf_data/crash-*`).
    #[test]
    fn the_fuzz_seeds_are_read_or_refused() {
        let seeds = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/perf_data");
        let mut crashes = 0;
        for entry in std::fs::read_dir(seeds).unwrap() {
            let path = entry.unwrap().path();
            crashes += usize::from(path.to_string_lossy().contains("/crash-"));
            if let Err(e) = import_in_memory(&std::fs::read(&path).unwrap()) {
                assert!(
                    e.to_string().contains("bad.data"),
                    "{}: {e}",
                    path.display()
                );
            }
        }
        assert!(crashes >= 3, "{crashes} crash inputs");
    }

    /// `sleep.data`'s records as `perf record -z` stores them: one zstd stream cut into two
    /// PERF_RECORD_COMPRESSED records (`fuzz/seeds/perf_data/compressed.data`, no features).
    const COMPRESSED: &[u8] = include_bytes!("../../../fuzz/seeds/perf_data/compressed.data");

    fn records(recording: &Recording) -> Vec<u8> {
        recording
            .payloads(ChunkKind::PERF_RECORDS)
            .flat_map(|(_, bytes)| bytes.to_vec())
            .collect()
    }

    #[test]
    fn compressed_records_are_read_as_the_records_they_hold() {
        let compressed = import_in_memory(COMPRESSED).unwrap();
        assert!(compressed.stopped.is_none(), "{:?}", compressed.stopped);
        assert_eq!(compressed.summary.as_ref().unwrap().samples, 3);
        assert_eq!(
            records(&compressed),
            records(&import_in_memory(SLEEP).unwrap())
        );
    }

    /// A damaged piece of the stream ends the records before it, naming its offset.
    #[test]
    fn a_damaged_compressed_record_ends_the_records_at_its_offset() {
        let data_at = perf_header::check(COMPRESSED).unwrap().offset;
        let first_len = u16::from_le_bytes([COMPRESSED[data_at + 6], COMPRESSED[data_at + 7]]);
        let second = data_at + first_len as usize;
        let mut file = COMPRESSED.to_vec();
        file[second + 8..].fill(0xa5);
        let recording = import_in_memory(&file).unwrap();
        let stopped = recording.stopped.unwrap();
        assert_eq!(stopped.offset, second);
        assert!(
            stopped
                .expected
                .contains("a compressed record that continues the zstd stream"),
            "{stopped}"
        );
    }

    #[test]
    fn a_damaged_command_line_count_drops_the_features_with_a_note() {
        let cmdline_count_at = 2524;
        let mut file = SLEEP.to_vec();
        file[cmdline_count_at..cmdline_count_at + 4].fill(0xff);
        let recording = import_in_memory(&file).unwrap();
        let summary = recording.summary.unwrap();
        assert_eq!(summary.samples, 3);
        // Only the damaged section is left out: the host facts after it are still read.
        assert!(recording.meta.command.is_empty());
        assert_eq!(recording.meta.host.arch, "x86_64");
        assert!(
            summary.notes.iter().any(|n| n.contains(
                "feature section 11 (command line) at byte offset 2524: 4294967295 strings, more than the section can hold"
            )),
            "{:?}",
            summary.notes
        );
        let intact = import_in_memory(SLEEP).unwrap();
        assert_eq!(intact.meta.command, ["sleep", "0.1"]);
        assert_eq!(intact.summary.unwrap().samples, 3);
    }
}
