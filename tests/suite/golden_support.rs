//! The golden-file check every golden test uses: tests/golden/NAME holds the expected output;
//! `JPROF_BLESS=1` rewrites it.

use std::path::Path;

/// Compares `actual` with tests/golden/NAME, or rewrites it under `JPROF_BLESS=1`.
pub fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("JPROF_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with JPROF_BLESS=1 to create it)",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the output first at line {}:\n expected: {:?}\n   actual: {:?}\n\
             (JPROF_BLESS=1 rewrites the golden file if the change is intended)",
            path.display(),
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first)
        );
    }
}
