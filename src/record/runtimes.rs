//! Runtime-specific set-up so `jprof record -- <runtime> ...` works with no flags. The table
//! [`RUNTIMES`] says, in one place, for every runtime jprof knows: how it is recognised (the
//! command, a script's interpreter, or a file it maps once it runs), how it is asked for the JIT
//! side files jprof reads (environment variables, so that runtimes started through launchers,
//! shells and `#!/usr/bin/env` shims are asked too), where those files go and how they are
//! removed. Asking follows the shared-host rule of [`super::places`]: no runtime is ever asked
//! to write through a name another user could plant (docs/jit.md, docs/security.md).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::places::{self, Place, PrivateDir};
use crate::format::recording::SideKind;

/// V8 flags for Node: a jitdump with unwinding info, and interpreter frames on the native stack
/// (so Ignition frames show as JS functions rather than one interpreter frame).
const NODE_FLAGS: &str = "--perf-prof --perf-prof-unwinding-info --interpreted-frames-native-stack";

/// HotSpot flags: RBP-chained compiled frames, and PC descriptors beyond safepoints.
const JAVA_FLAGS: &str =
    "-XX:+PreserveFramePointer -XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints";

/// Mono's log profiler options: JIT events (code ranges) only, into a per-process file.
const MONO_LOG: &str = "--profile=log:jit,output=";

/// The agent's file name, as cargo builds it next to jprof.
pub const AGENT_FILE: &str = "libjprof_agent.so";

/// Where a runtime writes the side files jprof asks it for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// jprof's JVMTI agent creates `jit-PID.dump` itself as a new file (never an existing name).
    Agent,
    /// V8: `./jit-PID.dump` and `isolate-0x…-PID-v8.log` in the working directory (no flag
    /// chooses another place in Node 20's V8).
    WorkingDir,
    /// A fixed name in `/tmp`, `{pid}` being the process's pid.
    Tmp(&'static str),
    /// A directory jprof chooses: its private directory.
    Private,
}

/// One runtime jprof knows.
#[derive(Debug)]
pub struct Runtime {
    /// Its name in notes.
    pub name: &'static str,
    /// Program names that run it (the command, a script's interpreter, the command of `sh -c`);
    /// a trailing `*` matches any rest.
    pub commands: &'static [&'static str],
    /// Files whose mapping shows a running process to be this runtime (file names, `*` as above).
    pub maps: &'static [&'static str],
    /// Where the files jprof asks for go.
    pub writes: &'static [Writes],
    /// What jprof sets (for the docs and notes).
    pub asked_with: &'static str,
    /// What a user adds by hand where jprof could not ask.
    pub by_hand: &'static str,
}

/// Every runtime jprof asks, in one place (docs/jit.md shows it as a table).
pub const RUNTIMES: &[Runtime] = &[
    Runtime {
        name: "java",
        commands: &["java"],
        maps: &["libjvm.so"],
        writes: &[Writes::Agent],
        asked_with: "JAVA_TOOL_OPTIONS=-agentpath:libjprof_agent.so -XX:+PreserveFramePointer …",
        by_hand: "`jprof record -p PID` attaches jprof's agent to a running JVM",
    },
    Runtime {
        name: "node",
        commands: &["node", "nodejs"],
        maps: &["node", "nodejs", "libnode.so*"],
        writes: &[Writes::WorkingDir],
        asked_with: "NODE_OPTIONS=--perf-prof --perf-prof-unwinding-info --interpreted-frames-native-stack",
        by_hand: "start node with --perf-prof --perf-prof-unwinding-info --interpreted-frames-native-stack, from a directory only you can write",
    },
    Runtime {
        name: "mono",
        commands: &["mono", "mono-sgen*"],
        maps: &["mono", "mono-sgen*", "libmonosgen*", "libmono-2.0*"],
        writes: &[Writes::Private, Writes::Tmp("perf-{pid}.map")],
        asked_with: "MONO_ENV_OPTIONS=--profile=log:jit,output=PRIVATE/jprof-mono-%p.mlpd --jitmap, MONO_DEBUG=disable_omit_fp",
        by_hand: "MONO_ENV_OPTIONS=--jitmap MONO_DEBUG=disable_omit_fp",
    },
    Runtime {
        name: "deno",
        commands: &["deno"],
        maps: &["deno"],
        writes: &[Writes::Private],
        asked_with: "DENO_V8_FLAGS=--perf-prof,--perf-prof-path=PRIVATE,--perf-prof-unwinding-info,--interpreted-frames-native-stack,--perf-basic-prof,--perf-basic-prof-path=PRIVATE,--no-logfile-per-isolate,--logfile=PRIVATE/v8.log",
        by_hand: "DENO_V8_FLAGS=--perf-prof,--perf-prof-path=DIR (a directory only you can write)",
    },
    Runtime {
        name: "erlang",
        commands: &["erl", "erlexec", "escript", "beam.smp"],
        maps: &["beam.smp", "beam.jit*"],
        writes: &[Writes::Tmp("perf-{pid}.map")],
        asked_with: "ERL_FLAGS=+JPperf map",
        by_hand: "ERL_FLAGS=\"+JPperf map\" (OTP 25 or later, JIT-enabled BEAM)",
    },
    Runtime {
        name: "dotnet",
        commands: &["dotnet"],
        maps: &["libcoreclr.so"],
        writes: &[
            Writes::Private,
            Writes::Tmp("perf-{pid}.map"),
            Writes::Tmp("perfinfo-{pid}.map"),
        ],
        asked_with: "DOTNET_PerfMapEnabled=1 COMPlus_PerfMapEnabled=1, DOTNET_PerfMapJitDumpPath=PRIVATE",
        by_hand: "COMPlus_PerfMapEnabled=1 (every .NET Core; from .NET 5 on also DOTNET_PerfMapEnabled=1); from .NET 8 on, DOTNET_PerfMapJitDumpPath=DIR (a directory only you can write)",
    },
    Runtime {
        name: "wasmtime",
        commands: &[],
        // The CLI, the C API's library, and the one PyPI's `wasmtime` embeds in Python.
        maps: &["wasmtime", "libwasmtime.so*", "_libwasmtime.so"],
        writes: &[],
        asked_with: "",
        by_hand: "`wasmtime run --profile=perfmap` (or jitdump); an embedding sets Config::profiler(ProfilingStrategy::PerfMap)",
    },
    Runtime {
        name: "python",
        commands: &["python*"],
        maps: &[
            "python3.12*",
            "python3.13*",
            "python3.14*",
            "python3.15*",
            "libpython3.12*",
            "libpython3.13*",
            "libpython3.14*",
            "libpython3.15*",
        ],
        writes: &[Writes::Tmp("perf-{pid}.map"), Writes::Tmp("jit-{pid}.dump")],
        asked_with: "PYTHONPERFSUPPORT=1; with --call-graph dwarf also PYTHON_PERF_JIT_SUPPORT=1",
        by_hand: "PYTHONPERFSUPPORT=1 (or python -X perf), from CPython 3.12 on",
    },
    Runtime {
        name: "python (before 3.12)",
        commands: &[],
        maps: &["python2*", "python3.*", "libpython2*", "libpython3.*"],
        writes: &[],
        asked_with: "",
        by_hand: "CPython 3.12 or later writes one (PYTHONPERFSUPPORT=1, which jprof sets where it can)",
    },
];

/// The runtime a program name runs (`python3.12`, `/usr/bin/node`).
pub fn runtime_of_command(program: &str) -> Option<&'static Runtime> {
    let name = program.rsplit('/').next().unwrap_or(program);
    RUNTIMES
        .iter()
        .find(|r| r.commands.iter().any(|p| matches_name(p, name)))
}

fn matches_name(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// The runtime a mapped file shows a process to be: HotSpot's libjvm, Node's executable or
/// libnode, Mono's runtime, …
pub fn runtime_of_mapping(filename: &str) -> Option<&'static str> {
    let name = filename.rsplit('/').next().unwrap_or(filename);
    RUNTIMES
        .iter()
        .find(|r| r.maps.iter().any(|p| matches_name(p, name)))
        .map(|r| r.name)
}

/// The CPython version a program or library name says (`python3.12`, `libpython3.13.so.1.0`).
fn python_version_in(name: &str) -> Option<(u32, u32)> {
    let rest = name
        .strip_prefix("lib")
        .unwrap_or(name)
        .strip_prefix("python")?;
    let (major, rest) = rest.split_once('.')?;
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    Some((major.parse().ok()?, rest[..digits].parse().ok()?))
}

/// Whether the launched command's tree runs CPython 3.12 or later (seen through launchers,
/// also those that fork it: `time`, `timeout`, a shell's last command): a python whose name, or else the name of the file it
/// resolves to, says 3.12 or later. A name that says no version and resolves to none (pyenv's
/// `python3` shim, a script) counts: every python jprof can name is 3.12 or later.
pub fn launches_cpython_3_12(argv: &[String]) -> bool {
    let Some(words) = launched_words(argv, Seen::InTheTree) else {
        return false;
    };
    let name = name_of(&words[0]);
    if runtime_of_command(&name).map(|r| r.name) != Some("python") {
        return false;
    }
    if let Some(version) = python_version_in(&name) {
        return version >= (3, 12);
    }
    match resolved_program(&words[0])
        .as_deref()
        .and_then(Path::file_name)
        .and_then(|n| python_version_in(&n.to_string_lossy()))
    {
        Some(version) => version >= (3, 12),
        None => true,
    }
}

