//! Compute kernels built from the GLSL in `shaders/` (compiled SPIR-V shipped beside each
//! source, embedded here) and their tiled launches.
//!
//! A [`Launch`] of `elements` elements is split into `tiles` contiguous ranges, one dispatch
//! each. A tile's descriptors bind **its own byte range** of every buffer (the shader indexes
//! from 0 up to the tile's `count`, a push constant), rather than the whole buffer with an
//! offset push constant: each tile's accesses are then exactly its range, which is what
//! synchronization validation tracks, so tiles of one region are seen to touch disjoint ranges
//! (no barrier needed between them), and a hazard is reported against the tile that has one.
//! Tile lengths are rounded up to the device's `minStorageBufferOffsetAlignment`, so every
//! tile but the last has the same length.

use std::fmt;
use std::sync::Arc;

use ash::vk;

use crate::{Buffer, Gpu, VulkanError};

/// `shaders/add.spv`: `c[i] = a[i] + b[i]`.
static ADD_SPV: &[u8] = include_bytes!("../shaders/add.spv");
/// `shaders/saxpy.spv`: `y[i] = scalar * x[i] + y[i]`.
static SAXPY_SPV: &[u8] = include_bytes!("../shaders/saxpy.spv");
/// Invocations per workgroup (`local_size_x` of every shader).
const WORKGROUP_SIZE: u32 = 64;

/// The shaders' push constants, in their declared layout.
#[repr(C)]
#[derive(Clone, Copy)]
struct TileConstants {
    count: u32,
    scalar: f32,
}

/// A compute pipeline: the shader, its descriptor set layout (storage buffers at bindings
/// 0..n) and its pipeline layout (the tile's push constants). Cheap to clone.
#[derive(Clone)]
pub struct Kernel {
    shared: Arc<KernelShared>,
}

struct KernelShared {
    gpu: Gpu,
    name: &'static str,
    buffers: u32,
    set_layout: vk::DescriptorSetLayout,
    pipeline_layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
}

impl Kernel {
    /// `c[i] = a[i] + b[i]` over `f32`s; launched with buffers `[a, b, c]`.
    pub fn add(gpu: &Gpu) -> Result<Kernel, VulkanError> {
        Kernel::new(gpu, "add", ADD_SPV, 3)
    }

    /// `y[i] = scalar * x[i] + y[i]` over `f32`s; launched with buffers `[x, y]`.
    pub fn saxpy(gpu: &Gpu) -> Result<Kernel, VulkanError> {
        Kernel::new(gpu, "saxpy", SAXPY_SPV, 2)
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        self.shared.name
    }

    /// A launch over `elements` `f32`s of each of `buffers` (as many as the kernel binds), in
    /// `tiles` dispatches, with `scalar` for kernels that take one.
    pub fn launch(
        &self,
        buffers: &[&Buffer],
        elements: u32,
        tiles: u32,
        scalar: f32,
    ) -> Result<Launch, VulkanError> {
        Launch::new(self, buffers, elements, tiles, scalar)
    }

