//! Calling a library's query function and copying the tables it returns into
//! owned, validated Rust values. Every pointer the library hands back is read
//! here and nowhere else.
//!
//! For embedded ELFs the loader knows the image's segments, so each pointer is
//! checked to lie in a readable segment (and each function in an executable
//! one) before it is read: a corrupt table is an error, not a fault. System
//! libraries are trusted as `dlopen` already ran their code.

use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::ops::Range;

use halo_hal::{Error, Result};

use super::abi::{self, DispatchFn, LibraryHeader, LibraryV0};
use super::environment::Environment;
use super::{ExportAttrs, ExportParam, ParamKind, SourceFile, SourceLocation};
use crate::native_faults;

/// Where library pointers may point.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bounds<'a> {
    /// A `dlopen`ed library: pointers are only checked for NULL.
    Trusted,
    /// An embedded ELF image: pointers must lie in these address ranges.
    Image {
        readable: &'a [Range<usize>],
        executable: &'a [Range<usize>],
    },
}

/// Most entries accepted in any one table, so a corrupt count cannot make halo
/// allocate without bound when reading a trusted library.
const MAX_TABLE_ENTRIES: u32 = 1 << 20;
/// Longest string accepted (names, tags, paths).
const MAX_STRING_BYTES: usize = 1 << 16;

/// Types that may be read from library memory: every bit pattern is a valid value.
///
/// # Safety
/// Implementors must be `#[repr(C)]` or primitive, with no invalid bit patterns.
unsafe trait Plain: Copy {}
// SAFETY: pointers, integers and `Option` of function pointers accept any bits.
unsafe impl Plain for *const LibraryHeader {}
// SAFETY: as above.
unsafe impl Plain for *const c_char {}
// SAFETY: as above.
unsafe impl Plain for *const abi::DispatchParameterV0 {}
// SAFETY: as above.
unsafe impl Plain for Option<DispatchFn> {}
// SAFETY: all fields are integers or raw pointers.
unsafe impl Plain for LibraryHeader {}
// SAFETY: all fields are integers, raw pointers or structs of them.
unsafe impl Plain for LibraryV0 {}
// SAFETY: all fields are integers.
unsafe impl Plain for abi::DispatchAttrsV0 {}
// SAFETY: all fields are integers.
unsafe impl Plain for abi::DispatchParameterV0 {}
// SAFETY: all fields are integers or raw pointers.
unsafe impl Plain for abi::SourceLocationV0 {}
// SAFETY: all fields are integers or raw pointers.
unsafe impl Plain for abi::SourceFileV0 {}
// SAFETY: any bits are a valid byte.
unsafe impl Plain for u8 {}

struct Reader<'a> {
    bounds: Bounds<'a>,
}

