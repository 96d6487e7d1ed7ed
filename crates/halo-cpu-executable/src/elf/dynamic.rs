//! The `PT_DYNAMIC` table and the dynamic symbol table, read from the image
//! after segments are copied in (their addresses are virtual addresses).

use halo_hal::{Error, Result};
use object::elf::{self, Dyn64, Sym64};
use object::LittleEndian as LE;

use super::header::VaddrRange;
use super::Layout;

/// `DT_RELR` (packed relative relocations); newer than the `object` constants.
const DT_RELR: u64 = 36;

/// The dynamic entries the loader acts on, as virtual addresses and sizes.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Dynamic {
    pub strtab: Option<u64>,
    pub strsz: Option<u64>,
    pub symtab: Option<u64>,
    pub hash: Option<u64>,
    pub rela: Option<u64>,
    pub relasz: u64,
    pub jmprel: Option<u64>,
    pub pltrelsz: u64,
    /// Offsets into the string table of `DT_NEEDED` entries.
    pub needed: Option<u64>,
}

const DYN_SIZE: u64 = std::mem::size_of::<Dyn64<LE>>() as u64;
const SYM_SIZE: u64 = std::mem::size_of::<Sym64<LE>>() as u64;
pub(crate) const RELA_SIZE: u64 = std::mem::size_of::<elf::Rela64<LE>>() as u64;

/// Reads the dynamic table at `range` and rejects entries this loader cannot honour.
///
/// # Errors
/// `InvalidArgument` when the table lies outside the image or an entry is
/// inconsistent; `Unimplemented` for features embedded ELFs never use
/// (REL/RELR relocations, text relocations, initializers).
pub(crate) fn parse(image: &[u8], layout: &Layout, range: VaddrRange) -> Result<Dynamic> {
    let bytes = layout.slice(image, range.vaddr, range.size).ok_or_else(|| {
        Error::invalid_argument(format!(
            "PT_DYNAMIC program header {}: table {:#x}+{:#x} lies outside the loaded image",
            range.index, range.vaddr, range.size
        ))
    })?;
    let count = (range.size / DYN_SIZE) as usize;
    let (entries, _) = object::pod::slice_from_bytes::<Dyn64<LE>>(bytes, count)
        .map_err(|_| Error::internal("dynamic table shorter than its entry count"))?;
    let mut dynamic = Dynamic::default();
    for (i, entry) in entries.iter().enumerate() {
        let tag = entry.d_tag.get(LE);
        let value = entry.d_val.get(LE);
        let unsupported = |what: &str| {
            Err(Error::unimplemented(format!(
                "dynamic entry {i} ({what}) is not supported by the embedded ELF loader"
            )))
        };
        match tag {
            t if t == u64::from(elf::DT_NULL) => break,
            t if t == u64::from(elf::DT_STRTAB) => dynamic.strtab = Some(value),
            t if t == u64::from(elf::DT_STRSZ) => dynamic.strsz = Some(value),
            t if t == u64::from(elf::DT_SYMTAB) => dynamic.symtab = Some(value),
            t if t == u64::from(elf::DT_HASH) => dynamic.hash = Some(value),
            t if t == u64::from(elf::DT_RELA) => dynamic.rela = Some(value),
            t if t == u64::from(elf::DT_RELASZ) => dynamic.relasz = value,
            t if t == u64::from(elf::DT_JMPREL) => dynamic.jmprel = Some(value),
            t if t == u64::from(elf::DT_PLTRELSZ) => dynamic.pltrelsz = value,
            t if t == u64::from(elf::DT_NEEDED) => {
                dynamic.needed.get_or_insert(value);
            }
            t if t == u64::from(elf::DT_SYMENT) && value != SYM_SIZE => {
                return Err(Error::invalid_argument(format!(
                    "dynamic entry {i}: DT_SYMENT {value} is not the ELF64 symbol size {SYM_SIZE}"
                )));
            }
            t if t == u64::from(elf::DT_RELAENT) && value != RELA_SIZE => {
                return Err(Error::invalid_argument(format!(
                    "dynamic entry {i}: DT_RELAENT {value} is not the ELF64 RELA size {RELA_SIZE}"
                )));
            }
            t if t == u64::from(elf::DT_PLTREL) && value != u64::from(elf::DT_RELA) => {
                return unsupported("DT_PLTREL other than DT_RELA");
            }
            t if t == u64::from(elf::DT_REL) || t == u64::from(elf::DT_RELSZ) => {
                return unsupported("DT_REL relocations");
            }
            DT_RELR => return unsupported("DT_RELR packed relocations"),
            t if t == u64::from(elf::DT_TEXTREL) => return unsupported("DT_TEXTREL"),
            t if t == u64::from(elf::DT_FLAGS) && value & u64::from(elf::DF_TEXTREL) != 0 => {
                return unsupported("DF_TEXTREL");
            }
            t if t == u64::from(elf::DT_INIT)
                || t == u64::from(elf::DT_INIT_ARRAY)
                || t == u64::from(elf::DT_PREINIT_ARRAY) =>
            {
                return unsupported("initializer functions");
            }
            _ => {}
        }
    }
    Ok(dynamic)
}

