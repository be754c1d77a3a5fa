//! The syscall/FFI layer of jprof, the only crate of the profiler itself with `unsafe`.
//!
//! perf_event_open and its ring buffer, the perf mmap page, bpf(2) maps, programs and ring buffers, fork/exec with a handshake, raw
//! clock reads, file mappings, threads' scheduling classes. Every unsafe block carries a `// SAFETY:` comment.

#![warn(missing_docs)]

pub mod bpf;
pub mod child;
pub mod clock;
pub mod mapped_file;
pub mod memory;
pub mod perf_event;
pub mod sched;
pub mod shared_bytes;