impl Reader<'_> {
    /// Checks that `len` bytes at `addr` may be read.
    fn check(&self, addr: usize, len: usize, what: &dyn Fn() -> String) -> Result<()> {
        if addr == 0 {
            return Err(Error::invalid_argument(format!("{} is a NULL pointer", what())));
        }
        let Bounds::Image { readable, .. } = self.bounds else {
            return Ok(());
        };
        let inside = readable
            .iter()
            .any(|r| addr >= r.start && matches!(addr.checked_add(len), Some(end) if end <= r.end));
        if !inside {
            return Err(Error::invalid_argument(format!(
                "{} ({len} bytes at {addr:#x}) lies outside the library's loaded segments",
                what()
            )));
        }
        Ok(())
    }

    fn read<T: Plain>(&self, ptr: *const T, what: &dyn Fn() -> String) -> Result<T> {
        self.check(ptr as usize, std::mem::size_of::<T>(), what)?;
        // SAFETY: the range is non-null and readable (inside a loaded segment,
        // or in a trusted library); `T: Plain` accepts any bytes.
        Ok(unsafe { ptr.read_unaligned() })
    }

    /// Element `index` of the array at `base`.
    fn element<T: Plain>(&self, base: *const T, index: usize, what: &dyn Fn() -> String) -> Result<T> {
        if base.is_null() {
            return Err(Error::invalid_argument(format!(
                "{}: the table pointer is NULL",
                what()
            )));
        }
        let size = std::mem::size_of::<T>();
        let addr = (base as usize)
            .checked_add(index.saturating_mul(size))
            .ok_or_else(|| Error::invalid_argument(format!("{} address overflows", what())))?;
        self.read(addr as *const T, what)
    }

    fn bytes(&self, ptr: *const u8, len: usize, what: &dyn Fn() -> String) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        self.check(ptr as usize, len, what)?;
        // SAFETY: `len` bytes at `ptr` are readable, as checked above.
        Ok(unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec())
    }

    /// A NUL-terminated UTF-8 string.
    fn string(&self, ptr: *const c_char, what: &dyn Fn() -> String) -> Result<String> {
        let bytes = match self.bounds {
            Bounds::Trusted => {
                self.check(ptr as usize, 1, what)?;
                // SAFETY: a trusted library's strings are NUL-terminated.
                unsafe { CStr::from_ptr(ptr) }.to_bytes().to_vec()
            }
            Bounds::Image { readable, .. } => {
                let addr = ptr as usize;
                self.check(addr, 1, what)?;
                let segment_end = readable
                    .iter()
                    .find(|r| r.contains(&addr))
                    .map(|r| r.end)
                    .unwrap_or(addr);
                let len = (segment_end - addr).min(MAX_STRING_BYTES + 1);
                // SAFETY: `[addr, addr + len)` lies in one readable segment.
                let window = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
                let end = window.iter().position(|&b| b == 0).ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "{} at {addr:#x} has no NUL terminator within its segment",
                        what()
                    ))
                })?;
                window[..end].to_vec()
            }
        };
        if bytes.len() > MAX_STRING_BYTES {
            return Err(Error::invalid_argument(format!(
                "{} is longer than {MAX_STRING_BYTES} bytes",
                what()
            )));
        }
        String::from_utf8(bytes).map_err(|e| Error::invalid_argument(format!("{} is not UTF-8: {e}", what())))
    }

    /// A string given by pointer and length (NUL not required).
    fn sized_string(&self, ptr: *const c_char, len: u32, what: &dyn Fn() -> String) -> Result<String> {
        if len as usize > MAX_STRING_BYTES {
            return Err(Error::invalid_argument(format!(
                "{} length {len} exceeds {MAX_STRING_BYTES} bytes",
                what()
            )));
        }
        let bytes = self.bytes(ptr.cast(), len as usize, what)?;
        String::from_utf8(bytes).map_err(|e| Error::invalid_argument(format!("{} is not UTF-8: {e}", what())))
    }

    fn is_code(&self, addr: usize) -> bool {
        match self.bounds {
            Bounds::Trusted => addr != 0,
            Bounds::Image { executable, .. } => executable.iter().any(|r| r.contains(&addr)),
        }
    }
}

fn count(value: u32, what: &str) -> Result<usize> {
    if value > MAX_TABLE_ENTRIES {
        return Err(Error::invalid_argument(format!(
            "{what} count {value} exceeds the limit of {MAX_TABLE_ENTRIES}"
        )));
    }
    Ok(value as usize)
}

/// One validated export.
#[derive(Debug, Clone)]
pub(crate) struct Export {
    pub name: String,
    pub function: DispatchFn,
    pub attrs: ExportAttrs,
    pub tag: Option<String>,
    pub params: Option<Vec<ExportParam>>,
    pub source_location: Option<SourceLocation>,
}

/// Everything halo keeps from a library's tables.
#[derive(Debug, Clone)]
pub(crate) struct Tables {
    pub name: String,
    pub imports: Vec<String>,
    pub exports: Vec<Export>,
    pub constant_count: u32,
    pub sources: Vec<SourceFile>,
}

