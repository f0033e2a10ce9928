//! Timeline semaphores with a frontier history, and timepoints: `cw_semaphore_*`,
//! `cw_timepoint_*`.
//!
//! # Timepoints
//!
//! A timepoint is a C callback and its user data, armed on a semaphore for a value: the
//! callback runs once, on the thread (or in the interrupt handler) whose signal reaches the
//! value or fails the timeline, outside every lock. While armed, the timepoint keeps its
//! semaphore's slot in use (`Guard::keep`), so the semaphore outlives every timepoint linked
//! into it even when it is destroyed meanwhile; whoever ends the arming — the callback's firing,
//! or a cancellation — swaps `armed_on` to zero and so is the one that gives that use back.
//!
//! Every path that fires a callback runs inside a C call that holds its own use of the
//! semaphore (signal, fail, retire, destroy), so the use a firing timepoint gives back is never
//! the semaphore's last while the signaller still walks its waiters.
//!
//! A callback must not cancel, re-arm or destroy its own timepoint: those calls find it firing
//! and answer `CW_STATUS_BUSY` rather than wait for a callback that is waiting for them.

use core::ffi::c_void;
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::{Arm, Cancelled, Failure, Notify, Outcome, Semaphore, Timepoint};

use crate::exclusive::Exclusive;
use crate::frontier::{frontier_value, CW_FRONTIER_CAPACITY};
use crate::handle::{Guard, HandleError, Kind, Table};
use crate::status::{boundary, failure, require, write_out, CwStatus, Error};
use crate::types::{CwFailure, CwOutcome, CwPoint, CwSemaphore, CwTimepoint};

/// Signals a semaphore remembers (pending ones, plus the newest reached one for late waiters).
const HISTORY: usize = if cfg!(feature = "hosted") { 16 } else { 4 };
/// Semaphores that may exist at once.
const MAX_SEMAPHORES: usize = if cfg!(feature = "hosted") { 256 } else { 8 };
/// Timepoints that may exist at once.
const MAX_TIMEPOINTS: usize = if cfg!(feature = "hosted") { 1024 } else { 16 };

/// The semaphores of the C API.
pub(crate) type CSemaphore = Semaphore<HISTORY, CW_FRONTIER_CAPACITY>;

/// Where every semaphore of the C API lives: its scope is system-wide, so every queue may wait
/// on it and signal it.
const HOME: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

pub(crate) static SEMAPHORES: Table<CSemaphore, MAX_SEMAPHORES, { Kind::Semaphore as u8 }> =
    Table::new();

/// Uses the semaphore `handle` names.
pub(crate) fn semaphore(handle: CwSemaphore) -> Result<Guard<'static, CSemaphore>, Error> {
    Ok(SEMAPHORES.acquire(handle.bits)?)
}

/// Creates a semaphore at `initial`, with a history of 4 signals on bare metal (16 hosted). A
/// firmware has room for 8 semaphores at once, a host for 256 (`CW_STATUS_TABLE_FULL` beyond).
///
/// # Safety
/// `out` must be NULL or valid for writing a `cw_semaphore`.
#[no_mangle]
pub unsafe extern "C" fn cw_semaphore_create(initial: u64, out: *mut CwSemaphore) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let bits = SEMAPHORES
            .create(|_| Semaphore::new(initial, Scope::SystemWide, HOME))
            .ok_or(Error::TableFull(Kind::Semaphore))?;
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", CwSemaphore { bits }) }
    })
}

/// Destroys a semaphore: it fails as cancelled first, so every timepoint armed on it fires now
/// with `CW_FAILURE_KIND_CANCELLED`; its handle is stale from now on. A signal still pending on
/// it (committed by a queue, not retired) is dropped with it.
#[no_mangle]
pub extern "C" fn cw_semaphore_destroy(semaphore: CwSemaphore) -> CwStatus {
    boundary(|| {
        let semaphore = SEMAPHORES.destroy(semaphore.bits)?;
        semaphore.abandon(Failure::Cancelled);
        Ok(())
    })
}

