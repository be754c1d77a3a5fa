//! Flame graph SVG from folded stacks, drawn by inferno as a library. Owns the graph's look
//! (`--inverted`, `--title`, `--min-width`) and its colours: one hue per frame kind, the shade
//! from a fixed hash of the name, so the same profile always gives the same bytes.

use std::collections::BTreeMap;
use std::io::{self, Write};

use inferno::flamegraph::color::{Color, MultiPalette, Palette, PaletteMap};
use inferno::flamegraph::{self, Direction, Options};

use crate::profile::{Context, Frame, FrameKind, Profile, WeightUnit};

/// What goes on the graph besides the stacks.
#[derive(Clone, Debug)]
pub struct Labels {
    /// Shown at the top, e.g. `jprof: ./app arg`.
    pub title: String,
    /// What the weights count, e.g. `cycles` or `cpu-clock`.
    pub count_name: String,
    /// A line under the title (e.g. what the recording lost).
    pub subtitle: Option<String>,
    /// Whether the weights are nanoseconds (tooltips then show `1.23 ms`) or counts of
    /// `count_name`.
    pub unit: WeightUnit,
    /// The full names (`--signatures` form) of shortened frame names, by the name as drawn;
    /// shown in the tooltips.
    pub full_names: BTreeMap<String, Vec<String>>,
}

impl Labels {
    /// What an input's context says at the top of its flame graph, and the full names of the
    /// profile's shortened frames.
    pub fn of(context: &Context, profile: &Profile) -> Self {
        Self {
            title: context.graph_title(),
            count_name: context.event.clone(),
            subtitle: context.subtitle.clone(),
            unit: context.weight_unit,
            full_names: profile
                .all_full_names()
                .iter()
                .map(|(short, full)| {
                    (
                        drawn_name(short),
                        full.iter().map(|f| drawn_name(f)).collect(),
                    )
                })
                .collect(),
        }
    }

    /// Labels with a title and what the weights count, nothing else.
    pub fn new(title: &str, count_name: &str, unit: WeightUnit) -> Self {
        Self {
            title: title.to_string(),
            count_name: count_name.to_string(),
            subtitle: None,
            unit,
            full_names: BTreeMap::new(),
        }
    }
}

/// A name as the graph shows it: its folded label without the kind suffix.
fn drawn_name(name: &str) -> String {
    crate::profile::frame_label(&Frame {
        name: name.to_string(),
        kind: FrameKind::Native,
        module: None,
        file: None,
        line: None,
    })
}

/// How the graph is drawn, from the command line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Look {
    /// Icicle graph: roots at the top, growing down (`--inverted`).
    pub inverted: bool,
    /// Replaces the default title (`--title`).
    pub title: Option<String>,
    /// Frames narrower than this percentage of the width are left out (`--min-width`;
    /// inferno's default 0.01 when unset).
    pub min_width: Option<f64>,
}

impl Look {
    /// The narrowest frame drawn, in percent of the total (inferno's default when unset).
    pub fn min_width_percent(&self) -> f64 {
        self.min_width
            .unwrap_or_else(|| Options::default().min_width)
    }

    /// inferno's options for this look, with `labels` and jprof's fixed colouring.
    fn options<'a>(&self, labels: &Labels, palette: Option<&'a mut PaletteMap>) -> Options<'a> {
        let mut options = Options::default();
        // The title holds the command line, which may carry control characters (invalid in
        // XML, and escapes when the SVG is printed): shown as escapes.
        fn shown(text: &str) -> String {
            crate::terminal::safe(text.as_bytes()).into_owned()
        }
        options.title = shown(self.title.as_deref().unwrap_or(&labels.title));
        options.count_name = labels.count_name.clone();
        options.subtitle = labels.subtitle.as_deref().map(shown);
        if self.inverted {
            options.direction = Direction::Inverted;
        }
        if let Some(min_width) = self.min_width {
            options.min_width = min_width;
        }
        // Names missing from the palette map (thread names added as roots, folded files) are
        // coloured by the java palette: by `_[k]`/`_[j]`/`_[i]` suffix, from a stable FNV hash
        // of the name rather than inferno's random numbers.
        options.colors = Palette::Multi(MultiPalette::Java);
        options.deterministic = true;
        options.palette_map = palette;
        options
    }
}

