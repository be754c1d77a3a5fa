//! `jprof top` in a real terminal: tmux runs it on a Java program (jprof's agent names the JIT
//! code while it runs); the screen must show named Java frames, `t` must switch to the total
//! table, `q` must quit, keep the recording and leave the terminal as it was (canonical mode,
//! echo on: `stty -a` run after it in the same terminal says so).

use crate::cli_support;
use cli_support::JPROF;

use crate::jdk_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// jprof's agent, built next to the jprof binary under test (where jprof looks for it).
fn build_agent() {
    let bin_dir = Path::new(JPROF).parent().unwrap();
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "-p", "jprof-agent"]);
    if bin_dir.file_name().and_then(|n| n.to_str()) == Some("release") {
        cargo.arg("--release");
    }
    let out = cargo.output().expect("cargo build -p jprof-agent");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// examples/java/demo compiled into `dir`.
fn demo_classes(dir: &Path) -> PathBuf {
    let java = jdk_support::java();
    let javac = java.with_file_name("javac");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/java/demo");
    let classes = dir.join("classes");
    let out = Command::new(javac)
        .arg("-d")
        .arg(&classes)
        .arg(src.join("App.java"))
        .arg(src.join("matrix/Matrix.java"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    classes
}

/// tmux on its own server (socket), so the test never touches anyone's sessions.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux is needed (Debian package tmux; .ci/run installs it)")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    /// Waits until `done(screen)` holds; fails with the screen after `limit`.
    fn wait_for(&self, what: &str, limit: Duration, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} on the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

#[test]
fn top_shows_named_java_frames_and_quits_cleanly() {
    build_agent();
    let dir = tempfile::tempdir().unwrap();
    let classes = demo_classes(dir.path());
    let data = dir.path().join("top.data");
    let stty = dir.path().join("stty.txt");
    let done = dir.path().join("done");
    let script = format!(
        "'{JPROF}' top -o '{}' -- '{}' -cp '{}' demo.App 60; stty -a > '{}'; touch '{}'; sleep 60",
        data.display(),
        jdk_support::java().display(),
        classes.display(),
        stty.display(),
        done.display()
    );
    let tmux = Tmux {
        socket: format!("jprof-top-test-{}", std::process::id()),
    };
    let dir_arg = dir.path().to_str().unwrap();
    let started = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "160",
        "-y",
        "45",
        "-c",
        dir_arg,
        &script,
    ]);
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );

    // Java methods named while the program runs: its JIT-compiled or inlined frames.
    let screen = tmux.wait_for("named Java frame", Duration::from_secs(90), |s| {
        s.lines().any(|l| {
            l.contains("demo.matrix.Matrix.") && (l.contains("_[j]") || l.contains("_[i]"))
        })
    });
    assert!(screen.contains("jprof top — -- "), "{screen}");
    assert!(screen.contains("sorted by self time"), "{screen}");

    tmux.cmd(&["send-keys", "-t", "top", "t"]);
    tmux.wait_for("total table", Duration::from_secs(30), |s| {
        s.contains("sorted by total time")
    });

    tmux.cmd(&["send-keys", "-t", "top", "q"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done.exists() {
        assert!(
            Instant::now() < deadline,
            "jprof top did not quit:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let stty = std::fs::read_to_string(&stty).unwrap();
    let flags: Vec<&str> = stty.split_whitespace().collect();
    for flag in ["icanon", "echo", "isig"] {
        assert!(flags.contains(&flag), "{flag} not restored: {stty}");
    }
    let screen = tmux.screen();
    assert!(
        screen.contains(&format!(
            "jprof top: the recording is in {}",
            data.display()
        )),
        "{screen}"
    );
    assert!(std::fs::metadata(&data).unwrap().len() > 0);
}
