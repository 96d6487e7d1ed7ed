//! A Vulkan device: one logical `VkDevice` with one compute queue.

use crate::allocator::VulkanAllocator;
use crate::completion::{create_timeline, Waiter};
use crate::driver::DeviceOptions;
use crate::executable::VulkanExecutableCache;
use crate::indirect_guard::GuardPipeline;
use crate::instance::Instance;
use crate::pipeline_cache::PipelineStore;
use crate::semaphore::VulkanSemaphore;
use crate::status::{vk_error, VkResultExt};
use crate::submit::{submit, Work};
use ash::vk;
use gpu_allocator::vulkan::{Allocation, Allocator as MemoryAllocator, AllocatorCreateDesc};
use halo_hal::device::query_common_i64;
use halo_hal::disk_cache::CacheDir;
use halo_hal::{
    Allocator, AllocatorStatistics, Binding, Buffer, CommandBuffer, Device, DeviceInfo, Error, ExecutableCache, Fence,
    QueueAffinity, Result, Semaphore, Timeout, WaitMode,
};
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long dropping a device waits for its queue to drain before leaking it instead.
const DRAIN_ON_DROP: Duration = Duration::from_secs(10);

/// The queue and how many batches were submitted to it.
struct Queue {
    raw: vk::Queue,
    /// Value the progress timeline reaches when the last submitted batch completes.
    submitted: u64,
}

/// A command buffer alone in its pool.
pub(crate) struct PooledCommandBuffer {
    pool: vk::CommandPool,
    pub(crate) command_buffer: vk::CommandBuffer,
}

/// What the device's objects share: the `VkDevice` and its queue, memory and pools.
///
/// Ownership: buffers, semaphores, executables and submissions hold an `Arc`, so the `VkDevice`
/// is destroyed after the last of them. Threading: any thread; each pool is behind a lock.
pub(crate) struct DeviceShared {
    pub(crate) instance: Arc<Instance>,
    pub(crate) raw: ash::Device,
    pub(crate) limits: vk::PhysicalDeviceLimits,
    pub(crate) memory_properties: vk::PhysicalDeviceMemoryProperties,
    pub(crate) max_timeline_difference: u64,
    /// The newest SPIR-V version (header word) the device's Vulkan version accepts.
    pub(crate) max_spirv_version: u32,
    pub(crate) max_allocation_size: u64,
    /// See [`DeviceOptions::device_local_mappable`].
    pub(crate) device_local_mappable: bool,
    /// Whether `robustBufferAccess` is on (asked for and offered).
    robust_buffer_access: bool,
    /// See [`DeviceOptions::spin`].
    pub(crate) spin: Duration,
    queue: Mutex<Queue>,
    /// `None` only while dropping (the sub-allocator must go before the device).
    memory: Mutex<Option<MemoryAllocator>>,
    bytes_allocated: AtomicU64,
    bytes_peak: AtomicU64,
    /// Idle command buffers, each alone in its own pool: recording needs its pool to itself
    /// (Vulkan's external synchronization), and threads record and release concurrently.
    command_buffers: Mutex<Vec<PooledCommandBuffer>>,
    queue_family: u32,
    pub(crate) pipeline_cache: vk::PipelineCache,
    /// Pipeline caches on disk, one per executable; `None` when turned off.
    pub(crate) pipeline_store: Option<PipelineStore>,
    pub(crate) waiter: Arc<Waiter>,
    /// Timeline that every submitted batch signals, in submission order.
    pub(crate) progress: vk::Semaphore,
    /// Semaphores dropped by their users, with the last batch that may refer to them.
    retired_semaphores: Mutex<Vec<(vk::Semaphore, u64)>>,
    /// The pipeline that checks indirect workgroup counts, made on first use.
    indirect_guard: OnceLock<GuardPipeline>,
    /// The queue's track in timelines.
    pub(crate) track: halo_hal::trace::QueueTrack,
}

impl DeviceShared {
    fn memory(&self) -> MutexGuard<'_, Option<MemoryAllocator>> {
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sub-allocates memory.
    pub(crate) fn allocate_memory(
        &self,
        desc: &gpu_allocator::vulkan::AllocationCreateDesc<'_>,
    ) -> std::result::Result<Allocation, gpu_allocator::AllocationError> {
        let mut memory = self.memory();
        let allocator = memory.as_mut().expect("the sub-allocator lives as long as the device");
        allocator.allocate(desc)
    }

