//! An all-reduce that gives up at a deadline ([`Node::sum_across_ranks_until`]).
//!
//! A collective completes only when every rank has joined it: a rank killed under `mpirun
//! --enable-recovery` leaves it incomplete forever, and a rank stuck before it does as long as
//! it is stuck. So a run's collective step is an `MPI_Iallreduce` tested against the run's
//! deadline, with the MPI lock released between tests (the progress process goes on delivering
//! semaphore values meanwhile). A reduction given up on is left to MPI with its buffers, which
//! it may still read and write: they are the reduction's own copies, leaked, never the caller's
//! data.

use std::fmt;
use std::os::raw::{c_int, c_void};
use std::time::Instant;

use mpi::ffi::MPI_Request;
use mpi::raw::AsRaw;
use mpi::traits::Equivalence;

use crate::node::Node;

/// Why [`Node::sum_across_ranks_until`] returned without the sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReduceError {
    /// More values than one MPI call can count (how many).
    TooLong(usize),
    /// MPI refused to start the reduction.
    Refused,
    /// Not every rank had joined it by the deadline.
    TimedOut,
}

impl fmt::Display for ReduceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReduceError::TooLong(len) => {
                write!(f, "{len} values are more than one MPI call can count")
            }
            ReduceError::Refused => f.write_str("MPI refused to start the all-reduce"),
            ReduceError::TimedOut => {
                f.write_str("not every rank had joined the all-reduce by the deadline")
            }
        }
    }
}

impl std::error::Error for ReduceError {}

impl Node {
    /// Sums `data` element-wise across every rank, in place, as
    /// [`sum_across_ranks`](Node::sum_across_ranks) does, but gives up at `deadline` (`None`:
    /// none) if some rank has not joined by then; `data` is left as it was. Every rank must
    /// call it in the same order, with equally long `data`.
    pub fn sum_across_ranks_until(
        &self,
        data: &mut [f64],
        deadline: Option<Instant>,
    ) -> Result<(), ReduceError> {
        let count = c_int::try_from(data.len()).map_err(|_| ReduceError::TooLong(data.len()))?;
        let mut reduction = Reduction {
            request: request_null(),
            contribution: Box::into_raw(Box::<[f64]>::from(&*data)),
            sums: Box::into_raw(vec![0.0; data.len()].into_boxed_slice()),
            state: State::NotStarted,
        };
        let code = self.with_world(|world| {
            // SAFETY: both buffers are `count` values, allocated until the reduction completes
            // (leaked if it never does; see `Reduction`); `world` is a valid communicator and
            // the MPI lock is held (`with_world`); `request` is written by MPI.
            unsafe {
                mpi::ffi::MPI_Iallreduce(
                    reduction.contribution.cast::<c_void>(),
                    reduction.sums.cast::<c_void>(),
                    count,
                    f64::equivalent_datatype().as_raw(),
                    mpi::ffi::RSMPI_SUM,
                    world.as_raw(),
                    &mut reduction.request,
                )
            }
        });
        if code != mpi::ffi::MPI_SUCCESS as c_int {
            return Err(ReduceError::Refused);
        }
        reduction.state = State::Started;
        loop {
            if self.with_world(|_| reduction.test()) {
                // SAFETY: the reduction completed, so MPI no longer writes `sums`, which stays
                // allocated until the reduction drops.
                data.copy_from_slice(unsafe { &*reduction.sums });
                return Ok(());
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return Err(ReduceError::TimedOut);
            }
            // As in the unbounded reduction: other ranks may need this rank's messages before
            // they reach the collective.
            self.wake_progress();
            std::thread::yield_now();
        }
    }
}

/// Where a [`Reduction`] stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// MPI never had the buffers.
    NotStarted,
    /// MPI may read and write the buffers.
    Started,
    /// MPI is done with them.
    Completed,
}

/// One `MPI_Iallreduce` and the buffers MPI reads and writes for it: freed once it completed (or
/// if it never started), leaked if it is given up on while MPI may still use them.
struct Reduction {
    request: MPI_Request,
    /// From `Box::into_raw`, as `sums`.
    contribution: *mut [f64],
    sums: *mut [f64],
    state: State,
}

impl Reduction {
    /// Whether the reduction completed, testing it once if it had not; the caller holds the
    /// MPI lock.
    fn test(&mut self) -> bool {
        if self.state == State::Started {
            let mut completed: c_int = 0;
            // SAFETY: `request` is this reduction's active request (started, not completed)
            // and the caller holds the MPI lock; `completed` is written by MPI, and the status
            // is not asked for.
            unsafe {
                mpi::ffi::MPI_Test(&mut self.request, &mut completed, mpi::ffi::RSMPI_STATUS_IGNORE)
            };
            if completed != 0 {
                self.state = State::Completed;
            }
        }
        self.state == State::Completed
    }
}

impl Drop for Reduction {
    fn drop(&mut self) {
        if self.state == State::Started {
            // MPI may still read or write the buffers: they stay allocated.
            return;
        }
        // SAFETY: both came from `Box::into_raw` and are freed only here; MPI never had them
        // or is done with them.
        unsafe {
            drop(Box::from_raw(self.contribution));
            drop(Box::from_raw(self.sums));
        }
    }
}

/// `MPI_REQUEST_NULL`: no request.
fn request_null() -> MPI_Request {
    // SAFETY: reading an immutable constant that mpi-sys initialises statically.
    unsafe { mpi::ffi::RSMPI_REQUEST_NULL }
}
