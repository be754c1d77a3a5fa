//! Live checks of the timeline against the kernel: TSC → sample clock error after a real
//! calibration, the perf mmap page read, and REALTIME → sample clock. Run with
//! `cargo test --test suite timeline_live:: -- --nocapture` to see the measured numbers.

use std::sync::Mutex;
use std::time::Duration;

use jprof::sys::clock::{self, CLOCK_MONOTONIC, CLOCK_REALTIME};
use jprof::timeline::{Calibration, ClockConversion, TscMethod};

/// The tests measure sub-µs timing; running them one at a time keeps the two vCPUs quiet.
static SERIAL: Mutex<()> = Mutex::new(());

fn calibrate(over: Duration) -> ClockConversion {
    let calibration = Calibration::start();
    std::thread::sleep(over);
    calibration.finish()
}

#[test]
fn tsc_to_sample_error_is_below_a_microsecond() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Pairs read during the recording (inside the calibrated interval), as samples would be.
    let calibration = Calibration::start();
    let mut inside = Vec::new();
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(10));
        inside.push(clock::tightest_tsc_pair(CLOCK_MONOTONIC, 50).expect("rdtscp pairs"));
    }
    let conv = calibration.finish();
    eprintln!(
        "calibration: method {:?}, slope from {:?}, span {} ms, fitted {:.0} Hz, nominal {:?} ({:?}), \
         uncertainty ±{:.1} ns, residual {:.1} ns rms, notes {:?}",
        conv.tsc_method,
        conv.slope_source,
        conv.calibration_span_ns / 1_000_000,
        conv.fitted_tsc_hz.unwrap_or(0.0),
        conv.nominal_tsc_hz,
        conv.nominal_tsc_source,
        conv.fit_uncertainty_ns,
        conv.fit_residual_ns,
        conv.notes,
    );
    if !conv.tsc_facts.tsc_usable() {
        assert!(!cfg!(target_arch = "x86_64") || !conv.tsc_facts.invariant_tsc);
        assert_eq!(conv.tsc_method, TscMethod::None);
        assert_eq!(conv.tsc_to_sample(12345), None);
        eprintln!("no usable TSC on this machine: {:?}", conv.tsc_facts);
        return;
    }
    assert_eq!(conv.tsc_method, TscMethod::PairedRead);
    assert_eq!(conv.slope_source.as_deref(), Some("paired reads"));
    assert!(conv.calibration_span_ns >= 200_000_000);

    // Fresh pairs over the next ~100 ms (extrapolating past the calibrated interval, as a
    // recording's last samples and late side data do).
    let mut errors = Vec::new();
    let mut outside_bracket = 0i64;
    for _ in 0..50 {
        let pair = clock::tightest_tsc_pair(CLOCK_MONOTONIC, 50).expect("rdtscp pairs");
        let predicted = conv.tsc_to_sample(pair.tsc).expect("conversion");
        errors.push(predicted as i64 - pair.ns as i64);
        // The clock was read inside [t1, t2]; how far outside the converted bracket is it?
        let t1 = pair.tsc - pair.bracket_ticks / 2;
        let t2 = t1 + pair.bracket_ticks;
        let (lo, hi) = (
            conv.tsc_to_sample(t1).unwrap(),
            conv.tsc_to_sample(t2).unwrap(),
        );
        let outside = (lo as i64 - pair.ns as i64)
            .max(pair.ns as i64 - hi as i64)
            .max(0);
        outside_bracket = outside_bracket.max(outside);
        std::thread::sleep(Duration::from_millis(2));
    }
    let (median, max) = median_and_max(&errors);
    eprintln!(
        "tsc_to_sample vs CLOCK_MONOTONIC over {} fresh pairs after the calibration: median \
         |error| {median} ns, max {max} ns, read outside its converted bracket by at most \
         {outside_bracket} ns",
        errors.len()
    );
    assert!(
        max < 1_000,
        "TSC conversion error {max} ns ≥ 1 µs: {errors:?}"
    );
    let inside_errors: Vec<i64> = inside
        .iter()
        .map(|p| conv.tsc_to_sample(p.tsc).unwrap() as i64 - p.ns as i64)
        .collect();
    let (median, max) = median_and_max(&inside_errors);
    eprintln!(
        "tsc_to_sample vs CLOCK_MONOTONIC over {} pairs inside the calibration: median |error| \
         {median} ns, max {max} ns",
        inside_errors.len()
    );
    assert!(
        max < 1_000,
        "TSC conversion error {max} ns ≥ 1 µs: {inside_errors:?}"
    );
}

fn median_and_max(errors: &[i64]) -> (i64, i64) {
    let mut abs: Vec<i64> = errors.iter().map(|e| e.abs()).collect();
    abs.sort_unstable();
    (abs[abs.len() / 2], abs[abs.len() - 1])
}