/// The value the timeline has reached, into `*out`.
///
/// # Safety
/// `out` must be NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn cw_semaphore_value(semaphore: CwSemaphore, out: *mut u64) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let value = self::semaphore(semaphore)?.value();
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", value) }
    })
}

/// The failure a wait for `minimum` meets, into `*out` (kind NONE when it does not fail): the
/// timeline's failure, unless the timeline had reached `minimum` before it failed.
///
/// # Safety
/// `out` must be NULL or valid for writing a `cw_failure`.
#[no_mangle]
pub unsafe extern "C" fn cw_semaphore_failure_for(
    semaphore: CwSemaphore,
    minimum: u64,
    out: *mut CwFailure,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let failed = self::semaphore(semaphore)?.failure_for(minimum);
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", failure::to_c(failed)) }
    })
}

/// Signals `value` from the host or an interrupt handler, as the operation at `origin` whose
/// knowledge is `frontier`: records and reaches it at once, and runs the callbacks of the
/// timepoints it reaches. A later wait on the value imports `frontier`. Refused without change:
/// a value that does not advance the timeline (`CW_STATUS_NOT_ADVANCING`), a full history
/// (`CW_STATUS_HISTORY_FULL`), a failed timeline (`CW_STATUS_FAILED`). A value reached while a
/// smaller one a queue committed is still pending breaks the timeline's order: it fails the
/// timeline (`CW_STATUS_OUT_OF_ORDER`).
#[no_mangle]
pub extern "C" fn cw_semaphore_signal(
    semaphore: CwSemaphore,
    value: u64,
    origin: CwPoint,
    frontier: crate::types::CwFrontier,
) -> CwStatus {
    boundary(|| {
        let origin = origin.to_point()?;
        let frontier = frontier_value(frontier)?;
        self::semaphore(semaphore)?.signal(value, origin, &frontier).map_err(Error::Signal)
    })
}

/// Advances the timeline to `value` from outside the scheduler's knowledge (an event with no
/// frontier): waits on the values it covers import nothing and are reported tainted, until a
/// tracked signal passes them. Refused as `cw_semaphore_signal` is.
#[no_mangle]
pub extern "C" fn cw_semaphore_signal_external(semaphore: CwSemaphore, value: u64) -> CwStatus {
    boundary(|| self::semaphore(semaphore)?.signal_external(value).map_err(Error::Signal))
}

/// Fails the timeline with `failure` (not kind NONE); the first failure wins, and `*first`
/// (may be NULL) says whether this one did. Waits on values not reached end with it — those a
/// pending signal covers when that signal's operation retires.
///
/// # Safety
/// `first` must be NULL or valid for writing a `bool`.
#[no_mangle]
pub unsafe extern "C" fn cw_semaphore_fail(
    semaphore: CwSemaphore,
    failure: CwFailure,
    first: *mut bool,
) -> CwStatus {
    boundary(|| {
        let failure = failure::required(failure)?;
        let won = self::semaphore(semaphore)?.fail(failure);
        if !first.is_null() {
            // SAFETY: non-null; valid by the caller's contract.
            unsafe { first.write(won) };
        }
        Ok(())
    })
}

/// A timepoint callback: `user_data` as given to `cw_timepoint_create`, and what the wait
/// learned. It runs on the thread — or in the interrupt handler — whose signal or failure ends
/// the wait, outside every causeway lock: keep it short, never block, and never cancel, re-arm
/// or destroy its own timepoint. It may call other causeway functions. Leaving it by `longjmp`
/// (or a C++ exception) is not supported. (An `Option` in Rust: C may pass NULL, which
/// `cw_timepoint_create` refuses.)
pub type CwTimepointFn = Option<extern "C-unwind" fn(user_data: *mut c_void, outcome: CwOutcome)>;

