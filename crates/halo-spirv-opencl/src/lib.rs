//! Translates the SPIR-V compute shaders `iree-compile` emits for Vulkan (`OpCapability Shader`,
//! logical addressing, storage buffers, `GLCompute` entry points) into OpenCL C 1.2, so that the
//! same `vulkan-spirv-fb` programs run on OpenCL devices, which cannot load shader SPIR-V.
//!
//! The crate has no OpenCL dependency: it turns words into source text and says what the kernels
//! take. Who does what:
//! - `module` indexes the module: types, constants, decorations, module-scope variables;
//! - `types` names SPIR-V types in OpenCL C and checks that decorated layouts are OpenCL C's;
//! - `kernel` writes each entry point as a `__kernel`: blocks as labels joined by `goto`, phis
//!   as variables assigned on each incoming edge, storage buffers as `__global` pointers,
//!   workgroup variables as `__local`, builtins as `get_group_id`/`get_local_id`/...;
//! - `expression` writes each value-computing instruction (and GLSL.std.450) as an OpenCL C
//!   expression with the same meaning, using the full-precision built-ins (never `native_*`);
//! - `subgroup` emulates subgroup operations in workgroup memory (OpenCL C 1.2 has none);
//! - without `cl_khr_fp16`, f16 values are floats rounded to f16 after each arithmetic operation
//!   and f16 memory is `ushort` bit patterns read and written with `vload_half`/`vstore_half_rte`.
//!
//! A kernel's arguments are the storage buffers its entry point uses, in ascending (set, binding)
//! order ([`Kernel::bindings`]), each as a `__global uchar*`, a `ulong` byte offset into it (so
//! a binding may start anywhere in a buffer object, with no sub-buffer alignment rule) and the
//! `ulong` byte length bound there, then the push constant block by value when it reads one
//! ([`Kernel::push_constant_bytes`]). Every access stays inside its binding or variable: an index
//! past the end reaches the last element instead (Vulkan's robust buffer access allows as much), so a
//! program with changed bounds cannot write into the host's memory. An instruction, capability or type this
//! translator does not handle fails the translation with `Unimplemented` naming it: never wrong
//! code. Malformed SPIR-V fails with `InvalidArgument`.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod expression;
mod kernel;
mod module;
mod operands;
mod subgroup;
mod types;

use halo_hal::{Error, Result};
use kernel::KernelWriter;
use module::ModuleIndex;
use operands::{id, literal, string};
use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Capability, ExecutionMode, ExecutionModel, Op, Word};

/// The first word of every SPIR-V module.
const MAGIC: u32 = 0x0723_0203;
/// The most invocations a workgroup may have (far above any device's limit, which the device
/// checks when it builds the kernel): kernels count them in 32 bits.
const MAX_WORKGROUP_INVOCATIONS: u64 = 1 << 16;

/// What the target device supports, and the values of specialization constants.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The device has `cl_khr_fp16`: `Float16` arithmetic is written as `half` (without it, as
    /// floats rounded to f16).
    pub fp16: bool,
    /// The device has `cl_khr_fp64`: `Float64` is written as `double`.
    pub fp64: bool,
    /// Values of specialization constants by `SpecId` (IREE's executable constants).
    pub specialization: Vec<u32>,
    /// The subgroup size the program was compiled for (its Vulkan target's); 0 refuses
    /// subgroup operations. The SPIR-V does not say it: IREE's code divides invocation ids by it
    /// as a constant.
    pub subgroup_size: u32,
    /// How subgroup operations are written.
    pub subgroups: Subgroups,
}

/// The extensions [`Subgroups::Native`] needs, besides the subgroup size among those
/// `CL_DEVICE_SUB_GROUP_SIZES_INTEL` lists.
pub const NATIVE_SUBGROUP_EXTENSIONS: [&str; 5] = [
    "cl_intel_required_subgroup_size",
    "cl_khr_subgroup_shuffle",
    "cl_khr_subgroup_shuffle_relative",
    "cl_khr_subgroup_ballot",
    "cl_khr_subgroup_non_uniform_arithmetic",
];

