//! `jprof push`: inputs into the store, each exactly once.
//!
//! ClickHouse 18.16 has no transactions, so a push is made of steps that can each be repeated:
//! its id is a hash of the file's bytes and its labels; its stacks go in first (repeats merge
//! away); its samples go in numbered batches, each within one day's partition, so each insert
//! lands as one part, whole or not at all; a retry asks which batches are there and sends the
//! rest; the row in `pushes`, written last, makes the push visible to readers and tells a
//! later push of the same file that there is nothing to do. An interrupted push is completed
//! by running it again, never doubled. The input file is only read.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::io::Read;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use serde::Serialize;
use twox_hash::XxHash3_64;

use super::client::Client;
use super::{schema, Label, Store};
use crate::error::{Error, Result};
use crate::input::{self, Loaded, Request};
use crate::profile::{Frame, FrameId, FrameKind, Profile, TierClass, WeightUnit};

/// What `jprof push` should do.
#[derive(Clone, Debug)]
pub struct PushConfig {
    /// Where to.
    pub store: Store,
    /// The labels of every push (`host` is added, as this machine's name, when not given).
    pub labels: Vec<Label>,
    /// The inputs: anything `report -i` reads.
    pub files: Vec<PathBuf>,
    /// Samples per insert (at most; a batch never spans two days).
    pub batch_rows: usize,
}

/// Samples per insert by default: ClickHouse's advice is few inserts of many rows.
pub const DEFAULT_BATCH_ROWS: usize = 100_000;

/// Version of what a push stores; part of the push id, so a jprof that stores samples another
/// way pushes the same file anew instead of mixing the two.
const PUSH_FORMAT: &[u8] = b"jprof-fleet-1";

/// Runs `jprof push`: every file, in order; stops at the first that fails (the ones before it
/// are stored; running the same command again skips them and completes the rest).
pub fn run(config: &PushConfig) -> Result<()> {
    let labels = with_host(&config.labels)?;
    let client = Client::new(&config.store);
    schema::ensure(&client)?;
    for file in &config.files {
        let report = push_file(&client, file, &labels, config.batch_rows.max(1))?;
        println!("{report}");
    }
    Ok(())
}

/// The labels sorted, with `host` set to this machine's name unless given.
fn with_host(labels: &[Label]) -> Result<Vec<Label>> {
    let mut labels = labels.to_vec();
    if !labels.iter().any(|l| l.key == "host") {
        let name = nix::unistd::gethostname()
            .map_err(|e| Error::Other(format!("cannot read this machine's host name: {e}")))?;
        labels.push(Label {
            key: "host".into(),
            value: name.to_string_lossy().into_owned(),
        });
    }
    labels.sort();
    labels.dedup();
    Ok(labels)
}

/// The id of pushing `path` with `labels`: the hash of the bytes and the labels.
fn push_id(path: &Path, labels: &[Label]) -> Result<u64> {
    let mut file = crate::foreign_file::open_named(path).map_err(|e| e.into_error(path))?;
    let mut hasher = XxHash3_64::with_seed(0);
    hasher.write(PUSH_FORMAT);
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.write(&buffer[..n]);
    }
    for label in labels {
        write_str(&mut hasher, &label.key);
        write_str(&mut hasher, &label.value);
    }
    Ok(hasher.finish())
}

fn write_str(hasher: &mut impl Hasher, text: &str) {
    hasher.write_u64(text.len() as u64);
    hasher.write(text.as_bytes());
}

/// A stack row of the `stacks` table.
#[derive(Serialize)]
struct StackRow {
    stack_hash: u64,
    names: Vec<String>,
    kinds: Vec<u8>,
    modules: Vec<String>,
    files: Vec<String>,
    lines: Vec<u32>,
    tiers: Vec<String>,
    tier_classes: Vec<u8>,
}

/// A frame kind as stored (docs/fleet.md lists the codes).
pub(super) fn kind_code(kind: FrameKind) -> u8 {
    match kind {
        FrameKind::Root => 0,
        FrameKind::Native => 1,
        FrameKind::Kernel => 2,
        FrameKind::Jit => 3,
        FrameKind::Inlined => 4,
        FrameKind::Interpreter => 5,
        FrameKind::Unknown => 6,
    }
}

