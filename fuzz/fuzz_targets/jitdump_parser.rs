//! cargo-fuzz target: jitdump_parser.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jprof_fuzz::jitdump_parser(data));
