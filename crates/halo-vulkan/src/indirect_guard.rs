//! The guard in front of every indirect dispatch: workgroup counts read from a buffer at run time
//! are checked against `maxComputeWorkGroupCount` on the device, where they are, before the
//! dispatch reads them. Vulkan leaves counts beyond the limits undefined (a hang on lavapipe, a
//! lost device elsewhere), and the host cannot see counts that earlier commands of the same
//! submission write.
//!
//! Each indirect dispatch gets an 8-word entry in a host-visible guard buffer. A one-invocation
//! shader (`shaders/indirect_guard.comp`) copies the counts there when they fit, writes
//! (0, 0, 0) and a flag when they do not, and the dispatch reads its counts from the entry. When
//! the submission completes the host reads the flags and fails the submission for the first
//! dispatch whose counts did not fit.

use crate::status::VkResultExt;
use ash::vk;
use halo_hal::{Error, Result};
use std::sync::OnceLock;

/// The guard shader, compiled by `scripts/compile-vulkan-shaders`.
const SHADER: &[u8] = include_bytes!("shaders/indirect_guard.spv");

/// Bytes of one dispatch's entry in the guard buffer.
pub(crate) const ENTRY_BYTES: u64 = 32;

/// Descriptors the guard needs per indirect dispatch (its source and its entry).
pub(crate) const DESCRIPTORS_PER_DISPATCH: u32 = 2;

/// The shader's push constants, in its declared order.
#[derive(Clone, Copy)]
pub(crate) struct GuardParams {
    /// Word index of the counts in the bound source range.
    pub source_word: u32,
    /// Word index of the dispatch's entry in the guard buffer.
    pub guard_word: u32,
    /// `maxComputeWorkGroupCount`.
    pub limits: [u32; 3],
}

impl GuardParams {
    fn bytes(&self) -> Vec<u8> {
        [
            self.source_word,
            self.guard_word,
            self.limits[0],
            self.limits[1],
            self.limits[2],
        ]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
    }
}

/// The guard's pipeline and layouts, made once per device on its first indirect dispatch.
pub(crate) struct GuardPipeline {
    pub(crate) set_layout: vk::DescriptorSetLayout,
    pub(crate) layout: vk::PipelineLayout,
    pub(crate) pipeline: vk::Pipeline,
}

