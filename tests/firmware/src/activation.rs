//! The interrupt-driven activation test: a timer interrupt signals a semaphore, the signal's
//! timepoint releases (or wakes) a process, and the main loop, parked in the platform wait,
//! wakes and runs that process exactly once.
//!
//! ```text
//!   thread mode (Worker::run)                 tick interrupt (ticks::on_tick → tick_hook)
//!   ─────────────────────────                 ───────────────────────────────────────────
//!   submit waiter (held), follower
//!   run: nothing runnable → park
//!     idle bit set, word = PARKED
//!     futex.wait ── MAIN_PARKED ──────────►   round armed and main parked?
//!       (WFI / WFE / spin)                      TIMER_SIGNAL.signal(round)
//!                                                 → timepoint fires → ReleaseOnSignal::notify
//!                                                   → Executor::release (or wake) → push
//!                                                   → notify → word = NOTIFIED, futex.wake
//!     returns, word ≠ PARKED ◄────────────────
//!   drain waiter (once) → completes
//!     → follower activated → drains → shutdown
//!   run returns; counts checked; more ticks pass; counts unchanged
//! ```
//!
//! Each round uses a fresh executor and the next value of one static semaphore, and runs with
//! one of the platform's futexes: `BareMetalFutex` (WFI) releasing and waking, `EventFutex`
//! (WFE/SEV) on Cortex-M, and `SpinFutex`. The hook signals only while the main loop is inside
//! the futex's wait, so a passing round proves that an interrupt-side signal ended a real park.
//! A round still armed after [`DEADLINE_TICKS`] fails the image from inside the interrupt.

use core::pin::pin;
use core::time::Duration;

use causeway_core::executor::{
    Class, Drain, DrainContext, Drained, Executor, Futex, FutexWord, Process, RoundRobin,
    SpinPolicy,
};
use causeway_core::semaphore::{Arm, Cancelled, Lookup, Notify, Outcome, Timepoint};
use causeway_core::{Axis, Domain, Endpoint, Failure, Frontier, Point, Scope, Semaphore};
use causeway_platform_baremetal::{BareMetalFutex, SpinFutex};
use portable_atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use semihosting::println;

use crate::cases;
use crate::harness::Case;
use crate::{board, ticks};

/// Every activation case, in order (each one round, on the next semaphore value).
pub const CASES: &[Case] = cases![
    the_handler_and_the_main_loop_share_64_bit_atomics,
    wfi_main_loop_is_woken_by_a_release_from_the_timer_interrupt,
    wfi_main_loop_is_woken_by_a_wake_from_the_timer_interrupt,
    wfe_main_loop_is_woken_by_a_release_from_the_timer_interrupt,
    spinning_main_loop_is_woken_by_a_release_from_the_timer_interrupt,
];

/// Ticks a round may stay armed before the image fails: seconds of guest time.
pub const DEADLINE_TICKS: u64 = 5_000;

/// Ticks that must pass after a round without anything running again.
const QUIET_TICKS: u64 = 5;

const TIMER_ENDPOINT: Endpoint =
    Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

/// The timer's timeline: the interrupt signals value `r` in round `r`.
static TIMER_SIGNAL: Semaphore<4, 4> = Semaphore::new(0, Scope::DeviceLocal, TIMER_ENDPOINT);

/// The timer interrupt's own axis: its signals are tracked, so waiters import an exact point.
const TIMER_AXIS: Axis = Axis::new(0, Domain::Host, 1);

/// The round thread mode has armed; 0 while none is.
static ARMED_ROUND: AtomicU64 = AtomicU64::new(0);
/// The tick at which the current round was armed.
static ARMED_AT: AtomicU64 = AtomicU64::new(0);
/// The last round the hook has signalled.
static SIGNALLED_ROUND: AtomicU64 = AtomicU64::new(0);
/// Signals the hook made (each while the main loop was parked).
static SIGNALS: AtomicU32 = AtomicU32::new(0);
/// Set while the main loop is inside the platform futex's `wait`.
static MAIN_PARKED: AtomicBool = AtomicBool::new(false);

