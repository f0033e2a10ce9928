//! Core's causal cases on the target: the design's scheduling cases through real queue clocks,
//! semaphores, fences, collectives and reuse pools, the history's late-waiter and taint rules,
//! and the frontier algebra checked against a reference model on pseudo-random inputs (the
//! bare-metal stand-in for the host's proptest suites, which need `std`).
//!
//! Sizes are smaller than the host tests' defaults (histories of 4) so that every case fits
//! the Cortex-M0's 16 KiB of RAM with room to spare.

use core::cell::Cell;
use core::pin::pin;

use causeway_core::axis::{AxisAllocator, AxisError, Domain, MAX_ORDINAL};
use causeway_core::queue::{self, WaitError};
use causeway_core::reuse::{Acquire, BlockId, DeathRecord, FreeBlock, ReuseDecision, ReusePool};
use causeway_core::semaphore::{Arm, Cancelled, Failure, Lookup, Notify, Outcome, Timepoint};
use causeway_core::{
    Axis, Capabilities, CollectiveChannel, Endpoint, Fence, Frontier, Point, QueueClock,
    Resolution, Scope, Semaphore, SignalError, WireError,
};
use critical_section::Mutex;

use crate::cases;
use crate::harness::Case;

/// Every causal case, in order.
pub const CASES: &[Case] = cases![
    transitivity_across_three_queues,
    late_waiter_imports_the_value_two_frontier_not_value_five,
    sequential_same_queue_waits_are_all_elided,
    cross_queue_wait_needs_one_device_wait_then_repeats_are_elided,
    transitive_knowledge_elides_a_wait_never_made_directly,
    binary_event_queues_hold_waits_until_the_signal_is_submitted,
    fork_join_carries_every_branch_in_one_signal,
    external_taint_is_never_elided_and_recovers_after_a_tracked_signal,
    aged_out_values_import_the_oldest_retained_entry,
    death_frontier_reuse_across_queues,
    disjoint_workloads_never_wait_on_each_others_axes,
    eight_participant_collective_adds_one_entry,
    failure_reaches_current_and_later_waiters_and_propagates,
    timepoints_fire_in_value_order_and_cancel_cleanly,
    signals_must_advance_and_complete_in_order,
    axes_are_never_reused_and_exhaustion_is_an_error,
    frontier_algebra_matches_the_reference_model,
    frontier_wire_round_trips_and_rejects_malformations,
];

type Sem = Semaphore<4, 8>;
type Queue = QueueClock<8>;

const TIMELINE: Capabilities = Capabilities { wait_before_signal: true };
const BINARY_EVENTS: Capabilities = Capabilities { wait_before_signal: false };

fn endpoint(queue: u64) -> Endpoint {
    Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue }
}

/// One device, one process: every queue sees every device-local semaphore.
struct World {
    axes: AxisAllocator,
}

impl World {
    const fn new() -> World {
        World { axes: AxisAllocator::new(0) }
    }

    fn queue(&self) -> Queue {
        self.queue_with(TIMELINE)
    }

    fn queue_with(&self, capabilities: Capabilities) -> Queue {
        let axis = self.axes.allocate(Domain::Queue).unwrap();
        QueueClock::new(axis, endpoint(axis.to_bits()), capabilities)
    }

    fn semaphore(&self) -> Sem {
        Semaphore::new(0, Scope::DeviceLocal, endpoint(0))
    }
}

/// Submits an op on `queue` waiting on `waits` and signalling `signals` (pending); returns its
/// resolutions, in wait order, and its frontier.
fn submit<const W: usize>(
    queue: &mut Queue,
    waits: [(&Sem, u64); W],
    signals: &[(&Sem, u64)],
) -> ([Resolution; W], Frontier<8>) {
    let mut op = queue.begin();
    let mut resolutions = [Resolution::Elided; W];
    for (resolution, (semaphore, value)) in resolutions.iter_mut().zip(waits) {
        *resolution = op.wait(semaphore, value).unwrap().resolution;
    }
    let done = op.commit_signalling(signals.iter().copied()).unwrap();
    (resolutions, done.frontier)
}

