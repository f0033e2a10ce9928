//! Device memory for `compute` and `copy` work, and the launch shapes of the compute kernels.
//!
//! A [`DeviceBuffer`] is one `cuMemAlloc` allocation. It retains the device's primary context
//! for as long as it lives, so that a buffer read back after the backend is gone (a result
//! checked after the run) still has a context to copy in; the allocation is freed and the
//! context released when the last handle drops.
//!
//! [`Launch`] is the plain-data part: which kernel of `compute.ptx` a region runs, its grid,
//! and its parameters in the order the kernel declares them — tested on every machine.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys;

use crate::error::{check, CudaError};

/// The PTX of the `compute` kernels (source: `kernels/compute.ll`, turned into PTX by LLVM's
/// NVPTX backend; the `kernels` test checks the two agree).
pub const COMPUTE_PTX: &str = include_str!("../kernels/compute.ptx");

/// Threads per block of a compute launch; each kernel strides over the whole grid, so any
/// grid size covers every element.
pub const THREADS_PER_BLOCK: u32 = 256;

/// A compute kernel of [`COMPUTE_PTX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ComputeKernel {
    /// `out[i] = x[i] + y[i]`.
    Add,
    /// `out[i] = out[i] + a * x[i]`.
    Saxpy,
}

impl ComputeKernel {
    /// Its entry point in [`COMPUTE_PTX`].
    pub fn entry(self) -> &'static str {
        match self {
            ComputeKernel::Add => "causeway_add",
            ComputeKernel::Saxpy => "causeway_saxpy",
        }
    }
}

/// One kernel launch of a recorded compute region: plain data.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Launch {
    /// The kernel.
    pub kernel: ComputeKernel,
    /// Blocks in the grid (the work's `tiles`).
    pub blocks: u32,
    /// Its scalar: `a` of saxpy (unused by add).
    pub scale: f32,
    /// The buffers the kernel names, in its parameter order: `x, y, out` for add, `x, out`
    /// for saxpy (the last address unused).
    pub buffers: [sys::CUdeviceptr; 3],
    /// Elements.
    pub elements: u32,
}

/// A launch's parameter values, each in the type and order the kernel declares.
#[derive(Debug)]
pub struct Parameters {
    scale: f32,
    buffers: [sys::CUdeviceptr; 3],
    elements: u32,
}

impl Launch {
    /// The parameter values of this launch.
    pub fn parameters(&self) -> Parameters {
        Parameters { scale: self.scale, buffers: self.buffers, elements: self.elements }
    }
}

impl Parameters {
    /// Pointers to each value in the kernel's parameter order, for `cuLaunchKernel` (which
    /// copies the values at the call): add takes `(x, y, out, n)`, saxpy `(a, x, out, n)`.
    pub fn pointers(&mut self, kernel: ComputeKernel) -> Vec<*mut c_void> {
        let [first, second, third] = &mut self.buffers;
        let buffer = |address: &mut sys::CUdeviceptr| std::ptr::from_mut(address).cast();
        let elements = std::ptr::from_mut(&mut self.elements).cast();
        match kernel {
            ComputeKernel::Add => vec![buffer(first), buffer(second), buffer(third), elements],
            ComputeKernel::Saxpy => vec![
                std::ptr::from_mut(&mut self.scale).cast(),
                buffer(first),
                buffer(second),
                elements,
            ],
        }
    }
}

/// One device allocation; see the [module docs](self).
#[derive(Debug)]
struct Allocation {
    device: sys::CUdevice,
    context: sys::CUcontext,
    address: sys::CUdeviceptr,
    bytes: usize,
}

// SAFETY: the handles name driver objects, not thread-local state; every call through them
// first makes the retained context current on the calling thread.
unsafe impl Send for Allocation {}
// SAFETY: as for `Send`: only passed to the thread-safe driver API.
unsafe impl Sync for Allocation {}

