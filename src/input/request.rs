//! What `report` asks of an input ([`Request`]: the file, the [`Weight`], the filters, the text
//! report's [`Tables`]) and what every input hands back ([`Loaded`]).

use std::path::PathBuf;

use crate::profile::{Context, Filters, Profile};

/// What the width of a stack in the outputs measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Weight {
    /// Sampled hits (the event's period for perf samples).
    Samples,
    /// Number of calls of the leaf via that stack (instrumentation: Mono enter/leave, XRay).
    Calls,
    /// Self time in ns of the leaf via that stack (instrumentation).
    Time,
    /// Nanoseconds threads spent off the CPU after switching out at that stack
    /// (`record --off-cpu`).
    OffCpu,
    /// On-CPU ns (samples × their period in ns) plus off-CPU ns: where wall time went.
    Wall,
}

impl Weight {
    /// The name `--weight` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Samples => "samples",
            Self::Calls => "calls",
            Self::Time => "time",
            Self::OffCpu => "off-cpu",
            Self::Wall => "wall",
        }
    }
}

/// What to read and how: the options of `jprof report` that concern the input.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The file to read.
    pub(crate) path: PathBuf,
    /// `None` = the input's natural weight (samples for recordings; for a Mono .mlpd samples
    /// when it has SAMPLE hits, else calls; time for XRay).
    pub(crate) weight: Option<Weight>,
    /// `--tid`, `--pid`, `--comm`, `--time` and the other filters.
    pub(crate) filters: Filters,
    /// Where the side files of an imported perf.data are looked for by file name, and copies
    /// of binaries by build id.
    pub(crate) search_dirs: Vec<PathBuf>,
    /// Lines and inlined frames from separate debug files (`--debug-files`).
    pub(crate) debug_files: bool,
    /// The instrumented binary of an XRay log (`--binary`).
    pub(crate) binary: Option<PathBuf>,
    /// Names as written (`--signatures`); by default they are short (`profile::names`).
    pub(crate) signatures: bool,
    /// The text report's tables (`--sort`, `--limit`, `--callers`, `--callees`).
    pub(crate) tables: Tables,
}

/// What an input hands the writers.
#[derive(Debug)]
pub struct Loaded {
    /// Filtered and weighted.
    pub(crate) profile: Profile,
    /// Title, weight unit, time zero and code loads for the writers.
    pub(crate) context: Context,
    /// The short text printed next to a flame graph written to a file.
    pub(crate) summary: Vec<u8>,
}

/// How the text report's tables are chosen, sorted and cut (`report --sort`, `--limit`,
/// `--callers`, `--callees`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tables {
    /// Only the table by this weight (`--sort`); both when None.
    pub sort: Option<SortBy>,
    /// Rows per table (`--limit`).
    pub limit: usize,
    /// Show who calls this function instead of the top tables (`--callers`).
    pub callers: Option<String>,
    /// Show what this function calls instead of the top tables (`--callees`).
    pub callees: Option<String>,
}

/// How many rows a table has by default.
pub const DEFAULT_LIMIT: usize = 15;

impl Default for Tables {
    fn default() -> Self {
        Self {
            sort: None,
            limit: DEFAULT_LIMIT,
            callers: None,
            callees: None,
        }
    }
}

/// What the top table is sorted by (`--sort`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// The weight of samples where the function is the leaf.
    SelfWeight,
    /// The weight of samples where the function is anywhere on the stack.
    Total,
}
