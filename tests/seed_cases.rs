//! The scheduling cases of the design documents, run through the real core types.

use std::time::Duration;

use causeway::axis::{AxisAllocator, Domain};
use causeway::queue::WaitError;
use causeway::reuse::{Acquire, BlockId, DeathRecord, FreeBlock, ReuseDecision, ReusePool};
use causeway::runtime::blocking;
use causeway::semaphore::{Arm, Failure, Notify, Outcome, Timepoint};
use causeway::{
    Capabilities, CollectiveChannel, Endpoint, Fence, Frontier, Point, QueueClock, Resolution,
    Scope, Semaphore, FRONTIER_CAPACITY,
};

const TIMELINE: Capabilities = Capabilities { wait_before_signal: true };

/// One device, one process: every queue sees every device-local semaphore.
struct World {
    axes: AxisAllocator,
}

impl World {
    fn new() -> World {
        World { axes: AxisAllocator::new(0) }
    }

    fn endpoint(queue: u64) -> Endpoint {
        Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue }
    }

    fn queue(&self) -> QueueClock {
        let axis = self.axes.allocate(Domain::Queue).unwrap();
        QueueClock::new(axis, World::endpoint(axis.to_bits()), TIMELINE)
    }

    fn semaphore(&self) -> Semaphore {
        Semaphore::new(0, Scope::DeviceLocal, World::endpoint(0))
    }
}

/// Submits an op on `queue` waiting on `waits`, signalling `signals` (pending), and returns its
/// resolutions and frontier.
fn submit(
    queue: &mut QueueClock,
    waits: &[(&Semaphore, u64)],
    signals: &[(&Semaphore, u64)],
) -> (Vec<Resolution>, Frontier) {
    let mut op = queue.begin();
    let resolutions = waits.iter().map(|(s, v)| op.wait(*s, *v).unwrap().resolution).collect();
    let done = op.commit_signalling(signals.iter().copied()).unwrap();
    (resolutions, done.frontier)
}

fn complete(signals: &[(&Semaphore, u64)]) {
    for (s, v) in signals {
        s.complete_signal(*v).unwrap();
    }
}

#[test]
fn transitivity_across_three_queues() {
    let w = World::new();
    let (mut qa, mut qb, mut qc) = (w.queue(), w.queue(), w.queue());
    let (s1, s2) = (w.semaphore(), w.semaphore());
    for _ in 0..4 {
        qa.begin().commit();
    }
    submit(&mut qa, &[], &[(&s1, 1)]);
    submit(&mut qb, &[(&s1, 1)], &[(&s2, 1)]);
    let (_, c) = submit(&mut qc, &[(&s2, 1)], &[]);
    assert_eq!(c.get(qa.axis()), Some(5), "C learned A's work through B alone");
    assert_eq!(c.get(qb.axis()), Some(1));
    assert_eq!(c.get(qc.axis()), Some(1));
}

#[test]
fn late_waiter_imports_the_value_two_frontier_not_value_five() {
    let w = World::new();
    let (mut q, mut late) = (w.queue(), w.queue());
    let s = w.semaphore();
    for v in 1..=5 {
        submit(&mut q, &[], &[(&s, v)]);
        complete(&[(&s, v)]);
    }
    assert_eq!(s.value(), 5);
    let (r, f) = submit(&mut late, &[(&s, 2)], &[]);
    assert_eq!(r, [Resolution::Satisfied]);
    assert_eq!(f.get(q.axis()), Some(2), "depends on S reaching 2, not on what advanced it to 5");
}

#[test]
fn sequential_same_queue_waits_are_all_elided() {
    let w = World::new();
    let mut q = w.queue();
    let s = w.semaphore();
    submit(&mut q, &[], &[(&s, 1)]);
    for v in 1..10 {
        let (r, _) = submit(&mut q, &[(&s, v)], &[(&s, v + 1)]);
        assert_eq!(r, [Resolution::Elided]);
        // The device retires ops in order, one behind submission.
        complete(&[(&s, v)]);
    }
    assert_eq!(q.counts().elided, 9);
    assert_eq!(q.counts().device + q.counts().satisfied + q.counts().held, 0);
}

