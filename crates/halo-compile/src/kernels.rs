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

/// The spec that turns f32 matmuls into calls of `halo_matmul_f32_v0` (`_v4` when a bias follows,
/// with a ReLU or, after a transformer's projection, GELU), 1x1 convolutions (bias, activation,
/// a residual sum and a squeeze-and-excitation's scale included) into calls of
/// `halo_matmul_f32_v5`, other convolutions, grouped ones too (bias and activation included), into
/// calls of `halo_conv2d_f32_v4`, depthwise ones (bias and activation included) into calls of
/// `halo_depthwise_conv2d_f32_v2` (the kernel adding the zero padding before them where it can),
/// attention's scaled softmax into calls of `halo_softmax_f32_v0` and global pools' sums into
/// calls of `halo_row_sums_f32_v0`, with its per-stride part still to be written out
/// ([`kernels_spec`]).
const KERNELS_SPEC: &str = include_str!("kernels/kernels_spec.mlir");

/// The strides of the convolutions halo's kernel takes.
const STRIDES: [usize; 2] = [1, 2];

/// The imports a program compiled with [`KernelUse::HaloKernels`] may call.
pub const KERNEL_IMPORTS: &[&str] = &[
    "halo_matmul_f32_v0",
    "halo_matmul_f32_v4",
    "halo_matmul_f32_v5",
    "halo_conv2d_f32_v4",
    "halo_depthwise_conv2d_f32_v2",
    "halo_softmax_f32_v0",
    "halo_row_sums_f32_v0",
];

/// Whether the program may call halo's kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelUse {
    /// Only IREE's own code: the program runs on IREE's runtime too.
    Portable,
    /// f32 matmuls, and convolutions of one group, grouped or depthwise, of stride 1 or 2, call
    /// halo's kernels; the program runs only on halo's CPU drivers.
    HaloKernels,
}

impl KernelUse {
    /// What `halo compile` does for `target` unless told otherwise: halo's kernels on the CPU,
    /// where they ran every model of the benchmark set as fast as IREE's code or faster (README,
    /// `--kernels`), and IREE's code alone on the other devices, for which halo has no kernels.
    pub fn default_for(target: &Target) -> KernelUse {
        match target.kind {
            TargetKind::Cpu => KernelUse::HaloKernels,
            TargetKind::Vulkan | TargetKind::Cuda | TargetKind::Hip | TargetKind::Metal => KernelUse::Portable,
        }
    }

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

    /// Whether halo's kernels take a convolution of `kind`, `strides` and a bias or none as it
    /// is, so that the graph rewrite should leave it:
    /// - unit-stride convolutions of one group (which halo's convolution kernel computes from the
    ///   padded input without writing its windows out) that are not narrowing (the rewrite's
    ///   output shifts won there: DenseNet-121 took 71-75 ms a call with the kernel against
    ///   37.5-39.3 with them);
    /// - depthwise convolutions with a bias, of a stride of [`STRIDES`] along both axes: the
    ///   forms the spec's depthwise matchers take (any other would be left to IREE's scalar code);
    /// - grouped convolutions of a stride of [`STRIDES`] along both axes, which the rewrite then
    ///   gives only their bias separated, if they have one: the forms the spec's grouped matchers take
    ///   (ResNeXt-50's: the kernel ran its seven shapes at 45-100 GFLOP/s a core, `conv_rate`,
    ///   where the rewrite's batched matmul over copied windows spent about 55 worker-ms a call
    ///   on their 0.46 GFLOP).
    pub(crate) fn takes(self, kind: ConvolutionKind, strides: [i64; 2], biased: bool) -> bool {
        self == KernelUse::HaloKernels
            && match kind {
                ConvolutionKind::Dense { .. } => true,
                ConvolutionKind::Depthwise => biased && Self::takes_strides(strides),
                ConvolutionKind::Grouped { .. } => Self::takes_strides(strides),
                ConvolutionKind::Narrowing { .. } => false,
            }
    }

    /// Whether the spec's convolution matchers take `strides`: one of [`STRIDES`] along both axes.
    fn takes_strides(strides: [i64; 2]) -> bool {
        strides[0] == strides[1] && STRIDES.iter().any(|&stride| i64::try_from(stride) == Ok(strides[0]))
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
        std::fs::write(&spec, kernels_spec()?)
            .map_err(|error| Error::internal(format!("cannot write '{}': {error}", spec.display())))?;
        Ok(vec![format!(
            "--iree-preprocessing-transform-spec-filename={}",
            spec.display()
        )])
    }
}

