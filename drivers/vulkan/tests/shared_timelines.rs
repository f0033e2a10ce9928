//! Timeline semaphores shared between causeway and an application that lends its own device
//! (`Gpu::from_raw_handles`), with the application's own `ash` set-up as in `caller_owned.rs`:
//! validation with synchronization validation, and its own messenger, which must hear nothing
//! (not even a leaked object when the test destroys the device).
//!
//! - An application's timeline, imported (`ImportedTimeline`): its host signals end a causeway
//!   wait on a CPU queue, which is never elided; a wait submitted after the value arrived is
//!   reported tainted (an external signal carries no frontier).
//! - A causeway semaphore, exported (`ExportedTimeline`): the application's `vkWaitSemaphores`
//!   on the exported `VkSemaphore` sees the value causeway's operations reach.
//! - A failure of the exported semaphore: the `VkSemaphore` stays at the last value reached
//!   and the export reports the failure.
//! - An import whose causeway semaphore failed stops and reports the failure.
//! - Drop order: imports and exports dropped while their threads wait, then the causeway
//!   device, then the application's objects; nothing leaks.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ash::vk;
use causeway_core::queue::{Resolution, WaitResolution};
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{Device, Op, QueueConfig, QueueId, SemaphoreId, WaitOutcome, Work};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_vulkan::{ExportedTimeline, Gpu, ImportedTimeline, VulkanError};
use causeway_runtime::blocking::wait;
use causeway_runtime::PoolConfig;
use common::app::AppVulkan;
use common::HANG_GUARD;

/// The application's own calls on its semaphores.
impl AppVulkan {
    /// A timeline semaphore of the application's, at `initial`.
    fn timeline(&self, initial: u64) -> vk::Semaphore {
        let mut kind = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(initial);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut kind);
        // SAFETY: the device is alive with timeline semaphores; `info` lives across the call.
        unsafe { self.device.create_semaphore(&info, None) }.expect("vkCreateSemaphore")
    }

    /// Signals `semaphore` to `value` from the host, as the application would.
    fn signal(&self, semaphore: vk::Semaphore, value: u64) {
        let info = vk::SemaphoreSignalInfo::default().semaphore(semaphore).value(value);
        // SAFETY: a live timeline semaphore of the device, `value` above its current one and
        // nothing pending on it.
        unsafe { self.device.signal_semaphore(&info) }.expect("vkSignalSemaphore");
    }

    /// Waits on the host for `semaphore` to reach `value`: whether it did within `timeout`.
    fn wait(&self, semaphore: vk::Semaphore, value: u64, timeout: Duration) -> bool {
        let (semaphores, values) = ([semaphore], [value]);
        let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        // SAFETY: a live timeline semaphore of the device; the arrays live across the call.
        match unsafe { self.device.wait_semaphores(&info, timeout.as_nanos() as u64) } {
            Ok(()) => true,
            Err(vk::Result::TIMEOUT) => false,
            Err(error) => panic!("vkWaitSemaphores: {error}"),
        }
    }

    /// The value of `semaphore`.
    fn value(&self, semaphore: vk::Semaphore) -> u64 {
        // SAFETY: a live timeline semaphore of the device.
        unsafe { self.device.get_semaphore_counter_value(semaphore) }
            .expect("vkGetSemaphoreCounterValue")
    }

    /// Destroys the application's own `semaphore`.
    ///
    /// Nothing may use it any more: no import follows it, no submission waits on it.
    fn destroy_timeline(&self, semaphore: vk::Semaphore) {
        // SAFETY: the device's semaphore, unused from now on (the caller's word).
        unsafe { self.device.destroy_semaphore(semaphore, None) };
    }
}

/// Polls `condition` until it holds, failing the test after [`HANG_GUARD`].
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_GUARD;
    while !condition() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A causeway device on one CPU queue with `semaphores` semaphores at 0, the host calls
