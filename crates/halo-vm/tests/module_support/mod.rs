//! Shared helpers of the module loader tests: the committed modules, byte patching located through
//! the FlatBuffer itself, and a builder for synthetic modules.
#![allow(dead_code, reason = "each test file uses a different subset")]

use flatbuffers::{FlatBufferBuilder, Table, VOffsetT, WIPOffset};
use halo_vm::module::schema::{
    self, BytecodeModuleDef, BytecodeModuleDefArgs, ExportFunctionDef, ExportFunctionDefArgs, FunctionSignatureDef,
    FunctionSignatureDefArgs, RodataSegmentDef, RodataSegmentDefArgs,
};
use halo_vm::module::BytecodeModule;
use std::path::PathBuf;

/// The modules under `tests/data`, by file stem.
pub const MODULES: &[&str] = &["add", "rodata", "rodata_nozip", "float", "imports", "mul"];

/// Path of a file under `tests/data`.
pub fn data_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(file)
}

/// Bytes of `tests/data/<stem>.vmfb`.
pub fn module_bytes(stem: &str) -> Vec<u8> {
    std::fs::read(data_path(&format!("{stem}.vmfb"))).unwrap()
}

/// Byte offset within the file of field `vt` of `table` (a table of the module's FlatBuffer), or
/// `None` when the field is absent (holds its default).
pub fn field_pos(module: &BytecodeModule, table: &Table<'_>, vt: VOffsetT) -> Option<usize> {
    let base = module.layout().flatbuffer.start - 4;
    let offset = table.vtable().get(vt);
    (offset != 0).then(|| base + table.loc() + usize::from(offset))
}

/// Byte offset within the file of the vtable entry for field `vt` of `table`.
pub fn vtable_entry_pos(module: &BytecodeModule, table: &Table<'_>, vt: VOffsetT) -> usize {
    let base = module.layout().flatbuffer.start - 4;
    let buf = table.buf();
    let loc = table.loc();
    let soffset = i32::from_le_bytes(buf[loc..loc + 4].try_into().unwrap());
    let vtable = (loc as i64 - i64::from(soffset)) as usize;
    base + vtable + usize::from(vt)
}

/// Byte offset within the file of `slice`, which borrows from the module's bytes.
pub fn offset_in_file(module: &BytecodeModule, slice: &[u8]) -> usize {
    slice.as_ptr() as usize - module.bytes().as_ptr() as usize
}

/// Byte offset of function descriptor `index` (20-byte structs) within the file.
pub fn descriptor_pos(module: &BytecodeModule, index: usize) -> usize {
    let descriptors = module.def().function_descriptors().unwrap();
    offset_in_file(module, descriptors.bytes()) + index * 20
}

/// Position of the `bytecode_version` field within `stem`'s file.
pub fn bytecode_version_pos(module: &BytecodeModule) -> usize {
    let def = module.def();
    field_pos(module, &def._tab, BytecodeModuleDef::VT_BYTECODE_VERSION).unwrap()
}

/// Loads `bytes` after `patch` changed them.
pub fn load_patched(stem: &str, patch: impl FnOnce(&BytecodeModule, &mut Vec<u8>)) -> halo_hal::Result<BytecodeModule> {
    let original = BytecodeModule::from_bytes(module_bytes(stem)).unwrap();
    let mut bytes = original.bytes().to_vec();
    patch(&original, &mut bytes);
    BytecodeModule::from_bytes(bytes)
}

/// Writes `value` little-endian at `pos`.
pub fn put<const N: usize>(bytes: &mut [u8], pos: usize, value: [u8; N]) {
    bytes[pos..pos + N].copy_from_slice(&value);
}

/// Reads every view the module offers, so corrupted input that loads is also read in full.
pub fn touch_everything(module: &BytecodeModule) {
    let _ = (
        module.name(),
        module.version(),
        module.requirements(),
        module.bytecode_version(),
    );
    let _ = (module.attrs(), module.types(), module.dependencies(), module.imports());
    for export in module.exports() {
        assert!(export.internal_ordinal < module.function_count());
        assert!(module.function_signature(export.internal_ordinal).is_some());
    }
    for ordinal in 0..module.function_count() + 2 {
        let _ = module.function(ordinal);
        let _ = module.function_bytecode(ordinal);
        let _ = module.function_name(ordinal);
        let _ = module.function_signature(ordinal);
    }
    for ordinal in 0..module.rodata_count() + 2 {
        let _ = module.rodata(ordinal);
        let _ = module.rodata_is_external(ordinal);
    }
    let _ = (
        module.rwdata_sizes(),
        module.global_bytes_capacity(),
        module.global_ref_count(),
    );
    let _ = (
        module.has_debug_database(),
        module.bytecode_data().len(),
        format!("{module:?}"),
    );
}

/// One rodata segment of a synthetic module.
#[derive(Clone)]
pub enum SynthRodata {
    /// Bytes inside the FlatBuffer.
    Embedded(Vec<u8>),
    /// Bytes written after the FlatBuffer at `offset` from the rodata base, described as
    /// `[offset, offset + length)` (which may differ from the bytes written, to test ranges).
    External { offset: u64, length: u64, bytes: Vec<u8> },
    /// A segment with an explicit compression union type.
    Compressed(u8),
}

/// One function descriptor of a synthetic module, raw as in the file.
#[derive(Clone, Copy)]
pub struct SynthFunction {
    pub offset: i32,
    pub length: i32,
    pub requirements: u32,
    pub block_count: i16,
    pub i32_registers: i16,
    pub ref_registers: i16,
}

