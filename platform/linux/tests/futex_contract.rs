//! The `Futex` contract, checked against every implementation in the crate.

#[macro_use]
#[path = "../../../tests/support/futex_contract.rs"]
mod contract;

use contract::*;

// 128 words: more than the parking futex has buckets.
#[cfg(target_os = "linux")]
contract_tests!(
    linux_futex,
    causeway_platform_linux::LinuxFutex::new(),
    round_trips: 100_000,
    words: 128
);
contract_tests!(
    parking_futex,
    causeway_platform_linux::ParkingFutex::new(),
    round_trips: 100_000,
    words: 128
);

/// `HostFutex` builds in a `static`, as the crate documents.
#[test]
fn host_futex_is_usable_as_a_static() {
    static HOST: causeway_platform_linux::HostFutex = causeway_platform_linux::HostFutex::new();
    wake_one_releases_a_waiter(&HOST, None);
}
