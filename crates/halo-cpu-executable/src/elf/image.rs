//! The memory an embedded ELF lives in: reserved read-write, filled and
//! relocated through a safe byte slice, then protected page by page. Every
//! `mmap`/`mprotect`/`munmap` of the loader is in this file.
//!
//! On Apple silicon this is also the platform's rule that a page is writable or executable,
//! never both at once ([`protect_error`] says what the hardened runtime adds). On AArch64 the
//! instruction cache is made coherent with the written code once its pages are executable.
//!
//! The two types make the order a type rule: a [`WritableImage`] hands out
//! `&mut [u8]`; [`WritableImage::protect`] consumes it, so no slice can outlive
//! the moment its pages become read-only or executable.

use std::ptr::NonNull;

use halo_hal::{Error, Result};

/// Access rights of one page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Protection {
    pub read: bool,
    pub write: bool,
    pub execute: bool,
}

impl Protection {
    /// Readable only.
    pub const READ_ONLY: Protection = Protection {
        read: true,
        write: false,
        execute: false,
    };

    fn to_prot(self) -> libc::c_int {
        let mut prot = libc::PROT_NONE;
        if self.read {
            prot |= libc::PROT_READ;
        }
        if self.write {
            prot |= libc::PROT_WRITE;
        }
        if self.execute {
            prot |= libc::PROT_EXEC;
        }
        prot
    }
}

/// The host's page size, the granularity of [`WritableImage::protect`].
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf only reads a configuration value.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|s| s.is_power_of_two())
        .unwrap_or(4096)
}

/// An owned anonymous mapping; unmapped on drop.
#[derive(Debug)]
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; after `protect` it
// is only read or executed, which any thread may do.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared access never writes through the mapping.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping this value created and still
        // owns; nothing borrowed from it outlives `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// Freshly reserved, zero-filled, read-write memory for an image being loaded.
#[derive(Debug)]
pub(crate) struct WritableImage {
    map: Mapping,
}

impl WritableImage {
    /// Reserves `len` bytes (a multiple of the page size) whose start is aligned to `align`.
    ///
    /// # Errors
    /// `ResourceExhausted` when the kernel refuses the mapping.
    pub fn reserve(len: usize, align: usize) -> Result<Self> {
        let page = page_size();
        debug_assert!(len > 0 && len.is_multiple_of(page) && align.is_power_of_two());
        let align = align.max(page);
        let extra = align - page;
        let total = len
            .checked_add(extra)
            .ok_or_else(|| Error::resource_exhausted(format!("image of {len} bytes too large")))?;
        // SAFETY: an anonymous private mapping at a kernel-chosen address does
        // not alias any existing memory.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(Error::resource_exhausted(format!(
                "cannot reserve {total} bytes for the ELF image: {}",
                std::io::Error::last_os_error()
            )));
        }
        let start = raw as usize;
        let aligned = (start + align - 1) & !(align - 1);
        let head = aligned - start;
        let tail = extra - head;
        // Give back the slack used only to reach the alignment; both pieces
        // are whole pages because `start`, `align` and `page` are page multiples.
        // SAFETY: both ranges lie inside the mapping just created and nothing
        // refers to them.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((aligned + len) as *mut libc::c_void, tail);
            }
        }
        let ptr =
            NonNull::new(aligned as *mut u8).ok_or_else(|| Error::internal("mmap returned a null image address"))?;
        Ok(WritableImage {
            map: Mapping { ptr, len },
        })
    }

    /// Address of the first byte.
    pub fn base(&self) -> usize {
        self.map.ptr.as_ptr() as usize
    }

    /// The whole image as bytes, for copying segments in and patching relocations.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is `len` bytes of readable and writable memory
        // owned by `self`, and the returned borrow of `self` keeps it exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.map.ptr.as_ptr(), self.map.len) }
    }

    /// Applies one protection per page (`pages.len()` must equal len / page size).
    ///
    /// # Errors
    /// `Internal` when `mprotect` fails; the memory is then released.
    pub fn protect(self, pages: &[Protection]) -> Result<Image> {
        let page = page_size();
        debug_assert_eq!(pages.len() * page, self.map.len);
        let mut start = 0;
        while start < pages.len() {
            let run = pages[start..].iter().take_while(|p| **p == pages[start]).count();
            let addr = self.base() + start * page;
            // SAFETY: the range is whole pages inside the mapping owned by
            // `self`; `self` is consumed, so no `&mut [u8]` into it is alive.
            let rc = unsafe { libc::mprotect(addr as *mut libc::c_void, run * page, pages[start].to_prot()) };
            if rc != 0 {
                return Err(protect_error(start..start + run, pages[start]));
            }
            if pages[start].execute {
                crate::arch::host::flush_instruction_cache(addr, run * page);
            }
            start += run;
        }
        Ok(Image { _map: self.map })
    }
}

/// Why protecting `pages` as `protection` failed. On macOS the hardened runtime refuses to make
/// written pages executable unless the process is entitled to it
/// (`com.apple.security.cs.allow-unsigned-executable-memory`): halo, like IREE's runtime, writes
/// an image and then turns its code pages read-execute, which Apple silicon allows (a page is
/// never writable and executable at once) and needs no `MAP_JIT`.
fn protect_error(pages: std::ops::Range<usize>, protection: Protection) -> Error {
    let os_error = std::io::Error::last_os_error();
    let hint = if cfg!(target_os = "macos") && protection.execute {
        "; a process signed with macOS's hardened runtime needs the \
         com.apple.security.cs.allow-unsigned-executable-memory entitlement to run embedded-elf \
         code (or load system-dylib executables, which dyld maps, instead)"
    } else {
        ""
    };
    Error::internal(format!(
        "mprotect of image pages {}..{} to {protection:?} failed: {os_error}{hint}",
        pages.start, pages.end
    ))
}

/// A loaded image after protection: it only keeps the memory alive.
#[derive(Debug)]
pub(crate) struct Image {
    _map: Mapping,
}
