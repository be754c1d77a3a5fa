//! The workspace: where it is, where cargo builds, and the two programs tasks build from it
//! (jprof itself and the example).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::command::{available, cargo, run};

/// The workspace root (xtask lives one level below it).
pub fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Cargo's target directory, honouring `CARGO_TARGET_DIR`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root().join(dir),
        None => root().join("target"),
    }
}

/// Builds jprof in release mode; returns the binary's path.
pub fn build_jprof() -> Result<PathBuf> {
    run(cargo().current_dir(root()).args([
        "build",
        "--release",
        "--package",
        "jprof",
        "--bin",
        "jprof",
    ]))?;
    // The JVMTI agent jprof gives a launched JVM is found next to jprof: without it a Java
    // workload would be recorded with its compiled code unnamed.
    run(cargo()
        .current_dir(root())
        .args(["build", "--release", "--package", "jprof-agent"]))?;
    Ok(target_dir().join("release/jprof"))
}

/// Compiles examples/hotspots: the frameless leaf on its own with -fomit-frame-pointer, the
/// rest with frame pointers (see examples/README.md). Returns the binary's path.
pub fn build_example() -> Result<PathBuf> {
    if !available("g++") {
        bail!("g++ is needed to build the example: apt-get install g++");
    }
    let src = root().join("examples/hotspots");
    let out = target_dir().join("examples");
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let compile = |file: &str, frame_pointer: &str, object: &str| -> Result<PathBuf> {
        let object = out.join(object);
        run(Command::new("g++")
            .args(["-O2", "-g", frame_pointer, "-c"])
            .arg(src.join(file))
            .arg("-o")
            .arg(&object))?;
        Ok(object)
    };
    let main_object = compile("hotspots.cpp", "-fno-omit-frame-pointer", "hotspots.o")?;
    let leaf_object = compile("leaf.cpp", "-fomit-frame-pointer", "leaf.o")?;
    let binary = out.join("hotspots");
    run(Command::new("g++")
        .arg(main_object)
        .arg(leaf_object)
        .arg("-o")
        .arg(&binary))?;
    eprintln!("built {}", binary.display());
    Ok(binary)
}