/// How subgroup operations are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Subgroups {
    /// In workgroup memory, for any device: a subgroup is a run of `subgroup_size` consecutive
    /// invocations, and each operation a store, a barrier and reads.
    #[default]
    Emulated,
    /// As OpenCL C 3.0 subgroup built-ins, on a device with `cl_intel_required_subgroup_size`
    /// (which makes the device's subgroups `subgroup_size` wide), `cl_khr_subgroup_shuffle`,
    /// `cl_khr_subgroup_shuffle_relative`, `cl_khr_subgroup_ballot` and
    /// `cl_khr_subgroup_non_uniform_arithmetic`. A module with a subgroup operation the
    /// built-ins do not cover is written with the emulation instead.
    Native,
}

/// One entry point as an OpenCL kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// The SPIR-V entry point's name.
    pub entry_point: String,
    /// The OpenCL kernel's name in [`Translation::source`].
    pub name: String,
    /// The workgroup size the kernel requires (`reqd_work_group_size`).
    pub workgroup_size: [u32; 3],
    /// The storage buffers the kernel takes, in argument order (each a pointer, a byte offset and
    /// the byte length bound there, which accesses stay within).
    pub bindings: Vec<Binding>,
    /// Bytes of the push constant block passed by value after the buffers, or 0 for none.
    pub push_constant_bytes: u32,
}

/// A storage buffer binding: one kernel argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Binding {
    /// The descriptor set.
    pub set: u32,
    /// The binding in the set.
    pub binding: u32,
}

/// A module translated to OpenCL C.
#[derive(Debug, Clone)]
pub struct Translation {
    /// The program's OpenCL C source.
    pub source: String,
    /// The options to build it with (`-cl-std=...`).
    pub build_options: &'static str,
    /// One kernel per entry point, in the module's order.
    pub kernels: Vec<Kernel>,
}

/// Translates the SPIR-V module `words` into OpenCL C.
///
/// # Errors
/// `InvalidArgument` for words that are not a well-formed SPIR-V module; `Unimplemented` naming
/// the instruction, capability or type for what the translator does not handle, with the entry
/// point in the context chain.
pub fn translate(words: &[u32], options: &Options) -> Result<Translation> {
    match translate_with(words, options) {
        Err(error) if options.subgroups == Subgroups::Native && error.message().contains(NOT_NATIVE) => {
            let emulated = Options {
                subgroups: Subgroups::Emulated,
                ..options.clone()
            };
            translate_with(words, &emulated)
        }
        other => other,
    }
}

/// Marks the refusals of native subgroup operations, after which a module is written with the
/// emulation.
pub(crate) const NOT_NATIVE: &str = "has no OpenCL subgroup built-in";

fn translate_with(words: &[u32], options: &Options) -> Result<Translation> {
    if words.first() != Some(&MAGIC) {
        return Err(Error::invalid_argument("not a SPIR-V module (bad magic number)"));
    }
    halo_spirv_fb::check_instruction_lengths(words)?;
    let module = rspirv::dr::load_words(words)
        .map_err(|e| Error::invalid_argument(format!("SPIR-V module does not parse: {e}")))?;
    let index = ModuleIndex::new(&module, options)?;
    let mut source = extension_pragmas(&module, options);
    if index.emulate_f16 && declares(&module, Capability::Float16) {
        source.push_str(F16_HELPERS);
    }
    source.push_str(kernel::WITHIN_HELPERS);
    source.push_str(&index.typedefs()?);
    let mut kernels = Vec::new();
    for (ordinal, entry) in module.entry_points.iter().enumerate() {
        let entry_point = string(entry, 2)?.to_string();
        let (kernel, text) = write_kernel(&module, &index, options, entry, format!("k{ordinal}"))
            .map_err(|e| e.context(format!("entry point {entry_point:?}")))?;
        source.push_str(&text);
        kernels.push(kernel);
    }
    if kernels.is_empty() {
        return Err(Error::invalid_argument("SPIR-V module has no entry point"));
    }
    let build_options = match options.subgroups {
        Subgroups::Emulated => "-cl-std=CL1.2",
        Subgroups::Native => "-cl-std=CL3.0",
    };
    Ok(Translation {
        source,
        build_options,
        kernels,
    })
}

