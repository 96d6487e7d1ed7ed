//! CPU executables: a loaded executable library wrapped as a HAL executable, and its cache.

use crate::library::{self, HostImport, Library};
use halo_hal::executable::check_export_ordinal;
use halo_hal::{Executable, ExecutableCache, ExecutableParams, ExportInfo, Result};
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An executable library prepared for the CPU drivers.
pub struct LocalExecutable {
    format: String,
    library: Library,
    exports: Vec<ExportInfo>,
    local_memory_sizes: Vec<u32>,
    /// Measured nanoseconds per workgroup of each export (0 until measured), for scheduling.
    workgroup_ns: Vec<AtomicU64>,
}

impl LocalExecutable {
    /// Loads `params.data` in `params.format`, resolving its imports from `imports`.
    pub fn load(params: &ExecutableParams<'_>, imports: &[HostImport]) -> Result<Self> {
        let library = Library::load_with_imports(params.format, params.data, params.constants, imports)?;
        let mut exports = Vec::new();
        let mut local_memory_sizes = Vec::new();
        for ordinal in 0..library.export_count() {
            let attrs = library.export_attrs(ordinal);
            exports.push(ExportInfo {
                name: library.export_name(ordinal).unwrap_or_default().to_string(),
                constant_count: attrs.constant_count,
                binding_count: attrs.binding_count,
                workgroup_size: attrs.workgroup_size,
            });
            local_memory_sizes.push(attrs.local_memory_bytes);
        }
        let workgroup_ns = exports.iter().map(|_| AtomicU64::new(0)).collect();
        Ok(LocalExecutable {
            format: params.format.to_string(),
            library,
            exports,
            local_memory_sizes,
            workgroup_ns,
        })
    }

    /// The loaded library.
    pub fn library(&self) -> &Library {
        &self.library
    }

    /// Cached information about export `ordinal` (which the caller has validated).
    pub(crate) fn export(&self, ordinal: u32) -> &ExportInfo {
        &self.exports[ordinal as usize]
    }

    /// Measured cost of one workgroup of export `ordinal`, if any run was timed.
    pub(crate) fn workgroup_ns(&self, ordinal: u32) -> Option<u64> {
        Some(self.workgroup_ns[ordinal as usize].load(Ordering::Relaxed)).filter(|ns| *ns > 0)
    }

    /// Folds a timed run of `workgroups` workgroups into the export's cost estimate.
    pub(crate) fn record_workgroup_time(&self, ordinal: u32, workgroups: u64, elapsed_ns: u64) {
        if workgroups == 0 {
            return;
        }
        let sample = (elapsed_ns / workgroups).max(1);
        let slot = &self.workgroup_ns[ordinal as usize];
        let old = slot.load(Ordering::Relaxed);
        // An exponential average: recent runs dominate, one outlier does not.
        let new = if old == 0 { sample } else { (old * 3 + sample) / 4 };
        slot.store(new.max(1), Ordering::Relaxed);
    }

    /// Workgroup-local scratch bytes export `ordinal` needs.
    pub(crate) fn local_memory_size(&self, ordinal: u32) -> u32 {
        self.local_memory_sizes[ordinal as usize]
    }
}

impl Executable for LocalExecutable {
    fn format(&self) -> &str {
        &self.format
    }
    fn export_count(&self) -> u32 {
        self.exports.len() as u32
    }
    fn export_info(&self, ordinal: u32) -> Result<ExportInfo> {
        check_export_ordinal(self, ordinal)?;
        Ok(self.exports[ordinal as usize].clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Prepares the executable formats the library loaders accept on this host.
#[derive(Default, Clone)]
pub struct LocalExecutableCache {
    imports: Arc<[HostImport]>,
}

impl LocalExecutableCache {
    /// A cache whose executables may import the host functions in `imports`.
    pub fn new(imports: Arc<[HostImport]>) -> Self {
        LocalExecutableCache { imports }
    }
}

impl ExecutableCache for LocalExecutableCache {
    fn can_prepare_format(&self, format: &str) -> bool {
        library::supported_formats().contains(&format)
    }

    fn supported_formats(&self) -> Vec<String> {
        library::supported_formats().iter().map(|f| f.to_string()).collect()
    }

    fn prepare_executable(&self, params: &ExecutableParams<'_>) -> Result<Arc<dyn Executable>> {
        self.check_format(params.format)?;
        Ok(Arc::new(LocalExecutable::load(params, &self.imports)?))
    }
}
