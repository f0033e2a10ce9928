//! Shutting a device down within a bound, and what it reports.

use std::time::{Duration, Instant};

use super::process::Teardown;
use super::Device;
use crate::clock;
use crate::ids::QueueId;
#[cfg(doc)]
use crate::{Backend, Op};

impl Device {
    /// Shuts the device down within a bound: stops the pool, waits up to `grace` for workers to
    /// finish what they are running, then cancels every operation that has not run (failing
    /// its signals as cancelled, so host waiters on other threads wake) and fails every
    /// operation still running — a kernel or host function that never returns — as aborted.
    /// Workers stuck in such work are abandoned, not joined: their threads are detached, and
    /// the device's state, which they can still reach, is kept alive (leaked) for them.
    /// Each driver then stops its own work ([`Backend::stop`]) within the same bound.
    /// Returns at most about `grace` plus [`BOOKKEEPING_GRACE`] after it is called.
    pub fn shutdown(mut self, grace: Duration) -> ShutdownReport {
        self.stop(grace)
    }

    fn stop(&mut self, grace: Duration) -> ShutdownReport {
        let Some(pool) = self.pool.take() else { return ShutdownReport::default() };
        let pool = pool.shutdown_within(grace);
        let shared = self.shared();
        let abandoned = !pool.abandoned.is_empty();
        let deadline = Instant::now() + BOOKKEEPING_GRACE;
        let mut report = ShutdownReport {
            abandoned_workers: pool.abandoned,
            panicked_workers: pool.panicked,
            ..ShutdownReport::default()
        };
        for queue in shared.queues.iter() {
            match queue.tear_down(shared, abandoned, deadline) {
                Teardown::Done { cancelled, stuck } => {
                    report.cancelled += cancelled;
                    report.stuck.extend(stuck.into_iter().map(|running| StuckOp {
                        queue: queue.id,
                        tag: running.tag,
                        worker: (running.worker != usize::MAX).then_some(running.worker),
                        running: Duration::from_nanos(
                            clock::now_ns().saturating_sub(running.since_ns),
                        ),
                    }));
                }
                Teardown::Busy => report.busy_queues.push(queue.id),
            }
        }
        // Every backend, even when the state will be kept anyway: each ends what it runs.
        let backends_idle = shared.backends.iter().fold(true, |idle, backend| {
            let stopped = backend.stop(deadline);
            if !stopped {
                report.busy_drivers.push(backend.name());
            }
            idle && stopped
        });
        report.leaked = abandoned || !report.busy_queues.is_empty() || !backends_idle;
        if !report.leaked {
            // SAFETY: `owned` came from `Box::into_raw` in `build` and is freed only here, once
            // (the pool was taken above, so a later `stop` returns early): every worker that
            // held references into it is joined, every backend has stopped everything of its
            // own that could reach it, every timepoint armed on its semaphores has been
            // cancelled by `tear_down`, and `&mut self` rules out host threads still borrowing
            // it. With an abandoned worker or a backend still busy it is never freed.
            drop(unsafe { Box::from_raw(self.owned) });
        }
        report
    }
}
/// How long [`Device::shutdown`] waits, after the grace period, for a queue's bookkeeping
/// between two operations (not user work) to finish before leaving that queue as it is.
pub const BOOKKEEPING_GRACE: Duration = Duration::from_secs(1);
/// The grace period of dropping a device ([`Device::shutdown`] with this bound).
pub const DROP_GRACE: Duration = Duration::from_secs(10);

/// What [`Device::shutdown`] found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Operations that had not run, cancelled (their signals failed as cancelled).
    pub cancelled: usize,
    /// Operations still running at the end of the grace period, failed as aborted and
    /// abandoned on their workers.
    pub stuck: Vec<StuckOp>,
    /// Workers still inside work when the grace period ended: detached, never joined.
    pub abandoned_workers: Vec<usize>,
    /// Workers that exited by panicking.
    pub panicked_workers: usize,
    /// Queues whose bookkeeping did not finish within [`BOOKKEEPING_GRACE`] (an observer or a
    /// waker that blocks): left as they were, their operations not cancelled; when the
    /// bookkeeping goes on, it starts at most one more operation's work and then stops.
    pub busy_queues: Vec<QueueId>,
    /// Drivers ([`Backend::name`]) whose own work had not stopped within
    /// [`BOOKKEEPING_GRACE`] ([`Backend::stop`]).
    pub busy_drivers: Vec<&'static str>,
    /// Whether the device's state was kept alive for abandoned workers instead of freed.
    pub leaked: bool,
}

/// An operation abandoned while it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StuckOp {
    /// Its queue.
    pub queue: QueueId,
    /// Its tag ([`Op::tag`]).
    pub tag: u64,
    /// The worker running its work; `None` for a command buffer (its kernels run on every
    /// worker).
    pub worker: Option<usize>,
    /// How long it had been running when the device gave up on it.
    pub running: Duration,
}

impl Drop for Device {
    /// Shuts down within [`DROP_GRACE`] (see [`Device::shutdown`]); call `shutdown` for the
    /// report or another bound.
    fn drop(&mut self) {
        self.stop(DROP_GRACE);
    }
}
