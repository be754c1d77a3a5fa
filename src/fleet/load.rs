//! `report --from` / `diff --from`: a selection of the store as the [`Loaded`] profile every
//! writer takes. ClickHouse does the heavy part: it picks the finished pushes whose labels
//! match, keeps the `--time` range, and (for every format but the timelines) adds the samples
//! up per stack and thread, so what comes back grows with distinct stacks, not with samples.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rustc_hash::FxHashMap;
use serde::Deserialize;

use super::client::Client;
use super::{bad_reply, schema, sql_string, Selection};
use crate::error::{Error, Result};
use crate::input::{Loaded, Request, Weight};
use crate::profile::{
    filter, names, Context, Filters, Frame, FrameId, FrameKind, Profile, ProfileSample, ThreadInfo,
    Tier, TierClass, WeightUnit,
};

/// Reads `selection` with `request`'s filters, weight and names (its path is not used).
/// `timeline`: every sample with its time (the Firefox Profiler and speedscope show when
/// samples happened); otherwise samples of one stack and thread come added up.
pub fn load(selection: &Selection, request: &Request, timeline: bool) -> Result<Loaded> {
    refuse_file_options(request)?;
    let client = Client::new(&selection.store);
    let store = &selection.store;
    let db = &store.database;
    if !schema::exists(&client)? {
        return Err(Error::Other(format!(
            "{store} has no jprof tables: nothing was pushed there yet (jprof push --to {store} \
             FILE)"
        )));
    }
    let pushes = pushes_condition(selection);
    let kinds = client.query(&format!(
        "SELECT event, unit, max(frequency_hz), uniqExact(push_id), min(first_ns), \
         max(last_ns), any(title) FROM {db}.pushes WHERE {pushes} GROUP BY event, unit \
         ORDER BY event, unit FORMAT TabSeparated"
    ))?;
    let kinds: Vec<Vec<String>> = kinds
        .lines()
        .map(|l| l.split('\t').map(tsv_unescape).collect())
        .collect();
    let meta = match kinds.as_slice() {
        [] => {
            return Err(Error::Other(format!(
                "no push in {store} matches {}",
                labels_shown(selection)
            )))
        }
        [one] if one.len() == 7 => one,
        [_] => return Err(bad_reply(store, "pushes", &kinds[0].join("\t"))),
        several => {
            let listed: Vec<String> = several
                .iter()
                .map(|k| format!("{} ({} pushes)", k[0], k.get(3).map_or("?", |s| s)))
                .collect();
            return Err(Error::Usage(format!(
                "{selection} mixes pushes of different events, whose weights cannot be added: \
                 {}; select one with --label",
                listed.join(", ")
            )));
        }
    };
    let number = |i: usize| -> Result<u64> {
        meta[i]
            .parse()
            .map_err(|_| bad_reply(store, "pushes", &meta.join("\t")))
    };
    let (event, unit) = (meta[0].clone(), meta[1].as_str());
    let (frequency_hz, push_count, first_ns, last_ns) =
        (number(2)?, number(3)?, number(4)?, number(5)?);
    let unit = match unit {
        "ns" => WeightUnit::Nanoseconds,
        "occurrences" => WeightUnit::Occurrences,
        _ => WeightUnit::Events,
    };

    let mut samples_where = format!("push_id IN (SELECT push_id FROM {db}.pushes WHERE {pushes})");
    if let Some(range) = &request.filters.time {
        // `--time` counts from the selection's first sample, as `report -i` counts from the
        // input's start.
        if let Some(a) = range.start_s {
            let _ = write!(
                samples_where,
                " AND time_ns >= {}",
                first_ns + (a * 1e9).ceil() as u64
            );
        }
        if let Some(b) = range.end_s {
            let _ = write!(
                samples_where,
                " AND time_ns <= {}",
                first_ns + (b * 1e9).floor() as u64
            );
        }
    }
    let sql = if timeline {
        format!(
            "SELECT stack_hash, pid, tid, thread, 1, weight, time_ns, cpu FROM {db}.samples \
             WHERE {samples_where} ORDER BY time_ns, tid FORMAT TabSeparated"
        )
    } else {
        format!(
            "SELECT stack_hash, pid, tid, thread, count(), sum(weight), min(time_ns), any(cpu) \
             FROM {db}.samples WHERE {samples_where} GROUP BY stack_hash, pid, tid, thread \
             FORMAT TabSeparated"
        )
    };
    let rows = client.query(&sql)?;
    let stacks = client.query(&format!(
        "SELECT * FROM {db}.stacks WHERE stack_hash IN (SELECT DISTINCT stack_hash FROM \
         {db}.samples WHERE {samples_where}) LIMIT 1 BY stack_hash FORMAT JSONEachRow"
    ))?;

    let mut profile = Profile::default();
    let mut stack_of: FxHashMap<u64, crate::profile::Stack> = FxHashMap::default();
    for line in stacks.lines() {
        let row: StackRow =
            serde_json::from_str(line).map_err(|_| bad_reply(store, "stacks", line))?;
        let hash = row.stack_hash;
        let frames = row.frames(&mut profile);
        let stack = profile.intern_stack(&frames);
        stack_of.insert(hash, stack);
    }
    let by_count = request.weight == Some(Weight::Samples);
    let mut threads: BTreeMap<u32, ThreadInfo> = BTreeMap::new();
    for line in rows.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        let [hash, pid, tid, thread, count, weight, time, cpu] = fields[..] else {
            return Err(bad_reply(store, "samples", line));
        };
        let parse =
            |s: &str| -> Result<u64> { s.parse().map_err(|_| bad_reply(store, "samples", line)) };
        let hash = parse(hash)?;
        let stack = stack_of.get(&hash).cloned().ok_or_else(|| {
            Error::Other(format!(
                "{store}: samples use stack {hash:016x}, which the stacks table does not have"
            ))
        })?;
        let (pid, tid) = (parse(pid)? as u32, parse(tid)? as u32);
        let thread = tsv_unescape(thread);
        if !thread.is_empty() {
            threads.insert(tid, ThreadInfo { pid, comm: thread });
        }
        profile.samples.push(ProfileSample {
            pid,
            tid,
            time: parse(time)?,
            cpu: parse(cpu)? as u32,
            weight: if by_count {
                parse(count)?
            } else {
                parse(weight)?
            },
            stack,
            off_cpu: false,
        });
    }
    profile.threads = threads;
    profile.start_time = Some(first_ns);
    if !request.signatures {
        names::shorten(&mut profile);
    }
    filter::apply(
        &mut profile,
        &Filters {
            time: None,
            ..request.filters.clone()
        },
    );
    let title = format!("jprof: {selection}");
    let (event, unit) = if by_count {
        profile.notes.insert(
            0,
            "weights: samples (1 per sample, --weight samples)".into(),
        );
        ("samples".to_string(), WeightUnit::Events)
    } else {
        (event, unit)
    };
    let mut context = Context::for_profile(&profile, &title, &event, unit);
    context.frequency_hz = frequency_hz;
    context.start_time = first_ns;
    // The store's clock is Unix ns.
    context.start_unix_ns = first_ns;

    let mut summary = String::new();
    let total: u64 = profile.samples.iter().map(|s| s.weight).sum();
    let _ = writeln!(
        summary,
        "{selection}: {push_count} pushes, {} {event}, from {} to {} (UTC)",
        total,
        unix_time(first_ns),
        unix_time(last_ns)
    );
    for note in &profile.notes {
        let _ = writeln!(summary, "note: {note}");
    }
    let mut summary = summary.into_bytes();
    summary.push(b'\n');
    crate::input::recording::text::write_tables(&profile, &request.tables, &mut summary)
        .map_err(|e| Error::io(std::path::Path::new("<memory>"), e))?;
    Ok(Loaded {
        profile,
        context,
        summary,
    })
}

