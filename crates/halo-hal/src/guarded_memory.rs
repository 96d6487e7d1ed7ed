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

/// `len` zeroed, writable bytes whose end touches an inaccessible region (up to the alignment of
/// [`HOST_ALIGNMENT`]: the last `len` rounded up to it end on a guard page).
pub struct GuardedBytes {
    /// The whole reservation: guard, accessible pages, guard.
    reservation: *mut u8,
    reservation_len: usize,
    bytes: *mut u8,
    len: usize,
}

// SAFETY: the type owns its mapping outright; the pointers are only handed out through
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
        let exhausted = |what: &str| {
            Error::resource_exhausted(format!(
                "mapping {len} bytes between guard pages: {what}: {}",
                std::io::Error::last_os_error()
            ))
        };
        let page = page_size();
        let aligned = len
            .checked_next_multiple_of(HOST_ALIGNMENT)
            .ok_or_else(|| exhausted("size"))?;
        let body = aligned
            .max(1)
            .checked_next_multiple_of(page)
            .ok_or_else(|| exhausted("size"))?;
        let reservation_len = body
            .checked_add(GUARD_BEFORE + GUARD_AFTER)
            .ok_or_else(|| exhausted("size"))?;
        let reservation = reserve_address_space(reservation_len).ok_or_else(|| exhausted("reserving address space"))?;
        let guarded = GuardedBytes {
            reservation,
            reservation_len,
            // The body starts at `GUARD_BEFORE`; the bytes end where the body does.
            // SAFETY: both offsets lie inside the reservation just made.
            bytes: unsafe { reservation.add(GUARD_BEFORE + body - aligned) },
            len,
        };
        // SAFETY: the body pages lie inside the reservation, which `guarded` owns (and unmaps
        // if this fails).
        let opened = unsafe {
            libc::mprotect(
                reservation.add(GUARD_BEFORE).cast(),
                body,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if opened != 0 {
            return Err(exhausted("opening the pages"));
        }
        Ok(guarded)
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

impl Drop for GuardedBytes {
    fn drop(&mut self) {
        // SAFETY: the reservation was mapped by `new` with this length and is unmapped only here.
        unsafe { libc::munmap(self.reservation.cast(), self.reservation_len) };
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

/// `len` bytes of fresh, inaccessible address space (no memory committed) at an address the
/// kernel picks, for the caller to open parts of and unmap; `None` when it cannot be had (the
/// OS error is left in `errno`).
pub(crate) fn reserve_address_space(len: usize) -> Option<*mut u8> {
    // SAFETY: a fresh private anonymous mapping at an address the kernel picks; it aliases
    // nothing.
    let reservation = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (reservation != libc::MAP_FAILED).then_some(reservation.cast())
}

/// The system's page size (at least 4 KiB).
pub(crate) fn page_size() -> usize {
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