    fn new(
        gpu: &Gpu,
        name: &'static str,
        spirv: &[u8],
        buffers: u32,
    ) -> Result<Kernel, VulkanError> {
        let code = ash::util::read_spv(&mut std::io::Cursor::new(spirv))
            .map_err(|_| VulkanError::Shader { name })?;
        let device = gpu.device();
        let bindings: Vec<_> = (0..buffers)
            .map(|binding| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(binding)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let set_layout_info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY: the device is alive (`gpu` is a handle); the info lives across the call.
        let set_layout = unsafe { device.create_descriptor_set_layout(&set_layout_info, None) }
            .map_err(VulkanError::vk("vkCreateDescriptorSetLayout"))?;
        // From here on, `partial` destroys what was made if a later step fails.
        let mut partial = KernelShared {
            gpu: gpu.clone(),
            name,
            buffers,
            set_layout,
            pipeline_layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
        };
        let set_layouts = [set_layout];
        let push_constants = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .offset(0)
            .size(size_of::<TileConstants>() as u32)];
        let layout_info = vk::PipelineLayoutCreateInfo::default()
            .set_layouts(&set_layouts)
            .push_constant_ranges(&push_constants);
        // SAFETY: as above; the set layout is live.
        partial.pipeline_layout = unsafe { device.create_pipeline_layout(&layout_info, None) }
            .map_err(VulkanError::vk("vkCreatePipelineLayout"))?;
        let module_info = vk::ShaderModuleCreateInfo::default().code(&code);
        // SAFETY: as above; `code` is whole SPIR-V words (read_spv checked the magic number).
        let module = unsafe { device.create_shader_module(&module_info, None) }
            .map_err(VulkanError::vk("vkCreateShaderModule"))?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let pipeline_info =
            [vk::ComputePipelineCreateInfo::default().stage(stage).layout(partial.pipeline_layout)];
        // SAFETY: as above; the module and layout are live.
        let created = unsafe {
            device.create_compute_pipelines(vk::PipelineCache::null(), &pipeline_info, None)
        };
        // SAFETY: pipeline creation is over; the module is needed by nothing else.
        unsafe { device.destroy_shader_module(module, None) };
        partial.pipeline = created
            .map_err(|(_, result)| VulkanError::Vk { call: "vkCreateComputePipelines", result })?
            [0];
        Ok(Kernel { shared: Arc::new(partial) })
    }
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel").field("name", &self.shared.name).finish_non_exhaustive()
    }
}

