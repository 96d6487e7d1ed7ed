//! Loading IREE bytecode modules (`.vmfb`) as iree-compile 3.13 writes them.
//!
//! A `.vmfb` is an archive: an optional ZIP local-file header, a size-prefixed FlatBuffer whose
//! root is `BytecodeModuleDef` (identifier `IREE`), then external rodata segments at offsets
//! from the 64-byte-aligned end of the FlatBuffer ([`archive`] has the exact layout). [`BytecodeModule`] checks all of it once at
//! load: the FlatBuffer is verified (every offset, vector and string in bounds) and then the
//! module-level rules IREE's loader enforces are checked (bytecode version, required names,
//! function descriptor ranges and register counts, export ordinals, rodata ranges, features).
//! Everything it hands out afterwards is a view into the loaded bytes, never a copy.
//!
//! Who does what: this module checks the container; verifying each function's bytecode (branch
//! targets, register operands, call signatures) is the bytecode verifier's job.

pub mod archive;
mod bytes;
pub mod schema;

pub use archive::{ArchiveLayout, ARCHIVE_SEGMENT_ALIGNMENT};
pub use bytes::ModuleBytes;

use bytes::VerifiedModuleDef;
use halo_hal::{Error, Result, ResultExt};
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// Bytecode major version this VM runs; modules with any other major version are rejected.
pub const BYTECODE_VERSION_MAJOR: u16 = 17;
/// Newest bytecode minor version this VM runs; older minor versions of the same major load.
pub const BYTECODE_VERSION_MINOR: u16 = 0;
/// Most i32 registers (bank 0x7FFF mask) one function may declare.
pub const MAX_I32_REGISTER_COUNT: u16 = 0x7FFF;
/// Most ref registers (bank 0x3FFF mask) one function may declare.
pub const MAX_REF_REGISTER_COUNT: u16 = 0x3FFF;

bitflags::bitflags! {
    /// Interpreter features a module or a function requires (IREE's `FeatureBits`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct FeatureBits: u32 {
        /// f32 instructions (the `0xE0` opcode prefix).
        const EXT_F32 = 1 << 0;
        /// f64 instructions (the `0xE1` opcode prefix).
        const EXT_F64 = 1 << 1;
        /// The function may suspend (yield) and must be resumable.
        const YIELD = 1 << 2;
        /// Frames hold refs that must be released when an error unwinds them.
        const UNWIND = 1 << 3;
    }
}

/// Features halo's interpreter provides; a module requiring any other bit is `Incompatible`.
pub const SUPPORTED_FEATURES: FeatureBits = FeatureBits::all();

impl fmt::Display for FeatureBits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (name, _) in self.iter_names() {
            if !first {
                f.write_str(" | ")?;
            }
            f.write_str(name)?;
            first = false;
        }
        let unknown = self.bits() & !FeatureBits::all().bits();
        if unknown != 0 {
            if !first {
                f.write_str(" | ")?;
            }
            write!(f, "{unknown:#x}")?;
        } else if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// Another module this one links against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dependency<'a> {
    /// Module name (`hal`, ...).
    pub name: &'a str,
    /// Lowest module version that satisfies the dependency.
    pub minimum_version: u32,
    /// True when the module still loads without the dependency (its imports are then optional).
    pub optional: bool,
}

/// A function imported from another module, resolved when a context is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportDef<'a> {
    /// Fully qualified name, `module.function` (`hal.buffer_view.create`).
    pub full_name: &'a str,
    /// Calling convention string (`0rIIiiCID_r`), absent when the module does not declare one.
    pub calling_convention: Option<&'a str>,
    /// Reflection attributes of the import's signature, in file order.
    pub attrs: Vec<(&'a str, &'a str)>,
    /// True when the module runs without this import resolved.
    pub optional: bool,
}

/// A function this module exports, callable by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportDef<'a> {
    /// Name without the module prefix.
    pub local_name: &'a str,
    /// Ordinal of the implementing function in the internal function table.
    pub internal_ordinal: u32,
}

/// Calling convention and reflection attributes of an internal function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureDef<'a> {
    /// Calling convention string (`0rr_r`); always present for exported functions.
    pub calling_convention: Option<&'a str>,
    /// Reflection attributes (`iree.abi.declaration`, ...), in file order.
    pub attrs: Vec<(&'a str, &'a str)>,
}

