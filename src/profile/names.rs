//! Frame names as people read them. By default every output shows a short form:
//!
//! - C++ (and Rust): scope and function name, without parameter list, return type, `const`
//!   or `[clone …]` suffixes, each template argument list elided to `<…>` the way perf and
//!   samply show them (`std::vector<…>::_M_realloc_insert`). Overloads and instantiations of
//!   one function then share a frame, as in perf.
//! - JavaScript (V8, `JS:*fn /path/to/file.js:12:5`): `fn file.js:12`; the tier marker goes
//!   (the text report and the viewer formats keep tiers apart). Python (`py::fn:/path/x.py`):
//!   `fn x.py`. Mono (`Ns.Class:Method (int,string)`): `Ns.Class:Method`.
//! - Java: see `signatures.rs`.
//!
//! A JS, Python or Mono short form never merges two different functions: where two would
//! look the same, both get the next longer form (the column, then the full path, then the
//! full name). `--signatures` keeps every name as the runtime or demangler wrote it. The full
//! form of every shortened name stays in [`Profile::full_names`] for tooltips and the viewer
//! formats.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::profile::{FrameKind, Profile};

/// Shortens every frame name of `profile` (see the module doc), Java's included. JS and Python
/// frames without a source file get the one their name holds (the viewer formats show it).
pub fn shorten(profile: &mut Profile) {
    profile.locate_frames(|frame| {
        if !matches!(frame.kind, FrameKind::Jit | FrameKind::Inlined) {
            return None;
        }
        if let Some(js) = v8_name(&frame.name) {
            return (!js.path.is_empty()).then(|| (js.path.to_string(), Some(js.line)));
        }
        let (_, path) = frame.name.strip_prefix("py::")?.split_once(':')?;
        (!path.is_empty()).then(|| (path.to_string(), None))
    });
    let mut ambiguous: Vec<Candidate> = Vec::new();
    let mut direct: HashMap<String, String> = HashMap::new();
    for frame in profile.frames() {
        match frame.kind {
            FrameKind::Native | FrameKind::Inlined
                if !super::signatures::is_java_signature(&frame.name) =>
            {
                if let Some(short) = short_cpp(&frame.name) {
                    direct.insert(frame.name.clone(), short);
                }
            }
            FrameKind::Jit | FrameKind::Inlined | FrameKind::Interpreter => {
                if let Some(candidate) = runtime_candidate(&frame.name) {
                    ambiguous.push(candidate);
                }
            }
            _ => {}
        }
    }
    direct.extend(unambiguous(ambiguous));
    profile.rename_frames(|frame| {
        matches!(
            frame.kind,
            FrameKind::Native | FrameKind::Inlined | FrameKind::Jit | FrameKind::Interpreter
        )
        .then(|| direct.get(&frame.name).cloned())
        .flatten()
    });
    super::signatures::shorten(profile);
}

/// A runtime's name with its possible short forms.
#[derive(Debug)]
struct Candidate {
    /// The name as written.
    full: String,
    /// What tells functions apart: two names with the same identity are one function (a JS
    /// function at two tiers).
    identity: String,
    /// Shortest first; the last is as unique as the identity.
    forms: Vec<String>,
}

/// The shortest form of each name that no other function shares, by full name.
fn unambiguous(candidates: Vec<Candidate>) -> HashMap<String, String> {
    fn assign<'a>(group: Vec<&'a Candidate>, level: usize, out: &mut HashMap<&'a str, String>) {
        let mut by_form: BTreeMap<&str, Vec<&Candidate>> = BTreeMap::new();
        for c in group {
            let form = &c.forms[level.min(c.forms.len() - 1)];
            by_form.entry(form).or_default().push(c);
        }
        for (form, members) in by_form {
            let identities: BTreeSet<&str> = members.iter().map(|c| c.identity.as_str()).collect();
            let deepest = members.iter().all(|c| level + 1 >= c.forms.len());
            if identities.len() == 1 || deepest {
                for c in members {
                    let chosen = if identities.len() == 1 {
                        form.to_string()
                    } else {
                        c.full.clone()
                    };
                    out.insert(&c.full, chosen);
                }
            } else {
                assign(members, level + 1, out);
            }
        }
    }
    let mut chosen: HashMap<&str, String> = HashMap::new();
    assign(candidates.iter().collect(), 0, &mut chosen);
    // A form chosen at one level may equal another function's form at another level: those
    // keep their full names.
    let mut owners: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    let identity: HashMap<&str, &str> = candidates
        .iter()
        .map(|c| (c.full.as_str(), c.identity.as_str()))
        .collect();
    for (full, short) in &chosen {
        owners.entry(short).or_default().insert(identity[full]);
    }
    chosen
        .iter()
        .filter(|(full, short)| short.as_str() != **full)
        .map(|(full, short)| {
            let shared = owners[short.as_str()].len() > 1;
            let name = if shared {
                full.to_string()
            } else {
                short.clone()
            };
            (full.to_string(), name)
        })
        .filter(|(full, short)| full != short)
        .collect()
}

