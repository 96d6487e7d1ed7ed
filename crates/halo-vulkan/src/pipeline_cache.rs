//! Pipeline caches kept on disk, so that a program's pipelines are compiled once per machine
//! rather than once per process: drivers that compile SPIR-V at load spend most of a program's
//! time to first result there.
//!
//! Each executable has its own file, named by a SHA-256 of its bytes and specialization
//! constants, in a folder named by the device (vendor and device ids, driver version and the
//! driver's `pipelineCacheUUID`): another driver or driver version never sees the file. A file
//! is a small header (magic, format version, data length, SHA-256 of the data) followed by
//! `vkGetPipelineCacheData`'s bytes. A file that is short, corrupt or of another format is
//! ignored and replaced; drivers are never handed bytes that fail the digest. Files are written
//! to a unique temporary name and renamed into place, so concurrent processes never read a
//! partial file (the last writer wins, and both wrote whole files).
//!
//! What a warm cache saves depends on the driver: NVIDIA's stores compiled code in pipeline
//! caches; lavapipe stores nothing past the 32-byte header (Mesa caches its shaders in a disk
//! cache of its own), so there cold and warm loads take the same time.

use crate::status::VkResultExt;
use ash::vk;
use halo_hal::{Error, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The first bytes of every cache file.
const MAGIC: &[u8; 8] = b"HALOVKPC";
/// The file layout's version; a file of another version is a miss.
const FORMAT_VERSION: u32 = 1;
/// Magic, version, data length, digest.
const HEADER_BYTES: usize = 8 + 4 + 8 + 32;

/// Environment variable naming the cache folder, or `off`.
pub const CACHE_DIR_ENV: &str = "HALO_VULKAN_PIPELINE_CACHE";

/// Where pipeline caches are kept, when they are kept at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PipelineCacheDir {
    /// Not kept: every process compiles its pipelines.
    Off,
    /// Kept in this folder (created when first written).
    At(PathBuf),
}

impl PipelineCacheDir {
    /// `HALO_VULKAN_PIPELINE_CACHE` when set (`off` turns caching off), else the user's cache
    /// folder (`$XDG_CACHE_HOME/halo/vulkan-pipelines`, or `~/.cache/...`), else off.
    pub fn from_env() -> Self {
        match std::env::var_os(CACHE_DIR_ENV) {
            Some(value) if value == "off" => PipelineCacheDir::Off,
            Some(value) if !value.is_empty() => PipelineCacheDir::At(PathBuf::from(value)),
            _ => user_cache_dir()
                .map(|dir| PipelineCacheDir::At(dir.join("halo").join("vulkan-pipelines")))
                .unwrap_or(PipelineCacheDir::Off),
        }
    }

    /// Reads a device parameter value: `off` or a folder.
    pub fn parse(value: &str) -> Self {
        if value == "off" {
            PipelineCacheDir::Off
        } else {
            PipelineCacheDir::At(PathBuf::from(value))
        }
    }
}

fn user_cache_dir() -> Option<PathBuf> {
    let absolute = |value: std::ffi::OsString| Some(PathBuf::from(value)).filter(|p| p.is_absolute());
    std::env::var_os("XDG_CACHE_HOME").and_then(absolute).or_else(|| {
        std::env::var_os("HOME")
            .and_then(absolute)
            .map(|home| home.join(".cache"))
    })
}

/// What the cache did, for the device's `vulkan.pipeline_cache` queries.
#[derive(Default)]
pub(crate) struct CacheCounters {
    /// Executables whose pipelines were created from a cache file.
    pub hits: AtomicU64,
    /// Executables with no usable file (a new file is written for each).
    pub misses: AtomicU64,
    /// Files that existed but were corrupt or of another format.
    pub rejected: AtomicU64,
    /// Files that could not be written (a full disk, a read-only folder).
    pub write_failures: AtomicU64,
}

impl CacheCounters {
    /// The names of the counters, as queries spell them.
    pub(crate) const KEYS: [&'static str; 4] = ["hits", "misses", "rejected", "write_failures"];

    /// The counter named `key`, if there is one.
    pub(crate) fn get(&self, key: &str) -> Option<u64> {
        let counter = match key {
            "hits" => &self.hits,
            "misses" => &self.misses,
            "rejected" => &self.rejected,
            "write_failures" => &self.write_failures,
            _ => return None,
        };
        Some(counter.load(Ordering::Relaxed))
    }
}

/// The on-disk caches of one device.
pub(crate) struct PipelineStore {
    /// This device's folder inside the cache folder.
    dir: PathBuf,
    pub(crate) counters: CacheCounters,
}

impl PipelineStore {
    /// The store of the device with `properties` under `root`.
    pub(crate) fn new(root: &Path, properties: &vk::PhysicalDeviceProperties) -> Self {
        PipelineStore {
            dir: root.join(device_folder(properties)),
            counters: CacheCounters::default(),
        }
    }