/// The colour of every frame label of `profile`: the hue tells the kind (native red, kernel
/// orange, JIT green, inlined aqua, interpreter yellow, roots grey, unknown pale), the shade
/// comes from a hash of the label so neighbours differ.
pub fn kind_palette(profile: &Profile) -> PaletteMap {
    let mut palette = PaletteMap::default();
    // Thread names are roots too when the folding puts them in front of a rootless stack.
    let thread_roots = profile.threads.values().map(|t| Frame {
        name: t.comm.clone(),
        kind: FrameKind::Root,
        module: None,
        file: None,
        line: None,
    });
    for frame in profile.frames().iter().cloned().chain(thread_roots) {
        let label = crate::profile::frame_label(&frame);
        if palette.get(&label).is_none() {
            let colour = kind_colour(frame.kind, shade(&label));
            palette.insert(label, colour);
        }
    }
    palette
}

/// 0.0..=1.0 from the FNV-1a hash of `name`, stable across machines and runs.
fn shade(name: &str) -> f32 {
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash >> 40) as f32 / (1u64 << 24) as f32
}

fn kind_colour(kind: FrameKind, v: f32) -> Color {
    let span = |low: u8, width: f32| low.saturating_add((width * v) as u8);
    let (r, g, b) = match kind {
        FrameKind::Native => (span(200, 55.0), span(50, 80.0), span(50, 80.0)),
        FrameKind::Kernel => (span(190, 65.0), span(90, 65.0), 0),
        FrameKind::Jit => (span(50, 60.0), span(200, 55.0), span(50, 60.0)),
        FrameKind::Inlined => (span(50, 60.0), span(165, 55.0), span(165, 55.0)),
        FrameKind::Interpreter => (span(175, 55.0), span(175, 55.0), span(50, 20.0)),
        FrameKind::Root => (span(160, 30.0), span(160, 30.0), span(160, 30.0)),
        FrameKind::Unknown => (span(215, 30.0), span(200, 30.0), span(200, 30.0)),
    };
    Color { r, g, b }
}

/// Draws `folded` (`stack weight` lines, or `stack before after` for a differential graph)
/// as an SVG flame graph; `palette` fixes the colours of the names it holds.
///
/// inferno draws it; jprof then finishes each tooltip (the weight with its unit, the full
/// name of a shortened frame) and adds a script that cuts labels too long for their box so
/// the function name stays visible.
pub fn write(
    folded: &[String],
    labels: &Labels,
    look: &Look,
    palette: Option<&mut PaletteMap>,
    mut out: impl Write,
) -> io::Result<()> {
    let mut options = look.options(labels, palette);
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut options, folded.iter().map(String::as_str), &mut svg)?;
    let svg = String::from_utf8(svg).map_err(io::Error::other)?;
    out.write_all(finish(&svg, labels).as_bytes())
}

/// `1.23 ms`: nanoseconds in the largest unit that keeps them at 1 or more, three
/// significant digits.
pub fn human_ns(ns: f64) -> String {
    let (value, unit) = if ns >= 1e9 {
        (ns / 1e9, "s")
    } else if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else if ns >= 1e3 {
        (ns / 1e3, "µs")
    } else {
        return format!("{ns:.0} ns");
    };
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.digits$} {unit}")
}

/// What a time weight is, after its value: `CPU`, `off-CPU`, `wall`, or nothing.
fn time_word(count_name: &str) -> String {
    let word = count_name
        .trim_end_matches("ns")
        .trim()
        .trim_start_matches("ns ")
        .trim_matches(|c| c == '(' || c == ')');
    match word {
        "cpu-clock" | "task-clock" => "CPU".to_string(),
        other => other.to_string(),
    }
}