impl<'a> SignatureDef<'a> {
    /// The value of reflection attribute `key`, if present.
    pub fn attr(&self, key: &str) -> Option<&'a str> {
        self.attrs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

/// Where an internal function's bytecode lies and what its frame needs; checked at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionDescriptor {
    /// Offset of the function's first byte within the module's bytecode data.
    pub bytecode_offset: u32,
    /// Length of the function's bytecode (at least 1).
    pub bytecode_length: u32,
    /// Features the function needs beyond the module's.
    pub requirements: FeatureBits,
    /// Number of basic blocks (at least 1).
    pub block_count: u16,
    /// Registers in the i32 bank (also holds i64/f32/f64), at most [`MAX_I32_REGISTER_COUNT`].
    pub i32_register_count: u16,
    /// Registers in the ref bank, at most [`MAX_REF_REGISTER_COUNT`].
    pub ref_register_count: u16,
}

impl FunctionDescriptor {
    /// The function's byte range within the module's bytecode data.
    pub fn bytecode_range(&self) -> Range<usize> {
        let start = self.bytecode_offset as usize;
        start..start + self.bytecode_length as usize
    }
}

/// A loaded, container-verified bytecode module: zero-copy views into the bytes it owns.
///
/// Ownership: holds its bytes in an `Arc<ModuleBytes>` ([`Self::bytes`]); every `&str` and `&[u8]`
/// it returns borrows from them. Threading: immutable after load, so `Send + Sync`; share it
/// behind an `Arc`.
pub struct BytecodeModule {
    def: VerifiedModuleDef,
    layout: ArchiveLayout,
    functions: Vec<FunctionDescriptor>,
    bytecode: Range<usize>,
    rodata: Vec<Range<usize>>,
}

impl fmt::Debug for BytecodeModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BytecodeModule")
            .field("name", &self.name())
            .field("version", &self.version())
            .field("bytecode_version", &self.bytecode_version())
            .field("functions", &self.functions.len())
            .field("rodata_segments", &self.rodata.len())
            .field("bytes", self.def.bytes())
            .finish()
    }
}

fn invalid(message: String) -> Error {
    Error::invalid_argument(message)
}

/// Attributes of one signature as pairs; a missing value reads as "" (keys were checked at load).
fn attr_pairs<'a>(
    attrs: Option<flatbuffers::Vector<'a, flatbuffers::ForwardsUOffset<schema::AttrDef<'a>>>>,
) -> Vec<(&'a str, &'a str)> {
    attrs
        .into_iter()
        .flatten()
        .map(|attr| (attr.key().unwrap_or(""), attr.value().unwrap_or("")))
        .collect()
}

fn non_negative(value: i32, what: impl FnOnce() -> String) -> Result<u32> {
    u32::try_from(value).map_err(|_| invalid(format!("{} is negative ({value})", what())))
}

fn non_negative_u16(value: i16, what: impl FnOnce() -> String) -> Result<u16> {
    u16::try_from(value).map_err(|_| invalid(format!("{} is negative ({value})", what())))
}

/// Limits for the FlatBuffer verifier, scaled to the buffer so hostile input cannot make it work
/// (or validate UTF-8) much beyond the size of the file.
fn verifier_options(flatbuffer_len: usize) -> flatbuffers::VerifierOptions {
    flatbuffers::VerifierOptions {
        max_depth: 32,
        max_tables: flatbuffer_len / 4 + 16,
        max_apparent_size: flatbuffer_len.saturating_mul(16).max(1 << 20),
        ignore_missing_null_terminator: false,
    }
}

fn compact(err: &flatbuffers::InvalidFlatbuffer) -> String {
    let text = err.to_string();
    let parts: Vec<&str> = text.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    parts.join("; ")
}

fn check_features(required: FeatureBits, what: impl FnOnce() -> String) -> Result<()> {
    let missing = required - SUPPORTED_FEATURES;
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::incompatible(format!(
            "{} requires features [{missing}] that halo's VM does not provide (it has [{SUPPORTED_FEATURES}], \
             the module asks for [{required}])",
            what()
        )))
    }
}

