//! IREE's `metal-msl-fb` executable format: a 64-byte header and a `MTL1` FlatBuffer of Metal
//! libraries (MSL source, or a precompiled metallib) and one compute pipeline per export
//! (`schema/README.md` says what iree-compile 3.13 writes).
//!
//! [`decode`] checks everything the driver will rely on, so that a damaged file ends in an error
//! naming the part at fault instead of a wrong dispatch: every export names a library that is
//! there, has an entry point, a threadgroup size whose threads fit in a threadgroup, and one flag
//! word per HAL binding; every library holds code.

pub mod schema;

use halo_hal::{Error, Result, ResultExt};
use schema::{BindingBits, ExecutableDef};

/// The format name `iree-compile` gives Metal executables of MSL source.
pub const FORMAT: &str = "metal-msl-fb";

/// The most threads a threadgroup may have on any Apple GPU (`maxTotalThreadsPerThreadgroup`);
/// a device may allow fewer.
pub const MAX_THREADS_PER_THREADGROUP: u32 = 1024;

/// Checks the header and verifies the FlatBuffer.
///
/// # Errors
/// `InvalidArgument` or `Incompatible` naming what is wrong with the header or the FlatBuffer.
pub fn parse(data: &[u8]) -> Result<ExecutableDef<'_>> {
    let body = halo_hal::executable::gpu_flatbuffer(data, "MTL1", "Metal executable")?;
    schema::root_as_executable_def(body)
        .map_err(|e| Error::invalid_argument(format!("malformed Metal executable FlatBuffer: {e}")))
}

/// The Metal Shading Language version a library's source is written for
/// (`MTLLanguageVersion`: the major version in the high 16 bits, the minor in the low).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LanguageVersion {
    /// Major version (3 for MSL 3.0).
    pub major: u16,
    /// Minor version.
    pub minor: u16,
}

impl LanguageVersion {
    /// The version an `MTLLanguageVersion` value names; `None` for 0, "the newest the device has".
    pub fn from_raw(raw: u32) -> Option<Self> {
        (raw != 0).then_some(LanguageVersion {
            major: (raw >> 16) as u16,
            minor: (raw & 0xffff) as u16,
        })
    }
}

impl std::fmt::Display for LanguageVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MSL {}.{}", self.major, self.minor)
    }
}

/// What one library holds: MSL source, a precompiled metallib, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetalLibrary {
    /// The MSL source text.
    pub source: Option<String>,
    /// The language version the source is written for; `None`: the newest the device has.
    pub language_version: Option<LanguageVersion>,
    /// The bytes of a precompiled `.metallib`.
    pub metallib: Option<Vec<u8>>,
}

/// One export: a compute pipeline made from one function of one library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetalExport {
    /// The export's own name (`hal.executable.export`), which lookups by name use.
    pub name: String,
    /// The MSL function to make the pipeline from (the name as SPIRV-Cross rewrote it).
    pub entry_point: String,
    /// Index of its library in [`MetalExecutable::libraries`].
    pub library: usize,
    /// Threads per threadgroup along x, y and z, for every dispatch.
    pub threadgroup_size: [u32; 3],
    /// The most threads per threadgroup the pipeline allows; 0 for the device's limit.
    pub max_threads_per_threadgroup: u32,
    /// 32-bit push constants a dispatch passes.
    pub constant_count: u32,
    /// Per HAL binding, in ordinal order: whether the kernel only reads it.
    pub read_only_bindings: Vec<bool>,
}

impl MetalExport {
    /// HAL bindings a dispatch passes.
    pub fn binding_count(&self) -> usize {
        self.read_only_bindings.len()
    }
}

/// A `metal-msl-fb` executable, decoded into owned values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetalExecutable {
    /// The libraries.
    pub libraries: Vec<MetalLibrary>,
    /// The exports, by ordinal.
    pub exports: Vec<MetalExport>,
}

