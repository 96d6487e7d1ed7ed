//! IREE's `vulkan-spirv-fb` executable format: a 64-byte header and a `VKE1` FlatBuffer of SPIR-V
//! modules, descriptor set layouts, pipeline layouts and one pipeline per export
//! (`schema/README.md` says what iree-compile 3.13 writes). Shared by the drivers that run these
//! programs: Vulkan creates pipelines from the raw tables ([`schema`]), OpenCL translates the
//! SPIR-V and needs only what [`decode`] gives.
//!
//! HAL binding ordinals are the bindings of an export's descriptor set layouts flattened in
//! order (set by set, bindings in the order listed, array elements in order); HAL constants are
//! push constants from byte 0; executable-level constants are specialization constants 0, 1, ...
#![warn(missing_docs)]

mod encode;
pub mod schema;

pub use encode::encode;

use halo_hal::{Error, Result};
use schema::{DispatchAbi, ExecutableDef};

/// Refuses SPIR-V words whose instructions after the 5-word header do not tile them exactly:
/// rspirv reads a literal string up to an instruction's stated end without checking that end
/// against the stream, so both drivers that parse these modules check this first.
///
/// # Errors
/// `InvalidArgument` naming the word where an instruction overruns, or a module shorter than
/// its header.
pub fn check_instruction_lengths(words: &[u32]) -> Result<()> {
    let mut at = 5;
    if words.len() < at {
        return Err(Error::invalid_argument("SPIR-V module is shorter than its header"));
    }
    while let Some(&word) = words.get(at) {
        let count = (word >> 16) as usize;
        if count == 0 || at + count > words.len() {
            return Err(Error::invalid_argument(format!(
                "SPIR-V instruction at word {at} has length {count}, past the module's {} words",
                words.len()
            )));
        }
        at += count;
    }
    Ok(())
}

/// The format name `iree-compile` gives Vulkan executables with descriptor-set bindings.
pub const FORMAT: &str = "vulkan-spirv-fb";

/// Checks the header and verifies the FlatBuffer.
///
/// # Errors
/// `InvalidArgument` or `Incompatible` naming what is wrong with the header or the FlatBuffer.
pub fn parse(data: &[u8]) -> Result<ExecutableDef<'_>> {
    let body = halo_hal::executable::gpu_flatbuffer(data, "VKE1", "Vulkan executable")?;
    schema::root_as_executable_def(body)
        .map_err(|e| Error::invalid_argument(format!("malformed Vulkan executable FlatBuffer: {e}")))
}

/// Where one HAL binding goes: the set's index in the export's pipeline layout and the binding
/// number in that set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindingSlot {
    /// Index of the descriptor set (the SPIR-V `DescriptorSet` decoration).
    pub set: u32,
    /// Binding number in the set (the SPIR-V `Binding` decoration).
    pub binding: u32,
}

/// One export, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpirvExport {
    /// The export's name (its debug name, else the entry point).
    pub name: String,
    /// The SPIR-V entry point.
    pub entry_point: String,
    /// Index of its SPIR-V module in [`SpirvExecutable::modules`].
    pub module: usize,
    /// HAL binding ordinal → descriptor slot.
    pub bindings: Vec<BindingSlot>,
    /// 32-bit push constants the export takes.
    pub constant_count: u32,
    /// The subgroup size the export was compiled for, or 0 for any.
    pub subgroup_size: u32,
}

/// A `vulkan-spirv-fb` executable, decoded into owned values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpirvExecutable {
    /// The SPIR-V modules.
    pub modules: Vec<Vec<u32>>,
    /// The exports, by ordinal.
    pub exports: Vec<SpirvExport>,
}

