//! jprof's integration tests, in one test binary: every module below is one area (a former
//! `tests/*.rs` file), and the `*_support` modules are the helpers they share. One binary links
//! once, which is most of a clean `cargo test` build (docs/performance.md, "Test suite").
//!
//! Adding tests: put them in the area's module, or add `tests/suite/NAME.rs` and a `mod NAME;`
//! line here. A file under tests/ that no test target includes fails `architecture` (it would
//! compile nothing and run nothing). Slow soaks are `#[ignore = "soak: …"]`; CI runs them
//! (`cargo test --workspace -- --include-ignored`, tests/README.md).

// Helpers shared by the areas.
mod attacker_support;
mod cli_support;
mod clickhouse_support;
mod golden_support;
mod j9_support;
mod jdk_support;
mod live_support;
mod mlpd_support;
mod symbolize_support;

// The areas.
mod architecture;
mod attach_live;
mod attach_node;
mod build_ids;
mod disk_full;
mod doctor_cli;
mod dwarf_depth;
mod flamegraph_browser;
mod flamegraph_real_png;
mod fleet_clickhouse;
mod format_j9;
mod format_jitdump;
mod format_mlpd;
mod format_perf_map;
mod format_xray;
mod host_build_ids;
mod host_record;
mod import_perf_data;
mod j9_jitdump;
mod java_e2e;
mod jit_e2e;
mod jit_index;
mod launchers;
mod leftovers;
mod mono_e2e;
mod node_e2e;
mod off_cpu;
mod record_live;
mod report_cli;
mod report_filters;
mod report_formats;
mod report_hotspots;
mod report_mlpd;
mod report_notes;
mod robustness;
mod runtimes_e2e;
mod security_attach;
mod security_root;
mod security_runtimes;
mod serve_browser;
mod symbolize_live;
mod symbolize_native;
mod symbolize_robust;
mod test_layout;
mod timeline_live;
mod tools_cli;
mod top_tmux;
mod usage_docs;
mod xray_live;
mod xray_report;