/// The file the program `word` (the first of [`launched_words`]) is, links resolved: the
/// path when it names one, else the first in `PATH`.
fn resolved_program(word: &str) -> Option<PathBuf> {
    let path = if word.contains('/') {
        PathBuf::from(word)
    } else {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(word))
            .find(|p| p.is_file())?
    };
    std::fs::canonicalize(path).ok()
}

/// Whether the launched command starts a HotSpot JVM: `java`, or any other launcher of a JDK
/// (`javac`, `jshell`, `jar`: a program in a JDK's `bin/`, beside the launcher library
/// `lib/libjli.so`, or JDK 8's `lib/ARCH/jli/libjli.so`), seen through `env`, `nice` and the
/// like, `time`, `timeout`, `sh -c` (its last command) and `#!`.
pub fn launches_jvm(argv: &[String]) -> bool {
    let Some(words) = launched_words(argv, Seen::InTheTree) else {
        return false;
    };
    if runtime_of_command(&words[0]).map(|r| r.name) == Some("java") {
        return true;
    }
    let Some(home) = resolved_program(&words[0])
        .as_deref()
        .and_then(Path::parent)
        .filter(|bin| bin.file_name().is_some_and(|n| n == "bin"))
        .and_then(Path::parent)
        .map(Path::to_path_buf)
    else {
        return false;
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        other => other,
    };
    home.join("lib/libjli.so").is_file() || home.join(format!("lib/{arch}/jli/libjli.so")).is_file()
}

/// Whether process `pid` maps an executable file of `runtime` (as [`runtime_of_mapping`] names
/// it): `python` for CPython 3.12 or later (its executable or libpython says so), `java` for
/// HotSpot's libjvm.
pub fn runs(pid: u32, runtime: &str) -> bool {
    let maps = std::fs::read(format!("/proc/{pid}/maps")).unwrap_or_default();
    crate::format::procfs::parse_maps(&maps)
        .unwrap_or_default()
        .iter()
        .any(|m| {
            m.perms.as_bytes().get(2) == Some(&b'x') && runtime_of_mapping(m.path) == Some(runtime)
        })
}

fn runtime_named(name: &str) -> Option<&'static Runtime> {
    RUNTIMES.iter().find(|r| r.name == name)
}

/// The program the launched command really runs, seen through the launchers that exec it in the
/// same process: `env [VAR=value…] prog`, `nice`, `ionice`, `taskset`, `chrt`, `stdbuf` and
/// `nohup` with their options, `sh -c 'prog …'` (a shell runs a lone command in its own
/// process) and a script's `#!` line (`#!/usr/bin/env python3.12`).
pub fn program_run_by(argv: &[String]) -> Option<String> {
    Some(name_of(
        &launched_words(argv, Seen::InTheLaunchedProcess)?[0],
    ))
}

/// How far [`launched_words`] looks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// Only what replaces the launched process (its pid is known before it runs).
    InTheLaunchedProcess,
    /// Also what a launcher forks and waits for (`time`, `timeout`, a shell's last command):
    /// what the tree runs, for choices made for the whole tree (how stacks are sampled).
    InTheTree,
}

/// A launcher that runs the command given after its options: its options taking a value (as
/// a separate word, or joined with `=` or, for one letter, directly), how many words it takes
/// before the command, the options that make it act on a running process instead, and whether
/// it forks the command rather than exec it.
struct Launcher {
    name: &'static str,
    valued: &'static [&'static str],
    operands: usize,
    attaches: &'static [&'static str],
    forks: bool,
}

const LAUNCHERS: &[Launcher] = &[
    Launcher {
        name: "nice",
        valued: &["-n", "--adjustment"],
        operands: 0,
        attaches: &[],
        forks: false,
    },
    Launcher {
        name: "ionice",
        valued: &["-c", "-n", "--class", "--classdata"],
        operands: 0,
        attaches: &["-p", "-P", "-u", "--pid", "--pgid", "--uid"],
        forks: false,
    },
    Launcher {
        name: "taskset",
        valued: &[],
        operands: 1,
        attaches: &["-p", "--pid"],
        forks: false,
    },
    Launcher {
        name: "chrt",
        valued: &[
            "-T",
            "-P",
            "-D",
            "--sched-runtime",
            "--sched-period",
            "--sched-deadline",
        ],
        operands: 1,
        attaches: &["-p", "--pid"],
        forks: false,
    },
    Launcher {
        name: "stdbuf",
        valued: &["-i", "-o", "-e", "--input", "--output", "--error"],
        operands: 0,
        attaches: &[],
        forks: false,
    },
    Launcher {
        name: "nohup",
        valued: &[],
        operands: 0,
        attaches: &[],
        forks: false,
    },
    Launcher {
        name: "time",
        valued: &["-f", "-o", "--format", "--output"],
        operands: 0,
        attaches: &[],
        forks: true,
    },
    Launcher {
        name: "timeout",
        valued: &["-s", "-k", "--signal", "--kill-after"],
        operands: 1,
        attaches: &[],
        forks: true,
    },
];

impl Launcher {
    /// The command `words` (the launcher's own arguments) run, or `None` when they attach to a
    /// running process or give no command.
    fn command<'w>(&self, words: &'w [String]) -> Option<&'w [String]> {
        let mut i = 0;
        while let Some(word) = words.get(i) {
            if word == "--" {
                i += 1;
                break;
            }
            if !word.starts_with('-') || word == "-" {
                break;
            }
            let option = word.split_once('=').map_or(word.as_str(), |(o, _)| o);
            if self.attaches.contains(&option) {
                return None;
            }
            // `-n 5` takes the next word; `-n5`, `--adjustment=5` and flags do not.
            i += if self.valued.contains(&word.as_str()) {
                2
            } else {
                1
            };
        }
        let command = words.get(i + self.operands..)?;
        (!command.is_empty()).then_some(command)
    }
}

/// The file name of a command word.
fn name_of(word: &str) -> String {
    word.rsplit('/').next().unwrap_or(word).to_string()
}

/// The command line the launched command ends up running, from its program on (see
/// [`program_run_by`] and [`Seen`]).
fn launched_words(argv: &[String], seen: Seen) -> Option<Vec<String>> {
    let mut words: Vec<String> = argv.to_vec();
    for _ in 0..6 {
        let first = words.first()?.clone();
        let name = name_of(&first);
        let rest: Vec<String> = words[1..].to_vec();
        if runtime_of_command(&name).is_some() {
            // A runtime's name (also a version manager's shim that execs it, like pyenv's).
            return Some(words);
        } else if name == "env" {
            words = rest
                .into_iter()
                .skip_while(|w| w.starts_with('-') || w.contains('='))
                .collect();
        } else if let Some(launcher) = LAUNCHERS
            .iter()
            .find(|l| l.name == name && (seen == Seen::InTheTree || !l.forks))
        {
            words = launcher.command(&rest)?.to_vec();
        } else if matches!(name.as_str(), "sh" | "bash" | "dash")
            && rest.first().map(String::as_str) == Some("-c")
        {
            let command = rest.get(1)?;
            words = match seen {
                Seen::InTheLaunchedProcess => {
                    // Only a command the shell replaces itself with runs in the launched
                    // process: `exec prog …`, or for bash a lone simple command (dash forks
                    // for it).
                    let mut simple = command.split_whitespace().skip_while(|w| w.contains('='));
                    let execs = simple.next() == Some("exec")
                        || (shell_is_bash(&first) && !command.contains(SHELL_SYNTAX));
                    if !execs {
                        return None;
                    }
                    command
                        .split_whitespace()
                        .skip_while(|w| *w == "exec" || w.contains('='))
                        .map(str::to_string)
                        .collect()
                }
                Seen::InTheTree => last_shell_command(command, &rest[2..])?,
            };
        } else if let Some(interpreter) = shebang(Path::new(&first)) {
            let mut next: Vec<String> =
                interpreter.split_whitespace().map(str::to_string).collect();
            next.extend(rest);
            words = next;
        } else {
            return Some(words);
        }
    }
    None
}

/// The last simple command of the shell command `command` given `args` (`$0`, `$1`, …), which
/// the shell runs last and waits for: `cd dir && exec "$0" "$@"` runs `args`. `None` when it
/// ends in syntax this does not follow (a subshell, a substitution, a variable as the program).
fn last_shell_command(command: &str, args: &[String]) -> Option<Vec<String>> {
    let last = command
        .rsplit([';', '\n'])
        .map(|part| part.rsplit("&&").next().unwrap_or(part))
        .map(|part| part.rsplit("||").next().unwrap_or(part).trim())
        .find(|part| !part.is_empty())?;
    let mut words = last
        .split_whitespace()
        .skip_while(|w| *w == "exec" || (w.contains('=') && !w.starts_with(['"', '$'])))
        .peekable();
    match words.peek().map(|w| w.trim_matches('"')) {
        Some("$0") => Some(args.to_vec()),
        Some("$@") => Some(args.get(1..)?.to_vec()),
        Some(w) if !w.starts_with(['$', '(', '`', '{']) => {
            Some(words.map(str::to_string).collect())
        }
        _ => None,
    }
    .filter(|words| !words.is_empty())
}

