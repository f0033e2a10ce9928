//! Fuzzes the NPU ring's descriptor decoder, `RawDescriptor::decode`, and the device engine that
//! consumes what it decodes.
//!
//! Descriptors lie in memory the host writes, so neither side may panic or hang on any 64 bytes.
//! Input: one byte of semaphore-table size, then up to four 64-byte descriptors. For each, the
//! decoder's answer must equal a plain reference reading of the layout (opcode byte, reserved
//! header bits, slot range; first problem wins), a decoded descriptor must encode back to the
//! same meaning, and every status word must round-trip. Then the descriptors run through an
//! `Engine` on a small ring (stepped by hand, no threads): each completes with the status the
//! reference predicts for it — malformed ones with their error — or stalls on a WAIT, and the
//! engine never steps past what was published.
#![no_main]

use causeway_driver_npu::{
    Command, CompletionError, CompletionStatus, DescriptorError, Engine, Limits, Producer,
    RawDescriptor, RegisterFile, RingLayout, Step, Window, DESCRIPTOR_BYTES,
};
use libfuzzer_sys::fuzz_target;
use portable_atomic::AtomicU32;

const OPCODES: [u32; 4] = [1, 2, 3, 4];
const KNOWN_HEADER_BITS: u32 = 0x3FF;

/// The layout, read field by field.
fn reference(words: &[u32; 16], slots: u32) -> Result<(u32, bool, bool), DescriptorError> {
    let header = words[0];
    if header & !KNOWN_HEADER_BITS != 0 {
        return Err(DescriptorError::ReservedBits);
    }
    let opcode = header & 0xFF;
    if !OPCODES.contains(&opcode) {
        return Err(DescriptorError::UnknownOpcode);
    }
    if (opcode == 2 || opcode == 3) && words[2] >= slots {
        return Err(DescriptorError::SemaphoreOutOfRange);
    }
    Ok((opcode, header & 0x100 != 0, header & 0x200 != 0))
}

fn check_decode(raw: &RawDescriptor, slots: u32) {
    let limits = Limits { semaphore_slots: slots };
    let decoded = raw.decode(limits);
    match (reference(&raw.0, slots), decoded) {
        (Err(expected), Err(error)) => assert_eq!(expected, error),
        (Ok((opcode, chained, interrupt)), Ok(descriptor)) => {
            assert_eq!((descriptor.chained, descriptor.interrupt), (chained, interrupt));
            let value = u64::from(raw.0[5]) << 32 | u64::from(raw.0[4]);
            let expected = match opcode {
                1 => Command::Exec {
                    kernel: raw.0[2],
                    tiles: raw.0[3],
                    arguments: raw.0[8..].try_into().unwrap(),
                },
                2 => Command::Wait { slot: raw.0[2], value },
                3 => Command::Signal { slot: raw.0[2], value },
                _ => Command::Barrier,
            };
            assert_eq!(descriptor.command, expected);
            assert_eq!(descriptor.encode().decode(limits), Ok(descriptor));
            assert_eq!(descriptor.encode().0[0], raw.0[0]);
        }
        (expected, decoded) => panic!("reference {expected:?}, decoder {decoded:?}"),
    }
    if let Ok(status) = CompletionStatus::from_word(raw.0[1]) {
        assert_eq!(status.to_word(), raw.0[1]);
    }
}

/// Runs `descriptors` through an engine on a four-slot ring; every semaphore starts at 0 and
/// the kernel table is empty except kernel 0 (which succeeds).
fn check_engine(descriptors: &[RawDescriptor], slots: u32) {
    let table_bytes = slots * 16;
    let completion_address = table_bytes.next_multiple_of(DESCRIPTOR_BYTES);
    let layout = RingLayout {
        ring_base: completion_address + DESCRIPTOR_BYTES,
        ring_order: 2,
        semaphore_base: 0,
        semaphore_count: slots,
        completion_address,
    };
    let words = (layout.ring_base + 4 * DESCRIPTOR_BYTES) as usize / 4;
    let memory: Vec<AtomicU32> = (0..words).map(|_| AtomicU32::new(0)).collect();
    let window = Window::new(&memory);
    let registers = RegisterFile::new();
    let mut producer = Producer::start(&registers, window, layout).unwrap();
    for raw in descriptors {
        producer.try_push_raw(raw).unwrap();
    }
    producer.publish();
    let mut engine = Engine::new(&registers);
    let mut completed = 0;
    let mut chain_failed = false;
    // Every step completes a descriptor or changes state; a few extra steps cover the start.
    for _ in 0..4 * descriptors.len() + 4 {
        match engine.step(&window) {
            Step::Completed { status, .. } => {
                let raw = &descriptors[completed];
                if chain_failed && raw.is_chained() {
                    assert_eq!(status, CompletionStatus::Failed(CompletionError::ChainFailed));
                } else if let Err(error) = reference(&raw.0, slots) {
                    assert_eq!(status, CompletionStatus::Failed(CompletionError::Malformed(error)));
                }
                chain_failed = status != CompletionStatus::Completed;
                completed += 1;
            }
            Step::Exec(request) => {
                let outcome =
                    if request.kernel == 0 { Ok(()) } else { Err(CompletionError::UnknownKernel) };
                let step = engine.finish(&window, request, outcome);
                let Step::Completed { status, .. } = step else { panic!("finish gave {step:?}") };
                chain_failed = status != CompletionStatus::Completed;
                completed += 1;
            }
            Step::Stalled { slot, value } => {
                assert!(slot < slots && value > 0);
                return;
            }
            Step::Idle { .. } => break,
            Step::Transitioned => {}
        }
    }
    assert_eq!(completed, descriptors.len(), "the engine stopped early");
    while producer.reap().is_some() {}
    assert!(producer.is_drained());
    assert_eq!(producer.completion(), completed as u64);
}

fuzz_target!(|data: &[u8]| {
    let Some((&slots, rest)) = data.split_first() else {
        return;
    };
    let slots = u32::from(slots % 16);
    let descriptors: Vec<RawDescriptor> = rest
        .chunks_exact(DESCRIPTOR_BYTES as usize)
        .take(4)
        .map(|chunk| RawDescriptor::from_bytes(chunk.try_into().unwrap()))
        .collect();
    for raw in &descriptors {
        check_decode(raw, slots);
    }
    check_engine(&descriptors, slots);
});
