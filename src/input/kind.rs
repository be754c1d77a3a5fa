//! The kinds of input, told apart by their first bytes, and the options each takes: an option
//! an input cannot use is refused with the reason, never ignored.

use std::path::Path;

use super::perf_data;
use super::request::{Request, Tables, Weight};
use crate::error::{Error, Result};

/// What kind of file an input is, told by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A jprof recording (`jprof.data`).
    Recording,
    /// A perf.data from `perf record`.
    PerfData,
    /// A Mono log profiler file (`.mlpd`).
    Mlpd,
    /// An LLVM XRay log (FDR or basic mode).
    XrayLog,
}

/// The options an input kind takes; any other given is a usage error, never silently ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accepts {
    /// The `--weight`s it can draw; the first is what it is weighted by by default (for a
    /// .mlpd, calls when it has no samples).
    pub weights: &'static [Weight],
    /// `--comm`: it knows thread names.
    pub comm: bool,
    /// `--binary`: the instrumented binary that names an XRay log's functions.
    pub binary: bool,
    /// `--search-dir`: where a perf.data's side files, and binaries by build id, are looked
    /// for.
    pub search_dirs: bool,
    /// `--debug-files`: native code symbolized from separate debug files.
    pub debug_files: bool,
    /// `--sort`, `--limit`, `--callers`, `--callees`: its text report has jprof's tables.
    pub tables: bool,
}

impl Kind {
    /// Tells the kind from the file's first bytes; anything unknown is treated as a recording,
    /// whose reader gives the precise error.
    pub fn detect(path: &Path) -> Self {
        if perf_data::is_perf_data(path) {
            return Self::PerfData;
        }
        let mut head = [0u8; 8];
        let n = crate::foreign_file::open_named(path)
            .ok()
            .and_then(|mut f| {
                use std::io::Read;
                f.read(&mut head).ok()
            })
            .unwrap_or(0);
        let head = &head[..n];
        // Mono's log header starts with the magic 0x4D505A01 stored little-endian.
        if head.starts_with(&[0x01, 0x5A, 0x50, 0x4D]) {
            return Self::Mlpd;
        }
        // XRay: u16 version (1..=5) then u16 type (0 = naive/basic, 1 = FDR), in the byte
        // order of the machine that wrote it.
        if n >= 4 {
            let le = (
                u16::from_le_bytes([head[0], head[1]]),
                u16::from_le_bytes([head[2], head[3]]),
            );
            let be = (
                u16::from_be_bytes([head[0], head[1]]),
                u16::from_be_bytes([head[2], head[3]]),
            );
            if [le, be]
                .iter()
                .any(|&(version, kind)| (1..=5).contains(&version) && kind <= 1)
            {
                return Self::XrayLog;
            }
        }
        Self::Recording
    }

