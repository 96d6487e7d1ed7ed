//! The bytes a module is loaded from, and the `unsafe` operations of module loading: mapping a
//! file, dropping its resident pages, and re-reading a FlatBuffer root that was verified at load.

use super::schema::{size_prefixed_root_as_bytecode_module_def_unchecked, BytecodeModuleDef};
use memmap2::Mmap;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// The immutable bytes of a loaded module: a read-only memory map of its file, the file read into
/// anonymous memory, or shared memory.
///
/// Ownership: a [`super::BytecodeModule`] holds these behind an `Arc`; views such as rodata
/// segments borrow from them, and whoever needs a segment to outlive the module clones the `Arc`.
/// Threading: immutable, so `Send + Sync`.
pub struct ModuleBytes {
    storage: Storage,
}

enum Storage {
    /// The module file itself, mapped: its pages can be dropped and fault back in from the file.
    File(Mmap),
    /// The file read into anonymous pages of their own: dropping them would lose the bytes.
    Preloaded(Mmap),
    Shared(Arc<[u8]>),
}

impl ModuleBytes {
    /// Memory-maps `file` read-only, with 4 KiB pages ([`halo_hal::host_memory::keep_small_pages`]):
    /// kernels read constants in place from it.
    ///
    /// The map stays valid after `file` is closed. The file must not be modified or truncated while
    /// the map lives (see [`super::BytecodeModule::from_file`]).
    ///
    /// # Errors
    /// The operating system's error when the file cannot be mapped.
    pub(super) fn map(file: &File) -> std::io::Result<Self> {
        // SAFETY: `Mmap::map` is unsafe because another process could modify or truncate the file
        // while it is mapped, which would change bytes Rust treats as immutable. halo, like IREE's
        // tools, requires module files to stay unchanged while loaded; `BytecodeModule::from_file`
        // states this contract to its callers. The map is read-only, so halo never writes it.
        let map = unsafe { Mmap::map(file)? };
        halo_hal::host_memory::keep_small_pages(&map);
        Ok(ModuleBytes {
            storage: Storage::File(map),
        })
    }

    /// Reads `len` bytes of `file` into anonymous memory of their own (IREE's `preload`): one
    /// copy at load, after which kernels read constants from ordinary process memory, which on
    /// the machines halo is measured on runs a weight-bound dispatch about 8 % faster than the
    /// same pages mapped from the file (`iree-benchmark-module --module_mode=mmap` against
    /// `preload` on `fixtures/models/large_constants.vmfb`, 11 paired whole-process runs).
    ///
    /// The pages stay small ([`halo_hal::host_memory::keep_small_pages`]), as they do when the
    /// file is mapped.
    ///
    /// # Errors
    /// The operating system's error when the memory cannot be had or the file cannot be read.
    pub(super) fn read(file: &mut File, len: usize) -> std::io::Result<Self> {
        let mut memory = halo_hal::host_memory::map_anonymous_small_pages(len)?;
        file.read_exact(&mut memory)?;
        Ok(ModuleBytes {
            storage: Storage::Preloaded(memory.make_read_only()?),
        })
    }

    /// Wraps bytes already in memory, without copying.
    pub(super) fn shared(bytes: Arc<[u8]>) -> Self {
        ModuleBytes {
            storage: Storage::Shared(bytes),
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.storage {
            Storage::File(map) | Storage::Preloaded(map) => map,
            Storage::Shared(bytes) => bytes,
        }
    }

    /// Drops the pages of a mapped module file from this process's resident memory; a later read
    /// faults its page back in from the file (from the page cache while the kernel keeps it).
    /// Bytes held any other way are left as they are.
    ///
    /// Worth doing once a module's initializers have run: they read the weights that data tiling
    /// repacks into buffers of their own, and otherwise the file's copy stays resident, unused,
    /// beside the packed one (SqueezeNet's 4.9 MB; ResNet-50's 100 MB).
    ///
    /// # Errors
    /// The operating system's error when it refuses the advice.
    pub fn release_resident_pages(&self) -> std::io::Result<()> {
        #[cfg(unix)]
        if let Storage::File(map) = &self.storage {
            // SAFETY: `MADV_DONTNEED` is unchecked because on private anonymous or written pages it
            // discards contents. This map is a shared, read-only map of a file that must stay
            // unchanged while loaded (see `map`), so every page reads back the same bytes from the
            // file; nothing halo holds points at a page's identity, only at its address.
            unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed)? };
        }
        Ok(())
    }

    /// True when the bytes are a page-aligned mapping of their own (the file mapped, or read into
    /// anonymous pages), so a segment's alignment in the file is its alignment in memory.
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::File(_) | Storage::Preloaded(_))
    }
}

impl Deref for ModuleBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for ModuleBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl fmt::Debug for ModuleBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModuleBytes")
            .field("len", &self.len())
            .field("mapped", &self.is_mapped())
            .finish()
    }
}

/// Module bytes together with the range of them that passed [`flatbuffers`] verification as a
/// size-prefixed `BytecodeModuleDef`.
///
/// The range starts at the 4-byte size prefix, not after it: the compiler aligns fields (the u64
/// rodata offsets, for one) relative to the prefix, and the verifier checks alignment relative to
/// the start of the slice it is given.
///
/// Exists so accessors can re-read the root table on every call without verifying again (the
/// module cannot hold a borrowing `BytecodeModuleDef` next to the bytes it borrows from). Only
/// [`Self::verify`] makes one, and neither the bytes nor the range can change afterwards.
pub(super) struct VerifiedModuleDef {
    bytes: Arc<ModuleBytes>,
    range: Range<usize>,
}

impl VerifiedModuleDef {
    /// Verifies `bytes[range]` as a size-prefixed `BytecodeModuleDef`.
    ///
    /// # Errors
    /// The verifier's error when any offset, vector, string, union or required field is invalid
    /// (`range` out of bounds is reported as a range error too).
    pub(super) fn verify(
        bytes: Arc<ModuleBytes>,
        range: Range<usize>,
        options: &flatbuffers::VerifierOptions,
    ) -> Result<Self, flatbuffers::InvalidFlatbuffer> {
        let Some(flatbuffer) = bytes.get(range.clone()) else {
            return Err(flatbuffers::InvalidFlatbuffer::RangeOutOfBounds {
                range: range.clone(),
                error_trace: Default::default(),
            });
        };
        flatbuffers::size_prefixed_root_with_opts::<BytecodeModuleDef>(options, flatbuffer)?;
        Ok(VerifiedModuleDef { bytes, range })
    }

    /// The bytes the FlatBuffer lies in (the whole file).
    pub(super) fn bytes(&self) -> &Arc<ModuleBytes> {
        &self.bytes
    }

    /// The root table.
    pub(super) fn root(&self) -> BytecodeModuleDef<'_> {
        let flatbuffer = &self.bytes[self.range.clone()];
        // SAFETY: `flatbuffer` is the same range of the same immutable bytes that
        // `flatbuffers::size_prefixed_root_with_opts` verified as a size-prefixed
        // `BytecodeModuleDef` in `verify` (both fields are private and never reassigned), which is
        // the precondition of the unchecked accessor.
        unsafe { size_prefixed_root_as_bytecode_module_def_unchecked(flatbuffer) }
    }
}