/// Calls the query function at `query` with `environment` and reads the v0.6 library.
///
/// # Safety
/// `query` must be the address of the library's `iree_hal_executable_library_query`
/// in a loaded image that outlives the call, and `bounds` must describe that image.
pub(crate) unsafe fn query(query: usize, environment: &Environment, bounds: Bounds<'_>) -> Result<Tables> {
    let arguments = [abi::LIBRARY_VERSION_LATEST as usize, environment.as_ptr() as usize, 0];
    // SAFETY: the caller guarantees `query` is the query function's address; the ABI's entry point
    // takes a version and a live environment and returns a pointer.
    let result = unsafe { native_faults::call(query, arguments) }
        .map_err(|fault| Error::data_loss(format!("the library's query function faulted: {}", fault.describe())))?
        as *const *const LibraryHeader;
    if result.is_null() {
        return Err(Error::incompatible(format!(
            "the library offers no ABI version at or below {} (its query returned NULL)",
            abi::LIBRARY_VERSION_LATEST
        )));
    }
    read(Reader { bounds }, result)
}

fn read(reader: Reader<'_>, result: *const *const LibraryHeader) -> Result<Tables> {
    let header_ptr = reader.read(result, &|| "the query result".to_string())?;
    let header = reader.read(header_ptr, &|| "the library header".to_string())?;
    if header.version != abi::LIBRARY_VERSION_0_6 {
        let relation = if header.version > abi::LIBRARY_VERSION_0_6 {
            "newer"
        } else {
            "older"
        };
        return Err(Error::incompatible(format!(
            "library ABI version {} is {relation} than the supported version {}",
            header.version,
            abi::LIBRARY_VERSION_0_6
        )));
    }
    let name = reader.string(header.name, &|| "the library name".to_string())?;
    if header.features != abi::LIBRARY_FEATURE_NONE {
        return Err(Error::incompatible(format!(
            "library '{name}' requires features {:#x}, none of which halo implements",
            header.features
        )));
    }
    if header.sanitizer != abi::SANITIZER_NONE {
        let sanitizer = match header.sanitizer {
            abi::SANITIZER_ADDRESS => "AddressSanitizer",
            abi::SANITIZER_MEMORY => "MemorySanitizer",
            abi::SANITIZER_THREAD => "ThreadSanitizer",
            abi::SANITIZER_UNDEFINED => "UndefinedBehaviorSanitizer",
            _ => "an unknown sanitizer",
        };
        return Err(Error::incompatible(format!(
            "library '{name}' was compiled for {sanitizer} (kind {}), which halo's host does not run",
            header.sanitizer
        )));
    }
    let library = reader.read(result.cast::<LibraryV0>(), &|| "the v0.6 library struct".to_string())?;

    let import_count = count(library.imports.count, "import")?;
    let mut imports = Vec::with_capacity(import_count);
    for i in 0..import_count {
        let what = || format!("import {i} name");
        let ptr = reader.element(library.imports.symbols, i, &what)?;
        imports.push(reader.string(ptr, &what)?);
    }

    let exports = read_exports(&reader, &library.exports)?;
    let constant_count = library.constants.count;
    count(constant_count, "library constant")?;

    let source_count = count(library.sources.count, "source file")?;
    let mut sources = Vec::with_capacity(source_count);
    for i in 0..source_count {
        let file = reader.element(library.sources.files, i, &|| format!("source file {i}"))?;
        let path = reader.sized_string(file.path, file.path_length, &|| format!("source file {i} path"))?;
        let content = reader.bytes(file.content, file.content_length as usize, &|| {
            format!("source file {i} ('{path}') content")
        })?;
        sources.push(SourceFile { path, content });
    }

    Ok(Tables {
        name,
        imports,
        exports,
        constant_count,
        sources,
    })
}

