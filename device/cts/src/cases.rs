//! The conformance cases. [`conformance_suite!`](crate::conformance_suite) instantiates each
//! as a test of the same name; each is also callable on its own through
//! [`run_case`](crate::run_case).
//!
//! Every case builds a device with a fresh backend of the driver under test ("the driver") and
//! the suite's [peer](crate::peer), and checks a property the layer promises every driver's
//! queues. Each case's documentation says what a failure of it means. Where a resolution would
//! depend on how far the device got, the work waits behind a *gate*: a semaphore only the host
//! signals, after every submission has been resolved.

use std::thread;
use std::time::Duration;

use causeway_core::queue::Resolution;
use causeway_core::semaphore::Failure;
use causeway_core::speculation::{Dependence, Rejection};
use causeway_device::{
    BufferId, Op, OpStatus, QueueId, Rejected, Resource, SemaphoreId, SubmitError, Work,
};
use causeway_runtime::blocking::HostWaitError;

use crate::ledger::Seen;
use crate::peer::PEER_FAILURE;
use crate::rig::{only_resolution, Rig, RigBuilder, Side, WAIT_BUDGET};
use crate::DriverUnderTest;

/// Rounds of the gated ping-pong cases: every operation of them is queued at once behind the
/// gate, so each queue needs room for this many (and each semaphore history for as many
/// pending signals).
const GATED_ROUNDS: u64 = 100;

/// Operations of the throughput cases.
const THROUGHPUT_OPERATIONS: u64 = 100_000;

/// How often the single-queue throughput case signals (each signal takes a history slot until
/// it is reached; the ones between are ordered by the queue anyway).
const THROUGHPUT_SIGNAL_EVERY: u64 = 1_000;

/// The bound of a shutdown with work in flight: far longer than any long kernel, so a driver
/// that keeps the contract has stopped its own work within it (one still busy after it is
/// reported busy, and fails the case).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The failure of the host function the failure case runs on the driver's queue.
const HOST_FAILURE: Failure = Failure::Application(0xC75);

/// Submits `rounds` rounds of a ping-pong between `first` and `second`: round `r` runs
/// `first_work` on `first` (waiting for `pong ≥ r - 1`, or for `opening` in the first round)
/// signalling `ping = r`, then `second_work` on `second` waiting for `ping ≥ r` and
/// signalling `pong = r`.
fn ping_pong(
    rig: &mut Rig,
    (first, first_work): (QueueId, Work),
    (second, second_work): (QueueId, Work),
    (ping, pong): (SemaphoreId, SemaphoreId),
    opening: Option<(SemaphoreId, u64)>,
    rounds: u64,
) {
    for round in 1..=rounds {
        let previous = if round == 1 { opening } else { Some((pong, round - 1)) };
        let waits: Vec<_> = previous.into_iter().collect();
        rig.submit(first, &waits, &[(ping, round)], first_work);
        rig.submit(second, &[(ping, round)], &[(pong, round)], second_work);
    }
}

/// The driver's short kernel and its copies, for the throughput cases to rotate through.
fn short_kernels(rig: &Rig) -> Vec<Work> {
    let copies = rig.kernels.short_copies.iter().copied();
    std::iter::once(rig.kernels.short).chain(copies).collect()
}

/// Asserts that every operation observed finished exactly once, successfully, and that there
/// were `expected` of them.
fn assert_all_finished_once_ok(rig: &Rig, expected: u64, what: &str) {
    rig.ledger.wait_for_finishes(expected, WAIT_BUDGET, what);
    let all = rig.ledger.all();
    assert_eq!(all.len() as u64, expected, "{what}: operations observed");
    for ((queue, tag), seen) in &all {
        let status = seen.status(&format!("{what}: op {tag} of queue {queue}"));
        assert_eq!(status, OpStatus::Ok, "{what}: op {tag} of queue {queue}");
    }
}

/// Native-wait ping-pong across two queues of the driver: 100 rounds, every operation queued
/// behind a gate, so every wait between the two queues is on work still to come.
///
/// A failure means: the driver lost or reordered work whose order it was told to keep
/// natively (the final value is wrong or never reached, or an operation failed); or the layer
/// did not resolve a wait between the driver's queues as a device wait; or the driver's own
/// count of native waits differs from the device waits the layer handed it (it emitted a
/// native wait for something else, or skipped one).
pub fn native_wait_ping_pong_across_two_queues<D: DriverUnderTest>(driver: &D) {
    let mut rig = RigBuilder::new(driver);
    let room = GATED_ROUNDS as usize + 1;
    let first = rig.queue_with(Side::Tested, room, true);
    let second = rig.queue_with(Side::Tested, room, true);
    let [gate] = rig.semaphores();
    let [ping, pong] = rig.semaphores_with_history(room + 1);
    let mut rig = rig.build();
    let short = rig.kernels.short;
    ping_pong(
        &mut rig,
        (first, short),
        (second, short),
        (ping, pong),
        Some((gate, 1)),
        GATED_ROUNDS,
    );

    // The gate has no signaller: a queue that cannot wait before a signal exists holds its
    // wait, one that can arms it. Every other wait is on a pending signal of the other queue.
    let counts = rig.resolutions(&[first, second]);
    let between_queues = 2 * GATED_ROUNDS - 1;
    assert_eq!((counts.elided, counts.satisfied), (0, 0), "nothing ran yet: {counts:?}");
    if !rig.waits_before_signal {
        assert_eq!((counts.device, counts.held), (between_queues, 1), "{counts:?}");
    } else {
        assert_eq!((counts.device, counts.held), (between_queues + 1, 0), "{counts:?}");
    }
    rig.signal_from_host(gate, 1);
    rig.expect_reached(pong, GATED_ROUNDS, "the last pong");
    assert_all_finished_once_ok(&rig, 2 * GATED_ROUNDS, "ping-pong between the driver's queues");
    if let Some(native) = rig.native_waits() {
        let expected = if rig.native_waits_capable { between_queues } else { 0 };
        assert_eq!(native, expected, "native waits emitted against device waits resolved");
    }
}

