//! `cargo xtask svg-check [SVG] [--search TERM] [--click NAME]`: opens a flame graph in
//! headless Chromium and uses it the way a person would. A copy of the SVG gets a small driver
//! script that, once the graph's own script has initialised, presses Ctrl-F (answering the
//! prompt with TERM) and clicks the frame NAME, then writes what the page shows into the DOM.
//! The dumped DOM is checked against expectations — frames drawn, frames highlighted, the
//! "Matched" text, the clicked frame widened to the full width with its whole name, the others
//! hidden — never pixels. A screenshot of the driven page is kept next to it for people.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// The demo's flame graph (examples/hotspots): compute_a/compute_b are its hot functions.
const DEFAULT_SEARCH: &str = "compute_";
const DEFAULT_CLICK: &str = "hot::compute_b";

/// Runs in the SVG after inferno's `init`: Ctrl-F with the prompt answered, then a click on the
/// frame named CLICK; results go into `<text id="svg-check-result">` as `key=value` lines.
const DRIVER: &str = r##"
<script type="text/ecmascript"><![CDATA[
(function () {
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message)); });
  window.addEventListener("load", function () { setTimeout(drive, 50); });
  function drive() {
    var out = [];
    var put = function (k, v) { out.push(k + "=" + String(v).replace(/\n/g, " ")); };
    try {
      var all = document.getElementById("frames").children;
      put("frames", all.length);
      window.prompt = function () { return __SEARCH__; };
      var key = new KeyboardEvent("keydown", { key: "f", ctrlKey: true, bubbles: true });
      Object.defineProperty(key, "keyCode", { get: function () { return 70; } });
      window.dispatchEvent(key);
      var highlighted = 0;
      for (var i = 0; i < all.length; i++) {
        var r = all[i].querySelector("rect");
        if (r && r.getAttribute("fill") == searchcolor) highlighted++;
      }
      put("highlighted", highlighted);
      put("matched", document.getElementById("matched").textContent);
      var target = null;
      for (var i = 0; i < all.length; i++) {
        var title = all[i].querySelector("title");
        if (title && title.textContent.indexOf(__CLICK__ + " (") == 0) { target = all[i]; break; }
      }
      put("click_found", target != null);
      if (target) {
        var rect = target.querySelector("rect");
        put("width_before", rect.getAttribute("width"));
        rect.dispatchEvent(new MouseEvent("click", { bubbles: true, cancelable: true }));
        put("width_after", rect.getAttribute("width"));
        put("text_after", target.querySelector("text").textContent);
        put("hidden", document.querySelectorAll("#frames > g.hide").length);
        put("parents", document.querySelectorAll("#frames > g.parent").length);
        put("unzoom_shown", !document.getElementById("unzoom").classList.contains("hide"));
      }
    } catch (e) {
      errors.push(String(e));
    }
    put("errors", errors.join(" | "));
    var t = document.createElementNS("http://www.w3.org/2000/svg", "text");
    t.setAttribute("id", "svg-check-result");
    t.textContent = "\n" + out.join("\n") + "\n";
    document.documentElement.appendChild(t);
  }
})();
]]></script>
"##;

struct Args {
    svg: PathBuf,
    search: String,
    click: String,
}

fn parse_args(args: &[String]) -> Result<Args> {
    let mut svg = None;
    let mut search = DEFAULT_SEARCH.to_string();
    let mut click = DEFAULT_CLICK.to_string();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--search" => search = it.next().context("--search needs a term")?.clone(),
            "--click" => click = it.next().context("--click needs a frame name")?.clone(),
            path => svg = Some(PathBuf::from(path)),
        }
    }
    Ok(Args {
        svg: svg.unwrap_or_else(|| crate::workspace::target_dir().join("demo/flamegraph.svg")),
        search,
        click,
    })
}

/// A JavaScript string literal for `text`.
fn js_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            // `]]>` would end the CDATA section; `<`/`>` escaped keep it whole.
            '<' | '>' | '\n' | '\r' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn find_browser() -> Result<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .context("no Chromium found: `apt-get install chromium`")
}