/// Decodes `data` into its libraries and exports, checking each.
///
/// # Errors
/// As [`parse`], and `InvalidArgument` naming the export or library at fault: a library ordinal
/// that is not there, no entry point or threadgroup size, a threadgroup of no threads or more
/// than [`MAX_THREADS_PER_THREADGROUP`], a library with no code.
pub fn decode(data: &[u8]) -> Result<MetalExecutable> {
    let def = parse(data)?;
    let libraries = def
        .libraries()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(ordinal, library)| decode_library(&library).with_context(|| format!("reading library {ordinal}")))
        .collect::<Result<Vec<_>>>()?;
    let pipelines = def
        .pipelines()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| Error::invalid_argument("Metal executable declares no pipelines"))?;
    let exports = pipelines
        .iter()
        .enumerate()
        .map(|(ordinal, pipeline)| {
            decode_export(&pipeline, libraries.len()).with_context(|| format!("reading export {ordinal}"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(MetalExecutable { libraries, exports })
}

fn decode_library(library: &schema::LibraryDef<'_>) -> Result<MetalLibrary> {
    let source = library.source();
    let code = source.and_then(|s| s.code()).filter(|code| !code.is_empty());
    let metallib = library.metallib().filter(|bytes| !bytes.is_empty());
    if code.is_none() && metallib.is_none() {
        return Err(Error::invalid_argument(
            "library holds neither MSL source nor a metallib",
        ));
    }
    Ok(MetalLibrary {
        source: code.map(str::to_string),
        language_version: source.and_then(|s| LanguageVersion::from_raw(s.version())),
        metallib: metallib.map(|bytes| bytes.bytes().to_vec()),
    })
}

fn decode_export(pipeline: &schema::PipelineDef<'_>, libraries: usize) -> Result<MetalExport> {
    let entry_point = pipeline
        .entry_point()
        .filter(|e| !e.is_empty())
        .ok_or_else(|| Error::invalid_argument("pipeline has no entry point name"))?;
    let library = pipeline.library_ordinal() as usize;
    if library >= libraries {
        return Err(Error::invalid_argument(format!(
            "'{entry_point}' names library {library} of {libraries}"
        )));
    }
    let size = pipeline
        .threadgroup_size()
        .ok_or_else(|| Error::invalid_argument(format!("'{entry_point}' has no threadgroup size")))?;
    let threadgroup_size = [size.x(), size.y(), size.z()];
    let threads = threadgroup_size
        .iter()
        .try_fold(1u64, |n, &side| n.checked_mul(u64::from(side)));
    if !threads.is_some_and(|n| (1..=u64::from(MAX_THREADS_PER_THREADGROUP)).contains(&n)) {
        let count = threads.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string());
        return Err(Error::invalid_argument(format!(
            "'{entry_point}' has threadgroups of {threadgroup_size:?} threads ({count}); a \
             threadgroup holds 1 to {MAX_THREADS_PER_THREADGROUP}"
        )));
    }
    let read_only_bindings = pipeline
        .binding_flags()
        .into_iter()
        .flatten()
        .map(|flags| flags.contains(BindingBits::IMMUTABLE))
        .collect();
    let name = pipeline
        .name()
        .or_else(|| pipeline.debug_info().and_then(|d| d.name()))
        .filter(|n| !n.is_empty())
        .unwrap_or(entry_point);
    Ok(MetalExport {
        name: name.to_string(),
        entry_point: entry_point.to_string(),
        library,
        threadgroup_size,
        max_threads_per_threadgroup: pipeline.max_threads_per_threadgroup(),
        constant_count: pipeline.constant_count(),
        read_only_bindings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_versions_read_as_metal_numbers_them() {
        assert_eq!(LanguageVersion::from_raw(0), None);
        let v = LanguageVersion::from_raw(0x3_0000).unwrap();
        assert_eq!((v.major, v.minor), (3, 0));
        assert_eq!(LanguageVersion::from_raw(0x2_0004).unwrap().to_string(), "MSL 2.4");
        assert!(LanguageVersion::from_raw(0x2_0004) < LanguageVersion::from_raw(0x3_0000));
    }
}
