//! The flame graph as a browser shows it: headless Chromium (Debian's `chromium`, installed by
//! .ci/run) loads the SVG, runs its script and dumps the document; the labels it drew are
//! checked. Names are short (no C++ parameter lists, JS files by base name) and a label too
//! long for its box keeps the function name: a C++ name loses its scope from the left, a JS
//! name its file and line.

use std::process::Command;

use jprof::output::{collapsed, flamegraph};
use jprof::profile::{names, Context, Frame, FrameKind, Profile, ProfileSample, WeightUnit};

fn frame(name: &str, kind: FrameKind) -> Frame {
    Frame {
        name: name.into(),
        kind,
        module: None,
        file: None,
        line: None,
    }
}

const INVOKE: &str = "v8::internal::(anonymous namespace)::Invoke(v8::internal::Isolate*, \
                      v8::internal::(anonymous namespace)::InvokeParams const&)";
const SCORE: &str = "JS:*scoreToken /home/user/project/src/lib/tokens.js:42:20";

/// `main` calls INVOKE (8% of the time) and SCORE (8%); the rest is in `main`'s own
/// `busy_loop`. Weights are ns of CPU time.
fn profile() -> Profile {
    let mut p = Profile::default();
    let root = p.intern(frame("app", FrameKind::Root));
    let main = p.intern(frame("main", FrameKind::Native));
    let stacks = [
        (
            vec![root, main, p.intern(frame(INVOKE, FrameKind::Native))],
            8,
        ),
        (vec![root, main, p.intern(frame(SCORE, FrameKind::Jit))], 8),
        (
            vec![root, main, p.intern(frame("busy_loop", FrameKind::Native))],
            84,
        ),
    ];
    for (i, (stack, share)) in stacks.into_iter().enumerate() {
        p.samples.push(ProfileSample {
            pid: 1,
            tid: 1,
            time: i as u64,
            cpu: 0,
            weight: share * 10_000_000,
            stack: stack.into(),
            off_cpu: false,
        });
    }
    names::shorten(&mut p);
    p
}

/// The SVG after Chromium ran its script, as Chromium serializes it.
fn rendered(svg: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graph.svg");
    std::fs::write(&path, svg).unwrap();
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--window-size=1200,800",
            // Virtual time: the page's timers (the script fits labels from one) run before the
            // dump, without waiting on the wall clock.
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("file://{}", path.display()))
        .output()
        .expect("chromium is needed (Debian package chromium; .ci/run installs it)");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The label Chromium shows in the frame whose tooltip starts with `name (`.
fn label_of(dom: &str, name: &str) -> String {
    let at = dom
        .find(&format!("<title>{name} ("))
        .unwrap_or_else(|| panic!("no frame {name} in {dom}"));
    let rest = &dom[at..];
    let text = &rest[rest.find("<text").unwrap()..];
    let text = &text[text.find('>').unwrap() + 1..];
    text[..text.find("</text>").unwrap()].to_string()
}

#[test]
fn labels_keep_the_function_name_in_a_browser() {
    let p = profile();
    let context = Context::for_profile(&p, "jprof: app", "cpu-clock", WeightUnit::Nanoseconds);
    let labels = flamegraph::Labels::of(&context, &p);
    let mut svg = Vec::new();
    let mut palette = flamegraph::kind_palette(&p);
    flamegraph::write(
        &collapsed::lines(&p),
        &labels,
        &flamegraph::Look::default(),
        Some(&mut palette),
        &mut svg,
    )
    .unwrap();
    let svg = String::from_utf8(svg).unwrap();
    // Tooltips: the short name, the time with its unit, then the name as written.
    assert!(svg.contains(&format!(
        "<title>v8::internal::(anonymous namespace)::Invoke (80.0 ms CPU, 8.00%)\n{}",
        INVOKE.replace('&', "&amp;")
    )));
    assert!(svg.contains(&format!(
        "<title>scoreToken tokens.js:42 (80.0 ms CPU, 8.00%)\n{SCORE}"
    )));

    let dom = rendered(&svg);
    let invoke = label_of(&dom, "v8::internal::(anonymous namespace)::Invoke");
    assert!(
        invoke.starts_with("..") && invoke.ends_with("::Invoke"),
        "the C++ label is cut from the left, keeping the function: {invoke:?}"
    );
    assert_eq!(
        label_of(&dom, "scoreToken tokens.js:42"),
        "scoreToken",
        "the JS label loses its location first"
    );
    assert_eq!(label_of(&dom, "busy_loop"), "busy_loop");
    assert_eq!(label_of(&dom, "main"), "main");
}
