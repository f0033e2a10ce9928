//! Hosted devices: `cw_device_*` — CPU queues running host callbacks, pooled semaphores,
//! submit / try-submit / submit with a timeout, host waits with a timeout, shutdown within a
//! grace period, and the run's statistics.
//!
//! # Host callbacks
//!
//! The device layer runs host functions registered when the device is built and passes them
//! nothing, while a C caller names a function pointer and user data per operation. So each
//! device registers one host function per *call slot*, and a submission puts its callback into
//! a free slot and submits the slot's function; the operation's tag names the slot, and the
//! device's observer frees it when the operation finishes — ran, failed or cancelled. There are
//! as many slots as the queues' rings hold operations, plus one per queue for submitters
//! waiting for room, so slots run out only when submitters outnumber them; a waiting submit
//! then waits for one, a try-submit answers `CW_STATUS_FULL`.
//!
//! # Lifetime
//!
//! A device handle names an entry in a process-wide table; every call clones the entry's `Arc`
//! for its length, so `cw_device_destroy` can take the device out of the table at once (later
//! calls find the handle stale) and shut it down as soon as the calls in progress have left.
//! Calls that block — a submit waiting for room, a host wait — look at the device's closing
//! flag every slice (`SLICE`, 20 ms), so none keeps a destroy waiting for longer than that: they return
//! `CW_STATUS_SHUT_DOWN`.

use core::ffi::c_void;
use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_core::unpoisoned::{Condvar, Mutex};
use causeway_device::{
    Device, DeviceError, HostCallId, Observer, Op, OpEvent, OpStatus, PoolConfig, QueueConfig,
    QueueId, Receipt, SemaphoreConfig, SemaphoreError, SemaphoreId, SubmitError, WaitOutcome, Work,
    MAX_SIGNALS, MAX_WAITS,
};
use causeway_driver_cpu::CpuBackend;
use causeway_runtime::blocking::{self, HostWaitError};
use heapless::Vec as FixedVec;

use crate::handle::{decode, encode, Kind};
use crate::queue::CwResolution;
use crate::status::{boundary, failure, require, write_out, CwStatus, Error};
use crate::types::{CwFailure, CwOutcome, CwPoint};

/// Waits one operation resolves at most.
pub const CW_MAX_WAITS: usize = 8;
const _: () = assert!(CW_MAX_WAITS == MAX_WAITS && crate::queue::CW_MAX_SIGNALS == MAX_SIGNALS);
/// A timeout that never passes.
pub const CW_TIMEOUT_INFINITE: u64 = u64::MAX;

/// How long a blocking call waits before it looks whether its device is closing.
const SLICE: Duration = Duration::from_millis(20);
/// Devices that may exist at once.
const MAX_DEVICES: usize = 64;
/// Set in an operation's tag when it holds a call slot; the slot is in the low bits.
const HOST_TAG: u64 = 1 << 63;

/// A hosted device (`cw_device_create` / `cw_device_destroy`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwDevice {
    /// The handle's bits; 0 is the null handle.
    pub bits: u64,
}

/// A semaphore of a device (`cw_device_semaphore_create` / `cw_device_semaphore_destroy`); it
/// is used with the device that made it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwDeviceSemaphore {
    /// The handle's bits; 0 is the null handle.
    pub bits: u64,
}

/// How to build a device. Start from `cw_device_config_default`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwDeviceConfig {
    /// Worker threads that run the queues and their callbacks (1..=64).
    pub workers: u32,
    /// CPU queues, numbered from 0 (1..=64).
    pub queues: u32,
    /// Operations each queue holds in flight (submitted, not retired) (1..=65536): a full ring
    /// makes `cw_device_submit` wait and `cw_device_try_submit` answer `CW_STATUS_FULL`.
    pub queue_capacity: u32,
    /// Semaphores the device can hold at once (0..=65536).
    pub semaphores: u32,
    /// History slots per semaphore (2..=65535): signals pending at once, plus the newest reached.
    pub semaphore_history: u32,
}

/// A host callback: runs on a worker in queue order once the operation's waits are reached, with
/// the `user_data` given at submission. Returns 0 for success, or an application code that fails
/// the operation (`CW_FAILURE_KIND_APPLICATION` with that code) and everything it signals. It may
/// call causeway, but not wait without a timeout, nor destroy its device. Leaving it by
/// `longjmp` (or a C++ exception) is not supported. (An `Option` in Rust: NULL makes the
/// operation a barrier.)
pub type CwHostFn = Option<extern "C-unwind" fn(user_data: *mut c_void) -> u32>;

/// A host callback known not to be NULL.
type Callback = extern "C-unwind" fn(user_data: *mut c_void) -> u32;

/// A semaphore of a device and a value: a wait (`semaphore` ≥ `value`) or a signal
/// (`semaphore` := `value`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwDeviceValue {
    /// The semaphore.
    pub semaphore: CwDeviceSemaphore,
    /// The value.
    pub value: u64,
}

