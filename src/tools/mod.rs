//! Tools for users around the profiler itself: `jprof dump` (a readable listing of a jitdump or
//! a recording) and `jprof symbolize` (addr2line for JIT code).

pub mod dump;
pub mod dump_j9;
pub mod symbolize;
