//! The `opencl` driver: every device of every OpenCL platform the ICD loader finds.
//!
//! Devices are `opencl://` (the first), `opencl://N` (the N-th over all platforms) or
//! `opencl://P/D` (device D of platform P), with URI parameters:
//! - `subgroup_size`: the subgroup size the programs were compiled for (their Vulkan target's),
//!   which the translated kernels emulate in workgroup memory; default 8, that of IREE's
//!   `llvmpipe` target, the Vulkan target closest to an OpenCL CPU device;
//! - `program_cache`: the folder built programs are kept in between processes, or `off`; default
//!   `HALO_OPENCL_PROGRAM_CACHE`, else `$XDG_CACHE_HOME/halo/opencl-programs` (or `~/.cache/...`);
//! - `device_local_mappable`: `false` gives device-local buffers the device's own memory, which
//!   the host cannot map (inputs and results then travel through queue copies), `true` host
//!   memory the device reads in place; default `true` on devices that share the host's memory
//!   (CPUs, integrated GPUs) and `false` on the others;
//! - `subgroups`: `native` writes subgroup operations as OpenCL's subgroup built-ins with the
//!   kernels' subgroups made `subgroup_size` wide (`cl_intel_required_subgroup_size`), `emulated`
//!   in workgroup memory; default native where the device can, else emulated;
//! - `khr_command_buffer`: `false` runs reusable command buffers as one-shot ones, `true` (the
//!   default) records them through `cl_khr_command_buffer` where the device has it.

use crate::api::cl_error;
use crate::device::OpenClDevice;
use halo_hal::disk_cache::CacheDir;
use halo_hal::driver::select_device;
use halo_hal::{Device, DeviceInfo, DeviceParams, Driver, Error, ParamReader, Result};
use halo_spirv_opencl::Subgroups;
use opencl3::device::{Device as ClDevice, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use std::sync::{Arc, Mutex, PoisonError};

/// Name under which the driver registers.
pub const DRIVER_NAME: &str = "opencl";

/// The subgroup size emulated unless the URI says otherwise: IREE's `llvmpipe` Vulkan target's.
pub const DEFAULT_SUBGROUP_SIZE: u32 = 8;

/// Extensions that change what the driver can run, shown by `halo devices`.
const NOTABLE_EXTENSIONS: [&str; 5] = [
    "cl_khr_fp16",
    "cl_khr_fp64",
    "cl_khr_subgroups",
    "cl_khr_command_buffer",
    "cl_khr_int64_base_atomics",
];

/// Creates `opencl` devices.
#[derive(Default)]
pub struct OpenClDriver;

/// Held while platforms and devices are discovered: PoCL 3.1 sets its devices up on the first
/// discovery calls and crashed (a device name read while another thread set it up) when two
/// threads made them at once.
static DISCOVERY: Mutex<()> = Mutex::new(());

/// Every device: its info and handle. Everything in the crate that discovers devices comes
/// here, so discovery is never made from two threads at once.
pub(crate) fn devices() -> Result<Vec<(DeviceInfo, ClDevice)>> {
    let _discovering = DISCOVERY.lock().unwrap_or_else(PoisonError::into_inner);
    let platforms = match opencl3::platform::get_platforms() {
        Ok(platforms) => platforms,
        // No ICD file names a platform: a machine without OpenCL drivers.
        Err(error) if error.0 == opencl3::error_codes::CL_PLATFORM_NOT_FOUND_KHR => Vec::new(),
        Err(error) => return Err(cl_error("clGetPlatformIDs", error)),
    };
    let mut found = Vec::new();
    for (p, platform) in platforms.iter().enumerate() {
        let platform_name = platform.name().unwrap_or_default();
        for (d, id) in platform
            .get_devices(CL_DEVICE_TYPE_ALL)
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let device = ClDevice::new(id);
            let info = DeviceInfo {
                id: ((p as u64) << 32) | d as u64,
                path: format!("{p}/{d}"),
                name: device.name().unwrap_or_default(),
                details: describe(&device, &platform_name),
            };
            found.push((info, device));
        }
    }
    Ok(found)
}