/// The tooltip of a frame with its weight as `1.23 ms CPU` rather than a bare count of ns.
fn with_unit(title: &str, labels: &Labels) -> String {
    let counted = format!(" {}, ", labels.count_name);
    let Some(at) = title.rfind(&counted) else {
        return title.to_string();
    };
    let Some(open) = title[..at].rfind('(') else {
        return title.to_string();
    };
    let digits = &title[open + 1..at];
    let Ok(count) = digits.replace(',', "").parse::<u64>() else {
        return title.to_string();
    };
    let amount = match labels.unit {
        WeightUnit::Nanoseconds => {
            let word = time_word(&labels.count_name);
            let time = human_ns(count as f64);
            if word.is_empty() {
                time
            } else {
                format!("{time} {word}")
            }
        }
        WeightUnit::Events | WeightUnit::Occurrences => {
            format!("{digits} {}", labels.count_name)
        }
    };
    format!(
        "{}({amount}, {}",
        &title[..open],
        &title[at + counted.len()..]
    )
}

/// How many full names a tooltip lists before saying how many more there are.
const FULL_NAMES_SHOWN: usize = 3;

/// The SVG with jprof's tooltips and label cutting (see [`write`]).
fn finish(svg: &str, labels: &Labels) -> String {
    const START: &str = "<g><title>";
    const END: &str = "</title>";
    let mut out = String::with_capacity(svg.len() + svg.len() / 8);
    let mut rest = svg;
    while let Some(at) = rest.find(START) {
        out.push_str(&rest[..at]);
        let title_start = at + START.len();
        let Some(len) = rest[title_start..].find(END) else {
            break;
        };
        let title = unescape(&rest[title_start..title_start + len]);
        let mut tooltip = with_unit(&title, labels);
        let name = title.rsplit_once(" (").map_or(title.as_str(), |(n, _)| n);
        let full = labels.full_names.get(name);
        if let Some(full) = full {
            for f in full.iter().take(FULL_NAMES_SHOWN) {
                tooltip.push('\n');
                tooltip.push_str(f);
            }
            if full.len() > FULL_NAMES_SHOWN {
                tooltip.push_str(&format!("\n… and {} more", full.len() - FULL_NAMES_SHOWN));
            }
        }
        let written = full.and_then(|f| f.first()).map(String::as_str);
        let name_end = crate::profile::names::function_len(name, written);
        match name_end {
            Some(end) => out.push_str(&format!("<g data-name-end=\"{end}\"><title>")),
            None => out.push_str(START),
        }
        out.push_str(&escape(&tooltip));
        out.push_str(END);
        rest = &rest[title_start + len + END.len()..];
        // The label as drawn without the script (an `<img>`, an image viewer): cut the same way.
        if let Some((before_text, after_text)) = drawn_text(rest) {
            let width = rect_width(&rest[..before_text]).unwrap_or(0.0);
            let fits = (width / char_width_percent()).trunc() as usize;
            let name_end = name_end.map(|units| {
                let utf16: Vec<u16> = name.encode_utf16().take(units).collect();
                String::from_utf16_lossy(&utf16).chars().count()
            });
            out.push_str(&rest[..before_text]);
            out.push_str(&escape(&cut_label(name, name_end, fits)));
            rest = &rest[after_text..];
        }
    }
    out.push_str(rest);
    // Before the closing tag of the document: the script that cuts labels.
    match out.rfind("</svg>") {
        Some(end) => out.insert_str(end, CUT_LABELS_SCRIPT),
        None => out.push_str(CUT_LABELS_SCRIPT),
    }
    out
}

/// The width of a character in percent of the graph, as inferno computes it.
fn char_width_percent() -> f64 {
    let options = Options::default();
    let image_width = options.image_width.unwrap_or(1200) as f64;
    100.0 * options.font_size as f64 * options.font_width / image_width
}

/// The `width="W%"` of the frame's `<rect`, in `frame` (its markup after the title).
fn rect_width(frame: &str) -> Option<f64> {
    let rect = &frame[frame.find("<rect")?..];
    let width = &rect[rect.find(" width=\"")? + 8..];
    width[..width.find('"')?].trim_end_matches('%').parse().ok()
}

