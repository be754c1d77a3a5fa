//! Pure parser for kernel perf records (`struct perf_event_header` + body), as they come out of
//! the mmap'd ring and as they are stored in a recording. No I/O; every error names the offset.

use super::{Cursor, ParseError, U64s};

/// Record type (`perf_event_header.type`). Open set: unknown kinds are skipped, not fatal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordKind(pub u32);

impl RecordKind {
    /// `PERF_RECORD_MMAP`: an executable mapping, without device or build id.
    pub const MMAP: Self = Self(1);
    /// `PERF_RECORD_LOST`: records dropped because the ring was full.
    pub const LOST: Self = Self(2);
    /// `PERF_RECORD_COMM`: a thread's name was set, or it exec'd.
    pub const COMM: Self = Self(3);
    /// `PERF_RECORD_EXIT`: a thread or process ended.
    pub const EXIT: Self = Self(4);
    /// `PERF_RECORD_THROTTLE`: the kernel stopped sampling an event that fired too often.
    pub const THROTTLE: Self = Self(5);
    /// `PERF_RECORD_UNTHROTTLE`: sampling of a throttled event resumed.
    pub const UNTHROTTLE: Self = Self(6);
    /// `PERF_RECORD_FORK`: a new thread or process.
    pub const FORK: Self = Self(7);
    /// `PERF_RECORD_SAMPLE`: one sample, laid out by `sample_type`.
    pub const SAMPLE: Self = Self(9);
    /// `PERF_RECORD_MMAP2`: a mapping with protection, flags and device/inode or build id.
    pub const MMAP2: Self = Self(10);
    /// `PERF_RECORD_LOST_SAMPLES`: samples dropped for reasons other than a full ring.
    pub const LOST_SAMPLES: Self = Self(13);
    /// A context switch of the monitored thread (`attr.context_switch`).
    pub const SWITCH: Self = Self(14);
    /// `PERF_RECORD_SWITCH_CPU_WIDE`: a context switch seen by a CPU-wide event (`-a`); it
    /// also names the task switched to or from.
    pub const SWITCH_CPU_WIDE: Self = Self(15);
    /// `PERF_RECORD_KSYMBOL`: a kernel symbol (BPF program, trampoline) was added or removed.
    pub const KSYMBOL: Self = Self(17);
    /// jprof's own record (never the kernel's, whose kinds are small numbers; perf's user
    /// kinds start at 64): a sample's frames past its stack copy, read at sample time, written
    /// by the recorder just before that sample (docs/recording-format.md).
    pub const JPROF_DEEP_FRAMES: Self = Self(0x4a50_0001);
}

/// `sample_type` bits (uapi `enum perf_event_sample_format`).
pub mod sample_type {
    /// `PERF_SAMPLE_IP`: the instruction pointer at the sample.
    pub const IP: u64 = 1 << 0;
    /// `PERF_SAMPLE_TID`: process and thread id.
    pub const TID: u64 = 1 << 1;
    /// `PERF_SAMPLE_TIME`: timestamp on the event's clock, in ns.
    pub const TIME: u64 = 1 << 2;
    /// `PERF_SAMPLE_ADDR`: the data address an access event refers to.
    pub const ADDR: u64 = 1 << 3;
    /// `PERF_SAMPLE_READ`: counter values in `read_format` layout.
    pub const READ: u64 = 1 << 4;
    /// `PERF_SAMPLE_CALLCHAIN`: the kernel-walked stack, `u64 nr` then `ips[nr]`.
    pub const CALLCHAIN: u64 = 1 << 5;
    /// `PERF_SAMPLE_ID`: the id of the opened event (the original's, for inherited copies).
    pub const ID: u64 = 1 << 6;
    /// `PERF_SAMPLE_CPU`: the CPU the sample was taken on.
    pub const CPU: u64 = 1 << 7;
    /// `PERF_SAMPLE_PERIOD`: events counted since the previous sample.
    pub const PERIOD: u64 = 1 << 8;
    /// `PERF_SAMPLE_STREAM_ID`: the id of the event instance that wrote the record.
    pub const STREAM_ID: u64 = 1 << 9;
    /// `PERF_SAMPLE_RAW`: tracepoint or PMU-specific raw data.
    pub const RAW: u64 = 1 << 10;
    /// `PERF_SAMPLE_BRANCH_STACK`: last-branch records.
    pub const BRANCH_STACK: u64 = 1 << 11;
    /// `PERF_SAMPLE_REGS_USER`: the user registers picked by `sample_regs_user`.
    pub const REGS_USER: u64 = 1 << 12;
    /// `PERF_SAMPLE_STACK_USER`: a copy of the user stack from its stack pointer.
    pub const STACK_USER: u64 = 1 << 13;
    /// `PERF_SAMPLE_IDENTIFIER`: the event id at a fixed place (first in samples, last in trailers).
    pub const IDENTIFIER: u64 = 1 << 16;
}

