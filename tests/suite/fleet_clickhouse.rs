//! `jprof push` and `report --from` / `diff --from` against a real ClickHouse server
//! (clickhouse_support): what comes back from the store is what `report -i` shows; a push is
//! stored exactly once, through an outage and a crash in the middle of it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::cli_support::{jprof, stdout_ok, text};
use crate::clickhouse_support::ClickHouse;

/// A shell loop whose samples land in `sh` and the kernel.
const BUSY_A: &str = "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done";
/// Another shape: a pipeline of small processes.
const BUSY_B: &str =
    "for n in 1 2 3 4 5 6 7 8; do seq 1 40000 | sort -r | tail -1 >/dev/null; done";

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/shared")
        .join(path)
}

/// A live `jprof record` of `sh -c script` into `dir/name`.
fn record(dir: &Path, name: &str, script: &str) -> PathBuf {
    let data = dir.join(name);
    let out = jprof()
        .args(["record", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "record: {}", text(&out));
    data
}

fn push(url: &str, labels: &[&str], extra: &[&str], file: &Path) -> Output {
    let mut command = jprof();
    command.args(["push", "--to", url]);
    for label in labels {
        command.args(["--label", label]);
    }
    command.args(extra).arg(file);
    command.output().unwrap()
}

fn push_ok(url: &str, labels: &[&str], file: &Path) -> String {
    let out = push(url, labels, &[], file);
    assert!(
        out.status.success(),
        "push {}: {}",
        file.display(),
        text(&out)
    );
    text(&out)
}

fn collapsed_of(file: &Path) -> String {
    stdout_ok(&["report", "-i", file.to_str().unwrap(), "-f", "collapsed"])
}

fn collapsed_from(url: &str, labels: &[&str]) -> String {
    let mut args = vec!["report", "--from", url, "-f", "collapsed"];
    for label in labels {
        args.extend(["--label", label]);
    }
    stdout_ok(&args)
}

/// Folded lines added up per stack (what "both merged" means).
fn merged(texts: &[&str]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for text in texts {
        for line in text.lines() {
            let (stack, count) = line.rsplit_once(' ').expect("a folded line");
            *out.entry(stack.to_string()).or_default() += count.parse::<u64>().unwrap();
        }
    }
    out
}

fn total(text: &str) -> u64 {
    merged(&[text]).values().sum()
}

#[test]
fn a_selection_of_the_store_reports_what_its_recordings_report() {
    let server = ClickHouse::start();
    let url = server.url("fleet");
    let dir = tempfile::tempdir().unwrap();
    let a = record(dir.path(), "a.data", BUSY_A);
    let b = record(dir.path(), "b.data", BUSY_B);
    push_ok(&url, &["host=a", "service=x"], &a);
    push_ok(&url, &["host=b", "service=x"], &b);

    let (folded_a, folded_b) = (collapsed_of(&a), collapsed_of(&b));
    assert!(total(&folded_a) > 0 && total(&folded_b) > 0);
    assert_eq!(collapsed_from(&url, &["host=a"]), folded_a);
    assert_eq!(collapsed_from(&url, &["host=b"]), folded_b);
    let both = collapsed_from(&url, &[]);
    assert_eq!(merged(&[&both]), merged(&[&folded_a, &folded_b]));
    // Labels in the address, and the same key twice (either value), select the same.
    assert_eq!(
        merged(&[&collapsed_from(
            &format!("{url}?service=x"),
            &["host=a", "host=b"]
        )]),
        merged(&[&both])
    );
    assert_eq!(collapsed_from(&format!("{url}?host=a"), &[]), folded_a);

    // Filters work on the store as on a file: --comm, --no-inline, --weight samples.
    let a_str = a.to_str().unwrap();
    for filter in [
        &["--comm", "sh"][..],
        &["--no-inline"],
        &["--weight", "samples"],
    ] {
        let mut from = vec![
            "report",
            "--from",
            &url,
            "--label",
            "host=a",
            "-f",
            "collapsed",
        ];
        from.extend(filter);
        let mut file = vec!["report", "-i", a_str, "-f", "collapsed"];
        file.extend(filter);
        assert_eq!(stdout_ok(&from), stdout_ok(&file), "{filter:?}");
    }
    // --time counts from the selection's first sample.
    let whole = collapsed_from(&url, &["host=a"]);
    let from_time = stdout_ok(&[
        "report",
        "--from",
        &url,
        "--label",
        "host=a",
        "-f",
        "collapsed",
        "--time",
        "0..",
    ]);
    assert_eq!(from_time, whole);
    let none = stdout_ok(&[
        "report",
        "--from",
        &url,
        "--label",
        "host=a",
        "-f",
        "collapsed",
        "--time",
        "100000..",
    ]);
    assert_eq!(none, "");

    // Every other format is written from the store too.
    for (format, file) in [
        ("flamegraph", "g.svg"),
        ("firefox", "p.json.gz"),
        ("pprof", "p.pb.gz"),
        ("speedscope", "p.speedscope.json"),
        ("text", "p.txt"),
    ] {
        let out = dir.path().join(file);
        stdout_ok(&[
            "report",
            "--from",
            &url,
            "-f",
            format,
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(std::fs::metadata(&out).unwrap().len() > 100, "{format}");
    }
    let text_report = std::fs::read_to_string(dir.path().join("p.txt")).unwrap();
    assert!(text_report.contains("2 pushes"), "{text_report}");
    assert!(
        text_report.contains("Top 15 functions by self time"),
        "{text_report}"
    );

    // Host against fleet.
    let svg = dir.path().join("diff.svg");
    let out = stdout_ok(&[
        "diff",
        "--from",
        &url,
        "--from",
        &format!("{url}?host=a"),
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(out.contains("Differential flame graph"), "{out}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));

    // Each stack is stored once however many samples have it.
    let samples: u64 = server
        .query("SELECT count() FROM fleet.samples")
        .trim()
        .parse()
        .unwrap();
    let stacks: u64 = server
        .query("SELECT uniqExact(stack_hash) FROM fleet.stacks")
        .trim()
        .parse()
        .unwrap();
    assert!(
        stacks > 0 && stacks < samples,
        "{stacks} stacks for {samples} samples"
    );
}

#[test]
fn every_input_kind_round_trips_through_the_store() {
    let server = ClickHouse::start();
    let url = server.url("kinds");
    for (i, file) in [
        "node/perf.data",
        "java/perf-map.data",
        "mono/shapes-sample.mlpd",
        "mono/shapes-calls.mlpd",
        "xray/fdr-emulated.xray",
        "xray/basic-emulated.xray",
    ]
    .into_iter()
    .enumerate()
    {
        let path = fixture(file);
        let label = format!("file={i}");
        push_ok(&url, &[&label], &path);
        assert_eq!(
            collapsed_from(&url, &[&label]),
            collapsed_of(&path),
            "{file}"
        );
        // Full names are stored: --signatures shows them as `report -i --signatures` does.
        let from = stdout_ok(&[
            "report",
            "--from",
            &url,
            "--label",
            &label,
            "-f",
            "collapsed",
            "--signatures",
        ]);
        let file_out = stdout_ok(&[
            "report",
            "-i",
            path.to_str().unwrap(),
            "-f",
            "collapsed",
            "--signatures",
        ]);
        assert_eq!(from, file_out, "{file} --signatures");
    }
    // Pushes of different events are not added up.
    let out = jprof()
        .args(["report", "--from", &url, "-f", "collapsed"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out).contains("mixes pushes of different events"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_push_is_stored_once_through_an_outage_and_a_crash_in_the_middle() {
    let mut server = ClickHouse::start();
    let url = server.url("outage");
    let a = fixture("node/perf.data");
    let dir = tempfile::tempdir().unwrap();
    // A copy: the push must leave it untouched.
    let b = dir.path().join("b.data");
    std::fs::copy(fixture("java/perf-map.data"), &b).unwrap();
    let b_bytes = std::fs::read(&b).unwrap();
    let b_modified = std::fs::metadata(&b).unwrap().modified().unwrap();

    push_ok(&url, &["host=a"], &a);
    let (folded_a, folded_b) = (collapsed_of(&a), collapsed_of(&b));

    // Server down between pushes: a clear error, the file as it was.
    server.kill();
    let out = push(&url, &["host=b"], &[], &b);
    assert!(!out.status.success());
    let message = text(&out);
    assert!(message.contains("cannot reach ClickHouse at"), "{message}");
    assert!(
        message.contains(&format!("127.0.0.1:{}", server.port)),
        "{message}"
    );
    assert_eq!(std::fs::read(&b).unwrap(), b_bytes);
    assert_eq!(
        std::fs::metadata(&b).unwrap().modified().unwrap(),
        b_modified
    );

    // Server killed in the middle of a push of many small batches.
    server.restart();
    let child = jprof()
        .args([
            "push",
            "--to",
            &url,
            "--label",
            "host=b",
            "--batch-rows",
            "10",
        ])
        .arg(&b)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let unfinished = "SELECT count() FROM outage.samples WHERE push_id NOT IN \
                      (SELECT push_id FROM outage.pushes)";
    crate::live_support::wait_for(
        "the push's first batches",
        std::time::Duration::from_secs(60),
        || (server.query(unfinished).trim() != "0").then_some(()),
    );
    // Frozen between two batches, so the server dies in the middle of the push whatever the
    // machine's speed; it goes on once the server is gone.
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    assert_eq!(
        server.query("SELECT count() FROM outage.pushes").trim(),
        "1",
        "the push of b finished before it could be stopped"
    );
    server.kill();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("cannot reach ClickHouse"),
        "{}",
        text(&out)
    );

    // Back up: the half push is not shown; pushing again completes it without doubling.
    server.restart();
    let stored_before: u64 = server.query(unfinished).trim().parse().unwrap();
    assert!(stored_before > 0);
    assert_eq!(collapsed_from(&url, &[]), folded_a);
    let again = push_ok(&url, &["host=b"], &b);
    assert!(again.contains("completed an interrupted push"), "{again}");
    let third = push_ok(&url, &["host=b"], &b);
    assert!(third.contains("already in"), "{third}");
    push_ok(&url, &["host=a"], &a);

    assert_eq!(collapsed_from(&url, &["host=a"]), folded_a);
    assert_eq!(collapsed_from(&url, &["host=b"]), folded_b);
    assert_eq!(
        merged(&[&collapsed_from(&url, &[])]),
        merged(&[&folded_a, &folded_b])
    );
    let rows: u64 = server
        .query("SELECT count() FROM outage.samples")
        .trim()
        .parse()
        .unwrap();
    let pushes: u64 = server
        .query("SELECT sum(samples) FROM (SELECT any(samples) AS samples FROM outage.pushes GROUP BY push_id)")
        .trim()
        .parse()
        .unwrap();
    assert_eq!(rows, pushes, "samples stored once");
    assert_eq!(std::fs::read(&b).unwrap(), b_bytes);
}

#[test]
fn bad_addresses_and_an_empty_store_are_clear_errors() {
    let server = ClickHouse::start();
    let out = jprof()
        .args([
            "report",
            "--from",
            &server.url("nothing"),
            "-f",
            "collapsed",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("has no jprof tables"), "{}", text(&out));
    let out = jprof()
        .args(["push", "--to", "clickhouse://127.0.0.1/db", "x"])
        .output()
        .unwrap();
    assert!(text(&out).contains("no port"), "{}", text(&out));
    let out = jprof()
        .args([
            "report",
            "--from",
            &server.url("nothing"),
            "--search-dir",
            "/tmp",
        ])
        .output()
        .unwrap();
    assert!(
        text(&out).contains("--search-dir does not apply to --from"),
        "{}",
        text(&out)
    );
}

/// `record -a --rotate 1s --push URL` (whole host, as root) with `-o` in `dir`, stopped with
/// Ctrl-C once `enough()` says so.
fn record_windows(url: &str, dir: &Path, mut enough: impl FnMut() -> bool) -> Output {
    let child = jprof()
        .args([
            "record",
            "-a",
            "-F",
            "99",
            "--no-java-agent",
            "--rotate",
            "1s",
        ])
        .args(["--push", url, "--label", "host=cont", "-o"])
        .arg(dir.join("host.data"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::live_support::wait_for("two windows", std::time::Duration::from_secs(300), || {
        enough().then_some(())
    });
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    child.wait_with_output().unwrap()
}

/// The finished windows in `dir` (a window in progress has another name until it is done).
fn windows_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("host.data."))
                .is_some_and(|n| n.len() == 6 && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn continuous_mode_pushes_each_window_and_keeps_them_while_the_store_is_down() {
    let mut server = ClickHouse::start();
    let url = server.url("continuous");
    let dir = tempfile::tempdir().unwrap();
    let pushes = |server: &ClickHouse| -> u64 {
        let tables = server.query(
            "SELECT count() FROM system.tables WHERE database = 'continuous' AND name = 'pushes'",
        );
        if tables.trim() != "1" {
            return 0;
        }
        server
            .query("SELECT uniqExact(push_id) FROM continuous.pushes")
            .trim()
            .parse()
            .unwrap()
    };
    let out = record_windows(&url, dir.path(), || pushes(&server) >= 2);
    assert!(out.status.success(), "{}", text(&out));
    let pushed = pushes(&server);
    assert!(pushed >= 2, "{pushed} windows pushed: {}", text(&out));
    assert_eq!(
        windows_in(dir.path()),
        Vec::<PathBuf>::new(),
        "pushed windows are removed"
    );
    assert!(total(&collapsed_from(&url, &["host=cont"])) > 0);

    // The store down: the windows stay on disk, and `jprof push` sends them later.
    server.kill();
    let down = tempfile::tempdir().unwrap();
    let out = record_windows(&url, down.path(), || windows_in(down.path()).len() >= 2);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("kept for later"), "{}", text(&out));
    assert!(text(&out).contains("not pushed"), "{}", text(&out));
    let kept = windows_in(down.path());
    assert!(kept.len() >= 2, "{kept:?}: {}", text(&out));
    server.restart();
    for window in &kept {
        push_ok(&url, &["host=cont"], window);
    }
    assert_eq!(pushes(&server), pushed + kept.len() as u64);
}

/// Continuous mode in a directory another user can write (0777, run as root). That user's link
/// planted at a window's name before the run is replaced, never written through. While the
/// windows wait for the store, the user gives two windows' names to a link to root's private
/// recording and to a file of their own: neither is pushed nor removed; jprof's windows are.
#[test]
fn continuous_mode_never_pushes_removes_or_writes_through_another_users_names() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let (uid, gid) = crate::attacker_support::user();
    let mut server = ClickHouse::start();
    let url = server.url("planted");

    // Root's own recording, where only root can go: what the links lead to.
    let private = tempfile::tempdir().unwrap();
    let program = private.path().join("victimprog");
    std::fs::copy("/bin/sh", &program).unwrap();
    let victim = private.path().join("victim.data");
    let out = jprof()
        .args(["record", "-o"])
        .arg(&victim)
        .arg("--")
        .arg(&program)
        .args(["-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let victim_bytes = std::fs::read(&victim).unwrap();
    assert!(collapsed_of(&victim).contains("victimprog"));

    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let window = |i: u32| shared.path().join(format!("host.data.{i:06}"));
    let plant_link = |at: &Path| {
        std::os::unix::fs::symlink(&victim, at).unwrap();
        std::os::unix::fs::lchown(at, Some(uid), Some(gid)).unwrap();
    };
    plant_link(&window(2));
    server.kill();
    let mut planted = false;
    let out = record_windows(&url, shared.path(), || {
        let third = std::fs::symlink_metadata(window(3)).is_ok_and(|m| m.is_file());
        if third && !planted {
            // Windows 1 to 3 wait on disk (the store is down): their names change hands,
            // window 2's first (every push round stops at window 1 while it fails).
            std::fs::remove_file(window(2)).unwrap();
            std::fs::write(window(2), &victim_bytes).unwrap();
            std::os::unix::fs::chown(window(2), Some(uid), Some(gid)).unwrap();
            std::fs::remove_file(window(1)).unwrap();
            plant_link(&window(1));
            server.restart();
            planted = true;
        }
        planted
    });
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    for i in [1, 2] {
        assert!(
            said.contains(&format!(
                "{} is no longer the window jprof wrote",
                window(i).display()
            )),
            "{said}"
        );
    }
    // Nothing written through the links, nothing of theirs removed.
    assert_eq!(std::fs::read(&victim).unwrap(), victim_bytes);
    let link = std::fs::symlink_metadata(window(1)).unwrap();
    assert!(link.file_type().is_symlink() && link.uid() == uid);
    let theirs = std::fs::symlink_metadata(window(2)).unwrap();
    assert!(theirs.is_file() && theirs.uid() == uid);
    assert_eq!(std::fs::read(window(2)).unwrap(), victim_bytes);
    // jprof's windows (3 on) were pushed and removed; root's recording was not pushed.
    assert!(!window(3).exists(), "{said}");
    let stored = collapsed_from(&url, &["host=cont"]);
    assert!(total(&stored) > 0, "{said}");
    assert!(!stored.contains("victimprog"), "{stored}");
}
