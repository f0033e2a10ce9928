//! Bad input the C program in `tests/c/hosted.c` cannot make: callbacks written in Rust that
//! panic (an `extern "C-unwind"` callback may unwind into causeway, which contains it), a
//! callback that destroys its own timepoint or its own device, and a device destroyed while
//! another thread waits on it. Each gets a code and a message; nothing hangs.

use core::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use causeway_capi::device::*;
use causeway_capi::semaphore::*;
use causeway_capi::types::*;
use causeway_capi::{cw_last_error_message, CwStatus};

fn message() -> String {
    // SAFETY: the thread's NUL-terminated last-error buffer.
    unsafe { CStr::from_ptr(cw_last_error_message()) }.to_string_lossy().into_owned()
}

const NO_FAILURE: CwFailure = CwFailure { kind: CwFailureKind::None as u32, code: 0 };

extern "C-unwind" fn panicking_timepoint(_: *mut c_void, _: CwOutcome) {
    panic!("a timepoint callback written in Rust panics");
}

extern "C-unwind" fn destroy_own_timepoint(user_data: *mut c_void, _: CwOutcome) {
    // SAFETY: the test passes a pointer to an `AtomicU64` that outlives the timepoint.
    let own = unsafe { &*user_data.cast::<AtomicU64>() };
    let status = cw_timepoint_destroy(CwTimepoint { bits: own.load(Ordering::SeqCst) });
    own.store(status as u64, Ordering::SeqCst);
}

fn semaphore(initial: u64) -> CwSemaphore {
    let mut semaphore = CwSemaphore { bits: 0 };
    // SAFETY: a valid output pointer.
    assert_eq!(unsafe { cw_semaphore_create(initial, &mut semaphore) }, CwStatus::Ok);
    semaphore
}

fn armed(
    callback: CwTimepointFn,
    user_data: *mut c_void,
    on: CwSemaphore,
    value: u64,
) -> CwTimepoint {
    let mut timepoint = CwTimepoint { bits: 0 };
    let mut arm = CwArm { armed: false, outcome: CwOutcome { value: 0, failure: NO_FAILURE } };
    // SAFETY: valid output pointers.
    unsafe {
        assert_eq!(cw_timepoint_create(callback, user_data, &mut timepoint), CwStatus::Ok);
        assert_eq!(cw_timepoint_arm(timepoint, on, value, &mut arm), CwStatus::Ok);
    }
    assert!(arm.armed);
    timepoint
}

#[test]
fn a_panicking_timepoint_callback_is_contained_and_reported() {
    let s = semaphore(0);
    let timepoint = armed(Some(panicking_timepoint), core::ptr::null_mut(), s, 1);
    assert_eq!(cw_semaphore_signal_external(s, 1), CwStatus::CallbackPanicked);
    assert!(message().contains("callback"), "{}", message());
    // The signal took effect, and the semaphore and the timepoint are usable.
    let mut value = 0;
    // SAFETY: valid output pointers.
    unsafe {
        assert_eq!(cw_semaphore_value(s, &mut value), CwStatus::Ok);
        let mut cancel = CwCancel::NotArmed;
        assert_eq!(cw_timepoint_cancel(timepoint, &mut cancel), CwStatus::Ok);
        assert_eq!(cancel, CwCancel::AlreadyFired);
    }
    assert_eq!(value, 1);
    assert_eq!(cw_semaphore_signal_external(s, 2), CwStatus::Ok, "no panic is left over");
    assert_eq!(cw_timepoint_destroy(timepoint), CwStatus::Ok);
    assert_eq!(cw_semaphore_destroy(s), CwStatus::Ok);
}

#[test]
fn a_callback_that_destroys_its_own_timepoint_is_refused_not_deadlocked() {
    let s = semaphore(0);
    let own = AtomicU64::new(0);
    let user_data = (&own as *const AtomicU64).cast_mut().cast::<c_void>();
    let timepoint = armed(Some(destroy_own_timepoint), user_data, s, 1);
    own.store(timepoint.bits, Ordering::SeqCst);
    assert_eq!(cw_semaphore_signal_external(s, 1), CwStatus::Ok);
    assert_eq!(own.load(Ordering::SeqCst), CwStatus::Busy as u64);
    // Outside the callback it goes.
    assert_eq!(cw_timepoint_destroy(timepoint), CwStatus::Ok);
    assert_eq!(cw_semaphore_destroy(s), CwStatus::Ok);
}