/// `calls` registered first; shared so that imports and exports can hold it.
fn cpu_device(
    semaphores: usize,
    calls: Vec<causeway_device::HostCall>,
) -> (Arc<Device>, QueueId, Vec<SemaphoreId>, Vec<causeway_device::HostCallId>) {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let queue = builder.queue(QueueConfig::on(cpu));
    let home = builder.endpoint(queue).unwrap();
    let ids = (0..semaphores).map(|_| builder.semaphore(0, Scope::DeviceLocal, home)).collect();
    let calls = calls.into_iter().map(|call| builder.host_call(call)).collect();
    (Arc::new(builder.build().unwrap()), queue, ids, calls)
}

/// Shuts `device` down once nothing else holds it (imports and exports dropped).
fn shut_down(device: Arc<Device>) {
    let Ok(device) = Arc::try_unwrap(device) else { panic!("the device is still shared") };
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

/// How the application moves its own timeline: from the host or from its own submission.
#[derive(Clone, Copy)]
enum AppSignal {
    /// `vkSignalSemaphore`.
    Host,
    /// A batch of its own on the lent queue (inside `with_queue`) that only signals.
    Device,
}

impl AppSignal {
    fn signal(self, app: &AppVulkan, gpu: &Gpu, semaphore: vk::Semaphore, value: u64) {
        match self {
            AppSignal::Host => app.signal(semaphore, value),
            AppSignal::Device => {
                let signals = [vk::SemaphoreSubmitInfo::default()
                    .semaphore(semaphore)
                    .value(value)
                    .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)];
                let submits = [vk::SubmitInfo2::default().signal_semaphore_infos(&signals)];
                // SAFETY: the lent queue, under causeway's lock for it; a live timeline
                // semaphore of the device, `value` above every earlier signal of it; the arrays
                // live across the call.
                let submitted = gpu.with_queue(0, |queue| unsafe {
                    app.device.queue_submit2(queue, &submits, vk::Fence::null())
                });
                assert_eq!(submitted, Ok(Ok(())));
            }
        }
    }
}

/// The application signals its timeline — imported into a causeway semaphore — to 1, then 2,
/// `how` it says. A causeway operation on a CPU queue waiting for 2, submitted before, is held
/// (not elided, not tainted: nothing reached the value yet) and runs only after 2; one
/// submitted after is satisfied and tainted, never elided. The import then goes, leaving the
/// application's semaphore to it.
fn an_imported_timeline_ends_a_causeway_wait(app: AppVulkan, how: AppSignal) {
    let gpu = app.lend();
    let raw = app.timeline(0);
    let ran = Arc::new(AtomicBool::new(false));
    let ran_seen = Arc::clone(&ran);
    let record: causeway_device::HostCall = Box::new(move |_: &causeway_device::Invocation| {
        // Release pairs with the Acquire loads below: what the operation did is seen with it.
        ran_seen.store(true, Ordering::Release);
        Ok(())
    });
    let (device, queue, semaphores, calls) = cpu_device(2, vec![record]);
    let (imported, done) = (semaphores[0], semaphores[1]);
    // SAFETY: `raw` is the application's timeline semaphore on the lent device; it is
    // destroyed below only after the import is dropped, and signalled with rising values.
    let import = unsafe { ImportedTimeline::new(&gpu, raw, Arc::clone(&device), imported) }
        .unwrap_or_else(|error| panic!("cannot import: {error}"));
    assert_eq!(import.raw(), raw);

    // Submitted before the value exists: held (nothing tracked will signal it), not elided.
    let early = Op {
        waits: &[(imported, 2)],
        signals: &[(done, 1)],
        work: Work::Host(calls[0]),
        tag: 1,
        ..Default::default()
    };
    let receipt = device.submit(queue, &early).unwrap();
    assert_eq!(receipt.failure, None);
    match receipt.waits.as_slice() {
        [WaitOutcome::Resolved(resolved)] => {
            assert_ne!(resolved.resolution, Resolution::Elided);
            assert!(!resolved.tainted, "nothing reached the value yet: {resolved:?}");
        }
        other => panic!("one resolved wait: {other:?}"),
    }

    how.signal(&app, &gpu, raw, 1);
    eventually("the import passes 1 on", || import.state() == Ok(1));
    let causeway_semaphore = device.semaphore(imported).unwrap();
    assert_eq!(causeway_semaphore.value(), 1);
    assert!(!ran.load(Ordering::Acquire), "the operation ran before the value it waits for");

    how.signal(&app, &gpu, raw, 2);
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    assert!(ran.load(Ordering::Acquire));
    // The import records a value once `signal_external` returned, just after waiters may end.
    eventually("the import reports 2", || import.state() == Ok(2));

    // Submitted after the external signal reached the value: satisfied, tainted, not elided.
    let late = Op {
        waits: &[(imported, 2)],
        signals: &[(done, 2)],
        work: Work::Host(calls[0]),
        tag: 2,
        ..Default::default()
    };
    let receipt = device.submit(queue, &late).unwrap();
    assert_eq!(receipt.failure, None);
    assert_eq!(
        receipt.waits.as_slice(),
        [WaitOutcome::Resolved(WaitResolution {
            resolution: Resolution::Satisfied,
            tainted: true,
            aged_out: false,
        })]
    );
    assert_eq!(wait(device.semaphore(done).unwrap(), 2, Some(HANG_GUARD)), Ok(2));
    let counts = device.resolution_counts(queue).unwrap();
    assert_eq!((counts.elided, counts.tainted), (0, 1), "{counts:?}");

    drop(import);
    // The application's semaphore is still its own: untouched, and signalled on.
    assert_eq!(app.value(raw), 2);
    how.signal(&app, &gpu, raw, 3);
    // SAFETY: the lent queue, under causeway's lock for it.
    let idle = gpu.with_queue(0, |queue| unsafe { app.device.queue_wait_idle(queue) });
    assert_eq!(idle, Ok(Ok(())));
    assert_eq!(app.value(raw), 3);
    shut_down(device);
    app.destroy_timeline(raw);
    drop(gpu);
    app.destroy_clean();
}