/// Runs in the tick interrupt while a round is armed.
fn tick_hook() {
    // Acquire pairs with the Release store arming the round: the timepoint and processes the
    // round set up are in place.
    let round = ARMED_ROUND.load(Ordering::Acquire);
    if round == 0 {
        return;
    }
    if ticks::now() - ARMED_AT.load(Ordering::Relaxed) > DEADLINE_TICKS {
        println!("activation round {round} still armed after {DEADLINE_TICKS} ticks: hung");
        semihosting::process::exit(2);
    }
    // Acquire pairs with the Release store in `ParkProbe::wait`.
    if SIGNALLED_ROUND.load(Ordering::Relaxed) >= round || !MAIN_PARKED.load(Ordering::Acquire) {
        return;
    }
    let point = Point::new(TIMER_AXIS, round);
    TIMER_SIGNAL
        .signal(round, point, &Frontier::<4>::from_points([point]))
        .expect("the timer's timeline advances by one per round");
    SIGNALS.fetch_add(1, Ordering::Relaxed);
    SIGNALLED_ROUND.store(round, Ordering::Relaxed);
}

/// The platform futex under test, instrumented: counts waits and wakes, and tells the tick hook
/// when the main loop is inside `wait`.
struct ParkProbe<F> {
    inner: F,
    waits: AtomicU32,
    wakes_from_interrupt: AtomicU32,
}

impl<F: Futex> Futex for ParkProbe<F> {
    fn wait(&self, word: &FutexWord, expected: u32, timeout: Option<Duration>) {
        self.waits.fetch_add(1, Ordering::Relaxed);
        // Release pairs with the hook's Acquire load: the parking steps before this (idle bit,
        // parked word) are visible to the handler that sees the flag.
        MAIN_PARKED.store(true, Ordering::Release);
        self.inner.wait(word, expected, timeout);
        MAIN_PARKED.store(false, Ordering::Relaxed);
    }

    fn wake_one(&self, word: &FutexWord) {
        if board::in_tick_handler() {
            self.wakes_from_interrupt.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.wake_one(word);
    }

    fn wake_all(&self, word: &FutexWord) {
        self.inner.wake_all(word);
    }
}

/// A round's executor, parking through `X` (a `&ParkProbe` around the futex under test).
type RoundExecutor<'p, X> = Executor<'p, X, 2, 1>;

/// How the timepoint's callback makes the waiter runnable.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Activation {
    /// The waiter is submitted with one extra suspension; the callback releases it.
    Release,
    /// The waiter drains once, finds the value unreached and sleeps; the callback wakes it.
    Wake,
}

/// The timepoint callback: runs in the tick interrupt.
struct ReleaseOnSignal<'e, 'p, F: Futex> {
    executor: &'e RoundExecutor<'p, F>,
    process: &'p Process<'p>,
    activation: Activation,
    round: u64,
    fired: AtomicU32,
    fired_in_interrupt: AtomicBool,
}

impl<F: Futex> Notify for ReleaseOnSignal<'_, '_, F> {
    fn notify(&self, outcome: Outcome) {
        self.fired.fetch_add(1, Ordering::Relaxed);
        self.fired_in_interrupt.store(board::in_tick_handler(), Ordering::Relaxed);
        assert_eq!(outcome, Ok(self.round), "the timepoint fires at its own round's value");
        match self.activation {
            Activation::Release => {
                self.executor.release(self.process).expect("the waiter holds this suspension");
            }
            Activation::Wake => self.executor.wake(self.process),
        }
    }
}

/// The process the interrupt activates.
struct Waiter {
    round: u64,
    drains: AtomicU32,
    drains_after_signal: AtomicU32,
    finishes: AtomicU32,
    imported_timer_point: AtomicBool,
}

impl Drain for Waiter {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        self.drains.fetch_add(1, Ordering::Relaxed);
        if TIMER_SIGNAL.value() < self.round {
            return Drained::Sleep;
        }
        self.drains_after_signal.fetch_add(1, Ordering::Relaxed);
        // The late-waiter rule on the target: the wait imports the interrupt's own point.
        let exact = match TIMER_SIGNAL.lookup(self.round) {
            Lookup::Tracked { origin, frontier, reached: true, aged_out: false } => {
                origin == Point::new(TIMER_AXIS, self.round)
                    && frontier.get(TIMER_AXIS) == Some(self.round)
            }
            _ => false,
        };
        self.imported_timer_point.store(exact, Ordering::Relaxed);
        Drained::Done(Ok(()))
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        assert_eq!(outcome, Ok(()));
        self.finishes.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs after the waiter completes (its dependent) and stops the executor.
struct Follower<'e, 'p, F: Futex> {
    executor: &'e RoundExecutor<'p, F>,
    drains: AtomicU32,
}

impl<F: Futex> Drain for Follower<'_, '_, F> {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        self.drains.fetch_add(1, Ordering::Relaxed);
        self.executor.shutdown();
        Drained::Done(Ok(()))
    }
}

