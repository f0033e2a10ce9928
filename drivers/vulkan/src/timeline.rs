//! [`Timeline`]: a timeline `VkSemaphore`. The driver keeps one per causeway queue, whose value
//! is the epoch of that queue's last completed operation; a device wait on the queue's work is a
//! native wait on its timeline reaching the operation's epoch.
//!
//! A value query never overlaps a host signal of the same timeline: [`Timeline::value`] and
//! [`Timeline::signal_host`] take one lock. The validation layer 1.3.239 reports
//! `UNASSIGNED-VkSemaphore-state-timeout` ("most likely a validation bug", after stalling for
//! seconds) when a thread observes a value whose `vkSignalSemaphore` has not yet returned on
//! another thread (KhronosGroup/Vulkan-ValidationLayers#4649); a query that waits for the
//! signal's call to return never observes one. Host *waits* are not so ordered (a wait cannot
//! hold the lock): the driver waits on the host only for values a device signal reaches —
//! except on an application's semaphore it imports, whose signals are the application's
//! ([`ImportedTimeline`](crate::ImportedTimeline)).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ash::vk;

use causeway_core::unpoisoned::Mutex;

use crate::{Gpu, VulkanError};

/// A timeline semaphore of a [`Gpu`]. Cheap to clone (a shared handle): the watcher holds a
/// clone of each timeline it waits on, so a timeline is never destroyed under a wait.
///
/// Dropping the last handle waits for the device to go idle (a submission nobody tracks may
/// still wait on it or signal it): drop it only once every device wait that depends on a host
/// signal has had it, or the drop never returns.
#[derive(Clone)]
pub struct Timeline {
    shared: Arc<TimelineShared>,
}

struct TimelineShared {
    gpu: Gpu,
    semaphore: vk::Semaphore,
    /// The highest value a submitted device signal sets (0: none yet): a host signal must stay
    /// below every pending one.
    highest_device_signal: AtomicU64,
    /// Held across every value query and host signal (see the module documentation).
    host_signal: Mutex<()>,
}

