//! `jprof report -i FILE.mlpd --format text`: the summaries mprof-report prints (header, JIT,
//! GC, samples, allocations, method calls, metadata, exceptions, monitors, threads, domains,
//! contexts, counters), in its layout and order, so the two can be compared line by line. The
//! method call table lists every called method (mprof-report's `--verbose` table; its default
//! hides methods under 1 ms). Decoding problems, which mprof-report does not report, come last.

use std::io::{self, Write};

use super::analysis::{Analysis, CounterValue};
use crate::format::mlpd::{counter_type, Decoder};

/// The counters mprof-report shows without `--verbose`.
const DEFAULT_COUNTERS: [&str; 14] = [
    "Methods from AOT",
    "Methods JITted using mono JIT",
    "Methods JITted using LLVM",
    "Total time spent JITting (sec)",
    "User Time",
    "System Time",
    "Total Time",
    "Working Set",
    "Private Bytes",
    "Virtual Bytes",
    "Page Faults",
    "CPU Load Average - 1min",
    "CPU Load Average - 5min",
    "CPU Load Average - 15min",
];

pub fn write(a: &Analysis, decoder: &Decoder, out: &mut dyn Write) -> io::Result<()> {
    for w in &a.warnings {
        writeln!(out, "{w}")?;
    }
    header(a, out)?;
    jit(a, out)?;
    gc(a, out)?;
    samples(a, out)?;
    allocations(a, out)?;
    calls(a, out)?;
    writeln!(out, "\nMetadata summary")?;
    writeln!(out, "\tLoaded images: {}", a.images)?;
    writeln!(out, "\tLoaded assemblies: {}", a.assemblies)?;
    exceptions(a, out)?;
    monitors(a, out)?;
    writeln!(out, "\nThread summary")?;
    for t in a.threads.iter().rev().filter(|t| t.id != 0) {
        let name = t.name.as_deref().unwrap_or("");
        writeln!(out, "\tThread: {}, name: \"{name}\"", pointer(t.id))?;
    }
    writeln!(out, "\nDomain summary")?;
    for (d, name) in a.domains.iter().rev() {
        let name = name.as_deref().unwrap_or("(null)");
        writeln!(out, "\tDomain: {}, friendly name: \"{name}\"", pointer(*d))?;
    }
    writeln!(out, "\nContext summary")?;
    for (c, d) in a.contexts.iter().rev() {
        writeln!(out, "\tContext: {}, domain: {}", pointer(*c), pointer(*d))?;
    }
    if a.heap_shots > 0 {
        writeln!(out, "\nHeap shot summary\n\tHeap shots: {}", a.heap_shots)?;
    }
    counters(a, out)?;
    problems(decoder, out)
}

/// C's `%p`: `(nil)` for 0.
fn pointer(p: u64) -> String {
    if p == 0 {
        "(nil)".into()
    } else {
        format!("{p:#x}")
    }
}

fn header(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    let Some(h) = &a.header else {
        return Ok(());
    };
    writeln!(out, "\nMono log profiler data")?;
    writeln!(out, "\tProfiler version: {}.{}", h.major, h.minor)?;
    writeln!(out, "\tData version: {}", h.data_version)?;
    if h.major >= 1 {
        writeln!(out, "\tArguments: {}", h.args)?;
        writeln!(out, "\tArchitecture: {}", h.arch)?;
        writeln!(out, "\tOperating system: {}", h.os)?;
    }
    writeln!(
        out,
        "\tMean timer overhead: {} nanoseconds",
        h.timer_overhead_ns
    )?;
    writeln!(out, "\tProgram startup: {}", ctime_utc(h.startup_ms / 1000))?;
    if h.pid != 0 {
        writeln!(out, "\tProgram ID: {}", h.pid)?;
    }
    if h.port != 0 {
        writeln!(out, "\tServer listening on: {}", h.port)?;
    }
    Ok(())
}

/// `ctime()` in UTC: `Sun Nov 22 07:20:27 2026`.
pub fn ctime_utc(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days since the epoch to a civil date (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        year
    )
}

