//! CPU executables: a loaded executable library wrapped as a HAL executable, and its cache.

use crate::library::{self, HostImport, Library};
use crate::workgroup_cost::{CostKey, WorkgroupCosts};
use halo_hal::executable::check_export_ordinal;
use halo_hal::{Executable, ExecutableCache, ExecutableParams, ExportInfo, Result};
use std::any::Any;
use std::sync::Arc;

/// An executable library prepared for the CPU drivers.
pub struct LocalExecutable {
    format: String,
    library: Library,
    exports: Vec<ExportInfo>,
    local_memory_sizes: Vec<u32>,
    /// Measured nanoseconds per workgroup of each export, by push constants, for scheduling.
    workgroup_ns: Vec<WorkgroupCosts>,
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
        let workgroup_ns = exports.iter().map(|_| WorkgroupCosts::default()).collect();
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

    /// Measured cost of one workgroup of export `ordinal` run with the constants of `key`, if
    /// such a run was timed.
    pub(crate) fn workgroup_ns(&self, ordinal: u32, key: CostKey) -> Option<u64> {
        self.workgroup_ns[ordinal as usize].get(key)
    }

    /// Folds a timed run of `workgroups` workgroups of export `ordinal` with the constants of
    /// `key` into its cost estimate.
    pub(crate) fn record_workgroup_time(&self, ordinal: u32, key: CostKey, workgroups: u64, elapsed_ns: u64) {
        self.workgroup_ns[ordinal as usize].record(key, workgroups, elapsed_ns);
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