#[test]
fn cross_queue_wait_needs_one_device_wait_then_repeats_are_elided() {
    let w = World::new();
    let (mut producer, mut consumer) = (w.queue(), w.queue());
    let s = w.semaphore();
    submit(&mut producer, &[], &[(&s, 1)]);
    assert_eq!(submit(&mut consumer, &[(&s, 1)], &[]).0, [Resolution::DeviceWait]);
    assert_eq!(submit(&mut consumer, &[(&s, 1)], &[]).0, [Resolution::Elided]);
    complete(&[(&s, 1)]);
    assert_eq!(submit(&mut consumer, &[(&s, 1)], &[]).0, [Resolution::Elided]);
    assert_eq!(consumer.counts().device, 1);
}

#[test]
fn transitive_knowledge_elides_a_wait_never_made_directly() {
    let w = World::new();
    let (mut qa, mut qb, mut qc) = (w.queue(), w.queue(), w.queue());
    let (sa, sb) = (w.semaphore(), w.semaphore());
    submit(&mut qa, &[], &[(&sa, 1)]);
    submit(&mut qb, &[(&sa, 1)], &[(&sb, 1)]);
    assert_eq!(submit(&mut qc, &[(&sb, 1)], &[]).0, [Resolution::DeviceWait]);
    assert_eq!(submit(&mut qc, &[(&sa, 1)], &[]).0, [Resolution::Elided], "C knows A through B");
}

#[test]
fn fork_join_carries_every_branch_in_one_signal() {
    let w = World::new();
    let mut root = w.queue();
    let mut branches: Vec<QueueClock> = (0..3).map(|_| w.queue()).collect();
    let (mut join, mut downstream) = (w.queue(), w.queue());
    let start = w.semaphore();
    let branch_done: Vec<Semaphore> = (0..3).map(|_| w.semaphore()).collect();
    let joined = w.semaphore();

    submit(&mut root, &[], &[(&start, 1)]);
    for (q, s) in branches.iter_mut().zip(&branch_done) {
        submit(q, &[(&start, 1)], &[(s, 1)]);
    }
    let mut fence: Fence<'_, 4> = Fence::new();
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

    let (r, f) = submit(&mut downstream, &[(&joined, 1)], &[]);
    assert_eq!(r, [Resolution::DeviceWait], "one wait downstream, not one per branch");
    for q in branches.iter().chain([&root, &join]) {
        assert_eq!(f.get(q.axis()), Some(1));
    }
    assert!(!f.is_tainted());
}

#[test]
fn external_taint_is_never_elided_and_recovers_after_a_tracked_signal() {
    let w = World::new();
    let (mut tracked, mut waiter) = (w.queue(), w.queue());
    let s = w.semaphore();
    submit(&mut tracked, &[], &[(&s, 1)]);
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

    submit(&mut tracked, &[], &[(&s, 4)]);
    complete(&[(&s, 4)]);
    let (r, _) = submit(&mut waiter, &[(&s, 4)], &[]);
    assert_eq!(r, [Resolution::Satisfied]);
    assert_eq!(submit(&mut waiter, &[(&s, 4)], &[]).0, [Resolution::Elided], "exact again");
    assert_eq!(waiter.counts().tainted, 2);
}