#[test]
fn destroying_a_semaphore_tells_its_armed_timepoints_and_keeps_them_safe() {
    extern "C-unwind" fn record(user_data: *mut c_void, outcome: CwOutcome) {
        // SAFETY: the test passes a pointer to an `AtomicU64` that outlives the timepoint.
        unsafe { &*user_data.cast::<AtomicU64>() }
            .store(u64::from(outcome.failure.kind), Ordering::SeqCst);
    }
    let s = semaphore(0);
    let seen = AtomicU64::new(u64::MAX);
    let timepoint = armed(Some(record), (&seen as *const AtomicU64).cast_mut().cast(), s, 5);
    assert_eq!(cw_semaphore_destroy(s), CwStatus::Ok);
    assert_eq!(seen.load(Ordering::SeqCst), CwFailureKind::Cancelled as u64);
    assert_eq!(cw_semaphore_signal_external(s, 1), CwStatus::StaleHandle);
    // The slot is free again, and the old timepoint no longer refers to it.
    let reused = semaphore(0);
    assert_eq!(cw_timepoint_destroy(timepoint), CwStatus::Ok);
    assert_eq!(cw_semaphore_destroy(reused), CwStatus::Ok);
}

fn device(queue_capacity: u32) -> CwDevice {
    let config = CwDeviceConfig {
        workers: 2,
        queues: 1,
        queue_capacity,
        semaphores: 4,
        semaphore_history: 4,
    };
    let mut device = CwDevice { bits: 0 };
    // SAFETY: valid pointers.
    assert_eq!(unsafe { cw_device_create(&config, &mut device) }, CwStatus::Ok, "{}", message());
    device
}

fn device_semaphore(device: CwDevice) -> CwDeviceSemaphore {
    let mut semaphore = CwDeviceSemaphore { bits: 0 };
    // SAFETY: a valid output pointer.
    assert_eq!(unsafe { cw_device_semaphore_create(device, 0, &mut semaphore) }, CwStatus::Ok);
    semaphore
}

fn submit(
    device: CwDevice,
    waits: &[CwDeviceValue],
    signals: &[CwDeviceValue],
    host: CwHostFn,
) -> CwStatus {
    let op = CwOp {
        waits: waits.as_ptr(),
        wait_count: waits.len(),
        signals: signals.as_ptr(),
        signal_count: signals.len(),
        host,
        user_data: core::ptr::null_mut(),
    };
    let mut receipt = core::mem::MaybeUninit::<CwReceipt>::uninit();
    // SAFETY: valid pointers, counts matching their arrays.
    unsafe { cw_device_submit_timeout(device, 0, &op, 5_000_000_000, receipt.as_mut_ptr()) }
}

fn wait(device: CwDevice, semaphore: CwDeviceSemaphore, value: u64) -> (CwStatus, CwOutcome) {
    let mut outcome = CwOutcome { value: 0, failure: NO_FAILURE };
    // SAFETY: a valid output pointer.
    let status = unsafe { cw_device_wait(device, semaphore, value, 5_000_000_000, &mut outcome) };
    (status, outcome)
}

extern "C-unwind" fn panicking_host(_: *mut c_void) -> u32 {
    panic!("a host callback written in Rust panics");
}

extern "C-unwind" fn succeeding_host(_: *mut c_void) -> u32 {
    0
}

#[test]
fn a_panicking_host_callback_fails_its_operation_and_its_waiters_and_the_device_goes_on() {
    let dev = device(4);
    let (s, t) = (device_semaphore(dev), device_semaphore(dev));
    let s1 = CwDeviceValue { semaphore: s, value: 1 };
    let t1 = CwDeviceValue { semaphore: t, value: 1 };
    assert_eq!(submit(dev, &[], &[s1], Some(panicking_host)), CwStatus::Ok);
    assert_eq!(submit(dev, &[s1], &[t1], Some(succeeding_host)), CwStatus::Ok);
    let (status, outcome) = wait(dev, t, 1);
    assert_eq!(status, CwStatus::Failed);
    assert_eq!(outcome.failure.kind, CwFailureKind::Faulted as u32);
    assert_eq!(outcome.failure.code, CW_PANIC_CODE);
    // The device still runs work.
    let u = device_semaphore(dev);
    let u1 = CwDeviceValue { semaphore: u, value: 1 };
    assert_eq!(submit(dev, &[], &[u1], Some(succeeding_host)), CwStatus::Ok);
    assert_eq!(wait(dev, u, 1).0, CwStatus::Ok);
    let mut stats = CwDeviceStats::default();
    // SAFETY: valid pointers.
    unsafe {
        assert_eq!(cw_device_query_stats(dev, &mut stats), CwStatus::Ok);
        assert_eq!((stats.callbacks_panicked, stats.callbacks_succeeded), (1, 1));
        assert_eq!(cw_device_destroy(dev, 1_000_000_000, core::ptr::null_mut()), CwStatus::Ok);
    }
}

