//! One snapshot of everything a device counts: per queue, per driver, memory and faults.

use causeway_core::queue::ResolutionCounts;

use super::Device;
use crate::ids::{DriverId, QueueId};
use crate::memory::MemoryStats;

/// What a device has counted so far ([`Device::stats`]). Each part is read on its own while
/// the device runs, so parts may be a few operations apart.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DeviceStats {
    /// Each queue, in creation order.
    pub queues: Vec<QueueStats>,
    /// Each driver, in registration order.
    pub drivers: Vec<DriverStats>,
    /// Stream-ordered memory.
    pub memory: MemoryStats,
    /// Contract violations drivers committed ([`Device::driver_faults`] lists them).
    pub driver_faults: usize,
}

/// One queue's counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// The queue.
    pub queue: QueueId,
    /// The driver running it.
    pub driver: DriverId,
    /// Operations submitted to it.
    pub submitted: u64,
    /// Of those, operations not finished.
    pub in_flight: u64,
    /// How its operations' waits were resolved at submission.
    pub resolutions: ResolutionCounts,
    /// Times a submission found its ring full and slept for room, past a short watch. A
    /// submitter that runs ahead of the queue sleeps once per half ring, not once per
    /// operation; a count near the operations submitted means the refills rarely came (the
    /// operations behind the ring's head waited for signals given later, or each ran for about
    /// a millisecond or more).
    pub room_sleeps: u64,
}

/// One driver's counts.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriverStats {
    /// The driver.
    pub driver: DriverId,
    /// Its name (`"cpu"`, `"npu"`, `"vulkan"`).
    pub name: &'static str,
    /// What it counts of its own, by name ([`Backend::counters`](crate::Backend::counters)).
    pub counters: Vec<(&'static str, u64)>,
}

impl DeviceStats {
    /// The counts of queue `queue`.
    pub fn queue(&self, queue: QueueId) -> Option<&QueueStats> {
        self.queues.get(queue.index()).filter(|stats| stats.queue == queue)
    }

    /// Driver `name`'s counter `counter`, summed over drivers of that name.
    pub fn counter(&self, name: &str, counter: &str) -> Option<u64> {
        self.drivers
            .iter()
            .filter(|driver| driver.name == name)
            .flat_map(|driver| &driver.counters)
            .filter(|(counted, _)| *counted == counter)
            .map(|&(_, value)| value)
            .reduce(|total, value| total + value)
    }

    /// Resolution totals over every queue.
    pub fn resolutions(&self) -> ResolutionCounts {
        self.queues.iter().fold(ResolutionCounts::default(), |mut total, queue| {
            total += queue.resolutions;
            total
        })
    }
}

impl Device {
    /// Everything the device counts, in one place: per queue (submitted, in flight, how waits
    /// were resolved), per driver (its own counters), memory, and driver faults. Allocates the
    /// snapshot; meant for reports, not for a hot loop.
    pub fn stats(&self) -> DeviceStats {
        let shared = self.shared();
        let queues = shared
            .queues
            .iter()
            .map(|queue| {
                let resolutions = queue.lock_submit().counts;
                QueueStats {
                    queue: queue.id,
                    driver: DriverId(queue.driver as u32),
                    submitted: queue.submitted_under_lock(),
                    in_flight: queue.in_flight(),
                    resolutions,
                    room_sleeps: queue.room_sleeps(),
                }
            })
            .collect();
        let drivers = shared
            .backends
            .iter()
            .enumerate()
            .map(|(index, backend)| DriverStats {
                driver: DriverId(index as u32),
                name: backend.name(),
                counters: backend.counters(),
            })
            .collect();
        DeviceStats {
            queues,
            drivers,
            memory: self.memory_stats(),
            driver_faults: shared.faults.lock().len(),
        }
    }
}
