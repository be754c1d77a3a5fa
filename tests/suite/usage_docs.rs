//! README's usage block and `--help` agree: every command `jprof --help` lists has a line in
//! README.md's `## Usage` block, every option a command's `--help` shows is in its line and
//! every option its line names is in its `--help`, with the same value lists. The help side is
//! the clap definition `--help` is printed from (src/cli/mod.rs).

use std::collections::{BTreeMap, BTreeSet};

use clap::CommandFactory;

/// One option or argument as a command's `--help` shows it.
struct HelpArg {
    /// `--long`, or `<NAME>` for a positional argument.
    name: String,
    short: Option<String>,
    /// What `--help` shows for its value (`PERCENT`), empty for a flag.
    placeholder: String,
    /// Its possible values (empty when any value goes, or for a flag).
    values: BTreeSet<String>,
}

/// The visible arguments of each subcommand (`help` and `--help`/`--version` left out).
fn help_args() -> BTreeMap<String, Vec<HelpArg>> {
    let cli = jprof::cli::Cli::command();
    cli.get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| {
            let args = c
                .get_arguments()
                .filter(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
                .map(|a| HelpArg {
                    name: match a.get_long() {
                        Some(long) => format!("--{long}"),
                        None => format!("<{}>", a.get_id()),
                    },
                    short: a.get_short().map(|s| format!("-{s}")),
                    placeholder: match a.get_action().takes_values() {
                        true => a.get_value_names().map_or_else(
                            || a.get_id().as_str().to_uppercase(),
                            |names| names.join(" "),
                        ),
                        false => String::new(),
                    },
                    values: match a.get_action().takes_values() {
                        true => a
                            .get_possible_values()
                            .iter()
                            .filter(|v| !v.is_hide_set())
                            .map(|v| v.get_name().to_string())
                            .collect(),
                        false => BTreeSet::new(),
                    },
                })
                .collect();
            (c.get_name().to_string(), args)
        })
        .collect()
}

/// What README's usage line of one command names: its options (as written, `-F` or
/// `--duration`) with the value list written after each (`cycles|cpu-clock`), and the value
/// lists written for positional arguments.
#[derive(Default, Debug)]
struct UsageLine {
    options: BTreeMap<String, Option<BTreeSet<String>>>,
    positional_values: Vec<BTreeSet<String>>,
}

const README: &str = include_str!("../../README.md");

/// The fenced block under `## Usage`, its `NAME: ...` definitions (`FILTERS`) expanded; each
/// command's text is its `jprof CMD` line with the indented lines that continue it.
fn readme_usage() -> BTreeMap<String, UsageLine> {
    let section = README
        .split("\n## Usage\n")
        .nth(1)
        .expect("README.md has a `## Usage` section");
    let block = section
        .split("```")
        .nth(1)
        .expect("a fenced block in README's Usage section");
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut definitions: BTreeMap<String, String> = BTreeMap::new();
    let mut in_definition: Option<String> = None;
    for line in block.lines() {
        if let Some(rest) = line.strip_prefix("jprof ") {
            let (command, args) = rest.split_once(' ').unwrap_or((rest, ""));
            texts.push((command.to_string(), args.to_string()));
            in_definition = None;
        } else if let Some((name, text)) = line
            .split_once(": ")
            .filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_uppercase()))
        {
            definitions.insert(name.to_string(), text.to_string());
            in_definition = Some(name.to_string());
        } else if line.starts_with(' ') {
            match &in_definition {
                Some(name) => definitions.get_mut(name).unwrap().push_str(line),
                None => texts
                    .last_mut()
                    .expect("a jprof line first")
                    .1
                    .push_str(line),
            }
        }
    }
    texts
        .into_iter()
        .map(|(command, mut text)| {
            for (name, definition) in &definitions {
                text = text.replace(name, definition);
            }
            (command, parse_usage(&text))
        })
        .collect()
}

