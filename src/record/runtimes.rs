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

use crate::foreign_file;
use crate::process_root;
use std::path::{Path, PathBuf};

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

/// The end of the summary note saying the agent was attached to a running JVM.
pub const LOADED: &str = "loaded jprof's JVMTI agent";

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

/// Whether `pid` runs a HotSpot JVM (libjvm.so is mapped).
fn is_hotspot(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .is_ok_and(|maps| maps.lines().any(|l| l.ends_with("/libjvm.so")))
}

/// The agent's copy in a container's `/tmp`: where jprof made it and how the JVM names it.
struct AgentCopy {
    made: foreign_file::Created,
    inside: String,
}

/// Copies the agent into the container's `/tmp`, readable by the JVM's user. The copy is a new
/// file (never one the container's user planted, never through a link: under `/proc/PID/root`
/// an absolute link would resolve on the host), given to that user through its own descriptor.
fn copy_agent_into(root: &Path, agent: &Path, nspid: u32, pid: u32) -> std::io::Result<AgentCopy> {
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(format!("/proc/{pid}"))?;
    let mut last = None;
    for attempt in 0..16u32 {
        let inside = format!(
            "/tmp/jprof-agent-{nspid}-{}-{attempt}.so",
            std::process::id()
        );
        let host = process_root::host_path(Some(root), Path::new(&inside));
        match foreign_file::create_new(&host, 0o400) {
            Ok(mut made) => {
                let copied = std::fs::File::open(agent)
                    .and_then(|mut src| std::io::copy(&mut src, &mut made.file))
                    .and_then(|_| {
                        std::os::unix::fs::fchown(&made.file, Some(owner.uid()), Some(owner.gid()))
                    });
                if let Err(e) = copied {
                    foreign_file::remove_if_same(&made.path, made.dev, made.ino);
                    return Err(e);
                }
                return Ok(AgentCopy { made, inside });
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name in /tmp")))
}

/// Creates the JVM's attach trigger `.attach_pidN` in its working directory or its tmp
/// directory: a new file, never through a link the JVM's user planted there. HotSpot accepts a
/// trigger owned by root.
fn create_attach_trigger(pid: u32, nspid: u32, tmp: &Path) -> Option<foreign_file::Created> {
    [
        PathBuf::from(format!("/proc/{pid}/cwd/.attach_pid{nspid}")),
        tmp.join(format!(".attach_pid{nspid}")),
    ]
    .into_iter()
    .find_map(|p| foreign_file::create_new(&p, 0o600).ok())
}

/// Sends one HotSpot attach request (protocol 1: version and exactly four arguments) and
/// returns the reply text.
fn attach_request(socket: &Path, args: [&str; 4]) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(20)))?;
    let mut request = b"1\0".to_vec();
    for a in args {
        request.extend_from_slice(a.as_bytes());
        request.push(0);
    }
    stream.write_all(&request)?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

/// Whether a `load` reply means the agent's Agent_OnAttach returned 0: the first line is the
/// request's result; JDK 9+ adds `return code: N`, and JDK 21+ reports a load failure as
/// result 0 with a message instead.
fn load_succeeded(reply: &str) -> bool {
    let mut lines = reply.lines().map(str::trim);
    if lines.next() != Some("0") {
        return false;
    }
    let rest: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
    match rest.first() {
        None => true,
        Some(l) => l.strip_prefix("return code:").map(str::trim) == Some("0") || *l == "0",
    }
}

/// Loads jprof's agent into the running HotSpot JVM `pid` with the HotSpot attach protocol
/// (the `.attach_pid` trigger file, SIGQUIT, the `.java_pid` socket, `load`), so it replays
/// the JVM's compiled code into a jitdump jprof's recorder picks up. Returns notes for the
/// summary; not a JVM or no agent gives no attempt or a note saying why.
/// What attaching jprof's agent to a running JVM did.
#[derive(Debug, Default)]
pub struct Attach {
    /// The agent is loaded (the JVM writes a jitdump for this recording).
    pub loaded: bool,
    /// What the summary says about it.
    pub notes: Vec<String>,
}

impl Attach {
    fn failed(note: String) -> Self {
        Self {
            loaded: false,
            notes: vec![note],
        }
    }
}

/// `launched`: the JVM runs in a tree jprof launched, but its environment was cleared (so
/// jprof's `JAVA_TOOL_OPTIONS` never reached it); otherwise it is a `-p` target.
pub fn attach_java(pid: u32, launched: bool) -> Attach {
    if !is_hotspot(pid) {
        return Attach::default();
    }
    let Some(agent) = find_agent() else {
        return Attach::failed(format!(
            "HotSpot JVM: {AGENT_FILE} was not found next to jprof (or set JPROF_AGENT): Java JIT frames will not be named"
        ));
    };
    // The JVM accepts attach connections only from its own effective uid (or root).
    // A /proc/<pid> directory belongs to the process's effective uid.
    let uid_of = |dir: &str| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(dir).map(|m| m.uid())
    };
    if let (Ok(euid), Ok(owner)) = (uid_of("/proc/self"), uid_of(&format!("/proc/{pid}"))) {
        if euid != 0 && owner != euid {
            return Attach::failed(format!(
                "HotSpot JVM {pid} runs as uid {owner}: only that user or root can load jprof's agent; Java JIT frames will not be named"
            ));
        }
    }
    let nspid = process_root::namespace_pid(pid);
    let tmp = PathBuf::from(format!("/proc/{pid}/root/tmp"));
    let socket = tmp.join(format!(".java_pid{nspid}"));
    // The JVM's socket, not one planted by another user: owned by the JVM's user or root.
    let jvm_uid = foreign_file::process_uid(pid);
    let is_socket = |p: &Path| {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        std::fs::symlink_metadata(p)
            .is_ok_and(|m| m.file_type().is_socket() && (m.uid() == 0 || Some(m.uid()) == jvm_uid))
    };
    if !is_socket(&socket) {
        // The JVM starts its attach listener on SIGQUIT only if this trigger file exists (in
        // its working directory or its tmp directory); otherwise SIGQUIT prints a thread dump.
        let Some(trigger) = create_attach_trigger(pid, nspid, &tmp) else {
            return Attach::failed(format!(
                "HotSpot JVM {pid}: cannot create its attach trigger file; Java JIT frames will not be named"
            ));
        };
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGQUIT,
        );
        let mut waited = std::time::Duration::ZERO;
        let mut step = std::time::Duration::from_millis(20);
        while !is_socket(&socket) && waited < std::time::Duration::from_secs(6) {
            std::thread::sleep(step);
            waited += step;
            step = (step + std::time::Duration::from_millis(20))
                .min(std::time::Duration::from_millis(200));
        }
        foreign_file::remove_if_same(&trigger.path, trigger.dev, trigger.ino);
        if !is_socket(&socket) {
            return Attach::failed(format!(
                "HotSpot JVM {pid}: its attach listener did not start (started with -XX:+DisableAttachMechanism?); Java JIT frames will not be named"
            ));
        }
    }
    let mut outcome = Attach::default();
    let notes = &mut outcome.notes;
    // A JVM in another mount namespace (a container) cannot see jprof's files: give it a copy
    // of the agent in its own /tmp, readable by its user, removed once loaded (the mapping
    // stays).
    let copied = match process_root::foreign_root(pid) {
        None => None,
        Some(root) => match copy_agent_into(&root, &agent, nspid, pid) {
            Ok(copy) => Some(copy),
            Err(e) => {
                return Attach::failed(format!(
                    "HotSpot JVM {pid} runs in another mount namespace and jprof's agent could not be copied into its /tmp: {e}; Java JIT frames will not be named"
                ))
            }
        },
    };
    let agent_arg = match &copied {
        Some(copy) => copy.inside.clone(),
        None => agent.display().to_string(),
    };
    let loaded = attach_request(&socket, ["load", &agent_arg, "true", ""]);
    if let Some(copy) = &copied {
        foreign_file::remove_if_same(&copy.made.path, copy.made.dev, copy.made.ino);
    }
    match loaded {
        Ok(reply) if load_succeeded(&reply) => {
            outcome.loaded = true;
            let late = match launched {
                true => " (it had started without the agent: its environment was cleared)",
                false => "",
            };
            notes.push(format!("HotSpot JVM {pid}: {LOADED}{late}"));
        }
        Ok(reply) => notes.push(format!(
            "HotSpot JVM {pid}: loading {AGENT_FILE} failed: {}",
            reply.trim().replace('\n', " ")
        )),
        Err(e) => notes.push(format!("HotSpot JVM {pid}: attach failed: {e}")),
    }
    if let Ok(flags) = attach_request(&socket, ["jcmd", "VM.flags", "", ""]) {
        if !flags.contains("-XX:+PreserveFramePointer") {
            let fix = if launched {
                "its environment was cleared, so jprof's JAVA_TOOL_OPTIONS did not reach it: pass the flag on its command line"
            } else {
                "start it with that flag, or with `jprof record -- java ...`"
            };
            notes.push(format!(
                "HotSpot JVM {pid} runs without -XX:+PreserveFramePointer: stacks through compiled Java code may be truncated ({fix})"
            ));
        }
    }
    outcome
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

    /// Attack 2 of docs/security.md: a container's user plants the agent copy's name as a link
    /// (an absolute link under /proc/PID/root resolves on the host); the copy goes elsewhere.
    #[test]
    fn the_agent_copy_never_goes_through_a_planted_link() {
        let work = tempfile::tempdir().unwrap();
        let agent = work.path().join("agent.so");
        std::fs::write(&agent, b"agent bytes").unwrap();
        let victim = work.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let me = std::process::id();
        let nspid = 4_000_000 + me % 1000;
        let planted = PathBuf::from(format!("/tmp/jprof-agent-{nspid}-{me}-0.so"));
        let _ = std::fs::remove_file(&planted);
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let root = PathBuf::from(format!("/proc/{me}/root"));
        let copy = copy_agent_into(&root, &agent, nspid, me).unwrap();
        let _ = std::fs::remove_file(&planted);
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(copy.inside, format!("/tmp/jprof-agent-{nspid}-{me}-1.so"));
        assert_eq!(std::fs::read(&copy.made.path).unwrap(), b"agent bytes");
        assert!(foreign_file::remove_if_same(
            &copy.made.path,
            copy.made.dev,
            copy.made.ino
        ));
    }

    #[test]
    fn attach_replies() {
        assert!(load_succeeded("0\nreturn code: 0\n"));
        assert!(load_succeeded("0\n0\n"));
        assert!(load_succeeded("0\n"));
        assert!(!load_succeeded("0\nreturn code: -1\n"));
        assert!(!load_succeeded("0\nFailed to load agent library\n"));
        assert!(!load_succeeded("101\n"));
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