/// The short forms of a JS, Python or Mono name; None for any other name.
fn runtime_candidate(name: &str) -> Option<Candidate> {
    if let Some(js) = v8_name(name) {
        let function = if js.function.is_empty() {
            "(anonymous)"
        } else {
            js.function
        };
        let base = base_name(js.path);
        let col = js.column.map(|c| format!(":{c}")).unwrap_or_default();
        return Some(Candidate {
            full: name.to_string(),
            identity: format!("{function} {}:{}{col}", js.path, js.line),
            forms: vec![
                format!("{function} {base}:{}", js.line),
                format!("{function} {base}:{}{col}", js.line),
                format!("{function} {}:{}{col}", js.path, js.line),
                name.to_string(),
            ],
        });
    }
    if let Some(rest) = name.strip_prefix("py::") {
        // Python's perf trampoline: `py::qualname:/path/file.py`.
        let (function, path) = rest.split_once(':')?;
        return Some(Candidate {
            full: name.to_string(),
            identity: name.to_string(),
            forms: vec![
                format!("{function} {}", base_name(path)),
                format!("{function} {path}"),
                name.to_string(),
            ],
        });
    }
    // Mono: `Ns.Class:Method (params)`, perhaps after `(wrapper kind) `.
    let head = name.strip_suffix(')')?;
    let (method, _params) = head.rsplit_once(" (")?;
    let qualified = method.rsplit(' ').next().unwrap_or(method);
    if !qualified.contains(':') || qualified.contains("::") {
        return None;
    }
    Some(Candidate {
        full: name.to_string(),
        identity: name.to_string(),
        forms: vec![method.to_string(), name.to_string()],
    })
}

/// The parts of a V8 code name.
#[derive(Debug, PartialEq, Eq)]
struct V8Name<'a> {
    function: &'a str,
    path: &'a str,
    line: u32,
    column: Option<u32>,
}

/// What V8 writes between a code name's tag and the function's name: `o` for code compiled
/// for on-stack replacement, the tier marker (`~` Ignition, `^` Sparkplug, `+` Maglev, `*`
/// Turbofan) and, in newer V8 (Deno 2), `'` after an optimizing tier's marker for code
/// specialized to one closure's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V8Marker {
    /// `~`, `^`, `+` or `*`; none for code V8 will not optimize.
    pub tier: Option<char>,
    /// `o`: compiled for on-stack replacement.
    pub osr: bool,
    /// `'`: specialized to one closure's context.
    pub context_specialized: bool,
}

/// A V8 code name's marker and what follows it (the function and its location): `JS:*fn
/// /path/file.js:12:5`, `JS:o*'fn …`, older V8's `LazyCompile:`, and the `Script:` and
/// `Eval:` of a script's top level.
pub fn v8_marker(name: &str) -> Option<(V8Marker, &str)> {
    let rest = ["JS:", "LazyCompile:", "Script:", "Eval:"]
        .iter()
        .find_map(|tag| name.strip_prefix(tag))?;
    let is_tier = |c: char| matches!(c, '~' | '^' | '+' | '*');
    // `o` is OSR only before a tier marker: `JS:open /a.js:1:1` is a function named `open`.
    let osr = rest.starts_with('o') && rest[1..].starts_with(is_tier);
    let rest = if osr { &rest[1..] } else { rest };
    let tier = rest.chars().next().filter(|&c| is_tier(c));
    let rest = if tier.is_some() { &rest[1..] } else { rest };
    let specialized = tier.is_some() && rest.starts_with('\'');
    let rest = if specialized { &rest[1..] } else { rest };
    Some((
        V8Marker {
            tier,
            osr,
            context_specialized: specialized,
        },
        rest,
    ))
}

