//! cargo-fuzz target: perf_map_parser.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jprof_fuzz::perf_map_parser(data));
