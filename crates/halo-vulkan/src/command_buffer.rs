//! Command buffers: halo-hal's validated command list recorded into a `VkCommandBuffer` when it
//! is submitted, with binding-table slots resolved against that submission's table.
//!
//! - Fills: `vkCmdFillBuffer` over the 4-byte-aligned middle; the unaligned bytes at either end
//!   (Vulkan fills whole words only) are copied from a staging buffer, as copies have no
//!   alignment rules.
//! - Updates: copied from the staging buffer, written by the host while recording.
//! - Barriers: a full memory barrier; every command buffer ends with one towards the host, so
//!   mapped reads after the signal see the device's writes.
//! - Dispatches: one descriptor set per set layout from a pool sized for the whole command
//!   buffer, constants as push constants. Indirect dispatches read counts that the guard
//!   ([`crate::indirect_guard`]) checked against the device's limits.

use crate::buffer::VulkanAllocation;
use crate::device::{DeviceShared, PooledCommandBuffer};
use crate::executable::{Export, VulkanExecutable};
use crate::indirect_guard::{self, GuardParams, GuardPipeline};
use crate::status::VkResultExt;
use ash::vk;
use halo_hal::{Binding, BufferRef, Command, DispatchCommand, Error, MemoryType, Result, WorkgroupCount};
use std::sync::Arc;

/// A recorded `VkCommandBuffer` and what it needs until the device finishes it.
pub(crate) struct Recorded {
    shared: Arc<DeviceShared>,
    /// `None` only while dropping.
    pooled: Option<PooledCommandBuffer>,
    descriptor_pool: vk::DescriptorPool,
    /// Update data and fill edges the copies read from.
    _staging: Option<VulkanAllocation>,
    /// The guard entries of the indirect dispatches, if there are any.
    guard: Option<GuardEntries>,
}

/// The guard buffer of a command buffer's indirect dispatches and the command index of each.
struct GuardEntries {
    buffer: VulkanAllocation,
    commands: Vec<usize>,
}

impl Recorded {
    /// The command buffer to submit.
    pub(crate) fn command_buffer(&self) -> vk::CommandBuffer {
        self.pooled.as_ref().expect("alive until dropped").command_buffer
    }

    /// Whether the submission's outcome is known only once [`Self::check`] has read it back.
    pub(crate) fn has_indirect_dispatches(&self) -> bool {
        self.guard.is_some()
    }

    /// After completion: fails when an indirect dispatch found its counts beyond the limits.
    pub(crate) fn check(&self) -> Result<()> {
        let Some(guard) = &self.guard else { return Ok(()) };
        let length = guard.commands.len() as u64 * indirect_guard::ENTRY_BYTES;
        halo_hal::Allocation::invalidate(&guard.buffer, 0, length)?;
        let host = halo_hal::Allocation::host_ptr(&guard.buffer)
            .ok_or_else(|| Error::internal("the indirect dispatch guard buffer is not host-visible"))?;
        // SAFETY: the mapping covers the buffer, which holds `length` bytes of whole words at a
        // 16-byte aligned address, and the device finished writing it (this runs after completion).
        let entries = unsafe { std::slice::from_raw_parts(host.as_ptr().cast::<u32>(), length as usize / 4) };
        indirect_guard::check(
            entries,
            &guard.commands,
            self.shared.limits.max_compute_work_group_count,
        )
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        if let Some(pooled) = self.pooled.take() {
            self.shared.release_command_buffer(pooled);
        }
        if self.descriptor_pool != vk::DescriptorPool::null() {
            // SAFETY: the command buffer that used the pool's sets has completed or was never
            // submitted (this drop runs after completion or on a recording error).
            unsafe { self.shared.raw.destroy_descriptor_pool(self.descriptor_pool, None) };
        }
    }
}

