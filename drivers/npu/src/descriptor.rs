//! Descriptors: the 64-byte commands of the ring, their encoding, and the statuses the device
//! writes back.
//!
//! Descriptors come from memory the device does not control, so decoding is total: every
//! 64-byte pattern decodes to a [`Descriptor`] or to a [`DescriptorError`], never to a panic.
//! The layout is the [crate-level descriptor table](crate#descriptor-layout).

use core::fmt;

/// Bytes in a descriptor.
pub const DESCRIPTOR_BYTES: u32 = 64;
/// 32-bit words in a descriptor.
pub const DESCRIPTOR_WORDS: usize = 16;
/// Argument words an EXEC carries to its kernel.
pub const EXEC_ARGUMENTS: usize = 8;

/// Word indices inside a descriptor.
pub(crate) mod word {
    pub(crate) const HEADER: usize = 0;
    pub(crate) const STATUS: usize = 1;
    pub(crate) const TARGET: usize = 2;
    pub(crate) const TILES: usize = 3;
    pub(crate) const VALUE_LOW: usize = 4;
    pub(crate) const VALUE_HIGH: usize = 5;
    pub(crate) const ARGUMENTS: usize = 8;
}

const OPCODE_MASK: u32 = 0xFF;
const FLAG_CHAINED: u32 = 1 << 8;
const FLAG_INTERRUPT: u32 = 1 << 9;
const RESERVED_HEADER_BITS: u32 = !(OPCODE_MASK | FLAG_CHAINED | FLAG_INTERRUPT);

const OPCODE_EXEC: u32 = 1;
const OPCODE_WAIT: u32 = 2;
const OPCODE_SIGNAL: u32 = 3;
const OPCODE_BARRIER: u32 = 4;

/// What a descriptor asks the device to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Run kernel `kernel` for tiles `0..tiles` with `arguments`.
    Exec {
        /// Index into the device's kernel table.
        kernel: u32,
        /// Tiles to run (0 runs none and completes).
        tiles: u32,
        /// Argument words for the kernel.
        arguments: [u32; EXEC_ARGUMENTS],
    },
    /// Stall the ring until semaphore slot `slot` holds at least `value` (fails if it failed).
    Wait {
        /// Semaphore slot.
        slot: u32,
        /// Value waited for.
        value: u64,
    },
    /// Set semaphore slot `slot` to `value`, above its current value, with release.
    Signal {
        /// Semaphore slot.
        slot: u32,
        /// The new value.
        value: u64,
    },
    /// Complete only after everything before it completed.
    Barrier,
}

/// A decoded descriptor: a command and its flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// The command.
    pub command: Command,
    /// Part of the same operation as the descriptor before it: if that one failed, this one
    /// fails too ([`CompletionError::ChainFailed`]) without running, and a chained SIGNAL marks
    /// its semaphore failed instead of advancing it.
    pub chained: bool,
    /// Raise the completion interrupt when this descriptor completes, even when the host did not
    /// ask for the next one.
    pub interrupt: bool,
}

impl Descriptor {
    /// `command`, unchained, without an interrupt request.
    pub const fn new(command: Command) -> Descriptor {
        Descriptor { command, chained: false, interrupt: false }
    }

    /// This descriptor, chained to the one before it.
    pub const fn chained(self) -> Descriptor {
        Descriptor { chained: true, ..self }
    }

    /// This descriptor, raising the interrupt when it completes.
    pub const fn with_interrupt(self) -> Descriptor {
        Descriptor { interrupt: true, ..self }
    }