/// `JS:*fn /path/file.js:12:5` (any name [`v8_marker`] reads).
fn v8_name(name: &str) -> Option<V8Name<'_>> {
    let (_, rest) = v8_marker(name)?;
    let (rest, last) = rest.rsplit_once(':')?;
    let last: u32 = last.parse().ok()?;
    let (rest, line, column) = match rest.rsplit_once(':') {
        Some((r, l)) if l.parse::<u32>().is_ok() => (r, l.parse().ok()?, Some(last)),
        _ => (rest, last, None),
    };
    // The location follows the first space that starts a path or a URL; a name without one
    // has its location after the last space.
    let split = ["/", "node:", "file:", "http:", "https:", "<"]
        .iter()
        .filter_map(|p| rest.find(&format!(" {p}")))
        .min()
        .or_else(|| rest.rfind(' '))?;
    Some(V8Name {
        function: &rest[..split],
        path: &rest[split + 1..],
        line,
        column,
    })
}

/// For a label that names a function then where it is (`main tokens.js:77`, or with
/// `--signatures` `JS:*main /app/tokens.js:77:14`): the length of the part up to the end of the
/// function name, in UTF-16 units as the flame graph's script counts. `written` is the name as
/// the runtime wrote it, when the label is its short form.
pub fn function_len(label: &str, written: Option<&str>) -> Option<usize> {
    let utf16 = |s: &str| s.encode_utf16().count();
    if let Some(js) = v8_name(label) {
        let end = js.function.as_ptr() as usize - label.as_ptr() as usize + js.function.len();
        return Some(utf16(&label[..end]));
    }
    if let Some(rest) = label.strip_prefix("py::") {
        let (function, _) = rest.split_once(':')?;
        return Some(utf16("py::") + utf16(function));
    }
    let written = written?;
    if let Some(js) = v8_name(written) {
        let function = if js.function.is_empty() {
            "(anonymous)"
        } else {
            js.function
        };
        return label.starts_with(function).then(|| utf16(function));
    }
    let (function, _) = written.strip_prefix("py::")?.split_once(':')?;
    label.starts_with(function).then(|| utf16(function))
}

/// The file name of a path or URL (`node:internal/main/run_main_module` → `run_main_module`).
fn base_name(path: &str) -> &str {
    match path.rsplit('/').next() {
        Some(base) if !base.is_empty() => base,
        _ => path,
    }
}

/// Demangler prefixes of special symbols, kept in front of the short name they apply to.
const SPECIAL_PREFIXES: &[&str] = &[
    "non-virtual thunk to ",
    "virtual thunk to ",
    "covariant return thunk to ",
    "construction vtable for ",
    "vtable for ",
    "typeinfo name for ",
    "typeinfo for ",
    "VTT for ",
    "guard variable for ",
    "TLS init function for ",
    "TLS wrapper function for ",
    "transaction clone for ",
];

/// The short form of a demangled C++ (or Rust) name, or None when it is already short.
pub(crate) fn short_cpp(name: &str) -> Option<String> {
    let (prefix, body) = SPECIAL_PREFIXES
        .iter()
        .find_map(|p| name.strip_prefix(p).map(|rest| (*p, rest)))
        .unwrap_or(("", name));
    let body = without_signature(body.trim());
    let body = without_return_type(body);
    let short = format!("{prefix}{}", elide(body));
    (!short.is_empty() && short != name).then_some(short)
}

/// Drops `[clone .cold]`, `const`, `&&`, `noexcept` and the parameter list at the end.
fn without_signature(mut s: &str) -> &str {
    loop {
        let before = s;
        for suffix in [" const", " volatile", " &&", " &", " noexcept"] {
            s = s.strip_suffix(suffix).unwrap_or(s);
        }
        if s.ends_with(']') {
            if let Some(i) = s.rfind(" [clone ") {
                s = &s[..i];
            }
        }
        if s == before {
            break;
        }
    }
    if !s.ends_with(')') {
        return s;
    }
    let Some(open) = matching_open(s) else {
        return s;
    };
    let head = &s[..open];
    // `(anonymous namespace)` or a name that is all parentheses is not a parameter list.
    if head.is_empty() || s[open..].starts_with("(anonymous namespace)") {
        return s;
    }
    head
}

