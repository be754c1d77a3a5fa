//! cargo-fuzz target: xray_parser.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jprof_fuzz::xray_parser(data));
