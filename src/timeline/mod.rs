//! The one timeline: every timestamp in a recording is on the sample clock (CLOCK_MONOTONIC via
//! `use_clockid`). This module converts the other clocks producers use (raw TSC, CLOCK_MONOTONIC,
//! CLOCK_REALTIME) onto it, and calibrates the TSC against it during a recording.
//!
//! Why the perf page alone is not enough: on x86 `time_zero` is published only for events opened
//! without `use_clockid`, and then maps TSC to the kernel's `local_clock`, not CLOCK_MONOTONIC
//! (formats.md §0 fact 1). So TSC → sample clock always comes from jprof's own paired reads of
//! (rdtscp, CLOCK_MONOTONIC) at the start and end of the recording; the page and CPUID are kept
//! as facts and as a fallback rate. See docs/timeline.md.

mod fit;
mod perf_time;
mod tsc_facts;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::sys::clock::{self, ClockPair, TscPair};

pub use fit::{realtime_to_monotonic, RealtimeOffset, TscFit};
pub use perf_time::PerfTimeConv;
pub use tsc_facts::{parse_cpuinfo_flags, CpuinfoTscFlags, TscFacts};

/// The Linux clockid of the sample clock.
pub const SAMPLE_CLOCKID: i32 = clock::CLOCK_MONOTONIC;

/// Below this distance between the start and end pairs the fitted slope is too noisy
/// (a 100 ns bracket over 50 ms is 2 ppm); `Calibration::finish` waits until it has passed.
pub const MIN_CALIBRATION_SPAN: Duration = Duration::from_millis(50);

/// Paired reads taken at each end; the tightest bracket wins. Each costs ~100 ns.
const PAIRS_PER_END: usize = 200;

/// How raw TSC values reach the sample clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TscMethod {
    /// The perf page's `time_zero` formula. Only right when the sample clock is the kernel's
    /// default perf clock (events without `use_clockid`); jprof's CLOCK_MONOTONIC recordings
    /// never use it.
    #[serde(rename = "perf-page time_zero")]
    PerfPageTimeZero,
    /// A line through (rdtscp, CLOCK_MONOTONIC) pairs read at the start and end of recording.
    #[serde(rename = "paired-read calibration")]
    PairedRead,
    /// No usable TSC (not x86_64, no RDTSCP, TSC not invariant, or no pairs).
    #[default]
    #[serde(rename = "none")]
    None,
}

/// Conversion parameters stored in a recording's CLOCK chunk.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ClockConversion {
    /// Linux clockid of the sample clock (1 = CLOCK_MONOTONIC).
    pub sample_clockid: i32,
    /// How raw TSC values are put on the sample clock.
    pub tsc_method: TscMethod,
    /// TSC → sample clock line (with `TscMethod::PairedRead`).
    pub tsc_fit: Option<TscFit>,
    /// Where the fit's slope came from: "paired reads", or a nominal rate when the pairs were
    /// too close together (see `TscFacts::nominal_tsc_hz`).
    pub slope_source: Option<String>,
    /// MONOTONIC time between the start and end pairs.
    pub calibration_span_ns: u64,
    /// Bound on the fit's error inside the calibrated interval: the larger half-bracket of the
    /// two pairs it goes through (each was read somewhere inside its bracket).
    pub fit_uncertainty_ns: f64,
    /// RMS of (measured − fitted) over the tight pairs taken at both ends.
    pub fit_residual_ns: f64,
    /// TSC rate of the fit, Hz.
    pub fitted_tsc_hz: Option<f64>,
    /// Nominal TSC rate the fit was checked against, Hz.
    pub nominal_tsc_hz: Option<f64>,
    /// Where `nominal_tsc_hz` came from (a CPUID leaf, the perf page).
    pub nominal_tsc_source: Option<String>,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC at the start of recording.
    pub realtime_offset_start: Option<RealtimeOffset>,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC at the end of recording.
    pub realtime_offset_end: Option<RealtimeOffset>,
    /// The perf mmap page's conversion fields (of an event without `use_clockid`).
    pub perf_page: Option<PerfTimeConv>,
    /// Why the perf page could not be read, when it could not.
    pub perf_page_error: Option<String>,
    /// What the CPU and kernel report about the TSC.
    pub tsc_facts: TscFacts,
    /// Anything a reader of the report should know (suspicious rates, missing pieces).
    pub notes: Vec<String>,
}