/// The spec with each part marked `halo:per-stride` written once per stride of [`STRIDES`]: a
/// transform matcher compares a convolution's attributes exactly, so each stride needs its own.
fn kernels_spec() -> Result<String> {
    let mut spec = KERNELS_SPEC.to_string();
    for marker in [
        "halo:per-stride",
        "halo:per-stride-padded-matches",
        "halo:per-stride-matches",
        "halo:per-stride-later-matches",
        "halo:per-stride-plain-matches",
    ] {
        let (begin, end) = (format!("// {marker} begin\n"), format!("// {marker} end\n"));
        let Some((head, rest)) = spec.split_once(&begin) else {
            return Err(Error::internal(format!("the kernels spec lacks '{}'", begin.trim())));
        };
        let Some((block, tail)) = rest.split_once(&end) else {
            return Err(Error::internal(format!("the kernels spec lacks '{}'", end.trim())));
        };
        let blocks: String = STRIDES
            .iter()
            .map(|stride| block.replace("STRIDE", &stride.to_string()))
            .collect();
        spec = format!("{head}{blocks}{tail}");
    }
    // A list of matches whose last entries come from a per-stride part ends without a comma.
    Ok(spec.replace(",\n        : (!transform.any_op)", "\n        : (!transform.any_op)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_takes_matmuls_with_a_bias_before_bare_ones() {
        let spec = kernels_spec().unwrap();
        let at = |name: &str| {
            assert_eq!(spec.matches(name).count(), 1, "{name}");
            spec.find(name).unwrap()
        };
        let with_relu = at("@match_matmul_add_relu -> @call_halo_matmul_add_relu,");
        let with_gelu = at("@match_batch1_matmul_add_gelu -> @call_halo_batch1_matmul_add_gelu\n");
        let with_bias = at("@match_matmul_add -> @call_halo_matmul_add,");
        let projection = at("@match_batch1_matmul_add -> @call_halo_batch1_matmul_add\n");
        let bare = at("@match_matmul -> @call_halo_matmul,");
        let softmax = at("@match_scaled_softmax -> @call_halo_scaled_softmax,");
        assert!(with_relu < with_bias && with_bias < bare && projection < bare);
        assert!(with_gelu < projection, "GELU's projection would be taken without it");
        assert!(bare < softmax);
        // A padded depthwise convolution with its activation is tried first, in a pass of its
        // own: one the kernel declines is left for the unpadded forms of the next. Without an
        // activation it is tried after those (before, it would be taken alone and its activation
        // left to IREE) and before the unpadded form, in a pass of its own: one the kernel
        // declines is not tried again in the same pass.
        let passes: Vec<usize> = spec
            .match_indices("transform.foreach_match in %func")
            .map(|(at, _)| at)
            .collect();
        assert_eq!(passes.len(), 4);
        let padded_relu6 = at("@match_depthwise_padded_relu6_s1 -> @call_halo_depthwise_padded_relu6_s1,");
        let padded_relu = at("@match_depthwise_padded_relu_s2 -> @call_halo_depthwise_padded_relu_s2,");
        let padded_silu = at("@match_depthwise_padded_silu_s2 -> @call_halo_depthwise_padded_silu_s2,");
        let padded_hard_swish =
            at("@match_depthwise_padded_hard_swish_s2 -> @call_halo_depthwise_padded_hard_swish_s2\n");
        let unpadded_relu6 = at("@match_depthwise_relu6_s1 -> @call_halo_depthwise_relu6_s1,");
        for padded in [padded_relu6, padded_relu, padded_silu, padded_hard_swish] {
            assert!(padded < passes[1]);
        }
        assert!(passes[1] < unpadded_relu6);
        let padded = at("@match_depthwise_padded_s1 -> @call_halo_depthwise_padded_s1,");
        let unpadded = at("@match_depthwise_s1 -> @call_halo_depthwise_s1,");
        assert!(passes[2] < padded && padded < passes[3] && passes[3] < unpadded);
        // A 1x1 convolution whose result is summed with another tensor before a ReLU is taken at
        // the ReLU in the second pass; without a ReLU, at the sum in the third, after the sums
        // with a ReLU were taken and before the convolution alone could be.
        let residual_relu = at("@match_pointwise_add_residual_relu_s1 -> @call_halo_pointwise_add_residual_relu_s1,");
        let residual = at("@match_pointwise_add_residual_s1 -> @call_halo_pointwise_add_residual_s1,");
        let alone = at("@match_pointwise_add_s1 -> @call_halo_pointwise_add_s1,");
        assert!(passes[1] < residual_relu && residual_relu < passes[2]);
        assert!(passes[2] < residual && residual < passes[3] && passes[3] < alone);
        // A 1x1 convolution of a squeeze-and-excitation's product is tried as one before it is
        // taken as a convolution of whatever it reads, in each of those passes.
        let excited_residual = at("@match_se_pointwise_add_residual_s1 -> @call_halo_se_pointwise_add_residual_s1,");
        let excited_alone = at("@match_se_pointwise_add_s1 -> @call_halo_se_pointwise_add_s1,");
        assert!(passes[2] < excited_residual && excited_residual < residual);
        assert!(passes[3] < excited_alone && excited_alone < alone);
        // A SiLU or a hard-swish after a convolution is taken at its product in the second pass,
        // before the convolution alone could be.
        for kind in ["pointwise_add", "pointwise", "conv2d_add", "conv2d", "depthwise"] {
            let alone = at(&format!("@match_{kind}_s1 -> @call_halo_{kind}_s1,"));
            for activation in ["silu", "hard_swish"] {
                let fused = at(&format!(
                    "@match_{kind}_{activation}_s1 -> @call_halo_{kind}_{activation}_s1,"
                ));
                assert!(
                    passes[1] < fused && fused < passes[2] && passes[3] < alone,
                    "{kind}_{activation}"
                );
            }
        }
    }

    #[test]
    fn the_cpu_calls_halos_kernels_by_default_and_other_devices_do_not() {
        let cases = [
            ("local-task", None, KernelUse::HaloKernels),
            ("local-sync", None, KernelUse::HaloKernels),
            ("vulkan", Some("ampere"), KernelUse::Portable),
            ("cuda", Some("sm_80"), KernelUse::Portable),
            ("metal", None, KernelUse::Portable),
        ];
        for (device, chip, expected) in cases {
            let target = Target::for_device(device, chip).unwrap();
            assert_eq!(KernelUse::default_for(&target), expected, "{device}");
            assert!(KernelUse::default_for(&target).check(&target).is_ok(), "{device}");
        }
    }

    #[test]
    fn the_spec_matches_each_stride_with_its_own_matchers_and_calls() {
        let spec = kernels_spec().unwrap();
        assert!(!spec.contains("// halo:per-stride"), "a marker is left");
        for stride in STRIDES {
            for name in [
                format!("@match_conv2d_add_relu_s{stride}("),
                format!("@call_halo_conv2d_s{stride}("),
                format!("util.func private @halo_conv2d_relu_s{stride}("),
                format!("@match_pointwise_s{stride} -> @call_halo_pointwise_s{stride},"),
                format!(
                    "@match_residual_add_pointwise_relu_s{stride} -> @call_halo_pointwise_add_residual_relu_s{stride},"
                ),
                format!("util.func private @halo_pointwise_add_residual_s{stride}("),
                format!("@match_conv2d_s{stride} -> @call_halo_conv2d_s{stride},"),
                format!("util.func private @halo_conv2d_flags_s{stride}("),
                format!("@match_depthwise_relu6_s{stride} -> @call_halo_depthwise_relu6_s{stride},"),
                format!("util.func private @halo_depthwise_s{stride}("),
                format!("@match_depthwise_padded_relu6_s{stride} -> @call_halo_depthwise_padded_relu6_s{stride},"),
                format!("util.func private @halo_depthwise_padded_s{stride}("),
                format!("@match_grouped_conv2d_add_relu_s{stride} -> @call_halo_grouped_conv2d_add_relu_s{stride},"),
                format!("@match_grouped_conv2d_add_s{stride} -> @call_halo_grouped_conv2d_add_s{stride},"),
                format!("@match_grouped_conv2d_relu_s{stride} -> @call_halo_grouped_conv2d_relu_s{stride},"),
                format!("@match_grouped_conv2d_s{stride} -> @call_halo_grouped_conv2d_s{stride},"),
                format!("util.func private @halo_grouped_conv2d_flags_s{stride}("),
                format!("@match_conv2d_silu_s{stride} -> @call_halo_conv2d_silu_s{stride},"),
                format!("util.func private @halo_pointwise_add_silu_s{stride}("),
                format!("transform.named_sequence @call_halo_depthwise_silu_s{stride}("),
                format!("@match_pointwise_hard_swish_s{stride} -> @call_halo_pointwise_hard_swish_s{stride},"),
                format!("util.func private @halo_depthwise_padded_hard_swish_s{stride}("),
            ] {
                assert_eq!(spec.matches(&name).count(), 1, "{name}");
            }
            // 20 in the per-stride part, and the global pool's matcher (stride 1) outside it.
            let strided = format!("strides = dense<{stride}> : vector<2xi64>");
            let outside = usize::from(stride == 1);
            assert_eq!(spec.matches(&strided).count(), 20 + outside, "{strided}");
        }
        // Outside the per-stride parts the word stays as written, in the header's comment.
        assert_eq!(spec.matches("STRIDE").count(), 1);
        for import in KERNEL_IMPORTS {
            assert!(spec.contains(&format!("@{import}(")), "{import}");
        }
    }
}
