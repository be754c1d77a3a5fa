//! `jprof diff A B -o diff.svg`: a differential flame graph of two inputs, each a recording
//! (jprof.data or perf.data, symbolized and filtered like `jprof report`) or a folded-stacks
//! file. The graph has B's shape; red frames grew from A to B, blue ones shrank (inferno's
//! differential mode).

use std::io::Write;
use std::path::{Path, PathBuf};

use inferno::differential;

use crate::error::{Error, Result};
use crate::input;
use crate::output::{collapsed, flamegraph};
use crate::report::ReportConfig;

/// Default output file of `jprof diff`.
pub const DEFAULT_DIFF_SVG: &str = "diff.svg";

/// What `jprof diff` should do.
#[derive(Clone, Debug)]
pub struct DiffConfig {
    /// The baseline (A).
    pub before: DiffInput,
    /// The profile compared with it (B); the graph has its shape.
    pub after: DiffInput,
    /// `None` = `diff.svg`; `-` = stdout.
    pub output: Option<PathBuf>,
    /// Scale A's counts so both inputs have the same total (compare shapes, not load).
    pub normalize: bool,
    /// How recordings are read (filters, search dirs, debug files) and the graph's look; its
    /// `input` is replaced by each side.
    pub report: ReportConfig,
}

/// Where one side of the comparison comes from.
#[derive(Clone, Debug)]
pub enum DiffInput {
    /// Any input `report -i` reads, or a folded-stacks file.
    File(PathBuf),
    /// A selection of the fleet store (`--from`).
    Store(crate::fleet::Selection),
}

impl std::fmt::Display for DiffInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Store(selection) => write!(f, "{selection}"),
        }
    }
}

/// One side of the comparison: its folded lines and what its counts are.
struct Side {
    folded: Vec<String>,
    count_name: String,
    unit: crate::profile::WeightUnit,
    /// Full names of the shortened frame names, as the flame graph shows them.
    full_names: std::collections::BTreeMap<String, Vec<String>>,
}

/// Whether `bytes` (the start of a file) look like folded stacks: text whose first line ends
/// in a space and a count.
pub fn looks_folded(bytes: &[u8]) -> bool {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        // The read may have cut a multi-byte character at the end.
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return false,
    };
    let Some(line) = text.lines().find(|l| !l.trim().is_empty()) else {
        return false;
    };
    line.trim_end()
        .rsplit_once(' ')
        .is_some_and(|(stack, count)| {
            !stack.is_empty() && !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit())
        })
}

/// How much of an input is read to tell folded text from a recording.
const FOLDED_HEAD_BYTES: u64 = 1 << 20;

fn read_side(input: &DiffInput, report: &ReportConfig) -> Result<Side> {
    let path = match input {
        DiffInput::File(path) => path,
        DiffInput::Store(selection) => {
            let loaded = crate::fleet::load(selection, &report.input, false)?;
            return Ok(side_of(&loaded));
        }
    };
    let mut head = Vec::new();
    {
        use std::io::Read;
        let file = crate::foreign_file::open_named(path).map_err(|e| e.into_error(path))?;
        // Enough for a first folded line of any real depth (jprof's own run to several KiB).
        file.take(FOLDED_HEAD_BYTES)
            .read_to_end(&mut head)
            .map_err(|e| Error::io(path, e))?;
    }
    if looks_folded(&head) {
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut crate::foreign_file::open_named(path).map_err(|e| e.into_error(path))?,
            &mut text,
        )
        .map_err(|e| Error::io(path, e))?;
        return Ok(Side {
            folded: folded_lines(path, &text)?,
            count_name: "samples".into(),
            unit: crate::profile::WeightUnit::Events,
            full_names: Default::default(),
        });
    }
    // The two sides may be different kinds of input: options only some kinds take (where a
    // perf.data's side files are, debug files) go to the sides that take them.
    let accepts = input::Kind::detect(path).accepts();
    let request = input::Request {
        path: path.to_path_buf(),
        search_dirs: if accepts.search_dirs {
            report.input.search_dirs.clone()
        } else {
            Vec::new()
        },
        debug_files: report.input.debug_files && accepts.debug_files,
        ..report.input.clone()
    };
    Ok(side_of(&input::load(&request)?))
}

fn side_of(loaded: &input::Loaded) -> Side {
    let labels = flamegraph::Labels::of(&loaded.context, &loaded.profile);
    Side {
        folded: collapsed::lines(&loaded.profile),
        count_name: loaded.context.event.clone(),
        unit: loaded.context.weight_unit,
        full_names: labels.full_names,
    }
}

/// The lines of a folded-stacks file, each checked: a stack, a space, a whole count; the counts
/// must add up to at most `u64::MAX` (inferno would drop a bad line without a word, and sums
/// counts without checking). Blank lines are skipped.
fn folded_lines(path: &Path, text: &str) -> Result<Vec<String>> {
    let mut total = 0u64;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), i + 1);
        let count = line
            .rsplit_once(' ')
            .filter(|(stack, count)| {
                !stack.trim().is_empty() && count.bytes().all(|b| b.is_ascii_digit())
            })
            .and_then(|(_, count)| count.parse::<u64>().ok());
        let Some(count) = count else {
            let shown: String = line.chars().take(80).collect();
            return Err(Error::Other(format!(
                "{}: expected a folded line `frame;frame;... COUNT` (a stack, a space and a whole \
                 count of at most {}), found {shown:?}{}",
                at(),
                u64::MAX,
                if shown.len() < line.len() { "…" } else { "" }
            )));
        };
        total = total.checked_add(count).ok_or_else(|| {
            Error::Other(format!(
                "{}: the counts up to this line add up to more than {}, which jprof diff cannot \
                 weigh",
                at(),
                u64::MAX
            ))
        })?;
        lines.push(line.to_string());
    }
    Ok(lines)
}