#[test]
fn death_frontier_reuse_across_queues() {
    let w = World::new();
    let (mut owner, mut reader, mut informed, mut stranger) =
        (w.queue(), w.queue(), w.queue(), w.queue());
    let (filled, read_done, freed) = (w.semaphore(), w.semaphore(), w.semaphore());

    submit(&mut owner, &[], &[(&filled, 1)]);
    submit(&mut reader, &[(&filled, 1)], &[(&read_done, 1)]);
    // The dealloc waits for the reader; its causal past becomes the death frontier.
    let mut dealloc = owner.begin();
    dealloc.wait(&read_done, 1).unwrap();
    let death = *dealloc.frontier();
    let done = dealloc.commit_signalling([(&freed, 1)]).unwrap();
    let record = DeathRecord::new(done.point, death);

    submit(&mut informed, &[(&freed, 1)], &[]);
    assert_eq!(
        record.decide(informed.frontier(), &Frontier::<FRONTIER_CAPACITY>::new()),
        ReuseDecision::ReuseNow
    );

    match record.decide(stranger.frontier(), &Frontier::<FRONTIER_CAPACITY>::new()) {
        ReuseDecision::NeedsWait { missing, dealloc } => {
            assert_eq!(dealloc, done.point);
            let axes: Vec<_> = missing.iter().map(|p| p.axis).collect();
            assert!(axes.contains(&owner.axis()) && axes.contains(&reader.axis()));
            assert_eq!(axes.len(), 2);
        }
        other => panic!("{other:?}"),
    }
    // Waiting on the reader's signal (not the dealloc) closes the gap: try before you fence.
    submit(&mut stranger, &[(&read_done, 1)], &[]);
    assert_eq!(
        record.decide(stranger.frontier(), &Frontier::<FRONTIER_CAPACITY>::new()),
        ReuseDecision::ReuseNow
    );
}

#[test]
fn disjoint_workloads_never_wait_on_each_others_axes() {
    let w = World::new();
    let mut a = [w.queue(), w.queue()];
    let mut b = [w.queue(), w.queue()];
    let (sa, sb) = (w.semaphore(), w.semaphore());
    let mut pool: ReusePool<4> = ReusePool::new();
    for round in 1..=5 {
        let (ra, fa) = submit(&mut a[0], &[], &[(&sa, 2 * round - 1)]);
        let (rb, fb) = submit(&mut b[0], &[], &[(&sb, 2 * round - 1)]);
        let (ra2, fa2) = submit(&mut a[1], &[(&sa, 2 * round - 1)], &[(&sa, 2 * round)]);
        let (rb2, fb2) = submit(&mut b[1], &[(&sb, 2 * round - 1)], &[(&sb, 2 * round)]);
        complete(&[(&sa, 2 * round - 1), (&sb, 2 * round - 1), (&sa, 2 * round), (&sb, 2 * round)]);
        assert!(ra.is_empty() && rb.is_empty());
        assert_eq!(ra2.len() + rb2.len(), 2);
        let b_axes = [b[0].axis(), b[1].axis()];
        let a_axes = [a[0].axis(), a[1].axis()];
        for f in [fa, fa2] {
            assert!(f.iter().all(|p| !b_axes.contains(&p.axis)));
        }
        for f in [fb, fb2] {
            assert!(f.iter().all(|p| !a_axes.contains(&p.axis)));
        }
    }
    // A block freed by workload A: workload B may need to wait, but only on A's entries.
    let freed_by_a = DeathRecord::new(Point::new(a[1].axis(), 6), *a[1].frontier());
    pool.release(FreeBlock { block: BlockId(1), size: 64, record: freed_by_a }).unwrap();
    match pool.acquire(64, b[1].frontier(), &Frontier::<FRONTIER_CAPACITY>::new()) {
        Acquire::NeedsWait { missing, .. } => {
            assert!(missing.iter().all(|p| p.axis == a[0].axis() || p.axis == a[1].axis()));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        pool.acquire(64, a[1].frontier(), &Frontier::<FRONTIER_CAPACITY>::new()),
        Acquire::Reuse { .. }
    ));
}

#[test]
fn eight_participant_collective_adds_one_entry() {
    let w = World::new();
    let mut participants: Vec<QueueClock> = (0..8).map(|_| w.queue()).collect();
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
    // The collective's completion carries the one channel entry downstream.
    let signal = Frontier::<FRONTIER_CAPACITY>::from_points([round.point()]);
    done.signal(1, round.point(), &signal).unwrap();
    let mut consumer = w.queue();
    let (_, f) = submit(&mut consumer, &[(&done, 1)], &[]);
    assert_eq!(f.len(), 2);
    assert_eq!(f.get(channel.axis()), Some(1));
}

struct Seen(std::sync::Mutex<Vec<Outcome>>);

impl Notify for Seen {
    fn notify(&self, outcome: Outcome) {
        self.0.lock().unwrap().push(outcome);
    }
}

