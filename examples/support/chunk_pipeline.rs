//! A three-stage pipeline over numbered chunks, twice: on a causeway device (one host
//! function or kernel per stage, each submission carrying its chunk in [`Op::args`]) and on
//! three threads joined by `std::sync::mpsc` channels. Shared by the `chunk_pipeline` example,
//! which runs both and checks they agree, and the `pipeline` bench, which times them in the
//! same run.
//!
//! The work, per chunk `c` of [`CHUNK`] words:
//! 1. **load** — fill a buffer with `c·CHUNK + i` (a host function on one queue);
//! 2. **transform** — replace each word `x` with `x·x mod 2³¹−1`, in [`TILES`] tiles run by
//!    every worker (a CPU command buffer on a second queue);
//! 3. **store** — add the chunk's words into a running total (a host function on a third).
//!
//! [`SLOTS`] buffers circulate: a load reuses the buffer its chunk's predecessor `SLOTS` chunks
//! back was stored from, so the device version waits for that store (backpressure through a
//! semaphore, not a side channel), and the channel version sends the buffer back.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use causeway::cpu::CpuBackend;
use causeway::device::{Args, Device, Invocation, Op, QueueConfig, QueueId, SemaphoreId, Work};
use causeway::{PoolConfig, Scope};

/// Words per chunk.
pub const CHUNK: usize = 4096;
/// Tiles the transform runs each chunk in.
pub const TILES: u32 = 4;
/// Buffers in circulation.
pub const SLOTS: u64 = 4;

const WORDS_PER_TILE: usize = CHUNK / TILES as usize;
const MODULUS: u64 = (1 << 31) - 1;

fn loaded(chunk: u64, index: usize) -> u64 {
    chunk * CHUNK as u64 + index as u64
}

fn transformed(x: u64) -> u64 {
    x * x % MODULUS
}

/// The total both pipelines must reach over `chunks` chunks, computed directly.
pub fn expected_total(chunks: u64) -> u64 {
    (0..chunks)
        .flat_map(|chunk| (0..CHUNK).map(move |index| transformed(loaded(chunk, index))))
        .fold(0, u64::wrapping_add)
}

/// The buffers: `SLOTS` chunks' worth of words. Relaxed accesses: every hand-over between
/// stages goes through a semaphore (device) or a channel (threads), which orders them.
struct Buffers {
    words: Vec<AtomicU64>,
}

