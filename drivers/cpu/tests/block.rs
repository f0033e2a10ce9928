//! The block processor on real worker threads: exactly-once tiles, the barrier between regions,
//! re-execution, cancellation, kernel panics, wake budgets, empty regions and buffers, on 1, 2 and 4 workers
//! and under spinning and parking workers.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use causeway_core::executor::{Class, Process, SpinPolicy};
use causeway_core::Failure;
use causeway_driver_cpu::block::{BlockError, BlockProcessor, CommandBuffer, Kernel};
use causeway_runtime::{CpuPool, HostExecutor, PoolConfig};

const DEADLINE: Duration = Duration::from_secs(60);

fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not reached in {DEADLINE:?}");
        thread::yield_now();
    }
}

fn config(workers: usize, spin: SpinPolicy) -> PoolConfig {
    let mut config = PoolConfig::with_workers(workers);
    config.spin = spin;
    config
}

/// Every shape of pool the processor must work on.
fn pools() -> Vec<PoolConfig> {
    let mut pools = Vec::new();
    for workers in [1, 2, 4] {
        for spin in [SpinPolicy::Park, SpinPolicy::default(), SpinPolicy::Fixed(u32::MAX)] {
            pools.push(config(workers, spin));
        }
    }
    pools
}

/// Rearms and resets a finished execution, submits the next and waits for it.
fn run_again<'p>(
    executor: &HostExecutor<'p>,
    processor: &BlockProcessor<'_>,
    process: &'p Process<'p>,
) {
    if process.is_completed() {
        process.rearm().expect("a completed process rearms");
        processor.reset().expect("a finished processor resets");
    }
    executor.submit(process).expect("a fresh process submits");
    wait_until("the execution completes", || process.is_completed());
}

/// Counts per tile, one table per region.
struct Tally {
    counts: Vec<Vec<AtomicU32>>,
}

impl Tally {
    fn new(tiles: &[u32]) -> Tally {
        Tally {
            counts: tiles.iter().map(|&n| (0..n).map(|_| AtomicU32::new(0)).collect()).collect(),
        }
    }

    fn hit(&self, region: usize, tile: u32) {
        self.counts[region][tile as usize].fetch_add(1, Ordering::Relaxed);
    }

    fn assert_each(&self, expected: u32) {
        for (region, counts) in self.counts.iter().enumerate() {
            for (tile, count) in counts.iter().enumerate() {
                let count = count.load(Ordering::Relaxed);
                assert_eq!(count, expected, "region {region} tile {tile} ran {count} times");
            }
        }
    }
}

#[test]
fn every_tile_of_every_region_runs_exactly_once() {
    let tiles = [1, 7, 64, 1000, 3, 2];
    for pool in pools() {
        let tally = Tally::new(&tiles);
        let kernels: Vec<_> = (0..tiles.len())
            .map(|region| {
                let tally = &tally;
                move |tile| tally.hit(region, tile)
            })
            .collect();
        let mut builder = CommandBuffer::builder();
        for (region, kernel) in kernels.iter().enumerate() {
            // Half the regions claim tile by tile, half in guided batches.
            builder = if region % 2 == 0 {
                builder.dispatch(tiles[region], kernel)
            } else {
                builder.dispatch_batched(tiles[region], 1, kernel)
            };
        }
        let buffer = builder.build().unwrap();
        let processor = BlockProcessor::new(&buffer, pool.workers).unwrap();
        let process = Process::new(&processor, Class::Compute);
        CpuPool::scope(pool.clone(), |executor| run_again(executor, &processor, &process)).unwrap();
        assert_eq!(process.failure(), None, "{pool:?}");
        tally.assert_each(1);
    }
}

