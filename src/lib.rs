//! jprof: a Linux sampling profiler with integrated JIT symbolization, on one timeline.
//!
//! ```text
//! target ─► sys/ ─► record/ ─► recording file ─► symbolize/ ─► profile ─► report/
//!                     ▲ format/ (pure parsers)   timeline/ (clocks)
//! ```
//! See `docs/architecture.md` for which folder owns what and the invariants.

#[cfg(not(target_os = "linux"))]
compile_error!("jprof is Linux-only: it is built on perf_event_open");

pub mod cli;
pub(crate) mod demangle;
pub(crate) mod error;
pub mod foreign_file;
pub mod format;
pub mod input;
pub(crate) mod process_root;
pub mod profile;
pub(crate) mod progress;
pub mod record;
pub mod recording;
pub mod report;
pub mod symbolize;
#[allow(unsafe_code)]
pub mod sys;
pub mod timeline;
pub mod tools;

pub use error::{Error, Result};
