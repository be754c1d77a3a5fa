//! How much of each runtime process's JIT code got a name: of the samples whose innermost
//! user-space frame is JIT code (named: a JIT, inlined or interpreter frame) or anonymous memory
//! (unnamed: `[unknown] (anon+…)` or outside any mapping), the share that is named. A runtime
//! that ran unnamed shows up here at once, with the summary's note saying why.

use std::collections::BTreeMap;

use crate::profile::{FrameKind, Profile};

#[derive(Default)]
struct Counts {
    named: u64,
    unnamed: u64,
}

/// One line per process that ran JIT code, e.g.
/// `pid 4242 (javac): 97.1% of 5123 samples in JIT code named`.
pub fn lines(profile: &Profile) -> Vec<String> {
    let mut by_pid: BTreeMap<u32, Counts> = BTreeMap::new();
    for sample in &profile.samples {
        // The innermost user-space frame (a sample taken in the kernel counts by the user code
        // it entered from), as the record summary counts.
        // An inlined frame belongs to the code it was inlined into, native or JIT: the first
        // frame out from it that is not inlined says which.
        let Some(frame) = sample
            .stack
            .iter()
            .rev()
            .map(|&id| profile.frame(id))
            .find(|f| !matches!(f.kind, FrameKind::Kernel | FrameKind::Inlined))
        else {
            continue;
        };
        let counts = by_pid.entry(sample.pid).or_default();
        match frame.kind {
            FrameKind::Jit | FrameKind::Interpreter => counts.named += 1,
            FrameKind::Unknown
                if frame.name.contains("(anon")
                    || frame.name.contains("[anon")
                    || frame.name.contains("memfd:")
                    || frame.name.starts_with("[unknown] (0x") =>
            {
                counts.unnamed += 1
            }
            _ => {}
        }
    }
    by_pid
        .into_iter()
        .filter(|(_, c)| c.named > 0 || c.unnamed >= 10)
        .map(|(pid, c)| {
            let total = c.named + c.unnamed;
            let comm = profile
                .threads
                .get(&pid)
                .map_or("?", |t| t.comm.as_str())
                .to_string();
            format!(
                "pid {pid} ({comm}): {:.1}% of {total} samples in JIT code named",
                100.0 * c.named as f64 / total as f64
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::testing::profile;
    use crate::profile::FrameKind::*;

    #[test]
    fn inlined_frames_count_as_the_code_they_are_inlined_into() {
        let p = profile(&[
            // JIT code with a method inlined: named JIT code.
            (&[("App.run", Jit), ("App.inner", Inlined)], 1),
            // A native function with a native function inlined: not JIT code at all.
            (
                &[("App.run", Jit), ("elf_lookup", Native), ("rela", Inlined)],
                1,
            ),
            // Anonymous memory: JIT code without a name.
            (&[("App.run", Jit), ("[unknown] (anon+0x10)", Unknown)], 1),
        ]);
        assert_eq!(
            lines(&p),
            vec!["pid 1 (?): 50.0% of 2 samples in JIT code named"]
        );
    }
}
