//! The CUDA driver's costs, each beside a floor measured in the same run.
//!
//! Everywhere (no GPU needed):
//! - `bookkeeping/event_table`: one operation of a two-queue chain through the event
//!   emulation's table — record its event (from the pool), plan and unpin a wait on the other
//!   queue's last operation, complete the operation a window behind;
//! - `bookkeeping/hash_map_floor`: the same number of steps on a `HashMap<(queue, epoch),
//!   event>` (insert, look-up, remove), the least any value → event map does;
//! - `bookkeeping/timeline_words` beside `bookkeeping/vec_floor`: allocating, giving back and
//!   draining a word, beside a push and pop on a `Vec`.
//!
//! On a GPU (skipped with the printed reason where no CUDA driver is installed):
//! - `gpu/causeway_signal_to_dependent`: a one-tile kernel on one CUDA queue signalling, a
//!   one-tile kernel on another waiting for it, the host waiting for the second, through the
//!   device layer;
//! - `gpu/raw_event_record_wait`: the same two kernels on two streams joined by a raw
//!   `cuEventRecord` + `cuStreamWaitEvent`, the host synchronising the second stream.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Duration;

use causeway_driver_cuda::{driver_present, EventTable, TimelineWords, WaitPlan, NO_DRIVER};
use criterion::{criterion_main, Criterion, Throughput};

const OPERATIONS: u64 = 10_000;
const WINDOW: u64 = 8;

fn bookkeeping(c: &mut Criterion) {
    let mut group = c.benchmark_group("bookkeeping");
    group.throughput(Throughput::Elements(OPERATIONS));
    group.bench_function("event_table", |b| {
        b.iter(|| {
            let mut table: EventTable<u32> = EventTable::new(2);
            let mut created = 0;
            for operation in 1..=OPERATIONS {
                let queue = (operation % 2) as usize;
                let other_epoch = (operation - 1) / 2;
                if other_epoch > 0 {
                    if let Ok(WaitPlan::Event { slot, event }) = table.wait(1 - queue, other_epoch)
                    {
                        black_box(event);
                        table.unpin(slot).unwrap();
                    }
                }
                let (slot, _) = table.take_free().unwrap_or_else(|| {
                    created += 1;
                    (table.add(created).unwrap(), created)
                });
                table.record(queue, operation.div_ceil(2), slot).unwrap();
                if operation > WINDOW {
                    let done = operation - WINDOW;
                    table.complete((done % 2) as usize, done.div_ceil(2)).unwrap();
                }
            }
            black_box(table.events())
        });
    });
    group.bench_function("hash_map_floor", |b| {
        b.iter(|| {
            let mut map: HashMap<(usize, u64), u32> = HashMap::new();
            let mut free: Vec<u32> = Vec::new();
            let mut created = 0;
            for operation in 1..=OPERATIONS {
                let queue = (operation % 2) as usize;
                let other_epoch = (operation - 1) / 2;
                if other_epoch > 0 {
                    black_box(map.get(&(1 - queue, other_epoch)));
                }
                let event = free.pop().unwrap_or_else(|| {
                    created += 1;
                    created
                });
                map.insert((queue, operation.div_ceil(2)), event);
                if operation > WINDOW {
                    let done = operation - WINDOW;
                    if let Some(event) = map.remove(&((done % 2) as usize, done.div_ceil(2))) {
                        free.push(event);
                    }
                }
            }
            black_box(map.len())
        });
    });
    group.bench_function("timeline_words", |b| {
        let mut words = TimelineWords::new(256);
        b.iter(|| {
            for _ in 0..OPERATIONS {
                let word = words.allocate().unwrap();
                words.give_back(black_box(word)).unwrap();
                words.drained(word).unwrap();
            }
        });
    });
    group.bench_function("vec_floor", |b| {
        let mut free: Vec<u32> = (0..256).collect();
        b.iter(|| {
            for _ in 0..OPERATIONS {
                let word = free.pop().unwrap();
                free.push(black_box(word));
            }
        });
    });
    group.finish();
}

fn gpu(c: &mut Criterion) {
    if !driver_present() {
        println!("gpu benches skipped: {NO_DRIVER}");
        return;
    }
    gpu_benches::run(c);
}

/// The GPU benches proper: reached only where a CUDA driver is installed.
mod gpu_benches {
    use std::ffi::{c_void, CString};

    use causeway_core::scope::Scope;
    use causeway_device::{Device, Op, QueueConfig, Work};
    use causeway_driver_cuda::{CudaBackend, EmulationChoice, SPIN_PTX};
    use causeway_runtime::blocking::wait;
    use causeway_runtime::PoolConfig;
    use criterion::Criterion;
    use cudarc::driver::sys;

    use super::*;

    const HANG_GUARD: Duration = Duration::from_secs(60);

