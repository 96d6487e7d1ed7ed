//! Built programs, kept per device while an executable uses them and on disk between processes
//! (`CL_PROGRAM_BINARIES`, through `halo_hal::disk_cache`), so that a second load or a second
//! run does not compile the translated OpenCL C again.
//!
//! An entry is named by a SHA-256 of the OpenCL C source and its build options, in a folder
//! named by the platform, device and driver versions, so another driver build never sees it. A
//! corrupt entry, or one the driver refuses to build, is warned about and rebuilt from source.

use crate::api::cl_error;
use halo_hal::disk_cache::{digest_hex, CacheDir, DiskCache};
use halo_hal::{Error, Result};
use opencl3::context::Context;
use opencl3::device::Device as ClDevice;
use opencl3::platform::Platform;
use opencl3::program::Program;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// The first bytes of every entry.
const MAGIC: [u8; 8] = *b"HALOCLPB";

/// Environment variable naming the cache folder, or `off`.
pub const CACHE_DIR_ENV: &str = "HALO_OPENCL_PROGRAM_CACHE";

/// The cache folder from `HALO_OPENCL_PROGRAM_CACHE`, else the user's
/// (`$XDG_CACHE_HOME/halo/opencl-programs`, or `~/.cache/...`), else off.
pub fn cache_dir_from_env() -> CacheDir {
    CacheDir::from_env(CACHE_DIR_ENV, "opencl-programs")
}

/// One device's programs.
pub(crate) struct ProgramCache {
    /// Programs some executable still holds, by entry key.
    live: Mutex<HashMap<String, Weak<Program>>>,
    pub(crate) disk: Option<DiskCache>,
}

impl ProgramCache {
    /// The cache of `device`, with its entries under `dir`.
    pub(crate) fn new(dir: &CacheDir, device: &ClDevice) -> Self {
        ProgramCache {
            live: Mutex::new(HashMap::new()),
            disk: match dir {
                CacheDir::Off => None,
                CacheDir::At(root) => Some(DiskCache::new(root.join(device_folder(device)), MAGIC)),
            },
        }
    }

    /// `source` built for `context`'s device: a program an executable holds already, else the
    /// disk entry's binary, else a build from source (whose binary becomes the entry).
    pub(crate) fn build(&self, context: &Context, source: &str, options: &str) -> Result<Arc<Program>> {
        let key = digest_hex(&[source.as_bytes(), options.as_bytes()]);
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(program) = live.get(&key).and_then(Weak::upgrade) {
            return Ok(program);
        }
        let program = Arc::new(self.load_or_build(context, source, options, &key)?);
        live.retain(|_, program| program.strong_count() > 0);
        live.insert(key, Arc::downgrade(&program));
        Ok(program)
    }

    fn load_or_build(&self, context: &Context, source: &str, options: &str, key: &str) -> Result<Program> {
        let Some(disk) = &self.disk else {
            return build_from_source(context, source, options);
        };
        if let Some(binary) = disk.load(key) {
            match Program::create_and_build_from_binary(context, &[&binary], options) {
                Ok(program) => return Ok(program),
                Err(e) => disk.refuse(key, &format!("the driver refused its binary ({e})")),
            }
        }
        let program = build_from_source(context, source, options)?;
        match program.get_binaries() {
            Ok(binaries) if binaries.len() == 1 && !binaries[0].is_empty() => disk.store(key, &binaries[0]),
            _ => disk.nothing_to_store(key, "the driver gave no program binary"),
        }
        Ok(program)
    }
}

/// `source` compiled by the device's compiler with `options`; a failure carries the build log.
pub(crate) fn build_from_source(context: &Context, source: &str, options: &str) -> Result<Program> {
    let mut program =
        Program::create_from_source(context, source).map_err(|e| cl_error("clCreateProgramWithSource", e))?;
    if let Err(e) = program.build(context.devices(), options) {
        let log = context
            .devices()
            .first()
            .and_then(|device| program.get_build_log(*device).ok())
            .unwrap_or_default();
        return Err(Error::internal(format!(
            "clBuildProgram failed ({e}) for the translated OpenCL C; build log:\n{}",
            log.trim_end()
        )));
    }
    Ok(program)
}

/// The folder of one device and driver build: the device's name, readable, and a digest of
/// everything that changes what the compiler makes.
fn device_folder(device: &ClDevice) -> String {
    let platform = device.platform().ok().map(Platform::new);
    let fields = [
        platform.as_ref().and_then(|p| p.name().ok()).unwrap_or_default(),
        platform.as_ref().and_then(|p| p.version().ok()).unwrap_or_default(),
        device.name().unwrap_or_default(),
        device.vendor().unwrap_or_default(),
        device.version().unwrap_or_default(),
        device.driver_version().unwrap_or_default(),
        device.opencl_c_version().unwrap_or_default(),
    ];
    let parts: Vec<&[u8]> = fields.iter().map(|f| f.as_bytes()).collect();
    let readable: String = fields[1]
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    format!("{readable}-{}", &digest_hex(&parts)[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first OpenCL device's context, or `None` (the test says it skipped).
    fn context(test: &str) -> Option<Context> {
        // Through the driver's discovery, which the other tests' devices also take: PoCL 3.1
        // crashed (SIGSEGV, seen once in CI) when this test discovered devices on its own at
        // the same moment.
        let devices = crate::driver::devices().unwrap_or_default();
        let context = devices
            .first()
            .and_then(|(_, device)| Context::from_device(device).ok());
        if context.is_none() {
            println!("{test}: skipped: no OpenCL device");
        }
        context
    }

    #[test]
    fn a_program_the_compiler_refuses_fails_with_its_build_log() {
        let Some(context) = context("a_program_the_compiler_refuses_fails_with_its_build_log") else {
            return;
        };
        let error = build_from_source(
            &context,
            "__kernel void k(__global int* p) { p[0] = not_declared; }",
            "",
        )
        .expect_err("a kernel using an undeclared name built");
        assert_eq!(error.code(), halo_hal::StatusCode::Internal, "{error}");
        assert!(error.to_string().contains("build log"), "{error}");
        assert!(error.to_string().contains("not_declared"), "{error}");
        build_from_source(&context, "__kernel void k(__global int* p) { p[0] = 1; }", "").expect("a good kernel after");
    }
}