/// Runs the browser on `url` with `extra` flags and a fresh profile; returns stdout.
fn browse(browser: &str, extra: &[String], url: &str) -> Result<String> {
    let profile = std::env::temp_dir().join(format!(
        "jprof-svg-check-{}-{}",
        std::process::id(),
        extra.len()
    ));
    std::fs::create_dir_all(&profile)?;
    let out = Command::new(browser)
        .args(CHROMIUM_FLAGS)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .output()
        .with_context(|| format!("running {browser}"));
    let _ = std::fs::remove_dir_all(&profile);
    let out = out?;
    if !out.status.success() {
        bail!("{browser} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The `key=value` lines the driver wrote into the DOM.
fn results(dom: &str) -> Option<Vec<(String, String)>> {
    let start = dom.find("id=\"svg-check-result\"")?;
    let body = &dom[start..];
    let body = &body[body.find('>')? + 1..];
    let body = &body[..body.find("</text>")?];
    Some(
        body.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), unescape(v.trim())))
            .collect(),
    )
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// What must hold after the driver ran; each failure is one line of the error.
fn expectations(r: &[(String, String)], click: &str) -> Vec<String> {
    let get = |k: &str| r.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let number = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let mut failed = Vec::new();
    let mut expect = |ok: bool, what: String| {
        if !ok {
            failed.push(what);
        }
    };
    expect(
        get("errors") == Some(""),
        format!("script errors: {:?}", get("errors")),
    );
    expect(
        number("frames") >= 3,
        format!("{} frames drawn, expected 3 or more", number("frames")),
    );
    expect(
        number("highlighted") >= 1,
        "Ctrl-F search highlighted no frame".into(),
    );
    let matched = get("matched").unwrap_or("");
    expect(
        matched.starts_with("Matched: ") && !matched.contains("Matched: 0%"),
        format!("the Matched text is {matched:?}"),
    );
    expect(
        get("click_found") == Some("true"),
        format!("no frame named {click:?} to click"),
    );
    expect(
        get("width_after") == Some("100.0000%") && get("width_before") != get("width_after"),
        format!(
            "clicking did not zoom: width {:?} → {:?}",
            get("width_before"),
            get("width_after")
        ),
    );
    expect(
        get("text_after") == Some(click),
        format!(
            "the zoomed frame shows {:?}, not its full name",
            get("text_after")
        ),
    );
    expect(
        number("hidden") >= 1 && get("unzoom_shown") == Some("true"),
        format!(
            "after zooming: {} frames hidden, Reset Zoom shown {:?}",
            number("hidden"),
            get("unzoom_shown")
        ),
    );
    failed
}

pub fn run(args: &[String]) -> Result<()> {
    let args = parse_args(args)?;
    let svg = args
        .svg
        .canonicalize()
        .with_context(|| format!("{} (run `cargo xtask demo` first)", args.svg.display()))?;
    let text = std::fs::read_to_string(&svg).with_context(|| svg.display().to_string())?;
    let end = text
        .rfind("</svg>")
        .with_context(|| format!("{} has no </svg>", svg.display()))?;
    let driver = DRIVER
        .replace("__SEARCH__", &js_string(&args.search))
        .replace("__CLICK__", &js_string(&args.click));
    let out_dir = crate::workspace::target_dir().join("svg-check");
    std::fs::create_dir_all(&out_dir)?;
    let stem = svg
        .file_stem()
        .map_or("flamegraph".into(), |s| s.to_string_lossy().into_owned());
    let driven = out_dir.join(format!("{stem}.driven.svg"));
    std::fs::write(&driven, format!("{}{driver}{}", &text[..end], &text[end..]))?;
    let url = format!("file://{}", driven.display());

    let browser = find_browser()?;
    let dom = browse(
        browser,
        &["--virtual-time-budget=3000".into(), "--dump-dom".into()],
        &url,
    )?;
    if dom.contains("parsererror") {
        bail!("{browser} could not parse {} as XML/SVG", svg.display());
    }
    let Some(found) = results(&dom) else {
        bail!(
            "{browser} did not run the flame graph's script on {} (no driver result in the DOM)",
            svg.display()
        );
    };
    let failed = expectations(&found, &args.click);
    let screenshot = out_dir.join(format!("{stem}.png"));
    let shot = browse(
        browser,
        &[
            "--virtual-time-budget=3000".into(),
            "--window-size=1200,900".into(),
            format!("--screenshot={}", screenshot.display()),
        ],
        &url,
    );
    if !failed.is_empty() {
        bail!(
            "{} in {browser}:\n  {}\n(driver results: {found:?})",
            svg.display(),
            failed.join("\n  ")
        );
    }
    shot?;
    check_png(&screenshot)?;
    let get = |k: &str| {
        found
            .iter()
            .find(|(key, _)| key == k)
            .map_or("", |(_, v)| v.as_str())
    };
    println!(
        "{}: rendered by {browser}: {} frames; Ctrl-F {:?} highlighted {} ({}); clicking {:?} zoomed it to the full width ({} frames hidden); screenshot {}",
        svg.display(),
        get("frames"),
        args.search,
        get("highlighted"),
        get("matched"),
        args.click,
        get("hidden"),
        screenshot.display()
    );
    Ok(())
}

/// The screenshot exists and is a PNG of some size (a blank page compresses to almost nothing).
fn check_png(path: &Path) -> Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("no screenshot {}", path.display()))?;
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") || bytes.len() < 5_000 {
        bail!(
            "screenshot {} is not a PNG of a drawn page ({} bytes)",
            path.display(),
            bytes.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_safe_in_the_script() {
        assert_eq!(js_string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(js_string("x]]>y<"), r#""x]]\u003ey\u003c""#);
    }

    #[test]
    fn results_are_read_back_from_the_dom() {
        let dom = "<svg><text id=\"svg-check-result\">\nframes=12\nmatched=Matched: 90.1%\ntext_after=a::b&lt;int&gt; &amp; c\nerrors=\n</text></svg>";
        let r = results(dom).unwrap();
        assert_eq!(r[0], ("frames".into(), "12".into()));
        assert_eq!(r[2].1, "a::b<int> & c");
        assert_eq!(r[3], ("errors".into(), String::new()));
        let failed = expectations(&r, "x");
        assert!(failed.iter().any(|f| f.contains("no frame named")));
        assert!(failed.iter().any(|f| f.contains("Ctrl-F")));
        assert!(!failed.iter().any(|f| f.contains("script errors")));
    }
}