/// The directories the `sh -c` commands of `argv` change into with `cd` (or `pushd`), resolved
/// from `cwd` in order, `~` and a bare `cd` from `home` (jprof's `$HOME`, which the shell
/// inherits, unless the command line sets `HOME` itself); `None` for one that cannot be told
/// from the text (a variable, `~user`, `-`, a glob). A runtime that writes in its working
/// directory writes there, wherever jprof started the command.
fn directories_entered(argv: &[String], cwd: &Path, home: Option<&Path>) -> Vec<Option<PathBuf>> {
    let mut entered = Vec::new();
    for (at, pair) in argv.windows(3).enumerate() {
        if !matches!(name_of(&pair[0]).as_str(), "sh" | "bash" | "dash") || pair[1] != "-c" {
            continue;
        }
        let sets_home =
            argv[..at].iter().any(|w| w.starts_with("HOME=")) || pair[2].contains("HOME=");
        let home = home.filter(|h| h.is_absolute() && !sets_home);
        let mut here = Some(cwd.to_path_buf());
        for part in pair[2].split([';', '\n', '&', '|', '(', ')', '{', '}']) {
            let mut words = part.split_whitespace();
            if !matches!(words.next(), Some("cd" | "pushd")) {
                continue;
            }
            let target = words.next().map(|w| w.trim_matches(['"', '\'']));
            here = match (here, target) {
                (_, None | Some("~")) => home.map(Path::to_path_buf),
                (_, Some(dir)) if dir.contains(['$', '`', '*', '?', '[']) => None,
                (_, Some(dir)) if dir.starts_with("~/") => home.map(|h| h.join(&dir[2..])),
                (_, Some(dir)) if dir.starts_with('/') => Some(PathBuf::from(dir)),
                (Some(base), Some(dir)) if !dir.is_empty() && !dir.starts_with(['~', '-']) => {
                    Some(base.join(dir))
                }
                _ => None,
            };
            entered.push(here.clone());
        }
    }
    entered
}

/// Characters that make a shell command more than one simple command.
const SHELL_SYNTAX: &[char] = &[';', '&', '|', '`', '$', '(', ')', '<', '>', '\n'];

/// Whether the shell `program` (as named on the command line) is bash, which execs a lone
/// simple command given with `-c`.
fn shell_is_bash(program: &str) -> bool {
    let path = if program.contains('/') {
        PathBuf::from(program)
    } else {
        match std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join(program))
            .find(|p| p.is_file())
        {
            Some(p) => p,
            None => return false,
        }
    };
    std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.file_name().map(|n| n == "bash"))
        .unwrap_or(false)
}

/// The `#!` line of a script the command names (found on PATH as exec would).
fn shebang(program: &Path) -> Option<String> {
    let path = if program.components().count() > 1 {
        program.to_path_buf()
    } else {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(program))
            .find(|p| p.is_file())?
    };
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Never blocks on a FIFO named as the command: opened non-blocking, read only if regular.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut head = [0u8; 256];
    let n = (&file).read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    Some(String::from_utf8_lossy(line).trim().to_string())
}

/// Why a runtime was not asked, and what the user can do.
#[derive(Clone, Debug)]
pub struct NotAsked {
    /// The reason, for the summary.
    pub why: String,
}

/// What jprof adds to the launched command's environment, and what it made for it.
#[derive(Debug, Default)]
pub struct RuntimeSetup {
    /// Variables to set in the target's environment.
    pub env: Vec<(String, String)>,
    /// Things the user should know (for the summary), e.g. a missing agent.
    pub notes: Vec<String>,
    /// The private directory runtimes write into (when one was needed and could be made).
    pub private_dir: Option<PrivateDir>,
    /// Which runtimes were asked to write where.
    pub asking: Asking,
    /// Runtimes not asked, and why.
    pub not_asked: BTreeMap<&'static str, NotAsked>,
    /// Java: the agent's notes, said only when a JVM runs.
    java_notes: Vec<String>,
    /// `--keep-side-files`: what jprof made stays.
    keep: bool,
    /// The places it was prepared for.
    places: Option<Places>,
    /// Prepared for a launch (not `-p`, where nothing was asked).
    launched: bool,
    /// The stacks were collected as a JVM's (its deep frames read): a JVM seen in a launch
    /// without it gets a note.
    pub jvm_frames: bool,
    /// Without `jvm_frames`: a JVM the launch starts gets its frames read once it maps
    /// libjvm.so (`DeepFrames::watch`); a note says so.
    pub jvms_watched: bool,
}

impl Drop for RuntimeSetup {
    /// A launch that failed or ended leaves nothing jprof made behind (unless kept).
    fn drop(&mut self) {
        if !self.keep {
            self.remove_private_dir();
        }
    }
}

/// jprof's JVMTI agent: `$JPROF_AGENT`, else next to the jprof executable, else one directory
/// up (test binaries run from `target/<profile>/deps/`).
pub fn find_agent() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("JPROF_AGENT").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join(AGENT_FILE), dir.join("..").join(AGENT_FILE)]
        .into_iter()
        .find(|p| p.is_file())
}

/// `JAVA_TOOL_OPTIONS` for HotSpot with `agent`, and notes when the agent is missing.
fn java_options(agent: Option<PathBuf>) -> (String, Vec<String>) {
    match &agent {
        Some(path) if path.is_file() => {
            let option = format!("-agentpath:{}", path.display());
            // HotSpot splits JAVA_TOOL_OPTIONS on white space but honours double quotes.
            let flags = if option.contains(char::is_whitespace) {
                format!("\"{option}\" {JAVA_FLAGS}")
            } else {
                format!("{option} {JAVA_FLAGS}")
            };
            (flags, Vec::new())
        }
        Some(path) => (
            JAVA_FLAGS.to_string(),
            vec![format!(
                "JPROF_AGENT={} is not a file: Java JIT frames will not be named",
                path.display()
            )],
        ),
        None => (
            JAVA_FLAGS.to_string(),
            vec![format!(
                "{AGENT_FILE} was not found next to jprof (or set JPROF_AGENT): Java JIT frames will not be named"
            )],
        ),
    }
}

/// Whether the user's own `MONO_ENV_OPTIONS` (jprof's environment) holds `option`.
fn user_mono_option(option: &str) -> bool {
    std::env::var("MONO_ENV_OPTIONS").is_ok_and(|o| o.contains(option))
}

/// Appends flags to a variable, keeping what the user already had.
fn extend_var(name: &str, extra: &str) -> (String, String) {
    let value = match std::env::var(name) {
        Ok(old) if !old.trim().is_empty() => format!("{old} {extra}"),
        _ => extra.to_string(),
    };
    (name.to_string(), value)
}

/// Which runtimes jprof asked, and where they write: what decides which files are removed.
#[derive(Clone, Debug, Default)]
pub struct Asking {
    /// Runtimes asked, by name.
    pub asked: BTreeSet<&'static str>,
    /// The directory V8 writes in when it was asked (jprof's working directory).
    pub v8_dir: Option<PathBuf>,
    /// jprof's private directory for runtimes that take a path.
    pub private_dir: Option<PathBuf>,
    /// The fixed `/tmp` names asked for, by runtime.
    pub tmp_names: BTreeSet<(&'static str, &'static str)>,
}

/// Where side files may go for this launch: who can plant names in the working directory and
/// in `/tmp`, and what the launched program runs.
#[derive(Debug)]
pub struct Places {
    /// jprof's working directory (the target's, inherited) and who can plant names there.
    pub cwd: (PathBuf, Place),
    /// The directories a `sh -c` of the command line changes into (`cd DIR`), and who can
    /// plant names there; `None` for a `cd` whose directory jprof cannot tell (`cd "$D"`).
    pub entered: Vec<(PathBuf, Option<Place>)>,
    /// `/tmp` and who can plant names there.
    pub tmp: Place,
    /// The runtime the launched command itself runs.
    pub target: Option<&'static str>,
    /// Stacks are unwound with DWARF (`--call-graph dwarf`).
    pub dwarf: bool,
}

impl Places {
    /// This launch's places.
    pub fn of(argv: &[String], dwarf: bool) -> Self {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let entered = directories_entered(argv, &cwd, home.as_deref())
            .into_iter()
            .map(|dir| {
                let place = dir.as_ref().map(|d| places::place_of(d));
                (dir.unwrap_or_default(), place)
            })
            .collect();
        Self {
            entered,
            cwd: (cwd, places::place_of(Path::new("."))),
            tmp: places::place_of(Path::new("/tmp")),
            target: program_run_by(argv)
                .and_then(|p| runtime_of_command(&p))
                .map(|r| r.name),
            dwarf,
        }
    }
}

