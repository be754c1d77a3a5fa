//! The perf mmap page's TSC ↔ perf-time conversion (formats.md §1.1): the kernel's quot/rem
//! formula, its inverse, and the TSC frequency the page implies. Pure arithmetic.

use serde::{Deserialize, Serialize};

use crate::sys::clock::PerfPageTime;

/// The conversion fields of a perf mmap metadata page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PerfTimeConv {
    /// Right shift of the TSC → ns scaling (ns = ticks · `time_mult` >> `time_shift`).
    pub time_shift: u16,
    /// Multiplier of the TSC → ns scaling.
    pub time_mult: u32,
    /// Perf clock ns at TSC 0 (local_clock; valid with `cap_user_time_zero`).
    pub time_zero: u64,
    /// ns the kernel adds for an event's enabled/running times.
    pub time_offset: u64,
    /// TSC ticks at the page's last update, for extending a short counter.
    pub time_cycles: u64,
    /// Mask of the counter's valid bits (with `cap_user_time_short`).
    pub time_mask: u64,
    /// `time_mult`/`time_shift` are valid (TSC → ns deltas).
    pub cap_user_time: bool,
    /// `time_zero` is valid: TSC → the event's perf clock (local_clock, only for events opened
    /// without `use_clockid`).
    pub cap_user_time_zero: bool,
    /// The counter is `time_mask` bits wide and must be extended with `time_cycles` first.
    pub cap_user_time_short: bool,
}

impl PerfTimeConv {
    pub(crate) fn from_page(page: &PerfPageTime) -> Self {
        Self {
            time_shift: page.time_shift,
            time_mult: page.time_mult,
            time_zero: page.time_zero,
            time_offset: page.time_offset,
            time_cycles: page.time_cycles,
            time_mask: page.time_mask,
            cap_user_time: page.cap_user_time(),
            cap_user_time_zero: page.cap_user_time_zero(),
            cap_user_time_short: page.cap_user_time_short(),
        }
    }

    fn shift(&self) -> Option<u32> {
        let shift = u32::from(self.time_shift);
        (shift < 64 && self.time_mult != 0).then_some(shift)
    }

    /// TSC → perf time in ns, exactly as the kernel computes it (u64, wrapping): the counter is
    /// split at `time_shift` so `quot * mult` and `rem * mult` stay in range where `cyc * mult`
    /// would overflow. None when the page has no usable mult/shift. Meaningful only when
    /// `cap_user_time_zero` is set.
    pub fn tsc_to_perf_time(&self, cyc: u64) -> Option<u64> {
        let shift = self.shift()?;
        let mult = u64::from(self.time_mult);
        let cyc = if self.cap_user_time_short {
            self.time_cycles
                .wrapping_add(cyc.wrapping_sub(self.time_cycles) & self.time_mask)
        } else {
            cyc
        };
        let quot = cyc >> shift;
        let rem = cyc & ((1u64 << shift) - 1);
        Some(
            self.time_zero
                .wrapping_add(quot.wrapping_mul(mult))
                .wrapping_add(rem.wrapping_mul(mult) >> shift),
        )
    }

    /// Perf time in ns → TSC, the inverse of [`Self::tsc_to_perf_time`] (as in perf's
    /// `perf_time_to_tsc`; the remainder term is computed in u128 so it cannot overflow).
    pub fn perf_time_to_tsc(&self, ns: u64) -> Option<u64> {
        let shift = self.shift()?;
        let mult = u64::from(self.time_mult);
        let t = ns.wrapping_sub(self.time_zero);
        let quot = t / mult;
        let rem = t % mult;
        let rem_cycles = ((u128::from(rem) << shift) / u128::from(mult)) as u64;
        Some((quot << shift).wrapping_add(rem_cycles))
    }

