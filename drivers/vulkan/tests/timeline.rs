//! Timeline semaphores signalled and waited on from the host.

mod common;

use std::time::Duration;

use causeway_driver_vulkan::{Timeline, VulkanError};

#[test]
fn host_signal_and_wait() {
    let gpu = common::open();
    let timeline = Timeline::new(&gpu, 3).expect("timeline");
    assert_eq!(timeline.value().expect("value"), 3);
    assert!(timeline.wait_host(3, Duration::ZERO).expect("wait"));
    assert!(!timeline.wait_host(4, Duration::from_millis(1)).expect("wait"));
    timeline.signal_host(7).expect("signal");
    assert_eq!(timeline.value().expect("value"), 7);
    assert!(timeline.wait_host(5, common::HANG_GUARD).expect("wait"));
    drop(timeline);
    common::assert_validation_clean(&gpu);
}

#[test]
fn a_host_signal_that_does_not_rise_is_refused_before_vulkan_sees_it() {
    let gpu = common::open();
    let timeline = Timeline::new(&gpu, 5).expect("timeline");
    for value in [4, 5] {
        match timeline.signal_host(value) {
            Err(VulkanError::InvalidHostSignal { value: refused, current: 5, .. }) => {
                assert_eq!(refused, value)
            }
            other => panic!("expected InvalidHostSignal, got {other:?}"),
        }
    }
    assert_eq!(timeline.value().expect("value"), 5);
    drop(timeline);
    common::assert_validation_clean(&gpu);
}

/// With validation off (see `common::open_without_validation`): the waiter wakes while the
/// signalling thread's `vkSignalSemaphore` may not have returned, which the layer at times
/// fails to follow (about one run in twenty of this binary).
#[test]
fn a_thread_waiting_on_the_host_wakes_when_another_signals() {
    let gpu = common::open_without_validation();
    let timeline = Timeline::new(&gpu, 0).expect("timeline");
    let waiter = {
        let timeline = timeline.clone();
        std::thread::spawn(move || timeline.wait_host(2, common::HANG_GUARD))
    };
    timeline.signal_host(1).expect("signal");
    timeline.signal_host(2).expect("signal");
    assert!(waiter.join().expect("waiter").expect("wait"));
}