/// A timepoint callback known not to be NULL.
type Callback = extern "C-unwind" fn(user_data: *mut c_void, outcome: CwOutcome);

/// The C caller's user data, passed back to its callback on whichever thread runs it.
#[derive(Clone, Copy)]
struct UserData(*mut c_void);

// SAFETY: causeway never dereferences the pointer; it only hands it back to the caller's
// callback, and the caller who chose to run callbacks on other threads vouches for its data.
unsafe impl Send for UserData {}
// SAFETY: as for `Send`: the pointer is only copied.
unsafe impl Sync for UserData {}

struct TimepointCell {
    callback: Callback,
    user_data: UserData,
    /// One more than the slot of the semaphore whose use an armed timepoint keeps; 0 when not
    /// armed or when the arming's end has been claimed (see the module docs).
    armed_on: AtomicUsize,
    /// The callback is running (so its own thread must not wait for it).
    firing: AtomicBool,
    /// Serialises arm, cancel and destroy; holds whether the timepoint was destroyed.
    control: Exclusive<bool>,
    timepoint: Timepoint<'static>,
}

const TIMEPOINT_BUSY: &str =
    "the timepoint is in use by another call, or its callback is running (a callback must not cancel, re-arm or destroy its own timepoint)";

static TIMEPOINTS: Table<TimepointCell, MAX_TIMEPOINTS, { Kind::Timepoint as u8 }> = Table::new();

/// The callback side of timepoint slot `index`.
struct SlotNotify {
    index: usize,
}

static NOTIFIERS: [SlotNotify; MAX_TIMEPOINTS] = {
    let mut notifiers = [const { SlotNotify { index: 0 } }; MAX_TIMEPOINTS];
    let mut index = 0;
    while index < MAX_TIMEPOINTS {
        notifiers[index].index = index;
        index += 1;
    }
    notifiers
};

#[cfg(feature = "hosted")]
std::thread_local! {
    /// A timepoint callback that ran on this thread panicked since the current call began.
    static CALLBACK_PANICKED: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Whether a timepoint callback panicked on this thread since the last look (hosted builds).
#[cfg(feature = "hosted")]
pub(crate) fn take_callback_panic() -> bool {
    CALLBACK_PANICKED.with(|panicked| panicked.replace(false))
}

impl Notify for SlotNotify {
    fn notify(&self, outcome: Outcome) {
        // SAFETY: the timepoint of this slot is firing, so it was armed, and its cell is dropped
        // only after `cw_timepoint_destroy` cancelled it, which waits out a firing callback (a
        // destroyer that finds it firing is refused as busy and drops nothing).
        let cell = unsafe { TIMEPOINTS.value_of(self.index) };
        cell.firing.store(true, Ordering::Relaxed);
        // Acquire pairs with the Release store in `cw_timepoint_arm`: the kept use is this
        // call's to give back, unless a cancellation claimed it first.
        let kept = cell.armed_on.swap(0, Ordering::Acquire);
        let outcome = CwOutcome::from_outcome(outcome);
        let (callback, user_data) = (cell.callback, cell.user_data);
        #[cfg(feature = "hosted")]
        {
            let call = std::panic::AssertUnwindSafe(|| callback(user_data.0, outcome));
            if std::panic::catch_unwind(call).is_err() {
                CALLBACK_PANICKED.with(|panicked| panicked.set(true));
            }
        }
        #[cfg(not(feature = "hosted"))]
        callback(user_data.0, outcome);
        if let Some(slot) = kept.checked_sub(1) {
            // SAFETY: `kept` came from the arming's `keep`, and this swap claimed it alone.
            unsafe { SEMAPHORES.release_kept(slot) };
        }
        cell.firing.store(false, Ordering::Relaxed);
    }

    #[cfg(feature = "hosted")]
    fn while_firing(&self) {
        std::thread::yield_now();
    }
}

/// Creates an idle timepoint that will call `callback(user_data, outcome)` each time it fires.
/// A firmware has room for 16 at once, a host for 1024.
///
/// # Safety
/// `out` must be NULL or valid for writing a `cw_timepoint`. `user_data` is never
/// dereferenced; it must stay valid for the callback as long as the timepoint may fire.
#[no_mangle]
pub unsafe extern "C" fn cw_timepoint_create(
    callback: CwTimepointFn,
    user_data: *mut c_void,
    out: *mut CwTimepoint,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let callback = callback.ok_or(Error::NullPointer("callback"))?;
        let bits = TIMEPOINTS
            .create(|index| TimepointCell {
                callback,
                user_data: UserData(user_data),
                armed_on: AtomicUsize::new(0),
                firing: AtomicBool::new(false),
                control: Exclusive::new(false),
                timepoint: Timepoint::new(&NOTIFIERS[index]),
            })
            .ok_or(Error::TableFull(Kind::Timepoint))?;
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", CwTimepoint { bits }) }
    })
}