    /// The TSC frequency the kernel calibrated: ns = cyc·mult >> shift, so Hz = 1e9·2^shift/mult.
    pub fn tsc_hz(&self) -> Option<f64> {
        if !self.cap_user_time {
            return None;
        }
        let shift = self.shift()?;
        Some(1e9 * 2f64.powi(shift as i32) / f64::from(self.time_mult))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A 2.5 GHz TSC as the kernel's cyc2ns scales it: 0.4 ns/cycle = 858993459 / 2^31.
    fn x86_like() -> PerfTimeConv {
        PerfTimeConv {
            time_shift: 31,
            time_mult: 858_993_459,
            time_zero: 1_000_000,
            cap_user_time: true,
            cap_user_time_zero: true,
            ..Default::default()
        }
    }

    #[test]
    fn realistic_shift_31() {
        // cyc = 10e9: quot = 10e9 >> 31 = 4, rem = 10e9 - 4·2^31 = 1410065408;
        // 4·858993459 = 3435973836; 1410065408·858993459 >> 31 = 564026163;
        // 1_000_000 + 3435973836 + 564026163 = 4000999999.
        assert_eq!(
            x86_like().tsc_to_perf_time(10_000_000_000),
            Some(4_000_999_999)
        );
        assert_eq!(x86_like().tsc_to_perf_time(0), Some(1_000_000));
    }

    #[test]
    fn large_tsc_does_not_overflow() {
        let cyc = 9_000_000_000_000_000_000u64;
        assert!(
            cyc.checked_mul(858_993_459).is_none(),
            "naive product must overflow"
        );
        // floor(cyc·mult / 2^31) = 3599999999161809682 (exact big-integer arithmetic), + time_zero.
        assert_eq!(
            x86_like().tsc_to_perf_time(cyc),
            Some(3_599_999_999_162_809_682)
        );
    }

    #[test]
    fn short_counter_is_extended() {
        // A 56-bit counter that wrapped just after time_cycles; 40 ns per tick (mult = 40·2^24).
        let conv = PerfTimeConv {
            time_shift: 24,
            time_mult: 40 << 24,
            time_zero: 0,
            time_cycles: 0x00FF_FFFF_FFFF_F000,
            time_mask: (1 << 56) - 1,
            cap_user_time: true,
            cap_user_time_zero: true,
            cap_user_time_short: true,
            ..Default::default()
        };
        // Extended: 0xFF_FFFF_FFFF_F000 + ((0x1000 - 0xFF_FFFF_FFFF_F000) & mask) = 2^56 + 0x1000.
        let ext = (1u64 << 56) + 0x1000;
        assert_eq!(conv.tsc_to_perf_time(0x1000), Some(ext * 40));
        assert_eq!(
            conv.tsc_to_perf_time(0x1000),
            Some(2_882_303_761_517_281_280)
        );
    }

    #[test]
    fn inverse() {
        // t = 4000999999 - 1e6 = 3999999999; quot = t / 858993459 = 4, rem = 564026163;
        // (4 << 31) + (564026163 << 31) / 858993459 = 8589934592 + 1410065407 = 9999999999.
        assert_eq!(
            x86_like().perf_time_to_tsc(4_000_999_999),
            Some(9_999_999_999)
        );
        for cyc in [0u64, 12345, 3_000_000_000, 1 << 50] {
            let back = x86_like()
                .perf_time_to_tsc(x86_like().tsc_to_perf_time(cyc).unwrap())
                .unwrap();
            // One ns is 2.5 cycles; truncation loses at most that.
            assert!(cyc - back <= 3, "{cyc} -> {back}");
        }
    }

    #[test]
    fn frequency_and_invalid_pages() {
        let hz = x86_like().tsc_hz().unwrap();
        assert!((hz - 2.5e9).abs() < 1.0, "{hz}");
        let empty = PerfTimeConv::default();
        assert_eq!(empty.tsc_hz(), None);
        assert_eq!(empty.tsc_to_perf_time(5), None);
        assert_eq!(empty.perf_time_to_tsc(5), None);
        let bad_shift = PerfTimeConv {
            time_shift: 64,
            ..x86_like()
        };
        assert_eq!(bad_shift.tsc_to_perf_time(5), None);
    }

    /// A page with `mult`/`shift` and `time_zero`, as the kernel fills it for a full-width TSC.
    fn page(shift: u16, mult: u32, time_zero: u64) -> PerfTimeConv {
        PerfTimeConv {
            time_shift: shift,
            time_mult: mult,
            time_zero,
            cap_user_time: true,
            cap_user_time_zero: true,
            ..Default::default()
        }
    }

    /// A kernel-like scaling: `shift` up to 32 and between 1/16 and 16 ns per tick.
    fn scaling() -> impl Strategy<Value = (u16, u32)> {
        (4u16..=32).prop_flat_map(|shift| {
            let one_ns = 1u64 << shift;
            let mult = (one_ns / 16).max(1)..(one_ns * 16).min(u64::from(u32::MAX));
            (Just(shift), mult.prop_map(|m| m as u32))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The kernel's split formula is `time_zero + ⌊cyc·mult / 2^shift⌋` (mod 2^64), computed
        /// here in 128 bits, for every counter value and every shift the kernel uses.
        #[test]
        fn tsc_to_perf_time_is_the_exact_product(
            cyc: u64,
            shift in 0u16..=32,
            mult in 1u32..,
            time_zero: u64,
        ) {
            let exact = ((u128::from(cyc) * u128::from(mult)) >> shift) as u64;
            prop_assert_eq!(
                page(shift, mult, time_zero).tsc_to_perf_time(cyc),
                Some(time_zero.wrapping_add(exact))
            );
        }

        /// Within a recording's range, TSC → perf time keeps order, and the inverse lands on
        /// the tick at or just before the time: at most one tick early, never late.
        #[test]
        fn perf_time_to_tsc_is_the_inverse_to_within_a_tick(
            (shift, mult) in scaling(),
            time_zero in 0u64..1 << 61,
            cyc in 0u64..1 << 56,
            other in 0u64..1 << 56,
        ) {
            let conv = page(shift, mult, time_zero);
            let time = |c| conv.tsc_to_perf_time(c).unwrap();
            let (lo, hi) = (cyc.min(other), cyc.max(other));
            prop_assert!(time(lo) <= time(hi));

            let ns = time(cyc);
            let back = conv.perf_time_to_tsc(ns).unwrap();
            prop_assert!(back <= cyc);
            prop_assert!(time(back) <= ns && time(back + 1) >= ns);
            // Never more than one ns worth of ticks early.
            prop_assert!(u128::from(cyc - back) * u128::from(mult) <= (1u128 << shift) + u128::from(mult));
        }
    }
}
