//! The chip a program is compiled for, read from the device it will run on when none is named.
//!
//! For CPUs the compiler's `host` already means "this machine". For CUDA, iree-compile's
//! default is `sm_60` (Pascal, 2016): newer GPUs run that PTX, but through none of their newer
//! instructions. For Vulkan it is a portable target whose kernels gave wrong or run-to-run
//! varying answers on an NVIDIA H100, where the GPU's own architecture gave the right ones. So a
//! CUDA target without a chip takes the architecture of the device at its URI when one opens
//! here, and so does a Vulkan target whose device is also a CUDA device (an NVIDIA GPU has one
//! UUID under both APIs); `--target-chip` still names any other.

use crate::target::{Target, TargetKind};
use halo_hal::Result;
use halo_runtime::Instance;

/// The CUDA architectures iree-compile 3.13 compiles for, as compute capabilities, oldest
/// first. It refuses the others ("missing GPU target"), Hopper's `sm_90` and datacenter
/// Blackwell's `sm_100` among them.
const CUDA_ARCHITECTURES: [(i64, i64); 12] = [
    (6, 0),
    (6, 1),
    (6, 2),
    (7, 0),
    (7, 2),
    (7, 5),
    (8, 0),
    (8, 6),
    (8, 7),
    (8, 9),
    (12, 0),
    (12, 1),
];

/// iree-compile's CUDA architecture when it is given none.
const CUDA_COMPILER_DEFAULT: &str = "sm_60";

/// The newest architecture iree-compile knows that a device of compute capability
/// `major.minor` runs (PTX for one architecture is compiled by the driver for any later one),
/// or `None` for a device older than all of them.
fn cuda_architecture(major: i64, minor: i64) -> Option<String> {
    CUDA_ARCHITECTURES
        .iter()
        .rev()
        .find(|&&known| known <= (major, minor))
        .map(|(major, minor)| format!("sm_{major}{minor}"))
}

/// How a target's chip was settled: what the user is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChipChoice {
    /// A chip was named, or the device does not say more than the target's default.
    Unchanged,
    /// Read from the device the program will run on.
    FromDevice {
        /// The chip chosen.
        chip: String,
        /// What said so, e.g. `compute capability 9.0 of device 'cuda'`.
        reported: String,
    },
    /// No CUDA device said which: the compiler's default stays.
    CompilerDefault {
        /// Why no device said.
        reason: String,
    },
}

impl ChipChoice {
    /// A line for the user about the choice; `None` when the chip stays as it was.
    pub fn note(&self) -> Option<String> {
        match self {
            ChipChoice::Unchanged => None,
            ChipChoice::FromDevice { chip, reported } => Some(format!(
                "compiling for {chip}, the newest NVIDIA architecture iree-compile knows up to the {reported} \
                 (--target-chip names another)"
            )),
            ChipChoice::CompilerDefault { reason } => Some(format!(
                "{reason}; compiling for iree-compile's default {CUDA_COMPILER_DEFAULT}, which newer GPUs run \
                 without their newer instructions: name the GPU's architecture with --target-chip (e.g. sm_80 \
                 for Ampere and later)"
            )),
        }
    }
}