/// How a module file gets into memory (IREE's `--module_mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoadMode {
    /// Map the file: loading reads nothing, and pages come in as they are touched and stay
    /// shared with the page cache. The file must not change while the module is alive.
    #[default]
    Map,
    /// Read the whole file into memory of the module's own at load: slower to load, but
    /// weight-bound kernels run a few percent faster from it (IREE's default for its tools).
    Preload,
}

impl BytecodeModule {
    /// Memory-maps and loads the module file at `path` ([`LoadMode::Map`]).
    ///
    /// The file must not be modified or truncated while the module (or any `Arc` of its
    /// [`Self::bytes`]) is alive: its bytes are read in place, as IREE's tools do.
    ///
    /// # Errors
    /// The I/O error when the file cannot be opened or mapped, or any error of
    /// [`Self::from_bytes`]; each carries the path as context.
    pub fn from_file(path: &Path) -> Result<Self> {
        Self::open(path, LoadMode::Map)
    }

    /// Loads the module file at `path`, mapped or read as `mode` says.
    ///
    /// # Errors
    /// As [`Self::from_file`].
    pub fn open(path: &Path, mode: LoadMode) -> Result<Self> {
        let context = || format!("loading bytecode module '{}'", path.display());
        // A FIFO or device would block or never end: only regular files are modules.
        let len = halo_hal::file::regular_file_len(path).with_context(context)?;
        let mut file = std::fs::File::open(path).with_context(context)?;
        if len == 0 {
            return Err(invalid("module file is empty (0 bytes)".to_string())).with_context(context);
        }
        let bytes = match mode {
            LoadMode::Map => ModuleBytes::map(&file),
            LoadMode::Preload => usize::try_from(len)
                .map_err(|_| std::io::Error::other(format!("{len} bytes do not fit in memory")))
                .and_then(|len| ModuleBytes::read(&mut file, len)),
        };
        Self::load(Arc::new(bytes.with_context(context)?)).with_context(context)
    }

    /// Loads a module from bytes already in memory, without copying them.
    ///
    /// # Errors
    /// `InvalidArgument` when the archive or FlatBuffer is malformed or breaks a module rule (the
    /// message names the table, index and byte offset); `Incompatible` when the bytecode version,
    /// a required feature or a rodata compression type is one halo does not support.
    pub fn from_bytes(bytes: impl Into<Arc<[u8]>>) -> Result<Self> {
        Self::load(Arc::new(ModuleBytes::shared(bytes.into())))
    }

    /// Loads a module from [`ModuleBytes`] (for example those of another loaded module).
    ///
    /// # Errors
    /// As [`Self::from_bytes`].
    pub fn load(bytes: Arc<ModuleBytes>) -> Result<Self> {
        let layout = archive::parse(&bytes)?;
        let options = verifier_options(layout.flatbuffer.len());
        let prefixed = layout.flatbuffer.start - 4..layout.flatbuffer.end;
        let def = VerifiedModuleDef::verify(bytes, prefixed.clone(), &options).map_err(|err| {
            invalid(format!(
                "FlatBuffer of {} bytes at byte offset {} failed verification (positions count from its size \
                 prefix at byte offset {}): {}",
                layout.flatbuffer.len(),
                layout.flatbuffer.start,
                prefixed.start,
                compact(&err)
            ))
        })?;
        let checked = check_module(&def, &layout)?;
        Ok(BytecodeModule {
            def,
            layout,
            functions: checked.functions,
            bytecode: checked.bytecode,
            rodata: checked.rodata,
        })
    }