/// `misc` field: CPU mode of a sample.
pub mod misc {
    /// `PERF_RECORD_MISC_CPUMODE_MASK`: the bits holding the CPU mode.
    pub const CPUMODE_MASK: u16 = 7;
    /// `PERF_RECORD_MISC_KERNEL`: the sample hit kernel code.
    pub const KERNEL: u16 = 1;
    /// `PERF_RECORD_MISC_USER`: the sample hit user code.
    pub const USER: u16 = 2;
    /// COMM record caused by exec.
    pub const COMM_EXEC: u16 = 1 << 13;
    /// SWITCH record: the thread left the CPU (otherwise it came back).
    pub const SWITCH_OUT: u16 = 1 << 13;
    /// SWITCH out record: the thread was preempted while runnable.
    pub const SWITCH_OUT_PREEMPT: u16 = 1 << 14;
    /// MMAP2 record: it carries the file's build id instead of device and inode numbers.
    pub const MMAP_BUILD_ID: u16 = 1 << 14;
}

/// Callchain context markers (`enum perf_callchain_context`), stored as u64 in `ips[]`.
pub mod context {
    /// `PERF_CONTEXT_HV`: hypervisor frames follow.
    pub const HV: u64 = -32i64 as u64;
    /// `PERF_CONTEXT_KERNEL`: kernel frames follow.
    pub const KERNEL: u64 = -128i64 as u64;
    /// `PERF_CONTEXT_USER`: user frames follow.
    pub const USER: u64 = -512i64 as u64;
    /// `PERF_CONTEXT_GUEST`: frames of a guest VM follow.
    pub const GUEST: u64 = -2048i64 as u64;
    /// `PERF_CONTEXT_GUEST_KERNEL`: guest kernel frames follow.
    pub const GUEST_KERNEL: u64 = -2176i64 as u64;
    /// `PERF_CONTEXT_GUEST_USER`: guest user frames follow.
    pub const GUEST_USER: u64 = -2560i64 as u64;
    /// Anything at or above this is a marker, not an address.
    pub const MAX: u64 = -4095i64 as u64;
}

/// What the parser needs to know about how the events were opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleLayout {
    /// `perf_event_attr.sample_type`: which [`sample_type`] bits the records carry.
    pub sample_type: u64,
    /// `sample_regs_user` mask; registers appear in ascending bit order.
    pub regs_user_mask: u64,
    /// Whether non-sample records carry the `sample_id` trailer.
    pub sample_id_all: bool,
}

/// One record, split from a byte stream but not yet decoded.
#[derive(Clone, Copy, Debug)]
pub struct RawRecord<'a> {
    /// `perf_event_header.type`.
    pub kind: RecordKind,
    /// `perf_event_header.misc`: CPU mode and per-kind flags (see [`misc`]).
    pub misc: u16,
    /// The body after the 8-byte header.
    pub body: &'a [u8],
    /// Offset of the header within the buffer the record came from.
    pub offset: usize,
}

/// Splits a buffer of back-to-back perf records. Stops with an error at the first header that
/// cannot be right (size < 8 or past the end); records before it have been returned.
pub struct RecordIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> RecordIter<'a> {
    /// Records from the start of `buf`; offsets are relative to it.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RawRecord<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let offset = self.pos;
        let rest = &self.buf[offset..];
        if rest.len() < 8 {
            self.pos = self.buf.len();
            return Some(Err(ParseError::new(offset, "perf record header (8 bytes)")));
        }
        let kind = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let misc = u16::from_le_bytes([rest[4], rest[5]]);
        let size = u16::from_le_bytes([rest[6], rest[7]]) as usize;
        if size < 8 || size > rest.len() {
            self.pos = self.buf.len();
            return Some(Err(ParseError::new(
                offset,
                "perf record size between 8 and the bytes left",
            )));
        }
        self.pos += size;
        Some(Ok(RawRecord {
            kind: RecordKind(kind),
            misc,
            body: &rest[8..size],
            offset,
        }))
    }
}

