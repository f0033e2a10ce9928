//! The CUDA driver behind the device layer's seam. Without a CUDA driver (`libcuda.so`),
//! opening the backend is a typed error and nothing of CUDA is called; every test that needs a
//! GPU prints `skipped: no CUDA driver (libcuda.so) on this machine` and returns (the test
//! command's summary lists the skip). Where a driver is present they run, on both emulations.

use std::time::Duration;

use causeway_core::scope::Scope;
use causeway_device::{Device, DeviceBuilder, Op, QueueConfig, SemaphoreId, Work};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_cuda::{
    driver_present, ComputeKernel, CudaBackend, CudaCounts, CudaError, Emulation, EmulationChoice,
    NO_DRIVER,
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
        builder.queue(QueueConfig::on(cuda)),
        builder.queue(QueueConfig::on(cuda)),
        builder.queue(QueueConfig::on(cpu)),
    );
    let home = builder.endpoint(first).unwrap();
    let [ping, pong, done]: [SemaphoreId; 3] =
        [(); 3].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let device = builder.build().unwrap();
    for round in 1..=ROUNDS {
        let ping_waits = [(pong, round - 1)];
        let waits = &ping_waits[..usize::from(round > 1)];
        device
            .submit(
                first,
                &Op {
                    waits,
                    signals: &[(ping, round)],
                    work: tiles,
                    tag: round,
                    ..Default::default()
                },
            )
            .unwrap();
        let op = Op {
            waits: &[(ping, round)],
            signals: &[(pong, round)],
            work: tiles,
            tag: round,
            ..Default::default()
        };
        device.submit(second, &op).unwrap();
    }
    let end = Op {
        waits: &[(pong, ROUNDS)],
        signals: &[(done, 1)],
        work: Work::Barrier,
        tag: 0,
        ..Default::default()
    };
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

/// `compute` and `copy` work on two CUDA streams, the copy waiting on the saxpy: the results
/// read back are the host's arithmetic bit for bit (small multiples of one half: exact).
fn compute_and_copy(choice: EmulationChoice) {
    const ELEMENTS: usize = 10_000;
    let Some(mut cuda) = open(choice) else { return };
    let x: Vec<f32> = (0..ELEMENTS).map(|i| (i % 13) as f32 * 0.5).collect();
    let y: Vec<f32> = (0..ELEMENTS).map(|i| (i % 7) as f32).collect();
    let (add, sum) = cuda.record_compute(ComputeKernel::Add, (&x, &y), 3, 2, 0.0).unwrap();
    let (saxpy, scaled) = cuda.record_compute(ComputeKernel::Saxpy, (&x, &y), 4, 3, 2.0).unwrap();
    let words: Vec<u32> = (0..ELEMENTS as u32).map(|i| i.wrapping_mul(0x9E37_79B9)).collect();
    let (copy, copied) = cuda.record_copy(&words).unwrap();
    let mut builder: DeviceBuilder = Device::builder(PoolConfig::with_workers(2));
    let cuda = builder.driver(cuda);
    let (first, second) =
        (builder.queue(QueueConfig::on(cuda)), builder.queue(QueueConfig::on(cuda)));
    let home = builder.endpoint(first).unwrap();
    let [scaled_done, done]: [SemaphoreId; 2] =
        [(); 2].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let device = builder.build().unwrap();
    let run = |work| Work::Execute(work);
    device
        .submit(
            first,
            &Op { waits: &[], signals: &[], work: run(add), tag: 1, ..Default::default() },
        )
        .unwrap();
    let op = Op {
        waits: &[],
        signals: &[(scaled_done, 1)],
        work: run(saxpy),
        tag: 2,
        ..Default::default()
    };
    device.submit(first, &op).unwrap();
    let op = Op {
        waits: &[(scaled_done, 1)],
        signals: &[(done, 1)],
        work: run(copy),
        tag: 3,
        ..Default::default()
    };
    device.submit(second, &op).unwrap();
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    let floats = |buffer: &causeway_driver_cuda::DeviceBuffer| -> Vec<f32> {
        buffer.read_words(ELEMENTS).unwrap().into_iter().map(f32::from_bits).collect()
    };
    let expected_sum: Vec<f32> = x.iter().zip(&y).map(|(x, y)| x + y).collect();
    let expected_scaled: Vec<f32> = x.iter().zip(&y).map(|(x, y)| y + 2.0 * 3.0 * x).collect();
    assert_eq!(floats(&sum), expected_sum);
    assert_eq!(floats(&scaled), expected_scaled);
    assert_eq!(copied.read_words(ELEMENTS).unwrap(), words);
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

#[test]
fn gpu_compute_and_copy_on_the_best_emulation() {
    compute_and_copy(EmulationChoice::Best);
}

#[test]
fn gpu_compute_and_copy_on_events() {
    compute_and_copy(EmulationChoice::Events);
}

/// The backend on the application's own context and streams: causeway's CPU → CUDA → CPU
/// chain runs on the lent stream beside the application's work, and when the device is gone
/// the application's context and stream still work (the backend destroyed neither).
#[test]
fn gpu_on_the_applications_context_and_stream_which_outlive_the_backend() {
    use causeway_driver_cuda::CudaContext;

    if !driver_present() {
        println!("skipped: {NO_DRIVER}");
        return;
    }
    let context = CudaContext::new(0).expect("a CUDA driver is present: device 0 opens");
    let lent = context.new_stream().expect("a stream of the application's");
    let other = CudaContext::new(0).expect("a second context");
    let foreign = other.new_stream().expect("a stream of the second context");
    // Two contexts of one device may be the same primary context: only a distinct one is
    // foreign.
    if context.cu_ctx() != other.cu_ctx() {
        let refused = CudaBackend::on_context(&context, vec![foreign], EmulationChoice::Best);
        assert_eq!(refused.err(), Some(CudaError::ForeignStream));
    }
    let mut cuda = CudaBackend::on_context(&context, vec![lent.clone()], EmulationChoice::Best)
        .expect("the backend builds on the lent context");
    let tiles = Work::Execute(cuda.command_buffer(vec![(4, Duration::from_micros(10))]).unwrap());
    let mut builder: DeviceBuilder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let cuda = builder.driver(cuda);
    let (before, on_gpu, after) = (
        builder.queue(QueueConfig::on(cpu)),
        builder.queue(QueueConfig::on(cuda)),
        builder.queue(QueueConfig::on(cpu)),
    );
    let home = builder.endpoint(before).unwrap();
    let [uploaded, computed, done]: [SemaphoreId; 3] =
        [(); 3].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let device = builder.build().unwrap();
    device.submit(before, &Op { signals: &[(uploaded, 1)], ..Op::default() }).unwrap();
    let compute =
        Op { waits: &[(uploaded, 1)], signals: &[(computed, 1)], work: tiles, ..Op::default() };
    device.submit(on_gpu, &compute).unwrap();
    let check = Op { waits: &[(computed, 1)], signals: &[(done, 1)], ..Op::default() };
    device.submit(after, &check).unwrap();
    assert_eq!(device.wait(done, 1, Some(HANG_GUARD)), Ok(1));
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    // The application's stream and context are still its own, and alive.
    lent.synchronize().expect("the lent stream survives the backend");
    context.new_stream().expect("the lent context survives the backend");
}
