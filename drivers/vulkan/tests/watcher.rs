//! The completion watcher reports every registered completion, by token, exactly once; a full
//! watcher refuses registrations; a stopped one reports what was left and refuses more. Its wake
//! policy: submissions in flight together are reported in one pass, unless a value is needed
//! sooner.

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use causeway_driver_vulkan::{Gpu, Registration, Timeline, VulkanError, Watcher, POLL_INTERVAL};

const SUBMISSIONS: u64 = 1200;

/// 1200 submissions through the watcher alternating between two timelines (two causeway queues
/// on the one VkQueue), each waiting natively for the other timeline's previous epoch, each
/// registered under its own token after it is submitted (reached already, or reported once).
/// The watcher is smaller than the work, so registering meets backpressure and retries after
/// completions.
#[test]
fn reports_every_completion_of_many_submissions_once_by_token() {
    let gpu = common::open();
    let (sender, completions) = mpsc::channel();
    let watcher = Watcher::start(&gpu, 64, move |token, result| {
        // The receiver outlives the test's waits; a send after it is gone changes nothing.
        let _ = sender.send((token, result));
    })
    .expect("watcher");
    let timelines =
        [Timeline::new(&gpu, 0).expect("timeline"), Timeline::new(&gpu, 0).expect("timeline")];
    let waits_before = gpu.native_waits();
    let mut seen = vec![0_u32; SUBMISSIONS as usize];
    let mut reported = 0;
    let deadline = Instant::now() + common::HANG_GUARD;
    for token in 0..SUBMISSIONS {
        let (queue, epoch) = ((token % 2) as usize, token / 2 + 1);
        let other = &timelines[1 - queue];
        if token == 0 {
            watcher.submit(0, None, &[], (&timelines[queue], epoch)).expect("submit");
        } else {
            // The other queue's last epoch: token - 1 was its op.
            let other_epoch = (token - 1) / 2 + 1;
            watcher
                .submit(0, None, &[(other, other_epoch)], (&timelines[queue], epoch))
                .expect("submit");
        }
        loop {
            match watcher.register(&timelines[queue], epoch, token) {
                Ok(Registration::Watching) => break,
                Ok(Registration::Reached) => {
                    seen[token as usize] += 1;
                    reported += 1;
                    break;
                }
                Err(VulkanError::WatcherFull { capacity: 64 }) => {
                    let (done, result) = completions
                        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                        .expect("a completion while the watcher is full");
                    result.expect("completed");
                    seen[done as usize] += 1;
                    reported += 1;
                }
                Err(error) => panic!("register: {error}"),
            }
        }
    }
    while reported < SUBMISSIONS {
        let (done, result) = completions
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("every completion reported before the hang guard");
        result.expect("completed");
        seen[done as usize] += 1;
        reported += 1;
    }
    assert!(seen.iter().all(|&count| count == 1), "a token was reported twice or never");
    assert_eq!(gpu.native_waits() - waits_before, SUBMISSIONS - 1);
    assert!(watcher.stop(Instant::now() + common::HANG_GUARD), "the watcher did not stop");
    assert!(completions.try_recv().is_err(), "a report after all completions");
    drop((watcher, timelines));
    common::assert_validation_clean(&gpu);
}

#[test]
fn a_full_watcher_refuses_and_a_stopped_one_reports_what_was_left() {
    let gpu = common::open();
    let (sender, completions) = mpsc::channel();
    let watcher = Watcher::start(&gpu, 2, move |token, result| {
        let _ = sender.send((token, result));
    })
    .expect("watcher");
    let never = Timeline::new(&gpu, 0).expect("timeline");
    assert_eq!(watcher.register(&never, 1, 10), Ok(Registration::Watching));
    assert_eq!(watcher.register(&never, 2, 11), Ok(Registration::Watching));
    assert_eq!(watcher.outstanding(), 2);
    assert!(matches!(
        watcher.register(&never, 3, 12),
        Err(VulkanError::WatcherFull { capacity: 2 })
    ));
    assert!(watcher.stop(Instant::now() + common::HANG_GUARD), "the watcher did not stop");
    let mut left: Vec<_> = completions.try_iter().collect();
    left.sort_by_key(|(token, _)| *token);
    assert_eq!(
        left,
        vec![(10, Err(VulkanError::WatcherStopped)), (11, Err(VulkanError::WatcherStopped))]
    );
    assert!(matches!(watcher.register(&never, 1, 13), Err(VulkanError::WatcherStopped)));
    drop((watcher, never));
    common::assert_validation_clean(&gpu);
}

/// A registration for a value the host reaches later (no submission through the watcher
/// reaches it: the watcher looks every poll interval) is reported once the host signals it,
/// not before; a registration of a value already reached is answered at once.
#[test]
fn reports_a_host_signalled_value_after_it_is_signalled() {
    let gpu = common::open();
    let (sender, completions) = mpsc::channel();
    let watcher = Watcher::start(&gpu, 4, move |token, result| {
        let _ = sender.send((token, result));
    })
    .expect("watcher");
    let mirror = Timeline::new(&gpu, 0).expect("timeline");
    assert_eq!(watcher.register(&mirror, 2, 7), Ok(Registration::Watching));
    mirror.signal_host(1).expect("host signal");
    assert_eq!(watcher.register(&mirror, 1, 8), Ok(Registration::Reached));
    assert!(
        completions.recv_timeout(Duration::from_millis(250)).is_err(),
        "reported before its value"
    );
    mirror.signal_host(2).expect("host signal");
    assert_eq!(completions.recv_timeout(common::HANG_GUARD).expect("report"), (7, Ok(())));
    drop((watcher, mirror));
    common::assert_validation_clean(&gpu);
}