/// Records `commands` with `table` bound to their slots.
///
/// # Errors
/// A reference to a buffer of another device, a dispatch of another device's executable, a
/// binding at an offset the device cannot bind, or a Vulkan failure.
pub(crate) fn record(shared: &Arc<DeviceShared>, commands: &[Command], table: &[Binding]) -> Result<Recorded> {
    let needs = Needs::of(shared, commands)?;
    let staging = match needs.staging_bytes {
        0 => None,
        bytes => Some(shared.allocate(bytes, MemoryType::HOST_LOCAL | MemoryType::DEVICE_VISIBLE, 16)?),
    };
    let guard_buffer = match needs.indirect_dispatches {
        0 => None,
        count => Some(shared.allocate(
            u64::from(count) * indirect_guard::ENTRY_BYTES,
            MemoryType::HOST_LOCAL | MemoryType::DEVICE_VISIBLE | MemoryType::HOST_CACHED,
            16,
        )?),
    };
    let mut recorded = Recorded {
        shared: shared.clone(),
        pooled: Some(shared.acquire_command_buffer()?),
        descriptor_pool: vk::DescriptorPool::null(),
        _staging: None,
        guard: None,
    };
    recorded.descriptor_pool = needs.create_pool(shared)?;
    let guard = match &guard_buffer {
        None => None,
        Some(buffer) => Some(Guard {
            pipeline: shared.indirect_guard()?,
            buffer: buffer.raw(),
            commands: Vec::new(),
        }),
    };
    let mut recorder = Recorder {
        shared,
        command_buffer: recorded.command_buffer(),
        descriptor_pool: recorded.descriptor_pool,
        table,
        staging: staging.as_ref().map(Staging::new).transpose()?,
        guard,
        command_index: 0,
    };
    recorder.record_all(commands)?;
    recorded._staging = staging;
    if let (Some(buffer), Some(guard)) = (guard_buffer, recorder.guard) {
        recorded.guard = Some(GuardEntries {
            buffer,
            commands: guard.commands,
        });
    }
    Ok(recorded)
}

/// What a command list needs besides its command buffer.
#[derive(Default)]
struct Needs {
    staging_bytes: u64,
    sets: u32,
    storage_descriptors: u32,
    uniform_descriptors: u32,
    indirect_dispatches: u32,
}

impl Needs {
    fn of(shared: &Arc<DeviceShared>, commands: &[Command]) -> Result<Self> {
        let mut needs = Needs::default();
        for command in commands {
            match command {
                // At most 3 bytes at each end of a fill are not whole words.
                Command::Fill { .. } => needs.staging_bytes += 8,
                Command::Update { data, .. } => needs.staging_bytes += data.len() as u64,
                Command::Dispatch(dispatch) => {
                    let export = dispatch_export(shared, dispatch)?;
                    if matches!(dispatch.workgroup_count, WorkgroupCount::Indirect(_)) {
                        needs.indirect_dispatches += 1;
                        needs.sets += 1;
                        needs.storage_descriptors += indirect_guard::DESCRIPTORS_PER_DISPATCH;
                    }
                    needs.sets += export.set_layouts.len() as u32;
                    for slot in &export.slots {
                        if slot.descriptor_type == vk::DescriptorType::UNIFORM_BUFFER {
                            needs.uniform_descriptors += 1;
                        } else {
                            needs.storage_descriptors += 1;
                        }
                    }
                }
                Command::Barrier | Command::Copy { .. } => {}
            }
        }
        Ok(needs)
    }

    fn create_pool(&self, shared: &DeviceShared) -> Result<vk::DescriptorPool> {
        if self.sets == 0 {
            return Ok(vk::DescriptorPool::null());
        }
        let sizes: Vec<vk::DescriptorPoolSize> = [
            (vk::DescriptorType::STORAGE_BUFFER, self.storage_descriptors),
            (vk::DescriptorType::UNIFORM_BUFFER, self.uniform_descriptors),
        ]
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .map(|(ty, count)| vk::DescriptorPoolSize::default().ty(ty).descriptor_count(count))
        .collect();
        let info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(self.sets)
            .pool_sizes(&sizes);
        // SAFETY: the device is alive; the pool is destroyed by `Recorded::drop`.
        unsafe { shared.raw.create_descriptor_pool(&info, None) }.or_vk("vkCreateDescriptorPool")
    }
}

/// The export a dispatch runs, checking the executable is this device's.
fn dispatch_export<'a>(shared: &Arc<DeviceShared>, dispatch: &'a DispatchCommand) -> Result<&'a Export> {
    let executable = halo_hal::downcast::<VulkanExecutable>(dispatch.executable.as_any(), "dispatched executable")?;
    executable.export(dispatch.export, shared)
}

/// The host-written buffer that updates and fill edges are copied from.
struct Staging {
    buffer: vk::Buffer,
    host: std::ptr::NonNull<u8>,
    capacity: u64,
    used: u64,
}

impl Staging {
    fn new(allocation: &VulkanAllocation) -> Result<Self> {
        let host = halo_hal::Allocation::host_ptr(allocation)
            .ok_or_else(|| Error::internal("the staging buffer is not host-visible"))?;
        Ok(Staging {
            buffer: allocation.raw(),
            host,
            capacity: halo_hal::Allocation::size(allocation),
            used: 0,
        })
    }

