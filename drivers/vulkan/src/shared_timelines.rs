//! Timeline semaphores shared with the application: [`ImportedTimeline`] passes the values of
//! an application's own timeline `VkSemaphore` on to a causeway semaphore, [`ExportedTimeline`]
//! mirrors a causeway semaphore's values into a timeline `VkSemaphore` the application waits on.
//!
//! Both are host-mediated: a thread of their own follows one side and signals the other from
//! the host, so a value crosses with a thread wake-up's latency, not as a native device wait.
//! Neither uses the [`Watcher`](crate::Watcher): it waits only on what causeway submitted
//! through it, reports to the backend's queues by token, and on one VkQueue looks at a value
//! nobody submitted through it only every [`POLL_INTERVAL`](crate::POLL_INTERVAL); a follower
//! must see each value of a semaphore nobody submits through causeway as soon as it is reached,
//! and must not block the watcher's thread (which wakes the backend's queues) while it waits
//! for the application. A thread per shared semaphore costs a thread, and keeps each one's
//! failure its own.
//!
//! The causeway side is a semaphore of a [`Device`], named by its [`SemaphoreId`] and reached
//! through a handle to the device the thread keeps (an `Arc<Device>`, a `&'static Device`):
//! the device cannot be shut down while an import or export follows one of its semaphores, so
//! drop those first. Destroying or resetting the followed semaphore meanwhile is the caller's
//! mistake: the follower would go on with whatever the slot holds next.

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ash::vk;

use causeway_core::semaphore::{Arm, Failure, Notify, Outcome, SignalError};
use causeway_core::unpoisoned::{Condvar, Mutex};
use causeway_device::{Device, SemaphoreId};

use crate::{Gpu, Timeline, VulkanError};

/// How long an import's thread waits on the application's semaphore before it looks whether
/// it was asked to stop: the most a drop of an [`ImportedTimeline`] waits for it. (A stop
/// cannot interrupt the wait: signalling a wake semaphore of causeway's from the host, as the
/// watcher does on several VkQueues, is observed by this very wait, which the validation layer
/// 1.3.239 misreports: see [`Timeline`]'s module documentation.)
const STOP_CHECK: Duration = Duration::from_millis(20);

/// Where a follower stands: the last value it passed on, or why it stopped.
type Progress = Mutex<Result<u64, VulkanError>>;

/// An application's timeline `VkSemaphore` followed into a causeway semaphore: each time its
/// value advances, a thread of the import's signals the causeway semaphore to that value with
/// [`signal_external`](causeway_core::semaphore::Semaphore::signal_external).
///
/// An external signal carries no frontier: a causeway wait on a value it reaches imports
/// nothing, is never elided, and is reported tainted
/// ([`WaitResolution::tainted`](causeway_core::queue::WaitResolution::tainted)) when the value
/// was reached before the wait was submitted. A wait submitted earlier (nothing has reached the
/// value yet) is not elided either, and ends once the import passes the value on.
///
/// Values: the thread waits for the value above the last one it saw and passes on the value it
/// then reads, so values the application sets in quick succession cross as one signal to the
/// highest (a timeline wait for any of them ends alike). A value the causeway semaphore has
/// already reached (another signaller moved it) is skipped. A full history (every slot of the
/// causeway semaphore holds a pending signal) is retried every 20 ms.
///
/// An application that signals its semaphore from the host with the validation layer 1.3.239
/// on may meet that layer's false `UNASSIGNED-VkSemaphore-state-timeout` (the import's thread
/// waits on the host for the value; see `docs/src/caller-owned-devices.md`); signals from its own
/// submissions do not.
///
/// Stopping: [`state`](Self::state) turns to an error and the thread ends when the causeway
/// semaphore fails ([`VulkanError::SemaphoreFailed`]), refuses the signal for another reason
/// ([`VulkanError::ExternalSignalRefused`]), or a Vulkan wait or query of the application's
/// semaphore fails ([`VulkanError::Vk`]); in that last case the causeway semaphore is failed
/// with [`Failure::DeviceLost`], since nothing would ever signal it again and its waiters would
/// wait forever. Dropping the import stops the thread and joins it (within about
/// 20 ms); the application's semaphore is never signalled, waited on by the device,
/// or destroyed by causeway.
pub struct ImportedTimeline {
    shared: Arc<ImportShared>,
    thread: Option<JoinHandle<()>>,
    raw: vk::Semaphore,
}

