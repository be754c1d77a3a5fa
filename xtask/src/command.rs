//! Running programs: cargo, a command shown as a shell would show it, run with its failure
//! named, whether a program is installed.

use std::ffi::OsStr;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The cargo that runs us, so the same toolchain builds jprof.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Shows a command the way a shell would, for progress and error messages.
pub fn describe(cmd: &Command) -> String {
    let mut words = vec![cmd.get_program().to_string_lossy().into_owned()];
    words.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    words.join(" ")
}

/// Runs a command with inherited stdio; fails with the command line if it fails.
pub fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("$ {}", describe(cmd));
    let status = cmd
        .status()
        .with_context(|| format!("cannot start `{}`", describe(cmd)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", describe(cmd));
    }
    Ok(())
}

/// Whether `program` can be started (found on PATH and runs `--version`).
pub fn available(program: impl AsRef<OsStr>) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}
