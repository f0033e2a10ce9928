//! Pinning the calling thread to one CPU, for worker pools that want stable caches.

use std::fmt;

/// Why a thread could not be pinned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PinError {
    /// The CPU index is beyond what the kernel's CPU set can name.
    NoSuchCpu(usize),
    /// The kernel refused (the CPU is offline or outside this process's allowed set); the raw
    /// OS error code.
    Refused(i32),
    /// Pinning is not implemented for this target.
    Unsupported,
}

impl fmt::Display for PinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinError::NoSuchCpu(cpu) => write!(f, "no CPU {cpu} in the kernel's CPU set"),
            PinError::Refused(code) => write!(f, "the kernel refused the affinity (errno {code})"),
            PinError::Unsupported => f.write_str("thread pinning is not supported on this target"),
        }
    }
}

impl std::error::Error for PinError {}

/// Restricts the calling thread to run on `cpu` only.
#[cfg(target_os = "linux")]
pub fn pin_current_thread(cpu: usize) -> Result<(), PinError> {
    use rustix::thread::{sched_setaffinity, CpuSet};
    if cpu >= CpuSet::MAX_CPU {
        return Err(PinError::NoSuchCpu(cpu));
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    sched_setaffinity(None, &set).map_err(|errno| PinError::Refused(errno.raw_os_error()))
}

/// Restricts the calling thread to run on `cpu` only (not available on this target).
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread(cpu: usize) -> Result<(), PinError> {
    let _ = cpu;
    Err(PinError::Unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn pinning_to_an_allowed_cpu_succeeds_and_nonsense_is_refused() {
        let pinned = std::thread::spawn(|| pin_current_thread(0)).join().unwrap();
        assert_eq!(pinned, Ok(()));
        let huge = std::thread::spawn(|| pin_current_thread(1 << 20)).join().unwrap();
        assert_eq!(huge, Err(PinError::NoSuchCpu(1 << 20)));
    }

    #[test]
    #[cfg(not(target_os = "linux"))]
    fn pinning_elsewhere_says_it_is_unsupported() {
        assert_eq!(pin_current_thread(0), Err(PinError::Unsupported));
    }
}
