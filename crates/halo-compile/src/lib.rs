//! `halo compile`: turns an ONNX or MLIR model into a `.vmfb` that halo runs, with the pinned
//! `iree-compile` 3.13 and the best flag set known for the target device.
//!
//! Who does what:
//! - [`Toolchain`] finds the IREE tools (`--iree-compile`, then `HALO_IREE_COMPILE`, then `PATH`)
//!   and checks that the compiler is the 3.13 release halo runs the output of.
//! - [`ModelFormat`] says how a model file enters the compiler: ONNX goes through
//!   `iree-import-onnx --opset-version 17` first, MLIR goes in as it is. An import gets the ABI
//!   declaration (`iree.abi.declaration`, with the graph's input and output names) that the
//!   importer leaves out, so the compiled program describes its tensors to `halo serve`.
//! - [`Target`] is what the program is compiled for, read from a device URI (`local-task`,
//!   `vulkan://0`, `cuda`, ...), with an optional chip (`host`, `sm_90`, `gfx942`).
//! - [`FlagSet`] names a documented set of compiler flags. [`FlagSet::Best`] is a ranked list of
//!   candidates: `iree-compile` 3.13 rejects some programs under its higher optimisation levels,
//!   so a candidate the compiler rejects is reported and the next one is tried.
//! - [`GraphRewrite`] names a change made to an ONNX graph before import where IREE compiles an
//!   operator to slow code (depthwise convolutions), or on Vulkan to wrong code; the CPU and
//!   Vulkan flag sets other than `iree-default` apply it.
//! - `--batch-sizes` ([`CompileRequest::batch_sizes`]) adds a function per fixed batch size
//!   beside an ONNX model's dynamic one ([`batch_function_name`]), for batched serving.
//! - [`KernelUse`] says whether the program may call halo's own CPU kernels where they apply
//!   (a transform spec given to `iree-compile`), which makes it run only on halo.
//! - [`compile`] runs the tools, writes the output atomically (a failed compile leaves an
//!   existing output file as it was) and returns a [`CompileReport`] saying which flags won.
//!
//! - [`stop_flag`] stops a compile part-way (a signal handler sets it): the running tool is
//!   killed and the scratch folder removed.
//! - [`tune::tune`] (`halo compile --tune`) compiles a documented space of flag sets
//!   ([`tune::space`]), times each on the device, drops those whose outputs leave the baseline's
//!   tolerance, keeps the fastest and caches the result on disk.
//!
//! The CLI and the Python package both call [`compile`], so every way into halo compiles the
//! same way.

#![warn(missing_docs)]

mod batch_functions;
mod compile;
mod declaration;
mod device_chip;
mod flag_set;
mod graph_rewrite;
mod kernels;
mod model;
mod onnx;
mod stop;
mod target;
mod toolchain;
pub mod tune;

pub use batch_functions::{batch_function_name, batch_sizes_for, MAX_BATCH_SIZE};
pub use compile::{compile, CompileReport, CompileRequest, RejectedCandidate};
pub use device_chip::ChipChoice;
pub use flag_set::FlagSet;
pub use graph_rewrite::GraphRewrite;
pub use kernels::{KernelUse, KERNEL_IMPORTS};
pub use model::{GraphKind, ModelFormat};
pub use stop::stop_flag;
pub use target::{CpuArch, Target, TargetKind};
pub use toolchain::{Toolchain, COMPILER_PACKAGE, PINNED_COMPILER_VERSION};