/// An operation: its waits and signals (at most `CW_MAX_WAITS` and `CW_MAX_SIGNALS`), and its
/// work — a host callback, or, when `host` is NULL, nothing (a barrier that only orders).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CwOp {
    /// `wait_count` waits (may be NULL when 0).
    pub waits: *const CwDeviceValue,
    /// How many waits.
    pub wait_count: usize,
    /// `signal_count` signals (may be NULL when 0).
    pub signals: *const CwDeviceValue,
    /// How many signals.
    pub signal_count: usize,
    /// The callback; NULL for a barrier.
    pub host: CwHostFn,
    /// Passed to `host`; never dereferenced by causeway.
    pub user_data: *mut c_void,
}

/// What an accepted submission tells the caller. An accepted operation is in its queue even when
/// it is doomed: an upstream failure reaches its waiters through the semaphores, never as a
/// refusal.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwReceipt {
    /// The operation's point: its queue's axis and its epoch.
    pub point: CwPoint,
    /// Kind NONE when it may run. Otherwise it was accepted *doomed*: a semaphore it waits on
    /// had already failed (that failure), or only a timeline it signals had
    /// (`CW_FAILURE_KIND_ABORTED`). It will not run; when its turn comes it fails with this,
    /// failing what it signals.
    pub failure: CwFailure,
    /// The index of the first signal whose timeline had already failed, or -1.
    pub failed_signal: i32,
    /// How many of `waits` are meaningful (the operation's wait count).
    pub wait_count: u32,
    /// How each wait was resolved, in order (`CW_RESOLUTION_FAILED` for a failed semaphore).
    pub waits: [CwResolution; CW_MAX_WAITS],
}

/// The run's statistics so far.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CwDeviceStats {
    /// Operations accepted (doomed ones included).
    pub submitted: u64,
    /// Operations that ran and completed their signals.
    pub completed: u64,
    /// Operations that failed (a failed wait, a callback's code, a panic, shutdown's abort).
    pub failed: u64,
    /// Operations cancelled because the device shut down before they ran.
    pub cancelled: u64,
    /// Host callbacks that returned 0.
    pub callbacks_succeeded: u64,
    /// Host callbacks that returned a failure code.
    pub callbacks_failed: u64,
    /// Host callbacks that panicked (Rust callbacks; contained, the operation failed as aborted).
    pub callbacks_panicked: u64,
    /// Waits elided by what their queue knew.
    pub waits_elided: u64,
    /// Waits on values already reached.
    pub waits_satisfied: u64,
    /// Waits armed on their semaphores (the value still to come).
    pub waits_device: u64,
    /// Waits held on the host.
    pub waits_held: u64,
    /// Waits in an external taint window.
    pub waits_tainted: u64,
    /// Operations submitted and not yet finished.
    pub in_flight: u64,
}

/// What `cw_device_destroy` found and did.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CwShutdownReport {
    /// Whether the device was shut down by this call. False when calls on other threads were
    /// still inside it after the grace period: it is then shut down when the last of them
    /// returns, and the rest of this report is empty.
    pub shut_down: bool,
    /// Operations that had not run: cancelled, their signals failed as cancelled.
    pub cancelled: u64,
    /// Operations still running at the end of the grace period: failed as aborted, their
    /// workers abandoned.
    pub stuck: u64,
    /// Worker threads abandoned inside work that did not return.
    pub abandoned_workers: u64,
    /// Whether the device's memory was kept for abandoned workers instead of freed.
    pub leaked: bool,
    /// The run's statistics at the end.
    pub stats: CwDeviceStats,
}

