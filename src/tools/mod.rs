//! Tools for users around the profiler itself: `jprof dump` (a readable listing of a jitdump or
//! a recording), `jprof symbolize` (addr2line for JIT code) and `jprof doctor` (can this
//! machine profile, and the fix for each thing that is missing).

pub mod continuous;
pub mod doctor;
pub mod dump;
pub(crate) mod dump_j9;
pub mod symbolize;
pub mod top;
