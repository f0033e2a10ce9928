//! The software device model end to end: 10^5 descriptors across two rings with cross-ring
//! WAIT/SIGNAL and real f32 kernels, every malformed-descriptor kind, a full ring, a refused
//! configuration and a host-mirrored semaphore. Nothing here depends on timing: kernels that
//! must hold the device block on a gate the test opens.
#![cfg(all(feature = "hosted", not(loom)))]

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use causeway_driver_cpu::DeviceKernel;
use causeway_driver_npu::model::{DeviceModel, ExecKernel, ModelConfig, TileKernel};
use causeway_driver_npu::{
    Command, CompletionError, CompletionStatus, ConfigFault, Control, Descriptor, DescriptorError,
    Engine, RawDescriptor, Reaped, Register, RegisterFile, RegisterIo, RingFull, RingLayout, Step,
    Window, EXEC_ARGUMENTS,
};

const ELEMENTS: usize = 64;
const TILES: u32 = 4;

fn input_x(i: usize) -> f32 {
    (i % 13) as f32 * 0.5
}

fn input_y(i: usize) -> f32 {
    (i % 7) as f32
}

fn exec(kernel: u32, tiles: u32, arguments: [u32; EXEC_ARGUMENTS]) -> Descriptor {
    Descriptor::new(Command::Exec { kernel, tiles, arguments })
}

fn signal(slot: u32, value: u64) -> Descriptor {
    Descriptor::new(Command::Signal { slot, value })
}

fn wait(slot: u32, value: u64) -> Descriptor {
    Descriptor::new(Command::Wait { slot, value })
}

/// Element range of `tile` of `tiles` over `n` elements.
fn tile_range(tile: u32, tiles: u32, n: usize) -> std::ops::Range<usize> {
    let per_tile = n.div_ceil(tiles as usize);
    let start = (tile as usize * per_tile).min(n);
    start..(start + per_tile).min(n)
}

/// f32 buffers the kernels share with the test; elements as bits, so kernels on engine threads
/// write them without locks (each element belongs to one tile; descriptors of one ring run in
/// order).
fn buffer(values: impl Fn(usize) -> f32) -> Arc<[AtomicU32]> {
    (0..ELEMENTS).map(|i| AtomicU32::new(values(i).to_bits())).collect()
}

fn read(buffer: &[AtomicU32], i: usize) -> f32 {
    f32::from_bits(buffer[i].load(Ordering::Relaxed))
}

fn expect_completed(reaped: Reaped) {
    assert_eq!(reaped.status, Ok(CompletionStatus::Completed), "descriptor {}", reaped.sequence);
}

