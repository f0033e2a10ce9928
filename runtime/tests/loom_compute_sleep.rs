//! A regression model, in loom, of a lost wake-up core's compute-slot protocol once had: a
//! compute process drained by two workers that both return `Drained::Sleep`, and one wake
//! issued after the work it announces is published. If the wake landed after both drain calls
//! decided to sleep but before the executor applied either `Sleep`, the first applied `Sleep`
//! consumed the slot's single NOTIFIED bit and the second cleared RUNNABLE: the process stayed
//! asleep with its work published. Core now lets only a drainer alone in the slot apply a
//! `Sleep`. Run with `RUSTFLAGS="--cfg loom" cargo test -p causeway-runtime --release
//! --test loom_compute_sleep --target-dir target/loom`.
#![cfg(loom)]

#[path = "../../core/tests/loom_support/mod.rs"]
mod loom_support;

use causeway_core::executor::{
    Class, Drain, DrainContext, Drained, Executor, Process, RoundRobin, SpinPolicy,
};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use loom_support::LoomFutex;

/// Done once `work` is seen, else Sleep: the simplest process that sleeps until woken.
struct Doorbell {
    work: AtomicBool,
}

impl Drain for Doorbell {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        if self.work.load(Ordering::SeqCst) {
            Drained::Done(Ok(()))
        } else {
            Drained::Sleep
        }
    }
}

#[test]
fn two_sleeping_drainers_and_one_wake() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.max_branches = 20_000;
    builder.check(|| {
        let futex = LoomFutex::new();
        let executor: &'static Executor<'static, LoomFutex, 2, 2> =
            Box::leak(Box::new(Executor::new(futex, 2).unwrap()));
        let bell: &'static Doorbell =
            Box::leak(Box::new(Doorbell { work: AtomicBool::new(false) }));
        let process = Box::leak(Box::new(Process::new(bell, Class::Compute)));
        executor.submit(process).unwrap();
        // Two steps each, no spinning: enough for both to be inside the drain at once, and
        // bounded, so a lost wake-up shows as a failed assertion rather than a livelock.
        let workers: Vec<_> = (0..2)
            .map(|index| {
                thread::spawn(move || {
                    let mut worker =
                        executor.worker::<RoundRobin>(index, SpinPolicy::Park).unwrap();
                    for _ in 0..2 {
                        worker.step();
                    }
                })
            })
            .collect();
        // The outside event: publish the work, then wake (the documented order).
        bell.work.store(true, Ordering::SeqCst);
        executor.wake(process);
        for worker in workers {
            worker.join().unwrap();
        }
        // Everything has quiesced. The work is published and the wake has returned, so the
        // process must be completed or still runnable: one more step must finish it.
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        worker.step();
        worker.step();
        assert!(process.is_completed(), "asleep with its work published: a lost wake-up");
    });
}
