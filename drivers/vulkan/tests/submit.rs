//! Submissions on the one VkQueue: native timeline waits chain work across timelines in order,
//! a submission without commands orders its signal after its waits, and a device wait may come
//! before the host signal it waits for.

mod common;

use causeway_driver_vulkan::{submit, Buffer, CommandBuffer, Kernel, Step, Timeline, VulkanError};

const ELEMENTS: u32 = 1 << 14;

/// Three submissions on VkQueue 0 standing for two causeway queues, each with its timeline:
/// 1 (queue A, epoch 1) computes `c = a + b`; 2 (queue B, epoch 1) waits natively for A ≥ 1 and
/// computes `y = 3c + y`; 3 (queue A, epoch 2) waits natively for B ≥ 1 and copies `y` out.
/// The copy holds the right numbers only if each submission ran after the one it waits for.
#[test]
fn a_chain_of_native_waits_across_two_timelines_completes_in_order() {
    let gpu = common::open();
    let bytes = u64::from(ELEMENTS) * 4;
    let [a, b, c, y, out] = [(); 5].map(|()| Buffer::new(&gpu, bytes).expect("buffer"));
    let n = ELEMENTS as usize;
    let a_values: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b_values: Vec<f32> = (0..n).map(|i| (i % 5) as f32).collect();
    let y_values: Vec<f32> = (0..n).map(|i| (i % 3) as f32).collect();
    a.write_f32(0, &a_values).expect("upload");
    b.write_f32(0, &b_values).expect("upload");
    y.write_f32(0, &y_values).expect("upload");
    let add = Kernel::add(&gpu).expect("add kernel");
    let saxpy = Kernel::saxpy(&gpu).expect("saxpy kernel");
    let sum = CommandBuffer::record(
        &gpu,
        vec![vec![Step::Dispatch(add.launch(&[&a, &b, &c], ELEMENTS, 4, 0.0).expect("launch"))]],
    )
    .expect("record");
    let scale = CommandBuffer::record(
        &gpu,
        vec![vec![Step::Dispatch(saxpy.launch(&[&c, &y], ELEMENTS, 2, 3.0).expect("launch"))]],
    )
    .expect("record");
    let copy = CommandBuffer::record(
        &gpu,
        vec![vec![Step::Copy { source: y.clone(), destination: out.clone(), bytes }]],
    )
    .expect("record");
    let queue_a = Timeline::new(&gpu, 0).expect("timeline");
    let queue_b = Timeline::new(&gpu, 0).expect("timeline");
    let waits_before = gpu.native_waits();
    submit(&gpu, 0, Some(&sum), &[], (&queue_a, 1)).expect("submit 1");
    submit(&gpu, 0, Some(&scale), &[(&queue_a, 1)], (&queue_b, 1)).expect("submit 2");
    submit(&gpu, 0, Some(&copy), &[(&queue_b, 1)], (&queue_a, 2)).expect("submit 3");
    assert_eq!(gpu.native_waits() - waits_before, 2);
    assert!(queue_a.wait_host(2, common::HANG_GUARD).expect("wait"), "the chain hung");
    assert_eq!(queue_b.value().expect("value"), 1);
    let result = out.read_f32(0, n).expect("readback");
    for i in 0..n {
        let expected = 3.0 * (a_values[i] + b_values[i]) + y_values[i];
        assert_eq!(result[i].to_bits(), expected.to_bits(), "out[{i}]");
    }
    drop((sum, scale, copy, queue_a, queue_b));
    common::assert_validation_clean(&gpu);
}

/// A submission with no command buffer (a barrier operation) signals after its waits.
#[test]
fn an_empty_submission_orders_its_signal_after_its_waits() {
    let gpu = common::open();
    let upstream = Timeline::new(&gpu, 0).expect("timeline");
    let barrier = Timeline::new(&gpu, 0).expect("timeline");
    submit(&gpu, 0, None, &[], (&upstream, 1)).expect("submit");
    submit(&gpu, 0, None, &[(&upstream, 1)], (&barrier, 1)).expect("submit");
    assert!(barrier.wait_host(1, common::HANG_GUARD).expect("wait"), "the barrier hung");
    assert_eq!(upstream.value().expect("value"), 1);
    drop((upstream, barrier));
    common::assert_validation_clean(&gpu);
}

/// Wait-before-signal: the device waits for a value the host signals only afterwards.
#[test]
fn a_device_wait_submitted_before_its_host_signal_completes_after_it() {
    let gpu = common::open();
    let mirror = Timeline::new(&gpu, 0).expect("timeline");
    let queue = Timeline::new(&gpu, 0).expect("timeline");
    let [source, destination] = [(); 2].map(|()| Buffer::new(&gpu, 1024).expect("buffer"));
    source.write_f32(0, &[7.5; 256]).expect("upload");
    let copy = CommandBuffer::record(
        &gpu,
        vec![vec![Step::Copy { source, destination: destination.clone(), bytes: 1024 }]],
    )
    .expect("record");
    submit(&gpu, 0, Some(&copy), &[(&mirror, 5)], (&queue, 1)).expect("submit");
    // No timing assertion: the copy may not have run yet whatever the host sees now.
    assert_eq!(queue.value().expect("value"), 0, "the copy ran before its wait was satisfied");
    mirror.signal_host(5).expect("host signal");
    assert!(queue.wait_host(1, common::HANG_GUARD).expect("wait"), "the wait never ended");
    assert_eq!(destination.read_f32(0, 256).expect("readback"), vec![7.5; 256]);
    drop((copy, mirror, queue));
    common::assert_validation_clean(&gpu);
}

