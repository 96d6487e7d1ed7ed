//! What a physical device offers and what halo turns on when it creates a logical device.

use crate::driver::DeviceOptions;
use crate::instance::{needs_portability_subset, Instance};
use crate::status::VkResultExt;
use ash::vk;
use halo_hal::{Error, Result};
use std::ffi::c_char;

/// The properties, queue family and features of one physical device.
pub(crate) struct DeviceSetup {
    pub(crate) properties: vk::PhysicalDeviceProperties,
    pub(crate) memory_properties: vk::PhysicalDeviceMemoryProperties,
    pub(crate) queue_family: u32,
    pub(crate) max_timeline_difference: u64,
    pub(crate) max_allocation_size: u64,
    /// The core features asked for (`robust_buffer_access` among them when asked and offered).
    pub(crate) core: vk::PhysicalDeviceFeatures,
    vulkan11: vk::PhysicalDeviceVulkan11Features<'static>,
    vulkan12: vk::PhysicalDeviceVulkan12Features<'static>,
}

impl DeviceSetup {
    /// Reads what `physical` offers, and chooses what to ask for under `options`.
    ///
    /// # Errors
    /// `Unavailable` for a device below Vulkan 1.2, without timeline semaphores or without a
    /// compute queue.
    pub(crate) fn query(instance: &Instance, physical: vk::PhysicalDevice, options: &DeviceOptions) -> Result<Self> {
        let raw = &instance.raw;
        // SAFETY: `physical` was enumerated from the live instance (so for the calls below, whose
        // output chains live for the call).
        let properties = unsafe { raw.get_physical_device_properties(physical) };
        if properties.api_version < vk::API_VERSION_1_2 {
            return Err(Error::unavailable(format!(
                "the device supports Vulkan {}.{}; halo needs 1.2",
                vk::api_version_major(properties.api_version),
                vk::api_version_minor(properties.api_version)
            )));
        }
        let mut vulkan11_properties = vk::PhysicalDeviceVulkan11Properties::default();
        let mut vulkan12_properties = vk::PhysicalDeviceVulkan12Properties::default();
        let mut properties2 = vk::PhysicalDeviceProperties2::default()
            .push_next(&mut vulkan11_properties)
            .push_next(&mut vulkan12_properties);
        // SAFETY: as above.
        unsafe { raw.get_physical_device_properties2(physical, &mut properties2) };
        let mut vulkan11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut vulkan12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut features2 = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut vulkan11)
            .push_next(&mut vulkan12);
        // SAFETY: as above.
        unsafe { raw.get_physical_device_features2(physical, &mut features2) };
        let offered = features2.features;
        if vulkan12.timeline_semaphore == vk::FALSE {
            return Err(Error::unavailable("the device has no timeline semaphores"));
        }
        // SAFETY: as above.
        let families = unsafe { raw.get_physical_device_queue_family_properties(physical) };
        let queue_family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or_else(|| Error::unavailable("the device has no compute queue"))? as u32;
        // SAFETY: as above.
        let memory_properties = unsafe { raw.get_physical_device_memory_properties(physical) };
        Ok(DeviceSetup {
            properties,
            memory_properties,
            queue_family,
            max_timeline_difference: vulkan12_properties.max_timeline_semaphore_value_difference,
            max_allocation_size: vulkan11_properties.max_memory_allocation_size,
            core: wanted_core(&offered, options),
            vulkan11: vk::PhysicalDeviceVulkan11Features::default()
                .storage_buffer16_bit_access(vulkan11.storage_buffer16_bit_access == vk::TRUE)
                .uniform_and_storage_buffer16_bit_access(vulkan11.uniform_and_storage_buffer16_bit_access == vk::TRUE)
                .variable_pointers_storage_buffer(vulkan11.variable_pointers_storage_buffer == vk::TRUE)
                .variable_pointers(vulkan11.variable_pointers == vk::TRUE),
            vulkan12: vk::PhysicalDeviceVulkan12Features::default()
                .timeline_semaphore(true)
                .storage_buffer8_bit_access(vulkan12.storage_buffer8_bit_access == vk::TRUE)
                .uniform_and_storage_buffer8_bit_access(vulkan12.uniform_and_storage_buffer8_bit_access == vk::TRUE)
                .shader_float16(vulkan12.shader_float16 == vk::TRUE)
                .shader_int8(vulkan12.shader_int8 == vk::TRUE)
                .scalar_block_layout(vulkan12.scalar_block_layout == vk::TRUE)
                .vulkan_memory_model(vulkan12.vulkan_memory_model == vk::TRUE)
                .vulkan_memory_model_device_scope(vulkan12.vulkan_memory_model_device_scope == vk::TRUE)
                .shader_subgroup_extended_types(vulkan12.shader_subgroup_extended_types == vk::TRUE),
        })
    }

    /// Creates the logical device with one queue of the compute family and the features kernels
    /// compiled by IREE may use, where offered.
    pub(crate) fn create_device(&self, instance: &Instance, physical: vk::PhysicalDevice) -> Result<ash::Device> {
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(self.queue_family)
            .queue_priorities(&priorities)];
        let mut vulkan11 = self.vulkan11;
        let mut vulkan12 = self.vulkan12;
        // SAFETY: `physical` belongs to the live instance; no layer is named.
        let offered = unsafe { instance.raw.enumerate_device_extension_properties(physical) }
            .or_vk("vkEnumerateDeviceExtensionProperties")?;
        let portability = needs_portability_subset(offered.iter().filter_map(|e| e.extension_name_as_c_str().ok()));
        let extensions: &[*const c_char] = if portability {
            &[ash::khr::portability_subset::NAME.as_ptr()]
        } else {
            &[]
        };
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(extensions)
            .enabled_features(&self.core)
            .push_next(&mut vulkan11)
            .push_next(&mut vulkan12);
        // SAFETY: `physical` belongs to the live instance; every enabled feature was offered.
        unsafe { instance.raw.create_device(physical, &info, None) }.or_vk("vkCreateDevice")
    }
}

/// The core features kernels may use, and bounds-checked buffer access if `options` ask for it:
/// those of them that `offered` has.
fn wanted_core(offered: &vk::PhysicalDeviceFeatures, options: &DeviceOptions) -> vk::PhysicalDeviceFeatures {
    vk::PhysicalDeviceFeatures::default()
        .robust_buffer_access(options.robust_buffer_access && offered.robust_buffer_access == vk::TRUE)
        .shader_int64(offered.shader_int64 == vk::TRUE)
        .shader_int16(offered.shader_int16 == vk::TRUE)
        .shader_float64(offered.shader_float64 == vk::TRUE)
}