/// Why a hosted call failed.
#[derive(Debug)]
pub(crate) enum HostedError {
    Build(DeviceError),
    Config(&'static str),
    Submit(SubmitError),
    Semaphore(SemaphoreError),
    Wait(HostWaitError),
    CallSlotsFull { slots: usize },
    CallSlotsTimedOut { slots: usize },
    ShutDown,
    InsideCallback(&'static str),
    NoQueue { queue: u32, queues: usize },
    TableFull,
}

impl HostedError {
    pub(crate) fn status(&self) -> CwStatus {
        match self {
            HostedError::Build(_) => CwStatus::DeviceUnavailable,
            HostedError::Config(_) | HostedError::NoQueue { .. } => CwStatus::InvalidArgument,
            HostedError::Submit(error) => submit_status(*error),
            HostedError::Semaphore(SemaphoreError::Full(_)) => CwStatus::Full,
            HostedError::Semaphore(SemaphoreError::TimedOut(_)) => CwStatus::TimedOut,
            HostedError::Semaphore(_) => CwStatus::StaleHandle,
            HostedError::Wait(HostWaitError::Failed(_)) => CwStatus::Failed,
            HostedError::Wait(_) => CwStatus::TimedOut,
            HostedError::CallSlotsFull { .. } => CwStatus::Full,
            HostedError::CallSlotsTimedOut { .. } => CwStatus::TimedOut,
            HostedError::ShutDown => CwStatus::ShutDown,
            HostedError::InsideCallback(_) => CwStatus::Busy,
            HostedError::TableFull => CwStatus::TableFull,
        }
    }
}

fn submit_status(error: SubmitError) -> CwStatus {
    match error {
        SubmitError::Full(_) => CwStatus::Full,
        SubmitError::TimedOut(_) => CwStatus::TimedOut,
        SubmitError::Stalled(_) => CwStatus::Stalled,
        SubmitError::UnknownSemaphore(_) => CwStatus::StaleHandle,
        SubmitError::TooManyWaits(_) | SubmitError::TooManySignals(_) => CwStatus::InvalidArgument,
        SubmitError::Signal { error, .. } => crate::status::signal_status(error),
        _ => CwStatus::Refused,
    }
}

impl fmt::Display for HostedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostedError::Build(error) => write!(f, "the device could not start: {error}"),
            HostedError::Config(problem) => write!(f, "device configuration: {problem}"),
            HostedError::Submit(error) => write!(f, "{error}"),
            HostedError::Semaphore(error) => write!(f, "{error}"),
            HostedError::Wait(error) => write!(f, "{error}"),
            HostedError::CallSlotsFull { slots } => {
                write!(f, "all {slots} host-call slots hold operations in flight")
            }
            HostedError::CallSlotsTimedOut { slots } => {
                write!(f, "gave up waiting for one of {slots} host-call slots")
            }
            HostedError::ShutDown => f.write_str("the device is shutting down"),
            HostedError::InsideCallback(what) => write!(f, "{what} from inside a host callback"),
            HostedError::NoQueue { queue, queues } => {
                write!(f, "no queue {queue}: the device has {queues}")
            }
            HostedError::TableFull => write!(f, "{MAX_DEVICES} devices exist: destroy one first"),
        }
    }
}

impl From<HostedError> for Error {
    fn from(error: HostedError) -> Error {
        Error::Hosted(error)
    }
}

std::thread_local! {
    /// This thread is a worker running a host callback.
    static IN_HOST_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

fn refuse_inside_callback(what: &'static str) -> Result<(), Error> {
    if IN_HOST_CALLBACK.with(Cell::get) {
        return Err(HostedError::InsideCallback(what).into());
    }
    Ok(())
}

/// The C caller's user data, handed back to its callback on a worker thread.
#[derive(Clone, Copy)]
struct UserData(*mut c_void);

// SAFETY: causeway never dereferences the pointer; it only passes it to the caller's callback on
// a worker thread, as `CwHostFn`'s contract tells the caller.
unsafe impl Send for UserData {}

/// A submitted operation's callback and its user data.
type HostCall = (Callback, UserData);

/// The callbacks of operations in flight, one per call slot, and the free slots.
struct CallSlots {
    calls: Box<[Mutex<Option<HostCall>>]>,
    free: Mutex<Vec<usize>>,
    freed: Condvar,
}

impl CallSlots {
    fn take(&self, deadline: Option<Instant>, closing: &AtomicBool) -> Result<usize, HostedError> {
        let slots = self.calls.len();
        let mut free = self.free.lock();
        loop {
            if let Some(slot) = free.pop() {
                return Ok(slot);
            }
            if closing.load(Ordering::Relaxed) {
                return Err(HostedError::ShutDown);
            }
            let wait = match deadline {
                None => SLICE,
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => SLICE.min(left),
                    _ => return Err(HostedError::CallSlotsTimedOut { slots }),
                },
            };
            free = self.freed.wait_timeout(free, wait).0;
        }
    }

    fn try_take(&self) -> Result<usize, HostedError> {
        self.free.lock().pop().ok_or(HostedError::CallSlotsFull { slots: self.calls.len() })
    }

    fn give_back(&self, slot: usize) {
        *self.calls[slot].lock() = None;
        self.free.lock().push(slot);
        self.freed.notify_all();
    }
}

#[derive(Default)]
struct Counters {
    submitted: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
    callbacks_succeeded: AtomicU64,
    callbacks_failed: AtomicU64,
    callbacks_panicked: AtomicU64,
}

/// Counts finished operations and frees their call slots.
struct Finisher {
    slots: Arc<CallSlots>,
    counters: Arc<Counters>,
}

