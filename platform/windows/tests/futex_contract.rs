//! The `Futex` contract, checked against `WindowsFutex` (run under wine in CI, see
//! `scripts/windows.sh`): the same checks as `causeway-platform-linux`'s contract tests, with a
//! shorter ping-pong and fewer waiting threads for the emulated host.
#![cfg(windows)]

#[macro_use]
#[path = "../../../tests/support/futex_contract.rs"]
mod contract;

use causeway_platform_windows::HostFutex;
use contract::*;

contract_tests!(
    windows_futex,
    causeway_platform_windows::WindowsFutex,
    round_trips: 20_000,
    words: 32
);

#[test]
fn host_futex_is_usable_as_a_static() {
    static HOST: HostFutex = HostFutex::new();
    wake_all_releases_every_waiter(&HOST, 1);
}
