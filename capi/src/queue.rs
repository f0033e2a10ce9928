//! Queue clocks: `cw_queue_*` and `cw_retire` — begin a submission, resolve its waits, commit
//! it with its signals, retire it when it has run.
//!
//! A submission spans several C calls, so it is kept in the queue's slot between them: core's
//! `Submission` borrows a clock mutably, and it borrows a *scratch* copy of the queue's clock
//! (taken at `cw_queue_begin`), never the clock itself, which readers keep seeing as it was
//! until the commit copies the scratch back. The scratch and the open submission live in cells
//! of their own, reached only through raw pointers while the queue's control is held, so the
//! submission's borrow is never overlapped by another reference to the scratch.

use core::cell::UnsafeCell;

use causeway_core::queue::{
    Capabilities, QueueClock, Resolution, SignalRefused, Submission, WaitError,
};
use causeway_core::scope::Endpoint;
use causeway_core::semaphore::Failure;

use crate::exclusive::Exclusive;
use crate::frontier::{with_frontier, CW_FRONTIER_CAPACITY};
use crate::handle::{Guard, Kind, Table};
use crate::semaphore::{semaphore, CSemaphore};
use crate::status::{boundary, failure, require, write_out, CwStatus, Error};
use crate::types::{axis, CwFailure, CwFrontier, CwPoint, CwQueue, CwSemaphore};

/// Signals one commit or retirement takes at most.
pub const CW_MAX_SIGNALS: usize = 8;
/// Queues that may exist at once.
const MAX_QUEUES: usize = if cfg!(feature = "hosted") { 256 } else { 4 };

type Clock = QueueClock<CW_FRONTIER_CAPACITY>;

struct QueueCell {
    /// Held for the length of each call on the queue.
    control: Exclusive<()>,
    /// The submission being built, borrowing `scratch`. Declared first, so it is dropped first.
    open: UnsafeCell<Option<Submission<'static, CW_FRONTIER_CAPACITY>>>,
    /// The queue as committed.
    clock: UnsafeCell<Clock>,
    /// The clock the open submission works on; copied back at its end.
    scratch: UnsafeCell<Clock>,
}

// SAFETY: every field but `control` is reached only by the call holding `control`, which makes
// the cell exclusive to one call at a time; the clocks and the submission are plain data.
unsafe impl Sync for QueueCell {}
// SAFETY: as for `Sync`; the submission's borrow points into the same static slot, wherever the
// cell is used from.
unsafe impl Send for QueueCell {}

const QUEUE_BUSY: &str = "the queue is in use by another call (one context at a time)";

static QUEUES: Table<QueueCell, MAX_QUEUES, { Kind::Queue as u8 }> = Table::new();

/// The queue's cells, with its control held for the length of the call.
struct Held<'c> {
    cell: &'c QueueCell,
}

impl Held<'static> {
    fn clock(&self) -> &Clock {
        // SAFETY: the control is held; the clock is only written by `finish`, under it too.
        unsafe { &*self.cell.clock.get() }
    }

    fn open(&mut self) -> &mut Option<Submission<'static, CW_FRONTIER_CAPACITY>> {
        // SAFETY: the control is held, and this is the only reference made to the cell of the
        // open submission while it lasts (`&mut self`).
        unsafe { &mut *self.cell.open.get() }
    }

    /// Opens a submission on a scratch copy of the clock.
    fn begin(&mut self) -> Result<(), Error> {
        if self.open().is_some() {
            return Err(Error::SubmissionOpen);
        }
        // SAFETY: no submission is open, so nothing borrows the scratch; the control is held.
        // The cell lives in a static table slot, which outlives the submission: the slot drops
        // `open` before the clocks.
        let scratch: &'static mut Clock = unsafe { &mut *self.cell.scratch.get() };
        scratch.clone_from(self.clock());
        *self.open() = Some(scratch.begin());
        Ok(())
    }

    /// Makes the scratch — committed to, or only counted in — the queue's clock, once the
    /// submission that borrowed it has ended.
    fn finish(&mut self) {
        debug_assert!(self.open().is_none());
        // SAFETY: the submission is gone, so nothing borrows the scratch; the control is held.
        unsafe { (*self.cell.clock.get()).clone_from(&*self.cell.scratch.get()) };
    }
}

