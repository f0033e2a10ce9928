//! wgpu and causeway on one `VkDevice`: wgpu's Vulkan device, opened through wgpu-hal with the
//! features causeway needs, lent to causeway's Vulkan driver (`Gpu::from_raw_handles`), then
//! wgpu's compute work and a causeway CPU → Vulkan → CPU chain run side by side on its one queue.
//!
//! ```text
//! CAUSEWAY_VULKAN_ADAPTER=llvmpipe CAUSEWAY_VULKAN_VALIDATION=1 \
//!     cargo run -p causeway-driver-vulkan --example wgpu_interop
//! ```
//!
//! 1. A wgpu instance restricted to Vulkan (with `InstanceFlags::VALIDATION | DEBUG` when
//!    `CAUSEWAY_VULKAN_VALIDATION` is on: the Khronos layer and wgpu-hal's debug messenger;
//!    synchronization validation is asked of the layer through `VK_LAYER_ENABLES`), and the
//!    adapter whose name contains `CAUSEWAY_VULKAN_ADAPTER` (case-insensitive; unset: the first).
//! 2. The device, created from wgpu-hal's own extension list and feature chain
//!    (`required_device_extensions`, `physical_device_features`) plus what causeway needs that
//!    wgpu does not ask for (`synchronization2`; wgpu-hal already enables `timelineSemaphore` on a
//!    1.2 device), handed to wgpu-hal (`device_from_raw`, which owns it from then on) and to wgpu
//!    (`Adapter::create_device_from_hal`).
//! 3. The raw instance, physical device, device, queue family and queue taken back from wgpu-hal
//!    (`Device::as_hal`) and lent to causeway (`Gpu::from_raw_handles`): both use ash 0.38, so
//!    the handles pass as they are.
//! 4. A causeway device with a CPU driver and a `VulkanBackend` on that `Gpu` runs upload (CPU)
//!    → add kernel (Vulkan) → check (CPU), its last wait on the upload elided across drivers,
//!    while wgpu submits compute passes (a WGSL kernel, handed over as naga IR, then a copy to a
//!    readback buffer) to the same `VkQueue` — always inside `gpu.with_queue`, so causeway's lock
//!    serialises the two (Vulkan requires host access to a queue to be externally synchronized;
//!    lavapipe has one).
//! 5. Both results are checked, everything is dropped in the order below, and the validation
//!    layer's messages (logged by wgpu-hal's messenger, gathered here through `log`) are counted.
//!
//! Prints a summary ending in `wgpu and causeway agree on one VkDevice`; exits non-zero on a wrong
//! value, an error, or any validation-layer message (wgpu's other warnings are listed, not
//! failures).
//!
//! # Who destroys what
//!
//! wgpu owns the instance and the device: wgpu-hal destroys the `VkDevice` when the last wgpu
//! object of the device goes, and the `VkInstance` when the last one of the instance goes.
//! Causeway only borrows them, so everything of causeway's — the causeway `Device` (shut down),
//! the `VulkanBackend` inside it, buffers, kernels, command buffers and every clone of the `Gpu` —
//! is dropped first; the last `Gpu` handle waits for the lent queue to be idle and destroys
//! nothing of wgpu's. Only then are wgpu's buffers, pipelines, queue, device, adapter and
//! instance dropped. While the `Gpu` lives, wgpu touches the queue (`Queue::submit`, the one call
//! of wgpu that reaches `vkQueueSubmit`) only inside `gpu.with_queue`; mapping, polling and
//! `Queue::write_buffer` (which only stages until the next submit) wait on wgpu's own fence,
//! not on the queue, and may run anywhere.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ash::vk;
use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{Device, Op, QueueConfig, WaitOutcome, Work};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_vulkan::{Buffer, Gpu, GpuHandles, GpuOptions, Kernel, Step, VulkanBackend};
use causeway_runtime::blocking::wait;
use causeway_runtime::PoolConfig;
use wgpu::hal::api::Vulkan;

/// Elements of causeway's add and of wgpu's kernel.
const ELEMENTS: usize = 4096;
const BYTES: u64 = ELEMENTS as u64 * 4;
/// wgpu submissions made while causeway's chain runs.
const WGPU_ROUNDS: u32 = 4;
/// Every host wait's bound: lavapipe shares the machine's cores with other work.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// wgpu's kernel: each round maps `v` to `2v + 1`. Parsed by naga (`wgpu::naga`, which wgpu-core
/// builds with its WGSL front end regardless).
const WGSL: &str = "
@group(0) @binding(0) var<storage, read_write> values: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&values)) {
        values[id.x] = values[id.x] * 2.0 + 1.0;
    }
}
";

