//! Progress on stderr for report work that lasts more than a second (reading and importing
//! inputs, symbolizing). Nothing is drawn unless both stdout and stderr are terminals, so
//! pipes, files and CI logs never see control characters.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::mpsc::{self, RecvTimeoutError};

/// Work shorter than this shows nothing.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// [`SHOW_AFTER`], or `$JPROF_PROGRESS_AFTER_MS` (tests use 0 to see bars on small inputs).
fn show_after() -> Duration {
    std::env::var("JPROF_PROGRESS_AFTER_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(SHOW_AFTER, Duration::from_millis)
}

/// Whether progress may be drawn: both streams are terminals (a redirected stdout means a
/// script is reading the output).
pub fn enabled() -> bool {
    std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

/// A counted progress bar, hidden until its work has lasted [`show_after`]; a no-op when
/// progress is not [`enabled`].
#[derive(Clone, Debug, Default)]
pub struct Progress(Option<(ProgressBar, Duration)>);

impl Progress {
    /// A bar labelled `what`; its length is set when known.
    pub fn bar(what: &str) -> Self {
        if !enabled() {
            return Self(None);
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        let style = ProgressStyle::with_template(
            "{msg} [{bar:40}] {human_pos}/{human_len} ({elapsed}, {eta} left)",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(what.to_string());
        Self(Some((bar, show_after())))
    }

    pub fn set_length(&self, len: u64) {
        if let Some((bar, _)) = &self.0 {
            bar.set_length(len);
        }
    }

    /// Adds `n` done items; callers batch (every few thousand items), as this reads the clock.
    pub fn inc(&self, n: u64) {
        if let Some((bar, after)) = &self.0 {
            if bar.is_hidden() && bar.elapsed() >= *after {
                bar.set_draw_target(ProgressDrawTarget::stderr());
            }
            bar.inc(n);
        }
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        if let Some((bar, _)) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

/// Runs `work`, showing a spinner labelled `what` once it has taken [`show_after`] (for work
/// whose size is unknown, like importing a perf.data).
pub fn while_busy<T>(what: &str, work: impl FnOnce() -> T) -> T {
    if !enabled() {
        return work();
    }
    let (done, is_done) = mpsc::sync_channel::<()>(0);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            // Dropping `done` disconnects the channel: the work finished in time.
            if is_done.recv_timeout(show_after()) != Err(RecvTimeoutError::Timeout) {
                return;
            }
            let spinner = ProgressBar::new_spinner().with_message(what.to_string());
            spinner.tick();
            spinner.enable_steady_tick(Duration::from_millis(120));
            let _ = is_done.recv();
            spinner.finish_and_clear();
        });
        let out = work();
        drop(done);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_drawn_off_a_terminal() {
        // Test output is captured, so neither stream is a terminal here.
        assert!(!enabled());
        let p = Progress::bar("symbolizing");
        assert!(p.0.is_none());
        p.set_length(10);
        p.inc(5);
        p.finish();
        assert_eq!(while_busy("reading", || 7), 7);
    }

    #[test]
    fn a_bar_stays_hidden_for_the_first_second() {
        let bar = ProgressBar::with_draw_target(Some(10), ProgressDrawTarget::hidden());
        let p = Progress(Some((bar.clone(), SHOW_AFTER)));
        p.inc(3);
        assert!(bar.is_hidden());
        assert_eq!(bar.position(), 3);
    }
}
