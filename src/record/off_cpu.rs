//! `--off-cpu` in the writer: pairs each switch-out sample of the context-switch event with the
//! thread's next switch-in, stores the sample with its period set to the ns the thread stayed
//! off the CPU (when at least `--off-cpu-min`), and drops the SWITCH records.
//!
//! A thread leaves one CPU and may come back on another, and each CPU has its own ring, so a
//! switch-in can reach the writer before the switch-out it ends. A pair is decided only below
//! the batch's watermark: every ring was drained after that time, so no earlier record is still
//! to come.
//!
//! With `-a` the events are CPU-wide: the kernel writes SWITCH_CPU_WIDE records, and every
//! task switches on them, the CPUs' idle tasks too (left out: they do not wait).

use rustc_hash::{FxHashMap, FxHashSet};

use crate::format::perf::{Record, RecordIter, RecordKind, SampleLayout};
use crate::recording::OffCpuCounts;

/// The tid of every CPU's idle task.
const IDLE: u32 = 0;

/// The tid the kernel gives a task it has already unhashed (`perf_event_tid`'s -1): with `-a`,
/// the CPU-wide switch event sees an exiting thread's very last switch (`do_task_dead`) so.
const DEAD: u32 = u32::MAX;

/// How long after a thread's exit its last switch-out may still arrive.
const EXIT_MEMORY_NS: u64 = 1_000_000_000;

/// A switch-out waiting for its switch-in.
struct SwitchOut {
    time: u64,
    record: Vec<u8>,
}

#[derive(Default)]
struct ThreadSwitches {
    outs: Vec<SwitchOut>,
    /// Switch-in times not yet paired, ascending.
    ins: Vec<u64>,
    exited_at: Option<u64>,
}

pub struct SwitchPairing {
    layout: SampleLayout,
    ids: FxHashSet<u64>,
    min_ns: u64,
    period_at: usize,
    threads: FxHashMap<u32, ThreadSwitches>,
    pub counts: OffCpuCounts,
    /// Switch-out samples seen (they are not CPU samples).
    pub seen: u64,
}

impl SwitchPairing {
    /// None when the recording has no context-switch events.
    pub fn new(layout: SampleLayout, ids: &[u64], min_ns: u64) -> Option<Self> {
        let period_at = layout.period_offset()?;
        (!ids.is_empty()).then(|| Self {
            layout,
            ids: ids.iter().copied().collect(),
            min_ns,
            period_at,
            threads: FxHashMap::default(),
            counts: OffCpuCounts::default(),
            seen: 0,
        })
    }

    /// Takes the switch records out of `batch`; appends everything else to `kept`, then the
    /// switch-outs decided below `complete_before`, their period now the ns off the CPU.
    pub fn process(&mut self, batch: &[u8], complete_before: Option<u64>, kept: &mut Vec<u8>) {
        for raw in RecordIter::new(batch).flatten() {
            let whole = &batch[raw.offset..raw.offset + 8 + raw.body.len()];
            match raw.kind {
                RecordKind::SAMPLE => match self.layout.sample_head(&raw) {
                    // A CPU's idle task (`-a`) is not a thread that waits: its time off the CPU
                    // is the others' time on it (and every CPU's idle task is tid 0).
                    Ok(s) if s.id.is_some_and(|id| self.ids.contains(&id)) => {
                        self.seen += 1;
                        // Nor does a dead task's last switch-out: it never comes back, and
                        // paired with nothing it would wait until the end of the recording.
                        if s.tid == IDLE || s.tid == DEAD {
                            continue;
                        }
                        self.threads.entry(s.tid).or_default().outs.push(SwitchOut {
                            time: s.time,
                            record: whole.to_vec(),
                        });
                        continue;
                    }
                    _ => {}
                },
                RecordKind::SWITCH | RecordKind::SWITCH_CPU_WIDE => {
                    if let Ok(Record::Switch { out: false, id, .. }) = self.layout.parse(&raw) {
                        if let (Some(time), false) = (id.time, id.tid == IDLE) {
                            let ins = &mut self.threads.entry(id.tid).or_default().ins;
                            let at = ins.partition_point(|&t| t <= time);
                            ins.insert(at, time);
                        }
                    }
                    continue;
                }
                RecordKind::EXIT => {
                    if let Ok(Record::Exit { tid, time, .. }) = self.layout.parse(&raw) {
                        self.threads.entry(tid).or_default().exited_at = Some(time);
                    }
                }
                _ => {}
            }
            kept.extend_from_slice(whole);
        }
        if let Some(watermark) = complete_before {
            self.decide(watermark, kept);
        }
    }