struct ImportShared {
    stop: AtomicBool,
    progress: Progress,
}

impl ImportedTimeline {
    /// Starts following `raw`, an application's timeline semaphore on `gpu`'s device, into
    /// `device`'s semaphore `semaphore`. A value `raw` has already reached above the causeway
    /// semaphore's is passed on at once.
    ///
    /// Errors: [`VulkanError::NoSuchSemaphore`] when `device` has no semaphore `semaphore`;
    /// [`VulkanError::FollowerThread`] when the thread cannot be started.
    ///
    /// # Safety
    ///
    /// `raw` is a timeline semaphore (`VK_SEMAPHORE_TYPE_TIMELINE`) created on the device `gpu`
    /// uses, and stays alive until the import is dropped (the drop joins the thread, after
    /// which causeway never touches it). The application signals it only as Vulkan allows
    /// (rising values). Vulkan offers no way to check either.
    pub unsafe fn new<D>(
        gpu: &Gpu,
        raw: vk::Semaphore,
        device: D,
        semaphore: SemaphoreId,
    ) -> Result<ImportedTimeline, VulkanError>
    where
        D: Deref<Target = Device> + Send + 'static,
    {
        if device.semaphore(semaphore).is_none() {
            return Err(VulkanError::NoSuchSemaphore(semaphore));
        }
        let shared =
            Arc::new(ImportShared { stop: AtomicBool::new(false), progress: Mutex::new(Ok(0)) });
        let (thread_shared, gpu) = (Arc::clone(&shared), gpu.clone());
        let thread = std::thread::Builder::new()
            .name("causeway-vulkan-import".into())
            .spawn(move || {
                // Checked above; the device's semaphores live as long as the device, which the
                // thread holds.
                let Some(target) = device.semaphore(semaphore) else { return };
                let stopped = follow_import(&gpu, raw, target, &thread_shared);
                *thread_shared.progress.lock() = stopped;
            })
            .map_err(|error| VulkanError::FollowerThread { detail: error.to_string() })?;
        Ok(ImportedTimeline { shared, thread: Some(thread), raw })
    }

    /// The application's semaphore it follows.
    pub fn raw(&self) -> vk::Semaphore {
        self.raw
    }

    /// The last value passed on to the causeway semaphore (0: none yet), or why the import
    /// stopped.
    pub fn state(&self) -> Result<u64, VulkanError> {
        self.shared.progress.lock().clone()
    }
}

/// The import's thread: follows `raw` into `target` until asked to stop (`Ok`, with the last
/// value passed on) or until it cannot go on (the error).
fn follow_import(
    gpu: &Gpu,
    raw: vk::Semaphore,
    target: &causeway_device::DeviceSemaphore,
    shared: &ImportShared,
) -> Result<u64, VulkanError> {
    let device = gpu.device();
    let fail_target = |error: VulkanError| {
        // Nothing will signal the causeway semaphore again: its waiters learn so.
        target.fail(Failure::DeviceLost);
        error
    };
    // SAFETY: `raw` is a live timeline semaphore of this device (the caller's contract in
    // `ImportedTimeline::new`, until the drop joins this thread).
    let mut seen = unsafe { device.get_semaphore_counter_value(raw) }
        .map_err(VulkanError::vk("vkGetSemaphoreCounterValue"))
        .map_err(fail_target)?;
    let mut passed = 0;
    // Relaxed: the flag orders nothing; the drop joins the thread after setting it.
    while !shared.stop.load(Ordering::Relaxed) {
        if seen > target.value() {
            match target.signal_external(seen) {
                Ok(()) => {
                    passed = seen;
                    *shared.progress.lock() = Ok(passed);
                }
                // Another signaller got there first: nothing to pass on.
                Err(SignalError::NotAdvancing { .. }) => {}
                Err(SignalError::HistoryFull { .. }) => {
                    // Room comes when a pending signal completes; try the same value again.
                    std::thread::sleep(STOP_CHECK);
                    continue;
                }
                Err(SignalError::Failed(failure)) => {
                    return Err(VulkanError::SemaphoreFailed(failure))
                }
                Err(refused) => return Err(VulkanError::ExternalSignalRefused(refused)),
            }
        }
        let semaphores = [raw];
        let values = [seen + 1];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        let timeout_ns = STOP_CHECK.as_nanos() as u64;
        // SAFETY: as above; the arrays live across the call. The value is one above the
        // current one, well within maxTimelineSemaphoreValueDifference.
        match unsafe { device.wait_semaphores(&info, timeout_ns) } {
            Ok(()) => {
                // SAFETY: as above.
                seen = unsafe { device.get_semaphore_counter_value(raw) }
                    .map_err(VulkanError::vk("vkGetSemaphoreCounterValue"))
                    .map_err(fail_target)?;
            }
            Err(vk::Result::TIMEOUT) => {}
            Err(result) => {
                return Err(fail_target(VulkanError::Vk { call: "vkWaitSemaphores", result }))
            }
        }
    }
    Ok(passed)
}

