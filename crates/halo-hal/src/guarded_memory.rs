//! Host bytes between inaccessible guard regions, so that an access past either end faults at
//! once instead of reaching other memory.
//!
//! Compiled CPU kernels check no bounds: a dispatch given more workgroups than its bindings were
//! sized for makes the extra ones write past the end, into whatever the heap put there. In a
//! buffer made of these bytes such an access hits a guard page, the CPU drivers return the fault
//! as an error naming the kernel, and nothing else is touched. The guard after the bytes is a
//! large reservation of address space (no memory is committed for it), since a kernel's stray
//! workgroup lands a whole tile, or many, past the end. `halo run-executable` and
//! `benchmark-executable` put their bindings in such bytes on the CPU drivers, where the
//! workgroup count comes from a flag.

use crate::host_memory::{HostBytes, HOST_ALIGNMENT};
use crate::{Error, Result};

/// Address space kept inaccessible before the bytes.
pub const GUARD_BEFORE: usize = 64 << 10;
/// Address space kept inaccessible after the bytes.
pub const GUARD_AFTER: usize = 1 << 30;

/// Readable, writable pages between two inaccessible regions of address space, unmapped when
/// dropped: what guarded bytes, the small blocks' chunks and native code's stacks are made of.
/// Nothing is committed until a page is touched.
pub struct GuardedRegion {
    reservation: *mut u8,
    before: usize,
    usable: usize,
    after: usize,
}

// SAFETY: the region owns its mapping outright and hands out only addresses, whose users
// synchronize their accesses.
unsafe impl Send for GuardedRegion {}
// SAFETY: as above; `&GuardedRegion` gives no access to the pages.
unsafe impl Sync for GuardedRegion {}

impl GuardedRegion {
    /// Maps `usable` bytes (rounded up to whole pages, at least one) with `before` and `after`
    /// bytes of inaccessible address space around them (each rounded up to whole pages).
    ///
    /// # Errors
    /// The operating system's error when the address space cannot be had or opened;
    /// `InvalidInput` when the sizes overflow.
    pub fn map(before: usize, usable: usize, after: usize) -> std::io::Result<GuardedRegion> {
        let page = page_size();
        let overflow = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "the sizes overflow");
        let [before, usable, after] = [before, usable.max(1), after].map(|n| n.checked_next_multiple_of(page));
        let (Some(before), Some(usable), Some(after)) = (before, usable, after) else {
            return Err(overflow());
        };
        let length = (before.checked_add(usable))
            .and_then(|n| n.checked_add(after))
            .ok_or_else(overflow)?;
        // SAFETY: a fresh private anonymous mapping at an address the kernel picks; it aliases
        // nothing.
        let reservation = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                length,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if reservation == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // Owned from here, so an early return unmaps it.
        let region = GuardedRegion {
            reservation: reservation.cast(),
            before,
            usable,
            after,
        };
        // SAFETY: opens only the middle of the reservation, which `region` owns.
        let opened = unsafe { libc::mprotect(region.start().cast(), usable, libc::PROT_READ | libc::PROT_WRITE) };
        if opened != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(region)
    }

    /// Address of the first usable byte (page-aligned).
    pub fn start(&self) -> *mut u8 {
        // SAFETY: `before` lies inside the reservation.
        unsafe { self.reservation.add(self.before) }
    }

    /// The address just past the usable bytes (page-aligned): where a stack starts.
    pub fn end(&self) -> usize {
        self.start() as usize + self.usable
    }
}

impl Drop for GuardedRegion {
    fn drop(&mut self) {
        // SAFETY: the reservation was mapped by `map` with this length and is unmapped only here.
        unsafe { libc::munmap(self.reservation.cast(), self.before + self.usable + self.after) };
    }
}

/// `len` zeroed, writable bytes whose end touches an inaccessible region (up to the alignment of
/// [`HOST_ALIGNMENT`]: the last `len` rounded up to it end on a guard page).
pub struct GuardedBytes {
    /// Keeps the bytes mapped.
    _region: GuardedRegion,
    bytes: *mut u8,
    len: usize,
}

// SAFETY: the bytes lie in the region the type owns; the pointer is only handed out through
// `HostBytes`, whose users synchronize access as for any buffer memory.
unsafe impl Send for GuardedBytes {}
// SAFETY: as above; `&GuardedBytes` gives no access to the bytes.
unsafe impl Sync for GuardedBytes {}