impl RuntimeSetup {
    /// Whether `runtime` may be asked for the fixed `/tmp` name `pattern`: only in a `/tmp` no
    /// one else can plant into. The request reaches every process the launched one starts (a
    /// variable is inherited, a forked CPython opens its map again for its new pid), each
    /// opening the name for a pid jprof cannot foresee, so creating the launched pid's name
    /// first protects only that one: in a sticky `/tmp` the kernel does not guard, another
    /// user's link there is followed (the BEAM, Mono, .NET and CPython 3.13's jitdump truncate
    /// through links), their FIFO blocks the runtime in `open` for as long as they like, and
    /// their file receives its output (CPython 3.12's perf map, opened `O_NOFOLLOW|O_APPEND`).
    fn may_write_tmp(&mut self, runtime: &'static str, pattern: &'static str, at: &Places) -> bool {
        let name = pattern.replace("{pid}", "PID");
        match at.tmp {
            Place::Private | Place::KernelGuarded => {
                self.asking.tmp_names.insert((runtime, pattern));
                true
            }
            Place::Sticky => {
                let which = if at.target == Some(runtime) {
                    format!("every {runtime} process the command starts")
                } else {
                    format!("a {runtime} process the command starts")
                };
                self.refuse(runtime, format!(
                    "other users can put names in /tmp (fs.protected_symlinks/protected_regular/protected_fifos are off), and {which} would open /tmp/{name} for its own pid, which jprof cannot create first: a FIFO planted there blocks it, a file planted there receives what it writes, a link planted there is followed by runtimes that open through links; sysctl -w fs.protected_symlinks=1 fs.protected_regular=1 fs.protected_fifos=1 (systemd's default) lets jprof ask it"
                ));
                false
            }
            Place::Open => {
                self.refuse(
                    runtime,
                    format!(
                        "{} (it writes /tmp/{name})",
                        places::why_open(Path::new("/tmp"))
                    ),
                );
                false
            }
        }
    }

    fn refuse(&mut self, runtime: &'static str, why: String) {
        self.not_asked.entry(runtime).or_insert(NotAsked { why });
    }

    /// The private directory, made on first use; None (with the runtime refused) if it
    /// cannot be made.
    fn private(&mut self, runtime: &'static str) -> Option<PathBuf> {
        if self.private_dir.is_none() {
            match PrivateDir::create() {
                Ok(dir) => {
                    self.asking.private_dir = Some(dir.path.clone());
                    self.private_dir = Some(dir);
                }
                Err(e) => {
                    self.refuse(
                        runtime,
                        format!("jprof could not make its private directory: {e}"),
                    );
                    return None;
                }
            }
        }
        self.private_dir.as_ref().map(|d| d.path.clone())
    }

    /// The side files stay (`--keep-side-files`): nothing jprof made is removed when dropped.
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Removes the private directory and what runtimes wrote in it.
    pub fn remove_private_dir(&mut self) {
        if let Some(dir) = self.private_dir.take() {
            dir.remove();
        }
    }
}

/// The set-up for a launched command: every runtime that can be asked safely is asked, whatever
/// the command is, so a runtime started through a launcher (`javac`, an npm shim, `sh -c`,
/// Debian's `mcs` wrapper) is prepared too; a process that is no runtime ignores the variables.
pub fn prepare(argv: &[String], dwarf: bool) -> RuntimeSetup {
    let at = Places::of(argv, dwarf);
    let mut setup = prepare_at(&at);
    setup.places = Some(at);
    setup
}

/// [`prepare`] for the given places.
pub fn prepare_at(at: &Places) -> RuntimeSetup {
    let mut setup = RuntimeSetup::default();
    setup.launched = true;

    let (java, java_notes) = java_options(find_agent());
    setup.env.push(extend_var("JAVA_TOOL_OPTIONS", &java));
    setup.asking.asked.insert("java");
    if at.target == Some("java") {
        setup.notes.extend(java_notes.iter().cloned());
    }
    setup.java_notes = java_notes;

    // V8 writes ./jit-PID.dump and an isolate log in the working directory, through links
    // and into existing files: only where no other user can put a name, and only when the
    // command line's shell changes into no other directory (`sh -c 'cd /shared && node …'`).
    let safe = |place: Place| matches!(place, Place::Private | Place::KernelGuarded);
    let elsewhere = at
        .entered
        .iter()
        .find(|(_, place)| !place.is_some_and(safe));
    match (at.cwd.1, elsewhere) {
        (cwd, None) if safe(cwd) => {
            setup.env.push(extend_var("NODE_OPTIONS", NODE_FLAGS));
            setup.asking.asked.insert("node");
            setup.asking.v8_dir = Some(at.cwd.0.clone());
        }
        (_, None) => setup.refuse(
            "node",
            format!(
                "V8 writes ./jit-PID.dump and its log in the working directory, and {}",
                places::why_open(&at.cwd.0)
            ),
        ),
        (_, Some((dir, Some(_)))) => setup.refuse(
            "node",
            format!(
                "V8 writes ./jit-PID.dump and its log in the working directory, the command changes into {}, and {}",
                dir.display(),
                places::why_open(dir)
            ),
        ),
        (_, Some((_, None))) => setup.refuse(
            "node",
            "V8 writes ./jit-PID.dump and its log in the working directory, and the command changes into a directory jprof cannot tell from the command line (a cd to a variable or ~)".to_string(),
        ),
    }

    mono(&mut setup, at);
    python(&mut setup, at);
    deno(&mut setup);
    erlang(&mut setup, at);
    dotnet(&mut setup, at);
    setup
}

/// Deno's V8 takes a directory for its jitdump (`--perf-prof-path`) and perf map
/// (`--perf-basic-prof-path`) and a name for its log: all in jprof's private directory.
/// `DENO_V8_FLAGS` separates flags with commas.
///
/// The perf map too: V8 buffers its jitdump writes (megabytes) and Deno exits without closing
/// the file, so the code compiled last — a short program's hot loop — never reached the
/// jitdump (10% of the samples in JIT code named); V8 writes the perf map line by line, and
/// the index takes its name where the jitdump has none.
fn deno(setup: &mut RuntimeSetup) {
    let Some(dir) = setup.private("deno") else {
        return;
    };
    let dir = dir.display();
    let flags = format!(
        "--perf-prof,--perf-prof-path={dir},--perf-prof-unwinding-info,--interpreted-frames-native-stack,--perf-basic-prof,--perf-basic-prof-path={dir},--no-logfile-per-isolate,--logfile={dir}/v8.log"
    );
    let value = match std::env::var("DENO_V8_FLAGS") {
        Ok(old) if !old.trim().is_empty() => format!("{old},{flags}"),
        _ => flags,
    };
    setup.env.push(("DENO_V8_FLAGS".into(), value));
    setup.asking.asked.insert("deno");
}

/// The BEAM JIT (OTP 25+) writes `/tmp/perf-PID.map` with `+JPperf map`.
fn erlang(setup: &mut RuntimeSetup, at: &Places) {
    if setup.may_write_tmp("erlang", "perf-{pid}.map", at) {
        setup.env.push(extend_var("ERL_FLAGS", "+JPperf map"));
        setup.asking.asked.insert("erlang");
    }
}

/// CoreCLR: `PerfMapEnabled` (`COMPlus_` before .NET 5, `DOTNET_` since). From .NET 8 on,
/// `PerfMapJitDumpPath` places the perf map, `perfinfo` and jitdump (in jprof's private
/// directory); before, the perf map and `perfinfo-PID.map` go to `$TMPDIR` or `/tmp`, which
/// follows the fixed-name rule.
fn dotnet(setup: &mut RuntimeSetup, at: &Places) {
    if let Some(tmpdir) = std::env::var_os("TMPDIR").filter(|t| Path::new(t) != Path::new("/tmp")) {
        let tmpdir = PathBuf::from(tmpdir);
        if !matches!(
            places::place_of(&tmpdir),
            Place::Private | Place::KernelGuarded
        ) {
            setup.refuse(
                "dotnet",
                format!(
                    ".NET before 8 writes perf-PID.map in TMPDIR, and {}",
                    places::why_open(&tmpdir)
                ),
            );
            return;
        }
        setup.asking.tmp_names.insert(("dotnet", "perf-{pid}.map"));
        setup
            .asking
            .tmp_names
            .insert(("dotnet", "perfinfo-{pid}.map"));
    } else if !(setup.may_write_tmp("dotnet", "perf-{pid}.map", at)
        && setup.may_write_tmp("dotnet", "perfinfo-{pid}.map", at))
    {
        return;
    }
    let Some(dir) = setup.private("dotnet") else {
        return;
    };
    for prefix in ["DOTNET", "COMPlus"] {
        setup
            .env
            .push((format!("{prefix}_PerfMapEnabled"), "1".into()));
        setup.env.push((
            format!("{prefix}_PerfMapJitDumpPath"),
            dir.display().to_string(),
        ));
    }
    setup.asking.asked.insert("dotnet");
}

/// CPython 3.12+: perf trampolines that write `/tmp/perf-PID.map` (`PYTHONPERFSUPPORT`); for
/// DWARF unwinding, 3.13's jitdump mode (`PYTHON_PERF_JIT_SUPPORT`, `/tmp/jit-PID.dump`, with
/// unwind info for its trampolines), which 3.13 prefers when both are set and 3.12 ignores.
fn python(setup: &mut RuntimeSetup, at: &Places) {
    if !setup.may_write_tmp("python", "perf-{pid}.map", at) {
        return;
    }
    if at.dwarf {
        if !setup.may_write_tmp("python", "jit-{pid}.dump", at) {
            return;
        }
        setup
            .env
            .push(("PYTHON_PERF_JIT_SUPPORT".into(), "1".into()));
    }
    setup.env.push(("PYTHONPERFSUPPORT".into(), "1".into()));
    setup.asking.asked.insert("python");
}