    /// The descriptor's words, status [`PENDING`](CompletionStatus::Pending).
    pub fn encode(&self) -> RawDescriptor {
        let mut words = [0; DESCRIPTOR_WORDS];
        let (opcode, target, value) = match self.command {
            Command::Exec { kernel, tiles, arguments } => {
                words[word::TILES] = tiles;
                words[word::ARGUMENTS..].copy_from_slice(&arguments);
                (OPCODE_EXEC, kernel, 0)
            }
            Command::Wait { slot, value } => (OPCODE_WAIT, slot, value),
            Command::Signal { slot, value } => (OPCODE_SIGNAL, slot, value),
            Command::Barrier => (OPCODE_BARRIER, 0, 0),
        };
        let chained = if self.chained { FLAG_CHAINED } else { 0 };
        let interrupt = if self.interrupt { FLAG_INTERRUPT } else { 0 };
        words[word::HEADER] = opcode | chained | interrupt;
        words[word::STATUS] = CompletionStatus::Pending.to_word();
        words[word::TARGET] = target;
        words[word::VALUE_LOW] = value as u32;
        words[word::VALUE_HIGH] = (value >> 32) as u32;
        RawDescriptor(words)
    }
}

/// What the device must know to judge a descriptor by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Slots in the semaphore table.
    pub semaphore_slots: u32,
}

/// A descriptor as it lies in memory: sixteen little-endian 32-bit words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawDescriptor(pub [u32; DESCRIPTOR_WORDS]);

impl RawDescriptor {
    /// The descriptor in `bytes` (little-endian words).
    pub fn from_bytes(bytes: &[u8; DESCRIPTOR_BYTES as usize]) -> RawDescriptor {
        let mut words = [0; DESCRIPTOR_WORDS];
        for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(4)) {
            *word = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        RawDescriptor(words)
    }

    /// Decodes the descriptor, checking what can be checked without the device's state: the
    /// opcode, the reserved header bits and the semaphore slot against `limits`. The status word
    /// and the words a command does not use are ignored.
    pub fn decode(&self, limits: Limits) -> Result<Descriptor, DescriptorError> {
        let words = &self.0;
        let header = words[word::HEADER];
        if header & RESERVED_HEADER_BITS != 0 {
            return Err(DescriptorError::ReservedBits);
        }
        let target = words[word::TARGET];
        let value = u64::from(words[word::VALUE_HIGH]) << 32 | u64::from(words[word::VALUE_LOW]);
        let slot = || {
            if target < limits.semaphore_slots {
                Ok(target)
            } else {
                Err(DescriptorError::SemaphoreOutOfRange)
            }
        };
        let command = match header & OPCODE_MASK {
            OPCODE_EXEC => {
                let mut arguments = [0; EXEC_ARGUMENTS];
                arguments.copy_from_slice(&words[word::ARGUMENTS..]);
                Command::Exec { kernel: target, tiles: words[word::TILES], arguments }
            }
            OPCODE_WAIT => Command::Wait { slot: slot()?, value },
            OPCODE_SIGNAL => Command::Signal { slot: slot()?, value },
            OPCODE_BARRIER => Command::Barrier,
            _ => return Err(DescriptorError::UnknownOpcode),
        };
        Ok(Descriptor {
            command,
            chained: header & FLAG_CHAINED != 0,
            interrupt: header & FLAG_INTERRUPT != 0,
        })
    }

    /// Whether the header asks for an interrupt, read without decoding the rest (a descriptor
    /// that fails to decode still honours it).
    pub fn wants_interrupt(&self) -> bool {
        self.0[word::HEADER] & FLAG_INTERRUPT != 0
    }

    /// Whether the header chains the descriptor to the one before it, read without decoding the
    /// rest.
    pub fn is_chained(&self) -> bool {
        self.0[word::HEADER] & FLAG_CHAINED != 0
    }
}

/// Why a descriptor cannot be run, whatever the device's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DescriptorError {
    /// The opcode is none of EXEC, WAIT, SIGNAL, BARRIER.
    UnknownOpcode,
    /// Header bits reserved for later versions are set.
    ReservedBits,
    /// The semaphore slot is beyond the semaphore table.
    SemaphoreOutOfRange,
}

impl fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DescriptorError::UnknownOpcode => "unknown opcode",
            DescriptorError::ReservedBits => "reserved header bits set",
            DescriptorError::SemaphoreOutOfRange => "semaphore slot out of range",
        })
    }
}

impl core::error::Error for DescriptorError {}

