//! Failure never teaches, behind the seam. Operation `A` (100 ms of work) signals `s` and `t`;
//! `W`, on another queue `b`, waits on `s`, so queue `b` learns `A`'s point; `s` then fails
//! while `A` still runs; `Z`, next on `b`, waits on `t`, which only `A` signals, and is elided
//! by what `b` learned. `W` must end only after `A` has, so `Z` starts after `A`'s end and
//! finds its work done. Checked with `b` on the CPU driver, on the NPU model waiting natively
//! on CPU work (a WAIT descriptor on the driver's mirror of `A`'s queue progress, which the
//! host writes), and with `A` and `b` both on the NPU model (a WAIT descriptor on `A`'s queue
//! progress, issued before the failure); the failure coming from the host or from an
//! operation that fails. Also through a speculative cancellation: `W` cancelled (it depended on
//! a rejected draft) still ends after `A`, and `Z`, submitted after the cancellation, after it.
//!
//! `A` sets a flag as its last act; `Z` records whether it saw the flag. Without the rule, `Z`
//! runs while `A` sleeps, in every run.
#![cfg(all(feature = "hosted", not(loom)))]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_core::speculation::Rejection;
use causeway_device::{
    Args, Device, DeviceBuilder, DriverId, Op, QueueConfig, QueueId, SemaphoreId, WaitOutcome, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_npu::NpuBackend;
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

/// The hang guard of every host wait: generous, since the test machines are loaded.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// How long `A` works.
const A_WORKS: Duration = Duration::from_millis(100);

/// Where each queue runs.
#[derive(Clone, Copy, Debug)]
enum Placement {
    /// `A` and `b` on CPU queues.
    Cpu,
    /// `A` on a CPU queue, `b` on the NPU model (a native WAIT on its mirror of `A`'s queue).
    NpuWaitingOnCpuWork,
    /// `A` and `b` on NPU queues (a native WAIT on `A`'s queue).
    Npu,
}

/// Where the failure of `s` comes from.
#[derive(Clone, Copy, Debug)]
enum FailedBy {
    Host,
    /// An operation on a third (CPU) queue that signals `s` and fails.
    Operation,
}

/// Flags set by the work: `A` ended; `Z` ran and saw `A` ended.
#[derive(Default)]
struct Seen {
    a_ended: AtomicBool,
    z_ran: AtomicBool,
    z_saw_a_ended: AtomicBool,
}

impl Seen {
    fn a_work(self: &Arc<Self>) -> impl Fn() + Send + Sync + 'static {
        let seen = Arc::clone(self);
        move || {
            std::thread::sleep(A_WORKS);
            seen.a_ended.store(true, Ordering::SeqCst);
        }
    }

    fn z_work(self: &Arc<Self>) -> impl Fn() + Send + Sync + 'static {
        let seen = Arc::clone(self);
        move || {
            seen.z_saw_a_ended.store(seen.a_ended.load(Ordering::SeqCst), Ordering::SeqCst);
            seen.z_ran.store(true, Ordering::SeqCst);
        }
    }
}

fn queue(builder: &mut DeviceBuilder, driver: DriverId) -> QueueId {
    let mut config = QueueConfig::default();
    config.driver = driver;
    builder.queue(config)
}

/// Work that runs `f` on a queue of `driver`: a host function on a CPU queue, a one-tile
/// kernel on the NPU model.
fn work_on(
    builder: &mut DeviceBuilder,
    npu: &mut NpuBackend,
    on_npu: bool,
    f: impl Fn() + Send + Sync + 'static,
) -> Work {
    if on_npu {
        let kernel =
            npu.command_buffer(vec![(1, Box::new(move |_tile: u32, _: &Args| f()))]).unwrap();
        Work::Execute(kernel)
    } else {
        Work::Host(builder.host_call(move |_| {
            f();
            Ok(())
        }))
    }
}

