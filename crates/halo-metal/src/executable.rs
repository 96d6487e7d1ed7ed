//! Executables: `metal-msl-fb` programs decoded and checked ([`crate::executable_def`]), then
//! made into one compute pipeline per export by the device's backend.

use crate::backend::{Backend, Pipelines};
use crate::executable_def::{decode, FORMAT};
use halo_hal::{Error, Executable, ExecutableCache, ExecutableParams, ExportInfo, Result};
use std::any::Any;
use std::sync::Arc;

/// A `metal-msl-fb` executable prepared for one Metal device.
///
/// Threading: any thread.
pub struct PreparedExecutable {
    backend: Arc<dyn Backend>,
    exports: Vec<ExportInfo>,
    pipelines: Arc<dyn Pipelines>,
}

impl PreparedExecutable {
    /// Its pipelines, checking that it was prepared for the device of `backend`.
    pub(crate) fn pipelines_for(&self, backend: &Arc<dyn Backend>) -> Result<&dyn Pipelines> {
        if !std::ptr::addr_eq(Arc::as_ptr(&self.backend), Arc::as_ptr(backend)) {
            return Err(Error::invalid_argument(
                "the executable was prepared for another Metal device",
            ));
        }
        Ok(&*self.pipelines)
    }
}

impl Executable for PreparedExecutable {
    fn format(&self) -> &str {
        FORMAT
    }

    fn export_count(&self) -> u32 {
        self.exports.len() as u32
    }

    fn export_info(&self, ordinal: u32) -> Result<ExportInfo> {
        halo_hal::executable::check_export_ordinal(self, ordinal)?;
        Ok(self.exports[ordinal as usize].clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Prepares `metal-msl-fb` executables for one Metal device.
pub struct MetalExecutableCache {
    backend: Arc<dyn Backend>,
}

impl MetalExecutableCache {
    pub(crate) fn new(backend: Arc<dyn Backend>) -> Self {
        MetalExecutableCache { backend }
    }
}

impl ExecutableCache for MetalExecutableCache {
    fn can_prepare_format(&self, format: &str) -> bool {
        format == FORMAT
    }

    fn supported_formats(&self) -> Vec<String> {
        vec![FORMAT.to_string()]
    }

    fn prepare_executable(&self, params: &ExecutableParams<'_>) -> Result<Arc<dyn Executable>> {
        self.check_format(params.format)?;
        if !params.constants.is_empty() {
            // IREE's Metal target bakes specialization into the MSL; values here would be lost.
            return Err(Error::invalid_argument(format!(
                "a Metal executable takes no executable-level constants; {} were given",
                params.constants.len()
            )));
        }
        let executable = decode(params.data)?;
        let exports = (executable.exports.iter())
            .map(|export| ExportInfo {
                name: export.name.clone(),
                constant_count: export.constant_count,
                binding_count: export.binding_count() as u32,
                workgroup_size: export.threadgroup_size,
            })
            .collect();
        let pipelines = self.backend.make_pipelines(&executable)?;
        Ok(Arc::new(PreparedExecutable {
            backend: self.backend.clone(),
            exports,
            pipelines,
        }))
    }
}
