//! Files that drivers keep between processes (Vulkan pipeline caches, OpenCL program
//! binaries), so that a program's device code is compiled once per machine rather than once
//! per process: drivers that compile at load spend most of a program's time to first result
//! there.
//!
//! A [`DiskCache`] is one folder per device and driver build, chosen by the driver, so another
//! driver or driver version never sees a file. An entry is a small header (the driver's magic,
//! format version, data length, SHA-256 of the data) followed by the driver's bytes. An entry
//! that is short, corrupt or of another format is a miss, warned about and replaced; drivers
//! are never handed bytes that fail the digest. Entries are written to a unique temporary name
//! and renamed into place, so concurrent processes never read a partial file (the last writer
//! wins, and both wrote whole files).

use crate::{Error, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The entry layout's version; an entry of another version is a miss.
const FORMAT_VERSION: u32 = 1;
/// Magic, version, data length, digest.
const HEADER_BYTES: usize = 8 + 4 + 8 + 32;

/// Where a driver keeps its files, when it keeps them at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheDir {
    /// Not kept: every process compiles again.
    Off,
    /// Kept in this folder (created when first written).
    At(PathBuf),
}

impl CacheDir {
    /// The environment variable `variable` when set (`off` turns caching off), else `folder`
    /// inside the user's cache folder (`$XDG_CACHE_HOME/halo/`, or `~/.cache/halo/`), else off.
    pub fn from_env(variable: &str, folder: &str) -> Self {
        match std::env::var_os(variable) {
            Some(value) if value == "off" => CacheDir::Off,
            Some(value) if !value.is_empty() => CacheDir::At(PathBuf::from(value)),
            _ => user_cache_dir()
                .map(|dir| CacheDir::At(dir.join("halo").join(folder)))
                .unwrap_or(CacheDir::Off),
        }
    }