/// Runs `f` on the queue `handle` names, with its control held.
fn with_queue<R>(
    handle: CwQueue,
    f: impl FnOnce(&mut Held<'static>) -> Result<R, Error>,
) -> Result<R, Error> {
    let guard: Guard<'static, QueueCell> = QUEUES.acquire(handle.bits)?;
    // The guard borrows the static table, so the cell reference may be 'static; the guard
    // keeps the slot's value alive for the call.
    let cell: &'static QueueCell = {
        let cell: *const QueueCell = &*guard;
        // SAFETY: the value lives in a static slot, and `guard` keeps it there until this call
        // ends (it is dropped after `f` returns).
        unsafe { &*cell }
    };
    let result = cell.control.with(QUEUE_BUSY, |()| f(&mut Held { cell }))?;
    drop(guard);
    result
}

/// Creates a queue clock on `axis` (`cw_axis_make`; one queue per axis, never reused), with no
/// operations yet. `wait_before_signal` says whether its waits may be resolved before their
/// signal is submitted (`CW_RESOLUTION_DEVICE_WAIT`); without it such waits are
/// `CW_RESOLUTION_HELD`. A firmware has room for 4 queues at once, a host for 256.
///
/// # Safety
/// `out` must be NULL or valid for writing a `cw_queue`.
#[no_mangle]
pub unsafe extern "C" fn cw_queue_create(
    axis_bits: u64,
    wait_before_signal: bool,
    out: *mut CwQueue,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let axis = axis(axis_bits)?;
        let endpoint = Endpoint {
            machine: axis.machine(),
            process: 0,
            device_group: 0,
            device: 0,
            queue: axis_bits,
        };
        let clock = Clock::new(axis, endpoint, Capabilities { wait_before_signal });
        let bits = QUEUES
            .create(|_| QueueCell {
                control: Exclusive::new(()),
                open: UnsafeCell::new(None),
                scratch: UnsafeCell::new(clock.clone()),
                clock: UnsafeCell::new(clock),
            })
            .ok_or(Error::TableFull(Kind::Queue))?;
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", CwQueue { bits }) }
    })
}

/// Destroys a queue clock (an open submission is abandoned); its handle is stale from now on.
#[no_mangle]
pub extern "C" fn cw_queue_destroy(queue: CwQueue) -> CwStatus {
    boundary(|| {
        // Waits for no other call: one still using the queue keeps it until it returns.
        QUEUES.destroy(queue.bits)?;
        Ok(())
    })
}

/// The epoch of the queue's last committed operation (0 before the first), into `*epoch`, and
/// what the queue knows, copied into `knowledge` unless it is the null handle. An open
/// submission is not counted until it commits.
///
/// # Safety
/// `epoch` must be NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn cw_queue_state(
    queue: CwQueue,
    epoch: *mut u64,
    knowledge: CwFrontier,
) -> CwStatus {
    boundary(|| {
        require(epoch, "epoch")?;
        let (committed, known) =
            with_queue(queue, |held| Ok((held.clock().epoch(), *held.clock().frontier())))?;
        if knowledge.bits != 0 {
            with_frontier(knowledge, |frontier| *frontier = known)?;
        }
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(epoch, "epoch", committed) }
    })
}

/// Starts submitting an operation: its knowledge starts as the queue's. Refused with
/// `CW_STATUS_SUBMISSION_OPEN` while one is open.
#[no_mangle]
pub extern "C" fn cw_queue_begin(queue: CwQueue) -> CwStatus {
    boundary(|| with_queue(queue, Held::begin))
}

/// Abandons the open submission: nothing is committed (its waits stay counted).
#[no_mangle]
pub extern "C" fn cw_queue_abandon(queue: CwQueue) -> CwStatus {
    boundary(|| {
        with_queue(queue, |held| {
            held.open().take().ok_or(Error::NoSubmission)?;
            held.finish();
            Ok(())
        })
    })
}

