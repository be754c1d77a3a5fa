//! `jprof report --serve` in a real browser: the example program is recorded, jprof serves
//! its profile with the built-in speedscope, and headless Chromium, driven through the
//! DevTools protocol (tests/serve_support/cdp_driver.py, on a pipe), opens the printed URL
//! offline: the profile loads, the hot function is on the page with its time, and speedscope's
//! search (Ctrl-F, then typing) finds a function and filters the others out.

use crate::cli_support;
use cli_support::jprof;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// examples/hotspots, built and recorded for half a second.
fn recording(dir: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hotspots");
    for (file, frame_pointer) in [
        ("hotspots.cpp", "-fno-omit-frame-pointer"),
        ("leaf.cpp", "-fomit-frame-pointer"),
    ] {
        run(Command::new("g++")
            .args(["-O2", "-g", frame_pointer, "-c"])
            .arg(src.join(file))
            .arg("-o")
            .arg(dir.join(file).with_extension("o")));
    }
    let binary = dir.join("hotspots");
    run(Command::new("g++")
        .arg(dir.join("hotspots.o"))
        .arg(dir.join("leaf.o"))
        .arg("-o")
        .arg(&binary));
    let data = dir.join("jprof.data");
    run(jprof()
        .args(["record", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&binary)
        .arg("0.5"));
    data
}

/// The reply to `GET target` from the server at `host`.
fn get(host: &str, target: &str) -> String {
    let mut stream = TcpStream::connect(host).unwrap();
    write!(stream, "GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n").unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).unwrap();
    String::from_utf8_lossy(&reply).into_owned()
}

#[test]
fn serve_shows_the_profile_in_speedscope_and_search_works() {
    let dir = tempfile::tempdir().unwrap();
    let data = recording(dir.path());
    let mut server = jprof()
        .args(["report", "--serve", "-i"])
        .arg(&data)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The URL is printed once the server listens.
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let url = lines
        .by_ref()
        .map(|l| l.unwrap())
        .find_map(|l| {
            l.trim()
                .strip_prefix("http://")
                .map(|u| format!("http://{u}"))
        })
        .expect("the server printed no URL");
    let host = url["http://".len()..]
        .split('/')
        .next()
        .unwrap()
        .to_string();
    assert!(host.starts_with("127.0.0.1:"), "{url}");

    // Without the token there is nothing to see.
    assert!(get(&host, "/").starts_with("HTTP/1.1 404"));
    assert!(get(&host, "/index.html").starts_with("HTTP/1.1 404"));

    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve_support/cdp_driver.py");
    let out = Command::new("python3")
        .arg(&driver)
        .arg("chromium")
        .arg(dir.path().join("chromium-profile"))
        // speedscope's own parameter: open the sandwich view (a table of functions).
        .arg(format!("{url}&view=sandwich"))
        .args([
            "hot::compute_a",
            "compute_b",
            "hot::compute_b",
            "hot::compute_a",
        ])
        .output()
        .expect("python3 runs the DevTools driver");
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "the browser check failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let pages: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let loaded = pages["loaded"].as_str().unwrap();
    // The title, the hot functions with their times, short names.
    assert!(loaded.contains("jprof: "), "{loaded}");
    let row = |page: &str, name: &str| -> Option<String> {
        let lines: Vec<&str> = page.lines().collect();
        let at = lines.iter().position(|l| l.trim() == name)?;
        Some(lines[at.saturating_sub(2)..at].join(" "))
    };
    let compute_a = row(loaded, "hot::compute_a").expect("hot::compute_a row");
    assert!(compute_a.contains("ms ("), "{compute_a}");
    assert!(row(loaded, "hot::compute_b").is_some(), "{loaded}");
    let searched = pages["searched"].as_str().unwrap();
    assert!(row(searched, "hot::compute_b").is_some(), "{searched}");
    assert!(row(searched, "hot::compute_a").is_none(), "{searched}");
}
