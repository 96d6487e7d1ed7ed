//! Triton's system shared memory extension: clients on the server's machine register windows of
//! POSIX shared memory objects (`/dev/shm/<key>`) as named regions, then name a region instead of
//! sending a tensor's bytes, or ask for an output to be written into one.
//!
//! Regions are read and written through the file with positioned reads and writes rather than
//! mapped: the bytes are copied into the request's tensors either way, and a client that
//! truncates or rewrites the object meanwhile gets short reads (an error), not a fault in the
//! server.

use halo_hal::{Error, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

/// A registered region, as its status reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegionStatus {
    /// The name requests use.
    pub name: String,
    /// The shared memory object's key (`/input0`).
    pub key: String,
    /// Where the region starts in the object.
    pub offset: u64,
    /// Its length.
    pub byte_size: u64,
}

struct Region {
    status: RegionStatus,
    file: File,
}

/// The registered regions of a server.
pub struct SharedMemory {
    folder: PathBuf,
    regions: Mutex<BTreeMap<String, Arc<Region>>>,
}

impl Default for SharedMemory {
    fn default() -> Self {
        SharedMemory::in_folder(PathBuf::from("/dev/shm"))
    }
}

impl SharedMemory {
    /// Regions of the objects in `folder` (where `shm_open` keeps them: `/dev/shm` on Linux).
    pub fn in_folder(folder: PathBuf) -> Self {
        SharedMemory {
            folder,
            regions: Mutex::new(BTreeMap::new()),
        }
    }

    /// Registers `[offset, offset + byte_size)` of the object `key` as region `name`.
    ///
    /// # Errors
    /// `AlreadyExists` when `name` is taken; `InvalidArgument` for a key that is not one
    /// object's name, an object that cannot be opened for reading and writing, or a window past
    /// its end.
    pub fn register(&self, name: &str, key: &str, offset: u64, byte_size: u64) -> Result<()> {
        let object = key.strip_prefix('/').unwrap_or(key);
        if object.is_empty() || object.contains('/') || object == "." || object == ".." {
            return Err(Error::invalid_argument(format!(
                "shared memory key '{key}' does not name a shared memory object"
            )));
        }
        let path = self.folder.join(object);
        let file = File::options().read(true).write(true).open(&path).map_err(|error| {
            Error::invalid_argument(format!(
                "cannot open shared memory object '{key}' for region '{name}': {error}"
            ))
        })?;
        let length = file
            .metadata()
            .map_err(|error| Error::invalid_argument(format!("cannot inspect shared memory object '{key}': {error}")))?
            .len();
        if offset.checked_add(byte_size).filter(|&end| end <= length).is_none() {
            return Err(Error::invalid_argument(format!(
                "region '{name}' [{offset}, {offset} + {byte_size}) lies past the end of shared memory object '{key}' ({length} bytes)"
            )));
        }
        let mut regions = self.regions.lock().unwrap_or_else(PoisonError::into_inner);
        if regions.contains_key(name) {
            return Err(Error::already_exists(format!(
                "a shared memory region named '{name}' is already registered"
            )));
        }
        let status = RegionStatus {
            name: name.to_string(),
            key: key.to_string(),
            offset,
            byte_size,
        };
        regions.insert(name.to_string(), Arc::new(Region { status, file }));
        Ok(())
    }

    /// Unregisters region `name`, or every region for `None`; requests already reading or
    /// writing a region finish with it.
    ///
    /// # Errors
    /// `InvalidArgument` when no region of that name is registered.
    pub fn unregister(&self, name: Option<&str>) -> Result<()> {
        let mut regions = self.regions.lock().unwrap_or_else(PoisonError::into_inner);
        match name {
            None => regions.clear(),
            Some(name) => {
                regions.remove(name).ok_or_else(|| {
                    Error::invalid_argument(format!("no shared memory region '{name}' is registered"))
                })?;
            }
        }
        Ok(())
    }

    /// The status of region `name`, or of every region for `None`.
    ///
    /// # Errors
    /// `InvalidArgument` when no region of that name is registered.
    pub fn status(&self, name: Option<&str>) -> Result<Vec<RegionStatus>> {
        let regions = self.regions.lock().unwrap_or_else(PoisonError::into_inner);
        match name {
            None => Ok(regions.values().map(|r| r.status.clone()).collect()),
            Some(name) => Ok(vec![find(&regions, name)?.status.clone()]),
        }
    }

    /// `byte_size` bytes of region `name` from `offset` (within the region), for `tensor`.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown region, a range past its end, or an object that has
    /// shrunk; `ResourceExhausted` when the bytes cannot be held.
    pub fn read(&self, name: &str, offset: u64, byte_size: u64, tensor: &str) -> Result<Vec<u8>> {
        let region = self.region(name)?;
        let at = region.window(offset, byte_size, tensor)?;
        let length =
            usize::try_from(byte_size).map_err(|_| Error::resource_exhausted(format!("'{tensor}' is too large")))?;
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(length)
            .map_err(|_| Error::resource_exhausted(format!("'{tensor}' ({byte_size} bytes) is too large")))?;
        bytes.resize(length, 0);
        region.file.read_exact_at(&mut bytes, at).map_err(|error| {
            Error::invalid_argument(format!(
                "reading '{tensor}' from shared memory region '{name}' failed: {error}"
            ))
        })?;
        Ok(bytes)
    }