/// Retires a successful op: its signals complete through the one retire path.
fn complete(signals: &[(&Sem, u64)]) {
    queue::retire(signals.iter().copied(), Ok(()));
    for &(semaphore, value) in signals {
        assert!(semaphore.value() >= value && semaphore.failure().is_none());
    }
}

fn transitivity_across_three_queues() {
    let w = World::new();
    let (mut qa, mut qb, mut qc) = (w.queue(), w.queue(), w.queue());
    let (s1, s2) = (w.semaphore(), w.semaphore());
    for _ in 0..4 {
        qa.begin().commit();
    }
    submit(&mut qa, [], &[(&s1, 1)]);
    submit(&mut qb, [(&s1, 1)], &[(&s2, 1)]);
    let (_, c) = submit(&mut qc, [(&s2, 1)], &[]);
    assert_eq!(c.get(qa.axis()), Some(5), "C learned A's work through B alone");
    assert_eq!(c.get(qb.axis()), Some(1));
    assert_eq!(c.get(qc.axis()), Some(1));
}

fn late_waiter_imports_the_value_two_frontier_not_value_five() {
    let w = World::new();
    let (mut q, mut late) = (w.queue(), w.queue());
    let s = w.semaphore();
    for v in 1..=5 {
        submit(&mut q, [], &[(&s, v)]);
        complete(&[(&s, v)]);
    }
    assert_eq!(s.value(), 5);
    let (r, f) = submit(&mut late, [(&s, 2)], &[]);
    assert_eq!(r, [Resolution::Satisfied]);
    assert_eq!(f.get(q.axis()), Some(2), "depends on S reaching 2, not on what advanced it to 5");
}

fn sequential_same_queue_waits_are_all_elided() {
    let w = World::new();
    let mut q = w.queue();
    let s = w.semaphore();
    submit(&mut q, [], &[(&s, 1)]);
    for v in 1..10 {
        let (r, _) = submit(&mut q, [(&s, v)], &[(&s, v + 1)]);
        assert_eq!(r, [Resolution::Elided]);
        // The device retires ops in order, one behind submission.
        complete(&[(&s, v)]);
    }
    assert_eq!(q.counts().elided, 9);
    assert_eq!(q.counts().device + q.counts().satisfied + q.counts().held, 0);
}

fn cross_queue_wait_needs_one_device_wait_then_repeats_are_elided() {
    let w = World::new();
    let (mut producer, mut consumer) = (w.queue(), w.queue());
    let s = w.semaphore();
    submit(&mut producer, [], &[(&s, 1)]);
    assert_eq!(submit(&mut consumer, [(&s, 1)], &[]).0, [Resolution::DeviceWait]);
    assert_eq!(submit(&mut consumer, [(&s, 1)], &[]).0, [Resolution::Elided]);
    complete(&[(&s, 1)]);
    assert_eq!(submit(&mut consumer, [(&s, 1)], &[]).0, [Resolution::Elided]);
    assert_eq!(consumer.counts().device, 1);
}

fn transitive_knowledge_elides_a_wait_never_made_directly() {
    let w = World::new();
    let (mut qa, mut qb, mut qc) = (w.queue(), w.queue(), w.queue());
    let (sa, sb) = (w.semaphore(), w.semaphore());
    submit(&mut qa, [], &[(&sa, 1)]);
    submit(&mut qb, [(&sa, 1)], &[(&sb, 1)]);
    assert_eq!(submit(&mut qc, [(&sb, 1)], &[]).0, [Resolution::DeviceWait]);
    assert_eq!(submit(&mut qc, [(&sa, 1)], &[]).0, [Resolution::Elided], "C knows A through B");
}