/// `--search-dir`, `--debug-files` and `--binary` say how to read files; the store holds
/// samples already symbolized.
fn refuse_file_options(request: &Request) -> Result<()> {
    let refuse = |option: &str| {
        Err(Error::Usage(format!(
            "{option} does not apply to --from: the store holds samples symbolized when they \
             were pushed (give it to `jprof push`, which reads the files)"
        )))
    };
    if !request.search_dirs.is_empty() {
        return refuse("--search-dir");
    }
    if request.debug_files {
        return refuse("--debug-files");
    }
    if request.binary.is_some() {
        return refuse("--binary");
    }
    match request.weight {
        None | Some(Weight::Samples) => Ok(()),
        Some(other) => Err(Error::Usage(format!(
            "--weight {} does not apply to --from: the store holds each push's own weights \
             (--weight samples counts samples instead)",
            other.name()
        ))),
    }
}

/// The SQL condition on `pushes` rows that `selection`'s labels make.
fn pushes_condition(selection: &Selection) -> String {
    if selection.labels.is_empty() {
        return "1".into();
    }
    let parts: Vec<String> = selection
        .labels
        .iter()
        .map(|(key, values)| {
            let values: Vec<String> = values.iter().map(|v| sql_string(v)).collect();
            format!(
                "label_values[indexOf(label_keys, {})] IN ({})",
                sql_string(key),
                values.join(", ")
            )
        })
        .collect();
    parts.join(" AND ")
}