    /// What this kind of input is, in messages.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Recording => "a jprof recording",
            Self::PerfData => "a perf.data",
            Self::Mlpd => "a Mono .mlpd",
            Self::XrayLog => "an XRay log",
        }
    }

    /// The options this kind of input takes.
    pub(crate) fn accepts(self) -> Accepts {
        use Weight::*;
        let none = Accepts {
            weights: &[],
            comm: false,
            binary: false,
            search_dirs: false,
            debug_files: false,
            tables: false,
        };
        match self {
            Self::Recording => Accepts {
                weights: &[Samples, OffCpu, Wall],
                comm: true,
                search_dirs: true,
                debug_files: true,
                tables: true,
                ..none
            },
            Self::PerfData => Accepts {
                weights: &[Samples],
                comm: true,
                search_dirs: true,
                debug_files: true,
                tables: true,
                ..none
            },
            Self::Mlpd => Accepts {
                weights: &[Samples, Calls, Time],
                comm: true,
                ..none
            },
            Self::XrayLog => Accepts {
                weights: &[Time, Calls],
                binary: true,
                ..none
            },
        }
    }

    /// Refuses, with what to do instead, any option this kind of input does not take.
    pub fn check(self, request: &Request) -> Result<()> {
        use Weight::*;
        let accepts = self.accepts();
        let what = self.describe();
        let path = request.path.display();
        if let Some(weight) = request.weight {
            if !accepts.weights.contains(&weight) {
                let takes: Vec<String> = accepts
                    .weights
                    .iter()
                    .map(|w| format!("--weight {}", w.name()))
                    .collect();
                let why = match weight {
                    Calls | Time => {
                        "it needs instrumentation data: a Mono .mlpd or an XRay log".to_string()
                    }
                    OffCpu | Wall => {
                        "it needs a recording made with `jprof record --off-cpu`".to_string()
                    }
                    Samples => format!("{what} has calls, not samples"),
                };
                return Err(Error::Usage(format!(
                    "--weight {} does not apply to {path} ({what}): {why}; it takes {}",
                    weight.name(),
                    takes.join(" or ")
                )));
            }
        }
        let refuse = |option: &str, why: &str| {
            Err(Error::Usage(format!(
                "{option} does not apply to {path} ({what}): {why}"
            )))
        };
        if request.filters.comm.is_some() && !accepts.comm {
            return refuse(
                "--comm",
                "it has no thread names; select a thread with --tid",
            );
        }
        if request.binary.is_some() && !accepts.binary {
            return refuse(
                "--binary",
                "it names the instrumented binary of an XRay log",
            );
        }
        if !request.search_dirs.is_empty() && !accepts.search_dirs {
            return refuse(
                "--search-dir",
                "it is where the binaries, jitdumps and perf maps of a recording or perf.data \
                 are looked for",
            );
        }
        if request.tables != Tables::default() && !accepts.tables {
            return refuse(
                "--sort, --limit, --callers and --callees",
                "they shape the text report of a recording or perf.data; this input's text \
                 report is its own (mprof-report's or llvm-xray's tables)",
            );
        }
        if request.debug_files && !accepts.debug_files {
            return refuse(
                "--debug-files",
                "it has no native code to symbolize; its names come from the file itself",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Filters;

    fn request() -> Request {
        Request {
            path: "in.file".into(),
            ..Request::default()
        }
    }

    fn refusal(kind: Kind, request: &Request) -> String {
        match kind.check(request) {
            Err(Error::Usage(message)) => message,
            other => panic!("{kind:?} accepted {request:?}: {other:?}"),
        }
    }

    #[test]
    fn every_kind_takes_its_default_request() {
        for kind in [Kind::Recording, Kind::PerfData, Kind::Mlpd, Kind::XrayLog] {
            kind.check(&request()).unwrap();
            for &weight in kind.accepts().weights {
                let r = Request {
                    weight: Some(weight),
                    ..request()
                };
                kind.check(&r).unwrap();
            }
        }
    }

    #[test]
    fn an_option_an_input_cannot_use_is_refused_with_the_reason() {
        let binary = Request {
            binary: Some("app".into()),
            ..request()
        };
        let message = refusal(Kind::Recording, &binary);
        assert!(
            message.contains("--binary") && message.contains("XRay"),
            "{message}"
        );
        Kind::XrayLog.check(&binary).unwrap();

        let comm = Request {
            filters: Filters {
                comm: Some("main".into()),
                ..Filters::default()
            },
            ..request()
        };
        assert!(refusal(Kind::XrayLog, &comm).contains("--tid"));

        let calls = Request {
            weight: Some(Weight::Calls),
            ..request()
        };
        let message = refusal(Kind::Recording, &calls);
        assert!(
            message.contains("--weight samples or --weight off-cpu or --weight wall"),
            "{message}"
        );
        assert!(refusal(Kind::PerfData, &calls).contains("instrumentation"));

        let wall = Request {
            weight: Some(Weight::Wall),
            ..request()
        };
        assert!(refusal(Kind::Mlpd, &wall).contains("--off-cpu"));
        assert!(refusal(Kind::PerfData, &wall).contains("--off-cpu"));

        let samples = Request {
            weight: Some(Weight::Samples),
            ..request()
        };
        assert!(refusal(Kind::XrayLog, &samples).contains("calls, not samples"));

        let dirs = Request {
            search_dirs: vec!["/tmp".into()],
            ..request()
        };
        refusal(Kind::Mlpd, &dirs);
        Kind::Recording.check(&dirs).unwrap();
        Kind::PerfData.check(&dirs).unwrap();

        let tables = Request {
            tables: Tables {
                callers: Some("main".into()),
                ..Default::default()
            },
            ..request()
        };
        assert!(refusal(Kind::Mlpd, &tables).contains("--callers"));
        refusal(Kind::XrayLog, &tables);
        Kind::Recording.check(&tables).unwrap();
        Kind::PerfData.check(&tables).unwrap();

        let debug = Request {
            debug_files: true,
            ..request()
        };
        refusal(Kind::Mlpd, &debug);
        refusal(Kind::XrayLog, &debug);
    }
}
