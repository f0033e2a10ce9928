//! The CUDA driver behind the device layer's seam. Without a CUDA driver (`libcuda.so`),
//! opening the backend is a typed error and nothing of CUDA is called; every test that needs a
//! GPU prints `skipped: no CUDA driver (libcuda.so) on this machine` and returns (the test
//! command's summary lists the skip). Where a driver is present they run, on both emulations.

use std::time::Duration;

use causeway_core::scope::Scope;
use causeway_device::{Device, DeviceBuilder, Op, QueueConfig, SemaphoreId, Work};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_cuda::{
    driver_present, CudaBackend, CudaCounts, CudaError, Emulation, EmulationChoice, NO_DRIVER,
};
use causeway_runtime::blocking::wait;
use causeway_runtime::PoolConfig;

const HANG_GUARD: Duration = Duration::from_secs(120);

/// The backend on device 0, or `None` after printing the skip where no driver is installed.
fn open(choice: EmulationChoice) -> Option<CudaBackend> {
    if !driver_present() {
        println!("skipped: {NO_DRIVER}");
        return None;
    }
    Some(CudaBackend::open(0, choice).expect("a CUDA driver is present: device 0 opens"))
}

#[test]
fn without_a_driver_opening_is_a_typed_error_not_a_panic() {
    let opened = CudaBackend::open(0, EmulationChoice::Best);
    if driver_present() {
        // The other tests exercise the device; here only the contract of `open` is checked.
        assert!(opened.is_ok() || !matches!(opened, Err(CudaError::NoDriver)));
    } else {
        let error = opened.expect_err("no driver: open must fail");
        assert_eq!(error, CudaError::NoDriver);
        assert_eq!(error.to_string(), NO_DRIVER);
    }
}

#[test]
fn a_command_buffer_needs_tiles() {
    let Some(mut cuda) = open(EmulationChoice::Best) else { return };
    assert_eq!(cuda.command_buffer(vec![]), Err(CudaError::EmptyCommandBuffer));
    assert_eq!(cuda.command_buffer(vec![(0, Duration::ZERO)]), Err(CudaError::EmptyCommandBuffer));
}

fn queue_of(driver: causeway_device::DriverId) -> QueueConfig {
    let mut config = QueueConfig::default();
    config.driver = driver;
    config
}

/// `ROUNDS` rounds of a ping-pong between two CUDA streams (each operation waits on the
/// other's last), then a CPU queue waits on the end: every wait the layer resolved as a device
/// wait made one native CUDA wait, the rest none.
fn ping_pong(choice: EmulationChoice, expected: Option<Emulation>) {
    const ROUNDS: u64 = 50_000;
    let Some(mut cuda) = open(choice) else { return };
    if let Some(expected) = expected {
        assert_eq!(cuda.emulation(), expected);
    }
    let tiles = Work::Execute(cuda.command_buffer(vec![(4, Duration::from_nanos(100))]).unwrap());
    let tally = cuda.tally();
    let mut builder: DeviceBuilder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let cuda = builder.driver(cuda);
    let (first, second, host) = (
        builder.queue(queue_of(cuda)),
        builder.queue(queue_of(cuda)),
        builder.queue(queue_of(cpu)),
    );
    let home = builder.endpoint(first).unwrap();
    let [ping, pong, done]: [SemaphoreId; 3] =
        [(); 3].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let device = builder.build().unwrap();
    for round in 1..=ROUNDS {
        let ping_waits = [(pong, round - 1)];
        let waits = &ping_waits[..usize::from(round > 1)];
        device
            .submit(first, &Op { waits, signals: &[(ping, round)], work: tiles, tag: round })
            .unwrap();
        let op = Op { waits: &[(ping, round)], signals: &[(pong, round)], work: tiles, tag: round };
        device.submit(second, &op).unwrap();
    }
    let end = Op { waits: &[(pong, ROUNDS)], signals: &[(done, 1)], work: Work::Barrier, tag: 0 };
    device.submit(host, &end).unwrap();
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, Some(HANG_GUARD)), Ok(1));

    let CudaCounts { native, completed, elided, held, .. } = tally.counts();
    let mut device_waits = 0;
    let mut resolved_elsewhere = 0;
    for queue in [first, second] {
        let resolved = device.resolution_counts(queue).unwrap();
        device_waits += resolved.device;
        resolved_elsewhere += resolved.elided + resolved.satisfied + resolved.held;
    }
    assert_eq!(native + completed, device_waits, "one plan per device wait");
    assert_eq!(elided + held, resolved_elsewhere, "no call for any other wait");
    assert_eq!(native + completed + elided + held, 2 * ROUNDS - 1, "one per edge");
    println!(
        "{choice:?}: {native} native waits, {completed} completed, {elided} elided, {held} held"
    );
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

#[test]
fn gpu_ping_pong_across_streams_on_the_best_emulation() {
    ping_pong(EmulationChoice::Best, None);
}

#[test]
fn gpu_ping_pong_across_streams_on_events() {
    ping_pong(EmulationChoice::Events, Some(Emulation::Events));
}
