//! Buffers: sub-spannable views of a driver's allocation, with usage and access rules.

use crate::host_memory::{copy_bytes, fill_bytes};
use crate::memory::{BufferUsage, MemoryAccess, MemoryType};
use crate::{Error, Result};
use std::any::Any;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

/// A length meaning "from the offset to the end of the buffer" (IREE's `IREE_HAL_WHOLE_BUFFER`).
pub const WHOLE_BUFFER: u64 = u64::MAX;

/// Storage behind buffers, created by a driver's allocator.
///
/// Ownership: buffers hold the allocation in an `Arc`; it is freed when the last buffer (and the
/// last submission using one) drops it. Threading: any thread.
///
/// # Safety
/// [`Buffer`] reads and writes host memory through what this trait reports, in safe code, so an
/// implementation must keep these promises:
/// - [`Allocation::host_ptr`], when `Some`, points to [`Allocation::size`] bytes that are valid
///   for reads and writes from any thread for as long as the allocation lives, and the pointer and
///   size never change;
/// - no other safe code holds a Rust reference to those bytes (they belong to the buffers, and to
///   the device, whose access the caller orders with semaphores).
pub unsafe trait Allocation: Send + Sync + 'static {
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Memory type the allocator gave it.
    fn memory_type(&self) -> MemoryType;
    /// Host address of byte 0 where host code can address the memory: host-visible memory, or the
    /// memory of a device simulated on the host, whose kernels run there. `None` for device-only
    /// memory. Mapping also needs [`MemoryType::HOST_VISIBLE`], so a simulated device's memory
    /// stays out of the host's reach through the HAL.
    fn host_ptr(&self) -> Option<NonNull<u8>>;
    /// Makes host writes in `[offset, offset + length)` visible to the device (non-coherent memory).
    fn flush(&self, _offset: u64, _length: u64) -> Result<()> {
        Ok(())
    }
    /// Makes device writes in `[offset, offset + length)` visible to the host (non-coherent memory).
    fn invalidate(&self, _offset: u64, _length: u64) -> Result<()> {
        Ok(())
    }
    /// For drivers to recover their concrete type.
    fn as_any(&self) -> &dyn Any;
}

/// A range of an allocation with the usage and access it allows (`iree_hal_buffer_t`).
///
/// Cloning is cheap and shares the allocation; a subspan is another `Buffer` over the same
/// allocation. Threading: any thread; ordering of device work against host access is the
/// caller's job (semaphores), as in IREE.
#[derive(Clone)]
pub struct Buffer {
    allocation: Arc<dyn Allocation>,
    offset: u64,
    length: u64,
    usage: BufferUsage,
    access: MemoryAccess,
}

/// How two buffer ranges overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// Different allocations or disjoint ranges.
    Disjoint,
    /// Some bytes are shared.
    Partial,
    /// The same bytes.
    Complete,
}

impl Buffer {
    /// A buffer covering the whole of `allocation`.
    pub fn new(allocation: Arc<dyn Allocation>, usage: BufferUsage, access: MemoryAccess) -> Self {
        let length = allocation.size();
        Buffer {
            allocation,
            offset: 0,
            length,
            usage,
            access,
        }
    }

    /// The allocation behind this buffer.
    pub fn allocation(&self) -> &Arc<dyn Allocation> {
        &self.allocation
    }
    /// Offset of this buffer within its allocation.
    pub fn byte_offset(&self) -> u64 {
        self.offset
    }
    /// Length in bytes.
    pub fn byte_length(&self) -> u64 {
        self.length
    }
    /// Memory type of the allocation.
    pub fn memory_type(&self) -> MemoryType {
        self.allocation.memory_type()
    }
    /// Allowed usage.
    pub fn allowed_usage(&self) -> BufferUsage {
        self.usage
    }
    /// Allowed access.
    pub fn allowed_access(&self) -> MemoryAccess {
        self.access
    }

    /// Resolves `(offset, length)` (length may be [`WHOLE_BUFFER`]) to a length within bounds.
    ///
    /// # Errors
    /// `OutOfRange` naming the byte range and the buffer length.
    #[inline]
    pub fn checked_range(&self, offset: u64, length: u64) -> Result<u64> {
        let length = if length == WHOLE_BUFFER {
            self.length.checked_sub(offset)
        } else {
            Some(length)
        };
        match length {
            Some(length) if offset.checked_add(length).is_some_and(|end| end <= self.length) => Ok(length),
            _ => Err(self.range_error(offset, length)),
        }
    }