impl Buffers {
    fn new() -> Arc<Buffers> {
        Arc::new(Buffers {
            words: (0..SLOTS as usize * CHUNK).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn slot(&self, slot: u64) -> &[AtomicU64] {
        let start = slot as usize * CHUNK;
        &self.words[start..start + CHUNK]
    }
}

/// The causeway pipeline: a device with the three stages registered once.
pub struct DevicePipeline {
    device: Device,
    queues: [QueueId; 3],
    /// `loaded`, `transformed` and `stored`: chunk `c`'s stage signals `c + 1`.
    stages: [SemaphoreId; 3],
    work: [Work; 3],
    total: Arc<AtomicU64>,
    /// Chunks through the pipeline so far (the semaphores' values).
    chunks: u64,
}

impl DevicePipeline {
    /// A device on `workers` pool threads, with the three stages registered.
    pub fn new(workers: usize) -> Result<DevicePipeline, Box<dyn std::error::Error>> {
        let buffers = Buffers::new();
        let total = Arc::new(AtomicU64::new(0));

        // One command buffer for every chunk: the operation's arguments say which buffer.
        let cpu = CpuBackend::new();
        let transform = cpu.command_buffer(vec![(
            TILES,
            Box::new({
                let buffers = Arc::clone(&buffers);
                move |tile: u32, args: &Args| {
                    let words = buffers.slot(args.u64(1));
                    let tile = tile as usize * WORDS_PER_TILE;
                    for word in &words[tile..tile + WORDS_PER_TILE] {
                        word.store(transformed(word.load(Relaxed)), Relaxed);
                    }
                }
            }),
        )])?;

        let mut builder = Device::builder(PoolConfig::with_workers(workers));
        let cpu = builder.driver(cpu);
        let load = builder.host_call({
            let buffers = Arc::clone(&buffers);
            move |call: &Invocation| {
                let chunk = call.args.u64(0);
                for (index, word) in buffers.slot(call.args.u64(1)).iter().enumerate() {
                    word.store(loaded(chunk, index), Relaxed);
                }
                Ok(())
            }
        });
        let store = builder.host_call({
            let total = Arc::clone(&total);
            move |call: &Invocation| {
                let sum = buffers
                    .slot(call.args.u64(1))
                    .iter()
                    .map(|word| word.load(Relaxed))
                    .fold(0, u64::wrapping_add);
                // Stores run in queue order on one queue: a plain read-modify-write.
                total.store(total.load(Relaxed).wrapping_add(sum), Relaxed);
                Ok(())
            }
        });
        let queues = [(); 3].map(|()| builder.queue(QueueConfig::on(cpu).capacity(64)));
        let home = builder.endpoint(queues[0]).ok_or("the queue has no endpoint")?;
        let stages = [(); 3].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
        let device = builder.build()?;
        let work = [Work::Host(load), Work::Execute(transform), Work::Host(store)];
        Ok(DevicePipeline { device, queues, stages, work, total, chunks: 0 })
    }

    /// Submits `chunks` more chunks, chunk by chunk, and waits for the last store; the running
    /// total afterwards.
    pub fn run(&mut self, chunks: u64) -> Result<u64, Box<dyn std::error::Error>> {
        let [loaded, transformed, stored] = self.stages;
        for chunk in self.chunks..self.chunks + chunks {
            let args = Args::from_u64s([chunk, chunk % SLOTS]);
            // A load reuses the buffer chunk `chunk - SLOTS` was stored from.
            let free = (chunk + 1).saturating_sub(SLOTS);
            let steps = [
                (self.queues[0], (stored, free), loaded),
                (self.queues[1], (loaded, chunk + 1), transformed),
                (self.queues[2], (transformed, chunk + 1), stored),
            ];
            for ((queue, wait, signal), work) in steps.into_iter().zip(self.work) {
                let waits = [wait];
                let waits = if wait.1 == 0 { &[][..] } else { &waits[..] };
                let op = Op { waits, signals: &[(signal, chunk + 1)], work, tag: chunk, args };
                // Waits for ring room while earlier chunks drain (the work ahead frees it).
                self.device.submit_timeout(queue, &op, Duration::from_secs(60))?;
            }
        }
        self.chunks += chunks;
        self.device.wait(stored, self.chunks, Some(Duration::from_secs(60)))?;
        Ok(self.total.load(Relaxed))
    }
}

/// The same work on three threads joined by channels, the buffers travelling through them:
/// the total over `chunks` chunks.
pub fn run_threads(chunks: u64) -> u64 {
    let (free_sender, free) = mpsc::channel::<Vec<u64>>();
    let (loaded_sender, loaded_chunks) = mpsc::channel::<Vec<u64>>();
    let (transformed_sender, transformed_chunks) = mpsc::channel::<Vec<u64>>();
    for _ in 0..SLOTS {
        free_sender.send(vec![0; CHUNK]).expect("the receiver lives");
    }
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for chunk in 0..chunks {
                let Ok(mut words) = free.recv() else { return };
                for (index, word) in words.iter_mut().enumerate() {
                    *word = loaded(chunk, index);
                }
                if loaded_sender.send(words).is_err() {
                    return;
                }
            }
        });
        scope.spawn(move || {
            for mut words in loaded_chunks {
                words.iter_mut().for_each(|word| *word = transformed(*word));
                if transformed_sender.send(words).is_err() {
                    return;
                }
            }
        });
        let mut total = 0u64;
        for words in transformed_chunks {
            total = words.iter().fold(total, |total, &word| total.wrapping_add(word));
            // The loader may have finished and dropped its end: the buffer is not needed.
            let _ = free_sender.send(words);
        }
        total
    })
}
