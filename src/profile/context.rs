//! What an input says about its profile, for every writer: the title, what the weights count
//! and their unit, where time zero is, and the JIT code loads.

use super::Profile;

/// What a sample's weight counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightUnit {
    /// Nanoseconds of CPU time (cpu-clock, instrumentation self time).
    Nanoseconds,
    /// Events of the sampled counter (cycles), or plain counts.
    Events,
    /// Occurrences of an event that is not time (page faults, instructions, cache misses): a
    /// sample stands for no known amount of CPU time.
    Occurrences,
}

/// One body of JIT code appearing, for the Firefox Profiler's markers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeLoad {
    pub(crate) pid: u32,
    /// Sample-clock ns.
    pub(crate) time: u64,
    pub(crate) name: String,
    pub(crate) tier: Option<super::Tier>,
    pub(crate) address: u64,
    pub(crate) size: u64,
    /// The side file that announced it (`jit-1234.dump`, `perf-1234.map`).
    pub(crate) source: String,
}

/// Everything the writers take from the input besides the [`Profile`]: titles, what the
/// weights count, where time zero is, the JIT code loads. Each input (`input/`) builds one.
#[derive(Clone, Debug)]
pub struct Context {
    /// The profile's name, e.g. `jprof: ./app --fast`.
    pub(crate) title: String,
    /// What the input lost (`incomplete: …`): under a flame graph's title, in brackets after
    /// the viewers' title.
    pub(crate) subtitle: Option<String>,
    /// What the graph shows when not the input's natural weight (`off-CPU time`).
    pub(crate) shows: Option<&'static str>,
    /// The sampled event (`cpu-clock`, `cycles`), or what the weights count.
    pub(crate) event: String,
    pub(crate) weight_unit: WeightUnit,
    /// Sampling frequency; 0 when not sampled at a fixed rate.
    pub(crate) frequency_hz: u64,
    /// Sample-clock ns that counts as time zero.
    pub(crate) start_time: u64,
    /// Wall-clock time of `start_time`, Unix ns (0 = unknown).
    pub(crate) start_unix_ns: u64,
    /// Sorted by pid, time, address.
    pub(crate) code_loads: Vec<CodeLoad>,
    /// File name of the profiled program (`node`, `java`), when known.
    pub(crate) program: Option<String>,
    /// What the ns of the weights are: `cpu`, or `off-cpu`/`wall` (`--weight`); pprof's
    /// sample type.
    pub(crate) time_kind: &'static str,
}

impl Context {
    /// A context from the profile alone (standalone inputs, tests): time zero is the first sample.
    pub fn for_profile(profile: &Profile, title: &str, event: &str, unit: WeightUnit) -> Self {
        Self {
            title: title.to_string(),
            subtitle: None,
            shows: None,
            event: event.to_string(),
            weight_unit: unit,
            frequency_hz: 0,
            start_time: first_sample_time(profile).unwrap_or(0),
            start_unix_ns: 0,
            code_loads: Vec::new(),
            program: None,
            time_kind: "cpu",
        }
    }

    /// The title the viewer formats (Firefox Profiler, pprof, speedscope) show.
    pub fn export_title(&self) -> String {
        let mut title = self.title.clone();
        if let Some(loss) = &self.subtitle {
            title = format!("{title} ({loss})");
        }
        if let Some(shows) = self.shows {
            title = format!("{title} — {shows}");
        }
        title
    }

    /// The title a flame graph shows (its subtitle is the `subtitle` field).
    pub fn graph_title(&self) -> String {
        match self.shows {
            Some(shows) => format!("{} — {shows}", self.title),
            None => self.title.clone(),
        }
    }

    /// CPU time a sample of this weight stands for: the weight itself when it is in ns, else
    /// one sampling period (1/frequency), else nothing known.
    pub fn cpu_ns(&self, weight: u64) -> u64 {
        match self.weight_unit {
            WeightUnit::Nanoseconds => weight,
            WeightUnit::Events if self.frequency_hz > 0 => 1_000_000_000 / self.frequency_hz,
            WeightUnit::Events | WeightUnit::Occurrences => 0,
        }
    }

    /// ns since time zero (0 for anything before it).
    pub fn offset_ns(&self, time: u64) -> u64 {
        time.saturating_sub(self.start_time)
    }
}

/// The earliest sample's time.
pub fn first_sample_time(profile: &Profile) -> Option<u64> {
    profile.samples.iter().map(|s| s.time).min()
}