/// A JIT tier class as stored; 0 is no tier.
pub(super) fn tier_code(class: Option<TierClass>) -> u8 {
    match class {
        None => 0,
        Some(TierClass::Interpreted) => 1,
        Some(TierClass::Baseline) => 2,
        Some(TierClass::Optimized) => 3,
        Some(TierClass::Stub) => 4,
        Some(TierClass::Unknown) => 5,
    }
}

/// The row of a stack and its hash, which covers every stored field of every frame.
fn stack_row(profile: &Profile, stack: &[FrameId]) -> StackRow {
    let mut row = StackRow {
        stack_hash: 0,
        names: Vec::with_capacity(stack.len()),
        kinds: Vec::with_capacity(stack.len()),
        modules: Vec::with_capacity(stack.len()),
        files: Vec::with_capacity(stack.len()),
        lines: Vec::with_capacity(stack.len()),
        tiers: Vec::with_capacity(stack.len()),
        tier_classes: Vec::with_capacity(stack.len()),
    };
    let mut hasher = XxHash3_64::with_seed(0);
    for &id in stack {
        let Frame {
            name,
            kind,
            module,
            file,
            line,
        } = profile.frame(id);
        let tier = profile.tier(id);
        row.names.push(name.clone());
        row.kinds.push(kind_code(*kind));
        row.modules.push(module.clone().unwrap_or_default());
        row.files.push(file.clone().unwrap_or_default());
        row.lines.push(line.unwrap_or(0));
        row.tiers
            .push(tier.map(|t| t.label.clone()).unwrap_or_default());
        row.tier_classes.push(tier_code(tier.map(|t| t.class)));
        hasher.write_u8(*row.kinds.last().unwrap_or(&0));
        write_str(&mut hasher, name);
        write_str(&mut hasher, row.modules.last().map_or("", |s| s));
        write_str(&mut hasher, row.files.last().map_or("", |s| s));
        hasher.write_u32(line.unwrap_or(0));
        write_str(&mut hasher, row.tiers.last().map_or("", |s| s));
        hasher.write_u8(*row.tier_classes.last().unwrap_or(&0));
    }
    row.stack_hash = hasher.finish();
    row
}

/// A push's row of the `pushes` table.
#[derive(Serialize)]
struct PushRow<'a> {
    push_id: u64,
    pushed: u64,
    label_keys: Vec<&'a str>,
    label_values: Vec<&'a str>,
    source: String,
    title: &'a str,
    event: &'a str,
    unit: &'a str,
    frequency_hz: u64,
    samples: u64,
    stacks: u64,
    batches: u32,
    first_ns: u64,
    last_ns: u64,
}