fn read_exports(reader: &Reader<'_>, table: &abi::ExportTableV0) -> Result<Vec<Export>> {
    let export_count = count(table.count, "export")?;
    let mut exports: Vec<Export> = Vec::with_capacity(export_count);
    let mut seen: HashMap<String, usize> = HashMap::new();
    for i in 0..export_count {
        let name_ptr = reader.element(table.names, i, &|| format!("export {i} name"))?;
        let name = reader.string(name_ptr, &|| format!("export {i} name"))?;
        if name.is_empty() {
            return Err(Error::invalid_argument(format!("export {i} has an empty name")));
        }
        if let Some(first) = seen.insert(name.clone(), i) {
            return Err(Error::invalid_argument(format!(
                "exports {first} and {i} are both named '{name}'"
            )));
        }
        let label = || format!("export {i} ('{name}')");
        let function = reader
            .element(table.ptrs, i, &|| format!("{} dispatch function entry", label()))?
            .filter(|f| reader.is_code(*f as usize))
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "{}: dispatch function pointer is NULL or not in an executable segment",
                    label()
                ))
            })?;
        let attrs = if table.attrs.is_null() {
            ExportAttrs::default()
        } else {
            let raw = reader.element(table.attrs, i, &|| format!("{} attributes", label()))?;
            ExportAttrs::from_raw(&raw).map_err(|e| Error::out_of_range(format!("{}: {e}", label())))?
        };
        let tag = if table.tags.is_null() {
            None
        } else {
            let ptr = reader.element(table.tags, i, &|| format!("{} tag", label()))?;
            (!ptr.is_null())
                .then(|| reader.string(ptr, &|| format!("{} tag", label())))
                .transpose()?
        };
        let params = read_params(reader, table, i, &attrs, &label)?;
        let source_location = if table.source_locations.is_null() {
            None
        } else {
            let loc = reader.element(table.source_locations, i, &|| format!("{} source location", label()))?;
            (!loc.path.is_null())
                .then(|| {
                    reader
                        .sized_string(loc.path, loc.path_length, &|| format!("{} source path", label()))
                        .map(|path| SourceLocation { path, line: loc.line })
                })
                .transpose()?
        };
        exports.push(Export {
            name,
            function,
            attrs,
            tag,
            params,
            source_location,
        });
    }
    Ok(exports)
}

fn read_params(
    reader: &Reader<'_>,
    table: &abi::ExportTableV0,
    i: usize,
    attrs: &ExportAttrs,
    label: &dyn Fn() -> String,
) -> Result<Option<Vec<ExportParam>>> {
    if table.params.is_null() {
        return Ok(None);
    }
    let list = reader.element(table.params, i, &|| format!("{} parameter table", label()))?;
    if list.is_null() {
        return Ok(None);
    }
    let mut params = Vec::with_capacity(attrs.parameter_count as usize);
    for p in 0..attrs.parameter_count as usize {
        let raw = reader.element(list, p, &|| format!("{} parameter {p}", label()))?;
        let kind = match raw.kind {
            abi::DISPATCH_PARAM_TYPE_CONSTANT => ParamKind::Constant,
            abi::DISPATCH_PARAM_TYPE_BINDING => ParamKind::Binding,
            abi::DISPATCH_PARAM_TYPE_BUFFER_PTR => ParamKind::BufferPtr,
            other => {
                return Err(Error::invalid_argument(format!(
                    "{} parameter {p} has unknown type {other}",
                    label()
                )));
            }
        };
        let name = if table.parameter_names.is_null() || raw.name == u16::MAX {
            None
        } else {
            let what = || format!("{} parameter {p} name (entry {})", label(), raw.name);
            let ptr = reader.element(table.parameter_names, raw.name as usize, &what)?;
            (!ptr.is_null()).then(|| reader.string(ptr, &what)).transpose()?
        };
        params.push(ExportParam {
            kind,
            size: raw.size,
            flags: raw.flags,
            offset: raw.offset,
            name,
        });
    }
    Ok(Some(params))
}

#[cfg(test)]
mod tests {
    use std::ffi::c_int;
    use std::ptr::null;

    use super::*;
    use crate::library::abi::*;

