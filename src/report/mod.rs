//! Offline: recording → profile → outputs (flame graph SVG, folded stacks, text).

use std::path::PathBuf;

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
}

/// Runs `jprof report`.
pub fn run(_config: &ReportConfig) -> crate::error::Result<()> {
    Ok(())
}
