//! `jprof top (-p PID | -- CMD)`: a live terminal view of the hottest functions. It runs
//! `jprof record` (the same recorder, as a child process) and, every second, reads the
//! recording written so far (the recorder's partial file holds every complete chunk, JIT side
//! files included), symbolizes it as `jprof report` does (short names, JIT names) and draws the
//! top functions by self or total time. Keys: `s` self, `t` total, `q` or Ctrl-C quits; the
//! recorder is then stopped, the recording kept, and the terminal restored.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::termios::{self, LocalFlags, SetArg, Termios};

use crate::error::{Error, Result};
use crate::input::recording::text::{function_costs, FunctionCosts};

/// What `jprof top` should do.
#[derive(Clone, Debug)]
pub struct TopConfig {
    /// `record`'s arguments for the target: `-p PID` or `-- CMD ARGS...`.
    pub target: Vec<String>,
    /// Sampling frequency (`-F`).
    pub frequency_hz: u64,
    /// The recording, kept when top ends.
    pub output: PathBuf,
    /// Rows of the table.
    pub rows: usize,
}

/// The terminal in raw mode (no echo, keys one by one, Ctrl-C as a key) on the alternate
/// screen; dropping it restores what it was.
struct RawTerminal {
    saved: Termios,
}

impl RawTerminal {
    fn enter() -> Result<Self> {
        let stdin = io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd())
            .map_err(|e| Error::Usage(format!("jprof top needs a terminal: {e}")))?;
        let mut raw = saved.clone();
        raw.local_flags
            .remove(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ISIG);
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw)
            .map_err(|e| Error::Other(format!("cannot set the terminal up: {e}")))?;
        print!("\x1b[?1049h\x1b[?25l");
        let _ = io::stdout().flush();
        Ok(Self { saved })
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        print!("\x1b[?25h\x1b[?1049l");
        let _ = io::stdout().flush();
        let _ = termios::tcsetattr(io::stdin().as_fd(), SetArg::TCSANOW, &self.saved);
    }
}

/// Which table is drawn.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    SelfTime,
    Total,
}

/// Runs `jprof top`; returns when the user quits or the recorder ends.
pub fn run(config: &TopConfig) -> Result<i32> {
    let terminal = RawTerminal::enter()?;
    let exe = std::env::current_exe().map_err(|e| Error::Other(format!("jprof's path: {e}")))?;
    let mut recorder = Command::new(exe)
        .arg("record")
        .arg("-F")
        .arg(config.frequency_hz.to_string())
        .arg("-o")
        .arg(&config.output)
        .args(&config.target)
        // The view owns the terminal: the target reads nothing from it and writes nowhere.
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Other(format!("cannot start the recorder: {e}")))?;
    // The recorder's summary (or its error), shown once the terminal is back; read as it
    // comes so the recorder never waits on a full pipe.
    let summary = recorder.stderr.take().map(|mut stderr| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = std::io::Read::read_to_end(&mut stderr, &mut text);
            text
        })
    });
    let partial = partial_path(&config.output, recorder.id());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [libc::SIGTERM, libc::SIGHUP] {
        let _ = signal_hook::flag::register(signal, stop.clone());
    }
    let started = Instant::now();
    let mut order = Order::SelfTime;
    let mut costs = FunctionCosts::default();
    let mut status = String::from("starting…");
    let mut next_refresh = Instant::now();
    let quit_reason = loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break "stopped";
        }
        if let Ok(Some(_)) = recorder.try_wait() {
            // The target ended: one last look at the finished recording.
            if let Some(c) = read_costs(&config.output) {
                costs = c;
            }
            draw(&costs, order, config, started, "the target ended; q quits")?;
            wait_for_key(&stop);
            break "ended";
        }
        if Instant::now() >= next_refresh {
            match read_costs(&partial) {
                Some(c) => {
                    costs = c;
                    status = "s: self  t: total  q: quit".into();
                }
                None => status = "waiting for the first samples…".into(),
            }
            next_refresh = Instant::now() + Duration::from_secs(1);
        }
        draw(&costs, order, config, started, &status)?;
        match key_within(Duration::from_millis(200)) {
            Some(b'q') | Some(b'Q') | Some(3) => break "quit",
            Some(b's') => order = Order::SelfTime,
            Some(b't') => order = Order::Total,
            _ => {}
        }
    };
    let code = stop_recorder(&mut recorder, quit_reason);
    drop(terminal);
    if let Some(text) = summary.and_then(|t| t.join().ok()) {
        let _ = io::stderr().write_all(crate::terminal::safe(&text).as_bytes());
    }
    if config.output.is_file() {
        println!(
            "jprof top: the recording is in {} (jprof report -i {})",
            config.output.display(),
            config.output.display()
        );
    }
    // Quitting is no failure; a recorder that ended on its own says how it went.
    Ok(if quit_reason == "ended" { code } else { 0 })
}