/// The `sample_id` trailer of non-sample records (present with `sample_id_all`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleId {
    /// Process id; 0 without `PERF_SAMPLE_TID`.
    pub pid: u32,
    /// Thread id; 0 without `PERF_SAMPLE_TID`.
    pub tid: u32,
    /// Sample-clock timestamp in ns, with `PERF_SAMPLE_TIME`.
    pub time: Option<u64>,
    /// CPU the record was written on, with `PERF_SAMPLE_CPU`.
    pub cpu: Option<u32>,
}

/// A decoded sample. Slices borrow from the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample<'a> {
    /// Which event fired (`PERF_SAMPLE_IDENTIFIER`: the id of the event jprof opened, also for
    /// the copies `inherit` makes in new threads).
    pub id: Option<u64>,
    /// Instruction pointer where the event fired.
    pub ip: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Sample-clock timestamp in ns.
    pub time: u64,
    /// CPU the sample was taken on.
    pub cpu: u32,
    /// Events counted since the previous sample (1 without `PERF_SAMPLE_PERIOD`).
    pub period: u64,
    /// Raw `ips[]` including context markers (see [`context`]).
    pub callchain: U64s<'a>,
    /// User registers in ascending mask-bit order; empty when the kernel gave none.
    pub regs_user: U64s<'a>,
    /// Copied user stack, cut to `dyn_size`.
    pub stack_user: &'a [u8],
    /// CPU mode from `misc`.
    pub cpumode: u16,
}

/// What [`SampleLayout::sample_head`] reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleHead {
    /// The `PERF_SAMPLE_IDENTIFIER` event id, when the layout has it.
    pub id: Option<u64>,
    /// Process id (0 without `PERF_SAMPLE_TID`).
    pub pid: u32,
    /// Thread id (0 without `PERF_SAMPLE_TID`).
    pub tid: u32,
    /// Sample-clock timestamp in ns (0 without `PERF_SAMPLE_TIME`).
    pub time: u64,
}