/// Native-wait ping-pong across drivers: the driver's queue and the peer's, 100 rounds queued
/// behind a gate.
///
/// A failure means: work waiting on another driver ran early, late or never (the final value
/// is wrong or never reached); or the driver emitted a native wait for a foreign signal that
/// the layer did not hand it as one (a driver waits natively on its own queues' work, and with
/// host-written waits on its mirrors of other drivers' queues; the layer holds or host-arms
/// the rest); or an operation finished twice or failed.
pub fn native_wait_ping_pong_across_drivers<D: DriverUnderTest>(driver: &D) {
    let mut rig = RigBuilder::new(driver);
    let room = GATED_ROUNDS as usize + 1;
    let tested = rig.queue_with(Side::Tested, room, true);
    let peer = rig.queue_with(Side::Peer, room, true);
    let [gate] = rig.semaphores();
    let [ping, pong] = rig.semaphores_with_history(room + 1);
    let mut rig = rig.build();
    let (short, peer_short) = (rig.kernels.short, rig.peer_kernels.short);
    ping_pong(
        &mut rig,
        (tested, short),
        (peer, peer_short),
        (ping, pong),
        Some((gate, 1)),
        GATED_ROUNDS,
    );

    let counts = rig.resolutions(&[tested, peer]);
    assert_eq!((counts.elided, counts.satisfied), (0, 0), "nothing ran yet: {counts:?}");
    assert_eq!(counts.device + counts.held, 2 * GATED_ROUNDS, "one per wait: {counts:?}");
    // Every wait of the driver's queue but the first (on the gate, which has no signaller) is
    // on a pending signal of the peer: native with host-written waits, held without.
    let on_the_peer = if rig.host_written_waits_capable { GATED_ROUNDS - 1 } else { 0 };
    if rig.native_waits_capable {
        let tested_counts = rig.resolutions(&[tested]);
        assert_eq!(
            tested_counts.device, on_the_peer,
            "a wait on another driver is held, or native on a host-written mirror: \
             {tested_counts:?}"
        );
    }
    rig.signal_from_host(gate, 1);
    rig.expect_reached(pong, GATED_ROUNDS, "the last pong");
    assert_all_finished_once_ok(&rig, 2 * GATED_ROUNDS, "ping-pong between drivers");
    if let Some(native) = rig.native_waits() {
        assert_eq!(native, on_the_peer, "native waits on foreign signals: only on mirrors");
    }
}