/// The warnings and errors logged while the example runs: the validation layer's messages
/// (wgpu-hal's debug messenger logs each at the layer's severity, from
/// `wgpu_hal::vulkan::instance`, as `VALIDATION [VUID-… (0x…)]` and the like, its queue, command
/// buffer and object labels on lines of their own that start with a tab) and any other warning
/// of wgpu's (on lavapipe: instance extensions it asks for and cannot have, such as
/// `VK_EXT_physical_device_drm`), which the summary counts without failing.
struct Messages {
    validation: Mutex<Vec<String>>,
    other: Mutex<Vec<String>>,
}

/// Whether a record of `wgpu_hal::vulkan::instance` comes from its debug messenger: the message
/// types (`GENERAL`, `VALIDATION`, `PERFORMANCE` …, `|`-joined) before ` [`, or a label line.
fn from_messenger(text: &str) -> bool {
    text.starts_with('\t')
        || text.split_once(" [").is_some_and(|(types, _)| {
            !types.is_empty() && types.chars().all(|c| c.is_ascii_uppercase() || "_| ".contains(c))
        })
}

static MESSAGES: Messages =
    Messages { validation: Mutex::new(Vec::new()), other: Mutex::new(Vec::new()) };

impl log::Log for Messages {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let message = record.args().to_string();
        if record.target() == "wgpu_hal::vulkan::instance" && from_messenger(&message) {
            let mut validation =
                self.validation.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            // A label line belongs to the message before it: one message, one entry.
            match validation.last_mut() {
                Some(last) if message.starts_with('\t') => {
                    last.push('\n');
                    last.push_str(&message);
                }
                _ => validation.push(format!("{}: {message}", record.level())),
            }
            return;
        }
        let text = format!("{} {}: {message}", record.level(), record.target());
        self.other.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(text);
    }

    fn flush(&self) {}
}