/// Where the recorder with process id `pid` writes while recording.
fn partial_path(output: &Path, pid: u32) -> PathBuf {
    let mut name = output.as_os_str().to_os_string();
    name.push(format!(".partial-{pid}"));
    PathBuf::from(name)
}

/// Stops the recorder as Ctrl-C would (it finalizes the recording) and waits for it; its exit
/// code (the target's, or 2 when recording failed).
fn stop_recorder(recorder: &mut Child, reason: &str) -> i32 {
    if reason != "ended" {
        let pid = nix::unistd::Pid::from_raw(recorder.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
    }
    recorder
        .wait()
        .ok()
        .and_then(|status| status.code())
        .unwrap_or(2)
}

/// The function costs of the recording at `path` so far (CPU samples), None while it has none.
fn read_costs(path: &Path) -> Option<FunctionCosts> {
    let recording = crate::recording::Recording::open(path).ok()?;
    let options = crate::symbolize::ResolveOptions {
        tid: None,
        comm: None,
        debug_files: false,
        search_dirs: Vec::new(),
        progress: crate::progress::Progress::default(),
    };
    let mut profile = crate::symbolize::resolve(&recording, &options).ok()?;
    profile.samples.retain(|s| !s.off_cpu);
    if profile.samples.is_empty() {
        return None;
    }
    crate::profile::names::shorten(&mut profile);
    Some(function_costs(&profile))
}

/// A key pressed within `timeout`, if any.
fn key_within(timeout: Duration) -> Option<u8> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let stdin = io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    let ms = PollTimeout::try_from(timeout.as_millis() as i32).unwrap_or(PollTimeout::ZERO);
    match poll(&mut fds, ms) {
        Ok(n) if n > 0 => {
            let mut byte = [0u8; 1];
            match nix::unistd::read(&stdin, &mut byte) {
                Ok(1) => Some(byte[0]),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Waits for any key (or a stop signal).
fn wait_for_key(stop: &std::sync::atomic::AtomicBool) {
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if key_within(Duration::from_millis(200)).is_some() {
            return;
        }
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Draws the whole screen.
fn draw(
    costs: &FunctionCosts,
    order: Order,
    config: &TopConfig,
    started: Instant,
    status: &str,
) -> Result<()> {
    let mut screen = String::from("\x1b[H\x1b[2J");
    let target = config.target.join(" ");
    let target = crate::terminal::safe(target.as_bytes());
    screen.push_str(&format!(
        "jprof top — {target} — {} samples, {:.0} s\r\n",
        costs.samples,
        started.elapsed().as_secs_f64()
    ));
    let sorted = match order {
        Order::SelfTime => "self",
        Order::Total => "total",
    };
    screen.push_str(&format!("sorted by {sorted} time; {status}\r\n\r\n"));
    screen.push_str(&format!("  {:>7} {:>7}  function\r\n", "self%", "total%"));
    let mut rows: Vec<_> = costs.functions.iter().collect();
    if order == Order::Total {
        rows.sort_by(|a, b| {
            (b.total_weight, b.self_weight, &a.name).cmp(&(a.total_weight, a.self_weight, &b.name))
        });
    } else {
        rows.retain(|f| f.self_weight > 0);
    }
    for f in rows.into_iter().take(config.rows) {
        let name: String = f.name.chars().take(110).collect();
        screen.push_str(&format!(
            "  {:>6.2}% {:>6.2}%  {}\r\n",
            percent(f.self_weight, costs.total_weight),
            percent(f.total_weight, costs.total_weight),
            crate::terminal::safe(name.as_bytes())
        ));
    }
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(screen.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| Error::io(Path::new("<stdout>"), e))
}
