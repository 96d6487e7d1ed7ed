//! The Apple backend: a GPU reached through `objc2-metal`, as IREE's Metal HAL drives it.
//!
//! - memory ([`memory`]): `MTLBuffer`s in private storage for device-local memory the host need
//!   not map (reached through the queue's staging copies), in shared storage otherwise, which
//!   Apple silicon's unified memory maps in place;
//! - pipelines: each library built by `newLibraryWithSource` at its MSL version (or loaded from
//!   its metallib), one `MTLComputePipelineState` per export, and the function kept for the
//!   argument encoder of its `[[buffer(0)]]`;
//! - command buffers ([`command_buffer`]): dispatches with the bindings encoded into an argument
//!   buffer at index 0 and the push constants at index 3 (`[[buffer(3)]]`, where IREE's compiler
//!   puts them), blits where Metal allows them, and small kernels of halo's own for byte-granular
//!   fills and copies, which macOS's blit encoder refuses.
//!
//! Built only for macOS; type-checked here by `scripts/check-macos`, run on a Mac only.

mod command_buffer;
pub mod memory;

use crate::backend::{Backend, Encoder, Pipelines};
use crate::executable_def::{MetalExecutable, MetalExport, MetalLibrary};
use halo_hal::{Allocator, Error, Result, ResultExt};
use memory::AppleAllocator;
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_foundation::{NSError, NSString, NSURL};
use objc2_metal::{
    MTLCommandQueue, MTLCompileOptions, MTLComputePipelineState, MTLCreateSystemDefaultDevice, MTLDevice, MTLFunction,
    MTLLanguageVersion, MTLLibrary,
};
use std::any::Any;
use std::sync::Arc;

/// The `[[buffer(n)]]` index of the push constants in IREE's MSL.
const PUSH_CONSTANT_BUFFER_INDEX: usize = 3;

/// The language version IREE's runtime compiles MSL at when the executable names none (3.0).
const DEFAULT_LANGUAGE_VERSION: usize = 3 << 16;

/// Metal objects Apple documents as safe to use from any thread: devices, command queues,
/// buffers, libraries, functions and pipeline states (not encoders or command buffers).
pub(crate) struct ThreadSafe<T: ?Sized>(pub(crate) Retained<T>);

// SAFETY: only the thread-safe Metal object kinds above are wrapped (every use in this module);
// Metal synchronizes their methods internally.
unsafe impl<T: ?Sized> Send for ThreadSafe<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: ?Sized> Sync for ThreadSafe<T> {}

/// Halo's own kernels for the transfers the blit encoder cannot do on macOS (offsets and sizes
/// that are not multiples of 4 bytes, fill patterns wider than a byte).
const TRANSFER_KERNELS: &str = "#include <metal_stdlib>\nusing namespace metal;\n\
kernel void halo_fill(device uchar* target [[buffer(0)]], constant uint4& spec [[buffer(1)]], \
uint i [[thread_position_in_grid]]) {\n  if (i < spec.y) target[i] = uchar(spec.x >> (8u * (i % spec.z)));\n}\n\
kernel void halo_copy(device const uchar* source [[buffer(0)]], device uchar* target [[buffer(1)]], \
constant uint4& spec [[buffer(2)]], uint i [[thread_position_in_grid]]) {\n  if (i < spec.x) target[i] = source[i];\n}\n";

/// The system's default Metal device.
pub struct AppleBackend {
    device: ThreadSafe<ProtocolObject<dyn MTLDevice>>,
    queue: ThreadSafe<ProtocolObject<dyn MTLCommandQueue>>,
    allocator: AppleAllocator,
    fill: ThreadSafe<ProtocolObject<dyn MTLComputePipelineState>>,
    copy: ThreadSafe<ProtocolObject<dyn MTLComputePipelineState>>,
}

impl AppleBackend {
    /// The system's default Metal device, with a command queue and halo's transfer kernels.
    ///
    /// # Errors
    /// `Unavailable` when the system has no Metal device; `Internal` when the queue or the
    /// transfer kernels cannot be made.
    pub fn system_default() -> Result<Self> {
        let device = MTLCreateSystemDefaultDevice()
            .ok_or_else(|| Error::unavailable("this Mac reports no Metal device (MTLCreateSystemDefaultDevice)"))?;
        let queue =
            (device.newCommandQueue()).ok_or_else(|| Error::internal("the Metal device made no command queue"))?;
        let options = MTLCompileOptions::new();
        options.setLanguageVersion(MTLLanguageVersion(DEFAULT_LANGUAGE_VERSION));
        let library = (device
            .newLibraryWithSource_options_error(&NSString::from_str(TRANSFER_KERNELS), Some(&options)))
        .map_err(|e| {
            Error::internal(format!(
                "halo's Metal transfer kernels do not compile: {}",
                describe(&e)
            ))
        })?;
        let pipeline = |name: &str| -> Result<_> {
            let function = (library.newFunctionWithName(&NSString::from_str(name)))
                .ok_or_else(|| Error::internal(format!("halo's Metal transfer kernels lack '{name}'")))?;
            (device.newComputePipelineStateWithFunction_error(&function))
                .map(ThreadSafe)
                .map_err(|e| Error::internal(format!("no pipeline for halo's '{name}': {}", describe(&e))))
        };
        let (fill, copy) = (pipeline("halo_fill")?, pipeline("halo_copy")?);
        Ok(AppleBackend {
            allocator: AppleAllocator::new(ThreadSafe(device.clone())),
            device: ThreadSafe(device),
            queue: ThreadSafe(queue),
            fill,
            copy,
        })
    }

