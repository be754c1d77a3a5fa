//! jprof's JVMTI agent for HotSpot JVMs. Loaded with `-agentpath:libjprof_agent.so` (jprof adds
//! it through `JAVA_TOOL_OPTIONS`) or attached later, it writes a standard jitdump
//! `jit-<pid>.dump` that jprof's recorder tails: a CODE_LOAD per compiled method and per piece of
//! generated code (interpreter, stubs), line tables, the full inline tree of every compiled
//! method (samply's DEBUG_INFO2), and unload records so reused code-cache addresses resolve by
//! time. See docs/java.md.
//!
//! Layout: `ffi` holds every `unsafe` line (JVMTI bindings, the exported entry points, the marker
//! mmap, rdtsc); the rest is safe Rust: `events` turns JVMTI events into jitdump records,
//! `debug` builds line and inline tables, `dump` owns the file, `clock` the timestamps.

#![deny(unsafe_code)]

mod clock;
mod debug;
mod dump;
mod events;
#[allow(unsafe_code)]
mod ffi;
mod j9;
mod names;
