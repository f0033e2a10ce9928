//! Per-submission arguments: every operation's tag, queue and [`Args`] reach its host function
//! or its command buffer's tiles, for each submission apart, with one function or one buffer
//! registered for all of them; host functions and command buffers registered while the device
//! runs; a full host-function table and an id never handed out refused with typed errors.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{
    Args, CommandBufferId, Device, HostCallId, HostCallsFull, Invocation, Op, QueueConfig,
    SubmitError, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_runtime::blocking::wait;
use causeway_runtime::PoolConfig;

const PATIENCE: Option<Duration> = Some(Duration::from_secs(60));
const SUBMIT_PATIENCE: Duration = Duration::from_secs(60);

/// What a host function saw that it should not have: a wrong tag, queue or argument.
#[derive(Default)]
struct Seen {
    calls: AtomicU64,
    sum: AtomicU64,
    wrong: AtomicU64,
}

#[test]
fn each_host_call_sees_its_own_operations_tag_queue_and_arguments() {
    const OPS: u64 = 100_000;
    let seen = Arc::new(Seen::default());
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let queues = [(); 2].map(|()| builder.queue(QueueConfig::on(cpu).capacity(256)));
    let call = builder.host_call({
        let seen = Arc::clone(&seen);
        move |call: &Invocation| {
            // Tags are numbered across both queues; even tags go to the first.
            let tag = call.tag;
            let right = call.args.u64(0) == tag
                && call.args.u64(1) == tag.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                && call.args.u32(4) == (tag % 2) as u32
                && call.queue.index() == (tag % 2) as usize;
            seen.calls.fetch_add(1, Relaxed);
            seen.sum.fetch_add(call.args.u64(0), Relaxed);
            seen.wrong.fetch_add(u64::from(!right), Relaxed);
            Ok(())
        }
    });
    let home = builder.endpoint(queues[0]).expect("the queue has an axis");
    let done = [(); 2].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let device = builder.build().expect("the device starts");
    assert_eq!(queues.map(|queue| queue.index()), [0, 1], "numbered in creation order");

    for tag in 0..OPS {
        let parity = (tag % 2) as usize;
        let args = Args::from_u64s([tag, tag.wrapping_mul(0x9E37_79B9_7F4A_7C15)])
            .with_u32(4, parity as u32);
        let signals = [(done[parity], tag / 2 + 1)];
        let op = Op { signals: &signals, work: Work::Host(call), tag, args, ..Op::default() };
        device.submit_timeout(queues[parity], &op, SUBMIT_PATIENCE).expect("the queue takes it");
    }
    for (parity, done) in done.into_iter().enumerate() {
        let semaphore = device.semaphore(done).expect("declared");
        // `OPS` is even: each queue ran half.
        wait(semaphore, OPS / 2, PATIENCE)
            .unwrap_or_else(|error| panic!("queue {parity}: {error}"));
    }
    assert_eq!(seen.calls.load(Relaxed), OPS);
    assert_eq!(seen.wrong.load(Relaxed), 0, "a call saw another operation's tag or arguments");
    assert_eq!(seen.sum.load(Relaxed), OPS * (OPS - 1) / 2);
    device.shutdown(Duration::from_secs(10));
}

#[test]
fn every_tile_of_each_execution_sees_that_executions_arguments() {
    const EXECUTIONS: u64 = 2_000;
    const TILES: u32 = 8;
    // Per tile, the sum of the first argument over the executions it ran in, and the count of
    // calls whose second argument did not match the first.
    let sums: Arc<Vec<AtomicU64>> = Arc::new((0..TILES).map(|_| AtomicU64::new(0)).collect());
    let wrong = Arc::new(AtomicU64::new(0));
    let cpu = CpuBackend::new();
    let buffer = cpu
        .command_buffer(vec![(
            TILES,
            Box::new({
                let (sums, wrong) = (Arc::clone(&sums), Arc::clone(&wrong));
                move |tile: u32, args: &Args| {
                    sums[tile as usize].fetch_add(args.u64(0), Relaxed);
                    wrong.fetch_add(u64::from(args.u64(1) != args.u64(0) + 1), Relaxed);
                }
            }),
        )])
        .expect("a recordable buffer");
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(cpu);
    // Two queues take turns with the one buffer: executions of it are serialised by the
    // driver, each with the arguments of the operation that issued it.
    let queues = [(); 2].map(|()| builder.queue(QueueConfig::on(cpu).capacity(64)));
    let home = builder.endpoint(queues[0]).expect("the queue has an axis");
    let done = builder.semaphore(0, Scope::DeviceLocal, home);
    let device = builder.build().expect("the device starts");

    for execution in 0..EXECUTIONS {
        let args = Args::from_u64s([execution, execution + 1]);
        let waits = [(done, execution)];
        let waits = if execution == 0 { &[][..] } else { &waits[..] };
        let signals = [(done, execution + 1)];
        let op = Op { waits, signals: &signals, work: Work::Execute(buffer), args, tag: execution };
        let queue = queues[(execution % 2) as usize];
        device.submit_timeout(queue, &op, SUBMIT_PATIENCE).expect("the queue takes it");
    }
    let semaphore = device.semaphore(done).expect("declared");
    wait(semaphore, EXECUTIONS, PATIENCE).expect("every execution ran");
    assert_eq!(wrong.load(Relaxed), 0, "a tile saw a mix of two executions' arguments");
    for (tile, sum) in sums.iter().enumerate() {
        assert_eq!(sum.load(Relaxed), EXECUTIONS * (EXECUTIONS - 1) / 2, "tile {tile}");
    }
    device.shutdown(Duration::from_secs(10));
}

