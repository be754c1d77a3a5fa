//! The launched target's process tree: jprof is its subreaper, so children that outlive their
//! parent stay in the tree. Recording follows the tree until its last process in jprof's
//! session exits (a daemon that started its own session is let go, and named in the
//! summary); stop signals reach every process of the tree.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::sys::child::{self, ChildExit};

/// How long after a second stop signal the tree gets SIGKILL.
const ESCALATION_GRACE: Duration = Duration::from_millis(500);

pub struct Tree {
    target: i32,
    /// The target's exit, once reaped.
    pub target_exit: Option<ChildExit>,
    stop_signals: u32,
    kill_at: Option<Instant>,
    /// Polls in a row that found nothing left to follow.
    empty_polls: u32,
    /// The last reap found no child of jprof left: as the tree's subreaper jprof is the
    /// parent of every orphan of it, so the tree is empty, daemons included.
    childless: bool,
}

/// (parent pid, session id) of a process, from `/proc/PID/stat`.
fn parent_and_session(pid: i32) -> Option<(i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    let ppid = fields.next()?.parse().ok()?;
    let _pgrp = fields.next()?;
    let session = fields.next()?.parse().ok()?;
    Some((ppid, session))
}

/// Every live descendant of `root`, with its session.
fn descendants_of(root: i32) -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let procs: HashMap<i32, (i32, i32)> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, parent_and_session(pid)?)))
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (&pid, &(ppid, sid)) in &procs {
            if ppid == parent {
                out.push((pid, sid));
                frontier.push(pid);
            }
        }
    }
    out
}

impl Tree {
    pub fn new(target: i32) -> Self {
        // Without it, orphans go to init and the tree is lost from view: still record the
        // target, as before.
        let _ = child::become_subreaper();
        Self {
            target,
            target_exit: None,
            stop_signals: 0,
            kill_at: None,
            empty_polls: 0,
            childless: false,
        }
    }

    /// jprof's descendants in its own session: the processes the recording follows.
    pub fn followed(&self) -> Vec<i32> {
        if self.childless {
            return Vec::new();
        }
        let me = std::process::id() as i32;
        let session = parent_and_session(me).map_or(0, |p| p.1);
        descendants_of(me)
            .into_iter()
            .filter(|&(_, sid)| sid == session)
            .map(|(pid, _)| pid)
            .collect()
    }

    /// Descendants that left jprof's session (daemons): not followed.
    pub fn detached(&self) -> Vec<i32> {
        if self.childless {
            return Vec::new();
        }
        let me = std::process::id() as i32;
        let session = parent_and_session(me).map_or(0, |p| p.1);
        descendants_of(me)
            .into_iter()
            .filter(|&(_, sid)| sid != session)
            .map(|(pid, _)| pid)
            .collect()
    }

    /// Reaps exited children; notes the target's exit.
    pub fn reap(&mut self) -> std::io::Result<()> {
        let reaped = child::reap_exited()?;
        for (pid, exit) in reaped.exited {
            if pid == self.target {
                self.target_exit = Some(exit);
            }
        }
        self.childless = reaped.none_left;
        Ok(())
    }

    /// Whether nothing the recording follows is left running.
    pub fn finished(&self) -> bool {
        self.target_exit.is_some() && self.followed().is_empty()
    }

    /// `finished`, seen on two polls in a row: one scan of /proc is not atomic, and a child
    /// caught while the kernel moves it from its exiting parent to jprof can be missed once.
    /// At once when jprof has no child left: the kernel moves orphans under the same lock its
    /// wait takes, so no descendant is in flight then (and none is left to scan /proc for).
    pub fn settled(&mut self) -> bool {
        if self.target_exit.is_some() && self.childless {
            self.empty_polls = 2;
            return true;
        }
        if self.finished() {
            self.empty_polls += 1;
        } else {
            self.empty_polls = 0;
        }
        self.empty_polls >= 2
    }

    /// Whether the last `settled` poll found processes of the tree still running.
    pub fn others_were_running(&self) -> bool {
        self.target_exit.is_some() && self.empty_polls == 0
    }