impl Default for ClockConversion {
    fn default() -> Self {
        Self {
            sample_clockid: SAMPLE_CLOCKID,
            tsc_method: TscMethod::None,
            tsc_fit: None,
            slope_source: None,
            calibration_span_ns: 0,
            fit_uncertainty_ns: 0.0,
            fit_residual_ns: 0.0,
            fitted_tsc_hz: None,
            nominal_tsc_hz: None,
            nominal_tsc_source: None,
            realtime_offset_start: None,
            realtime_offset_end: None,
            perf_page: None,
            perf_page_error: None,
            tsc_facts: TscFacts::default(),
            notes: Vec::new(),
        }
    }
}

impl ClockConversion {
    /// A raw TSC value (rdtsc) on the sample clock, in ns; None when no conversion is known.
    pub fn tsc_to_sample(&self, tsc: u64) -> Option<u64> {
        match self.tsc_method {
            TscMethod::PairedRead => self.tsc_fit?.tsc_to_ns(tsc),
            TscMethod::PerfPageTimeZero => {
                let page = self.perf_page.filter(|p| p.cap_user_time_zero)?;
                page.tsc_to_perf_time(tsc)
            }
            TscMethod::None => None,
        }
    }

    /// Whether raw TSC values can be converted at all.
    pub fn has_tsc_conversion(&self) -> bool {
        match self.tsc_method {
            TscMethod::PairedRead => self.tsc_fit.is_some(),
            TscMethod::PerfPageTimeZero => self.perf_page.is_some_and(|p| p.cap_user_time_zero),
            TscMethod::None => false,
        }
    }

    /// A CLOCK_MONOTONIC value in ns on the sample clock (the identity: the sample clock is
    /// CLOCK_MONOTONIC).
    pub fn monotonic_to_sample(&self, ns: u64) -> u64 {
        ns
    }

    /// A CLOCK_REALTIME value in ns on the sample clock, through the REALTIME − MONOTONIC offset
    /// measured at start and end (interpolated between them).
    pub fn realtime_to_sample(&self, ns: u64) -> u64 {
        realtime_to_monotonic(
            ns,
            self.realtime_offset_start.as_ref(),
            self.realtime_offset_end.as_ref(),
        )
    }