    // Out of line so that the check above inlines into every command and dispatch.
    #[cold]
    #[inline(never)]
    fn range_error(&self, offset: u64, length: Option<u64>) -> Error {
        Error::out_of_range(format!(
            "range [{offset}, {}) exceeds buffer length {}",
            describe_end(offset, length),
            self.length
        ))
    }

    /// A buffer over `[offset, offset + length)` of this one, sharing the allocation.
    pub fn subspan(&self, offset: u64, length: u64) -> Result<Buffer> {
        let length = self.checked_range(offset, length)?;
        Ok(Buffer {
            offset: self.offset + offset,
            length,
            ..self.clone()
        })
    }

    /// Same buffer with fewer allowed usages or accesses (never more).
    pub fn restricted(&self, usage: BufferUsage, access: MemoryAccess) -> Buffer {
        Buffer {
            usage: self.usage & usage,
            access: self.access & access,
            ..self.clone()
        }
    }

    /// Checks that every bit of `required` usage is allowed.
    pub fn validate_usage(&self, required: BufferUsage) -> Result<()> {
        if self.usage.contains(required) {
            Ok(())
        } else {
            Err(Error::permission_denied(format!(
                "buffer usage {:?} does not allow {:?}",
                self.usage,
                required.difference(self.usage)
            )))
        }
    }

    /// Checks that every bit of `required` access is allowed.
    pub fn validate_access(&self, required: MemoryAccess) -> Result<()> {
        if self.access.contains(MemoryAccess::ANY) || self.access.contains(required) {
            Ok(())
        } else {
            Err(Error::permission_denied(format!(
                "buffer access {:?} does not allow {:?}",
                self.access,
                required.difference(self.access)
            )))
        }
    }

    /// Checks that the memory has every bit of `required`.
    pub fn validate_memory_type(&self, required: MemoryType) -> Result<()> {
        let actual = self.memory_type();
        if actual.contains(required) {
            Ok(())
        } else {
            Err(Error::permission_denied(format!(
                "memory type {actual:?} lacks {:?}",
                required.difference(actual)
            )))
        }
    }

    /// How this buffer's bytes overlap `other`'s.
    pub fn overlap(&self, offset: u64, length: u64, other: &Buffer, other_offset: u64, other_length: u64) -> Overlap {
        if !Arc::ptr_eq(&self.allocation, &other.allocation) {
            return Overlap::Disjoint;
        }
        let a = self.offset + offset;
        let b = other.offset + other_offset;
        if a == b && length == other_length {
            Overlap::Complete
        } else if a < b + other_length && b < a + length {
            Overlap::Partial
        } else {
            Overlap::Disjoint
        }
    }

    /// Host address of `[offset, offset + length)` for drivers that execute on the host.
    ///
    /// # Errors
    /// `OutOfRange` for a bad range; `PermissionDenied` when the memory is not host-addressable.
    pub fn host_range(&self, offset: u64, length: u64) -> Result<(NonNull<u8>, usize)> {
        let length = self.checked_range(offset, length)?;
        let base = self
            .allocation
            .host_ptr()
            .ok_or_else(|| Error::permission_denied("buffer memory is not host-addressable"))?;
        let start = usize::try_from(self.offset + offset).map_err(|_| Error::out_of_range("offset"))?;
        // SAFETY: `checked_range` keeps `start + length` within the allocation, whose host memory
        // starts at `base`.
        let ptr = unsafe { NonNull::new_unchecked(base.as_ptr().add(start)) };
        Ok((ptr, length as usize))
    }

    fn mappable_range(&self, offset: u64, length: u64, access: MemoryAccess) -> Result<(NonNull<u8>, usize)> {
        self.validate_memory_type(MemoryType::HOST_VISIBLE)?;
        self.validate_usage(BufferUsage::MAPPING_SCOPED)?;
        self.validate_access(access)?;
        self.host_range(offset, length)
    }

