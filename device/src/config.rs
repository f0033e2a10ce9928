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
    /// Its name in observer events and reports; `None` names it after its driver and index
    /// (`"cpu:0"`).
    pub name: Option<&'static str>,
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
            name: None,
        }
    }
}

// Setters that chain (`QueueConfig::on(driver).capacity(8)`): the struct is `#[non_exhaustive]`,
// so code outside this crate cannot build it with a literal, and the setters spare a mutable
// binding per queue.
impl QueueConfig {
    /// The default configuration, on driver `driver`.
    pub fn on(driver: DriverId) -> QueueConfig {
        QueueConfig { driver, ..QueueConfig::default() }
    }

    /// With [`machine`](QueueConfig#structfield.machine) set to `machine`.
    #[must_use]
    pub fn machine(mut self, machine: u16) -> QueueConfig {
        self.machine = machine;
        self
    }

    /// With [`device`](QueueConfig#structfield.device) set to `device`.
    #[must_use]
    pub fn device(mut self, device: u32) -> QueueConfig {
        self.device = device;
        self
    }

    /// With [`device_group`](QueueConfig#structfield.device_group) set to `device_group`.
    #[must_use]
    pub fn device_group(mut self, device_group: u32) -> QueueConfig {
        self.device_group = device_group;
        self
    }

    /// With [`name`](QueueConfig#structfield.name) set to `name`.
    #[must_use]
    pub fn name(mut self, name: &'static str) -> QueueConfig {
        self.name = Some(name);
        self
    }

    /// With [`capacity`](QueueConfig#structfield.capacity) set to `capacity`.
    #[must_use]
    pub fn capacity(mut self, capacity: usize) -> QueueConfig {
        self.capacity = capacity;
        self
    }

    /// With [`wait_before_signal`](QueueConfig#structfield.wait_before_signal) set to `allowed`.
    #[must_use]
    pub fn wait_before_signal(mut self, allowed: bool) -> QueueConfig {
        self.wait_before_signal = allowed;
        self
    }

    /// With [`driver`](QueueConfig#structfield.driver) set to `driver`.
    #[must_use]
    pub fn driver(mut self, driver: DriverId) -> QueueConfig {
        self.driver = driver;
        self
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

// Setters that chain, for the same reason as `QueueConfig`'s.
impl SemaphoreConfig {
    /// A semaphore at `initial`, visible within `scope` around `home`, with
    /// [`DEFAULT_SEMAPHORE_HISTORY`] history slots.
    pub fn new(initial: u64, scope: Scope, home: Endpoint) -> SemaphoreConfig {
        SemaphoreConfig { initial, scope, home, history: DEFAULT_SEMAPHORE_HISTORY }
    }

    /// With [`initial`](SemaphoreConfig#structfield.initial) set to `initial`.
    #[must_use]
    pub fn initial(mut self, initial: u64) -> SemaphoreConfig {
        self.initial = initial;
        self
    }

    /// With [`scope`](SemaphoreConfig#structfield.scope) set to `scope`.
    #[must_use]
    pub fn scope(mut self, scope: Scope) -> SemaphoreConfig {
        self.scope = scope;
        self
    }

    /// With [`home`](SemaphoreConfig#structfield.home) set to `home`.
    #[must_use]
    pub fn home(mut self, home: Endpoint) -> SemaphoreConfig {
        self.home = home;
        self
    }

    /// With [`history`](SemaphoreConfig#structfield.history) set to `slots`.
    #[must_use]
    pub fn history(mut self, slots: usize) -> SemaphoreConfig {
        self.history = slots;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_setters_set_their_field_only() {
        let config = QueueConfig::on(DriverId(2)).capacity(8).wait_before_signal(false);
        let expected = QueueConfig {
            capacity: 8,
            wait_before_signal: false,
            driver: DriverId(2),
            ..QueueConfig::default()
        };
        assert_eq!(config, expected);
        let placed = config.machine(3).device(4).device_group(5).driver(DriverId(1));
        let expected =
            QueueConfig { machine: 3, device: 4, device_group: 5, driver: DriverId(1), ..expected };
        assert_eq!(placed, expected);
    }

    #[test]
    fn semaphore_setters_set_their_field_only() {
        let home = Endpoint { machine: 1, process: 2, device_group: 0, device: 3, queue: 4 };
        let config = SemaphoreConfig::new(0, Scope::DeviceLocal, home).history(64);
        assert_eq!(
            config,
            SemaphoreConfig { history: 64, ..SemaphoreConfig::new(0, Scope::DeviceLocal, home) }
        );
        let elsewhere = Endpoint { queue: 5, ..home };
        let changed = config.initial(7).scope(Scope::SystemWide).home(elsewhere);
        assert_eq!(
            changed,
            SemaphoreConfig { initial: 7, scope: Scope::SystemWide, home: elsewhere, history: 64 }
        );
    }
}