/// How a wait was resolved.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CwResolution {
    /// The queue already knows the signalling operation: nothing to wait for at all.
    Elided = 0,
    /// The value is already reached: its knowledge is imported, nothing to wait for.
    Satisfied = 1,
    /// The value is still to come: wait for it natively (arm a timepoint, say) before running.
    DeviceWait = 2,
    /// The value is still to come and the queue cannot wait before its signal exists: hold the
    /// operation until the value is reached.
    Held = 3,
    /// The semaphore has failed (`failure` says how): the operation is doomed — it must not run,
    /// and it fails what it signals when it retires. Its waits import nothing.
    Failed = 4,
}

/// What resolving one wait decided.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwWaitResult {
    /// Which resolution applied.
    pub resolution: CwResolution,
    /// The value lies in an external taint window: nothing exact was imported.
    pub tainted: bool,
    /// The exact history entry aged out; an older, still true, one was imported.
    pub aged_out: bool,
    /// For `CW_RESOLUTION_FAILED`, the semaphore's failure; kind NONE otherwise.
    pub failure: CwFailure,
}

/// Resolves a wait of the open submission on `semaphore` ≥ `value`, into `*out`, importing the
/// knowledge of the signal that first reached the value (the late-waiter rule). A failed
/// semaphore is not an error: the resolution is `CW_RESOLUTION_FAILED` and the operation is
/// doomed (`cw_queue_commit` reports it).
///
/// # Safety
/// `out` must be NULL or valid for writing a `cw_wait_result`.
#[no_mangle]
pub unsafe extern "C" fn cw_queue_wait(
    queue: CwQueue,
    semaphore: CwSemaphore,
    value: u64,
    out: *mut CwWaitResult,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let semaphore = self::semaphore(semaphore)?;
        let result = with_queue(queue, |held| {
            let submission = held.open().as_mut().ok_or(Error::NoSubmission)?;
            Ok(match submission.wait(&*semaphore, value) {
                Ok(resolved) => CwWaitResult {
                    resolution: match resolved.resolution {
                        Resolution::Elided => CwResolution::Elided,
                        Resolution::Satisfied => CwResolution::Satisfied,
                        Resolution::DeviceWait => CwResolution::DeviceWait,
                        _ => CwResolution::Held,
                    },
                    tainted: resolved.tainted,
                    aged_out: resolved.aged_out,
                    failure: failure::to_c(None),
                },
                Err(WaitError::Failed(failed)) => CwWaitResult {
                    resolution: CwResolution::Failed,
                    tainted: false,
                    aged_out: false,
                    failure: failure::to_c(Some(failed)),
                },
                Err(error) => return Err(Error::Refused(wait_refusal(error))),
            })
        })?;
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", result) }
    })
}

/// Every semaphore of the C API is system-wide, so no wait is out of its scope; a refusal core
/// adds later is reported by name.
fn wait_refusal(error: WaitError) -> &'static str {
    match error {
        WaitError::OutOfScope => "the semaphore's scope does not reach this queue",
        _ => "the wait was refused",
    }
}

/// One signal: a semaphore and the value it is to reach.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwSignal {
    /// The semaphore.
    pub semaphore: CwSemaphore,
    /// The value.
    pub value: u64,
}

/// What a commit decided.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwSubmitted {
    /// The operation's own point: the queue's axis and its new epoch.
    pub point: CwPoint,
    /// How many of its waits were resolved `CW_RESOLUTION_HELD`.
    pub held: u32,
    /// Kind NONE when the operation may run. Otherwise it was committed *doomed* — a wait's
    /// semaphore had failed, or only a signal's timeline had (`CW_FAILURE_KIND_ABORTED`) — and
    /// must not run: retire it with this failure, which fails what it signals.
    pub failure: CwFailure,
    /// The index of the first signal whose timeline had already failed, or -1.
    pub failed_signal: i32,
}

