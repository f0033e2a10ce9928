//! The `npu_cost` run: what the controller spends per descriptor of each kind, in
//! instructions, measured deterministically.
//!
//! qemu runs the image with `-icount shift=6,sleep=off`: every instruction advances virtual
//! time by exactly 2^6 ns, and idle time jumps to the next timer deadline. The board's cycle
//! clock counts that virtual time, so `cycles · (10^9 / CYCLE_CLOCK_HZ) / 64` is the
//! instructions executed between two reads, reproducible to the instruction on every run. The
//! periodic tick is off; a compute engine's completion interrupt is raised at dispatch, so
//! EXECs (of 0 tiles) never leave the controller idle either.
//!
//! Only the controller's work is timed: the host pushes, publishes and rings the doorbell
//! before the clock starts, and reaps after it stops. Two figures cancel what a run costs
//! beyond its descriptors (the worker's steps that find nothing, the ring's final idle drain):
//!
//! - **batches** — EXEC, SIGNAL, BARRIER, elided WAIT: `B` descriptors of one kind on one
//!   ring; the cost is `(T(6) − T(2)) / 4` (both batches fit in one drain call, so the
//!   difference holds descriptors only);
//! - **rounds** — a WAIT that stalls is released by another ring's SIGNAL, one pair per round:
//!   the cost is `T(WAIT + SIGNAL) − T(SIGNAL) − (T(idle drain of the waiting ring) −
//!   T(nothing))`, over four rounds; likewise a WAIT on a value another ring just signalled
//!   that the waiting ring did not know (satisfied, importing its frontier).
//!
//! A batch figure holds the controller's read of the head descriptor, the engine's step and
//! the clock bookkeeping, but no executor scheduling (one drain call handles the batch) —
//! except EXEC's: its drain sleeps until the engine's interrupt and is scheduled again. A round
//! figure holds the waiting ring's drain calls beyond the idle one it would make anyway: for a
//! stalled WAIT, the stall, its timepoint, the wake-up from the releasing SIGNAL's retire and
//! the second drain call.

use causeway_driver_npu::{
    Command, CompletionStatus, Descriptor, Register, RegisterIo, EXEC_ARGUMENTS,
};
use semihosting::println;

use super::compute::Kernel;
use super::controller::{WaitCounts, CONTROLLERS};
use super::{data_address, start, wake, HostRing, NpuWorker, RINGS};
use crate::{board, ticks};

/// qemu's `-icount shift`: nanoseconds of virtual time per instruction, as a power of two.
pub const ICOUNT_SHIFT: u32 = 6;

const SMALL_BATCH: u32 = 2;
const LARGE_BATCH: u32 = 6;
const ROUNDS: u32 = 4;
/// Steps that find nothing to do while descriptors are outstanding, before a run gives up.
const MAX_EMPTY_STEPS: u32 = 1_000;

/// The slot every measurement signals and waits on.
const SLOT: u32 = 0;

/// Why the measurement could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostError {
    /// The controller or the host did not start.
    Start,
    /// A descriptor did not complete, or not successfully.
    Incomplete,
    /// A WAIT was not disposed of as the measurement intended (so its figure would be another
    /// kind's).
    WrongDisposition,
}

/// One ring's part in a round: the ring, and its descriptor for the round's value, if any.
type RoundPart = (usize, fn(u64) -> Option<Command>);

/// The measuring host: the producers, the worker and the value the slot has reached.
struct Bench {
    rings: [HostRing; RINGS],
    worker: NpuWorker,
    value: u64,
}

impl Bench {
    /// Pushes `descriptors` on `ring`, publishes them and rings the doorbell.
    fn publish(&mut self, ring: usize, descriptors: &[Descriptor]) -> Result<(), CostError> {
        let producer = &mut self.rings[ring];
        for descriptor in descriptors {
            producer.try_push(descriptor).map_err(|_| CostError::Incomplete)?;
        }
        producer.publish();
        wake(ring);
        Ok(())
    }

    /// Runs the controller until every published descriptor completed; the cycles it took.
    /// An engine's interrupt comes at once, so the worker finding nothing to do while a
    /// descriptor is outstanding is brief; a bounded number of such steps ends the run, and
    /// the reap reports what did not complete.
    fn timed_run(&mut self) -> u32 {
        let start = board::cycle_clock();
        let mut empty_steps = 0;
        while empty_steps < MAX_EMPTY_STEPS {
            if self.worker.step() {
                continue;
            }
            let consumed = self.rings.iter().all(|producer| {
                producer.registers().read(Register::Head) == producer.indices().tail()
            });
            if consumed {
                break;
            }
            empty_steps += 1;
        }
        board::cycle_clock().wrapping_sub(start) & board::CYCLE_CLOCK_MASK
    }

    /// Reaps everything; an error unless every descriptor completed successfully.
    fn reap_all(&mut self) -> Result<(), CostError> {
        for producer in &mut self.rings {
            while let Some(reaped) = producer.reap() {
                if reaped.status != Ok(CompletionStatus::Completed) {
                    return Err(CostError::Incomplete);
                }
            }
            if !producer.is_drained() {
                return Err(CostError::Incomplete);
            }
        }
        Ok(())
    }

    /// Cycles to consume `count` descriptors made by `make` on ring 0.
    fn batch(
        &mut self,
        count: u32,
        make: &dyn Fn(&mut Bench) -> Command,
    ) -> Result<u32, CostError> {
        let mut descriptors = [Descriptor::new(Command::Barrier); LARGE_BATCH as usize];
        for descriptor in descriptors.iter_mut().take(count as usize) {
            *descriptor = Descriptor::new(make(self));
        }
        self.publish(0, &descriptors[..count as usize])?;
        let cycles = self.timed_run();
        self.reap_all()?;
        Ok(cycles)
    }