    /// Pairs what can be paired below `watermark`.
    fn decide(&mut self, watermark: u64, out: &mut Vec<u8>) {
        let (period_at, min_ns) = (self.period_at, self.min_ns);
        let counts = &mut self.counts;
        self.threads.retain(|_, t| {
            t.outs.sort_by_key(|o| o.time);
            let mut undecided = Vec::new();
            for o in t.outs.drain(..) {
                let next_in = t.ins.iter().position(|&i| i >= o.time);
                match next_in {
                    Some(k) if t.ins[k] < watermark => {
                        let ns = t.ins[k] - o.time;
                        t.ins.drain(..=k);
                        store(counts, out, o, ns, period_at, min_ns);
                    }
                    _ if o.time < watermark && t.exited_at.is_some_and(|e| e <= o.time) => {
                        // The last switch of a thread that exited: it never waited.
                    }
                    _ => undecided.push(o),
                }
            }
            t.outs = undecided;
            // A switch-in below the watermark with no switch-out before it can pair no more.
            let first_out = t.outs.first().map_or(u64::MAX, |o| o.time);
            t.ins.retain(|&i| i >= watermark || i >= first_out);
            // An exit stays known a while: the thread's last switch-out comes just after it.
            !t.outs.is_empty()
                || !t.ins.is_empty()
                || t.exited_at
                    .is_some_and(|e| e.saturating_add(EXIT_MEMORY_NS) >= watermark)
        });
    }

    /// The time of the earliest switch-out still waiting for its thread's return: it will be
    /// written after records later than it.
    pub fn oldest_waiting(&self) -> Option<u64> {
        self.threads
            .values()
            .filter_map(|t| t.outs.iter().map(|o| o.time).min())
            .min()
    }

    /// At the end of the recording: threads still off the CPU waited until `end`.
    pub fn finish(mut self, end: u64) -> (Vec<u8>, OffCpuCounts) {
        let mut out = Vec::new();
        self.decide(u64::MAX, &mut out);
        for t in self.threads.into_values() {
            for o in t.outs {
                if t.exited_at.is_some() {
                    self.counts.unpaired += 1;
                } else {
                    let ns = end.saturating_sub(o.time);
                    store(
                        &mut self.counts,
                        &mut out,
                        o,
                        ns,
                        self.period_at,
                        self.min_ns,
                    );
                }
            }
        }
        (out, self.counts)
    }
}

