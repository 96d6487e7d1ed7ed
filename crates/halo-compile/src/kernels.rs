//! Whether a compiled program calls halo's own kernels (`crates/halo-kernels`) where they apply.
//!
//! IREE's compiler replaces matched operations when given a transform spec
//! (`--iree-preprocessing-transform-spec-filename`): each match becomes a dispatch that calls a
//! kernel through an executable import, which halo's CPU drivers resolve. Such a program runs only
//! on halo; IREE's runtime refuses it at load, naming the import.

use crate::graph_rewrite::ConvolutionKind;
use crate::target::{Target, TargetKind};
use halo_hal::{Error, Result};
use std::path::Path;

/// The spec that turns f32 matmuls into calls of `halo_matmul_f32_v0`, and unit-stride
/// convolutions of one group (bias and ReLU included) into calls of `halo_conv2d_f32_v0`.
const KERNELS_SPEC: &str = include_str!("kernels/kernels_spec.mlir");

/// The imports a program compiled with [`KernelUse::HaloKernels`] may call.
pub const KERNEL_IMPORTS: &[&str] = &["halo_matmul_f32_v0", "halo_conv2d_f32_v0"];

/// Whether the program may call halo's kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelUse {
    /// Only IREE's own code: the program runs on IREE's runtime too.
    #[default]
    Portable,
    /// f32 matmuls and unit-stride convolutions of one group call halo's kernels; the program
    /// runs only on halo's CPU drivers.
    HaloKernels,
}

impl KernelUse {
    /// Checks that `target` can run the choice.
    ///
    /// # Errors
    /// `InvalidArgument` when halo's kernels are asked for a target other than the CPU.
    pub(crate) fn check(self, target: &Target) -> Result<()> {
        if self == KernelUse::HaloKernels && target.kind != TargetKind::Cpu {
            return Err(Error::invalid_argument(format!(
                "halo's kernels are CPU kernels: --kernels needs a CPU device, not a {:?} target",
                target.kind
            )));
        }
        Ok(())
    }

    /// Whether halo's kernels take a convolution of `kind` as it is, so that the graph rewrite
    /// should leave it: unit-stride convolutions of one group (which halo's convolution kernel
    /// computes from the padded input without writing its windows out) that are not narrowing
    /// (the rewrite's output shifts won there: DenseNet-121 took 71-75 ms a call with the kernel
    /// against 37.5-39.3 with them).
    pub(crate) fn takes(self, kind: ConvolutionKind) -> bool {
        self == KernelUse::HaloKernels && matches!(kind, ConvolutionKind::Dense { .. })
    }

    /// The `iree-compile` flags that make the choice, writing the spec they name into `scratch`.
    ///
    /// # Errors
    /// The file system's error when the spec cannot be written.
    pub(crate) fn flags(self, scratch: &Path) -> Result<Vec<String>> {
        if self == KernelUse::Portable {
            return Ok(Vec::new());
        }
        let spec = scratch.join("halo-kernels-spec.mlir");
        std::fs::write(&spec, KERNELS_SPEC)
            .map_err(|error| Error::internal(format!("cannot write '{}': {error}", spec.display())))?;
        Ok(vec![format!(
            "--iree-preprocessing-transform-spec-filename={}",
            spec.display()
        )])
    }
}
