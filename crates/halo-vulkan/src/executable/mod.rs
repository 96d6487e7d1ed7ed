//! Executables in the `vulkan-spirv-fb` format: a 64-byte header, then a `VKE1` FlatBuffer of
//! SPIR-V modules, descriptor set layouts, pipeline layouts and one compute pipeline per export.
//!
//! HAL binding ordinals are the bindings of the export's set layouts flattened in order (set by
//! set, bindings in the order listed, array elements in order); HAL constants are push constants
//! from byte 0; executable-level constants are specialization constants 0, 1, ...

use crate::device::DeviceShared;
use crate::status::VkResultExt;
use ash::vk;
use halo_hal::{Error, Executable, ExecutableCache, ExecutableParams, ExportInfo, Result};
use halo_spirv_check::CheckedModule;
use halo_spirv_fb::schema::{self, ExecutableDef, VkDescriptorType};
use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;

pub use halo_spirv_fb::FORMAT;

/// Where one HAL binding goes in the export's descriptor sets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    /// Index of the set in the pipeline layout.
    pub(crate) set: u32,
    pub(crate) binding: u32,
    pub(crate) array_element: u32,
    pub(crate) descriptor_type: vk::DescriptorType,
}

/// One export: its compute pipeline and how its bindings and constants reach it.
pub(crate) struct Export {
    info: ExportInfo,
    pub(crate) pipeline: vk::Pipeline,
    pub(crate) layout: vk::PipelineLayout,
    /// The set layouts of `layout`, in set order.
    pub(crate) set_layouts: Vec<vk::DescriptorSetLayout>,
    /// HAL binding ordinal → descriptor slot.
    pub(crate) slots: Vec<Slot>,
}

/// A loaded Vulkan executable.
///
/// Ownership: owns its pipelines and layouts; keeps its device alive. Threading: any thread.
pub struct VulkanExecutable {
    shared: Arc<DeviceShared>,
    exports: Vec<Export>,
    set_layouts: Vec<vk::DescriptorSetLayout>,
    pipeline_layouts: Vec<vk::PipelineLayout>,
}

impl VulkanExecutable {
    /// Export `ordinal`, checking that the executable is on the device `shared`.
    pub(crate) fn export(&self, ordinal: u32, shared: &Arc<DeviceShared>) -> Result<&Export> {
        if !Arc::ptr_eq(&self.shared, shared) {
            return Err(Error::invalid_argument(
                "the executable belongs to another Vulkan device",
            ));
        }
        self.exports.get(ordinal as usize).ok_or_else(|| {
            Error::out_of_range(format!(
                "export ordinal {ordinal} is out of range; the executable has {} exports",
                self.exports.len()
            ))
        })
    }

    fn load(shared: Arc<DeviceShared>, data: &[u8], constants: &[u32]) -> Result<Self> {
        let def = halo_spirv_fb::parse(data)?;
        let mut executable = VulkanExecutable {
            shared,
            exports: Vec::new(),
            set_layouts: Vec::new(),
            pipeline_layouts: Vec::new(),
        };
        // On error, `executable`'s drop destroys whatever was created so far.
        executable.create_set_layouts(&def)?;
        executable.create_pipeline_layouts(&def)?;
        let shared = executable.shared.clone();
        match &shared.pipeline_store {
            None => executable.create_pipelines(&def, constants, shared.pipeline_cache)?,
            Some(store) => {
                let cache = store.open(&shared.raw, data, constants)?;
                let created = executable.create_pipelines(&def, constants, cache.raw);
                store.close(&shared.raw, cache, created.is_ok());
                created?;
            }
        }
        Ok(executable)
    }