    /// Builds the conversion from what a calibration measured. Pure, so it is unit-tested with
    /// made-up readings.
    pub fn from_measurements(m: &Measurements) -> Self {
        let mut facts = m.facts.clone();
        if let Some(hz) = m.perf_page.and_then(|p| p.tsc_hz()) {
            facts.page_tsc_hz = Some(hz);
        }
        let nominal = facts.nominal_tsc_hz();
        let mut out = Self {
            nominal_tsc_hz: nominal.map(|(hz, _)| hz),
            nominal_tsc_source: nominal.map(|(_, source)| source.to_string()),
            realtime_offset_start: m
                .realtime_start
                .as_ref()
                .and_then(RealtimeOffset::from_pair),
            realtime_offset_end: m.realtime_end.as_ref().and_then(RealtimeOffset::from_pair),
            perf_page: m.perf_page,
            perf_page_error: m.perf_page_error.clone(),
            ..Self::default()
        };
        let tightest = |pairs: &[TscPair]| pairs.iter().min_by_key(|p| p.bracket_ticks).copied();
        let (Some(a), Some(b)) = (tightest(&m.start_pairs), tightest(&m.end_pairs)) else {
            if facts.tsc_usable() {
                out.notes
                    .push("no TSC pairs were read; TSC values cannot be converted".into());
            }
            out.tsc_facts = facts;
            return out;
        };
        if !facts.tsc_usable() {
            out.notes.push(
                "TSC not usable (not invariant or no RDTSCP); TSC values cannot be converted"
                    .into(),
            );
            out.tsc_facts = facts;
            return out;
        }
        out.calibration_span_ns = b.ns.saturating_sub(a.ns);
        let long_enough = out.calibration_span_ns >= MIN_CALIBRATION_SPAN.as_nanos() as u64;
        let fit = match (long_enough, nominal) {
            (false, Some((hz, source))) => {
                TscFit::with_rate(&a, hz).map(|fit| (fit, source.to_string()))
            }
            _ => TscFit::through(&a, &b).map(|fit| (fit, "paired reads".to_string())),
        };
        let Some((fit, slope_source)) = fit else {
            out.notes
                .push("TSC pairs do not increase; TSC values cannot be converted".into());
            out.tsc_facts = facts;
            return out;
        };
        if !long_enough {
            out.notes.push(format!(
                "calibration span only {} µs; slope from {slope_source}",
                out.calibration_span_ns / 1000
            ));
        }
        let ns_per_tick = fit.ns_per_tick();
        out.fit_uncertainty_ns = a.bracket_ticks.max(b.bracket_ticks) as f64 / 2.0 * ns_per_tick;
        // Pairs up to twice the tightest bracket of their end; looser ones measure scheduler
        // noise rather than the fit.
        let tight = |pairs: &[TscPair], best: &TscPair| -> Vec<TscPair> {
            let limit = best.bracket_ticks.saturating_mul(2).max(1);
            pairs
                .iter()
                .filter(|p| p.bracket_ticks <= limit)
                .copied()
                .collect()
        };
        let mut checked = tight(&m.start_pairs, &a);
        checked.extend(tight(&m.end_pairs, &b));
        let residuals: Vec<f64> = checked
            .iter()
            .filter_map(|p| fit.residual_ns(p))
            .map(|r| r as f64)
            .collect();
        if !residuals.is_empty() {
            let mean_square = residuals.iter().map(|r| r * r).sum::<f64>() / residuals.len() as f64;
            out.fit_residual_ns = mean_square.sqrt();
        }
        out.fitted_tsc_hz = Some(fit.tsc_hz());
        if let Some((hz, source)) = nominal {
            let ppm = (fit.tsc_hz() / hz - 1.0) * 1e6;
            // NTP slews MONOTONIC by at most 500 ppm; more than 1000 ppm means something is off.
            if ppm.abs() > 1000.0 {
                out.notes.push(format!(
                    "fitted TSC rate {:.0} Hz differs from {source} ({hz:.0} Hz) by {ppm:.0} ppm",
                    fit.tsc_hz()
                ));
            }
        }
        out.tsc_method = TscMethod::PairedRead;
        out.tsc_fit = Some(fit);
        out.slope_source = Some(slope_source);
        out.tsc_facts = facts;
        out
    }
}

/// The raw readings a calibration collects; input of [`ClockConversion::from_measurements`].
#[derive(Clone, Debug, Default)]
pub struct Measurements {
    pub(crate) facts: TscFacts,
    pub(crate) perf_page: Option<PerfTimeConv>,
    pub(crate) perf_page_error: Option<String>,
    /// (rdtscp, CLOCK_MONOTONIC) pairs at the start and end.
    pub(crate) start_pairs: Vec<TscPair>,
    pub(crate) end_pairs: Vec<TscPair>,
    /// (CLOCK_MONOTONIC, CLOCK_REALTIME) pairs at the start and end.
    pub(crate) realtime_start: Option<ClockPair>,
    pub(crate) realtime_end: Option<ClockPair>,
}

/// Paired clock readings taken at the start of a recording; `finish` takes the closing pair and
/// fits the conversion.
pub struct Calibration {
    started: Instant,
    measurements: Measurements,
}

impl Calibration {
    /// Reads the TSC facts and the perf page, then the opening pairs. Takes a few ms (one
    /// perf_event_open, /proc/cpuinfo); call it just before the recorded command starts.
    pub fn start() -> Self {
        let mut m = Measurements {
            facts: TscFacts::probe(),
            ..Measurements::default()
        };
        match clock::probe_perf_page_time() {
            Ok(page) => m.perf_page = Some(PerfTimeConv::from_page(&page)),
            Err(e) => m.perf_page_error = Some(e.to_string()),
        }
        m.start_pairs = clock::tsc_pairs(SAMPLE_CLOCKID, PAIRS_PER_END);
        m.realtime_start =
            clock::tightest_clock_pair(SAMPLE_CLOCKID, clock::CLOCK_REALTIME, PAIRS_PER_END);
        Self {
            started: Instant::now(),
            measurements: m,
        }
    }

