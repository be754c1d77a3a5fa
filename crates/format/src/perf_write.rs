//! Encoding the perf records jprof synthesizes when it attaches to a running process (the kernel
//! reports only what happens after the events are opened): COMM and MMAP2, with the `sample_id`
//! trailer of the recording's layout so they parse and sort like kernel records.

use super::perf::{misc, sample_type, RecordKind, SampleId, SampleLayout};

fn record(kind: RecordKind, misc: u16, body: &[u8]) -> Vec<u8> {
    let size = 8 + body.len();
    let mut r = Vec::with_capacity(size);
    r.extend(kind.0.to_le_bytes());
    r.extend(misc.to_le_bytes());
    r.extend((size as u16).to_le_bytes());
    r.extend(body);
    r
}

/// NUL-terminated and padded to 8 bytes, like the kernel's strings.
fn padded_str(out: &mut Vec<u8>, s: &str) {
    out.extend(s.as_bytes());
    let len = (s.len() + 1).div_ceil(8) * 8;
    out.resize(out.len() + len - s.len(), 0);
}

fn trailer(out: &mut Vec<u8>, layout: &SampleLayout, id: &SampleId) {
    if !layout.sample_id_all {
        return;
    }
    let t = layout.sample_type;
    if t & sample_type::TID != 0 {
        out.extend(id.pid.to_le_bytes());
        out.extend(id.tid.to_le_bytes());
    }
    if t & sample_type::TIME != 0 {
        out.extend(id.time.unwrap_or(0).to_le_bytes());
    }
    if t & sample_type::ID != 0 {
        out.extend(0u64.to_le_bytes());
    }
    if t & sample_type::STREAM_ID != 0 {
        out.extend(0u64.to_le_bytes());
    }
    if t & sample_type::CPU != 0 {
        out.extend(id.cpu.unwrap_or(0).to_le_bytes());
        out.extend(0u32.to_le_bytes());
    }
    if t & sample_type::IDENTIFIER != 0 {
        out.extend(0u64.to_le_bytes());
    }
}

/// The `sample_id` trailer of a record about thread `tid` of `pid` at `time`.
fn thread_trailer(b: &mut Vec<u8>, layout: &SampleLayout, pid: u32, tid: u32, time: u64) {
    let id = SampleId {
        pid,
        tid,
        time: Some(time),
        cpu: None,
    };
    trailer(b, layout, &id);
}

/// A COMM record giving thread `tid` of process `pid` the name `name`, at `time` (sample-clock ns).
pub fn comm(layout: &SampleLayout, pid: u32, tid: u32, name: &str, time: u64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(pid.to_le_bytes());
    b.extend(tid.to_le_bytes());
    padded_str(&mut b, name);
    thread_trailer(&mut b, layout, pid, tid, time);
    record(RecordKind::COMM, misc::USER, &b)
}

/// An EXIT record: thread `tid` of process `pid` ended at `time` (sample-clock ns); its parent
/// is given as itself.
pub fn exit(layout: &SampleLayout, pid: u32, tid: u32, time: u64) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [pid, pid, tid, tid] {
        b.extend(v.to_le_bytes());
    }
    b.extend(time.to_le_bytes());
    thread_trailer(&mut b, layout, pid, tid, time);
    record(RecordKind::EXIT, 0, &b)
}