/// One 64-bit word both contexts add to: the handler in the high half, thread mode in the low.
static SHARED: AtomicU64 = AtomicU64::new(0);
/// How many times the handler added to [`SHARED`].
static HANDLER_ADDS: AtomicU32 = AtomicU32::new(0);

fn add_from_the_handler() {
    SHARED.fetch_add(1 << 32, Ordering::Relaxed);
    HANDLER_ADDS.fetch_add(1, Ordering::Relaxed);
}

/// Core's executor and semaphores keep 64-bit atomics that both the handler and thread mode
/// write (the idle mask, timeline values, failure words). Where the core has no 64-bit atomics
/// portable-atomic emulates them; its default emulation on cores with 32-bit CAS is a table of
/// spin locks, and a handler that interrupts the lock's holder spins forever. This case keeps
/// thread mode inside 64-bit read-modify-writes while ticks land, so that emulation hangs here
/// (qemu's timeout fails the run); the interrupt-masking one the platform's
/// `critical-section-single-hart` feature selects passes.
fn the_handler_and_the_main_loop_share_64_bit_atomics() {
    const HANDLER_TICKS: u32 = 20;
    ticks::set_hook(Some(add_from_the_handler));
    board::start_ticks();
    let mut own_adds = 0u64;
    while HANDLER_ADDS.load(Ordering::Relaxed) < HANDLER_TICKS {
        SHARED.fetch_add(1, Ordering::Relaxed);
        own_adds += 1;
    }
    board::stop_ticks();
    ticks::set_hook(None);
    let handler_adds = u64::from(HANDLER_ADDS.load(Ordering::Relaxed));
    assert_eq!(SHARED.load(Ordering::Relaxed), handler_adds << 32 | own_adds, "no add was lost");
    println!("    {own_adds} adds in thread mode, {handler_adds} in the handler");
}

/// The round counter: each case takes the next timeline value.
static NEXT_ROUND: AtomicU64 = AtomicU64::new(1);