/// The application's own submissions signal its timeline; validation on.
#[test]
fn an_imported_timeline_signalled_by_the_applications_submissions_ends_a_causeway_wait() {
    an_imported_timeline_ends_a_causeway_wait(
        AppVulkan::create(vk::API_VERSION_1_3, true),
        AppSignal::Device,
    );
}

/// The application signals its timeline from the host. Without validation: the import's
/// thread waits on the host for the value, and a host wait that a host signal of the same
/// timeline ends while that signal's call has not yet returned at times stalls the validation
/// layer 1.3.239 for seconds and ends in `UNASSIGNED-VkSemaphore-state-timeout` ("most likely a
/// validation bug", KhronosGroup/Vulkan-ValidationLayers#4649): 4 runs in 40 of this test with
/// validation on. A query instead of the wait meets the same bug, only less often.
#[test]
fn an_imported_timeline_signalled_from_the_host_ends_a_causeway_wait() {
    an_imported_timeline_ends_a_causeway_wait(
        AppVulkan::create(vk::API_VERSION_1_3, false),
        AppSignal::Host,
    );
}

#[test]
fn the_application_waits_on_an_exported_timeline_for_what_causeway_signalled() {
    const N: u64 = 5;
    let app = AppVulkan::create(vk::API_VERSION_1_3, true);
    let gpu = app.lend();
    let step: causeway_device::HostCall = Box::new(|_: &causeway_device::Invocation| Ok(()));
    let (device, queue, semaphores, calls) = cpu_device(1, vec![step]);
    let counted = semaphores[0];
    let export = ExportedTimeline::new(&gpu, Arc::clone(&device), counted)
        .unwrap_or_else(|error| panic!("cannot export: {error}"));
    assert_eq!(export.state(), Ok(0));

    for value in 1..=N {
        let signals = [(counted, value)];
        let op = Op {
            waits: &[],
            signals: &signals,
            work: Work::Host(calls[0]),
            tag: value,
            ..Default::default()
        };
        assert_eq!(device.submit(queue, &op).unwrap().failure, None);
    }
    // The export records a value once its `vkSignalSemaphore` returned: the application's
    // wait then meets no host signal in flight, which the validation layer 1.3.239 misreports
    // (see `the_applications_blocking_wait_ends_when_the_export_signals`).
    eventually("the export reports N", || export.state() == Ok(N));
    assert!(app.wait(export.raw(), N, Duration::ZERO), "the exported timeline is not at {N}");
    assert_eq!(app.value(export.raw()), N);

    drop(export);
    shut_down(device);
    drop(gpu);
    app.destroy_clean();
}

