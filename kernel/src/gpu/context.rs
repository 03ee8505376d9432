//! The wgpu device: adapter choice, error capture and buffer helpers.

use std::sync::{Arc, Mutex, mpsc};

use crate::ImagingError;

/// Which adapters [`GpuContext::open`] may pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterPolicy {
    /// Any adapter, including a CPU implementation such as Mesa's lavapipe.
    Any,
    /// Only real GPUs (discrete, integrated or virtual), never a CPU implementation.
    HardwareOnly,
}

/// Preference order: discrete before integrated before virtual before others.
fn rank(device_type: wgpu::DeviceType) -> u8 {
    match device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

/// Whether an adapter of this type counts as a real GPU for `auto` selection.
#[must_use]
pub fn is_hardware(device_type: wgpu::DeviceType) -> bool {
    matches!(
        device_type,
        wgpu::DeviceType::DiscreteGpu
            | wgpu::DeviceType::IntegratedGpu
            | wgpu::DeviceType::VirtualGpu
    )
}

/// An open device with its queue and the first error the device reported.
pub(crate) struct GpuContext {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) adapter: wgpu::AdapterInfo,
    pub(crate) limits: wgpu::Limits,
    /// wgpu reports validation and out-of-memory errors through a callback, not as
    /// return values; this keeps the first one so the next check turns it into a
    /// typed error instead of the default panic.
    errors: Arc<Mutex<Option<String>>>,
}

impl GpuContext {
    /// Opens the best adapter the policy allows (Vulkan, Metal or DX12).
    pub(crate) fn open(policy: AdapterPolicy) -> Result<Self, ImagingError> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::PRIMARY;
        // Validation layers would slow every dispatch; wgpu's own validation stays on.
        desc.flags = wgpu::InstanceFlags::empty();
        let instance = wgpu::Instance::new(desc);
        let mut adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::PRIMARY));
        adapters.retain(|a| {
            let info = a.get_info();
            let compute = a
                .get_downlevel_capabilities()
                .flags
                .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS);
            compute && (policy == AdapterPolicy::Any || is_hardware(info.device_type))
        });
        adapters.sort_by_key(|a| rank(a.get_info().device_type));
        let mut failures = Vec::new();
        for adapter in adapters {
            let info = adapter.get_info();
            let limits = adapter.limits();
            let request = wgpu::DeviceDescriptor {
                label: Some("reticle-imaging"),
                required_features: wgpu::Features::empty(),
                required_limits: limits.clone(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            };
            match pollster::block_on(adapter.request_device(&request)) {
                Ok((device, queue)) => {
                    let errors = Arc::new(Mutex::new(None::<String>));
                    let sink = Arc::clone(&errors);
                    device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                        if let Ok(mut slot) = sink.lock() {
                            slot.get_or_insert_with(|| e.to_string());
                        }
                    }));
                    return Ok(Self {
                        device,
                        queue,
                        adapter: info,
                        limits,
                        errors,
                    });
                }
                Err(e) => failures.push(format!("{}: {e}", info.name)),
            }
        }
        let what = match policy {
            AdapterPolicy::Any => "no wgpu adapter",
            AdapterPolicy::HardwareOnly => "no hardware GPU adapter",
        };
        if failures.is_empty() {
            Err(ImagingError::Backend(what.to_owned()))
        } else {
            Err(ImagingError::Backend(format!(
                "{what} could open a device: {}",
                failures.join("; ")
            )))
        }
    }

    /// `Err` with the first device error reported since the last check.
    pub(crate) fn check(&self) -> Result<(), ImagingError> {
        let taken = self.errors.lock().ok().and_then(|mut slot| slot.take());
        match taken {
            Some(message) => Err(ImagingError::Backend(message)),
            None => Ok(()),
        }
    }

    /// Blocks until the queue is idle.
    pub(crate) fn wait(&self) -> Result<(), ImagingError> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| ImagingError::Backend(format!("device poll: {e}")))?;
        self.check()
    }

    /// A storage buffer of `size` bytes (at least 4, as wgpu requires non-empty bindings).
    pub(crate) fn storage(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(4).next_multiple_of(4),
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    }

    /// A uniform buffer of `size` bytes.
    pub(crate) fn uniform(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Copies the first `size` bytes of `src` back to the host (waits for the queue).
    pub(crate) fn read(&self, src: &wgpu::Buffer, size: u64) -> Result<Vec<u8>, ImagingError> {
        let encoder = self.encoder("readback");
        let mut bytes = self.read_after(encoder, &[(src, size)])?;
        Ok(bytes.pop().unwrap_or_default())
    }

    /// A command encoder.
    pub(crate) fn encoder(&self, label: &str) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) })
    }

    /// Submits `encoder` with a copy of the first `size` bytes of each `(buffer, size)` of
    /// `copies` appended, then reads the copies back: one submission, one wait for all of
    /// them (a batch of windows comes back at once, issue 29 item 5).
    pub(crate) fn read_after(
        &self,
        mut encoder: wgpu::CommandEncoder,
        copies: &[(&wgpu::Buffer, u64)],
    ) -> Result<Vec<Vec<u8>>, ImagingError> {
        let staging: Vec<wgpu::Buffer> = copies
            .iter()
            .map(|&(src, size)| {
                let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("readback"),
                    size,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                encoder.copy_buffer_to_buffer(src, 0, &staging, 0, size);
                staging
            })
            .collect();
        self.queue.submit([encoder.finish()]);
        let (tx, rx) = mpsc::channel();
        for (i, buffer) in staging.iter().enumerate() {
            let tx = tx.clone();
            buffer.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                // The receiver outlives the poll below; a send error cannot happen.
                let _ = tx.send((i, r));
            });
        }
        drop(tx);
        self.wait()?;
        for _ in 0..staging.len() {
            let (_, mapped) = rx
                .recv()
                .map_err(|_| ImagingError::Backend("readback callback never ran".into()))?;
            mapped.map_err(|e| ImagingError::Backend(format!("readback map: {e}")))?;
        }
        staging
            .iter()
            .map(|buffer| {
                let bytes = {
                    let view = buffer
                        .slice(..)
                        .get_mapped_range()
                        .map_err(|e| ImagingError::Backend(format!("readback view: {e}")))?;
                    view.to_vec()
                };
                buffer.unmap();
                Ok(bytes)
            })
            .collect()
    }

    /// Compiles a compute pipeline, turning shader or layout errors into typed errors.
    pub(crate) fn pipeline(
        &self,
        label: &str,
        source: &str,
    ) -> Result<wgpu::ComputePipeline, ImagingError> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &[],
                    // Every pass writes its workgroup memory before reading it.
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(ImagingError::Backend(format!("pipeline {label}: {e}")));
        }
        Ok(pipeline)
    }
}
