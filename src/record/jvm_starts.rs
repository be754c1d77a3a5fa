//! `-a`: JVMs that start during the recording get jprof's agent too. The ring reader shows each
//! batch of records here before handing it to the writer; the executable mapping of a
//! `libjvm.so` (the MMAP2 record the kernel writes as a JVM's launcher loads it) starts an
//! attach on a thread of its own, which checks that the library is HotSpot's and waits until
//! the JVM can take an attach (jvm_attach.rs). The reader itself only reads the records.

use rustc_hash::FxHashSet;

use super::jvm_attach::{self, Attach, Origin, Running};
use crate::format::perf::{RawRecord, Record, RecordIter, RecordKind, SampleLayout};

/// Attaches running at once: a host starting JVMs faster than they come up (a build running
/// many short `javac`s) does not get a thread for each.
const MAX_ATTACHING: usize = 16;

/// The JVMs that started during an `-a` recording, and their attaches.
pub struct JvmStarts {
    layout: SampleLayout,
    /// Every process already given an attach (or found running at the start).
    known: FxHashSet<u32>,
    attaching: Vec<Running>,
    ended: Attach,
    /// JVMs left without an attach because [`MAX_ATTACHING`] were running.
    skipped: Vec<u32>,
}

/// The processes `records` show mapping a `libjvm.so` executable (the MMAP2 record the kernel
/// writes as a JVM's launcher loads it), in order, as often as they do.
pub fn jvms_mapped<'a>(
    layout: &'a SampleLayout,
    records: &'a [u8],
) -> impl Iterator<Item = u32> + 'a {
    RecordIter::new(records)
        .flatten()
        .filter_map(|raw| libjvm_mapped(layout, &raw))
}

/// The process `raw` shows mapping a `libjvm.so` executable, if it is such an MMAP2 record.
pub fn libjvm_mapped(layout: &SampleLayout, raw: &RawRecord<'_>) -> Option<u32> {
    if raw.kind != RecordKind::MMAP2 {
        return None;
    }
    match layout.parse(raw) {
        Ok(Record::Mmap2 {
            pid,
            prot,
            filename,
            ..
        }) if prot & libc::PROT_EXEC as u32 != 0 && filename.ends_with("/libjvm.so") => Some(pid),
        _ => None,
    }
}

impl JvmStarts {
    /// Watches for JVMs other than `known` (those running at the start, attached already).
    pub fn new(layout: SampleLayout, known: impl IntoIterator<Item = u32>) -> Self {
        let mut known: FxHashSet<u32> = known.into_iter().collect();
        known.insert(std::process::id());
        Self {
            layout,
            known,
            attaching: Vec::new(),
            ended: Attach::default(),
            skipped: Vec::new(),
        }
    }

    /// Starts an attach for each process in `records` that mapped a `libjvm.so` executable.
    pub fn look(&mut self, records: &[u8]) {
        let started: Vec<u32> = jvms_mapped(&self.layout, records).collect();
        for pid in started {
            if !self.known.insert(pid) {
                continue;
            }
            self.collect_ended();
            if self.attaching.len() >= MAX_ATTACHING {
                self.skipped.push(pid);
                continue;
            }
            self.attaching
                .push(jvm_attach::start(pid, Origin::StartedDuringRecording));
        }
    }

    /// Takes the outcomes of the attaches that ended.
    fn collect_ended(&mut self) {
        let (ended, running) = std::mem::take(&mut self.attaching)
            .into_iter()
            .partition::<Vec<_>, _>(Running::is_done);
        self.attaching = running;
        for attach in ended {
            self.ended.merge(attach.finish());
        }
    }

    /// Tells every attach still running to give up (the recording stopped).
    pub fn stop(&self) {
        self.attaching.iter().for_each(Running::stop);
    }

    /// What the attaches did.
    pub fn finish(self) -> Attach {
        let mut all = self.ended;
        for attach in self.attaching {
            all.merge(attach.finish());
        }
        if !self.skipped.is_empty() {
            let pids: Vec<String> = self.skipped.iter().map(u32::to_string).collect();
            all.merge(Attach {
                answered: Vec::new(),
                notes: vec![format!(
                    "JVMs that started while {MAX_ATTACHING} attaches were under way got no agent: {}",
                    pids.join(", ")
                )],
            });
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::perf_write;

    fn layout() -> SampleLayout {
        use crate::format::perf::sample_type as st;
        SampleLayout {
            sample_type: st::IP | st::TID | st::TIME | st::CPU | st::PERIOD,
            regs_user_mask: 0,
            sample_id_all: true,
        }
    }

    /// Only an executable mapping of a file named libjvm.so, once per process, and never jprof
    /// itself or a process known at the start. The processes here are not JVMs (this test
    /// process, and pid 1 which is no HotSpot): their attaches end without loading anything.
    #[test]
    fn a_process_is_attached_once_when_it_maps_libjvm_executable() {
        let layout = layout();
        let exec = (libc::PROT_READ | libc::PROT_EXEC) as u32;
        let map = |pid: u32, prot: u32, path: &str| {
            perf_write::mmap2(&layout, pid, 0x1000, 0x1000, 0, prot, path, None, 1)
        };
        let me = std::process::id();
        let mut records = map(me, exec, "/usr/lib/jvm/x/lib/server/libjvm.so");
        records.extend(map(77, libc::PROT_READ as u32, "/j/lib/server/libjvm.so"));
        records.extend(map(78, exec, "/j/lib/server/libjvm.so.debug"));
        records.extend(map(79, exec, "/j/lib/server/libjvm.so"));
        records.extend(map(1, exec, "/j/lib/server/libjvm.so"));
        records.extend(map(1, exec, "/j/lib/server/libjvm.so"));
        let mut starts = JvmStarts::new(layout, [79]);
        starts.look(&records);
        let pids: Vec<u32> = starts.attaching.iter().map(Running::pid).collect();
        assert_eq!(pids, [1]);
        let outcome = starts.finish();
        assert!(outcome.answered.is_empty(), "{outcome:?}");
    }
}