fn binary_event_queues_hold_waits_until_the_signal_is_submitted() {
    let w = World::new();
    let mut producer = w.queue();
    let mut events = w.queue_with(BINARY_EVENTS);
    let s = w.semaphore();
    let mut op = events.begin();
    assert_eq!(op.wait(&s, 1).unwrap().resolution, Resolution::Held);
    assert_eq!(op.commit().held, 1);
    submit(&mut producer, [], &[(&s, 1)]);
    assert_eq!(submit(&mut events, [(&s, 1)], &[]).0, [Resolution::DeviceWait]);
    assert_eq!(events.counts().held, 1);
}

fn fork_join_carries_every_branch_in_one_signal() {
    let w = World::new();
    let mut root = w.queue();
    let mut branches = [w.queue(), w.queue(), w.queue()];
    let (mut join, mut downstream) = (w.queue(), w.queue());
    let start = w.semaphore();
    let branch_done = [w.semaphore(), w.semaphore(), w.semaphore()];
    let joined = w.semaphore();

    submit(&mut root, [], &[(&start, 1)]);
    for (q, s) in branches.iter_mut().zip(&branch_done) {
        submit(q, [(&start, 1)], &[(s, 1)]);
    }
    let mut fence: Fence<'_, 4, 4, 8> = Fence::new();
    for s in &branch_done {
        fence.insert(s, 1).unwrap();
    }
    let mut op = join.begin();
    let mut waits = 0;
    op.wait_fence(&fence, |_, _, r| {
        assert_eq!(r.resolution, Resolution::DeviceWait);
        waits += 1;
    })
    .unwrap();
    op.commit_signalling([(&joined, 1)]).unwrap();
    assert_eq!(waits, 3);

    let (r, f) = submit(&mut downstream, [(&joined, 1)], &[]);
    assert_eq!(r, [Resolution::DeviceWait], "one wait downstream, not one per branch");
    for q in branches.iter().chain([&root, &join]) {
        assert_eq!(f.get(q.axis()), Some(1));
    }
    assert!(!f.is_tainted());
}

fn external_taint_is_never_elided_and_recovers_after_a_tracked_signal() {
    let w = World::new();
    let (mut tracked, mut waiter) = (w.queue(), w.queue());
    let s = w.semaphore();
    submit(&mut tracked, [], &[(&s, 1)]);
    complete(&[(&s, 1)]);
    s.signal_external(3).unwrap();

    let mut op = waiter.begin();
    let first = op.wait(&s, 2).unwrap();
    let repeat = op.wait(&s, 2).unwrap();
    op.commit();
    assert_eq!((first.resolution, first.tainted), (Resolution::Satisfied, true));
    assert_eq!((repeat.resolution, repeat.tainted), (Resolution::Satisfied, true), "never elided");
    assert_eq!(waiter.frontier().get(tracked.axis()), None, "imports nothing from the window");
    assert!(!waiter.frontier().is_tainted(), "external taint stays on the semaphore");

    submit(&mut tracked, [], &[(&s, 4)]);
    complete(&[(&s, 4)]);
    assert_eq!(submit(&mut waiter, [(&s, 4)], &[]).0, [Resolution::Satisfied]);
    assert_eq!(submit(&mut waiter, [(&s, 4)], &[]).0, [Resolution::Elided], "exact again");
    assert_eq!(waiter.counts().tainted, 2);
}

fn aged_out_values_import_the_oldest_retained_entry() {
    let w = World::new();
    let (mut q, mut late) = (w.queue(), w.queue());
    let s = w.semaphore();
    for v in 1..=6 {
        submit(&mut q, [], &[(&s, v)]);
        complete(&[(&s, v)]);
    }
    // A history of 4 kept values 3..=6: the exact entry for 1 aged out, 3 is imported (true,
    // only looser) and the event is counted.
    match s.lookup(1) {
        Lookup::Tracked { origin, reached: true, aged_out: true, .. } => {
            assert_eq!(origin, Point::new(q.axis(), 3));
        }
        _ => panic!("value 1 should import the oldest retained entry"),
    }
    let mut op = late.begin();
    let resolution = op.wait(&s, 1).unwrap();
    assert!(resolution.aged_out);
    assert_eq!(op.commit().frontier.get(q.axis()), Some(3));
    assert_eq!(s.with_history(|h| h.aged_out_imports()), 2);
}