/// Held waits: on a queue of the driver configured without wait-before-signal, operations
/// waiting on values nobody has yet submitted a signal for — one from the peer, one from
/// another queue of the driver — are held by the layer and issued only once the values are
/// reached.
///
/// A failure means: the driver ran a held operation before its value was reached (it started
/// before its signaller finished), or never ran it once it was; or the layer resolved such a
/// wait as something other than held, or let it import knowledge it had not yet got.
pub fn held_wait_before_its_signal_exists<D: DriverUnderTest>(driver: &D) {
    let mut rig = RigBuilder::new(driver);
    let held = rig.queue_with(Side::Tested, 16, false);
    let signaller = rig.queue(Side::Tested);
    let peer = rig.queue(Side::Peer);
    let [from_peer, from_driver, first_done, second_done, again_done] = rig.semaphores();
    let mut rig = rig.build();
    let short = rig.kernels.short;

    let (on_peer, peer_receipt) = rig.submit(held, &[(from_peer, 1)], &[(first_done, 1)], short);
    assert_eq!(only_resolution(&peer_receipt), Resolution::Held, "a wait on the peer's signal");
    let (on_driver, driver_receipt) =
        rig.submit(held, &[(from_driver, 1)], &[(second_done, 1)], short);
    assert_eq!(only_resolution(&driver_receipt), Resolution::Held, "a wait on the driver's");
    let peer_axis = rig.device().axis(peer).expect("the peer queue's axis");
    assert_eq!(peer_receipt.frontier.get(peer_axis), None, "a held wait imports nothing yet");
    // Nothing signals either value yet, so neither may have started: not a timing question.
    assert_eq!(rig.ledger.seen(held, on_peer).started_ns, None, "started before its value");

    let peer_short = rig.peer_kernels.short;
    let (peer_signal, _) = rig.submit(peer, &[], &[(from_peer, 1)], peer_short);
    let (driver_signal, _) = rig.submit(signaller, &[], &[(from_driver, 1)], short);
    rig.expect_reached(second_done, 1, "the operation held on the driver's signal");
    rig.expect_reached(first_done, 1, "the operation held on the peer's signal");
    rig.ledger.wait_for_finishes(4, WAIT_BUDGET, "the held operations and their signallers");
    for (held_tag, signaller_queue, signaller_tag) in
        [(on_peer, peer, peer_signal), (on_driver, signaller, driver_signal)]
    {
        let held_seen = rig.ledger.seen(held, held_tag);
        let what = format!("held op {held_tag}");
        assert_eq!(held_seen.status(&what), OpStatus::Ok, "{what}");
        let signalled_at =
            rig.ledger.seen(signaller_queue, signaller_tag).finished_ns("its signaller");
        let started_at = held_seen.started_ns.expect("a finished operation started");
        assert!(started_at >= signalled_at, "{what} started before its signaller finished");
    }
    // Reached now: a new wait on the peer's value is satisfied and imports the peer's work.
    let (_, receipt) = rig.submit(held, &[(from_peer, 1)], &[(again_done, 1)], short);
    assert_eq!(only_resolution(&receipt), Resolution::Satisfied);
    assert!(receipt.frontier.get(peer_axis).is_some(), "a satisfied wait imports its signaller");
    rig.expect_reached(again_done, 1, "an operation after the held ones");
}

/// A failure on another driver fails this driver's waiters: the peer's failing kernel signals
/// a value one of the driver's queues waits on (a pending wait when submitted), which another
/// queue of the driver waits on in turn; a submission after the failure is accepted doomed.
///
/// A failure means: the driver ran work whose wait failed (held or doomed work; a driver with
/// host-written waits may issue what waits natively once the failing work has started, and it
/// then fails), or its waiters ended with a different failure than the one the foreign work
/// failed with (a failure's type must cross drivers unchanged), or hung; or its queues did not
/// go on after failing the work (a native driver must move its queues' progress past work
/// failed on the host).
pub fn a_foreign_failure_fails_this_drivers_waiters<D: DriverUnderTest>(driver: &D) {
    let mut rig = RigBuilder::new(driver);
    let first = rig.queue(Side::Tested);
    let second = rig.queue(Side::Tested);
    let peer = rig.queue(Side::Peer);
    let [gate, failed, downstream, chained, doomed, fresh, fresh_chained] = rig.semaphores();
    let mut rig = rig.build();
    let (short, peer_failing) = (rig.kernels.short, rig.peer_kernels.failing);

    rig.submit(peer, &[(gate, 1)], &[(failed, 1)], peer_failing);
    let (waiter, _) = rig.submit(first, &[(failed, 1)], &[(downstream, 1)], short);
    let (chained_waiter, _) = rig.submit(second, &[(downstream, 1)], &[(chained, 1)], short);
    rig.signal_from_host(gate, 1);

    let failure = Err(HostWaitError::Failed(PEER_FAILURE));
    assert_eq!(rig.wait(downstream, 1), failure, "the driver's waiter on the failed value");
    assert_eq!(rig.wait(chained, 1), failure, "the driver's waiter on that waiter");
    let (late, receipt) = rig.submit(first, &[(failed, 1)], &[(doomed, 1)], short);
    assert_eq!(receipt.failure, Some(PEER_FAILURE), "a submission after the failure is doomed");
    assert_eq!(rig.wait(doomed, 1), failure, "the doomed submission's signal");
    rig.ledger.wait_for_finishes(4, WAIT_BUDGET, "the failed operations");
    for (queue, tag) in [(first, waiter), (second, chained_waiter), (first, late)] {
        let seen = rig.ledger.seen(queue, tag);
        let what = format!("op {tag} of queue {}", queue.index());
        assert_eq!(seen.status(&what), OpStatus::Failed(PEER_FAILURE), "{what}");
        // With host-written waits the first two wait natively — on the driver's mirror of the
        // peer's queue, and on the first queue — so they may be on the device once the peer's
        // failing kernel has started, before it fails (as between a native driver's own
        // queues), and fail all the same.
        if !rig.host_written_waits_capable || tag == late {
            assert_eq!(seen.started_ns, None, "{what} ran although its wait failed");
        }
    }
    // Both queues go on; the second waits on the first again (natively, on a native driver).
    rig.submit(first, &[], &[(fresh, 1)], short);
    rig.submit(second, &[(fresh, 1)], &[(fresh_chained, 1)], short);
    rig.expect_reached(fresh_chained, 1, "work after the failures");
}

