//! # causeway-device-cts
//!
//! The device layer's conformance suite: the cases every driver must pass to keep the layer's
//! contract (`causeway_device::backend`), run against *your* driver from your crate's own
//! integration tests, one `#[test]` per case, so `cargo test` names each case that fails for
//! your driver. It is modelled on IREE's HAL CTS (a driver describes itself once; the suite
//! instantiates every case for it), written for causeway's seam.
//!
//! ## Using it from a driver
//!
//! 1. Add the suite as a dev-dependency of the driver crate.
//! 2. Describe the driver by implementing [`DriverUnderTest`]: its name, whether it can run on
//!    this machine ([`DriverUnderTest::availability`], decided by probing), and how to make a
//!    fresh backend with its kernels recorded ([`DriverUnderTest::instance`]): a short kernel
//!    that succeeds, a long one, and, if the driver can express one, a kernel that fails and
//!    the failure it must end with ([`Kernels`]). A driver that counts the native waits it
//!    emits hands the suite a counter ([`DriverInstance::native_waits`]) and the suite checks
//!    it against the layer's resolutions.
//! 3. In `tests/conformance.rs`, instantiate the suite:
//!
//! ```
//! use causeway_device_cts::peer::{PeerBackend, PEER_FAULT_CODE};
//! use causeway_device_cts::{
//!     conformance_suite, Availability, DriverInstance, DriverUnderTest, FailingKernel, Kernels,
//! };
//!
//! // Your driver; here the suite's own reference peer stands in for it.
//! struct MyDriver;
//!
//! impl DriverUnderTest for MyDriver {
//!     type Backend = PeerBackend;
//!
//!     fn name(&self) -> &'static str {
//!         "my-driver"
//!     }
//!
//!     fn availability(&self) -> Availability {
//!         Availability::Available
//!     }
//!
//!     fn instance(&self) -> DriverInstance<PeerBackend> {
//!         let (backend, kernels) = PeerBackend::new();
//!         DriverInstance {
//!             backend,
//!             kernels: Kernels {
//!                 short: kernels.short,
//!                 short_copies: Vec::new(),
//!                 long: kernels.long,
//!                 failing: Some(FailingKernel { work: kernels.failing, code: PEER_FAULT_CODE }),
//!             },
//!             native_waits: None,
//!             after_case: None,
//!         }
//!     }
//! }
//!
//! conformance_suite!(MyDriver);
//! # fn main() {}
//! ```
//!
//! The macro expands to one test per case (the [`cases`] module lists them, with what a failure
//! of each means). Each case builds its own device(s) from fresh backends, mixes your driver's
//! queues with queues of the suite's reference driver ([`peer`], the foreign side of
//! cross-driver cases) and host signals, bounds every wait, and runs under a watchdog: a hang
//! fails the test with a message naming the case and the driver instead of stalling the run.
//!
//! Where the driver cannot run on this machine (no vendor library, say), every case prints
//! `skipped: <reason>` and passes; the test command's summary repeats the reason. Only a
//! driver whose hardware may legitimately be absent should ever answer
//! [`Availability::Unavailable`]: a missing software device the test machines are meant to
//! have (lavapipe for Vulkan) is a failure, so such a driver answers
//! [`Availability::Available`] and lets [`DriverUnderTest::instance`] fail loudly.
//!
//! ## Reading a failure
//!
//! A failing case panics with `conformance case <case> failed on the <driver> driver: <what>`,
//! where `<what>` names the operation, semaphore or count that broke the contract; a case that
//! never ends fails after [`CASE_BUDGET`] with `conformance case <case> hung on the <driver>
//! driver`. The documentation of each function in [`cases`] says what its failure means for a
//! driver (work lost or run twice, a failure reported with the wrong type, a native wait for a
//! foreign signal, work left running at shutdown, ...).
//!
//! ## What the suite assumes of a driver
//!
//! Only the [`Backend`] contract. The cases submit kernels only through the [`Work`] values the
//! driver names, and run everything else (barriers, host functions, stream-ordered memory) as
//! the layer's own work on its queues. They never assert on timing: where a resolution would
//! depend on how far the device got, the work is held behind a host-signalled gate until every
//! submission has been resolved.
//!
//! The guide walks through running the suite: `docs/src/writing-a-driver.md` in the repository.

// Not a loom model: it drives whole devices on real threads, which under `--cfg loom` the
// device layer's loom atomics allow only inside a model. Under loom this crate is empty (a
// driver's loom models compile its dev-dependencies).
#![cfg(not(loom))]

mod case_runner;
pub mod cases;
mod ledger;
pub mod peer;
mod rig;

