//! # causeway
//!
//! The crate a hosted program depends on. It gathers causeway's layers under one name, grouped
//! by concern, and adds what only a hosted process has: the [`Runtime`] (the executor with its
//! worker threads). It has no command-line dependencies: the
//! `causeway` CLI and its scenario runner are the `causeway-cli` crate (`cli/`), built on this
//! one.
//!
//! - **The causal model** (`causeway-core`, `no_std`): axes ([`axis`], [`Axis`]), frontiers
//!   ([`frontier`], [`Frontier`], [`Point`]), timeline semaphores ([`semaphore`],
//!   [`Semaphore`], [`Failure`]), queue clocks and wait resolution ([`queue`], [`QueueClock`]),
//!   scopes ([`scope`], [`Scope`], [`Endpoint`]), fences ([`fence`], [`Fence`]), speculation
//!   ([`speculation`], [`Rejection`]), collectives ([`collective`]) and buffer reuse
//!   ([`reuse`]).
//! - **The executor**: cooperative processes ([`executor`]) and the host's executor on the
//!   platform futex ([`HostExecutor`], [`HostFutex`]).
//! - **Host waits**: one per kind of semaphore. A device's semaphore, named by its id:
//!   [`Device::wait`](device::Device::wait). A semaphore of your own, outside any device:
//!   [`runtime::blocking`] (`wait`, with a timeout, and `wait_until`, with a deadline).
//! - **The hosted runtime**: [`Runtime`] and its [`RuntimeBuilder`], the pool underneath
//!   ([`PoolConfig`], [`PoolError`]) and the rest of the runtime — coroutines, awaitable waits,
//!   invocations, streams — in [`runtime`].
//! - **The device layer**: devices, queues, operations and the driver seam ([`device`]).
//! - **Drivers**, one cargo feature each, at the module of the feature's name: `cpu`,
//!   `vulkan`, `npu` and `cuda`; and causeway across MPI ranks as `distributed` (feature
//!   `mpi`). The table below lists them.
//!
//! Core's implementation helpers (the cache-line padding, the poison-ignoring locks) and
//! everything else core declares stay reachable as [`core`](mod@core), for code that builds
//! its own structures on the causal model.
//!
//! ## Features
//!
//! | feature | adds | needs |
//! | --- | --- | --- |
//! | `cpu` (default) | `causeway::cpu`: kernels and command buffers on the pool's workers | nothing |
//! | `vulkan` | `causeway::vulkan`: queues on VkQueues with native timeline waits (ash) | a Vulkan ≥ 1.2 loader and device at run time |
//! | `npu` | `causeway::npu`: the NPU ring protocol and its software device model | nothing |
//! | `cuda` | `causeway::cuda`: queues on CUDA streams with emulated timelines (cudarc) | libcuda at run time |
//! | `mpi` | `causeway::distributed`: devices on MPI ranks sharing semaphores (rsmpi) | Open MPI and libclang to build, `mpirun` to run |
//!
//! Only the CPU driver is on by default: it runs on any machine the runtime runs on and
//! brings no dependency beyond the layers below it, so `causeway = "…"` builds everywhere and
//! its first example runs there. Each other driver costs something a program that does not
//! use it should not pay — ash or cudarc compiled in, a system library looked for at run time,
//! MPI's headers at build time, or a model of hardware the program does not have — so a
//! runtime team names the drivers it ships. A semaphore signalled on one driver's queue is
//! waited on from another's unchanged, so adding a driver later changes no other code.
//!
//! The guide — concepts, the CLI, drivers and their set-up, scheduling, speculation, MPI ranks,
//! performance and testing — is an mdBook in the repository: start at `docs/src/introduction.md`.

// The causal model.
#[doc(inline)]
pub use causeway_core::{
    axis, collective, fence, frontier, queue, reuse, scope, semaphore, speculation,
};
#[doc(inline)]
pub use causeway_core::{
    Acquire, Axis, AxisAllocator, AxisError, Capabilities, CollectiveChannel, CollectiveRound,
    DeathRecord, Dependence, Domain, Endpoint, Failure, Fence, Frontier, Point, QueueClock,
    Rejection, Resolution, ReuseDecision, ReusePool, Scope, Semaphore, SignalError,
    UnknownResolution, UnknownScope, WaitResolution, WireError,
};

// The executor.
#[doc(inline)]
pub use causeway_core::executor;
#[doc(inline)]
pub use causeway_runtime::{HostExecutor, HostFutex};

// The hosted runtime.
#[doc(inline)]
pub use causeway_runtime as runtime;
#[doc(inline)]
pub use causeway_runtime::{PoolConfig, PoolError, FRONTIER_CAPACITY};
pub use workers::{Runtime, RuntimeBuilder};
mod workers;

// The device layer.
#[doc(inline)]
pub use causeway_device as device;

// Drivers, each behind the feature of its name (MPI's as `mpi`).
#[cfg(feature = "mpi")]
#[doc(inline)]
pub use causeway_distributed as distributed;
#[cfg(feature = "cpu")]
#[doc(inline)]
pub use causeway_driver_cpu as cpu;
#[cfg(feature = "cuda")]
#[doc(inline)]
pub use causeway_driver_cuda as cuda;
#[cfg(feature = "npu")]
#[doc(inline)]
pub use causeway_driver_npu as npu;
#[cfg(feature = "vulkan")]
#[doc(inline)]
pub use causeway_driver_vulkan as vulkan;

// Everything core declares, its implementation helpers included.
#[doc(inline)]
pub use causeway_core as core;

/// The README's code, compiled and run as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

/// The guide's chapters (`docs/src/`, an mdBook), compiled and run as doctests like the README,
/// so every Rust snippet in them stays true. `scripts/check_links.py` fails when a chapter that
/// `docs/src/SUMMARY.md` lists is missing here.
#[cfg(doctest)]
mod guide {
    #[doc = include_str!("../docs/src/introduction.md")]
    struct Introduction;
    #[doc = include_str!("../docs/src/concepts.md")]
    struct Concepts;
    #[doc = include_str!("../docs/src/library.md")]
    struct Library;
    #[doc = include_str!("../docs/src/cli.md")]
    struct Cli;
    #[doc = include_str!("../docs/src/scenarios.md")]
    struct Scenarios;
    #[doc = include_str!("../docs/src/view.md")]
    struct View;
    #[doc = include_str!("../docs/src/drivers.md")]
    struct Drivers;
    #[doc = include_str!("../docs/src/caller-owned-devices.md")]
    struct CallerOwnedDevices;
    #[doc = include_str!("../docs/src/writing-a-driver.md")]
    struct WritingADriver;
    #[doc = include_str!("../docs/src/scheduling.md")]
    struct Scheduling;
    #[doc = include_str!("../docs/src/speculation.md")]
    struct Speculation;
    #[doc = include_str!("../docs/src/mpi.md")]
    struct Mpi;
    #[doc = include_str!("../docs/src/c-api.md")]
    struct CApi;
    #[doc = include_str!("../docs/src/architecture.md")]
    struct Architecture;
    #[doc = include_str!("../docs/src/crates.md")]
    struct Crates;
    #[doc = include_str!("../docs/src/performance.md")]
    struct Performance;
    #[doc = include_str!("../docs/src/taskbench.md")]
    struct TaskBench;
    #[doc = include_str!("../docs/src/testing.md")]
    struct Testing;
}