impl Timeline {
    /// A timeline semaphore starting at `initial`.
    pub fn new(gpu: &Gpu, initial: u64) -> Result<Timeline, VulkanError> {
        let mut kind = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(initial);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut kind);
        // SAFETY: the device is alive (`gpu` is a handle to it) and has timeline semaphores
        // enabled (`Gpu::open`); `info` lives across the call.
        let semaphore = unsafe { gpu.device().create_semaphore(&info, None) }
            .map_err(VulkanError::vk("vkCreateSemaphore"))?;
        Ok(Timeline {
            shared: Arc::new(TimelineShared {
                gpu: gpu.clone(),
                semaphore,
                highest_device_signal: AtomicU64::new(0),
                host_signal: Mutex::new(()),
            }),
        })
    }

    /// The native semaphore.
    pub fn raw(&self) -> vk::Semaphore {
        self.shared.semaphore
    }

    /// Its current value (`vkGetSemaphoreCounterValue`).
    pub fn value(&self) -> Result<u64, VulkanError> {
        let _no_host_signal = self.shared.host_signal.lock();
        self.value_unordered()
    }

    /// [`value`](Self::value) without the lock (the caller holds it).
    fn value_unordered(&self) -> Result<u64, VulkanError> {
        // SAFETY: the semaphore is a live timeline semaphore of this device (we hold it).
        unsafe { self.shared.gpu.device().get_semaphore_counter_value(self.shared.semaphore) }
            .map_err(VulkanError::vk("vkGetSemaphoreCounterValue"))
    }

    /// Sets it to `value` from the host (`vkSignalSemaphore`).
    ///
    /// The Vulkan rules for `VkSemaphoreSignalInfo::value`: it "must have a value greater than
    /// the current value of the semaphore" (VUID-VkSemaphoreSignalInfo-value-03258) and "must be
    /// less than the value of any pending semaphore signal operations"
    /// (VUID-VkSemaphoreSignalInfo-value-03259); and it "must have a value which does not differ
    /// from the current value of the semaphore or the value of any outstanding semaphore wait or
    /// signal operation on semaphore by more than maxTimelineSemaphoreValueDifference"
    /// (VUID-VkSemaphoreSignalInfo-value-03260). The first two, and the third against the
    /// current value, are checked here, conservatively, and refused with
    /// [`VulkanError::InvalidHostSignal`]: a timeline that any submitted device signal has not
    /// yet reached is never signalled from the host. (Outstanding waits are the caller's: the
    /// driver's values rise by one epoch at a time, far from the limit.) The check reads the values
    /// before signalling, so a device signal of the same timeline submitted concurrently from
    /// another thread is the caller's to order: the driver signals a timeline from the host or
    /// from the device, never both (host-signalled timelines are mirrors and the watcher's wake).
    pub fn signal_host(&self, value: u64) -> Result<(), VulkanError> {
        let _no_query = self.shared.host_signal.lock();
        let current = self.value_unordered()?;
        // The value is all the atomic carries (no other memory is published through it), and a
        // signal submitted before this call (ordered by the caller) is seen by coherence.
        let pending_device_signal = self.shared.highest_device_signal.load(Ordering::Relaxed);
        let too_far = value.saturating_sub(current) > self.shared.gpu.max_timeline_difference();
        if value <= current || pending_device_signal > current || too_far {
            return Err(VulkanError::InvalidHostSignal { value, current, pending_device_signal });
        }
        let info = vk::SemaphoreSignalInfo::default().semaphore(self.shared.semaphore).value(value);
        // SAFETY: a live timeline semaphore of this device; the value rules are checked above.
        unsafe { self.shared.gpu.device().signal_semaphore(&info) }
            .map_err(VulkanError::vk("vkSignalSemaphore"))
    }

    /// Waits on the host until it reaches `value`: `Ok(true)` when it has, `Ok(false)` when
    /// `timeout` passed first.
    pub fn wait_host(&self, value: u64, timeout: Duration) -> Result<bool, VulkanError> {
        let semaphores = [self.shared.semaphore];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        let timeout_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: a live timeline semaphore of this device; the arrays live across the call.
        match unsafe { self.shared.gpu.device().wait_semaphores(&info, timeout_ns) } {
            Ok(()) => Ok(true),
            Err(vk::Result::TIMEOUT) => Ok(false),
            Err(result) => Err(VulkanError::Vk { call: "vkWaitSemaphores", result }),
        }
    }

    /// Records that a device signal to `value` is about to be submitted (before the
    /// submission, so a host signal sees it pending), refusing a value that does not rise above
    /// the timeline's current value and every device signal before it: a timeline signal must
    /// be "greater than the current value of the semaphore when the semaphore signal operation
    /// is executed" (VUID-VkSubmitInfo2-semaphore-03882). A refused value is not recorded.
    pub(crate) fn note_device_signal(&self, value: u64) -> Result<(), VulkanError> {
        let current = self.value()?;
        if value <= current {
            return Err(VulkanError::InvalidDeviceSignal { value, current });
        }
        // As in `signal_host`: the value is all the atomic carries. A `previous` at or above
        // `value` is left as it was (a maximum), so a refusal records nothing.
        let previous = self.shared.highest_device_signal.fetch_max(value, Ordering::Relaxed);
        if value <= previous {
            return Err(VulkanError::InvalidDeviceSignal { value, current: previous });
        }
        Ok(())
    }
}

impl fmt::Debug for Timeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeline")
            .field("semaphore", &self.shared.semaphore)
            .finish_non_exhaustive()
    }
}

impl Drop for TimelineShared {
    fn drop(&mut self) {
        // The device may still wait on or signal it in a submission nobody tracks here: destroy
        // it only once every queue causeway submits to is idle. A lost device is idle; the
        // error changes nothing.
        let _ = self.gpu.wait_idle();
        // SAFETY: the last handle is gone and causeway's queues, the only ones its submissions
        // reach, are idle: nothing uses the semaphore (an application that put `raw()` in
        // submissions of its own waits for them first: `Gpu::from_raw_handles`).
        unsafe { self.gpu.device().destroy_semaphore(self.semaphore, None) };
    }
}
