//! Readable names from JVM type signatures: `Ldemo/matrix/Matrix;` + `multiply` becomes
//! `demo.matrix.Matrix.multiply`, and the source file gets its package path
//! (`demo/matrix/Matrix.java`), as Java tools print them.

/// `Lpkg/Class;` → `pkg.Class`; array and primitive signatures are kept as written.
pub fn class_name(signature: &str) -> String {
    match signature
        .strip_prefix('L')
        .and_then(|s| s.strip_suffix(';'))
    {
        Some(internal) => internal.replace('/', "."),
        None => signature.to_string(),
    }
}

/// `pkg.Class.method`. The signature is left out: overloads share a name, as in most profilers.
pub fn method_name(class_signature: &str, method: &str) -> String {
    format!("{}.{method}", class_name(class_signature))
}

/// The source path a debugger would look for: the package directory plus the file name.
pub fn source_path(class_signature: &str, source_file: &str) -> String {
    let internal = class_signature
        .strip_prefix('L')
        .and_then(|s| s.strip_suffix(';'))
        .unwrap_or("");
    match internal.rsplit_once('/') {
        Some((package, _)) => format!("{package}/{source_file}"),
        None => source_file.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_names() {
        assert_eq!(
            method_name("Ldemo/matrix/Matrix;", "multiply"),
            "demo.matrix.Matrix.multiply"
        );
        assert_eq!(method_name("LApp;", "<init>"), "App.<init>");
        assert_eq!(
            method_name("Ldemo/App$$Lambda+0x0000000801001234;", "run"),
            "demo.App$$Lambda+0x0000000801001234.run"
        );
        assert_eq!(class_name("[I"), "[I");
    }

    #[test]
    fn source_paths() {
        assert_eq!(
            source_path("Ldemo/matrix/Matrix;", "Matrix.java"),
            "demo/matrix/Matrix.java"
        );
        assert_eq!(source_path("LApp;", "App.java"), "App.java");
    }
}
