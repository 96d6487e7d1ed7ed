//! The documented compiler flag sets, and the ranked list `halo compile` tries by default.

use crate::graph_rewrite::GraphRewrite;
use crate::model::GraphKind;
use crate::target::{Target, TargetKind};
use halo_hal::{Error, Result};

/// A named set of `iree-compile` optimisation flags (the target's own flags come from
/// [`Target::flags`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagSet {
    /// The default: [`FlagSet::FastO3`], then [`FlagSet::Fast`], then [`FlagSet::IreeDefault`],
    /// the first that the compiler accepts for the program; on CPUs, for an ONNX graph without
    /// convolutions, and on Vulkan, [`FlagSet::Fast`] first (see [`GraphKind::WithoutConvolutions`]).
    /// On Vulkan `O3` took SqueezeNet and ShuffleNet v2 within 1 % of the time without it (an
    /// NVIDIA H100), and DenseNet-121's rewritten graph from 34 s of compiling to over 15 minutes.
    Best,
    /// `O3` on top of [`FlagSet::Fast`]. `iree-compile` 3.13 refuses some programs at `O2` and
    /// above (a softmax fused after a matmul fails workgroup distribution verification).
    FastO3,
    /// On CPUs: data tiling, every microkernel, and convolutions as im2col + matmul (12× on
    /// SqueezeNet); on Vulkan the target flags alone (with the graph rewrite, see
    /// [`FlagSet::graph_rewrite`]); on CUDA and HIP the same as [`FlagSet::FastO3`].
    Fast,
    /// The target flags only, as IREE's deployment guides give them.
    IreeDefault,
}

pub(crate) const CPU_FAST: &[&str] = &[
    "--iree-opt-data-tiling",
    "--iree-llvmcpu-enable-ukernels=all",
    "--iree-global-opt-use-im2col-for-convs",
];
pub(crate) const O3: &str = "--iree-opt-level=O3";

impl FlagSet {
    /// Every set, in the order the CLI lists them.
    pub const ALL: [FlagSet; 4] = [FlagSet::Best, FlagSet::FastO3, FlagSet::Fast, FlagSet::IreeDefault];