fn death_frontier_reuse_across_queues() {
    let w = World::new();
    let (mut owner, mut reader, mut informed, mut stranger) =
        (w.queue(), w.queue(), w.queue(), w.queue());
    let (filled, read_done, freed) = (w.semaphore(), w.semaphore(), w.semaphore());

    submit(&mut owner, [], &[(&filled, 1)]);
    submit(&mut reader, [(&filled, 1)], &[(&read_done, 1)]);
    // The dealloc waits for the reader; its causal past becomes the death frontier.
    let mut dealloc = owner.begin();
    dealloc.wait(&read_done, 1).unwrap();
    let death = *dealloc.frontier();
    let done = dealloc.commit_signalling([(&freed, 1)]).unwrap();
    let record = DeathRecord::new(done.point, death);

    submit(&mut informed, [(&freed, 1)], &[]);
    assert_eq!(record.decide(informed.frontier(), &Frontier::<8>::new()), ReuseDecision::ReuseNow);

    match record.decide(stranger.frontier(), &Frontier::<8>::new()) {
        ReuseDecision::NeedsWait { missing, dealloc } => {
            assert_eq!(dealloc, done.point);
            assert_eq!(missing.len(), 2);
            assert!(missing.get(owner.axis()).is_some() && missing.get(reader.axis()).is_some());
        }
        _ => panic!("a stranger cannot reuse without waiting"),
    }
    // Waiting on the reader's signal (not the dealloc) closes the gap: try before you fence.
    submit(&mut stranger, [(&read_done, 1)], &[]);
    assert_eq!(record.decide(stranger.frontier(), &Frontier::<8>::new()), ReuseDecision::ReuseNow);
}

fn disjoint_workloads_never_wait_on_each_others_axes() {
    let w = World::new();
    let mut a = [w.queue(), w.queue()];
    let mut b = [w.queue(), w.queue()];
    let (sa, sb) = (w.semaphore(), w.semaphore());
    let mut pool: ReusePool<4> = ReusePool::new();
    let (a_axes, b_axes) = ([a[0].axis(), a[1].axis()], [b[0].axis(), b[1].axis()]);
    let avoids = |f: &Frontier<8>, axes: &[Axis; 2]| f.iter().all(|p| !axes.contains(&p.axis));
    for round in 1..=5 {
        let (_, fa) = submit(&mut a[0], [], &[(&sa, 2 * round - 1)]);
        let (_, fb) = submit(&mut b[0], [], &[(&sb, 2 * round - 1)]);
        let (_, fa2) = submit(&mut a[1], [(&sa, 2 * round - 1)], &[(&sa, 2 * round)]);
        let (_, fb2) = submit(&mut b[1], [(&sb, 2 * round - 1)], &[(&sb, 2 * round)]);
        complete(&[(&sa, 2 * round - 1), (&sb, 2 * round - 1), (&sa, 2 * round), (&sb, 2 * round)]);
        assert!(avoids(&fa, &b_axes) && avoids(&fa2, &b_axes));
        assert!(avoids(&fb, &a_axes) && avoids(&fb2, &a_axes));
    }
    // A block freed by workload A: workload B may need to wait, but only on A's entries.
    let freed_by_a = DeathRecord::new(Point::new(a[1].axis(), 6), *a[1].frontier());
    pool.release(FreeBlock { block: BlockId(1), size: 64, record: freed_by_a }).unwrap();
    match pool.acquire(64, b[1].frontier(), &Frontier::<8>::new()) {
        Acquire::NeedsWait { missing, .. } => assert!(avoids(&missing, &b_axes)),
        _ => panic!("workload B must wait for A's block"),
    }
    assert!(matches!(
        pool.acquire(64, a[1].frontier(), &Frontier::<8>::new()),
        Acquire::Reuse { block: BlockId(1), size: 64 }
    ));
    assert!(pool.is_empty());
}