    /// A `VkPipelineCache` for the executable with `data` and `constants`, seeded from its file.
    pub(crate) fn open(&self, device: &ash::Device, data: &[u8], constants: &[u32]) -> Result<OpenCache> {
        let path = self.dir.join(format!("{}.bin", executable_key(data, constants)));
        let seed = match std::fs::read(&path) {
            Ok(bytes) => {
                let seed = unpack(&bytes).map(<[u8]>::to_vec);
                if seed.is_none() {
                    self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                }
                seed
            }
            Err(_) => None,
        };
        let counter = if seed.is_some() {
            &self.counters.hits
        } else {
            &self.counters.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let info = vk::PipelineCacheCreateInfo::default().initial_data(seed.as_deref().unwrap_or_default());
        // SAFETY: the device is alive; the initial data passed its digest, so it is bytes that
        // `vkGetPipelineCacheData` returned (drivers check its header against themselves).
        let raw = unsafe { device.create_pipeline_cache(&info, None) }.or_vk("vkCreatePipelineCache")?;
        Ok(OpenCache {
            raw,
            path,
            hit: seed.is_some(),
        })
    }

    /// Writes `cache` back when it was a miss and its pipelines were all `created`, then
    /// destroys it.
    pub(crate) fn close(&self, device: &ash::Device, cache: OpenCache, created: bool) {
        if created && !cache.hit && self.save(device, &cache).is_err() {
            self.counters.write_failures.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the pipelines created with it exist already; nothing else uses the cache.
        unsafe { device.destroy_pipeline_cache(cache.raw, None) };
    }

    fn save(&self, device: &ash::Device, cache: &OpenCache) -> Result<()> {
        // SAFETY: the cache is alive and used by no other thread.
        let data = unsafe { device.get_pipeline_cache_data(cache.raw) }.or_vk("vkGetPipelineCacheData")?;
        write_atomically(&cache.path, &pack(&data))
            .map_err(|e| Error::unavailable(format!("writing pipeline cache {}: {e}", cache.path.display())))
    }
}

/// A pipeline cache being used to create one executable's pipelines.
pub(crate) struct OpenCache {
    /// The cache to create pipelines with.
    pub(crate) raw: vk::PipelineCache,
    path: PathBuf,
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

/// The name of an executable's file: its bytes and specialization constants.
fn executable_key(data: &[u8], constants: &[u32]) -> String {
    let mut hasher = Sha256::new();
    hasher.update((data.len() as u64).to_le_bytes());
    hasher.update(data);
    for constant in constants {
        hasher.update(constant.to_le_bytes());
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A file's bytes for `data`.
fn pack(data: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_BYTES + data.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&(data.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&Sha256::digest(data));
    bytes.extend_from_slice(data);
    bytes
}

/// The data of a file, if its header and digest hold.
fn unpack(bytes: &[u8]) -> Option<&[u8]> {
    let (header, data) = bytes.split_at_checked(HEADER_BYTES)?;
    let version = u32::from_le_bytes(header[8..12].try_into().ok()?);
    let length = u64::from_le_bytes(header[12..20].try_into().ok()?);
    let fits = &header[..8] == MAGIC && version == FORMAT_VERSION && length == data.len() as u64;
    (fits && Sha256::digest(data).as_slice() == &header[20..52]).then_some(data)
}

/// Writes `bytes` to a unique file beside `path` and renames it over `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let temporary = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("cache"),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_data_unpacks_and_any_damage_is_refused() {
        let data: Vec<u8> = (0..200u8).collect();
        let bytes = pack(&data);
        assert_eq!(unpack(&bytes), Some(&data[..]));
        assert_eq!(unpack(&bytes[..bytes.len() - 1]), None, "truncated");
        assert_eq!(unpack(&bytes[..10]), None, "shorter than the header");
        for at in [0, 9, 13, 30, HEADER_BYTES + 5] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert_eq!(unpack(&damaged), None, "byte {at} flipped");
        }
        assert_eq!(unpack(&pack(&[])), Some(&[][..]));
    }

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

    #[test]
    fn every_listed_counter_can_be_queried() {
        let counters = CacheCounters::default();
        assert!(CacheCounters::KEYS.iter().all(|key| counters.get(key) == Some(0)));
        assert_eq!(counters.get("nope"), None);
    }

    #[test]
    fn the_folder_comes_from_the_parameter_or_off() {
        assert_eq!(PipelineCacheDir::parse("off"), PipelineCacheDir::Off);
        assert_eq!(
            PipelineCacheDir::parse("/tmp/x"),
            PipelineCacheDir::At(PathBuf::from("/tmp/x"))
        );
    }
}
