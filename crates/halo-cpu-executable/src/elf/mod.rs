//! The loader for `embedded-elf-x86_64` and `embedded-elf-arm_64`: static-PIE shared objects that IREE
//! links without any library dependency, loaded here without the system loader.
//!
//! Steps, each in its own module: validate the headers ([`header`]), reserve one
//! region for all `PT_LOAD` segments and copy them in ([`image`]), read the
//! dynamic table and symbols ([`dynamic`]), apply relocations ([`relocate`]),
//! then protect each page by its segment's flags (write xor execute; RELRO
//! read-only). Every offset read from the file is bounds-checked; a bad file is
//! an error, never an out-of-bounds access. No code from the file runs here.

mod dynamic;
pub(crate) mod header;
pub(crate) mod image;
mod relocate;

use std::ops::Range;

use halo_hal::{Error, Result, ResultExt};
use object::elf;

use self::header::Segment;
use self::image::{Image, Protection, WritableImage};
use crate::arch::Arch;

/// The one machine this build loads code for (`EM_NONE` where halo has no CPU executables).
pub(crate) const HOST_MACHINE: u16 = match crate::arch::HOST {
    Some(arch) => arch.machine,
    None => elf::EM_NONE,
};

/// Images larger than this are refused: real kernels are a few MiB, and a
/// corrupt `p_memsz` must not reserve the address space.
const MAX_IMAGE_BYTES: u64 = 1 << 30;
/// Largest segment alignment honoured (larger would waste address space).
const MAX_SEGMENT_ALIGN: u64 = 1 << 20;

/// Where the image starts in the ELF's virtual address space, and how long it is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    /// Virtual address of the image's first byte.
    pub vaddr_min: u64,
    /// Image length in bytes.
    pub len: usize,
}

impl Layout {
    /// The image offsets of `[vaddr, vaddr + size)`, if it lies inside the image.
    pub fn range(&self, vaddr: u64, size: u64) -> Option<Range<usize>> {
        let start = vaddr.checked_sub(self.vaddr_min)?;
        let end = start.checked_add(size)?;
        (end <= self.len as u64).then_some(start as usize..end as usize)
    }

    /// The bytes of `[vaddr, vaddr + size)` in `image`, if it lies inside.
    pub fn slice<'a>(&self, image: &'a [u8], vaddr: u64, size: u64) -> Option<&'a [u8]> {
        image.get(self.range(vaddr, size)?)
    }
}

/// A loaded, relocated and protected embedded ELF.
///
/// Ownership: the mapping lives as long as this value; function and data
/// pointers into it are valid until it is dropped. Threading: immutable after
/// load, so any thread may call into it.
#[derive(Debug)]
pub(crate) struct ElfModule {
    _image: Image,
    /// Absolute address ranges of readable segments (exact, not page-rounded).
    readable: Vec<Range<usize>>,
    /// Absolute address ranges of executable segments.
    executable: Vec<Range<usize>>,
    /// Absolute address of `iree_hal_executable_library_query`.
    query: usize,
    /// Where the image's first byte is, in memory and in the file's virtual addresses.
    base: usize,
    vaddr_min: u64,
}

impl ElfModule {
    /// Loads `data` and finds the exported symbol `entry`.
    ///
    /// # Errors
    /// `InvalidArgument` for malformed files, `Incompatible` for other
    /// machines, `Unimplemented` for ELF features IREE never emits,
    /// `NotFound` when `entry` is missing; each message names the part at fault.
    pub fn load(data: &[u8], entry: &str) -> Result<Self> {
        let arch = crate::arch::HOST.ok_or_else(|| {
            Error::incompatible(format!(
                "halo has no CPU executables for {}",
                header::machine_name(HOST_MACHINE)
            ))
        })?;
        Self::load_for(arch, data, entry)
    }