    /// The set's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FlagSet::Best => "best",
            FlagSet::FastO3 => "fast-o3",
            FlagSet::Fast => "fast",
            FlagSet::IreeDefault => "iree-default",
        }
    }

    /// The set called `name`.
    ///
    /// # Errors
    /// `InvalidArgument` listing the known names.
    pub fn from_name(name: &str) -> Result<FlagSet> {
        Self::ALL.into_iter().find(|set| set.name() == name).ok_or_else(|| {
            let known: Vec<_> = Self::ALL.iter().map(|set| set.name()).collect();
            Error::invalid_argument(format!("unknown flag set '{name}'; known sets: {}", known.join(", ")))
        })
    }

    /// The concrete sets to try for a model of `kind`, best first, without two that give
    /// `target` the same flags and graph rewrite.
    pub fn candidates(self, target: &Target, kind: GraphKind) -> Vec<FlagSet> {
        let ranked = match self {
            FlagSet::Best
                if target.kind == TargetKind::Vulkan
                    || (target.kind == TargetKind::Cpu && kind == GraphKind::WithoutConvolutions) =>
            {
                vec![FlagSet::Fast, FlagSet::FastO3, FlagSet::IreeDefault]
            }
            FlagSet::Best => vec![FlagSet::FastO3, FlagSet::Fast, FlagSet::IreeDefault],
            single => vec![single],
        };
        let mut chosen: Vec<FlagSet> = Vec::new();
        for set in ranked {
            let same = |other: &FlagSet| {
                other.optimisation_flags(target) == set.optimisation_flags(target)
                    && other.graph_rewrite(target) == set.graph_rewrite(target)
            };
            if !chosen.iter().any(same) {
                chosen.push(set);
            }
        }
        chosen
    }

    /// The optimisation flags this set adds for `target` (for [`FlagSet::Best`], those of its
    /// first candidate).
    pub fn optimisation_flags(self, target: &Target) -> Vec<String> {
        let cpu = target.kind == TargetKind::Cpu;
        let flags: Vec<&str> = match self {
            FlagSet::IreeDefault => Vec::new(),
            FlagSet::Fast if target.kind == TargetKind::Vulkan => Vec::new(),
            FlagSet::Fast if cpu => CPU_FAST.to_vec(),
            FlagSet::Best | FlagSet::FastO3 if cpu => [O3].iter().chain(CPU_FAST).copied().collect(),
            FlagSet::Best | FlagSet::FastO3 | FlagSet::Fast => vec![O3],
        };
        flags.into_iter().map(String::from).collect()
    }

    /// The change this set makes to an ONNX graph before import for `target`: on CPUs and Vulkan
    /// every set but IREE's own writes convolutions as shifted sums (see [`GraphRewrite`]).
    ///
    /// On CPUs that is for speed. On Vulkan it is for right answers: `iree-compile` 3.13's SPIR-V
    /// for convolutions on its portable Vulkan target computes ShuffleNet's and MobileNet's
    /// depthwise ones wrongly (on lavapipe and on an NVIDIA H100 alike), and SqueezeNet's
    /// differently from run to run on the H100, with IREE's runtime as with halo's; the rewritten
    /// graphs give onnxruntime's answers on both.
    pub fn graph_rewrite(self, target: &Target) -> GraphRewrite {
        match self {
            FlagSet::IreeDefault => GraphRewrite::None,
            _ if matches!(target.kind, TargetKind::Cpu | TargetKind::Vulkan) => GraphRewrite::ConvolutionsAsShifts,
            _ => GraphRewrite::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known_ones() {
        for set in FlagSet::ALL {
            assert_eq!(FlagSet::from_name(set.name()).unwrap(), set);
        }
        let error = FlagSet::from_name("turbo").unwrap_err();
        assert!(error.to_string().contains("unknown flag set 'turbo'"), "{error}");
        assert!(error.to_string().contains("iree-default"), "{error}");
    }

    #[test]
    fn best_ranks_o3_first_and_drops_duplicates_on_gpus() {
        let cpu = Target::for_device("local-task", None).unwrap();
        assert_eq!(
            FlagSet::Best.candidates(&cpu, GraphKind::Convolutional),
            [FlagSet::FastO3, FlagSet::Fast, FlagSet::IreeDefault]
        );
        assert_eq!(
            FlagSet::FastO3.optimisation_flags(&cpu),
            [O3, CPU_FAST[0], CPU_FAST[1], CPU_FAST[2]]
        );
        let cuda = Target::for_device("cuda", None).unwrap();
        assert_eq!(
            FlagSet::Best.candidates(&cpu, GraphKind::Unknown),
            FlagSet::Best.candidates(&cpu, GraphKind::Convolutional)
        );
        // Without convolutions O3 is tried second on CPUs only.
        assert_eq!(
            FlagSet::Best.candidates(&cpu, GraphKind::WithoutConvolutions),
            [FlagSet::Fast, FlagSet::FastO3, FlagSet::IreeDefault]
        );
        assert_eq!(
            FlagSet::Fast.candidates(&cpu, GraphKind::WithoutConvolutions),
            [FlagSet::Fast]
        );
        assert_eq!(
            FlagSet::Best.candidates(&cuda, GraphKind::WithoutConvolutions),
            [FlagSet::FastO3, FlagSet::IreeDefault]
        );
        assert_eq!(FlagSet::Fast.candidates(&cuda, GraphKind::Unknown), [FlagSet::Fast]);
        assert!(FlagSet::IreeDefault.optimisation_flags(&cuda).is_empty());
        // CPU and Vulkan sets rewrite convolutions, never IREE's own set.
        let vulkan = Target::for_device("vulkan", None).unwrap();
        // Vulkan tries the rewritten graph without O3 first.
        assert_eq!(
            FlagSet::Best.candidates(&vulkan, GraphKind::Convolutional),
            [FlagSet::Fast, FlagSet::FastO3, FlagSet::IreeDefault]
        );
        assert!(FlagSet::Fast.optimisation_flags(&vulkan).is_empty());
        assert_eq!(FlagSet::FastO3.optimisation_flags(&vulkan), [O3]);
        assert_eq!(FlagSet::Fast.graph_rewrite(&cpu), GraphRewrite::ConvolutionsAsShifts);
        assert_eq!(
            FlagSet::FastO3.graph_rewrite(&vulkan),
            GraphRewrite::ConvolutionsAsShifts
        );
        assert_eq!(FlagSet::IreeDefault.graph_rewrite(&cpu), GraphRewrite::None);
        assert_eq!(FlagSet::IreeDefault.graph_rewrite(&vulkan), GraphRewrite::None);
        assert_eq!(FlagSet::FastO3.graph_rewrite(&cuda), GraphRewrite::None);
    }
}
