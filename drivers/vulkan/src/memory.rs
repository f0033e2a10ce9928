//! [`DeviceBlock`]: the native memory behind one stream-ordered allocation — a storage buffer
//! bound to `VkDeviceMemory` of its own, device-local where the device has such memory.
//!
//! The backend makes one when an alloca runs on a block it does not keep, keeps it across a
//! dealloca while the device layer may reuse the block, and drops it when the layer lets the
//! block go (`causeway_device::MemoryOp`). No recorded command buffer refers to these buffers
//! (an operation's work names no stream-ordered buffer), so freeing one never races the
//! device.

use std::fmt;

use ash::vk;

use crate::buffers::create_storage_buffer;
use crate::{Gpu, VulkanError};

/// A buffer bound to memory allocated for it alone.
pub(crate) struct DeviceBlock {
    gpu: Gpu,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    /// Bytes of the buffer (what the alloca asked for, at least 1).
    size: u64,
}

impl causeway_device::NativeMemory for DeviceBlock {
    fn size(&self) -> u64 {
        DeviceBlock::size(self)
    }
}

impl DeviceBlock {
    /// Allocates and binds `bytes` bytes (a 0-byte alloca gets 1: Vulkan has no empty
    /// buffers). A request larger than the memory heap it would come from is refused as
    /// [`VulkanError::OutOfDeviceMemory`] without asking Vulkan (`vkAllocateMemory` forbids
    /// such a size, VUID-vkAllocateMemory-pAllocateInfo-01713); Vulkan's own refusals come back
    /// as [`VulkanError::Vk`] with `VK_ERROR_OUT_OF_DEVICE_MEMORY` or
    /// `VK_ERROR_OUT_OF_HOST_MEMORY`.
    pub(crate) fn new(gpu: &Gpu, bytes: u64) -> Result<DeviceBlock, VulkanError> {
        let size = bytes.max(1);
        let heap = gpu.largest_heap();
        if size > heap {
            return Err(VulkanError::OutOfDeviceMemory { bytes: size, heap });
        }
        let device = gpu.device();
        let buffer = create_storage_buffer(gpu, size)?;
        match allocate_and_bind(gpu, buffer) {
            Ok(memory) => {
                gpu.count_memory_block(true);
                Ok(DeviceBlock { gpu: gpu.clone(), buffer, memory, size })
            }
            Err(error) => {
                // SAFETY: the buffer was never bound nor used.
                unsafe { device.destroy_buffer(buffer, None) };
                Err(error)
            }
        }
    }

    /// Its size in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }
}

/// Allocates memory for `buffer` — device-local if a type allows it, else any type the buffer
/// allows — and binds it.
fn allocate_and_bind(gpu: &Gpu, buffer: vk::Buffer) -> Result<vk::DeviceMemory, VulkanError> {
    let device = gpu.device();
    // SAFETY: `buffer` is a live buffer of this device.
    let requirements = unsafe { device.get_buffer_memory_requirements(buffer) };
    let type_bits = requirements.memory_type_bits;
    let memory_type = gpu
        .memory_type(type_bits, vk::MemoryPropertyFlags::DEVICE_LOCAL)
        .or_else(|| gpu.memory_type(type_bits, vk::MemoryPropertyFlags::empty()))
        .ok_or(VulkanError::OutOfDeviceMemory { bytes: requirements.size, heap: 0 })?;
    let heap = gpu.heap_of(memory_type);
    if requirements.size > heap {
        return Err(VulkanError::OutOfDeviceMemory { bytes: requirements.size, heap });
    }
    let info = vk::MemoryAllocateInfo::default()
        .allocation_size(requirements.size)
        .memory_type_index(memory_type);
    let memory = match injected_allocation_fault(gpu) {
        Some(injected) => Err(injected),
        // SAFETY: `info` names a memory type of this device, with a size within its heap
        // (checked above), and lives across the call.
        None => unsafe { device.allocate_memory(&info, None) },
    }
    .map_err(VulkanError::vk("vkAllocateMemory"))?;
    // SAFETY: fresh memory of a type the buffer allows, large enough, bound at offset 0.
    if let Err(result) = unsafe { device.bind_buffer_memory(buffer, memory, 0) } {
        // SAFETY: the memory is bound to nothing and used by nothing.
        unsafe { device.free_memory(memory, None) };
        return Err(VulkanError::Vk { call: "vkBindBufferMemory", result });
    }
    Ok(memory)
}

impl fmt::Debug for DeviceBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBlock")
            .field("buffer", &self.buffer)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl Drop for DeviceBlock {
    fn drop(&mut self) {
        let device = self.gpu.device();
        // SAFETY: no command buffer refers to the buffer (module documentation), and the
        // backend drops a block only once the layer let it go, so nothing uses either handle.
        unsafe {
            device.destroy_buffer(self.buffer, None);
            device.free_memory(self.memory, None);
        }
        self.gpu.count_memory_block(false);
    }
}

/// The error a test made this allocation return instead of reaching Vulkan
/// ([`Gpu::inject_fault`]).
#[cfg(feature = "fault-injection")]
fn injected_allocation_fault(gpu: &Gpu) -> Option<vk::Result> {
    gpu.injected_fault(crate::FaultPoint::AllocateMemory)
}

/// Without the `fault-injection` feature every allocation reaches Vulkan.
#[cfg(not(feature = "fault-injection"))]
fn injected_allocation_fault(_: &Gpu) -> Option<vk::Result> {
    None
}