impl fmt::Debug for ImportedTimeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImportedTimeline")
            .field("raw", &self.raw)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl Drop for ImportedTimeline {
    /// Stops the thread and joins it: afterwards causeway no longer touches the application's
    /// semaphore.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            // The thread returns within a wait of `STOP_CHECK`; it does not panic on Vulkan's
            // or causeway's errors (it records them), so a join error is nothing to act on.
            let _ = thread.join();
        }
    }
}

/// A causeway semaphore mirrored into a timeline `VkSemaphore` that causeway creates on the
/// device ([`raw`](Self::raw)), for the application to wait on — in its own `vkQueueSubmit2`
/// or with `vkWaitSemaphores`. A thread of the export's waits on the causeway semaphore (a
/// timepoint whose callback only wakes it, so no causeway worker ever waits on Vulkan) and
/// signals the `VkSemaphore` from the host (`vkSignalSemaphore`) to each value the causeway
/// semaphore reaches, in rising order; values reached together cross as one signal to the
/// highest. The `VkSemaphore` starts at the causeway semaphore's value when the export is made.
///
/// The application only waits on it: a signal of its own would break the mirror (the export
/// then stops with [`VulkanError::InvalidHostSignal`]). A host wait of the application's that
/// a signal of the export ends may meet the validation layer 1.3.239's false
/// `UNASSIGNED-VkSemaphore-state-timeout` (see `docs/src/caller-owned-devices.md`); one for a value
/// [`state`](Self::state) already reports does not.
///
/// Failure: a `VkSemaphore` cannot carry one. When a wait of the thread meets a failure of
/// the causeway semaphore, the `VkSemaphore` stays at the last value reached before it (never
/// advanced again: device waits on higher values in the application's submissions never end,
/// so it must bound its waits) and [`state`](Self::state) reports
/// [`VulkanError::SemaphoreFailed`] with the failure: an application whose wait times out
/// asks it. A failed `vkSignalSemaphore` stops the export the same way, with that error.
///
/// Dropping the export stops and joins the thread, then destroys the `VkSemaphore` as a
/// [`Timeline`] is destroyed: after every queue causeway submits to is idle. The application's
/// own work that waits on [`raw`](Self::raw) must have completed by then (work on queues it did
/// not lend to causeway is not waited for; see `Gpu::from_raw_handles`).
pub struct ExportedTimeline {
    shared: Arc<ExportShared>,
    thread: Option<JoinHandle<()>>,
    timeline: Timeline,
}

struct ExportShared {
    wake: ExportWake,
    progress: Progress,
}

/// The export's thread's wake-ups: a timepoint's outcome, or a stop.
struct ExportWake {
    state: Mutex<WakeState>,
    changed: Condvar,
}

#[derive(Default)]
struct WakeState {
    fired: Option<Outcome>,
    stop: bool,
}

impl Notify for ExportWake {
    /// Runs on the thread that reached the value (a causeway worker): records the outcome and
    /// wakes the export's thread, nothing more.
    fn notify(&self, outcome: Outcome) {
        self.state.lock().fired = Some(outcome);
        self.changed.notify_all();
    }