    /// Reads a device parameter value: `off` or a folder.
    pub fn parse(value: &str) -> Self {
        if value == "off" {
            CacheDir::Off
        } else {
            CacheDir::At(PathBuf::from(value))
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

/// What a cache did, for a device's `<driver>.<cache>` queries.
#[derive(Default)]
pub struct CacheCounters {
    /// Entries read and used.
    pub hits: AtomicU64,
    /// Lookups with no usable entry (a new entry is written for each).
    pub misses: AtomicU64,
    /// Entries that existed but were corrupt, of another format, or refused by the driver.
    pub rejected: AtomicU64,
    /// Entries that could not be written (a full disk, a read-only folder).
    pub write_failures: AtomicU64,
}

impl CacheCounters {
    /// The names of the counters, as queries spell them.
    pub const KEYS: [&'static str; 4] = ["hits", "misses", "rejected", "write_failures"];

    /// The counter named `key`, if there is one.
    pub fn get(&self, key: &str) -> Option<u64> {
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

/// Answers the device query `category`/`key` from `cache`'s counters (`None`: caching is off).
pub fn query_counter(cache: Option<&DiskCache>, category: &str, key: &str) -> Result<i64> {
    match cache.map(|c| c.counters.get(key)) {
        Some(Some(value)) => Ok(value as i64),
        Some(None) => Err(Error::not_found(format!(
            "unknown {category} key '{key}' (known: {})",
            CacheCounters::KEYS.join(", ")
        ))),
        None => Err(Error::not_found(format!("{category}: this device's cache is off"))),
    }
}

/// One device's entries in one folder.
pub struct DiskCache {
    dir: PathBuf,
    magic: [u8; 8],
    /// What the cache has done so far.
    pub counters: CacheCounters,
}

impl DiskCache {
    /// The cache in `dir`, whose entries start with `magic` (a driver's own, so that no driver
    /// reads another's entries).
    pub fn new(dir: PathBuf, magic: [u8; 8]) -> Self {
        DiskCache {
            dir,
            magic,
            counters: CacheCounters::default(),
        }
    }

    /// The folder the entries are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.bin"))
    }

    /// The data of entry `key`, counted as a hit, or `None` (a miss) when there is no entry or
    /// it fails its header or digest (also counted as rejected, with a warning).
    pub fn load(&self, key: &str) -> Option<Vec<u8>> {
        let path = self.path(key);
        let data = std::fs::read(&path).ok().and_then(|bytes| {
            let data = unpack(&self.magic, &bytes).map(<[u8]>::to_vec);
            if data.is_none() {
                self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    "ignoring the corrupt cache entry {}; it will be rebuilt",
                    path.display()
                );
            }
            data
        });
        let counter = if data.is_some() {
            &self.counters.hits
        } else {
            &self.counters.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        data
    }

    /// Records that the driver could not use the data `load` gave for `key` (`why`): the hit
    /// becomes a rejected entry and a miss, with a warning; the caller rebuilds and stores.
    pub fn refuse(&self, key: &str, why: &str) {
        self.counters.hits.fetch_sub(1, Ordering::Relaxed);
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        self.counters.rejected.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            "ignoring the cache entry {}: {why}; it will be rebuilt",
            self.path(key).display()
        );
    }

    /// Records that the driver had nothing to store for `key` (`why`): counted as a write
    /// failure, with a warning.
    pub fn nothing_to_store(&self, key: &str, why: &str) {
        self.counters.write_failures.fetch_add(1, Ordering::Relaxed);
        tracing::warn!("could not write the cache entry {}: {why}", self.path(key).display());
    }

    /// Writes entry `key`; a failure is counted and warned about, never an error, since the
    /// program runs either way.
    pub fn store(&self, key: &str, data: &[u8]) {
        let path = self.path(key);
        if let Err(e) = write_atomically(&path, &pack(&self.magic, data)) {
            self.nothing_to_store(key, &e.to_string());
        }
    }
}

/// A SHA-256, in hex, of `parts` (each length-prefixed, so that no two lists share a digest).
pub fn digest_hex(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// An entry's bytes for `data`.
fn pack(magic: &[u8; 8], data: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_BYTES + data.len());
    bytes.extend_from_slice(magic);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&(data.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&Sha256::digest(data));
    bytes.extend_from_slice(data);
    bytes
}

/// The data of an entry, if its header and digest hold.
fn unpack<'a>(magic: &[u8; 8], bytes: &'a [u8]) -> Option<&'a [u8]> {
    let (header, data) = bytes.split_at_checked(HEADER_BYTES)?;
    let version = u32::from_le_bytes(header[8..12].try_into().ok()?);
    let length = u64::from_le_bytes(header[12..20].try_into().ok()?);
    let fits = &header[..8] == magic && version == FORMAT_VERSION && length == data.len() as u64;
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

    const MAGIC: [u8; 8] = *b"HALOTEST";

    #[test]
    fn packed_data_unpacks_and_any_damage_is_refused() {
        let data: Vec<u8> = (0..200u8).collect();
        let bytes = pack(&MAGIC, &data);
        assert_eq!(unpack(&MAGIC, &bytes), Some(&data[..]));
        assert_eq!(unpack(b"HALOELSE", &bytes), None, "another driver's magic");
        assert_eq!(unpack(&MAGIC, &bytes[..bytes.len() - 1]), None, "truncated");
        assert_eq!(unpack(&MAGIC, &bytes[..10]), None, "shorter than the header");
        for at in [0, 9, 13, 30, HEADER_BYTES + 5] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert_eq!(unpack(&MAGIC, &damaged), None, "byte {at} flipped");
        }
        assert_eq!(unpack(&MAGIC, &pack(&MAGIC, &[])), Some(&[][..]));
    }

    #[test]
    fn digests_change_with_any_part_and_its_boundaries() {
        let key = digest_hex(&[b"spirv", b"12"]);
        assert_eq!(key.len(), 64);
        assert_eq!(key, digest_hex(&[b"spirv", b"12"]));
        assert_ne!(key, digest_hex(&[b"spirv", b"13"]));
        assert_ne!(key, digest_hex(&[b"spirv1", b"2"]));
    }

    #[test]
    fn entries_are_stored_loaded_and_corrupt_ones_counted_as_rejected() {
        let dir = std::env::temp_dir().join(format!("halo-disk-cache-{}", std::process::id()));
        let cache = DiskCache::new(dir.join("device"), MAGIC);
        assert_eq!(cache.load("a"), None);
        cache.store("a", b"binary");
        assert_eq!(cache.load("a").as_deref(), Some(&b"binary"[..]));
        cache.refuse("a", "the driver refused it");
        std::fs::write(cache.dir().join("a.bin"), b"garbage").unwrap();
        assert_eq!(cache.load("a"), None);
        let counts = CacheCounters::KEYS.map(|key| cache.counters.get(key).unwrap());
        assert_eq!(counts, [0, 3, 2, 0], "hits, misses, rejected, write failures");
        assert_eq!(query_counter(Some(&cache), "x.cache", "misses").unwrap(), 3);
        assert!(query_counter(Some(&cache), "x.cache", "nope").is_err());
        assert!(query_counter(None, "x.cache", "hits").is_err());
        // A folder where a file must go cannot be written: counted, not an error.
        std::fs::create_dir_all(cache.dir().join("b.bin")).unwrap();
        cache.store("b", b"x");
        assert_eq!(cache.counters.get("write_failures"), Some(1));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_folder_comes_from_the_parameter_or_off() {
        assert_eq!(CacheDir::parse("off"), CacheDir::Off);
        assert_eq!(CacheDir::parse("/tmp/x"), CacheDir::At(PathBuf::from("/tmp/x")));
    }
}