impl Default for SynthFunction {
    fn default() -> Self {
        SynthFunction {
            offset: 0,
            length: 4,
            requirements: 0,
            block_count: 1,
            i32_registers: 2,
            ref_registers: 0,
        }
    }
}

/// A synthetic module, built with the generated FlatBuffer builders.
#[derive(Clone)]
pub struct Synth {
    pub name: &'static str,
    pub bytecode_version: u32,
    pub requirements: u32,
    pub functions: Vec<SynthFunction>,
    /// `None`: one signature (`0ii_i`) per function.
    pub signature_count: Option<usize>,
    pub exports: Vec<(&'static str, i32)>,
    pub bytecode: Vec<u8>,
    pub rodata: Vec<SynthRodata>,
    pub zip_header: bool,
}

impl Default for Synth {
    fn default() -> Self {
        Synth {
            name: "synth",
            bytecode_version: 17 << 16,
            requirements: 0,
            functions: vec![SynthFunction::default()],
            signature_count: None,
            exports: vec![("f", 0)],
            bytecode: vec![0x79, 0x5A, 0, 0, 0, 0, 0, 0],
            rodata: Vec::new(),
            zip_header: false,
        }
    }
}

impl Synth {
    /// The archive bytes.
    pub fn build(&self) -> Vec<u8> {
        let mut fbb = FlatBufferBuilder::new();
        let name = fbb.create_string(self.name);
        let signature_count = self.signature_count.unwrap_or(self.functions.len());
        let signatures: Vec<WIPOffset<FunctionSignatureDef>> = (0..signature_count)
            .map(|_| {
                let cconv = fbb.create_string("0ii_i");
                FunctionSignatureDef::create(
                    &mut fbb,
                    &FunctionSignatureDefArgs {
                        calling_convention: Some(cconv),
                        attrs: None,
                    },
                )
            })
            .collect();
        let signatures = fbb.create_vector(&signatures);
        let exports: Vec<WIPOffset<ExportFunctionDef>> = self
            .exports
            .iter()
            .map(|&(local_name, internal_ordinal)| {
                let local_name = fbb.create_string(local_name);
                ExportFunctionDef::create(
                    &mut fbb,
                    &ExportFunctionDefArgs {
                        local_name: Some(local_name),
                        internal_ordinal,
                    },
                )
            })
            .collect();
        let exports = fbb.create_vector(&exports);
        let descriptors: Vec<schema::FunctionDescriptor> = self
            .functions
            .iter()
            .map(|f| {
                schema::FunctionDescriptor::new(
                    f.offset,
                    f.length,
                    schema::FeatureBits::from_bits_retain(f.requirements),
                    0,
                    f.block_count,
                    f.i32_registers,
                    f.ref_registers,
                )
            })
            .collect();
        let descriptors = fbb.create_vector(&descriptors);
        let bytecode = fbb.create_vector(&self.bytecode);
        let rodata: Vec<WIPOffset<RodataSegmentDef>> = self
            .rodata
            .iter()
            .map(|segment| match segment {
                SynthRodata::Embedded(bytes) => {
                    let data = fbb.create_vector(bytes);
                    RodataSegmentDef::create(
                        &mut fbb,
                        &RodataSegmentDefArgs {
                            embedded_data: Some(data),
                            ..Default::default()
                        },
                    )
                }
                SynthRodata::External { offset, length, .. } => RodataSegmentDef::create(
                    &mut fbb,
                    &RodataSegmentDefArgs {
                        external_data_offset: *offset,
                        external_data_length: *length,
                        ..Default::default()
                    },
                ),
                SynthRodata::Compressed(kind) => {
                    let table = schema::UncompressedDataDef::create(&mut fbb, &schema::UncompressedDataDefArgs {});
                    let data = fbb.create_vector(&[1u8, 2, 3]);
                    RodataSegmentDef::create(
                        &mut fbb,
                        &RodataSegmentDefArgs {
                            compression_type_type: schema::CompressionTypeDef(*kind),
                            compression_type: Some(table.as_union_value()),
                            embedded_data: Some(data),
                            ..Default::default()
                        },
                    )
                }
            })
            .collect();
        let rodata = fbb.create_vector(&rodata);
        let root = BytecodeModuleDef::create(
            &mut fbb,
            &BytecodeModuleDefArgs {
                name: Some(name),
                requirements: schema::FeatureBits::from_bits_retain(self.requirements),
                exported_functions: Some(exports),
                function_signatures: Some(signatures),
                rodata_segments: Some(rodata),
                function_descriptors: Some(descriptors),
                bytecode_version: self.bytecode_version,
                bytecode_data: Some(bytecode),
                ..Default::default()
            },
        );
        schema::finish_size_prefixed_bytecode_module_def_buffer(&mut fbb, root);

        let mut out = Vec::new();
        if self.zip_header {
            // A ZIP local-file header naming "module.fb" with a 3-byte extra field.
            out.extend(0x0403_4B50u32.to_le_bytes());
            out.extend([0u8; 22]);
            out.extend(9u16.to_le_bytes());
            out.extend(3u16.to_le_bytes());
            out.extend(b"module.fb");
            out.extend([0u8; 3]);
        }
        out.extend(fbb.finished_data());
        let rodata_base = out.len().next_multiple_of(64);
        for segment in &self.rodata {
            if let SynthRodata::External { offset, bytes, .. } = segment {
                let at = rodata_base + *offset as usize;
                if out.len() < at + bytes.len() {
                    out.resize(at + bytes.len(), 0);
                }
                out[at..at + bytes.len()].copy_from_slice(bytes);
            }
        }
        out
    }

    /// Builds and loads the module.
    pub fn load(&self) -> halo_hal::Result<BytecodeModule> {
        BytecodeModule::from_bytes(self.build())
    }
}