/// Counts one switch; stores its sample with `ns` as its period when long enough.
fn store(
    counts: &mut OffCpuCounts,
    out: &mut Vec<u8>,
    mut o: SwitchOut,
    ns: u64,
    period_at: usize,
    min_ns: u64,
) {
    counts.switches += 1;
    if ns < min_ns {
        counts.short += 1;
        counts.short_ns += ns;
        return;
    }
    counts.stored += 1;
    counts.stored_ns += ns;
    if let Some(period) = o.record.get_mut(period_at..period_at + 8) {
        period.copy_from_slice(&ns.to_le_bytes());
        out.extend_from_slice(&o.record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::perf::{misc, sample_type as st};

    const LAYOUT: SampleLayout = SampleLayout {
        sample_type: st::IDENTIFIER | st::IP | st::TID | st::TIME | st::CPU | st::PERIOD,
        regs_user_mask: 0,
        sample_id_all: true,
    };
    const SWITCH_ID: u64 = 7;

    fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut r = kind.to_le_bytes().to_vec();
        r.extend(misc.to_le_bytes());
        r.extend(((8 + body.len()) as u16).to_le_bytes());
        r.extend(body);
        r
    }

    fn sample(id: u64, tid: u32, time: u64) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [id, 0x1000] {
            b.extend(v.to_le_bytes());
        }
        b.extend(tid.to_le_bytes());
        b.extend(tid.to_le_bytes());
        b.extend(time.to_le_bytes());
        b.extend(0u64.to_le_bytes()); // cpu
        b.extend(1u64.to_le_bytes()); // period
        record(9, misc::KERNEL, &b)
    }

    fn switch_in(tid: u32, time: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(tid.to_le_bytes());
        b.extend(tid.to_le_bytes());
        b.extend(time.to_le_bytes());
        b.extend(0u64.to_le_bytes()); // cpu
        b.extend(SWITCH_ID.to_le_bytes()); // identifier
        record(14, 0, &b)
    }

    /// A CPU-wide switch-in (`-a`): `tid` came back on the CPU, after `prev`.
    fn switch_in_cpu_wide(tid: u32, prev: u32, time: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(prev.to_le_bytes());
        b.extend(prev.to_le_bytes());
        b.extend(&switch_in(tid, time)[8..]);
        record(15, 0, &b)
    }

    /// (tid, time, period) of the samples in `bytes`.
    fn periods(bytes: &[u8]) -> Vec<(u32, u64, u64)> {
        RecordIter::new(bytes)
            .flatten()
            .filter_map(|raw| match LAYOUT.parse(&raw) {
                Ok(Record::Sample(s)) => Some((s.tid, s.time, s.period)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_switch_in_from_another_ring_that_arrives_first_still_pairs() {
        let mut pairing = SwitchPairing::new(LAYOUT, &[SWITCH_ID], 1_000).unwrap();
        // CPU 1's ring: the return at 5000 (drained first); CPU 0's ring: the switch-out at 1000,
        // a CPU sample, and the next switch-out at 9000.
        let mut batch = switch_in(42, 5_000);
        batch.extend(sample(SWITCH_ID, 42, 1_000));
        batch.extend(sample(99, 42, 6_000));
        batch.extend(sample(SWITCH_ID, 42, 9_000));
        let mut kept = Vec::new();
        pairing.process(&batch, Some(8_000), &mut kept);
        // The CPU sample passes; the first switch-out is stored with 4000 ns off the CPU; the
        // second waits for its return.
        assert_eq!(periods(&kept), vec![(42, 6_000, 1), (42, 1_000, 4_000)]);
        // Nothing returns before the end: the thread waited until then.
        let (rest, counts) = pairing.finish(12_000);
        assert_eq!(periods(&rest), vec![(42, 9_000, 3_000)]);
        assert_eq!(
            (counts.switches, counts.stored, counts.stored_ns),
            (2, 2, 7_000)
        );
    }

    #[test]
    fn short_switches_are_counted_not_stored_and_exits_are_not_waits() {
        let mut pairing = SwitchPairing::new(LAYOUT, &[SWITCH_ID], 1_000).unwrap();
        let mut batch = sample(SWITCH_ID, 5, 100);
        batch.extend(switch_in(5, 600));
        // Thread 6 exits at 2000; its last switch-out comes just after.
        let mut body = Vec::new();
        for v in [6u32, 1, 6, 6] {
            body.extend(v.to_le_bytes());
        }
        body.extend(2_000u64.to_le_bytes());
        body.extend([0u8; 24]); // sample_id trailer
        batch.extend(record(4, 0, &body));
        batch.extend(sample(SWITCH_ID, 6, 2_001));
        let mut kept = Vec::new();
        pairing.process(&batch, Some(3_000), &mut kept);
        assert!(periods(&kept).is_empty(), "{:?}", periods(&kept));
        let (rest, counts) = pairing.finish(10_000);
        assert!(periods(&rest).is_empty());
        assert_eq!(
            (counts.switches, counts.short, counts.short_ns),
            (1, 1, 500)
        );
    }

    /// `-a`: switch-ins come as SWITCH_CPU_WIDE records and pair like the per-thread ones; the
    /// idle task (tid 0 on every CPU) neither waits nor returns.
    #[test]
    fn cpu_wide_switches_pair_and_the_idle_task_is_left_out() {
        let mut pairing = SwitchPairing::new(LAYOUT, &[SWITCH_ID], 1_000).unwrap();
        let mut batch = sample(SWITCH_ID, 42, 1_000);
        batch.extend(sample(SWITCH_ID, 0, 1_500));
        batch.extend(switch_in_cpu_wide(0, 42, 1_001));
        batch.extend(switch_in_cpu_wide(42, 0, 4_000));
        let mut kept = Vec::new();
        pairing.process(&batch, Some(8_000), &mut kept);
        assert_eq!(periods(&kept), vec![(42, 1_000, 3_000)]);
        let pairing_seen = pairing.seen;
        let (rest, counts) = pairing.finish(100_000);
        assert!(periods(&rest).is_empty(), "{:?}", periods(&rest));
        assert_eq!((counts.switches, counts.stored, counts.unpaired), (1, 1, 0));
        // Neither switch-out is a CPU sample.
        assert_eq!(pairing_seen, 2);
    }

    /// `-a`: a thread's last switch, as it dies, comes with tid -1 (the kernel no longer knows
    /// its tid); it is no wait, not one that lasts until the end of the recording (3 s of
    /// `do_task_dead` per exiting thread in a 4 s recording before this was seen).
    #[test]
    fn a_dead_tasks_last_switch_out_is_no_wait() {
        let mut pairing = SwitchPairing::new(LAYOUT, &[SWITCH_ID], 1_000).unwrap();
        let batch = sample(SWITCH_ID, u32::MAX, 2_000);
        let mut kept = Vec::new();
        pairing.process(&batch, Some(8_000), &mut kept);
        assert!(periods(&kept).is_empty(), "{:?}", periods(&kept));
        // Not a CPU sample either.
        assert_eq!(pairing.seen, 1);
        let (rest, counts) = pairing.finish(100_000);
        assert!(periods(&rest).is_empty(), "{:?}", periods(&rest));
        assert_eq!((counts.switches, counts.unpaired), (0, 0));
    }
}
