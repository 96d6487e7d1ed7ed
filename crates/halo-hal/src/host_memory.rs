//! Host memory that devices address through raw pointers: aligned blocks and imported bytes.
//!
//! Kernels and transfers read and write this memory through pointers at any time while work is in
//! flight, so it never hands out Rust references; every access is a raw copy in [`crate::Buffer`].

use crate::buffer::Allocation;
use crate::memory::MemoryType;
use crate::small_blocks::SmallBlock;
use crate::{Error, Result};
use std::any::Any;
use std::ptr::NonNull;

/// Alignment of every block: a cache line, which CPU kernels' vector loads want.
pub const HOST_ALIGNMENT: usize = 64;

/// Blocks from this size up are mapped from the operating system each on its own: fresh mapped
/// pages are zero without being written, so pages a program never touches (a transient slab's
/// slack, a result's unused tail) cost no memory. Smaller blocks come from a pool of size classes
/// (outside the Rust heap, so that a kernel writing past one cannot reach halo's own objects),
/// which reuses them without a system call or fresh page faults.
pub const MAPPED_FROM_BYTES: usize = 1 << 20;

/// Maps `bytes` of fresh zero pages, asking Linux to back them with transparent huge pages
/// where it can.
///
/// Activations and weights are read in long strides (an im2col gather, a matmul's panels), where
/// 4 KiB pages cost a TLB miss every few rows; most distributions enable huge pages only for
/// memory that asks (`transparent_hugepage=madvise`). Paired whole-process runs of
/// `benchmark-module`, with against without: wall 0.98x densenet121, 0.95x mobilenet_v2 and
/// resnet50, squeezenet unchanged, peak RSS unchanged or lower. The advice is a hint: where it is
/// refused the pages stay small. A module's own bytes stay small instead ([`keep_small_pages`]).
///
/// # Errors
/// The operating system's error when the memory cannot be mapped.
pub fn map_anonymous(bytes: usize) -> std::io::Result<memmap2::MmapMut> {
    let map = memmap2::MmapMut::map_anon(bytes)?;
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    Ok(map)
}

/// Maps `bytes` of fresh zero pages that stay 4 KiB pages ([`keep_small_pages`]), faulted in at
/// once, for constants that kernels read in place (a module's weights, read whole into memory).
///
/// Small pages cost a load more faults than huge ones: a 100 MB ResNet-50 preloaded and run once
/// took 0.13 s against 0.095 s (whole `run-module` processes, local-task), against 0.146 s
/// without faulting the pages in at once. A call that reads its weights in place gains that back
/// in a few calls.
///
/// # Errors
/// The operating system's error when the memory cannot be mapped.
pub fn map_anonymous_small_pages(bytes: usize) -> std::io::Result<memmap2::MmapMut> {
    let map = memmap2::MmapMut::map_anon(bytes)?;
    #[cfg(target_os = "linux")]
    {
        let _ = map.advise(memmap2::Advice::NoHugePage);
        let _ = map.advise(memmap2::Advice::PopulateWrite);
    }
    Ok(map)
}

/// Asks Linux to map `map` (a module file) with 4 KiB pages only, for constants that kernels read
/// in place.
///
/// A kernel that reads a weight matrix in place, in its source layout, walks it a row at a time,
/// one 4 KiB page apart for a 1024-wide f32 matrix. Mapped with huge pages, such rows ran a
/// batch-1 MLP (`build-benchmark-models mlp`, IREE's default flags for this AVX-512 host) 1.8 to
/// 2.6 times slower on this project's machines (AMD EPYC): local-sync 4.7-6.7 ms a call against
/// 2.5-2.7 ms with 4 KiB pages, local-task 3.6-3.8 against 1.4 ms; IREE's runtime, which keeps
/// constants in ordinary heap pages, 2.3-2.6 and 1.35-1.6 ms. It is the mapping that counts, not
/// the memory: the same physically contiguous page-cache folios, mapped with 4 KiB entries, run at
/// full speed. Linux maps a file's large folios (a module written in one piece) with huge pages
/// where it can (`FilePmdMapped` in smaps), and anonymous memory gets them under
/// `transparent_hugepage=always`; the advice keeps both small. Where it is refused the pages are
/// whatever the system gives.
pub fn keep_small_pages(map: &memmap2::Mmap) {
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::NoHugePage);
    #[cfg(not(target_os = "linux"))]
    let _ = map;
}

