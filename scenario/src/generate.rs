//! Generated scenarios of any size, as TOML text, for scaling tests and the scenario benchmark.
//!
//! Four shapes, each of exactly the number of operations asked for, each one that runs to
//! completion (no deadlock) with plain `noop` work:
//!
//! - [`pipeline`]: one queue, one semaphore; every operation waits for its predecessor's
//!   signal and signals the next value. One long timeline with a long history.
//! - [`fan_in`]: rounds of a join on a `sink` queue waiting on [`FAN_IN`] lane semaphores
//!   (the most waits an operation may carry), submitted *before* the [`FAN_IN`] producers on
//!   their own queues that signal them, each producer waiting for the previous round's join.
//!   Many waits on many semaphores, every join blocked until its round is submitted.
//! - [`ping_pong`]: two queues on machines 0 and 1 taking turns, each operation waiting for
//!   the other queue's last one: under `mpirun -n 2` every operation waits on a value from
//!   the other rank.
//! - [`many_semaphores`]: one semaphore per operation over [`MANY_SEMAPHORES_QUEUES`]
//!   queues, each operation waiting for a recent earlier one (within the last
//!   [`MANY_SEMAPHORES_REACH`]), chosen by a fixed stride so the text is deterministic.

use std::fmt::Write;

/// Waits of each join in [`fan_in`]: one per lane.
pub const FAN_IN: usize = causeway::device::MAX_WAITS;

/// Queues of [`many_semaphores`], taken round-robin.
pub const MANY_SEMAPHORES_QUEUES: usize = 4;

/// How far back an operation of [`many_semaphores`] may wait.
pub const MANY_SEMAPHORES_REACH: usize = 16;

/// A single-queue pipeline of `ops` operations on one semaphore.
pub fn pipeline(ops: usize) -> String {
    let mut text = header("pipeline", "one queue, each operation waiting for the one before");
    text.push_str("[[queue]]\nname = \"q0\"\n\n[[semaphore]]\nname = \"step\"\n\n");
    for op in 1..=ops {
        let _ = write!(text, "[[op]]\nname = \"op{op}\"\nqueue = \"q0\"\n");
        if op > 1 {
            let _ = writeln!(text, "wait = [\"step>={}\"]", op - 1);
        }
        let _ = writeln!(text, "signal = [\"step={op}\"]\n");
    }
    text
}

/// `ops` operations taking turns between queue `m0` (machine 0) and `m1` (machine 1): each
/// waits for the other queue's latest (`ping` is signalled on machine 0, `pong` on machine 1).
pub fn ping_pong(ops: usize) -> String {
    let mut text = header("ping-pong", "two machines taking turns, each waiting on the other");
    text.push_str("[[queue]]\nname = \"m0\"\n\n[[queue]]\nname = \"m1\"\nmachine = 1\n\n");
    for name in ["ping", "pong"] {
        let _ = writeln!(text, "[[semaphore]]\nname = \"{name}\"\nscope = \"system-wide\"\n");
    }
    for op in 0..ops {
        let (queue, wait, signal) =
            if op % 2 == 0 { ("m0", "pong", "ping") } else { ("m1", "ping", "pong") };
        let _ = write!(text, "[[op]]\nname = \"op{op}\"\nqueue = \"{queue}\"\n");
        // Turn `op` waits for turn `op - 1`, which signalled its semaphore to `op / 2`
        // (counting each semaphore's signals from 1).
        if op > 0 {
            let _ = writeln!(text, "wait = [\"{wait}>={}\"]", op.div_ceil(2));
        }
        let _ = writeln!(text, "signal = [\"{signal}={}\"]\n", op / 2 + 1);
    }
    text
}

