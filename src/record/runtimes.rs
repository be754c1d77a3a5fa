//! Runtime-specific set-up so `jprof record -- <runtime> ...` works with no flags: environment
//! variables that make the runtime write the JIT side files jprof reads, and the clean-up of the
//! files it made only because jprof asked.
//!
//! Node: `NODE_OPTIONS` with V8's perf flags. Java (HotSpot): `JAVA_TOOL_OPTIONS` with jprof's
//! JVMTI agent (`libjprof_agent.so`, found by [`find_agent`]), frame pointers in compiled code,
//! and debug info at non-safepoints for precise inline attribution (docs/java.md).
//! Mono: `MONO_ENV_OPTIONS` with the log profiler writing a .mlpd jprof tails (JIT code ranges
//! and helpers) and `--jitmap` as a second source, and `MONO_DEBUG=disable_omit_fp` so the
//! frame-pointer walk gets through managed frames (docs/mono.md).

use std::path::PathBuf;

/// V8 flags for Node: a jitdump with unwinding info, and interpreter frames on the native stack
/// (so Ignition frames show as JS functions rather than one interpreter frame).
const NODE_FLAGS: &str = "--perf-prof --perf-prof-unwinding-info --interpreted-frames-native-stack";

/// HotSpot flags: RBP-chained compiled frames, and PC descriptors beyond safepoints.
const JAVA_FLAGS: &str =
    "-XX:+PreserveFramePointer -XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints";

/// Mono's log profiler options: JIT events (code ranges) only, into a per-process file.
const MONO_LOG: &str = "--profile=log:jit,output=";

/// The .mlpd jprof asks Mono's process `pid` to write (`%p` in the option is Mono's pid).
pub fn mono_log_path(pid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("jprof-mono-{pid}.mlpd"))
}

/// Whether the user's own `MONO_ENV_OPTIONS` (jprof's environment) holds `option`.
fn user_mono_option(option: &str) -> bool {
    std::env::var("MONO_ENV_OPTIONS").is_ok_and(|o| o.contains(option))
}

fn mono_setup() -> RuntimeSetup {
    let log = std::env::temp_dir().join("jprof-mono-%p.mlpd");
    let mut options = format!("{MONO_LOG}{} --jitmap", log.display());
    let mut notes = Vec::new();
    if user_mono_option("--profile=log") {
        // Mono runs one log profiler: the user's stays, and names come from the perf map.
        options = "--jitmap".to_string();
        notes.push(
            "MONO_ENV_OPTIONS already runs the log profiler: jprof added only --jitmap, so JIT names come from the perf map"
                .to_string(),
        );
    }
    let debug = match std::env::var("MONO_DEBUG") {
        Ok(old) if !old.trim().is_empty() => format!("{old},disable_omit_fp"),
        _ => "disable_omit_fp".to_string(),
    };
    RuntimeSetup {
        env: vec![
            extend_var("MONO_ENV_OPTIONS", &options),
            ("MONO_DEBUG".to_string(), debug),
        ],
        notes,
    }
}

/// The agent's file name, as cargo builds it next to jprof.
pub const AGENT_FILE: &str = "libjprof_agent.so";

/// What jprof adds for the recognised runtime.
#[derive(Debug, Default)]
pub struct RuntimeSetup {
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

/// The set-up for a launched command: the variables every runtime honours are set whatever
/// the command is, so a runtime started through a launcher (`javac`, an npm shim, `sh -c`,
/// Debian's `mcs` wrapper) is prepared too; a process that is no runtime ignores them.
pub fn prepare(argv: &[String]) -> RuntimeSetup {
    let runtime = match program_name(argv) {
        "java" => Some("java"),
        _ => None,
    };
    let java = java_setup(find_agent());
    let mono = mono_setup();
    let mut env = vec![extend_var("NODE_OPTIONS", NODE_FLAGS)];
    env.extend(java.env);
    env.extend(mono.env);
    let mut notes = Vec::new();
    // The agent's absence matters only when a JVM runs: said then (see observed runtimes).
    if runtime == Some("java") {
        notes.extend(java.notes);
    }
    notes.extend(mono.notes);
    RuntimeSetup { env, notes }
}

/// The runtime a mapped file shows a process to be: HotSpot's libjvm, Node's executable or
/// libnode, Mono's runtime.
pub fn runtime_of_mapping(filename: &str) -> Option<&'static str> {
    let name = filename.rsplit('/').next().unwrap_or(filename);
    if name == "libjvm.so" {
        Some("java")
    } else if name == "node" || name == "nodejs" || name.starts_with("libnode.so") {
        Some("node")
    } else if name.starts_with("mono-sgen")
        || name == "mono"
        || name.starts_with("libmonosgen")
        || name.starts_with("libmono-2.0")
    {
        Some("mono")
    } else {
        None
    }
}

/// Whether Mono's log profiler library is installed (Debian: `libmono-profiler`).
pub fn mono_log_profiler_installed() -> bool {
    ["/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/local/lib"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|d| d.flatten())
        .any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("libmono-profiler-log.so"))
        })
}