    /// The woken export thread may have preempted this callback's thread: give the core back.
    fn while_firing(&self) {
        std::thread::yield_now();
    }
}

impl ExportedTimeline {
    /// Mirrors `device`'s semaphore `semaphore` into a new timeline `VkSemaphore` on `gpu`.
    ///
    /// Errors: [`VulkanError::NoSuchSemaphore`] when `device` has no semaphore `semaphore`;
    /// a [`VulkanError::Vk`] when the `VkSemaphore` cannot be created;
    /// [`VulkanError::FollowerThread`] when the thread cannot be started.
    pub fn new<D>(
        gpu: &Gpu,
        device: D,
        semaphore: SemaphoreId,
    ) -> Result<ExportedTimeline, VulkanError>
    where
        D: Deref<Target = Device> + Send + 'static,
    {
        let Some(source) = device.semaphore(semaphore) else {
            return Err(VulkanError::NoSuchSemaphore(semaphore));
        };
        let initial = source.value();
        let timeline = Timeline::new(gpu, initial)?;
        let shared = Arc::new(ExportShared {
            wake: ExportWake { state: Mutex::new(WakeState::default()), changed: Condvar::new() },
            progress: Mutex::new(Ok(initial)),
        });
        let (thread_shared, mirror) = (Arc::clone(&shared), timeline.clone());
        let thread = std::thread::Builder::new()
            .name("causeway-vulkan-export".into())
            .spawn(move || {
                // Checked above; the device's semaphores live as long as the device, which the
                // thread holds.
                let Some(source) = device.semaphore(semaphore) else { return };
                if let Err(error) = follow_export(source, &mirror, initial, &thread_shared) {
                    *thread_shared.progress.lock() = Err(error);
                }
            })
            .map_err(|error| VulkanError::FollowerThread { detail: error.to_string() })?;
        Ok(ExportedTimeline { shared, thread: Some(thread), timeline })
    }

    /// The timeline `VkSemaphore` to wait on. Causeway destroys it when the export is dropped.
    pub fn raw(&self) -> vk::Semaphore {
        self.timeline.raw()
    }

    /// The last value signalled on [`raw`](Self::raw) (its value when the export was made,
    /// before any), or why the export stopped.
    pub fn state(&self) -> Result<u64, VulkanError> {
        self.shared.progress.lock().clone()
    }
}

/// The export's thread: mirrors `source` into `mirror` from `initial` on, until asked to stop
/// (`Ok`) or until it cannot go on (the error).
fn follow_export(
    source: &causeway_device::DeviceSemaphore,
    mirror: &Timeline,
    initial: u64,
    shared: &ExportShared,
) -> Result<(), VulkanError> {
    let wake = &shared.wake;
    let mut next = initial + 1;
    loop {
        let outcome = source.wait_scoped(next, wake, |arm| match arm {
            Arm::Ready(outcome) => Some(outcome),
            Arm::Armed => {
                let mut state = wake.state.lock();
                loop {
                    if let Some(outcome) = state.fired.take() {
                        return Some(outcome);
                    }
                    if state.stop {
                        return None;
                    }
                    state = wake.changed.wait(state);
                }
            }
        });
        // A stop during the wait, or one asked between waits (the thread still looks before
        // each signal, so a drop does not wait for a value that may never come).
        let stop = wake.state.lock().stop;
        match outcome {
            None => return Ok(()),
            Some(_) if stop => return Ok(()),
            Some(Ok(reached)) => {
                mirror.signal_host(reached)?;
                *shared.progress.lock() = Ok(reached);
                next = reached + 1;
            }
            Some(Err(failure)) => return Err(VulkanError::SemaphoreFailed(failure)),
        }
    }
}

impl fmt::Debug for ExportedTimeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExportedTimeline")
            .field("raw", &self.raw())
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl Drop for ExportedTimeline {
    /// Stops the thread and joins it; the `VkSemaphore` goes with the last [`Timeline`]
    /// handle, this one's (see the type's documentation).
    fn drop(&mut self) {
        self.shared.wake.state.lock().stop = true;
        self.shared.wake.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            // The thread returns once it sees the stop; it records its errors rather than
            // panicking, so a join error is nothing to act on.
            let _ = thread.join();
        }
    }
}
