//! Pipeline caches kept on disk (through `halo_hal::disk_cache`), so that a program's
//! pipelines are compiled once per machine rather than once per process.
//!
//! Each executable has its own entry, named by a SHA-256 of its bytes and specialization
//! constants, in a folder named by the device (vendor and device ids, driver version and the
//! driver's `pipelineCacheUUID`): another driver or driver version never sees the entry. An
//! entry holds `vkGetPipelineCacheData`'s bytes.
//!
//! What a warm cache saves depends on the driver: NVIDIA's stores compiled code in pipeline
//! caches; lavapipe stores nothing past the 32-byte header (Mesa caches its shaders in a disk
//! cache of its own), so there cold and warm loads take the same time.

use crate::status::VkResultExt;
use ash::vk;
use halo_hal::disk_cache::{digest_hex, CacheDir, DiskCache};
use halo_hal::Result;
use std::path::Path;

/// The first bytes of every entry.
const MAGIC: [u8; 8] = *b"HALOVKPC";

/// Environment variable naming the cache folder, or `off`.
pub const CACHE_DIR_ENV: &str = "HALO_VULKAN_PIPELINE_CACHE";

/// The cache folder from `HALO_VULKAN_PIPELINE_CACHE`, else the user's
/// (`$XDG_CACHE_HOME/halo/vulkan-pipelines`, or `~/.cache/...`), else off.
pub fn cache_dir_from_env() -> CacheDir {
    CacheDir::from_env(CACHE_DIR_ENV, "vulkan-pipelines")
}

/// The on-disk caches of one device.
pub(crate) struct PipelineStore {
    pub(crate) cache: DiskCache,
}

impl PipelineStore {
    /// The store of the device with `properties` under `root`.
    pub(crate) fn new(root: &Path, properties: &vk::PhysicalDeviceProperties) -> Self {
        PipelineStore {
            cache: DiskCache::new(root.join(device_folder(properties)), MAGIC),
        }
    }

    /// A `VkPipelineCache` for the executable with `data` and `constants`, seeded from its entry.
    pub(crate) fn open(&self, device: &ash::Device, data: &[u8], constants: &[u32]) -> Result<OpenCache> {
        let key = executable_key(data, constants);
        let seed = self.cache.load(&key);
        let info = vk::PipelineCacheCreateInfo::default().initial_data(seed.as_deref().unwrap_or_default());
        // SAFETY: the device is alive; the initial data passed its digest, so it is bytes that
        // `vkGetPipelineCacheData` returned (drivers check its header against themselves).
        let raw = unsafe { device.create_pipeline_cache(&info, None) }.or_vk("vkCreatePipelineCache")?;
        Ok(OpenCache {
            raw,
            key,
            hit: seed.is_some(),
        })
    }

    /// Writes `cache` back when it was a miss and its pipelines were all `created`, then
    /// destroys it.
    pub(crate) fn close(&self, device: &ash::Device, cache: OpenCache, created: bool) {
        if created && !cache.hit {
            // SAFETY: the cache is alive and used by no other thread.
            match unsafe { device.get_pipeline_cache_data(cache.raw) } {
                Ok(data) => self.cache.store(&cache.key, &data),
                Err(e) => self
                    .cache
                    .nothing_to_store(&cache.key, &format!("vkGetPipelineCacheData: {e}")),
            }
        }
        // SAFETY: the pipelines created with it exist already; nothing else uses the cache.
        unsafe { device.destroy_pipeline_cache(cache.raw, None) };
    }
}

/// A pipeline cache being used to create one executable's pipelines.
pub(crate) struct OpenCache {
    /// The cache to create pipelines with.
    pub(crate) raw: vk::PipelineCache,
    key: String,
    hit: bool,
}

/// The folder of one device and driver build.
fn device_folder(properties: &vk::PhysicalDeviceProperties) -> String {
    let uuid: String = properties
        .pipeline_cache_uuid
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "{:04x}-{:04x}-{:08x}-{uuid}",
        properties.vendor_id, properties.device_id, properties.driver_version
    )
}

/// The name of an executable's entry: its bytes and specialization constants.
fn executable_key(data: &[u8], constants: &[u32]) -> String {
    let constants: Vec<u8> = constants.iter().flat_map(|c| c.to_le_bytes()).collect();
    digest_hex(&[data, &constants])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_change_with_the_executable_and_the_driver() {
        let key = executable_key(b"spirv", &[1, 2]);
        assert_ne!(key, executable_key(b"spirv", &[1, 3]));
        assert_ne!(key, executable_key(b"spirx", &[1, 2]));
        assert_eq!(key, executable_key(b"spirv", &[1, 2]));
        let mut properties = vk::PhysicalDeviceProperties {
            driver_version: 1,
            ..Default::default()
        };
        let old = device_folder(&properties);
        properties.driver_version = 2;
        assert_ne!(old, device_folder(&properties));
        properties.pipeline_cache_uuid[0] = 9;
        assert!(device_folder(&properties).ends_with(&format!("-09{}", "00".repeat(15))));
    }
}