    fn root(&self) -> schema::BytecodeModuleDef<'_> {
        self.def.root()
    }

    /// The module's name, the namespace of its exports (`module`).
    pub fn name(&self) -> &str {
        self.root().name()
    }

    /// The module's version, which importers compare with their minimum version.
    pub fn version(&self) -> u32 {
        self.root().version()
    }

    /// Features the whole module requires (all are in [`SUPPORTED_FEATURES`]; checked at load).
    pub fn requirements(&self) -> FeatureBits {
        FeatureBits::from_bits_retain(self.root().requirements().bits())
    }

    /// Bytecode version as (major, minor); the major is [`BYTECODE_VERSION_MAJOR`].
    pub fn bytecode_version(&self) -> (u16, u16) {
        let version = self.root().bytecode_version();
        ((version >> 16) as u16, (version & 0xFFFF) as u16)
    }

    /// Module-level reflection attributes, in file order.
    pub fn attrs(&self) -> Vec<(&str, &str)> {
        attr_pairs(self.root().attrs())
    }

    /// Full names of the type table entries (`i32`, `!hal.buffer`, `!vm.list<?>`), by type id.
    pub fn types(&self) -> Vec<&str> {
        self.root()
            .types()
            .into_iter()
            .flatten()
            .map(|ty| ty.full_name().unwrap_or(""))
            .collect()
    }

    /// Modules this one links against.
    pub fn dependencies(&self) -> Vec<Dependency<'_>> {
        self.root()
            .dependencies()
            .into_iter()
            .flatten()
            .map(|dep| Dependency {
                name: dep.name().unwrap_or(""),
                minimum_version: dep.minimum_version(),
                optional: dep.flags().contains(schema::ModuleDependencyFlagBits::OPTIONAL),
            })
            .collect()
    }

    /// Imported functions, by import ordinal.
    pub fn imports(&self) -> Vec<ImportDef<'_>> {
        self.root()
            .imported_functions()
            .into_iter()
            .flatten()
            .map(|import| {
                let signature = import.signature();
                ImportDef {
                    full_name: import.full_name().unwrap_or(""),
                    calling_convention: signature.and_then(|s| s.calling_convention()),
                    attrs: attr_pairs(signature.and_then(|s| s.attrs())),
                    optional: import.flags().contains(schema::ImportFlagBits::OPTIONAL),
                }
            })
            .collect()
    }

    /// Exported functions, by export ordinal.
    pub fn exports(&self) -> Vec<ExportDef<'_>> {
        self.root()
            .exported_functions()
            .into_iter()
            .flatten()
            .map(|export| ExportDef {
                local_name: export.local_name().unwrap_or(""),
                // Checked at load to lie in [0, function_count).
                internal_ordinal: export.internal_ordinal() as u32,
            })
            .collect()
    }

    /// The names of the exported functions a caller means, in export order: all but the
    /// compiler's own (`__init` and other `__` names) and the `$async` forms of the others.
    pub fn public_functions(&self) -> Vec<String> {
        self.exports()
            .iter()
            .map(|export| export.local_name)
            .filter(|name| !name.starts_with("__") && !name.ends_with("$async"))
            .map(str::to_string)
            .collect()
    }

    /// The export named `local_name`, if any.
    pub fn find_export(&self, local_name: &str) -> Option<ExportDef<'_>> {
        self.exports()
            .into_iter()
            .find(|export| export.local_name == local_name)
    }

    /// Calling convention and attributes of internal function `internal_ordinal`.
    pub fn function_signature(&self, internal_ordinal: u32) -> Option<SignatureDef<'_>> {
        let index = usize::try_from(internal_ordinal).ok()?;
        let signatures = self.root().function_signatures()?;
        if index >= signatures.len() {
            return None;
        }
        let signature = signatures.get(index);
        Some(SignatureDef {
            calling_convention: signature.calling_convention(),
            attrs: attr_pairs(signature.attrs()),
        })
    }

    /// Number of internal functions (descriptors and signatures alike).
    pub fn function_count(&self) -> u32 {
        // At most `u32::MAX`: a FlatBuffer vector length is a u32.
        self.functions.len() as u32
    }

    /// The descriptor of internal function `ordinal`.
    pub fn function(&self, ordinal: u32) -> Option<FunctionDescriptor> {
        self.functions.get(usize::try_from(ordinal).ok()?).copied()
    }

    /// The bytecode of internal function `ordinal` (branch targets are offsets into it).
    pub fn function_bytecode(&self, ordinal: u32) -> Option<&[u8]> {
        let function = self.function(ordinal)?;
        self.bytecode_data().get(function.bytecode_range())
    }

    /// All functions' bytecode, one block.
    pub fn bytecode_data(&self) -> &[u8] {
        &self.def.bytes()[self.bytecode.clone()]
    }

    /// Name of internal function `ordinal`: from the debug database when it names every function,
    /// else the local name of the first export it implements; `None` for an unnamed internal
    /// function otherwise.
    ///
    /// iree-compile 3.13 writes a debug database whose `functions` table holds a single entry
    /// (the last function serialized, stored at index 0) however many functions there are, so
    /// that table is trusted only when its length equals [`Self::function_count`].
    pub fn function_name(&self, ordinal: u32) -> Option<&str> {
        let index = usize::try_from(ordinal)
            .ok()
            .filter(|&index| index < self.functions.len())?;
        let from_debug = self
            .root()
            .debug_database()
            .and_then(|db| db.functions())
            .filter(|maps| maps.len() == self.functions.len())
            .and_then(|maps| maps.get(index).local_name())
            .filter(|name| !name.is_empty());
        from_debug.or_else(|| {
            self.root()
                .exported_functions()
                .into_iter()
                .flatten()
                .find(|export| export.internal_ordinal() as u32 == ordinal)
                .and_then(|export| export.local_name())
        })
    }

    /// Number of rodata segments.
    pub fn rodata_count(&self) -> u32 {
        self.rodata.len() as u32
    }

    /// The bytes of rodata segment `ordinal`, embedded or external, in place.
    pub fn rodata(&self, ordinal: u32) -> Option<&[u8]> {
        let range = self.rodata_range(ordinal)?;
        Some(&self.def.bytes()[range])
    }

    /// Where rodata segment `ordinal` lies within [`Self::bytes`], so a buffer can hold the bytes
    /// (an `Arc` clone) and the range instead of borrowing from the module.
    pub fn rodata_range(&self, ordinal: u32) -> Option<Range<usize>> {
        self.rodata.get(usize::try_from(ordinal).ok()?).cloned()
    }

    /// True when rodata segment `ordinal` is stored after the FlatBuffer rather than inside it.
    pub fn rodata_is_external(&self, ordinal: u32) -> Option<bool> {
        let segment = self.root().rodata_segments()?;
        let index = usize::try_from(ordinal).ok().filter(|&index| index < segment.len())?;
        Some(segment.get(index).embedded_data().is_none())
    }

    /// Byte sizes of the read-write (zero-initialized) data segments.
    pub fn rwdata_sizes(&self) -> Vec<u32> {
        self.root()
            .rwdata_segments()
            .into_iter()
            .flatten()
            .map(|segment| segment.byte_size() as u32)
            .collect()
    }

    /// Bytes of primitive global storage each context allocates (zero-initialized).
    pub fn global_bytes_capacity(&self) -> u32 {
        self.root()
            .module_state()
            .map_or(0, |state| state.global_bytes_capacity() as u32)
    }

    /// Number of ref globals each context allocates.
    pub fn global_ref_count(&self) -> u32 {
        self.root()
            .module_state()
            .map_or(0, |state| state.global_ref_count() as u32)
    }

    /// True when the module carries a debug database (function names and source locations).
    pub fn has_debug_database(&self) -> bool {
        self.root().debug_database().is_some()
    }

    /// Where the ZIP header, the FlatBuffer and the rodata base lie in the file.
    pub fn layout(&self) -> &ArchiveLayout {
        &self.layout
    }

    /// The raw FlatBuffer root, for tools that need tables this interface does not expose.
    pub fn def(&self) -> schema::BytecodeModuleDef<'_> {
        self.root()
    }

    /// The bytes the module was loaded from; clone the `Arc` to keep views alive past the module.
    pub fn bytes(&self) -> &Arc<ModuleBytes> {
        self.def.bytes()
    }
}