fn eight_participant_collective_adds_one_entry() {
    let w = World::new();
    let mut participants: [Queue; 8] = core::array::from_fn(|_| w.queue());
    let mut channel =
        CollectiveChannel::new(w.axes.allocate(Domain::Collective).unwrap(), 8).unwrap();
    let done = w.semaphore();
    for q in &mut participants {
        q.begin().commit();
    }
    let round = channel.begin_round().unwrap();
    for q in &mut participants {
        let before = q.frontier().len();
        let mut op = q.begin();
        op.join_collective(&round);
        op.commit();
        assert_eq!(q.frontier().len(), before + 1, "one channel entry, not one per peer");
        assert!(!q.frontier().is_tainted());
    }
    let signal = Frontier::<8>::from_points([round.point()]);
    done.signal(1, round.point(), &signal).unwrap();
    let mut consumer = w.queue();
    let (_, f) = submit(&mut consumer, [(&done, 1)], &[]);
    assert_eq!(f.len(), 2);
    assert_eq!(f.get(channel.axis()), Some(1));
}

/// Remembers the last outcome it was notified with and how many times.
struct Seen {
    last: Mutex<Cell<Option<Outcome>>>,
    count: Mutex<Cell<u32>>,
}

impl Seen {
    const fn new() -> Seen {
        Seen { last: Mutex::new(Cell::new(None)), count: Mutex::new(Cell::new(0)) }
    }

    fn get(&self) -> (Option<Outcome>, u32) {
        critical_section::with(|cs| (self.last.borrow(cs).get(), self.count.borrow(cs).get()))
    }
}

impl Notify for Seen {
    fn notify(&self, outcome: Outcome) {
        critical_section::with(|cs| {
            self.last.borrow(cs).set(Some(outcome));
            let count = self.count.borrow(cs);
            count.set(count.get() + 1);
        });
    }
}

fn failure_reaches_current_and_later_waiters_and_propagates() {
    let w = World::new();
    let (mut producer, mut consumer, mut downstream) = (w.queue(), w.queue(), w.queue());
    let (s, next) = (w.semaphore(), w.semaphore());
    submit(&mut producer, [], &[(&s, 1)]);

    let current = Seen::new();
    let timepoint = pin!(Timepoint::new(&current));
    // SAFETY: the timepoint is pinned in this frame and fires (the producer's retirement
    // below) before the frame ends; `s` outlives it.
    assert_eq!(unsafe { s.arm(timepoint.as_ref(), 1) }, Ok(Arm::Armed));
    assert!(s.fail(Failure::DeviceLost));
    assert!(!s.fail(Failure::Aborted), "the first failure wins");
    // The producer's signal still runs: the waiter, which imported it, is told when it ends.
    assert_eq!(current.get(), (None, 0));
    queue::retire([(&s, 1)], Err(Failure::DeviceLost));
    assert_eq!(current.get(), (Some(Err(Failure::DeviceLost)), 1));

    // A later waiter sees the failure, fails, and fails what it signals.
    match consumer.begin().wait(&s, 1) {
        Err(WaitError::Failed(failure)) => {
            next.fail(failure);
        }
        _ => panic!("a wait on a failed timeline must fail"),
    }
    assert_eq!(downstream.begin().wait(&next, 1), Err(WaitError::Failed(Failure::DeviceLost)));
    assert_eq!(s.signal_external(2), Err(SignalError::Failed(Failure::DeviceLost)));
}

