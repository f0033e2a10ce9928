//! Drives the C API (`causeway-capi`, hosted) with random call sequences: every entry point,
//! with handles picked from those the sequence made — live, destroyed, of the wrong type — or
//! null or random bits, random values, NULL and non-NULL pointers, and callbacks that succeed,
//! fail, panic, call back into the API or try to destroy their own timepoint.
//!
//! No call may crash, hang or leave a sanitizer report, and none may panic: a panic caught at
//! the boundary (`CW_STATUS_PANIC`) is a bug in causeway all the same, so it fails the target.
//! Every failing call must leave a message. Blocking calls are only made with short timeouts
//! (a plain `cw_device_submit` may wait for ever by contract). Each input ends by destroying
//! what it created, so the static tables start every input empty.
#![no_main]

use core::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};

use arbitrary::Arbitrary;
use causeway_capi::device::*;
use causeway_capi::frontier::*;
use causeway_capi::queue::*;
use causeway_capi::semaphore::*;
use causeway_capi::types::*;
use causeway_capi::{cw_last_error_message, CwStatus};
use libfuzzer_sys::fuzz_target;

/// A handle as the sequence names it.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Pick {
    /// The n-th handle the sequence made (live or destroyed), of whatever type.
    Made(u8),
    Null,
    Raw(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Callback {
    Quiet,
    Panics,
    /// Reads a semaphore's value from inside the callback.
    CallsBack,
    /// Tries to destroy its own timepoint (must be refused as busy, not deadlock).
    DestroysItself,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum HostWork {
    Barrier,
    Succeeds,
    Fails(u32),
    Panics,
}

#[derive(Arbitrary, Debug)]
enum Call {
    AxisMake {
        machine: u16,
        domain: u32,
        ordinal: u64,
    },
    FrontierCreate {
        null_out: bool,
    },
    FrontierDestroy(Pick),
    FrontierClear(Pick),
    FrontierRaise(Pick, u64, u64),
    FrontierMerge(Pick, Pick),
    FrontierCopy(Pick, Pick),
    FrontierDominates(Pick, Pick),
    FrontierGet(Pick, u64),
    FrontierInfo(Pick),
    FrontierEncode(Pick, u8),
    FrontierDecode(Pick, Vec<u8>),
    SemaphoreCreate(u64),
    SemaphoreDestroy(Pick),
    SemaphoreValue(Pick),
    SemaphoreFailureFor(Pick, u64),
    SemaphoreSignal(Pick, u64, u64, u64, Pick),
    SemaphoreSignalExternal(Pick, u64),
    SemaphoreFail(Pick, u32, u32),
    TimepointCreate(Callback),
    TimepointArm(Pick, Pick, u64),
    TimepointCancel(Pick),
    TimepointDestroy(Pick),
    QueueCreate(u64, bool),
    QueueDestroy(Pick),
    QueueState(Pick, Pick),
    QueueBegin(Pick),
    QueueAbandon(Pick),
    QueueWait(Pick, Pick, u64),
    QueueCommit(Pick, Vec<(Pick, u64)>, Pick),
    Retire(Vec<(Pick, u64)>, u32, u32),
    DeviceCreate {
        workers: u8,
        queues: u8,
        capacity: u8,
        semaphores: u8,
        history: u8,
    },
    DeviceDestroy(Pick, u8),
    DeviceStats(Pick),
    DeviceSemaphoreCreate(Pick, u64),
    DeviceSemaphoreDestroy(Pick, Pick),
    DeviceSemaphoreValue(Pick, Pick),
    DeviceSubmit {
        device: Pick,
        queue: u8,
        waits: Vec<(Pick, u64)>,
        signals: Vec<(Pick, u64)>,
        work: HostWork,
        timeout_us: Option<u16>,
    },
    DeviceWait(Pick, Pick, u64, u16),
}

/// The handles a sequence made, in order, and the devices among them.
#[derive(Default)]
struct Made {
    handles: Vec<u64>,
    devices: Vec<u64>,
}

impl Made {
    fn bits(&self, pick: Pick) -> u64 {
        match pick {
            Pick::Made(n) if !self.handles.is_empty() => {
                self.handles[n as usize % self.handles.len()]
            }
            Pick::Made(_) | Pick::Null => 0,
            Pick::Raw(bits) => bits,
        }
    }
}

/// The semaphore handle a `CallsBack` callback reads.
static CALLBACK_TARGET: AtomicU64 = AtomicU64::new(0);

extern "C-unwind" fn quiet(_: *mut c_void, _: CwOutcome) {}

extern "C-unwind" fn panics(_: *mut c_void, _: CwOutcome) {
    std::panic::panic_any(DELIBERATE);
}

extern "C-unwind" fn calls_back(_: *mut c_void, _: CwOutcome) {
    let mut value = 0;
    let semaphore = CwSemaphore { bits: CALLBACK_TARGET.load(Ordering::Relaxed) };
    // SAFETY: a valid output pointer.
    let status = unsafe { cw_semaphore_value(semaphore, &mut value) };
    // A panic here would be contained and reported as the callback's; abort so it is a crash.
    if status == CwStatus::Panic {
        std::process::abort();
    }
}

extern "C-unwind" fn destroys_itself(user_data: *mut c_void, _: CwOutcome) {
    // SAFETY: `user_data` is the `AtomicU64` holding this timepoint's handle (leaked per input).
    let bits = unsafe { &*user_data.cast::<AtomicU64>() }.load(Ordering::Relaxed);
    let status = cw_timepoint_destroy(CwTimepoint { bits });
    // Its own callback is running: refused as busy (stale when that handle was never stored).
    if !matches!(status, CwStatus::Busy | CwStatus::StaleHandle) {
        std::process::abort();
    }
}

extern "C-unwind" fn host_ok(_: *mut c_void) -> u32 {
    0
}

extern "C-unwind" fn host_fails(code: *mut c_void) -> u32 {
    code as usize as u32
}

extern "C-unwind" fn host_panics(_: *mut c_void) -> u32 {
    std::panic::panic_any(DELIBERATE);
}

/// Checks a call's status: never a panic, and a message for every failure.
fn check(status: CwStatus) -> CwStatus {
    assert_ne!(status, CwStatus::Panic, "causeway panicked inside a call");
    if status != CwStatus::Ok {
        // SAFETY: the pointer is the thread's NUL-terminated message buffer.
        let message = unsafe { CStr::from_ptr(cw_last_error_message()) };
        assert!(!message.to_bytes().is_empty(), "{status:?} without a message");
    }
    status
}

fn values(made: &Made, list: &[(Pick, u64)]) -> Vec<CwDeviceValue> {
    list.iter()
        .map(|&(pick, value)| CwDeviceValue {
            semaphore: CwDeviceSemaphore { bits: made.bits(pick) },
            value,
        })
        .collect()
}

fn signals(made: &Made, list: &[(Pick, u64)]) -> Vec<CwSignal> {
    list.iter()
        .map(|&(pick, value)| CwSignal { semaphore: CwSemaphore { bits: made.bits(pick) }, value })
        .collect()
}

fn failure(kind: u32, code: u32) -> CwFailure {
    // Mostly valid kinds, sometimes not.
    CwFailure { kind: kind % 9, code }
}

/// Runs one call. Every pointer passed is NULL or valid; every count matches its array. Each
/// timepoint's user data is boxed: its address must stay put while `self_handles` grows.
#[allow(clippy::vec_box)]
fn run(call: Call, made: &mut Made, self_handles: &mut Vec<Box<AtomicU64>>) {
    // SAFETY (for every call below): outputs point at locals, inputs at vectors of the stated
    // length, and NULL only where the target asks for it.
    unsafe {
        match call {
            Call::AxisMake { machine, domain, ordinal } => {
                let mut out = 0;
                check(cw_axis_make(machine, domain, ordinal, &mut out));
            }
            Call::FrontierCreate { null_out } => {
                let mut out = CwFrontier { bits: 0 };
                let pointer = if null_out { core::ptr::null_mut() } else { &mut out };
                if check(cw_frontier_create(pointer)) == CwStatus::Ok {
                    made.handles.push(out.bits);
                }
            }
            Call::FrontierDestroy(f) => {
                check(cw_frontier_destroy(CwFrontier { bits: made.bits(f) }));
            }
            Call::FrontierClear(f) => {
                check(cw_frontier_clear(CwFrontier { bits: made.bits(f) }));
            }
            Call::FrontierRaise(f, axis, epoch) => {
                check(cw_frontier_insert_or_raise(CwFrontier { bits: made.bits(f) }, axis, epoch));
            }
            Call::FrontierMerge(a, b) => {
                check(cw_frontier_merge(
                    CwFrontier { bits: made.bits(a) },
                    CwFrontier { bits: made.bits(b) },
                ));
            }
            Call::FrontierCopy(a, b) => {
                check(cw_frontier_copy(
                    CwFrontier { bits: made.bits(a) },
                    CwFrontier { bits: made.bits(b) },
                ));
            }
            Call::FrontierDominates(a, b) => {
                let mut out = false;
                check(cw_frontier_dominates(
                    CwFrontier { bits: made.bits(a) },
                    CwFrontier { bits: made.bits(b) },
                    &mut out,
                ));
            }
            Call::FrontierGet(f, axis) => {
                let mut out = 0;
                check(cw_frontier_get(CwFrontier { bits: made.bits(f) }, axis, &mut out));
            }
            Call::FrontierInfo(f) => {
                let (mut len, mut tainted) = (0, false);
                check(cw_frontier_info(CwFrontier { bits: made.bits(f) }, &mut len, &mut tainted));
            }
            Call::FrontierEncode(f, capacity) => {
                let mut buffer = vec![0u8; usize::from(capacity)];
                let mut written = 0;
                let pointer =
                    if buffer.is_empty() { core::ptr::null_mut() } else { buffer.as_mut_ptr() };
                let status = check(cw_frontier_encode(
                    CwFrontier { bits: made.bits(f) },
                    pointer,
                    buffer.len(),
                    &mut written,
                ));
                if status == CwStatus::Ok {
                    assert!(written <= buffer.len() && written <= CW_FRONTIER_WIRE_MAX);
                }
            }
            Call::FrontierDecode(f, bytes) => {
                let mut consumed = 0;
                let status = check(cw_frontier_decode(
                    CwFrontier { bits: made.bits(f) },
                    bytes.as_ptr(),
                    bytes.len(),
                    &mut consumed,
                ));
                if status == CwStatus::Ok {
                    assert!(consumed <= bytes.len());
                }
            }
            Call::SemaphoreCreate(initial) => {
                let mut out = CwSemaphore { bits: 0 };
                if check(cw_semaphore_create(initial, &mut out)) == CwStatus::Ok {
                    made.handles.push(out.bits);
                    CALLBACK_TARGET.store(out.bits, Ordering::Relaxed);
                }
            }
            Call::SemaphoreDestroy(s) => {
                check(cw_semaphore_destroy(CwSemaphore { bits: made.bits(s) }));
            }
            Call::SemaphoreValue(s) => {
                let mut out = 0;
                check(cw_semaphore_value(CwSemaphore { bits: made.bits(s) }, &mut out));
            }
            Call::SemaphoreFailureFor(s, minimum) => {
                let mut out = failure(0, 0);
                check(cw_semaphore_failure_for(
                    CwSemaphore { bits: made.bits(s) },
                    minimum,
                    &mut out,
                ));
            }
            Call::SemaphoreSignal(s, value, axis, epoch, f) => {
                check(cw_semaphore_signal(
                    CwSemaphore { bits: made.bits(s) },
                    value,
                    CwPoint { axis, epoch },
                    CwFrontier { bits: made.bits(f) },
                ));
            }
            Call::SemaphoreSignalExternal(s, value) => {
                check(cw_semaphore_signal_external(CwSemaphore { bits: made.bits(s) }, value));
            }
            Call::SemaphoreFail(s, kind, code) => {
                let mut first = false;
                check(cw_semaphore_fail(
                    CwSemaphore { bits: made.bits(s) },
                    failure(kind, code),
                    &mut first,
                ));
            }
            Call::TimepointCreate(callback) => {
                let own = Box::new(AtomicU64::new(0));
                let user_data = (&*own as *const AtomicU64).cast_mut().cast::<c_void>();
                let function: CwTimepointFn = Some(match callback {
                    Callback::Quiet => quiet,
                    Callback::Panics => panics,
                    Callback::CallsBack => calls_back,
                    Callback::DestroysItself => destroys_itself,
                });
                let mut out = CwTimepoint { bits: 0 };
                if check(cw_timepoint_create(function, user_data, &mut out)) == CwStatus::Ok {
                    own.store(out.bits, Ordering::Relaxed);
                    made.handles.push(out.bits);
                }
                self_handles.push(own);
            }
            Call::TimepointArm(t, s, minimum) => {
                let mut out =
                    CwArm { armed: false, outcome: CwOutcome { value: 0, failure: failure(0, 0) } };
                check(cw_timepoint_arm(
                    CwTimepoint { bits: made.bits(t) },
                    CwSemaphore { bits: made.bits(s) },
                    minimum,
                    &mut out,
                ));
            }
            Call::TimepointCancel(t) => {
                let mut out = CwCancel::NotArmed;
                check(cw_timepoint_cancel(CwTimepoint { bits: made.bits(t) }, &mut out));
            }
            Call::TimepointDestroy(t) => {
                check(cw_timepoint_destroy(CwTimepoint { bits: made.bits(t) }));
            }
            Call::QueueCreate(axis, wait_before_signal) => {
                let mut out = CwQueue { bits: 0 };
                if check(cw_queue_create(axis, wait_before_signal, &mut out)) == CwStatus::Ok {
                    made.handles.push(out.bits);
                }
            }
            Call::QueueDestroy(q) => {
                check(cw_queue_destroy(CwQueue { bits: made.bits(q) }));
            }
            Call::QueueState(q, f) => {
                let mut epoch = 0;
                check(cw_queue_state(
                    CwQueue { bits: made.bits(q) },
                    &mut epoch,
                    CwFrontier { bits: made.bits(f) },
                ));
            }
            Call::QueueBegin(q) => {
                check(cw_queue_begin(CwQueue { bits: made.bits(q) }));
            }
            Call::QueueAbandon(q) => {
                check(cw_queue_abandon(CwQueue { bits: made.bits(q) }));
            }
            Call::QueueWait(q, s, value) => {
                let mut out = core::mem::MaybeUninit::<CwWaitResult>::uninit();
                check(cw_queue_wait(
                    CwQueue { bits: made.bits(q) },
                    CwSemaphore { bits: made.bits(s) },
                    value,
                    out.as_mut_ptr(),
                ));
            }
            Call::QueueCommit(q, list, f) => {
                let list = signals(made, &list);
                let mut out = core::mem::MaybeUninit::<CwSubmitted>::uninit();
                check(cw_queue_commit(
                    CwQueue { bits: made.bits(q) },
                    list.as_ptr(),
                    list.len(),
                    CwFrontier { bits: made.bits(f) },
                    out.as_mut_ptr(),
                ));
            }
            Call::Retire(list, kind, code) => {
                let list = signals(made, &list);
                check(cw_retire(list.as_ptr(), list.len(), failure(kind, code)));
            }
            Call::DeviceCreate { workers, queues, capacity, semaphores, history } => {
                // One device per input at most: each starts worker threads.
                if !made.devices.is_empty() {
                    return;
                }
                let config = CwDeviceConfig {
                    workers: u32::from(workers % 3),
                    queues: u32::from(queues % 4),
                    queue_capacity: u32::from(capacity % 5),
                    semaphores: u32::from(semaphores % 6),
                    semaphore_history: u32::from(history % 6),
                };
                let mut out = CwDevice { bits: 0 };
                if check(cw_device_create(&config, &mut out)) == CwStatus::Ok {
                    made.handles.push(out.bits);
                    made.devices.push(out.bits);
                }
            }
            Call::DeviceDestroy(d, grace_ms) => {
                let mut report = CwShutdownReport::default();
                // Long enough for idle workers to leave: a shorter grace may abandon one, and the
                // device's memory kept for it would count as a leak.
                let grace = (100 + u64::from(grace_ms)) * 1_000_000;
                check(cw_device_destroy(CwDevice { bits: made.bits(d) }, grace, &mut report));
            }
            Call::DeviceStats(d) => {
                let mut stats = CwDeviceStats::default();
                check(cw_device_query_stats(CwDevice { bits: made.bits(d) }, &mut stats));
            }
            Call::DeviceSemaphoreCreate(d, initial) => {
                let mut out = CwDeviceSemaphore { bits: 0 };
                if check(cw_device_semaphore_create(
                    CwDevice { bits: made.bits(d) },
                    initial,
                    &mut out,
                )) == CwStatus::Ok
                {
                    made.handles.push(out.bits);
                }
            }
            Call::DeviceSemaphoreDestroy(d, s) => {
                check(cw_device_semaphore_destroy(
                    CwDevice { bits: made.bits(d) },
                    CwDeviceSemaphore { bits: made.bits(s) },
                ));
            }
            Call::DeviceSemaphoreValue(d, s) => {
                let mut out = 0;
                check(cw_device_semaphore_value(
                    CwDevice { bits: made.bits(d) },
                    CwDeviceSemaphore { bits: made.bits(s) },
                    &mut out,
                ));
            }
            Call::DeviceSubmit { device, queue, waits, signals, work, timeout_us } => {
                let (waits, signals) = (values(made, &waits), values(made, &signals));
                let (host, user_data): (CwHostFn, *mut c_void) = match work {
                    HostWork::Barrier => (None, core::ptr::null_mut()),
                    HostWork::Succeeds => (Some(host_ok), core::ptr::null_mut()),
                    HostWork::Fails(code) => (Some(host_fails), code as usize as *mut c_void),
                    HostWork::Panics => (Some(host_panics), core::ptr::null_mut()),
                };
                let op = CwOp {
                    waits: waits.as_ptr(),
                    wait_count: waits.len(),
                    signals: signals.as_ptr(),
                    signal_count: signals.len(),
                    host,
                    user_data,
                };
                let device = CwDevice { bits: made.bits(device) };
                let mut receipt = core::mem::MaybeUninit::<CwReceipt>::uninit();
                check(match timeout_us {
                    None => cw_device_try_submit(
                        device,
                        u32::from(queue % 5),
                        &op,
                        receipt.as_mut_ptr(),
                    ),
                    Some(us) => cw_device_submit_timeout(
                        device,
                        u32::from(queue % 5),
                        &op,
                        u64::from(us % 2000) * 1000,
                        receipt.as_mut_ptr(),
                    ),
                });
            }
            Call::DeviceWait(d, s, value, timeout_us) => {
                let mut outcome = CwOutcome { value: 0, failure: failure(0, 0) };
                check(cw_device_wait(
                    CwDevice { bits: made.bits(d) },
                    CwDeviceSemaphore { bits: made.bits(s) },
                    value,
                    u64::from(timeout_us % 2000) * 1000,
                    &mut outcome,
                ));
            }
        }
    }
}

/// What the callbacks that panic on purpose say.
const DELIBERATE: &str = "deliberate panic in a Rust callback";

/// libFuzzer's panic hook aborts on every panic, but a callback's panic is contained by design:
/// only the deliberate ones are let through to be caught; any other still aborts.
fn let_deliberate_panics_unwind() {
    let abort = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&DELIBERATE) {
            abort(info);
        }
    }));
}

fuzz_target!(init: let_deliberate_panics_unwind(), |calls: Vec<Call>| {
    let mut made = Made::default();
    let mut self_handles = Vec::new();
    for call in calls.into_iter().take(64) {
        run(call, &mut made, &mut self_handles);
    }
    // Destroy everything, devices first (their semaphores go with them), timepoints before
    // semaphores (a destroyed timepoint is unlinked), whatever state it is in.
    for &device in &made.devices {
        check(unsafe { cw_device_destroy(CwDevice { bits: device }, 200_000_000, core::ptr::null_mut()) });
    }
    for &bits in &made.handles {
        check(cw_timepoint_destroy(CwTimepoint { bits }));
    }
    for &bits in &made.handles {
        check(cw_frontier_destroy(CwFrontier { bits }));
        check(cw_semaphore_destroy(CwSemaphore { bits }));
        check(cw_queue_destroy(CwQueue { bits }));
    }
});
