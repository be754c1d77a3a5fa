//! The output writers: one symbolized profile (with its `Context`) in a file format. Pure
//! functions from a `Profile` to bytes; `report/` chooses which one runs and where its bytes go.
//!
//! Folded stacks (`collapsed`), the flame graph SVG (`flamegraph`), and the viewer formats
//! Firefox Profiler (`firefox`), pprof (`pprof`) and speedscope (`speedscope`), which share
//! `viewer` (threads as tracks, stacks without root frames, frame and module names).

pub mod collapsed;
pub mod firefox;
pub mod flamegraph;
pub mod pprof;
pub mod speedscope;
pub(crate) mod viewer;
