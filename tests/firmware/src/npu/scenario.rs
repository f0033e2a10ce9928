//! The `npu_controller` run: a host in the image drives three rings through a pipeline, then
//! through descriptors that must fail, and checks every status, the data the kernels produced
//! and the controller's WAIT counts.
//!
//! Operation `k` (1..=[`OPS`]) of each ring, each descriptor after the first chained to it:
//!
//! | ring | descriptors | WAIT dispositions |
//! |---|---|---|
//! | 0 | WAIT s0 ≥ k−1, EXEC fill(buf k ← k; 2 tiles), SIGNAL s0 = k | elided (its own signal) but for k = 1 (initial value: satisfied) |
//! | 1 | WAIT s0 ≥ k, EXEC accumulate(sum1 += buf k; 1 tile), SIGNAL s1 = k | satisfied or stalled |
//! | 2 | WAIT s1 ≥ k, WAIT s0 ≥ k, EXEC accumulate(sum2 += buf k), SIGNAL s2 = k | satisfied or stalled, then elided (transitively: s1's frontier names s0's signal) |
//!
//! Ring 2 then takes [`FAULTS`]: an unknown opcode, reserved header bits, a slot beyond the
//! table, an unknown kernel, a SIGNAL chained to that failure (failing slot 3), a WAIT on the
//! failed slot 3, a SIGNAL that does not advance, a kernel address outside the window, and a
//! BARRIER that completes. None may hang. The host is written like a driver's: it pushes what
//! fits (a full ring is backpressure), publishes, rings the doorbell, reaps and compares.

use causeway_core::Domain;
use causeway_driver_npu::{
    Command, CompletionError, CompletionStatus, Descriptor, DescriptorError, RawDescriptor,
    EXEC_ARGUMENTS,
};

use super::compute::Kernel;
use super::controller::{WaitCounts, CONTROLLERS};
use super::{data_address, start, wake, window, HostRing, NpuWorker, RINGS};
use crate::{board, ticks};

/// Operations per ring in the pipeline.
pub const OPS: u32 = 6;

/// Data words: the fills go to words 1..=OPS; the two sums follow.
const SUM1: u32 = OPS + 2;
const SUM2: u32 = OPS + 3;

/// Slots: one timeline per pipeline ring, and one that the fault cases fail.
const S0: u32 = 0;
const S1: u32 = 1;
const S2: u32 = 2;
const S_FAILED: u32 = 3;

/// The run gives up after this many ticks (a hang is a failure, not a timeout of the script).
const DEADLINE_TICKS: u64 = 2_000;

/// Descriptors in each ring's script.
const SCRIPT_LENGTHS: [u32; RINGS] = [3 * OPS, 3 * OPS, 4 * OPS + FAULTS];

/// The fault cases at the end of ring 2.
pub const FAULTS: u32 = 9;

fn exec(kernel: u32, tiles: u32, first: u32, second: u32) -> Command {
    let mut arguments = [0; EXEC_ARGUMENTS];
    arguments[0] = first;
    arguments[1] = second;
    Command::Exec { kernel, tiles, arguments }
}

fn fill(k: u32) -> Command {
    exec(Kernel::FILL, 2, data_address(k), k)
}

fn accumulate(k: u32, sum: u32) -> Command {
    exec(Kernel::ACCUMULATE, 1, data_address(k), data_address(sum))
}

fn wait(slot: u32, value: u32) -> Command {
    Command::Wait { slot, value: u64::from(value) }
}

fn signal(slot: u32, value: u32) -> Command {
    Command::Signal { slot, value: u64::from(value) }
}

/// Descriptor `index` of ring `ring`'s script and the status it must complete with.
fn script(ring: usize, index: u32) -> Option<(RawDescriptor, CompletionStatus)> {
    let ok = CompletionStatus::Completed;
    let failed = CompletionStatus::Failed;
    let (k, position) = match ring {
        0 | 1 => (index / 3 + 1, index % 3),
        _ => (index / 4 + 1, index % 4),
    };
    let operation = |commands: &[Command]| {
        let command = *commands.get(position as usize)?;
        let descriptor = Descriptor::new(command);
        let descriptor = if position == 0 { descriptor } else { descriptor.chained() };
        Some((descriptor.encode(), ok))
    };
    if index >= SCRIPT_LENGTHS.get(ring).copied().unwrap_or(0) {
        return None;
    }
    match ring {
        0 => operation(&[wait(S0, k - 1), fill(k), signal(S0, k)]),
        1 => operation(&[wait(S0, k), accumulate(k, SUM1), signal(S1, k)]),
        _ if k <= OPS => operation(&[wait(S1, k), wait(S0, k), accumulate(k, SUM2), signal(S2, k)]),
        _ => {
            let fault = index - 4 * OPS;
            let plain = |command| Descriptor::new(command).encode();
            Some(match fault {
                0 => {
                    let mut raw = plain(Command::Barrier);
                    raw.0[0] = 0x7F;
                    (raw, failed(CompletionError::Malformed(DescriptorError::UnknownOpcode)))
                }
                1 => {
                    let mut raw = plain(wait(S0, 1));
                    raw.0[0] |= 1 << 12;
                    (raw, failed(CompletionError::Malformed(DescriptorError::ReservedBits)))
                }
                2 => (
                    plain(wait(9, 1)),
                    failed(CompletionError::Malformed(DescriptorError::SemaphoreOutOfRange)),
                ),
                3 => (plain(exec(7, 0, 0, 0)), failed(CompletionError::UnknownKernel)),
                4 => (
                    Descriptor::new(signal(S_FAILED, 1)).chained().encode(),
                    failed(CompletionError::ChainFailed),
                ),
                5 => (plain(wait(S_FAILED, 1)), failed(CompletionError::SemaphoreFailed)),
                6 => (plain(signal(S2, 1)), failed(CompletionError::SignalNotAdvancing)),
                7 => (
                    plain(exec(Kernel::FILL, 0, u32::MAX - 3, 0)),
                    failed(CompletionError::KernelFailed),
                ),
                _ => (Descriptor::new(Command::Barrier).with_interrupt().encode(), ok),
            })
        }
    }
}