impl Messages {
    fn take(list: &Mutex<Vec<String>>) -> Vec<String> {
        std::mem::take(&mut *list.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(summary) => {
            print!("{summary}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("wgpu_interop: error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The wgpu half: its device and queue, and the buffers and pipeline of its compute rounds.
struct WgpuWork {
    device: wgpu::Device,
    queue: wgpu::Queue,
    values: wgpu::Buffer,
    readback: wgpu::Buffer,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
}

fn run() -> Result<String, String> {
    let options = GpuOptions::from_env().map_err(|error| error.to_string())?;
    log::set_logger(&MESSAGES).map_err(|error| error.to_string())?;
    // wgpu-hal asks the layer for warnings and errors only when `log` would keep them.
    log::set_max_level(log::LevelFilter::Warn);
    if options.validation && std::env::var_os("VK_LAYER_ENABLES").is_none() {
        // Causeway's own validated devices turn on synchronization validation too; here the
        // layer takes it from the environment, which it reads when the instance is created.
        // No other thread runs yet to read the environment meanwhile.
        std::env::set_var(
            "VK_LAYER_ENABLES",
            "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT",
        );
    }
    // `VALIDATION` loads the layer; `DEBUG` enables `VK_EXT_debug_utils`, without which wgpu-hal
    // creates no messenger and the layer's messages would only reach stdout, uncounted.
    let flags = if options.validation {
        wgpu::InstanceFlags::VALIDATION | wgpu::InstanceFlags::DEBUG
    } else {
        wgpu::InstanceFlags::empty()
    };
    let instance = wgpu::Instance::new(&wgpu::InstanceDescriptor {
        backends: wgpu::Backends::VULKAN,
        flags,
        ..Default::default()
    });
    let adapters = instance.enumerate_adapters(wgpu::Backends::VULKAN);
    let wanted = options.adapter.as_deref().map(str::to_lowercase);
    let adapter = adapters
        .into_iter()
        .find(|adapter| {
            wanted
                .as_ref()
                .is_none_or(|wanted| adapter.get_info().name.to_lowercase().contains(wanted))
        })
        .ok_or_else(|| {
            format!(
                "wgpu sees no Vulkan adapter named like {:?}",
                options.adapter.as_deref().unwrap_or("")
            )
        })?;
    let adapter_name = adapter.get_info().name;

    // SAFETY: the hal adapter is used only inside the callback, as `as_hal` requires; `open`'s
    // own contract is discussed there.
    let opened = unsafe { adapter.as_hal::<Vulkan, _, _>(|hal| hal.map(open)) }
        .ok_or("the wgpu adapter is not a Vulkan one")??;
    let (opened, family) = opened;
    // SAFETY: `opened` came from this adapter's hal adapter, created as `device_from_raw`
    // requires (see `open`); wgpu owns it from here on.
    let (device, queue) = unsafe {
        adapter.create_device_from_hal(
            opened,
            &wgpu::DeviceDescriptor { label: Some("wgpu_interop"), ..Default::default() },
        )
    }
    .map_err(|error| format!("wgpu refused the device: {error}"))?;

    // SAFETY: the hal device is used only inside the callback; the handles cloned out of it are
    // ash tables of wgpu's instance and device, which outlive causeway's use (see below).
    let handles = unsafe {
        device.as_hal::<Vulkan, _, _>(|hal| {
            hal.map(|hal| GpuHandles {
                entry: hal.shared_instance().entry().clone(),
                instance: hal.shared_instance().raw_instance().clone(),
                physical_device: hal.raw_physical_device(),
                device: hal.raw_device().clone(),
                queue_family: hal.queue_family_index(),
                queues: vec![hal.raw_queue()],
            })
        })
    }
    .ok_or("the wgpu device is not a Vulkan one")?;
    if handles.queue_family != family {
        return Err(format!("wgpu-hal uses family {}, not {family}", handles.queue_family));
    }
    let raw_device = handles.device.handle();
    // Made before the `Gpu`, so that it is also dropped after it when an error returns early.
    let wgpu = WgpuWork::new(device, queue)?;

    // SAFETY: the handles are wgpu-hal's, taken together from one device: its instance (with the
    // entry that loaded it), the physical device it was created on, and the queue it got from
    // family `queue_family`; `open` created the device with `timelineSemaphore` (wgpu-hal's
    // chain) and `synchronization2` (ours) enabled. wgpu keeps the instance and device alive
    // until `wgpu`, `adapter` and `instance` are dropped, which happens after `gpu` and
    // everything made from it (the order at the end of this function; declared before `gpu`, they
    // are also dropped after it on an early return), and wgpu submits to the queue only inside
    // `with_queue`.
    let gpu = unsafe { Gpu::from_raw_handles(handles) }
        .map_err(|error| format!("causeway refused wgpu's device: {error}"))?;

    let (causeway, wgpu_rounds) = run_both(&gpu, &wgpu)?;

    // The lifetime rule: causeway's objects (all dropped inside `run_both`) and the last `Gpu`
    // handle go first — the drop waits for the lent queue to be idle — then wgpu's.
    drop(gpu);
    let wgpu_wrong = wgpu.check(wgpu_rounds)?;
    drop(wgpu);
    drop(adapter);
    drop(instance);

    let validation = Messages::take(&MESSAGES.validation);
    let other = Messages::take(&MESSAGES.other);
    let mut summary = String::new();
    let line = |summary: &mut String, text: String| {
        let _ = writeln!(summary, "{text}");
    };
    line(&mut summary, format!("adapter: {adapter_name} (Vulkan through wgpu 25)"));
    line(
        &mut summary,
        format!(
            "one VkDevice {:#x}, queue family {family}, one queue shared",
            vk::Handle::as_raw(raw_device)
        ),
    );
    line(&mut summary, causeway);
    line(
        &mut summary,
        format!(
            "wgpu: {WGPU_ROUNDS} compute rounds on {ELEMENTS} values beside causeway's, {} wrong",
            wgpu_wrong
        ),
    );
    line(
        &mut summary,
        if options.validation {
            format!(
                "validation layer (synchronization validation on): {} messages",
                validation.len()
            )
        } else {
            "validation layer: off (CAUSEWAY_VULKAN_VALIDATION unset)".to_owned()
        },
    );
    if !other.is_empty() {
        line(&mut summary, format!("wgpu's other warnings ({}), not failures:", other.len()));
        for warning in &other {
            line(&mut summary, format!("  {warning}"));
        }
    }
    let mut failures = Vec::new();
    // wgpu only warns when it cannot have the layer or the messenger's extension; here either
    // would leave the validation unheard.
    let unheard = |warning: &&String| {
        warning.contains("unable to find layer") || warning.contains("VK_EXT_debug_utils")
    };
    if options.validation {
        if let Some(warning) = other.iter().find(unheard) {
            failures.push(format!(
                "validation was asked for but cannot be heard ({warning}); install \
                 vulkan-validationlayers"
            ));
        }
    }
    if wgpu_wrong != 0 {
        failures.push(format!("{wgpu_wrong} of wgpu's values wrong"));
    }
    if !validation.is_empty() {
        failures.push(format!(
            "{} validation messages:\n{}",
            validation.len(),
            validation.join("\n")
        ));
    }
    if !failures.is_empty() {
        print!("{summary}");
        return Err(failures.join("\n"));
    }
    line(&mut summary, "wgpu and causeway agree on one VkDevice".to_owned());
    Ok(summary)
}

/// Creates the `VkDevice` from wgpu-hal's adapter: wgpu-hal's extensions and feature chain, plus
/// `synchronization2` (and on a 1.2 device its extension), on one queue of the first family
/// with graphics and compute (wgpu's queue needs both; causeway's compute). Returns the open hal
/// device, which owns the `VkDevice`, and the family.
fn open(hal: &wgpu::hal::vulkan::Adapter) -> Result<(wgpu::hal::OpenDevice<Vulkan>, u32), String> {
    let instance = hal.shared_instance().raw_instance();
    let physical_device = hal.raw_physical_device();
    let api_version = hal.physical_device_capabilities().properties().api_version;
    if api_version < vk::API_VERSION_1_2 {
        return Err("causeway needs a Vulkan 1.2 device".to_owned());
    }
    let features = wgpu::Features::empty();
    let mut extensions = hal.required_device_extensions(features);
    if api_version < vk::API_VERSION_1_3 {
        if !hal.physical_device_capabilities().supports_extension(ash::khr::synchronization2::NAME)
        {
            return Err("the device lacks VK_KHR_synchronization2".to_owned());
        }
        extensions.push(ash::khr::synchronization2::NAME);
    }
    // SAFETY: `physical_device` is `instance`'s (both from the same hal adapter).
    let families = unsafe { instance.get_physical_device_queue_family_properties(physical_device) };
    let wanted = vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE;
    let family = families
        .iter()
        .position(|family| family.queue_flags.contains(wanted) && family.queue_count > 0)
        .ok_or("no queue family with graphics and compute")? as u32;

    let mut chain = hal.physical_device_features(&extensions, features);
    let mut synchronization2 =
        vk::PhysicalDeviceSynchronization2Features::default().synchronization2(true);
    let priorities = [1.0];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(family)
        .queue_priorities(&priorities)];
    let names: Vec<_> = extensions.iter().map(|name| name.as_ptr()).collect();
    let info =
        vk::DeviceCreateInfo::default().queue_create_infos(&queues).enabled_extension_names(&names);
    // wgpu-hal's chain has no `VkPhysicalDeviceVulkan13Features`, so a separate
    // synchronization2 struct is allowed beside it.
    let info = chain.add_to_device_create(info).push_next(&mut synchronization2);
    // SAFETY: `info` and everything it points to (queue infos, priorities, extension names, the
    // feature chain) live across the call; the extensions and features are ones the physical
    // device supports (wgpu-hal chose its own from what the device reports; synchronization2 is
    // core in 1.3, or its extension was checked above).
    let raw = unsafe { instance.create_device(physical_device, &info, None) }
        .map_err(|error| format!("vkCreateDevice: {error}"))?;
    // SAFETY: `raw` was created from this adapter, on `family`, with `extensions` (a superset
    // of `required_device_extensions`) and `physical_device_features`' chain; with no drop
    // callback, wgpu-hal owns `raw` and destroys it.
    let open = unsafe {
        hal.device_from_raw(
            raw,
            None,
            &extensions,
            features,
            &wgpu::MemoryHints::Performance,
            family,
            0,
        )
    }
    .map_err(|error| format!("wgpu-hal refused the device: {error}"))?;
    Ok((open, family))
}

impl WgpuWork {
    fn new(device: wgpu::Device, queue: wgpu::Queue) -> Result<WgpuWork, String> {
        let values = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("values"),
            size: BYTES,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: BYTES,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        // The WGSL goes to wgpu as naga IR, not as text: from text, wgpu's `DEBUG` flag has naga
        // emit the source as debug info (`OpSource` language 10, WGSL), which the SPIR-V
        // validator inside validation layer 1.3.239 predates and reports as an invalid module.
        let module = wgpu::naga::front::wgsl::parse_str(WGSL)
            .map_err(|error| format!("WGSL: {}", error.emit_to_string(WGSL)))?;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("twice plus one"),
            source: wgpu::ShaderSource::Naga(std::borrow::Cow::Owned(module)),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("twice plus one"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("values"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry { binding: 0, resource: values.as_entire_binding() }],
        });
        Ok(WgpuWork { device, queue, values, readback, pipeline, bind_group })
    }

    /// One round: a compute pass over `values` (the first round uploads them first; the last
    /// copies them to `readback`), submitted under causeway's lock for the shared queue.
    fn submit_round(&self, gpu: &Gpu, round: u32) -> Result<(), String> {
        if round == 0 {
            let start: Vec<f32> = (0..ELEMENTS).map(|i| i as f32).collect();
            let bytes: Vec<u8> = start.iter().flat_map(|value| value.to_le_bytes()).collect();
            // Staged by wgpu until the next submit.
            self.queue.write_buffer(&self.values, 0, &bytes);
        }
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &self.bind_group, &[]);
            pass.dispatch_workgroups((ELEMENTS as u32).div_ceil(64), 1, 1);
        }
        if round + 1 == WGPU_ROUNDS {
            encoder.copy_buffer_to_buffer(&self.values, 0, &self.readback, 0, BYTES);
        }
        let commands = encoder.finish();
        // wgpu's `vkQueueSubmit` on the lent queue, under causeway's lock for it.
        gpu.with_queue(0, |_| self.queue.submit([commands]))
            .map_err(|error| format!("with_queue: {error}"))?;
        Ok(())
    }

    /// Maps `readback` and counts the values that are not `i` after `rounds` rounds of `2v + 1`.
    fn check(&self, rounds: u32) -> Result<usize, String> {
        let slice = self.readback.slice(..);
        let mapped = Arc::new(Mutex::new(None));
        let mapped_seen = Arc::clone(&mapped);
        slice.map_async(wgpu::MapMode::Read, move |result| {
            *mapped_seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(result);
        });
        self.device.poll(wgpu::PollType::Wait).map_err(|error| format!("wgpu poll: {error}"))?;
        let result = mapped.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        match result {
            Some(Ok(())) => {}
            Some(Err(error)) => return Err(format!("wgpu could not map the readback: {error}")),
            None => return Err("wgpu's readback never mapped".to_owned()),
        }
        let wrong = {
            let bytes = slice.get_mapped_range();
            bytes
                .chunks_exact(4)
                .enumerate()
                .filter(|(i, chunk)| {
                    let value = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
                    // v ↦ 2v + 1, `rounds` times: 2^r·v + 2^r − 1.
                    let scale = (1u32 << rounds) as f32;
                    value != scale * *i as f32 + scale - 1.0
                })
                .count()
        };
        self.readback.unmap();
        Ok(wrong)
    }
}

/// Runs causeway's CPU → Vulkan → CPU chain on `gpu`, with wgpu's rounds submitted while it is
/// in flight; returns causeway's line of the summary and how many wgpu rounds were submitted.
/// Every causeway object made here is dropped before it returns, except `gpu` (the caller's).
fn run_both(gpu: &Gpu, wgpu: &WgpuWork) -> Result<(String, u32), String> {
    let vk_error = |error: causeway_driver_vulkan::VulkanError| error.to_string();
    let backend = VulkanBackend::new(gpu.clone());
    let buffers = [(); 3].map(|()| Buffer::new(gpu, BYTES));
    let [a, b, c] = buffers;
    let (a, b, c) = (a.map_err(vk_error)?, b.map_err(vk_error)?, c.map_err(vk_error)?);
    let launch = Kernel::add(gpu).map_err(vk_error)?.launch(&[&a, &b, &c], ELEMENTS as u32, 4, 0.0);
    let add = backend
        .command_buffer(vec![vec![Step::Dispatch(launch.map_err(vk_error)?)]])
        .map_err(vk_error)?;

    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let vulkan = builder.driver(backend);
    let cpu = builder.driver(CpuBackend::new());
    let (producer, gpu_queue, consumer) = (
        builder.queue(QueueConfig::on(cpu)),
        builder.queue(QueueConfig::on(vulkan)),
        builder.queue(QueueConfig::on(cpu)),
    );
    let home = builder.endpoint(producer).ok_or("no endpoint for the CPU queue")?;
    let [go, inputs, sums, checked] =
        [(); 4].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let write = builder.host_call(move |_| {
        let a_values: Vec<f32> = (0..ELEMENTS).map(|i| i as f32).collect();
        let b_values: Vec<f32> = (0..ELEMENTS).map(|i| (2 * i) as f32 + 0.5).collect();
        a.write_f32(0, &a_values).map_err(|_| Failure::Application(1))?;
        b.write_f32(0, &b_values).map_err(|_| Failure::Application(1))
    });
    let wrong = Arc::new(AtomicU32::new(u32::MAX));
    let wrong_seen = Arc::clone(&wrong);
    let check = builder.host_call(move |_| {
        let sums = c.read_f32(0, ELEMENTS).map_err(|_| Failure::Application(2))?;
        let wrong = (0..ELEMENTS).filter(|&i| sums[i] != (3 * i) as f32 + 0.5).count();
        wrong_seen.store(wrong as u32, Ordering::Relaxed);
        Ok(())
    });
    let device = builder.build().map_err(|error| format!("{error:?}"))?;

    // The chain is submitted whole before the host lets the upload go, so the check's waits
    // resolve from frontiers alone: the one on the upload is elided across the drivers.
    let submit = |queue, op: &Op| {
        let receipt = device.submit(queue, op).map_err(|error| format!("submit: {error:?}"))?;
        match receipt.failure {
            None => Ok(receipt),
            Some(failure) => Err(format!("submission failed: {failure:?}")),
        }
    };
    let write_op = Op {
        waits: &[(go, 1)],
        signals: &[(inputs, 1)],
        work: Work::Host(write),
        tag: 1,
        ..Default::default()
    };
    submit(producer, &write_op)?;
    let add_op = Op {
        waits: &[(inputs, 1)],
        signals: &[(sums, 1)],
        work: Work::Execute(add),
        tag: 2,
        ..Default::default()
    };
    submit(gpu_queue, &add_op)?;
    let check_op = Op {
        waits: &[(sums, 1), (inputs, 1)],
        signals: &[(checked, 1)],
        work: Work::Host(check),
        tag: 3,
        ..Default::default()
    };
    let receipt = submit(consumer, &check_op)?;
    let elided = match receipt.waits.as_slice() {
        [WaitOutcome::Resolved(_), WaitOutcome::Resolved(on_inputs)] => {
            on_inputs.resolution == Resolution::Elided
        }
        _ => false,
    };

    // Let causeway's chain go, and submit wgpu's rounds to the same queue while it runs.
    device
        .semaphore(go)
        .ok_or("no semaphore `go`")?
        .signal_external(1)
        .map_err(|error| format!("{error:?}"))?;
    let mut rounds = 0;
    for round in 0..WGPU_ROUNDS {
        wgpu.submit_round(gpu, round)?;
        rounds += 1;
    }

    let mut reached = true;
    for semaphore in [go, inputs, sums, checked] {
        let semaphore = device.semaphore(semaphore).ok_or("a semaphore of the chain is gone")?;
        reached &= wait(semaphore, 1, Some(HANG_GUARD)) == Ok(1);
    }
    let wrong = wrong.load(Ordering::Relaxed);
    let report = device.shutdown(HANG_GUARD);
    if report.leaked || !report.busy_drivers.is_empty() {
        return Err(format!("causeway's device did not shut down cleanly: {report:?}"));
    }
    if !reached {
        return Err("causeway's chain did not complete".to_owned());
    }
    if wrong != 0 {
        return Err(format!("{wrong} of causeway's {ELEMENTS} sums wrong"));
    }
    if !elided {
        return Err("the check's wait on the upload was not elided".to_owned());
    }
    Ok((
        format!(
            "causeway: CPU upload -> Vulkan add -> CPU check, {ELEMENTS} sums right, \
             the check's wait on the upload elided"
        ),
        rounds,
    ))
}