/// This driver's failures fail foreign waiters: a host function failing on the driver's queue,
/// one panicking there, and, where the driver names one ([`Kernels::failing`](crate::Kernels)),
/// its own failing kernel; the peer and another queue of the driver wait on each.
///
/// A failure means: the failing kernel ended with another failure than `Failure::Faulted` with
/// the code the driver declared, or the panic with another than `Failure::PANICKED` (the same
/// fault must read the same on every driver), or did not fail what it signals; or a
/// waiter on another driver or queue did not fail with it; or the driver's queues did not go
/// on afterwards (a native driver must move its progress past work failed on the host).
pub fn this_drivers_failure_fails_foreign_waiters<D: DriverUnderTest>(driver: &D) {
    let mut rig = RigBuilder::new(driver);
    let fail = rig.host_call(|_| Err(HOST_FAILURE));
    let panics =
        rig.host_call(|_| panic!("the conformance suite's panicking host function (expected)"));
    let first = rig.queue(Side::Tested);
    let second = rig.queue(Side::Tested);
    let peer = rig.queue(Side::Peer);
    let [gate, host_failed, host_panicked, kernel_failed, after, after_chained] = rig.semaphores();
    let [peer_saw_host, driver_saw_host, peer_saw_kernel, driver_saw_kernel] = rig.semaphores();
    let [peer_saw_panic] = rig.semaphores();
    let mut rig = rig.build();
    let (short, peer_short) = (rig.kernels.short, rig.peer_kernels.short);

    rig.submit(first, &[(gate, 1)], &[(host_failed, 1)], Work::Host(fail));
    rig.submit(peer, &[(host_failed, 1)], &[(peer_saw_host, 1)], peer_short);
    rig.submit(second, &[(host_failed, 1)], &[(driver_saw_host, 1)], short);
    rig.submit(second, &[(gate, 1)], &[(host_panicked, 1)], Work::Host(panics));
    rig.submit(peer, &[(host_panicked, 1)], &[(peer_saw_panic, 1)], peer_short);
    let failing = rig.kernels.failing;
    let failing_tag = failing.map(|failing| {
        let (tag, _) = rig.submit(first, &[], &[(kernel_failed, 1)], failing.work);
        rig.submit(peer, &[(kernel_failed, 1)], &[(peer_saw_kernel, 1)], peer_short);
        rig.submit(second, &[(kernel_failed, 1)], &[(driver_saw_kernel, 1)], short);
        tag
    });
    rig.signal_from_host(gate, 1);

    let host_failure = Err(HostWaitError::Failed(HOST_FAILURE));
    assert_eq!(rig.wait(host_failed, 1), host_failure, "the failing host function's signal");
    assert_eq!(rig.wait(peer_saw_host, 1), host_failure, "the peer's waiter on it");
    assert_eq!(rig.wait(driver_saw_host, 1), host_failure, "the driver's other queue's waiter");
    let panicked = Err(HostWaitError::Failed(Failure::PANICKED));
    assert_eq!(rig.wait(host_panicked, 1), panicked, "the panicking host function's signal");
    assert_eq!(rig.wait(peer_saw_panic, 1), panicked, "the peer's waiter on it");
    match (failing, failing_tag) {
        (Some(failing), Some(tag)) => {
            let kernel_failure = Err(HostWaitError::Failed(failing.failure()));
            assert_eq!(rig.wait(kernel_failed, 1), kernel_failure, "the failing kernel's signal");
            assert_eq!(rig.wait(peer_saw_kernel, 1), kernel_failure, "the peer's waiter on it");
            assert_eq!(rig.wait(driver_saw_kernel, 1), kernel_failure, "the other queue's");
            rig.ledger.wait_for_finishes(8, WAIT_BUDGET, "the failures and their waiters");
            let status = rig.ledger.seen(first, tag).status("the failing kernel");
            assert_eq!(status, OpStatus::Failed(failing.failure()), "the failing kernel's status");
        }
        _ => println!(
            "note: the driver names no failing kernel: only a failure of the layer's own work on \
             its queue was checked"
        ),
    }
    rig.submit(first, &[], &[(after, 1)], short);
    rig.submit(second, &[(after, 1)], &[(after_chained, 1)], short);
    rig.expect_reached(after_chained, 1, "work after the failures");
}