    fn call(name: &str, result: sys::CUresult) {
        assert_eq!(result, sys::CUresult::CUDA_SUCCESS, "{name}");
    }

    pub(super) fn run(c: &mut Criterion) {
        let mut group = c.benchmark_group("gpu");
        let mut cuda = CudaBackend::open(0, EmulationChoice::Best).expect("device 0 opens");
        let tile = Work::Execute(cuda.command_buffer(vec![(1, Duration::ZERO)]).unwrap());
        let mut builder = Device::builder(PoolConfig::with_workers(2));
        let driver = builder.driver(cuda);
        let queue = || {
            let mut config = QueueConfig::default();
            config.driver = driver;
            config
        };
        let (first, second) = (builder.queue(queue()), builder.queue(queue()));
        let home = builder.endpoint(first).unwrap();
        let (signal, done) = (
            builder.semaphore(0, Scope::DeviceLocal, home),
            builder.semaphore(0, Scope::DeviceLocal, home),
        );
        let device = builder.build().unwrap();
        let mut round = 0;
        group.bench_function("causeway_signal_to_dependent", |b| {
            b.iter(|| {
                round += 1;
                let op = Op {
                    waits: &[],
                    signals: &[(signal, round)],
                    work: tile,
                    tag: round,
                    ..Default::default()
                };
                device.submit(first, &op).unwrap();
                let op = Op {
                    waits: &[(signal, round)],
                    signals: &[(done, round)],
                    work: tile,
                    tag: round,
                    ..Default::default()
                };
                device.submit(second, &op).unwrap();
                assert_eq!(
                    wait(device.semaphore(done).unwrap(), round, Some(HANG_GUARD)),
                    Ok(round)
                );
            });
        });
        let report = device.shutdown(HANG_GUARD);
        assert!(!report.leaked, "{report:?}");

        // SAFETY: a CUDA driver is present (checked by the caller); every out-pointer is a
        // live local; the handles are used only below and destroyed at the end.
        unsafe {
            let (mut device, mut context) = (0, std::ptr::null_mut());
            call("cuInit", sys::cuInit(0));
            call("cuDeviceGet", sys::cuDeviceGet(&mut device, 0));
            call("cuDevicePrimaryCtxRetain", sys::cuDevicePrimaryCtxRetain(&mut context, device));
            call("cuCtxSetCurrent", sys::cuCtxSetCurrent(context));
            let ptx = CString::new(SPIN_PTX).unwrap();
            let entry = CString::new("causeway_spin").unwrap();
            let (mut module, mut function) = (std::ptr::null_mut(), std::ptr::null_mut());
            call("cuModuleLoadData", sys::cuModuleLoadData(&mut module, ptx.as_ptr().cast()));
            call(
                "cuModuleGetFunction",
                sys::cuModuleGetFunction(&mut function, module, entry.as_ptr()),
            );
            let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
            let (mut a, mut b_stream) = (std::ptr::null_mut(), std::ptr::null_mut());
            call("cuStreamCreate", sys::cuStreamCreate(&mut a, flags));
            call("cuStreamCreate", sys::cuStreamCreate(&mut b_stream, flags));
            let mut event = std::ptr::null_mut();
            let event_flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
            call("cuEventCreate", sys::cuEventCreate(&mut event, event_flags));
            let launch = |stream: sys::CUstream| {
                let mut nanoseconds = 0u64;
                let mut parameters = [std::ptr::from_mut(&mut nanoseconds).cast::<c_void>()];
                let null = std::ptr::null_mut();
                let result = sys::cuLaunchKernel(
                    function,
                    1,
                    1,
                    1,
                    1,
                    1,
                    1,
                    0,
                    stream,
                    parameters.as_mut_ptr(),
                    null,
                );
                call("cuLaunchKernel", result);
            };
            group.bench_function("raw_event_record_wait", |b| {
                b.iter(|| {
                    launch(a);
                    call("cuEventRecord", sys::cuEventRecord(event, a));
                    call("cuStreamWaitEvent", sys::cuStreamWaitEvent(b_stream, event, 0));
                    launch(b_stream);
                    call("cuStreamSynchronize", sys::cuStreamSynchronize(b_stream));
                });
            });
            call("cuEventDestroy", sys::cuEventDestroy_v2(event));
            call("cuStreamDestroy", sys::cuStreamDestroy_v2(a));
            call("cuStreamDestroy", sys::cuStreamDestroy_v2(b_stream));
            call("cuModuleUnload", sys::cuModuleUnload(module));
            call("cuDevicePrimaryCtxRelease", sys::cuDevicePrimaryCtxRelease_v2(device));
        }
        group.finish();
    }
}

fn benches() {
    let mut criterion = Criterion::default().configure_from_args();
    bookkeeping(&mut criterion);
    gpu(&mut criterion);
}

criterion_main!(benches);