    /// Appends `bytes`; returns their offset in the staging buffer.
    fn push(&mut self, bytes: &[u8]) -> u64 {
        let offset = self.used;
        assert!(
            offset + bytes.len() as u64 <= self.capacity,
            "staging buffer sized by `Needs` overflowed"
        );
        // SAFETY: the mapping covers `capacity` bytes and the range is inside it (checked above);
        // the device does not read the buffer before the submission.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.host.as_ptr().add(offset as usize), bytes.len()) };
        self.used += bytes.len() as u64;
        offset
    }
}

struct Recorder<'a> {
    shared: &'a Arc<DeviceShared>,
    command_buffer: vk::CommandBuffer,
    descriptor_pool: vk::DescriptorPool,
    table: &'a [Binding<'a>],
    staging: Option<Staging>,
    /// Present when the command list has indirect dispatches.
    guard: Option<Guard<'a>>,
    /// The index of the command being recorded.
    command_index: usize,
}

/// The guard's pipeline and buffer while recording, and the commands given entries so far.
struct Guard<'a> {
    pipeline: &'a GuardPipeline,
    buffer: vk::Buffer,
    commands: Vec<usize>,
}

/// How a dispatch gets its workgroup counts: given, or read from a guard entry.
enum Launch {
    Direct([u32; 3]),
    Indirect(vk::Buffer, u64),
}

/// A resolved range of a `VkBuffer`.
#[derive(Clone, Copy)]
struct Range {
    buffer: vk::Buffer,
    offset: u64,
    length: u64,
}