    unsafe extern "C" fn kernel(
        _: *const EnvironmentV0,
        _: *const DispatchStateV0,
        _: *const WorkgroupStateV0,
    ) -> c_int {
        0
    }

    /// A library built in Rust memory, exercising the optional tables real
    /// 3.13 artifacts leave empty (tags, parameters, sources, imports).
    struct Synthetic {
        header: LibraryHeader,
        ptrs: [Option<DispatchFn>; 2],
        names: [*const c_char; 2],
        tags: [*const c_char; 2],
        attrs: [DispatchAttrsV0; 2],
        params_a: [DispatchParameterV0; 2],
        params: [*const DispatchParameterV0; 2],
        param_names: [*const c_char; 1],
        imports: [*const c_char; 1],
        files: [SourceFileV0; 1],
    }

    impl Synthetic {
        fn new() -> Box<Self> {
            let mut s = Box::new(Synthetic {
                header: LibraryHeader {
                    version: 6,
                    name: c"synthetic".as_ptr(),
                    features: 0,
                    sanitizer: 0,
                },
                ptrs: [Some(kernel), Some(kernel)],
                names: [c"first".as_ptr(), c"second".as_ptr()],
                tags: [c"the first".as_ptr(), null()],
                attrs: [
                    DispatchAttrsV0 {
                        flags: DISPATCH_FLAG_WORKGROUP_SIZE_DYNAMIC,
                        constant_count: 1,
                        binding_count: 1,
                        workgroup_size_x: 64,
                        workgroup_size_y: 1,
                        workgroup_size_z: 1,
                        parameter_count: 2,
                        ..Default::default()
                    },
                    DispatchAttrsV0::default(),
                ],
                params_a: [
                    DispatchParameterV0 {
                        kind: DISPATCH_PARAM_TYPE_BINDING,
                        size: 8,
                        flags: 0,
                        name: 0,
                        offset: 0,
                    },
                    DispatchParameterV0 {
                        kind: DISPATCH_PARAM_TYPE_CONSTANT,
                        size: 4,
                        flags: 0,
                        name: u16::MAX,
                        offset: 0,
                    },
                ],
                params: [null(), null()],
                param_names: [c"input".as_ptr()],
                imports: [c"?halo_optional_v1".as_ptr()],
                files: [SourceFileV0 {
                    path_length: 6,
                    path: c"a.mlir".as_ptr(),
                    content_length: 3,
                    content: b"abc".as_ptr(),
                }],
            });
            s.params[0] = s.params_a.as_ptr();
            s
        }

        fn library(&self) -> LibraryV0 {
            LibraryV0 {
                header: &self.header,
                imports: ImportTableV0 {
                    count: 1,
                    symbols: self.imports.as_ptr(),
                },
                exports: ExportTableV0 {
                    count: 2,
                    ptrs: self.ptrs.as_ptr(),
                    attrs: self.attrs.as_ptr(),
                    params: self.params.as_ptr(),
                    occupancy: null(),
                    names: self.names.as_ptr(),
                    tags: self.tags.as_ptr(),
                    parameter_names: self.param_names.as_ptr(),
                    source_locations: null(),
                    stage_locations: null(),
                },
                constants: ConstantTableV0 { count: 3 },
                sources: SourceFileTableV0 {
                    count: 1,
                    files: self.files.as_ptr(),
                },
            }
        }
    }

    fn read_trusted(library: &LibraryV0) -> Result<Tables> {
        read(
            Reader {
                bounds: Bounds::Trusted,
            },
            (library as *const LibraryV0).cast(),
        )
    }