/// The two-count folded lines (`stack before after`) inferno draws as a differential graph.
fn differential_lines(before: &[String], after: &[String], normalize: bool) -> Vec<String> {
    let options = differential::Options {
        normalize,
        strip_hex: false,
    };
    let mut out = Vec::new();
    let joined = |lines: &[String]| lines.join("\n").into_bytes();
    // Reading and writing in memory cannot fail.
    let _ = differential::from_readers(
        options,
        joined(before).as_slice(),
        joined(after).as_slice(),
        &mut out,
    );
    let mut lines: Vec<String> = String::from_utf8_lossy(&out)
        .lines()
        .map(str::to_string)
        .collect();
    // inferno writes them in hash order; sorted, the output is deterministic.
    lines.sort_unstable();
    lines
}

/// Runs `jprof diff`.
pub fn run(config: &DiffConfig) -> Result<()> {
    // A bad destination is found before both inputs are read.
    match config.output.as_deref() {
        Some(p) if p == Path::new("-") => {}
        output => crate::foreign_file::check_output(output.unwrap_or(Path::new(DEFAULT_DIFF_SVG)))?,
    }
    let before = read_side(&config.before, &config.report)?;
    let after = read_side(&config.after, &config.report)?;
    if after.folded.is_empty() && before.folded.is_empty() {
        return Err(Error::Other(
            "no samples in either input, no differential flame graph written".into(),
        ));
    }
    let lines = differential_lines(&before.folded, &after.folded, config.normalize);
    let same_unit = before.count_name == after.count_name && before.unit == after.unit;
    let mut full_names = before.full_names;
    full_names.extend(after.full_names);
    let labels = flamegraph::Labels {
        title: format!(
            "jprof diff: {} → {} (red grew, blue shrank)",
            config.before, config.after
        ),
        count_name: if before.count_name == after.count_name {
            after.count_name
        } else {
            format!("{} / {}", before.count_name, after.count_name)
        },
        subtitle: None,
        unit: if same_unit {
            after.unit
        } else {
            crate::profile::WeightUnit::Events
        },
        full_names,
    };
    let look = &config.report.flamegraph;
    let draw = |w: &mut dyn Write| flamegraph::write(&lines, &labels, look, None, w);
    match config.output.as_deref() {
        Some(p) if p == Path::new("-") => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            draw(&mut w)
                .and_then(|()| w.flush())
                .map_err(|e| Error::io(Path::new("<stdout>"), e))
        }
        output => {
            let path = output.unwrap_or(Path::new(DEFAULT_DIFF_SVG));
            crate::foreign_file::write_output(path, draw)?;
            println!("Differential flame graph: {}", path.display());
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_text_is_told_from_binary_inputs() {
        assert!(looks_folded(b"main;a;b 12\nmain;c 3\n"));
        assert!(looks_folded(b"\n  \nprog;f (a.c:1)_[i] 7"));
        assert!(!looks_folded(b"JPROFREC\0\0\x01"));
        assert!(!looks_folded(b"PERFILE2\x68\0\0\0"));
        assert!(!looks_folded(b"main;a;b twelve\n"));
        assert!(!looks_folded(b""));
        // A read cut inside a multi-byte character still counts as text.
        let mut cut = "main;caf\u{e9} 4\nmain;\u{e9}".as_bytes().to_vec();
        cut.pop();
        assert!(looks_folded(&cut));
    }

    #[test]
    fn bad_folded_lines_and_overflowing_counts_are_errors_with_file_and_line() {
        let path = Path::new("a.folded");
        assert_eq!(
            folded_lines(path, "main;f 3\n\nmain;g 4 \n").unwrap(),
            ["main;f 3", "main;g 4"]
        );
        for (text, line, says) in [
            ("main;f 3\nmain;g\n", 2, "found \"main;g\""),
            ("main;f 3\nmain;g 1.5\n", 2, "a whole count"),
            ("main;f -3\n", 1, "a whole count"),
            (" 7\n", 1, "a stack"),
            ("a 18446744073709551616\n", 1, "a whole count"),
            ("a 18446744073709551615\nb 1\n", 2, "add up to more than"),
        ] {
            let e = folded_lines(path, text).unwrap_err().to_string();
            assert!(e.contains(&format!("a.folded:{line}: ")), "{text:?}: {e}");
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn differential_lines_pair_the_counts() {
        let before = vec!["m;a 10".to_string(), "m;b 5".to_string()];
        let after = vec!["m;a 4".to_string(), "m;c 6".to_string()];
        assert_eq!(
            differential_lines(&before, &after, false),
            ["m;a 10 4", "m;b 5 0", "m;c 0 6"]
        );
        // Normalized: A scaled to B's total (15 → 10).
        assert_eq!(
            differential_lines(&before, &after, true),
            ["m;a 6 4", "m;b 3 0", "m;c 0 6"]
        );
    }
}