/// Where the content of the frame's `<text>` starts and ends in `frame`, before its `</g>`.
fn drawn_text(frame: &str) -> Option<(usize, usize)> {
    let end_of_frame = frame.find("</g>")?;
    let text = frame[..end_of_frame].find("<text")?;
    let start = text + frame[text..].find('>')? + 1;
    let end = start + frame[start..end_of_frame].find("</text>")?;
    Some((start, end))
}

/// The label cut to `fits` characters as the script cuts it: whole if it fits, else the part up
/// to the end of the function name (`name_end` characters, when the label has a location after
/// it), else `..` and the end of that; nothing below 3 characters.
fn cut_label(label: &str, name_end: Option<usize>, fits: usize) -> String {
    let chars: Vec<char> = label.chars().collect();
    if chars.len() <= fits {
        return label.to_string();
    }
    if fits < 3 {
        return String::new();
    }
    let name = &chars[..name_end.unwrap_or(chars.len()).min(chars.len())];
    if name.len() <= fits {
        return name.iter().collect();
    }
    let tail: String = name[name.len() - (fits - 2)..].iter().collect();
    format!("..{tail}")
}

/// Replaces inferno's label fitting (its functions of the same names, declared earlier in the
/// document): the label is the tooltip's first line without the weight; one that does not fit
/// loses first the location after the function name (`data-name-end`), then its scope from the
/// left (`..Class::method`), so the function name is what stays.
const CUT_LABELS_SCRIPT: &str = r#"<script type="text/ecmascript"><![CDATA[
function jprof_label(e) {
    var t = find_child(e, "title").textContent.split("\n")[0];
    return t.replace(/ \([^(]*\)$/, "");
}
function jprof_cut(e, txt, fits) {
    if (txt.length <= fits) return txt;
    if (fits < 3) return "";
    var end = e.getAttribute("data-name-end");
    var name = end === null ? txt : txt.substring(0, parseInt(end));
    if (name.length <= fits) return name;
    return ".." + name.substring(name.length - (fits - 2));
}
function jprof_fit(e) {
    var r = find_child(e, "rect");
    var t = find_child(e, "text");
    var w = parseFloat(r.attributes.width.value) * frames.attributes.width.value / 100 - 3;
    var cw = known_font_width > 0 ? known_font_width : fontsize * fontwidth;
    t.attributes.x.value = format_percent(parseFloat(r.attributes.x.value) + (100 * 3 / frames.attributes.width.value));
    t.textContent = w < 2 * cw ? "" : jprof_cut(e, jprof_label(e), Math.floor(w / cw));
}
function update_text_for_elements(elements) {
    for (var i = 0; i < elements.length; i++) jprof_fit(elements[i]);
}
function update_text(e) { jprof_fit(e); }
]]></script>"#;

