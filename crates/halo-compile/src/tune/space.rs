//! The documented space `halo compile --tune` searches: named flag sets per kind of target.
//!
//! CPU (`llvm-cpu`), each on top of the target flags:
//!
//! | variant | flags |
//! | --- | --- |
//! | `iree-default` | none, and the ONNX graph as given: IREE's deployment-guide compile, the baseline every other variant's outputs are checked against |
//! | `fast` | data tiling, every microkernel, convolutions as im2col + matmul |
//! | `fast-o3` | `--iree-opt-level=O3` and `fast` (what `halo compile` picks without `--tune`) |
//! | `o3-no-im2col` | `fast-o3` without im2col (depthwise and small convolutions can lose by it) |
//! | `o3-no-data-tiling` | `fast-o3` without data tiling |
//! | `o3-no-ukernels` | `fast-o3` without microkernels (the compiler's own codegen for matmuls) |
//! | `o3-aggressive-fusion` | `fast-o3` and `--iree-dispatch-creation-enable-aggressive-fusion` |
//! | `o3-reassociate` | `fast-o3` and `--iree-llvmcpu-reassociate-fp-reductions` (reductions reordered; the tolerance check decides if that is acceptable) |
//! | `o3-distribution-32`, `o3-distribution-128` | `fast-o3` with the workgroup distribution tile size `--iree-llvmcpu-distribution-size` at 32 and 128 (more or fewer, smaller or larger workgroups) |
//! | `o3-shift-depthwise-only` | `fast-o3` with only depthwise convolutions written as shifted sums |
//! | `o3-keep-convolutions` | `fast-o3` with every convolution left as ONNX `Conv` |
//! | `fast-kernels`, `fast-o3-kernels` | `fast` and `fast-o3` with halo's own kernels ([`KernelUse::HaloKernels`]), on CPU devices unless `--portable` keeps them out: a program calling them runs only on halo |
//!
//! Every other CPU variant but `iree-default` compiles the ONNX graph with its depthwise and
//! narrowing convolutions written as shifted sums ([`GraphRewrite::ConvolutionsAsShifts`]). A
//! variant whose rewrite finds nothing to change in the model, and so would repeat another, is
//! left out.
//!
//! GPUs (CUDA, HIP): `iree-default`, `o3` and `o3-aggressive-fusion`.
//!
//! Vulkan: `shifted` (the target flags alone, the graph's convolutions written as shifted sums),
//! the baseline, then `o3` and `o3-aggressive-fusion` on the same graph, and
//! `o3-keep-convolutions`. IREE's SPIR-V for some convolutions gives wrong answers (see
//! [`FlagSet::graph_rewrite`](crate::FlagSet::graph_rewrite)), so the graph as given cannot be
//! the baseline there: a variant computing it is kept only where its outputs agree.
//!
//! The fastest variant within tolerance is chosen, except that what `halo compile` takes without
//! `--tune` (`fast-o3`, or the set it falls back to) stays chosen unless another is at least 3 %
//! faster: closer timings are within the noise of a shared machine.

use crate::compile::ImportKind;
use crate::flag_set::{CPU_FAST, O3};
use crate::graph_rewrite::GraphRewrite;
use crate::kernels::KernelUse;
use crate::target::{Target, TargetKind};

/// Changing the space (or how variants are timed) changes what a tuning result means, so cached
/// results carry it. 2: variants take turns call by call instead of being timed one after another.
/// 3: ONNX graphs rewritten (depthwise convolutions), and `o3-keep-depthwise`. 4: narrowing
/// convolutions rewritten too, `o3-shift-depthwise-only`, and `o3-keep-depthwise` renamed
/// `o3-keep-convolutions`. 5: strided depthwise convolutions take every other row, 3×3 ones sum
/// their taps in two chains, and the convolutions left to IREE add their bias after them. 6:
/// max pools rewritten (padded ones of a `Relu`'s values too), and average pools moved before
/// the 1×1 convolutions they follow. 7: Vulkan's variants rewrite convolutions, the baseline
/// (`shifted`) too, and `o3-keep-convolutions` joins them. 8: `fast-kernels` and `fast-o3-kernels`
/// where halo's kernels are allowed.
pub const SPACE_VERSION: u32 = 8;

