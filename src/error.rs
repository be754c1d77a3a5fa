//! The crate's error type. Module errors convert into it; each message says what went wrong and,
//! where there is one, the exact fix.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::format::ParseError;

/// Everything a jprof command can fail with; the message is what `jprof` prints.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing a file (or stdout) failed.
    #[error("{path}: {source}")]
    Io {
        /// The file, or `<stdout>`.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// An input file is malformed where reading cannot go on.
    #[error("{path}: {source}")]
    Parse {
        /// The input file.
        path: PathBuf,
        /// What was expected, and at which byte offset.
        #[source]
        source: ParseError,
    },
    /// perf_event_open and friends, with the fix in one sentence.
    #[error("{what} failed: {source}. {hint}")]
    Perf {
        /// The call that failed, e.g. `perf_event_open on CPU 3`.
        what: String,
        /// The kernel's error.
        #[source]
        source: std::io::Error,
        /// The fix, in one sentence (a sysctl, a capability, an option).
        hint: String,
    },
    /// The command to profile could not be started.
    #[error("cannot run {command:?}: {source}")]
    Spawn {
        /// Its command line, joined with spaces.
        command: String,
        /// Why it did not start.
        #[source]
        source: std::io::Error,
    },
    /// The command line asks for what cannot be done: a bad value, no target, a process jprof
    /// may not attach to.
    #[error("{0}")]
    Usage(String),
    /// Any other failure, described in full by its message.
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// An [`Error::Io`] on `path`.
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The message for a terminal: control characters (from names other users chose: paths,
    /// process names) shown as escapes instead of sent.
    pub fn terminal_message(&self) -> String {
        crate::terminal::safe(self.to_string().as_bytes()).into_owned()
    }

    /// An [`Error::Parse`] of `path`.
    pub(crate) fn parse(path: &Path, source: ParseError) -> Self {
        Self::Parse {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// jprof's result type: [`enum@Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;