/// Transitive elision across drivers: the driver's queue A signals, the peer waits on it and
/// signals, the driver's queue B waits on the peer — and then on A's value directly, which it
/// already knows of through the peer's signal: that wait is elided (no primitive at all).
///
/// A failure means: knowledge did not travel with a signal across drivers (the second wait was
/// not elided, or a later queue learning through B did not elide it either); or elided work
/// was not in fact ordered (the elided operation ran before what it depended on and its value
/// is never reached, or an operation failed).
pub fn transitive_elision_across_drivers<D: DriverUnderTest>(driver: &D) {
    let mut rig = RigBuilder::new(driver);
    let first = rig.queue(Side::Tested);
    let peer = rig.queue(Side::Peer);
    let second = rig.queue(Side::Tested);
    let third = rig.queue(Side::Tested);
    let [gate, from_first, from_peer, from_second, elided_done, later_done] = rig.semaphores();
    let mut rig = rig.build();
    let (short, peer_short) = (rig.kernels.short, rig.peer_kernels.short);

    rig.submit(first, &[(gate, 1)], &[(from_first, 1)], short);
    rig.submit(peer, &[(from_first, 1)], &[(from_peer, 1)], peer_short);
    let (_, through_peer) = rig.submit(second, &[(from_peer, 1)], &[(from_second, 1)], short);
    assert!(
        matches!(only_resolution(&through_peer), Resolution::DeviceWait | Resolution::Held),
        "a wait on pending foreign work: {:?}",
        through_peer.waits
    );
    let (_, direct) = rig.submit(second, &[(from_first, 1)], &[(elided_done, 1)], short);
    assert_eq!(only_resolution(&direct), Resolution::Elided, "known through the peer's signal");
    assert_eq!(rig.resolutions(&[second]).elided, 1, "the queue's elision count");
    rig.signal_from_host(gate, 1);
    rig.expect_reached(elided_done, 1, "the operation whose wait was elided");
    assert_all_finished_once_ok(&rig, 4, "the chain across drivers");

    // A third queue learns of all of it through the second queue's signal.
    let (_, reached) = rig.submit(third, &[(from_second, 1)], &[], short);
    assert_eq!(only_resolution(&reached), Resolution::Satisfied);
    let (_, transitive) = rig.submit(third, &[(from_first, 1)], &[(later_done, 1)], short);
    assert_eq!(only_resolution(&transitive), Resolution::Elided, "known through two hops");
    rig.expect_reached(later_done, 1, "the third queue's work");
}

/// Stream-ordered memory on the driver's queues: eight rounds of alloca, kernel, dealloca on
/// one queue (each alloca knows the dealloca before it, so the dead block is reused), then an
/// alloca on another queue of the driver that waits on the last dealloca's signal (reused too).
///
/// A failure means: the driver failed a commit or a decommit of memory it owns (an alloca's or
/// a dealloca's signal failed), or the memory was not reused when the layer proved it could be
/// (`memory_stats().reused`), or bytes stayed committed after every dealloca ran.
pub fn stream_ordered_memory_is_reused<D: DriverUnderTest>(driver: &D) {
    const ROUNDS: u64 = 8;
    const BYTES: u64 = 64 * 1024;
    let mut rig = RigBuilder::new(driver);
    let first = rig.queue(Side::Tested);
    let second = rig.queue(Side::Tested);
    let [freed, done] = rig.semaphores();
    rig.memory(2, 4 * BYTES);
    let mut rig = rig.build();
    let short = rig.kernels.short;
    let (first_buffer, second_buffer) = (BufferId(0), BufferId(1));

    for round in 1..=ROUNDS {
        rig.submit(first, &[], &[], Work::Alloca { buffer: first_buffer, bytes: BYTES });
        rig.submit(first, &[], &[], short);
        let signals = [(freed, 1)];
        let signals = if round == ROUNDS { &signals[..] } else { &[] };
        rig.submit(first, &[], signals, Work::Dealloca(first_buffer));
    }
    let reuse = Work::Alloca { buffer: second_buffer, bytes: BYTES };
    rig.submit(second, &[(freed, 1)], &[], reuse);
    rig.submit(second, &[], &[], short);
    rig.submit(second, &[], &[(done, 1)], Work::Dealloca(second_buffer));
    rig.expect_reached(done, 1, "the last dealloca");
    assert_all_finished_once_ok(&rig, 3 * (ROUNDS + 1), "allocas, kernels and deallocas");

    let stats = rig.device().memory_stats();
    assert_eq!(stats.reused, ROUNDS, "every alloca after the first reuses the block: {stats:?}");
    assert_eq!(stats.peak_committed, BYTES, "one block at a time: {stats:?}");
    assert_eq!(rig.device().committed_bytes(), 0, "every dealloca gave its bytes back");
}

