//! The flame graphs of two real compilers as a browser draws them: `javac` (JDK 17) and `tsc`
//! (TypeScript 5.6.3 on Node, type-checking rxjs 7.8.1's sources) are recorded by the jprof
//! binary, the flame graph is rendered by headless Chromium (Debian's `chromium`, installed by
//! .ci/run) into a PNG of the whole graph, and the labels Chromium drew for the widest C++
//! frames (HotSpot's and V8's compilers, node's main loop) are checked: each shows the
//! function's own name, never a cut parameter list. The PNGs stay under the target dir (the
//! path is printed) for a human to look at.

use crate::cli_support;
use cli_support::{jprof, text};

use crate::jdk_support;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Compilers are CPU-heavy on two cores: one recording at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Where the PNGs (and the SVGs they show) are kept.
fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("flamegraph_real_png");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One frame of the graph as Chromium left it: its name (the tooltip's first line without
/// the weight), its width in percent of the graph and the label drawn in it.
#[derive(Debug)]
struct DrawnFrame {
    name: String,
    width: f64,
    label: String,
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// Every frame in the document Chromium dumped.
fn drawn_frames(dom: &str) -> Vec<DrawnFrame> {
    let mut frames = Vec::new();
    for part in dom.split("<title>").skip(1) {
        let Some(end) = part.find("</g>") else {
            continue;
        };
        let frame = &part[..end];
        let Some(title_end) = frame.find("</title>") else {
            continue;
        };
        let first_line = frame[..title_end].lines().next().unwrap_or("");
        let name = first_line.rsplit_once(" (").map_or(first_line, |(n, _)| n);
        let Some(rect) = frame.find("<rect") else {
            continue;
        };
        let width = &frame[rect..];
        let width = &width[width.find(" width=\"").unwrap() + 8..];
        let width: f64 = width[..width.find('"').unwrap()]
            .trim_end_matches('%')
            .parse()
            .unwrap();
        let text = &frame[frame.find("<text").unwrap()..];
        let label = match text.find("/>").filter(|&e| e < text.find('>').unwrap()) {
            Some(_) => String::new(),
            None => {
                let inner = &text[text.find('>').unwrap() + 1..];
                unescape(&inner[..inner.find("</text>").unwrap()])
            }
        };
        frames.push(DrawnFrame {
            name: unescape(name),
            width,
            label,
        });
    }
    frames
}

/// The function's own name: the last `::` component outside template arguments and
/// parentheses (`v8::internal::(anonymous namespace)::Invoke` → `Invoke`).
fn own_name(name: &str) -> &str {
    let mut depth = 0i32;
    let mut start = 0;
    let bytes = name.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' | b'(' => depth += 1,
            b'>' | b')' => depth -= 1,
            b':' if depth == 0 && i + 1 < bytes.len() && bytes[i + 1] == b':' => start = i + 2,
            _ => {}
        }
    }
    &name[start..]
}

/// Runs headless Chromium on `svg` with a window of `width`×`height` and `extra` arguments
/// (`--screenshot=…` or `--dump-dom`); returns its stdout.
fn chromium(svg: &Path, width: u32, height: u32, extra: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            // Virtual time: the page's timers (the script fits labels from one) run before the
            // dump or the screenshot, without waiting on the wall clock.
            "--virtual-time-budget=5000",
            extra,
        ])
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", svg.display()))
        .output()
        .expect("chromium is needed (Debian package chromium; .ci/run installs it)");
    assert!(
        out.status.success(),
        "chromium {extra} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Records `command` (run in `cwd`) with jprof into `dir`, writes its flame graph as `NAME.svg` and a
/// Chromium screenshot of the whole graph as `NAME.png` in [`out_dir`], checks the PNG, and
/// checks the labels of the C++ frames Chromium drew. Returns the widest C++ frames' names.
fn record_and_check(name: &str, dir: &Path, cwd: &Path, command: &[&str]) -> Vec<String> {
    let started = std::time::Instant::now();
    let data = dir.join("run.data");
    let out = jprof()
        .args(["record", "-o"])
        .arg(&data)
        .arg("--")
        .args(command)
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(out.status.success(), "jprof record: {}", text(&out));
    let svg = out_dir().join(format!("{name}.svg"));
    let report = jprof()
        .args(["report", "-f", "flamegraph", "-i"])
        .arg(&data)
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(report.status.success(), "jprof report: {}", text(&report));
    let recorded_and_reported = started.elapsed();

    // The window is as tall as the graph, so the PNG shows all of it: the C++ frames are near
    // the roots, at the bottom. Inferno's script makes the graph as wide as the window.
    let doc = std::fs::read_to_string(&svg).unwrap();
    let height = &doc[doc.find(" height=\"").unwrap() + 9..];
    let height: u32 = height[..height.find('"').unwrap()].parse().unwrap();
    let width = 1600;

    let png = out_dir().join(format!("{name}.png"));
    let _ = std::fs::remove_file(&png);
    chromium(
        &svg,
        width,
        height,
        &format!("--screenshot={}", png.display()),
    );
    check_png(&png, width, height);
    eprintln!(
        "{name}: flame graph as Chromium draws it: {}",
        png.display()
    );

    let frames = drawn_frames(&chromium(&svg, width, height, "--dump-dom"));
    eprintln!(
        "{name}: recorded and reported in {recorded_and_reported:.1?}, drawn twice by Chromium in {:.1?}",
        started.elapsed() - recorded_and_reported
    );
    assert!(frames.len() > 100, "{name}: {} frames drawn", frames.len());
    let cpp: Vec<&DrawnFrame> = frames.iter().filter(|f| f.name.contains("::")).collect();

    // No C++ label anywhere is cut at its end (inferno's own fitting, which keeps the start):
    // a label is the whole name or `..` and the name's end.
    for f in &cpp {
        let fits = f.label == f.name
            || f.label.is_empty()
            || f.label
                .strip_prefix("..")
                .is_some_and(|tail| f.name.ends_with(tail));
        assert!(fits, "{name}: label {:?} of {:?}", f.label, f.name);
    }

    // The widest C++ functions (each by its widest frame) show their own name.
    let mut widest: Vec<&DrawnFrame> = Vec::new();
    for f in &cpp {
        match widest.iter_mut().find(|w| w.name == f.name) {
            Some(w) if w.width < f.width => *w = f,
            Some(_) => {}
            None => widest.push(f),
        }
    }
    widest.sort_by(|a, b| b.width.total_cmp(&a.width));
    // The ten widest are returned (which runtime thread is widest varies from run to run: the
    // main thread's chain alone can fill the first five); the first five's labels are checked.
    widest.truncate(10);
    let checked = &widest[..5.min(widest.len())];
    assert_eq!(checked.len(), 5, "{name}: C++ frames {cpp:?}");
    let mut shown = String::new();
    for f in checked {
        writeln!(shown, "  {:6.2}%  {:?} of {}", f.width, f.label, f.name).unwrap();
    }
    eprintln!("{name}: the widest C++ frames and their labels:\n{shown}");
    for f in checked {
        let function = own_name(&f.name);
        assert!(
            !function.is_empty() && !function.contains(['(', ',', '*', '&']),
            "{name}: {:?} is not a short name (a parameter list?)\n{shown}",
            f.name
        );
        assert!(
            f.label.ends_with(function) && f.label.len() > function.len(),
            "{name}: the label of {:?} must show its function {function:?}\n{shown}",
            f.name
        );
    }

    // The widest frames too narrow for their name: cut from the left, they keep the function's
    // own name whole when there is room for it, and what they show is its end otherwise.
    let mut cut: Vec<&DrawnFrame> = cpp
        .iter()
        .copied()
        .filter(|f| !f.label.is_empty() && f.label != f.name)
        .collect();
    cut.sort_by(|a, b| b.width.total_cmp(&a.width));
    cut.truncate(5);
    let mut shown = String::new();
    for f in &cut {
        writeln!(shown, "  {:6.2}%  {:?} of {}", f.width, f.label, f.name).unwrap();
    }
    eprintln!("{name}: the widest C++ frames with a cut label:\n{shown}");
    assert!(!cut.is_empty(), "{name}: no C++ label was cut");
    for f in &cut {
        let function = own_name(&f.name);
        let room = f.label.chars().count() - 2;
        if room >= function.chars().count() {
            assert!(
                f.label.ends_with(function),
                "{name}: the cut label of {:?} must keep its function {function:?}\n{shown}",
                f.name
            );
        } else {
            assert!(
                function.ends_with(&f.label[2..]),
                "{name}: {:?}\n{shown}",
                f.name
            );
        }
    }
    widest.iter().map(|f| f.name.clone()).collect()
}

/// `png` is a whole PNG of `width`×`height` with a drawing in it, not a blank page.
fn check_png(png: &Path, width: u32, height: u32) {
    let file =
        std::fs::File::open(png).unwrap_or_else(|e| panic!("no screenshot {}: {e}", png.display()));
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader
        .next_frame(&mut pixels)
        .expect("the PNG's image data");
    assert_eq!(
        (frame.width, frame.height),
        (width, height),
        "{}",
        png.display()
    );
    let channels = frame.color_type.samples();
    let mut colours: Vec<&[u8]> = pixels[..frame.buffer_size()]
        .chunks_exact(channels)
        .collect();
    colours.sort_unstable();
    colours.dedup();
    // The background gradient, the frames' shades and the anti-aliased text: thousands.
    assert!(
        colours.len() > 500,
        "{}: {} colours, a blank page?",
        png.display(),
        colours.len()
    );
}

/// `count` Java sources for javac, in package `gen`, each with generic methods, lambdas and
/// streams to type-check (what makes javac's own code hot enough for C1 and C2).
fn java_sources(dir: &Path, count: usize) -> Vec<PathBuf> {
    let src = dir.join("src/gen");
    std::fs::create_dir_all(&src).unwrap();
    (0..count)
        .map(|c| {
            let mut code = format!(
                "package gen;\nimport java.util.*;\nimport java.util.stream.*;\npublic class C{c} {{\n"
            );
            for m in 0..60 {
                writeln!(
                    code,
                    "  public static <T extends Comparable<T>> List<T> m{m}(List<T> in, int k) {{\n\
                     \x20   Map<T, Integer> counts = new HashMap<>();\n\
                     \x20   for (T t : in) counts.merge(t, k + {m}, Integer::sum);\n\
                     \x20   return counts.entrySet().stream().filter(e -> e.getValue() > {m})\n\
                     \x20       .map(Map.Entry::getKey).sorted().collect(Collectors.toList());\n  }}"
                )
                .unwrap();
            }
            code.push_str("}\n");
            let path = src.join(format!("C{c}.java"));
            std::fs::write(&path, code).unwrap();
            path
        })
        .collect()
}

#[test]
fn javac_flame_graph_shows_the_names_of_hotspot_functions() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let sources = java_sources(dir.path(), 12);
    // An argument file keeps the command line (the graph's title) short.
    let list: String = sources
        .iter()
        .map(|s| format!("{}\n", s.display()))
        .collect();
    std::fs::write(dir.path().join("sources.txt"), list).unwrap();
    let javac = jdk_support::jdk("17").with_file_name("javac");
    let widest = record_and_check(
        "javac",
        dir.path(),
        dir.path(),
        &[javac.to_str().unwrap(), "-d", "out", "@sources.txt"],
    );
    assert!(dir.path().join("out/gen/C11.class").is_file());
    // HotSpot's JIT compilers are among the ten widest: their threads run C++ only.
    assert!(
        widest.iter().any(|n| n.starts_with("Compile")),
        "{widest:?}"
    );
}