/// A command buffer is resubmitted only once its last submission completed.
#[test]
fn a_pending_command_buffer_is_refused_and_resubmits_once_complete() {
    let gpu = common::open();
    let gate = Timeline::new(&gpu, 0).expect("timeline");
    let queue = Timeline::new(&gpu, 0).expect("timeline");
    let [source, destination] = [(); 2].map(|()| Buffer::new(&gpu, 64).expect("buffer"));
    let copy =
        CommandBuffer::record(&gpu, vec![vec![Step::Copy { source, destination, bytes: 64 }]])
            .expect("record");
    submit(&gpu, 0, Some(&copy), &[(&gate, 1)], (&queue, 1)).expect("submit");
    assert!(matches!(
        submit(&gpu, 0, Some(&copy), &[], (&queue, 2)),
        Err(VulkanError::CommandBufferPending)
    ));
    gate.signal_host(1).expect("host signal");
    assert!(queue.wait_host(1, common::HANG_GUARD).expect("wait"), "the copy hung");
    submit(&gpu, 0, Some(&copy), &[(&queue, 1)], (&queue, 2)).expect("resubmit");
    assert!(queue.wait_host(2, common::HANG_GUARD).expect("wait"), "the copy hung");
    drop((copy, gate, queue));
    common::assert_validation_clean(&gpu);
}

#[test]
fn a_host_signal_below_a_pending_device_signal_is_refused() {
    let gpu = common::open();
    let gate = Timeline::new(&gpu, 0).expect("timeline");
    let queue = Timeline::new(&gpu, 0).expect("timeline");
    submit(&gpu, 0, None, &[(&gate, 1)], (&queue, 3)).expect("submit");
    assert!(matches!(
        queue.signal_host(1),
        Err(VulkanError::InvalidHostSignal { value: 1, pending_device_signal: 3, .. })
    ));
    gate.signal_host(1).expect("host signal");
    assert!(queue.wait_host(3, common::HANG_GUARD).expect("wait"), "the barrier hung");
    queue.signal_host(4).expect("no device signal pending any more");
    drop((gate, queue));
    common::assert_validation_clean(&gpu);
}

/// A device signal must rise above the timeline's value and every device signal before it.
#[test]
fn a_device_signal_that_does_not_rise_is_refused_before_vulkan_sees_it() {
    let gpu = common::open();
    let host_advanced = Timeline::new(&gpu, 4).expect("timeline");
    assert!(matches!(
        submit(&gpu, 0, None, &[], (&host_advanced, 4)),
        Err(VulkanError::InvalidDeviceSignal { value: 4, current: 4 })
    ));
    let gate = Timeline::new(&gpu, 0).expect("timeline");
    let queue = Timeline::new(&gpu, 0).expect("timeline");
    submit(&gpu, 0, None, &[(&gate, 1)], (&queue, 2)).expect("submit");
    assert!(matches!(
        submit(&gpu, 0, None, &[], (&queue, 2)),
        Err(VulkanError::InvalidDeviceSignal { value: 2, current: 2 })
    ));
    gate.signal_host(1).expect("host signal");
    assert!(queue.wait_host(2, common::HANG_GUARD).expect("wait"), "the barrier hung");
    drop((host_advanced, gate, queue));
    common::assert_validation_clean(&gpu);
}

/// What the backend's capabilities rest on: on lavapipe, a batch waiting for a value nobody
/// has signalled yet holds up **every later batch** of the VkQueue, even one with no waits (the
/// queue runs its batches in order). All causeway queues share that one VkQueue, so a causeway
/// wait on a value whose signal is not yet submitted must be held by the layer, not turned into
/// a native wait. (The check that the later batch is still held is one-sided: a busy machine
/// can only make it slower to finish.)
#[test]
fn on_lavapipe_a_blocked_wait_holds_up_later_batches_of_the_queue() {
    let gpu = common::open();
    let gate = Timeline::new(&gpu, 0).expect("timeline");
    let blocked = Timeline::new(&gpu, 0).expect("timeline");
    let independent = Timeline::new(&gpu, 0).expect("timeline");
    submit(&gpu, 0, None, &[(&gate, 1)], (&blocked, 1)).expect("submit");
    submit(&gpu, 0, None, &[], (&independent, 1)).expect("submit");
    let finished_early =
        independent.wait_host(1, std::time::Duration::from_millis(500)).expect("wait");
    if gpu.adapter_name().contains("llvmpipe") {
        assert!(!finished_early, "lavapipe ran a batch past an earlier blocked one");
    }
    gate.signal_host(1).expect("host signal");
    assert!(blocked.wait_host(1, common::HANG_GUARD).expect("wait"), "the wait never ended");
    assert!(independent.wait_host(1, common::HANG_GUARD).expect("wait"), "the batch hung");
    drop((gate, blocked, independent));
    common::assert_validation_clean(&gpu);
}
