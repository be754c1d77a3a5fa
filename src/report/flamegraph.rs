//! Flame graph SVG from folded stacks, drawn by inferno as a library. Output is deterministic:
//! colours come from a fixed hash of each name, never from a random generator.

use std::io::{self, Write};

use inferno::flamegraph::color::{MultiPalette, Palette};
use inferno::flamegraph::{self, Options};

/// What goes on the graph besides the stacks.
#[derive(Clone, Debug)]
pub struct Labels {
    /// Shown at the top, e.g. `jprof: ./app arg`.
    pub title: String,
    /// What the weights count, e.g. `cycles` or `cpu-clock`.
    pub count_name: String,
}

/// Draws `folded` (`stack weight` lines) as an SVG flame graph.
pub fn write(folded: &[String], labels: &Labels, out: impl Write) -> io::Result<()> {
    let mut options = Options::default();
    options.title = labels.title.clone();
    options.count_name = labels.count_name.clone();
    // The java palette colours by the `_[k]`/`_[j]`/`_[i]` suffixes and `::` (C++) names.
    options.colors = Palette::Multi(MultiPalette::Java);
    // Colour from a stable FNV hash of the name instead of inferno's per-call random numbers,
    // so the same profile always gives the same bytes.
    options.deterministic = true;
    flamegraph::from_lines(&mut options, folded.iter().map(String::as_str), out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::FrameKind::*;
    use crate::report::collapsed;

    fn svg() -> String {
        let p = collapsed::tests::profile(&[
            (
                &[("main", Native), ("hot::compute_a(unsigned long)", Native)],
                60,
            ),
            (
                &[("main", Native), ("hot::compute_b(unsigned long)", Native)],
                30,
            ),
            (
                &[("main", Native), ("Foo.bar", Jit), ("sys_read", Kernel)],
                10,
            ),
        ]);
        let labels = Labels {
            title: "jprof: ./hotspots".into(),
            count_name: "cycles".into(),
        };
        let mut out = Vec::new();
        write(&collapsed::lines(&p), &labels, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn svg_has_title_frames_and_counts() {
        let svg = svg();
        assert!(svg.starts_with("<?xml"), "{}", &svg[..100.min(svg.len())]);
        assert!(svg.contains("jprof: ./hotspots"));
        assert!(svg.contains("hot::compute_a(unsigned long) (60 cycles, 60.00%)"));
        assert!(svg.contains("hot::compute_b(unsigned long) (30 cycles, 30.00%)"));
        // inferno colours by the kind suffix and shows the name without it.
        assert!(svg.contains("Foo.bar (10 cycles, 10.00%)"));
        assert!(svg.contains("sys_read (10 cycles, 10.00%)"));
        assert!(svg.contains("all (100 cycles, 100%)"));
    }

    #[test]
    fn svg_is_deterministic() {
        assert_eq!(svg(), svg());
    }

    #[test]
    fn no_stacks_is_an_error_not_a_panic() {
        let labels = Labels {
            title: "t".into(),
            count_name: "cycles".into(),
        };
        assert!(write(&[], &labels, io::sink()).is_err());
    }
}