/// A full ring is backpressure and loses nothing: a queue with room for 64 operations,
/// stopped behind a gate and filled, refuses one more with `Full` (handing it back unchanged);
/// then 600 operations are submitted through it, more than nine times its room, the first
/// after the gate being the long kernel so the driver's own ring (where it has one) fills
/// behind it too.
///
/// A failure means: an operation was lost, ran twice or failed when the driver's native ring
/// (or the layer's) was full (a driver answering `Busy` must be asked again and take it later);
/// or a signal was never reached; or the layer's ring did not refuse work when full.
pub fn a_full_ring_is_backpressure_and_loses_nothing<D: DriverUnderTest>(driver: &D) {
    const ROOM: u64 = 64;
    const OPERATIONS: u64 = 600;
    let mut rig = RigBuilder::new(driver);
    let queue = rig.queue_with(Side::Tested, ROOM as usize, true);
    let [gate] = rig.semaphores();
    // A small history, so the signalling submissions also wait for history room.
    let [progress] = rig.semaphores_with_history(8);
    let mut rig = rig.build();
    let (short, long) = (rig.kernels.short, rig.kernels.long);

    rig.submit(queue, &[(gate, 1)], &[(progress, 1)], short);
    rig.submit(queue, &[], &[], long);
    for _ in 3..=ROOM {
        rig.submit(queue, &[], &[], short);
    }
    let extra = Op { waits: &[], signals: &[], work: short, tag: ROOM + 1, ..Default::default() };
    match rig.device().try_submit(queue, extra) {
        Err(Rejected { op, error: SubmitError::Full(Resource::QueueSlots { capacity }) }) => {
            assert_eq!(capacity, ROOM as usize, "the capacity reported");
            assert_eq!((op.tag, op.work), (ROOM + 1, short), "the refused op is handed back");
        }
        other => panic!("a full queue must refuse with Full(QueueSlots): {other:?}"),
    }
    let device = rig.device();
    thread::scope(|scope| {
        let submitter = scope.spawn(|| {
            for tag in ROOM + 1..=OPERATIONS {
                let value = tag - ROOM + 1;
                let signals = [(progress, value)];
                let op =
                    Op { waits: &[], signals: &signals, work: short, tag, ..Default::default() };
                if let Err(error) = device.submit_timeout(queue, &op, WAIT_BUDGET) {
                    panic!("op {tag} behind a full ring: {error}");
                }
            }
        });
        // The submitter blocks for room until the gate opens: opening it is what frees room.
        rig.signal_from_host(gate, 1);
        submitter.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    });
    rig.expect_reached(progress, OPERATIONS - ROOM + 1, "the last signal");
    assert_all_finished_once_ok(&rig, OPERATIONS, "every operation through the full ring");
    assert_eq!(rig.device().in_flight(queue), Some(0), "nothing left in flight");
}

/// Work in flight when the device goes away: two long kernels and work waiting on them across
/// two queues of the driver and the peer, and work behind a gate nobody opens.
struct InFlight {
    /// Every operation, by queue and tag.
    ops: Vec<(QueueId, u64)>,
    /// The gated ones: they cannot have run, so they must end cancelled.
    gated: Vec<(QueueId, u64)>,
    /// The first long kernel: the device goes away once it has started.
    first_long: (QueueId, u64),
}

fn work_in_flight<D: DriverUnderTest>(driver: &D) -> (Rig, InFlight) {
    let mut rig = RigBuilder::new(driver);
    let first = rig.queue(Side::Tested);
    let second = rig.queue(Side::Tested);
    let peer = rig.queue(Side::Peer);
    let [never, started, chained, across] = rig.semaphores();
    let mut rig = rig.build();
    let (short, long, peer_long) = (rig.kernels.short, rig.kernels.long, rig.peer_kernels.long);
    let mut submitted =
        |queue, waits: &[(SemaphoreId, u64)], signals: &[(SemaphoreId, u64)], work| {
            (queue, rig.submit(queue, waits, signals, work).0)
        };
    let mut ops = vec![
        submitted(first, &[], &[(started, 1)], long),
        submitted(first, &[], &[(started, 2)], long),
        submitted(first, &[], &[(started, 3)], short),
    ];
    for value in 1..=3 {
        ops.push(submitted(second, &[(started, value)], &[(chained, value)], short));
    }
    ops.push(submitted(peer, &[(chained, 3)], &[(across, 1)], peer_long));
    let gated = vec![
        submitted(first, &[(never, 1)], &[(started, 4)], short),
        submitted(second, &[(started, 4)], &[], short),
    ];
    ops.extend(&gated);
    let first_long = ops[0];
    (rig, InFlight { ops, gated, first_long })
}

/// Checks that every operation of `in_flight` ended exactly once, the gated ones cancelled,
/// the others with success or a failure the layer uses for work cut short.
fn assert_every_operation_ended(rig: &Rig, in_flight: &InFlight) {
    let count = in_flight.ops.len() as u64;
    rig.ledger.wait_for_finishes(count, WAIT_BUDGET, "operations ended by the device going away");
    assert_eq!(rig.ledger.finishes(), count, "every operation ended exactly once");
    for &(queue, tag) in &in_flight.ops {
        let seen: Seen = rig.ledger.seen(queue, tag);
        let what = format!("op {tag} of queue {}", queue.index());
        let status = seen.status(&what);
        if in_flight.gated.contains(&(queue, tag)) {
            // Cancelled where it stood, or failed by its cancelled predecessor's signal.
            assert!(
                matches!(status, OpStatus::Cancelled | OpStatus::Failed(Failure::Cancelled)),
                "{what} never ran: it ends cancelled, not {status:?}"
            );
            assert_eq!(seen.started_ns, None, "{what} could not have started");
        } else {
            assert!(
                matches!(
                    status,
                    OpStatus::Ok
                        | OpStatus::Cancelled
                        | OpStatus::Failed(Failure::Aborted | Failure::Cancelled)
                ),
                "{what} ended {status:?}: work cut short ends cancelled or aborted"
            );
        }
    }
}

