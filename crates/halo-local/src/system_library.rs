//! The loader for `system-elf-x86_64`: shared objects opened with the system's
//! `dlopen`, for executables linked against the platform (debuggers and
//! profilers see them as ordinary libraries).
//!
//! `dlopen` wants a path, so the bytes go to a uniquely named file in the
//! temporary directory that is deleted right after loading; the open library
//! keeps the mapping (and the inode) alive. The headers are validated first
//! with the embedded loader's checks, because `dlopen` of a truncated file can
//! fault rather than fail. Trust: `dlopen` runs the file's initializers, so this
//! format is only as safe as the file's origin.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use halo_hal::{Error, Result};
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

use crate::elf;

/// A shared object opened by the system loader; closed on drop.
///
/// Threading: `dlopen`ed code and data may be used from any thread.
#[derive(Debug)]
pub(crate) struct SystemLibrary {
    library: Library,
}

/// Removes the temporary file when loading is over, whether it worked or not.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn unique_path() -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "halo-executable-{}-{}-{nanos:08x}.so",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)
}

impl SystemLibrary {
    /// Validates `bytes` as a host shared object and opens it with `dlopen`.
    ///
    /// # Errors
    /// The header errors of the embedded loader; `Unavailable` when the
    /// temporary file cannot be written; `InvalidArgument` with the loader's
    /// message when `dlopen` fails.
    pub fn load(bytes: &[u8]) -> Result<Self> {
        elf::header::parse(bytes, elf::HOST_MACHINE)?;
        let path = unique_path();
        write_new(&path, bytes).map_err(|e| {
            Error::unavailable(format!(
                "cannot write the executable to temporary file {}: {e}",
                path.display()
            ))
        })?;
        let file = TempFile(path);
        // SAFETY: `dlopen` runs the object's initializers. The bytes are an ELF
        // shared object for this machine (checked above); trusting its code is
        // the documented contract of the system-library format.
        let library = unsafe { Library::open(Some(&file.0), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|e| Error::invalid_argument(format!("dlopen failed: {e}")))?;
        drop(file);
        Ok(SystemLibrary { library })
    }

    /// The address of the exported function `name`.
    ///
    /// # Errors
    /// `NotFound` naming the symbol.
    pub fn function(&self, name: &str) -> Result<usize> {
        let mut symbol = name.as_bytes().to_vec();
        symbol.push(0);
        // SAFETY: the symbol is only turned into an address; the caller gives
        // it a type after checking the library's ABI.
        let address = unsafe { self.library.get::<*const ()>(&symbol) }
            .map(|s| *s as usize)
            .map_err(|e| Error::not_found(format!("shared object does not export '{name}': {e}")))?;
        if address == 0 {
            return Err(Error::not_found(format!("shared object's symbol '{name}' is NULL")));
        }
        Ok(address)
    }
}