/// A decoded record. `Other` keeps kinds jprof does not interpret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// `PERF_RECORD_SAMPLE`.
    Sample(Sample<'a>),
    /// `PERF_RECORD_MMAP2`: `len` bytes of `filename` from file offset `pgoff` mapped at `addr`.
    Mmap2 {
        /// Process that mapped it.
        pid: u32,
        /// Thread that mapped it.
        tid: u32,
        /// Start address of the mapping.
        addr: u64,
        /// Length of the mapping in bytes.
        len: u64,
        /// File offset in bytes mapped at `addr`.
        pgoff: u64,
        /// Build id when the kernel supplied one (`PERF_RECORD_MISC_MMAP_BUILD_ID`).
        build_id: Option<Vec<u8>>,
        /// `PROT_*` bits of the mapping.
        prot: u32,
        /// `MAP_*` bits of the mapping.
        flags: u32,
        /// Path of the mapped file, or a pseudo name such as `[vdso]`.
        filename: String,
        /// The `sample_id` trailer.
        id: SampleId,
    },
    /// `PERF_RECORD_MMAP`: like [`Record::Mmap2`] without protection, flags or build id.
    Mmap {
        /// Process that mapped it.
        pid: u32,
        /// Thread that mapped it.
        tid: u32,
        /// Start address of the mapping.
        addr: u64,
        /// Length of the mapping in bytes.
        len: u64,
        /// File offset in bytes mapped at `addr`.
        pgoff: u64,
        /// Path of the mapped file, or a pseudo name.
        filename: String,
        /// The `sample_id` trailer.
        id: SampleId,
    },
    /// `PERF_RECORD_COMM`: thread `tid` is now named `comm`.
    Comm {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// The thread's new name.
        comm: String,
        /// Whether an exec caused it (`PERF_RECORD_MISC_COMM_EXEC`).
        exec: bool,
        /// The `sample_id` trailer.
        id: SampleId,
    },
    /// `PERF_RECORD_FORK`: thread `tid` of `pid` was created by `ptid` of `ppid`.
    Fork {
        /// Process id of the new thread (equal to `tid` for a new process).
        pid: u32,
        /// Process id of the parent.
        ppid: u32,
        /// Thread id of the new thread.
        tid: u32,
        /// Thread id of the parent.
        ptid: u32,
        /// Sample-clock timestamp in ns.
        time: u64,
    },
    /// `PERF_RECORD_EXIT`: thread `tid` of `pid` ended.
    Exit {
        /// Process id.
        pid: u32,
        /// Parent's process id.
        ppid: u32,
        /// Thread id.
        tid: u32,
        /// Parent's thread id.
        ptid: u32,
        /// Sample-clock timestamp in ns.
        time: u64,
    },
    /// `PERF_RECORD_LOST`: records dropped because the ring was full.
    Lost {
        /// Number of records dropped.
        lost: u64,
        /// The `sample_id` trailer.
        id: SampleId,
    },
    /// `PERF_RECORD_LOST_SAMPLES`: samples the kernel dropped before writing them.
    LostSamples {
        /// Number of samples dropped.
        lost: u64,
        /// The `sample_id` trailer.
        id: SampleId,
    },
    /// `PERF_RECORD_THROTTLE` or `PERF_RECORD_UNTHROTTLE`.
    Throttle {
        /// Sample-clock timestamp in ns.
        time: u64,
        /// The throttled event's id (each CPU's event of `-a` has its own), pairing a stop
        /// with its resumption.
        id: u64,
        /// Whether sampling resumed (UNTHROTTLE) rather than stopped.
        unthrottle: bool,
    },
    /// `PERF_RECORD_SWITCH` or `PERF_RECORD_SWITCH_CPU_WIDE`: the thread of the `sample_id`
    /// left or came back to a CPU.
    Switch {
        /// Whether the thread left the CPU (`PERF_RECORD_MISC_SWITCH_OUT`).
        out: bool,
        /// Whether it left while still runnable (`PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`).
        preempt: bool,
        /// The `sample_id` trailer.
        id: SampleId,
    },
    /// [`RecordKind::JPROF_DEEP_FRAMES`]: thread `tid`'s frames past the stack copy of its
    /// sample at `time`, innermost first, four values each: the frame pointer, the saved frame
    /// pointer and return address at it, and the word three below it (HotSpot's `Method*`).
    DeepFrames {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// The sample's time.
        time: u64,
        /// `4 × n` values.
        words: U64s<'a>,
    },
    /// A kind jprof does not decode, with its body (after the 8-byte header) as read.
    Other {
        /// `perf_event_header.type`.
        kind: RecordKind,
        /// The undecoded body.
        body: &'a [u8],
    },
}

impl Record<'_> {
    /// The record's timestamp on the sample clock, when it carries one.
    pub fn time(&self) -> Option<u64> {
        match self {
            Record::Sample(s) => Some(s.time),
            Record::Fork { time, .. }
            | Record::Exit { time, .. }
            | Record::Throttle { time, .. }
            | Record::DeepFrames { time, .. } => Some(*time),
            Record::Mmap2 { id, .. }
            | Record::Mmap { id, .. }
            | Record::Comm { id, .. }
            | Record::Lost { id, .. }
            | Record::LostSamples { id, .. }
            | Record::Switch { id, .. } => id.time,
            Record::Other { .. } => None,
        }
    }
}

impl SampleLayout {
    /// Timestamp of any record on the sample clock, when it has one.
    pub fn time_of(&self, raw: &RawRecord<'_>) -> Option<u64> {
        self.parse(raw).ok()?.time()
    }

