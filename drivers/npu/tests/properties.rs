//! Property tests of the plain-data parts: descriptor encoding against decoding, decoding of
//! arbitrary words, status words, and the ring's free-running index arithmetic against a model
//! that counts in 64 bits and never wraps.

use causeway_driver_npu::{
    Command, CompletionStatus, Descriptor, DescriptorError, Limits, RawDescriptor, RingFull,
    RingIndices, EXEC_ARGUMENTS,
};
use proptest::prelude::*;

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        (any::<u32>(), any::<u32>(), any::<[u32; EXEC_ARGUMENTS]>())
            .prop_map(|(kernel, tiles, arguments)| Command::Exec { kernel, tiles, arguments }),
        (0..64u32, any::<u64>()).prop_map(|(slot, value)| Command::Wait { slot, value }),
        (0..64u32, any::<u64>()).prop_map(|(slot, value)| Command::Signal { slot, value }),
        Just(Command::Barrier),
    ]
}

fn descriptor() -> impl Strategy<Value = Descriptor> {
    (command(), any::<bool>(), any::<bool>()).prop_map(|(command, chained, interrupt)| Descriptor {
        command,
        chained,
        interrupt,
    })
}

const LIMITS: Limits = Limits { semaphore_slots: 64 };

proptest! {
    #[test]
    fn encoding_then_decoding_gives_the_descriptor_back(descriptor in descriptor()) {
        let raw = descriptor.encode();
        prop_assert_eq!(raw.decode(LIMITS), Ok(descriptor));
        prop_assert_eq!(CompletionStatus::from_word(raw.0[1]), Ok(CompletionStatus::Pending));
        prop_assert_eq!(raw.wants_interrupt(), descriptor.interrupt);
        prop_assert_eq!(raw.is_chained(), descriptor.chained);
        let mut bytes = [0u8; 64];
        for (chunk, word) in bytes.chunks_exact_mut(4).zip(raw.0) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        prop_assert_eq!(RawDescriptor::from_bytes(&bytes), raw);
    }

    #[test]
    fn a_slot_beyond_the_table_is_refused(slot in any::<u32>(), value in any::<u64>(), slots in 0..128u32) {
        let limits = Limits { semaphore_slots: slots };
        for command in [Command::Wait { slot, value }, Command::Signal { slot, value }] {
            let decoded = Descriptor::new(command).encode().decode(limits);
            if slot < slots {
                prop_assert_eq!(decoded, Ok(Descriptor::new(command)));
            } else {
                prop_assert_eq!(decoded, Err(DescriptorError::SemaphoreOutOfRange));
            }
        }
    }

    #[test]
    fn any_words_decode_to_a_descriptor_that_encodes_to_the_same_meaning(
        mut words in any::<[u32; 16]>(),
        header in prop_oneof![any::<u32>(), (0..6u32, 0..4u32).prop_map(|(op, flags)| op | flags << 8)],
        target in prop_oneof![any::<u32>(), 0..130u32],
        slots in 0..128u32,
    ) {
        words[0] = header;
        words[2] = target;
        let raw = RawDescriptor(words);
        let limits = Limits { semaphore_slots: slots };
        if let Ok(descriptor) = raw.decode(limits) {
            // Unused words are ignored: re-encoding may clear them, but never changes meaning.
            prop_assert_eq!(descriptor.encode().decode(limits), Ok(descriptor));
            prop_assert_eq!(descriptor.encode().0[0], words[0]);
        }
    }

    #[test]
    fn status_words_round_trip(word in any::<u32>()) {
        if let Ok(status) = CompletionStatus::from_word(word) {
            prop_assert_eq!(status.to_word(), word);
        }
    }

    /// Pushes (`true`) and reaps (`false`) from a start index near the wrap, against 64-bit
    /// counters that never wrap.
    #[test]
    fn ring_indices_agree_with_unwrapped_counters(
        order in 0..6u32,
        start in prop_oneof![Just(u32::MAX - 3), Just(u32::MAX), any::<u32>()],
        operations in proptest::collection::vec(any::<bool>(), 0..300),
        bogus_head in any::<u32>(),
    ) {
        let capacity = 1u64 << order;
        let mut indices = RingIndices::new(order, start);
        let (mut tail, mut reaped) = (u64::from(start), u64::from(start));
        for push in operations {
            if push {
                let result = indices.push();
                if tail - reaped == capacity {
                    prop_assert_eq!(result, Err(RingFull));
                } else {
                    prop_assert_eq!(result, Ok(tail as u32));
                    tail += 1;
                }
            } else {
                let result = indices.reap();
                if tail == reaped {
                    prop_assert_eq!(result, None);
                } else {
                    prop_assert_eq!(result, Some(reaped as u32));
                    reaped += 1;
                }
            }
            prop_assert_eq!(u64::from(indices.in_flight()), tail - reaped);
            prop_assert_eq!(u64::from(indices.free()), capacity - (tail - reaped));
            prop_assert_eq!(indices.tail(), tail as u32);
            prop_assert_eq!(indices.reaped(), reaped as u32);
            // A head anywhere from the reaped index to the tail is believed; beyond it, never.
            for ahead in 0..=(tail - reaped) {
                prop_assert_eq!(u64::from(indices.reapable((reaped + ahead) as u32)), ahead);
            }
            prop_assert!(u64::from(indices.reapable(bogus_head)) <= tail - reaped);
        }
    }
}