    /// Cycles per descriptor, ×1000, of the kind `make` makes.
    fn per_descriptor(&mut self, make: &dyn Fn(&mut Bench) -> Command) -> Result<u64, CostError> {
        let small = self.batch(SMALL_BATCH, make)?;
        let large = self.batch(LARGE_BATCH, make)?;
        let extra = u64::from(large.saturating_sub(small));
        Ok(extra * 1000 / u64::from(LARGE_BATCH - SMALL_BATCH))
    }

    /// Total cycles of `ROUNDS` rounds, each publishing `first`'s descriptor, then
    /// `second`'s (rings woken in that order), then running the controller.
    fn rounds(&mut self, first: RoundPart, second: Option<RoundPart>) -> Result<u64, CostError> {
        let mut total = 0;
        for _ in 0..ROUNDS {
            let value = self.value + 1;
            for (ring, make) in [Some(first), second].into_iter().flatten() {
                let descriptors: &[Descriptor] = match make(value) {
                    Some(command) => &[Descriptor::new(command)],
                    None => &[],
                };
                self.publish(ring, descriptors)?;
            }
            total += u64::from(self.timed_run());
            self.reap_all()?;
            self.value = self.slot_value().unwrap_or(self.value);
        }
        Ok(total * 1000 / u64::from(ROUNDS))
    }

    /// The value the measured slot holds in memory.
    fn slot_value(&self) -> Option<u64> {
        super::window().semaphore(super::layout(0).semaphore_base, SLOT).map(|state| state.value)
    }
}

fn waits(ring: usize) -> WaitCounts {
    CONTROLLERS.get().map(|controllers| controllers[ring].lock().waits()).unwrap_or_default()
}

fn next_signal(bench: &mut Bench) -> Command {
    bench.value += 1;
    Command::Signal { slot: SLOT, value: bench.value }
}

fn signal_next(value: u64) -> Option<Command> {
    Some(Command::Signal { slot: SLOT, value })
}

fn wait_next(value: u64) -> Option<Command> {
    Some(Command::Wait { slot: SLOT, value })
}

fn nothing(_: u64) -> Option<Command> {
    None
}

/// One measured kind: its name and cycles per descriptor ×1000.
pub type Figure = (&'static str, u64);

/// Measures every kind; the figures in the order they are printed.
pub fn measure() -> Result<[Figure; 6], CostError> {
    let (worker, rings) = start().ok_or(CostError::Start)?;
    let mut bench = Bench { rings, worker, value: 0 };
    board::stop_ticks();
    ticks::set_hook(Some(super::compute::on_tick));
    board::start_cycle_clock();
    // Each ring's first drain starts its engine.
    while bench.worker.step() {}

    let signal = bench.per_descriptor(&next_signal)?;
    let elided_before = waits(0).elided;
    let elided = bench.per_descriptor(&|bench| Command::Wait { slot: SLOT, value: bench.value })?;
    if waits(0).elided - elided_before != SMALL_BATCH + LARGE_BATCH {
        return Err(CostError::WrongDisposition);
    }
    let exec = bench.per_descriptor(&|_| {
        let mut arguments = [0; EXEC_ARGUMENTS];
        arguments[0] = data_address(0);
        Command::Exec { kernel: Kernel::FILL, tiles: 0, arguments }
    })?;
    let barrier = bench.per_descriptor(&|_| Command::Barrier)?;

    let signal_round = bench.rounds((0, signal_next), None)?;
    let idle_round = bench.rounds((1, nothing), None)?;
    let stalled_before = waits(1).stalled;
    let stalled_round = bench.rounds((1, wait_next), Some((0, signal_next)))?;
    if waits(1).stalled - stalled_before != ROUNDS {
        return Err(CostError::WrongDisposition);
    }
    let satisfied_before = waits(2).satisfied;
    let satisfied_round = bench.rounds((0, signal_next), Some((2, wait_next)))?;
    if waits(2).satisfied - satisfied_before != ROUNDS {
        return Err(CostError::WrongDisposition);
    }
    let mut empty_round = 0;
    for _ in 0..ROUNDS {
        empty_round += u64::from(bench.timed_run());
    }
    let empty_round = empty_round * 1000 / u64::from(ROUNDS);
    // A pair round holds the SIGNAL's round, the waiting ring's drains, and one final step
    // that finds nothing — which the idle round holds too.
    let pair_extra = |round: u64| (round + empty_round).saturating_sub(signal_round + idle_round);
    ticks::set_hook(None);
    Ok([
        ("EXEC (0 tiles, dispatch + completion interrupt + finish)", exec),
        ("SIGNAL (no waiter)", signal),
        ("BARRIER", barrier),
        ("WAIT elided (ring knows the signal)", elided),
        ("WAIT satisfied (reached, frontier imported)", pair_extra(satisfied_round)),
        ("WAIT stalled, then released by a SIGNAL", pair_extra(stalled_round)),
    ])
}

/// Instructions ×10 for `cycles_milli` cycles ×1000.
fn instructions_tenths(cycles_milli: u64) -> u64 {
    let ns_per_instruction = 1u64 << ICOUNT_SHIFT;
    cycles_milli * 1_000_000_000 / u64::from(board::CYCLE_CLOCK_HZ) / ns_per_instruction / 100
}

/// Prints the table (the script shows it).
pub fn report(figures: &[Figure]) {
    println!("npu cost on {} (qemu -icount shift={ICOUNT_SHIFT}):", board::NAME);
    println!("  {:<58} {:>12}", "descriptor", "instructions");
    for &(name, cycles_milli) in figures {
        let tenths = instructions_tenths(cycles_milli);
        println!("  {name:<58} {:>10}.{}", tenths / 10, tenths % 10);
    }
}
