//! Status codes, the last error's message, and the boundary every entry point goes through.
//!
//! Every function returns a [`CwStatus`]; a failing one also leaves a message for
//! [`cw_last_error_message`]. Internally a failure is an `Error`, a typed cause whose
//! `Display` is that message and whose `status` is the code.
//!
//! No panic crosses the boundary: in hosted builds `boundary` runs each call under
//! `catch_unwind` and turns a panic into [`CwStatus::Panic`]; bare-metal builds abort on panic
//! (`panic = "abort"`, and the panic handler calls the firmware's `cw_abort`), so nothing
//! unwinds there at all.

use core::ffi::c_char;
use core::fmt::{self, Write};

use causeway_core::frontier::WireError;
use causeway_core::semaphore::{Failure, SignalError};

use crate::handle::{HandleError, Kind, UseError};

/// What a call did. `CW_STATUS_OK` is zero; every other code comes with a message from
/// `cw_last_error_message`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CwStatus {
    /// Success.
    Ok = 0,
    /// A pointer argument the call needs was NULL.
    NullPointer = 1,
    /// A handle argument was the null handle (all bits zero).
    NullHandle = 2,
    /// A handle argument has bits no handle has (never made by this library).
    InvalidHandle = 3,
    /// A handle argument names an object that was destroyed (or whose device was shut down).
    StaleHandle = 4,
    /// A handle argument is a handle of another type.
    WrongHandleType = 5,
    /// Every slot of that kind of object is taken: destroy one first.
    TableFull = 6,
    /// The object is in use in a way that excludes this call: another call holds it (a queue or
    /// frontier used from two contexts at once), a timepoint is armed or its callback runs, or a
    /// device call runs from inside one of its own callbacks. Nothing was changed.
    Busy = 7,
    /// An argument is out of its range (the message names it). Nothing was changed.
    InvalidArgument = 8,
    /// An output buffer is too small (the message says how many bytes are needed).
    BufferTooSmall = 9,
    /// Bytes that are not a frontier's wire encoding.
    MalformedWire = 10,
    /// A signal's value does not advance its timeline past the value it has (it goes
    /// backwards, or repeats). Nothing was changed.
    NotAdvancing = 11,
    /// Every history slot of a semaphore holds a pending signal: retire work first. Nothing was
    /// changed.
    HistoryFull = 12,
    /// A signal completed while a smaller value of the same timeline was still pending: the
    /// timeline has failed (its waiters are told).
    OutOfOrder = 13,
    /// The timeline has failed: a host signal was refused, or a host wait ended with the failure
    /// (see the failure the call returns).
    Failed = 14,
    /// The queue has no submission open (`cw_queue_begin` first).
    NoSubmission = 15,
    /// The queue has a submission open: commit or abandon it first.
    SubmissionOpen = 16,
    /// A bounded resource is full (a queue's ring, a semaphore's history, the device's
    /// semaphores): nothing was submitted or created; try again once work has retired.
    Full = 17,
    /// The call gave up at its timeout; nothing was submitted (or the wait did not end).
    TimedOut = 18,
    /// The device is shutting down: the call was given up (for a wait, nothing is known about
    /// the work it waited for).
    ShutDown = 19,
    /// The device could not be started (the message says why).
    DeviceUnavailable = 20,
    /// The request was refused for a reason the message gives (a signal out of its
    /// semaphore's scope, say).
    Refused = 21,
    /// The call took effect, but a timepoint callback it ran panicked (the panic was contained;
    /// a Rust callback's bug).
    CallbackPanicked = 22,
    /// causeway itself panicked (a bug in causeway, contained at the boundary); the object the
    /// call used may be left mid-update.
    Panic = 23,
    /// A waiting submission found a resource full that no submitted work can free: the
    /// operation holding the room waits for a signal no operation submitted so far gives (the
    /// message names it). Nothing was submitted; submit that signal first, or give the
    /// resource more room.
    Stalled = 24,
}

