//! How a queue and a semaphore are built.

use causeway_core::scope::{Endpoint, Scope};

use crate::ids::DriverId;
use crate::limits::DEFAULT_SEMAPHORE_HISTORY;
#[cfg(doc)]
use crate::{BackendCapabilities, Device, DeviceBuilder, Resource};

/// How to build one queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueConfig {
    /// Machine index (for scopes and the queue's axis).
    pub machine: u16,
    /// Device index within the process (queues of one device share device-local semaphores).
    pub device: u32,
    /// Peer-to-peer group of that device.
    pub device_group: u32,
    /// Operations in flight at most (submitted, not retired).
    pub capacity: usize,
    /// Whether waits may be queued before their signal is submitted; without it such waits
    /// are held on the host (as binary-event APIs need). Applies only where the driver can
    /// ([`BackendCapabilities::wait_before_signal`]).
    pub wait_before_signal: bool,
    /// The driver that runs its kernels ([`DeviceBuilder::driver`]).
    pub driver: DriverId,
}

impl Default for QueueConfig {
    fn default() -> QueueConfig {
        QueueConfig {
            machine: 0,
            device: 0,
            device_group: 0,
            capacity: 256,
            wait_before_signal: true,
            driver: DriverId(0),
        }
    }
}

impl QueueConfig {
    /// The default configuration, on driver `driver`.
    pub fn on(driver: DriverId) -> QueueConfig {
        QueueConfig { driver, ..QueueConfig::default() }
    }
}

/// How to build one semaphore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreConfig {
    /// Its initial value.
    pub initial: u64,
    /// How far its signals are visible.
    pub scope: Scope,
    /// Where it was created (the reference point of `scope`).
    pub home: Endpoint,
    /// History slots (2..=65535): signals that may be pending at once, plus one for the newest
    /// reached signal. A submission that finds them all taken waits ([`Device::submit`]) or
    /// is refused as [`Resource::History`] ([`Device::try_submit`]). More slots also keep
    /// late waiters exact for longer (an aged-out value imports a looser, still true, entry).
    pub history: usize,
}

impl SemaphoreConfig {
    /// A semaphore at `initial`, visible within `scope` around `home`, with
    /// [`DEFAULT_SEMAPHORE_HISTORY`] history slots.
    pub fn new(initial: u64, scope: Scope, home: Endpoint) -> SemaphoreConfig {
        SemaphoreConfig { initial, scope, home, history: DEFAULT_SEMAPHORE_HISTORY }
    }
}