impl Observer for Finisher {
    fn op_event(&self, _queue: causeway_device::ObservedQueue<'_>, tag: u64, event: OpEvent) {
        let OpEvent::Finished { status, .. } = event else { return };
        let counter = match status {
            OpStatus::Ok => &self.counters.completed,
            OpStatus::Cancelled => &self.counters.cancelled,
            _ => &self.counters.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if tag & HOST_TAG != 0 {
            self.slots.give_back((tag & !HOST_TAG) as usize);
        }
    }
}

/// Runs the callback in call slot `slot` (the host function registered for it).
fn run_host_call(slots: &CallSlots, counters: &Counters, slot: usize) -> Result<(), Failure> {
    // Set at submission, before the operation entered its queue.
    let Some((callback, user_data)) = *slots.calls[slot].lock() else {
        return Err(Failure::Aborted);
    };
    IN_HOST_CALLBACK.with(|inside| inside.set(true));
    let call = std::panic::AssertUnwindSafe(|| callback(user_data.0));
    let returned = std::panic::catch_unwind(call);
    IN_HOST_CALLBACK.with(|inside| inside.set(false));
    match returned {
        Ok(0) => {
            counters.callbacks_succeeded.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        Ok(code) => {
            counters.callbacks_failed.fetch_add(1, Ordering::Relaxed);
            Err(Failure::Application(code))
        }
        Err(_) => {
            counters.callbacks_panicked.fetch_add(1, Ordering::Relaxed);
            Err(Failure::PANICKED)
        }
    }
}

struct DeviceEntry {
    device: Device,
    queues: usize,
    slots: Arc<CallSlots>,
    counters: Arc<Counters>,
    /// Our handles' slots: the generation and the device's id of each semaphore.
    semaphores: Mutex<Vec<Option<(u32, SemaphoreId)>>>,
    closing: AtomicBool,
}

/// Generations for hosted handles, process-wide, so a handle made by one device never matches
/// a slot of another.
static GENERATIONS: AtomicU32 = AtomicU32::new(0);

fn next_generation() -> u32 {
    GENERATIONS.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
}

type DeviceSlots = Vec<Option<(u32, Arc<DeviceEntry>)>>;

static DEVICES: Mutex<DeviceSlots> = Mutex::new(Vec::new());

/// The device `handle` names, for the length of a call.
fn device(handle: CwDevice) -> Result<Arc<DeviceEntry>, Error> {
    let decoded = decode(handle.bits, Kind::Device, MAX_DEVICES)?;
    let devices = DEVICES.lock();
    match devices.get(decoded.index) {
        Some(Some((generation, entry))) if *generation == decoded.generation => {
            if entry.closing.load(Ordering::Relaxed) {
                return Err(HostedError::ShutDown.into());
            }
            Ok(Arc::clone(entry))
        }
        _ => Err(crate::handle::HandleError::Stale(Kind::Device).into()),
    }
}

impl DeviceEntry {
    fn semaphore_id(&self, handle: CwDeviceSemaphore) -> Result<SemaphoreId, Error> {
        let semaphores = self.semaphores.lock();
        let decoded = decode(handle.bits, Kind::DeviceSemaphore, semaphores.len())?;
        match semaphores[decoded.index] {
            Some((generation, id)) if generation == decoded.generation => Ok(id),
            _ => Err(crate::handle::HandleError::Stale(Kind::DeviceSemaphore).into()),
        }
    }

    fn queue(&self, queue: u32) -> Result<QueueId, Error> {
        let index = queue as usize;
        match self.device.queue(index) {
            Some(id) if index < self.queues => Ok(id),
            _ => Err(HostedError::NoQueue { queue, queues: self.queues }.into()),
        }
    }
}

/// Fills `*out` with a small device: 2 workers, 1 queue of 64 operations, 64 semaphores of 16
/// history slots.
///
/// # Safety
/// `out` must be NULL or valid for writing a `cw_device_config`.
#[no_mangle]
pub unsafe extern "C" fn cw_device_config_default(out: *mut CwDeviceConfig) -> CwStatus {
    boundary(|| {
        let config = CwDeviceConfig {
            workers: 2,
            queues: 1,
            queue_capacity: 64,
            semaphores: 64,
            semaphore_history: 16,
        };
        // SAFETY: valid by the caller's contract (NULL is refused).
        unsafe { write_out(out, "out", config) }
    })
}

fn check_config(config: &CwDeviceConfig) -> Result<(), HostedError> {
    let problem = if !(1..=64).contains(&config.workers) {
        "workers must be 1..=64"
    } else if !(1..=64).contains(&config.queues) {
        "queues must be 1..=64"
    } else if !(1..=65536).contains(&config.queue_capacity) {
        "queue_capacity must be 1..=65536"
    } else if config.semaphores > 65536 {
        "semaphores must be 0..=65536"
    } else if !(2..=65535).contains(&config.semaphore_history) {
        "semaphore_history must be 2..=65535"
    } else {
        return Ok(());
    };
    Err(HostedError::Config(problem))
}

/// Builds and starts a device as `config` describes: its worker threads, its CPU queues
/// (numbered 0 to `queues` - 1) and room for its semaphores. Destroy it with
/// `cw_device_destroy`. At most 64 devices exist at once.
///
/// # Safety
/// `config` must be NULL or valid for reading a `cw_device_config`; `out` NULL or valid for
/// writing a `cw_device`.
#[no_mangle]
pub unsafe extern "C" fn cw_device_create(
    config: *const CwDeviceConfig,
    out: *mut CwDevice,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        require(config, "config")?;
        // SAFETY: non-null, and valid for reading by the caller's contract.
        let config = unsafe { config.read() };
        check_config(&config)?;
        let queues = config.queues as usize;
        let capacity = config.queue_capacity as usize;
        let slot_count = queues * (capacity + 1);
        let slots = Arc::new(CallSlots {
            calls: (0..slot_count).map(|_| Mutex::new(None)).collect(),
            free: Mutex::new((0..slot_count).rev().collect()),
            freed: Condvar::new(),
        });
        let counters = Arc::new(Counters::default());
        let mut pool = PoolConfig::with_workers(config.workers as usize);
        pool.name = String::from("causeway-capi-worker");
        let mut builder = Device::builder(pool);
        builder.driver(CpuBackend::new());
        let mut first = None;
        for _ in 0..queues {
            let mut queue = QueueConfig::default();
            queue.capacity = capacity;
            first = first.or(Some(builder.queue(queue)));
        }
        let home = first
            .and_then(|first| builder.endpoint(first))
            .ok_or(HostedError::Config("no axis left for a queue"))?;
        if config.semaphores > 0 {
            let mut semaphore = SemaphoreConfig::new(0, Scope::DeviceLocal, home);
            semaphore.history = config.semaphore_history as usize;
            builder.semaphore_pool(config.semaphores as usize, semaphore);
        }
        for slot in 0..slot_count {
            let (slots, counters) = (Arc::clone(&slots), Arc::clone(&counters));
            builder.host_call(move |_| run_host_call(&slots, &counters, slot));
        }
        builder.observer(Arc::new(Finisher {
            slots: Arc::clone(&slots),
            counters: Arc::clone(&counters),
        }));
        let device = builder.build().map_err(HostedError::Build)?;
        let entry = Arc::new(DeviceEntry {
            device,
            queues,
            slots,
            counters,
            semaphores: Mutex::new(vec![None; config.semaphores as usize]),
            closing: AtomicBool::new(false),
        });
        let generation = next_generation();
        let index = {
            let mut devices = DEVICES.lock();
            let index = match devices.iter().position(Option::is_none) {
                Some(index) => index,
                None if devices.len() < MAX_DEVICES => {
                    devices.push(None);
                    devices.len() - 1
                }
                None => return Err(HostedError::TableFull.into()),
            };
            devices[index] = Some((generation, entry));
            index
        };
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", CwDevice { bits: encode(Kind::Device, index, generation) }) }
    })
}

