//! The loader for `system-elf-*` (Linux) and `system-dylib-*` (macOS): shared
//! libraries opened with the system's `dlopen`, for executables linked against
//! the platform (debuggers and profilers see them as ordinary libraries).
//!
//! `dlopen` wants a path, so the bytes go to an anonymous in-memory file
//! (`memfd_create`) opened through `/proc/self/fd`: nothing is left on disk even
//! when loading crashes the process. Where that is unavailable they go to a
//! uniquely named file in the temporary directory, deleted right after loading;
//! the open library keeps the mapping alive. The headers are validated first
//! (ELF with the embedded loader's checks, Mach-O with [`crate::macho`]'s),
//! because `dlopen` of a truncated file can fault rather than fail. On Apple
//! silicon the library must carry a code signature, ad hoc at least (Apple's
//! linker adds one), or the kernel ends the process when its code first runs. Trust: `dlopen` runs the file's initializers, so this
//! format is only as safe as the file's origin.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use halo_hal::{Error, Result};
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

use crate::{arch, elf, macho};

/// How a system library's bytes are packaged, which decides the checks they pass before the
/// system loader reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Container {
    /// An ELF shared object (Linux).
    Elf,
    /// A Mach-O dynamic library (macOS).
    MachO,
}

impl Container {
    /// Checks the headers of `bytes` as a library for this host's CPU.
    fn check(self, bytes: &[u8]) -> Result<()> {
        let host = arch::HOST.ok_or_else(|| Error::incompatible("halo has no CPU executables for this host's CPU"))?;
        match self {
            Container::Elf => elf::header::parse(bytes, host.machine).map(drop),
            Container::MachO => macho::check_dylib(bytes, host.macho_cpu_type),
        }
    }

    /// The file name ending the system loader expects.
    fn extension(self) -> &'static str {
        match self {
            Container::Elf => "so",
            Container::MachO => "dylib",
        }
    }
}

/// A shared object opened by the system loader; closed on drop.
///
/// Threading: `dlopen`ed code and data may be used from any thread.
#[derive(Debug)]
pub(crate) struct SystemLibrary {
    library: Library,
    /// The in-memory file the library was opened from, kept open while it is
    /// loaded: `dlopen` matches loaded objects by path, so its descriptor's
    /// number (and path) must not be reused for another library meanwhile.
    /// Declared after `library` so that it closes after `dlclose`.
    _memory_file: Option<File>,
}

/// Where the bytes are while `dlopen` reads them; gone when this is dropped.
enum LoadFile {
    /// An anonymous in-memory file, named through `/proc/self/fd`.
    Memory(File),
    /// A file in the temporary directory.
    Temporary(TemporaryPath),
}

/// A file in the temporary directory, removed on drop.
struct TemporaryPath(PathBuf);

impl Drop for TemporaryPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl LoadFile {
    fn write(bytes: &[u8], container: Container) -> Result<Self> {
        if let Ok(file) = memory_file(bytes) {
            return Ok(LoadFile::Memory(file));
        }
        let path = unique_path(container.extension());
        write_new(&path, bytes).map_err(|e| {
            Error::unavailable(format!(
                "cannot write the executable to temporary file {}: {e}",
                path.display()
            ))
        })?;
        Ok(LoadFile::Temporary(TemporaryPath(path)))
    }

    fn path(&self) -> PathBuf {
        match self {
            LoadFile::Memory(file) => PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd())),
            LoadFile::Temporary(path) => path.0.clone(),
        }
    }

    /// What must stay open while the library is loaded; a temporary file is removed.
    fn into_memory_file(self) -> Option<File> {
        match self {
            LoadFile::Memory(file) => Some(file),
            LoadFile::Temporary(_) => None,
        }
    }
}

/// Elsewhere there is no anonymous file with a path: the bytes go to the temporary directory.
#[cfg(not(target_os = "linux"))]
fn memory_file(_: &[u8]) -> std::io::Result<File> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "no memfd_create on this system",
    ))
}

/// An anonymous file holding `bytes`, usable as a path while `/proc` is mounted.
#[cfg(target_os = "linux")]
fn memory_file(bytes: &[u8]) -> std::io::Result<File> {
    // SAFETY: the name is a NUL-terminated literal; the flags are valid.
    let fd = unsafe { libc::memfd_create(c"halo-executable".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by `memfd_create` and is owned by nothing else.
    let mut file: File = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
    file.write_all(bytes)?;
    if !Path::new(&format!("/proc/self/fd/{fd}")).exists() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "/proc is not mounted",
        ));
    }
    Ok(file)
}

fn unique_path(extension: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "halo-executable-{}-{}-{nanos:08x}.{extension}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)
}

impl SystemLibrary {
    /// Validates `bytes` as a shared library of `container`'s kind for this host's CPU and opens
    /// it with `dlopen`.
    ///
    /// # Errors
    /// The header errors of the embedded loader; `Unavailable` when neither an
    /// in-memory nor a temporary file can be written; `InvalidArgument` with the loader's
    /// message when `dlopen` fails.
    pub fn load(bytes: &[u8], container: Container) -> Result<Self> {
        container.check(bytes)?;
        let file = LoadFile::write(bytes, container)?;
        // SAFETY: `dlopen` runs the library's initializers. The bytes are a whole
        // shared library for this machine (checked above); trusting its code is
        // the documented contract of the system-library format.
        let library = unsafe { Library::open(Some(file.path()), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|e| Error::invalid_argument(format!("dlopen failed: {e}")))?;
        Ok(SystemLibrary {
            library,
            _memory_file: file.into_memory_file(),
        })
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
