//! Soak: a long random workload on one device — eight queues on four workers, every operation
//! waiting on up to two recent operations of any queue, 1 % of host calls failing and 0.1 % of
//! kernels panicking — checked operation by operation against a model of how failures spread,
//! with no host waiter left hanging and resident memory flat after warm-up.
//!
//! Each operation signals a semaphore of its own, taken from the device's pool and destroyed
//! once no later operation can name it, so the run is bounded by the work in flight, not by
//! its length. The model: an operation fails when its own work fails or any operation it
//! waits on failed, and runs otherwise; at the end one queue is gated behind a wait that is
//! never signalled, and everything behind the gate — on that queue, or waiting on it however
//! indirectly — must end cancelled when the device shuts down, the rest having run. (Behind
//! the gate no operation waits on one that fails, whose end would depend on timing: see the
//! loop.)
//!
//! `CAUSEWAY_SOAK_OPS` sets the length (default 10^5; `scripts/soak.sh` runs 10^6) and
//! `CAUSEWAY_SOAK_SEED` the random seed (printed).
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::Failure;
use causeway_device::{
    Args, Device, Observer, Op, OpEvent, OpStatus, QueueConfig, QueueId, SemaphoreConfig,
    SemaphoreId, Work,
};
use causeway_driver_cpu::{CpuBackend, DeviceKernel};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

const QUEUES: usize = 8;
const WORKERS: usize = 4;
const RING: usize = 64;
/// How far back an operation may wait: semaphores older than this are destroyed.
const WINDOW: usize = 64;
const POOL: usize = 2048;
/// Expected statuses kept for operations in flight (far more than the rings hold).
const EXPECTATIONS: usize = 1 << 13;
/// Operations behind the final gate.
const GATED: usize = 256;
const PATIENCE: Duration = Duration::from_secs(120);
/// The message of the planned kernel panics, which the panic hook keeps quiet.
const PLANNED_PANIC: &str = "soak: planned kernel panic";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Ok = 1,
    Failed = 2,
    Cancelled = 3,
}

fn class(status: OpStatus) -> Expect {
    match status {
        OpStatus::Ok => Expect::Ok,
        OpStatus::Cancelled => Expect::Cancelled,
        _ => Expect::Failed,
    }
}

/// Compares every finish with the model's expectation for that operation.
struct Checker {
    /// Per `tag % EXPECTATIONS`: `(tag + 1) << 2 | expectation`, zero once finished.
    expected: Box<[AtomicU64]>,
    finished: AtomicU64,
    counts: [AtomicU64; 4],
    problems: Mutex<Vec<String>>,
}

impl Checker {
    fn new() -> Checker {
        Checker {
            expected: (0..EXPECTATIONS).map(|_| AtomicU64::new(0)).collect(),
            finished: AtomicU64::new(0),
            counts: Default::default(),
            problems: Mutex::new(Vec::new()),
        }
    }

    fn problem(&self, problem: String) {
        let mut problems = self.problems.lock().unwrap();
        if problems.len() < 20 {
            problems.push(problem);
        }
    }

    /// Records what operation `tag` must end as, before it is submitted.
    fn expect(&self, tag: u64, expect: Expect) {
        let word = (tag + 1) << 2 | expect as u64;
        // Release pairs with the AcqRel swap in `op_event`.
        let previous = self.expected[tag as usize % EXPECTATIONS].swap(word, Ordering::Release);
        if previous != 0 {
            self.problem(format!(
                "op {} still unfinished when op {tag} was submitted",
                (previous >> 2) - 1
            ));
        }
    }
}

impl Observer for Checker {
    fn op_event(&self, _queue: causeway_device::ObservedQueue<'_>, tag: u64, event: OpEvent) {
        let OpEvent::Finished { status, .. } = event else { return };
        // AcqRel: Acquire pairs with the Release swap in `expect`.
        let word = self.expected[tag as usize % EXPECTATIONS].swap(0, Ordering::AcqRel);
        let actual = class(status);
        self.counts[actual as usize].fetch_add(1, Ordering::Relaxed);
        if word >> 2 != tag + 1 {
            self.problem(format!(
                "op {tag} finished twice, or without an expectation ({status:?})"
            ));
        } else if word & 3 != actual as u64 {
            self.problem(format!("op {tag} ended {status:?}, the model says {:?}", word & 3));
        }
        self.finished.fetch_add(1, Ordering::Release);
    }
}