/// Shuts the device down and destroys it; its handle (and its semaphores') are stale from now
/// on. Waits up to `grace_ns` for running callbacks to return, cancels every operation that has
/// not run (failing its signals as cancelled, so every waiter ends) and fails those still
/// running as aborted, abandoning their workers. Calls in progress on other threads see the
/// device closing within 20 ms and return `CW_STATUS_SHUT_DOWN` first. Into `*report` (may be
/// NULL) what it found. Refused with `CW_STATUS_BUSY` from inside one of the device's callbacks.
///
/// # Safety
/// `report` must be NULL or valid for writing a `cw_shutdown_report`.
#[no_mangle]
pub unsafe extern "C" fn cw_device_destroy(
    device: CwDevice,
    grace_ns: u64,
    report: *mut CwShutdownReport,
) -> CwStatus {
    boundary(|| {
        refuse_inside_callback("destroying a device")?;
        let decoded = decode(device.bits, Kind::Device, MAX_DEVICES)?;
        let mut entry = {
            let mut devices = DEVICES.lock();
            match devices.get_mut(decoded.index) {
                Some(slot @ Some(_))
                    if slot.as_ref().is_some_and(|(g, _)| *g == decoded.generation) =>
                {
                    slot.take().map(|(_, entry)| entry)
                }
                _ => None,
            }
        }
        .ok_or(crate::handle::HandleError::Stale(Kind::Device))?;
        entry.closing.store(true, Ordering::Relaxed);
        let grace = Duration::from_nanos(grace_ns);
        let deadline = Instant::now().checked_add(grace + SLICE * 2);
        let mut result = CwShutdownReport::default();
        loop {
            match Arc::try_unwrap(entry) {
                Ok(owned) => {
                    let shutdown = owned.device.shutdown(grace);
                    result = CwShutdownReport {
                        shut_down: true,
                        cancelled: shutdown.cancelled as u64,
                        stuck: shutdown.stuck.len() as u64,
                        abandoned_workers: shutdown.abandoned_workers.len() as u64,
                        leaked: shutdown.leaked,
                        stats: counted(&owned.counters, CwDeviceStats::default()),
                    };
                    break;
                }
                // Still used by a call on another thread: it sees `closing` within a slice.
                Err(shared) if deadline.is_none_or(|deadline| Instant::now() < deadline) => {
                    entry = shared;
                    std::thread::sleep(Duration::from_millis(1));
                }
                // Given up: the last call to return drops it, which shuts it down.
                Err(_) => break,
            }
        }
        if !report.is_null() {
            // SAFETY: non-null; valid by the caller's contract.
            unsafe { report.write(result) };
        }
        Ok(())
    })
}

fn counted(counters: &Counters, mut stats: CwDeviceStats) -> CwDeviceStats {
    stats.submitted = counters.submitted.load(Ordering::Relaxed);
    stats.completed = counters.completed.load(Ordering::Relaxed);
    stats.failed = counters.failed.load(Ordering::Relaxed);
    stats.cancelled = counters.cancelled.load(Ordering::Relaxed);
    stats.callbacks_succeeded = counters.callbacks_succeeded.load(Ordering::Relaxed);
    stats.callbacks_failed = counters.callbacks_failed.load(Ordering::Relaxed);
    stats.callbacks_panicked = counters.callbacks_panicked.load(Ordering::Relaxed);
    stats
}

