//! Semaphore scopes: how far a semaphore's signals are visible.
//!
//! A scope is fixed when the semaphore is created. Each wider scope costs a heavier primitive
//! (none at all for queue-local, a device timeline for device-local, an exportable handle for
//! system-wide), so the scheduler picks the narrowest scope that covers every participant:
//! [`Scope::narrowest`]. A wait from outside a semaphore's scope is refused, not silently
//! widened.
//!
//! Each scope has one spelling, [`Scope::name`] (`queue-local` … `system-wide`), which scenario
//! files, reports and error messages share; [`str::parse`] reads it back.

use core::fmt;
use core::str::FromStr;

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
    /// Every scope, narrowest first.
    pub const ALL: &'static [Scope] = &[
        Scope::QueueLocal,
        Scope::DeviceLocal,
        Scope::DeviceGroup,
        Scope::ProcessLocal,
        Scope::SystemWide,
    ];

    /// Lower-case name, as scenario files and reports spell it; [`str::parse`] reads it back.
    pub const fn name(self) -> &'static str {
        match self {
            Scope::QueueLocal => "queue-local",
            Scope::DeviceLocal => "device-local",
            Scope::DeviceGroup => "device-group",
            Scope::ProcessLocal => "process-local",
            Scope::SystemWide => "system-wide",
        }
    }

    /// The narrowest scope in which `a` and `b` can see each other's signals.
    #[inline]
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

    /// Whether a semaphore of this scope created at `home` may be used from `other`. Inlined
    /// across crates: every wait and signal of a submission asks it, and the call cost about as
    /// much as the comparisons.
    #[inline]
    pub fn admits(self, home: &Endpoint, other: &Endpoint) -> bool {
        self >= Scope::narrowest(home, other)
    }
}

impl FromStr for Scope {
    type Err = UnknownScope;

    /// The scope whose [`name`](Scope::name) is `name`, exactly (names are lower case).
    fn from_str(name: &str) -> Result<Scope, UnknownScope> {
        Scope::ALL.iter().copied().find(|scope| scope.name() == name).ok_or(UnknownScope)
    }
}

/// A name that is not any scope's [`name`](Scope::name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnknownScope;

impl fmt::Display for UnknownScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown scope (")?;
        for (index, scope) in Scope::ALL.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            f.write_str(scope.name())?;
        }
        f.write_str(")")
    }
}

impl core::error::Error for UnknownScope {}

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

    #[test]
    fn every_scope_is_listed_once_narrowest_first_and_its_name_parses_back() {
        // The variants are declared narrowest first, so a scope's discriminant is its place in
        // `ALL`: a scope declared but not listed shifts the ones after it and fails here.
        for (index, &scope) in Scope::ALL.iter().enumerate() {
            assert_eq!(scope as usize, index);
            assert_eq!(scope.name().parse(), Ok(scope));
        }
        assert_eq!(Scope::ALL.len(), Scope::SystemWide as usize + 1);
    }

    #[test]
    fn an_unknown_name_is_refused_and_the_refusal_lists_the_names() {
        assert_eq!("device".parse::<Scope>(), Err(UnknownScope));
        assert_eq!("Device-Local".parse::<Scope>(), Err(UnknownScope));
        assert_eq!(
            std::format!("{UnknownScope}"),
            "unknown scope (queue-local, device-local, device-group, process-local, system-wide)"
        );
    }
}