/// Region `k` writes `k + 1` into every cell; every tile of region `k + 1` checks that all of
/// them hold at least that before writing its own.
#[test]
fn a_region_sees_every_write_of_the_region_before() {
    const REGIONS: usize = 24;
    const TILES: u32 = 48;
    for workers in [2, 4] {
        let cells: Vec<AtomicU32> = (0..TILES).map(|_| AtomicU32::new(0)).collect();
        let violations = AtomicUsize::new(0);
        let kernels: Vec<_> = (0..REGIONS as u32)
            .map(|region| {
                let (cells, violations) = (&cells, &violations);
                move |tile: u32| {
                    if region > 0 {
                        // `region` from the region before, or `region + 1` from a tile of
                        // this one that ran first; anything less is a write not yet seen.
                        let stale = cells
                            .iter()
                            .filter(|cell| cell.load(Ordering::Relaxed) < region)
                            .count();
                        violations.fetch_add(stale, Ordering::Relaxed);
                    }
                    // A little work, so tiles of one region overlap on several workers.
                    for _ in 0..(tile % 5) * 50 {
                        std::hint::spin_loop();
                    }
                    cells[tile as usize].store(region + 1, Ordering::Relaxed);
                }
            })
            .collect();
        let buffer = kernels
            .iter()
            .fold(CommandBuffer::builder(), |builder, kernel| builder.dispatch(TILES, kernel))
            .build()
            .unwrap();
        let processor = BlockProcessor::new(&buffer, workers).unwrap();
        let process = Process::new(&processor, Class::Compute);
        CpuPool::scope(config(workers, SpinPolicy::default()), |executor| {
            for _ in 0..20 {
                cells.iter().for_each(|cell| cell.store(0, Ordering::Relaxed));
                run_again(executor, &processor, &process);
                assert!(cells.iter().all(|cell| cell.load(Ordering::Relaxed) == REGIONS as u32));
            }
        })
        .unwrap();
        assert_eq!(violations.load(Ordering::Relaxed), 0, "{workers} workers");
    }
}

#[test]
fn a_buffer_is_re_executed_many_times_without_rerecording() {
    const EXECUTIONS: u32 = 500;
    let tiles = [3, 17, 1, 40];
    let tally = Tally::new(&tiles);
    let kernels: Vec<_> = (0..tiles.len())
        .map(|region| {
            let tally = &tally;
            move |tile| tally.hit(region, tile)
        })
        .collect();
    let buffer = kernels
        .iter()
        .zip(tiles)
        .fold(CommandBuffer::builder(), |builder, (kernel, n)| builder.dispatch(n, kernel))
        .build()
        .unwrap();
    let outcomes = Mutex::new(Vec::new());
    let hook = |outcome| outcomes.lock().unwrap().push(outcome);
    let processor = BlockProcessor::new(&buffer, 2).unwrap().with_finish_hook(&hook);
    let process = Process::new(&processor, Class::Compute);
    CpuPool::scope(config(2, SpinPolicy::default()), |executor| {
        for _ in 0..EXECUTIONS {
            run_again(executor, &processor, &process);
        }
    })
    .unwrap();
    tally.assert_each(EXECUTIONS);
    let outcomes = outcomes.into_inner().unwrap();
    assert_eq!(outcomes.len(), EXECUTIONS as usize, "the hook ran once per execution");
    assert!(outcomes.iter().all(|outcome| outcome.is_ok()));
}