    /// Copies `target.len()` bytes starting at `offset` into `target` (`iree_hal_buffer_map_read`).
    pub fn map_read(&self, offset: u64, target: &mut [u8]) -> Result<()> {
        let (ptr, len) = self.mappable_range(offset, target.len() as u64, MemoryAccess::READ)?;
        self.allocation.invalidate(self.offset + offset, len as u64)?;
        // SAFETY: `ptr` is valid for `len` bytes (checked range) and `target` has `len` bytes.
        unsafe { copy_bytes(ptr.as_ptr(), target.as_mut_ptr(), len) };
        Ok(())
    }

    /// Copies `source` into the buffer at `offset` (`iree_hal_buffer_map_write`).
    pub fn map_write(&self, offset: u64, source: &[u8]) -> Result<()> {
        let (ptr, len) = self.mappable_range(offset, source.len() as u64, MemoryAccess::WRITE)?;
        // SAFETY: `ptr` is valid for `len` bytes (checked range) and `source` has `len` bytes.
        unsafe { copy_bytes(source.as_ptr(), ptr.as_ptr(), len) };
        self.allocation.flush(self.offset + offset, len as u64)
    }

    /// Repeats `pattern` (1, 2 or 4 bytes) over `[offset, offset + length)` (`iree_hal_buffer_map_fill`).
    pub fn map_fill(&self, offset: u64, length: u64, pattern: &[u8]) -> Result<()> {
        let length = self.checked_range(offset, length)?;
        validate_fill(offset, length, pattern)?;
        let (ptr, len) = self.mappable_range(offset, length, MemoryAccess::WRITE)?;
        // SAFETY: `ptr` is valid for `len` bytes and `len` is a multiple of the pattern length.
        unsafe { fill_bytes(ptr.as_ptr(), len, pattern) };
        self.allocation.flush(self.offset + offset, len as u64)
    }

    /// Zeroes `[offset, offset + length)`.
    pub fn map_zero(&self, offset: u64, length: u64) -> Result<()> {
        self.map_fill(offset, length, &[0])
    }

    /// Reads the whole buffer into a new vector.
    pub fn read_all(&self) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; self.length as usize];
        self.map_read(0, &mut bytes)?;
        Ok(bytes)
    }
}

/// Checks a fill pattern and its alignment rules (IREE: 1, 2 or 4 bytes; offset and length aligned).
pub fn validate_fill(offset: u64, length: u64, pattern: &[u8]) -> Result<()> {
    let n = pattern.len() as u64;
    if !matches!(n, 1 | 2 | 4) {
        return Err(Error::invalid_argument(format!(
            "fill pattern length {n} is not 1, 2 or 4 bytes"
        )));
    }
    if !offset.is_multiple_of(n) || !length.is_multiple_of(n) {
        return Err(Error::invalid_argument(format!(
            "fill range [{offset}, {}) is not aligned to the {n}-byte pattern",
            offset + length
        )));
    }
    Ok(())
}

fn describe_end(offset: u64, length: Option<u64>) -> String {
    match length.and_then(|l| offset.checked_add(l)) {
        Some(end) => end.to_string(),
        None => "overflow".to_string(),
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("offset", &self.offset)
            .field("length", &self.length)
            .field("memory_type", &self.memory_type())
            .field("usage", &self.usage)
            .field("access", &self.access)
            .finish()
    }
}

/// Transfers executed by the host on host-addressable buffers, for drivers that run on the CPU.
///
/// Validation (ranges, usage, alignment) happened when the work was recorded.
pub mod host_transfer {
    use super::*;

    /// Repeats `pattern` over the range.
    pub fn fill(target: &Buffer, offset: u64, length: u64, pattern: &[u8]) -> Result<()> {
        let (ptr, len) = target.host_range(offset, length)?;
        // SAFETY: `host_range` returned a valid range of `len` bytes; validation made `len` a
        // multiple of the pattern length.
        unsafe { fill_bytes(ptr.as_ptr(), len, pattern) };
        Ok(())
    }

    /// Writes `data` at `offset`.
    pub fn update(data: &[u8], target: &Buffer, offset: u64) -> Result<()> {
        let (ptr, len) = target.host_range(offset, data.len() as u64)?;
        // SAFETY: both ranges hold `len` bytes.
        unsafe { copy_bytes(data.as_ptr(), ptr.as_ptr(), len) };
        Ok(())
    }

