//! Dynamic relocations (`DT_RELA` and `DT_JMPREL` tables), applied to the
//! writable image through a bounds-checked byte slice; what each type means is
//! the architecture's ([`Arch::relocation`]).
//!
//! Only the types a static-PIE shared object needs are handled; each target
//! must lie in a writable `PT_LOAD` segment, so a corrupt table can neither
//! write outside the image nor patch code.

use halo_hal::{Error, Result};
use object::elf::{self, Rela64};
use object::LittleEndian as LE;

use super::dynamic::{Dynamic, Symbols, RELA_SIZE};
use super::header::Segment;
use super::Layout;
use crate::arch::{Arch, Relocation};

/// A relocation table to apply: its name for messages, address and size.
struct Table {
    name: &'static str,
    vaddr: u64,
    size: u64,
}

/// Applies every relocation in `dynamic` to `image`, whose first byte is at
/// virtual address `layout.vaddr_min` and will run at address `base`.
///
/// # Errors
/// `InvalidArgument` naming the table and entry for anything out of bounds;
/// `Unimplemented` naming an unsupported relocation type.
pub(crate) fn apply(
    arch: &Arch,
    image: &mut [u8],
    layout: &Layout,
    base: usize,
    segments: &[Segment],
    dynamic: &Dynamic,
    symbols: &Symbols,
) -> Result<()> {
    let bias = (base as u64).wrapping_sub(layout.vaddr_min);
    let tables = [
        dynamic.rela.map(|vaddr| Table {
            name: "DT_RELA",
            vaddr,
            size: dynamic.relasz,
        }),
        dynamic.jmprel.map(|vaddr| Table {
            name: "DT_JMPREL",
            vaddr,
            size: dynamic.pltrelsz,
        }),
    ];
    for table in tables.into_iter().flatten() {
        if table.size % RELA_SIZE != 0 {
            return Err(Error::invalid_argument(format!(
                "{} table size {:#x} is not a multiple of {RELA_SIZE}",
                table.name, table.size
            )));
        }
        let count = (table.size / RELA_SIZE) as usize;
        let range = layout.range(table.vaddr, table.size).ok_or_else(|| {
            Error::invalid_argument(format!(
                "{} table {:#x}+{:#x} lies outside the loaded image",
                table.name, table.vaddr, table.size
            ))
        })?;
        for i in 0..count {
            // Copied out before patching: a target may alias the table itself.
            let start = range.start + i * RELA_SIZE as usize;
            let (rela, _) = object::pod::from_bytes::<Rela64<LE>>(&image[start..])
                .map_err(|_| Error::internal("relocation entry past its checked table"))?;
            let (offset, info, addend) = (rela.r_offset.get(LE), rela.r_info.get(LE), rela.r_addend.get(LE));
            let r_type = (info & 0xffff_ffff) as u32;
            let sym_index = (info >> 32) as usize;
            let describe = || {
                format!(
                    "{} entry {i} ({} at {offset:#x}, symbol {sym_index})",
                    table.name,
                    (arch.relocation_name)(r_type)
                )
            };
            let kind = (arch.relocation)(r_type).ok_or_else(|| {
                Error::unimplemented(format!(
                    "{}: relocation type {r_type} is not supported by the embedded ELF loader for {}",
                    describe(),
                    arch.name
                ))
            })?;
            if kind == Relocation::Nothing {
                continue;
            }
            let symbol = if sym_index == 0 {
                0
            } else {
                let sym = symbols.syms.get(sym_index).ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "{}: symbol index out of range of the {} dynamic symbols",
                        describe(),
                        symbols.syms.len()
                    ))
                })?;
                if sym.st_shndx.get(LE) == elf::SHN_UNDEF {
                    return Err(Error::not_found(format!(
                        "{}: symbol '{}' is not defined in the image",
                        describe(),
                        symbols.display_name(sym_index)
                    )));
                }
                bias.wrapping_add(sym.st_value.get(LE))
            };
            let value = match kind {
                Relocation::BiasPlusAddend => bias.wrapping_add(addend as u64),
                Relocation::SymbolPlusAddend => symbol.wrapping_add(addend as u64),
                Relocation::Symbol | Relocation::Nothing => symbol,
            };
            let writable = segments.iter().any(|s| {
                s.flags & elf::PF_W != 0
                    && offset >= s.vaddr
                    && matches!(offset.checked_add(8), Some(end) if end <= s.vaddr_end())
            });
            let target = layout.range(offset, 8).filter(|_| writable).ok_or_else(|| {
                Error::invalid_argument(format!(
                    "{}: the 8-byte target is not inside a writable PT_LOAD segment",
                    describe()
                ))
            })?;
            image[target].copy_from_slice(&value.to_le_bytes());
        }
    }
    Ok(())
}
