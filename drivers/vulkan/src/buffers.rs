//! [`Buffer`]: a storage buffer in host-visible, host-coherent memory, mapped for its whole life
//! so the host uploads and reads back without staging (lavapipe's memory is all host-visible).

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use ash::vk;

use crate::{Gpu, VulkanError};

/// A device storage buffer, also a copy source and destination. Cheap to clone (a shared
/// handle): a recorded command buffer holds a clone of every buffer it uses, so none is
/// destroyed while the device may use it.
///
/// The host must not read or write a range the device is accessing: read back after the
/// submission that wrote it has completed (its timeline reached), and upload before submitting
/// the work that reads it.
#[derive(Clone)]
pub struct Buffer {
    shared: Arc<BufferShared>,
}

struct BufferShared {
    gpu: Gpu,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
    mapped: NonNull<u8>,
}

// SAFETY: `mapped` points at the buffer's persistently mapped memory, valid until drop; the
// handle only copies bytes in and out through it (the device-versus-host ordering is the
// caller's, documented on `Buffer`), so sharing it between threads is as sound as sharing the
// Vulkan handles, which are thread-safe.
unsafe impl Send for BufferShared {}
// SAFETY: as for `Send`.
unsafe impl Sync for BufferShared {}

impl Buffer {
    /// A buffer of `size` bytes (more than 0), zeroed.
    pub fn new(gpu: &Gpu, size: u64) -> Result<Buffer, VulkanError> {
        if size == 0 {
            return Err(VulkanError::InvalidLaunch("a buffer of 0 bytes"));
        }
        let device = gpu.device();
        let buffer = create_storage_buffer(gpu, size)?;
        match allocate_and_map(gpu, buffer) {
            Ok((memory, mapped)) => {
                // SAFETY: `mapped` maps all `size` bytes of memory just allocated for it.
                unsafe { mapped.as_ptr().write_bytes(0, size as usize) };
                Ok(Buffer {
                    shared: Arc::new(BufferShared {
                        gpu: gpu.clone(),
                        buffer,
                        memory,
                        size,
                        mapped,
                    }),
                })
            }
            Err(error) => {
                // SAFETY: the buffer was never bound nor used.
                unsafe { device.destroy_buffer(buffer, None) };
                Err(error)
            }
        }
    }

    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        self.shared.size
    }

    /// The native buffer.
    pub fn raw(&self) -> vk::Buffer {
        self.shared.buffer
    }

    /// Copies `bytes` into the buffer at byte `offset`.
    pub fn write(&self, offset: u64, bytes: &[u8]) -> Result<(), VulkanError> {
        self.check(offset, bytes.len())?;
        // SAFETY: the range is inside the mapped buffer (checked) and `bytes` is a separate
        // Rust allocation, so the regions do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.shared.mapped.as_ptr().add(offset as usize),
                bytes.len(),
            )
        };
        Ok(())
    }

    /// Copies the buffer's bytes from byte `offset` into `out`.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), VulkanError> {
        self.check(offset, out.len())?;
        // SAFETY: as in `write`, the other way round.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.shared.mapped.as_ptr().add(offset as usize),
                out.as_mut_ptr(),
                out.len(),
            )
        };
        Ok(())
    }

    /// Writes `values` as native-endian `f32`s from element `first` on.
    pub fn write_f32(&self, first: usize, values: &[f32]) -> Result<(), VulkanError> {
        let bytes: Vec<u8> = values.iter().flat_map(|value| value.to_ne_bytes()).collect();
        self.write(first as u64 * 4, &bytes)
    }

    /// Reads `count` native-endian `f32`s from element `first` on.
    pub fn read_f32(&self, first: usize, count: usize) -> Result<Vec<f32>, VulkanError> {
        let mut bytes = vec![0; count * 4];
        self.read(first as u64 * 4, &mut bytes)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|word| f32::from_ne_bytes([word[0], word[1], word[2], word[3]]))
            .collect())
    }

    fn check(&self, offset: u64, len: usize) -> Result<(), VulkanError> {
        let len = len as u64;
        let size = self.shared.size;
        match offset.checked_add(len) {
            Some(end) if end <= size => Ok(()),
            _ => Err(VulkanError::OutOfBounds { offset, len, size }),
        }
    }
}

/// Allocates host-visible, host-coherent memory for `buffer`, binds and maps it.
fn allocate_and_map(
    gpu: &Gpu,
    buffer: vk::Buffer,
) -> Result<(vk::DeviceMemory, NonNull<u8>), VulkanError> {
    let device = gpu.device();
    // SAFETY: `buffer` is a live buffer of this device.
    let requirements = unsafe { device.get_buffer_memory_requirements(buffer) };
    let type_bits = requirements.memory_type_bits;
    let memory_type = gpu
        .memory_type(
            type_bits,
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
        )
        .ok_or(VulkanError::NoHostVisibleMemory { type_bits })?;
    let info = vk::MemoryAllocateInfo::default()
        .allocation_size(requirements.size)
        .memory_type_index(memory_type);
    // SAFETY: `info` names a memory type of this device and lives across the call.
    let memory = unsafe { device.allocate_memory(&info, None) }
        .map_err(VulkanError::vk("vkAllocateMemory"))?;
    let bound_and_mapped = (|| {
        // SAFETY: fresh memory of a type the buffer allows, large enough, at offset 0.
        unsafe { device.bind_buffer_memory(buffer, memory, 0) }
            .map_err(VulkanError::vk("vkBindBufferMemory"))?;
        // SAFETY: host-visible memory, not mapped yet, mapped whole.
        let mapped =
            unsafe { device.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                .map_err(VulkanError::vk("vkMapMemory"))?;
        NonNull::new(mapped.cast::<u8>()).ok_or(VulkanError::Vk {
            call: "vkMapMemory",
            result: vk::Result::ERROR_MEMORY_MAP_FAILED,
        })
    })();
    bound_and_mapped.map(|mapped| (memory, mapped)).inspect_err(|_| {
        // SAFETY: the memory is not in use (its buffer was never used); freeing it unmaps it.
        unsafe { device.free_memory(memory, None) };
    })
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("buffer", &self.shared.buffer)
            .field("size", &self.shared.size)
            .finish_non_exhaustive()
    }
}

impl Drop for BufferShared {
    fn drop(&mut self) {
        let device = self.gpu.device();
        // SAFETY: the last handle is gone; the device reaches a buffer only through a recorded
        // command buffer, which holds a handle and waits for its last submission before
        // dropping it, so nothing uses the buffer. Freeing the memory unmaps it.
        unsafe {
            device.destroy_buffer(self.buffer, None);
            device.free_memory(self.memory, None);
        }
    }
}

/// An unbound buffer of `size` bytes usable as storage and as a copy source and destination:
/// what both host-visible buffers and the device memory behind allocas are.
pub(crate) fn create_storage_buffer(gpu: &Gpu, size: u64) -> Result<vk::Buffer, VulkanError> {
    let info = vk::BufferCreateInfo::default()
        .size(size)
        .usage(
            vk::BufferUsageFlags::STORAGE_BUFFER
                | vk::BufferUsageFlags::TRANSFER_SRC
                | vk::BufferUsageFlags::TRANSFER_DST,
        )
        .sharing_mode(vk::SharingMode::EXCLUSIVE);
    // SAFETY: the device is alive (`gpu` is a handle to it); `info` lives across the call.
    unsafe { gpu.device().create_buffer(&info, None) }.map_err(VulkanError::vk("vkCreateBuffer"))
}
