//! Readers for IREE's CUDA and HIP `ExecutableDef` FlatBuffers (`CDA1`, namespace
//! `iree.hal.cuda`; `HIP1`, namespace `iree.hal.hip`: the same tables, the module holding PTX
//! text or an AMD code object), for the fields halo uses. Written by hand over the `flatbuffers` crate's table primitives (no
//! `flatc` on the build machines); the field slots follow the schema's declaration order, as
//! checked against executables compiled by iree-compile 3.13.0:
//!
//! ```text
//! table ExecutableDef { exports:[ExportDef]; modules:[ModuleDef]; source_files:[...] }
//! table ModuleDef     { ptx_image:string }  (HIP: hsaco_image:string, an ELF file)
//! table ExportDef     { module_ordinal:uint32; kernel_name:string; block_dims:BlockDims;
//!                       block_shared_memory_size:uint32; constant_count:uint32;
//!                       binding_flags:[uint64]; debug_info:DebugExportDef }
//! table DebugExportDef { name:string; ... }   (iree.hal.debug.ExportDef)
//! struct BlockDims    { x:uint32; y:uint32; z:uint32 }
//! ```
//!
//! Every accessor reads a buffer that [`root`] verified, which is what makes the table reads
//! below sound; fields halo never reads (source locations, sources) are not verified.

use flatbuffers::{Follow, ForwardsUOffset, InvalidFlatbuffer, Table, VOffsetT, Vector, Verifiable, Verifier};

/// The vtable offset of field `index` of a table.
const fn slot(index: VOffsetT) -> VOffsetT {
    4 + 2 * index
}

/// The root table: exports and PTX modules.
#[derive(Clone, Copy)]
pub struct ExecutableDef<'a> {
    table: Table<'a>,
}

/// One PTX module.
#[derive(Clone, Copy)]
pub struct ModuleDef<'a> {
    table: Table<'a>,
}

/// One kernel: where it is and how to launch it.
#[derive(Clone, Copy)]
pub struct ExportDef<'a> {
    table: Table<'a>,
}

/// Debug information about one export: the name the program knows it by.
#[derive(Clone, Copy)]
pub struct DebugExportDef<'a> {
    table: Table<'a>,
}

/// A block's threads in x, y, z (12 bytes, little-endian u32s).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub struct BlockDims([u8; 12]);

impl BlockDims {
    /// The three sizes.
    pub fn xyz(&self) -> [u32; 3] {
        let word = |i: usize| u32::from_le_bytes(self.0[4 * i..4 * i + 4].try_into().expect("4 bytes"));
        [word(0), word(1), word(2)]
    }
}

macro_rules! follow_table {
    ($($name:ident),*) => {$(
        impl<'a> Follow<'a> for $name<'a> {
            type Inner = $name<'a>;
            unsafe fn follow(buf: &'a [u8], loc: usize) -> Self::Inner {
                // SAFETY: the caller gives a table's location in a verified buffer.
                $name { table: unsafe { Table::new(buf, loc) } }
            }
        }
    )*};
}
follow_table!(ExecutableDef, ModuleDef, ExportDef, DebugExportDef);

impl<'a> Follow<'a> for BlockDims {
    type Inner = &'a BlockDims;
    unsafe fn follow(buf: &'a [u8], loc: usize) -> Self::Inner {
        // SAFETY: the caller gives the location of a verified 12-byte struct; `BlockDims` is a
        // transparent byte array, so any alignment and any bytes are valid.
        unsafe { flatbuffers::follow_cast_ref::<BlockDims>(buf, loc) }
    }
}

impl Verifiable for BlockDims {
    fn run_verifier(v: &mut Verifier<'_, '_>, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.in_buffer::<Self>(pos)
    }
}

impl Verifiable for ExecutableDef<'_> {
    fn run_verifier(v: &mut Verifier<'_, '_>, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<Vector<'_, ForwardsUOffset<ExportDef<'_>>>>>("exports", slot(0), false)?
            .visit_field::<ForwardsUOffset<Vector<'_, ForwardsUOffset<ModuleDef<'_>>>>>("modules", slot(1), false)?
            .finish();
        Ok(())
    }
}

impl Verifiable for ModuleDef<'_> {
    fn run_verifier(v: &mut Verifier<'_, '_>, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            // Read as bytes: a code object is a string in the schema but not UTF-8.
            .visit_field::<ForwardsUOffset<Vector<'_, u8>>>("image", slot(0), false)?
            .finish();
        Ok(())
    }
}

