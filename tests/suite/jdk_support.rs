//! Finding the JDKs a test runs, by looking rather than by hard-coded paths: every
//! `/usr/lib/jvm/*` (and `$JAVA_HOME`) with a `bin/java` and a `release` file naming its
//! version. `JPROF_TEST_JDKS=17=/path/to/java,25=/path/to/java` overrides the list.

#![allow(dead_code)]

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Tests that run a JVM share this lock; a test recording the whole host (`record -a`, which
/// loads jprof's agent into every JVM it meets) holds it alone, so it never takes another
/// test's JVM. Each test runs on its own thread: the guard is kept in the thread until the
/// test ends.
static JVMS: RwLock<()> = RwLock::new(());

enum Held {
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Alone(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
}

thread_local! {
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// Called by everything that hands a test a JDK: the test's JVMs are then safe from a
/// whole-host recording until it ends.
fn share_jvms() {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if held.is_none() {
            *held = Some(Held::Shared(JVMS.read().unwrap_or_else(|e| e.into_inner())));
        }
    });
}

/// For a test that records the whole host with jprof's agent: no other test's JVM runs
/// until this test ends.
pub fn whole_host_alone() {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if matches!(*held, Some(Held::Alone(_))) {
            return;
        }
        // A shared guard of this thread first, or the write would wait for itself.
        *held = None;
        *held = Some(Held::Alone(JVMS.write().unwrap_or_else(|e| e.into_inner())));
    });
}

/// The major version a JDK's `release` file names (`JAVA_VERSION="17.0.15"` → "17").
fn major_version(home: &Path) -> Option<String> {
    let release = std::fs::read_to_string(home.join("release")).ok()?;
    let version = release
        .lines()
        .find_map(|l| l.strip_prefix("JAVA_VERSION="))?
        .trim_matches('"');
    let major = version.split(['.', '-', '+']).next()?;
    // Java 8 and older said "1.8.0".
    Some(if major == "1" {
        version.split('.').nth(1)?.to_string()
    } else {
        major.to_string()
    })
}

/// Every JDK found: (major version, path of `bin/java`), by version then path; one per
/// version (the first in path order), symlinked homes resolved.
pub fn jdks() -> Vec<(String, PathBuf)> {
    share_jvms();
    if let Ok(list) = std::env::var("JPROF_TEST_JDKS") {
        if !list.is_empty() {
            return list
                .split(',')
                .filter_map(|e| e.split_once('='))
                .map(|(n, p)| (n.to_string(), PathBuf::from(p)))
                .collect();
        }
    }
    let mut homes: Vec<PathBuf> = std::fs::read_dir("/usr/lib/jvm")
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    homes.extend(std::env::var_os("JAVA_HOME").map(PathBuf::from));
    let mut found: Vec<(String, PathBuf)> = homes
        .into_iter()
        .filter_map(|h| std::fs::canonicalize(h).ok())
        .filter(|h| h.join("bin/java").is_file() && h.join("bin/javac").is_file())
        .filter_map(|h| Some((major_version(&h)?, h.join("bin/java"))))
        .collect();
    found.sort();
    found.dedup_by(|a, b| a.0 == b.0);
    found
}

/// The JDK of major version `major`; fails the test when it is not installed.
pub fn jdk(major: &str) -> PathBuf {
    jdks()
        .into_iter()
        .find(|(v, _)| v == major)
        .map(|(_, p)| p)
        .unwrap_or_else(|| {
            panic!("no JDK {major} in /usr/lib/jvm or JAVA_HOME (set JPROF_TEST_JDKS)")
        })
}

/// Some JDK's `bin/java` (the oldest found).
pub fn java() -> PathBuf {
    jdks()
        .into_iter()
        .map(|(_, p)| p)
        .next()
        .expect("a JDK in /usr/lib/jvm or JAVA_HOME")
}