#[test]
fn host_functions_registered_while_the_device_runs_are_called_until_the_table_is_full() {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let queue = builder.queue(QueueConfig::on(cpu));
    let home = builder.endpoint(queue).expect("the queue has an axis");
    let done = builder.semaphore(0, Scope::DeviceLocal, home);
    let registered = builder.host_call(|_: &Invocation| Ok(()));
    builder.spare_host_calls(3);
    let device = builder.build().expect("the device starts");

    // An id the device never handed out is refused before anything is queued.
    let never = Op { work: Work::Host(HostCallId(3)), ..Op::default() };
    assert!(matches!(
        device.submit(queue, &never),
        Err(SubmitError::UnknownHostCall(HostCallId(3)))
    ));

    let total = Arc::new(AtomicU64::new(0));
    let later: Vec<HostCallId> = (1..=3)
        .map(|weight| {
            let total = Arc::clone(&total);
            device
                .host_call(move |call: &Invocation| {
                    total.fetch_add(weight * call.args.u64(0), Relaxed);
                    Ok(())
                })
                .expect("a spare slot")
        })
        .collect();
    assert_eq!(later, [HostCallId(1), HostCallId(2), HostCallId(3)]);
    let full: HostCallsFull =
        device.host_call(|_: &Invocation| Err(Failure::Aborted)).expect_err("the table is full");
    assert_eq!(full.capacity, 4);
    assert!(full.to_string().contains("spare_host_calls"), "{full}");

    let calls = [registered].into_iter().chain(later.iter().copied());
    for (value, call) in (1..).zip(calls) {
        let signals = [(done, value)];
        let args = Args::from_u64s([10]);
        let op = Op { signals: &signals, work: Work::Host(call), args, ..Op::default() };
        device.submit(queue, &op).expect("a registered function");
    }
    wait(device.semaphore(done).expect("declared"), 4, PATIENCE).expect("all four ran");
    assert_eq!(total.load(Relaxed), 10 + 20 + 30);
    device.shutdown(Duration::from_secs(10));
}

#[test]
fn command_buffers_recorded_while_the_device_runs_execute_with_their_arguments() {
    const BUFFERS: u64 = 1_000;
    const TILES: u32 = 4;
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let queues = [(); 2].map(|()| builder.queue(QueueConfig::on(cpu).capacity(64)));
    let home = builder.endpoint(queues[0]).expect("the queue has an axis");
    let done = [(); 2].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let device = builder.build().expect("the device starts");
    let backend = device.backend::<CpuBackend>(cpu).expect("the driver is the CPU backend");

    // Nothing is recorded yet: the first id is refused, not queued.
    let unrecorded = Op { work: Work::Execute(CommandBufferId(0)), ..Op::default() };
    assert!(matches!(
        device.submit(queues[0], &unrecorded),
        Err(SubmitError::UnknownCommandBuffer(CommandBufferId(0)))
    ));

    // Each buffer, recorded while earlier ones execute, adds its own number times the
    // execution's argument to every tile's cell: the totals show which buffer ran with which
    // arguments, and that each ran once.
    let cells: Arc<Vec<AtomicU64>> = Arc::new((0..TILES).map(|_| AtomicU64::new(0)).collect());
    for number in 0..BUFFERS {
        let cells = Arc::clone(&cells);
        let buffer = backend
            .command_buffer(vec![(
                TILES,
                Box::new(move |tile: u32, args: &Args| {
                    cells[tile as usize].fetch_add(number * args.u64(0), Relaxed);
                }),
            )])
            .expect("a recordable buffer");
        assert_eq!(u64::from(buffer.0), number, "ids are handed out in order");
        let parity = (number % 2) as usize;
        let signals = [(done[parity], number / 2 + 1)];
        let args = Args::from_u64s([number + 1]);
        let op = Op { signals: &signals, work: Work::Execute(buffer), args, ..Op::default() };
        device.submit_timeout(queues[parity], &op, SUBMIT_PATIENCE).expect("the queue takes it");
    }
    for done in done {
        wait(device.semaphore(done).expect("declared"), BUFFERS / 2, PATIENCE)
            .expect("every buffer ran");
    }
    // Σ n·(n + 1) for n below BUFFERS.
    let expected = (0..BUFFERS).map(|number| number * (number + 1)).sum::<u64>();
    for (tile, cell) in cells.iter().enumerate() {
        assert_eq!(cell.load(Relaxed), expected, "tile {tile}");
    }
    assert_eq!(device.backend::<CpuBackend>(causeway_device::DriverId(1)).map(|_| ()), None);
    device.shutdown(Duration::from_secs(10));
}