/// An MMAP2 of a file mapping, with the file's build id when known (as the kernel writes it
/// with the `build_id` attribute bit), else without device/inode information (jprof opens
/// files by path).
#[allow(clippy::too_many_arguments)]
pub fn mmap2(
    layout: &SampleLayout,
    pid: u32,
    addr: u64,
    len: u64,
    pgoff: u64,
    prot: u32,
    filename: &str,
    build_id: Option<&[u8]>,
    time: u64,
) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(pid.to_le_bytes());
    b.extend(pid.to_le_bytes());
    for v in [addr, len, pgoff] {
        b.extend(v.to_le_bytes());
    }
    let build_id = build_id.filter(|id| !id.is_empty() && id.len() <= 20);
    match build_id {
        // u8 size, 3 bytes of padding, 20 bytes of id.
        Some(id) => {
            let mut union = [0u8; 24];
            union[0] = id.len() as u8;
            union[4..4 + id.len()].copy_from_slice(id);
            b.extend(union);
        }
        None => b.extend([0u8; 24]), // maj, min, ino, ino_generation
    }
    b.extend(prot.to_le_bytes());
    b.extend(2u32.to_le_bytes()); // MAP_PRIVATE
    padded_str(&mut b, filename);
    thread_trailer(&mut b, layout, pid, pid, time);
    let with_id = if build_id.is_some() {
        misc::MMAP_BUILD_ID
    } else {
        0
    };
    record(RecordKind::MMAP2, misc::USER | with_id, &b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::{Record, RecordIter};
    use proptest::collection::vec;
    use proptest::prelude::*;

    const LAYOUT: SampleLayout = SampleLayout {
        sample_type: sample_type::IP | sample_type::TID | sample_type::TIME | sample_type::CPU,
        regs_user_mask: 0,
        sample_id_all: true,
    };

    #[test]
    fn synthesized_records_parse_back() {
        let mut buf = comm(&LAYOUT, 10, 11, "worker-thread", 500);
        buf.extend(mmap2(
            &LAYOUT,
            10,
            0x4000,
            0x1000,
            0x2000,
            5,
            "/usr/bin/x",
            None,
            600,
        ));
        buf.extend(mmap2(
            &LAYOUT,
            10,
            0x8000,
            0x1000,
            0,
            5,
            "/usr/lib/y.so",
            Some(&[0xab; 20]),
            700,
        ));
        let records: Vec<_> = RecordIter::new(&buf)
            .map(|r| LAYOUT.parse(&r.unwrap()).unwrap())
            .collect();
        assert!(
            matches!(&records[0], Record::Comm { pid: 10, tid: 11, comm, id, .. }
            if comm == "worker-thread" && id.time == Some(500))
        );
        assert!(
            matches!(&records[1], Record::Mmap2 { addr: 0x4000, len: 0x1000, pgoff: 0x2000, filename, id, .. }
            if filename == "/usr/bin/x" && id.time == Some(600))
        );
        assert!(matches!(&records[1], Record::Mmap2 { build_id: None, .. }));
        assert!(
            matches!(&records[2], Record::Mmap2 { build_id: Some(b), filename, .. }
            if b == &[0xab; 20] && filename == "/usr/lib/y.so")
        );
    }

    /// Parses the one record in `buf`.
    fn parse_one(buf: &[u8]) -> Record<'_> {
        let mut records = RecordIter::new(buf);
        let record = LAYOUT.parse(&records.next().unwrap().unwrap()).unwrap();
        assert!(records.next().is_none());
        record
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// What `comm` writes parses back to the same thread, name and time.
        #[test]
        fn any_comm_parses_back(pid: u32, tid: u32, name in "[^\\x00]{0,40}", time: u64) {
            let buf = comm(&LAYOUT, pid, tid, &name, time);
            let record = parse_one(&buf);
            let Record::Comm { pid: p, tid: t, comm: c, exec, id } = record else {
                panic!("not a COMM: {record:?}");
            };
            prop_assert_eq!((p, t, c, exec), (pid, tid, name, false));
            prop_assert_eq!((id.pid, id.tid, id.time), (pid, tid, Some(time)));
        }

        /// What `mmap2` writes parses back to the same mapping, build id and time.
        #[test]
        #[allow(clippy::too_many_arguments)]
        fn any_mmap2_parses_back(
            pid: u32,
            addr: u64,
            len: u64,
            pgoff: u64,
            prot in 0u32..8,
            filename in "[^\\x00]{0,60}",
            build_id in proptest::option::of(vec(any::<u8>(), 1..=20)),
            time: u64,
        ) {
            let buf = mmap2(&LAYOUT, pid, addr, len, pgoff, prot, &filename, build_id.as_deref(), time);
            let record = parse_one(&buf);
            let Record::Mmap2 { pid: p, tid, addr: a, len: l, pgoff: o, build_id: b, prot: pr, filename: f, id, .. } = record else {
                panic!("not an MMAP2: {record:?}");
            };
            prop_assert_eq!((p, tid, a, l, o, pr), (pid, pid, addr, len, pgoff, prot));
            prop_assert_eq!((b, f, id.time), (build_id, filename, Some(time)));
        }
    }
}
