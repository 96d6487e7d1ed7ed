//! Executables (compiled kernels prepared for a device) and the caches that prepare them.

use crate::{Error, Result};
use std::any::Any;
use std::sync::Arc;

/// What a device knows about one export of an executable (`iree_hal_executable_function_info_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportInfo {
    /// Export name as the compiler wrote it.
    pub name: String,
    /// Number of 32-bit constants a dispatch must pass.
    pub constant_count: u32,
    /// Number of buffer bindings a dispatch must pass.
    pub binding_count: u32,
    /// Workgroup size fixed at compile time.
    pub workgroup_size: [u32; 3],
}

/// A prepared executable (`iree_hal_executable_t`).
///
/// Ownership: command buffers that dispatch it hold an `Arc` until their submission completes.
/// Threading: immutable after preparation; any thread.
pub trait Executable: Send + Sync + 'static {
    /// The format it was prepared from (e.g. `embedded-elf-x86_64`).
    fn format(&self) -> &str;
    /// Number of exported functions.
    fn export_count(&self) -> u32;
    /// Information about export `ordinal`.
    ///
    /// # Errors
    /// `OutOfRange` when `ordinal >= export_count()`.
    fn export_info(&self, ordinal: u32) -> Result<ExportInfo>;
    /// For drivers to recover their concrete type.
    fn as_any(&self) -> &dyn Any;

    /// The ordinal of the export called `name`.
    fn lookup_export(&self, name: &str) -> Result<u32> {
        for ordinal in 0..self.export_count() {
            if self.export_info(ordinal)?.name == name {
                return Ok(ordinal);
            }
        }
        Err(Error::not_found(format!("executable has no export named '{name}'")))
    }
}

/// Checks an export ordinal against an executable, naming both in the error.
pub fn check_export_ordinal(executable: &dyn Executable, ordinal: u32) -> Result<()> {
    let count = executable.export_count();
    if ordinal < count {
        Ok(())
    } else {
        Err(Error::out_of_range(format!(
            "export ordinal {ordinal} is out of range; the executable has {count} exports"
        )))
    }
}

/// What to prepare (`iree_hal_executable_params_t`).
#[derive(Debug, Clone, Copy)]
pub struct ExecutableParams<'a> {
    /// Format string, e.g. `embedded-elf-x86_64`.
    pub format: &'a str,
    /// The executable's bytes; the cache copies what it needs.
    pub data: &'a [u8],
    /// Executable-level specialization constants.
    pub constants: &'a [u32],
}

/// Prepares executables for one device (`iree_hal_executable_cache_t`).
///
/// Threading: any thread.
pub trait ExecutableCache: Send + Sync {
    /// Whether this cache can prepare `format`.
    fn can_prepare_format(&self, format: &str) -> bool;
    /// The formats this cache prepares, for error messages and `halo devices`.
    fn supported_formats(&self) -> Vec<String>;
    /// Loads and prepares an executable.
    ///
    /// # Errors
    /// `NotFound` for an unknown format (listing the known ones); `InvalidArgument` or
    /// `Incompatible` for malformed data.
    fn prepare_executable(&self, params: &ExecutableParams<'_>) -> Result<Arc<dyn Executable>>;
}

/// The error for a format this cache cannot prepare, listing the ones it can.
pub fn unknown_format_error(format: &str, supported: &[String]) -> Error {
    Error::not_found(format!(
        "no loader for executable format '{format}'; this device supports: {}",
        supported.join(", ")
    ))
}
