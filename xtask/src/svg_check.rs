//! `cargo xtask svg-check [SVG]`: opens a flame graph in headless Chromium, the way a person
//! would, and fails unless the browser parsed it as SVG and its script ran without error.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

pub fn run(args: &[String]) -> Result<()> {
    let svg = match args.first() {
        Some(path) => PathBuf::from(path),
        None => crate::target_dir().join("demo/flamegraph.svg"),
    };
    let svg = svg
        .canonicalize()
        .with_context(|| format!("{} (run `cargo xtask demo` first)", svg.display()))?;
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .context("no Chromium found: `apt-get install chromium`")?;
    let profile = tempfile_dir()?;
    let out = Command::new(browser)
        .args(CHROMIUM_FLAGS)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--virtual-time-budget=2000", "--dump-dom"])
        .arg(format!("file://{}", svg.display()))
        .output()
        .with_context(|| format!("running {browser}"))?;
    let _ = std::fs::remove_dir_all(&profile);
    let dom = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("{browser} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    if dom.contains("parsererror") {
        bail!("{browser} could not parse {} as XML/SVG", svg.display());
    }
    // Every frame is a <g> with a <title> tooltip.
    let frames = dom.matches("<title>").count();
    if !dom.contains("<svg") || frames < 3 {
        bail!(
            "{browser} did not render {} as a flame graph ({frames} frames)",
            svg.display()
        );
    }
    println!(
        "{}: rendered by {browser} as SVG with {frames} frames",
        svg.display()
    );
    Ok(())
}

fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("jprof-svg-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