fn elided_wait_after_a_failed_waiter(placement: Placement, failed_by: FailedBy) {
    let seen = Arc::new(Seen::default());
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let mut npu_backend = NpuBackend::new();
    let (a_on_npu, b_on_npu) = match placement {
        Placement::Cpu => (false, false),
        Placement::NpuWaitingOnCpuWork => (false, true),
        Placement::Npu => (true, true),
    };
    let a_work = work_on(&mut builder, &mut npu_backend, a_on_npu, seen.a_work());
    let z_work = work_on(&mut builder, &mut npu_backend, b_on_npu, seen.z_work());
    // A kernel where it can be (a barrier's waits are the host's on every driver).
    let w_work = work_on(&mut builder, &mut npu_backend, b_on_npu, || {});
    let failing = builder.host_call(|_| Err(Failure::Application(9)));
    let cpu = builder.driver(CpuBackend::new());
    let npu = builder.driver(npu_backend);
    let on = |on_npu: bool| if on_npu { npu } else { cpu };
    let a = queue(&mut builder, on(a_on_npu));
    let b = queue(&mut builder, on(b_on_npu));
    let c = queue(&mut builder, cpu);
    let home = builder.endpoint(a).unwrap();
    let [s, t, marker, gate] = [(); 4].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let device = builder.build().unwrap();
    let submit = |queue, waits: &[(SemaphoreId, u64)], signals: &[(SemaphoreId, u64)], work| {
        device.submit(queue, &Op { waits, signals, work, tag: 0, ..Default::default() }).unwrap()
    };

    submit(a, &[], &[(s, 1), (t, 1)], a_work);
    // Queue `b` starts behind a gate, so the failure comes before `W` reaches the device (on
    // NPU queues a native wait is otherwise issued at once, and its origin's retirement
    // awaited at poll).
    submit(b, &[(gate, 1)], &[], Work::Barrier);
    let w = submit(b, &[(s, 1)], &[], w_work);
    // A timepoint on the CPU, a WAIT descriptor on a mirror or on `A`'s queue progress.
    assert!(
        matches!(w.waits[0], WaitOutcome::Resolved(r) if r.resolution == Resolution::DeviceWait),
        "{placement:?}: W waits for A: {:?}",
        w.waits[0]
    );
    match failed_by {
        FailedBy::Host => {
            device.semaphore(s).unwrap().fail(Failure::Application(9));
        }
        FailedBy::Operation => {
            submit(c, &[], &[(s, 2)], Work::Host(failing));
        }
    }
    let z = submit(b, &[(t, 1)], &[], z_work);
    assert!(
        matches!(z.waits[0], WaitOutcome::Resolved(r) if r.resolution == Resolution::Elided),
        "{placement:?}: Z's wait is elided by what W imported: {:?}",
        z.waits[0]
    );
    submit(b, &[], &[(marker, 1)], Work::Barrier);
    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    assert_eq!(wait(device.semaphore(marker).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    assert!(seen.z_ran.load(Ordering::SeqCst), "{placement:?} {failed_by:?}: Z ran");
    assert!(
        seen.z_saw_a_ended.load(Ordering::SeqCst),
        "{placement:?} {failed_by:?}: Z started before A ended"
    );
    assert_eq!(
        wait(device.semaphore(s).unwrap(), 1, Some(HANG_GUARD)),
        Err(HostWaitError::Failed(Failure::Application(9)))
    );
    assert_eq!(wait(device.semaphore(t).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
}

#[test]
fn a_failed_waiter_ends_after_what_it_imported_on_cpu_queues() {
    elided_wait_after_a_failed_waiter(Placement::Cpu, FailedBy::Host);
    elided_wait_after_a_failed_waiter(Placement::Cpu, FailedBy::Operation);
}

#[test]
fn a_failed_waiter_ends_after_what_it_imported_on_an_npu_queue_waiting_natively_on_cpu_work() {
    elided_wait_after_a_failed_waiter(Placement::NpuWaitingOnCpuWork, FailedBy::Host);
    elided_wait_after_a_failed_waiter(Placement::NpuWaitingOnCpuWork, FailedBy::Operation);
}

#[test]
fn a_failed_native_waiter_ends_after_its_origin_on_npu_queues() {
    elided_wait_after_a_failed_waiter(Placement::Npu, FailedBy::Host);
    elided_wait_after_a_failed_waiter(Placement::Npu, FailedBy::Operation);
}

/// `W` waits on `A`'s `s` and on a draft `D` (held behind a gate, so it has not run); the draft
/// is rejected: `W` is cancelled, but ends only after `A`; `Z`, submitted after the
/// cancellation (the walk never saw it), is elided on `A`'s `t` by what `W` imported, and runs
/// after `A`.
#[test]
fn a_cancelled_waiter_ends_after_what_it_imported() {
    let seen = Arc::new(Seen::default());
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let a_work = Work::Host(builder.host_call({
        let work = seen.a_work();
        move |_| {
            work();
            Ok(())
        }
    }));
    let z_work = Work::Host(builder.host_call({
        let work = seen.z_work();
        move |_| {
            work();
            Ok(())
        }
    }));
    let cpu = builder.driver(CpuBackend::new());
    let [a, draft, b] = [(); 3].map(|()| queue(&mut builder, cpu));
    let home = builder.endpoint(a).unwrap();
    let [s, t, gate, drafted, done] =
        [(); 5].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let device = builder.build().unwrap();
    let submit = |queue, waits: &[(SemaphoreId, u64)], signals: &[(SemaphoreId, u64)], work| {
        device.submit(queue, &Op { waits, signals, work, tag: 0, ..Default::default() }).unwrap()
    };
    submit(a, &[], &[(s, 1), (t, 1)], a_work);
    submit(draft, &[(gate, 1)], &[(drafted, 1)], Work::Barrier);
    submit(b, &[(s, 1), (drafted, 1)], &[], Work::Barrier);
    let report = device.cancel_speculative(Rejection::new(device.axis(draft).unwrap(), 0));
    assert_eq!(report.cancelled, 2, "the draft and W");
    let z = submit(b, &[(t, 1)], &[(done, 1)], z_work);
    assert!(matches!(z.waits[0], WaitOutcome::Resolved(r) if r.resolution == Resolution::Elided));
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    assert!(seen.z_saw_a_ended.load(Ordering::SeqCst), "Z started before A ended");
}