/// The run's statistics so far, into `*out`.
///
/// # Safety
/// `out` must be NULL or valid for writing a `cw_device_stats`.
#[no_mangle]
pub unsafe extern "C" fn cw_device_query_stats(
    device: CwDevice,
    out: *mut CwDeviceStats,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let entry = self::device(device)?;
        let mut stats = CwDeviceStats::default();
        for queue in (0..entry.queues).filter_map(|index| entry.device.queue(index)) {
            if let Some(counts) = entry.device.resolution_counts(queue) {
                stats.waits_elided += counts.elided;
                stats.waits_satisfied += counts.satisfied;
                stats.waits_device += counts.device;
                stats.waits_held += counts.held;
                stats.waits_tainted += counts.tainted;
            }
            stats.in_flight += entry.device.in_flight(queue).unwrap_or(0);
        }
        let stats = counted(&entry.counters, stats);
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", stats) }
    })
}

/// Creates a semaphore of the device at `initial`, into `*out`. `CW_STATUS_FULL` when the
/// device holds its configured number of semaphores (a destroyed one's room returns once the
/// operations that used it have retired).
///
/// # Safety
/// `out` must be NULL or valid for writing a `cw_device_semaphore`.
#[no_mangle]
pub unsafe extern "C" fn cw_device_semaphore_create(
    device: CwDevice,
    initial: u64,
    out: *mut CwDeviceSemaphore,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let entry = self::device(device)?;
        let mut semaphores = entry.semaphores.lock();
        let index = semaphores.iter().position(Option::is_none).ok_or(HostedError::Semaphore(
            SemaphoreError::Full(causeway_device::Resource::Semaphores {
                capacity: semaphores.len(),
            }),
        ))?;
        let id = entry.device.create_semaphore(initial).map_err(HostedError::Semaphore)?;
        let generation = next_generation();
        semaphores[index] = Some((generation, id));
        let bits = encode(Kind::DeviceSemaphore, index, generation);
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", CwDeviceSemaphore { bits }) }
    })
}

/// Destroys a semaphore of the device: submissions naming it are refused from now on
/// (`CW_STATUS_STALE_HANDLE`), while operations already submitted keep using it.
#[no_mangle]
pub extern "C" fn cw_device_semaphore_destroy(
    device: CwDevice,
    semaphore: CwDeviceSemaphore,
) -> CwStatus {
    boundary(|| {
        let entry = self::device(device)?;
        let id = entry.semaphore_id(semaphore)?;
        entry.device.destroy_semaphore(id).map_err(HostedError::Semaphore)?;
        let mut semaphores = entry.semaphores.lock();
        let index = decode(semaphore.bits, Kind::DeviceSemaphore, semaphores.len())?.index;
        semaphores[index] = None;
        Ok(())
    })
}

/// The value a semaphore of the device has reached, into `*out`.
///
/// # Safety
/// `out` must be NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn cw_device_semaphore_value(
    device: CwDevice,
    semaphore: CwDeviceSemaphore,
    out: *mut u64,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let entry = self::device(device)?;
        let id = entry.semaphore_id(semaphore)?;
        let value = entry
            .device
            .semaphore(id)
            .ok_or(crate::handle::HandleError::Stale(Kind::DeviceSemaphore))?
            .value();
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", value) }
    })
}

/// How a submission meets a full resource.
#[derive(Clone, Copy)]
enum Patience {
    /// Refuse with `CW_STATUS_FULL`.
    None,
    /// Wait until the deadline (`None`: for ever), looking at the closing flag every slice.
    Until(Option<Instant>),
}

type Values<const N: usize> = FixedVec<(SemaphoreId, u64), N>;

/// Reads `count` values from `values` and maps their semaphores to the device's ids.
///
/// # Safety
/// `values` must be NULL or valid for reading `count` values.
unsafe fn device_values<const N: usize>(
    entry: &DeviceEntry,
    values: *const CwDeviceValue,
    count: usize,
    what: &'static str,
) -> Result<Values<N>, Error> {
    if count > N {
        return Err(Error::TooMany { what, count, limit: N });
    }
    let mut out = Values::<N>::new();
    if count == 0 {
        return Ok(out);
    }
    require(values, what)?;
    // SAFETY: non-null, and valid for `count` values by the caller's contract.
    for value in unsafe { core::slice::from_raw_parts(values, count) } {
        // The count was checked against the capacity above.
        let _ = out.push((entry.semaphore_id(value.semaphore)?, value.value));
    }
    Ok(out)
}

