//! Speculative cancellation, each figure beside its floor in the same run.
//!
//! - `decide`: [`Rejection::classify`] on 256 varied eight-entry frontiers (some holding the
//!   draft axis beyond the accepted epoch, some below, some without it, some tainted), so the
//!   branch predictor cannot learn one answer. Floors: the plain lookup it is built on
//!   ([`Frontier::get`]) and a dominance check against a one-entry requirement
//!   ([`Frontier::dominates`]) over the same frontiers.
//! - `cancel`: [`Device::cancel_speculative`] with 10^3 and 10^4 operations queued on a CPU
//!   queue behind a closed gate, half of them depending on the rejected draft. Only the call
//!   is timed (both walks: claim, then fail what was cancelled); the operations are submitted
//!   before and drained after. Floor: the same number of decisions over frontiers in a plain
//!   array, which is the work the walk cannot avoid. The growth from 10^3 to 10^4 is the ratio
//!   of the two `cancel` figures (linear: about 10).

use std::hint::black_box;
use std::time::{Duration, Instant};

use causeway::axis::{Axis, Domain};
use causeway::cpu::CpuBackend;
use causeway::device::{Device, Op, QueueConfig, QueueId, SemaphoreId, Work};
use causeway::frontier::{Frontier, Point};
use causeway::scope::{Endpoint, Scope};
use causeway::speculation::Rejection;
use causeway::PoolConfig;
use causeway::FRONTIER_CAPACITY;
use criterion::{criterion_main, BenchmarkId, Criterion};

const HOME: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

fn axis(ordinal: u64) -> Axis {
    Axis::new(0, Domain::Queue, ordinal)
}

/// 256 frontiers of eight entries over 12 axes; axis 1 is the draft.
fn frontiers() -> Vec<Frontier<FRONTIER_CAPACITY>> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..256)
        .map(|_| {
            let mut frontier = Frontier::new();
            while frontier.len() < 8 {
                frontier.insert_or_raise(axis(1 + next() % 12), 1 + next() % 64);
            }
            if next() % 8 == 0 {
                frontier.taint();
            }
            frontier
        })
        .collect()
}

fn decide(c: &mut Criterion) {
    let frontiers = frontiers();
    let rejection = Rejection::new(axis(1), 32);
    let requirement = Frontier::<FRONTIER_CAPACITY>::from_points([Point::new(axis(1), 33)]);
    let mut group = c.benchmark_group("speculation/decide");
    group.throughput(criterion::Throughput::Elements(frontiers.len() as u64));
    group.bench_function("classify", |b| {
        b.iter(|| {
            frontiers.iter().filter(|f| rejection.classify(black_box(f)).is_dependent()).count()
        })
    });
    group.bench_function("floor: get", |b| {
        b.iter(|| frontiers.iter().filter(|f| black_box(f).get(axis(1)).is_some()).count())
    });
    group.bench_function("floor: dominates", |b| {
        b.iter(|| frontiers.iter().filter(|f| black_box(f).dominates(&requirement)).count())
    });
    group.finish();
}

/// A CPU device with a draft queue and a consumer queue of room for `ops` operations.
struct CancelBench {
    device: Device,
    draft: QueueId,
    consumer: QueueId,
    gate: SemaphoreId,
    drafted: SemaphoreId,
    round: u64,
    ops: usize,
}

impl CancelBench {
    fn new(ops: usize) -> CancelBench {
        let mut builder = Device::builder(PoolConfig::with_workers(2));
        builder.driver(CpuBackend::new());
        let draft = builder.queue(QueueConfig::default());
        let mut config = QueueConfig::default();
        config.capacity = ops + 8;
        let consumer = builder.queue(config);
        let gate = builder.semaphore(0, Scope::ProcessLocal, HOME);
        let drafted = builder.semaphore(0, Scope::ProcessLocal, HOME);
        let device = builder.build().expect("a CPU device starts");
        CancelBench { device, draft, consumer, gate, drafted, round: 0, ops }
    }

    /// One round: draft `round` runs; `ops` operations queue behind the gate, the second half
    /// after a wait on that draft; the draft is rejected (timed); the gate opens and the queue
    /// drains.
    fn round(&mut self) -> Duration {
        self.round += 1;
        let round = self.round;
        let device = &self.device;
        let op = |waits, signals| Op {
            waits,
            signals,
            work: Work::Barrier,
            tag: 0,
            ..Default::default()
        };
        let drafted = [(self.drafted, round)];
        device.submit(self.draft, &op(&[], &drafted)).expect("room");
        device.wait(self.drafted, round, None).expect("ran");
        let gate = [(self.gate, round)];
        device.submit(self.consumer, &op(&gate, &[])).expect("room");
        for k in 0..self.ops {
            let waits: &[(SemaphoreId, u64)] = if k == self.ops / 2 { &drafted } else { &[] };
            device.submit(self.consumer, &op(waits, &[])).expect("room");
        }
        let rejection = Rejection::new(device.axis(self.draft).unwrap(), round - 1);
        let start = Instant::now();
        let report = device.cancel_speculative(black_box(rejection));
        let elapsed = start.elapsed();
        assert_eq!(report.cancelled, self.ops - self.ops / 2);
        device.semaphore(self.gate).unwrap().signal_external(round).expect("advances");
        while device.in_flight(self.consumer) != Some(0) {
            std::thread::yield_now();
        }
        elapsed
    }
}

fn cancel(c: &mut Criterion) {
    let frontiers = frontiers();
    let mut group = c.benchmark_group("speculation/cancel");
    group.sample_size(10);
    for ops in [1_000usize, 10_000] {
        let mut bench = CancelBench::new(ops);
        group.bench_with_input(BenchmarkId::new("cancel_speculative", ops), &ops, |b, _| {
            b.iter_custom(|iters| (0..iters).map(|_| bench.round()).sum())
        });
        let rejection = Rejection::new(axis(1), 32);
        let plain: Vec<_> = (0..ops).map(|k| frontiers[k % frontiers.len()]).collect();
        group.bench_with_input(
            BenchmarkId::new("floor: decide a plain array", ops),
            &ops,
            |b, _| {
                b.iter(|| {
                    plain.iter().filter(|f| rejection.classify(black_box(f)).is_dependent()).count()
                })
            },
        );
    }
    group.finish();
}

// `criterion_group!` emits an undocumented `pub fn`; a private module keeps it out of the
// crate's public items.
mod group {
    criterion::criterion_group!(benches, super::decide, super::cancel);
}

criterion_main!(group::benches);