    /// A conversion fitted from the opening pairs to pairs read now, without ending the
    /// calibration: written periodically so that a recording whose recorder is killed still
    /// converts its TSC stamps. None until [`MIN_CALIBRATION_SPAN`] has passed.
    pub fn checkpoint(&self) -> Option<ClockConversion> {
        if self.started.elapsed() < MIN_CALIBRATION_SPAN {
            return None;
        }
        let mut m = self.measurements.clone();
        m.end_pairs = clock::tsc_pairs(SAMPLE_CLOCKID, PAIRS_PER_END);
        m.realtime_end =
            clock::tightest_clock_pair(SAMPLE_CLOCKID, clock::CLOCK_REALTIME, PAIRS_PER_END);
        Some(ClockConversion::from_measurements(&m))
    }

    /// Takes the closing pairs and fits. If less than [`MIN_CALIBRATION_SPAN`] passed since
    /// `start`, sleeps for the rest first (at most 50 ms) so the slope is good.
    pub fn finish(self) -> ClockConversion {
        if let Some(rest) = MIN_CALIBRATION_SPAN.checked_sub(self.started.elapsed()) {
            std::thread::sleep(rest);
        }
        let mut m = self.measurements;
        m.end_pairs = clock::tsc_pairs(SAMPLE_CLOCKID, PAIRS_PER_END);
        m.realtime_end =
            clock::tightest_clock_pair(SAMPLE_CLOCKID, clock::CLOCK_REALTIME, PAIRS_PER_END);
        ClockConversion::from_measurements(&m)
    }
}