/// One line per runtime process seen: how it was set up, or why its JIT code will not be
/// named and the fix.
pub fn observed_notes(
    runtimes: &std::collections::BTreeMap<u32, &'static str>,
    files: &std::collections::BTreeMap<u32, Vec<PathBuf>>,
    setup: &RuntimeSetup,
) -> Vec<String> {
    let mut notes = Vec::new();
    for (&pid, &runtime) in runtimes {
        let has_files = files.get(&pid).is_some_and(|f| !f.is_empty());
        let line = match (runtime, has_files) {
            ("java", true) => format!("java (pid {pid}): jprof's JVMTI agent wrote its jitdump"),
            ("java", false) => match setup.env.iter().any(|(k, v)| k == "JAVA_TOOL_OPTIONS" && v.contains("-agentpath")) {
                true => format!("java (pid {pid}): no jitdump from jprof's agent (the JVM's environment was cleared, or it refused the agent): Java JIT frames are not named; `jprof record -p {pid}` attaches it"),
                false => format!("java (pid {pid}): {AGENT_FILE} was not found next to jprof (or set JPROF_AGENT): Java JIT frames are not named"),
            },
            ("node", true) => format!("node (pid {pid}): V8 wrote its jitdump (NODE_OPTIONS {NODE_FLAGS})"),
            ("node", false) => format!("node (pid {pid}): no jitdump (NODE_OPTIONS was overridden or cleared before Node started): JavaScript frames are not named; run it with {NODE_FLAGS}"),
            ("mono", true) => format!("mono (pid {pid}): the log profiler and --jitmap named managed code"),
            ("mono", false) if !mono_log_profiler_installed() => format!("mono (pid {pid}): Mono's log profiler library is missing, so managed frames are named from --jitmap only: apt-get install libmono-profiler"),
            ("mono", false) if user_mono_option("--profile=log") => format!("mono (pid {pid}): managed frames named from --jitmap (the log profiler in MONO_ENV_OPTIONS is the user's: jprof does not read its file)"),
            ("mono", false) => format!("mono (pid {pid}): no log profiler file (MONO_ENV_OPTIONS was overridden or cleared): managed frames named from --jitmap only"),
            _ => continue,
        };
        notes.push(line);
    }
    notes
}

/// Files a runtime wrote only because jprof enabled them, for process `pid`: the jitdump or
/// Mono log (their bytes are in the recording; for Java the agent's) and, for Node, the V8 log
/// `--perf-prof` opens as a side effect.
pub fn created_files(runtime: &str, pid: u32, jitdumps: &[PathBuf]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = jitdumps.to_vec();
    if runtime == "mono" && !user_mono_option("--jitmap") {
        // `--jitmap`'s map, which jprof asked for; its lines are in the recording.
        files.push(crate::format::perf_map::path_of(pid));
    }
    if runtime == "node" {
        // V8's log goes where the jitdump goes: Node's working directory.
        let suffix = format!("-{pid}-v8.log");
        for dir in jitdumps.iter().filter_map(|j| j.parent()) {
            if let Ok(entries) = std::fs::read_dir(dir) {
                files.extend(entries.flatten().map(|e| e.path()).filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("isolate-0x") && n.ends_with(&suffix))
                }));
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mono_gets_the_log_profiler_the_jit_map_and_frame_pointers() {
        for program in ["mono", "/usr/bin/mono-sgen"] {
            let setup = prepare(&[program.to_string(), "app.exe".to_string()]);
            let var = |name: &str| {
                setup
                    .env
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            assert!(var("MONO_ENV_OPTIONS").ends_with("--jitmap"));
            assert!(var("MONO_DEBUG").ends_with("disable_omit_fp"));
            if !std::env::var("MONO_ENV_OPTIONS").is_ok_and(|o| o.contains("--profile=log")) {
                let log = mono_log_path(4242);
                assert!(log.ends_with("jprof-mono-4242.mlpd"));
                assert!(var("MONO_ENV_OPTIONS").contains("--profile=log:jit,output="));
                assert!(var("MONO_ENV_OPTIONS").contains("jprof-mono-%p.mlpd"));
            }
        }
    }

    #[test]
    fn java_gets_the_agent_and_the_hotspot_flags() {
        let agent = std::env::current_exe().unwrap();
        let setup = java_setup(Some(agent.clone()));
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
    fn every_command_gets_every_runtimes_variables() {
        let argv = |a: &str| vec![a.to_string(), "x".to_string()];
        for launcher in [
            "java",
            "node",
            "javac",
            "sh",
            "mcs",
            "./node_modules/.bin/tsc",
        ] {
            let setup = prepare(&argv(launcher));
            let names: Vec<&str> = setup.env.iter().map(|(k, _)| k.as_str()).collect();
            for var in [
                "NODE_OPTIONS",
                "JAVA_TOOL_OPTIONS",
                "MONO_ENV_OPTIONS",
                "MONO_DEBUG",
            ] {
                assert!(names.contains(&var), "{launcher}: {names:?}");
            }
        }
    }

    #[test]
    fn runtimes_are_recognised_by_what_they_map() {
        assert_eq!(
            runtime_of_mapping("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"),
            Some("java")
        );
        assert_eq!(runtime_of_mapping("/usr/bin/node"), Some("node"));
        assert_eq!(runtime_of_mapping("/usr/bin/mono-sgen"), Some("mono"));
        assert_eq!(
            runtime_of_mapping("/usr/lib/libmonosgen-2.0.so.1"),
            Some("mono")
        );
        assert_eq!(
            runtime_of_mapping("/usr/lib/x86_64-linux-gnu/libc.so.6"),
            None
        );
    }
}
