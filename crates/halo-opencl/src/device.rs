//! An OpenCL device: one context and one in-order command queue, the submission thread that
//! feeds it, and the translator options the device's extensions allow.

use crate::allocator::OpenClAllocator;
use crate::api::cl_error;
use crate::api::InFlight;
use crate::command_buffer;
use crate::driver::{DeviceOptions, DRIVER_NAME};
use crate::executable::OpenClExecutableCache;
use crate::khr_command_buffer::KhrCommandBuffers;
use crate::program_cache::ProgramCache;
use crate::replay::Replays;
use halo_hal::device::{glob_match, query_common_i64};
use halo_hal::submission_queue::SubmissionQueue;
use halo_hal::{
    Allocator, AllocatorStatistics, Binding, CommandBuffer, Device, DeviceInfo, Error, ExecutableCache, Fence,
    QueueAffinity, Result, Timeout,
};
use halo_spirv_opencl::{Options, Subgroups, NATIVE_SUBGROUP_EXTENSIONS};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the device's objects share.
pub(crate) struct DeviceShared {
    pub(crate) context: Context,
    pub(crate) queue: CommandQueue,
    /// Translator options from the device's extensions.
    pub(crate) translation: Options,
    pub(crate) programs: ProgramCache,
    pub(crate) max_workgroup_size: usize,
    /// Whether device-local buffers are host memory the host maps (see [`DeviceOptions`]).
    pub(crate) device_local_mappable: bool,
    /// Whether kernels use host memory in place, so that mappings need no syncing: on a device
    /// that shares the host's memory, unless it is made to act as one that does not.
    pub(crate) host_coherent: bool,
    /// Recordings of reusable command buffers, where the device has `cl_khr_command_buffer`.
    pub(crate) replays: Option<Replays>,
    pub(crate) max_allocation: u64,
    allocated: AtomicU64,
    peak: AtomicU64,
}

impl DeviceShared {
    pub(crate) fn count_allocated(&self, delta: i64) {
        let now = self
            .allocated
            .fetch_add(delta as u64, Ordering::Relaxed)
            .wrapping_add(delta as u64);
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    pub(crate) fn statistics(&self) -> AllocatorStatistics {
        AllocatorStatistics {
            bytes_allocated: self.allocated.load(Ordering::Relaxed),
            bytes_peak: self.peak.load(Ordering::Relaxed),
        }
    }
}

/// `CL_DEVICE_SUB_GROUP_SIZES_INTEL`: the subgroup sizes a kernel may require.
const CL_DEVICE_SUB_GROUP_SIZES_INTEL: u32 = 0x4108;

/// Whether `device` has the subgroup built-ins [`Subgroups::Native`] writes and can make its
/// subgroups `size` wide.
fn native_subgroups_possible(device: &opencl3::device::Device, size: u32) -> bool {
    let extensions = device.extensions().unwrap_or_default();
    let has_all = NATIVE_SUBGROUP_EXTENSIONS
        .iter()
        .all(|e| extensions.split_whitespace().any(|x| x == *e));
    let sizes = device.get_data(CL_DEVICE_SUB_GROUP_SIZES_INTEL).unwrap_or_default();
    has_all
        && sizes
            .chunks_exact(std::mem::size_of::<usize>())
            .filter_map(|bytes| bytes.try_into().ok().map(usize::from_ne_bytes))
            .any(|s| s == size as usize)
}

/// One OpenCL device.
///
/// Ownership: submissions keep their command buffers, tables and the device's shared state alive
/// until they finish. Threading: any thread.
pub struct OpenClDevice {
    info: DeviceInfo,
    shared: Arc<DeviceShared>,
    allocator: OpenClAllocator,
    queue: SubmissionQueue<InFlight>,
}

impl OpenClDevice {
    pub(crate) fn new(info: DeviceInfo, device: opencl3::device::Device, options: DeviceOptions) -> Result<Self> {
        let shares_host_memory = device
            .host_unified_memory()
            .map_err(|e| cl_error("clGetDeviceInfo", e))?;
        let device_local_mappable = options.device_local_mappable.unwrap_or(shares_host_memory);
        let extensions = device.extensions().unwrap_or_default();
        let has = |extension: &str| extensions.split_whitespace().any(|e| e == extension);
        let native = native_subgroups_possible(&device, options.subgroup_size);
        let subgroups = match options.subgroups {
            None if native => Subgroups::Native,
            None => Subgroups::Emulated,
            Some(Subgroups::Native) if !native => {
                return Err(Error::unimplemented(format!(
                    "opencl device parameter subgroups=native: this device cannot make its subgroups {} wide with \
                     the built-ins the translation uses ({} and CL_DEVICE_SUB_GROUP_SIZES_INTEL)",
                    options.subgroup_size,
                    NATIVE_SUBGROUP_EXTENSIONS.join(", ")
                )))
            }
            Some(chosen) => chosen,
        };
        let translation = Options {
            fp16: has("cl_khr_fp16"),
            fp64: has("cl_khr_fp64"),
            specialization: Vec::new(),
            subgroup_size: options.subgroup_size,
            subgroups,
        };
        let context = Context::from_device(&device).map_err(|e| cl_error("clCreateContext", e))?;
        #[allow(
            deprecated,
            reason = "clCreateCommandQueue is the OpenCL 1.2 entry point every platform has"
        )]
        let queue = CommandQueue::create_default(&context, 0).map_err(|e| cl_error("clCreateCommandQueue", e))?;
        let shared = Arc::new(DeviceShared {
            context,
            queue,
            translation,
            programs: ProgramCache::new(&options.program_cache, &device),
            device_local_mappable,
            host_coherent: shares_host_memory && device_local_mappable,
            replays: options
                .khr_command_buffer
                .then(|| KhrCommandBuffers::load(&device))
                .flatten()
                .map(Replays::new),
            max_workgroup_size: device
                .max_work_group_size()
                .map_err(|e| cl_error("clGetDeviceInfo", e))?,
            max_allocation: device
                .max_mem_alloc_size()
                .map_err(|e| cl_error("clGetDeviceInfo", e))?,
            allocated: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        });
        Ok(OpenClDevice {
            info,
            allocator: OpenClAllocator::new(shared.clone()),
            shared,
            queue: SubmissionQueue::start("OpenCL")?,
        })
    }
}

