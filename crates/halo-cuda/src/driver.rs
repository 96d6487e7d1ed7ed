//! The `cuda` and `hip` drivers: the GPUs the vendor's library reports.

use crate::api::{Api, CuDevice, DeviceAttribute, Vendor};
use crate::device::GpuDevice;
use halo_hal::driver::select_device;
use halo_hal::{Device, DeviceInfo, DeviceParams, Driver, Error, ParamReader, Result};
use std::ffi::c_char;
use std::sync::Arc;
use std::time::Duration;

/// The name CUDA devices are created under (`cuda://0`).
pub const DRIVER_NAME: &str = "cuda";
/// The name HIP devices are created under (`hip://0`).
pub const HIP_DRIVER_NAME: &str = "hip";

/// The registered name of `vendor`'s driver.
pub fn driver_name(vendor: Vendor) -> &'static str {
    match vendor {
        Vendor::Cuda => DRIVER_NAME,
        Vendor::Hip => HIP_DRIVER_NAME,
    }
}

/// A GPU driver over one vendor's API.
///
/// Ownership: devices it creates keep the vendor library loaded. Threading: any thread.
pub struct GpuDriver {
    api: Arc<Api>,
}

impl GpuDriver {
    /// Loads `vendor`'s library (`libcuda.so.1`, `libamdhip64.so`) and initializes it.
    ///
    /// # Errors
    /// `Unavailable` when the library is missing or reports no device.
    pub fn new(vendor: Vendor) -> Result<Self> {
        Ok(GpuDriver {
            api: Arc::new(Api::load(vendor)?),
        })
    }

    /// The driver over the library file at `path`, which implements `vendor`'s API (an
    /// installation outside the loader's path, or a stand-in for tests).
    ///
    /// # Errors
    /// As [`GpuDriver::new`].
    pub fn from_library(vendor: Vendor, path: &std::path::Path) -> Result<Self> {
        Ok(GpuDriver {
            api: Arc::new(Api::load_from(vendor, &[path])?),
        })
    }

    /// Each device with its ordinal and total memory.
    fn devices(&self) -> Result<Vec<(DeviceInfo, u64)>> {
        let api = &self.api;
        let mut count = 0;
        // SAFETY: `count` is an out-pointer.
        unsafe { api.device_get_count(&mut count) }?;
        let mut version = 0;
        // SAFETY: `version` is an out-pointer.
        unsafe { api.driver_get_version(&mut version) }?;
        (0..count)
            .map(|ordinal| {
                let mut device: CuDevice = 0;
                // SAFETY: `ordinal` is below the count; `device` is an out-pointer.
                unsafe { api.device_get(&mut device, ordinal) }?;
                let mut name = [0 as c_char; 256];
                // SAFETY: the buffer holds the length passed.
                unsafe { api.device_get_name(name.as_mut_ptr(), name.len() as i32, device) }?;
                let name: Vec<u8> = name
                    .iter()
                    .take_while(|&&c| c != 0)
                    .map(|c| u8::from_ne_bytes(c.to_ne_bytes()))
                    .collect();
                let mut uuid = [0u8; 16];
                // SAFETY: `uuid` is the 16-byte CUuuid the call fills.
                unsafe { api.device_get_uuid(&mut uuid, device) }?;
                let mut memory = 0usize;
                // SAFETY: `memory` is an out-pointer.
                unsafe { api.device_total_mem(&mut memory, device) }?;
                let major = api.attribute(device, DeviceAttribute::ComputeCapabilityMajor)?;
                let minor = api.attribute(device, DeviceAttribute::ComputeCapabilityMinor)?;
                let info = DeviceInfo {
                    id: ordinal as u64,
                    path: halo_hal::device::uuid_text(&uuid),
                    name: String::from_utf8_lossy(&name).into_owned(),
                    details: vec![
                        ("compute capability".into(), format!("{major}.{minor}")),
                        ("memory".into(), format!("{} MiB", memory >> 20)),
                        ("driver".into(), driver_version(api.vendor(), version)),
                    ],
                };
                Ok((info, memory as u64))
            })
            .collect()
    }
}

/// The driver version as its vendor writes it.
fn driver_version(vendor: Vendor, version: i32) -> String {
    match vendor {
        Vendor::Cuda => format!("CUDA {}.{}", version / 1000, (version % 1000) / 10),
        // HIP packs major * 10^7 + minor * 10^5 + patch.
        Vendor::Hip => format!(
            "HIP {}.{}.{}",
            version / 10_000_000,
            (version / 100_000) % 100,
            version % 100_000
        ),
    }
}

impl Driver for GpuDriver {
    fn name(&self) -> &str {
        driver_name(self.api.vendor())
    }