impl Verifiable for ExportDef<'_> {
    fn run_verifier(v: &mut Verifier<'_, '_>, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<u32>("module_ordinal", slot(0), false)?
            .visit_field::<ForwardsUOffset<&str>>("kernel_name", slot(1), false)?
            .visit_field::<BlockDims>("block_dims", slot(2), false)?
            .visit_field::<u32>("block_shared_memory_size", slot(3), false)?
            .visit_field::<u32>("constant_count", slot(4), false)?
            .visit_field::<ForwardsUOffset<Vector<'_, u64>>>("binding_flags", slot(5), false)?
            .visit_field::<ForwardsUOffset<DebugExportDef<'_>>>("debug_info", slot(6), false)?
            .finish();
        Ok(())
    }
}

impl Verifiable for DebugExportDef<'_> {
    fn run_verifier(v: &mut Verifier<'_, '_>, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<&str>>("name", slot(0), false)?
            .finish();
        Ok(())
    }
}

impl<'a> ExecutableDef<'a> {
    /// The kernels, by export ordinal.
    pub fn exports(&self) -> Option<Vector<'a, ForwardsUOffset<ExportDef<'a>>>> {
        // SAFETY: verified by `root` as a vector of tables.
        unsafe {
            self.table
                .get::<ForwardsUOffset<Vector<'a, ForwardsUOffset<ExportDef<'a>>>>>(slot(0), None)
        }
    }

    /// The PTX modules, by module ordinal.
    pub fn modules(&self) -> Option<Vector<'a, ForwardsUOffset<ModuleDef<'a>>>> {
        // SAFETY: verified by `root` as a vector of tables.
        unsafe {
            self.table
                .get::<ForwardsUOffset<Vector<'a, ForwardsUOffset<ModuleDef<'a>>>>>(slot(1), None)
        }
    }
}

impl<'a> ModuleDef<'a> {
    /// The module's PTX text or code object, without the string's terminating NUL.
    pub fn image(&self) -> Option<&'a [u8]> {
        // SAFETY: verified by `root` as a byte vector.
        unsafe { self.table.get::<ForwardsUOffset<Vector<'a, u8>>>(slot(0), None) }.map(|v| v.bytes())
    }
}

impl<'a> ExportDef<'a> {
    /// Which module holds the kernel.
    pub fn module_ordinal(&self) -> u32 {
        // SAFETY: verified by `root` as a u32.
        unsafe { self.table.get::<u32>(slot(0), Some(0)) }.unwrap_or(0)
    }

    /// The kernel's symbol in its module.
    pub fn kernel_name(&self) -> Option<&'a str> {
        // SAFETY: verified by `root` as a string.
        unsafe { self.table.get::<ForwardsUOffset<&str>>(slot(1), None) }
    }

    /// Threads per block.
    pub fn block_dims(&self) -> Option<[u32; 3]> {
        // SAFETY: verified by `root` as a 12-byte struct.
        unsafe { self.table.get::<BlockDims>(slot(2), None) }.map(BlockDims::xyz)
    }

    /// Dynamic shared memory per block, in bytes.
    pub fn block_shared_memory_size(&self) -> u32 {
        // SAFETY: verified by `root` as a u32.
        unsafe { self.table.get::<u32>(slot(3), Some(0)) }.unwrap_or(0)
    }

    /// 32-bit constants a dispatch passes.
    pub fn constant_count(&self) -> u32 {
        // SAFETY: verified by `root` as a u32.
        unsafe { self.table.get::<u32>(slot(4), Some(0)) }.unwrap_or(0)
    }

    /// The name the program looks the export up by (the kernel's symbol may be a sanitized form
    /// of it: PTX identifiers cannot hold the `$` that IREE's dispatch names have).
    pub fn debug_name(&self) -> Option<&'a str> {
        // SAFETY: verified by `root` as a table whose slot 0 is a string.
        let debug = unsafe { self.table.get::<ForwardsUOffset<DebugExportDef<'a>>>(slot(6), None) }?;
        // SAFETY: as above.
        unsafe { debug.table.get::<ForwardsUOffset<&str>>(slot(0), None) }
    }

    /// One flag word per binding (`READ_ONLY`, `INDIRECT`); its length is the binding count.
    pub fn binding_flags(&self) -> Option<Vector<'a, u64>> {
        // SAFETY: verified by `root` as a vector of u64.
        unsafe { self.table.get::<ForwardsUOffset<Vector<'a, u64>>>(slot(5), None) }
    }
}

/// Verifies `body` (the FlatBuffer after the 64-byte header) and returns its root table.
///
/// # Errors
/// The verifier's complaint when the buffer is malformed.
pub fn root(body: &[u8]) -> Result<ExecutableDef<'_>, InvalidFlatbuffer> {
    flatbuffers::root::<ExecutableDef<'_>>(body)
}
