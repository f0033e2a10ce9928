//! The host primitives the pool runs on, chosen per target: the wait its idle workers park on
//! and the call that pins a worker to a CPU.
//!
//! - Windows: `WaitOnAddress` and `SetThreadAffinityMask` (`causeway-platform-windows`).
//! - Linux: the kernel futex and `sched_setaffinity` (`causeway-platform-linux`).
//! - Any other std host: `causeway-platform-linux`'s std-parking emulation, and no pinning.
//!
//! Under `cfg(loom)` every target takes the parking emulation: the modelled futex word has no
//! real address for an operating system to wait on.

#[cfg(all(windows, not(loom)))]
pub use causeway_platform_windows::{pin_current_thread, HostFutex};

#[cfg(not(all(windows, not(loom))))]
pub use causeway_platform_linux::{pin_current_thread, HostFutex};

#[cfg(test)]
mod tests {
    use std::any::TypeId;

    use super::HostFutex;

    #[test]
    fn the_pool_parks_on_the_target_s_native_wait() {
        #[cfg(all(windows, not(loom)))]
        let native = TypeId::of::<causeway_platform_windows::WindowsFutex>();
        #[cfg(all(target_os = "linux", not(loom)))]
        let native = TypeId::of::<causeway_platform_linux::LinuxFutex>();
        #[cfg(any(loom, not(any(windows, target_os = "linux"))))]
        let native = TypeId::of::<causeway_platform_linux::ParkingFutex>();
        assert_eq!(TypeId::of::<HostFutex>(), native);
    }
}
