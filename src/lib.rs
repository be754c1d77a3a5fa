//! jprof: a Linux sampling profiler with integrated JIT symbolization, on one timeline.
//!
//! ```text
//! target ─► sys/ ─► record/ ─► recording file ─► input/ (+ perf.data, .mlpd, XRay logs)
//!                                                   └─► symbolize/ ─► profile/ ─► report/
//!          format/ (pure parsers)   timeline/ (clocks)
//! ```
//! `format/` is the `jprof-format` crate and `sys/` the `jprof-sys` crate (crates/), re-exported
//! here under their old paths. See `docs/architecture.md` for which folder owns what and the
//! invariants.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!("jprof is Linux-only: it is built on perf_event_open");

pub mod cli;
pub(crate) mod error;
pub mod fleet;
pub mod foreign_file;
pub mod input;
pub mod output;
pub(crate) mod process_root;
pub mod profile;
pub(crate) mod progress;
pub mod record;
pub mod recording;
pub mod report;
pub mod symbolize;
pub(crate) mod terminal;
pub mod timeline;
pub mod tools;

pub use error::{Error, Result};
pub use jprof_format as format;
pub(crate) use jprof_format::demangle;
pub use jprof_sys as sys;