    /// Returns memory of a buffer of `size` bytes to the sub-allocator.
    pub(crate) fn free_memory(&self, allocation: Allocation, size: u64) {
        if let Some(allocator) = self.memory().as_mut() {
            // A failure here means the allocation was not from this allocator: nothing to undo.
            let _ = allocator.free(allocation);
        }
        self.bytes_allocated.fetch_sub(size, Ordering::Relaxed);
    }

    /// Counts a new buffer of `size` bytes.
    pub(crate) fn count_allocated(&self, size: u64) {
        let now = self.bytes_allocated.fetch_add(size, Ordering::Relaxed) + size;
        self.bytes_peak.fetch_max(now, Ordering::Relaxed);
    }

    pub(crate) fn statistics(&self) -> AllocatorStatistics {
        AllocatorStatistics {
            bytes_allocated: self.bytes_allocated.load(Ordering::Relaxed),
            bytes_peak: self.bytes_peak.load(Ordering::Relaxed),
        }
    }

    /// The alignment of every buffer, enough to bind any of them as a storage buffer.
    /// The pipeline that checks indirect workgroup counts ([`crate::indirect_guard`]).
    pub(crate) fn indirect_guard(&self) -> Result<&GuardPipeline> {
        GuardPipeline::get(&self.indirect_guard, &self.raw, self.pipeline_cache)
    }

    pub(crate) fn min_buffer_alignment(&self) -> u64 {
        self.limits
            .min_storage_buffer_offset_alignment
            .max(self.limits.min_uniform_buffer_offset_alignment)
            .max(16)
    }

