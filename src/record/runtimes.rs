//! Runtime-specific set-up so `jprof record -- <runtime> ...` works with no flags: environment
//! variables that make the runtime write the JIT side files jprof reads, and the clean-up of the
//! files it made only because jprof asked.
//!
//! Node: `NODE_OPTIONS` with V8's perf flags. Java (HotSpot): `JAVA_TOOL_OPTIONS` with jprof's
//! JVMTI agent (`libjprof_agent.so`, found by [`find_agent`]), frame pointers in compiled code,
//! and debug info at non-safepoints for precise inline attribution (docs/java.md).

use std::path::{Path, PathBuf};

/// V8 flags for Node: a jitdump with unwinding info, and interpreter frames on the native stack
/// (so Ignition frames show as JS functions rather than one interpreter frame).
const NODE_FLAGS: &str = "--perf-prof --perf-prof-unwinding-info --interpreted-frames-native-stack";

/// HotSpot flags: RBP-chained compiled frames, and PC descriptors beyond safepoints.
const JAVA_FLAGS: &str =
    "-XX:+PreserveFramePointer -XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints";

/// The agent's file name, as cargo builds it next to jprof.
pub const AGENT_FILE: &str = "libjprof_agent.so";

/// What jprof adds for the recognised runtime.
#[derive(Debug, Default)]
pub struct RuntimeSetup {
    /// "node", ... (None for native programs).
    pub runtime: Option<&'static str>,
    /// Variables to set in the target's environment.
    pub env: Vec<(String, String)>,
    /// Things the user should know (for the summary), e.g. a missing agent.
    pub notes: Vec<String>,
}

/// jprof's JVMTI agent: `$JPROF_AGENT`, else next to the jprof executable, else one directory
/// up (test binaries run from `target/<profile>/deps/`).
pub fn find_agent() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("JPROF_AGENT").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join(AGENT_FILE), dir.join("..").join(AGENT_FILE)]
        .into_iter()
        .find(|p| p.is_file())
}

fn java_setup(agent: Option<PathBuf>) -> RuntimeSetup {
    let mut notes = Vec::new();
    let flags = match &agent {
        Some(path) if path.is_file() => {
            let option = format!("-agentpath:{}", path.display());
            // HotSpot splits JAVA_TOOL_OPTIONS on white space but honours double quotes.
            if option.contains(char::is_whitespace) {
                format!("\"{option}\" {JAVA_FLAGS}")
            } else {
                format!("{option} {JAVA_FLAGS}")
            }
        }
        Some(path) => {
            notes.push(format!(
                "JPROF_AGENT={} is not a file: Java JIT frames will not be named",
                path.display()
            ));
            JAVA_FLAGS.to_string()
        }
        None => {
            notes.push(format!(
                "{AGENT_FILE} was not found next to jprof (or set JPROF_AGENT): Java JIT frames will not be named"
            ));
            JAVA_FLAGS.to_string()
        }
    };
    RuntimeSetup {
        runtime: Some("java"),
        env: vec![extend_var("JAVA_TOOL_OPTIONS", &flags)],
        notes,
    }
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
            notes: Vec::new(),
        },
        "java" => java_setup(find_agent()),
        _ => RuntimeSetup::default(),
    }
}

/// Files a runtime wrote only because jprof enabled them, for process `pid`: the jitdump (its
/// bytes are in the recording; for Java the agent's) and, for Node, the V8 log `--perf-prof`
/// opens as a side effect.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_gets_the_agent_and_the_hotspot_flags() {
        let agent = std::env::current_exe().unwrap();
        let setup = java_setup(Some(agent.clone()));
        assert_eq!(setup.runtime, Some("java"));
        let (name, value) = &setup.env[0];
        assert_eq!(name, "JAVA_TOOL_OPTIONS");
        assert!(value.contains(&format!("-agentpath:{}", agent.display())));
        assert!(value.ends_with(JAVA_FLAGS));
        assert!(setup.notes.is_empty());
    }

    #[test]
    fn an_agent_path_with_spaces_is_quoted() {
        let dir = std::env::temp_dir().join(format!("jprof runtimes {}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let agent = dir.join(AGENT_FILE);
        std::fs::write(&agent, b"").unwrap();
        let value = java_setup(Some(agent.clone())).env[0].1.clone();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            value.starts_with(&format!("\"-agentpath:{}\" ", agent.display())),
            "{value}"
        );
    }

    #[test]
    fn java_without_the_agent_says_so() {
        let setup = java_setup(None);
        assert!(!setup.env[0].1.contains("-agentpath"));
        assert!(setup.notes[0].contains(AGENT_FILE));
        let missing = java_setup(Some(PathBuf::from("/nonexistent/agent.so")));
        assert!(missing.notes[0].contains("not a file"));
    }

    #[test]
    fn runtimes_are_recognised_by_program_name() {
        let argv = |a: &str| vec![a.to_string(), "x".to_string()];
        assert_eq!(prepare(&argv("/usr/bin/java")).runtime, Some("java"));
        assert_eq!(prepare(&argv("node")).runtime, Some("node"));
        assert_eq!(prepare(&argv("javac")).runtime, None);
    }
}