/// Reads, converts and sends one file; returns the line to print.
fn push_file(client: &Client, path: &Path, labels: &[Label], batch_rows: usize) -> Result<String> {
    let store = client.store();
    let db = &store.database;
    let id = push_id(path, labels)?;
    let shown_labels: Vec<String> = labels
        .iter()
        .map(|l| format!("{}={}", l.key, l.value))
        .collect();
    let shown_labels = shown_labels.join(" ");
    let done = client.query(&format!(
        "SELECT count() FROM {db}.pushes WHERE push_id = {id}"
    ))?;
    if done.trim() != "0" {
        return Ok(format!(
            "{}: already in {store} (push {id:016x}, {shown_labels}); nothing sent",
            path.display()
        ));
    }
    // Full names are stored: `report --from` shortens them as `report -i` does, unless
    // --signatures.
    let request = Request {
        path: path.to_path_buf(),
        signatures: true,
        ..Request::default()
    };
    let Loaded {
        profile, context, ..
    } = input::load(&request)?;
    let to_unix = unix_clock(path, &profile, &context)?;

    // Stacks, each once.
    let mut hash_of: FxHashMap<&[FrameId], u64> = FxHashMap::default();
    let mut stack_rows = Vec::new();
    for sample in &profile.samples {
        if !hash_of.contains_key(&*sample.stack) {
            let row = stack_row(&profile, &sample.stack);
            hash_of.insert(&sample.stack, row.stack_hash);
            serde_json::to_writer(&mut stack_rows, &row)
                .map_err(|e| Error::Other(format!("encoding a stack: {e}")))?;
            stack_rows.push(b'\n');
        }
    }
    if !stack_rows.is_empty() {
        client.insert("stacks", "JSONEachRow", &stack_rows)?;
    }

    // Samples in batches, each within one UTC day. A batch is numbered by the position of its
    // first sample in `order`, so the batches there tell exactly which samples are stored,
    // whatever --batch-rows the interrupted push used.
    let mut order: Vec<(u64, usize)> = profile
        .samples
        .iter()
        .enumerate()
        .map(|(i, s)| (to_unix(s.time), i))
        .collect();
    order.sort_by_key(|&(t, i)| (t / NS_PER_DAY, i));
    let there = stored_batches(client, id)?;
    let stored = covered(&there, order.len()).map_err(|why| {
        Error::Other(format!(
            "{}: push {id:016x} in {store}: {why}: the samples table was changed by something \
             other than jprof push",
            path.display()
        ))
    })?;
    let mut batches = there.len();
    let mut rows = Vec::new();
    let mut at = 0;
    while at < order.len() {
        if stored[at] {
            at += 1;
            continue;
        }
        let day = order[at].0 / NS_PER_DAY;
        let mut end = at;
        while end < order.len()
            && end - at < batch_rows
            && !stored[end]
            && order[end].0 / NS_PER_DAY == day
        {
            end += 1;
        }
        rows.clear();
        for &(time_ns, i) in &order[at..end] {
            let s = &profile.samples[i];
            let thread = profile.threads.get(&s.tid).map_or("", |t| t.comm.as_str());
            use std::io::Write;
            let _ = write!(
                rows,
                "{}\t{time_ns}\t{id}\t{at}\t{}\t{}\t{}\t{}\t",
                date(time_ns),
                hash_of[&*s.stack],
                s.pid,
                s.tid,
                s.cpu
            );
            tsv_escape(thread, &mut rows);
            let _ = writeln!(rows, "\t{}", s.weight);
        }
        client.insert("samples", "TabSeparated", &rows)?;
        batches += 1;
        at = end;
    }

    let (first_ns, last_ns) = (
        order.first().map_or(0, |s| s.0),
        order.last().map_or(0, |s| s.0),
    );
    let source = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let row = PushRow {
        push_id: id,
        pushed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        label_keys: labels.iter().map(|l| l.key.as_str()).collect(),
        label_values: labels.iter().map(|l| l.value.as_str()).collect(),
        source,
        title: &context.title,
        event: &context.event,
        unit: unit_name(context.weight_unit),
        frequency_hz: context.frequency_hz,
        samples: profile.samples.len() as u64,
        stacks: hash_of.len() as u64,
        batches: batches as u32,
        first_ns: order.iter().map(|s| s.0).min().unwrap_or(first_ns),
        last_ns: order.iter().map(|s| s.0).max().unwrap_or(last_ns),
    };
    let mut push_row =
        serde_json::to_vec(&row).map_err(|e| Error::Other(format!("encoding a push: {e}")))?;
    push_row.push(b'\n');
    client.insert("pushes", "JSONEachRow", &push_row)?;
    let resumed = if there.is_empty() {
        String::new()
    } else {
        let had: u64 = there.values().sum();
        format!(
            "; completed an interrupted push ({had} of {} samples were there)",
            order.len()
        )
    };
    Ok(format!(
        "{}: {} samples, {} stacks pushed to {store} (push {id:016x}, {shown_labels}){resumed}",
        path.display(),
        profile.samples.len(),
        hash_of.len()
    ))
}

/// The batches of push `id` already stored: first position → samples.
fn stored_batches(client: &Client, id: u64) -> Result<BTreeMap<u64, u64>> {
    let store = client.store();
    client
        .query(&format!(
            "SELECT batch, count() FROM {}.samples WHERE push_id = {id} GROUP BY batch",
            store.database
        ))?
        .lines()
        .map(|line| {
            let bad = || super::bad_reply(store, "batches", line);
            let (batch, count) = line.split_once('\t').ok_or_else(bad)?;
            Ok((
                batch.parse().map_err(|_| bad())?,
                count.parse().map_err(|_| bad())?,
            ))
        })
        .collect()
}