    /// Loads `data`, an object for `arch`, and finds the exported symbol `entry`. Nothing of it
    /// runs here, so objects of any architecture load on any host (the loader's tests).
    ///
    /// # Errors
    /// As [`ElfModule::load`].
    pub(crate) fn load_for(arch: &Arch, data: &[u8], entry: &str) -> Result<Self> {
        let headers = header::parse(data, arch.machine)?;
        if let Some(index) = headers.tls {
            return Err(Error::unimplemented(format!(
                "program header {index} is PT_TLS; thread-local storage is not supported"
            )));
        }
        let page = image::page_size() as u64;
        let (layout, align) = layout(&headers.loads, page)?;
        let mut writable = WritableImage::reserve(layout.len, align as usize)?;
        let base = writable.base();
        let image = writable.bytes_mut();
        for s in &headers.loads {
            // Both ranges were validated: the file range by `header::parse`, the
            // memory range by `layout`.
            let dst = layout
                .range(s.vaddr, s.filesz)
                .ok_or_else(|| Error::internal(format!("segment {} outside its own layout", s.index)))?;
            image[dst].copy_from_slice(&data[s.offset as usize..(s.offset + s.filesz) as usize]);
        }

        let dynamic_range = headers
            .dynamic
            .ok_or_else(|| Error::invalid_argument("ELF has no PT_DYNAMIC program header"))?;
        let dynamic = dynamic::parse(image, &layout, dynamic_range)?;
        let symbols = dynamic::Symbols::new(image, &layout, &dynamic)?;
        if let Some(offset) = dynamic.needed {
            let name = symbols.string(offset).unwrap_or(b"?");
            return Err(Error::unimplemented(format!(
                "ELF needs shared library '{}' (DT_NEEDED); embedded ELFs must be self-contained",
                String::from_utf8_lossy(name)
            )));
        }
        symbols.check_self_contained()?;
        relocate::apply(arch, image, &layout, base, &headers.loads, &dynamic, &symbols)
            .context("applying ELF relocations")?;

        let (symbol_index, value) = symbols
            .lookup(entry)
            .ok_or_else(|| Error::not_found(format!("ELF does not export the symbol '{entry}'")))?;
        let absolute = |vaddr: u64| base + (vaddr - layout.vaddr_min) as usize;
        let query = headers
            .loads
            .iter()
            .filter(|s| s.flags & elf::PF_X != 0 && s.vaddr <= value && value < s.vaddr_end())
            .map(|_| absolute(value))
            .next()
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "symbol {symbol_index} '{entry}' has address {value:#x}, which is not in an \
                     executable segment"
                ))
            })?;

        let pages = protections(&headers, &layout, page)?;
        let protected = writable.protect(&pages)?;
        let ranges = |mask: u32| -> Vec<Range<usize>> {
            headers
                .loads
                .iter()
                .filter(|s| s.flags & mask != 0)
                .map(|s| absolute(s.vaddr)..absolute(s.vaddr_end()))
                .collect()
        };
        Ok(ElfModule {
            _image: protected,
            readable: ranges(elf::PF_R | elf::PF_W | elf::PF_X),
            executable: ranges(elf::PF_X),
            query,
            base,
            vaddr_min: layout.vaddr_min,
        })
    }

    /// Absolute address of the entry symbol passed to [`ElfModule::load`].
    pub fn entry_address(&self) -> usize {
        self.query
    }

    /// Address ranges that may be read.
    pub fn readable(&self) -> &[Range<usize>] {
        &self.readable
    }

    /// Address ranges that hold code.
    pub fn executable(&self) -> &[Range<usize>] {
        &self.executable
    }

    /// The file's virtual address (as a disassembler numbers it) of `address`, if that is code of
    /// this image.
    pub fn code_address(&self, address: usize) -> Option<u64> {
        let inside = self.executable.iter().any(|code| code.contains(&address));
        inside.then(|| (address - self.base) as u64 + self.vaddr_min)
    }
}

/// Chooses the image's start address and length from the `PT_LOAD` segments.
fn layout(loads: &[Segment], page: u64) -> Result<(Layout, u64)> {
    let align = loads.iter().map(|s| s.align).fold(page, u64::max);
    if align > MAX_SEGMENT_ALIGN {
        return Err(Error::unimplemented(format!(
            "a PT_LOAD segment asks for alignment {align:#x}; at most {MAX_SEGMENT_ALIGN:#x} \
             is supported"
        )));
    }
    let vaddr_min = loads.iter().map(|s| s.vaddr).min().unwrap_or(0) & !(align - 1);
    // `header::parse` keeps every end below 2^47, so rounding cannot overflow.
    let vaddr_max = loads
        .iter()
        .map(|s| s.vaddr_end())
        .max()
        .unwrap_or(0)
        .next_multiple_of(page);
    let len = vaddr_max - vaddr_min;
    if len > MAX_IMAGE_BYTES {
        return Err(Error::invalid_argument(format!(
            "PT_LOAD segments span {len:#x} bytes ({vaddr_min:#x}..{vaddr_max:#x}), more than the \
             {MAX_IMAGE_BYTES:#x}-byte limit"
        )));
    }
    Ok((
        Layout {
            vaddr_min,
            len: len as usize,
        },
        align,
    ))
}