fn timepoints_fire_in_value_order_and_cancel_cleanly() {
    let w = World::new();
    let s = w.semaphore();
    let (r1, r3, cancelled) = (Seen::new(), Seen::new(), Seen::new());
    let t3 = pin!(Timepoint::new(&r3));
    let t1 = pin!(Timepoint::new(&r1));
    let tc = pin!(Timepoint::new(&cancelled));
    // SAFETY: all three are pinned in this frame; `t1` and `t3` fire below and `tc` is
    // cancelled before the frame ends; `s` outlives them.
    unsafe {
        assert_eq!(s.arm(t3.as_ref(), 3), Ok(Arm::Armed));
        assert_eq!(s.arm(t1.as_ref(), 1), Ok(Arm::Armed));
        assert_eq!(s.arm(t1.as_ref(), 1), Err(causeway_core::semaphore::ArmError::Busy));
        assert_eq!(s.arm(tc.as_ref(), 2), Ok(Arm::Armed));
    }
    assert_eq!(s.cancel(&tc), Cancelled::Unlinked);
    let origin = Point::new(Axis::new(0, Domain::Host, 1), 1);
    s.signal(2, origin, &Frontier::<8>::from_points([origin])).unwrap();
    assert_eq!(r1.get(), (Some(Ok(2)), 1));
    assert!(t1.is_done() && !t3.is_done());
    assert_eq!(r3.get().1, 0);
    s.signal_external(5).unwrap();
    assert_eq!(r3.get(), (Some(Ok(5)), 1));
    assert_eq!(cancelled.get().1, 0, "a cancelled timepoint never fires");
    assert_eq!(s.cancel(&t3), Cancelled::AlreadyFired);
    assert!(!s.has_waiters());
    // SAFETY: `Ready` links nothing.
    assert_eq!(unsafe { s.arm(tc.as_ref(), 4) }, Ok(Arm::Ready(Ok(5))));
}

fn signals_must_advance_and_complete_in_order() {
    let w = World::new();
    let s = w.semaphore();
    let o = |epoch| Point::new(Axis::new(0, Domain::Queue, 9), epoch);
    s.signal(2, o(1), &Frontier::<8>::new()).unwrap();
    assert_eq!(
        s.signal(2, o(2), &Frontier::<8>::new()),
        Err(SignalError::NotAdvancing { value: 2, current: 2 })
    );
    assert_eq!(s.complete_signal(7), Err(SignalError::NotSubmitted { value: 7 }));
    s.submit_signal(3, o(3), &Frontier::<8>::new()).unwrap();
    s.submit_signal(4, o(4), &Frontier::<8>::new()).unwrap();
    assert_eq!(s.complete_signal(4), Err(SignalError::OutOfOrder { value: 4, pending: 3 }));
    assert_eq!(s.failure(), Some(Failure::OutOfOrderSignal));
}

fn axes_are_never_reused_and_exhaustion_is_an_error() {
    let axes = AxisAllocator::starting_at(7, MAX_ORDINAL - 1);
    let a = axes.allocate(Domain::Queue).unwrap();
    let b = axes.allocate(Domain::Queue).unwrap();
    assert!(a != b && a.machine() == 7 && b.ordinal() == MAX_ORDINAL);
    assert_eq!(axes.allocate(Domain::Queue), Err(AxisError::Exhausted { domain: Domain::Queue }));
    assert_eq!(axes.allocate(Domain::Host).unwrap().ordinal(), MAX_ORDINAL - 1, "per domain");
    assert_eq!(Axis::from_bits(a.to_bits()), Some(a));
}

/// xorshift64*: deterministic, so a failure reproduces on every run and every board.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// The reference model of a frontier: `epochs[ordinal]`, 0 = absent, for axis ordinals 1..24.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Model {
    epochs: [u64; 24],
}

fn queue_axis(ordinal: u64) -> Axis {
    Axis::new(0, Domain::Queue, ordinal)
}