/// A small, fast, seeded generator (xorshift64*).
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

/// Resident set size in bytes.
#[cfg(target_os = "linux")]
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm is readable");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|field| field.parse().ok()).unwrap();
    pages * 4096
}

/// Resident set size (the working set) in bytes.
#[cfg(windows)]
fn resident_bytes() -> u64 {
    use windows_sys::Win32::System::ProcessStatus::{
        K32GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS,
    };
    use windows_sys::Win32::System::Threading::GetCurrentProcess;
    // SAFETY: PROCESS_MEMORY_COUNTERS is plain integers, for which all zeroes is valid.
    let mut counters: PROCESS_MEMORY_COUNTERS = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
    // SAFETY: `counters` is a writable PROCESS_MEMORY_COUNTERS of `size` bytes, and the pseudo
    // handle of the current process needs no closing.
    let read = unsafe { K32GetProcessMemoryInfo(GetCurrentProcess(), &mut counters, size) };
    assert_ne!(read, 0, "K32GetProcessMemoryInfo failed");
    counters.WorkingSetSize as u64
}

/// Silences the planned kernel panics (the default hook prints everything else).
fn quiet_planned_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let planned =
                info.payload().downcast_ref::<&str>().is_some_and(|m| *m == PLANNED_PANIC);
            if !planned {
                default(info);
            }
        }));
    });
}

/// One submitted operation as the model remembers it while later ones may wait on it.
#[derive(Clone, Copy)]
struct Recent {
    semaphore: SemaphoreId,
    expect: Expect,
    /// Behind the final gate (it will be cancelled).
    gated: bool,
}

