//! cargo-fuzz target: the recording reader (container, META/CLOCK/SUMMARY JSON, perf records).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jprof_fuzz::recording_reader(data));
