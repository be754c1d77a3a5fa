//! Measuring: each process's wall time and peak memory (GNU time), variants run interleaved,
//! medians, and the jprof-against-a-baseline table.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::command::describe;

pub(super) const GNU_TIME: &str = "/usr/bin/time";

/// One measured run: wall time and peak resident memory (KiB) of the largest process.
#[derive(Clone, Copy, Debug)]
pub(super) struct Measurement {
    pub(super) wall: Duration,
    pub(super) max_rss_kib: Option<u64>,
}

/// Measures processes, wrapping each in GNU time when it is there.
pub(super) struct Meter {
    pub(super) gnu_time: bool,
    pub(super) scratch: PathBuf,
}

impl Meter {
    /// The command for stage `stage` of a pipeline, and where GNU time leaves its peak RSS.
    pub(super) fn command(&self, stage: usize, argv: &[OsString]) -> (Command, Option<PathBuf>) {
        let (mut cmd, rss_file) = if self.gnu_time {
            let rss_file = self.scratch.join(format!("rss-{stage}.txt"));
            let mut cmd = Command::new(GNU_TIME);
            cmd.args(["-f", "%M", "-o"]).arg(&rss_file);
            cmd.arg(&argv[0]);
            (cmd, Some(rss_file))
        } else {
            (Command::new(&argv[0]), None)
        };
        cmd.args(&argv[1..]);
        (cmd, rss_file)
    }

    /// Runs one pipeline (`stages[0] | stages[1] | ...`) with stdout of the last stage to `out`.
    pub(super) fn pipeline(&mut self, stages: &[Vec<OsString>], out: &Path) -> Result<Measurement> {
        let mut commands: Vec<(Command, Option<PathBuf>)> = stages
            .iter()
            .enumerate()
            .map(|(stage, argv)| self.command(stage, argv))
            .collect();
        let last = commands.len() - 1;
        let started = Instant::now();
        let mut children: Vec<(Child, String)> = Vec::new();
        for (i, (cmd, _)) in commands.iter_mut().enumerate() {
            cmd.stdin(match children.last_mut() {
                Some((child, _)) => Stdio::from(child.stdout.take().context("pipe")?),
                None => Stdio::null(),
            });
            cmd.stdout(if i == last {
                Stdio::from(
                    File::create(out)
                        .with_context(|| format!("cannot create {}", out.display()))?,
                )
            } else {
                Stdio::piped()
            });
            // Errors of the measured tools would be noise in the table; keep them for failures.
            cmd.stderr(Stdio::from(File::create(
                self.scratch.join(format!("stderr-{i}.txt")),
            )?));
            let child = cmd
                .spawn()
                .with_context(|| format!("cannot start `{}`", describe(cmd)))?;
            children.push((child, describe(cmd)));
        }
        for (i, (mut child, line)) in children.into_iter().enumerate() {
            let status = child.wait()?;
            if !status.success() {
                let stderr = std::fs::read_to_string(self.scratch.join(format!("stderr-{i}.txt")))
                    .unwrap_or_default();
                bail!("`{line}` failed ({status}):\n{stderr}");
            }
        }
        let wall = started.elapsed();
        let mut max_rss_kib = None;
        for (_, rss_file) in &commands {
            if let Some(file) = rss_file {
                let text = std::fs::read_to_string(file)
                    .with_context(|| format!("cannot read {}", file.display()))?;
                // GNU time prints "Command exited with non-zero status" first on failure.
                let kib: Option<u64> = text.lines().last().and_then(|l| l.trim().parse().ok());
                max_rss_kib = max_rss_kib.max(kib);
            }
        }
        Ok(Measurement { wall, max_rss_kib })
    }

    pub(super) fn single(&mut self, argv: Vec<OsString>, out: &Path) -> Result<Measurement> {
        self.pipeline(&[argv], out)
    }
}

/// Median of the runs of one variant.
#[derive(Clone, Copy, Debug)]
pub(super) struct Summary {
    pub(super) wall: f64,
    pub(super) max_rss_mib: Option<f64>,
}

pub(super) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

pub(super) fn summarize(runs: &[Measurement]) -> Summary {
    let rss: Vec<f64> = runs
        .iter()
        .filter_map(|m| m.max_rss_kib.map(|k| k as f64 / 1024.0))
        .collect();
    Summary {
        wall: median(runs.iter().map(|m| m.wall.as_secs_f64()).collect()),
        max_rss_mib: (!rss.is_empty()).then(|| median(rss)),
    }
}

pub(super) fn rss_cell(s: &Summary) -> String {
    s.max_rss_mib.map_or("n/a".into(), |m| format!("{m:.1}"))
}

/// A two-row markdown table of jprof against a baseline tool doing the same work, with the
/// baseline/jprof wall-time ratio, then the goal.
pub(super) fn versus_table(
    what: &str,
    ratio: &str,
    ours: (&str, &Summary),
    theirs: (&str, &Summary),
    goal: &str,
) -> String {
    let ((our_label, j), (their_label, t)) = (ours, theirs);
    format!(
        "| {what} | time (s) | max RSS (MiB) | {ratio} |\n|---|---:|---:|---:|\n\
         | {our_label} | {:.3} | {} | **{:.1}×** |\n| {their_label} | {:.3} | {} | |\n\nGoal: {goal}\n",
        j.wall,
        rss_cell(j),
        t.wall / j.wall,
        t.wall,
        rss_cell(t),
    )
}

/// Runs each of `variants` variants `runs` times, rotating the order every round so slow drift
/// of the machine hits all variants alike. Returns the measurements per variant.
pub(super) fn interleaved(
    runs: usize,
    variants: usize,
    mut run_variant: impl FnMut(usize) -> Result<Measurement>,
) -> Result<Vec<Summary>> {
    let mut results: Vec<Vec<Measurement>> = vec![Vec::new(); variants];
    for round in 0..runs {
        eprint!("\rround {}/{runs}", round + 1);
        for k in 0..variants {
            let i = (round + k) % variants;
            results[i].push(run_variant(i)?);
        }
    }
    eprintln!();
    Ok(results.iter().map(|r| summarize(r)).collect())
}