/// A callback that panics ends the watcher thread; the watcher then refuses registrations
/// instead of accepting ones nobody will report.
#[test]
fn a_panicking_callback_stops_the_watcher() {
    let gpu = common::open();
    let watcher = Watcher::start(&gpu, 4, |token, _| panic!("callback panics on token {token}"))
        .expect("watcher");
    let reached = Timeline::new(&gpu, 0).expect("timeline");
    assert_eq!(watcher.register(&reached, 1, 1), Ok(Registration::Watching));
    reached.signal_host(1).expect("host signal");
    let deadline = Instant::now() + common::HANG_GUARD;
    while !matches!(watcher.register(&reached, 2, 2), Err(VulkanError::WatcherStopped)) {
        assert!(Instant::now() < deadline, "the watcher still accepts registrations");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(watcher.stop(Instant::now() + common::HANG_GUARD), "the watcher did not stop");
    drop((watcher, reached));
    common::assert_validation_clean(&gpu);
}

/// A watcher of four registrations reporting into `completions`, a `gate` timeline the host
/// signals to let submissions through, and the `progress` timeline they signal.
struct Gated {
    watcher: Watcher,
    completions: mpsc::Receiver<(u64, Result<(), VulkanError>)>,
    gate: Timeline,
    progress: Timeline,
}

impl Gated {
    fn start(gpu: &Gpu) -> Gated {
        let (sender, completions) = mpsc::channel();
        let watcher = Watcher::start(gpu, 4, move |token, result| {
            let _ = sender.send((token, result));
        })
        .expect("watcher");
        let timeline = || Timeline::new(gpu, 0).expect("timeline");
        Gated { watcher, completions, gate: timeline(), progress: timeline() }
    }
}

/// How many submissions the batching test keeps in flight.
const BATCH: u64 = 1024;

/// 1024 submissions in flight, each held back by a host-signalled gate until the host lets it
/// through, one after the other with a pause between (a device that completes work over a
/// while), registrations on the middle one and the last: the thread wakes at most twice for
/// completions (for the newest submission it saw when a wait began, and for the newest after
/// that), not once per completion, and reports both registrations.
///
/// With validation off (see `common::open_without_validation`).
#[test]
fn submissions_in_flight_together_are_reported_in_one_pass() {
    let gpu = common::open_without_validation();
    let Gated { watcher, completions, gate, progress } = Gated::start(&gpu);
    for value in 1..=BATCH {
        watcher.submit(0, None, &[(&gate, value)], (&progress, value)).expect("submit");
    }
    assert_eq!(watcher.register(&progress, BATCH / 2, 1), Ok(Registration::Watching));
    assert_eq!(watcher.register(&progress, BATCH, 2), Ok(Registration::Watching));
    assert_eq!(watcher.wakes().completed, 0, "a wait ended for a submission behind the gate");
    for value in 1..=BATCH {
        gate.signal_host(value).expect("host signal");
        std::thread::sleep(Duration::from_micros(50));
    }
    let mut reported: Vec<_> =
        (0..2).map(|_| completions.recv_timeout(common::HANG_GUARD).expect("a report")).collect();
    reported.sort_by_key(|(token, _)| *token);
    assert_eq!(reported, vec![(1, Ok(())), (2, Ok(()))]);
    let wakes = watcher.wakes().completed;
    assert!(wakes <= 2, "{wakes} wakes for completions of {BATCH} submissions in flight together");
}

/// A value somebody needs is reported when its submission completes, though a later one in
/// flight is held back: the thread's wait (after a poll interval with nothing complete, when
/// it looks again) targets the needed submission, not the newest. Without the need it would
/// be reported only by the next periodic look, a wait that timed out, never by a completion.
/// A round whose wait happens to time out just as the needed submission completes reports it
/// by that timeout instead; such a round is run again (at most three rounds). With validation
/// off (see `common::open_without_validation`).
#[test]
fn a_needed_value_is_reported_when_reached_not_with_its_batch() {
    let gpu = common::open_without_validation();
    let Gated { watcher, completions, gate, progress } = Gated::start(&gpu);
    let mut woken_by_completion = false;
    for round in 0..3 {
        let (needed, held_back) = (2 * round + 1, 2 * round + 2);
        watcher.submit(0, None, &[(&gate, needed)], (&progress, needed)).expect("submit");
        watcher.submit(0, None, &[(&gate, held_back)], (&progress, held_back)).expect("submit");
        assert_eq!(watcher.register(&progress, needed, round), Ok(Registration::Watching));
        watcher.need(&progress, needed);
        // Long enough for the thread's first wait to time out and the next to pick its target
        // with the need known (on a slow machine it may still be in its first wait, whose
        // target, the needed submission, was then the newest).
        std::thread::sleep(POLL_INTERVAL + POLL_INTERVAL / 2);
        let before = watcher.wakes().completed;
        gate.signal_host(needed).expect("host signal");
        let report = completions.recv_timeout(common::HANG_GUARD).expect("report");
        assert_eq!(report, (round, Ok(())));
        woken_by_completion = watcher.wakes().completed > before;
        gate.signal_host(held_back).expect("host signal");
        // Through the watcher, the one thread that waits on the device here (two waits on one
        // value, a host signal away, stall the validation layer: see `Timeline`).
        if watcher.register(&progress, held_back, 100) == Ok(Registration::Watching) {
            let report = completions.recv_timeout(common::HANG_GUARD).expect("report");
            assert_eq!(report, (100, Ok(())));
        }
        if woken_by_completion {
            break;
        }
    }
    assert!(woken_by_completion, "the needed value was reported only by periodic looks");
}