impl GuardedBytes {
    /// Maps `len` bytes between guards.
    ///
    /// # Errors
    /// `ResourceExhausted` when the address space or memory cannot be had.
    pub fn new(len: usize) -> Result<Self> {
        let exhausted =
            |why: String| Error::resource_exhausted(format!("mapping {len} bytes between guard pages: {why}"));
        let aligned = len
            .checked_next_multiple_of(HOST_ALIGNMENT)
            .ok_or_else(|| exhausted("the size overflows".into()))?;
        let region = GuardedRegion::map(GUARD_BEFORE, aligned, GUARD_AFTER).map_err(|e| exhausted(e.to_string()))?;
        // The bytes end where the usable pages do.
        let bytes = (region.end() - aligned) as *mut u8;
        Ok(GuardedBytes {
            _region: region,
            bytes,
            len,
        })
    }

    /// `data` copied into new guarded bytes.
    ///
    /// # Errors
    /// As [`GuardedBytes::new`].
    pub fn copy_of(data: &[u8]) -> Result<Self> {
        let guarded = Self::new(data.len())?;
        // SAFETY: `bytes` is valid for `len == data.len()` writes, and a fresh mapping does not
        // overlap `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), guarded.bytes, data.len()) };
        Ok(guarded)
    }
}

impl HostBytes for GuardedBytes {
    fn host_ptr(&mut self) -> *mut u8 {
        self.bytes
    }
    fn byte_len(&self) -> usize {
        self.len
    }
    fn writable(&self) -> bool {
        true
    }
}

/// The system's page size (at least 4 KiB).
fn page_size() -> usize {
    // SAFETY: `sysconf` only reads a system value.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096).max(4096)
}

/// The permissions `/proc/self/maps` lists for the mapping holding `address` (`rw-p`, `---p`).
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn protection_at(address: usize) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .find_map(|line| {
            let (range, rest) = line.split_once(' ')?;
            let (start, end) = range.split_once('-')?;
            let (start, end) = (
                usize::from_str_radix(start, 16).ok()?,
                usize::from_str_radix(end, 16).ok()?,
            );
            (start..end).contains(&address).then(|| rest[..4].to_string())
        })
        .unwrap_or_else(|| format!("no mapping holds {address:#x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn a_region_is_whole_writable_pages_between_its_guards() {
        let page = page_size();
        let region = GuardedRegion::map(page, page + 1, 3 * page).unwrap();
        let (start, end) = (region.start() as usize, region.end());
        assert_eq!(
            (start % page, end - start),
            (0, 2 * page),
            "the usable bytes round up to pages"
        );
        // SAFETY: the region's usable pages are its own.
        unsafe { std::slice::from_raw_parts_mut(region.start(), end - start) }.fill(7);
        assert_eq!(protection_at(start), "rw-p");
        assert_eq!(protection_at(start - 1), "---p");
        assert_eq!(protection_at(start - page), "---p");
        assert_eq!(protection_at(end), "---p");
        assert_eq!(protection_at(end + 3 * page - 1), "---p");
        let error = GuardedRegion::map(usize::MAX, 1, 1).err().expect("refused");
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
    }

    #[test]
    fn the_bytes_are_zeroed_writable_and_end_on_a_guard() {
        for len in [0, 1, 63, 64, 4096, 5000] {
            let mut guarded = GuardedBytes::new(len).unwrap();
            let ptr = guarded.host_ptr();
            assert_eq!(ptr as usize % HOST_ALIGNMENT, 0, "{len}");
            // SAFETY: `ptr` is valid for `len` bytes owned by `guarded`.
            let bytes = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
            assert!(bytes.iter().all(|&b| b == 0));
            bytes.fill(7);
            let end = ptr as usize + len.next_multiple_of(HOST_ALIGNMENT);
            assert_eq!(end % page_size(), 0, "{len}: the bytes end on a page boundary");
            #[cfg(target_os = "linux")]
            {
                assert_eq!(protection_at(end), "---p", "{len}: the page after the bytes");
                assert_eq!(
                    protection_at(end + GUARD_AFTER - 1),
                    "---p",
                    "{len}: the guard's last byte"
                );
                assert_eq!(protection_at(end - 1), "rw-p", "{len}: the last byte");
                let aligned = len.next_multiple_of(HOST_ALIGNMENT);
                let body_start = ptr as usize + aligned - aligned.max(1).next_multiple_of(page_size());
                assert_eq!(protection_at(body_start), "rw-p", "{len}: the first page");
                assert_eq!(protection_at(body_start - 1), "---p", "{len}: the page before");
            }
        }
        let copy = GuardedBytes::copy_of(&[1, 2, 3]).unwrap();
        assert_eq!(copy.byte_len(), 3);
        // SAFETY: three bytes were copied in.
        assert_eq!(unsafe { std::slice::from_raw_parts(copy.bytes, 3) }, [1, 2, 3]);
    }
}