fn receipt(receipt: &Receipt) -> CwReceipt {
    let mut waits = [CwResolution::Elided; CW_MAX_WAITS];
    for (resolved, outcome) in waits.iter_mut().zip(&receipt.waits) {
        *resolved = match outcome {
            WaitOutcome::Resolved(wait) => match wait.resolution {
                Resolution::Elided => CwResolution::Elided,
                Resolution::Satisfied => CwResolution::Satisfied,
                Resolution::DeviceWait => CwResolution::DeviceWait,
                // Held, and any resolution core adds later: the value is still to come.
                _ => CwResolution::Held,
            },
            // A failed semaphore, and any outcome core adds later: the operation is doomed.
            _ => CwResolution::Failed,
        };
    }
    CwReceipt {
        point: CwPoint::from_point(receipt.point),
        failure: failure::to_c(receipt.failure),
        failed_signal: receipt
            .failed_signal
            .and_then(|(index, _)| i32::try_from(index).ok())
            .unwrap_or(-1),
        wait_count: receipt.waits.len() as u32,
        waits,
    }
}

/// The submission every `cw_device_submit*` makes, after its arguments are read.
fn submit(
    entry: &DeviceEntry,
    queue: QueueId,
    op: &CwOp,
    waits: &[(SemaphoreId, u64)],
    signals: &[(SemaphoreId, u64)],
    patience: Patience,
) -> Result<Receipt, Error> {
    let slot = match (op.host, patience) {
        (None, _) => None,
        (Some(_), Patience::None) => Some(entry.slots.try_take()?),
        (Some(_), Patience::Until(deadline)) => Some(entry.slots.take(deadline, &entry.closing)?),
    };
    let (work, tag) = match (op.host, slot) {
        (Some(host), Some(slot)) => {
            *entry.slots.calls[slot].lock() = Some((host, UserData(op.user_data)));
            // The device registered one host function per slot, in slot order.
            (Work::Host(HostCallId(slot as u32)), HOST_TAG | slot as u64)
        }
        _ => (Work::Barrier, 0),
    };
    let device_op = Op { waits, signals, work, tag, ..Default::default() };
    let submitted = match patience {
        Patience::None => {
            entry.device.try_submit(queue, device_op).map_err(|rejected| rejected.error.into())
        }
        Patience::Until(deadline) => loop {
            if entry.closing.load(Ordering::Relaxed) {
                break Err(HostedError::ShutDown.into());
            }
            // A deadline already passed still gets one attempt (a zero timeout).
            let slice = deadline.map_or(SLICE, |deadline| {
                SLICE.min(deadline.saturating_duration_since(Instant::now()))
            });
            match entry.device.submit_timeout(queue, &device_op, slice) {
                Err(SubmitError::TimedOut(resource)) => {
                    if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                        break Err(SubmitError::TimedOut(resource).into());
                    }
                    // Waiting for ever, as `Device::submit` does: not for room that only a
                    // signal nobody has submitted could free (looked at once a slice went by
                    // without room, as `submit` looks after its short wait).
                    if deadline.is_none() {
                        if let Some(stall) = entry.device.stalled(queue, &device_op, resource) {
                            break Err(SubmitError::Stalled(stall).into());
                        }
                    }
                }
                done => break done.map_err(Error::from),
            }
        },
    };
    match submitted {
        Ok(receipt) => {
            entry.counters.submitted.fetch_add(1, Ordering::Relaxed);
            Ok(receipt)
        }
        Err(error) => {
            // Refused: no operation holds the slot, so no observer frees it.
            if let Some(slot) = slot {
                entry.slots.give_back(slot);
            }
            Err(error)
        }
    }
}

impl From<SubmitError> for Error {
    fn from(error: SubmitError) -> Error {
        HostedError::Submit(error).into()
    }
}

/// Reads the operation and submits it to `queue` with the given patience.
///
/// # Safety
/// As `cw_device_submit`.
unsafe fn submit_c(
    device: CwDevice,
    queue: u32,
    op: *const CwOp,
    patience: Patience,
    out: *mut CwReceipt,
) -> Result<(), Error> {
    require(out, "receipt")?;
    require(op, "op")?;
    // SAFETY: non-null, and valid for reading by the caller's contract.
    let op = unsafe { op.read() };
    let entry = self::device(device)?;
    let queue = entry.queue(queue)?;
    // SAFETY: the op's arrays are valid for their counts by the caller's contract.
    let waits = unsafe { device_values::<MAX_WAITS>(&entry, op.waits, op.wait_count, "waits") }?;
    // SAFETY: as above.
    let signals =
        unsafe { device_values::<MAX_SIGNALS>(&entry, op.signals, op.signal_count, "signals") }?;
    let receipt = submit(&entry, queue, &op, &waits, &signals, patience)?;
    // SAFETY: checked non-null; valid by the caller's contract.
    unsafe { write_out(out, "receipt", self::receipt(&receipt)) }
}