/// One point of the space: a name and the optimisation flags it adds to the target's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// The name reports use.
    pub name: &'static str,
    /// The optimisation flags, without the target's.
    pub flags: Vec<String>,
    /// The change made to an ONNX graph before import.
    pub graph_rewrite: GraphRewrite,
    /// Whether the program calls halo's kernels.
    pub kernels: KernelUse,
}

const AGGRESSIVE_FUSION: &str = "--iree-dispatch-creation-enable-aggressive-fusion";

impl Variant {
    /// What the variant's import depends on.
    pub(crate) fn import(&self) -> ImportKind {
        (self.graph_rewrite, self.kernels)
    }
}

/// The variants for `target`, the baseline (`iree-default`) first; those calling halo's kernels
/// last, and only where `kernels` allows them.
pub fn variants(target: &Target, kernels: KernelUse) -> Vec<Variant> {
    let fast_o3: Vec<&str> = [O3].iter().chain(CPU_FAST).copied().collect();
    let without = |dropped: &str| fast_o3.iter().copied().filter(|f| *f != dropped).collect::<Vec<_>>();
    let with = |added: &'static str| fast_o3.iter().copied().chain([added]).collect::<Vec<_>>();
    let sets: Vec<(&'static str, Vec<&str>)> = match target.kind {
        TargetKind::Cpu => vec![
            ("iree-default", vec![]),
            ("fast", CPU_FAST.to_vec()),
            ("fast-o3", fast_o3.clone()),
            ("o3-no-im2col", without("--iree-global-opt-use-im2col-for-convs")),
            ("o3-no-data-tiling", without("--iree-opt-data-tiling")),
            ("o3-no-ukernels", without("--iree-llvmcpu-enable-ukernels=all")),
            ("o3-aggressive-fusion", with(AGGRESSIVE_FUSION)),
            ("o3-reassociate", with("--iree-llvmcpu-reassociate-fp-reductions")),
            ("o3-distribution-32", with("--iree-llvmcpu-distribution-size=32")),
            ("o3-distribution-128", with("--iree-llvmcpu-distribution-size=128")),
        ],
        TargetKind::Vulkan => vec![
            ("shifted", vec![]),
            ("o3", vec![O3]),
            ("o3-aggressive-fusion", vec![O3, AGGRESSIVE_FUSION]),
        ],
        TargetKind::Cuda | TargetKind::Hip | TargetKind::Metal => vec![
            ("iree-default", vec![]),
            ("o3", vec![O3]),
            ("o3-aggressive-fusion", vec![O3, AGGRESSIVE_FUSION]),
        ],
    };
    let rewrites = matches!(target.kind, TargetKind::Cpu | TargetKind::Vulkan);
    let mut space: Vec<Variant> = sets
        .into_iter()
        .map(|(name, flags)| Variant {
            name,
            flags: flags.into_iter().map(String::from).collect(),
            graph_rewrite: if rewrites && name != "iree-default" {
                GraphRewrite::ConvolutionsAsShifts
            } else {
                GraphRewrite::None
            },
            kernels: KernelUse::Portable,
        })
        .collect();
    let (o3_flags, others): (Vec<&str>, &[_]) = match target.kind {
        TargetKind::Cpu => (
            fast_o3,
            &[
                ("o3-shift-depthwise-only", GraphRewrite::DepthwiseAsShifts),
                ("o3-keep-convolutions", GraphRewrite::None),
            ],
        ),
        TargetKind::Vulkan => (vec![O3], &[("o3-keep-convolutions", GraphRewrite::None)]),
        TargetKind::Cuda | TargetKind::Hip | TargetKind::Metal => (Vec::new(), &[]),
    };
    for &(name, graph_rewrite) in others {
        space.push(Variant {
            name,
            flags: o3_flags.iter().map(|flag| flag.to_string()).collect(),
            graph_rewrite,
            kernels: KernelUse::Portable,
        });
    }
    if kernels == KernelUse::HaloKernels && target.kind == TargetKind::Cpu {
        let with_kernels = |name, flags: &[&str]| Variant {
            name,
            flags: flags.iter().map(|flag| flag.to_string()).collect(),
            graph_rewrite: GraphRewrite::ConvolutionsAsShifts,
            kernels,
        };
        space.push(with_kernels("fast-kernels", CPU_FAST));
        space.push(with_kernels("fast-o3-kernels", &o3_flags));
    }
    space
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_comes_first_and_no_two_variants_are_the_same() {
        for (device, kernels) in [
            ("local-task", KernelUse::Portable),
            ("local-task", KernelUse::HaloKernels),
            ("vulkan", KernelUse::Portable),
            ("cuda", KernelUse::Portable),
        ] {
            let target = Target::for_device(device, None).unwrap();
            let space = variants(&target, kernels);
            assert_eq!(
                space[0].name,
                if device == "vulkan" { "shifted" } else { "iree-default" }
            );
            assert!(space[0].flags.is_empty());
            for (i, a) in space.iter().enumerate() {
                for b in &space[i + 1..] {
                    assert_ne!(a.name, b.name);
                    assert!(
                        (&a.flags, a.graph_rewrite, a.kernels) != (&b.flags, b.graph_rewrite, b.kernels),
                        "{} and {}",
                        a.name,
                        b.name
                    );
                }
            }
        }
        let cpu = variants(&Target::for_device("local-sync", None).unwrap(), KernelUse::Portable);
        assert!(cpu.iter().all(|v| v.kernels == KernelUse::Portable));
        let no_im2col = cpu.iter().find(|v| v.name == "o3-no-im2col").unwrap();
        assert!(no_im2col.flags.contains(&O3.to_string()));
        assert!(!no_im2col.flags.iter().any(|f| f.contains("im2col")));
        assert_eq!(cpu.len(), 12);
        let rewriting = |name: &str| cpu.iter().find(|v| v.name == name).unwrap().graph_rewrite;
        assert_eq!(rewriting("iree-default"), GraphRewrite::None);
        assert_eq!(rewriting("fast-o3"), GraphRewrite::ConvolutionsAsShifts);
        assert_eq!(rewriting("o3-shift-depthwise-only"), GraphRewrite::DepthwiseAsShifts);
        assert_eq!(rewriting("o3-keep-convolutions"), GraphRewrite::None);
        let with_kernels = variants(&Target::for_device("local-sync", None).unwrap(), KernelUse::HaloKernels);
        assert_eq!(with_kernels[..12], cpu[..], "the portable variants stay");
        let calling: Vec<&str> = with_kernels[12..].iter().map(|v| v.name).collect();
        assert_eq!(calling, ["fast-kernels", "fast-o3-kernels"]);
        assert!(with_kernels[12..].iter().all(|v| v.kernels == KernelUse::HaloKernels));
        let fast_o3 = cpu.iter().find(|v| v.name == "fast-o3").unwrap();
        assert_eq!(with_kernels[13].flags, fast_o3.flags);
        let cuda = variants(&Target::for_device("cuda", None).unwrap(), KernelUse::HaloKernels);
        assert!(cuda.iter().all(|v| v.graph_rewrite == GraphRewrite::None));
        assert!(
            cuda.iter().all(|v| v.kernels == KernelUse::Portable),
            "CPU kernels only"
        );
        let vulkan = variants(&Target::for_device("vulkan", None).unwrap(), KernelUse::Portable);
        let rewriting = |name: &str| vulkan.iter().find(|v| v.name == name).unwrap().graph_rewrite;
        assert_eq!(rewriting("shifted"), GraphRewrite::ConvolutionsAsShifts);
        assert_eq!(rewriting("o3"), GraphRewrite::ConvolutionsAsShifts);
        assert_eq!(rewriting("o3-keep-convolutions"), GraphRewrite::None);
        assert_eq!(vulkan.len(), 4);
    }
}