/// What arming a timepoint did.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwArm {
    /// Linked: the callback will run once the value is reached or the wait fails.
    pub armed: bool,
    /// When not armed, the wait was already decided: this is its outcome, and the callback will
    /// not run for this arming.
    pub outcome: CwOutcome,
}

fn pinned(cell: &TimepointCell) -> Pin<&Timepoint<'static>> {
    // SAFETY: the timepoint lives in its table slot, which never moves, and is dropped only once
    // it is neither armed nor firing (see `cw_timepoint_destroy`).
    unsafe { Pin::new_unchecked(&cell.timepoint) }
}

/// Arms the timepoint to fire when `semaphore` reaches `minimum` or the wait fails, into `*out`:
/// armed, or already decided (then the callback does not run). Refused with `CW_STATUS_BUSY`
/// while the timepoint is armed or its callback runs. Once it has fired it may be armed again.
///
/// # Safety
/// `out` must be NULL or valid for writing a `cw_arm`.
#[no_mangle]
pub unsafe extern "C" fn cw_timepoint_arm(
    timepoint: CwTimepoint,
    semaphore: CwSemaphore,
    minimum: u64,
    out: *mut CwArm,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let cell = TIMEPOINTS.acquire(timepoint.bits)?;
        let semaphore = self::semaphore(semaphore)?;
        let arm = cell.control.with(TIMEPOINT_BUSY, |destroyed| {
            if *destroyed {
                return Err(Error::Handle(HandleError::Stale(Kind::Timepoint)));
            }
            // Published before linking: a signal may fire the timepoint the moment it is
            // linked, and its callback then gives this use back. An earlier arming whose end
            // is not claimed yet (its callback about to run) leaves it non-zero: busy. Release
            // pairs with the Acquire swap in `SlotNotify::notify` and in `end_arming`.
            if cell.firing.load(Ordering::Relaxed)
                || cell
                    .armed_on
                    .compare_exchange(
                        0,
                        semaphore.index() + 1,
                        Ordering::Release,
                        Ordering::Relaxed,
                    )
                    .is_err()
            {
                return Err(Error::Busy(TIMEPOINT_BUSY));
            }
            // SAFETY: the timepoint stays in place until it fired or was cancelled (`pinned`),
            // and the semaphore stays alive as long: the use this call holds is kept until the
            // arming ends, when its firing or cancellation gives it back.
            match unsafe { semaphore.arm(pinned(&cell), minimum) } {
                Ok(Arm::Armed) => Ok(None),
                Ok(Arm::Ready(outcome)) => {
                    cell.armed_on.store(0, Ordering::Relaxed);
                    Ok(Some(outcome))
                }
                Err(_) => {
                    cell.armed_on.store(0, Ordering::Relaxed);
                    Err(Error::Busy(TIMEPOINT_BUSY))
                }
            }
        })??;
        let result = match arm {
            None => {
                semaphore.keep();
                CwArm { armed: true, outcome: CwOutcome::from_outcome(Ok(0)) }
            }
            Some(outcome) => CwArm { armed: false, outcome: CwOutcome::from_outcome(outcome) },
        };
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", result) }
    })
}