/// The pinned TypeScript and rxjs of tests/fixtures/tsc-rxjs, installed by `npm ci` into the
/// target dir once (again when the lockfile changes); returns that directory.
fn tsc_project() -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tsc-rxjs");
    let dir = out_dir().join("tsc-rxjs");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["package.json", "package-lock.json", "tsconfig.json"] {
        std::fs::copy(fixture.join(file), dir.join(file)).unwrap();
    }
    let lock = std::fs::read(fixture.join("package-lock.json")).unwrap();
    let stamp = dir.join("installed-lock.json");
    if std::fs::read(&stamp).ok().as_ref() != Some(&lock) {
        let out = Command::new("npm")
            .args(["ci", "--no-fund", "--no-audit", "--ignore-scripts"])
            .current_dir(&dir)
            .output()
            .expect("npm is needed (it comes with Node)");
        assert!(out.status.success(), "npm ci: {}", text(&out));
        std::fs::write(&stamp, &lock).unwrap();
    }
    dir
}

#[test]
fn tsc_flame_graph_shows_the_names_of_v8_and_node_functions() {
    let project = tsc_project();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // Run in the project, whose relative paths keep the command line (the title) short.
    let widest = record_and_check(
        "tsc",
        dir.path(),
        &project,
        &["node", "node_modules/typescript/bin/tsc", "-p", "."],
    );
    // V8's optimizing compiler thread and its calls into JavaScript are among the ten widest.
    assert!(
        widest.iter().any(|n| n.starts_with("v8::internal::")),
        "{widest:?}"
    );
}
