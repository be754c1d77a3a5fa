//! jprof's JVMTI agent for HotSpot JVMs. Loaded with `-agentpath:libjprof_agent.so` (jprof adds
//! it through `JAVA_TOOL_OPTIONS`) or attached later, it writes a standard jitdump
//! `jit-<pid>.dump` that jprof's recorder tails: a CODE_LOAD per compiled method and per piece of
//! generated code (interpreter, stubs), line tables, the full inline tree of every compiled
//! method (samply's DEBUG_INFO2), and unload records so reused code-cache addresses resolve by
//! time. See docs/java.md.
//!
//! Layout, top down: `entry` is where the VM calls in (the exported `Agent_On*` functions and
//! the event callbacks); `events` turns JVMTI events into jitdump records (prepared classes'
//! method names on the agent's own thread, queued by `naming`), `debug` builds line and inline
//! tables, `dump` owns the file, `clock` the timestamps; `ffi` at the bottom is the
//! boundary with the VM (JVMTI bindings, the VM's pointers decoded, the marker mmap, rdtsc)
//! and holds every `unsafe` line, calling nothing above it.

#![deny(unsafe_code)]

mod clock;
mod debug;
mod dump;
// `#[no_mangle]` on the exported functions is its only unsafe construct.
#[allow(unsafe_code)]
mod entry;
mod events;
#[allow(unsafe_code)]
mod ffi;
mod j9;
mod names;
mod naming;