impl GuardPipeline {
    /// The pipeline of `cell`, created on first use.
    pub(crate) fn get<'a>(
        cell: &'a OnceLock<GuardPipeline>,
        device: &ash::Device,
        cache: vk::PipelineCache,
    ) -> Result<&'a GuardPipeline> {
        if let Some(pipeline) = cell.get() {
            return Ok(pipeline);
        }
        let created = GuardPipeline::create(device, cache)?;
        if let Err(extra) = cell.set(created) {
            // Another thread made it first.
            extra.destroy(device);
        }
        cell.get()
            .ok_or_else(|| Error::internal("the indirect dispatch guard was not kept"))
    }

    fn create(device: &ash::Device, cache: vk::PipelineCache) -> Result<Self> {
        let bindings = [0, 1].map(|binding| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(binding)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        });
        let set_info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY: the device is alive; the layout is destroyed by `destroy`.
        let set_layout =
            unsafe { device.create_descriptor_set_layout(&set_info, None) }.or_vk("vkCreateDescriptorSetLayout")?;
        let mut pipeline = GuardPipeline {
            set_layout,
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
        };
        if let Err(error) = pipeline.create_pipeline(device, cache) {
            pipeline.destroy(device);
            return Err(error.context("creating the indirect dispatch guard"));
        }
        Ok(pipeline)
    }

    fn create_pipeline(&mut self, device: &ash::Device, cache: vk::PipelineCache) -> Result<()> {
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(20)];
        let set_layouts = [self.set_layout];
        let layout_info = vk::PipelineLayoutCreateInfo::default()
            .set_layouts(&set_layouts)
            .push_constant_ranges(&ranges);
        // SAFETY: the device and set layout are alive; destroyed by `destroy`.
        self.layout = unsafe { device.create_pipeline_layout(&layout_info, None) }.or_vk("vkCreatePipelineLayout")?;
        let code = ash::util::read_spv(&mut std::io::Cursor::new(SHADER))
            .map_err(|e| Error::internal(format!("reading the guard shader: {e}")))?;
        let module_info = vk::ShaderModuleCreateInfo::default().code(&code);
        // SAFETY: `code` is the validated SPIR-V compiled from `indirect_guard.comp`; the module is
        // destroyed below once the pipeline exists.
        let module = unsafe { device.create_shader_module(&module_info, None) }.or_vk("vkCreateShaderModule")?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let info = vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(self.layout);
        // SAFETY: every handle is alive; the cache is the device's and internally synchronized.
        let created = unsafe { device.create_compute_pipelines(cache, &[info], None) };
        // SAFETY: pipeline creation has returned, so the module is no longer needed.
        unsafe { device.destroy_shader_module(module, None) };
        self.pipeline = created
            .map_err(|(_, result)| crate::status::vk_error(result, "vkCreateComputePipelines"))?
            .into_iter()
            .next()
            .unwrap_or_default();
        Ok(())
    }

    /// Destroys the objects; no command buffer that used them may still be pending.
    pub(crate) fn destroy(&self, device: &ash::Device) {
        // SAFETY: per the contract above nothing uses these objects; null handles are ignored.
        unsafe {
            device.destroy_pipeline(self.pipeline, None);
            device.destroy_pipeline_layout(self.layout, None);
            device.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }

    /// Records the guard of one dispatch: `source` holds the counts at word `params.source_word`,
    /// `entry` is the guard buffer. Binds this pipeline, so it goes before the dispatch's own
    /// bindings, and ends with the barrier that lets the dispatch read the entry.
    pub(crate) fn record(
        &self,
        device: &ash::Device,
        command_buffer: vk::CommandBuffer,
        set: vk::DescriptorSet,
        params: GuardParams,
    ) {
        // SAFETY: recording into a command buffer in the recording state; the set was written
        // for this pipeline's set layout, and the push constants match its range.
        unsafe {
            device.cmd_bind_pipeline(command_buffer, vk::PipelineBindPoint::COMPUTE, self.pipeline);
            device.cmd_bind_descriptor_sets(
                command_buffer,
                vk::PipelineBindPoint::COMPUTE,
                self.layout,
                0,
                &[set],
                &[],
            );
            device.cmd_push_constants(
                command_buffer,
                self.layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                &params.bytes(),
            );
            device.cmd_dispatch(command_buffer, 1, 1, 1);
            let barrier = vk::MemoryBarrier::default()
                .src_access_mask(vk::AccessFlags::SHADER_WRITE)
                .dst_access_mask(vk::AccessFlags::INDIRECT_COMMAND_READ);
            device.cmd_pipeline_barrier(
                command_buffer,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::PipelineStageFlags::DRAW_INDIRECT,
                vk::DependencyFlags::empty(),
                &[barrier],
                &[],
                &[],
            );
        }
    }
}

/// The first entry of `entries` (the guard buffer's words, read after completion) whose counts
/// were beyond `limits`, as an error naming the command and the counts.
pub(crate) fn check(entries: &[u32], commands: &[usize], limits: [u32; 3]) -> Result<()> {
    for (entry, command) in entries.chunks_exact(8).zip(commands) {
        if entry[3] != 0 {
            return Err(Error::out_of_range(format!(
                "indirect dispatch (command {command}) read workgroup counts ({}, {}, {}) beyond the \
                 device's limits ({}, {}, {}); it did not run",
                entry[4], entry[5], entry[6], limits[0], limits[1], limits[2]
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flagged_entry_names_its_command_and_counts() {
        let mut entries = vec![0u32; 16];
        entries[8 + 3] = 1;
        entries[8 + 4..8 + 7].copy_from_slice(&[70_000, 1, 1]);
        let error = check(&entries, &[2, 5], [65_535; 3]).unwrap_err();
        assert_eq!(error.code(), halo_hal::StatusCode::OutOfRange);
        assert!(error.message().contains("command 5"), "{error}");
        assert!(error.message().contains("(70000, 1, 1)"), "{error}");
        assert!(check(&entries[..8], &[2], [65_535; 3]).is_ok());
    }

    #[test]
    fn the_shader_is_spirv_with_a_main_entry() {
        let code = ash::util::read_spv(&mut std::io::Cursor::new(SHADER)).unwrap();
        assert_eq!(code[0], 0x0723_0203);
        assert!(SHADER.windows(5).any(|w| w == b"main\0"));
    }
}