fn labels_shown(selection: &Selection) -> String {
    if selection.labels.is_empty() {
        return "(any labels)".into();
    }
    let parts: Vec<String> = selection
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={}", v.join("|")))
        .collect();
    parts.join(" ")
}

/// Unix ns as `YYYY-MM-DD hh:mm:ss`.
fn unix_time(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let day = super::push::date(ns);
    let s = secs % 86_400;
    format!("{day} {:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// A TabSeparated field as text.
fn tsv_unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// A row of the `stacks` table as JSONEachRow gives it (64-bit numbers may come quoted).
#[derive(Deserialize)]
struct StackRow {
    #[serde(deserialize_with = "u64_or_string")]
    stack_hash: u64,
    names: Vec<String>,
    kinds: Vec<u8>,
    modules: Vec<String>,
    files: Vec<String>,
    lines: Vec<u32>,
    tiers: Vec<String>,
    tier_classes: Vec<u8>,
}

impl StackRow {
    fn frames(self, profile: &mut Profile) -> Vec<FrameId> {
        let optional = |s: &String| (!s.is_empty()).then(|| s.clone());
        (0..self.names.len())
            .map(|i| {
                let frame = Frame {
                    name: self.names[i].clone(),
                    kind: kind_of(self.kinds.get(i).copied().unwrap_or(6)),
                    module: self.modules.get(i).and_then(optional),
                    file: self.files.get(i).and_then(optional),
                    line: self.lines.get(i).copied().filter(|&l| l > 0),
                };
                let tier = tier_class_of(self.tier_classes.get(i).copied().unwrap_or(0))
                    .map(|class| Tier::new(class, self.tiers.get(i).cloned().unwrap_or_default()));
                profile.intern_tiered(frame, tier)
            })
            .collect()
    }
}

fn kind_of(code: u8) -> FrameKind {
    [
        FrameKind::Root,
        FrameKind::Native,
        FrameKind::Kernel,
        FrameKind::Jit,
        FrameKind::Inlined,
        FrameKind::Interpreter,
    ]
    .into_iter()
    .find(|&k| super::push::kind_code(k) == code)
    .unwrap_or(FrameKind::Unknown)
}

fn tier_class_of(code: u8) -> Option<TierClass> {
    [
        TierClass::Interpreted,
        TierClass::Baseline,
        TierClass::Optimized,
        TierClass::Stub,
        TierClass::Unknown,
    ]
    .into_iter()
    .find(|&c| super::push::tier_code(Some(c)) == code)
}

fn u64_or_string<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Number(u64),
        Text(String),
    }
    match Either::deserialize(d)? {
        Either::Number(n) => Ok(n),
        Either::Text(s) => s.parse().map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for kind in [
            FrameKind::Root,
            FrameKind::Native,
            FrameKind::Kernel,
            FrameKind::Jit,
            FrameKind::Inlined,
            FrameKind::Interpreter,
            FrameKind::Unknown,
        ] {
            assert_eq!(kind_of(super::super::push::kind_code(kind)), kind);
        }
        assert_eq!(tier_class_of(0), None);
        assert_eq!(
            tier_class_of(super::super::push::tier_code(Some(TierClass::Stub))),
            Some(TierClass::Stub)
        );
    }

    #[test]
    fn fields_unescape() {
        assert_eq!(tsv_unescape(r"a\tb\\c\n"), "a\tb\\c\n");
    }

    #[test]
    fn labels_become_one_condition_per_key() {
        let s = Selection::parse("clickhouse://h:1/db?host=a&host=b&svc=x'y", &[]).unwrap();
        assert_eq!(
            pushes_condition(&s),
            "label_values[indexOf(label_keys, 'host')] IN ('a', 'b') AND \
             label_values[indexOf(label_keys, 'svc')] IN ('x\\'y')"
        );
    }
}