/// Shutdown with work in flight: [`Device::shutdown`](causeway_device::Device::shutdown) while
/// the driver runs a long kernel, with more queued behind it on two of its queues and the peer.
///
/// A failure means: an operation never ended, ended twice, or ended with something other than
/// success, cancellation or abortion; or the driver did not stop its own work within the
/// shutdown's bound (it is reported busy, or the device had to keep its state alive); or the
/// shutdown hung (the watchdog names the case).
pub fn shutdown_with_work_in_flight_ends_every_operation<D: DriverUnderTest>(driver: &D) {
    let (mut rig, in_flight) = work_in_flight(driver);
    let (queue, tag) = in_flight.first_long;
    rig.ledger.wait_for_start(queue, tag, WAIT_BUDGET, "the first long kernel");
    let report = rig.shutdown(SHUTDOWN_GRACE);
    assert!(report.cancelled >= in_flight.gated.len(), "{report:?}");
    assert!(report.busy_drivers.is_empty(), "a driver did not stop in time: {report:?}");
    assert!(report.busy_queues.is_empty() && !report.leaked, "{report:?}");
    assert_every_operation_ended(&rig, &in_flight);
}

/// Dropping the device with work in flight: the same work as
/// [`shutdown_with_work_in_flight_ends_every_operation`], ended by `Drop`.
///
/// A failure means: an operation never ended or ended twice or strangely, or dropping the
/// device hung (the watchdog names the case).
pub fn drop_with_work_in_flight_ends_every_operation<D: DriverUnderTest>(driver: &D) {
    let (mut rig, in_flight) = work_in_flight(driver);
    let (queue, tag) = in_flight.first_long;
    rig.ledger.wait_for_start(queue, tag, WAIT_BUDGET, "the first long kernel");
    rig.drop_device();
    assert_every_operation_ended(&rig, &in_flight);
}

/// Cancellation by speculation: a draft queue of the driver proposes four drafts; a consumer
/// queue of the driver takes each, the peer takes the last consumer's result; everything waits
/// behind a gate when the verifier accepts two drafts and rejects the rest
/// ([`Device::cancel_speculative`](causeway_device::Device::cancel_speculative)).
///
/// A failure means: the driver ran cancelled work, or work that did not depend on the rejected
/// drafts was cancelled too; or a cancelled operation's waiters (on this driver, the peer or
/// the host) did not end with `Cancelled`; or the driver's queues stalled on a cancelled
/// operation (a native driver must move its progress past work it will never be handed).
pub fn speculation_rejected_cancels_exactly_the_dependent_work<D: DriverUnderTest>(driver: &D) {
    const DRAFTS: usize = 4;
    const ACCEPTED: usize = 2;
    let mut rig = RigBuilder::new(driver);
    let draft = rig.queue_with(Side::Tested, 16, true);
    let consumer = rig.queue_with(Side::Tested, 16, true);
    let peer = rig.queue_with(Side::Peer, 16, true);
    let [gate, after, fresh, fresh_consumed] = rig.semaphores();
    let drafts: [SemaphoreId; DRAFTS] = rig.semaphores();
    let consumed: [SemaphoreId; DRAFTS] = rig.semaphores();
    let mut rig = rig.build();
    let (short, peer_short) = (rig.kernels.short, rig.peer_kernels.short);

    let mut openers = Vec::new();
    for queue in [draft, consumer, peer] {
        let (tag, _) = rig.submit(queue, &[(gate, 1)], &[], Work::Barrier);
        openers.push((queue, tag));
    }
    let mut draft_ops = Vec::new();
    for &drafted in &drafts {
        let (tag, receipt) = rig.submit(draft, &[], &[(drafted, 1)], short);
        draft_ops.push((tag, receipt.point.epoch));
    }
    let mut consumer_ops = Vec::new();
    for (&drafted, &done) in drafts.iter().zip(&consumed) {
        consumer_ops.push(rig.submit(consumer, &[(drafted, 1)], &[(done, 1)], short).0);
    }
    let (peer_op, _) = rig.submit(peer, &[(consumed[DRAFTS - 1], 1)], &[(after, 1)], peer_short);

    let axis = rig.device().axis(draft).expect("the draft queue's axis");
    let accepted_epoch = draft_ops[ACCEPTED - 1].1;
    let report = rig.device().cancel_speculative(Rejection::new(axis, accepted_epoch));
    let rejected = DRAFTS - ACCEPTED;
    assert_eq!(
        (report.cancelled, report.conservative, report.running),
        (2 * rejected + 1, 0, 0),
        "the rejected drafts, their consumers and the peer's operation: {report:?}"
    );
    rig.signal_from_host(gate, 1);

    let cancelled = Err(HostWaitError::Failed(Failure::Cancelled));
    for index in 0..DRAFTS {
        let outcome = if index < ACCEPTED { Ok(1) } else { cancelled };
        assert_eq!(rig.wait(consumed[index], 1), outcome, "consumer of draft {}", index + 1);
        assert_eq!(rig.wait(drafts[index], 1), outcome, "draft {}", index + 1);
    }
    assert_eq!(rig.wait(after, 1), cancelled, "the peer's operation on a rejected draft");
    let mut expectations = Vec::new();
    for (index, (&(draft_tag, _), &consumer_tag)) in draft_ops.iter().zip(&consumer_ops).enumerate()
    {
        let dependent = index >= ACCEPTED;
        expectations.push((draft, draft_tag, dependent));
        expectations.push((consumer, consumer_tag, dependent));
    }
    expectations.push((peer, peer_op, true));
    expectations.extend(openers.iter().map(|&(queue, tag)| (queue, tag, false)));
    let total = expectations.len() as u64;
    rig.ledger.wait_for_finishes(total, WAIT_BUDGET, "every operation after the rejection");
    for (queue, tag, dependent) in expectations {
        let seen = rig.ledger.seen(queue, tag);
        let what = format!("op {tag} of queue {}", queue.index());
        if dependent {
            assert_eq!(seen.status(&what), OpStatus::Cancelled, "{what}");
            assert_eq!(seen.speculative, Some((Dependence::Rejected, false)), "{what}");
            assert_eq!(seen.started_ns, None, "{what} ran although cancelled");
        } else {
            assert_eq!(seen.status(&what), OpStatus::Ok, "{what}");
            assert_eq!(seen.speculative, None, "{what}");
        }
    }
    // Both queues go on past their cancelled operations.
    rig.submit(draft, &[], &[(fresh, 1)], short);
    rig.submit(consumer, &[(fresh, 1)], &[(fresh_consumed, 1)], short);
    rig.expect_reached(fresh_consumed, 1, "the queues after the cancellation");
}

