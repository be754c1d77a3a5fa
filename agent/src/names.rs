//! Readable names from JVM type signatures: `Ldemo/matrix/Matrix;` + `multiply` becomes
//! `demo.matrix.Matrix.multiply`, and the source file gets its package path
//! (`demo/matrix/Matrix.java`), as Java tools print them.

/// `Lpkg/Class;` → `pkg.Class`; array and primitive signatures are kept as written.
pub fn class_name(signature: &str) -> String {
    let mut out = String::with_capacity(signature.len());
    push_class_name(&mut out, signature);
    out
}

/// Appends [`class_name`] of `signature` to `out`.
fn push_class_name(out: &mut String, signature: &str) {
    match signature
        .strip_prefix('L')
        .and_then(|s| s.strip_suffix(';'))
    {
        Some(internal) => push_dotted(out, internal),
        None => out.push_str(signature),
    }
}

/// Appends an internal name (`pkg/Class`) with dots for its slashes, a part at a time (not
/// a character at a time): this runs for every parameter of every method named.
fn push_dotted(out: &mut String, internal: &str) {
    let mut parts = internal.split('/');
    out.push_str(parts.next().unwrap_or_default());
    for part in parts {
        out.push('.');
        out.push_str(part);
    }
}

/// `pkg.Class.method`, without the signature.
pub fn method_name(class_signature: &str, method: &str) -> String {
    let mut out = class_name(class_signature);
    out.push('.');
    out.push_str(method);
    out
}

/// `pkg.Class.method(int, java.lang.String[])`: the name with its parameter types as Java
/// source writes them, so overloads stay apart (the report shortens names that need no
/// signature; docs/java.md). An unreadable descriptor leaves the short name.
pub fn method_name_with_signature(class_signature: &str, method: &str, descriptor: &str) -> String {
    let mut out = String::new();
    push_method_name(
        &mut out,
        &class_name(class_signature),
        method,
        Some(descriptor),
    );
    out
}

/// Appends `class.method`, with the parameter types of `descriptor` when it is given and
/// readable, to `out`; `class` is already readable ([`class_name`]). Written in one pass into
/// one string: the agent names every method of every class the VM prepares, on the thread that
/// loads it (docs/performance.md).
pub fn push_method_name(out: &mut String, class: &str, method: &str, descriptor: Option<&str>) {
    out.push_str(class);
    out.push('.');
    out.push_str(method);
    if let Some(descriptor) = descriptor {
        let short = out.len();
        if push_parameter_types(out, descriptor).is_none() {
            out.truncate(short);
        }
    }
}

/// Appends `(int, java.lang.String, double[])` for the method descriptor
/// `(ILjava/lang/String;[D)V`; `None` (with part of it appended) when it cannot be read.
fn push_parameter_types(out: &mut String, descriptor: &str) -> Option<()> {
    let mut rest = descriptor.strip_prefix('(')?.split_once(')')?.0;
    out.push('(');
    let mut first = true;
    while !rest.is_empty() {
        if !first {
            out.push_str(", ");
        }
        first = false;
        let dims = rest.len() - rest.trim_start_matches('[').len();
        rest = &rest[dims..];
        let primitive = match rest.as_bytes().first()? {
            b'B' => "byte",
            b'C' => "char",
            b'D' => "double",
            b'F' => "float",
            b'I' => "int",
            b'J' => "long",
            b'S' => "short",
            b'Z' => "boolean",
            b'L' => "",
            _ => return None,
        };
        if primitive.is_empty() {
            // `;` is ASCII, so its byte index is a character boundary.
            let end = rest.bytes().position(|b| b == b';')?;
            push_dotted(out, &rest[1..end]);
            rest = &rest[end + 1..];
        } else {
            out.push_str(primitive);
            rest = &rest[1..];
        }
        for _ in 0..dims {
            out.push_str("[]");
        }
    }
    out.push(')');
    Some(())
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
        assert_eq!(class_name("La//b/;"), "a..b.");
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
        assert_eq!(method_name_with_signature("LApp;", "x", "(I[)V"), "App.x");
        assert_eq!(method_name_with_signature("LApp;", "x", "(Lp/Q)V"), "App.x");
        // Appended after what `out` holds, the class given readable.
        let mut out = String::from("kept|");
        push_method_name(&mut out, "p.Q", "f", Some("([Lp/R$S;Z)V"));
        push_method_name(&mut out, "|p.Q", "g", None);
        push_method_name(&mut out, "|p.Q", "h", Some("(X)V"));
        assert_eq!(out, "kept|p.Q.f(p.R$S[], boolean)|p.Q.g|p.Q.h");
        // Non-ASCII names pass through.
        assert_eq!(
            method_name_with_signature("Lp/Grüße;", "f", "(Lp/Grüße;)V"),
            "p.Grüße.f(p.Grüße)"
        );
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