impl Model {
    fn random(rng: &mut Rng, max_len: u64) -> (Model, [(u64, u64); 12], usize) {
        let mut model = Model { epochs: [0; 24] };
        let mut entries = [(0, 0); 12];
        let len = rng.below(max_len + 1) as usize;
        for entry in &mut entries[..len] {
            let (ordinal, epoch) = (1 + rng.below(23), 1 + rng.below(39));
            *entry = (ordinal, epoch);
            let slot = &mut model.epochs[ordinal as usize];
            *slot = (*slot).max(epoch);
        }
        (model, entries, len)
    }

    fn of<const N: usize>(frontier: &Frontier<N>) -> Model {
        let mut model = Model { epochs: [0; 24] };
        for point in frontier.iter() {
            model.epochs[point.axis.ordinal() as usize] = point.epoch;
        }
        model
    }

    fn join(mut self, other: &Model) -> Model {
        for (mine, theirs) in self.epochs.iter_mut().zip(other.epochs) {
            *mine = (*mine).max(theirs);
        }
        self
    }

    fn len(&self) -> usize {
        self.epochs.iter().filter(|&&e| e > 0).count()
    }

    /// The documented overflow rule: evict the smallest epoch (ties: the larger axis) until
    /// `n` entries remain. Returns whether anything was evicted.
    fn evict_to(&mut self, n: usize) -> bool {
        let overflowed = self.len() > n;
        while self.len() > n {
            let victim = (1..24)
                .filter(|&o| self.epochs[o] > 0)
                .min_by_key(|&o| {
                    (self.epochs[o], core::cmp::Reverse(queue_axis(o as u64).to_bits()))
                })
                .unwrap();
            self.epochs[victim] = 0;
        }
        overflowed
    }

    fn dominates(&self, other: &Model) -> bool {
        self.epochs.iter().zip(other.epochs).all(|(&mine, theirs)| mine >= theirs)
    }
}

fn frontier_of<const N: usize>(entries: &[(u64, u64)]) -> Frontier<N> {
    Frontier::from_points(entries.iter().map(|&(o, e)| Point::new(queue_axis(o), e)))
}

fn frontier_algebra_matches_the_reference_model() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..300 {
        // Merge: component-wise maximum, then overflow eviction; taint is sticky. Inputs of at
        // most 8 entries fit their frontiers, so only the merge can overflow.
        let (ma, ea, la) = Model::random(&mut rng, 8);
        let (mb, eb, lb) = Model::random(&mut rng, 8);
        let (fa, fb): (Frontier<8>, Frontier<8>) = (frontier_of(&ea[..la]), frontier_of(&eb[..lb]));
        assert_eq!((Model::of(&fa), Model::of(&fb)), (ma, mb));
        let mut merged = fa;
        merged.merge(&fb);
        let mut expected = ma.join(&mb);
        let overflowed = expected.evict_to(8);
        assert_eq!(Model::of(&merged), expected);
        assert_eq!(merged.is_tainted(), overflowed);

        // Mixed capacities follow the same rule in both directions.
        let (m3, e3, l3) = Model::random(&mut rng, 3);
        let f3: Frontier<3> = frontier_of(&e3[..l3]);
        let (mut big, mut small) = (fa, f3);
        big.merge(&f3);
        small.merge(&fa);
        let (mut expected_big, mut expected_small) = (ma.join(&m3), ma.join(&m3));
        expected_big.evict_to(8);
        expected_small.evict_to(3);
        assert_eq!((Model::of(&big), Model::of(&small)), (expected_big, expected_small));
        assert_eq!(fa.dominates(&f3), ma.dominates(&m3));

        // Dominance is exact between untainted frontiers, and never optimistic for frontiers
        // that overflowed while being built (knowledge forgets; a requirement is tainted).
        let (ta, eta, lta) = Model::random(&mut rng, 12);
        let (tb, etb, ltb) = Model::random(&mut rng, 12);
        let (ka, kb): (Frontier<8>, Frontier<8>) =
            (frontier_of(&eta[..lta]), frontier_of(&etb[..ltb]));
        if !ka.is_tainted() && !kb.is_tainted() {
            assert_eq!(ka.dominates(&kb), ta.dominates(&tb));
        }
        if ka.dominates(&kb) {
            assert!(ta.dominates(&tb), "a `true` must hold against the complete truth");
        }
        assert!(ka.iter().all(|p| p.epoch <= ta.epochs[p.axis.ordinal() as usize]));

        // The undominated entries are exactly the gap.
        let missing = ka.find_undominated(&kb);
        assert!(missing.iter().all(|p| !ka.knows(p)));
        let mut closed = ka;
        closed.merge(&missing);
        if !kb.is_tainted() && !closed.is_tainted() {
            assert!(closed.dominates(&kb));
        }

        // Merging is a semilattice when nothing overflows.
        let (_, e1, l1) = Model::random(&mut rng, 5);
        let (_, e2, l2) = Model::random(&mut rng, 5);
        let (_, e3, l3) = Model::random(&mut rng, 5);
        let (x, y, z): (Frontier<16>, Frontier<16>, Frontier<16>) =
            (frontier_of(&e1[..l1]), frontier_of(&e2[..l2]), frontier_of(&e3[..l3]));
        let join = |p: &Frontier<16>, q: &Frontier<16>| {
            let mut r = *p;
            r.merge(q);
            r
        };
        assert_eq!(join(&join(&x, &y), &z), join(&x, &join(&y, &z)));
        assert_eq!(join(&x, &y), join(&y, &x));
        assert_eq!(join(&x, &x), x);
        assert!(!join(&join(&x, &y), &z).is_tainted());
    }
}

