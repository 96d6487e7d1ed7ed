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

    /// Refuses a format this cache cannot prepare, listing the ones it can: the first check of
    /// every [`ExecutableCache::prepare_executable`].
    ///
    /// # Errors
    /// `NotFound` naming `format` and the supported formats.
    fn check_format(&self, format: &str) -> Result<()> {
        if self.can_prepare_format(format) {
            return Ok(());
        }
        Err(Error::not_found(format!(
            "no loader for executable format '{format}'; this device supports: {}",
            self.supported_formats().join(", ")
        )))
    }
}

/// Bytes before the FlatBuffer in IREE's GPU executable formats (`VKE1`, `CDA1`, `HIP1`).
pub const GPU_HEADER_SIZE: usize = 64;

/// The FlatBuffer inside an IREE GPU executable: a 64-byte header (4-byte magic, u32 version 0,
/// u64 content size, reserved words), then a FlatBuffer whose file identifier is the magic again.
/// `what` names the format in errors (`Vulkan executable`).
///
/// # Errors
/// `InvalidArgument` for a short file or a wrong magic or identifier, `Incompatible` for another
/// version, `OutOfRange` when the declared size does not fit the file.
pub fn gpu_flatbuffer<'a>(data: &'a [u8], identifier: &str, what: &str) -> Result<&'a [u8]> {
    if data.len() < GPU_HEADER_SIZE {
        return Err(Error::invalid_argument(format!(
            "{what} of {} bytes is shorter than its {GPU_HEADER_SIZE}-byte header",
            data.len()
        )));
    }
    if &data[0..4] != identifier.as_bytes() {
        return Err(Error::invalid_argument(format!(
            "not a {what}: magic {:02x?} is not '{identifier}'",
            &data[0..4]
        )));
    }
    let version = u32::from_le_bytes(data[4..8].try_into().expect("4 bytes"));
    if version != 0 {
        return Err(Error::incompatible(format!(
            "{what} header version {version}; halo reads version 0"
        )));
    }
    let content_size = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes"));
    let available = (data.len() - GPU_HEADER_SIZE) as u64;
    if content_size == 0 || content_size > available {
        return Err(Error::out_of_range(format!(
            "{what} header declares {content_size} bytes of content; {available} follow it"
        )));
    }
    let body = &data[GPU_HEADER_SIZE..GPU_HEADER_SIZE + content_size as usize];
    let has_identifier = body.get(4..8).is_some_and(|id| id == identifier.as_bytes());
    if !has_identifier {
        return Err(Error::invalid_argument(format!(
            "{what} FlatBuffer lacks the '{identifier}' identifier"
        )));
    }
    Ok(body)
}
