//! Running one case for one driver: the availability probe, the skip line, and the watchdog
//! that turns a hang into a failure naming the case and the driver.

use std::panic;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::{Availability, DriverUnderTest};

/// How long one case may run before it counts as hung. Generous: the test machines are two
/// shared cores and debug builds; a passing case takes a small fraction of it.
pub const CASE_BUDGET: Duration = Duration::from_secs(120);

/// Runs conformance case `case` (named `name`) for `driver`: prints a skip line and returns
/// where the driver is unavailable; otherwise runs the case on a thread of its own and fails
/// (panics) when it panics or runs past [`CASE_BUDGET`], naming the case and the driver.
///
/// [`conformance_suite!`](crate::conformance_suite) calls this once per case; call it directly
/// to run a single case.
pub fn run_case<D: DriverUnderTest>(driver: D, name: &'static str, case: fn(&D)) {
    let driver_name = driver.name();
    if let Availability::Unavailable(reason) = driver.availability() {
        // Exactly `skipped: <reason>`, as the driver tests that skip print it: the test
        // command's summary repeats the first such line (libtest names the case beside it).
        println!("skipped: {reason}");
        return;
    }
    let (finished, outcome) = mpsc::channel();
    // A hung case keeps its thread; the test fails and the test process ends regardless.
    let runner = thread::Builder::new()
        .name(format!("cts-{driver_name}-{name}"))
        .spawn(move || {
            let result = panic::catch_unwind(panic::AssertUnwindSafe(|| case(&driver)));
            // The receiver is gone only when the watchdog already gave up on this case.
            let _ = finished.send(result);
        })
        .expect("a conformance case's thread starts");
    match outcome.recv_timeout(CASE_BUDGET) {
        Ok(Ok(())) => {
            // The thread only has to return now.
            let _ = runner.join();
        }
        Ok(Err(payload)) => {
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("(a panic without a message)");
            panic!("conformance case {name} failed on the {driver_name} driver: {message}");
        }
        Err(_) => panic!(
            "conformance case {name} hung on the {driver_name} driver: still running after \
             {CASE_BUDGET:?}"
        ),
    }
}