impl Recorder<'_> {
    fn device(&self) -> &ash::Device {
        &self.shared.raw
    }

    fn resolve(&self, reference: &BufferRef) -> Result<Range> {
        let resolved = reference.resolve(self.table)?;
        let allocation = VulkanAllocation::of(resolved.buffer, self.shared)?;
        Ok(Range {
            buffer: allocation.raw(),
            offset: resolved.buffer.byte_offset() + resolved.offset,
            length: resolved.length,
        })
    }

    fn record_all(&mut self, commands: &[Command]) -> Result<()> {
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: a fresh command buffer from the device's pool, recorded on this thread only.
        unsafe { self.device().begin_command_buffer(self.command_buffer, &begin) }.or_vk("vkBeginCommandBuffer")?;
        for (index, command) in commands.iter().enumerate() {
            self.command_index = index;
            self.record_one(command)
                .map_err(|e| e.context(format!("recording command {index} for Vulkan")))?;
        }
        self.barrier(
            vk::PipelineStageFlags::HOST,
            vk::AccessFlags::HOST_READ | vk::AccessFlags::HOST_WRITE,
        );
        // SAFETY: as for begin.
        unsafe { self.device().end_command_buffer(self.command_buffer) }.or_vk("vkEndCommandBuffer")
    }

    fn record_one(&mut self, command: &Command) -> Result<()> {
        match command {
            Command::Barrier => {
                self.barrier(
                    vk::PipelineStageFlags::ALL_COMMANDS,
                    vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
                );
                Ok(())
            }
            Command::Fill { target, pattern } => {
                let target = self.resolve(target)?;
                self.fill(target, pattern);
                Ok(())
            }
            Command::Update { data, target } => {
                let target = self.resolve(target)?;
                self.copy_from_staging(data, target.buffer, target.offset);
                Ok(())
            }
            Command::Copy { source, target } => {
                let (source, target) = (self.resolve(source)?, self.resolve(target)?);
                self.copy(
                    source.buffer,
                    source.offset,
                    target.buffer,
                    target.offset,
                    source.length,
                );
                Ok(())
            }
            Command::Dispatch(dispatch) => self.dispatch(dispatch),
        }
    }

    /// Makes all earlier writes visible to `stages` with `access`.
    fn barrier(&self, stages: vk::PipelineStageFlags, access: vk::AccessFlags) {
        let barrier = vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
            .dst_access_mask(access);
        // SAFETY: recording into a command buffer in the recording state.
        unsafe {
            self.device().cmd_pipeline_barrier(
                self.command_buffer,
                vk::PipelineStageFlags::ALL_COMMANDS,
                stages,
                vk::DependencyFlags::empty(),
                &[barrier],
                &[],
                &[],
            )
        };
    }

    fn copy(&self, source: vk::Buffer, source_offset: u64, target: vk::Buffer, target_offset: u64, length: u64) {
        if length == 0 {
            return;
        }
        let region = vk::BufferCopy::default()
            .src_offset(source_offset)
            .dst_offset(target_offset)
            .size(length);
        // SAFETY: both ranges were checked against their buffers by the HAL's validation.
        unsafe {
            self.device()
                .cmd_copy_buffer(self.command_buffer, source, target, &[region])
        };
    }

    fn copy_from_staging(&mut self, bytes: &[u8], target: vk::Buffer, target_offset: u64) {
        if bytes.is_empty() {
            return;
        }
        let staging = self
            .staging
            .as_mut()
            .expect("`Needs` reserved staging for this command");
        let (buffer, offset) = (staging.buffer, staging.push(bytes));
        self.copy(buffer, offset, target, target_offset, bytes.len() as u64);
    }

    /// Repeats `pattern` (1, 2 or 4 bytes; the range starts on a multiple of its length) over
    /// `target`.
    fn fill(&mut self, target: Range, pattern: &[u8]) {
        let end = target.offset + target.length;
        let byte_at = |position: u64| pattern[((position - target.offset) % pattern.len() as u64) as usize];
        let middle_start = target.offset.next_multiple_of(4).min(end);
        let middle_end = (end / 4 * 4).max(middle_start);
        if middle_end > middle_start {
            let word = u32::from_le_bytes([0, 1, 2, 3].map(|k| byte_at(middle_start + k)));
            // SAFETY: recording; the range is inside the buffer and 4-byte aligned.
            unsafe {
                self.device().cmd_fill_buffer(
                    self.command_buffer,
                    target.buffer,
                    middle_start,
                    middle_end - middle_start,
                    word,
                )
            };
        }
        for (start, stop) in [(target.offset, middle_start), (middle_end, end)] {
            let edge: Vec<u8> = (start..stop).map(byte_at).collect();
            self.copy_from_staging(&edge, target.buffer, start);
        }
    }

    fn dispatch(&mut self, dispatch: &DispatchCommand) -> Result<()> {
        let export = dispatch_export(self.shared, dispatch)?;
        // Vulkan leaves counts beyond the device's limits undefined: static ones are refused
        // here, indirect ones are checked on the device by the guard, recorded first since it
        // binds a pipeline of its own.
        let launch = match &dispatch.workgroup_count {
            WorkgroupCount::Static(count) => {
                let limit = self.shared.limits.max_compute_work_group_count;
                if (0..3).any(|i| count[i] > limit[i]) {
                    return Err(Error::out_of_range(format!(
                        "workgroup count {count:?} of dispatch export {} exceeds the device's limits {limit:?}",
                        dispatch.export
                    )));
                }
                Launch::Direct(*count)
            }
            WorkgroupCount::Indirect(reference) => {
                let (buffer, offset) = self.guard_indirect_counts(reference)?;
                Launch::Indirect(buffer, offset)
            }
        };
        let sets = self.descriptor_sets(export, dispatch)?;
        let device = self.device();
        let constants: Vec<u8> = dispatch.constants.iter().flat_map(|c| c.to_le_bytes()).collect();
        // SAFETY: recording; the pipeline, its layout and the sets are alive (the command buffer
        // holds the executable) and the sets were written for this layout.
        unsafe {
            device.cmd_bind_pipeline(self.command_buffer, vk::PipelineBindPoint::COMPUTE, export.pipeline);
            if !sets.is_empty() {
                device.cmd_bind_descriptor_sets(
                    self.command_buffer,
                    vk::PipelineBindPoint::COMPUTE,
                    export.layout,
                    0,
                    &sets,
                    &[],
                );
            }
            if !constants.is_empty() {
                device.cmd_push_constants(
                    self.command_buffer,
                    export.layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    &constants,
                );
            }
        }
        match launch {
            Launch::Direct([x, y, z]) => {
                // SAFETY: recording a dispatch of the pipeline bound above.
                unsafe { device.cmd_dispatch(self.command_buffer, x, y, z) };
            }
            Launch::Indirect(buffer, offset) => {
                // SAFETY: recording; the guard entry holds 3 words that its shader wrote and a
                // barrier made visible to indirect reads.
                unsafe { device.cmd_dispatch_indirect(self.command_buffer, buffer, offset) };
            }
        }
        Ok(())
    }

    /// Records the guard of the indirect counts at `reference`; returns where the dispatch reads
    /// its checked counts from.
    fn guard_indirect_counts(&mut self, reference: &BufferRef) -> Result<(vk::Buffer, u64)> {
        let counts = self.resolve(reference)?;
        if counts.offset % 4 != 0 {
            return Err(Error::invalid_argument(format!(
                "indirect workgroup counts at byte {} are not 4-byte aligned, as Vulkan requires",
                counts.offset
            )));
        }
        let Some(guard) = &self.guard else {
            return Err(Error::internal("an indirect dispatch that `Needs` did not count"));
        };
        let (pipeline, guard_buffer, entry) = (guard.pipeline, guard.buffer, guard.commands.len() as u64);
        let alignment = self.shared.limits.min_storage_buffer_offset_alignment.max(4);
        let source_offset = counts.offset - counts.offset % alignment;
        let set_layouts = [pipeline.set_layout];
        let info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(self.descriptor_pool)
            .set_layouts(&set_layouts);
        // SAFETY: the pool was sized by `Needs`, one set and two descriptors per indirect dispatch.
        let set = unsafe { self.device().allocate_descriptor_sets(&info) }.or_vk("vkAllocateDescriptorSets")?[0];
        let source = [vk::DescriptorBufferInfo::default()
            .buffer(counts.buffer)
            .offset(source_offset)
            .range(counts.offset - source_offset + 12)];
        let target = [vk::DescriptorBufferInfo::default()
            .buffer(guard_buffer)
            .offset(0)
            .range(vk::WHOLE_SIZE)];
        let writes = [(0, &source), (1, &target)].map(|(binding, info)| {
            vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(binding)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(info)
        });
        // SAFETY: the set is fresh and unused; both buffers are alive for the submission.
        unsafe { self.device().update_descriptor_sets(&writes, &[]) };
        let params = GuardParams {
            source_word: ((counts.offset - source_offset) / 4) as u32,
            guard_word: (entry * indirect_guard::ENTRY_BYTES / 4) as u32,
            limits: self.shared.limits.max_compute_work_group_count,
        };
        pipeline.record(self.device(), self.command_buffer, set, params);
        if let Some(guard) = &mut self.guard {
            guard.commands.push(self.command_index);
        }
        Ok((guard_buffer, entry * indirect_guard::ENTRY_BYTES))
    }

    /// Allocates and writes the descriptor sets of one dispatch.
    fn descriptor_sets(&self, export: &Export, dispatch: &DispatchCommand) -> Result<Vec<vk::DescriptorSet>> {
        if export.set_layouts.is_empty() {
            return Ok(Vec::new());
        }
        let info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(self.descriptor_pool)
            .set_layouts(&export.set_layouts);
        // SAFETY: the pool was sized by `Needs` for every set of this command list.
        let sets = unsafe { self.device().allocate_descriptor_sets(&info) }.or_vk("vkAllocateDescriptorSets")?;
        let alignment = self.shared.limits.min_storage_buffer_offset_alignment.max(1);
        let max_range = u64::from(self.shared.limits.max_storage_buffer_range);
        let mut infos = Vec::with_capacity(export.slots.len());
        for (ordinal, reference) in dispatch.bindings.iter().enumerate() {
            let range = self
                .resolve(reference)
                .map_err(|e| e.context(format!("binding {ordinal}")))?;
            if range.offset % alignment != 0 {
                return Err(Error::unimplemented(format!(
                    "binding {ordinal} starts at byte {} of its Vulkan buffer; the device binds storage \
                     buffers only at multiples of {alignment}",
                    range.offset
                )));
            }
            if range.length > max_range {
                return Err(Error::out_of_range(format!(
                    "binding {ordinal} is {} bytes; the device binds at most {max_range}",
                    range.length
                )));
            }
            let length = if range.length == 0 {
                vk::WHOLE_SIZE
            } else {
                range.length
            };
            infos.push(
                vk::DescriptorBufferInfo::default()
                    .buffer(range.buffer)
                    .offset(range.offset)
                    .range(length),
            );
        }
        let writes: Vec<vk::WriteDescriptorSet> = export
            .slots
            .iter()
            .zip(&infos)
            .map(|(slot, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(sets[slot.set as usize])
                    .dst_binding(slot.binding)
                    .dst_array_element(slot.array_element)
                    .descriptor_type(slot.descriptor_type)
                    .buffer_info(std::slice::from_ref(info))
            })
            .collect();
        // SAFETY: every set, buffer and info is alive for the call.
        unsafe { self.device().update_descriptor_sets(&writes, &[]) };
        Ok(sets)
    }
}