    /// A primary command buffer in the initial state, used by the caller alone until it hands it
    /// back with [`Self::release_command_buffer`].
    pub(crate) fn acquire_command_buffer(&self) -> Result<PooledCommandBuffer> {
        if let Some(pooled) = self.command_buffers.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(pooled);
        }
        let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(self.queue_family);
        // SAFETY: the device is alive; the pool is destroyed with it (`DeviceShared::drop`).
        let pool = unsafe { self.raw.create_command_pool(&pool_info, None) }.or_vk("vkCreateCommandPool")?;
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: the pool was just created and is used by this thread alone.
        match unsafe { self.raw.allocate_command_buffers(&info) } {
            Ok(buffers) => Ok(PooledCommandBuffer {
                pool,
                command_buffer: buffers[0],
            }),
            Err(result) => {
                // SAFETY: the pool is empty and unused.
                unsafe { self.raw.destroy_command_pool(pool, None) };
                Err(vk_error(result, "vkAllocateCommandBuffers"))
            }
        }
    }

    /// Takes back a command buffer the device no longer executes (or never got), resetting it.
    pub(crate) fn release_command_buffer(&self, pooled: PooledCommandBuffer) {
        // SAFETY: the caller owns the pool alone and its command buffer is not pending.
        let reset = unsafe {
            self.raw
                .reset_command_pool(pooled.pool, vk::CommandPoolResetFlags::empty())
        };
        if reset.is_ok() {
            self.command_buffers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(pooled);
        } else {
            // SAFETY: as above; a pool that cannot be reset is not reused.
            unsafe { self.raw.destroy_command_pool(pooled.pool, None) };
        }
    }

    /// Submits one batch: `command_buffer` (if any) after the waits, then the signals and the
    /// progress timeline. Returns the progress value that marks the batch complete.
    pub(crate) fn submit_batch(
        &self,
        command_buffer: Option<vk::CommandBuffer>,
        waits: &[(vk::Semaphore, u64)],
        signals: &[(vk::Semaphore, u64)],
    ) -> Result<u64> {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let value = queue.submitted + 1;
        let wait_semaphores: Vec<vk::Semaphore> = waits.iter().map(|w| w.0).collect();
        let wait_values: Vec<u64> = waits.iter().map(|w| w.1).collect();
        let wait_stages = vec![vk::PipelineStageFlags::ALL_COMMANDS; waits.len()];
        let mut signal_semaphores: Vec<vk::Semaphore> = signals.iter().map(|s| s.0).collect();
        let mut signal_values: Vec<u64> = signals.iter().map(|s| s.1).collect();
        signal_semaphores.push(self.progress);
        signal_values.push(value);
        let command_buffers: Vec<vk::CommandBuffer> = command_buffer.into_iter().collect();
        let mut timeline = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_values)
            .signal_semaphore_values(&signal_values);
        let info = vk::SubmitInfo::default()
            .wait_semaphores(&wait_semaphores)
            .wait_dst_stage_mask(&wait_stages)
            .command_buffers(&command_buffers)
            .signal_semaphores(&signal_semaphores)
            .push_next(&mut timeline);
        // SAFETY: the queue is used under its lock; every handle is alive and kept alive by the
        // caller until the progress timeline reaches `value`.
        unsafe { self.raw.queue_submit(queue.raw, &[info], vk::Fence::null()) }.or_vk("vkQueueSubmit")?;
        queue.submitted = value;
        Ok(value)
    }

    /// Destroys `semaphore` once no batch can refer to it any more.
    ///
    /// A host wait can see a semaphore's value before the batch that signalled it has finished
    /// with it (lavapipe still touches signalled semaphores while it retires the batch; destroying
    /// them at once crashed its queue thread). So a semaphore lives until a batch submitted after
    /// its last possible use has completed: the queue retires batches in order.
    pub(crate) fn retire_semaphore(&self, semaphore: vk::Semaphore) {
        let last_use = self.submitted();
        self.retired_semaphores
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((semaphore, last_use));
        self.destroy_retired_semaphores();
    }

    /// Destroys the retired semaphores whose last possible batch is followed by a completed one.
    pub(crate) fn destroy_retired_semaphores(&self) {
        // SAFETY: the progress semaphore lives as long as the device.
        let Ok(completed) = (unsafe { self.raw.get_semaphore_counter_value(self.progress) }) else {
            return;
        };
        let mut retired = self.retired_semaphores.lock().unwrap_or_else(|p| p.into_inner());
        retired.retain(|&(semaphore, last_use)| {
            let done = last_use < completed;
            if done {
                // SAFETY: a batch submitted after every batch that could refer to the semaphore
                // has completed, and batches complete in order.
                unsafe { self.raw.destroy_semaphore(semaphore, None) };
            }
            !done
        });
    }

    /// The progress value of the last submitted batch.
    fn submitted(&self) -> u64 {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).submitted
    }

    /// Blocks until the progress timeline reaches `value`.
    pub(crate) fn wait_progress(&self, value: u64, timeout: Timeout) -> Result<()> {
        let nanos = crate::status::timeout_nanos(timeout);
        let semaphores = [self.progress];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        // SAFETY: the progress semaphore lives as long as the device.
        match unsafe { self.raw.wait_semaphores(&info, nanos) } {
            Ok(()) => Ok(()),
            Err(vk::Result::TIMEOUT) => Err(Error::deadline_exceeded("the Vulkan queue did not drain in time")),
            Err(result) => Err(vk_error(result, "vkWaitSemaphores")),
        }
    }

    /// Fills all of `buffer` with zeros on the queue and waits: for memory the host cannot map.
    pub(crate) fn fill_now(&self, buffer: vk::Buffer) -> Result<()> {
        let pooled = self.acquire_command_buffer()?;
        let outcome = self.record_fill_and_run(pooled.command_buffer, buffer);
        self.release_command_buffer(pooled);
        outcome
    }

    fn record_fill_and_run(&self, command_buffer: vk::CommandBuffer, buffer: vk::Buffer) -> Result<()> {
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: a fresh command buffer of this device, recorded on this thread only; the buffer
        // is alive and unused by anything else yet.
        unsafe {
            self.raw
                .begin_command_buffer(command_buffer, &begin)
                .or_vk("vkBeginCommandBuffer")?;
            self.raw.cmd_fill_buffer(command_buffer, buffer, 0, vk::WHOLE_SIZE, 0);
            self.raw
                .end_command_buffer(command_buffer)
                .or_vk("vkEndCommandBuffer")?;
        }
        let value = self.submit_batch(Some(command_buffer), &[], &[])?;
        self.wait_progress(value, Timeout::Infinite)
    }
}

