//! The linear TSC → sample-clock map and the REALTIME − MONOTONIC offset, as exact integer
//! arithmetic so hours of TSC ticks convert without losing sub-ns precision. Pure.

use serde::{Deserialize, Serialize};

use crate::sys::clock::{ClockPair, TscPair};

/// `ns = ns0 + (tsc − tsc0) · ns_span / tsc_span`: a line through two (tsc, ns) points, or
/// through one point with a known rate. The slope stays a ratio of integers (no f64 rounding);
/// the product is formed in i128, so a 10-hour delta (~1e14 ticks) times a 10-hour span (~4e13
/// ns) is far from overflow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TscFit {
    pub(crate) tsc0: u64,
    pub(crate) ns0: u64,
    pub(crate) tsc_span: u64,
    pub(crate) ns_span: u64,
}

impl TscFit {
    /// The line through two pairs; None unless `b` is later than `a` on both axes.
    pub fn through(a: &TscPair, b: &TscPair) -> Option<Self> {
        let tsc_span = b.tsc.checked_sub(a.tsc).filter(|&s| s > 0)?;
        let ns_span = b.ns.checked_sub(a.ns).filter(|&s| s > 0)?;
        Some(Self {
            tsc0: a.tsc,
            ns0: a.ns,
            tsc_span,
            ns_span,
        })
    }

    /// The line through `a` with slope 1e9/`tsc_hz` ns per tick (the rate as a ratio with
    /// millihertz resolution).
    pub fn with_rate(a: &TscPair, tsc_hz: f64) -> Option<Self> {
        if !(1.0..1e15).contains(&tsc_hz) {
            return None;
        }
        Some(Self {
            tsc0: a.tsc,
            ns0: a.ns,
            tsc_span: (tsc_hz * 1000.0).round() as u64,
            ns_span: 1_000_000_000_000,
        })
    }

    /// The sample-clock time of `tsc`, rounded to the nearest ns; None before time 0 or for
    /// values so far out that the product would overflow.
    pub fn tsc_to_ns(&self, tsc: u64) -> Option<u64> {
        if self.tsc_span == 0 {
            return None;
        }
        let delta = i128::from(tsc) - i128::from(self.tsc0);
        let num = delta.checked_mul(i128::from(self.ns_span))?;
        let den = i128::from(self.tsc_span);
        // Round half up: floor((2·num + den) / (2·den)).
        let scaled = num
            .checked_mul(2)?
            .checked_add(den)?
            .div_euclid(den.checked_mul(2)?);
        u64::try_from(i128::from(self.ns0) + scaled).ok()
    }

    /// Signed ns − fit(tsc) residual of a measured pair.
    pub fn residual_ns(&self, pair: &TscPair) -> Option<i64> {
        let predicted = self.tsc_to_ns(pair.tsc)?;
        i64::try_from(i128::from(pair.ns) - i128::from(predicted)).ok()
    }

    pub(crate) fn ns_per_tick(&self) -> f64 {
        self.ns_span as f64 / self.tsc_span as f64
    }