/// Region 0's tiles block until the test lets them go; the process is cancelled meanwhile.
/// Runs `body` on a pool of `workers` (default spin) with a processor for two regions — 64
/// single-tile claims of `first`, then 10 tiles counted in `later` — and returns the outcomes
/// its finish hook reported, in order.
fn run_two_regions(
    workers: usize,
    first: &dyn Kernel,
    later: &AtomicU32,
    body: impl for<'p> FnOnce(&HostExecutor<'p>, &BlockProcessor<'_>, &'p Process<'p>),
) -> Vec<Result<(), Failure>> {
    let counting = |_| {
        later.fetch_add(1, Ordering::Relaxed);
    };
    let buffer = CommandBuffer::builder()
        .dispatch_batched(64, 1, first)
        .dispatch(10, &counting)
        .build()
        .expect("two non-empty regions record");
    let outcomes = Mutex::new(Vec::new());
    let hook = |outcome| outcomes.lock().unwrap().push(outcome);
    let processor = BlockProcessor::new(&buffer, workers).unwrap().with_finish_hook(&hook);
    let process = Process::new(&processor, Class::Compute);
    // A worker thread that died would make the scope re-raise its panic here.
    CpuPool::scope(config(workers, SpinPolicy::default()), |executor| {
        body(executor, &processor, &process);
    })
    .expect("the pool ran");
    outcomes.into_inner().unwrap()
}

#[test]
fn cancellation_mid_run_stops_claiming_and_reports_the_failure() {
    for workers in [1, 2, 4] {
        let started = AtomicU32::new(0);
        let release = AtomicBool::new(false);
        let first = Tally::new(&[64]);
        let later = AtomicU32::new(0);
        let blocking = |tile| {
            first.hit(0, tile);
            started.fetch_add(1, Ordering::Relaxed);
            // Acquire pairs with the test's Release store below.
            while !release.load(Ordering::Acquire) {
                thread::yield_now();
            }
        };
        let outcomes =
            run_two_regions(workers, &blocking, &later, |executor, processor, process| {
                executor.submit(process).unwrap();
                wait_until("a tile starts", || started.load(Ordering::Relaxed) > 0);
                executor.cancel(process);
                assert_eq!(processor.reset(), Err(BlockError::NotFinished), "still running");
                // Release pairs with the blocked tiles' Acquire loads.
                release.store(true, Ordering::Release);
                wait_until("the cancelled process completes", || process.is_completed());
                assert!(processor.is_finished());
                assert_eq!(process.failure(), Some(Failure::Cancelled));
                let ran = started.load(Ordering::Relaxed);
                // Each worker blocks in the first tile it starts, and checks before the next.
                assert!(ran <= workers as u32, "{ran} tiles began on {workers} workers");
                assert_eq!(later.load(Ordering::Relaxed), 0, "no tile of the next region ran");

                // The same processor runs to completion afterwards.
                run_again(executor, processor, process);
                assert_eq!(process.failure(), None);
                assert_eq!(later.load(Ordering::Relaxed), 10);
                let counts = first.counts[0].iter().map(|count| count.load(Ordering::Relaxed));
                assert_eq!(counts.clone().sum::<u32>(), ran + 64, "each tile once more");
                assert!(counts.clone().all(|count| count == 1 || count == 2));
            });
        assert_eq!(outcomes, [Err(Failure::Cancelled), Ok(())]);
    }
}

#[test]
fn a_panicking_kernel_fails_the_execution_and_every_worker_lives_on() {
    for workers in [1, 2, 4] {
        let armed = AtomicBool::new(true);
        let first = Tally::new(&[64]);
        let later = AtomicU32::new(0);
        let faulty = |tile| {
            first.hit(0, tile);
            if tile == 13 && armed.load(Ordering::Relaxed) {
                panic!("a kernel panics on tile 13 (the test expects this message)");
            }
        };
        let outcomes = run_two_regions(workers, &faulty, &later, |executor, processor, process| {
            run_again(executor, processor, process);
            assert_eq!(process.failure(), Some(Failure::PANICKED));
            assert_eq!(later.load(Ordering::Relaxed), 0, "the region after the panic never opened");
            assert_eq!(first.counts[0][13].load(Ordering::Relaxed), 1);

            armed.store(false, Ordering::Relaxed);
            run_again(executor, processor, process);
            assert_eq!(process.failure(), None);
            assert_eq!(later.load(Ordering::Relaxed), 10);
        });
        assert_eq!(outcomes, [Err(Failure::PANICKED), Ok(())]);
    }
}