#[test]
fn perf_page_is_read_under_its_seqlock() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let page = clock::probe_perf_page_time().expect("perf_event_open of a dummy event on self");
    eprintln!(
        "perf page: version {}, lock {}, size {}, capabilities {:#x} (user_time {}, user_time_zero {}, \
         user_time_short {}), time_shift {}, time_mult {}, time_zero {}, time_offset {}",
        page.version,
        page.lock,
        page.size,
        page.capabilities,
        page.cap_user_time(),
        page.cap_user_time_zero(),
        page.cap_user_time_short(),
        page.time_shift,
        page.time_mult,
        page.time_zero,
        page.time_offset,
    );
    // The kernel never writes `version` (it stays 0), so what proves a real, settled copy is the
    // seqlock: even, and bumped at least once by the update made at mmap time; and the
    // cap_bit0_is_deprecated bit (capabilities bit 1), set by every kernel since 3.12.
    assert_eq!(page.lock % 2, 0);
    assert!(page.lock >= 2, "page never published: lock {}", page.lock);
    assert_ne!(
        page.capabilities & 0b10,
        0,
        "cap_bit0_is_deprecated not set"
    );

    let conv = calibrate(Duration::from_millis(60));
    let stored = conv.perf_page.expect("calibration stores the page");
    assert_eq!(stored.cap_user_time_zero, page.cap_user_time_zero());
    // The sample clock is CLOCK_MONOTONIC, so the page never becomes the TSC method.
    assert_ne!(conv.tsc_method, TscMethod::PerfPageTimeZero);

    if page.cap_user_time_zero() {
        // time_zero maps to local_clock, not MONOTONIC, but both tick in ns: over ~50 ms the page
        // formula and CLOCK_MONOTONIC must advance alike.
        let a = clock::tightest_tsc_pair(CLOCK_MONOTONIC, 50).expect("pairs");
        std::thread::sleep(Duration::from_millis(50));
        let b = clock::tightest_tsc_pair(CLOCK_MONOTONIC, 50).expect("pairs");
        let page_delta = stored.tsc_to_perf_time(b.tsc).unwrap() as i64
            - stored.tsc_to_perf_time(a.tsc).unwrap() as i64;
        let mono_delta = b.ns as i64 - a.ns as i64;
        eprintln!("page formula advanced {page_delta} ns while MONOTONIC advanced {mono_delta} ns");
        assert!((page_delta - mono_delta).abs() < 50_000);
        let page_hz = conv
            .tsc_facts
            .page_tsc_hz
            .expect("cap_user_time implies a rate");
        let fitted = conv.fitted_tsc_hz.expect("fit");
        assert!(
            (page_hz / fitted - 1.0).abs() < 1e-3,
            "{page_hz} vs {fitted}"
        );
    } else if conv.tsc_facts.tsc_usable() {
        eprintln!("no time_zero on this machine: TSC converts through the paired-read calibration");
        assert_eq!(conv.tsc_method, TscMethod::PairedRead);
        assert!(conv.tsc_to_sample(clock::rdtsc().unwrap()).is_some());
    } else {
        assert_eq!(conv.tsc_method, TscMethod::None);
    }
}

#[test]
fn realtime_to_sample_matches_paired_reads() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let conv = calibrate(Duration::from_millis(100));
    let start = conv.realtime_offset_start.expect("offset at start");
    let end = conv.realtime_offset_end.expect("offset at end");
    eprintln!(
        "REALTIME − MONOTONIC: start {} ns (±{} ns), end {} ns (±{} ns), drift {} ns over {} ms",
        start.offset_ns,
        start.bracket_ns / 2,
        end.offset_ns,
        end.bracket_ns / 2,
        end.offset_ns - start.offset_ns,
        (end.mono_ns - start.mono_ns) / 1_000_000
    );
    let mut worst = 0i64;
    for _ in 0..20 {
        let pair = clock::tightest_clock_pair(CLOCK_MONOTONIC, CLOCK_REALTIME, 50).expect("clocks");
        let error = conv.realtime_to_sample(pair.b_ns) as i64 - pair.a_ns as i64;
        worst = worst.max(error.abs());
        std::thread::sleep(Duration::from_millis(2));
    }
    eprintln!("realtime_to_sample vs CLOCK_MONOTONIC: max |error| {worst} ns");
    assert!(worst < 1_000, "REALTIME conversion error {worst} ns");
    assert_eq!(conv.monotonic_to_sample(12_345), 12_345);
}

#[test]
fn immediate_finish_waits_for_a_usable_span() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let begun = std::time::Instant::now();
    let conv = Calibration::start().finish();
    assert!(begun.elapsed() >= jprof::timeline::MIN_CALIBRATION_SPAN);
    if conv.tsc_facts.tsc_usable() {
        assert!(
            conv.calibration_span_ns >= 50_000_000,
            "{}",
            conv.calibration_span_ns
        );
        assert_eq!(conv.slope_source.as_deref(), Some("paired reads"));
        let pair = clock::tightest_tsc_pair(CLOCK_MONOTONIC, 50).expect("pairs");
        let error = conv.tsc_to_sample(pair.tsc).unwrap() as i64 - pair.ns as i64;
        eprintln!("after a 50 ms calibration: error {error} ns");
        assert!(error.abs() < 1_000);
    }
}