    /// The name of the system's default GPU, or `None` without one (cheaper than a backend).
    pub fn system_default_name() -> Option<String> {
        MTLCreateSystemDefaultDevice().map(|device| device.name().to_string())
    }

    /// The GPU's name, as Metal gives it.
    pub fn name(&self) -> String {
        self.device.0.name().to_string()
    }

    /// Builds `library` (numbered `index`) for this device.
    fn build_library(&self, index: usize, library: &MetalLibrary) -> Result<Retained<ProtocolObject<dyn MTLLibrary>>> {
        let built = match (&library.source, &library.metallib) {
            (_, Some(metallib)) => self.load_metallib(metallib)?,
            (Some(source), None) => {
                let options = MTLCompileOptions::new();
                let version = library.language_version.map_or(DEFAULT_LANGUAGE_VERSION, |v| {
                    (usize::from(v.major) << 16) | usize::from(v.minor)
                });
                options.setLanguageVersion(MTLLanguageVersion(version));
                (self.device.0).newLibraryWithSource_options_error(&NSString::from_str(source), Some(&options))
            }
            (None, None) => return Err(Error::invalid_argument("the library holds no code")),
        };
        built.map_err(|e| {
            Error::invalid_argument(format!(
                "library {index} does not build for {}: {}",
                self.name(),
                describe(&e)
            ))
        })
    }

    /// Metal loads metallibs from files (or dispatch data); a temporary file is the plain way.
    fn load_metallib(&self, metallib: &[u8]) -> Result<LibraryBuild> {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "halo-metal-{}-{}.metallib",
            std::process::id(),
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::write(&path, metallib)
            .map_err(|e| Error::unavailable(format!("cannot write {}: {e}", path.display())))?;
        let url = NSURL::fileURLWithPath(&NSString::from_str(&path.to_string_lossy()));
        let loaded = self.device.0.newLibraryWithURL_error(&url);
        let _ = std::fs::remove_file(&path);
        Ok(loaded)
    }
}

impl AppleBackend {
    /// The pipeline of `export`, whose function is in `library`.
    fn make_pipeline(&self, library: &ProtocolObject<dyn MTLLibrary>, export: &MetalExport) -> Result<ApplePipeline> {
        let function = (library.newFunctionWithName(&NSString::from_str(&export.entry_point))).ok_or_else(|| {
            Error::invalid_argument(format!(
                "library {} has no function '{}'",
                export.library, export.entry_point
            ))
        })?;
        let state = (self.device.0.newComputePipelineStateWithFunction_error(&function))
            .map_err(|e| Error::invalid_argument(format!("no pipeline: {}", describe(&e))))?;
        let threads: usize = export.threadgroup_size.iter().map(|&n| n as usize).product();
        if threads > state.maxTotalThreadsPerThreadgroup() {
            return Err(Error::resource_exhausted(format!(
                "threadgroups of {threads} threads; this pipeline runs at most {} on {}",
                state.maxTotalThreadsPerThreadgroup(),
                self.name()
            )));
        }
        Ok(ApplePipeline {
            function: ThreadSafe(function),
            state: ThreadSafe(state),
            threadgroup_size: export.threadgroup_size,
        })
    }
}

/// What Metal answers when asked for a library.
type LibraryBuild = std::result::Result<Retained<ProtocolObject<dyn MTLLibrary>>, Retained<NSError>>;

/// One export's pipeline.
struct ApplePipeline {
    /// The function, for the argument encoder of its argument buffer.
    function: ThreadSafe<ProtocolObject<dyn MTLFunction>>,
    state: ThreadSafe<ProtocolObject<dyn MTLComputePipelineState>>,
    threadgroup_size: [u32; 3],
}

/// An executable's pipelines on one device.
struct ApplePipelines {
    exports: Vec<ApplePipeline>,
}

impl Pipelines for ApplePipelines {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Backend for AppleBackend {
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }

    fn make_pipelines(&self, executable: &MetalExecutable) -> Result<Arc<dyn Pipelines>> {
        let libraries = (executable.libraries.iter().enumerate())
            .map(|(index, library)| self.build_library(index, library))
            .collect::<Result<Vec<_>>>()?;
        let exports = (executable.exports.iter().enumerate())
            .map(|(ordinal, export)| {
                self.make_pipeline(&libraries[export.library], export)
                    .with_context(|| format!("preparing export {ordinal} ('{}')", export.name))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(ApplePipelines { exports }))
    }

    fn command_buffer(&self) -> Result<Box<dyn Encoder + '_>> {
        Ok(Box::new(command_buffer::AppleEncoder::new(self)?))
    }
}

/// An `NSError`'s description.
fn describe(error: &NSError) -> String {
    error.localizedDescription().to_string()
}
