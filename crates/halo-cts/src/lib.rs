//! halo's conformance test suite: every behaviour of the HAL object model, written once against
//! the traits and expanded into real `#[test]`s for each driver by [`cts_suite!`].
//!
//! A driver declares a [`Manifest`]: the capability tags it has, cases it permanently does not
//! support (with a reason), cases expected to fail for now (with a reason), and whether its cases
//! must run alone ([`Isolation`]). An expected
//! failure that passes fails the test, so stale entries get removed. A device that reports
//! `Unavailable` skips every case, printing which.
#![warn(missing_docs)]

pub mod cases;
mod context;

pub use context::{CtsDevice, Recording};

use halo_hal::{Device, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};

/// Capabilities a case may need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// Queue operations return before their waits are met (wait-before-signal works on one thread).
    AsyncQueue,
}

/// What a driver supports and which cases it is known to fail.
pub struct Manifest {
    /// Driver name, for messages.
    pub driver: &'static str,
    /// URI of the device to test.
    pub device_uri: &'static str,
    /// Executable format its fixtures are compiled to.
    pub executable_format: &'static str,
    /// Capabilities it has.
    pub tags: &'static [Tag],
    /// Cases it can never pass, with the reason.
    pub unsupported: &'static [(&'static str, &'static str)],
    /// Cases that fail today, with the reason.
    pub expected_failures: &'static [(&'static str, &'static str)],
    /// Whether its cases may run beside other cases of the process.
    pub isolation: Isolation,
}

/// Whether a manifest's cases may run while the test harness runs other cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Cases run on the harness's threads at once.
    Shared,
    /// Each case runs while no other case that asked to run alone runs (see [`run_alone`]).
    Alone,
}

/// Waits until no other case that asked to run alone runs, and holds the place until dropped.
///
/// For drivers whose test tooling is not thread-safe: the Vulkan validation layer of Debian 12
/// (1.3.239) keeps its devices in a map that creating or destroying a device changes without a
/// lock, so a call on one device while another thread creates or drops one can crash the
/// process.
pub fn run_alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    // A case that panicked poisons the lock; the next case still runs alone.
    ALONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Creates the device a manifest names.
pub type DeviceFactory = fn(&str) -> Result<Arc<dyn Device>>;

/// Runs one case against the manifest's device, honouring skips and expected failures.
pub fn run_case(
    manifest: &'static Manifest,
    factory: DeviceFactory,
    name: &str,
    needs: &[Tag],
    recording: Recording,
    case: fn(&CtsDevice),
) {
    let full_name = format!("{}::{name}", manifest.driver);
    if let Some((_, reason)) = manifest.unsupported.iter().find(|(case, _)| *case == name) {
        println!("SKIPPED {full_name}: unsupported: {reason}");
        return;
    }
    if let Some(tag) = needs.iter().find(|tag| !manifest.tags.contains(tag)) {
        println!("SKIPPED {full_name}: needs capability {tag:?}");
        return;
    }
    // Taken before the device is made, so it is dropped after it.
    let _alone = (manifest.isolation == Isolation::Alone).then(run_alone);
    let device = match factory(manifest.device_uri) {
        Ok(device) => device,
        Err(error) if error.is_unavailable() => {
            println!("SKIPPED {full_name}: device unavailable: {error}");
            return;
        }
        Err(error) => panic!("{full_name}: creating device {}: {error}", manifest.device_uri),
    };
    let context = CtsDevice::new(device, manifest, recording, factory);
    let outcome = catch_unwind(AssertUnwindSafe(|| case(&context)));
    match (
        manifest.expected_failures.iter().find(|(case, _)| *case == name),
        outcome,
    ) {
        (None, Ok(())) => {}
        (None, Err(panic)) => std::panic::resume_unwind(panic),
        (Some((_, reason)), Err(_)) => println!("XFAIL {full_name}: {reason}"),
        (Some((_, reason)), Ok(())) => {
            panic!("{full_name} passed but is listed as an expected failure ({reason}); remove the entry")
        }
    }
}

/// Expands the whole suite into `#[test]` functions inside a module named `$driver`.
///
/// ```text
/// halo_cts::cts_suite!(local_sync, MANIFEST, create_device);
/// ```
#[macro_export]
macro_rules! cts_suite {
    ($driver:ident, $manifest:expr, $factory:expr) => {
        mod $driver {
            #[allow(unused_imports)]
            use super::*;
            $crate::for_each_case!($crate::cts_case, $manifest, $factory);
        }
    };
}

/// Expands one case into tests (two for command buffer cases: direct and binding-table refs).
#[doc(hidden)]
#[macro_export]
macro_rules! cts_case {
    ($manifest:expr, $factory:expr, plain, $module:ident :: $name:ident, [$($tag:ident),*]) => {
        #[test]
        fn $name() {
            $crate::run_case(
                &$manifest, $factory, stringify!($name), &[$($crate::Tag::$tag),*],
                $crate::Recording::Direct, $crate::cases::$module::$name,
            );
        }
    };
    ($manifest:expr, $factory:expr, recorded, $module:ident :: $name:ident, [$($tag:ident),*]) => {
        mod $name {
            use super::*;
            #[test]
            fn direct() {
                $crate::run_case(
                    &$manifest, $factory, concat!(stringify!($name), "_direct"), &[$($crate::Tag::$tag),*],
                    $crate::Recording::Direct, $crate::cases::$module::$name,
                );
            }
            #[test]
            fn binding_table() {
                $crate::run_case(
                    &$manifest, $factory, concat!(stringify!($name), "_binding_table"), &[$($crate::Tag::$tag),*],
                    $crate::Recording::BindingTable, $crate::cases::$module::$name,
                );
            }
        }
    };
}