fn parse_usage(text: &str) -> UsageLine {
    let tokens: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || "[]()".contains(c))
        .filter(|t| !t.is_empty() && *t != "|" && *t != "--" && *t != "...")
        .collect();
    let mut line = UsageLine::default();
    let values = |t: &str| -> Option<BTreeSet<String>> {
        (t.contains('|') && !t.starts_with('-')).then(|| t.split('|').map(str::to_string).collect())
    };
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i];
        if token.starts_with('-') && token.len() > 1 {
            let list = tokens.get(i + 1).and_then(|t| values(t));
            if list.is_some() {
                i += 1;
            }
            line.options.insert(token.to_string(), list);
        } else if let Some(list) = values(token) {
            line.positional_values.push(list);
        }
        i += 1;
    }
    line
}

fn bars(values: &BTreeSet<String>) -> String {
    values.iter().cloned().collect::<Vec<_>>().join("|")
}

#[test]
fn readme_usage_block_and_help_agree() {
    let help = help_args();
    let readme = readme_usage();
    let mut wrong = Vec::new();
    for command in help.keys() {
        if !readme.contains_key(command) {
            wrong.push(format!(
                "`jprof {command}` is in `jprof --help` but has no `jprof {command} ...` line in \
                 README.md's Usage block: add one"
            ));
        }
    }
    for command in readme.keys() {
        if !help.contains_key(command) {
            wrong.push(format!(
                "README.md's Usage block has `jprof {command}`, which `jprof --help` does not \
                 list: remove the line"
            ));
        }
    }
    for (command, args) in &help {
        let Some(usage) = readme.get(command) else {
            continue;
        };
        let mut named = BTreeSet::new();
        for arg in args {
            let written = [Some(&arg.name), arg.short.as_ref()]
                .into_iter()
                .flatten()
                .find(|n| usage.options.contains_key(*n));
            if arg.name.starts_with('<') {
                // A positional argument: only its value list (if it has one) must be shown.
                if !arg.values.is_empty() && !usage.positional_values.contains(&arg.values) {
                    wrong.push(format!(
                        "README.md's `jprof {command}` line should list {} as `{}` (as \
                         `jprof {command} --help` does)",
                        arg.name,
                        bars(&arg.values)
                    ));
                }
                continue;
            }
            let Some(written) = written else {
                wrong.push(format!(
                    "README.md's `jprof {command}` line lacks {} (in `jprof {command} --help`): \
                     add `[{}{}]`",
                    arg.name,
                    arg.short.as_ref().unwrap_or(&arg.name),
                    match (arg.values.is_empty(), arg.placeholder.is_empty()) {
                        (false, _) => format!(" {}", bars(&arg.values)),
                        (true, false) => format!(" {}", arg.placeholder),
                        (true, true) => String::new(),
                    }
                ));
                continue;
            };
            named.insert(written.clone());
            let shown = usage.options[written].as_ref();
            if !arg.values.is_empty() && shown != Some(&arg.values) {
                wrong.push(format!(
                    "`jprof {command} {written}` values: README.md says `{}`, `--help` says \
                     `{}`: make them the same",
                    shown.map(bars).unwrap_or_else(|| "(no list)".into()),
                    bars(&arg.values)
                ));
            }
        }
        for option in usage.options.keys() {
            if !named.contains(option) {
                wrong.push(format!(
                    "README.md's `jprof {command}` line names {option}, which `jprof {command} \
                     --help` does not have: remove it or add the option"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "README.md's Usage block and --help disagree:\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn the_usage_reader_sees_what_is_written() {
    let line =
        parse_usage("[-e cycles|cpu-clock] [--off-cpu [--off-cpu-min 10us]] (-- CMD | -p PID)");
    assert_eq!(
        line.options.keys().collect::<Vec<_>>(),
        ["--off-cpu", "--off-cpu-min", "-e", "-p"]
    );
    assert_eq!(
        line.options["-e"],
        Some(["cpu-clock", "cycles"].map(String::from).into())
    );
    assert!(line.positional_values.is_empty());
    let completions = parse_usage("bash|zsh|fish");
    assert_eq!(
        completions.positional_values,
        [["bash", "fish", "zsh"].map(String::from).into()]
    );
}