#[test]
fn a_hundred_thousand_descriptors_across_two_rings_compute_the_right_answer() {
    const ROUNDS: u64 = 25_000;
    let x = buffer(input_x);
    let y = buffer(input_y);
    let sum = buffer(|_| 0.0);
    let saxpy_runs = Arc::new(AtomicU64::new(0));
    let early_observations = Arc::new(AtomicU64::new(0));

    // Kernel 0: y += a·x, `a` in argument 0 (the CLI's `compute` saxpy, with `a` from the
    // descriptor); counts its runs in tile 0.
    let saxpy: Box<dyn ExecKernel> = {
        let (x, y, runs) = (Arc::clone(&x), Arc::clone(&y), Arc::clone(&saxpy_runs));
        Box::new(move |arguments: &[u32; EXEC_ARGUMENTS], tile: u32| {
            let a = f32::from_bits(arguments[0]);
            for i in tile_range(tile, TILES, ELEMENTS) {
                let value = read(&y, i) + a * read(&x, i);
                y[i].store(value.to_bits(), Ordering::Relaxed);
            }
            if tile == 0 {
                runs.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // Kernel 1, on the other ring after WAIT slot 0 ≥ round: ring 0's SIGNAL released every
    // saxpy up to that round, so the count it reads can be no lower.
    let observe: Box<dyn ExecKernel> = {
        let (runs, early) = (Arc::clone(&saxpy_runs), Arc::clone(&early_observations));
        Box::new(move |arguments: &[u32; EXEC_ARGUMENTS], _tile: u32| {
            let round = u64::from(arguments[0]) | u64::from(arguments[1]) << 32;
            if runs.load(Ordering::Relaxed) < round {
                early.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // Kernel 2: sum = x + y, a CPU-driver kernel (tile index only, operands bound) run as is.
    let add: DeviceKernel = {
        let (x, y, sum) = (Arc::clone(&x), Arc::clone(&y), Arc::clone(&sum));
        Box::new(move |tile: u32, _: &causeway_device::Args| {
            for i in tile_range(tile, TILES, ELEMENTS) {
                sum[i].store((read(&x, i) + read(&y, i)).to_bits(), Ordering::Relaxed);
            }
        })
    };
    let kernels = vec![saxpy, observe, Box::new(TileKernel(add)) as Box<dyn ExecKernel>];
    let config = ModelConfig { engines: 2, ring_order: 6, semaphore_slots: 4 };
    let model = DeviceModel::start(config, Arc::new(kernels.into())).unwrap();

    let mut completed = [0u64; 2];
    std::thread::scope(|scope| {
        let (model, completed) = (&model, &mut completed);
        let [first, second] = completed;
        scope.spawn(move || {
            let mut ring = model.ring(0).unwrap();
            let mut reaped = |reaped: Reaped| {
                expect_completed(reaped);
                *first += 1;
            };
            let a = [1.0f32.to_bits(), 0, 0, 0, 0, 0, 0, 0];
            for round in 1..=ROUNDS {
                ring.push(&exec(0, TILES, a), &mut reaped).unwrap();
                ring.push(&signal(0, round).chained(), &mut reaped).unwrap();
            }
            ring.drain(&mut reaped).unwrap();
        });
        scope.spawn(move || {
            let mut ring = model.ring(1).unwrap();
            let mut reaped = |reaped: Reaped| {
                expect_completed(reaped);
                *second += 1;
            };
            for round in 1..=ROUNDS {
                let arguments = [round as u32, (round >> 32) as u32, 0, 0, 0, 0, 0, 0];
                ring.push(&wait(0, round), &mut reaped).unwrap();
                ring.push(&exec(1, 1, arguments).chained(), &mut reaped).unwrap();
            }
            ring.drain(&mut reaped).unwrap();
        });
    });
    assert_eq!(completed, [2 * ROUNDS, 2 * ROUNDS]);
    assert_eq!(early_observations.load(Ordering::Relaxed), 0);
    assert_eq!(saxpy_runs.load(Ordering::Relaxed), ROUNDS);
    assert_eq!(model.semaphore(0).map(|slot| (slot.value, slot.failure)), Some((ROUNDS, 0)));

    let mut ring = model.ring(0).unwrap();
    ring.push(&exec(2, TILES, [0; EXEC_ARGUMENTS]), &mut expect_completed).unwrap();
    ring.drain(&mut expect_completed).unwrap();
    assert_eq!(ring.producer().completion(), 2 * ROUNDS + 1);
    for i in 0..ELEMENTS {
        let y_expected = input_y(i) + ROUNDS as f32 * input_x(i);
        assert_eq!(read(&y, i), y_expected, "y[{i}]");
        assert_eq!(read(&sum, i), input_x(i) + y_expected, "sum[{i}]");
    }
}

/// Pushes `descriptors` and a trailing BARRIER to ring 0 of `model`; their statuses, the
/// barrier's last (the ring goes on after any failure).
fn run(model: &DeviceModel, descriptors: &[RawDescriptor]) -> Vec<CompletionStatus> {
    let mut ring = model.ring(0).unwrap();
    let mut statuses = Vec::new();
    let mut reaped = |reaped: Reaped| statuses.push(reaped.status.unwrap());
    for raw in descriptors.iter().chain([&Descriptor::new(Command::Barrier).encode()]) {
        while ring.producer().try_push_raw(raw).is_err() {
            ring.drain(&mut reaped).unwrap();
        }
    }
    ring.drain(&mut reaped).unwrap();
    assert_eq!(statuses.last(), Some(&CompletionStatus::Completed));
    statuses
}

fn failed(error: CompletionError) -> CompletionStatus {
    CompletionStatus::Failed(error)
}

#[test]
fn every_malformed_descriptor_fails_alone_and_the_ring_goes_on() {
    let panicking: Box<dyn ExecKernel> =
        Box::new(|_: &[u32; EXEC_ARGUMENTS], _: u32| panic!("a kernel that fails"));
    let config = ModelConfig { engines: 1, ring_order: 3, semaphore_slots: 2 };
    let model = DeviceModel::start(config, Arc::new(vec![panicking].into())).unwrap();

    let mut unknown_opcode = Descriptor::new(Command::Barrier).encode();
    unknown_opcode.0[0] = 0x7F;
    let mut reserved_bits = Descriptor::new(Command::Barrier).encode();
    reserved_bits.0[0] |= 1 << 31;
    let zeroed = RawDescriptor([0; 16]);
    let cases = [
        (unknown_opcode, failed(CompletionError::Malformed(DescriptorError::UnknownOpcode))),
        (zeroed, failed(CompletionError::Malformed(DescriptorError::UnknownOpcode))),
        (reserved_bits, failed(CompletionError::Malformed(DescriptorError::ReservedBits))),
        (
            signal(2, 1).encode(),
            failed(CompletionError::Malformed(DescriptorError::SemaphoreOutOfRange)),
        ),
        (
            wait(u32::MAX, 1).encode(),
            failed(CompletionError::Malformed(DescriptorError::SemaphoreOutOfRange)),
        ),
        (exec(9, 1, [0; EXEC_ARGUMENTS]).encode(), failed(CompletionError::UnknownKernel)),
        (exec(0, 1, [0; EXEC_ARGUMENTS]).encode(), failed(CompletionError::KernelFailed)),
        // Zero tiles run nothing, so even the failing kernel completes.
        (exec(0, 0, [0; EXEC_ARGUMENTS]).encode(), CompletionStatus::Completed),
    ];
    for (raw, expected) in cases {
        assert_eq!(run(&model, &[raw]), [expected, CompletionStatus::Completed], "{raw:?}");
    }

    // A SIGNAL that does not advance fails and fails its slot; a WAIT on it then fails instead
    // of stalling, and so does a later SIGNAL of it.
    let statuses = run(
        &model,
        &[signal(1, 5).encode(), signal(1, 5).encode(), wait(1, 1).encode(), signal(1, 9).encode()],
    );
    assert_eq!(
        statuses,
        [
            CompletionStatus::Completed,
            failed(CompletionError::SignalNotAdvancing),
            failed(CompletionError::SemaphoreFailed),
            failed(CompletionError::SemaphoreFailed),
            CompletionStatus::Completed,
        ]
    );
    assert_eq!(model.semaphore(1).map(|slot| slot.value), Some(5));

    // A failing EXEC fails the SIGNAL chained to it, which fails its slot; the next unchained
    // descriptor runs.
    let statuses = run(
        &model,
        &[
            exec(0, 1, [0; EXEC_ARGUMENTS]).encode(),
            signal(0, 1).chained().encode(),
            Descriptor::new(Command::Barrier).chained().encode(),
            wait(0, 1).encode(),
        ],
    );
    assert_eq!(
        statuses,
        [
            failed(CompletionError::KernelFailed),
            failed(CompletionError::ChainFailed),
            failed(CompletionError::ChainFailed),
            failed(CompletionError::SemaphoreFailed),
            CompletionStatus::Completed,
        ]
    );
    assert_ne!(model.semaphore(0).map(|slot| slot.failure), Some(0));
}

/// A kernel that blocks until the test opens its gate.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    entered: AtomicU64,
}

impl Gate {
    fn pass(&self) {
        self.entered.fetch_add(1, Ordering::Relaxed);
        let open = self.open.lock().unwrap();
        drop(self.opened.wait_while(open, |open| !*open).unwrap());
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

#[test]
fn a_full_ring_refuses_then_waits_and_loses_nothing() {
    const PUSHED: u64 = 100;
    let gate = Arc::new(Gate::default());
    let runs = Arc::new(AtomicU64::new(0));
    let kernel: Box<dyn ExecKernel> = {
        let (gate, runs) = (Arc::clone(&gate), Arc::clone(&runs));
        Box::new(move |arguments: &[u32; EXEC_ARGUMENTS], _: u32| {
            gate.pass();
            // Each EXEC carries its own sequence number: they must run in order, each once.
            let previous = runs.fetch_add(1, Ordering::Relaxed);
            assert_eq!(u64::from(arguments[0]), previous + 1);
        })
    };
    let config = ModelConfig { engines: 1, ring_order: 2, semaphore_slots: 1 };
    let model = DeviceModel::start(config, Arc::new(vec![kernel].into())).unwrap();
    let mut ring = model.ring(0).unwrap();
    let arguments = |sequence: u64| [sequence as u32, 0, 0, 0, 0, 0, 0, 0];
    for sequence in 1..=4 {
        assert_eq!(ring.producer().try_push(&exec(0, 1, arguments(sequence))), Ok(sequence));
    }
    assert_eq!(ring.producer().try_push(&exec(0, 1, arguments(5))), Err(RingFull));
    ring.producer().publish();
    // Still full while the device holds the first one in its kernel.
    assert_eq!(ring.producer().try_push(&exec(0, 1, arguments(5))), Err(RingFull));

    let mut completed = 0;
    std::thread::scope(|scope| {
        scope.spawn(|| gate.open());
        let mut reaped = |reaped: Reaped| {
            expect_completed(reaped);
            completed += 1;
            assert_eq!(reaped.sequence, completed);
        };
        for sequence in 5..=PUSHED {
            assert_eq!(ring.push(&exec(0, 1, arguments(sequence)), &mut reaped), Ok(sequence));
        }
        ring.drain(&mut reaped).unwrap();
    });
    assert_eq!(completed, PUSHED);
    assert_eq!(runs.load(Ordering::Relaxed), PUSHED);
}

#[test]
fn a_wait_is_released_by_a_value_the_host_mirrors() {
    let model = DeviceModel::start(
        ModelConfig { engines: 1, ring_order: 2, semaphore_slots: 2 },
        Arc::new(vec![].into()),
    )
    .unwrap();
    let mut ring = model.ring(0).unwrap();
    ring.producer().try_push(&wait(1, 7)).unwrap();
    ring.producer().try_push(&signal(0, 1).chained().with_interrupt()).unwrap();
    ring.producer().publish();
    // Not reached yet: the engine is stalled (or about to be) on slot 1; the mirror releases it.
    assert!(model.signal_from_host(1, 7));
    assert!(!model.signal_from_host(2, 1));
    let mut statuses = Vec::new();
    ring.drain(&mut |reaped| statuses.push(reaped.status)).unwrap();
    assert_eq!(statuses, [Ok(CompletionStatus::Completed); 2]);
    assert_eq!(model.semaphore(0).map(|slot| slot.value), Some(1));
}

#[test]
fn the_engine_refuses_a_layout_outside_its_window_and_raises_the_interrupt() {
    let memory: Vec<_> = (0..64).map(|_| portable_atomic::AtomicU32::new(0)).collect();
    let window = Window::new(&memory);
    let registers = RegisterFile::new();
    let layout = RingLayout {
        ring_base: 64,
        ring_order: 4, // 16 slots of 64 bytes: beyond the 256-byte window
        semaphore_base: 0,
        semaphore_count: 1,
        completion_address: 16,
    };
    layout.program(&registers);
    registers.write(Register::Control, Control::Run as u32);
    let mut engine = Engine::new(&registers);
    assert_eq!(engine.step(&window), Step::Transitioned);
    assert_eq!(
        ConfigFault::from_code(registers.read(Register::Fault)),
        Some(ConfigFault::RingOutsideWindow)
    );
    assert_eq!(registers.read(Register::InterruptStatus), 1);
    assert!(matches!(engine.step(&window), Step::Idle { .. }));
    // Stop clears the fault; the engine is back at reset.
    registers.write(Register::Control, Control::Stop as u32);
    assert_eq!(engine.step(&window), Step::Transitioned);
    assert_eq!(registers.read(Register::Fault), 0);
    assert!(matches!(engine.step(&window), Step::Idle { .. }));
}

#[test]
fn a_model_stops_with_an_engine_stalled_on_a_wait_never_reached() {
    let config = ModelConfig { engines: 2, ring_order: 1, semaphore_slots: 1 };
    let model = DeviceModel::start(config, Arc::new(vec![].into())).unwrap();
    {
        let mut ring = model.ring(0).unwrap();
        ring.producer().try_push(&wait(0, 1)).unwrap();
        ring.producer().publish();
    }
    // Ring 1 was never started: its engine sleeps on its doorbell. Stopping ends both.
    model.stop();
}