/// Which of `len` positions the stored batches cover; an error when two overlap or one runs
/// past the end (neither can come from jprof push).
fn covered(batches: &BTreeMap<u64, u64>, len: usize) -> std::result::Result<Vec<bool>, String> {
    let mut stored = vec![false; len];
    for (&first, &count) in batches {
        let end = first.saturating_add(count);
        if end > len as u64 {
            return Err(format!(
                "batch {first} has {count} samples, past the push's {len}"
            ));
        }
        for slot in &mut stored[first as usize..end as usize] {
            if *slot {
                return Err(format!("batch {first} overlaps another"));
            }
            *slot = true;
        }
    }
    Ok(stored)
}

const NS_PER_DAY: u64 = 86_400 * 1_000_000_000;

/// How a weight unit is stored.
pub(super) fn unit_name(unit: WeightUnit) -> &'static str {
    match unit {
        WeightUnit::Nanoseconds => "ns",
        WeightUnit::Events => "events",
        WeightUnit::Occurrences => "occurrences",
    }
}

/// Sample-clock ns to Unix ns: through the input's wall-clock start when it has one; else the
/// last sample is taken to be when the file was last written. Times are read as signed offsets
/// from the input's start (an instrumentation input may have events a little before it).
fn unix_clock(
    path: &Path,
    profile: &Profile,
    context: &crate::profile::Context,
) -> Result<impl Fn(u64) -> u64> {
    let start = context.start_time;
    let offset = move |time: u64| time.wrapping_sub(start) as i64;
    let anchor_unix = if context.start_unix_ns > 0 {
        i128::from(context.start_unix_ns)
    } else {
        let modified = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .map_err(|e| Error::io(path, e))?;
        let unix = modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        let last = profile
            .samples
            .iter()
            .map(|s| offset(s.time))
            .max()
            .unwrap_or(0);
        unix - i128::from(last)
    };
    Ok(move |time: u64| {
        (anchor_unix + i128::from(offset(time))).clamp(0, i128::from(u64::MAX)) as u64
    })
}

/// The UTC date of Unix ns, as ClickHouse's Date reads it (`YYYY-MM-DD`).
pub(super) fn date(unix_ns: u64) -> String {
    // Days to a civil date (the proleptic Gregorian calendar, in 400-year eras).
    let days = (unix_ns / NS_PER_DAY) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `text` escaped for a TabSeparated field.
fn tsv_escape(text: &str, out: &mut Vec<u8>) {
    for &b in text.as_bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0 => out.extend_from_slice(b"\\0"),
            b => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_batches_cover_their_samples_and_may_not_overlap() {
        let batches: BTreeMap<u64, u64> = [(0, 2), (5, 1)].into();
        assert_eq!(
            covered(&batches, 7).unwrap(),
            [true, true, false, false, false, true, false]
        );
        assert!(covered(&[(0, 3), (2, 1)].into(), 7)
            .unwrap_err()
            .contains("overlaps"));
        assert!(covered(&[(6, 2)].into(), 7).unwrap_err().contains("past"));
    }

    #[test]
    fn dates_are_utc_calendar_days() {
        assert_eq!(date(0), "1970-01-01");
        // 2000-02-29 12:00 UTC, a leap day of a century year.
        assert_eq!(date(951_825_600 * 1_000_000_000), "2000-02-29");
        assert_eq!(date(1_767_225_599 * 1_000_000_000), "2025-12-31");
        assert_eq!(date(1_767_225_600 * 1_000_000_000), "2026-01-01");
    }

    #[test]
    fn tab_separated_fields_escape_separators() {
        let mut out = Vec::new();
        tsv_escape("a\tb\nc\\d\0", &mut out);
        assert_eq!(out, b"a\\tb\\nc\\\\d\\0");
    }

    #[test]
    fn a_stack_hash_covers_every_field() {
        let mut p = Profile::default();
        let plain = p.intern(crate::profile::testing::frame("f", FrameKind::Native));
        let mut with_line = crate::profile::testing::frame("f", FrameKind::Native);
        with_line.line = Some(3);
        let lined = p.intern(with_line);
        let jit = p.intern(crate::profile::testing::frame("f", FrameKind::Jit));
        let hashes: Vec<u64> = [[plain], [lined], [jit]]
            .iter()
            .map(|s| stack_row(&p, s).stack_hash)
            .collect();
        assert_ne!(hashes[0], hashes[1]);
        assert_ne!(hashes[0], hashes[2]);
        assert_eq!(hashes[0], stack_row(&p, &[plain]).stack_hash);
    }
}