impl Drop for Allocation {
    fn drop(&mut self) {
        // SAFETY: the allocation and the context retain were made in `DeviceBuffer::upload`
        // and are undone once, here. Results are ignored: nothing more can be done.
        unsafe {
            if sys::cuCtxSetCurrent(self.context) == sys::CUresult::CUDA_SUCCESS {
                let _ = sys::cuMemFree_v2(self.address);
            }
            let _ = sys::cuDevicePrimaryCtxRelease_v2(self.device);
        }
    }
}

/// A buffer in device memory (see the [module docs](self)); clones share it.
#[derive(Clone, Debug)]
pub struct DeviceBuffer(Arc<Allocation>);

/// Stream-ordered blocks of CUDA queues are backed by device buffers.
impl causeway_device::NativeMemory for DeviceBuffer {
    fn size(&self) -> u64 {
        self.0.bytes as u64
    }
}

impl DeviceBuffer {
    /// Allocates `bytes` bytes on `device` (its primary context retained for the buffer's
    /// life), uninitialised. Only called once the driver library is known present (by
    /// [`CudaBackend::open`](crate::CudaBackend::open)).
    pub(crate) fn allocate(device: sys::CUdevice, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        let mut context: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the library is present (the caller's backend opened); the out-pointer is a
        // live local.
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut context, device)
        })?;
        let mut allocation = Allocation { device, context, address: 0, bytes };
        // SAFETY: the context was just retained; the out-pointer is a field of a live local.
        // On failure `allocation` drops, releasing the retain (and freeing address 0, which
        // cuMemFree accepts as nothing).
        unsafe {
            check("cuCtxSetCurrent", sys::cuCtxSetCurrent(context))?;
            check("cuMemAlloc", sys::cuMemAlloc_v2(&mut allocation.address, bytes.max(1)))?;
        }
        Ok(DeviceBuffer(Arc::new(allocation)))
    }

    /// [`allocate`](Self::allocate)s `bytes.len()` bytes and copies `bytes` in.
    pub(crate) fn upload(device: sys::CUdevice, bytes: &[u8]) -> Result<DeviceBuffer, CudaError> {
        let buffer = DeviceBuffer::allocate(device, bytes.len())?;
        // SAFETY: `allocate` made the buffer's context current on this thread; the
        // destination holds `bytes.len()` bytes, the source is a live slice of as many.
        check("cuMemcpyHtoD", unsafe {
            sys::cuMemcpyHtoD_v2(buffer.address(), bytes.as_ptr().cast(), bytes.len())
        })?;
        Ok(buffer)
    }

    /// Its device address.
    pub fn address(&self) -> sys::CUdeviceptr {
        self.0.address
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.0.bytes
    }

    /// Whether it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.0.bytes == 0
    }

    /// Copies its first `count` 32-bit words to the host (synchronously: after the work that
    /// wrote it completed).
    pub fn read_words(&self, count: usize) -> Result<Vec<u32>, CudaError> {
        let count = count.min(self.0.bytes / 4);
        let mut words = vec![0u32; count];
        // SAFETY: the context is retained by this buffer; the destination holds `count`
        // words, no more than the allocation's size.
        unsafe {
            check("cuCtxSetCurrent", sys::cuCtxSetCurrent(self.0.context))?;
            check(
                "cuMemcpyDtoH",
                sys::cuMemcpyDtoH_v2(words.as_mut_ptr().cast(), self.0.address, count * 4),
            )?;
        }
        Ok(words)
    }
}

/// The launches of `regions` regions of `kernel` over `elements` floats in `tiles` blocks:
/// add reads `x` and `y` and writes `out`; saxpy adds `scale * x` into `out` per region.
pub fn compute_launches(
    kernel: ComputeKernel,
    buffers: (sys::CUdeviceptr, sys::CUdeviceptr, sys::CUdeviceptr),
    elements: u32,
    tiles: u32,
    regions: u32,
    scale: f32,
) -> Vec<Launch> {
    let (x, y, out) = buffers;
    let buffers = match kernel {
        ComputeKernel::Add => [x, y, out],
        ComputeKernel::Saxpy => [x, out, 0],
    };
    let launch = Launch { kernel, blocks: tiles.max(1), scale, buffers, elements };
    vec![launch; regions as usize]
}
