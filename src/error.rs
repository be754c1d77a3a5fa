//! The crate's error type. Module errors convert into it; each message says what went wrong and,
//! where there is one, the exact fix.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::format::ParseError;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: ParseError,
    },
    /// perf_event_open and friends, with the fix in one sentence.
    #[error("{what} failed: {source}. {hint}")]
    Perf {
        what: String,
        #[source]
        source: std::io::Error,
        hint: String,
    },
    #[error("cannot run {command:?}: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Other(String),
}

impl Error {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub fn parse(path: &Path, source: ParseError) -> Self {
        Self::Parse {
            path: path.to_path_buf(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