/// The host: each ring's producer and how far through its script it got.
struct Host {
    rings: [HostRing; RINGS],
    pushed: [u32; RINGS],
    /// Reaped descriptors whose status was not the expected one.
    mismatches: u32,
}

impl Host {
    /// Pushes what fits of each script, publishes it and rings the doorbell.
    fn feed(&mut self) {
        for (ring, producer) in self.rings.iter_mut().enumerate() {
            let before = self.pushed[ring];
            while let Some((raw, _)) = script(ring, self.pushed[ring]) {
                if producer.try_push_raw(&raw).is_err() {
                    break;
                }
                self.pushed[ring] += 1;
            }
            if self.pushed[ring] != before {
                producer.publish();
                wake(ring);
            }
        }
    }

    /// Reaps every completed descriptor and compares its status.
    fn reap(&mut self) {
        for (ring, producer) in self.rings.iter_mut().enumerate() {
            while let Some(reaped) = producer.reap() {
                let index = u32::try_from(reaped.sequence - 1).unwrap_or(u32::MAX);
                let expected = script(ring, index).map(|(_, status)| status);
                if reaped.status.ok() != expected {
                    self.mismatches += 1;
                }
            }
        }
    }

    fn finished(&self) -> bool {
        self.rings.iter().all(HostRing::is_drained) && self.pushed == SCRIPT_LENGTHS
    }
}

/// What a finished run looked like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every descriptor completed as expected, the data and the counts are right.
    Passed,
    /// Something did not.
    Failed,
}

/// Runs the scenario to its end (or its deadline) and checks it.
pub fn run() -> Verdict {
    let Some((mut worker, rings)) = start() else { return Verdict::Failed };
    let mut host = Host { rings, pushed: [0; RINGS], mismatches: 0 };
    ticks::set_hook(Some(super::compute::on_tick));
    board::start_ticks();
    let deadline = ticks::now() + DEADLINE_TICKS;
    drive(&mut host, &mut worker, deadline);
    board::stop_ticks();
    ticks::set_hook(None);
    if host.finished() && host.mismatches == 0 && data_is_right() && knowledge_is_right() {
        Verdict::Passed
    } else {
        Verdict::Failed
    }
}

/// The main loop: feed, run the controller until it has nothing to do, reap, sleep a tick.
fn drive(host: &mut Host, worker: &mut NpuWorker, deadline: u64) {
    while ticks::now() < deadline {
        host.feed();
        while worker.step() {}
        host.reap();
        if host.finished() {
            return;
        }
        // The compute engines and the controller's wake-ups run on ticks.
        ticks::sleep_ticks(1);
    }
}

fn data_word(index: u32) -> Option<u32> {
    let word = window().word(data_address(index))?;
    Some(word.load(portable_atomic::Ordering::Relaxed))
}

fn data_is_right() -> bool {
    let total = OPS * (OPS + 1) / 2;
    (1..=OPS).all(|k| data_word(k) == Some(k))
        && data_word(SUM1) == Some(total)
        && data_word(SUM2) == Some(total)
}

/// How every ring's controller disposed of its WAIT descriptors, summed, and the descriptors
/// they completed with an error; `None` before [`run`] has started the controllers.
pub fn totals() -> Option<(WaitCounts, u32)> {
    let controllers = CONTROLLERS.get()?;
    let mut waits = WaitCounts::default();
    let mut errors = 0;
    for controller in controllers {
        let controller = controller.lock();
        let counts = controller.waits();
        waits.emitted += counts.emitted;
        waits.elided += counts.elided;
        waits.satisfied += counts.satisfied;
        waits.stalled += counts.stalled;
        waits.failed += counts.failed;
        errors += controller.errors();
    }
    Some((waits, errors))
}

/// The WAIT counts the pipeline fixes, and ring 2's knowledge of all three rings.
fn knowledge_is_right() -> bool {
    let (Some(controllers), Some((waits, errors))) = (CONTROLLERS.get(), totals()) else {
        return false;
    };
    let last = controllers[RINGS - 1].lock();
    let frontier = last.clock().frontier();
    let knows_every_ring = frontier.len() == RINGS
        && !frontier.is_tainted()
        && frontier.iter().all(|point| point.axis.domain() == Domain::Queue);
    knows_every_ring
        && waits.emitted == 4 * OPS + 1
        && waits.elided == 2 * OPS - 1
        && waits.satisfied + waits.stalled == 2 * OPS + 1
        && waits.stalled >= 1
        && waits.failed == 1
        && errors == FAULTS - 1
}
