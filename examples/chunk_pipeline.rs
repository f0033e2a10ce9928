//! A pipeline of 1,000 chunks through three stages — load (a host function), transform (a CPU
//! kernel over four tiles) and store (a host function) — each stage registered once and told
//! which chunk and which buffer by its submission's arguments ([`Op::args`]). Four buffers
//! circulate; a load waits for the store that frees its buffer. The same work on three threads
//! joined by `std::sync::mpsc` channels must reach the same total (the `pipeline` bench times
//! the two side by side).
//!
//! Run: `cargo run --release --example chunk_pipeline`
//!
//! [`Op::args`]: causeway::device::Op::args

use std::process::ExitCode;

#[path = "support/chunk_pipeline.rs"]
mod chunk_pipeline;

use chunk_pipeline::{expected_total, run_threads, DevicePipeline, CHUNK};

const CHUNKS: u64 = 1_000;

fn main() -> ExitCode {
    let expected = expected_total(CHUNKS);
    let mut pipeline = match DevicePipeline::new(2) {
        Ok(pipeline) => pipeline,
        Err(error) => {
            eprintln!("chunk_pipeline: building the device failed: {error}");
            return ExitCode::FAILURE;
        }
    };
    let on_device = match pipeline.run(CHUNKS) {
        Ok(total) => total,
        Err(error) => {
            eprintln!("chunk_pipeline: the device pipeline failed: {error}");
            return ExitCode::FAILURE;
        }
    };
    let on_threads = run_threads(CHUNKS);
    println!("{CHUNKS} chunks of {CHUNK} words through load, transform and store");
    println!("  causeway device (3 queues, per-submission arguments): total {on_device:#018x}");
    println!("  three threads and mpsc channels:                       total {on_threads:#018x}");
    if on_device != expected || on_threads != expected {
        eprintln!("chunk_pipeline: expected total {expected:#018x}");
        return ExitCode::FAILURE;
    }
    println!("both match the expected total");
    ExitCode::SUCCESS
}