#[test]
fn a_process_cancelled_before_it_runs_finishes_without_a_tile() {
    let ran = AtomicU32::new(0);
    let kernel = |_| {
        ran.fetch_add(1, Ordering::Relaxed);
    };
    let buffer = CommandBuffer::builder().dispatch(8, &kernel).build().unwrap();
    let outcomes = Mutex::new(Vec::new());
    let hook = |outcome| outcomes.lock().unwrap().push(outcome);
    let processor = BlockProcessor::new(&buffer, 2).unwrap().with_finish_hook(&hook);
    let process = Process::new(&processor, Class::Compute);
    CpuPool::scope(config(2, SpinPolicy::default()), |executor| {
        executor.hold(&process).unwrap();
        executor.submit(&process).unwrap();
        executor.cancel(&process);
        executor.release(&process).unwrap();
        wait_until("the cancelled process completes", || process.is_completed());
        assert_eq!(ran.load(Ordering::Relaxed), 0);
        run_again(executor, &processor, &process);
        assert_eq!(ran.load(Ordering::Relaxed), 8);
    })
    .unwrap();
    assert_eq!(*outcomes.lock().unwrap(), [Err(Failure::Cancelled), Ok(())]);
}

#[test]
fn zero_tile_dispatches_are_dropped_and_an_empty_buffer_finishes() {
    let ran = AtomicU32::new(0);
    let kernel = |_| {
        ran.fetch_add(1, Ordering::Relaxed);
    };
    let buffer = CommandBuffer::builder()
        .dispatch(0, &kernel)
        .dispatch(3, &kernel)
        .dispatch(0, &kernel)
        .dispatch_batched(0, 1, &kernel)
        .dispatch(2, &kernel)
        .build()
        .unwrap();
    assert_eq!(buffer.regions(), 2);
    assert_eq!(buffer.tiles(), 5);
    assert_eq!(buffer.region_tiles(1), Some(2));
    let empty = CommandBuffer::builder().dispatch(0, &kernel).build().unwrap();
    assert!(empty.is_empty());

    let finished = AtomicU32::new(0);
    let hook = |outcome: Result<(), Failure>| {
        assert_eq!(outcome, Ok(()));
        finished.fetch_add(1, Ordering::Relaxed);
    };
    let processor = BlockProcessor::new(&buffer, 2).unwrap().with_finish_hook(&hook);
    let nothing = BlockProcessor::new(&empty, 2).unwrap().with_finish_hook(&hook);
    let (process, idle) =
        (Process::new(&processor, Class::Compute), Process::new(&nothing, Class::Compute));
    CpuPool::scope(config(2, SpinPolicy::default()), |executor| {
        for _ in 0..3 {
            run_again(executor, &processor, &process);
            run_again(executor, &nothing, &idle);
        }
    })
    .unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 15);
    assert_eq!(finished.load(Ordering::Relaxed), 6);
}

#[test]
fn reset_and_construction_refuse_misuse() {
    let ran = AtomicU32::new(0);
    let kernel = |_| {
        ran.fetch_add(1, Ordering::Relaxed);
    };
    let buffer = CommandBuffer::builder().dispatch(1, &kernel).build().unwrap();
    assert_eq!(BlockProcessor::new(&buffer, 0).unwrap_err(), BlockError::NoWorkers);
    let processor = BlockProcessor::new(&buffer, 1).unwrap();
    assert!(!processor.is_finished());
    assert_eq!(processor.reset(), Err(BlockError::NotFinished), "a fresh processor is armed");
    let process = Process::new(&processor, Class::Compute);
    CpuPool::scope(config(1, SpinPolicy::Park), |executor| {
        executor.submit(&process).unwrap();
        wait_until("the execution completes", || process.is_completed());
        // Rearmed but not reset: it finishes without running the tile again.
        process.rearm().unwrap();
        executor.submit(&process).unwrap();
        wait_until("the unreset execution completes", || process.is_completed());
        assert_eq!(process.failure(), None);
    })
    .unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 1);
    assert_eq!(processor.reset(), Ok(()));
    assert_eq!(processor.reset(), Err(BlockError::NotFinished), "one reset per execution");
    assert!(BlockError::NotFinished.to_string().contains("not finished"));
}