impl Target {
    /// Gives a CUDA target named without a chip the architecture of the device at `uri`, and a
    /// Vulkan one that of the NVIDIA GPU at `uri`, when the device opens here; other targets,
    /// and Vulkan devices that are not CUDA devices too, stay as they are.
    pub fn settle_chip(&mut self, uri: &str) -> ChipChoice {
        if self.chip.is_some() {
            return ChipChoice::Unchanged;
        }
        let found = match self.kind {
            TargetKind::Cuda => compute_capability(uri).map(|capability| (capability, format!("device '{uri}'"))),
            TargetKind::Vulkan => match cuda_device_of_vulkan(uri) {
                Some(cuda_uri) => compute_capability(&cuda_uri)
                    .map(|capability| (capability, format!("device '{uri}' (CUDA device '{cuda_uri}')"))),
                None => return ChipChoice::Unchanged,
            },
            TargetKind::Cpu | TargetKind::Hip | TargetKind::Metal => return ChipChoice::Unchanged,
        };
        let ((major, minor), device) = match found {
            Ok(found) => found,
            // A Vulkan device that is a CUDA device the CUDA driver cannot open keeps the portable
            // target, which comes with its own caution.
            Err(_) if self.kind == TargetKind::Vulkan => return ChipChoice::Unchanged,
            Err(error) => {
                return ChipChoice::CompilerDefault {
                    reason: format!("no CUDA device to read the chip from ({error})"),
                }
            }
        };
        let reported = format!("compute capability {major}.{minor} of {device}");
        match cuda_architecture(major, minor) {
            Some(chip) => {
                self.chip = Some(chip.clone());
                ChipChoice::FromDevice { chip, reported }
            }
            None if self.kind == TargetKind::Vulkan => ChipChoice::Unchanged,
            None => ChipChoice::CompilerDefault {
                reason: format!("the {reported} is older than every architecture iree-compile compiles for"),
            },
        }
    }
}

/// The compute capability of the CUDA device at `uri`.
fn compute_capability(uri: &str) -> Result<(i64, i64)> {
    let device = Instance::new().create_device(uri)?;
    let major = device.query_i64("cuda.device", "compute_capability_major")?;
    let minor = device.query_i64("cuda.device", "compute_capability_minor")?;
    Ok((major, minor))
}

/// The URI of the CUDA device with the UUID of the Vulkan device at `uri`, when both drivers list
/// it: an NVIDIA GPU.
fn cuda_device_of_vulkan(uri: &str) -> Option<String> {
    let instance = Instance::new();
    let uuid = instance.create_device(uri).ok()?.info().path.clone();
    let listed = instance
        .registry()
        .create_driver("cuda")
        .ok()?
        .enumerate_devices()
        .ok()?;
    listed
        .iter()
        .any(|device| device.path == uuid)
        .then(|| format!("cuda://{uuid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_gets_the_newest_architecture_the_compiler_knows_up_to_its_own() {
        assert_eq!(cuda_architecture(8, 0).as_deref(), Some("sm_80"));
        assert_eq!(cuda_architecture(8, 6).as_deref(), Some("sm_86"));
        // Ada, then Hopper and datacenter Blackwell, which iree-compile 3.13 has no target for.
        assert_eq!(cuda_architecture(8, 9).as_deref(), Some("sm_89"));
        assert_eq!(cuda_architecture(9, 0).as_deref(), Some("sm_89"));
        assert_eq!(cuda_architecture(10, 0).as_deref(), Some("sm_89"));
        assert_eq!(cuda_architecture(12, 0).as_deref(), Some("sm_120"));
        assert_eq!(cuda_architecture(13, 0).as_deref(), Some("sm_121"));
        assert_eq!(cuda_architecture(7, 1).as_deref(), Some("sm_70"));
        assert_eq!(cuda_architecture(5, 2), None);
    }

    #[test]
    fn named_chips_and_cpu_targets_are_kept() {
        for (uri, chip) in [
            ("local-task", None),
            ("vulkan", Some("ampere")),
            ("cuda", Some("sm_75")),
            ("hip", Some("gfx942")),
        ] {
            let mut target = Target::for_device(uri, chip).unwrap();
            let before = target.clone();
            assert_eq!(target.settle_chip(uri), ChipChoice::Unchanged, "{uri}");
            assert_eq!(target, before);
        }
    }

    #[test]
    fn a_cuda_target_without_a_device_keeps_the_compiler_default_and_says_why() {
        // No driver answers this URI's device, so the reason is the registry's error.
        let mut target = Target::for_device("cuda://no-such-device", None).unwrap();
        let choice = target.settle_chip("cuda://no-such-device");
        assert_eq!(target.chip, None);
        let note = choice.note().unwrap();
        assert!(note.starts_with("no CUDA device to read the chip from ("), "{note}");
        assert!(
            note.contains("default sm_60") && note.contains("--target-chip"),
            "{note}"
        );
    }
}