/// XML text as inferno escapes it, back to plain text.
fn unescape(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// Plain text as XML text.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::collapsed;
    use crate::profile::FrameKind::*;

    fn svg() -> String {
        let p = crate::profile::testing::profile(&[
            (
                &[("main", Native), ("hot::compute_a(unsigned long)", Native)],
                60,
            ),
            (
                &[("main", Native), ("hot::compute_b(unsigned long)", Native)],
                30,
            ),
            (
                &[("main", Native), ("Foo.bar", Jit), ("sys_read", Kernel)],
                10,
            ),
        ]);
        draw(&p, &labels(), &Look::default())
    }

    fn draw(p: &Profile, labels: &Labels, look: &Look) -> String {
        let mut out = Vec::new();
        let mut palette = kind_palette(p);
        write(
            &collapsed::lines(p),
            labels,
            look,
            Some(&mut palette),
            &mut out,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn svg_has_title_frames_and_counts() {
        let svg = svg();
        assert!(svg.starts_with("<?xml"), "{}", &svg[..100.min(svg.len())]);
        assert!(svg.contains("jprof: ./hotspots"));
        assert!(svg.contains("hot::compute_a(unsigned long) (60 cycles, 60.00%)"));
        assert!(svg.contains("hot::compute_b(unsigned long) (30 cycles, 30.00%)"));
        // inferno colours by the kind suffix and shows the name without it.
        assert!(svg.contains("Foo.bar (10 cycles, 10.00%)"));
        assert!(svg.contains("sys_read (10 cycles, 10.00%)"));
        assert!(svg.contains("all (100 cycles, 100%)"));
    }

    #[test]
    fn no_stacks_is_an_error_not_a_panic() {
        let labels = Labels::new("t", "cycles", WeightUnit::Events);
        assert!(write(&[], &labels, &Look::default(), None, io::sink()).is_err());
    }

    /// The fill colour of the frame whose tooltip starts with `name (`.
    fn fill_of(svg: &str, name: &str) -> (u8, u8, u8) {
        let at = svg
            .find(&format!("<title>{name} ("))
            .unwrap_or_else(|| panic!("no frame {name}"));
        let rest = &svg[at..];
        let fill = &rest[rest.find("fill=\"rgb(").unwrap() + 10..];
        let parts: Vec<u8> = fill[..fill.find(')').unwrap()]
            .split(',')
            .map(|p| p.trim().parse().unwrap())
            .collect();
        (parts[0], parts[1], parts[2])
    }

    #[test]
    fn colours_tell_the_frame_kind() {
        let p = crate::profile::testing::profile(&[(
            &[
                ("main.c_helper", Native),
                ("Foo.bar", Jit),
                ("Foo.baz", Inlined),
                ("sys_read", Kernel),
                ("LOAD_ATTR", Interpreter),
            ],
            1,
        )]);
        let svg = draw(&p, &labels(), &Look::default());
        // A dotted native name stays red (the java palette alone would make it green).
        let (r, g, b) = fill_of(&svg, "main.c_helper");
        assert!(r >= 200 && g < 140 && b < 140, "native {r},{g},{b}");
        let (r, g, b) = fill_of(&svg, "Foo.bar");
        assert!(g >= 200 && r < 120 && b < 120, "jit {r},{g},{b}");
        let (r, g, b) = fill_of(&svg, "Foo.baz");
        assert!(g >= 165 && b >= 165 && r < 120, "inlined {r},{g},{b}");
        let (r, g, b) = fill_of(&svg, "sys_read");
        assert!(r >= 190 && b == 0, "kernel {r},{g},{b}");
        let (r, g, b) = fill_of(&svg, "LOAD_ATTR_[int]");
        assert!(r >= 175 && g >= 175 && b < 80, "interpreter {r},{g},{b}");
        let (r, g, b) = fill_of(&svg, "prog");
        assert!(r == g && g == b && r >= 160, "root {r},{g},{b}");
    }

    #[test]
    fn thread_names_put_in_front_are_grey_roots() {
        let mut p = Profile::default();
        let main = p.intern(crate::profile::testing::frame("main", Native));
        p.threads.insert(
            42,
            crate::profile::ThreadInfo {
                pid: 42,
                comm: "Worker.pool".into(),
            },
        );
        p.samples.push(crate::profile::ProfileSample {
            pid: 42,
            tid: 42,
            time: 0,
            cpu: 0,
            weight: 3,
            stack: vec![main].into(),
            off_cpu: false,
        });
        let svg = draw(&p, &labels(), &Look::default());
        // The java palette alone would paint this dotted, capitalised name green.
        let (r, g, b) = fill_of(&svg, "Worker.pool");
        assert!(r == g && g == b, "root {r},{g},{b}");
    }

    fn labels() -> Labels {
        Labels::new("jprof: ./hotspots", "cycles", WeightUnit::Events)
    }

    #[test]
    fn tooltips_give_time_with_its_unit_and_the_full_name() {
        let mut p = crate::profile::testing::profile(&[(
            &[
                ("main", Native),
                ("ns::f(int)", Native),
                ("JS:*main /app/tokens.js:7:1", Jit),
            ],
            1_500_000,
        )]);
        crate::profile::names::shorten(&mut p);
        let ctx = Context::for_profile(&p, "t", "off-CPU ns", WeightUnit::Nanoseconds);
        let svg = draw(&p, &Labels::of(&ctx, &p), &Look::default());
        assert!(
            svg.contains("<g><title>ns::f (1.50 ms off-CPU, 100.00%)\nns::f(int)</title>"),
            "{svg}"
        );
        assert!(svg.contains(
            "<g data-name-end=\"4\"><title>main tokens.js:7 (1.50 ms off-CPU, 100.00%)\n\
             JS:*main /app/tokens.js:7:1</title>"
        ));
        assert!(svg.contains("<title>all (1.50 ms off-CPU, 100%)</title>"));
        assert!(svg.contains("function jprof_cut"));
        assert!(svg.trim_end().ends_with("]]></script></svg>"));
        // Counts that are not time keep their own word.
        let ctx = Context::for_profile(&p, "t", "samples", WeightUnit::Events);
        let svg = draw(&p, &Labels::of(&ctx, &p), &Look::default());
        assert!(svg.contains("<title>ns::f (1,500,000 samples, 100.00%)"));
    }

    #[test]
    fn labels_are_cut_in_the_file_too() {
        assert_eq!(
            cut_label("ns::Class::method", None, 40),
            "ns::Class::method"
        );
        assert_eq!(cut_label("ns::Class::method", None, 10), "..::method");
        assert_eq!(cut_label("main tokens.js:77", Some(4), 10), "main");
        assert_eq!(cut_label("scoreToken tokens.js:42", Some(10), 6), "..oken");
        assert_eq!(cut_label("anything", None, 2), "");
        // A frame too narrow for its whole name, as drawn without the script.
        let p = crate::profile::testing::profile(&[
            (&[("main", Native), ("hot", Native)], 999),
            (
                &[("main", Native), ("v8::internal::Isolate::Invoke", Native)],
                90,
            ),
        ]);
        let svg = draw(&p, &labels(), &Look::default());
        let at = svg.find("<title>v8::internal::Isolate::Invoke (").unwrap();
        let (start, end) = drawn_text(&svg[at..]).unwrap();
        let drawn = &svg[at..][start..end];
        assert!(
            drawn.starts_with("..") && drawn.ends_with("::Invoke"),
            "{drawn}"
        );
    }

    #[test]
    fn nanoseconds_are_shown_in_the_unit_that_fits() {
        assert_eq!(human_ns(999.0), "999 ns");
        assert_eq!(human_ns(1_500.0), "1.50 µs");
        assert_eq!(human_ns(25_000_000.0), "25.0 ms");
        assert_eq!(human_ns(125_000_000_000.0), "125 s");
        assert_eq!(time_word("cpu-clock"), "CPU");
        assert_eq!(time_word("wall ns"), "wall");
        assert_eq!(time_word("ns (self time)"), "self time");
        assert_eq!(time_word("ns"), "");
    }

    #[test]
    fn look_options_reach_the_svg() {
        let p = crate::profile::testing::profile(&[
            (&[("main", Native), ("wide", Native)], 999),
            (&[("main", Native), ("narrow", Native)], 1),
        ]);
        let plain = draw(&p, &labels(), &Look::default());
        assert!(plain.contains("narrow (1 cycles"));
        let look = Look {
            inverted: true,
            title: Some("My title".into()),
            min_width: Some(1.0),
        };
        let svg = draw(&p, &labels(), &look);
        assert!(svg.contains("My title") && !svg.contains("jprof: ./hotspots"));
        assert!(
            !svg.contains("narrow ("),
            "0.1% frame is under --min-width 1"
        );
        assert!(svg.contains("wide ("));
        // Icicle: the root frame ("all") is drawn at the top, above its children.
        let y_of = |svg: &str, name: &str| -> f64 {
            let at = svg.find(&format!("<title>{name} (")).unwrap();
            let rest = &svg[at..];
            let y = &rest[rest.find(" y=\"").unwrap() + 4..];
            y[..y.find('"').unwrap()].parse().unwrap()
        };
        assert!(y_of(&svg, "all") < y_of(&svg, "wide"));
        assert!(y_of(&plain, "all") > y_of(&plain, "wide"));
    }
}