use causeway_core::semaphore::Failure;
use causeway_device::{Backend, Work};

pub use case_runner::{run_case, CASE_BUDGET};

/// Whether a driver can run on this machine, as its own probe decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Availability {
    /// Its device (or software model) is here: every case runs.
    Available,
    /// Its hardware or vendor library is absent: every case prints `skipped: <reason>` and
    /// passes.
    Unavailable(String),
}

/// A kernel of the driver under test that runs and fails, and the driver's raw code for that
/// fault.
///
/// Every driver reports work that ran and failed the same way, as
/// [`Failure::Faulted`]`(code)` with its own code attached (a panicking CPU kernel is
/// [`Failure::PANICKED`]); the suite checks that the operation, everything it signals and every
/// waiter on those signals, on any driver, fail with exactly `Failure::Faulted(code)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailingKernel {
    /// The kernel.
    pub work: Work,
    /// The driver's raw code for the fault the kernel ends in.
    pub code: u32,
}

impl FailingKernel {
    /// The failure the kernel's operation must end with.
    pub const fn failure(&self) -> Failure {
        Failure::Faulted(self.code)
    }
}

/// The kernels of the driver under test that the cases submit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernels {
    /// A short kernel that succeeds. The throughput cases submit 10^5 of them, so it should
    /// cost little more than the driver's per-operation overhead.
    pub short: Work,
    /// More kernels like `short`, recorded separately (may be empty). The throughput cases
    /// rotate through `short` and these, so a driver whose recorded command buffer can be on
    /// the device only once at a time (its next execution waits for the last) still gets
    /// several operations in flight.
    pub short_copies: Vec<Work>,
    /// A kernel that runs long enough for a shutdown started after it began to find it in
    /// flight (tens to hundreds of milliseconds), and then succeeds.
    pub long: Work,
    /// A kernel that fails, where the driver can express one.
    pub failing: Option<FailingKernel>,
}

/// Reads a driver's count of the native waits it emitted (WAIT descriptors, timeline waits,
/// stream waits): it must equal the device waits the layer resolved on its queues between
/// queues of the same driver.
pub type NativeWaitCounter = Box<dyn Fn() -> u64 + Send>;

/// A fresh backend of the driver under test, with its kernels recorded.
pub struct DriverInstance<B> {
    /// The backend, to be registered with a device.
    pub backend: B,
    /// Its kernels.
    pub kernels: Kernels,
    /// Its native wait count, if it keeps one.
    pub native_waits: Option<NativeWaitCounter>,
    /// A check of the driver's own, run once the case's device is gone and the case has
    /// otherwise passed (the Vulkan driver's: the validation layer reported nothing). It fails
    /// the case by panicking.
    pub after_case: Option<AfterCase>,
}

/// A driver's own check after a case; see [`DriverInstance::after_case`].
pub type AfterCase = Box<dyn FnOnce() + Send>;

/// A driver, described for the suite by its author.
pub trait DriverUnderTest: Send + 'static {
    /// Its backend.
    type Backend: Backend;

    /// Its name, as the failure messages and the skip lines show it.
    fn name(&self) -> &'static str;

    /// Whether it can run here, decided by probing the machine (see the [crate
    /// documentation](crate) for which drivers may ever answer unavailable).
    fn availability(&self) -> Availability;

    /// A fresh backend with its kernels recorded: a case calls this once per device it builds.
    /// Panicking here fails the case with the panic's message (a device that should be present
    /// and is not).
    fn instance(&self) -> DriverInstance<Self::Backend>;
}

/// Expands to one `#[test]` per conformance case for the driver `$driver` describes (an
/// expression of a type implementing [`DriverUnderTest`], evaluated once per case).
#[macro_export]
macro_rules! conformance_suite {
    ($driver:expr) => {
        $crate::conformance_suite!(@cases $driver;
            native_wait_ping_pong_across_two_queues,
            native_wait_ping_pong_across_drivers,
            held_wait_before_its_signal_exists,
            a_foreign_failure_fails_this_drivers_waiters,
            this_drivers_failure_fails_foreign_waiters,
            transitive_elision_across_drivers,
            stream_ordered_memory_is_reused,
            a_full_ring_is_backpressure_and_loses_nothing,
            shutdown_with_work_in_flight_ends_every_operation,
            drop_with_work_in_flight_ends_every_operation,
            speculation_rejected_cancels_exactly_the_dependent_work,
            a_hundred_thousand_operations_through_one_queue,
            a_hundred_thousand_operations_across_two_queues,
        );
    };
    (@cases $driver:expr; $($case:ident),+ $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::run_case($driver, stringify!($case), $crate::cases::$case);
            }
        )+
    };
}