impl Device for OpenClDevice {
    fn driver_name(&self) -> &str {
        DRIVER_NAME
    }
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn query_i64(&self, category: &str, key: &str) -> Result<i64> {
        // The device runs the Vulkan target's programs, which `iree-compile` marks as wanting a
        // device whose id matches `vulkan*`: it answers to that too.
        if category == "hal.device.id" && glob_match(key, "vulkan") {
            return Ok(1);
        }
        if category == "opencl.queue" && key == "device_waits" {
            return Ok(self.queue.device_waits() as i64);
        }
        if category == "opencl.command_buffers" {
            let replays = self.shared.replays.as_ref();
            let value = match key {
                "recording" => Some(u64::from(replays.is_some())),
                "recorded" | "replayed" => Some(replays.and_then(|r| r.counter(key)).unwrap_or(0)),
                _ => None,
            };
            return value.map(|n| n as i64).ok_or_else(|| {
                Error::not_found(format!(
                    "unknown opencl.command_buffers key '{key}' (known: recording, recorded, replayed)"
                ))
            });
        }
        if category == "opencl.program_cache" {
            return halo_hal::disk_cache::query_counter(self.shared.programs.disk.as_ref(), category, key);
        }
        query_common_i64(self, &OpenClExecutableCache::new(self.shared.clone()), category, key)
    }

    fn create_executable_cache(&self) -> Result<Arc<dyn ExecutableCache>> {
        Ok(Arc::new(OpenClExecutableCache::new(self.shared.clone())))
    }

    fn queue_execute(
        &self,
        _queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        command_buffer: Option<&Arc<CommandBuffer>>,
        binding_table: &[Binding],
    ) -> Result<()> {
        let shared = self.shared.clone();
        self.queue.execute(
            wait,
            signal,
            command_buffer,
            binding_table,
            move |command_buffer, table| command_buffer::execute(&shared, &command_buffer, table),
        )
    }

    fn all_held_for(&self) -> Duration {
        self.queue.held_for()
    }

    fn wait_idle(&self, timeout: Timeout) -> Result<()> {
        self.queue.wait_idle(timeout)
    }
}
