//! Semaphore scopes: how far a semaphore's signals are visible.
//!
//! A scope is fixed when the semaphore is created. Each wider scope costs a heavier primitive
//! (none at all for queue-local, a device timeline for device-local, an exportable handle for
//! system-wide), so the scheduler picks the narrowest scope that covers every participant:
//! [`Scope::narrowest`]. A wait from outside a semaphore's scope is refused, not silently
//! widened.

/// Visibility of a semaphore, narrowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Scope {
    /// Only the creating queue: ordering comes from its FIFO; no primitive at all.
    QueueLocal,
    /// Any queue of one device (a device timeline semaphore).
    DeviceLocal,
    /// Devices of one peer-to-peer group within a process.
    DeviceGroup,
    /// Any device or host thread in one process (a host-visible primitive).
    ProcessLocal,
    /// Other processes and drivers (an exportable handle).
    SystemWide,
}

/// Where a participant sits, as far as scopes care.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// Machine index.
    pub machine: u16,
    /// Process on that machine.
    pub process: u32,
    /// Peer-to-peer device group within the process.
    pub device_group: u32,
    /// Device within the process.
    pub device: u32,
    /// Queue within the device (its axis bits).
    pub queue: u64,
}

impl Scope {
    /// The narrowest scope in which `a` and `b` can see each other's signals.
    pub fn narrowest(a: &Endpoint, b: &Endpoint) -> Scope {
        let same_process = a.machine == b.machine && a.process == b.process;
        if !same_process {
            Scope::SystemWide
        } else if a.device != b.device {
            if a.device_group == b.device_group {
                Scope::DeviceGroup
            } else {
                Scope::ProcessLocal
            }
        } else if a.queue != b.queue {
            Scope::DeviceLocal
        } else {
            Scope::QueueLocal
        }
    }

    /// Whether a semaphore of this scope created at `home` may be used from `other`.
    pub fn admits(self, home: &Endpoint, other: &Endpoint) -> bool {
        self >= Scope::narrowest(home, other)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const HOME: Endpoint =
        Endpoint { machine: 0, process: 1, device_group: 0, device: 0, queue: 7 };

    #[test]
    fn narrowest_scope_per_distance() {
        let same_device = Endpoint { queue: 8, ..HOME };
        let peer = Endpoint { device: 1, ..same_device };
        let far_device = Endpoint { device_group: 3, ..peer };
        let other_process = Endpoint { process: 2, ..HOME };
        assert_eq!(Scope::narrowest(&HOME, &HOME), Scope::QueueLocal);
        assert_eq!(Scope::narrowest(&HOME, &same_device), Scope::DeviceLocal);
        assert_eq!(Scope::narrowest(&HOME, &peer), Scope::DeviceGroup);
        assert_eq!(Scope::narrowest(&HOME, &far_device), Scope::ProcessLocal);
        assert_eq!(Scope::narrowest(&HOME, &other_process), Scope::SystemWide);
        assert!(Scope::DeviceLocal.admits(&HOME, &same_device));
        assert!(!Scope::QueueLocal.admits(&HOME, &same_device));
        assert!(Scope::SystemWide.admits(&HOME, &other_process));
    }
}
