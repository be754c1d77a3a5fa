//! `jprof report`: an input (`input/`) → the chosen output: flame graph SVG, folded stacks,
//! Firefox Profiler, pprof, speedscope, or the input's own text report. This file owns the
//! choice of output and where it goes; the writers are `output/`.

pub mod diff;
pub(crate) mod serve;

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::input::{self, Loaded, Request};
use crate::output::{collapsed, firefox, flamegraph, pprof, speedscope};
use crate::profile::{Context, Profile};

/// Output format of `jprof report`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Flame graph SVG, plus the top functions on stdout.
    Flamegraph,
    /// Folded stacks, one `frame;frame;... count` line per stack.
    Collapsed,
    /// The input's own text report.
    Text,
    /// Firefox Profiler processed profile, gzipped JSON.
    Firefox,
    /// pprof's profile.proto, gzipped.
    Pprof,
    /// speedscope's JSON file format.
    Speedscope,
}

/// What `jprof report` should do.
#[derive(Clone, Debug)]
pub struct ReportConfig {
    /// What to read (default `jprof.data`), and the options that concern the input.
    pub input: Request,
    /// Read this selection of the fleet store instead of `input`'s file (`--from`).
    pub from: Option<crate::fleet::Selection>,
    /// Default is flamegraph.
    pub format: Format,
    /// `None` = the format's default (`flamegraph.svg`, or stdout for text/collapsed); `-` = stdout.
    pub output: Option<PathBuf>,
    /// `--inverted`, `--title`, `--min-width` of the flame graph.
    pub flamegraph: flamegraph::Look,
    /// Show the profile in speedscope, served on 127.0.0.1, instead of writing a file
    /// (`--serve`).
    pub serve: bool,
}

/// Default output file of the flamegraph format.
pub const DEFAULT_SVG: &str = "flamegraph.svg";

/// Where one output goes.
pub(crate) enum Destination {
    Stdout,
    File(PathBuf),
}

impl Destination {
    pub(crate) fn of(output: Option<&Path>, default_file: Option<&str>) -> Self {
        match (output, default_file) {
            (Some(p), _) if p == Path::new("-") || crate::foreign_file::is_stdout(p) => {
                Self::Stdout
            }
            (Some(p), _) => Self::File(p.to_path_buf()),
            (None, Some(f)) => Self::File(PathBuf::from(f)),
            (None, None) => Self::Stdout,
        }
    }

    /// Runs `write` on a buffered writer for the destination; I/O errors name the file.
    pub(crate) fn write_with(
        &self,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<()> {
        match self {
            Self::Stdout => {
                let stdout = io::stdout();
                let mut w = BufWriter::new(stdout.lock());
                write(&mut w)
                    .and_then(|()| w.flush())
                    .map_err(|e| Error::io(Path::new("<stdout>"), e))
            }
            Self::File(path) => crate::foreign_file::write_output(path, write),
        }
    }
}

/// Runs `jprof report`: the input gives its text report, or a profile that is written in the
/// chosen format.
pub fn run(config: &ReportConfig) -> Result<()> {
    if !matches!(config.format, Format::Text | Format::Flamegraph)
        && config.input.tables != crate::input::Tables::default()
    {
        return Err(Error::Usage(
            "--sort, --limit, --callers and --callees shape the text report: use them with \
             --format text (or the flame graph, whose summary has the same tables)"
                .into(),
        ));
    }
    if config.serve {
        return serve(config);
    }
    // A bad destination is found before the report is computed.
    let default_file = match config.format {
        Format::Flamegraph => Some(DEFAULT_SVG),
        other => viewer_default_file(other),
    };
    if let Destination::File(path) = Destination::of(config.output.as_deref(), default_file) {
        crate::foreign_file::check_output(&path)?;
    }
    if config.format == Format::Text {
        // Names in it come from other users' processes and files: no escape reaches a terminal.
        let text = match &config.from {
            Some(selection) => crate::fleet::load(selection, &config.input, false)?.summary,
            None => input::text(&config.input)?,
        };
        let text = crate::terminal::safe(&text);
        return Destination::of(config.output.as_deref(), None)
            .write_with(|w| w.write_all(text.as_bytes()));
    }
    write_profile(config, load(config)?)
}

/// The profile to write: the input file's, or the store selection's (every sample with its
/// time for the timeline formats, else added up per stack in ClickHouse).
fn load(config: &ReportConfig) -> Result<Loaded> {
    match &config.from {
        Some(selection) => {
            let timeline =
                config.serve || matches!(config.format, Format::Firefox | Format::Speedscope);
            crate::fleet::load(selection, &config.input, timeline)
        }
        None => input::load(&config.input),
    }
}

/// `--serve`: the profile as speedscope JSON, served with speedscope until Ctrl-C.
fn serve(config: &ReportConfig) -> Result<()> {
    let loaded = load(config)?;
    let mut json = Vec::new();
    speedscope::write(&loaded.profile, &loaded.context, &mut json)
        .map_err(|e| Error::io(Path::new("<memory>"), e))?;
    let title = config
        .flamegraph
        .title
        .clone()
        .unwrap_or_else(|| loaded.context.export_title());
    let server = serve::Server::bind(json, &title)?;
    let mut stdout = io::stdout().lock();
    writeln!(
        stdout,
        "{} samples in speedscope at\n  {}\n(served from 127.0.0.1 only, works offline; \
         Ctrl-C stops)",
        loaded.profile.samples.len(),
        server.url
    )
    .and_then(|()| stdout.flush())
    .map_err(|e| Error::io(Path::new("<stdout>"), e))?;
    drop(stdout);
    server.run()
}

/// Default output file of a viewer format (Firefox Profiler, pprof, speedscope).
fn viewer_default_file(format: Format) -> Option<&'static str> {
    match format {
        Format::Firefox => Some(firefox::DEFAULT_FILE),
        Format::Pprof => Some(pprof::DEFAULT_FILE),
        Format::Speedscope => Some(speedscope::DEFAULT_FILE),
        _ => None,
    }
}