fn jit(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    let compiled = a.methods.values().filter(|m| m.code != 0 && !m.ignore_jit);
    let (count, size) = compiled.fold((0u64, 0u64), |(c, s), m| (c + 1, s + m.len));
    writeln!(out, "\nJIT summary")?;
    writeln!(out, "\tCompiled methods: {count}")?;
    writeln!(out, "\tGenerated code size: {size}")?;
    writeln!(out, "\tJIT helpers: {}", a.jit_helpers)?;
    writeln!(out, "\tJIT helpers code size: {}", a.jit_helpers_size)
}

fn gc(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nGC summary")?;
    writeln!(out, "\tGC resizes: {}", a.gc_resizes)?;
    writeln!(out, "\tMax heap size: {}", a.max_heap)?;
    writeln!(out, "\tObject moves: {}", a.object_moves)?;
    for (i, g) in a.gc.iter().enumerate().filter(|(_, g)| g.count > 0) {
        writeln!(
            out,
            "\tGen{i} collections: {}, max time: {}us, total time: {}us, average: {}us",
            g.count,
            g.max / 1000,
            g.total / 1000,
            g.total / g.count / 1000
        )?;
    }
    const HANDLE_NAMES: [&str; 3] = ["weak", "weaktrack", "normal"];
    for (name, h) in HANDLE_NAMES.iter().zip(&a.handles) {
        if h.max_live != 0 {
            writeln!(
                out,
                "\tGC handles {name}: created: {}, destroyed: {}, max: {}",
                h.created, h.destroyed, h.max_live
            )?;
        }
    }
    Ok(())
}

/// What a sample IP resolved to, in mprof-report's terms.
pub enum Resolved<'a> {
    Managed(u64),
    /// An unmanaged symbol or binary (index into `usyms`/`ubins`), and whether it was only
    /// the binary (an "unresolved" hit).
    Symbol(&'a str, Option<&'a str>, bool),
    Unresolved,
}

/// Resolves sample IPs the way mprof-report does: JIT code ranges first, then the nearest
/// unmanaged symbol at or below the IP within 4096 bytes, then the binary that holds it.
pub struct IpResolver<'a> {
    a: &'a Analysis,
    usyms: Vec<&'a (u64, u64, String)>,
}

impl<'a> IpResolver<'a> {
    pub fn new(a: &'a Analysis) -> Self {
        let mut usyms: Vec<_> = a.usyms.iter().collect();
        usyms.sort_by_key(|u| u.0);
        Self { a, usyms }
    }

    fn binary(&self, ip: u64) -> Option<&'a str> {
        self.a
            .ubins
            .iter()
            .find(|b| ip >= b.0 && ip < b.0.wrapping_add(b.1))
            .map(|b| b.2.as_str())
    }

    pub fn resolve(&self, ip: u64) -> Resolved<'a> {
        if let Some(m) = self.a.method_at(ip) {
            return Resolved::Managed(m);
        }
        let i = self.usyms.partition_point(|u| u.0 <= ip);
        if let Some(u) = i.checked_sub(1).map(|i| self.usyms[i]) {
            if ip - u.0 < 4096 {
                let parent = self.binary(u.0).filter(|&b| b != u.2);
                return Resolved::Symbol(&u.2, parent, false);
            }
        }
        match self.binary(ip) {
            Some(b) => Resolved::Symbol(b, None, true),
            None => Resolved::Unresolved,
        }
    }
}