/// The application blocks in `vkWaitSemaphores` on the exported semaphore before causeway
/// reaches the value, and the export's host signal ends the wait. Without validation: a host
/// wait that a host signal of the same timeline ends, while that signal's call has not yet
/// returned, at times stalls the validation layer 1.3.239 for seconds and ends in
/// `UNASSIGNED-VkSemaphore-state-timeout` ("most likely a validation bug",
/// KhronosGroup/Vulkan-ValidationLayers#4649; 5 runs in 40 of the test above when it waited so).
#[test]
fn the_applications_blocking_wait_ends_when_the_export_signals() {
    let app = AppVulkan::create(vk::API_VERSION_1_3, false);
    let gpu = app.lend();
    let gate = Arc::new(AtomicBool::new(false));
    let gate_seen = Arc::clone(&gate);
    // Runs once the application is blocked (give or take the scheduler: either way the wait
    // ends on the export's signal, never before it).
    let step: causeway_device::HostCall = Box::new(move |_: &causeway_device::Invocation| {
        // Acquire pairs with the opener's Release store.
        while !gate_seen.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    });
    let (device, queue, semaphores, calls) = cpu_device(1, vec![step]);
    let counted = semaphores[0];
    let export = ExportedTimeline::new(&gpu, Arc::clone(&device), counted)
        .unwrap_or_else(|error| panic!("cannot export: {error}"));
    let op = Op {
        waits: &[],
        signals: &[(counted, 1)],
        work: Work::Host(calls[0]),
        tag: 1,
        ..Default::default()
    };
    assert_eq!(device.submit(queue, &op).unwrap().failure, None);
    let opener = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        // Release pairs with the step's Acquire load.
        gate.store(true, Ordering::Release);
    });
    assert!(app.wait(export.raw(), 1, HANG_GUARD), "the exported timeline never reached 1");
    opener.join().unwrap();
    eventually("the export reports 1", || export.state() == Ok(1));

    drop(export);
    shut_down(device);
    drop(gpu);
    app.destroy_clean();
}

#[test]
fn an_exported_timeline_whose_semaphore_fails_stays_at_its_last_value_and_reports_the_failure() {
    let app = AppVulkan::create(vk::API_VERSION_1_3, true);
    let gpu = app.lend();
    let ok: causeway_device::HostCall = Box::new(|_: &causeway_device::Invocation| Ok(()));
    let fail: causeway_device::HostCall =
        Box::new(|_: &causeway_device::Invocation| Err(Failure::Application(7)));
    let (device, queue, semaphores, calls) = cpu_device(1, vec![ok, fail]);
    let failing = semaphores[0];
    let export = ExportedTimeline::new(&gpu, Arc::clone(&device), failing)
        .unwrap_or_else(|error| panic!("cannot export: {error}"));

    let first = Op {
        waits: &[],
        signals: &[(failing, 1)],
        work: Work::Host(calls[0]),
        tag: 1,
        ..Default::default()
    };
    assert_eq!(device.submit(queue, &first).unwrap().failure, None);
    let second = Op {
        waits: &[],
        signals: &[(failing, 2)],
        work: Work::Host(calls[1]),
        tag: 2,
        ..Default::default()
    };
    assert_eq!(device.submit(queue, &second).unwrap().failure, None);

    let failed = Err(VulkanError::SemaphoreFailed(Failure::Application(7)));
    eventually("the export reports the failure", || export.state() == failed);
    // The value reached before the failure was mirrored; nothing after it ever is.
    assert!(app.wait(export.raw(), 1, HANG_GUARD));
    assert!(!app.wait(export.raw(), 2, Duration::from_millis(50)));
    assert_eq!(app.value(export.raw()), 1);

    drop(export);
    shut_down(device);
    drop(gpu);
    app.destroy_clean();
}

