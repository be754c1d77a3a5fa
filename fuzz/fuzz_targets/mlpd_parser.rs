//! cargo-fuzz target: mlpd_parser.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jprof_fuzz::mlpd_parser(data));
