//! cargo-fuzz target: j9_metadata.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jprof_fuzz::j9_metadata(data));
