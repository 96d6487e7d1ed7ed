//! The `vulkan` driver: the physical devices of one Vulkan instance.

use crate::device::VulkanDevice;
use crate::instance::{Instance, Validation};
use crate::status::VkResultExt;
use ash::vk;
use halo_hal::disk_cache::CacheDir;
use halo_hal::driver::select_device;
use halo_hal::{Device, DeviceInfo, DeviceParams, Driver, Error, ParamReader, Result};
use std::sync::Arc;
use std::time::Duration;

/// The name devices are created under (`vulkan://0`).
pub const DRIVER_NAME: &str = "vulkan";

/// The Vulkan driver.
///
/// Ownership: devices it creates keep its instance alive. Threading: any thread.
pub struct VulkanDriver {
    instance: Arc<Instance>,
}

impl VulkanDriver {
    /// Loads Vulkan and creates an instance with the given validation.
    ///
    /// # Errors
    /// `Unavailable` without a Vulkan 1.2 loader; `FailedPrecondition` when validation is asked
    /// for and the layer is missing.
    pub fn new(validation: Validation) -> Result<Self> {
        Ok(VulkanDriver {
            instance: Instance::new(validation)?,
        })
    }

    fn physical_devices(&self) -> Result<Vec<(vk::PhysicalDevice, DeviceInfo)>> {
        // SAFETY: the instance is alive for the call.
        let physical = unsafe { self.instance.raw.enumerate_physical_devices() }.or_vk("vkEnumeratePhysicalDevices")?;
        Ok(physical
            .into_iter()
            .enumerate()
            .map(|(ordinal, device)| {
                // SAFETY: `device` was just enumerated from this live instance.
                let properties = unsafe { self.instance.raw.get_physical_device_properties(device) };
                let name = properties
                    .device_name_as_c_str()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let info = DeviceInfo {
                    id: ordinal as u64,
                    path: halo_hal::device::uuid_text(&device_uuid(&self.instance, device)),
                    name,
                    details: details(&self.instance, device, &properties),
                };
                (device, info)
            })
            .collect())
    }
}

/// Kind, API and driver versions, and memory heaps, for `halo devices`.
fn details(
    instance: &Instance,
    device: vk::PhysicalDevice,
    properties: &vk::PhysicalDeviceProperties,
) -> Vec<(String, String)> {
    let mut driver = vk::PhysicalDeviceDriverProperties::default();
    let mut properties2 = vk::PhysicalDeviceProperties2::default().push_next(&mut driver);
    // SAFETY: `device` belongs to the live instance; the chain lives for the call.
    unsafe { instance.raw.get_physical_device_properties2(device, &mut properties2) };
    // SAFETY: as above.
    let memory = unsafe { instance.raw.get_physical_device_memory_properties(device) };
    let text = |name: Result<&std::ffi::CStr, _>| name.map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let version = properties.api_version;
    let mut details = vec![
        ("type".to_string(), format!("{:?}", properties.device_type)),
        (
            "api".to_string(),
            format!(
                "Vulkan {}.{}.{}",
                vk::api_version_major(version),
                vk::api_version_minor(version),
                vk::api_version_patch(version)
            ),
        ),
        (
            "driver".to_string(),
            format!(
                "{} ({})",
                text(driver.driver_name_as_c_str()),
                text(driver.driver_info_as_c_str())
            ),
        ),
    ];
    for (index, heap) in memory.memory_heaps[..memory.memory_heap_count as usize]
        .iter()
        .enumerate()
    {
        let types: Vec<String> = memory.memory_types[..memory.memory_type_count as usize]
            .iter()
            .filter(|t| t.heap_index as usize == index)
            .map(|t| format!("{:?}", t.property_flags))
            .collect();
        details.push((
            format!("heap {index}"),
            format!("{} MiB, {:?}; types: {}", heap.size >> 20, heap.flags, types.join(", ")),
        ));
    }
    details
}

