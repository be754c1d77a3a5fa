//! Symbol demangling, shared by every layer that names code (binaries' symbol tables, XRay's
//! instrumentation map): a leaf module, so no layer reaches up for it.

/// Demangles Rust (legacy and v0, without the hash) and C++ (with parameter lists, as
/// `perf report` shows them); other names are returned as they are.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(s) = sym.demangle() {
                return s;
            }
        }
    }
    name.to_string()
}