/// Submits `op` to queue `queue` of the device, into `*receipt`, waiting while its ring (or a
/// signalled semaphore's history) is full: room frees as earlier work completes. When the room
/// waits for a signal no operation submitted so far gives, it answers `CW_STATUS_STALLED`
/// (within 20 ms) instead of waiting for ever (the message names the wait). A semaphore it
/// waits on that has failed does not refuse it: it is accepted doomed (`receipt->failure`). A
/// signal that does not advance its semaphore is `CW_STATUS_NOT_ADVANCING`; nothing is submitted
/// then. Refused with `CW_STATUS_BUSY` from inside a host callback (it could wait for its own
/// queue): use `cw_device_try_submit` or `cw_device_submit_timeout` there.
///
/// # Safety
/// `op` must be NULL or valid for reading a `cw_op` whose arrays are valid for their counts;
/// `receipt` NULL or valid for writing a `cw_receipt`.
#[no_mangle]
pub unsafe extern "C" fn cw_device_submit(
    device: CwDevice,
    queue: u32,
    op: *const CwOp,
    receipt: *mut CwReceipt,
) -> CwStatus {
    boundary(|| {
        refuse_inside_callback("a submit that may wait for ever")?;
        // SAFETY: forwarded from this function's contract.
        unsafe { submit_c(device, queue, op, Patience::Until(None), receipt) }
    })
}

/// `cw_device_submit` without waiting: a full ring or history answers `CW_STATUS_FULL` and
/// nothing is submitted (the same `op` may be submitted again later).
///
/// # Safety
/// As `cw_device_submit`.
#[no_mangle]
pub unsafe extern "C" fn cw_device_try_submit(
    device: CwDevice,
    queue: u32,
    op: *const CwOp,
    receipt: *mut CwReceipt,
) -> CwStatus {
    // SAFETY: forwarded from this function's contract.
    boundary(|| unsafe { submit_c(device, queue, op, Patience::None, receipt) })
}

/// `cw_device_submit`, giving up after `timeout_ns` with `CW_STATUS_TIMED_OUT` (nothing
/// submitted) while the ring or a history is still full.
///
/// # Safety
/// As `cw_device_submit`.
#[no_mangle]
pub unsafe extern "C" fn cw_device_submit_timeout(
    device: CwDevice,
    queue: u32,
    op: *const CwOp,
    timeout_ns: u64,
    receipt: *mut CwReceipt,
) -> CwStatus {
    boundary(|| {
        let deadline = Instant::now().checked_add(Duration::from_nanos(timeout_ns));
        // SAFETY: forwarded from this function's contract.
        unsafe { submit_c(device, queue, op, Patience::Until(deadline), receipt) }
    })
}

/// Blocks the calling thread until a semaphore of the device reaches `value`
/// (`CW_STATUS_OK`), the wait fails (`CW_STATUS_FAILED`: the work it waited for has stopped), or
/// `timeout_ns` passes (`CW_STATUS_TIMED_OUT`; `CW_TIMEOUT_INFINITE` never passes), into
/// `*outcome` (may be NULL): the value reached, or the failure. A wait ends only after the
/// signal it waits for has ended, also when the timeline fails meanwhile. A device being
/// destroyed ends it with `CW_STATUS_SHUT_DOWN`. An infinite wait is refused with
/// `CW_STATUS_BUSY` from inside a host callback.
///
/// # Safety
/// `outcome` must be NULL or valid for writing a `cw_outcome`.
#[no_mangle]
pub unsafe extern "C" fn cw_device_wait(
    device: CwDevice,
    semaphore: CwDeviceSemaphore,
    value: u64,
    timeout_ns: u64,
    outcome: *mut CwOutcome,
) -> CwStatus {
    boundary(|| {
        let deadline = match timeout_ns {
            CW_TIMEOUT_INFINITE => None,
            timeout => Instant::now().checked_add(Duration::from_nanos(timeout)),
        };
        if deadline.is_none() {
            refuse_inside_callback("a wait without a timeout")?;
        }
        let entry = self::device(device)?;
        let id = entry.semaphore_id(semaphore)?;
        let ended = loop {
            if entry.closing.load(Ordering::Relaxed) {
                return Err(HostedError::ShutDown.into());
            }
            // Looked up again every slice: a semaphore destroyed meanwhile is reported stale.
            let semaphore = entry
                .device
                .semaphore(id)
                .ok_or(crate::handle::HandleError::Stale(Kind::DeviceSemaphore))?;
            let now = Instant::now();
            let slice_end = deadline.map_or(now + SLICE, |deadline| deadline.min(now + SLICE));
            match blocking::wait_until(semaphore, value, Some(slice_end)) {
                Err(HostWaitError::TimedOut { .. })
                    if deadline.is_none_or(|deadline| Instant::now() < deadline) => {}
                ended => break ended,
            }
        };
        let result = match ended {
            Ok(reached) => CwOutcome::from_outcome(Ok(reached)),
            Err(HostWaitError::Failed(failed)) => CwOutcome::from_outcome(Err(failed)),
            Err(error) => return Err(HostedError::Wait(error).into()),
        };
        if !outcome.is_null() {
            // SAFETY: non-null; valid by the caller's contract.
            unsafe { outcome.write(result) };
        }
        match ended {
            Err(error) => Err(HostedError::Wait(error).into()),
            Ok(_) => Ok(()),
        }
    })
}
