//! A recorder that cannot write (a full disk) stops the recording at once — the target is not
//! left running for nothing — and says where the partial recording is (issue 24).

use crate::cli_support;
use cli_support::jprof;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A 64 KiB tmpfs, unmounted when dropped.
struct SmallFs(tempfile::TempDir);

impl SmallFs {
    fn mount() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mounting a small tmpfs needs root (CI runs the tests as root)"
        );
        Self(dir)
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_disk_stops_the_target_and_names_the_partial_file() {
    let fs = SmallFs::mount();
    let data = fs.path().join("full.data");
    let marker = tempfile::tempdir().unwrap();
    let done = marker.path().join("target-finished");
    let started = Instant::now();
    // Half a minute of work unless stopped; it leaves a mark if it ran to the end.
    let out = jprof()
        .args(["record", "-o"])
        .arg(&data)
        .args([
            "--",
            "sh",
            "-c",
            &format!(
                "i=0; while [ $i -lt 10000000 ]; do i=$((i+1)); done; touch {}",
                done.display()
            ),
        ])
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(
        err.contains("the recording could not be written (SIGTERM sent to the target's processes)"),
        "{err}"
    );
    assert!(
        !done.exists(),
        "the target ran on after the recorder failed"
    );
    assert!(took < Duration::from_secs(8), "stopped only after {took:?}");
    let partials = jprof::foreign_file::leftover_partials(&data);
    assert_eq!(partials.len(), 1, "{err}");
    let partial = &partials[0];
    assert!(
        err.contains(&format!("jprof report -i {}", partial.display())),
        "{err}"
    );
    // What was written is readable.
    let report = jprof()
        .args(["report", "-f", "text", "-o", "-", "-i"])
        .arg(partial)
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert!(String::from_utf8_lossy(&report.stdout).contains("truncated"));
}