    /// Writes `bytes` into region `name` at `offset` (within the region), which must leave at
    /// least `capacity` bytes for `tensor`.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown region, a range past its end, a tensor larger than
    /// `capacity`, or a failed write.
    pub fn write(&self, name: &str, offset: u64, capacity: u64, bytes: &[u8], tensor: &str) -> Result<()> {
        if bytes.len() as u64 > capacity {
            return Err(Error::invalid_argument(format!(
                "output '{tensor}' has {} bytes but shared_memory_byte_size is {capacity}",
                bytes.len()
            )));
        }
        let region = self.region(name)?;
        let at = region.window(offset, capacity, tensor)?;
        region.file.write_all_at(bytes, at).map_err(|error| {
            Error::invalid_argument(format!(
                "writing '{tensor}' to shared memory region '{name}' failed: {error}"
            ))
        })
    }

    fn region(&self, name: &str) -> Result<Arc<Region>> {
        let regions = self.regions.lock().unwrap_or_else(PoisonError::into_inner);
        find(&regions, name).cloned()
    }
}

fn find<'a>(regions: &'a BTreeMap<String, Arc<Region>>, name: &str) -> Result<&'a Arc<Region>> {
    regions
        .get(name)
        .ok_or_else(|| Error::invalid_argument(format!("no shared memory region '{name}' is registered")))
}

impl Region {
    /// The object offset of `[offset, offset + size)` within the region.
    fn window(&self, offset: u64, size: u64, tensor: &str) -> Result<u64> {
        let status = &self.status;
        offset
            .checked_add(size)
            .filter(|&end| end <= status.byte_size)
            .map(|_| status.offset + offset)
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "'{tensor}' wants bytes [{offset}, {offset} + {size}) of shared memory region '{}', which has {}",
                    status.name, status.byte_size
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(folder: &std::path::Path, name: &str, bytes: &[u8]) {
        std::fs::write(folder.join(name), bytes).unwrap();
    }

    #[test]
    fn regions_read_and_write_their_window_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        object(dir.path(), "data", &(0..32).collect::<Vec<u8>>());
        let memory = SharedMemory::in_folder(dir.path().to_path_buf());
        memory.register("in", "/data", 8, 16).unwrap();
        assert_eq!(memory.read("in", 2, 4, "x").unwrap(), [10, 11, 12, 13]);
        memory.write("in", 0, 16, &[99, 98], "y").unwrap();
        assert_eq!(&std::fs::read(dir.path().join("data")).unwrap()[8..10], &[99, 98]);
        assert_eq!(
            memory.status(None).unwrap(),
            [RegionStatus {
                name: "in".into(),
                key: "/data".into(),
                offset: 8,
                byte_size: 16
            }]
        );

        let error = memory.read("in", 10, 8, "x").unwrap_err();
        assert!(error.to_string().contains("[10, 10 + 8)"), "{error}");
        let error = memory.write("in", 0, 1, &[1, 2], "y").unwrap_err();
        assert!(error.to_string().contains("shared_memory_byte_size is 1"), "{error}");
        assert!(memory
            .read("out", 0, 1, "x")
            .unwrap_err()
            .to_string()
            .contains("no shared memory region 'out'"));
    }

    #[test]
    fn registration_checks_names_keys_and_bounds() {
        let dir = tempfile::tempdir().unwrap();
        object(dir.path(), "data", &[0; 16]);
        let memory = SharedMemory::in_folder(dir.path().to_path_buf());
        memory.register("a", "data", 0, 16).unwrap();
        assert_eq!(
            memory.register("a", "data", 0, 4).unwrap_err().code(),
            halo_hal::StatusCode::AlreadyExists
        );
        for key in ["/../etc/passwd", "a/b", "", "/", ".."] {
            let error = memory.register("b", key, 0, 1).unwrap_err();
            assert!(error.to_string().contains("does not name"), "{key}: {error}");
        }
        let error = memory.register("b", "/missing", 0, 1).unwrap_err();
        assert!(error.to_string().contains("cannot open"), "{error}");
        let error = memory.register("b", "/data", 8, 9).unwrap_err();
        assert!(error.to_string().contains("past the end"), "{error}");
        assert!(memory.register("b", "/data", u64::MAX, 2).is_err());
        memory.unregister(Some("a")).unwrap();
        assert!(memory.unregister(Some("a")).is_err());
        memory.register("a", "data", 0, 1).unwrap();
        memory.register("c", "data", 1, 1).unwrap();
        memory.unregister(None).unwrap();
        assert!(memory.status(None).unwrap().is_empty());
    }
}