/// What every kernel of the wake-budget test reads: the process running it.
static BUDGET_PROCESS: OnceLock<&'static Process<'static>> = OnceLock::new();
static BUDGET_SEEN: [AtomicU32; 4] =
    [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];

fn record_budget(region: usize) {
    let process = BUDGET_PROCESS.get().expect("set before submission");
    BUDGET_SEEN[region].store(process.wake_budget(), Ordering::Relaxed);
}

/// Each region runs under the budget `min(tiles, workers)`, set before its first tile.
#[test]
fn the_wake_budget_follows_the_open_region() {
    static KERNELS: [fn(u32); 4] =
        [|_| record_budget(0), |_| record_budget(1), |_| record_budget(2), |_| record_budget(3)];
    let tiles = [1, 100, 2, 3];
    let buffer: &'static CommandBuffer<'static> = Box::leak(Box::new(
        KERNELS
            .iter()
            .zip(tiles)
            .fold(CommandBuffer::builder(), |builder, (kernel, n)| builder.dispatch(n, kernel))
            .build()
            .unwrap(),
    ));
    let processor: &'static BlockProcessor<'static> =
        Box::leak(Box::new(BlockProcessor::new(buffer, 3).unwrap()));
    let process: &'static Process<'static> =
        Box::leak(Box::new(Process::new(processor, Class::Compute)));
    BUDGET_PROCESS.set(process).unwrap();
    let pool = CpuPool::start(config(3, SpinPolicy::default())).unwrap();
    for _ in 0..5 {
        run_again(pool.executor(), processor, process);
        let seen: Vec<u32> = BUDGET_SEEN.iter().map(|seen| seen.load(Ordering::Relaxed)).collect();
        assert_eq!(seen, [1, 3, 2, 3]);
    }
    assert_eq!(pool.shutdown(), 0);
}

/// A region that opens with a larger budget wakes workers that parked during a smaller one:
/// without that, a long region after a one-tile region would run on the one worker that
/// opened it.
#[test]
fn a_wider_region_wakes_workers_parked_during_a_narrower_one() {
    const WORKERS: usize = 2;
    let opener = Mutex::new(None);
    // Long enough for the other worker, which parks as soon as it finds nothing to do, to be
    // asleep before the wide region opens.
    let narrow = |_| {
        *opener.lock().unwrap() = Some(thread::current().id());
        thread::sleep(Duration::from_millis(20));
    };
    let joined = AtomicBool::new(false);
    // Each tile of the wide region holds its worker until another worker has run one, so the
    // region cannot finish on the opener alone; the deadline only turns a lost wake into a
    // failure instead of a hang.
    let wide = |_| {
        if Some(thread::current().id()) != *opener.lock().unwrap() {
            joined.store(true, Ordering::Relaxed);
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !joined.load(Ordering::Relaxed) && Instant::now() < deadline {
            thread::yield_now();
        }
    };
    let buffer = CommandBuffer::builder()
        .dispatch(1, &narrow)
        .dispatch_batched(8, 1, &wide)
        .build()
        .unwrap();
    let processor = BlockProcessor::new(&buffer, WORKERS).unwrap();
    let process = Process::new(&processor, Class::Compute);
    CpuPool::scope(config(WORKERS, SpinPolicy::Park), |executor| {
        for round in 0..5 {
            joined.store(false, Ordering::Relaxed);
            run_again(executor, &processor, &process);
            assert!(
                joined.load(Ordering::Relaxed),
                "round {round}: the parked worker never joined the wide region"
            );
        }
    })
    .unwrap();
}
