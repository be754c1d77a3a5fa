//! The process model: per process, the executable mappings announced by MMAP/MMAP2 records
//! (copied on fork, cleared on exec), and per thread its process and name (COMM). Fed in
//! time order; answers "which mapping holds this address in this process now".

use std::sync::Arc;

use rustc_hash::FxHashMap;

/// One mapped file (or pseudo file such as `[vdso]`) range in a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    /// Exclusive.
    pub end: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    pub path: Arc<str>,
    /// Build id the kernel reported with the MMAP2 record, if any.
    pub build_id: Option<Arc<[u8]>>,
}

impl Mapping {
    /// File offset of a runtime address inside this mapping.
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.start).wrapping_add(self.pgoff)
    }
}

#[derive(Clone, Debug, Default)]
struct Process {
    /// Sorted by start, non-overlapping.
    maps: Vec<Mapping>,
    /// Changes whenever `maps` changes; unique across processes so caches keyed by it are safe.
    generation: u64,
}

/// A thread: its process and its current name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Thread {
    pub pid: u32,
    pub comm: String,
}

#[derive(Debug, Default)]
pub struct ProcessModel {
    processes: FxHashMap<u32, Process>,
    threads: FxHashMap<u32, Thread>,
    next_generation: u64,
}

impl ProcessModel {
    fn bump(&mut self) -> u64 {
        self.next_generation += 1;
        self.next_generation
    }

    /// A new mapping; whatever it overlaps is cut away (the kernel replaced it).
    pub fn add_mapping(&mut self, pid: u32, mapping: Mapping) {
        if mapping.end <= mapping.start {
            return;
        }
        let generation = self.bump();
        let process = self.processes.entry(pid).or_default();
        process.generation = generation;
        let (s, e) = (mapping.start, mapping.end);
        let mut kept = Vec::with_capacity(process.maps.len() + 2);
        for m in process.maps.drain(..) {
            if m.end <= s || m.start >= e {
                kept.push(m);
                continue;
            }
            if m.start < s {
                kept.push(Mapping {
                    end: s,
                    ..m.clone()
                });
            }
            if m.end > e {
                kept.push(Mapping {
                    start: e,
                    pgoff: m.pgoff.wrapping_add(e - m.start),
                    ..m
                });
            }
        }
        kept.push(mapping);
        kept.sort_by_key(|m| m.start);
        process.maps = kept;
    }

    /// FORK: a new process (pid != ppid) starts with a copy of its parent's mappings; a new
    /// thread joins its process. Either way the name is inherited.
    pub fn fork(&mut self, pid: u32, ppid: u32, tid: u32, ptid: u32) {
        let comm = self
            .threads
            .get(&ptid)
            .map(|t| t.comm.clone())
            .unwrap_or_default();
        if pid != ppid {
            let maps = self
                .processes
                .get(&ppid)
                .map(|p| p.maps.clone())
                .unwrap_or_default();
            let generation = self.bump();
            self.processes.insert(pid, Process { maps, generation });
        }
        self.threads.insert(tid, Thread { pid, comm });
    }

    /// COMM: names the thread; with exec the process's old mappings are gone.
    pub fn comm(&mut self, pid: u32, tid: u32, comm: &str, exec: bool) {
        if exec {
            let generation = self.bump();
            self.processes.insert(
                pid,
                Process {
                    maps: Vec::new(),
                    generation,
                },
            );
        }
        self.threads.insert(
            tid,
            Thread {
                pid,
                comm: comm.to_string(),
            },
        );
    }

    /// Makes sure a thread seen only in samples is known.
    pub fn note_thread(&mut self, pid: u32, tid: u32) {
        self.threads.entry(tid).or_insert_with(|| Thread {
            pid,
            comm: String::new(),
        });
    }

    pub fn lookup(&self, pid: u32, addr: u64) -> Option<&Mapping> {
        let maps = &self.processes.get(&pid)?.maps;
        let idx = maps.partition_point(|m| m.start <= addr);
        let m = maps.get(idx.checked_sub(1)?)?;
        (addr < m.end).then_some(m)
    }

    pub fn mappings(&self, pid: u32) -> &[Mapping] {
        self.processes.get(&pid).map_or(&[], |p| &p.maps)
    }

    /// Changes whenever the process's mappings change.
    pub fn generation(&self, pid: u32) -> u64 {
        self.processes.get(&pid).map_or(0, |p| p.generation)
    }

    pub fn thread(&self, tid: u32) -> Option<&Thread> {
        self.threads.get(&tid)
    }

    pub fn threads(&self) -> impl Iterator<Item = (u32, &Thread)> {
        self.threads.iter().map(|(&tid, t)| (tid, t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(start: u64, end: u64, pgoff: u64, path: &str) -> Mapping {
        Mapping {
            start,
            end,
            pgoff,
            path: path.into(),
            build_id: None,
        }
    }

    #[test]
    fn overlapping_mapping_splits_the_old_one() {
        let mut m = ProcessModel::default();
        m.add_mapping(1, map(0x1000, 0x5000, 0, "/a"));
        m.add_mapping(1, map(0x2000, 0x3000, 0x10, "/b"));
        assert_eq!(&*m.lookup(1, 0x1fff).unwrap().path, "/a");
        assert_eq!(&*m.lookup(1, 0x2000).unwrap().path, "/b");
        let right = m.lookup(1, 0x3000).unwrap();
        assert_eq!((&*right.path, right.pgoff), ("/a", 0x2000));
        assert!(m.lookup(1, 0x5000).is_none());
        assert!(m.lookup(2, 0x2000).is_none());
    }

    #[test]
    fn fork_copies_and_exec_clears() {
        let mut m = ProcessModel::default();
        m.comm(1, 1, "parent", true);
        m.add_mapping(1, map(0x1000, 0x2000, 0, "/a"));
        let g1 = m.generation(1);
        m.fork(2, 1, 2, 1);
        assert_eq!(&*m.lookup(2, 0x1000).unwrap().path, "/a");
        assert_eq!(m.thread(2).unwrap().comm, "parent");
        assert_ne!(m.generation(2), g1);
        m.fork(1, 1, 3, 1);
        assert_eq!(m.thread(3).unwrap().pid, 1);
        m.comm(2, 2, "child", true);
        assert!(m.lookup(2, 0x1000).is_none());
        assert!(m.lookup(1, 0x1000).is_some());
        assert_eq!(m.thread(2).unwrap().comm, "child");
    }
}
