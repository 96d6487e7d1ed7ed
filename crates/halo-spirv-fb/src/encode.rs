//! Writing `vulkan-spirv-fb` executables: what `iree-compile` writes, for tests and tools that
//! make SPIR-V programs of their own and run them through a driver.

use crate::schema::{self, debug, DispatchAbi, VkDescriptorType};
use crate::{SpirvExecutable, SpirvExport};
use flatbuffers::{FlatBufferBuilder, WIPOffset};
use halo_hal::executable::GPU_HEADER_SIZE;

/// `VK_SHADER_STAGE_COMPUTE_BIT`: the stage every binding and push constant range is for.
const COMPUTE_STAGE: u32 = 0x20;

/// `executable` as a `vulkan-spirv-fb` file: [`crate::decode`] gives it back. Each export gets a
/// pipeline layout of its own, with one descriptor set layout per set up to its highest, holding
/// its bindings as storage buffers, and push constants from byte 0.
pub fn encode(executable: &SpirvExecutable) -> Vec<u8> {
    let mut fbb = FlatBufferBuilder::new();
    let mut set_layouts = Vec::new();
    let mut layouts = Vec::new();
    let mut pipelines = Vec::new();
    for (ordinal, export) in executable.exports.iter().enumerate() {
        let mut set_ordinals = Vec::new();
        for set in 0..export.bindings.iter().map(|b| b.set + 1).max().unwrap_or(0) {
            set_ordinals.push(set_layouts.len() as u32);
            set_layouts.push(set_layout(&mut fbb, export, set));
        }
        layouts.push(pipeline_layout(&mut fbb, export, &set_ordinals));
        pipelines.push(pipeline(&mut fbb, export, ordinal as u32));
    }
    let modules: Vec<_> = executable
        .modules
        .iter()
        .map(|words| {
            let spirv_code = Some(fbb.create_vector(words));
            schema::ShaderModuleDef::create(&mut fbb, &schema::ShaderModuleDefArgs { spirv_code })
        })
        .collect();
    let args = schema::ExecutableDefArgs {
        pipelines: Some(fbb.create_vector(&pipelines)),
        descriptor_set_layouts: Some(fbb.create_vector(&set_layouts)),
        pipeline_layouts: Some(fbb.create_vector(&layouts)),
        shader_modules: Some(fbb.create_vector(&modules)),
        source_files: None,
    };
    let root = schema::ExecutableDef::create(&mut fbb, &args);
    schema::finish_executable_def_buffer(&mut fbb, root);
    let body = fbb.finished_data();
    let mut file = vec![0u8; GPU_HEADER_SIZE];
    file[..4].copy_from_slice(b"VKE1");
    file[8..16].copy_from_slice(&(body.len() as u64).to_le_bytes());
    file.extend_from_slice(body);
    file
}

fn set_layout<'a>(
    fbb: &mut FlatBufferBuilder<'a>,
    export: &SpirvExport,
    set: u32,
) -> WIPOffset<schema::DescriptorSetLayoutDef<'a>> {
    let bindings: Vec<_> = export
        .bindings
        .iter()
        .filter(|slot| slot.set == set)
        .map(|slot| {
            let args = schema::DescriptorSetLayoutBindingDefArgs {
                binding: slot.binding,
                descriptor_type: VkDescriptorType::STORAGE_BUFFER,
                descriptor_count: 1,
                stage_flags: COMPUTE_STAGE,
            };
            schema::DescriptorSetLayoutBindingDef::create(fbb, &args)
        })
        .collect();
    let bindings = Some(fbb.create_vector(&bindings));
    schema::DescriptorSetLayoutDef::create(fbb, &schema::DescriptorSetLayoutDefArgs { bindings })
}

fn pipeline_layout<'a>(
    fbb: &mut FlatBufferBuilder<'a>,
    export: &SpirvExport,
    set_ordinals: &[u32],
) -> WIPOffset<schema::PipelineLayoutDef<'a>> {
    let ranges: Vec<_> = (export.constant_count > 0)
        .then(|| schema::PushConstantRange::new(COMPUTE_STAGE, 0, 4 * export.constant_count))
        .into_iter()
        .collect();
    let args = schema::PipelineLayoutDefArgs {
        descriptor_set_layout_ordinals: Some(fbb.create_vector(set_ordinals)),
        push_constant_ranges: Some(fbb.create_vector(&ranges)),
    };
    schema::PipelineLayoutDef::create(fbb, &args)
}

fn pipeline<'a>(
    fbb: &mut FlatBufferBuilder<'a>,
    export: &SpirvExport,
    layout: u32,
) -> WIPOffset<schema::PipelineDef<'a>> {
    let name = Some(fbb.create_string(&export.name));
    let debug_info = Some(debug::ExportDef::create(
        fbb,
        &debug::ExportDefArgs {
            name,
            ..Default::default()
        },
    ));
    let args = schema::PipelineDefArgs {
        shader_module_ordinal: export.module as u32,
        entry_point: Some(fbb.create_string(&export.entry_point)),
        pipeline_layout_ordinal: layout,
        subgroup_size: export.subgroup_size,
        debug_info,
        dispatch_abi: DispatchAbi::DESCRIPTOR,
        bda_dispatch_layout: None,
    };
    schema::PipelineDef::create(fbb, &args)
}