impl Drop for DeviceShared {
    fn drop(&mut self) {
        // SAFETY: this is the last owner: every buffer, semaphore, executable and submission is
        // gone (each held an `Arc`), and the waiter thread was stopped by `VulkanDevice::drop`.
        // Children are destroyed before the device.
        unsafe {
            let _ = self.raw.device_wait_idle();
            for (semaphore, _) in self
                .retired_semaphores
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .drain(..)
            {
                self.raw.destroy_semaphore(semaphore, None);
            }
            drop(self.memory().take());
            for pooled in self
                .command_buffers
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .drain(..)
            {
                self.raw.destroy_command_pool(pooled.pool, None);
            }
            if let Some(guard) = self.indirect_guard.get() {
                guard.destroy(&self.raw);
            }
            self.raw.destroy_pipeline_cache(self.pipeline_cache, None);
            self.raw.destroy_semaphore(self.progress, None);
            self.raw.destroy_device(None);
        }
    }
}

/// A Vulkan device.
///
/// Ownership: objects created from it keep the `VkDevice` alive (not this handle). Threading: any
/// thread.
pub struct VulkanDevice {
    shared: Arc<DeviceShared>,
    info: DeviceInfo,
    allocator: VulkanAllocator,
    waiter_thread: Option<JoinHandle<()>>,
}

impl VulkanDevice {
    /// Creates a logical device with one compute queue on `physical`.
    pub(crate) fn new(
        instance: Arc<Instance>,
        physical: vk::PhysicalDevice,
        info: DeviceInfo,
        options: DeviceOptions,
    ) -> Result<Self> {
        let setup = crate::features::DeviceSetup::query(&instance, physical, &options)
            .map_err(|e| e.context(format!("checking Vulkan device '{}'", info.name)))?;
        let raw = setup.create_device(&instance, physical)?;
        let (shared, waiter_thread) = match Self::share(instance, physical, raw.clone(), &setup, options) {
            Ok(shared) => shared,
            Err(error) => {
                // SAFETY: `share` destroys what it created before failing, so the device has no
                // children left.
                unsafe { raw.destroy_device(None) };
                return Err(error);
            }
        };
        Ok(VulkanDevice {
            allocator: VulkanAllocator::new(shared.clone()),
            shared,
            info,
            waiter_thread: Some(waiter_thread),
        })
    }

    fn share(
        instance: Arc<Instance>,
        physical: vk::PhysicalDevice,
        raw: ash::Device,
        setup: &crate::features::DeviceSetup,
        options: DeviceOptions,
    ) -> Result<(Arc<DeviceShared>, JoinHandle<()>)> {
        let memory = MemoryAllocator::new(&AllocatorCreateDesc {
            instance: instance.raw.clone(),
            device: raw.clone(),
            physical_device: physical,
            debug_settings: Default::default(),
            buffer_device_address: false,
            allocation_sizes: Default::default(),
        })
        .map_err(|e| Error::internal(format!("creating the Vulkan memory allocator: {e}")))?;
        // SAFETY: as above.
        let pipeline_cache = unsafe { raw.create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None) }
            .or_vk("vkCreatePipelineCache")?;
        // On a failure below, what was created before it is destroyed; the caller then destroys
        // the device.
        let progress = match create_timeline(&raw, 0) {
            Ok(progress) => progress,
            Err(error) => {
                // SAFETY: just created, used by nothing.
                unsafe { raw.destroy_pipeline_cache(pipeline_cache, None) };
                return Err(error);
            }
        };
        let (waiter, thread) = match Waiter::start(raw.clone(), progress, options.poll) {
            Ok(started) => started,
            Err(error) => {
                // SAFETY: just created, used by nothing.
                unsafe {
                    raw.destroy_semaphore(progress, None);
                    raw.destroy_pipeline_cache(pipeline_cache, None);
                }
                return Err(error);
            }
        };
        // SAFETY: queue 0 of the family the device was created with.
        let queue = unsafe { raw.get_device_queue(setup.queue_family, 0) };
        let shared = Arc::new(DeviceShared {
            instance,
            raw,
            limits: setup.properties.limits,
            memory_properties: setup.memory_properties,
            max_timeline_difference: setup.max_timeline_difference,
            max_spirv_version: max_spirv_version(setup.properties.api_version),
            max_allocation_size: setup.max_allocation_size,
            device_local_mappable: options.device_local_mappable,
            robust_buffer_access: setup.core.robust_buffer_access == vk::TRUE,
            spin: options.spin,
            queue: Mutex::new(Queue {
                raw: queue,
                submitted: 0,
            }),
            memory: Mutex::new(Some(memory)),
            bytes_allocated: AtomicU64::new(0),
            bytes_peak: AtomicU64::new(0),
            command_buffers: Mutex::new(Vec::new()),
            queue_family: setup.queue_family,
            pipeline_cache,
            pipeline_store: match &options.pipeline_cache {
                CacheDir::Off => None,
                CacheDir::At(root) => Some(PipelineStore::new(root.as_ref(), &setup.properties)),
            },
            waiter,
            progress,
            retired_semaphores: Mutex::new(Vec::new()),
            track: halo_hal::trace::QueueTrack::new(crate::driver::DRIVER_NAME),
            indirect_guard: OnceLock::new(),
        });
        Ok((shared, thread))
    }

    /// Fails with the validation layer's messages since the last check (strict validation).
    fn check_validation(&self) -> Result<()> {
        self.shared.instance.messages.check()
    }
}