/// Decodes `data` into modules and exports with their bindings.
///
/// # Errors
/// As [`parse`], and `InvalidArgument` for an export naming a module or layout that is not
/// there; `Unimplemented` for the buffer-device-address ABI and descriptor arrays.
pub fn decode(data: &[u8]) -> Result<SpirvExecutable> {
    let def = parse(data)?;
    let modules: Vec<Vec<u32>> = def
        .shader_modules()
        .into_iter()
        .flatten()
        .map(|m| m.spirv_code().map(|code| code.iter().collect()).unwrap_or_default())
        .collect();
    let pipelines = def
        .pipelines()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| Error::invalid_argument("executable declares no pipelines"))?;
    let exports = pipelines
        .iter()
        .enumerate()
        .map(|(ordinal, pipeline)| {
            decode_export(&def, &pipeline, modules.len()).map_err(|e| e.context(format!("reading export {ordinal}")))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(SpirvExecutable { modules, exports })
}

fn decode_export(def: &ExecutableDef<'_>, pipeline: &schema::PipelineDef<'_>, modules: usize) -> Result<SpirvExport> {
    let entry_point = pipeline
        .entry_point()
        .filter(|e| !e.is_empty())
        .ok_or_else(|| Error::invalid_argument("pipeline has no entry point name"))?;
    if pipeline.dispatch_abi() != DispatchAbi::DESCRIPTOR {
        return Err(Error::unimplemented(format!(
            "'{entry_point}' uses the buffer-device-address dispatch ABI; halo runs the descriptor ABI ({FORMAT})"
        )));
    }
    let module = pipeline.shader_module_ordinal() as usize;
    if module >= modules {
        return Err(Error::invalid_argument(format!(
            "'{entry_point}' names shader module {module} of {modules}"
        )));
    }
    let layout_ordinal = pipeline.pipeline_layout_ordinal() as usize;
    let layout = def
        .pipeline_layouts()
        .filter(|l| layout_ordinal < l.len())
        .map(|l| l.get(layout_ordinal))
        .ok_or_else(|| {
            Error::invalid_argument(format!(
                "'{entry_point}' names pipeline layout {layout_ordinal}, which is not there"
            ))
        })?;
    let set_layouts = def.descriptor_set_layouts();
    let mut bindings = Vec::new();
    for (set, ordinal) in layout
        .descriptor_set_layout_ordinals()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let set_layout = set_layouts
            .filter(|s| (ordinal as usize) < s.len())
            .map(|s| s.get(ordinal as usize))
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "'{entry_point}' names descriptor set layout {ordinal}, which is not there"
                ))
            })?;
        for binding in set_layout.bindings().into_iter().flatten() {
            if binding.descriptor_count() != 1 {
                return Err(Error::unimplemented(format!(
                    "'{entry_point}': binding {} of set {set} is an array of {} descriptors",
                    binding.binding(),
                    binding.descriptor_count()
                )));
            }
            bindings.push(BindingSlot {
                set: set as u32,
                binding: binding.binding(),
            });
        }
    }
    let constant_count = layout
        .push_constant_ranges()
        .into_iter()
        .flatten()
        .map(|r| (r.offset() + r.size()) / 4)
        .max()
        .unwrap_or(0);
    let name = pipeline.debug_info().and_then(|d| d.name()).unwrap_or(entry_point);
    Ok(SpirvExport {
        name: name.to_string(),
        entry_point: entry_point.to_string(),
        module,
        bindings,
        constant_count,
        subgroup_size: pipeline.subgroup_size(),
    })
}

#[cfg(test)]
mod tests {
    use super::check_instruction_lengths;

    #[test]
    fn instructions_must_tile_the_words_after_the_header() {
        let header = [0x0723_0203, 0x0001_0300, 0, 8, 0];
        // OpCapability Shader (2 words), then OpMemoryModel Logical GLSL450 (3 words).
        let good = [&header[..], &[0x0002_0011, 1, 0x0003_000e, 0, 1]].concat();
        check_instruction_lengths(&good).unwrap();
        check_instruction_lengths(&header).unwrap();
        for (words, named) in [
            (header[..3].to_vec(), "shorter than its header"),
            (
                good[..good.len() - 1].to_vec(),
                "instruction at word 7 has length 3, past the module's 9 words",
            ),
            (
                [&header[..], &[0x0000_0011]].concat(),
                "instruction at word 5 has length 0",
            ),
        ] {
            let error = check_instruction_lengths(&words).unwrap_err();
            assert!(error.to_string().contains(named), "{error}");
        }
    }
}