    /// Decodes a raw record. `raw.offset` is used in errors.
    pub fn parse<'a>(&self, raw: &RawRecord<'a>) -> Result<Record<'a>, ParseError> {
        let mut c = Cursor::new(raw.body, raw.offset + 8);
        Ok(match raw.kind {
            RecordKind::SAMPLE => Record::Sample(self.parse_sample(&mut c, raw.misc)?),
            RecordKind::MMAP2 => {
                let pid = c.u32()?;
                let tid = c.u32()?;
                let addr = c.u64()?;
                let len = c.u64()?;
                let pgoff = c.u64()?;
                let union = c.bytes(24)?;
                let build_id = if raw.misc & misc::MMAP_BUILD_ID != 0 {
                    let n = (union[0] as usize).min(20);
                    Some(union[4..4 + n].to_vec())
                } else {
                    None
                };
                let prot = c.u32()?;
                let flags = c.u32()?;
                let filename = c.cstr_padded(self.trailer_len())?;
                let id = self.parse_sample_id(&mut c)?;
                Record::Mmap2 {
                    pid,
                    tid,
                    addr,
                    len,
                    pgoff,
                    build_id,
                    prot,
                    flags,
                    filename,
                    id,
                }
            }
            RecordKind::MMAP => {
                let pid = c.u32()?;
                let tid = c.u32()?;
                let addr = c.u64()?;
                let len = c.u64()?;
                let pgoff = c.u64()?;
                let filename = c.cstr_padded(self.trailer_len())?;
                let id = self.parse_sample_id(&mut c)?;
                Record::Mmap {
                    pid,
                    tid,
                    addr,
                    len,
                    pgoff,
                    filename,
                    id,
                }
            }
            RecordKind::COMM => {
                let pid = c.u32()?;
                let tid = c.u32()?;
                let comm = c.cstr_padded(self.trailer_len())?;
                let id = self.parse_sample_id(&mut c)?;
                Record::Comm {
                    pid,
                    tid,
                    comm,
                    exec: raw.misc & misc::COMM_EXEC != 0,
                    id,
                }
            }
            RecordKind::FORK | RecordKind::EXIT => {
                let pid = c.u32()?;
                let ppid = c.u32()?;
                let tid = c.u32()?;
                let ptid = c.u32()?;
                let time = c.u64()?;
                if raw.kind == RecordKind::FORK {
                    Record::Fork {
                        pid,
                        ppid,
                        tid,
                        ptid,
                        time,
                    }
                } else {
                    Record::Exit {
                        pid,
                        ppid,
                        tid,
                        ptid,
                        time,
                    }
                }
            }
            RecordKind::LOST => {
                let _id = c.u64()?;
                let lost = c.u64()?;
                let id = self.parse_sample_id(&mut c)?;
                Record::Lost { lost, id }
            }
            RecordKind::LOST_SAMPLES => {
                let lost = c.u64()?;
                let id = self.parse_sample_id(&mut c)?;
                Record::LostSamples { lost, id }
            }
            RecordKind::SWITCH | RecordKind::SWITCH_CPU_WIDE => {
                if raw.kind == RecordKind::SWITCH_CPU_WIDE {
                    // next_prev_pid, next_prev_tid: the other task, not needed.
                    c.u64()?;
                }
                Record::Switch {
                    out: raw.misc & misc::SWITCH_OUT != 0,
                    preempt: raw.misc & misc::SWITCH_OUT_PREEMPT != 0,
                    id: self.parse_sample_id(&mut c)?,
                }
            }
            RecordKind::THROTTLE | RecordKind::UNTHROTTLE => Record::Throttle {
                time: c.u64()?,
                id: c.u64()?,
                unthrottle: raw.kind == RecordKind::UNTHROTTLE,
            },
            RecordKind::JPROF_DEEP_FRAMES => {
                let pid = c.u32()?;
                let tid = c.u32()?;
                let time = c.u64()?;
                let n = (c.remaining() / 32) * 4;
                Record::DeepFrames {
                    pid,
                    tid,
                    time,
                    words: c.u64_view(n)?,
                }
            }
            kind => Record::Other {
                kind,
                body: raw.body,
            },
        })
    }

    /// The first fields of a SAMPLE record (which event, whose, when) without decoding the
    /// rest: for counting and pairing, where the stacks do not matter.
    pub fn sample_head(&self, raw: &RawRecord<'_>) -> Result<SampleHead, ParseError> {
        let mut c = Cursor::new(raw.body, raw.offset + 8);
        let t = self.sample_type;
        let mut head = SampleHead::default();
        if t & sample_type::IDENTIFIER != 0 {
            head.id = Some(c.u64()?);
        }
        if t & sample_type::IP != 0 {
            c.u64()?;
        }
        if t & sample_type::TID != 0 {
            head.pid = c.u32()?;
            head.tid = c.u32()?;
        }
        if t & sample_type::TIME != 0 {
            head.time = c.u64()?;
        }
        Ok(head)
    }

    /// Where a SAMPLE record (header included) holds its period, when it has one: the fields
    /// before it are all 8 bytes wide.
    pub fn period_offset(&self) -> Option<usize> {
        let t = self.sample_type;
        if t & sample_type::PERIOD == 0 {
            return None;
        }
        let before = [
            sample_type::IDENTIFIER,
            sample_type::IP,
            sample_type::TID,
            sample_type::TIME,
            sample_type::ADDR,
            sample_type::ID,
            sample_type::STREAM_ID,
            sample_type::CPU,
        ];
        Some(8 + 8 * before.iter().filter(|&&bit| t & bit != 0).count())
    }

    /// Byte length of the `sample_id` trailer.
    fn trailer_len(&self) -> usize {
        if !self.sample_id_all {
            return 0;
        }
        let t = self.sample_type;
        let mut n = 0;
        for (bit, len) in [
            (sample_type::TID, 8),
            (sample_type::TIME, 8),
            (sample_type::ID, 8),
            (sample_type::STREAM_ID, 8),
            (sample_type::CPU, 8),
            (sample_type::IDENTIFIER, 8),
        ] {
            if t & bit != 0 {
                n += len;
            }
        }
        n
    }

    fn parse_sample_id(&self, c: &mut Cursor<'_>) -> Result<SampleId, ParseError> {
        let mut id = SampleId::default();
        if !self.sample_id_all {
            return Ok(id);
        }
        let t = self.sample_type;
        if t & sample_type::TID != 0 {
            id.pid = c.u32()?;
            id.tid = c.u32()?;
        }
        if t & sample_type::TIME != 0 {
            id.time = Some(c.u64()?);
        }
        if t & sample_type::ID != 0 {
            c.u64()?;
        }
        if t & sample_type::STREAM_ID != 0 {
            c.u64()?;
        }
        if t & sample_type::CPU != 0 {
            id.cpu = Some(c.u32()?);
            c.u32()?;
        }
        Ok(id)
    }

    fn parse_sample<'a>(&self, c: &mut Cursor<'a>, misc: u16) -> Result<Sample<'a>, ParseError> {
        let t = self.sample_type;
        let mut s = Sample {
            id: None,
            ip: 0,
            pid: 0,
            tid: 0,
            time: 0,
            cpu: 0,
            period: 1,
            callchain: U64s::default(),
            regs_user: U64s::default(),
            stack_user: &[],
            cpumode: misc & misc::CPUMODE_MASK,
        };
        if t & sample_type::IDENTIFIER != 0 {
            s.id = Some(c.u64()?);
        }
        if t & sample_type::IP != 0 {
            s.ip = c.u64()?;
        }
        if t & sample_type::TID != 0 {
            s.pid = c.u32()?;
            s.tid = c.u32()?;
        }
        if t & sample_type::TIME != 0 {
            s.time = c.u64()?;
        }
        if t & sample_type::ADDR != 0 {
            c.u64()?;
        }
        if t & sample_type::ID != 0 {
            c.u64()?;
        }
        if t & sample_type::STREAM_ID != 0 {
            c.u64()?;
        }
        if t & sample_type::CPU != 0 {
            s.cpu = c.u32()?;
            c.u32()?;
        }
        if t & sample_type::PERIOD != 0 {
            s.period = c.u64()?;
        }
        if t & sample_type::READ != 0 {
            return Err(c.error("sample without READ values (jprof never requests them)"));
        }
        if t & sample_type::CALLCHAIN != 0 {
            let nr = c.u64()?;
            if nr > (c.remaining() / 8) as u64 {
                return Err(c.error("callchain length that fits in the record"));
            }
            s.callchain = c.u64_view(nr as usize)?;
        }
        if t & (sample_type::RAW | sample_type::BRANCH_STACK) != 0 {
            return Err(c.error("sample without RAW/BRANCH_STACK (jprof never requests them)"));
        }
        if t & sample_type::REGS_USER != 0 {
            let abi = c.u64()?;
            if abi != 0 {
                s.regs_user = c.u64_view(self.regs_user_mask.count_ones() as usize)?;
            }
        }
        if t & sample_type::STACK_USER != 0 {
            let size = c.u64()?;
            if size != 0 {
                if size > c.remaining() as u64 {
                    return Err(c.error("user stack size that fits in the record"));
                }
                let data = c.bytes(size as usize)?;
                let dyn_size = c.u64()?;
                s.stack_user = &data[..(dyn_size.min(size)) as usize];
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    fn header(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut v = kind.to_le_bytes().to_vec();
        v.extend(misc.to_le_bytes());
        v.extend(((body.len() + 8) as u16).to_le_bytes());
        v.extend(body);
        v
    }

    const LAYOUT: SampleLayout = SampleLayout {
        sample_type: sample_type::IP
            | sample_type::TID
            | sample_type::TIME
            | sample_type::CPU
            | sample_type::PERIOD
            | sample_type::CALLCHAIN
            | sample_type::REGS_USER
            | sample_type::STACK_USER,
        regs_user_mask: 0x1c0,
        sample_id_all: true,
    };

    #[test]
    fn sample_with_callchain_regs_and_stack() {
        let mut b = Vec::new();
        b.extend(0x1000u64.to_le_bytes()); // ip
        b.extend(7u32.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend(123u64.to_le_bytes()); // time
        b.extend(1u32.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend(5000u64.to_le_bytes()); // period
        b.extend(3u64.to_le_bytes());
        for ip in [context::USER, 0x1000, 0x2000] {
            b.extend(ip.to_le_bytes());
        }
        b.extend(2u64.to_le_bytes()); // abi 64
        for r in [1u64, 2, 3] {
            b.extend(r.to_le_bytes());
        }
        b.extend(16u64.to_le_bytes());
        b.extend([0xAAu8; 16]);
        b.extend(8u64.to_le_bytes()); // dyn_size
        let rec = header(9, misc::USER, &b);
        let raw = RecordIter::new(&rec).next().unwrap().unwrap();
        let Record::Sample(s) = LAYOUT.parse(&raw).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!(
            (s.ip, s.pid, s.tid, s.time, s.cpu, s.period),
            (0x1000, 7, 8, 123, 1, 5000)
        );
        assert_eq!(
            s.callchain.iter().collect::<Vec<_>>(),
            [context::USER, 0x1000, 0x2000]
        );
        assert_eq!(s.regs_user.iter().collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(s.stack_user.len(), 8);
        assert_eq!(s.cpumode, misc::USER);
        assert_eq!(s.id, None);
        // The period sits where period_offset says.
        let at = LAYOUT.period_offset().unwrap();
        assert_eq!(rec[at..at + 8], 5000u64.to_le_bytes());
    }

    #[test]
    fn identifier_and_switch_records() {
        let layout = SampleLayout {
            sample_type: LAYOUT.sample_type | sample_type::IDENTIFIER,
            ..LAYOUT
        };
        let mut b = Vec::new();
        b.extend(42u64.to_le_bytes()); // identifier
        b.extend(0x1000u64.to_le_bytes()); // ip
        b.extend(7u32.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend(123u64.to_le_bytes()); // time
        b.extend(1u64.to_le_bytes()); // cpu, res
        b.extend(1u64.to_le_bytes()); // period
        b.extend(0u64.to_le_bytes()); // callchain nr
        b.extend(0u64.to_le_bytes()); // regs abi none
        b.extend(0u64.to_le_bytes()); // stack size 0
        let rec = header(9, misc::KERNEL, &b);
        let raw = RecordIter::new(&rec).next().unwrap().unwrap();
        let Record::Sample(s) = layout.parse(&raw).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!((s.id, s.tid, s.time, s.period), (Some(42), 8, 123, 1));
        let head = layout.sample_head(&raw).unwrap();
        assert_eq!(
            (head.id, head.pid, head.tid, head.time),
            (Some(42), 7, 8, 123)
        );
        let at = layout.period_offset().unwrap();
        assert_eq!(rec[at..at + 8], 1u64.to_le_bytes());

        // A switch-out record: only the sample_id trailer (tid, time, cpu, identifier).
        let mut t = Vec::new();
        t.extend(7u32.to_le_bytes());
        t.extend(8u32.to_le_bytes());
        t.extend(456u64.to_le_bytes());
        t.extend(1u64.to_le_bytes());
        t.extend(42u64.to_le_bytes());
        let rec = header(14, misc::SWITCH_OUT | misc::SWITCH_OUT_PREEMPT, &t);
        let raw = RecordIter::new(&rec).next().unwrap().unwrap();
        match layout.parse(&raw).unwrap() {
            Record::Switch { out, preempt, id } => {
                assert!(out && preempt);
                assert_eq!((id.tid, id.time), (8, Some(456)));
            }
            other => panic!("not a switch: {other:?}"),
        }
        assert_eq!(layout.time_of(&raw), Some(456));

        // The CPU-wide form (`-a`): the other task's pid and tid come first.
        let mut wide = Vec::new();
        wide.extend(99u32.to_le_bytes());
        wide.extend(100u32.to_le_bytes());
        wide.extend(&t);
        let rec = header(15, 0, &wide);
        let raw = RecordIter::new(&rec).next().unwrap().unwrap();
        match layout.parse(&raw).unwrap() {
            Record::Switch { out, preempt, id } => {
                assert!(!out && !preempt);
                assert_eq!((id.pid, id.tid, id.time), (7, 8, Some(456)));
            }
            other => panic!("not a switch: {other:?}"),
        }
        // Cut short: an error naming where, not a switch with a wrong thread.
        let rec = header(15, 0, &wide[..12]);
        let raw = RecordIter::new(&rec).next().unwrap().unwrap();
        assert!(layout.parse(&raw).is_err());
    }

    #[test]
    fn comm_with_trailer() {
        let mut b = Vec::new();
        b.extend(5u32.to_le_bytes());
        b.extend(6u32.to_le_bytes());
        b.extend(b"hot\0\0\0\0\0");
        b.extend(5u32.to_le_bytes());
        b.extend(6u32.to_le_bytes());
        b.extend(999u64.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        let rec = header(3, misc::COMM_EXEC, &b);
        let raw = RecordIter::new(&rec).next().unwrap().unwrap();
        let r = LAYOUT.parse(&raw).unwrap();
        assert_eq!(
            r,
            Record::Comm {
                pid: 5,
                tid: 6,
                comm: "hot".into(),
                exec: true,
                id: SampleId {
                    pid: 5,
                    tid: 6,
                    time: Some(999),
                    cpu: Some(1)
                }
            }
        );
        assert_eq!(LAYOUT.time_of(&raw), Some(999));
    }

    /// Back-to-back records with plausible headers (kinds the parser knows, sizes that fit),
    /// then cut anywhere and with a few bytes overwritten: what the ring or a damaged file
    /// gives.
    fn damaged_records() -> impl Strategy<Value = Vec<u8>> {
        let record = (0u32..12, any::<u16>(), vec(any::<u8>(), 0..80));
        (
            vec(record, 0..6),
            any::<prop::sample::Index>(),
            vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        )
            .prop_map(|(records, cut, damage)| {
                let mut buf: Vec<u8> = records
                    .iter()
                    .flat_map(|(kind, misc, body)| header(*kind, *misc, body))
                    .collect();
                buf.truncate(cut.index(buf.len() + 1));
                for (at, byte) in damage {
                    if !buf.is_empty() {
                        let i = at.index(buf.len());
                        buf[i] = byte;
                    }
                }
                buf
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Any bytes split into records that lie back to back inside the buffer, then at most
        /// one error, at the offset where the next record should have started; decoding each
        /// record never panics.
        #[test]
        fn any_bytes_are_records_then_at_most_one_error_at_its_offset(
            buf in prop_oneof![vec(any::<u8>(), 0..300), damaged_records()]
        ) {
            let mut next_offset = 0;
            let mut items = RecordIter::new(&buf);
            while let Some(item) = items.next() {
                match item {
                    Ok(raw) => {
                        prop_assert_eq!(raw.offset, next_offset);
                        next_offset += 8 + raw.body.len();
                        prop_assert!(next_offset <= buf.len());
                        let _ = LAYOUT.parse(&raw);
                        let _ = LAYOUT.time_of(&raw);
                    }
                    Err(e) => {
                        prop_assert_eq!(e.offset, next_offset);
                        prop_assert!(items.next().is_none(), "nothing after the error");
                    }
                }
            }
        }
    }

    #[test]
    fn bad_size_is_an_error_with_offset() {
        let mut rec = header(9, 0, &[0u8; 8]);
        rec.extend([1, 0, 0, 0, 0, 0, 4, 0]); // size 4 < 8
        let items: Vec<_> = RecordIter::new(&rec).collect();
        assert!(items[0].is_ok());
        let err = items[1].as_ref().unwrap_err();
        assert_eq!(err.offset, 16);
    }
}