    #[test]
    fn optional_tables_are_copied() {
        let synthetic = Synthetic::new();
        let tables = read_trusted(&synthetic.library()).unwrap();
        assert_eq!(tables.name, "synthetic");
        assert_eq!(tables.imports, ["?halo_optional_v1"]);
        assert_eq!(tables.constant_count, 3);
        assert_eq!(
            tables.sources,
            [SourceFile {
                path: "a.mlir".into(),
                content: b"abc".to_vec()
            }]
        );
        let [first, second] = &tables.exports[..] else {
            panic!("two exports")
        };
        assert_eq!(first.tag.as_deref(), Some("the first"));
        assert!(first.attrs.workgroup_size_dynamic);
        assert_eq!(first.attrs.workgroup_size, [64, 1, 1]);
        let params = first.params.as_ref().unwrap();
        assert_eq!(params[0].kind, ParamKind::Binding);
        assert_eq!(params[0].name.as_deref(), Some("input"));
        assert_eq!(
            (params[1].kind, params[1].size, params[1].name.as_deref()),
            (ParamKind::Constant, 4, None)
        );
        assert_eq!(second.tag, None);
        assert_eq!(second.params, None);
    }

    #[test]
    fn missing_attrs_give_defaults() {
        let synthetic = Synthetic::new();
        let mut library = synthetic.library();
        library.exports.attrs = null();
        library.exports.params = null();
        let tables = read_trusted(&library).unwrap();
        assert_eq!(tables.exports[0].attrs, ExportAttrs::default());
        assert_eq!(tables.exports[0].attrs.workgroup_size, [1, 1, 1]);
    }

    #[test]
    fn broken_export_tables_name_the_export() {
        let mut synthetic = Synthetic::new();
        let mut library = synthetic.library();
        library.exports.names = null();
        let err = read_trusted(&library).unwrap_err();
        assert!(
            err.message().contains("export 0 name: the table pointer is NULL"),
            "{err}"
        );

        synthetic.ptrs[1] = None;
        let err = read_trusted(&synthetic.library()).unwrap_err();
        assert!(
            err.message()
                .contains("export 1 ('second'): dispatch function pointer is NULL"),
            "{err}"
        );

        let mut synthetic = Synthetic::new();
        synthetic.names[1] = c"first".as_ptr();
        let err = read_trusted(&synthetic.library()).unwrap_err();
        assert!(
            err.message().contains("exports 0 and 1 are both named 'first'"),
            "{err}"
        );

        let mut synthetic = Synthetic::new();
        synthetic.params_a[1].kind = 9;
        let err = read_trusted(&synthetic.library()).unwrap_err();
        assert!(
            err.message()
                .contains("export 0 ('first') parameter 1 has unknown type 9"),
            "{err}"
        );

        let mut synthetic = Synthetic::new();
        synthetic.attrs[1].constant_count = 65;
        let err = read_trusted(&synthetic.library()).unwrap_err();
        assert_eq!(err.code(), halo_hal::StatusCode::OutOfRange);
        assert!(err.message().contains("export 1 ('second'): 65 constants"), "{err}");

        let mut synthetic = Synthetic::new();
        synthetic.names[0] = c"".as_ptr();
        let err = read_trusted(&synthetic.library()).unwrap_err();
        assert!(err.message().contains("export 0 has an empty name"), "{err}");

        let synthetic = Synthetic::new();
        let mut library = synthetic.library();
        library.exports.count = u32::MAX;
        let err = read_trusted(&library).unwrap_err();
        assert!(err.message().contains("export count 4294967295 exceeds"), "{err}");
    }

    #[test]
    fn image_bounds_reject_pointers_outside_segments() {
        let synthetic = Synthetic::new();
        let library = synthetic.library();
        let start = &library as *const LibraryV0 as usize;
        let header = &synthetic.header as *const LibraryHeader as usize;
        // Only the library struct and the header are "loaded": the name string is outside.
        let readable = [
            start..start + size_of::<LibraryV0>(),
            header..header + size_of::<LibraryHeader>(),
        ];
        let reader = Reader {
            bounds: Bounds::Image {
                readable: &readable,
                executable: &[],
            },
        };
        let err = read(reader, (&library as *const LibraryV0).cast()).unwrap_err();
        assert!(err.message().contains("the library name"), "{err}");
        assert!(err.message().contains("outside the library's loaded segments"), "{err}");
    }
}
