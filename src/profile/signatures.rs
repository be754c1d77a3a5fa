//! Java method names come from jprof's agent with their parameter types
//! (`app.Attr.attribClass(com.sun.Pos, app.ClassSymbol)`). Reports show them short
//! (`app.Attr.attribClass`) unless two different methods would then look the same: overloads
//! keep their parameters (simple type names, or qualified ones if those collide too), so the
//! folded output never merges two methods into one frame. `--signatures` keeps every signature.

use std::collections::{BTreeSet, HashMap};

use crate::profile::{Frame, FrameKind, Profile};

/// `pkg.Class.method` and the parameter list of a name with a Java signature.
fn split(name: &str) -> Option<(&str, &str)> {
    let (short, params) = name.strip_suffix(')')?.split_once('(')?;
    let qualified = short.contains('.')
        && short
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '$' | '<' | '>'));
    let types = params
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '$' | '[' | ']' | ',' | ' '));
    (qualified && types).then_some((short, params))
}

/// Whether `name` is a Java method with its parameter types (`pkg.Class.method(int, Foo)`).
pub fn is_java_signature(name: &str) -> bool {
    split(name).is_some()
}

/// `pkg.Class.method(java.lang.String, int[])` → `pkg.Class.method(String, int[])`.
fn with_simple_types(short: &str, params: &str) -> String {
    let simple: Vec<&str> = params
        .split(", ")
        .filter(|p| !p.is_empty())
        .map(|p| p.rsplit('.').next().unwrap_or(p))
        .collect();
    format!("{short}({})", simple.join(", "))
}

fn is_code(frame: &Frame) -> bool {
    matches!(
        frame.kind,
        FrameKind::Jit | FrameKind::Inlined | FrameKind::Interpreter
    )
}

/// Shortens the signatures that no other method needs to be told apart from.
pub fn shorten(profile: &mut Profile) {
    let mut by_short: HashMap<String, BTreeSet<String>> = HashMap::new();
    for frame in profile.frames().iter().filter(|f| is_code(f)) {
        if let Some((short, _)) = split(&frame.name) {
            by_short
                .entry(short.to_string())
                .or_default()
                .insert(frame.name.clone());
        }
    }
    let mut shown: HashMap<String, String> = HashMap::new();
    for (short, full) in &by_short {
        if full.len() == 1 {
            shown.extend(full.iter().map(|f| (f.clone(), short.clone())));
            continue;
        }
        let simple: Vec<(String, String)> = full
            .iter()
            .filter_map(|f| split(f).map(|(s, p)| (f.clone(), with_simple_types(s, p))))
            .collect();
        let distinct: BTreeSet<&String> = simple.iter().map(|(_, s)| s).collect();
        if distinct.len() == simple.len() {
            shown.extend(simple);
        }
    }
    profile.rename_frames(|frame| {
        if !is_code(frame) {
            return None;
        }
        shown.get(&frame.name).cloned()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::testing::profile;
    use FrameKind::*;

    fn folded(p: &Profile) -> Vec<String> {
        crate::profile::testing::lines(p)
    }

    #[test]
    fn overloads_stay_apart_and_the_rest_is_short() {
        let mut p = profile(&[
            (
                &[
                    ("app.Main.main(java.lang.String[])", Jit),
                    ("app.Attr.attribClass(app.Pos, app.ClassSymbol)", Jit),
                    ("app.Attr.attribClass(app.ClassSymbol)", Jit),
                ],
                3,
            ),
            (
                &[
                    ("app.Main.main(java.lang.String[])", Jit),
                    ("app.Attr.attribClass(app.ClassSymbol)", Inlined),
                    ("main", Native),
                ],
                1,
            ),
        ]);
        shorten(&mut p);
        assert_eq!(
            folded(&p),
            vec![
                "prog;app.Main.main_[j];app.Attr.attribClass(ClassSymbol)_[i];main 1",
                "prog;app.Main.main_[j];app.Attr.attribClass(Pos, ClassSymbol)_[j];\
                 app.Attr.attribClass(ClassSymbol)_[j] 3",
            ]
        );
    }

    #[test]
    fn simple_types_that_collide_stay_qualified() {
        let mut p = profile(&[(&[("app.A.f(x.Key)", Jit), ("app.A.f(y.Key)", Jit)], 1)]);
        shorten(&mut p);
        assert_eq!(
            folded(&p),
            vec!["prog;app.A.f(x.Key)_[j];app.A.f(y.Key)_[j] 1"]
        );
    }

    #[test]
    fn other_names_are_left_alone() {
        let mut p = profile(&[(
            &[
                ("LazyCompile:*fib /tmp/a.js:1", Jit),
                ("(garbage collector)", Jit),
                ("main(int)", Native),
            ],
            1,
        )]);
        shorten(&mut p);
        assert_eq!(
            folded(&p),
            vec!["prog;LazyCompile:*fib /tmp/a.js:1_[j];(garbage collector)_[j];main(int) 1"]
        );
    }
}