/// Writes `profile` in a viewer format; other formats are not written here and give an error.
fn write_viewer(
    format: Format,
    profile: &Profile,
    context: &Context,
    out: impl Write,
) -> io::Result<()> {
    match format {
        Format::Firefox => firefox::write(profile, context, out),
        Format::Pprof => pprof::write(profile, context, out),
        Format::Speedscope => speedscope::write(profile, context, out),
        other => Err(io::Error::other(format!(
            "{other:?} is not a viewer format"
        ))),
    }
}

/// Writes a profile in `config.format` (any format but text, which each input kind writes
/// its own way). `summary` is printed next to a flame graph written to a file.
pub fn write_profile(config: &ReportConfig, loaded: Loaded) -> Result<()> {
    let Loaded {
        profile,
        context,
        mut summary,
    } = loaded;
    let (profile, context) = (&profile, &context);
    let output = config.output.as_deref();
    match config.format {
        Format::Collapsed | Format::Text => {
            Destination::of(output, None).write_with(|w| collapsed::write(profile, w))
        }
        Format::Firefox | Format::Pprof | Format::Speedscope => {
            let file = viewer_default_file(config.format);
            let destination = Destination::of(output, file);
            destination.write_with(|w| write_viewer(config.format, profile, context, w))?;
            if let Destination::File(path) = &destination {
                println!(
                    "{} samples written to {}",
                    profile.samples.len(),
                    path.display()
                );
            }
            Ok(())
        }
        Format::Flamegraph => {
            let svg = Destination::of(output, Some(DEFAULT_SVG));
            let folded = collapsed::lines_to_draw(profile, config.flamegraph.min_width_percent());
            let drawn = if folded.is_empty() {
                // Checked before creating the file, so no empty SVG is left behind.
                Err(Error::Other(
                    "no samples to draw, no flame graph written (see the summary above and the \
                     --tid/--pid/--comm/--time filters)"
                        .into(),
                ))
            } else {
                let mut palette = flamegraph::kind_palette(profile);
                svg.write_with(|w| {
                    let labels = flamegraph::Labels::of(context, profile);
                    flamegraph::write(&folded, &labels, &config.flamegraph, Some(&mut palette), w)
                })
            };
            // The text top list goes to stdout next to the SVG file, or to stderr when the SVG
            // itself is on stdout, so it never corrupts the SVG.
            match &svg {
                Destination::Stdout => {
                    io::stderr().write_all(crate::terminal::safe(&summary).as_bytes())
                }
                Destination::File(path) => {
                    if drawn.is_ok() {
                        summary.extend_from_slice(
                            format!("\nFlame graph: {}\n", path.display()).as_bytes(),
                        );
                    }
                    io::stdout().write_all(crate::terminal::safe(&summary).as_bytes())
                }
            }
            .map_err(|e| Error::io(Path::new("<stdout>"), e))?;
            drawn
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::WeightUnit;

    #[test]
    fn an_empty_profile_writes_valid_files_in_every_viewer_format() {
        let p = Profile::default();
        let ctx = Context::for_profile(&p, "t", "cycles", WeightUnit::Events);
        for format in [Format::Firefox, Format::Pprof, Format::Speedscope] {
            let mut out = Vec::new();
            write_viewer(format, &p, &ctx, &mut out).unwrap();
            assert!(!out.is_empty(), "{format:?}");
            assert!(viewer_default_file(format).is_some(), "{format:?}");
        }
        let mut out = Vec::new();
        write_viewer(Format::Pprof, &p, &ctx, &mut out).unwrap();
        assert!(pprof::read(&out).unwrap().sample.is_empty());
        assert!(write_viewer(Format::Text, &p, &ctx, io::sink()).is_err());
        assert_eq!(viewer_default_file(Format::Collapsed), None);
    }
}