/// Bytes whose owner lends them to a buffer until the buffer is dropped (`import_host`).
pub trait HostBytes: Send + Sync + 'static {
    /// Address of byte 0, taken once at import; must stay valid and unmoved while `self` lives.
    fn host_ptr(&mut self) -> *mut u8;
    /// Number of bytes.
    fn byte_len(&self) -> usize;
    /// Whether the owner allows writes through the pointer.
    fn writable(&self) -> bool;
}

impl HostBytes for Vec<u8> {
    fn host_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn byte_len(&self) -> usize {
        self.len()
    }
    fn writable(&self) -> bool {
        true
    }
}

enum Storage {
    Small(#[allow(dead_code, reason = "kept until the allocation drops")] SmallBlock),
    Mapped(#[allow(dead_code, reason = "kept alive for the pointer")] memmap2::MmapMut),
    Imported(#[allow(dead_code, reason = "kept alive for the pointer")] Box<dyn HostBytes>),
}

/// A host allocation: zeroed aligned memory, or imported bytes kept alive by their owner.
pub struct HostAllocation {
    ptr: NonNull<u8>,
    size: u64,
    memory_type: MemoryType,
    storage: Storage,
    /// Driver state that lives and dies with the memory (a simulated device's address range).
    tag: Option<Box<dyn Any + Send + Sync>>,
}

// SAFETY: the allocation is only a pointer to memory it owns (or whose owner is `Send + Sync`);
// every access goes through raw copies whose synchronization is the HAL's contract (semaphores).
unsafe impl Send for HostAllocation {}
// SAFETY: as above; no interior state besides the pointed-to bytes.
unsafe impl Sync for HostAllocation {}

impl HostAllocation {
    /// Allocates `size` zeroed bytes aligned to [`HOST_ALIGNMENT`] (at least 1 byte is reserved):
    /// from the pool of small blocks, or mapped from [`MAPPED_FROM_BYTES`] up.
    ///
    /// # Errors
    /// `ResourceExhausted` when the size is not representable or the memory is exhausted.
    pub fn new(size: u64, memory_type: MemoryType) -> Result<Self> {
        let exhausted = || Error::resource_exhausted(format!("cannot allocate {size} bytes of host memory"));
        let bytes = usize::try_from(size).map_err(|_| exhausted())?.max(1);
        let (ptr, storage) = if bytes >= MAPPED_FROM_BYTES {
            // Page-aligned, so also HOST_ALIGNMENT-aligned.
            let mut map = map_anonymous(bytes).map_err(|_| exhausted())?;
            (
                NonNull::new(map.as_mut_ptr()).ok_or_else(exhausted)?,
                Storage::Mapped(map),
            )
        } else {
            let block = SmallBlock::take(bytes)?;
            (block.ptr(), Storage::Small(block))
        };
        Ok(HostAllocation {
            ptr,
            size,
            memory_type,
            storage,
            tag: None,
        })
    }

    /// Wraps bytes owned elsewhere; they are released when the allocation drops.
    pub fn import(mut bytes: Box<dyn HostBytes>, memory_type: MemoryType) -> Self {
        let size = bytes.byte_len() as u64;
        let ptr = NonNull::new(bytes.host_ptr()).unwrap_or(NonNull::dangling());
        HostAllocation {
            ptr,
            size,
            memory_type,
            storage: Storage::Imported(bytes),
            tag: None,
        }
    }

    /// The same allocation carrying `tag`, which is dropped with it: how a driver that keeps its
    /// device memory in host memory ties its own bookkeeping to a buffer's lifetime.
    pub fn with_tag(mut self, tag: Box<dyn Any + Send + Sync>) -> Self {
        self.tag = Some(tag);
        self
    }

    /// The tag given by [`HostAllocation::with_tag`].
    pub fn tag(&self) -> Option<&(dyn Any + Send + Sync)> {
        self.tag.as_deref()
    }

    /// Whether writes through the pointer are allowed.
    pub fn writable(&self) -> bool {
        match &self.storage {
            Storage::Small(_) | Storage::Mapped(_) => true,
            Storage::Imported(bytes) => bytes.writable(),
        }
    }
}

// SAFETY: the pointer addresses this allocation's own block or mapping of `size` bytes,
// which it owns until it drops and never moves or resizes.
unsafe impl Allocation for HostAllocation {
    fn size(&self) -> u64 {
        self.size
    }
    fn memory_type(&self) -> MemoryType {
        self.memory_type
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        Some(self.ptr)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `length` zeroed bytes, or `ResourceExhausted` naming `what` where `vec![0; length]` would abort
/// the process: such lengths come from programs, flags and files.
///
/// Stable Rust has no fallible zeroed vector. Asking for the same size fallibly first, then taking
/// it zeroed, keeps the allocator's zeroed path: fresh pages stay untouched until used, which
/// filling a reserved vector with zeros would not.
pub fn zeroed_vec(length: usize, what: &str) -> Result<Vec<u8>> {
    let mut probe = Vec::<u8>::new();
    probe
        .try_reserve_exact(length)
        .map_err(|_| Error::resource_exhausted(format!("cannot allocate {length} bytes for {what}")))?;
    drop(probe);
    Ok(vec![0; length])
}

/// A copy of `bytes`, or `ResourceExhausted` naming `what` where `to_vec` would abort.
pub fn copied_vec(bytes: &[u8], what: &str) -> Result<Vec<u8>> {
    let mut copy = Vec::new();
    copy.try_reserve_exact(bytes.len())
        .map_err(|_| Error::resource_exhausted(format!("cannot allocate {} bytes for {what}", bytes.len())))?;
    copy.extend_from_slice(bytes);
    Ok(copy)
}

/// Copies `len` bytes between host addresses that may overlap.
///
/// # Safety
/// Both ranges must be valid for `len` bytes.
pub(crate) unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller guarantees both ranges; `copy` tolerates overlap.
    unsafe { std::ptr::copy(src, dst, len) }
}

/// Repeats `pattern` over `len` bytes at `dst` (`len` is a multiple of the pattern length).
///
/// # Safety
/// `dst` must be valid for `len` bytes of writes.
pub(crate) unsafe fn fill_bytes(dst: *mut u8, len: usize, pattern: &[u8]) {
    if pattern.iter().all(|b| *b == pattern[0]) {
        // SAFETY: the caller guarantees the range.
        unsafe { std::ptr::write_bytes(dst, pattern[0], len) };
        return;
    }
    // The pattern is laid once, the filled prefix doubled until it is a cache-resident block,
    // then the block copied on: a few large copies instead of one per pattern (a -inf padding
    // fill before max pooling took a call of `memcpy` for every 4 bytes).
    const BLOCK: usize = 4096;
    let mut block = pattern.len().min(len);
    // SAFETY: `block <= len`, inside the caller's range; the pattern is a distinct slice.
    unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), dst, block) };
    while block < BLOCK.min(len) {
        let more = block.min(len - block);
        // SAFETY: `[0, block)` and `[block, block + more)` are disjoint and inside the range.
        unsafe { std::ptr::copy_nonoverlapping(dst, dst.add(block), more) };
        block += more;
    }
    // `block` is the pattern length times a power of two, so every copy starts in phase.
    let mut filled = block;
    while filled < len {
        let more = block.min(len - filled);
        // SAFETY: `[0, block)` precedes `filled`, so the two ranges are disjoint and inside.
        unsafe { std::ptr::copy_nonoverlapping(dst, dst.add(filled), more) };
        filled += more;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The allocation's bytes, read through its pointer.
    fn bytes(allocation: &HostAllocation) -> &[u8] {
        // SAFETY: the allocation owns `size` bytes at `ptr` and nothing else touches them here.
        unsafe { std::slice::from_raw_parts(allocation.ptr.as_ptr(), allocation.size as usize) }
    }

    #[test]
    fn blocks_are_zeroed_aligned_and_writable_pooled_and_mapped() {
        for (size, mapped) in [
            (100, false),
            (MAPPED_FROM_BYTES - 1, false),
            (MAPPED_FROM_BYTES, true),
            (3 << 20, true),
        ] {
            let allocation = HostAllocation::new(size as u64, MemoryType::HOST_LOCAL).unwrap();
            assert_eq!(matches!(allocation.storage, Storage::Mapped(_)), mapped, "{size} bytes");
            assert_eq!(allocation.ptr.as_ptr() as usize % HOST_ALIGNMENT, 0, "{size} bytes");
            assert!(allocation.writable());
            assert!(bytes(&allocation).iter().all(|&b| b == 0), "{size} bytes");
            // SAFETY: the last byte is inside the allocation.
            unsafe { allocation.ptr.as_ptr().add(size - 1).write(7) };
            assert_eq!(bytes(&allocation)[size - 1], 7);
        }
    }

    #[test]
    fn an_unmappable_size_is_exhaustion_not_an_abort() {
        let error = HostAllocation::new(1 << 62, MemoryType::HOST_LOCAL)
            .err()
            .expect("refused");
        assert_eq!(error.code(), crate::StatusCode::ResourceExhausted, "{error}");
    }

    /// The `VmFlags` line of the mapping holding `address`, from `/proc/self/smaps`.
    #[cfg(target_os = "linux")]
    fn vm_flags_at(address: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().and_then(|field| field.split_once('-'));
            if let Some((start, end)) =
                range.and_then(|(s, e)| Some((usize::from_str_radix(s, 16).ok()?, usize::from_str_radix(e, 16).ok()?)))
            {
                inside = (start..end).contains(&address);
            } else if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return flags.to_string();
                }
            }
        }
        panic!("no mapping holds {address:#x}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn mapped_blocks_ask_for_huge_pages_and_in_place_constants_for_small_ones() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            eprintln!("skipped mapped_blocks_ask_for_huge_pages_and_in_place_constants_for_small_ones: this kernel has no transparent huge pages");
            return;
        }
        let allocation = HostAllocation::new(4 << 20, MemoryType::HOST_LOCAL).unwrap();
        let flags = vm_flags_at(allocation.ptr.as_ptr() as usize);
        assert!(flags.split_whitespace().any(|flag| flag == "hg"), "VmFlags:{flags}");
        let constants = map_anonymous_small_pages(3 << 20).unwrap();
        let flags = vm_flags_at(constants.as_ptr() as usize);
        assert!(flags.split_whitespace().any(|flag| flag == "nh"), "VmFlags:{flags}");

