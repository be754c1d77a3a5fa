//! `jprof doctor` run for real on this machine: as root, as an unprivileged user (setpriv),
//! with a locked-memory limit too small for the rings (prlimit: exit 1), and with a stand-in
//! `java` whose agent is missing.

use crate::cli_support;
use cli_support::JPROF;

use std::path::Path;
use std::process::{Command, Output};

fn doctor(wrapper: &[&str], path_prefix: Option<&Path>, agent: Option<&str>) -> (String, i32) {
    let jprof = JPROF;
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(jprof);
            c
        }
        None => Command::new(jprof),
    };
    cmd.arg("doctor");
    if let Some(dir) = path_prefix {
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", dir.display()));
    }
    if let Some(agent) = agent {
        cmd.env("JPROF_AGENT", agent);
    }
    let Output { status, stdout, .. } = cmd.output().expect("run jprof doctor");
    (
        String::from_utf8(stdout).unwrap(),
        status.code().unwrap_or(-1),
    )
}

const NOBODY: &[&str] = &[
    "setpriv",
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    "--inh-caps=-all",
];

fn paranoid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn root_can_profile() {
    assert!(nix::unistd::geteuid().is_root(), "the tests run as root");
    let (out, code) = doctor(&[], None, None);
    assert_eq!(code, 0, "{out}");
    for line in [
        "[ok]   perf_event_open      sampling works",
        "[ok]   kernel frames",
        "[ok]   perf_event_mlock_kb  no limit for root",
        "[ok]   kptr_restrict",
        "jprof can profile here",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
    for name in [
        "PMU",
        "TSC",
        "attach (-p)",
        "java",
        "node",
        "mono",
        "clang xray",
    ] {
        assert!(
            out.lines()
                .any(|l| l.get(7..).is_some_and(|l| l.starts_with(name))),
            "no {name} check in\n{out}"
        );
    }
}

#[test]
fn unprivileged_user_gets_warnings_and_fixes() {
    let (out, code) = doctor(NOBODY, None, None);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("running as uid 65534 without CAP_PERFMON"),
        "{out}"
    );
    if paranoid() >= 2 {
        assert!(out.contains("[warn] kernel frames"), "{out}");
        assert!(
            out.contains("fix: `sudo sysctl -w kernel.perf_event_paranoid=1`"),
            "{out}"
        );
    }
    assert!(
        out.contains("fix: to attach to other users' processes"),
        "{out}"
    );
}

#[test]
fn rings_beyond_the_locked_memory_allowance_fail() {
    let cpus = std::thread::available_parallelism().unwrap().get();
    let mlock_kb: usize = std::fs::read_to_string("/proc/sys/kernel/perf_event_mlock_kb")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Each CPU's ring is 257 pages; with no RLIMIT_MEMLOCK only mlock_kb per CPU is allowed.
    assert!(
        mlock_kb < 257 * 4,
        "this test needs the default perf_event_mlock_kb (516)"
    );
    let mut wrapper = NOBODY.to_vec();
    wrapper.extend(["prlimit", "--memlock=0"]);
    let (out, code) = doctor(&wrapper, None, None);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("[FAIL] perf_event_mlock_kb"), "{out}");
    assert!(
        out.contains(&format!("the rings need ~{} KiB", cpus * 1028)),
        "{out}"
    );
    assert!(
        out.contains("fix: `sudo sysctl -w kernel.perf_event_mlock_kb=1028`"),
        "{out}"
    );
    assert!(
        out.contains("jprof cannot profile on this machine"),
        "{out}"
    );
}

#[test]
fn java_without_the_agent_is_a_warning_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let java = dir.path().join("java");
    std::fs::write(
        &java,
        "#!/bin/sh\necho 'openjdk version \"99\" stand-in' >&2\n",
    )
    .unwrap();
    std::fs::set_permissions(&java, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (out, code) = doctor(
        &[],
        Some(dir.path()),
        Some("/nonexistent/libjprof_agent.so"),
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("[warn] java                 openjdk version \"99\" stand-in; jprof's JVMTI agent not found (no file at /nonexistent/libjprof_agent.so)"),
        "{out}"
    );
    assert!(
        out.contains("set JPROF_AGENT=/path/to/libjprof_agent.so"),
        "{out}"
    );
}

#[test]
fn completions_and_help() {
    let jprof = JPROF;
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef jprof"),
        ("fish", "complete -c jprof"),
    ] {
        let out = Command::new(jprof)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(marker), "{shell}: {text}");
        for word in ["record", "report", "diff", "doctor", "no-inline"] {
            assert!(text.contains(word), "{shell} completion lacks {word}");
        }
    }
    for command in [
        "record",
        "report",
        "dump",
        "symbolize",
        "diff",
        "doctor",
        "completions",
    ] {
        let out = Command::new(jprof)
            .args([command, "--help"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{command} --help");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains("Examples:\n  jprof "),
            "{command} --help has no examples:\n{text}"
        );
    }
}