#[test]
fn a_long_random_workload_ends_as_the_model_says_in_flat_memory() {
    quiet_planned_panics();
    let ops: usize =
        std::env::var("CAUSEWAY_SOAK_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let seed: u64 = std::env::var("CAUSEWAY_SOAK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_50a4);
    println!("soak: {ops} operations, seed {seed}");
    let home = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };
    let checker = Arc::new(Checker::new());
    let cpu = CpuBackend::new();
    let kernel_ok: DeviceKernel = Box::new(|_tile: u32, _: &Args| std::hint::black_box(()));
    let kernel_panicking: DeviceKernel = Box::new(|tile: u32, _: &Args| {
        if tile == 0 {
            std::panic::panic_any(PLANNED_PANIC);
        }
    });
    let buffer_ok = cpu.command_buffer(vec![(4, kernel_ok)]).unwrap();
    let buffer_panicking = cpu.command_buffer(vec![(4, kernel_panicking)]).unwrap();
    let mut builder = Device::builder(PoolConfig::with_workers(WORKERS));
    builder.driver(cpu);
    let queues: Vec<QueueId> = (0..QUEUES)
        .map(|_| {
            let mut config = QueueConfig::default();
            config.capacity = RING;
            builder.queue(config)
        })
        .collect();
    let mut pooled = SemaphoreConfig::new(0, Scope::DeviceLocal, home);
    pooled.history = 2;
    builder.semaphore_pool(POOL, pooled);
    let gate = builder.semaphore(0, Scope::DeviceLocal, home);
    let host_ok = builder.host_call(|_| Ok(()));
    let host_failing = builder.host_call(|_| Err(Failure::Application(1)));
    builder.observer(checker.clone());
    let device = builder.build().unwrap();

    let mut random = Random(seed | 1);
    let mut recent: VecDeque<Recent> = VecDeque::with_capacity(WINDOW + 1);
    let mut gated_queues = [false; QUEUES];
    let mut resident = Vec::new();
    let mut host_waits = 0;
    let mut expected_counts = [0usize; 4];
    let total = ops + 1 + GATED;
    let started = Instant::now();
    for index in 0..total {
        let gating = index == ops;
        let queue = if gating { 0 } else { random.below(QUEUES) };
        let mut waits = [(gate, 0); 2];
        let mut wait_count = 0;
        let mut failed = false;
        let mut gated = gated_queues[queue];
        if gating {
            waits[0] = (gate, 1);
            wait_count = 1;
            gated = true;
        } else {
            for _ in 0..random.below(3) {
                if recent.is_empty() {
                    break;
                }
                let dependency = recent[recent.len() - 1 - random.below(recent.len())];
                // Behind the gate, no wait on work that fails: an operation both failed and
                // gated by its waits ends either way, by timing — failed at its turn when the
                // failure was known at submission (doomed, it waits for nothing), cancelled
                // at shutdown when the failure came later (it waits for every wait, the gated
                // one included) — and with it whether its queue goes on.
                if index > ops && dependency.expect == Expect::Failed {
                    continue;
                }
                waits[wait_count] = (dependency.semaphore, 1);
                wait_count += 1;
                failed |= dependency.expect == Expect::Failed;
                gated |= dependency.gated;
            }
        }
        let roll = random.below(10_000);
        let work = match roll {
            0..100 => Work::Host(host_failing),
            100..110 => Work::Execute(buffer_panicking),
            110..2_000 => Work::Execute(buffer_ok),
            2_000..5_000 => Work::Host(host_ok),
            _ => Work::Barrier,
        };
        failed |= roll < 110;
        let expect = match (gated, failed) {
            (true, _) => Expect::Cancelled,
            (false, true) => Expect::Failed,
            (false, false) => Expect::Ok,
        };
        gated_queues[queue] |= gated;
        expected_counts[expect as usize] += 1;
        let semaphore =
            device.create_semaphore_timeout(0, PATIENCE).expect("a pooled semaphore frees up");
        let signals = [(semaphore, 1)];
        checker.expect(index as u64, expect);
        let op = Op {
            waits: &waits[..wait_count],
            signals: &signals,
            work,
            tag: index as u64,
            ..Default::default()
        };
        device.submit_timeout(queues[queue], &op, PATIENCE).expect("the device makes room");
        recent.push_back(Recent { semaphore, expect, gated });
        if recent.len() > WINDOW {
            let old = recent.pop_front().unwrap();
            device.destroy_semaphore(old.semaphore).unwrap();
        }
        // A host thread waiting on recent work must be answered, whichever way it ended.
        if index % 4096 == 4095 && !recent.back().unwrap().gated {
            let last = *recent.back().unwrap();
            let answer = wait(device.semaphore(last.semaphore).unwrap(), 1, Some(PATIENCE));
            match (answer, last.expect) {
                (Ok(1), Expect::Ok) | (Err(HostWaitError::Failed(_)), Expect::Failed) => {}
                (answer, expect) => panic!("host wait on op {index}: {answer:?}, model {expect:?}"),
            }
            host_waits += 1;
        }
        if index > 0 && index % (ops / 10).max(1) == 0 && index <= ops {
            resident.push(resident_bytes());
        }
    }
    // Everything not behind the gate runs; then shutting down cancels the rest.
    let runnable = (total - expected_counts[Expect::Cancelled as usize]) as u64;
    let deadline = Instant::now() + PATIENCE;
    while checker.finished.load(Ordering::Acquire) < runnable {
        assert!(
            Instant::now() < deadline,
            "runnable operations did not finish: {} of {runnable}",
            checker.finished.load(Ordering::Acquire)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let elapsed = started.elapsed();
    let report = device.shutdown(Duration::from_secs(30));
    let counts: Vec<u64> = checker.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    println!(
        "soak: {total} ops in {elapsed:.2?} ({:.0} ops/s): ok {}, failed {}, cancelled {}; {host_waits} host waits; resident KiB at 10 %..100 %: {:?}",
        total as f64 / elapsed.as_secs_f64(),
        counts[1],
        counts[2],
        counts[3],
        resident.iter().map(|bytes| bytes / 1024).collect::<Vec<_>>(),
    );
    let problems = checker.problems.lock().unwrap().clone();
    assert!(problems.is_empty(), "model mismatches:\n{}", problems.join("\n"));
    assert_eq!(
        checker.finished.load(Ordering::Acquire),
        total as u64,
        "every operation finished once"
    );
    assert_eq!(counts[1..], expected_counts[1..].iter().map(|&c| c as u64).collect::<Vec<_>>()[..]);
    assert_eq!(report.cancelled, expected_counts[Expect::Cancelled as usize], "{report:?}");
    assert!(report.stuck.is_empty() && !report.leaked, "{report:?}");
    assert!(
        expected_counts[Expect::Failed as usize] > 0 && expected_counts[Expect::Ok as usize] > 0
    );
    // Flat after warm-up: every sample from 10 % of the run on within 10 % of the first.
    let first = resident[0];
    for (tenth, &bytes) in resident.iter().enumerate() {
        assert!(
            bytes <= first + first / 10,
            "resident memory grew from {first} B at 10 % to {bytes} B at {} %",
            (tenth + 1) * 10
        );
    }
}
