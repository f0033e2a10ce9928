//! Loom models of the ring's two wake-up protocols (run with `RUSTFLAGS="--cfg loom"`), on the
//! protocol's own code — `Producer` on one side, `Engine` on the other — over a one-slot ring:
//!
//! - **doorbell**: an engine that goes idle while the host starts the ring and publishes a
//!   descriptor never sleeps through it — whenever it answers `Idle { doorbell }` and the
//!   doorbell register still holds that value at the end, it has consumed everything published;
//! - **interrupt**: a host that arms its interrupt wait while the engine completes a descriptor
//!   never sleeps through the completion — whenever it decides to sleep on a status value, the
//!   status register no longer holds it at the end (the sleep returns at once or is woken).
#![cfg(loom)]

use causeway_driver_npu::{
    Command, Descriptor, Engine, Producer, Register, RegisterFile, RegisterIo, RingLayout, Step,
    Window,
};
use loom::sync::atomic::AtomicU32;
use loom::sync::Arc;
use loom::thread;

/// A one-slot ring: semaphore table at 0 (one slot), completion timeline at 16, slot 0 at 64.
const LAYOUT: RingLayout = RingLayout {
    ring_base: 64,
    ring_order: 0,
    semaphore_base: 0,
    semaphore_count: 1,
    completion_address: 16,
};
const WORDS: usize = 32;

struct Device {
    memory: Vec<AtomicU32>,
    registers: RegisterFile,
}

fn device() -> Arc<Device> {
    Arc::new(Device {
        memory: (0..WORDS).map(|_| AtomicU32::new(0)).collect(),
        registers: RegisterFile::new(),
    })
}

#[test]
fn a_doorbell_written_while_the_engine_goes_idle_is_never_lost() {
    loom::model(|| {
        let device = device();
        let host = {
            let device = Arc::clone(&device);
            thread::spawn(move || {
                let window = Window::new(&device.memory);
                let mut producer = Producer::start(&device.registers, window, LAYOUT).unwrap();
                producer.try_push(&Descriptor::new(Command::Barrier)).unwrap();
                producer.publish();
            })
        };
        let window = Window::new(&device.memory);
        let mut engine = Engine::new(&device.registers);
        let mut completed = 0;
        let slept_on = loop {
            match engine.step(&window) {
                Step::Idle { doorbell } => break doorbell,
                Step::Completed { .. } => completed += 1,
                Step::Transitioned => {}
                other => panic!("unexpected step {other:?}"),
            }
        };
        host.join().unwrap();
        if device.registers.read(Register::Doorbell) == slept_on {
            // The futex would sleep for good: only sound if nothing was left to do.
            assert_eq!(completed, 1, "the engine slept through a published descriptor");
        }
    });
}

/// The device's registers, owned, so an engine can move into a loom thread.
struct Registers(Arc<Device>);

impl RegisterIo for Registers {
    fn read(&self, register: Register) -> u32 {
        self.0.registers.read(register)
    }

    fn write(&self, register: Register, value: u32) {
        self.0.registers.write(register, value);
    }
}

#[test]
fn a_completion_raised_while_the_host_arms_its_wait_is_never_lost() {
    loom::model(|| {
        let device = device();
        let window = Window::new(&device.memory);
        let mut producer = Producer::start(&device.registers, window, LAYOUT).unwrap();
        let mut engine = Engine::new(Registers(Arc::clone(&device)));
        // Before the race, one descriptor completes unacknowledged (it asks for the interrupt),
        // so the status is ahead of the acknowledge: the engine raises for the next completion
        // only if it sees the host's new acknowledge.
        producer.try_push(&Descriptor::new(Command::Barrier).with_interrupt()).unwrap();
        producer.publish();
        while !matches!(engine.step(&window), Step::Completed { .. }) {}
        assert!(producer.reap().is_some());
        assert_eq!(device.registers.read(Register::InterruptStatus), 1);

        producer.try_push(&Descriptor::new(Command::Barrier)).unwrap();
        producer.publish();
        let device_side = {
            let device = Arc::clone(&device);
            thread::spawn(move || {
                let window = Window::new(&device.memory);
                loop {
                    match engine.step(&window) {
                        Step::Completed { .. } => return,
                        Step::Transitioned => {}
                        other => panic!("unexpected step {other:?}"),
                    }
                }
            })
        };
        let mut sleeps_on = None;
        if producer.reap().is_none() {
            let armed = producer.arm_interrupt();
            if producer.reap().is_none() {
                sleeps_on = Some(armed.seen());
            }
        }
        device_side.join().unwrap();
        if let Some(seen) = sleeps_on {
            assert_ne!(
                device.registers.read(Register::InterruptStatus),
                seen,
                "the host slept through a completion"
            );
        }
    });
}