/// The device UUID of a physical device (Vulkan 1.1 properties).
fn device_uuid(instance: &Instance, device: vk::PhysicalDevice) -> [u8; 16] {
    let mut id = vk::PhysicalDeviceIDProperties::default();
    let mut properties = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
    // SAFETY: `device` belongs to the live instance; the chain lives for the call.
    unsafe { instance.raw.get_physical_device_properties2(device, &mut properties) };
    id.device_uuid
}

impl Driver for VulkanDriver {
    fn name(&self) -> &str {
        DRIVER_NAME
    }

    fn enumerate_devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok(self.physical_devices()?.into_iter().map(|(_, info)| info).collect())
    }

    fn create_device(&self, path: &str, params: &DeviceParams) -> Result<Arc<dyn Device>> {
        let options = DeviceOptions::from_params(params)?;
        let devices = self.physical_devices()?;
        let infos: Vec<DeviceInfo> = devices.iter().map(|(_, info)| info.clone()).collect();
        if infos.is_empty() {
            return Err(Error::unavailable("the Vulkan loader lists no physical devices"));
        }
        let info = select_device(DRIVER_NAME, &infos, path)?;
        let physical = devices[info.id as usize].0;
        Ok(Arc::new(VulkanDevice::new(
            self.instance.clone(),
            physical,
            info.clone(),
            options,
        )?))
    }
}

/// Default of [`DeviceOptions::spin`], in microseconds.
const DEFAULT_SPIN_US: u64 = 100;

/// Default of [`DeviceOptions::poll`], in microseconds: longer than a batch of small dispatches
/// takes on lavapipe (64 take about 1.5 ms).
const DEFAULT_POLL_US: u64 = 2000;

/// Options from a device URI's query string (`vulkan://0?device_local_mappable=false`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceOptions {
    /// Whether the host maps device-local memory where the hardware allows it. `false` makes an
    /// integrated GPU or lavapipe behave as a discrete GPU does: the host reaches device-local
    /// buffers only through staging copies on the queue, which is how those paths are tested.
    pub device_local_mappable: bool,
    /// How long a host wait polls a semaphore before blocking in `vkWaitSemaphores` (`spin_us`).
    pub spin: Duration,
    /// How long the device's waiter thread polls for a batch in flight before blocking
    /// (`poll_us`; see [`crate::completion`]).
    pub poll: Duration,
    /// Where compiled pipelines are kept between processes (`pipeline_cache=DIR|off`; default
    /// from [`crate::pipeline_cache::cache_dir_from_env`]).
    pub pipeline_cache: CacheDir,
    /// Whether the device is asked for `robustBufferAccess` where it offers it
    /// (`robust_buffer_access`, default true): a kernel's access past its binding then reads
    /// zeros or another place in the binding and cannot corrupt other memory or lose the device,
    /// whatever a program's workgroup counts or loop bounds say. Off trades that for the speed
    /// some GPUs lose to the checks.
    pub robust_buffer_access: bool,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions {
            device_local_mappable: true,
            spin: Duration::from_micros(DEFAULT_SPIN_US),
            poll: Duration::from_micros(DEFAULT_POLL_US),
            pipeline_cache: crate::pipeline_cache::cache_dir_from_env(),
            robust_buffer_access: true,
        }
    }
}

impl DeviceOptions {
    /// Reads the options from URI parameters.
    ///
    /// # Errors
    /// `InvalidArgument` naming an unknown parameter or a value of the wrong form.
    pub fn from_params(params: &DeviceParams) -> Result<Self> {
        let mut params = ParamReader::new("vulkan", params);
        let mut options = DeviceOptions::default();
        if let Some(mappable) = params.flag("device_local_mappable")? {
            options.device_local_mappable = mappable;
        }
        if let Some(robust) = params.flag("robust_buffer_access")? {
            options.robust_buffer_access = robust;
        }
        if let Some(spin) = params.micros("spin_us")? {
            options.spin = spin;
        }
        if let Some(poll) = params.micros("poll_us")? {
            options.poll = poll;
        }
        if let Some(cache) = params.cache_dir("pipeline_cache")? {
            options.pipeline_cache = cache;
        }
        params.finish()?;
        Ok(options)
    }
}