#[test]
fn failure_reaches_current_and_later_waiters_and_propagates() {
    let w = World::new();
    let (mut producer, mut consumer, mut downstream) = (w.queue(), w.queue(), w.queue());
    let (s, next) = (w.semaphore(), w.semaphore());
    submit(&mut producer, &[], &[(&s, 1)]);
    let (_, _) = submit(&mut consumer, &[(&s, 1)], &[(&next, 1)]);

    let current = Seen(Default::default());
    let timepoint = std::pin::pin!(Timepoint::new(&current));
    // SAFETY: the timepoint is pinned in this frame and fires (below) before the frame ends;
    // `s` outlives it.
    assert_eq!(unsafe { s.arm(timepoint.as_ref(), 1) }, Ok(Arm::Armed));
    s.fail(Failure::DeviceLost);
    // The producer's signal is still running: the waiter that imported it is told when the
    // producer ends (here: failed by the device loss).
    assert_eq!(current.0.lock().unwrap().as_slice(), []);
    causeway::queue::retire([(&s, 1)], Err(Failure::DeviceLost));
    assert_eq!(current.0.lock().unwrap().as_slice(), [Err(Failure::DeviceLost)]);

    // A later waiter sees the failure at once. The consumer's operation, whose wait failed
    // (told above), retires failed and fails what it signals.
    match consumer.begin().wait(&s, 1) {
        Err(WaitError::Failed(failure)) => {
            causeway::queue::retire([(&next, 1)], Err(failure));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(downstream.begin().wait(&next, 1), Err(WaitError::Failed(Failure::DeviceLost)));
    assert_eq!(
        blocking::wait(&next, 1, None),
        Err(blocking::HostWaitError::Failed(Failure::DeviceLost))
    );
}

#[test]
fn host_wait_returns_at_its_value_not_at_a_later_pending_one() {
    let w = World::new();
    let (mut qa, mut qb) = (w.queue(), w.queue());
    let (gate1, gate2, s) = (w.semaphore(), w.semaphore(), w.semaphore());
    let host_axis = w.axes.allocate(Domain::Host).unwrap();
    let mut host_clock: QueueClock =
        QueueClock::new(host_axis, World::endpoint(host_axis.to_bits()), TIMELINE);

    // Op A waits gate1 and signals S=1; op B waits gate2 and signals S=2. Both are submitted
    // before either gate opens.
    assert_eq!(submit(&mut qa, &[(&gate1, 1)], &[(&s, 1)]).0, [Resolution::DeviceWait]);
    assert_eq!(submit(&mut qb, &[(&gate2, 1)], &[(&s, 2)]).0, [Resolution::DeviceWait]);

    std::thread::scope(|scope| {
        // Each queue runs its op on its own thread once the gate opens.
        scope.spawn(|| {
            blocking::wait(&gate1, 1, Some(Duration::from_secs(30))).unwrap();
            s.complete_signal(1).unwrap();
        });
        scope.spawn(|| {
            blocking::wait(&gate2, 1, Some(Duration::from_secs(30))).unwrap();
            s.complete_signal(2).unwrap();
        });

        let host_signal = |clock: &mut QueueClock, gate: &Semaphore| {
            let done = clock.begin().commit();
            gate.signal(1, done.point, &done.frontier).unwrap();
        };
        host_signal(&mut host_clock, &gate1);
        let reached = blocking::wait(&s, 1, Some(Duration::from_secs(30)));
        assert_eq!(reached, Ok(1), "S >= 1 returns when A signals, without B's gate");
        assert_eq!(gate2.value(), 0);
        host_signal(&mut host_clock, &gate2);
        assert_eq!(blocking::wait(&s, 2, Some(Duration::from_secs(30))), Ok(2));
    });
}

#[test]
fn host_wait_times_out_with_the_current_value() {
    let w = World::new();
    let s = w.semaphore();
    assert_eq!(
        blocking::wait(&s, 1, Some(Duration::from_millis(20))),
        Err(blocking::HostWaitError::TimedOut { value: 0 })
    );
    assert!(!s.has_waiters());
}