/// The dynamic symbol table and its string table, copied out of the image so
/// relocation can patch the image while consulting them.
#[derive(Debug, Clone)]
pub(crate) struct Symbols {
    pub syms: Vec<Sym64<LE>>,
    strtab: Vec<u8>,
}

impl Symbols {
    /// Locates `.dynsym` (sized by `DT_HASH`'s chain count) and `.dynstr`.
    ///
    /// # Errors
    /// `InvalidArgument` when a table is missing or lies outside the image.
    pub fn new(image: &[u8], layout: &Layout, dynamic: &Dynamic) -> Result<Self> {
        let (Some(strtab), Some(strsz), Some(symtab)) = (dynamic.strtab, dynamic.strsz, dynamic.symtab) else {
            return Err(Error::invalid_argument(
                "dynamic table lacks DT_STRTAB, DT_STRSZ or DT_SYMTAB",
            ));
        };
        let Some(hash) = dynamic.hash else {
            return Err(Error::unimplemented(
                "dynamic table has no DT_HASH, which the loader needs to size .dynsym",
            ));
        };
        let strtab = layout.slice(image, strtab, strsz).ok_or_else(|| {
            Error::invalid_argument(format!(
                "DT_STRTAB {strtab:#x}+{strsz:#x} lies outside the loaded image"
            ))
        })?;
        let hash_header = layout
            .slice(image, hash, 8)
            .ok_or_else(|| Error::invalid_argument(format!("DT_HASH {hash:#x} lies outside the loaded image")))?;
        let nchain = u32::from_le_bytes([hash_header[4], hash_header[5], hash_header[6], hash_header[7]]);
        let bytes = layout
            .slice(image, symtab, u64::from(nchain) * SYM_SIZE)
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "DT_SYMTAB {symtab:#x} with {nchain} symbols (from DT_HASH) lies outside the \
                 loaded image"
                ))
            })?;
        let (syms, _) = object::pod::slice_from_bytes::<Sym64<LE>>(bytes, nchain as usize)
            .map_err(|_| Error::internal("symbol table shorter than its count"))?;
        Ok(Symbols {
            syms: syms.to_vec(),
            strtab: strtab.to_vec(),
        })
    }

    /// The name at `offset` in the string table.
    ///
    /// # Errors
    /// `InvalidArgument` when the offset or the terminating NUL lies outside `.dynstr`.
    pub fn string(&self, offset: u64) -> Result<&[u8]> {
        let rest = usize::try_from(offset)
            .ok()
            .and_then(|o| self.strtab.get(o..))
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "string offset {offset:#x} lies outside the {}-byte DT_STRTAB",
                    self.strtab.len()
                ))
            })?;
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| Error::invalid_argument(format!("string at DT_STRTAB offset {offset:#x} has no NUL")))?;
        Ok(&rest[..end])
    }

    /// The name of symbol `index`, lossily decoded for messages.
    pub fn display_name(&self, index: usize) -> String {
        self.syms
            .get(index)
            .and_then(|s| self.string(u64::from(s.st_name.get(LE))).ok())
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_else(|| format!("#{index}"))
    }

    /// Rejects undefined symbols: an embedded ELF must not link against anything.
    ///
    /// # Errors
    /// `NotFound` naming the first undefined symbol.
    pub fn check_self_contained(&self) -> Result<()> {
        for (index, sym) in self.syms.iter().enumerate().skip(1) {
            if sym.st_shndx.get(LE) == elf::SHN_UNDEF {
                return Err(Error::not_found(format!(
                    "dynamic symbol {index} '{}' is undefined; embedded ELFs must not import \
                     symbols from other libraries",
                    self.display_name(index)
                )));
            }
        }
        Ok(())
    }

    /// The value of the defined global function or object named `name`.
    pub fn lookup(&self, name: &str) -> Option<(usize, u64)> {
        self.syms.iter().enumerate().skip(1).find_map(|(index, sym)| {
            let binding = sym.st_info >> 4;
            let global = binding == elf::STB_GLOBAL || binding == elf::STB_WEAK;
            let defined = sym.st_shndx.get(LE) != elf::SHN_UNDEF;
            (global && defined && self.string(u64::from(sym.st_name.get(LE))).ok()? == name.as_bytes())
                .then(|| (index, sym.st_value.get(LE)))
        })
    }
}
