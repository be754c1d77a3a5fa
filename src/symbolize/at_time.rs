//! Names single addresses of a recording at one moment (`jprof symbolize`): the process model
//! is replayed up to that moment, then the same sources `resolve` uses are asked in the same
//! order — JIT side data, the embedded symbols, the binaries on disk, kallsyms.

use super::embedded::EmbeddedIndex;
use super::jit_index::JitIndex;
use super::kernel::KERNEL_MODULE;
use super::lookup::native_frames;
use super::lookup::Symbolizer;
use super::native::BinaryCache;
use super::process::ProcessModel;
use super::records::in_time_order;
use super::{load_embedded, same_kernel, update_model};
use crate::format::perf::Record;
use crate::profile::{Frame, FrameKind};
use crate::recording::Recording;

/// Addresses at or above this are kernel addresses on x86-64.
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// Everything needed to name addresses at one sample-clock time.
pub struct AddressNamer {
    jit: JitIndex,
    embedded: Option<EmbeddedIndex>,
    model: ProcessModel,
    binaries: BinaryCache,
    same_kernel: bool,
    /// The sample-clock time addresses are named at.
    pub time: u64,
    /// Sample-clock time of the first sample (0 when there is none).
    pub first_sample: u64,
    /// Sample-clock time of the last record.
    pub end: u64,
}

impl AddressNamer {
    /// Replays the recording up to `seconds` after its first sample (`None`: to its end).
    pub fn new(recording: &Recording, seconds: Option<f64>) -> Self {
        // One pass finds the first sample and the end, a second replays up to the time (two
        // reads of the records instead of holding them all).
        let (mut first_record, mut first_sample, mut end) = (None, None, 0);
        in_time_order(recording, |r| {
            first_record.get_or_insert(r.time);
            if matches!(r.record, Record::Sample(_)) {
                first_sample.get_or_insert(r.time);
            }
            end = r.time;
        });
        let first_sample = first_sample.or(first_record).unwrap_or(0);
        let time = match seconds {
            Some(s) => first_sample.saturating_add((s.max(0.0) * 1e9) as u64),
            None => end,
        };
        let mut model = ProcessModel::default();
        let mut past = false;
        in_time_order(recording, |r| {
            past |= r.time > time;
            if !past {
                update_model(&mut model, &r.record, &recording.build_ids);
            }
        });
        let same_kernel = same_kernel(recording);
        let mut notes = Vec::new();
        Self {
            jit: JitIndex::from_recording(recording),
            embedded: load_embedded(recording, &mut notes),
            model,
            binaries: BinaryCache::new(same_kernel, true),
            same_kernel,
            time,
            first_sample,
            end,
        }
    }

    /// The OpenJ9 inline chain at `addr` when JIT code with JPROF_J9_METADATA is there.
    pub fn j9_chain(&self, pid: u32, addr: u64) -> Option<Vec<crate::format::j9::InlineFrame>> {
        self.jit.j9_chain(pid, addr, self.time)
    }

    /// Frames for `addr` in process `pid`, innermost first; empty when nothing names it.
    pub fn frames(&mut self, pid: u32, addr: u64) -> Vec<Frame> {
        let mut symbolizer = Symbolizer::new(self.embedded.as_ref(), self.same_kernel);
        if addr >= KERNEL_START {
            return symbolizer
                .kernel(addr, true)
                .map(|name| Frame {
                    name,
                    kind: FrameKind::Kernel,
                    module: Some(KERNEL_MODULE.to_string()),
                    file: None,
                    line: None,
                })
                .into_iter()
                .collect();
        }
        if let Some(frames) = self.jit.frames(pid, addr, self.time) {
            return frames;
        }
        let found = symbolizer.user(&self.model, &mut self.binaries, pid, addr, true);
        native_frames(&found)
    }
}
