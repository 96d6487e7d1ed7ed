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
    /// `metal`: MSL source (`metal-msl-fb`), or a metallib where Apple's tools are installed.
    Metal,
}

/// A CPU architecture programs are compiled for, by IREE's name for it (the suffix of its
/// executable formats: `embedded-elf-x86_64`, `embedded-elf-arm_64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuArch {
    /// x86-64.
    X86_64,
    /// AArch64 (ARMv8-A and later).
    Arm64,
}

impl CpuArch {
    /// The architecture of the machine this build runs on, if halo compiles for it.
    pub fn host() -> Option<CpuArch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(CpuArch::X86_64),
            "aarch64" => Some(CpuArch::Arm64),
            _ => None,
        }
    }

    /// The architecture called `name`: IREE's `x86_64` or `arm_64`, or the other usual names
    /// (`x86-64`, `amd64`, `aarch64`, `arm64`).
    ///
    /// # Errors
    /// `InvalidArgument` naming `name` and the known architectures.
    pub fn from_name(name: &str) -> Result<CpuArch> {
        match name {
            "x86_64" | "x86-64" | "amd64" => Ok(CpuArch::X86_64),
            "arm_64" | "aarch64" | "arm64" => Ok(CpuArch::Arm64),
            _ => Err(Error::invalid_argument(format!(
                "unknown CPU architecture '{name}'; known: x86_64, arm_64 (aarch64)"
            ))),
        }
    }

    /// IREE's name for it.
    pub fn name(self) -> &'static str {
        match self {
            CpuArch::X86_64 => "x86_64",
            CpuArch::Arm64 => "arm_64",
        }
    }

    /// The LLVM target triple its programs are compiled with (Linux's: embedded ELF executables
    /// run on every operating system halo's CPU drivers load them on).
    fn triple(self) -> &'static str {
        match self {
            CpuArch::X86_64 => "x86_64-unknown-linux-gnu",
            CpuArch::Arm64 => "aarch64-unknown-linux-gnu",
        }
    }

    /// The CPU every machine of the architecture can run: what a program for another machine is
    /// compiled for when no chip is named.
    fn baseline_chip(self) -> &'static str {
        match self {
            CpuArch::X86_64 => "x86-64-v2",
            CpuArch::Arm64 => "generic",
        }
    }
}