/// Why a call failed: the code it returns and the message it leaves.
#[derive(Debug)]
pub(crate) enum Error {
    NullPointer(&'static str),
    Handle(HandleError),
    TooManyUsers(Kind),
    TableFull(Kind),
    /// The object is busy: the reason.
    Busy(&'static str),
    /// An argument out of range: which and why.
    InvalidArgument(&'static str),
    /// Refused for the reason given.
    Refused(&'static str),
    /// More items than a call takes: what, how many, the most allowed.
    TooMany {
        what: &'static str,
        count: usize,
        limit: usize,
    },
    /// A failure kind no `CwFailureKind` has.
    UnknownFailureKind(u32),
    Wire(WireError),
    Signal(SignalError),
    /// Signal `index` of a commit was refused.
    SignalRefused {
        index: usize,
        error: SignalError,
    },
    NoSubmission,
    SubmissionOpen,
    #[cfg(feature = "hosted")]
    Hosted(crate::device::HostedError),
    #[cfg(feature = "hosted")]
    CallbackPanicked,
    #[cfg(feature = "hosted")]
    Panic,
}

impl Error {
    /// The code a caller sees.
    pub(crate) fn status(&self) -> CwStatus {
        match *self {
            Error::NullPointer(_) => CwStatus::NullPointer,
            Error::Handle(HandleError::Null(_)) => CwStatus::NullHandle,
            Error::Handle(HandleError::Invalid(_)) => CwStatus::InvalidHandle,
            Error::Handle(HandleError::WrongType { .. }) => CwStatus::WrongHandleType,
            Error::Handle(HandleError::Stale(_)) => CwStatus::StaleHandle,
            Error::TooManyUsers(_) | Error::Busy(_) => CwStatus::Busy,
            Error::TableFull(_) => CwStatus::TableFull,
            Error::InvalidArgument(_) | Error::TooMany { .. } | Error::UnknownFailureKind(_) => {
                CwStatus::InvalidArgument
            }
            Error::Wire(WireError::BufferTooSmall { .. }) => CwStatus::BufferTooSmall,
            Error::Wire(_) => CwStatus::MalformedWire,
            Error::Signal(error) | Error::SignalRefused { error, .. } => signal_status(error),
            Error::Refused(_) => CwStatus::Refused,
            Error::NoSubmission => CwStatus::NoSubmission,
            Error::SubmissionOpen => CwStatus::SubmissionOpen,
            #[cfg(feature = "hosted")]
            Error::Hosted(ref error) => error.status(),
            #[cfg(feature = "hosted")]
            Error::CallbackPanicked => CwStatus::CallbackPanicked,
            #[cfg(feature = "hosted")]
            Error::Panic => CwStatus::Panic,
        }
    }
}

/// The code of a refused signal.
pub(crate) fn signal_status(error: SignalError) -> CwStatus {
    match error {
        SignalError::NotAdvancing { .. } => CwStatus::NotAdvancing,
        SignalError::HistoryFull { .. } => CwStatus::HistoryFull,
        SignalError::OutOfOrder { .. } => CwStatus::OutOfOrder,
        SignalError::Failed(_) => CwStatus::Failed,
        _ => CwStatus::Refused,
    }
}

impl From<HandleError> for Error {
    fn from(error: HandleError) -> Error {
        Error::Handle(error)
    }
}

impl From<UseError> for Error {
    fn from(error: UseError) -> Error {
        match error {
            UseError::Handle(error) => Error::Handle(error),
            UseError::TooManyUsers(kind) => Error::TooManyUsers(kind),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::NullPointer(what) => write!(f, "{what} is NULL"),
            Error::Handle(error) => write!(f, "{error}"),
            Error::TooManyUsers(kind) => {
                write!(f, "too many calls are using this {} at once", kind.name())
            }
            Error::TableFull(kind) => {
                write!(f, "every {} slot is taken: destroy one first", kind.name())
            }
            Error::Busy(reason) | Error::InvalidArgument(reason) | Error::Refused(reason) => {
                f.write_str(reason)
            }
            Error::TooMany { what, count, limit } => {
                write!(f, "{count} {what} (at most {limit})")
            }
            Error::UnknownFailureKind(kind) => {
                write!(f, "{kind} is not a cw_failure_kind (or is CW_FAILURE_KIND_NONE where a failure is needed)")
            }
            Error::Wire(error) => write!(f, "frontier wire encoding: {error}"),
            Error::Signal(error) => write!(f, "{error}"),
            Error::SignalRefused { index, error } => write!(f, "signal {index} refused: {error}"),
            Error::NoSubmission => f.write_str("no submission is open on this queue"),
            Error::SubmissionOpen => {
                f.write_str("a submission is open on this queue: commit or abandon it first")
            }
            #[cfg(feature = "hosted")]
            Error::Hosted(ref error) => write!(f, "{error}"),
            #[cfg(feature = "hosted")]
            Error::CallbackPanicked => f.write_str(
                "the call took effect, but a timepoint callback it ran panicked (contained)",
            ),
            #[cfg(feature = "hosted")]
            Error::Panic => f.write_str("causeway panicked inside this call (a bug; contained)"),
        }
    }
}

/// Formats into a fixed buffer, cutting at a character boundary when it is full and always
/// leaving room for the terminating NUL.
struct Truncating<'b> {
    buffer: &'b mut [u8],
    len: usize,
}

impl Write for Truncating<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let room = self.buffer.len().saturating_sub(1 + self.len);
        let mut take = text.len().min(room);
        while !text.is_char_boundary(take) {
            take -= 1;
        }
        self.buffer[self.len..self.len + take].copy_from_slice(&text.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

/// Writes `error`'s message, NUL-terminated, into `buffer`.
fn write_message(buffer: &mut [u8], error: &Error) {
    let mut out = Truncating { buffer, len: 0 };
    // Truncating never fails, and the messages' own Display impls do not either.
    let _ = write!(out, "{error}");
    let end = out.len;
    if let Some(terminator) = out.buffer.get_mut(end) {
        *terminator = 0;
    }
}

#[cfg(feature = "hosted")]
mod last {
    use core::cell::RefCell;
    use core::ffi::c_char;

    use super::{write_message, Error};

    /// Message bytes kept per thread, NUL included.
    const MESSAGE_BYTES: usize = 256;

    std::thread_local! {
        static LAST_ERROR: RefCell<[u8; MESSAGE_BYTES]> = const { RefCell::new([0; MESSAGE_BYTES]) };
    }

    pub(super) fn record(error: &Error) {
        LAST_ERROR.with(|buffer| {
            // A thread records one error at a time: nothing runs while the message is written.
            if let Ok(mut buffer) = buffer.try_borrow_mut() {
                write_message(&mut buffer[..], error);
            }
        });
    }

    pub(super) fn message() -> *const c_char {
        // The buffer lives as long as the thread; the pointer is the caller's to read until
        // this thread's next failing call.
        LAST_ERROR.with(|buffer| buffer.as_ptr().cast::<c_char>())
    }
}

#[cfg(not(feature = "hosted"))]
mod last {
    use core::cell::UnsafeCell;
    use core::ffi::c_char;
    use core::sync::atomic::{AtomicBool, Ordering};

    use super::{write_message, Error};

    /// Message bytes kept, NUL included.
    const MESSAGE_BYTES: usize = 128;

    /// One message for the whole firmware (no threads): the main loop's and interrupt
    /// handlers' failures share it.
    struct LastError {
        writing: AtomicBool,
        bytes: UnsafeCell<[u8; MESSAGE_BYTES]>,
    }

    // SAFETY: only the holder of `writing` writes `bytes`; readers get a pointer and read bytes
    // whose last one is never written (always NUL), so a read concurrent with a write (a handler
    // failing while the main loop reads) sees mixed text but stays inside the buffer.
    unsafe impl Sync for LastError {}

    static LAST_ERROR: LastError =
        LastError { writing: AtomicBool::new(false), bytes: UnsafeCell::new([0; MESSAGE_BYTES]) };

    pub(super) fn record(error: &Error) {
        // Acquire pairs with the Release store below: the previous writer's bytes are complete.
        // A writer interrupted by a handler that fails too keeps its message (the handler's is
        // dropped) rather than wait for itself.
        if LAST_ERROR.writing.swap(true, Ordering::Acquire) {
            return;
        }
        // SAFETY: `writing` is held, so this is the only writer; the last byte stays NUL.
        let bytes = unsafe { &mut *LAST_ERROR.bytes.get() };
        write_message(&mut bytes[..MESSAGE_BYTES - 1], error);
        // Release pairs with the Acquire swap above.
        LAST_ERROR.writing.store(false, Ordering::Release);
    }

    pub(super) fn message() -> *const c_char {
        LAST_ERROR.bytes.get().cast::<c_char>()
    }
}

/// Records `error` as this thread's last error and returns its code.
pub(crate) fn fail(error: Error) -> CwStatus {
    last::record(&error);
    error.status()
}

/// The message of the calling thread's last failing call, NUL-terminated (empty before any
/// failure). Never NULL. The text stays readable until the thread's next failing call; in
/// bare-metal builds there is one message for the whole firmware, which an interrupt handler's
/// failure may overwrite, so read it right after the call that failed.
#[no_mangle]
pub extern "C" fn cw_last_error_message() -> *const c_char {
    last::message()
}

/// Runs one entry point's body: its error becomes a status code and a message, and — in hosted
/// builds — a panic inside it becomes [`CwStatus::Panic`] instead of unwinding into C. A
/// timepoint callback that panicked during the call (it is contained where it runs) turns a
/// success into [`CwStatus::CallbackPanicked`].
pub(crate) fn boundary(body: impl FnOnce() -> Result<(), Error>) -> CwStatus {
    #[cfg(feature = "hosted")]
    let result = {
        crate::semaphore::take_callback_panic();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
            Ok(Ok(())) if crate::semaphore::take_callback_panic() => Err(Error::CallbackPanicked),
            Ok(result) => result,
            Err(_) => Err(Error::Panic),
        }
    };
    #[cfg(not(feature = "hosted"))]
    let result = body();
    match result {
        Ok(()) => CwStatus::Ok,
        Err(error) => fail(error),
    }
}

/// Writes `value` through `out`, a C caller's output pointer.
///
/// # Safety
/// `out` must be NULL or valid for writing a `T`.
pub(crate) unsafe fn write_out<T>(out: *mut T, what: &'static str, value: T) -> Result<(), Error> {
    if out.is_null() {
        return Err(Error::NullPointer(what));
    }
    // SAFETY: non-null, and valid for writes by the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Checks that an output pointer is not NULL before any work is done.
pub(crate) fn require<T>(pointer: *const T, what: &'static str) -> Result<(), Error> {
    if pointer.is_null() {
        Err(Error::NullPointer(what))
    } else {
        Ok(())
    }
}

/// The C failure code of a Rust failure, and back.
pub(crate) mod failure {
    use super::*;
    use crate::types::{CwFailure, CwFailureKind};

    pub(crate) fn to_c(failure: Option<Failure>) -> CwFailure {
        let (kind, code) = match failure {
            None => (CwFailureKind::None, 0),
            Some(Failure::Cancelled) => (CwFailureKind::Cancelled, 0),
            Some(Failure::Aborted) => (CwFailureKind::Aborted, 0),
            Some(Failure::DeviceLost) => (CwFailureKind::DeviceLost, 0),
            Some(Failure::OutOfOrderSignal) => (CwFailureKind::OutOfOrderSignal, 0),
            Some(Failure::OutOfMemory) => (CwFailureKind::OutOfMemory, 0),
            Some(Failure::Application(code)) => (CwFailureKind::Application, code),
            Some(Failure::Faulted(code)) => (CwFailureKind::Faulted, code),
            // A failure this version of the C API has no kind for yet.
            Some(_) => (CwFailureKind::Aborted, 0),
        };
        CwFailure { kind: kind as u32, code }
    }

    /// `None` for `CW_FAILURE_KIND_NONE`; an error for a kind that does not exist.
    pub(crate) fn from_c(failure: CwFailure) -> Result<Option<Failure>, Error> {
        const NONE: u32 = CwFailureKind::None as u32;
        const CANCELLED: u32 = CwFailureKind::Cancelled as u32;
        const ABORTED: u32 = CwFailureKind::Aborted as u32;
        const DEVICE_LOST: u32 = CwFailureKind::DeviceLost as u32;
        const OUT_OF_ORDER: u32 = CwFailureKind::OutOfOrderSignal as u32;
        const OUT_OF_MEMORY: u32 = CwFailureKind::OutOfMemory as u32;
        const APPLICATION: u32 = CwFailureKind::Application as u32;
        const FAULTED: u32 = CwFailureKind::Faulted as u32;
        Ok(Some(match failure.kind {
            NONE => return Ok(None),
            CANCELLED => Failure::Cancelled,
            ABORTED => Failure::Aborted,
            DEVICE_LOST => Failure::DeviceLost,
            OUT_OF_ORDER => Failure::OutOfOrderSignal,
            OUT_OF_MEMORY => Failure::OutOfMemory,
            APPLICATION => Failure::Application(failure.code),
            FAULTED => Failure::Faulted(failure.code),
            other => return Err(Error::UnknownFailureKind(other)),
        }))
    }

    /// A failure that must be one (not `CW_FAILURE_KIND_NONE`).
    pub(crate) fn required(failure: CwFailure) -> Result<Failure, Error> {
        from_c(failure)?.ok_or(Error::UnknownFailureKind(failure.kind))
    }
}
