//! Loading jprof's JVMTI agent into a running HotSpot JVM with the HotSpot attach protocol
//! (the `.attach_pid` trigger file, SIGQUIT, the `.java_pid` socket, `load`), for `-p` targets
//! and for JVMs in a launched tree whose environment was cleared.

use super::runtimes::{find_agent, AGENT_FILE};
use crate::foreign_file;
use crate::process_root;
use std::path::{Path, PathBuf};

/// The end of the summary note saying the agent was attached to a running JVM.
pub const LOADED: &str = "loaded jprof's JVMTI agent";

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
}