/// A compile target: the kind of device and, optionally, the chip to tune for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The kind of device.
    pub kind: TargetKind,
    /// For CPU devices, the architecture to compile for when it is named; `None` is this
    /// machine's.
    pub cpu_arch: Option<CpuArch>,
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
            "metal" => TargetKind::Metal,
            _ => {
                return Err(Error::invalid_argument(format!(
                    "halo compile has no target for device '{uri}'; \
                     known drivers: local-task, local-sync, vulkan, cuda, hip, metal"
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
        if let (TargetKind::Metal, Some(chip)) = (kind, chip) {
            if !METAL_PLATFORMS.contains(&chip) {
                return Err(Error::invalid_argument(format!(
                    "target chip '{chip}' for device '{uri}' is not a Metal platform ({})",
                    METAL_PLATFORMS.join(", ")
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
            cpu_arch: None,
            chip: chip.map(str::to_string),
        })
    }

    /// This target compiled for the CPU architecture `arch` (a program for another machine,
    /// such as an ARM64 server or board from an x86-64 one). Without a chip it is compiled for
    /// the architecture's baseline CPU when that is not this machine's, for this CPU when it is.
    ///
    /// # Errors
    /// `InvalidArgument` for a device that is not a CPU.
    pub fn with_cpu_arch(mut self, arch: CpuArch) -> Result<Target> {
        if self.kind != TargetKind::Cpu {
            return Err(Error::invalid_argument(format!(
                "a CPU architecture ({}) applies to CPU devices (local-task, local-sync), not to {:?} ones",
                arch.name(),
                self.kind
            )));
        }
        self.cpu_arch = Some(arch);
        Ok(self)
    }

    /// Whether programs for this target can run on this machine (a CPU program for another
    /// architecture cannot).
    pub fn runs_here(&self) -> bool {
        self.foreign_arch().is_none()
    }

    /// The CPU architecture named, when it is not this machine's.
    fn foreign_arch(&self) -> Option<CpuArch> {
        self.cpu_arch.filter(|&arch| Some(arch) != CpuArch::host())
    }

    /// What a user should know about programs compiled for this target, if anything.
    ///
    /// Vulkan without a chip compiles for IREE's portable target (`vp_android_baseline_2022`).
    /// On an NVIDIA H100 its kernels gave results that changed from run to run (DenseNet-121: 2
    /// runs in 6 off by 0.15-0.4 % of the largest output, IREE's runtime as halo's; SqueezeNet
    /// before the graph rewrite: always far off), where `ampere` gave the same right answer
    /// every run.
    ///
    /// A CPU program for another architecture without a chip is compiled for its baseline CPU,
    /// without the vector extensions of the CPU it will run on.
    pub fn caution(&self) -> Option<String> {
        if self.kind == TargetKind::Vulkan && self.chip.is_none() {
            return Some(
                "compiled for IREE's portable Vulkan target: on NVIDIA GPUs its kernels gave results that change \
                 from run to run; compile for the GPU instead (--target-chip=ampere for NVIDIA Ampere and later)"
                    .into(),
            );
        }
        let arch = self.foreign_arch().filter(|_| self.chip.is_none())?;
        Some(format!(
            "compiled for the baseline {} CPU ({}); name the CPU it will run on with --target-chip (e.g. \
             neoverse-v1, neoverse-n1, apple-m1 for arm_64) for its vector extensions",
            arch.name(),
            arch.baseline_chip()
        ))
    }

    /// The flags that select this target, with no optimisation flags.
    pub fn flags(&self) -> Vec<String> {
        let chip = self.chip.as_deref();
        let (device, chip_flag) = match self.kind {
            TargetKind::Cpu => ("local", "--iree-llvmcpu-target-cpu"),
            TargetKind::Vulkan => ("vulkan", "--iree-vulkan-target"),
            TargetKind::Cuda => ("cuda", "--iree-cuda-target"),
            TargetKind::Hip => ("hip", "--iree-rocm-target"),
            TargetKind::Metal => ("metal", "--iree-metal-target-platform"),
        };
        let mut flags = vec![format!("--iree-hal-target-device={device}")];
        if self.kind == TargetKind::Cpu {
            flags.push("--iree-hal-local-target-device-backends=llvm-cpu".into());
            if let Some(arch) = self.cpu_arch {
                flags.push(format!("--iree-llvmcpu-target-triple={}", arch.triple()));
            }
            let default_chip = self.foreign_arch().map_or("host", CpuArch::baseline_chip);
            flags.push(format!("{chip_flag}={}", chip.unwrap_or(default_chip)));
        } else if let Some(chip) = chip {
            flags.push(format!("{chip_flag}={chip}"));
        }
        if self.kind == TargetKind::Metal && !metallib_tools_present() {
            // Without Apple's tools iree-compile cannot make a metallib; the MSL source runs on
            // the device (compiled when loaded) and on the emulated device alike.
            flags.push("--iree-metal-compile-to-metallib=false".into());
        }
        flags
    }
}

/// The Apple platforms `iree-compile` builds Metal programs for (`--target-chip` for `metal`).
const METAL_PLATFORMS: [&str; 3] = ["macos", "ios", "ios-simulator"];

/// Whether Apple's Metal compiler is installed, so that iree-compile can embed a metallib.
fn metallib_tools_present() -> bool {
    cfg!(target_os = "macos")
        && std::process::Command::new("xcrun")
            .args(["-sdk", "macosx", "--find", "metal"])
            .output()
            .is_ok_and(|output| output.status.success())
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
    fn a_cpu_architecture_adds_its_triple_and_another_machines_defaults_to_its_baseline() {
        let host = CpuArch::host().expect("a host architecture halo compiles for");
        let other = if host == CpuArch::X86_64 {
            CpuArch::Arm64
        } else {
            CpuArch::X86_64
        };
        let cpu = |arch, chip| {
            Target::for_device("local-task", chip)
                .unwrap()
                .with_cpu_arch(arch)
                .unwrap()
        };

        let foreign = cpu(other, None);
        assert!(!foreign.runs_here());
        let flags = foreign.flags();
        assert_eq!(flags[2], format!("--iree-llvmcpu-target-triple={}", other.triple()));
        assert_eq!(flags[3], format!("--iree-llvmcpu-target-cpu={}", other.baseline_chip()));
        assert!(foreign.caution().unwrap().contains("--target-chip"));

        let named = cpu(CpuArch::Arm64, Some("neoverse-v1"));
        assert_eq!(named.flags()[3], "--iree-llvmcpu-target-cpu=neoverse-v1");
        assert_eq!(named.caution(), None);

        let here = cpu(host, None);
        assert!(here.runs_here());
        assert_eq!(here.flags()[3], "--iree-llvmcpu-target-cpu=host");
        assert!(Target::for_device("local-task", None).unwrap().runs_here());
    }

    #[test]
    fn architectures_are_read_by_their_usual_names_and_only_for_cpus() {
        for (name, arch) in [
            ("arm_64", CpuArch::Arm64),
            ("aarch64", CpuArch::Arm64),
            ("x86-64", CpuArch::X86_64),
        ] {
            assert_eq!(CpuArch::from_name(name).unwrap(), arch);
        }
        let error = CpuArch::from_name("riscv64").unwrap_err();
        assert!(
            error.to_string().contains("'riscv64'") && error.to_string().contains("arm_64"),
            "{error}"
        );
        let vulkan = Target::for_device("vulkan", None).unwrap();
        let error = vulkan.with_cpu_arch(CpuArch::Arm64).unwrap_err();
        assert!(error.to_string().contains("CPU devices"), "{error}");
    }

    #[test]
    fn metal_compiles_msl_source_where_apples_tools_are_missing() {
        let metal = Target::for_device("metal://emulated", None).unwrap();
        let flags = metal.flags();
        assert_eq!(flags[0], "--iree-hal-target-device=metal");
        let source_only = flags.contains(&"--iree-metal-compile-to-metallib=false".to_string());
        assert_eq!(source_only, !metallib_tools_present(), "{flags:?}");
        let ios = Target::for_device("metal", Some("ios")).unwrap();
        assert!(ios.flags().contains(&"--iree-metal-target-platform=ios".to_string()));
        let error = Target::for_device("metal", Some("m3")).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("not a Metal platform (macos, ios, ios-simulator)"),
            "{error}"
        );
    }

    #[test]
    fn unknown_devices_and_bad_chips_are_refused_by_name() {
        let error = Target::for_device("webgpu://0", None).unwrap_err();
        assert!(error.to_string().contains("'webgpu://0'"), "{error}");
        let error = Target::for_device("local-task", Some("host --iree-foo")).unwrap_err();
        assert!(error.to_string().contains("not a chip name"), "{error}");
        let error = Target::for_device("hip", None).unwrap_err();
        assert!(error.to_string().contains("--target-chip"), "{error}");
    }
}