/// One protection per image page from the segment flags, with RELRO made read-only.
fn protections(headers: &header::ElfHeaders, layout: &Layout, page: u64) -> Result<Vec<Protection>> {
    let page_count = (layout.len as u64 / page) as usize;
    let mut pages = vec![Protection::default(); page_count];
    let mut owner = vec![usize::MAX; page_count];
    for s in &headers.loads {
        let (w, x) = (s.flags & elf::PF_W != 0, s.flags & elf::PF_X != 0);
        if w && x {
            return Err(Error::permission_denied(format!(
                "PT_LOAD program header {} is both writable and executable",
                s.index
            )));
        }
        let first = ((s.vaddr - layout.vaddr_min) / page) as usize;
        let last = (s.vaddr_end() - layout.vaddr_min).div_ceil(page) as usize;
        for i in first..last {
            let p = &mut pages[i];
            p.read |= s.flags & (elf::PF_R | elf::PF_W | elf::PF_X) != 0;
            p.write |= w;
            p.execute |= x;
            if p.write && p.execute {
                return Err(Error::permission_denied(format!(
                    "PT_LOAD program headers {} and {} share the page at {:#x}, making it \
                     writable and executable",
                    owner[i],
                    s.index,
                    layout.vaddr_min + i as u64 * page
                )));
            }
            owner[i] = s.index;
        }
    }
    if let Some(relro) = headers.relro {
        // As glibc does: whole pages from the start, the partial last page stays writable.
        let start = relro.vaddr / page * page;
        let end = (relro.vaddr + relro.size) / page * page;
        if start < end {
            let range = layout.range(start, end - start).ok_or_else(|| {
                Error::invalid_argument(format!(
                    "PT_GNU_RELRO program header {}: {:#x}+{:#x} lies outside the loaded image",
                    relro.index, relro.vaddr, relro.size
                ))
            })?;
            for p in &mut pages[range.start / page as usize..range.end / page as usize] {
                p.write = false;
            }
        }
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use object::LittleEndian as LE;
    use proptest::prelude::*;

    use super::*;
    use crate::arch::{arm_64, x86_64, Relocation};

    const KERNELS: &[u8] = include_bytes!("../../tests/data/library_kernels.embedded-elf-x86_64.so");
    const ARM_64_KERNELS: &[u8] = include_bytes!("../../tests/data/library_kernels.embedded-elf-arm_64.so");
    const ARM_64_IMPORT: &[u8] = include_bytes!("../../tests/data/library_import.embedded-elf-arm_64.so");
    const QUERY: &str = "iree_hal_executable_library_query";
    const ARCHES: [(&Arch, &[u8]); 2] = [(&x86_64::ARCH, KERNELS), (&arm_64::ARCH, ARM_64_KERNELS)];

    /// The test object for the architecture this build runs.
    fn host_kernels() -> &'static [u8] {
        let host = crate::arch::HOST.expect("a host architecture with CPU executables");
        ARCHES
            .into_iter()
            .find(|(arch, _)| arch.machine == host.machine)
            .map(|(_, bytes)| bytes)
            .expect("a test object for the host")
    }

    /// Every `DT_RELA` entry of an object, as (file offset of the entry, r_offset, type, addend).
    fn rela_entries(bytes: &[u8]) -> Vec<(usize, u64, u32, i64)> {
        use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
        let file = ElfFile64::<LE>::parse(bytes).expect("a well-formed object");
        let sections = file.elf_header().sections(LE, bytes).expect("section headers");
        let rela = sections
            .iter()
            .find(|s| s.sh_type(LE) == elf::SHT_RELA)
            .expect("a .rela.dyn section");
        let start = rela.sh_offset(LE) as usize;
        let entries: &[object::elf::Rela64<LE>] = rela.data_as_array(LE, bytes).expect("relocations");
        entries
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let info = r.r_info.get(LE);
                (
                    start + i * 24,
                    r.r_offset.get(LE),
                    (info & 0xffff_ffff) as u32,
                    r.r_addend.get(LE),
                )
            })
            .collect()
    }

    #[test]
    fn objects_of_each_architecture_load_and_are_relocated_on_any_host() {
        for (arch, bytes) in ARCHES {
            let module = ElfModule::load_for(arch, bytes, QUERY).unwrap_or_else(|e| panic!("{}: {e}", arch.name));
            assert!(module.executable().iter().any(|r| r.contains(&module.entry_address())));
            let relative = rela_entries(bytes);
            assert!(!relative.is_empty(), "{}", arch.name);
            for (_, offset, r_type, addend) in relative {
                assert_eq!(
                    (arch.relocation)(r_type),
                    Some(Relocation::BiasPlusAddend),
                    "{}",
                    arch.name
                );
                let target = module.base + (offset - module.vaddr_min) as usize;
                // SAFETY: the target lies in a loaded, readable segment of the live image (the
                // loader checked it before writing there).
                let written = unsafe { (target as *const u64).read_unaligned() };
                let expected = (module.base as u64)
                    .wrapping_sub(module.vaddr_min)
                    .wrapping_add(addend as u64);
                assert_eq!(written, expected, "{}: relocation at {offset:#x}", arch.name);
            }
        }
    }

    #[test]
    fn an_object_of_the_other_architecture_is_incompatible_naming_both() {
        let err = ElfModule::load_for(&arm_64::ARCH, KERNELS, QUERY).unwrap_err();
        assert_eq!(err.code(), halo_hal::StatusCode::Incompatible);
        assert!(
            err.message().contains("x86_64") && err.message().contains("arm_64"),
            "{err}"
        );
        let err = ElfModule::load_for(&x86_64::ARCH, ARM_64_IMPORT, QUERY).unwrap_err();
        assert_eq!(err.code(), halo_hal::StatusCode::Incompatible);
    }

    #[test]
    fn an_unsupported_arm_64_relocation_is_an_error_naming_its_type_and_offset() {
        let (entry, offset, ..) = rela_entries(ARM_64_KERNELS)[0];
        for (r_type, name) in [
            (elf::R_AARCH64_ABS32, "R_AARCH64_ABS32"),
            (elf::R_AARCH64_TLSDESC, "R_AARCH64_TLSDESC"),
        ] {
            let mut bytes = ARM_64_KERNELS.to_vec();
            bytes[entry + 8..entry + 12].copy_from_slice(&r_type.to_le_bytes());
            let err = ElfModule::load_for(&arm_64::ARCH, &bytes, QUERY).unwrap_err();
            assert_eq!(err.code(), halo_hal::StatusCode::Unimplemented, "{err}");
            let said = format!("{err:#}");
            assert!(said.contains(name) && said.contains(&format!("{offset:#x}")), "{said}");
        }
    }

    #[test]
    fn arm_64_symbol_relocations_add_their_addend() {
        assert_eq!(
            (arm_64::ARCH.relocation)(elf::R_AARCH64_GLOB_DAT),
            Some(Relocation::SymbolPlusAddend)
        );
        assert_eq!(
            (x86_64::ARCH.relocation)(elf::R_X86_64_GLOB_DAT),
            Some(Relocation::Symbol)
        );
        assert_eq!((arm_64::ARCH.relocation)(elf::R_X86_64_GLOB_DAT), None);
    }

    #[test]
    fn real_executable_loads_with_query_in_code() {
        let module = ElfModule::load(host_kernels(), QUERY).unwrap();
        let query = module.entry_address();
        assert!(module.executable().iter().any(|r| r.contains(&query)));
        assert!(module.readable().iter().any(|r| r.contains(&query)));
        assert_eq!(module.executable().len(), 1);
    }

    #[test]
    fn missing_symbol_is_not_found() {
        let err = ElfModule::load(host_kernels(), "no_such_symbol").unwrap_err();
        assert_eq!(err.code(), halo_hal::StatusCode::NotFound);
        assert!(err.message().contains("'no_such_symbol'"), "{err}");
    }

    #[test]
    fn layout_ranges_reject_overflow_and_out_of_bounds() {
        let layout = Layout {
            vaddr_min: 0x1000,
            len: 0x2000,
        };
        assert_eq!(layout.range(0x1000, 0x10), Some(0..0x10));
        assert_eq!(layout.range(0x2ff0, 0x10), Some(0x1ff0..0x2000));
        assert_eq!(layout.range(0x2ff1, 0x10), None);
        assert_eq!(layout.range(0xfff, 1), None);
        assert_eq!(layout.range(u64::MAX, 2), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// No code runs while loading an ELF, so any corruption anywhere must
        /// come back as Ok or Err, never as a panic or a fault.
        #[test]
        fn corrupted_bytes_never_crash_the_loader(
            flips in proptest::collection::vec((0..KERNELS.len(), any::<u8>()), 1..8),
        ) {
            for (arch, original) in ARCHES {
                let mut bytes = original.to_vec();
                for &(at, value) in &flips {
                    let len = bytes.len();
                    bytes[at % len] = value;
                }
                let _ = ElfModule::load_for(arch, &bytes, QUERY);
            }
        }

        /// Headers that point anywhere: random 64-bit values in header fields.
        #[test]
        fn random_header_words_never_crash_the_loader(
            words in proptest::collection::vec((0..0x200usize, any::<u64>()), 1..4),
        ) {
            for (arch, original) in ARCHES {
                let mut bytes = original.to_vec();
                for &(at, value) in &words {
                    let at = at.min(bytes.len() - 8);
                    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
                }
                let _ = ElfModule::load_for(arch, &bytes, QUERY);
            }
        }
    }
}