/// The semaphores of `signals`, each in use for the length of the call.
type SignalGuards = [Option<(Guard<'static, CSemaphore>, u64)>; CW_MAX_SIGNALS];

/// Reads `count` signals from `signals` and uses the semaphores their handles name, with the
/// first handle's error among those that name none.
///
/// # Safety
/// `signals` must be NULL or valid for reading `count` `cw_signal`s.
unsafe fn signal_guards(
    signals: *const CwSignal,
    count: usize,
) -> Result<(SignalGuards, Option<Error>), Error> {
    if count > CW_MAX_SIGNALS {
        return Err(Error::TooMany { what: "signals", count, limit: CW_MAX_SIGNALS });
    }
    let mut guards: SignalGuards = [const { None }; CW_MAX_SIGNALS];
    if count == 0 {
        return Ok((guards, None));
    }
    require(signals, "signals")?;
    // SAFETY: non-null, and valid for `count` signals by the caller's contract.
    let signals = unsafe { core::slice::from_raw_parts(signals, count) };
    let mut first_error = None;
    for (guard, signal) in guards.iter_mut().zip(signals) {
        match semaphore(signal.semaphore) {
            Ok(semaphore) => *guard = Some((semaphore, signal.value)),
            Err(error) => first_error = first_error.or(Some(error)),
        }
    }
    Ok((guards, first_error))
}

/// Commits the open submission with its `count` signals (at most `CW_MAX_SIGNALS`): gives it
/// the queue's next epoch, makes its knowledge the queue's, and records each signal as pending
/// with that knowledge, so waits submitted from now on can import it before it is reached.
/// Into `*out` what was decided, and into `frontier` (unless it is the null handle) the
/// operation's knowledge, itself included. Either every signal is recorded or none is: a
/// refused one (`CW_STATUS_NOT_ADVANCING`, `CW_STATUS_HISTORY_FULL`) commits nothing and closes
/// the submission (begin again). A signal on a failed timeline is no refusal: the operation is
/// committed doomed (`out->failure`).
///
/// # Safety
/// `signals` must be NULL or valid for reading `count` `cw_signal`s; `out` NULL or valid for
/// writing a `cw_submitted`.
#[no_mangle]
pub unsafe extern "C" fn cw_queue_commit(
    queue: CwQueue,
    signals: *const CwSignal,
    count: usize,
    frontier: CwFrontier,
    out: *mut CwSubmitted,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        // SAFETY: forwarded from this function's contract.
        let (guards, unusable) = unsafe { signal_guards(signals, count) }?;
        if let Some(error) = unusable {
            return Err(error);
        }
        // Checked before anything is committed, so that a bad output handle refuses the commit.
        if frontier.bits != 0 {
            with_frontier(frontier, |_| ())?;
        }
        let submitted = with_queue(queue, |held| {
            let submission = held.open().take().ok_or(Error::NoSubmission)?;
            let signals = guards.iter().flatten().map(|(semaphore, value)| (&**semaphore, *value));
            let committed = submission.commit_signalling(signals);
            held.finish();
            committed
                .map_err(|SignalRefused { index, error }| Error::SignalRefused { index, error })
        })?;
        if frontier.bits != 0 {
            // Checked above; only a concurrent destroy or use could refuse it now, and the
            // operation stays committed either way.
            with_frontier(frontier, |target| *target = submitted.frontier)?;
        }
        let result = CwSubmitted {
            point: CwPoint::from_point(submitted.point),
            held: submitted.held,
            failure: failure::to_c(submitted.failure),
            failed_signal: submitted
                .failed_signal
                .and_then(|(index, _)| i32::try_from(index).ok())
                .unwrap_or(-1),
        };
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", result) }
    })
}

/// Retires an operation that has run (or never will): with `result` kind NONE completes each of
/// its `count` signals, reaching their values and firing the timepoints they reach; with a
/// failure fails each signal's timeline with it (its waiters are told). A signal whose handle
/// names no semaphore (one destroyed meanwhile, say) is skipped and its error returned, after
/// every other signal was retired, so no waiter of theirs is left hanging.
///
/// # Safety
/// `signals` must be NULL or valid for reading `count` `cw_signal`s.
#[no_mangle]
pub unsafe extern "C" fn cw_retire(
    signals: *const CwSignal,
    count: usize,
    result: CwFailure,
) -> CwStatus {
    boundary(|| {
        let result = failure::from_c(result)?.map_or(Ok(()), Err::<(), Failure>);
        // SAFETY: forwarded from this function's contract.
        let (guards, unusable) = unsafe { signal_guards(signals, count) }?;
        let signals = guards.iter().flatten().map(|(semaphore, value)| (&**semaphore, *value));
        causeway_core::queue::retire(signals, result);
        unusable.map_or(Ok(()), Err)
    })
}
