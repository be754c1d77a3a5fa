//! cargo-fuzz target: perf_data (`jprof report -i perf.data`'s reader).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jprof_fuzz::perf_data(data));