/// What cancelling a timepoint found.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CwCancel {
    /// It was armed and is now unlinked: its callback will not run.
    Unlinked = 0,
    /// It had fired: its callback ran (and has returned).
    AlreadyFired = 1,
    /// It was not armed.
    NotArmed = 2,
}

/// Ends the timepoint's arming, if any: unlinks it, or waits out a callback that another
/// thread is running. Runs with the cell's control held.
fn end_arming(cell: &TimepointCell) -> Result<CwCancel, Error> {
    if cell.firing.load(Ordering::Relaxed) {
        return Err(Error::Busy(TIMEPOINT_BUSY));
    }
    // Acquire pairs with the Release store in `cw_timepoint_arm`.
    let kept = cell.armed_on.swap(0, Ordering::Acquire);
    let Some(slot) = kept.checked_sub(1) else {
        // Not armed, or its firing claimed the arming: let the callback finish.
        while cell.timepoint.is_busy() {
            core::hint::spin_loop();
        }
        return Ok(if cell.timepoint.is_done() {
            CwCancel::AlreadyFired
        } else {
            CwCancel::NotArmed
        });
    };
    // SAFETY: this swap claimed the kept use of slot `slot`, so the semaphore is alive until it
    // is given back below.
    let semaphore = unsafe { SEMAPHORES.value_of(slot) };
    let cancelled = semaphore.cancel(&cell.timepoint);
    // SAFETY: the use kept when it was armed, claimed by the swap above.
    unsafe { SEMAPHORES.release_kept(slot) };
    Ok(match cancelled {
        Cancelled::Unlinked => CwCancel::Unlinked,
        Cancelled::AlreadyFired => CwCancel::AlreadyFired,
        // Not armed, and whatever core may answer later: nothing was unlinked.
        _ => CwCancel::NotArmed,
    })
}

/// Cancels the timepoint, into `*out` (may be NULL): unlinked (the callback will not run),
/// already fired, or not armed. When another thread runs its callback, waits for it to return.
/// Refused with `CW_STATUS_BUSY` from inside its own callback. On bare metal, cancel from
/// thread mode (the main loop), never from an interrupt handler.
///
/// # Safety
/// `out` must be NULL or valid for writing a `cw_cancel`.
#[no_mangle]
pub unsafe extern "C" fn cw_timepoint_cancel(
    timepoint: CwTimepoint,
    out: *mut CwCancel,
) -> CwStatus {
    boundary(|| {
        let cell = TIMEPOINTS.acquire(timepoint.bits)?;
        let cancelled = cell.control.with(TIMEPOINT_BUSY, |_| end_arming(&cell))??;
        if !out.is_null() {
            // SAFETY: non-null; valid by the caller's contract.
            unsafe { out.write(cancelled) };
        }
        Ok(())
    })
}

/// Cancels the timepoint (as `cw_timepoint_cancel`) and destroys it; its handle is stale from
/// now on. After it returns the callback is not running and will not run.
#[no_mangle]
pub extern "C" fn cw_timepoint_destroy(timepoint: CwTimepoint) -> CwStatus {
    boundary(|| {
        let cell = TIMEPOINTS.acquire(timepoint.bits)?;
        cell.control.with(TIMEPOINT_BUSY, |destroyed| {
            if *destroyed {
                return Err(Error::Handle(HandleError::Stale(Kind::Timepoint)));
            }
            end_arming(&cell)?;
            *destroyed = true;
            Ok(())
        })??;
        drop(cell);
        // Only the call that marked it destroyed gets here; others found it marked.
        drop(TIMEPOINTS.destroy(timepoint.bits)?);
        Ok(())
    })
}