    /// Reads `target.len()` bytes at `offset` into host memory.
    pub fn copy_out(source: &Buffer, offset: u64, target: &mut [u8]) -> Result<()> {
        let (ptr, len) = source.host_range(offset, target.len() as u64)?;
        // SAFETY: both ranges hold `len` bytes and `target` is a distinct Rust slice.
        unsafe { copy_bytes(ptr.as_ptr(), target.as_mut_ptr(), len) };
        Ok(())
    }

    /// Copies `length` bytes between buffers (ranges may be in the same allocation).
    pub fn copy(source: &Buffer, source_offset: u64, target: &Buffer, target_offset: u64, length: u64) -> Result<()> {
        let (src, len) = source.host_range(source_offset, length)?;
        let (dst, _) = target.host_range(target_offset, len as u64)?;
        // SAFETY: both ranges were checked to hold `len` bytes.
        unsafe { copy_bytes(src.as_ptr(), dst.as_ptr(), len) };
        Ok(())
    }
}

/// A scoped host mapping of a buffer range; writes are flushed when it drops (`iree_hal_buffer_mapping_t`).
pub struct Mapping<'a> {
    buffer: &'a Buffer,
    offset: u64,
    ptr: NonNull<u8>,
    len: usize,
    access: MemoryAccess,
}

impl Buffer {
    /// Maps `[offset, offset + length)` for `access`; device writes are made visible first.
    ///
    /// # Errors
    /// `PermissionDenied` when the memory is not host-visible or the usage/access forbid mapping;
    /// `OutOfRange` for a bad range.
    pub fn map_range(&self, access: MemoryAccess, offset: u64, length: u64) -> Result<Mapping<'_>> {
        let (ptr, len) = self.mappable_range(offset, length, access)?;
        self.allocation.invalidate(self.offset + offset, len as u64)?;
        Ok(Mapping {
            buffer: self,
            offset,
            ptr,
            len,
            access,
        })
    }
}

impl Mapping<'_> {
    /// Mapped length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn span(&self, offset: usize, len: usize) -> Result<*mut u8> {
        match offset.checked_add(len) {
            // SAFETY: `offset + len <= self.len`, inside the mapped range.
            Some(end) if end <= self.len => Ok(unsafe { self.ptr.as_ptr().add(offset) }),
            _ => Err(Error::out_of_range(format!(
                "mapping range [{offset}, {}) exceeds mapped length {}",
                offset.saturating_add(len),
                self.len
            ))),
        }
    }

    /// Copies mapped bytes at `offset` into `target`.
    pub fn read(&self, offset: usize, target: &mut [u8]) -> Result<()> {
        self.buffer.validate_access(MemoryAccess::READ)?;
        let src = self.span(offset, target.len())?;
        // SAFETY: `span` checked the source range; `target` is a distinct Rust slice.
        unsafe { copy_bytes(src, target.as_mut_ptr(), target.len()) };
        Ok(())
    }

    /// Copies `source` into the mapping at `offset`.
    pub fn write(&self, offset: usize, source: &[u8]) -> Result<()> {
        if !self.access.contains(MemoryAccess::WRITE) {
            return Err(Error::permission_denied("mapping was not made for writing"));
        }
        let dst = self.span(offset, source.len())?;
        // SAFETY: `span` checked the target range; `source` is a distinct Rust slice.
        unsafe { copy_bytes(source.as_ptr(), dst, source.len()) };
        Ok(())
    }

    /// Makes device writes visible to the host again (non-coherent memory), e.g. after a wait.
    pub fn invalidate(&self) -> Result<()> {
        self.buffer
            .allocation
            .invalidate(self.buffer.offset + self.offset, self.len as u64)
    }

    /// Makes writes so far visible to the device without unmapping.
    pub fn flush(&self) -> Result<()> {
        self.buffer
            .allocation
            .flush(self.buffer.offset + self.offset, self.len as u64)
    }

    /// The mapped bytes as a slice, without copying.
    ///
    /// # Safety
    /// No device work and no other mapping may write these bytes while the slice lives.
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: the range is mapped and valid; the caller excludes concurrent writers.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Mapping<'_> {
    fn drop(&mut self) {
        if self.access.contains(MemoryAccess::WRITE) {
            // A failed flush cannot be reported from drop; `flush()` reports it to callers who care.
            let _ = self.flush();
        }
    }
}
