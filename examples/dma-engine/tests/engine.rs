//! The DMA engine driver on its own: copies land, in queue order, and a copy the engine refuses
//! fails its operation — and what waits on it — with the engine's code.

use std::time::Duration;

use causeway_core::scope::Scope;
use causeway_device::{Device, Op, PoolConfig, QueueConfig, Work};
use causeway_example_dma_engine::{DmaBackend, COPY_REFUSED};
use causeway_runtime::blocking::{wait, HostWaitError};

const LONG: Duration = Duration::from_secs(60);

#[test]
fn copies_land_in_order_and_a_refused_copy_fails_with_the_engines_code() {
    let mut dma = DmaBackend::new();
    let [a, b, c, short] = [vec![1; 64], vec![0; 64], vec![0; 64], vec![0; 8]]
        .map(|contents| dma.buffer(contents).unwrap());
    let (a_to_b, b_to_c, a_to_short) =
        (dma.copy(a, b).unwrap(), dma.copy(b, c).unwrap(), dma.copy(a, short).unwrap());
    let memory = dma.memory();

    let mut builder = Device::builder(PoolConfig::with_workers(1));
    let driver = builder.driver(dma);
    let queue = builder.queue(QueueConfig::on(driver));
    let home = builder.endpoint(queue).unwrap();
    let [done, refused, after] = [(); 3].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let device = builder.build().unwrap();

    // Two copies in queue order: the second reads what the first wrote.
    for (tag, buffer) in [(1, a_to_b), (2, b_to_c)] {
        let signals: &[_] = if tag == 2 { &[(done, 1)] } else { &[] };
        device
            .submit(
                queue,
                &Op { waits: &[], signals, work: Work::Execute(buffer), tag, ..Default::default() },
            )
            .unwrap();
    }
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, Some(LONG)), Ok(1));
    assert_eq!(memory.read(c), Some(vec![1; 64]));

    // A destination shorter than its source: refused by the engine, nothing written; the
    // operation waiting on it fails with the same code.
    let op = Op {
        waits: &[],
        signals: &[(refused, 1)],
        work: Work::Execute(a_to_short),
        tag: 3,
        ..Default::default()
    };
    device.submit(queue, &op).unwrap();
    let op = Op {
        waits: &[(refused, 1)],
        signals: &[(after, 1)],
        work: Work::Barrier,
        tag: 4,
        ..Default::default()
    };
    device.submit(queue, &op).unwrap();
    let failed = Err(HostWaitError::Failed(COPY_REFUSED));
    assert_eq!(wait(device.semaphore(refused).unwrap(), 1, Some(LONG)), failed);
    assert_eq!(wait(device.semaphore(after).unwrap(), 1, Some(LONG)), failed);
    assert_eq!(memory.read(short), Some(vec![0; 8]));

    let report = device.shutdown(LONG);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}