fn frontier_wire_round_trips_and_rejects_malformations() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut buf = [0u8; 3 + 8 * 18];
    for _ in 0..200 {
        let (_, entries, len) = Model::random(&mut rng, 8);
        let shift = rng.below(64) as u32;
        let mut f: Frontier<8> = Frontier::from_points(
            entries[..len]
                .iter()
                .map(|&(o, e)| Point::new(queue_axis(o), e << shift.min(e.leading_zeros()))),
        );
        if rng.below(2) == 1 {
            f.taint();
        }
        let n = f.encode(&mut buf).unwrap();
        assert_eq!(n, f.encoded_len());
        assert_eq!(Frontier::<8>::decode(&buf[..n]), Ok((f, n)));
        // Random corruption never panics, and anything accepted is well formed.
        let mut corrupt = buf;
        corrupt[rng.below(n as u64) as usize] = rng.next() as u8;
        if let Ok((g, used)) = Frontier::<8>::decode(&corrupt[..n]) {
            assert!(used <= n && g.iter().all(|p| p.epoch >= 1));
        }
    }
    let f: Frontier<8> = frontier_of(&[(1, 5), (2, 300)]);
    let n = f.encode(&mut buf).unwrap();
    assert_eq!(f.encode(&mut buf[..n - 1]), Err(WireError::BufferTooSmall { needed: n }));
    let corrupt = |at: usize, byte: u8| {
        let mut bytes = buf;
        bytes[at] = byte;
        Frontier::<8>::decode(&bytes[..n])
    };
    assert_eq!(corrupt(0, 9), Err(WireError::UnsupportedVersion(9)));
    assert_eq!(corrupt(1, 0x02), Err(WireError::ReservedFlags(0x02)));
    assert_eq!(
        Frontier::<1>::decode(&buf[..n]),
        Err(WireError::TooManyEntries { count: 2, capacity: 1 })
    );
    assert_eq!(corrupt(3 + 8, 0), Err(WireError::ZeroEpoch { index: 0 }));
    assert_eq!(Frontier::<8>::decode(&buf[..n - 1]), Err(WireError::Truncated));
}