fn mono(setup: &mut RuntimeSetup, at: &Places) {
    let mut options = Vec::new();
    let own_log = user_mono_option("--profile=log");
    if !own_log {
        if let Some(dir) = setup.private("mono") {
            options.push(format!(
                "{MONO_LOG}{}",
                dir.join("jprof-mono-%p.mlpd").display()
            ));
        }
    }
    let jitmap = setup.may_write_tmp("mono", "perf-{pid}.map", at);
    if jitmap {
        options.push("--jitmap".to_string());
    }
    // Mono runs one log profiler: the user's stays, and names come from the perf map, if any.
    if own_log && jitmap {
        setup.notes.push(
            "MONO_ENV_OPTIONS already runs the log profiler: jprof added only --jitmap, so JIT names come from the perf map"
                .to_string(),
        );
    } else if own_log {
        setup.notes.push(
            "MONO_ENV_OPTIONS already runs the log profiler, and jprof could not ask for --jitmap: Mono's JIT frames are not named"
                .to_string(),
        );
    }
    if !options.is_empty() {
        setup
            .env
            .push(extend_var("MONO_ENV_OPTIONS", &options.join(" ")));
    }
    let debug = match std::env::var("MONO_DEBUG") {
        Ok(old) if !old.trim().is_empty() => format!("{old},disable_omit_fp"),
        _ => "disable_omit_fp".to_string(),
    };
    setup.env.push(("MONO_DEBUG".to_string(), debug));
    setup.asking.asked.insert("mono");
}

/// The .mlpd jprof asks Mono's process `pid` to write in the private directory `dir`.
pub fn mono_log_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("jprof-mono-{pid}.mlpd"))
}

/// Whether Mono's log profiler library is installed (Debian: `libmono-profiler`).
pub fn mono_log_profiler_installed() -> bool {
    ["/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/local/lib"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|d| d.flatten())
        .any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("libmono-profiler-log.so"))
        })
}

/// One line per runtime process seen: how it was set up, or why its JIT code will not be
/// named and the fix.
pub fn observed_notes(
    runtimes: &BTreeMap<u32, &'static str>,
    files: &BTreeMap<u32, Vec<SideKind>>,
    setup: &RuntimeSetup,
) -> Vec<String> {
    let mut notes = Vec::new();
    for (&pid, &runtime) in runtimes {
        let kinds = files.get(&pid).map_or(&[][..], Vec::as_slice);
        // Mono: its own log (the perf map is the second source).
        let has_files = match runtime {
            "mono" => kinds.contains(&SideKind::MLPD),
            _ => !kinds.is_empty(),
        };
        if !setup.launched && runtime != "java" {
            // `-p`: the process started before jprof, with whatever its user gave it; jprof
            // set nothing, so no variable of jprof's is named.
            if let Some(r) = runtime_named(runtime) {
                notes.push(match (!kinds.is_empty(), r.asked_with.is_empty()) {
                    (true, _) => format!(
                        "{runtime} (pid {pid}): it writes its JIT names (it was started with them turned on)"
                    ),
                    (false, true) => format!(
                        "{runtime} (pid {pid}): it was already running, so jprof could not ask it for JIT names; its JIT frames are not named (next time: {})",
                        r.by_hand
                    ),
                    (false, false) => format!(
                        "{runtime} (pid {pid}): it was already running, so jprof could not ask it for JIT names; its JIT frames are not named (next time: {}; or start it under `jprof record -- …`, which asks it)",
                        r.by_hand
                    ),
                });
            }
            continue;
        }
        if let Some(not) = setup.not_asked.get(runtime) {
            // Mono not asked for --jitmap is still asked for its log (below when it is missing).
            if runtime == "mono" && has_files {
                notes.push(format!(
                    "mono (pid {pid}): the log profiler named managed code (no --jitmap perf map: {})",
                    not.why
                ));
                continue;
            } else if has_files {
                // Turned on by the user's own variables (`ERL_FLAGS="+JPperf map"`): named.
                notes.push(format!(
                    "{runtime} (pid {pid}): it wrote its JIT names, turned on by its own environment (jprof did not ask it: {})",
                    not.why
                ));
                continue;
            } else if runtime != "mono" || !setup.asking.asked.contains("mono") {
                let fix = runtime_named(runtime).map_or("", |r| r.by_hand);
                notes.push(format!(
                    "{runtime} (pid {pid}): jprof did not ask it for JIT names: {}; its JIT frames are not named (fix: {fix})",
                    not.why
                ));
                continue;
            }
        }
        let line = match (runtime, has_files) {
            ("java", true) => format!("java (pid {pid}): jprof's JVMTI agent wrote its jitdump"),
            ("java", false) => match setup.java_notes.is_empty() {
                true => format!("java (pid {pid}): no jitdump from jprof's agent (the JVM's environment was cleared, or it refused the agent): Java JIT frames are not named; `jprof record -p {pid}` attaches it"),
                false => format!("java (pid {pid}): {AGENT_FILE} was not found next to jprof (or set JPROF_AGENT): Java JIT frames are not named"),
            },
            ("node", true) => format!("node (pid {pid}): V8 wrote its jitdump (NODE_OPTIONS {NODE_FLAGS})"),
            ("node", false) => format!("node (pid {pid}): no jitdump (NODE_OPTIONS was overridden or cleared before Node started): JavaScript frames are not named; run it with {NODE_FLAGS}"),
            ("mono", true) => format!("mono (pid {pid}): the log profiler and --jitmap named managed code"),
            ("mono", false) if !mono_log_profiler_installed() => format!("mono (pid {pid}): Mono's log profiler library is missing, so managed frames are named from --jitmap only: apt-get install libmono-profiler"),
            ("mono", false) if user_mono_option("--profile=log") => format!("mono (pid {pid}): managed frames named from --jitmap (the log profiler in MONO_ENV_OPTIONS is the user's: jprof does not read its file)"),
            ("mono", false) => format!("mono (pid {pid}): no log profiler file (MONO_ENV_OPTIONS was overridden or cleared): managed frames named from --jitmap only"),
            ("python", true) if kinds.contains(&SideKind::JITDUMP) => format!("python (pid {pid}): CPython wrote its jitdump (PYTHON_PERF_JIT_SUPPORT=1)"),
            ("python", true) => format!("python (pid {pid}): CPython wrote its perf map (PYTHONPERFSUPPORT=1)"),
            ("python", false) => format!("python (pid {pid}): no perf map from CPython (PYTHONPERFSUPPORT was cleared, or -X perf turned off): Python functions are not named; run it with PYTHONPERFSUPPORT=1"),
            ("python (before 3.12)", _) => format!("python (pid {pid}) is CPython older than 3.12, which has no perf map: Python functions are not named, only its C frames; {}", runtime_named(runtime).map_or("", |r| r.by_hand)),
            (_, true) => match runtime_named(runtime) {
                Some(r) => format!("{runtime} (pid {pid}): it wrote its JIT names ({})", r.asked_with),
                None => continue,
            },
            (_, false) => match runtime_named(runtime) {
                Some(r) if setup.asking.asked.contains(runtime) => format!(
                    "{runtime} (pid {pid}): no JIT names from it though jprof asked ({}): the variable was cleared or overridden before it started; its JIT frames are not named",
                    r.asked_with
                ),
                Some(r) if r.asked_with.is_empty() => format!(
                    "{runtime} (pid {pid}): jprof cannot ask it for JIT names, so its JIT frames are not named: {}",
                    r.by_hand
                ),
                _ => continue,
            },
        };
        notes.push(line);
    }
    notes
}