    /// Sends `signal` to the target and every process the recording follows.
    pub fn signal_all(&self, signal: i32) {
        if self.target_exit.is_none() {
            child::send_signal(self.target, signal);
        }
        for pid in self.followed() {
            child::send_signal(pid, signal);
        }
    }

    /// A stop signal jprof received (SIGINT, SIGTERM, SIGHUP): the first is passed on to the
    /// tree; a second one ends the tree with SIGKILL after a short grace. Returns what to say.
    pub fn stop_signal(&mut self, signal: i32, now: Instant) -> Option<String> {
        self.stop_signals += 1;
        if self.stop_signals == 1 {
            self.signal_all(signal);
            None
        } else {
            self.signal_all(libc::SIGTERM);
            self.kill_at.get_or_insert(now + ESCALATION_GRACE);
            Some("a second stop signal: the target's processes were killed (SIGKILL)".into())
        }
    }

    /// Sends the escalated SIGKILL when its time has come.
    pub fn escalate(&self, now: Instant) {
        if self.kill_at.is_some_and(|t| now >= t) {
            self.signal_all(libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With no child left the tree is settled at the first pass, without looking in /proc.
    #[test]
    fn a_childless_tree_settles_at_once() {
        let me = std::process::id() as i32;
        let mut tree = Tree {
            target: me,
            target_exit: Some(ChildExit::Code(0)),
            stop_signals: 0,
            kill_at: None,
            empty_polls: 0,
            childless: true,
        };
        assert!(tree.settled(), "settled at the first pass");
        assert!(tree.followed().is_empty() && tree.detached().is_empty());
        assert!(tree.finished() && !tree.others_were_running());
        // Children left: it takes two passes that find the tree empty, as before.
        tree.childless = false;
        tree.empty_polls = 0;
        assert!(!tree.settled(), "not at the first pass");
    }

    #[test]
    fn stat_fields_after_a_name_with_spaces_and_parentheses() {
        let me = std::process::id() as i32;
        let (ppid, sid) = parent_and_session(me).unwrap();
        assert_eq!(ppid, nix::unistd::getppid().as_raw());
        assert_eq!(sid, nix::unistd::getsid(None).unwrap().as_raw());
    }
}

/// JVMs of the tree that came up without jprof's agent (a launcher cleared the environment,
/// `env -i`): the agent is loaded into each through the attach protocol, as `-p` does.
#[derive(Default)]
pub struct JvmWatch {
    /// When each JVM was first seen without the agent.
    seen: HashMap<i32, Instant>,
    attached: std::collections::HashSet<i32>,
    attaching: Vec<super::jvm_attach::Running>,
    last_look: Option<Instant>,
}

/// How long a JVM may run without the agent before jprof attaches it (an `-agentpath` agent
/// is loaded while the VM starts, well within this).
const AGENT_GRACE: Duration = Duration::from_millis(1500);

impl JvmWatch {
    /// Looks at the tree once a second.
    pub fn poll(&mut self, tree: &Tree, now: Instant) {
        if self
            .last_look
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            return;
        }
        self.last_look = Some(now);
        let mut pids = tree.followed();
        if tree.target_exit.is_none() {
            pids.push(tree.target);
        }
        for pid in pids {
            if self.attached.contains(&pid) {
                continue;
            }
            let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
            if !maps.lines().any(|l| l.ends_with("/libjvm.so")) || maps.contains(super::AGENT_FILE)
            {
                continue;
            }
            let first = *self.seen.entry(pid).or_insert(now);
            if now.duration_since(first) >= AGENT_GRACE {
                self.attached.insert(pid);
                self.attaching.push(super::jvm_attach::start(
                    pid as u32,
                    super::jvm_attach::Origin::ClearedEnvironment,
                ));
            }
        }
    }

    /// Tells every attach still running to give up (the recording stopped).
    pub fn stop(&self) {
        self.attaching
            .iter()
            .for_each(super::jvm_attach::Running::stop);
    }

    /// What the attaches made did.
    pub fn finish(self) -> super::jvm_attach::Attach {
        let mut all = super::jvm_attach::Attach::default();
        for attach in self.attaching {
            all.merge(attach.finish());
        }
        all
    }
}