        let path = std::env::temp_dir().join(format!("halo-small-pages-{}", std::process::id()));
        std::fs::write(&path, vec![1u8; 3 << 20]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: the file is this test's own, and nothing changes it while it is mapped.
        let module_file = unsafe { memmap2::Mmap::map(&file) }.unwrap();
        std::fs::remove_file(&path).unwrap();
        keep_small_pages(&module_file);
        let flags = vm_flags_at(module_file.as_ptr() as usize);
        assert!(flags.split_whitespace().any(|flag| flag == "nh"), "VmFlags:{flags}");
    }

    #[test]
    fn patterned_fills_repeat_the_pattern_exactly_over_the_range() {
        for pattern in [&[1u8, 2][..], &[0, 0, 0x80, 0xff], &[9, 9, 9, 9]] {
            for len in [0usize, 4, 8, 4092, 4096, 4100, 12_288, 100_004] {
                let mut bytes = vec![0xaau8; len + 8];
                // SAFETY: `bytes` holds `len` bytes after its first 4.
                unsafe { fill_bytes(bytes.as_mut_ptr().add(4), len, pattern) };
                let expected: Vec<u8> = (0..len).map(|i| pattern[i % pattern.len()]).collect();
                assert!(bytes[4..4 + len] == expected[..], "{pattern:?} over {len} bytes");
                assert!(
                    bytes[..4].iter().chain(&bytes[4 + len..]).all(|&b| b == 0xaa),
                    "{pattern:?} over {len} bytes spilled"
                );
            }
        }
    }
}
