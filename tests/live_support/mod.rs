//! Readiness for live tests: wait for the state a test needs instead of sleeping.

use std::time::{Duration, Instant};

/// Waits until a child of `parent` (jprof) runs `comm`: jprof releases the target only after
/// its events, output file and signal handlers are set up, so from then on a signal to jprof
/// is handled as a stop request. Panics after 20 s.
pub fn wait_until_target_runs(parent: u32, comm: &str) {
    let start = Instant::now();
    loop {
        let children = std::fs::read_dir(format!("/proc/{parent}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .collect::<String>();
        let running = children.split_whitespace().any(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        });
        if running {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no child of {parent} runs {comm} after 20 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