/// 10^5 short kernels through one queue of the driver, a signal every thousandth.
///
/// A failure means: the driver lost, duplicated or failed work under sustained load, or leaked
/// slots (work still in flight at the end). Its wall time is the driver's per-operation cost
/// times 10^5: the suite's timing is reported, never asserted.
pub fn a_hundred_thousand_operations_through_one_queue<D: DriverUnderTest>(driver: &D) {
    let mut rig = RigBuilder::new(driver);
    let queue = rig.queue(Side::Tested);
    let [thousands] = rig.semaphores();
    let mut rig = rig.build();
    let kernels = short_kernels(&rig);
    for (operation, &kernel) in (1..=THROUGHPUT_OPERATIONS).zip(kernels.iter().cycle()) {
        let signals = [(thousands, operation / THROUGHPUT_SIGNAL_EVERY)];
        let signals = if operation % THROUGHPUT_SIGNAL_EVERY == 0 { &signals[..] } else { &[] };
        rig.submit(queue, &[], signals, kernel);
    }
    let last = THROUGHPUT_OPERATIONS / THROUGHPUT_SIGNAL_EVERY;
    rig.expect_reached(thousands, last, "the last signal");
    assert_all_finished_once_ok(&rig, THROUGHPUT_OPERATIONS, "10^5 operations on one queue");
    assert_eq!(rig.device().in_flight(queue), Some(0), "nothing left in flight");
}

/// 10^5 short kernels across two queues of the driver: a ping-pong of 5·10^4 rounds, every
/// operation waiting on the other queue's previous one.
///
/// A failure means: the driver lost, duplicated, reordered or failed work under sustained
/// load; or its native wait count differs from the device waits the layer resolved; or a
/// dependency edge was resolved twice or not at all.
pub fn a_hundred_thousand_operations_across_two_queues<D: DriverUnderTest>(driver: &D) {
    let rounds = THROUGHPUT_OPERATIONS / 2;
    let mut rig = RigBuilder::new(driver);
    let first = rig.queue(Side::Tested);
    let second = rig.queue(Side::Tested);
    let [ping, pong] = rig.semaphores();
    let mut rig = rig.build();
    // The queues take turns through the short kernels, so none is asked to run one that the
    // other queue's last operation may still be running.
    let kernels = short_kernels(&rig);
    let mut turns = kernels.iter().cycle();
    for round in 1..=rounds {
        let waits = [(pong, round - 1)];
        let waits = if round == 1 { &[][..] } else { &waits[..] };
        let first_kernel = *turns.next().expect("a cycle never ends");
        rig.submit(first, waits, &[(ping, round)], first_kernel);
        let second_kernel = *turns.next().expect("a cycle never ends");
        rig.submit(second, &[(ping, round)], &[(pong, round)], second_kernel);
    }
    rig.expect_reached(pong, rounds, "the last pong");
    assert_all_finished_once_ok(&rig, THROUGHPUT_OPERATIONS, "10^5 operations on two queues");
    let counts = rig.resolutions(&[first, second]);
    let edges = 2 * rounds - 1;
    assert_eq!(
        counts.elided + counts.satisfied + counts.device + counts.held,
        edges,
        "one resolution per dependency edge: {counts:?}"
    );
    if let Some(native) = rig.native_waits() {
        let expected = if rig.native_waits_capable { counts.device } else { 0 };
        assert_eq!(native, expected, "native waits emitted against device waits: {counts:?}");
    }
}