fn samples(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    if a.hits.is_empty() {
        return Ok(());
    }
    let resolver = IpResolver::new(a);
    let total = a.hits.len() as f64;
    // (label, hits, managed) in first-hit order, then sorted by hits (stable).
    let mut rows: Vec<(String, u64, bool)> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let (mut unmanaged, mut unresolved) = (0u64, 0u64);
    for hit in &a.hits {
        let (key, managed) = match resolver.resolve(hit.ip) {
            Resolved::Managed(m) => {
                let name = a.methods[&m].display_name(m);
                (Some((name, None)), true)
            }
            Resolved::Symbol(name, parent, only_binary) => {
                unmanaged += 1;
                unresolved += u64::from(only_binary);
                (Some((name.to_string(), parent)), false)
            }
            Resolved::Unresolved => {
                unmanaged += 1;
                unresolved += 1;
                (None, false)
            }
        };
        let Some((name, parent)) = key else { continue };
        let label = match parent {
            Some(p) => format!("{name:<36} in {p}"),
            None => name,
        };
        let i = *index.entry((label.clone(), managed)).or_insert_with(|| {
            rows.push((label, 0, managed));
            rows.len() - 1
        });
        rows[i].1 += 1;
    }
    let (mut managed_rows, mut unmanaged_rows): (Vec<_>, Vec<_>) =
        rows.into_iter().partition(|r| r.2);
    managed_rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    unmanaged_rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    let pct = |n: u64| n as f64 * 100.0 / total;
    let type_name = match a.sample_type.unwrap_or(1) {
        1 => "cycles",
        2 => "instructions retired",
        3 => "cache misses",
        4 => "cache references",
        5 => "executed branches",
        6 => "unpredicted branches",
        _ => "unknown",
    };
    writeln!(out, "\nStatistical samples summary")?;
    writeln!(out, "\tSample type: {type_name}")?;
    writeln!(
        out,
        "\tUnmanaged hits:  {unmanaged:6} ({:4.1}%)",
        pct(unmanaged)
    )?;
    let managed = a.hits.len() as u64 - unmanaged;
    writeln!(
        out,
        "\tManaged hits:    {managed:6} ({:4.1}%)",
        pct(managed)
    )?;
    writeln!(
        out,
        "\tUnresolved hits: {unresolved:6} ({:4.1}%)",
        pct(unresolved)
    )?;
    writeln!(out, "\t{:>6} {:>6} Method name", "Hits", "%")?;
    // Merge the two sorted lists; an unmanaged row goes first only with strictly more hits.
    let (mut m, mut u) = (
        managed_rows.iter().peekable(),
        unmanaged_rows.iter().peekable(),
    );
    loop {
        let row = match (m.peek(), u.peek()) {
            (Some(mr), Some(ur)) if ur.1 > mr.1 => u.next(),
            (Some(_), _) => m.next(),
            (None, Some(_)) => u.next(),
            (None, None) => None,
        };
        let Some((label, hits, _)) = row else { break };
        if pct(*hits) < 0.1 {
            break;
        }
        writeln!(out, "\t{hits:6} {:6.2} {label}", pct(*hits))?;
    }
    Ok(())
}

fn allocations(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    if a.allocs.is_empty() {
        return Ok(());
    }
    let vtable = a.header.as_ref().is_some_and(|h| h.data_version >= 15);
    let mut by_class: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for (&p, &(count, bytes)) in &a.allocs {
        let e = by_class.entry(a.class_name(p, vtable)).or_default();
        e.0 += count;
        e.1 += bytes;
    }
    let mut rows: Vec<_> = by_class.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1 .1));
    writeln!(out, "\nAllocation summary")?;
    writeln!(
        out,
        "{:>10} {:>10} {:>8} Type name",
        "Bytes", "Count", "Average"
    )?;
    let (mut count, mut bytes) = (0, 0);
    for (name, (c, b)) in rows {
        writeln!(out, "{b:10} {c:10} {:8} {name}", b / c.max(1))?;
        count += c;
        bytes += b;
    }
    writeln!(
        out,
        "Total memory allocated: {bytes} bytes in {count} objects"
    )
}

fn calls(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    let mut rows: Vec<(u64, &super::analysis::Method)> = a
        .method_order()
        .into_iter()
        .map(|p| (p, &a.methods[&p]))
        .filter(|(_, m)| m.calls > 0)
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    let total = |m: &super::analysis::Method| m.self_time.wrapping_add(m.callee_time);
    rows.sort_by_key(|r| std::cmp::Reverse(total(r.1)));
    writeln!(out, "\nMethod call summary")?;
    writeln!(
        out,
        "{:>8} {:>8} {:>10} Method name",
        "Total(ms)", "Self(ms)", "Calls"
    )?;
    let mut calls = 0;
    for (p, m) in rows {
        calls += m.calls;
        writeln!(
            out,
            "{:8} {:8} {:10} {}",
            total(m) / 1_000_000,
            m.self_time / 1_000_000,
            m.calls,
            m.display_name(p)
        )?;
    }
    writeln!(out, "Total calls: {calls}")
}