/// The index of the `(` that the final `)` of `s` closes.
fn matching_open(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether the text at `i` is the keyword `operator` (not part of a longer identifier).
fn operator_at(s: &str, i: usize) -> bool {
    s[i..].starts_with("operator")
        && !s[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        && !s[i + 8..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// Drops a return type: everything up to the last space outside brackets before the name
/// (an operator's own spaces, as in `operator new`, belong to the name).
fn without_return_type(s: &str) -> &str {
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' | ')' | ']' | '}' => depth -= 1,
            ' ' if depth == 0 => start = i + 1,
            'o' if depth == 0 && operator_at(s, i) => break,
            _ => {}
        }
    }
    &s[start..]
}

/// Characters an operator's symbol is made of (`operator<<=`, `operator->*`).
fn is_operator_char(c: char) -> bool {
    "<>=!+-*/%^&|~,".contains(c)
}

/// The index just past the bracket group that opens at `open` (`<`, `(`, `[` or `{`).
fn group_end(s: &str, open: usize) -> usize {
    let mut depth = 0i32;
    for (i, c) in s[open..].char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' | ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + i + 1;
                }
            }
            _ => {}
        }
    }
    s.len()
}

/// Elides template arguments (`<…>`), the parameter lists of enclosing functions
/// (`f(int)::{lambda(int)#1}` → `f::{lambda#1}`) and `[abi:cxx11]` tags.
fn elide(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let c = s[i..].chars().next().unwrap_or(' ');
        if c == 'o' && operator_at(s, i) {
            out.push_str("operator");
            i += 8;
            let rest = &s[i..];
            if rest.starts_with("()") || rest.starts_with("[]") {
                out.push_str(&rest[..2]);
                i += 2;
            } else {
                let symbol: usize = rest
                    .chars()
                    .take_while(|&c| is_operator_char(c))
                    .map(char::len_utf8)
                    .sum();
                out.push_str(&rest[..symbol]);
                i += symbol;
                // `operator<< <char>`: the space before an operator's template arguments.
                if symbol > 0 && s[i..].starts_with(" <") {
                    i += 1;
                }
            }
            continue;
        }
        match c {
            '<' => {
                let end = group_end(s, i);
                let component_start = i == 0 || out.ends_with("::");
                if out.ends_with('.') {
                    // Java's `Foo.<init>`: a method name, not template arguments.
                    out.push_str(&s[i..end]);
                } else if component_start {
                    // Rust's `<T as Trait>::f`: the type is the name's scope, shortened too.
                    out.push('<');
                    out.push_str(&elide(&s[i + 1..end.saturating_sub(1).max(i + 1)]));
                    out.push('>');
                } else {
                    out.push_str("<…>");
                }
                i = end;
            }
            '(' if s[i..].starts_with("(anonymous namespace)") => {
                out.push_str("(anonymous namespace)");
                i += "(anonymous namespace)".len();
            }
            '(' => {
                let end = group_end(s, i);
                // An enclosing function's parameters: left out. Any other parenthesis stays.
                let after_name = out
                    .chars()
                    .next_back()
                    .is_some_and(|p| p.is_alphanumeric() || matches!(p, '_' | '>' | '…' | '$'));
                if !after_name {
                    out.push_str(&s[i..end]);
                }
                i = end;
            }
            '{' => {
                let end = group_end(s, i);
                out.push('{');
                out.push_str(&elide(&s[i + 1..end.saturating_sub(1).max(i + 1)]));
                out.push('}');
                i = end;
            }
            '[' if s[i..].starts_with("[abi:") => {
                i = group_end(s, i);
            }
            _ => {
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short(name: &str) -> String {
        short_cpp(name).unwrap_or_else(|| name.to_string())
    }

    #[test]
    fn cpp_names_lose_parameters_return_types_and_template_arguments() {
        let cases = [
            (
                "v8::internal::(anonymous namespace)::Invoke(v8::internal::Isolate*, \
                 v8::internal::(anonymous namespace)::InvokeParams const&)",
                "v8::internal::(anonymous namespace)::Invoke",
            ),
            (
                "Compiler::compile_method(ciEnv*, ciMethod*, int, bool, DirectiveSet*)",
                "Compiler::compile_method",
            ),
            (
                "void std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>\
                 (__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, \
                 int const&)",
                "std::vector<…>::_M_realloc_insert<…>",
            ),
            ("hot::compute_a(unsigned long)", "hot::compute_a"),
            ("Foo::bar() const", "Foo::bar"),
            ("Foo::operator()(int) const", "Foo::operator()"),
            ("operator new(unsigned long)", "operator new"),
            ("operator delete[](void*)", "operator delete[]"),
            (
                "std::basic_ostream<char, std::char_traits<char> >& std::operator<< \
                 <std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, \
                 char const*)",
                "std::operator<<<…>",
            ),
            ("bool operator<(A const&, A const&)", "operator<"),
            (
                "run(int)::{lambda(int)#1}::operator()(int) const",
                "run::{lambda#1}::operator()",
            ),
            ("foo(int) [clone .cold]", "foo"),
            (
                "std::__cxx11::basic_string<char>::_M_create[abi:cxx11](unsigned long&)",
                "std::__cxx11::basic_string<…>::_M_create",
            ),
            (
                "non-virtual thunk to Foo::bar(int)",
                "non-virtual thunk to Foo::bar",
            ),
            (
                "core::ptr::drop_in_place<alloc::vec::Vec<u8>>",
                "core::ptr::drop_in_place<…>",
            ),
            (
                "<alloc::vec::Vec<T> as core::ops::drop::Drop>::drop",
                "<alloc::vec::Vec<…> as core::ops::drop::Drop>::drop",
            ),
            (
                "std::rt::lang_start::{{closure}}",
                "std::rt::lang_start::{{closure}}",
            ),
        ];
        for (full, expected) in cases {
            assert_eq!(short(full), expected, "{full}");
        }
    }

    #[test]
    fn c_names_and_odd_names_are_left_alone() {
        for name in [
            "main",
            "ec_group_new_from_data.isra.0",
            "(garbage collector)",
            "[unknown] (libx.so+0x10)",
            "Builtins_ArrayPrototypePush",
            "app.Foo.<init>",
            "java.lang.Object.<clinit>",
            "",
        ] {
            assert_eq!(short_cpp(name), None, "{name}");
        }
    }

    #[test]
    fn v8_names_are_parsed() {
        assert_eq!(
            v8_name("JS:*scoreToken /tmp/x y/tokens.js:42:20"),
            Some(V8Name {
                function: "scoreToken",
                path: "/tmp/x y/tokens.js",
                line: 42,
                column: Some(20)
            })
        );
        assert_eq!(
            v8_name("JS:~ node:internal/main/run_main_module:1:1").map(|n| (n.function, n.path)),
            Some(("", "node:internal/main/run_main_module"))
        );
        assert_eq!(
            v8_name("LazyCompile:fib /a.js:3").map(|n| (n.function, n.line, n.column)),
            Some(("fib", 3, None))
        );
        // Newer V8 (Deno 2): `o` before the tier for on-stack-replacement code, `'` after an
        // optimizing tier for context-specialized code, `Script:`/`Eval:` for a top level.
        for name in [
            "JS:*'fib file:///app/hot.ts:1:13",
            "JS:+'fib file:///app/hot.ts:1:13",
            "JS:o*fib file:///app/hot.ts:1:13",
            "JS:o+'fib file:///app/hot.ts:1:13",
        ] {
            assert_eq!(
                v8_name(name).map(|n| (n.function, n.path, n.line)),
                Some(("fib", "file:///app/hot.ts", 1)),
                "{name}"
            );
        }
        assert_eq!(
            v8_name("Script:~ file:///app/hot.ts:1:1").map(|n| (n.function, n.path)),
            Some(("", "file:///app/hot.ts"))
        );
        assert_eq!(
            v8_name("JS:o+ file:///app/hot.ts:1:1").map(|n| (n.function, n.path)),
            Some(("", "file:///app/hot.ts"))
        );
        // Functions whose names start like a marker keep them.
        assert_eq!(
            v8_name("JS:~open /a.js:1:1").map(|n| n.function),
            Some("open")
        );
        assert_eq!(
            v8_name("JS:open /a.js:1:1").map(|n| n.function),
            Some("open")
        );
        assert_eq!(v8_name("Builtin:JSEntry"), None);
    }

    #[test]
    fn the_function_name_of_a_label_with_a_location() {
        let js = "JS:*main /app/tokens.js:77:14";
        assert_eq!(function_len("main tokens.js:77", Some(js)), Some(4));
        assert_eq!(function_len(js, None), Some("JS:*main".len()));
        let anonymous = Some("JS:~ /app/tokens.js:1:1");
        assert_eq!(function_len("(anonymous) tokens.js:1", anonymous), Some(11));
        let py = "py::parse:/usr/lib/python3/json/decoder.py";
        assert_eq!(function_len("parse decoder.py", Some(py)), Some(5));
        assert_eq!(function_len(py, None), Some(9));
        assert_eq!(function_len("ns::f", Some("ns::f(int)")), None);
        assert_eq!(function_len("main", None), None);
    }

    fn renamed(names: &[(&str, FrameKind)]) -> Vec<String> {
        let stack: Vec<(&str, FrameKind)> = names.to_vec();
        let mut p = crate::profile::testing::profile(&[(&stack, 1)]);
        shorten(&mut p);
        p.samples[0].stack[1..]
            .iter()
            .map(|&id| p.frame(id).name.clone())
            .collect()
    }

    #[test]
    fn runtime_names_are_short_unless_two_functions_would_look_alike() {
        use FrameKind::*;
        let names = renamed(&[
            ("JS:*main /app/src/tokens.js:77:14", Jit),
            ("JS:~main /app/src/tokens.js:77:14", Jit),
            ("JS:*f /app/a/util.js:3:1", Jit),
            ("JS:*f /app/b/util.js:3:1", Jit),
            ("JS:~ /app/src/tokens.js:1:1", Jit),
            ("JS:*g /app/x.js:5:1", Jit),
            ("JS:*g /app/x.js:5:9", Jit),
            ("py::parse:/usr/lib/python3/json/decoder.py", Jit),
            ("Shapes.Polygon:Perimeter ()", Jit),
            ("Shapes.Shape:Scale (int)", Jit),
            ("Shapes.Shape:Scale (double)", Jit),
            ("app.Main.main(java.lang.String[])", Jit),
            ("Builtin:JSEntry", Jit),
        ]);
        assert_eq!(
            names,
            vec![
                "main tokens.js:77",
                "main tokens.js:77",
                "f /app/a/util.js:3:1",
                "f /app/b/util.js:3:1",
                "(anonymous) tokens.js:1",
                "g x.js:5:1",
                "g x.js:5:9",
                "parse decoder.py",
                "Shapes.Polygon:Perimeter",
                "Shapes.Shape:Scale (int)",
                "Shapes.Shape:Scale (double)",
                "app.Main.main",
                "Builtin:JSEntry",
            ]
        );
    }

    #[test]
    fn full_names_are_kept_for_tooltips() {
        use FrameKind::*;
        let mut p = crate::profile::testing::profile(&[(
            &[
                ("ns::f(int)", Native),
                ("ns::f(double)", Native),
                ("JS:*main /app/tokens.js:7:1", Jit),
                ("main", Native),
            ],
            1,
        )]);
        shorten(&mut p);
        let js = p
            .frames()
            .iter()
            .find(|f| f.name == "main tokens.js:7")
            .unwrap();
        assert_eq!(
            (js.file.as_deref(), js.line),
            (Some("/app/tokens.js"), Some(7))
        );
        let full = |name: &str| p.full_names(name).collect::<Vec<_>>();
        assert_eq!(full("ns::f"), vec!["ns::f(double)", "ns::f(int)"]);
        assert_eq!(
            full("main tokens.js:7"),
            vec!["JS:*main /app/tokens.js:7:1"]
        );
        assert!(full("main").is_empty());
        assert_eq!(
            crate::profile::testing::lines(&p),
            vec!["prog;ns::f;ns::f;main tokens.js:7_[j];main 1"]
        );
    }
}