static DESTROY_FROM_CALLBACK: AtomicU64 = AtomicU64::new(0);

extern "C-unwind" fn destroying_host(_: *mut c_void) -> u32 {
    let device = CwDevice { bits: DESTROY_FROM_CALLBACK.load(Ordering::SeqCst) };
    // SAFETY: a NULL report is allowed.
    let status = unsafe { cw_device_destroy(device, 0, core::ptr::null_mut()) };
    status as u32
}

#[test]
fn a_device_is_not_destroyed_from_inside_its_own_callback() {
    let dev = device(4);
    DESTROY_FROM_CALLBACK.store(dev.bits, Ordering::SeqCst);
    let s = device_semaphore(dev);
    let s1 = CwDeviceValue { semaphore: s, value: 1 };
    assert_eq!(submit(dev, &[], &[s1], Some(destroying_host)), CwStatus::Ok);
    // The callback returned the status it got as its failure code.
    let (status, outcome) = wait(dev, s, 1);
    assert_eq!(status, CwStatus::Failed);
    assert_eq!(outcome.failure.code, CwStatus::Busy as u32);
    // SAFETY: a NULL report is allowed.
    let destroyed = unsafe { cw_device_destroy(dev, 1_000_000_000, core::ptr::null_mut()) };
    assert_eq!(destroyed, CwStatus::Ok);
}

#[test]
fn destroying_a_device_ends_a_wait_on_another_thread_within_a_slice() {
    let dev = device(4);
    let s = device_semaphore(dev);
    let waiter = std::thread::spawn(move || {
        let mut outcome = CwOutcome { value: 0, failure: NO_FAILURE };
        // SAFETY: a valid output pointer.
        unsafe { cw_device_wait(dev, s, 1, CW_TIMEOUT_INFINITE, &mut outcome) }
    });
    std::thread::sleep(Duration::from_millis(50));
    let mut report = CwShutdownReport::default();
    // SAFETY: a valid report pointer.
    assert_eq!(unsafe { cw_device_destroy(dev, 1_000_000_000, &mut report) }, CwStatus::Ok);
    assert!(report.shut_down, "the waiter left within a slice, so this call shut it down");
    let status = waiter.join().unwrap();
    assert_eq!(status, CwStatus::ShutDown);
}

#[test]
fn a_blocking_submit_whose_room_waits_for_a_signal_nobody_gave_answers_stalled() {
    let dev = device(1);
    let gate = device_semaphore(dev);
    let gate1 = CwDeviceValue { semaphore: gate, value: 1 };
    assert_eq!(submit(dev, &[gate1], &[], None), CwStatus::Ok);
    let op = CwOp {
        waits: core::ptr::null(),
        wait_count: 0,
        signals: core::ptr::null(),
        signal_count: 0,
        host: None,
        user_data: core::ptr::null_mut(),
    };
    let mut receipt = core::mem::MaybeUninit::<CwReceipt>::uninit();
    // SAFETY: valid pointers, counts matching their (empty) arrays.
    let status = unsafe { cw_device_submit(dev, 0, &op, receipt.as_mut_ptr()) };
    assert_eq!(status, CwStatus::Stalled);
    assert!(message().contains("no submitted operation signals"), "{}", message());
    // A finite timeout waits for room whoever frees it: here nobody, so it times out.
    // SAFETY: as above.
    let timed = unsafe { cw_device_submit_timeout(dev, 0, &op, 20_000_000, receipt.as_mut_ptr()) };
    assert_eq!(timed, CwStatus::TimedOut);
    // SAFETY: a NULL report is allowed.
    let destroyed = unsafe { cw_device_destroy(dev, 1_000_000_000, core::ptr::null_mut()) };
    assert_eq!(destroyed, CwStatus::Ok);
}