/// A fan-in of `ops` operations: rounds of one join and [`FAN_IN`] producers (a last, partial
/// round has producers only).
pub fn fan_in(ops: usize) -> String {
    let mut text = header("fan-in", "joins waiting on every lane, submitted before the lanes");
    for lane in 0..FAN_IN {
        let _ = writeln!(text, "[[queue]]\nname = \"p{lane}\"\n");
    }
    text.push_str("[[queue]]\nname = \"sink\"\n\n");
    for lane in 0..FAN_IN {
        let _ = writeln!(text, "[[semaphore]]\nname = \"lane{lane}\"\n");
    }
    text.push_str("[[semaphore]]\nname = \"joined\"\n\n");
    let per_round = FAN_IN + 1;
    let rounds = ops / per_round;
    for round in 1..=rounds {
        let waits: Vec<String> =
            (0..FAN_IN).map(|lane| format!("\"lane{lane}>={round}\"")).collect();
        let _ = writeln!(
            text,
            "[[op]]\nname = \"join{round}\"\nqueue = \"sink\"\nwait = [{}]\nsignal = [\"joined={round}\"]\n",
            waits.join(", ")
        );
        for lane in 0..FAN_IN {
            producer(&mut text, round, lane);
        }
    }
    for lane in 0..ops % per_round {
        producer(&mut text, rounds + 1, lane);
    }
    text
}

fn producer(text: &mut String, round: usize, lane: usize) {
    let _ = write!(text, "[[op]]\nname = \"work{round}_{lane}\"\nqueue = \"p{lane}\"\n");
    if round > 1 {
        let _ = writeln!(text, "wait = [\"joined>={}\"]", round - 1);
    }
    let _ = writeln!(text, "signal = [\"lane{lane}={round}\"]\n");
}

/// `ops` operations with a semaphore each, every operation after the first waiting for a
/// recent earlier one.
pub fn many_semaphores(ops: usize) -> String {
    let mut text = header("many-semaphores", "one semaphore per operation, waits on recent ones");
    for queue in 0..MANY_SEMAPHORES_QUEUES {
        let _ = writeln!(text, "[[queue]]\nname = \"q{queue}\"\n");
    }
    for op in 0..ops {
        let _ = writeln!(text, "[[semaphore]]\nname = \"s{op}\"\n");
    }
    for op in 0..ops {
        let queue = op % MANY_SEMAPHORES_QUEUES;
        let _ = write!(text, "[[op]]\nname = \"op{op}\"\nqueue = \"q{queue}\"\n");
        if op > 0 {
            // A stride coprime to the reach spreads the distances over all of 1..=reach.
            let back = 1 + (op * 7) % MANY_SEMAPHORES_REACH.min(op);
            let _ = writeln!(text, "wait = [\"s{}>=1\"]", op - back);
        }
        let _ = writeln!(text, "signal = [\"s{op}=1\"]\n");
    }
    text
}

fn header(name: &str, description: &str) -> String {
    format!("name = \"{name}\"\ndescription = \"{description}\"\n\n")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::model::Target;
    use crate::parse::parse;
    use crate::Scenario;

    fn parsed(text: &str) -> Scenario {
        parse(Path::new("generated.toml"), text).unwrap()
    }

    #[test]
    fn every_shape_has_exactly_the_operations_asked_for() {
        for ops in [1, 2, 9, 10, 17, 100] {
            assert_eq!(parsed(&pipeline(ops)).ops.len(), ops);
            assert_eq!(parsed(&fan_in(ops)).ops.len(), ops);
            assert_eq!(parsed(&many_semaphores(ops)).ops.len(), ops);
        }
    }

    #[test]
    fn a_fan_in_join_waits_on_every_lane_and_precedes_its_producers() {
        let scenario = parsed(&fan_in(2 * (FAN_IN + 1)));
        let join = &scenario.ops[FAN_IN + 1];
        assert_eq!(scenario.op_name(join), "join2");
        assert_eq!(join.target, Target::Queue(FAN_IN));
        assert_eq!(scenario.waits(join), (0..FAN_IN).map(|lane| (lane, 2)).collect::<Vec<_>>());
        let producer = &scenario.ops[FAN_IN + 2];
        assert_eq!(scenario.op_name(producer), "work2_0");
        assert_eq!(
            (scenario.waits(producer), scenario.signals(producer)),
            (&[(FAN_IN, 1)][..], &[(0, 2)][..])
        );
    }

    #[test]
    fn many_semaphores_waits_reach_back_at_most_the_reach() {
        let scenario = parsed(&many_semaphores(200));
        assert_eq!(scenario.semaphores.len(), 200);
        let mut distances = std::collections::BTreeSet::new();
        for (index, op) in scenario.ops.iter().enumerate().skip(1) {
            let [(semaphore, 1)] = scenario.waits(op)[..] else { panic!("{op:?}") };
            distances.insert(index - semaphore);
        }
        assert_eq!(distances, (1..=MANY_SEMAPHORES_REACH).collect());
    }
}