impl Drop for VulkanDevice {
    fn drop(&mut self) {
        let drained = self
            .shared
            .wait_progress(self.shared.submitted(), Timeout::from(DRAIN_ON_DROP))
            .is_ok();
        if !drained {
            // Work is still queued (waiting on a semaphore nobody signals): freeing what it uses
            // would be unsound, so the device and its waiter are leaked instead.
            std::mem::forget(self.shared.clone());
            return;
        }
        self.shared.waiter.shutdown();
        if let Some(thread) = self.waiter_thread.take() {
            let _ = thread.join();
        }
        if let Err(error) = self.check_validation() {
            if !std::thread::panicking() {
                panic!("{error}");
            }
        }
    }
}

impl Device for VulkanDevice {
    fn driver_name(&self) -> &str {
        crate::driver::DRIVER_NAME
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
        if (category, key) == ("vulkan.features", "robust_buffer_access") {
            return Ok(i64::from(self.shared.robust_buffer_access));
        }
        if category == "vulkan.pipeline_cache" {
            let store = self.shared.pipeline_store.as_ref();
            return halo_hal::disk_cache::query_counter(store.map(|s| &s.cache), category, key);
        }
        let cache = VulkanExecutableCache::new(self.shared.clone());
        query_common_i64(self, &cache, category, key)
    }

    fn all_held_for(&self) -> Duration {
        self.shared.waiter.front.held_for().unwrap_or_default()
    }

    fn create_executable_cache(&self) -> Result<Arc<dyn ExecutableCache>> {
        Ok(Arc::new(VulkanExecutableCache::new(self.shared.clone())))
    }

    fn create_semaphore(&self, initial_value: u64) -> Result<Arc<dyn Semaphore>> {
        Ok(VulkanSemaphore::new(self.shared.clone(), initial_value)?)
    }

    fn queue_execute(
        &self,
        _queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        command_buffer: Option<&Arc<CommandBuffer>>,
        binding_table: &[Binding],
    ) -> Result<()> {
        let _span = tracing::info_span!("queue.execute", wait = ?wait, signal = ?signal).entered();
        let work = match command_buffer {
            Some(command_buffer) => {
                command_buffer.validate_submission(binding_table)?;
                Work::Commands(
                    command_buffer.clone(),
                    binding_table.iter().map(Binding::to_static).collect(),
                )
            }
            None => Work::Nothing,
        };
        submit(&self.shared, wait, signal, work)?;
        self.check_validation()
    }

    fn queue_dealloca(
        &self,
        _queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        buffer: &Buffer,
    ) -> Result<()> {
        // The buffer's memory returns to the allocator once nothing holds it after the waits.
        submit(&self.shared, wait, signal, Work::Keep(buffer.clone()))?;
        self.check_validation()
    }

    fn wait_semaphores(&self, mode: WaitMode, fence: &Fence, timeout: Timeout) -> Result<()> {
        halo_hal::wait_semaphores(mode, fence.timepoints(), timeout)?;
        self.check_validation()
    }

    fn wait_idle(&self, timeout: Timeout) -> Result<()> {
        self.shared.wait_progress(self.shared.submitted(), timeout)?;
        self.check_validation()
    }
}

/// SPIR-V 1.5 for Vulkan 1.2 (the oldest the driver opens), 1.6 from Vulkan 1.3 on.
fn max_spirv_version(api_version: u32) -> u32 {
    if api_version >= vk::API_VERSION_1_3 {
        0x0001_0600
    } else {
        0x0001_0500
    }
}
