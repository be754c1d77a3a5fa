//! Time, output size and peak memory of every `jprof report` writer (flamegraph, collapsed,
//! firefox, pprof, speedscope) on one synthetic 1 M-sample profile: `cargo bench --bench
//! writers [-- --samples N]`. Run by `cargo xtask bench`. Each writer runs in its own child
//! process (this binary with `--one FORMAT`), so its peak RSS (VmHWM) is its own: the profile
//! plus what the writer adds. Goal: the flame graph within 2 s and 300 MB, every other writer
//! within twice that.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use jprof::output::{collapsed, firefox, flamegraph, pprof, speedscope};
use jprof::profile::{Context, WeightUnit};
use jprof::profile::{
    Frame, FrameId, FrameKind, Profile, ProfileSample, ThreadInfo, Tier, TierClass,
};

const FORMATS: [&str; 5] = ["flamegraph", "collapsed", "firefox", "pprof", "speedscope"];
const PID: u32 = 1000;
const THREADS: u32 = 8;
/// Distinct stacks the samples are drawn from (a busy service has tens of thousands).
const STACKS: usize = 20_000;

/// Interns `count` functions of one kind, each at three lines (three frames).
fn functions(
    p: &mut Profile,
    kind: FrameKind,
    count: usize,
    module: &str,
    file: Option<&str>,
    tiers: &[&str],
) -> Vec<[FrameId; 3]> {
    (0..count)
        .map(|i| {
            let tier = (!tiers.is_empty())
                .then(|| Tier::new(TierClass::Optimized, tiers[i % tiers.len()]));
            std::array::from_fn(|l| {
                let frame = Frame {
                    name: format!("{module}::function_{i}"),
                    kind,
                    module: Some(module.to_string()),
                    file: file.map(str::to_string),
                    line: file.map(|_| (i * 10 + l) as u32),
                };
                p.intern_tiered(frame, tier.clone())
            })
        })
        .collect()
}

/// A profile shaped like a JIT service's: native startup frames, JIT frames with inlined
/// callees, kernel frames at some leaves; 8 threads; cpu-clock weights.
fn synthetic(samples: usize) -> Profile {
    let mut p = Profile::default();
    // A fixed seed: every run measures the same profile.
    let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
    let native = functions(
        &mut p,
        FrameKind::Native,
        3000,
        "libapp.so",
        Some("app.cpp"),
        &[],
    );
    let jit = functions(
        &mut p,
        FrameKind::Jit,
        2000,
        "jit-1000.dump",
        Some("App.java"),
        &["C1 (baseline)", "C2 (optimized)"],
    );
    let inlined = functions(
        &mut p,
        FrameKind::Inlined,
        500,
        "jit-1000.dump",
        Some("App.java"),
        &[],
    );
    let kernel = functions(&mut p, FrameKind::Kernel, 300, "[kernel]", None, &[]);
    let roots: Vec<FrameId> = (0..THREADS)
        .map(|t| {
            p.intern(Frame {
                name: format!("worker-{t}"),
                kind: FrameKind::Root,
                module: None,
                file: None,
                line: None,
            })
        })
        .collect();
    let pick = |rng: &mut fastrand::Rng, from: &[[FrameId; 3]]| {
        from[rng.usize(..from.len())][rng.usize(..3)]
    };
    let stacks: Vec<Vec<FrameId>> = (0..STACKS)
        .map(|_| {
            let mut stack = Vec::new();
            for _ in 0..4 + rng.usize(..8) {
                stack.push(pick(&mut rng, &native[..200]));
            }
            for _ in 0..4 + rng.usize(..20) {
                stack.push(pick(&mut rng, &jit));
                if rng.usize(..3) == 0 {
                    stack.push(pick(&mut rng, &inlined));
                }
            }
            if rng.usize(..4) == 0 {
                for _ in 0..1 + rng.usize(..6) {
                    stack.push(pick(&mut rng, &kernel));
                }
            }
            stack
        })
        .collect();
    for (t, root) in roots.iter().enumerate() {
        p.threads.insert(
            PID + t as u32,
            ThreadInfo {
                pid: PID,
                comm: p.frame(*root).name.clone(),
            },
        );
    }
    for i in 0..samples {
        let t = rng.usize(..THREADS as usize);
        // Skewed: a few stacks are hot, most are rare.
        let r = rng.usize(..STACKS) as u64;
        let hot = (r * r / STACKS as u64) as usize;
        let mut stack = Vec::with_capacity(stacks[hot].len() + 1);
        stack.push(roots[t]);
        stack.extend_from_slice(&stacks[hot]);
        let stack = p.intern_stack(&stack);
        p.samples.push(ProfileSample {
            pid: PID,
            tid: PID + t as u32,
            time: 1_000_000_000 + i as u64 * 125_000,
            cpu: t as u32 % 2,
            weight: 1_001_001,
            stack,
            off_cpu: false,
        });
    }
    p
}