/// One entry point as a kernel named `name`, and its source.
fn write_kernel(
    module: &Module,
    index: &ModuleIndex,
    options: &Options,
    entry: &Instruction,
    name: String,
) -> Result<(Kernel, String)> {
    match entry.operands.first() {
        Some(Operand::ExecutionModel(ExecutionModel::GLCompute)) => {}
        other => {
            return Err(Error::unimplemented(format!(
                "execution model {other:?}; only GLCompute is"
            )))
        }
    }
    let function_id = id(entry, 1)?;
    let function = module
        .functions
        .iter()
        .find(|f| f.def.as_ref().and_then(|d| d.result_id) == Some(function_id))
        .ok_or_else(|| Error::invalid_argument(format!("entry point function %{function_id} is not defined")))?;
    let workgroup_size = workgroup_size(module, function_id)?;
    let writer = KernelWriter::new(
        index,
        function,
        workgroup_size,
        options.subgroup_size,
        options.subgroups,
    )?;
    let push_constant_bytes = match writer.push_constants() {
        Some(block) => u32::try_from(index.layout(block)?.size)
            .map_err(|_| Error::invalid_argument("push constant block larger than 4 GiB"))?,
        None => 0,
    };
    let kernel = Kernel {
        entry_point: string(entry, 2)?.to_string(),
        name,
        workgroup_size,
        bindings: writer
            .bindings()
            .into_iter()
            .map(|(set, binding)| Binding { set, binding })
            .collect(),
        push_constant_bytes,
    };
    let text = writer.write(&kernel.name, &kernel.entry_point)?;
    Ok((kernel, text))
}

/// The `LocalSize` the module gives the entry point `function`.
fn workgroup_size(module: &Module, function: Word) -> Result<[u32; 3]> {
    for mode in module
        .execution_modes
        .iter()
        .filter(|m| m.class.opcode == Op::ExecutionMode)
    {
        if id(mode, 0)? == function
            && matches!(
                mode.operands.get(1),
                Some(Operand::ExecutionMode(ExecutionMode::LocalSize))
            )
        {
            let size = [literal(mode, 2)?, literal(mode, 3)?, literal(mode, 4)?];
            let invocations: u128 = size.iter().map(|&s| u128::from(s)).product();
            if invocations == 0 || invocations > u128::from(MAX_WORKGROUP_INVOCATIONS) {
                return Err(Error::invalid_argument(format!(
                    "workgroup size {size:?} is not 1 to {MAX_WORKGROUP_INVOCATIONS} invocations"
                )));
            }
            return Ok(size);
        }
    }
    Err(Error::unimplemented("entry points without a LocalSize execution mode"))
}

/// Whether the module declares `capability`.
fn declares(module: &Module, capability: Capability) -> bool {
    module
        .capabilities
        .iter()
        .any(|i| matches!(i.operands.first(), Some(Operand::Capability(c)) if *c == capability))
}

/// The `#pragma`s enabling the extensions the module's capabilities need.
fn extension_pragmas(module: &Module, options: &Options) -> String {
    let mut out = String::new();
    if options.fp16 && declares(module, Capability::Float16) {
        out.push_str("#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n");
    }
    if declares(module, Capability::Float64) {
        out.push_str("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n");
    }
    out
}

/// f16 without `cl_khr_fp16`: rounding a float to the nearest f16 (ties to even) and moving bit
/// patterns, through the `vstore_half_rte`/`vload_half` every OpenCL C device has.
const F16_HELPERS: &str = "\
float f16_round(float x) { ushort h; vstore_half_rte(x, 0, (half*)&h); return vload_half(0, (half*)&h); }
float2 f16_round2(float2 x) { ushort2 h; vstore_half2_rte(x, 0, (half*)&h); return vload_half2(0, (half*)&h); }
float3 f16_round3(float3 x) { ushort3 h; vstore_half3_rte(x, 0, (half*)&h); return vload_half3(0, (half*)&h); }
float4 f16_round4(float4 x) { ushort4 h; vstore_half4_rte(x, 0, (half*)&h); return vload_half4(0, (half*)&h); }
float8 f16_round8(float8 x) { ushort8 h; vstore_half8_rte(x, 0, (half*)&h); return vload_half8(0, (half*)&h); }
float16 f16_round16(float16 x) { ushort16 h; vstore_half16_rte(x, 0, (half*)&h); return vload_half16(0, (half*)&h); }
ushort f16_bits(float x) { ushort h; vstore_half_rte(x, 0, (half*)&h); return h; }
float f16_from_bits(ushort h) { return vload_half(0, (half*)&h); }
";
