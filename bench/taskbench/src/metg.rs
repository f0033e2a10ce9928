//! Minimum effective task granularity, as the Task Bench paper defines it.
//!
//! A run of `tasks` tasks of `iterations` kernel iterations each, on `workers` cores, taking
//! `elapsed`, has
//!
//! - **task granularity** `elapsed · workers / tasks`: the core time each task took, overhead
//!   included;
//! - **efficiency** `(tasks · iterations / elapsed) / peak`: the useful work rate it reached,
//!   as a share of the peak rate measured on this machine (the kernel alone on every core, no
//!   dependencies, no scheduling).
//!
//! Sweeping the iterations downward, the granularity falls and, once overhead dominates, so
//! does the efficiency. METG(50 %) is the smallest granularity at which the efficiency is still
//! 50 %: below the smallest-granularity point at or above 50 %, interpolated linearly in
//! log-granularity between it and the next point (which is below). A dip below 50 % at a larger
//! granularity does not end the search: on a shared machine interference only ever lowers a
//! run's efficiency, so a point at or above 50 % is evidence of what the system can do and a
//! point below it is not evidence of what it cannot.

use std::time::Duration;

/// One measured point of a sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepPoint {
    /// Kernel iterations per task.
    pub iterations: u32,
    /// Tasks in the run.
    pub tasks: u64,
    /// Core time per task, in nanoseconds.
    pub granularity_ns: f64,
    /// Useful work rate over the peak, 0 to about 1.
    pub efficiency: f64,
}

impl SweepPoint {
    /// The point of one run (see the module docs); `peak` is kernel iterations per second on
    /// all workers.
    pub fn of_run(
        iterations: u32,
        tasks: u64,
        workers: usize,
        elapsed: Duration,
        peak: f64,
    ) -> SweepPoint {
        let seconds = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
        let granularity_ns = seconds * 1e9 * workers as f64 / tasks as f64;
        let efficiency = tasks as f64 * f64::from(iterations) / seconds / peak;
        SweepPoint { iterations, tasks, granularity_ns, efficiency }
    }
}

/// Where a sweep's efficiency crosses the threshold.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Metg {
    /// Crossed between two measured points: the interpolated granularity, in nanoseconds.
    Interpolated(f64),
    /// Never fell below the threshold: the METG is at most the smallest granularity measured.
    AtMost(f64),
    /// Below the threshold at every granularity measured.
    NotReached,
}

impl Metg {
    /// The granularity in nanoseconds, where there is one (an upper bound for
    /// [`Metg::AtMost`]).
    pub fn nanoseconds(self) -> Option<f64> {
        match self {
            Metg::Interpolated(ns) | Metg::AtMost(ns) => Some(ns),
            Metg::NotReached => None,
        }
    }
}

/// The METG at `threshold` (0.5 for the paper's figure) of a sweep given from the largest
/// granularity down; an empty sweep never reaches it.
pub fn metg(sweep: &[SweepPoint], threshold: f64) -> Metg {
    let Some(last_effective) = sweep.iter().rposition(|point| point.efficiency >= threshold) else {
        return Metg::NotReached;
    };
    let Some(&below) = sweep.get(last_effective + 1) else {
        let smallest = sweep.iter().map(|point| point.granularity_ns).fold(f64::INFINITY, f64::min);
        return Metg::AtMost(smallest);
    };
    let above = sweep[last_effective];
    let (log_above, log_below) = (above.granularity_ns.ln(), below.granularity_ns.ln());
    let share = (above.efficiency - threshold) / (above.efficiency - below.efficiency);
    Metg::Interpolated((log_above + share * (log_below - log_above)).exp())
}

/// The median, minimum and maximum of `values` (which it sorts); `None` when empty.
pub fn median_and_range(values: &mut [f64]) -> Option<(f64, f64, f64)> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    let median = if values.len() % 2 == 0 {
        (values[middle - 1] + values[middle]) / 2.0
    } else {
        values[middle]
    };
    Some((median, values[0], values[values.len() - 1]))
}
