//! The device the `halo` command line uses when none is named; its drivers are the runtime's
//! ([`halo_runtime::default_registry`], the one list of drivers).

/// Device used when `--device` is not given.
pub const DEFAULT_DEVICE: &str = "local-task";