/// Why a descriptor completed without doing its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompletionError {
    /// The descriptor is malformed.
    Malformed(DescriptorError),
    /// The EXEC names a kernel the device does not have.
    UnknownKernel,
    /// The SIGNAL's value is not above the semaphore's current value; the semaphore is failed.
    SignalNotAdvancing,
    /// The semaphore the WAIT waits on failed.
    SemaphoreFailed,
    /// The kernel failed (it panicked, on the software model).
    KernelFailed,
    /// An earlier descriptor of the same chain failed.
    ChainFailed,
}

impl CompletionError {
    const fn code(self) -> u32 {
        match self {
            CompletionError::Malformed(DescriptorError::UnknownOpcode) => 0x101,
            CompletionError::Malformed(DescriptorError::ReservedBits) => 0x102,
            CompletionError::Malformed(DescriptorError::SemaphoreOutOfRange) => 0x103,
            CompletionError::UnknownKernel => 0x104,
            CompletionError::SignalNotAdvancing => 0x105,
            CompletionError::SemaphoreFailed => 0x106,
            CompletionError::KernelFailed => 0x107,
            CompletionError::ChainFailed => 0x108,
        }
    }

    /// The error a completion code names: decodes the code of a
    /// [`Failure::Faulted`](causeway_core::semaphore::Failure::Faulted) this driver reported;
    /// `None` for a code no error has.
    pub const fn from_code(code: u32) -> Option<CompletionError> {
        Some(match code {
            0x101 => CompletionError::Malformed(DescriptorError::UnknownOpcode),
            0x102 => CompletionError::Malformed(DescriptorError::ReservedBits),
            0x103 => CompletionError::Malformed(DescriptorError::SemaphoreOutOfRange),
            0x104 => CompletionError::UnknownKernel,
            0x105 => CompletionError::SignalNotAdvancing,
            0x106 => CompletionError::SemaphoreFailed,
            0x107 => CompletionError::KernelFailed,
            0x108 => CompletionError::ChainFailed,
            _ => return None,
        })
    }

    /// The code a failed semaphore slot records for this error (never 0).
    pub const fn failure_code(self) -> u32 {
        self.code()
    }
}

impl fmt::Display for CompletionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompletionError::Malformed(error) => write!(f, "malformed descriptor: {error}"),
            CompletionError::UnknownKernel => f.write_str("unknown kernel"),
            CompletionError::SignalNotAdvancing => f.write_str("signal does not advance"),
            CompletionError::SemaphoreFailed => f.write_str("the semaphore waited on failed"),
            CompletionError::KernelFailed => f.write_str("the kernel failed"),
            CompletionError::ChainFailed => {
                f.write_str("an earlier descriptor of its chain failed")
            }
        }
    }
}

impl core::error::Error for CompletionError {}

/// A descriptor's status word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompletionStatus {
    /// Published, not completed.
    Pending,
    /// Completed, its work done.
    Completed,
    /// Completed without its work.
    Failed(CompletionError),
}

const STATUS_PENDING: u32 = 0;
const STATUS_COMPLETED: u32 = 1;

impl CompletionStatus {
    /// The status word.
    pub const fn to_word(self) -> u32 {
        match self {
            CompletionStatus::Pending => STATUS_PENDING,
            CompletionStatus::Completed => STATUS_COMPLETED,
            CompletionStatus::Failed(error) => error.code(),
        }
    }

    /// The status a word stands for; `Err` with the word when it stands for none.
    pub const fn from_word(word: u32) -> Result<CompletionStatus, UnknownStatus> {
        match word {
            STATUS_PENDING => Ok(CompletionStatus::Pending),
            STATUS_COMPLETED => Ok(CompletionStatus::Completed),
            code => match CompletionError::from_code(code) {
                Some(error) => Ok(CompletionStatus::Failed(error)),
                None => Err(UnknownStatus(word)),
            },
        }
    }
}

/// A status word no [`CompletionStatus`] stands for (device memory is outside input to the
/// host too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UnknownStatus(pub u32);

impl fmt::Display for UnknownStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown descriptor status {:#x}", self.0)
    }
}

impl core::error::Error for UnknownStatus {}