    fn create_set_layouts(&mut self, def: &ExecutableDef<'_>) -> Result<()> {
        for (index, layout) in def.descriptor_set_layouts().into_iter().flatten().enumerate() {
            let mut bindings = Vec::new();
            for binding in layout.bindings().into_iter().flatten() {
                let kind = descriptor_type(binding.descriptor_type())?;
                let limit = match kind {
                    vk::DescriptorType::UNIFORM_BUFFER => self.shared.limits.max_per_stage_descriptor_uniform_buffers,
                    _ => self.shared.limits.max_per_stage_descriptor_storage_buffers,
                };
                if binding.descriptor_count() > limit {
                    return Err(Error::invalid_argument(format!(
                        "descriptor set layout {index}, binding {}: {} descriptors exceed the device's \
                         {limit} per shader stage",
                        binding.binding(),
                        binding.descriptor_count()
                    )));
                }
                bindings.push(
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(binding.binding())
                        .descriptor_type(kind)
                        .descriptor_count(binding.descriptor_count())
                        .stage_flags(vk::ShaderStageFlags::COMPUTE),
                );
            }
            let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
            // SAFETY: the device is alive and `info` valid for the call; the layout is destroyed
            // in `drop`.
            let raw = unsafe { self.shared.raw.create_descriptor_set_layout(&info, None) }
                .or_vk("vkCreateDescriptorSetLayout")
                .map_err(|e| e.context(format!("creating descriptor set layout {index}")))?;
            self.set_layouts.push(raw);
        }
        Ok(())
    }

