//! The protocol's two ends stepped by hand on one thread, over shared-memory registers: index
//! wrap-around at 2^32, a restarted engine resuming where its predecessor stopped, and the
//! interrupt coalescing rule. Builds without the hosted model.
#![cfg(not(loom))]

use causeway_driver_npu::{
    Command, CompletionStatus, Descriptor, Engine, Producer, Register, RegisterFile, RegisterIo,
    RingLayout, Step, Window,
};
use portable_atomic::AtomicU32;

/// A four-slot ring: semaphore table at 0 (two slots), completion timeline at 64, slots at 128.
const LAYOUT: RingLayout = RingLayout {
    ring_base: 128,
    ring_order: 2,
    semaphore_base: 0,
    semaphore_count: 2,
    completion_address: 64,
};

fn memory() -> Vec<AtomicU32> {
    (0..(128 + 4 * 64) / 4).map(|_| AtomicU32::new(0)).collect()
}

/// Steps `engine` until it idles; the statuses it completed.
fn run_to_idle(engine: &mut Engine<&RegisterFile>, window: &Window<'_>) -> Vec<CompletionStatus> {
    let mut statuses = Vec::new();
    loop {
        match engine.step(window) {
            Step::Completed { status, .. } => statuses.push(status),
            Step::Exec(request) => match engine.finish(window, request, Ok(())) {
                Step::Completed { status, .. } => statuses.push(status),
                other => panic!("finish gave {other:?}"),
            },
            Step::Idle { .. } => return statuses,
            Step::Transitioned => {}
            Step::Stalled { slot, value } => panic!("stalled on slot {slot} for {value}"),
        }
    }
}

#[test]
fn indices_wrap_at_two_to_the_32_without_losing_a_descriptor() {
    let memory = memory();
    let window = Window::new(&memory);
    let registers = RegisterFile::new();
    // A controller that completed 2^32 - 3 descriptors before this one started.
    registers.write(Register::Head, u32::MAX - 2);
    let mut engine = Engine::new(&registers);
    let mut producer = Producer::start(&registers, window, LAYOUT).unwrap();
    let mut reaped = 0;
    for value in 1..=20u64 {
        producer.try_push(&Descriptor::new(Command::Signal { slot: 0, value })).unwrap();
        producer.publish();
        if value % 3 == 0 {
            assert!(run_to_idle(&mut engine, &window)
                .iter()
                .all(|status| *status == CompletionStatus::Completed));
            while let Some(descriptor) = producer.reap() {
                assert_eq!(descriptor.status, Ok(CompletionStatus::Completed));
                reaped += 1;
            }
        }
    }
    let _ = run_to_idle(&mut engine, &window);
    while producer.reap().is_some() {
        reaped += 1;
    }
    assert_eq!(reaped, 20);
    assert_eq!(registers.read(Register::Head), (u32::MAX - 2).wrapping_add(20));
    assert_eq!(window.semaphore(0, 0).map(|slot| slot.value), Some(20));
    assert_eq!(producer.completion(), 20);
}

#[test]
fn a_restarted_engine_resumes_its_head_timeline_and_interrupt_count() {
    let memory = memory();
    let window = Window::new(&memory);
    let registers = RegisterFile::new();
    let mut producer = Producer::start(&registers, window, LAYOUT).unwrap();
    let barrier = Descriptor::new(Command::Barrier).with_interrupt();
    for _ in 0..3 {
        producer.try_push(&barrier).unwrap();
    }
    producer.publish();
    {
        let mut first = Engine::new(&registers);
        assert_eq!(run_to_idle(&mut first, &window).len(), 3);
        assert_eq!(registers.read(Register::InterruptStatus), 3);
    }

    let mut second = Engine::new(&registers);
    for _ in 0..3 {
        producer.reap().unwrap();
        producer.try_push(&barrier).unwrap();
    }
    producer.publish();
    assert_eq!(run_to_idle(&mut second, &window).len(), 3);
    assert_eq!(producer.completion(), 6);
    assert_eq!(registers.read(Register::Head), 6);
    assert_eq!(registers.read(Register::InterruptStatus), 6);
}

#[test]
fn unflagged_completions_raise_once_per_acknowledgement() {
    let memory = memory();
    let window = Window::new(&memory);
    let registers = RegisterFile::new();
    let mut producer = Producer::start(&registers, window, LAYOUT).unwrap();
    let mut engine = Engine::new(&registers);
    let barrier = Descriptor::new(Command::Barrier);
    for _ in 0..4 {
        producer.try_push(&barrier).unwrap();
    }
    producer.publish();
    // Acknowledge equals status at reset: the first completion raises, the rest coalesce.
    assert_eq!(run_to_idle(&mut engine, &window).len(), 4);
    assert_eq!(registers.read(Register::InterruptStatus), 1);
    for _ in 0..4 {
        producer.reap().unwrap();
    }
    let armed = producer.arm_interrupt();
    assert_eq!(armed.seen(), 1);
    for _ in 0..2 {
        producer.try_push(&barrier).unwrap();
    }
    producer.publish();
    assert_eq!(run_to_idle(&mut engine, &window).len(), 2);
    assert_eq!(registers.read(Register::InterruptStatus), 2);
}