/// What [`check_module`] derives while checking.
struct Checked {
    functions: Vec<FunctionDescriptor>,
    bytecode: Range<usize>,
    rodata: Vec<Range<usize>>,
}

/// Byte offset of `inner` within `outer`; `inner` must be a subslice of `outer`.
fn offset_within(outer: &[u8], inner: &[u8]) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

/// Checks the rules IREE's loader enforces on a verified `BytecodeModuleDef` (and a few it leaves
/// to later stages), and collects the descriptor table and segment ranges.
fn check_module(def: &VerifiedModuleDef, layout: &ArchiveLayout) -> Result<Checked> {
    let file = def.bytes().as_slice();
    let root = def.root();

    let name = root.name();
    if name.is_empty() {
        return Err(invalid("module has an empty name".to_string()));
    }
    let in_module = |what: String| format!("module '{name}': {what}");

    let version = root.bytecode_version();
    let (major, minor) = ((version >> 16) as u16, (version & 0xFFFF) as u16);
    if major != BYTECODE_VERSION_MAJOR || minor > BYTECODE_VERSION_MINOR {
        return Err(Error::incompatible(in_module(format!(
            "bytecode version {major}.{minor} is not supported; halo runs {BYTECODE_VERSION_MAJOR}.x \
             up to {BYTECODE_VERSION_MAJOR}.{BYTECODE_VERSION_MINOR}"
        ))));
    }

    check_features(FeatureBits::from_bits_retain(root.requirements().bits()), || {
        format!("module '{name}'")
    })?;

    check_attrs(root.attrs(), || in_module("attrs".to_string()))?;

    for (i, ty) in root.types().into_iter().flatten().enumerate() {
        if ty.full_name().unwrap_or("").is_empty() {
            return Err(invalid(in_module(format!("types[{i}] has no full_name"))));
        }
    }

    for (i, dep) in root.dependencies().into_iter().flatten().enumerate() {
        if dep.name().unwrap_or("").is_empty() {
            return Err(invalid(in_module(format!("dependencies[{i}] has no module name"))));
        }
    }

    for (i, import) in root.imported_functions().into_iter().flatten().enumerate() {
        if import.full_name().unwrap_or("").is_empty() {
            return Err(invalid(in_module(format!("imported_functions[{i}] has no full_name"))));
        }
        if let Some(signature) = import.signature() {
            check_attrs(signature.attrs(), || {
                in_module(format!(
                    "imported_functions[{i}] ('{}') signature attrs",
                    import.full_name().unwrap_or("")
                ))
            })?;
        }
    }

    let descriptors = root.function_descriptors();
    let descriptor_count = descriptors.map_or(0, |d| d.len());
    let signatures = root.function_signatures();
    let signature_count = signatures.map_or(0, |s| s.len());
    if signature_count != descriptor_count {
        return Err(invalid(in_module(format!(
            "function_signatures has {signature_count} entries but function_descriptors has {descriptor_count}; \
             they must match one to one"
        ))));
    }
    for (i, signature) in signatures.into_iter().flatten().enumerate() {
        check_attrs(signature.attrs(), || {
            in_module(format!("function_signatures[{i}] attrs"))
        })?;
    }

    for (i, export) in root.exported_functions().into_iter().flatten().enumerate() {
        let local_name = export.local_name().unwrap_or("");
        if local_name.is_empty() {
            return Err(invalid(in_module(format!("exported_functions[{i}] has no local_name"))));
        }
        let ordinal = export.internal_ordinal();
        let index = usize::try_from(ordinal).ok().filter(|&index| index < descriptor_count);
        let Some(index) = index else {
            return Err(invalid(in_module(format!(
                "exported_functions[{i}] ('{local_name}') internal_ordinal {ordinal} is out of range \
                 [0, {descriptor_count})"
            ))));
        };
        // `signature_count == descriptor_count`, so `index` is in range.
        let signature = signatures.map(|s| s.get(index));
        if signature.and_then(|s| s.calling_convention()).is_none() {
            return Err(invalid(in_module(format!(
                "exported_functions[{i}] ('{local_name}'): function_signatures[{index}] has no calling_convention, \
                 which exports require"
            ))));
        }
    }

    let bytecode = match root.bytecode_data() {
        Some(data) => {
            let start = offset_within(file, data.bytes());
            start..start + data.len()
        }
        None => 0..0,
    };
    let bytecode_len = bytecode.len();

    let mut functions = Vec::with_capacity(descriptor_count);
    for (i, raw) in descriptors.into_iter().flatten().enumerate() {
        let what = |field: &str| in_module(format!("function_descriptors[{i}].{field}"));
        let offset = non_negative(raw.bytecode_offset(), || what("bytecode_offset"))?;
        let length = non_negative(raw.bytecode_length(), || what("bytecode_length"))?;
        let block_count = non_negative_u16(raw.block_count(), || what("block_count"))?;
        let i32_register_count = non_negative_u16(raw.i32_register_count(), || what("i32_register_count"))?;
        let ref_register_count = non_negative_u16(raw.ref_register_count(), || what("ref_register_count"))?;
        if block_count == 0 {
            return Err(invalid(in_module(format!(
                "function_descriptors[{i}] has 0 blocks; a function has at least one"
            ))));
        }
        if length == 0 {
            return Err(invalid(in_module(format!(
                "function_descriptors[{i}] has 0 bytes of bytecode; a function has at least one block"
            ))));
        }
        let end = u64::from(offset) + u64::from(length);
        if end > bytecode_len as u64 {
            return Err(invalid(in_module(format!(
                "function_descriptors[{i}] bytecode range [{offset}, {end}) exceeds bytecode_data length {bytecode_len}"
            ))));
        }
        if i32_register_count > MAX_I32_REGISTER_COUNT || ref_register_count > MAX_REF_REGISTER_COUNT {
            return Err(invalid(in_module(format!(
                "function_descriptors[{i}] declares {i32_register_count} i32 and {ref_register_count} ref registers; \
                 at most {MAX_I32_REGISTER_COUNT} and {MAX_REF_REGISTER_COUNT} are addressable"
            ))));
        }
        let requirements = FeatureBits::from_bits_retain(raw.requirements().bits());
        check_features(requirements, || in_module(format!("function_descriptors[{i}]")))?;
        functions.push(FunctionDescriptor {
            bytecode_offset: offset,
            bytecode_length: length,
            requirements,
            block_count,
            i32_register_count,
            ref_register_count,
        });
    }

    let mut rodata = Vec::new();
    for (i, segment) in root.rodata_segments().into_iter().flatten().enumerate() {
        let kind = segment.compression_type_type();
        if kind != schema::CompressionTypeDef::NONE && kind != schema::CompressionTypeDef::UncompressedDataDef {
            return Err(Error::incompatible(in_module(format!(
                "rodata_segments[{i}] uses compression type {} which halo does not support \
                 (only uncompressed data)",
                kind.0
            ))));
        }
        if let Some(embedded) = segment.embedded_data() {
            let start = offset_within(file, embedded.bytes());
            rodata.push(start..start + embedded.len());
            continue;
        }
        let offset = segment.external_data_offset();
        let length = segment.external_data_length();
        if length == 0 {
            rodata.push(0..0);
            continue;
        }
        let base = layout.rodata_base as u64;
        let range = base
            .checked_add(offset)
            .and_then(|start| Some(start..start.checked_add(length)?))
            .filter(|range| range.end <= file.len() as u64);
        let Some(range) = range else {
            return Err(invalid(in_module(format!(
                "rodata_segments[{i}] external data [{offset}, +{length}) from rodata base {base} \
                 lies outside the file ({} bytes)",
                file.len()
            ))));
        };
        // In bounds of the file, so both ends fit in usize.
        rodata.push(range.start as usize..range.end as usize);
    }

    for (i, segment) in root.rwdata_segments().into_iter().flatten().enumerate() {
        non_negative(segment.byte_size(), || {
            in_module(format!("rwdata_segments[{i}].byte_size"))
        })?;
    }
    if let Some(state) = root.module_state() {
        non_negative(state.global_bytes_capacity(), || {
            in_module("module_state.global_bytes_capacity".to_string())
        })?;
        non_negative(state.global_ref_count(), || {
            in_module("module_state.global_ref_count".to_string())
        })?;
    }

    Ok(Checked {
        functions,
        bytecode,
        rodata,
    })
}

fn check_attrs<'a>(
    attrs: Option<flatbuffers::Vector<'a, flatbuffers::ForwardsUOffset<schema::AttrDef<'a>>>>,
    what: impl Fn() -> String,
) -> Result<()> {
    for (i, attr) in attrs.into_iter().flatten().enumerate() {
        if attr.key().unwrap_or("").is_empty() {
            return Err(invalid(format!("{}[{i}] has no key", what())));
        }
    }
    Ok(())
}