    fn create_pipeline_layouts(&mut self, def: &ExecutableDef<'_>) -> Result<()> {
        for (index, layout) in def.pipeline_layouts().into_iter().flatten().enumerate() {
            let mut sets = Vec::new();
            for ordinal in layout.descriptor_set_layout_ordinals().into_iter().flatten() {
                sets.push(*self.set_layouts.get(ordinal as usize).ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "pipeline layout {index} names descriptor set layout {ordinal} of {}",
                        self.set_layouts.len()
                    ))
                })?);
            }
            let ranges: Vec<vk::PushConstantRange> = layout
                .push_constant_ranges()
                .into_iter()
                .flatten()
                .map(|r| {
                    vk::PushConstantRange::default()
                        .stage_flags(vk::ShaderStageFlags::COMPUTE)
                        .offset(r.offset())
                        .size(r.size())
                })
                .collect();
            let max_push = self.shared.limits.max_push_constants_size;
            if let Some(bad) = ranges
                .iter()
                .find(|r| r.offset % 4 != 0 || r.size % 4 != 0 || r.offset + r.size > max_push)
            {
                return Err(Error::invalid_argument(format!(
                    "pipeline layout {index}: push constant range [{}, {}) is unaligned or exceeds the \
                     device's {max_push} bytes",
                    bad.offset,
                    bad.offset + bad.size
                )));
            }
            let info = vk::PipelineLayoutCreateInfo::default()
                .set_layouts(&sets)
                .push_constant_ranges(&ranges);
            // SAFETY: as for set layouts.
            let raw = unsafe { self.shared.raw.create_pipeline_layout(&info, None) }
                .or_vk("vkCreatePipelineLayout")
                .map_err(|e| e.context(format!("creating pipeline layout {index}")))?;
            self.pipeline_layouts.push(raw);
        }
        Ok(())
    }

    fn create_pipelines(&mut self, def: &ExecutableDef<'_>, constants: &[u32], cache: vk::PipelineCache) -> Result<()> {
        let modules = def
            .shader_modules()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(ordinal, m)| {
                let words = m.spirv_code().map(|code| code.iter().collect()).unwrap_or_default();
                CheckedModule::new(words, self.shared.max_spirv_version)
                    .map_err(|e| e.context(format!("checking shader module {ordinal}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let pipelines = def
            .pipelines()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| Error::invalid_argument("executable declares no pipelines"))?;
        for (ordinal, pipeline) in pipelines.iter().enumerate() {
            let export = self
                .create_export(def, &modules, &pipeline, constants, cache)
                .map_err(|e| e.context(format!("creating the pipeline of export {ordinal}")))?;
            self.exports.push(export);
        }
        Ok(())
    }

    fn create_export(
        &self,
        def: &ExecutableDef<'_>,
        modules: &[CheckedModule],
        pipeline: &schema::PipelineDef<'_>,
        constants: &[u32],
        cache: vk::PipelineCache,
    ) -> Result<Export> {
        let entry_point = pipeline
            .entry_point()
            .filter(|e| !e.is_empty())
            .ok_or_else(|| Error::invalid_argument("pipeline has no entry point name"))?;
        if pipeline.dispatch_abi() != schema::DispatchAbi::DESCRIPTOR {
            return Err(Error::unimplemented(format!(
                "'{entry_point}' uses the buffer-device-address dispatch ABI; halo runs the descriptor ABI \
                 (format {FORMAT})"
            )));
        }
        if pipeline.subgroup_size() != 0 {
            return Err(Error::unimplemented(format!(
                "'{entry_point}' requires subgroup size {}; halo does not control subgroup sizes yet",
                pipeline.subgroup_size()
            )));
        }
        let module = modules.get(pipeline.shader_module_ordinal() as usize).ok_or_else(|| {
            Error::invalid_argument(format!(
                "'{entry_point}' names shader module {} of {}",
                pipeline.shader_module_ordinal(),
                modules.len()
            ))
        })?;
        let layout_ordinal = pipeline.pipeline_layout_ordinal() as usize;
        let layout = *self.pipeline_layouts.get(layout_ordinal).ok_or_else(|| {
            Error::invalid_argument(format!(
                "'{entry_point}' names pipeline layout {layout_ordinal} of {}",
                self.pipeline_layouts.len()
            ))
        })?;
        let layout_def = def
            .pipeline_layouts()
            .map(|l| l.get(layout_ordinal))
            .ok_or_else(|| Error::invalid_argument("executable has no pipeline layouts"))?;
        let (set_layouts, slots) = self.slots(def, &layout_def)?;
        let bindings: HashSet<(u32, u32)> = slots.iter().map(|s| (s.set, s.binding)).collect();
        let has_push_constants = layout_def.push_constant_ranges().is_some_and(|r| !r.is_empty());
        let workgroup_size = module
            .check_entry_point(entry_point, &bindings, has_push_constants)?
            .unwrap_or([0; 3]);
        let constant_count = layout_def
            .push_constant_ranges()
            .into_iter()
            .flatten()
            .map(|r| (r.offset() + r.size()) / 4)
            .max()
            .unwrap_or(0);
        let raw = self.create_pipeline(module.words(), entry_point, layout, constants, cache)?;
        let name = pipeline
            .debug_info()
            .and_then(|d| d.name())
            .unwrap_or(entry_point)
            .to_string();
        Ok(Export {
            info: ExportInfo {
                name,
                constant_count,
                binding_count: slots.len() as u32,
                workgroup_size,
            },
            pipeline: raw,
            layout,
            set_layouts,
            slots,
        })
    }

    /// The set layouts of a pipeline layout and its HAL bindings flattened into slots.
    fn slots(
        &self,
        def: &ExecutableDef<'_>,
        layout: &schema::PipelineLayoutDef<'_>,
    ) -> Result<(Vec<vk::DescriptorSetLayout>, Vec<Slot>)> {
        let (mut set_layouts, mut slots) = (Vec::new(), Vec::new());
        let set_defs = def.descriptor_set_layouts();
        for (set, ordinal) in layout
            .descriptor_set_layout_ordinals()
            .into_iter()
            .flatten()
            .enumerate()
        {
            // In range: checked when the pipeline layout was created.
            set_layouts.push(self.set_layouts[ordinal as usize]);
            let Some(set_def) = set_defs.map(|s| s.get(ordinal as usize)) else {
                continue;
            };
            for binding in set_def.bindings().into_iter().flatten() {
                let descriptor_type = descriptor_type(binding.descriptor_type())?;
                for array_element in 0..binding.descriptor_count() {
                    slots.push(Slot {
                        set: set as u32,
                        binding: binding.binding(),
                        array_element,
                        descriptor_type,
                    });
                }
            }
        }
        Ok((set_layouts, slots))
    }

    fn create_pipeline(
        &self,
        code: &[u32],
        entry_point: &str,
        layout: vk::PipelineLayout,
        constants: &[u32],
        cache: vk::PipelineCache,
    ) -> Result<vk::Pipeline> {
        let module_info = vk::ShaderModuleCreateInfo::default().code(code);
        // SAFETY: `code` is a SPIR-V module that passed `CheckedModule`'s checks; the module is
        // destroyed below once the pipeline exists.
        let module =
            unsafe { self.shared.raw.create_shader_module(&module_info, None) }.or_vk("vkCreateShaderModule")?;
        let name = std::ffi::CString::new(entry_point)
            .map_err(|_| Error::invalid_argument(format!("entry point '{entry_point}' contains a NUL byte")))?;
        let entries: Vec<vk::SpecializationMapEntry> = (0..constants.len() as u32)
            .map(|i| {
                vk::SpecializationMapEntry::default()
                    .constant_id(i)
                    .offset(4 * i)
                    .size(4)
            })
            .collect();
        let constant_bytes: Vec<u8> = constants.iter().flat_map(|c| c.to_le_bytes()).collect();
        let specialization = vk::SpecializationInfo::default()
            .map_entries(&entries)
            .data(&constant_bytes);
        let mut stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(&name);
        if !constants.is_empty() {
            stage = stage.specialization_info(&specialization);
        }
        let info = vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout);
        // SAFETY: every handle is alive; the cache is the device's and internally synchronized.
        let created = unsafe { self.shared.raw.create_compute_pipelines(cache, &[info], None) };
        // SAFETY: pipeline creation has returned, so the module is no longer needed.
        unsafe { self.shared.raw.destroy_shader_module(module, None) };
        match created {
            Ok(pipelines) => Ok(pipelines[0]),
            Err((_, result)) => Err(crate::status::vk_error(result, "vkCreateComputePipelines")
                .context(format!("compiling entry point '{entry_point}'"))),
        }
    }
}

impl Drop for VulkanExecutable {
    fn drop(&mut self) {
        // SAFETY: command buffers that dispatch this executable hold an `Arc` of it until their
        // submissions complete, so nothing uses these objects; children go first.
        unsafe {
            for export in &self.exports {
                self.shared.raw.destroy_pipeline(export.pipeline, None);
            }
            for layout in &self.pipeline_layouts {
                self.shared.raw.destroy_pipeline_layout(*layout, None);
            }
            for layout in &self.set_layouts {
                self.shared.raw.destroy_descriptor_set_layout(*layout, None);
            }
        }
    }
}

impl Executable for VulkanExecutable {
    fn format(&self) -> &str {
        FORMAT
    }

    fn export_count(&self) -> u32 {
        self.exports.len() as u32
    }

    fn export_info(&self, ordinal: u32) -> Result<ExportInfo> {
        halo_hal::executable::check_export_ordinal(self, ordinal)?;
        Ok(self.exports[ordinal as usize].info.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The Vulkan descriptor type of a binding; samplers are not for compute buffers.
fn descriptor_type(kind: VkDescriptorType) -> Result<vk::DescriptorType> {
    match kind {
        VkDescriptorType::STORAGE_BUFFER => Ok(vk::DescriptorType::STORAGE_BUFFER),
        VkDescriptorType::UNIFORM_BUFFER => Ok(vk::DescriptorType::UNIFORM_BUFFER),
        other => Err(Error::unimplemented(format!(
            "descriptor type {} is not supported (only storage and uniform buffers)",
            other.0
        ))),
    }
}

/// Prepares `vulkan-spirv-fb` executables for one device.
pub struct VulkanExecutableCache {
    shared: Arc<DeviceShared>,
}

impl VulkanExecutableCache {
    pub(crate) fn new(shared: Arc<DeviceShared>) -> Self {
        VulkanExecutableCache { shared }
    }
}

impl ExecutableCache for VulkanExecutableCache {
    fn can_prepare_format(&self, format: &str) -> bool {
        format == FORMAT
    }

    fn supported_formats(&self) -> Vec<String> {
        vec![FORMAT.to_string()]
    }

    fn prepare_executable(&self, params: &ExecutableParams<'_>) -> Result<Arc<dyn Executable>> {
        self.check_format(params.format)?;
        Ok(Arc::new(VulkanExecutable::load(
            self.shared.clone(),
            params.data,
            params.constants,
        )?))
    }
}