impl ClockConversion {
    /// One line for summaries: the sample clock and how TSC values are converted.
    pub fn describe(&self) -> String {
        let method = match self.tsc_method {
            TscMethod::PerfPageTimeZero => "the perf page's time_zero",
            TscMethod::PairedRead => "paired-read calibration",
            TscMethod::None => "nothing",
        };
        let tsc = match (&self.tsc_fit, self.fitted_tsc_hz) {
            (Some(_), Some(hz)) if self.tsc_method != TscMethod::None => format!(
                "TSC → sample clock by {method} ({:.6} GHz, ±{:.0} ns)",
                hz / 1e9,
                self.fit_uncertainty_ns
            ),
            _ => "no TSC conversion available".to_string(),
        };
        format!("samples on CLOCK_MONOTONIC; {tsc}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usable_facts() -> TscFacts {
        TscFacts {
            x86_64: true,
            has_tsc: true,
            invariant_tsc: true,
            has_rdtscp: true,
            ..Default::default()
        }
    }

    /// Pairs on an exact 2 GHz TSC (ns = tsc / 2) with the given brackets and a per-pair error.
    fn pairs_at(tsc0: u64, brackets_and_errors: &[(u64, i64)]) -> Vec<TscPair> {
        brackets_and_errors
            .iter()
            .enumerate()
            .map(|(i, &(bracket_ticks, err))| {
                let tsc = tsc0 + 1000 * i as u64;
                TscPair {
                    tsc,
                    ns: (tsc / 2).wrapping_add_signed(err),
                    bracket_ticks,
                }
            })
            .collect()
    }

    fn measurements(span_ticks: u64) -> Measurements {
        Measurements {
            facts: usable_facts(),
            start_pairs: pairs_at(2_000_000, &[(400, 7), (200, 0), (210, 3), (5000, 900)]),
            end_pairs: pairs_at(2_000_000 + span_ticks, &[(300, -2), (180, 0), (999, 50)]),
            ..Default::default()
        }
    }

    #[test]
    fn fits_through_tightest_pairs() {
        // 200 ms at 2 GHz.
        let conv = ClockConversion::from_measurements(&measurements(400_000_000));
        assert_eq!(conv.tsc_method, TscMethod::PairedRead);
        assert_eq!(conv.slope_source.as_deref(), Some("paired reads"));
        assert_eq!(conv.sample_clockid, 1);
        let fit = conv.tsc_fit.unwrap();
        // Tightest start pair is index 1, tightest end pair index 1.
        assert_eq!((fit.tsc0, fit.ns0), (2_001_000, 1_000_500));
        assert!((conv.fitted_tsc_hz.unwrap() - 2e9).abs() < 1.0);
        assert_eq!(conv.tsc_to_sample(4_000_000_000), Some(2_000_000_000));
        // Uncertainty: larger bracket 200 ticks / 2 · 0.5 ns.
        assert!((conv.fit_uncertainty_ns - 50.0).abs() < 1e-9);
        // Residuals from pairs within 2× the tightest bracket: 0, 3 (start), -2, 0 (end); the 400-
        // tick start pair (= 2×200) is in too: error 7. RMS = sqrt((49+9+4)/5).
        let expected = ((49.0 + 9.0 + 4.0) / 5.0f64).sqrt();
        assert!(
            (conv.fit_residual_ns - expected).abs() < 1e-9,
            "{}",
            conv.fit_residual_ns
        );
        assert!(conv.notes.is_empty(), "{:?}", conv.notes);
    }

    #[test]
    fn short_span_uses_nominal_rate() {
        let mut m = measurements(2_000_000); // 1 ms
        m.facts.hypervisor_tsc_hz = Some(2_000_000_000);
        let conv = ClockConversion::from_measurements(&m);
        assert_eq!(conv.tsc_method, TscMethod::PairedRead);
        assert_eq!(conv.slope_source.as_deref(), Some("cpuid 0x40000010"));
        assert_eq!(conv.tsc_to_sample(4_000_000_000), Some(2_000_000_000));
        assert_eq!(conv.notes.len(), 1, "{:?}", conv.notes);
        // Without a nominal rate the short pairs still give a line.
        let conv = ClockConversion::from_measurements(&measurements(2_000_000));
        assert_eq!(conv.slope_source.as_deref(), Some("paired reads"));
    }

    #[test]
    fn page_rate_is_a_fact_not_the_method() {
        let mut m = measurements(400_000_000);
        m.perf_page = Some(PerfTimeConv {
            time_shift: 31,
            time_mult: 1 << 30, // 0.5 ns per tick
            time_zero: 123,
            cap_user_time: true,
            cap_user_time_zero: true,
            ..Default::default()
        });
        let conv = ClockConversion::from_measurements(&m);
        assert_eq!(conv.tsc_method, TscMethod::PairedRead);
        assert_eq!(conv.tsc_facts.page_tsc_hz, Some(2e9));
        assert_eq!(
            conv.nominal_tsc_source.as_deref(),
            Some("perf page time_mult/time_shift")
        );
        assert_eq!(conv.tsc_to_sample(4_000_000_000), Some(2_000_000_000));
    }

    #[test]
    fn wrong_nominal_rate_is_noted() {
        let mut m = measurements(400_000_000);
        m.facts.base_frequency_hz = Some(2_100_000_000);
        let conv = ClockConversion::from_measurements(&m);
        assert_eq!(conv.notes.len(), 1, "{:?}", conv.notes);
        assert!(conv.notes[0].contains("ppm"));
    }

    #[test]
    fn no_usable_tsc() {
        let mut m = measurements(400_000_000);
        m.facts.invariant_tsc = false;
        let conv = ClockConversion::from_measurements(&m);
        assert_eq!(conv.tsc_method, TscMethod::None);
        assert_eq!(conv.tsc_to_sample(4_000_000_000), None);
        let conv = ClockConversion::from_measurements(&Measurements {
            facts: usable_facts(),
            ..Default::default()
        });
        assert_eq!(conv.tsc_to_sample(1), None);
        assert_eq!(ClockConversion::default().tsc_to_sample(1), None);
        assert_eq!(ClockConversion::default().realtime_to_sample(9), 9);
        assert_eq!(ClockConversion::default().monotonic_to_sample(9), 9);
    }

    #[test]
    fn serde_round_trip_and_names() {
        let mut m = measurements(400_000_000);
        m.realtime_start = Some(ClockPair {
            a_ns: 1_000_000,
            b_ns: 1_700_000_000_001_000_000,
            bracket_ns: 40,
        });
        let conv = ClockConversion::from_measurements(&m);
        let json = serde_json::to_string(&conv).unwrap();
        assert!(
            json.contains("\"tsc_method\":\"paired-read calibration\""),
            "{json}"
        );
        let back: ClockConversion = serde_json::from_str(&json).unwrap();
        assert_eq!(back, conv);
        assert_eq!(
            back.realtime_to_sample(1_700_000_000_002_000_000),
            2_000_000
        );
        // Older/smaller CLOCK chunks still load.
        let minimal: ClockConversion = serde_json::from_str("{\"sample_clockid\":1}").unwrap();
        assert_eq!(minimal, ClockConversion::default());
        let page: ClockConversion =
            serde_json::from_str("{\"tsc_method\":\"perf-page time_zero\"}").unwrap();
        assert_eq!(page.tsc_method, TscMethod::PerfPageTimeZero);
        assert_eq!(page.tsc_to_sample(5), None);
    }
}