impl Drop for KernelShared {
    fn drop(&mut self) {
        let device = self.gpu.device();
        // SAFETY: the last handle is gone: a recorded command buffer holds one (through its
        // launches) until its last submission completed, so nothing uses these objects.
        // Destroying a null handle is a no-op (a partly made kernel).
        unsafe {
            device.destroy_pipeline(self.pipeline, None);
            device.destroy_pipeline_layout(self.pipeline_layout, None);
            device.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

/// One tile: its descriptor set and its push constants.
struct Tile {
    set: vk::DescriptorSet,
    constants: TileConstants,
}

/// A kernel bound to its buffers and split into tiles, ready to record
/// ([`Step::Dispatch`](crate::Step::Dispatch)). Owns its descriptor sets and holds its kernel
/// and buffers.
pub struct Launch {
    kernel: Kernel,
    buffers: Vec<Buffer>,
    pool: vk::DescriptorPool,
    tiles: Vec<Tile>,
}

impl Launch {
    fn new(
        kernel: &Kernel,
        buffers: &[&Buffer],
        elements: u32,
        tiles: u32,
        scalar: f32,
    ) -> Result<Launch, VulkanError> {
        if buffers.len() != kernel.shared.buffers as usize {
            return Err(VulkanError::InvalidLaunch("the number of buffers is not the kernel's"));
        }
        if elements == 0 || tiles == 0 {
            return Err(VulkanError::InvalidLaunch("no elements or no tiles"));
        }
        let bytes = u64::from(elements) * 4;
        if buffers.iter().any(|buffer| buffer.size() < bytes) {
            return Err(VulkanError::InvalidLaunch("a buffer is smaller than the elements"));
        }
        let gpu = &kernel.shared.gpu;
        let alignment = (gpu.limits().min_storage_buffer_offset_alignment / 4).max(1) as u32;
        let tile_length = elements.div_ceil(tiles).next_multiple_of(alignment);
        if u64::from(tile_length) * u64::from(tiles - 1) >= u64::from(elements) {
            return Err(VulkanError::InvalidLaunch("more tiles than the aligned elements fill"));
        }
        if tile_length.div_ceil(WORKGROUP_SIZE) > gpu.limits().max_compute_work_group_count[0] {
            return Err(VulkanError::InvalidLaunch(
                "a tile needs more workgroups than the device has",
            ));
        }
        let device = gpu.device();
        let sizes = [vk::DescriptorPoolSize::default()
            .ty(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(tiles * kernel.shared.buffers)];
        let pool_info = vk::DescriptorPoolCreateInfo::default().max_sets(tiles).pool_sizes(&sizes);
        // SAFETY: the device is alive; the info lives across the call.
        let pool = unsafe { device.create_descriptor_pool(&pool_info, None) }
            .map_err(VulkanError::vk("vkCreateDescriptorPool"))?;
        // From here on, dropping `launch` destroys the pool (and with it the sets).
        let mut launch = Launch {
            kernel: kernel.clone(),
            buffers: buffers.iter().map(|&buffer| buffer.clone()).collect(),
            pool,
            tiles: Vec::with_capacity(tiles as usize),
        };
        let layouts = vec![kernel.shared.set_layout; tiles as usize];
        let allocate_info =
            vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts);
        // SAFETY: the pool has room for `tiles` sets of this layout (sized above).
        let sets = unsafe { device.allocate_descriptor_sets(&allocate_info) }
            .map_err(VulkanError::vk("vkAllocateDescriptorSets"))?;
        for (index, set) in sets.into_iter().enumerate() {
            let first = index as u32 * tile_length;
            let count = tile_length.min(elements - first);
            let infos: Vec<[vk::DescriptorBufferInfo; 1]> = buffers
                .iter()
                .map(|buffer| {
                    [vk::DescriptorBufferInfo::default()
                        .buffer(buffer.raw())
                        .offset(u64::from(first) * 4)
                        .range(u64::from(count) * 4)]
                })
                .collect();
            let writes: Vec<_> = infos
                .iter()
                .enumerate()
                .map(|(binding, info)| {
                    vk::WriteDescriptorSet::default()
                        .dst_set(set)
                        .dst_binding(binding as u32)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(info)
                })
                .collect();
            // SAFETY: the set is fresh and unused; the buffers are live and the ranges inside
            // them (checked above), at offsets aligned to minStorageBufferOffsetAlignment.
            unsafe { device.update_descriptor_sets(&writes, &[]) };
            launch.tiles.push(Tile { set, constants: TileConstants { count, scalar } });
        }
        Ok(launch)
    }

    /// How many dispatches it records.
    pub fn tiles(&self) -> usize {
        self.tiles.len()
    }

    /// The buffers it binds, in binding order.
    pub fn buffers(&self) -> &[Buffer] {
        &self.buffers
    }

    /// Records its dispatches into `command_buffer` (recording).
    pub(crate) fn record(&self, device: &ash::Device, command_buffer: vk::CommandBuffer) {
        let kernel = &self.kernel.shared;
        // SAFETY: `command_buffer` is recording (the caller's contract); the pipeline, layout
        // and sets are live and stay so while the recording can run (the command buffer holds
        // this launch); the push constants match the layout's one range.
        unsafe {
            device.cmd_bind_pipeline(
                command_buffer,
                vk::PipelineBindPoint::COMPUTE,
                kernel.pipeline,
            );
            for tile in &self.tiles {
                device.cmd_bind_descriptor_sets(
                    command_buffer,
                    vk::PipelineBindPoint::COMPUTE,
                    kernel.pipeline_layout,
                    0,
                    &[tile.set],
                    &[],
                );
                let constants =
                    [tile.constants.count.to_ne_bytes(), tile.constants.scalar.to_ne_bytes()]
                        .concat();
                device.cmd_push_constants(
                    command_buffer,
                    kernel.pipeline_layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    &constants,
                );
                device.cmd_dispatch(
                    command_buffer,
                    tile.constants.count.div_ceil(WORKGROUP_SIZE),
                    1,
                    1,
                );
            }
        }
    }
}

impl fmt::Debug for Launch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Launch")
            .field("kernel", &self.kernel.shared.name)
            .field("tiles", &self.tiles.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Launch {
    fn drop(&mut self) {
        // SAFETY: a launch reaches the device only inside a recorded command buffer, which owns
        // it and drops it only after its last submission completed: the sets are unused.
        // Destroying the pool frees its sets.
        unsafe { self.kernel.shared.gpu.device().destroy_descriptor_pool(self.pool, None) };
    }
}