fn describe(device: &ClDevice, platform: &str) -> Vec<(String, String)> {
    let kind = match device.dev_type().unwrap_or(0) {
        t if t & CL_DEVICE_TYPE_GPU != 0 => "GPU",
        t if t & CL_DEVICE_TYPE_CPU != 0 => "CPU",
        _ => "accelerator",
    };
    let extensions = device.extensions().unwrap_or_default();
    let notable: Vec<&str> = NOTABLE_EXTENSIONS
        .into_iter()
        .filter(|e| extensions.split_whitespace().any(|x| x == *e))
        .collect();
    vec![
        ("platform".into(), platform.to_string()),
        ("type".into(), kind.into()),
        ("version".into(), device.version().unwrap_or_default()),
        ("OpenCL C".into(), device.opencl_c_version().unwrap_or_default()),
        (
            "memory".into(),
            format!(
                "{} MiB global, {} KiB local, shared with the host: {}",
                device.global_mem_size().unwrap_or(0) >> 20,
                device.local_mem_size().unwrap_or(0) >> 10,
                device.host_unified_memory().unwrap_or(false)
            ),
        ),
        ("extensions".into(), notable.join(" ")),
    ]
}

impl Driver for OpenClDriver {
    fn name(&self) -> &str {
        DRIVER_NAME
    }

    fn enumerate_devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok(devices()?.into_iter().map(|(info, _)| info).collect())
    }

    fn create_device(&self, path: &str, params: &DeviceParams) -> Result<Arc<dyn Device>> {
        let options = DeviceOptions::parse(params)?;
        let all = devices()?;
        if all.is_empty() {
            return Err(Error::unavailable(
                "no OpenCL device: the ICD loader found no platform with a device (Debian: pocl-opencl-icd)",
            ));
        }
        let infos: Vec<DeviceInfo> = all.iter().map(|(info, _)| info.clone()).collect();
        let info = select_device(DRIVER_NAME, &infos, path)?.clone();
        let device = all
            .into_iter()
            .find(|(candidate, _)| candidate.id == info.id)
            .map(|(_, device)| device)
            .ok_or_else(|| Error::internal("selected OpenCL device vanished"))?;
        Ok(Arc::new(OpenClDevice::new(info, device, options)?))
    }
}

/// What a device's URI parameters ask for.
#[derive(Clone, Debug)]
pub struct DeviceOptions {
    /// The subgroup size the translated kernels emulate.
    pub subgroup_size: u32,
    /// Where built programs are kept between processes.
    pub program_cache: CacheDir,
    /// Whether device-local buffers are host memory the host maps; `None`: whether the device
    /// shares the host's memory.
    pub device_local_mappable: Option<bool>,
    /// Whether reusable command buffers are recorded through `cl_khr_command_buffer` where the
    /// device has it.
    pub khr_command_buffer: bool,
    /// How subgroup operations are written; `None`: as built-ins where the device can make its
    /// subgroups `subgroup_size` wide, else emulated.
    pub subgroups: Option<Subgroups>,
}

impl DeviceOptions {
    /// The options `params` ask for, the rest their defaults.
    pub fn parse(params: &DeviceParams) -> Result<Self> {
        let mut params = ParamReader::new("opencl", params);
        let subgroups = [("native", Subgroups::Native), ("emulated", Subgroups::Emulated)];
        let options = DeviceOptions {
            subgroup_size: params
                .value("subgroup_size", "a power of two from 1 to 128", |value| {
                    value.parse::<u32>().ok().filter(|n| n.is_power_of_two() && *n <= 128)
                })?
                .unwrap_or(DEFAULT_SUBGROUP_SIZE),
            subgroups: params.choice("subgroups", &subgroups)?,
            program_cache: params
                .cache_dir("program_cache")?
                .unwrap_or_else(crate::program_cache::cache_dir_from_env),
            device_local_mappable: params.flag("device_local_mappable")?,
            khr_command_buffer: params.flag("khr_command_buffer")?.unwrap_or(true),
        };
        params.finish()?;
        Ok(options)
    }
}
