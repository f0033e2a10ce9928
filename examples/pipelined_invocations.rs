//! Pipelined invocations on one user timeline: five host functions are issued up
//! front, ordered only by fences; the user then provides the input and blocks once, on the
//! final fence. Prints the order the functions ran in, how each wait was resolved at issue and
//! the frontier the final signal carries.
//!
//! Run: `cargo run --release --example pipelined_invocations`

use std::process::ExitCode;
use std::sync::Mutex;

use causeway::axis::{Axis, Domain};
use causeway::fence::Fence;
use causeway::semaphore::{Lookup, Semaphore};
use causeway::{Endpoint, Failure, Frontier, Point, Scope};
use causeway_runtime::{
    block_on, CpuPool, FenceExt, Invoker, PoolConfig, Spawner, FRONTIER_CAPACITY,
};

const HOST: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

/// The user's timeline, and the semaphore that says the user's input is ready.
static MY_TIMELINE: Semaphore = Semaphore::new(0, Scope::ProcessLocal, HOST);
static INPUT: Semaphore = Semaphore::new(0, Scope::ProcessLocal, HOST);

/// The order the host functions ran in.
static RAN: Mutex<Vec<&str>> = Mutex::new(Vec::new());

fn at(semaphore: &'static Semaphore, value: u64) -> Fence<'static> {
    let mut fence = Fence::new();
    // One point never fills a fence.
    let _ = fence.insert(semaphore, value);
    fence
}

fn function(name: &'static str) -> impl FnOnce() -> Result<&'static str, Failure> {
    move || {
        RAN.lock().map_err(|_| Failure::Aborted)?.push(name);
        println!("  {name} runs");
        Ok(name)
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let pool = CpuPool::start(PoolConfig::with_workers(2))?;
    let spawner = Spawner::new(pool.executor());
    let context = Invoker::new(&spawner, Axis::new(0, Domain::Host, 1), HOST);

    // fence_a: the input is ready. fence_b = t+1, fence_c = t+5: one point per invocation on
    // the user's timeline (a timeline value has exactly one signaller), so the join fence is
    // the last of them.
    let (fence_a, fence_b, fence_c) = (at(&INPUT, 1), at(&MY_TIMELINE, 1), at(&MY_TIMELINE, 5));
    println!("issue (nothing runs yet: the input is not ready)");
    let invocations = [
        context.invoke_async(function("fn0"), &fence_a, &fence_b)?,
        context.invoke_async(function("fn1"), &fence_b, &at(&MY_TIMELINE, 2))?,
        context.invoke_async(function("fn2"), &fence_b, &at(&MY_TIMELINE, 3))?,
        context.invoke_async(function("fn3"), &Fence::new(), &at(&MY_TIMELINE, 4))?,
        context.invoke_async(function("fn4"), &fence_a, &fence_c)?,
    ];
    let counts = context.counts();
    println!(
        "  waits resolved at issue: {} elided, {} satisfied, {} waited at run time",
        counts.elided, counts.satisfied, counts.device
    );

    println!("provide the input, then block once on fence_c");
    INPUT.signal(
        1,
        Point::new(Axis::new(0, Domain::Host, 2), 1),
        &Frontier::<FRONTIER_CAPACITY>::new(),
    )?;
    block_on(fence_c.wait())?;

    for invocation in invocations {
        invocation.wait()?;
    }
    let ran = RAN.lock().map_err(|_| "a host function panicked")?.clone();
    println!("ran in order: {}", ran.join(" → "));
    if ran != ["fn0", "fn1", "fn2", "fn3", "fn4"] || MY_TIMELINE.value() != 5 {
        return Err("the invocations did not retire in fence order".into());
    }
    if let Lookup::Tracked { origin, frontier, .. } = MY_TIMELINE.lookup(5) {
        let entries: Vec<String> =
            frontier.iter().map(|p| format!("{}:{}", p.axis, p.epoch)).collect();
        println!(
            "my_timeline@5 signalled by {}:{}, carrying {{{}}}",
            origin.axis,
            origin.epoch,
            entries.join(", ")
        );
    }
    drop(spawner);
    pool.shutdown();
    Ok(())
}