/// A value the application's timeline had before the import is passed on at once; once the
/// causeway semaphore fails, the next value stops the import, which reports the failure.
#[test]
fn an_import_whose_causeway_semaphore_failed_stops_and_reports_it() {
    let app = AppVulkan::create(vk::API_VERSION_1_3, true);
    let gpu = app.lend();
    let (device, _, semaphores, _) = cpu_device(1, Vec::new());
    let raw = app.timeline(1);
    // SAFETY: as in the import test: the application's timeline, destroyed after the import.
    let import = unsafe { ImportedTimeline::new(&gpu, raw, Arc::clone(&device), semaphores[0]) }
        .unwrap_or_else(|error| panic!("cannot import: {error}"));
    eventually("the import passes the initial 1 on", || import.state() == Ok(1));
    let causeway_semaphore = device.semaphore(semaphores[0]).unwrap();
    assert_eq!(causeway_semaphore.value(), 1);

    assert!(causeway_semaphore.fail(Failure::Aborted));
    AppSignal::Device.signal(&app, &gpu, raw, 2);
    let failed = Err(VulkanError::SemaphoreFailed(Failure::Aborted));
    eventually("the import reports the failure", || import.state() == failed);
    assert_eq!(causeway_semaphore.value(), 1);

    drop(import);
    shut_down(device);
    // SAFETY: the lent queue, under causeway's lock for it.
    let idle = gpu.with_queue(0, |queue| unsafe { app.device.queue_wait_idle(queue) });
    assert_eq!(idle, Ok(Ok(())));
    app.destroy_timeline(raw);
    drop(gpu);
    app.destroy_clean();
}

#[test]
fn imports_and_exports_dropped_while_waiting_then_the_device_leave_nothing_behind() {
    let app = AppVulkan::create(vk::API_VERSION_1_3, true);
    let gpu = app.lend();
    let (device, _, semaphores, _) = cpu_device(2, Vec::new());
    let raw = app.timeline(0);
    // SAFETY: as in the import test: the application's timeline, destroyed after the import.
    let import = unsafe { ImportedTimeline::new(&gpu, raw, Arc::clone(&device), semaphores[0]) }
        .unwrap_or_else(|error| panic!("cannot import: {error}"));
    let export = ExportedTimeline::new(&gpu, Arc::clone(&device), semaphores[1])
        .unwrap_or_else(|error| panic!("cannot export: {error}"));
    // Both threads are waiting now (nothing is ever signalled): a drop stops them there.
    std::thread::sleep(Duration::from_millis(50));
    // The drops return (their threads stop while waiting): guarded, not timed.
    let (dropped, dropped_seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(import);
        drop(export);
        let _ = dropped.send(());
    });
    assert_eq!(dropped_seen.recv_timeout(HANG_GUARD), Ok(()), "dropping them never returned");
    assert_eq!(app.value(raw), 0, "the import never signals the application's semaphore");
    assert_eq!(device.semaphore(semaphores[0]).unwrap().value(), 0);
    shut_down(device);
    app.destroy_timeline(raw);
    drop(gpu);
    app.destroy_clean();
}

#[test]
fn a_semaphore_the_device_does_not_have_is_a_typed_error() {
    let app = AppVulkan::create(vk::API_VERSION_1_3, true);
    let gpu = app.lend();
    let (small, _, _, _) = cpu_device(1, Vec::new());
    let (large, _, semaphores, _) = cpu_device(2, Vec::new());
    let missing = semaphores[1];
    let refused = ExportedTimeline::new(&gpu, Arc::clone(&small), missing);
    assert_eq!(refused.unwrap_err(), VulkanError::NoSuchSemaphore(missing));
    let raw = app.timeline(0);
    // SAFETY: as in the import test; refused before any thread starts.
    let refused = unsafe { ImportedTimeline::new(&gpu, raw, Arc::clone(&small), missing) };
    assert_eq!(refused.unwrap_err(), VulkanError::NoSuchSemaphore(missing));
    shut_down(small);
    shut_down(large);
    app.destroy_timeline(raw);
    drop(gpu);
    app.destroy_clean();
}
