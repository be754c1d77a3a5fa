//! Every kind of file `jprof report` (and `jprof diff`) reads, one source each: a jprof
//! recording, a perf.data, a Mono .mlpd, an LLVM XRay log. Each declares the options it takes
//! (`Kind::accepts`, checked in one place), owns its analysis, and hands `report/` the same
//! thing: a [`Loaded`] profile with its [`Context`](crate::profile::Context), or its own text
//! report.
//!
//! ```text
//!  recording ─┐ recording/: symbolize (symbolize/), XRay logs stored alongside (xray/live.rs),
//!  perf.data ─┘   the filters, the weight           ┐
//!  .mlpd ────── mlpd/: decode, analysis              ├─► Loaded { profile, context, summary }
//!  XRay log ─── xray/: replay (+ --binary's names)  ┘     or the input's text report
//! ```

pub(crate) mod mlpd;
pub mod perf_data;
pub(crate) mod recording;
pub mod xray;

mod kind;
mod request;

pub use kind::{Accepts, Kind};
pub use request::{Loaded, Request, Weight};
pub(crate) use request::{SortBy, Tables, DEFAULT_LIMIT};

use crate::error::Result;

/// Reads `request.path` for every format but text: the filtered, weighted profile and its
/// context.
pub fn load(request: &Request) -> Result<Loaded> {
    let kind = Kind::detect(&request.path);
    kind.check(request)?;
    match kind {
        Kind::Recording | Kind::PerfData => recording::load(request, kind),
        Kind::Mlpd => mlpd::load(request),
        Kind::XrayLog => xray::log::load(request),
    }
}

/// The input's own text report (`--format text`).
pub fn text(request: &Request) -> Result<Vec<u8>> {
    let kind = Kind::detect(&request.path);
    kind.check(request)?;
    match kind {
        Kind::Recording | Kind::PerfData => recording::text(request, kind),
        Kind::Mlpd => mlpd::text(request),
        Kind::XrayLog => xray::log::text(request),
    }
}
