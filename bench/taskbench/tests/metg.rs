//! The METG interpolation and the statistics over blocks.

use std::time::Duration;

use causeway_taskbench::metg::{median_and_range, metg, Metg, SweepPoint};

fn point(granularity_ns: f64, efficiency: f64) -> SweepPoint {
    SweepPoint { iterations: 0, tasks: 0, granularity_ns, efficiency }
}

#[test]
fn the_crossing_is_interpolated_in_log_granularity() {
    // 80 % at 10 µs, 20 % at 1 µs: 50 % is halfway between in log scale, √10 µs.
    let sweep = [point(100_000.0, 0.95), point(10_000.0, 0.8), point(1_000.0, 0.2)];
    let Metg::Interpolated(ns) = metg(&sweep, 0.5) else { panic!("crosses between points") };
    assert!((ns - 10f64.powf(3.5)).abs() < 1e-6, "{ns}");
    // Exactly at the threshold on a point: that point's granularity.
    let sweep = [point(4_000.0, 0.9), point(2_000.0, 0.5), point(1_000.0, 0.1)];
    let Metg::Interpolated(ns) = metg(&sweep, 0.5) else { panic!("crosses between points") };
    assert!((ns - 2_000.0).abs() < 1e-6, "{ns}");
}

#[test]
fn a_sweep_that_never_crosses_is_bounded_or_not_reached() {
    let high = [point(1_000.0, 0.9), point(500.0, 0.7), point(250.0, 0.6)];
    assert_eq!(metg(&high, 0.5), Metg::AtMost(250.0));
    let low = [point(1_000.0, 0.4), point(500.0, 0.2), point(250.0, 0.1)];
    assert_eq!(metg(&low, 0.5), Metg::NotReached);
    assert_eq!(metg(&[], 0.5), Metg::NotReached);
    assert_eq!(Metg::NotReached.nanoseconds(), None);
}

#[test]
fn the_smallest_granularity_still_at_50_percent_counts() {
    // A dip below 50 % at a larger granularity (interference on a shared machine) does not end
    // the search: the METG lies below the smallest point still at 50 %.
    let sweep = [point(1_000.0, 0.9), point(100.0, 0.3), point(10.0, 0.6), point(1.0, 0.1)];
    let Metg::Interpolated(ns) = metg(&sweep, 0.5) else { panic!("crosses") };
    assert!(ns > 1.0 && ns < 10.0, "{ns}");
    // A sweep that starts below 50 % and reaches it later still has a METG.
    let late = [point(1_000.0, 0.4), point(100.0, 0.8), point(10.0, 0.2)];
    assert!(matches!(metg(&late, 0.5), Metg::Interpolated(ns) if ns > 10.0 && ns < 100.0));
}

#[test]
fn a_run_becomes_a_point() {
    // 1,000 tasks of 100 iterations on 2 workers in 1 ms, peak 2e8 iterations/s:
    // 2 µs of core time per task, and 1e8 iterations/s, half the peak.
    let run = SweepPoint::of_run(100, 1_000, 2, Duration::from_millis(1), 2e8);
    assert!((run.granularity_ns - 2_000.0).abs() < 1e-6);
    assert!((run.efficiency - 0.5).abs() < 1e-9);
}

#[test]
fn median_and_range_over_blocks() {
    assert_eq!(median_and_range(&mut [3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
    assert_eq!(median_and_range(&mut [4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
    assert_eq!(median_and_range(&mut []), None);
}