/// Peak resident memory of this process so far, in MiB (VmHWM).
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn write_one(format: &str, profile: &Profile, out: &Path) -> std::io::Result<()> {
    let file = BufWriter::new(File::create(out)?);
    let context = Context::for_profile(
        profile,
        "jprof: writers bench",
        "cpu-clock",
        WeightUnit::Nanoseconds,
    );
    match format {
        "flamegraph" => {
            let labels = flamegraph::Labels::of(&context, profile);
            // As `jprof report` draws it: default look, colours by frame kind.
            let mut palette = flamegraph::kind_palette(profile);
            let look = flamegraph::Look::default();
            let folded = collapsed::lines_to_draw(profile, look.min_width_percent());
            flamegraph::write(&folded, &labels, &look, Some(&mut palette), file)
        }
        "collapsed" => collapsed::write(profile, file),
        "firefox" => firefox::write(profile, &context, file),
        "pprof" => pprof::write(profile, &context, file),
        _ => speedscope::write(profile, &context, file),
    }
}

/// The child: build the profile, run one writer, print `format seconds bytes peak base`.
fn one(format: &str, samples: usize, dir: &Path) {
    let profile = synthetic(samples);
    let base = peak_rss_mib();
    let out = dir.join(format!("out.{format}"));
    let started = Instant::now();
    if let Err(e) = write_one(format, &profile, &out) {
        eprintln!("writers: {format}: {e}");
        std::process::exit(1);
    }
    let seconds = started.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(&out).map_or(0, |m| m.len());
    println!(
        "{format} {seconds:.3} {bytes} {:.1} {base:.1}",
        peak_rss_mib()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let samples: usize = value("--samples")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = std::env::temp_dir().join(format!("jprof-writers-{}", std::process::id()));
    let dir = value("--dir").map_or(dir, PathBuf::from);
    if let Some(format) = value("--one") {
        one(format, samples, &dir);
        return;
    }
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let exe = std::env::current_exe().expect("own path");
    println!("writers on a synthetic profile of {samples} samples ({STACKS} distinct stacks, {THREADS} threads)");
    println!("| writer | time (s) | output (MiB) | peak RSS (MiB) | profile alone (MiB) |");
    println!("|---|---:|---:|---:|---:|");
    let mut failed = false;
    for format in FORMATS {
        let out = Command::new(&exe)
            .args(["--one", format, "--samples", &samples.to_string(), "--dir"])
            .arg(&dir)
            .output()
            .expect("run the writer child");
        let line = String::from_utf8_lossy(&out.stdout);
        let fields: Vec<&str> = line.split_whitespace().collect();
        match (out.status.success(), fields.as_slice()) {
            (true, [_, seconds, bytes, peak, base]) => {
                let mib = bytes.parse::<f64>().unwrap_or(0.0) / (1024.0 * 1024.0);
                println!("| {format} | {seconds} | {mib:.1} | {peak} | {base} |");
            }
            _ => {
                eprintln!(
                    "writers: {format} failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                failed = true;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("goal: flamegraph ≤ 2 s and ≤ 300 MB peak; every other writer within 2× of that");
    if failed {
        std::process::exit(1);
    }
}