    fn enumerate_devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok(self.devices()?.into_iter().map(|(info, _)| info).collect())
    }

    fn create_device(&self, path: &str, params: &DeviceParams) -> Result<Arc<dyn Device>> {
        let options = DeviceOptions::from_params(self.name(), params)?;
        let devices = self.devices()?;
        let infos: Vec<DeviceInfo> = devices.iter().map(|(info, _)| info.clone()).collect();
        let name = driver_name(self.api.vendor());
        if infos.is_empty() {
            return Err(Error::unavailable(format!(
                "the {} driver lists no devices",
                self.api.vendor().api_name()
            )));
        }
        let info = select_device(name, &infos, path)?;
        let total_memory = devices[info.id as usize].1;
        Ok(Arc::new(GpuDevice::new(
            self.api.clone(),
            info.id as i32,
            info.clone(),
            total_memory,
            options,
        )?))
    }
}

/// Options from a device URI's query string (`cuda://0?async_allocations=false`; the same for
/// `hip://`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceOptions {
    /// Whether device-local memory comes from the stream's memory pool (`cuMemAllocAsync`,
    /// `cuMemFreeAsync`): allocations and frees ordered on the stream, without waiting for the
    /// device. Off, they use `cuMemAlloc` and `cuMemFree`, which synchronize.
    pub async_allocations: bool,
    /// How command buffers reach the GPU (`command_buffers=stream|graph`); unset, graphs where
    /// the driver has them (CUDA) and the stream elsewhere (HIP).
    pub command_buffers: Option<CommandBufferKind>,
    /// How long the completion thread polls a submission before it naps between polls
    /// (`poll_us`, 200 by default).
    pub poll: Duration,
}

/// How a device runs command buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandBufferKind {
    /// Each submission's operations are issued onto the stream one by one.
    Stream,
    /// A reusable command buffer of kernel launches becomes a CUDA graph, instantiated once
    /// and launched with one call; launches between barriers may run concurrently, and a
    /// submission with other bindings updates the kernel nodes in place. One-shot command
    /// buffers and those that fill or copy stay on the stream. CUDA only.
    Graph,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions {
            async_allocations: true,
            command_buffers: None,
            poll: Duration::from_micros(200),
        }
    }
}

impl DeviceOptions {
    /// Reads the options from URI parameters of the driver named `driver` (`cuda` or `hip`).
    ///
    /// # Errors
    /// `InvalidArgument` naming an unknown parameter or a value of the wrong form.
    pub fn from_params(driver: &str, params: &DeviceParams) -> Result<Self> {
        let mut params = ParamReader::new(driver, params);
        let mut options = DeviceOptions::default();
        if let Some(async_allocations) = params.flag("async_allocations")? {
            options.async_allocations = async_allocations;
        }
        let kinds = [
            ("stream", CommandBufferKind::Stream),
            ("graph", CommandBufferKind::Graph),
        ];
        if let Some(kind) = params.choice("command_buffers", &kinds)? {
            options.command_buffers = Some(kind);
        }
        if let Some(poll) = params.micros("poll_us")? {
            options.poll = poll;
        }
        params.finish()?;
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_as_each_vendor_writes_them() {
        assert_eq!(driver_version(Vendor::Cuda, 13000), "CUDA 13.0");
        assert_eq!(driver_version(Vendor::Cuda, 12040), "CUDA 12.4");
        assert_eq!(driver_version(Vendor::Hip, 60_241_134), "HIP 6.2.41134");
    }

    #[test]
    fn parses_device_options() {
        let params = |pairs: &[(&str, &str)]| -> DeviceParams {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert!(
            DeviceOptions::from_params("cuda", &params(&[]))
                .unwrap()
                .async_allocations
        );
        let off = DeviceOptions::from_params("cuda", &params(&[("async_allocations", "false")])).unwrap();
        assert!(!off.async_allocations);
        let error = DeviceOptions::from_params("cuda", &params(&[("async_allocations", "maybe")])).unwrap_err();
        assert!(error.to_string().contains("is not true, false, 1 or 0"), "{error}");
        let graph = DeviceOptions::from_params("cuda", &params(&[("command_buffers", "graph")])).unwrap();
        assert_eq!(graph.command_buffers, Some(CommandBufferKind::Graph));
        assert_eq!(DeviceOptions::default().command_buffers, None, "the device chooses");
        assert!(graph.async_allocations);
        let error = DeviceOptions::from_params("cuda", &params(&[("command_buffers", "tree")])).unwrap_err();
        assert!(error.to_string().contains("is not stream or graph"), "{error}");
        assert_eq!(DeviceOptions::default().poll, Duration::from_micros(200));
        let poll = DeviceOptions::from_params("cuda", &params(&[("poll_us", "2000")])).unwrap();
        assert_eq!(poll.poll, Duration::from_micros(2000));
        for bad in ["-1", "1000001", "soon"] {
            let error = DeviceOptions::from_params("cuda", &params(&[("poll_us", bad)])).unwrap_err();
            assert!(error.to_string().contains("microseconds from 0 to 1000000"), "{error}");
        }
        let error = DeviceOptions::from_params("cuda", &params(&[("streams", "2")])).unwrap_err();
        assert!(
            error.to_string().contains("cuda has no device parameter 'streams'"),
            "{error}"
        );
    }
}