    pub(crate) fn tsc_hz(&self) -> f64 {
        1e9 * self.tsc_span as f64 / self.ns_span as f64
    }
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC at one moment (`mono_ns`), from a bracketed paired read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RealtimeOffset {
    /// When it was measured: CLOCK_MONOTONIC ns.
    pub mono_ns: u64,
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC, ns.
    pub offset_ns: i64,
    /// Width of the MONOTONIC bracket around the REALTIME read: the offset is good to ±half.
    pub bracket_ns: u64,
}

impl RealtimeOffset {
    /// From a pair whose clock `a` is MONOTONIC and `b` REALTIME.
    pub fn from_pair(pair: &ClockPair) -> Option<Self> {
        let offset = i128::from(pair.b_ns) - i128::from(pair.a_ns);
        Some(Self {
            mono_ns: pair.a_ns,
            offset_ns: i64::try_from(offset).ok()?,
            bracket_ns: pair.bracket_ns,
        })
    }
}

/// A REALTIME ns value on the MONOTONIC clock. Between the two measurements the offset is
/// interpolated linearly (NTP slews REALTIME gradually); outside them the nearer one holds. A
/// clock step during the recording cannot be seen from two endpoints.
pub fn realtime_to_monotonic(
    realtime_ns: u64,
    start: Option<&RealtimeOffset>,
    end: Option<&RealtimeOffset>,
) -> u64 {
    let Some(first) = start.or(end) else {
        return realtime_ns;
    };
    let rt = i128::from(realtime_ns);
    let offset = match (start, end) {
        (Some(s), Some(e)) if e.mono_ns > s.mono_ns => {
            let mono_guess =
                (rt - i128::from(s.offset_ns)).clamp(i128::from(s.mono_ns), i128::from(e.mono_ns));
            let t = mono_guess - i128::from(s.mono_ns);
            let span = i128::from(e.mono_ns - s.mono_ns);
            let drift = i128::from(e.offset_ns) - i128::from(s.offset_ns);
            i128::from(s.offset_ns) + drift * t / span
        }
        _ => i128::from(first.offset_ns),
    };
    (rt - offset).clamp(0, i128::from(u64::MAX)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pair(tsc: u64, ns: u64) -> TscPair {
        TscPair {
            tsc,
            ns,
            bracket_ticks: 0,
        }
    }

    #[test]
    fn line_through_two_pairs() {
        // 3 ticks per ns, anchored at (1000, 5000).
        let fit = TscFit::through(&pair(1000, 5000), &pair(3_001_000, 1_005_000)).unwrap();
        assert_eq!(fit.tsc_to_ns(1000), Some(5000));
        assert_eq!(fit.tsc_to_ns(3_001_000), Some(1_005_000));
        assert_eq!(fit.tsc_to_ns(1004), Some(5001)); // 4/3 = 1.33 → 1
        assert_eq!(fit.tsc_to_ns(1005), Some(5002)); // 5/3 = 1.67 → 2
        assert_eq!(fit.tsc_to_ns(997), Some(4999)); // before tsc0
        assert_eq!(fit.tsc_to_ns(0), Some(4667)); // -1000/3 = -333.3 → -333
        assert!((fit.tsc_hz() - 3e9).abs() < 1e-3);
        assert_eq!(TscFit::through(&pair(10, 10), &pair(10, 20)), None);
        assert_eq!(TscFit::through(&pair(10, 10), &pair(20, 5)), None);
    }

    #[test]
    fn before_time_zero_is_none() {
        let fit = TscFit::through(&pair(1000, 10), &pair(2000, 20)).unwrap();
        assert_eq!(fit.tsc_to_ns(0), Some(0));
        let fit = TscFit::through(&pair(1000, 5), &pair(2000, 15)).unwrap();
        assert_eq!(fit.tsc_to_ns(0), None);
    }

    #[test]
    fn hours_stay_exact() {
        // A 2.123456785 GHz TSC calibrated over 200 ms, then used 10 hours later: the answer is
        // exactly 36000 s, to the ns.
        let hz: u64 = 2_123_456_785;
        let start = pair(7_000_000_000_000, 1_000_000_000);
        let end = pair(start.tsc + hz / 5, start.ns + 200_000_000);
        let fit = TscFit::through(&start, &end).unwrap();
        let ten_hours_ticks = 36_000 * hz;
        let expected = Some(start.ns + 36_000_000_000_000);
        assert_eq!(fit.tsc_to_ns(start.tsc + ten_hours_ticks), expected);
        // One tick is 0.47 ns (rounds down), two are 0.94 ns (round up).
        assert_eq!(fit.tsc_to_ns(start.tsc + ten_hours_ticks + 1), expected);
        assert_eq!(
            fit.tsc_to_ns(start.tsc + ten_hours_ticks + 2),
            expected.map(|ns| ns + 1)
        );
        let with_rate = TscFit::with_rate(&start, hz as f64).unwrap();
        assert_eq!(with_rate.tsc_to_ns(start.tsc + ten_hours_ticks), expected);
    }

    #[test]
    fn huge_values_do_not_panic() {
        let fit = TscFit {
            tsc0: 0,
            ns0: u64::MAX,
            tsc_span: 1,
            ns_span: u64::MAX,
        };
        assert_eq!(fit.tsc_to_ns(u64::MAX), None);
        assert_eq!(TscFit::default().tsc_to_ns(5), None);
        assert_eq!(TscFit::with_rate(&pair(0, 0), f64::NAN), None);
        assert_eq!(TscFit::with_rate(&pair(0, 0), 0.0), None);
    }

    #[test]
    fn realtime_offsets() {
        let start = RealtimeOffset {
            mono_ns: 1_000,
            offset_ns: 1_700_000_000_000_000_000,
            bracket_ns: 50,
        };
        // REALTIME gained 1000 ns on MONOTONIC over 1e6 ns (NTP slew).
        let end = RealtimeOffset {
            mono_ns: 1_001_000,
            offset_ns: 1_700_000_000_000_001_000,
            bracket_ns: 50,
        };
        let rt = |mono: u64, off: i64| (mono as i64 + off) as u64;
        assert_eq!(
            realtime_to_monotonic(rt(1_000, start.offset_ns), Some(&start), Some(&end)),
            1_000
        );
        assert_eq!(
            realtime_to_monotonic(rt(1_001_000, end.offset_ns), Some(&start), Some(&end)),
            1_001_000
        );
        // Halfway the offset grew by 500 ns.
        assert_eq!(
            realtime_to_monotonic(rt(501_000, start.offset_ns + 500), Some(&start), Some(&end)),
            501_000
        );
        // Only one measurement: a constant offset.
        assert_eq!(
            realtime_to_monotonic(rt(77, start.offset_ns), None, Some(&start)),
            77
        );
        assert_eq!(realtime_to_monotonic(5, None, None), 5);
        assert_eq!(realtime_to_monotonic(5, Some(&start), None), 0);
        let pair = ClockPair {
            a_ns: 10,
            b_ns: 1_000_010,
            bracket_ns: 3,
        };
        assert_eq!(
            RealtimeOffset::from_pair(&pair),
            Some(RealtimeOffset {
                mono_ns: 10,
                offset_ns: 1_000_000,
                bracket_ns: 3
            })
        );
    }

    /// REALTIME − MONOTONIC measured at `s_mono` and `span` ns later, slewed by `drift` ns.
    fn offsets(
        s_mono: u64,
        span: u64,
        offset: i64,
        drift: i64,
    ) -> (RealtimeOffset, RealtimeOffset) {
        let at = |mono_ns, offset_ns| RealtimeOffset {
            mono_ns,
            offset_ns,
            bracket_ns: 0,
        };
        (at(s_mono, offset), at(s_mono + span, offset + drift))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The line through two pairs goes through both (residual 0), through every point a
        /// whole number of spans along, and never maps a later TSC to an earlier time.
        #[test]
        fn a_fit_goes_through_its_pairs_and_keeps_order(
            tsc0 in 0u64..1 << 62,
            ns0 in 0u64..1 << 62,
            tsc_span in 1u64..1 << 40,
            ns_span in 1u64..1 << 40,
            k in 0u64..1000,
            x: u64,
            y: u64,
        ) {
            let (a, b) = (pair(tsc0, ns0), pair(tsc0 + tsc_span, ns0 + ns_span));
            let fit = TscFit::through(&a, &b).unwrap();
            prop_assert_eq!((fit.residual_ns(&a), fit.residual_ns(&b)), (Some(0), Some(0)));
            prop_assert_eq!(
                fit.tsc_to_ns(tsc0.saturating_add(k * tsc_span)),
                ns0.checked_add(k * ns_span).filter(|_| tsc0.checked_add(k * tsc_span).is_some())
            );
            if let (Some(early), Some(late)) = (fit.tsc_to_ns(x.min(y)), fit.tsc_to_ns(x.max(y))) {
                prop_assert!(early <= late);
            }
        }

        /// A fit from a whole-hertz rate counts exactly one second per `hz` ticks, for as
        /// many seconds as a recording lasts.
        #[test]
        fn a_rate_fit_counts_whole_seconds_exactly(
            tsc0 in 0u64..1 << 60,
            ns0 in 0u64..1 << 60,
            hz in 1_000_000u64..100_000_000_000,
            seconds in 0u64..100_000,
        ) {
            let fit = TscFit::with_rate(&pair(tsc0, ns0), hz as f64).unwrap();
            prop_assert_eq!(
                fit.tsc_to_ns(tsc0 + seconds * hz),
                Some(ns0 + seconds * 1_000_000_000)
            );
        }

        /// Put back on MONOTONIC, a REALTIME reading between the two measurements lands within
        /// a few ns of when it was taken, for any slew NTP can make (up to 1000 ppm).
        #[test]
        fn realtime_maps_back_to_when_it_was_read(
            s_mono in 0u64..1 << 58,
            span in 1u64..1 << 45,
            offset in 0i64..1 << 61,
            drift_ppm in -1000i64..=1000,
            along in 0.0..=1.0f64,
        ) {
            let drift = (span as i128 * i128::from(drift_ppm) / 1_000_000) as i64;
            let (start, end) = offsets(s_mono, span, offset, drift);
            let t = (span as f64 * along) as u64;
            let mono = s_mono + t;
            let offset_then = offset + (i128::from(drift) * i128::from(t) / i128::from(span)) as i64;
            let realtime = (mono as i64 + offset_then) as u64;
            let back = realtime_to_monotonic(realtime, Some(&start), Some(&end));
            prop_assert!(back.abs_diff(mono) <= 2 + drift.unsigned_abs() / 1000, "{back} vs {mono}");
        }

        /// A later REALTIME reading never maps to an earlier MONOTONIC time, whatever the
        /// readings and for any slew up to 1000 ppm.
        #[test]
        fn realtime_to_monotonic_keeps_order(
            s_mono in 0u64..1 << 58,
            span in 1u64..1 << 45,
            offset: i64,
            drift_ppm in -1000i64..=1000,
            x: u64,
            y: u64,
        ) {
            let drift = (span as i128 * i128::from(drift_ppm) / 1_000_000) as i64;
            let (start, end) = offsets(s_mono, span, offset.clamp(i64::MIN / 2, i64::MAX / 2), drift);
            let map = |rt| realtime_to_monotonic(rt, Some(&start), Some(&end));
            prop_assert!(map(x.min(y)) <= map(x.max(y)));
        }
    }
}