fn exceptions(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    const CLAUSES: [&str; 5] = ["catch", "filter", "finally", "invalid", "fault"];
    writeln!(out, "\nException summary")?;
    writeln!(out, "\tThrows: {}", a.throws)?;
    for (name, &n) in CLAUSES.iter().zip(&a.clauses) {
        if n > 0 {
            writeln!(out, "\tExecuted {name} clauses: {n}")?;
        }
    }
    Ok(())
}

fn monitors(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    if a.monitors.is_empty() {
        return Ok(());
    }
    let mut rows: Vec<_> = a.monitors.iter().collect();
    rows.sort_by(|x, y| y.1.wait.cmp(&x.1.wait).then(x.0.cmp(y.0)));
    writeln!(out, "\nMonitor lock summary")?;
    for (obj, m) in rows {
        writeln!(
            out,
            "\tLock object {}: {} contentions",
            pointer(*obj),
            m.contentions
        )?;
        let s = |ns: u64| ns as f64 / 1e9;
        writeln!(
            out,
            "\t\t{:.6} secs total wait time, {:.6} max, {:.6} average",
            s(m.wait),
            s(m.max_wait),
            s(m.wait) / m.contentions as f64
        )?;
    }
    writeln!(out, "\tLock contentions: {}", a.monitor_contention)?;
    writeln!(out, "\tLock acquired: {}", a.monitor_acquired)?;
    writeln!(out, "\tLock failures: {}", a.monitor_failed)
}

fn counters(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nCounters:")?;
    let mut sections: Vec<&str> = Vec::new();
    for c in &a.counters {
        if !sections.contains(&c.section.as_str()) {
            sections.push(&c.section);
        }
    }
    for section in sections {
        let shown = a.counters.iter().filter(|c| {
            c.section == section && c.last.is_some() && DEFAULT_COUNTERS.contains(&c.name.as_str())
        });
        let mut first = true;
        for c in shown {
            if std::mem::take(&mut first) {
                writeln!(out, "\t{section}:")?;
            }
            let value = match &c.last {
                Some(CounterValue::Signed(v)) if Analysis::counter_is_time(c) => {
                    format!("{:.3}ms", *v as f64 / 10000.0)
                }
                Some(CounterValue::Signed(v)) if c.kind == counter_type::TIME_INTERVAL => {
                    format!("{:.3}ms", *v as f64 / 1000.0)
                }
                Some(CounterValue::Signed(v)) if c.kind == counter_type::INT => {
                    (*v as i32).to_string()
                }
                Some(CounterValue::Signed(v)) => (*v as u32).to_string(),
                Some(CounterValue::Unsigned(v)) if c.kind == counter_type::UINT => {
                    (*v as u32).to_string()
                }
                Some(CounterValue::Unsigned(v)) => v.to_string(),
                Some(CounterValue::Double(v)) => format!("{v:.6}"),
                Some(CounterValue::String(Some(s))) => s.clone(),
                Some(CounterValue::String(None)) | None => "<null>".into(),
            };
            writeln!(out, "\t\t{:<30} : {value}", c.name)?;
        }
    }
    Ok(())
}

fn problems(decoder: &Decoder, out: &mut dyn Write) -> io::Result<()> {
    if decoder.problem_count() == 0 {
        return Ok(());
    }
    writeln!(
        out,
        "\nDecoding problems: {} (the rest of each buffer was skipped)",
        decoder.problem_count()
    )?;
    for p in decoder.problems() {
        writeln!(out, "\t{} ({} bytes skipped)", p.error, p.skipped_bytes)?;
    }
    Ok(())
}