/// Whether jprof asked `runtime` to write `path` for process `nspid` (the pid in its own
/// namespace): only such a file, once read into the recording, is removed.
pub fn asked_for(setup: &Asking, runtime: &str, nspid: u32, path: &Path) -> bool {
    if !setup.asked.contains(runtime) {
        return false;
    }
    let Some(r) = runtime_named(runtime) else {
        return false;
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let dir = path.parent();
    r.writes.iter().any(|w| match w {
        Writes::Agent => crate::format::jitdump::is_jitdump_path(name) == Some(nspid),
        Writes::WorkingDir => {
            name == format!("jit-{nspid}.dump")
                && dir.is_some_and(|d| setup.v8_dir.as_deref().is_some_and(|v| same_dir(d, v)))
        }
        Writes::Tmp(pattern) => {
            // .NET before 8 uses $TMPDIR when set (checked like /tmp before it was asked).
            let tmp = dir == Some(Path::new("/tmp"))
                || (r.name == "dotnet" && dir == Some(std::env::temp_dir().as_path()));
            tmp && setup.tmp_names.contains(&(r.name, *pattern))
                && name == pattern.replace("{pid}", &nspid.to_string())
        }
        Writes::Private => {
            dir.is_some_and(|d| setup.private_dir.as_deref().is_some_and(|p| same_dir(d, p)))
        }
    })
}

fn same_dir(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// The side files of process `nspid` that jprof asked for but does not read (so it never
/// holds their identity): .NET's `/tmp/perfinfo-PID.map`. Removed only as a regular file of
/// the process's user.
pub fn unread_side_files(setup: &Asking, runtime: &str, nspid: u32) -> Vec<PathBuf> {
    match runtime {
        "dotnet" if setup.tmp_names.contains(&("dotnet", "perfinfo-{pid}.map")) => {
            vec![std::env::temp_dir().join(format!("perfinfo-{nspid}.map"))]
        }
        _ => Vec::new(),
    }
}

/// V8's isolate logs of process `nspid` in the directory where jprof asked V8 to write.
pub fn v8_logs(setup: &Asking, nspid: u32) -> Vec<PathBuf> {
    let Some(dir) = &setup.v8_dir else {
        return Vec::new();
    };
    let suffix = format!("-{nspid}-v8.log");
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("isolate-0x") && n.ends_with(&suffix))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(cwd: Place, tmp: Place, target: Option<&'static str>) -> Places {
        Places {
            cwd: (PathBuf::from("/work/dir"), cwd),
            entered: Vec::new(),
            tmp,
            target,
            dwarf: false,
        }
    }

    #[test]
    fn mono_gets_the_log_profiler_the_jit_map_and_frame_pointers() {
        for program in ["mono", "/usr/bin/mono-sgen"] {
            let setup = prepare_at(&places(
                Place::Private,
                Place::KernelGuarded,
                program_run_by(&[program.to_string()])
                    .and_then(|p| runtime_of_command(&p))
                    .map(|r| r.name),
            ));
            let var = |name: &str| {
                setup
                    .env
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            assert!(var("MONO_ENV_OPTIONS").ends_with("--jitmap"));
            assert!(var("MONO_DEBUG").ends_with("disable_omit_fp"));
            if !std::env::var("MONO_ENV_OPTIONS").is_ok_and(|o| o.contains("--profile=log")) {
                let dir = setup.private_dir.as_ref().unwrap().path.clone();
                let output = format!("{MONO_LOG}{}", dir.join("jprof-mono-%p.mlpd").display());
                assert!(var("MONO_ENV_OPTIONS").contains(&output), "{output}");
                let log = mono_log_path(&dir, 4242);
                assert!(asked_for(&setup.asking, "mono", 4242, &log));
            }
        }
    }

    #[test]
    fn java_gets_the_agent_and_the_hotspot_flags() {
        let agent = std::env::current_exe().unwrap();
        let (value, notes) = java_options(Some(agent.clone()));
        assert!(value.contains(&format!("-agentpath:{}", agent.display())));
        assert!(value.ends_with(JAVA_FLAGS));
        assert!(notes.is_empty());
    }

    #[test]
    fn an_agent_path_with_spaces_is_quoted() {
        let dir = std::env::temp_dir().join(format!("jprof runtimes {}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let agent = dir.join(AGENT_FILE);
        std::fs::write(&agent, b"").unwrap();
        let value = java_options(Some(agent.clone())).0;
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            value.starts_with(&format!("\"-agentpath:{}\" ", agent.display())),
            "{value}"
        );
    }

    #[test]
    fn java_without_the_agent_says_so() {
        let (value, notes) = java_options(None);
        assert!(!value.contains("-agentpath"));
        assert!(notes[0].contains(AGENT_FILE));
        let (_, missing) = java_options(Some(PathBuf::from("/nonexistent/agent.so")));
        assert!(missing[0].contains("not a file"));
    }

    #[test]
    fn every_command_gets_every_runtimes_variables() {
        for launcher in [
            "java",
            "node",
            "javac",
            "sh",
            "mcs",
            "./node_modules/.bin/tsc",
        ] {
            let argv = [launcher.to_string(), "x".to_string()];
            let target = program_run_by(&argv)
                .and_then(|p| runtime_of_command(&p))
                .map(|r| r.name);
            let setup = prepare_at(&places(Place::Private, Place::KernelGuarded, target));
            let names: Vec<&str> = setup.env.iter().map(|(k, _)| k.as_str()).collect();
            for var in [
                "NODE_OPTIONS",
                "JAVA_TOOL_OPTIONS",
                "MONO_ENV_OPTIONS",
                "MONO_DEBUG",
            ] {
                assert!(names.contains(&var), "{launcher}: {names:?}");
            }
        }
    }

    fn var(setup: &RuntimeSetup, name: &str) -> Option<String> {
        setup
            .env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    /// Issue 24: V8 writes ./jit-PID.dump (and its log) following links, in a directory it
    /// does not let jprof choose: asked only where no other user can plant a name.
    #[test]
    fn v8_is_asked_only_in_a_working_directory_no_one_else_can_write() {
        for cwd in [Place::Private, Place::KernelGuarded] {
            let setup = prepare_at(&places(cwd, Place::Sticky, Some("node")));
            assert!(var(&setup, "NODE_OPTIONS").is_some_and(|v| v.contains("--perf-prof")));
            assert!(setup.asking.asked.contains("node"));
        }
        for cwd in [Place::Sticky, Place::Open] {
            let setup = prepare_at(&places(cwd, Place::Private, Some("node")));
            assert!(var(&setup, "NODE_OPTIONS").is_none_or(|v| !v.contains("--perf-prof")));
            assert!(!setup.asking.asked.contains("node"));
            assert!(setup.not_asked["node"].why.contains("working directory"));
        }
    }

    /// A `sh -c` that changes directory before starting node: V8 writes in that directory, so
    /// it is judged like the working directory, and a `cd` jprof cannot follow is not trusted.
    #[test]
    fn v8_is_not_asked_when_the_command_changes_into_a_directory_others_can_write() {
        let words = |s: &[&str]| s.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let cwd = Path::new("/work/dir");
        let home = Some(Path::new("/home/me"));
        assert_eq!(
            directories_entered(
                &words(&[
                    "env",
                    "X=1",
                    "sh",
                    "-c",
                    "cd src && cd '../out' ; exec node a.js"
                ]),
                cwd,
                home
            ),
            vec![
                Some(PathBuf::from("/work/dir/src")),
                Some(PathBuf::from("/work/dir/src/../out"))
            ]
        );
        assert_eq!(
            directories_entered(&words(&["bash", "-c", "cd /tmp/x&&node a.js"]), cwd, home),
            vec![Some(PathBuf::from("/tmp/x"))]
        );
        // `~` and a bare `cd` are the home directory the shell inherits from jprof.
        assert_eq!(
            directories_entered(
                &words(&["sh", "-c", "cd ~/proj && cd && cd ~ && node"]),
                cwd,
                home
            ),
            vec![
                Some(PathBuf::from("/home/me/proj")),
                Some(PathBuf::from("/home/me")),
                Some(PathBuf::from("/home/me"))
            ]
        );
        for unknown in [
            "cd \"$D\" && node a.js",
            "cd ~bob; node",
            "cd -; node",
            "HOME=/tmp; cd ~; node",
        ] {
            assert_eq!(
                directories_entered(&words(&["sh", "-c", unknown]), cwd, home),
                vec![None],
                "{unknown}"
            );
        }
        for (argv, home) in [
            (words(&["sh", "-c", "cd ~/x; node"]), None),
            (
                words(&["env", "HOME=/tmp", "sh", "-c", "cd ~/x; node"]),
                home,
            ),
        ] {
            assert_eq!(
                directories_entered(&argv, cwd, home),
                vec![None],
                "{argv:?}"
            );
        }
        // Once lost, every later cd relative to it is lost too; an absolute one is found again.
        assert_eq!(
            directories_entered(
                &words(&["sh", "-c", "cd $D; cd sub; cd /srv; node"]),
                cwd,
                home
            ),
            vec![None, None, Some(PathBuf::from("/srv"))]
        );
        assert!(directories_entered(&words(&["node", "-e", "cd /tmp"]), cwd, home).is_empty());

        let mut at = places(Place::Private, Place::Private, Some("node"));
        at.entered = vec![(PathBuf::from("/work/dir/src"), Some(Place::Private))];
        let setup = prepare_at(&at);
        assert!(setup.asking.asked.contains("node"));
        at.entered
            .push((PathBuf::from("/tmp/shared"), Some(Place::Sticky)));
        let setup = prepare_at(&at);
        assert!(var(&setup, "NODE_OPTIONS").is_none_or(|v| !v.contains("--perf-prof")));
        assert!(
            setup.not_asked["node"]
                .why
                .contains("the command changes into /tmp/shared"),
            "{}",
            setup.not_asked["node"].why
        );
        at.entered = vec![(PathBuf::new(), None)];
        let setup = prepare_at(&at);
        assert!(!setup.asking.asked.contains("node"));
        assert!(setup.not_asked["node"].why.contains("cannot tell"));
    }

    /// Issue 24: a fixed /tmp name is asked for only where the kernel refuses what another user
    /// plants: every process the launched one starts would open the name for its own pid.
    #[test]
    fn tmp_names_are_asked_for_only_where_no_one_else_can_plant_them() {
        // CPython opens its map O_NOFOLLOW, but a forked or started CPython still opens a
        // planted FIFO (and blocks) or file (and fills it): not asked, even when launched.
        let setup = prepare_at(&places(Place::Private, Place::Sticky, Some("python")));
        assert!(var(&setup, "PYTHONPERFSUPPORT").is_none());
        let why = &setup.not_asked["python"].why;
        assert!(
            why.contains("every python process the command starts")
                && why.contains("fs.protected_fifos=1"),
            "{why}"
        );
        let guarded = prepare_at(&places(
            Place::Private,
            Place::KernelGuarded,
            Some("python"),
        ));
        assert_eq!(var(&guarded, "PYTHONPERFSUPPORT").as_deref(), Some("1"));
        // Mono opens its perf map through links, and so would every mono the launched one
        // starts: not asked even for the launched one.
        let mono = prepare_at(&places(Place::Private, Place::Sticky, Some("mono")));
        assert!(!var(&mono, "MONO_ENV_OPTIONS").is_some_and(|v| v.contains("--jitmap")));
        assert!(mono.not_asked["mono"]
            .why
            .contains("every mono process the command starts"));
        for runtime in ["erlang", "dotnet"] {
            let setup = prepare_at(&places(Place::Private, Place::Sticky, Some(runtime)));
            assert!(!setup.asking.asked.contains(runtime), "{runtime}");
            // Not asked, but named all the same by the user's own `ERL_FLAGS`: the note says
            // so, not that its frames are not named.
            let seen: BTreeMap<u32, &'static str> = [(9, runtime)].into();
            let mapped: BTreeMap<u32, Vec<SideKind>> = [(9, vec![SideKind::PERF_MAP])].into();
            let notes = observed_notes(&seen, &mapped, &setup);
            assert!(
                notes[0].starts_with(&format!(
                    "{runtime} (pid 9): it wrote its JIT names, turned on by its own environment (jprof did not ask it: other users can put names in /tmp"
                )) && !notes[0].contains("not named"),
                "{notes:?}"
            );
        }

        let through_a_script = prepare_at(&places(Place::Private, Place::Sticky, None));
        let options = var(&through_a_script, "MONO_ENV_OPTIONS").unwrap();
        assert!(!options.contains("--jitmap"), "{options}");
        assert!(
            options.contains("--profile=log"),
            "the log goes to the private dir"
        );
        let mono: BTreeMap<u32, &'static str> = [(9, "mono")].into();
        let logged: BTreeMap<u32, Vec<SideKind>> = [(9, vec![SideKind::MLPD])].into();
        let notes = observed_notes(&mono, &logged, &through_a_script);
        assert!(
            notes[0].contains("the log profiler named managed code (no --jitmap perf map: other users can put names in /tmp"),
            "{notes:?}"
        );

        let guarded = prepare_at(&places(Place::Private, Place::KernelGuarded, None));
        assert!(var(&guarded, "MONO_ENV_OPTIONS").is_some_and(|v| v.contains("--jitmap")));

        let open = prepare_at(&places(Place::Private, Place::Open, Some("mono")));
        assert!(!var(&open, "MONO_ENV_OPTIONS").unwrap().contains("--jitmap"));
    }

    /// Issue 24 (lower): only the names jprof asked a runtime to write are ever removed.
    #[test]
    fn only_files_jprof_asked_for_are_removable() {
        let setup = prepare_at(&places(Place::Private, Place::KernelGuarded, Some("node")));
        let tmp_dump = Path::new("/tmp/jit-77.dump");
        assert!(!asked_for(&setup.asking, "node", 77, tmp_dump));
        assert!(!asked_for(&setup.asking, "python", 77, tmp_dump));
        assert!(asked_for(
            &setup.asking,
            "mono",
            77,
            Path::new("/tmp/perf-77.map")
        ));
        assert!(!asked_for(
            &setup.asking,
            "mono",
            78,
            Path::new("/tmp/perf-77.map")
        ));
        assert!(asked_for(
            &setup.asking,
            "java",
            77,
            Path::new("/anywhere/jit-77.dump")
        ));
    }

    /// .NET: `PerfMapEnabled` under both prefixes; from .NET 8 on, `PerfMapJitDumpPath` puts
    /// the perf map, perfinfo and jitdump in the private directory (implemented from the
    /// runtime's documentation: no .NET 8 is installable here). Before 8 the perf map and
    /// perfinfo go to /tmp, so the fixed-name rule applies to both.
    #[test]
    fn dotnet_is_asked_with_its_jitdump_path_in_the_private_dir() {
        let setup = prepare_at(&places(
            Place::Private,
            Place::KernelGuarded,
            Some("dotnet"),
        ));
        for prefix in ["DOTNET", "COMPlus"] {
            assert_eq!(
                var(&setup, &format!("{prefix}_PerfMapEnabled")).as_deref(),
                Some("1")
            );
            let path = var(&setup, &format!("{prefix}_PerfMapJitDumpPath")).unwrap();
            assert_eq!(Path::new(&path), setup.private_dir.as_ref().unwrap().path);
            // A .NET 8 perf map in the private directory is one jprof asked for.
            let map = Path::new(&path).join("perf-9.map");
            assert!(asked_for(&setup.asking, "dotnet", 9, &map));
        }
        assert_eq!(
            unread_side_files(&setup.asking, "dotnet", 9),
            [PathBuf::from("/tmp/perfinfo-9.map")]
        );
        let launcher = prepare_at(&places(Place::Private, Place::Sticky, None));
        assert!(var(&launcher, "DOTNET_PerfMapEnabled").is_none());
        assert!(launcher.not_asked["dotnet"]
            .why
            .contains("/tmp/perf-PID.map"));
    }

    /// CPython: perf maps in fp mode; in dwarf mode also 3.13's jitdump (unwind info for the
    /// trampolines), which 3.13 prefers when both are set and 3.12 ignores.
    #[test]
    fn python_gets_perf_maps_and_for_dwarf_the_jitdump() {
        let fp = prepare_at(&places(Place::Private, Place::KernelGuarded, None));
        assert_eq!(var(&fp, "PYTHONPERFSUPPORT").as_deref(), Some("1"));
        assert!(var(&fp, "PYTHON_PERF_JIT_SUPPORT").is_none());
        let mut at = places(Place::Private, Place::KernelGuarded, Some("python"));
        at.dwarf = true;
        let dwarf = prepare_at(&at);
        assert_eq!(var(&dwarf, "PYTHON_PERF_JIT_SUPPORT").as_deref(), Some("1"));
        assert_eq!(var(&dwarf, "PYTHONPERFSUPPORT").as_deref(), Some("1"));
        // In an unguarded sticky /tmp neither is asked for.
        at.tmp = Place::Sticky;
        let sticky = prepare_at(&at);
        assert!(var(&sticky, "PYTHON_PERF_JIT_SUPPORT").is_none());
        assert!(var(&sticky, "PYTHONPERFSUPPORT").is_none());
        assert!(asked_for(
            &dwarf.asking,
            "python",
            5,
            Path::new("/tmp/jit-5.dump")
        ));
        assert!(!asked_for(
            &fp.asking,
            "python",
            5,
            Path::new("/tmp/jit-5.dump")
        ));
    }

    /// Deno's V8 takes paths: everything it writes goes to the private directory, wherever
    /// it runs, appended to the user's own flags.
    #[test]
    fn deno_writes_into_the_private_dir_only() {
        let setup = prepare_at(&places(Place::Open, Place::Open, Some("deno")));
        let flags = var(&setup, "DENO_V8_FLAGS").unwrap();
        let dir = setup
            .private_dir
            .as_ref()
            .unwrap()
            .path
            .display()
            .to_string();
        assert!(
            flags.contains(&format!("--perf-prof-path={dir}")),
            "{flags}"
        );
        assert!(
            flags.contains(&format!("--perf-basic-prof-path={dir}")),
            "{flags}"
        );
        assert!(
            flags.contains(&format!("--logfile={dir}/v8.log")),
            "{flags}"
        );
        assert!(flags.contains("--no-logfile-per-isolate"));
        assert!(!setup.not_asked.contains_key("deno"));
    }

    #[test]
    fn runtimes_that_cannot_be_asked_get_the_fix_by_name() {
        let setup = prepare_at(&places(Place::Private, Place::KernelGuarded, None));
        let runtimes: BTreeMap<u32, &'static str> = [
            (1, runtime_of_mapping("/usr/bin/python3.11").unwrap()),
            (
                2,
                runtime_of_mapping("/usr/lib/python3/site-packages/wasmtime/_libwasmtime.so")
                    .unwrap(),
            ),
            (
                3,
                runtime_of_mapping("/usr/lib/erlang/erts-13.1.5/bin/beam.smp").unwrap(),
            ),
        ]
        .into();
        let notes = observed_notes(&runtimes, &BTreeMap::new(), &setup);
        assert!(
            notes[0].contains("older than 3.12") && notes[0].contains("3.12 or later"),
            "{notes:?}"
        );
        assert!(notes[1].contains("--profile=perfmap"), "{notes:?}");
        assert!(
            notes[2].contains("ERL_FLAGS=+JPperf map")
                && notes[2].contains("cleared or overridden"),
            "{notes:?}"
        );
        assert_eq!(
            runtime_of_mapping("/root/.pyenv/versions/3.12.1/bin/python3.12"),
            Some("python")
        );
        assert_eq!(
            runtime_of_mapping("/usr/lib/x86_64-linux-gnu/libpython3.13.so.1.0"),
            Some("python")
        );
        assert_eq!(
            runtime_of_mapping(
                "/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.1/libcoreclr.so"
            ),
            Some("dotnet")
        );
    }

    /// `-p`: a runtime that was already running says what to add next time, not that a
    /// variable was overridden.
    #[test]
    fn an_attached_runtime_gets_what_to_add() {
        let attached = RuntimeSetup::default();
        let runtimes: BTreeMap<u32, &'static str> = [(7, "node"), (8, "python")].into();
        let notes = observed_notes(&runtimes, &BTreeMap::new(), &attached);
        assert!(
            notes[0].contains("node (pid 7): it was already running"),
            "{notes:?}"
        );
        assert!(notes[0].contains("--perf-prof"), "{notes:?}");
        assert!(notes[0].contains("`jprof record -- …`"), "{notes:?}");
        assert!(!notes[0].contains("overridden"), "{notes:?}");
        assert!(notes[1].contains("PYTHONPERFSUPPORT=1"), "{notes:?}");
        // Started with its flags: it writes its names, and no variable of jprof's is named.
        let files: BTreeMap<u32, Vec<SideKind>> = [(7, vec![SideKind::JITDUMP])].into();
        let notes = observed_notes(&runtimes, &files, &attached);
        assert_eq!(
            notes[0],
            "node (pid 7): it writes its JIT names (it was started with them turned on)"
        );
    }

    #[test]
    fn cpython_3_12_or_later_is_told_from_the_command() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(python_version_in("python3.12"), Some((3, 12)));
        assert_eq!(python_version_in("libpython3.13.so.1.0"), Some((3, 13)));
        assert_eq!(python_version_in("python3.9d"), Some((3, 9)));
        assert_eq!(python_version_in("python3"), None);
        assert!(launches_cpython_3_12(&argv(&["python3.12", "app.py"])));
        assert!(launches_cpython_3_12(&argv(&[
            "/root/.pyenv/versions/3.13.0/bin/python3.13",
            "-X",
            "perf"
        ])));
        assert!(launches_cpython_3_12(&argv(&[
            "env",
            "A=1",
            "python3.14",
            "a.py"
        ])));
        assert!(!launches_cpython_3_12(&argv(&["python3.11", "app.py"])));
        assert!(!launches_cpython_3_12(&argv(&["node", "app.js"])));
        // An unversioned name: the file it links to says.
        let dir = tempfile::tempdir().unwrap();
        let (old, new) = (dir.path().join("old"), dir.path().join("new"));
        for (sub, real) in [(&old, "python3.10"), (&new, "python3.12")] {
            std::fs::create_dir(sub).unwrap();
            std::fs::write(sub.join(real), "").unwrap();
            std::os::unix::fs::symlink(sub.join(real), sub.join("python3")).unwrap();
        }
        let python3 = |d: &Path| d.join("python3").to_string_lossy().into_owned();
        assert!(!launches_cpython_3_12(&[python3(&old), "a.py".into()]));
        assert!(launches_cpython_3_12(&[python3(&new), "a.py".into()]));
        // A shim that says nothing (pyenv's `python3` script): counted.
        let shim = dir.path().join("shim");
        std::fs::create_dir(&shim).unwrap();
        std::fs::write(shim.join("python3"), "#!/bin/sh\n").unwrap();
        assert!(launches_cpython_3_12(&[python3(&shim), "a.py".into()]));
    }

    #[test]
    fn a_running_runtime_is_told_from_its_mappings() {
        // This test process is neither python nor a JVM.
        assert!(!runs(std::process::id(), "python"));
        assert!(!runs(std::process::id(), "java"));
    }

    #[test]
    fn jdk_launchers_are_told_by_the_jdk_they_sit_in() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(launches_jvm(&argv(&["java", "-jar", "a.jar"])));
        assert!(launches_jvm(&argv(&["env", "A=1", "java", "Main"])));
        assert!(!launches_jvm(&argv(&["python3.12", "a.py"])));
        // A JDK laid out in a temporary directory: its bin/javac is a launcher (through a
        // link, as Debian's /usr/bin/javac); a javac elsewhere is not.
        let dir = tempfile::tempdir().unwrap();
        let jdk = dir.path().join("jdk");
        std::fs::create_dir_all(jdk.join("bin")).unwrap();
        std::fs::create_dir_all(jdk.join("lib")).unwrap();
        std::fs::write(jdk.join("bin/javac"), "").unwrap();
        std::fs::write(jdk.join("lib/libjli.so"), "").unwrap();
        let link = dir.path().join("javac");
        std::os::unix::fs::symlink(jdk.join("bin/javac"), &link).unwrap();
        let path = |p: &Path| p.to_string_lossy().into_owned();
        assert!(launches_jvm(&[
            path(&jdk.join("bin/javac")),
            "A.java".into()
        ]));
        assert!(launches_jvm(&[path(&link), "A.java".into()]));
        let other = dir.path().join("other/bin");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("javac"), "").unwrap();
        assert!(!launches_jvm(&[
            path(&other.join("javac")),
            "A.java".into()
        ]));
    }

    #[test]
    fn launchers_that_exec_are_seen_through_and_those_that_fork_only_for_the_tree() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for same_process in [
            &["nice", "-n", "5", "node", "a.js"][..],
            &["nice", "-5", "node", "a.js"],
            &["nice", "--adjustment=5", "node"],
            &["taskset", "-c", "0,1", "node", "a.js"],
            &["taskset", "0x3", "node"],
            &["chrt", "-f", "10", "node"],
            &["ionice", "-c", "3", "nohup", "stdbuf", "-oL", "node"],
            &["stdbuf", "-o", "L", "--", "node"],
        ] {
            assert_eq!(
                program_run_by(&argv(same_process)).as_deref(),
                Some("node"),
                "{same_process:?}"
            );
        }
        // Acting on a running process launches nothing.
        for attach in [
            &["taskset", "-p", "1", "2"][..],
            &["chrt", "-p", "5", "7"],
            &["ionice", "-p", "7"],
        ] {
            assert_eq!(program_run_by(&argv(attach)), None, "{attach:?}");
        }
        // A forked program has another pid: not the launched process's runtime, but the tree's.
        let timed = argv(&[
            "/usr/bin/time",
            "-f",
            "%e %U",
            "-o",
            "t.txt",
            "java",
            "Main",
        ]);
        assert_eq!(program_run_by(&timed).as_deref(), Some("time"));
        assert!(launches_jvm(&timed));
        assert!(launches_jvm(&argv(&[
            "timeout", "-s", "INT", "30", "nice", "java", "-jar", "a.jar"
        ])));
        assert!(launches_cpython_3_12(&argv(&[
            "time",
            "-p",
            "python3.12",
            "a.py"
        ])));
        assert!(!launches_cpython_3_12(&argv(&[
            "time",
            "python3.11",
            "a.py"
        ])));
        // A shell runs its last command last: `exec "$0" "$@"` runs the words after the command.
        let bench = argv(&[
            "time",
            "-o",
            "t.txt",
            "sh",
            "-c",
            "echo $$ > 'pid.txt'; exec \"$0\" \"$@\"",
            "java",
            "-jar",
            "a.jar",
        ]);
        assert!(launches_jvm(&bench));
        assert!(launches_jvm(&argv(&["sh", "-c", "cd /src && java Main"])));
        assert!(launches_jvm(&argv(&[
            "bash",
            "-c",
            "make; exec \"$@\"",
            "sh",
            "java",
            "Main"
        ])));
        assert!(!launches_jvm(&argv(&[
            "sh",
            "-c",
            "java -version; node a.js"
        ])));
        assert!(!launches_jvm(&argv(&["sh", "-c", "$RUN Main"])));
        assert!(!launches_jvm(&argv(&["time"])));
    }

    #[test]
    fn the_program_is_found_through_env_shells_and_scripts() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            program_run_by(&argv(&["/usr/bin/node", "x.js"])).as_deref(),
            Some("node")
        );
        assert_eq!(
            program_run_by(&argv(&["env", "-i", "A=1", "nodejs", "a.js"])).as_deref(),
            Some("nodejs")
        );
        assert_eq!(
            program_run_by(&argv(&["sh", "-c", "X=1 exec mono app.exe"])).as_deref(),
            Some("mono")
        );
        // dash forks for a lone command (its pid is not the launched one); bash execs it.
        assert_eq!(
            program_run_by(&argv(&["/bin/dash", "-c", "mono app.exe"])),
            None
        );
        assert_eq!(
            program_run_by(&argv(&["/bin/bash", "-c", "mono app.exe"])).as_deref(),
            Some("mono")
        );
        assert_eq!(
            program_run_by(&argv(&["/bin/bash", "-c", "mono a.exe; true"])),
            None
        );
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("tool");
        std::fs::write(&script, "#!/usr/bin/env node\nconsole.log(1)\n").unwrap();
        let script = script.display().to_string();
        assert_eq!(program_run_by(&argv(&[&script])).as_deref(), Some("node"));
        assert_eq!(
            runtime_of_command("mono-sgen").map(|r| r.name),
            Some("mono")
        );
        assert!(runtime_of_command("javac").is_none());
        // A FIFO named as the command is not read (it would block).
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(
            program_run_by(&argv(&[fifo.to_str().unwrap()])).as_deref(),
            Some("fifo")
        );
    }

    #[test]
    fn runtimes_are_recognised_by_what_they_map() {
        assert_eq!(
            runtime_of_mapping("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"),
            Some("java")
        );
        assert_eq!(runtime_of_mapping("/usr/bin/node"), Some("node"));
        assert_eq!(runtime_of_mapping("/usr/bin/mono-sgen"), Some("mono"));
        assert_eq!(
            runtime_of_mapping("/usr/lib/libmonosgen-2.0.so.1"),
            Some("mono")
        );
        assert_eq!(
            runtime_of_mapping("/usr/lib/x86_64-linux-gnu/libc.so.6"),
            None
        );
    }
}
