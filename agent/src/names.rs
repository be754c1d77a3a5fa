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

/// `pkg.Class.method`, without the signature.
pub fn method_name(class_signature: &str, method: &str) -> String {
    format!("{}.{method}", class_name(class_signature))
}

/// `pkg.Class.method(int, java.lang.String[])`: the name with its parameter types as Java
/// source writes them, so overloads stay apart (the report shortens names that need no
/// signature; docs/java.md). An unreadable descriptor leaves the short name.
pub fn method_name_with_signature(class_signature: &str, method: &str, descriptor: &str) -> String {
    match parameter_types(descriptor) {
        Some(types) => format!(
            "{}({})",
            method_name(class_signature, method),
            types.join(", ")
        ),
        None => method_name(class_signature, method),
    }
}

/// The parameter types of a method descriptor `(ILjava/lang/String;[D)V`: `int`,
/// `java.lang.String`, `double[]`.
fn parameter_types(descriptor: &str) -> Option<Vec<String>> {
    let params = descriptor.strip_prefix('(')?.split_once(')')?.0;
    let mut rest = params;
    let mut types = Vec::new();
    while !rest.is_empty() {
        let dims = rest.len() - rest.trim_start_matches('[').len();
        rest = &rest[dims..];
        let (base, len) = match rest.as_bytes().first()? {
            b'B' => ("byte".to_string(), 1),
            b'C' => ("char".to_string(), 1),
            b'D' => ("double".to_string(), 1),
            b'F' => ("float".to_string(), 1),
            b'I' => ("int".to_string(), 1),
            b'J' => ("long".to_string(), 1),
            b'S' => ("short".to_string(), 1),
            b'Z' => ("boolean".to_string(), 1),
            b'L' => {
                let end = rest.find(';')?;
                (rest[1..end].replace('/', "."), end + 1)
            }
            _ => return None,
        };
        rest = &rest[len..];
        types.push(format!("{base}{}", "[]".repeat(dims)));
    }
    Some(types)
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
    fn names_with_signatures() {
        assert_eq!(
            method_name_with_signature("LApp;", "mix", "(ILjava/lang/String;[[D)J"),
            "App.mix(int, java.lang.String, double[][])"
        );
        assert_eq!(
            method_name_with_signature("Lp/Q;", "run", "()V"),
            "p.Q.run()"
        );
        // Unreadable: the short name.
        assert_eq!(method_name_with_signature("LApp;", "x", "(Q)V"), "App.x");
        assert_eq!(method_name_with_signature("LApp;", "x", "I"), "App.x");
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
