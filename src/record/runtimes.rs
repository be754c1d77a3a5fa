//! Runtime-specific set-up so `jprof record -- <runtime> ...` works with no flags: environment
//! variables that make the runtime write the JIT side files jprof reads, and the clean-up of the
//! files it made only because jprof asked.

use std::path::{Path, PathBuf};

/// V8 flags for Node: a jitdump with unwinding info, and interpreter frames on the native stack
/// (so Ignition frames show as JS functions rather than one interpreter frame).
const NODE_FLAGS: &str = "--perf-prof --perf-prof-unwinding-info --interpreted-frames-native-stack";

/// What jprof adds for the recognised runtime.
#[derive(Debug, Default)]
pub struct RuntimeSetup {
    /// "node", ... (None for native programs).
    pub runtime: Option<&'static str>,
    /// Variables to set in the target's environment.
    pub env: Vec<(String, String)>,
}

fn program_name(argv: &[String]) -> &str {
    argv.first()
        .map(|a| a.rsplit('/').next().unwrap_or(a))
        .unwrap_or("")
}

/// Appends flags to a variable, keeping what the user already had.
fn extend_var(name: &str, extra: &str) -> (String, String) {
    let value = match std::env::var(name) {
        Ok(old) if !old.trim().is_empty() => format!("{old} {extra}"),
        _ => extra.to_string(),
    };
    (name.to_string(), value)
}

pub fn prepare(argv: &[String]) -> RuntimeSetup {
    match program_name(argv) {
        "node" | "nodejs" => RuntimeSetup {
            runtime: Some("node"),
            env: vec![extend_var("NODE_OPTIONS", NODE_FLAGS)],
        },
        _ => RuntimeSetup::default(),
    }
}

/// Files a runtime wrote only because jprof enabled them, for process `pid`: the jitdump (its
/// bytes are in the recording) and, for Node, the V8 log `--perf-prof` opens as a side effect.
pub fn created_files(runtime: &str, pid: u32, jitdumps: &[PathBuf], cwd: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = jitdumps.to_vec();
    if runtime == "node" {
        let suffix = format!("-{pid}-v8.log");
        if let Ok(dir) = std::fs::read_dir(cwd) {
            files.extend(dir.flatten().map(|e| e.path()).filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("isolate-0x") && n.ends_with(&suffix))
            }));
        }
    }
    files
}