/// One round; `single_wait`: the futex really sleeps until the interrupt (WFI, spin), so the
/// loop waits exactly once (WFE is a no-op in qemu, so its loop re-waits many times).
fn interrupt_wakes_the_parked_main_loop<F: Futex>(
    futex: F,
    activation: Activation,
    single_wait: bool,
) {
    let round = NEXT_ROUND.fetch_add(1, Ordering::Relaxed);
    let probe = ParkProbe {
        inner: futex,
        waits: AtomicU32::new(0),
        wakes_from_interrupt: AtomicU32::new(0),
    };
    let executor: RoundExecutor<'_, &ParkProbe<F>> = Executor::new(&probe, 1).unwrap();
    let follower = Follower { executor: &executor, drains: AtomicU32::new(0) };
    let waiter = Waiter {
        round,
        drains: AtomicU32::new(0),
        drains_after_signal: AtomicU32::new(0),
        finishes: AtomicU32::new(0),
        imported_timer_point: AtomicBool::new(false),
    };
    let follower_process = Process::new(&follower, Class::Immediate);
    let dependents = [&follower_process];
    let waiter_process = Process::new(&waiter, Class::Immediate);
    waiter_process.set_dependents(&dependents).unwrap();
    let release = ReleaseOnSignal {
        executor: &executor,
        process: &waiter_process,
        activation,
        round,
        fired: AtomicU32::new(0),
        fired_in_interrupt: AtomicBool::new(false),
    };
    let timepoint = pin!(Timepoint::new(&release));
    // SAFETY: the timepoint is pinned in this frame, and the frame does not end before it has
    // fired (checked below: `AlreadyFired`) or, on any failure, before the image exits (the
    // panic handler never returns); `TIMER_SIGNAL` is a static.
    let armed = unsafe { TIMER_SIGNAL.arm(timepoint.as_ref(), round) };
    assert_eq!(armed, Ok(Arm::Armed));
    if activation == Activation::Release {
        executor.hold(&waiter_process).unwrap();
    }
    executor.submit(&follower_process).unwrap();
    executor.submit(&waiter_process).unwrap();
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();

    ARMED_AT.store(ticks::now(), Ordering::Relaxed);
    // Release pairs with the hook's Acquire load: everything above is in place first.
    ARMED_ROUND.store(round, Ordering::Release);
    worker.run();
    // Disarming publishes nothing: the hook only stops acting on the round.
    ARMED_ROUND.store(0, Ordering::Relaxed);

    let expected_drains = if activation == Activation::Wake { 2 } else { 1 };
    assert_eq!(SIGNALLED_ROUND.load(Ordering::Relaxed), round, "the interrupt signalled");
    assert_eq!(TIMER_SIGNAL.value(), round);
    assert_eq!(release.fired.load(Ordering::Relaxed), 1, "the timepoint fired once");
    assert!(release.fired_in_interrupt.load(Ordering::Relaxed), "inside the tick handler");
    let waits = probe.waits.load(Ordering::Relaxed);
    if single_wait {
        // Parked once, and that one wait ended with the handler's wake: a lost wake would
        // have sent the loop back into the wait (and, no second signal coming, past the
        // deadline).
        assert_eq!(waits, 1, "the main loop parked once and the interrupt ended it");
    } else {
        assert!(waits >= 1, "the main loop parked");
    }
    assert!(probe.wakes_from_interrupt.load(Ordering::Relaxed) >= 1, "woken from the handler");
    assert_eq!(waiter.drains.load(Ordering::Relaxed), expected_drains);
    assert_eq!(waiter.drains_after_signal.load(Ordering::Relaxed), 1, "ran once when signalled");
    assert_eq!(waiter.finishes.load(Ordering::Relaxed), 1);
    assert!(waiter.imported_timer_point.load(Ordering::Relaxed), "imported the timer's point");
    assert_eq!(follower.drains.load(Ordering::Relaxed), 1);
    assert!(waiter_process.is_completed() && follower_process.is_completed());
    assert_eq!(executor.live(), 0);

    // More interrupts arrive; nothing runs again and nothing fires again.
    ticks::sleep_ticks(QUIET_TICKS);
    assert_eq!(waiter.drains.load(Ordering::Relaxed), expected_drains);
    assert_eq!(release.fired.load(Ordering::Relaxed), 1);
    assert_eq!(SIGNALS.load(Ordering::Relaxed), round as u32, "one signal per round");
    assert_eq!(TIMER_SIGNAL.cancel(&timepoint), Cancelled::AlreadyFired);
    println!(
        "    round {round}: {waits} wait(s), {} drain(s) of the waiter, signal at tick {}",
        expected_drains,
        ticks::now()
    );
}

/// Starts the ticks and installs the hook around `body`.
fn with_ticks(body: impl FnOnce()) {
    ticks::set_hook(Some(tick_hook));
    board::start_ticks();
    body();
    board::stop_ticks();
    ticks::set_hook(None);
}

fn wfi_main_loop_is_woken_by_a_release_from_the_timer_interrupt() {
    with_ticks(|| {
        interrupt_wakes_the_parked_main_loop(BareMetalFutex::new(), Activation::Release, true)
    });
}

fn wfi_main_loop_is_woken_by_a_wake_from_the_timer_interrupt() {
    with_ticks(|| {
        interrupt_wakes_the_parked_main_loop(BareMetalFutex::new(), Activation::Wake, true)
    });
}

#[cfg(target_arch = "arm")]
fn wfe_main_loop_is_woken_by_a_release_from_the_timer_interrupt() {
    use causeway_platform_baremetal::EventFutex;
    with_ticks(|| {
        interrupt_wakes_the_parked_main_loop(EventFutex::new(), Activation::Release, false)
    });
}

/// RISC-V has no event register: the round runs with the interrupt futex again, so the round
/// numbering (one semaphore value per case) stays the same on every board.
#[cfg(not(target_arch = "arm"))]
fn wfe_main_loop_is_woken_by_a_release_from_the_timer_interrupt() {
    with_ticks(|| {
        interrupt_wakes_the_parked_main_loop(BareMetalFutex::new(), Activation::Release, true)
    });
}

fn spinning_main_loop_is_woken_by_a_release_from_the_timer_interrupt() {
    with_ticks(|| {
        interrupt_wakes_the_parked_main_loop(SpinFutex::new(), Activation::Release, true)
    });
}
