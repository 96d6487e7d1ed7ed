//! What a program is compiled for, read from the device URI it will run on.

use halo_hal::{Error, Result};

/// The kinds of device `halo compile` knows the compiler flags of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// `local-task`, `local-sync`: the CPU, through IREE's `llvm-cpu` backend.
    Cpu,
    /// `vulkan`: SPIR-V.
    Vulkan,
    /// `cuda`: PTX.
    Cuda,
    /// `hip`: AMD code objects (HSACO).
    Hip,
}

/// A compile target: the kind of device and, optionally, the chip to tune for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The kind of device.
    pub kind: TargetKind,
    /// The chip: an LLVM CPU name (`host`, the default for CPUs, or e.g. `x86-64-v2`), a CUDA
    /// architecture (`sm_80`), an AMD one (`gfx942`, required for HIP) or a Vulkan target
    /// (`ampere`, `rdna3`, ...). `None` leaves the compiler's default.
    pub chip: Option<String>,
}

impl Target {
    /// The target for a device URI (`local-task`, `local-sync://`, `vulkan://0`, `cuda://1`,
    /// `hip`), tuned for `chip` when given.
    ///
    /// # Errors
    /// `InvalidArgument` naming the URI for an unknown driver, a malformed chip, or HIP without
    /// a chip (the compiler has no default AMD target).
    pub fn for_device(uri: &str, chip: Option<&str>) -> Result<Target> {
        let driver = uri.split_once("://").map_or(uri, |(driver, _)| driver);
        let kind = match driver {
            "local-task" | "local-sync" | "local" => TargetKind::Cpu,
            "vulkan" => TargetKind::Vulkan,
            "cuda" => TargetKind::Cuda,
            "hip" => TargetKind::Hip,
            _ => {
                return Err(Error::invalid_argument(format!(
                    "halo compile has no target for device '{uri}'; \
                     known drivers: local-task, local-sync, vulkan, cuda, hip"
                )))
            }
        };
        if let Some(chip) = chip {
            let well_formed =
                !chip.is_empty() && chip.chars().all(|c| c.is_ascii_alphanumeric() || "-_.+,".contains(c));
            if !well_formed {
                return Err(Error::invalid_argument(format!(
                    "target chip '{chip}' for device '{uri}' is not a chip name (e.g. host, x86-64-v2, sm_80, gfx942)"
                )));
            }
        }
        if kind == TargetKind::Hip && chip.is_none() {
            return Err(Error::invalid_argument(format!(
                "device '{uri}' needs a target chip (e.g. --target-chip=gfx942): iree-compile has no default AMD target"
            )));
        }
        Ok(Target {
            kind,
            chip: chip.map(str::to_string),
        })
    }

    /// What a user should know about programs compiled for this target, if anything.
    ///
    /// Vulkan without a chip compiles for IREE's portable target (`vp_android_baseline_2022`).
    /// On an NVIDIA H100 its kernels gave results that changed from run to run (DenseNet-121: 2
    /// runs in 6 off by 0.15-0.4 % of the largest output, IREE's runtime as halo's; SqueezeNet
    /// before the graph rewrite: always far off), where `ampere` gave the same right answer
    /// every run.
    pub fn caution(&self) -> Option<&'static str> {
        (self.kind == TargetKind::Vulkan && self.chip.is_none()).then_some(
            "compiled for IREE's portable Vulkan target: on NVIDIA GPUs its kernels gave results that change \
             from run to run; compile for the GPU instead (--target-chip=ampere for NVIDIA Ampere and later)",
        )
    }

    /// The flags that select this target, with no optimisation flags.
    pub fn flags(&self) -> Vec<String> {
        let chip = self.chip.as_deref();
        let (device, chip_flag) = match self.kind {
            TargetKind::Cpu => ("local", "--iree-llvmcpu-target-cpu"),
            TargetKind::Vulkan => ("vulkan", "--iree-vulkan-target"),
            TargetKind::Cuda => ("cuda", "--iree-cuda-target"),
            TargetKind::Hip => ("hip", "--iree-rocm-target"),
        };
        let mut flags = vec![format!("--iree-hal-target-device={device}")];
        if self.kind == TargetKind::Cpu {
            flags.push("--iree-hal-local-target-device-backends=llvm-cpu".into());
            flags.push(format!("{chip_flag}={}", chip.unwrap_or("host")));
        } else if let Some(chip) = chip {
            flags.push(format!("{chip_flag}={chip}"));
        }
        flags
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_portable_vulkan_target_comes_with_a_caution() {
        assert!(Target::for_device("vulkan", None)
            .unwrap()
            .caution()
            .unwrap()
            .contains("--target-chip=ampere"));
        assert!(Target::for_device("vulkan", Some("ampere"))
            .unwrap()
            .caution()
            .is_none());
        assert!(Target::for_device("local-task", None).unwrap().caution().is_none());
        assert!(Target::for_device("cuda", None).unwrap().caution().is_none());
    }

    #[test]
    fn device_uris_choose_the_target_flags() {
        let cpu = Target::for_device("local-task", None).unwrap();
        assert_eq!(
            cpu.flags(),
            [
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-llvmcpu-target-cpu=host"
            ]
        );
        let portable = Target::for_device("local-sync://", Some("x86-64-v2")).unwrap();
        assert_eq!(portable.flags()[2], "--iree-llvmcpu-target-cpu=x86-64-v2");
        let cuda = Target::for_device("cuda://0", Some("sm_80")).unwrap();
        assert_eq!(
            cuda.flags(),
            ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"]
        );
        let vulkan = Target::for_device("vulkan", None).unwrap();
        assert_eq!(vulkan.flags(), ["--iree-hal-target-device=vulkan"]);
        let hip = Target::for_device("hip://0", Some("gfx942")).unwrap();
        assert_eq!(
            hip.flags(),
            ["--iree-hal-target-device=hip", "--iree-rocm-target=gfx942"]
        );
    }

    #[test]
    fn unknown_devices_and_bad_chips_are_refused_by_name() {
        let error = Target::for_device("metal://0", None).unwrap_err();
        assert!(error.to_string().contains("'metal://0'"), "{error}");
        let error = Target::for_device("local-task", Some("host --iree-foo")).unwrap_err();
        assert!(error.to_string().contains("not a chip name"), "{error}");
        let error = Target::for_device("hip", None).unwrap_err();
        assert!(error.to_string().contains("--target-chip"), "{error}");
    }
}
