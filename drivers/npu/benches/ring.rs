//! Descriptors per second through the software device model, beside the floor of the same
//! memory layout without causeway: a raw single-producer ring of 64-byte slots between two
//! threads, with head and tail atomics and nothing else (no registers, no fences beyond the
//! release/acquire pair, no doorbell, no interrupt, no decoding; the consumer yields while
//! empty). Both move the same number of descriptors through a ring of the same size in the same
//! run; the ratio of their rates is the cost of the protocol and the model.
//!
//! - `model/batched`: EXECs of a trivial kernel, published when the ring fills (one doorbell per
//!   ring's worth), reaped as they complete;
//! - `model/each`: the same, published and doorbelled one descriptor at a time, as a driver
//!   that submits operations one by one would;
//! - `floor/raw_ring`: the raw ring.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use causeway_driver_npu::model::{DeviceModel, ExecKernel, ModelConfig};
use causeway_driver_npu::{Command, Descriptor, Reaped, EXEC_ARGUMENTS};
use criterion::{criterion_main, Criterion, Throughput};

const DESCRIPTORS: u64 = 20_000;
const RING_ORDER: u32 = 8;

fn model(c: &mut Criterion) {
    let trivial: Box<dyn ExecKernel> = Box::new(|arguments: &[u32; EXEC_ARGUMENTS], tile: u32| {
        black_box((arguments, tile));
    });
    let config = ModelConfig { engines: 1, ring_order: RING_ORDER, semaphore_slots: 1 };
    let model = DeviceModel::start(config, Arc::new(vec![trivial].into())).unwrap();
    let mut ring = model.ring(0).unwrap();
    let exec = Descriptor::new(Command::Exec { kernel: 0, tiles: 1, arguments: [0; 8] });
    let mut group = c.benchmark_group("model");
    group.throughput(Throughput::Elements(DESCRIPTORS));
    group.bench_function("batched", |b| {
        b.iter(|| {
            let mut reaped = 0u64;
            let mut count = |_: Reaped| reaped += 1;
            for _ in 0..DESCRIPTORS {
                ring.push(&exec, &mut count).unwrap();
            }
            ring.drain(&mut count).unwrap();
            assert_eq!(reaped, DESCRIPTORS);
        });
    });
    group.bench_function("each", |b| {
        b.iter(|| {
            let mut reaped = 0u64;
            let mut count = |_: Reaped| reaped += 1;
            for _ in 0..DESCRIPTORS {
                ring.push(&exec, &mut count).unwrap();
                ring.producer().publish();
            }
            ring.drain(&mut count).unwrap();
            assert_eq!(reaped, DESCRIPTORS);
        });
    });
    group.finish();
}

/// The raw ring: 64-byte slots, free-running head and tail, one producer and one consumer.
struct RawRing {
    slots: Box<[[AtomicU32; 16]]>,
    tail: AtomicU32,
    head: AtomicU32,
    stop: AtomicBool,
}

impl RawRing {
    fn consume(&self) {
        let mask = self.slots.len() as u32 - 1;
        let mut head = 0u32;
        while !self.stop.load(Ordering::Relaxed) {
            // Acquire: pairs with the producer's release store of the tail.
            if self.tail.load(Ordering::Acquire) == head {
                std::thread::yield_now();
                continue;
            }
            let slot = &self.slots[(head & mask) as usize];
            let mut sum = 0u32;
            for word in slot.iter() {
                sum = sum.wrapping_add(word.load(Ordering::Relaxed));
            }
            slot[1].store(black_box(sum) | 1, Ordering::Relaxed);
            head = head.wrapping_add(1);
            // Release: pairs with the producer's acquire load of the head.
            self.head.store(head, Ordering::Release);
        }
    }
}

fn floor(c: &mut Criterion) {
    let ring = Arc::new(RawRing {
        slots: (0..1usize << RING_ORDER)
            .map(|_| std::array::from_fn(|_| AtomicU32::new(0)))
            .collect(),
        tail: AtomicU32::new(0),
        head: AtomicU32::new(0),
        stop: AtomicBool::new(false),
    });
    let consumer = {
        let ring = Arc::clone(&ring);
        std::thread::spawn(move || ring.consume())
    };
    let mask = ring.slots.len() as u32 - 1;
    let capacity = ring.slots.len() as u32;
    let mut tail = 0u32;
    let mut group = c.benchmark_group("floor");
    group.throughput(Throughput::Elements(DESCRIPTORS));
    group.bench_function("raw_ring", |b| {
        b.iter(|| {
            let end = tail.wrapping_add(DESCRIPTORS as u32);
            while tail != end {
                // Acquire: pairs with the consumer's release store of the head.
                while tail.wrapping_sub(ring.head.load(Ordering::Acquire)) == capacity {
                    std::thread::yield_now();
                }
                let slot = &ring.slots[(tail & mask) as usize];
                for (i, word) in slot.iter().enumerate() {
                    word.store(i as u32, Ordering::Relaxed);
                }
                tail = tail.wrapping_add(1);
                // Release: pairs with the consumer's acquire load of the tail.
                ring.tail.store(tail, Ordering::Release);
            }
            // Acquire: pairs with the consumer's release store of the head (its last slot read).
            while ring.head.load(Ordering::Acquire) != end {
                std::thread::yield_now();
            }
        });
    });
    group.finish();
    ring.stop.store(true, Ordering::Relaxed);
    consumer.join().unwrap();
}

// `criterion_group!` emits an undocumented `pub fn`; a private module keeps it out of the
// workspace's `missing_docs` lint without silencing the lint for the rest of the file.
mod group {
    criterion::criterion_group!(benches, super::model, super::floor);
}

criterion_main!(group::benches);
