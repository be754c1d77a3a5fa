//! Offline: recording → profile → outputs (flame graph SVG, folded stacks, text). This file
//! owns `jprof report`'s choice of outputs and where they go; the writers are in the submodules.

pub mod collapsed;
pub mod flamegraph;
pub mod text;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::import;
use crate::recording::Recording;
use crate::symbolize::{self, ResolveOptions};

/// Output format of `jprof report`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Flamegraph,
    Collapsed,
    Text,
}

/// What `jprof report` should do.
#[derive(Clone, Debug)]
pub struct ReportConfig {
    /// Default is `jprof.data`.
    pub input: PathBuf,
    /// Default is flamegraph.
    pub format: Format,
    /// `None` = the format's default (`flamegraph.svg`, or stdout for text/collapsed); `-` = stdout.
    pub output: Option<PathBuf>,
    pub tid: Option<u32>,
    pub comm: Option<String>,
    /// Where the side files of an imported perf.data are looked for by file name.
    pub search_dirs: Vec<PathBuf>,
    /// Lines and inlined frames from separate debug files (`--debug-files`).
    pub debug_files: bool,
}

/// How many functions the text tables list.
pub const TOP_N: usize = 15;

/// Default output file of the flamegraph format.
pub const DEFAULT_SVG: &str = "flamegraph.svg";

/// Where one output goes.
enum Destination {
    Stdout,
    File(PathBuf),
}

impl Destination {
    fn of(output: Option<&Path>, default_file: Option<&str>) -> Self {
        match (output, default_file) {
            (Some(p), _) if p == Path::new("-") => Self::Stdout,
            (Some(p), _) => Self::File(p.to_path_buf()),
            (None, Some(f)) => Self::File(PathBuf::from(f)),
            (None, None) => Self::Stdout,
        }
    }

    /// Runs `write` on a buffered writer for the destination; I/O errors name the file.
    fn write_with(&self, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
        match self {
            Self::Stdout => {
                let stdout = io::stdout();
                let mut w = BufWriter::new(stdout.lock());
                write(&mut w)
                    .and_then(|()| w.flush())
                    .map_err(|e| Error::io(Path::new("<stdout>"), e))
            }
            Self::File(path) => {
                let file = File::create(path).map_err(|e| Error::io(path, e))?;
                let mut w = BufWriter::new(file);
                write(&mut w)
                    .and_then(|()| w.flush())
                    .map_err(|e| Error::io(path, e))
            }
        }
    }
}

/// The flame graph's title and count name for a recording.
pub fn labels(recording: &Recording) -> flamegraph::Labels {
    let meta = &recording.meta;
    let what = if !meta.command.is_empty() {
        meta.command.join(" ")
    } else if let Some(pid) = meta.attached_pid {
        format!("pid {pid}")
    } else {
        recording.path.display().to_string()
    };
    flamegraph::Labels {
        title: format!("jprof: {what}"),
        count_name: meta.event.event.clone(),
    }
}

/// Runs `jprof report`.
pub fn run(config: &ReportConfig) -> Result<()> {
    let recording = if import::is_perf_data(&config.input) {
        let options = import::ImportOptions {
            search_dirs: config.search_dirs.clone(),
        };
        import::import(&config.input, &options)?
    } else {
        Recording::open(&config.input)?
    };
    let options = ResolveOptions {
        tid: config.tid,
        comm: config.comm.clone(),
        debug_files: config.debug_files,
    };
    let profile = symbolize::resolve(&recording, &options)?;
    let output = config.output.as_deref();
    match config.format {
        Format::Collapsed => {
            Destination::of(output, None).write_with(|w| collapsed::write(&profile, w))
        }
        Format::Text => Destination::of(output, None)
            .write_with(|w| text::write(&recording, &profile, TOP_N, w)),
        Format::Flamegraph => {
            let svg = Destination::of(output, Some(DEFAULT_SVG));
            let mut summary = Vec::new();
            text::write(&recording, &profile, TOP_N, &mut summary)
                .map_err(|e| Error::io(Path::new("<memory>"), e))?;
            let folded = collapsed::lines(&profile);
            let drawn = if folded.is_empty() {
                // Checked before creating the file, so no empty SVG is left behind.
                Err(Error::Other(
                    "no samples to draw, no flame graph written (see the summary above and the \
                     --tid/--comm filters)"
                        .into(),
                ))
            } else {
                svg.write_with(|w| flamegraph::write(&folded, &labels(&recording), w))
            };
            // The text top list goes to stdout next to the SVG file, or to stderr when the SVG
            // itself is on stdout, so it never corrupts the SVG.
            match &svg {
                Destination::Stdout => io::stderr().write_all(&summary),
                Destination::File(path) => {
                    if drawn.is_ok() {
                        summary.extend_from_slice(
                            format!("\nFlame graph: {}\n", path.display()).as_bytes(),
                        );
                    }
                    io::stdout().write_all(&summary)
                }
            }
            .map_err(|e| Error::io(Path::new("<stdout>"), e))?;
            drawn
        }
    }
}
