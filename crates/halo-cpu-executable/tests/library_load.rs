//! Loading real `iree-compile` 3.13 executables in both CPU formats and running their kernels.

use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use halo_cpu_executable::library::{
    supported_formats, DispatchState, HostImport, Library, WorkgroupState, EMBEDDED_ELF_FORMAT, SYSTEM_ELF_FORMAT,
};
use halo_hal::StatusCode;

const FORMATS: [&str; 2] = [EMBEDDED_ELF_FORMAT, SYSTEM_ELF_FORMAT];

fn data(name: &str, format: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/{name}.{format}.so"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn load(name: &str, format: &str) -> Library {
    Library::load(format, &data(name, format), &[]).unwrap_or_else(|e| panic!("{name} {format}: {e}"))
}

/// A dispatch state over host slices; the slices must outlive its use.
fn state(
    constants: &[u32],
    bindings: &mut [&mut [u8]],
    count: [u32; 3],
) -> (DispatchState, Vec<*mut c_void>, Vec<usize>) {
    let ptrs: Vec<*mut c_void> = bindings.iter_mut().map(|b| b.as_mut_ptr().cast()).collect();
    let lengths: Vec<usize> = bindings.iter().map(|b| b.len()).collect();
    let state = DispatchState {
        workgroup_size_x: 1,
        workgroup_size_y: 1,
        workgroup_size_z: 1,
        constant_count: constants.len() as u16,
        workgroup_count_x: count[0],
        workgroup_count_y: count[1],
        workgroup_count_z: count[2] as u16,
        max_concurrency: 1,
        binding_count: bindings.len() as u8,
        constants: constants.as_ptr(),
        binding_ptrs: ptrs.as_ptr(),
        binding_lengths: lengths.as_ptr(),
    };
    (state, ptrs, lengths)
}

fn workgroup(x: u32, y: u32, z: u16) -> WorkgroupState {
    WorkgroupState {
        workgroup_id_x: x,
        workgroup_id_y: y,
        workgroup_id_z: z,
        reserved: 0,
        processor_id: 0,
        local_memory: std::ptr::null_mut(),
        local_memory_size: 0,
    }
}

fn i32_bytes(values: impl IntoIterator<Item = i32>) -> Vec<u8> {
    values.into_iter().flat_map(i32::to_le_bytes).collect()
}

fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn both_formats_of_the_hosts_architecture_are_supported() {
    assert_eq!(supported_formats(), &FORMATS);
}

#[test]
fn exports_names_and_attrs_match_the_source() {
    for format in FORMATS {
        let library = load("library_kernels", format);
        assert_eq!(library.format(), format);
        assert_eq!(library.name(), "halo_test_kernels");
        assert_eq!(library.export_count(), 2);
        assert_eq!(library.export_name(0), Some("scale_and_offset"));
        assert_eq!(library.export_name(1), Some("add_workgroup_id"));
        assert_eq!(library.export_name(2), None);
        assert_eq!(library.export_ordinal("add_workgroup_id"), Some(1));
        assert_eq!(library.export_ordinal("missing"), None);
        assert_eq!(library.constant_count(), 0);
        assert!(library.import_names().is_empty());

        let attrs = library.export_attrs(0);
        assert_eq!((attrs.constant_count, attrs.binding_count), (2, 2), "{format}");
        assert_eq!(attrs.workgroup_size, [1, 1, 1], "{format}");
        assert_eq!(attrs.local_memory_bytes, 0);
        let attrs = library.export_attrs(1);
        assert_eq!((attrs.constant_count, attrs.binding_count), (0, 2), "{format}");

        let location = library.export_source_location(0).expect("source location");
        assert!(location.path.ends_with("library_kernels.mlir"), "{location:?}");
        assert!(location.line > 0);
    }
}

#[test]
fn scale_and_offset_computes_every_element() {
    for format in FORMATS {
        let library = load("library_kernels", format);
        let mut input = i32_bytes(0..64);
        let mut output = vec![0u8; 256];
        let constants = [3u32, (-7i32) as u32];
        let (state, _ptrs, _lengths) = state(&constants, &mut [&mut input, &mut output], [16, 1, 1]);
        // SAFETY: the state points at live, exclusive slices of the sizes the kernel uses.
        unsafe { library.dispatch_inline(0, &state) }.unwrap();
        let expected: Vec<i32> = (0..64).map(|i| 3 * i - 7).collect();
        assert_eq!(i32s(&output), expected, "{format}");
    }
}

/// Kernels get copies of a state's arrays up to 64 constants and 16 bindings, and the caller's
/// own arrays past that: both reach them whole.
#[test]
fn states_with_more_constants_and_bindings_than_the_kernel_declares_compute_alike() {
    let library = load("library_kernels", EMBEDDED_ELF_FORMAT);
    for (constant_count, binding_count) in [(64, 16), (65, 16), (64, 17), (300, 40)] {
        let mut input = i32_bytes(0..64);
        let mut output = vec![0u8; 256];
        let mut spare = vec![vec![0u8; 4]; binding_count - 2];
        let mut constants = vec![0u32; constant_count];
        constants[..2].copy_from_slice(&[3, (-7i32) as u32]);
        let mut bindings: Vec<&mut [u8]> = vec![&mut input, &mut output];
        bindings.extend(spare.iter_mut().map(Vec::as_mut_slice));
        let (state, _ptrs, _lengths) = state(&constants, &mut bindings, [16, 1, 1]);
        // SAFETY: the state points at live, exclusive slices of the sizes the kernel uses.
        unsafe { library.dispatch_inline(0, &state) }.unwrap();
        let expected: Vec<i32> = (0..64).map(|i| 3 * i - 7).collect();
        assert_eq!(
            i32s(&output),
            expected,
            "{constant_count} constants, {binding_count} bindings"
        );
    }
}

#[test]
fn workgroups_see_all_three_ids() {
    for format in FORMATS {
        let library = load("library_kernels", format);
        let input: Vec<f32> = (0..24).map(|i| i as f32 * 0.5).collect();
        let mut input_bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut output = vec![0u8; 96];
        let (state, _ptrs, _lengths) = state(&[], &mut [&mut input_bytes, &mut output], [4, 3, 2]);
        // SAFETY: as above.
        unsafe { library.dispatch_inline(1, &state) }.unwrap();
        let got: Vec<f32> = output
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        for z in 0..2 {
            for y in 0..3 {
                for x in 0..4 {
                    let i = z * 12 + y * 4 + x;
                    let want = input[i] * 2.0 + (100 * z + 10 * y + x) as f32;
                    assert_eq!(got[i], want, "{format} at ({x}, {y}, {z})");
                }
            }
        }
    }
}

#[test]
fn workgroups_run_concurrently_from_many_threads() {
    for format in FORMATS {
        let library = load("library_kernels", format);
        let mut input = i32_bytes(0..64);
        let mut output = vec![0u8; 256];
        let constants = [5u32, 1];
        let (state, _ptrs, _lengths) = state(&constants, &mut [&mut input, &mut output], [16, 1, 1]);
        struct Shared<'a>(&'a Library, DispatchState);
        // SAFETY: the state's pointers address slices that outlive the scope;
        // workgroups write disjoint elements, the kernel contract.
        unsafe impl Sync for Shared<'_> {}
        let shared = Shared(&library, state);
        std::thread::scope(|scope| {
            for worker in 0..4u32 {
                let shared = &shared;
                scope.spawn(move || {
                    for x in (worker..16).step_by(4) {
                        // SAFETY: see `Shared`.
                        unsafe { shared.0.dispatch_workgroup(0, &shared.1, &workgroup(x, 0, 0)) }.unwrap();
                    }
                });
            }
        });
        assert_eq!(
            i32s(&output),
            (0..64).map(|i| 5 * i + 1).collect::<Vec<_>>(),
            "{format}"
        );
    }
}

#[test]
fn bad_ordinal_and_short_state_are_errors() {
    let library = load("library_kernels", EMBEDDED_ELF_FORMAT);
    let mut input = vec![0u8; 256];
    let mut output = vec![0u8; 256];
    let (state, _ptrs, _lengths) = state(&[1, 2], &mut [&mut input, &mut output], [16, 1, 1]);
    // SAFETY: the ordinal is rejected before any kernel runs.
    let err = unsafe { library.dispatch_workgroup(2, &state, &workgroup(0, 0, 0)) }.unwrap_err();
    assert_eq!(err.code(), StatusCode::OutOfRange);
    assert!(
        err.message().contains("ordinal 2") && err.message().contains("2 exports"),
        "{err}"
    );

    let mut empty_grid = state;
    empty_grid.workgroup_count_x = 0;
    // SAFETY: the ordinal is rejected before any kernel runs.
    let err = unsafe { library.dispatch_inline(7, &empty_grid) }.unwrap_err();
    assert_eq!(err.code(), StatusCode::OutOfRange);

    let mut short = state;
    short.binding_count = 1;
    // SAFETY: the binding count is rejected before any kernel runs.
    let err = unsafe { library.dispatch_workgroup(0, &short, &workgroup(0, 0, 0)) }.unwrap_err();
    assert_eq!(err.code(), StatusCode::InvalidArgument);
    assert!(
        err.message().contains("scale_and_offset") && err.message().contains("1 bindings"),
        "{err}"
    );
}

#[test]
fn constants_must_match_the_library_declaration() {
    let err = Library::load(EMBEDDED_ELF_FORMAT, &data("library_kernels", EMBEDDED_ELF_FORMAT), &[1]).unwrap_err();
    assert_eq!(err.code(), StatusCode::InvalidArgument);
    assert!(
        err.message().contains("declares 0 specialization constants but 1"),
        "{err}"
    );
}

static CALLS: AtomicU32 = AtomicU32::new(0);

/// `params` is the compiler's packed struct: `{ i32 result; i32 a; i32 b; }`.
unsafe extern "C" fn mul_add(params: *mut c_void, context: *mut c_void, _reserved: *mut c_void) -> c_int {
    // SAFETY: the kernel passes its params struct; the context is `CALLS` or NULL.
    unsafe {
        let p = params.cast::<i32>();
        let (a, b) = (*p.add(1), *p.add(2));
        if b == 99 {
            return 7;
        }
        *p = a * b + 1;
        if let Some(counter) = context.cast::<AtomicU32>().as_ref() {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }
    0
}

#[test]
fn imports_resolve_to_host_functions() {
    for format in FORMATS {
        let bytes = data("library_import", format);
        let err = Library::load(format, &bytes, &[]).unwrap_err();
        assert_eq!(err.code(), StatusCode::NotFound, "{format}");
        assert!(err.message().contains("'halo_test_mul_add'"), "{err}");

        // SAFETY: `CALLS` is a static atomic, valid forever and thread-safe.
        let import = unsafe {
            HostImport::new("halo_test_mul_add", mul_add).with_context(std::ptr::addr_of!(CALLS).cast_mut().cast())
        };
        let library = Library::load_with_imports(format, &bytes, &[], &[import]).unwrap();
        assert_eq!(library.import_names(), ["halo_test_mul_add".to_string()]);
        let before = CALLS.load(Ordering::Relaxed);
        let mut output = vec![0u8; 32];
        let (state, _ptrs, _lengths) = state(&[4], &mut [&mut output], [1, 1, 1]);
        // SAFETY: the state points at a live 32-byte output slice.
        unsafe { library.dispatch_inline(0, &state) }.unwrap();
        assert_eq!(i32s(&output), (0..8).map(|i| 4 * i + 1).collect::<Vec<_>>(), "{format}");
        assert!(CALLS.load(Ordering::Relaxed) - before >= 8);
    }
}

#[test]
fn a_failing_kernel_names_the_export_and_workgroup() {
    let bytes = data("library_import", EMBEDDED_ELF_FORMAT);
    let import = HostImport::new("halo_test_mul_add", mul_add);
    let library = Library::load_with_imports(EMBEDDED_ELF_FORMAT, &bytes, &[], &[import]).unwrap();
    let mut output = vec![0u8; 32];
    let (state, _ptrs, _lengths) = state(&[99], &mut [&mut output], [1, 1, 1]);
    // SAFETY: the state points at a live 32-byte output slice.
    let err = unsafe { library.dispatch_workgroup(0, &state, &workgroup(0, 0, 0)) }.unwrap_err();
    assert_eq!(err.code(), StatusCode::Internal);
    assert!(
        err.message().contains("'call_import'") && err.message().contains("code 7"),
        "{err}"
    );
    assert!(err.message().contains("workgroup (0, 0, 0)"), "{err}");
}

/// System libraries load from anonymous in-memory files, so no file is ever written to the
/// temporary directory (and none is left behind when loading crashes the process).
#[test]
fn loading_many_times_writes_no_temporary_files() {
    let prefix = format!("halo-executable-{}-", std::process::id());
    let scan = || -> Vec<PathBuf> {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix))
            })
            .collect()
    };
    for format in FORMATS {
        let bytes = data("library_kernels", format);
        let libraries: Vec<Library> = (0..50).map(|_| Library::load(format, &bytes, &[]).unwrap()).collect();
        assert!(libraries.iter().all(|l| l.export_count() == 2));
        assert!(scan().is_empty(), "{:?}", scan());
    }
}

/// `dlopen` matches loaded objects by path: libraries loaded in turn, with the earlier one
/// closed or still open, each keep their own exports.
#[test]
fn system_libraries_loaded_in_turn_keep_their_own_exports() {
    let kernels = data("library_kernels", SYSTEM_ELF_FORMAT);
    let import = data("library_import", SYSTEM_ELF_FORMAT);
    let first = Library::load(SYSTEM_ELF_FORMAT, &kernels, &[]).unwrap();
    drop(first);
    let load_import = || {
        let host = HostImport::new("halo_test_mul_add", mul_add);
        Library::load_with_imports(SYSTEM_ELF_FORMAT, &import, &[], &[host]).unwrap()
    };
    let second = load_import();
    let third = Library::load(SYSTEM_ELF_FORMAT, &kernels, &[]).unwrap();
    let fourth = load_import();
    assert_eq!(third.export_name(0), Some("scale_and_offset"));
    for library in [&second, &fourth] {
        assert_eq!(library.export_count(), 1);
        assert_eq!(library.export_name(0), Some("call_import"));
    }
}

/// Every artifact the fixture generator produced loads, and both formats of one source agree.
#[test]
fn fixture_executables_load_in_both_formats() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables");
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    let mut loaded = 0;
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let Some(stem) = name.strip_suffix(&format!(".{EMBEDDED_ELF_FORMAT}.so")) else {
            continue;
        };
        let embedded = Library::load(EMBEDDED_ELF_FORMAT, &std::fs::read(&path).unwrap(), &[]);
        // Fixtures that import host functions or need constants fail here by design.
        let embedded = match embedded {
            Ok(library) => library,
            Err(e) if e.code() == StatusCode::NotFound && e.message().contains("import") => continue,
            Err(e) => panic!("{name}: {e}"),
        };
        assert!(embedded.export_count() > 0, "{name}");
        let system_path = dir.join(format!("{stem}.{SYSTEM_ELF_FORMAT}.so"));
        if let Ok(bytes) = std::fs::read(&system_path) {
            let system = Library::load(SYSTEM_ELF_FORMAT, &bytes, &[]).unwrap_or_else(|e| panic!("{stem}: {e}"));
            assert_eq!(system.export_count(), embedded.export_count(), "{stem}");
            for ordinal in 0..embedded.export_count() {
                assert_eq!(system.export_name(ordinal), embedded.export_name(ordinal), "{stem}");
                assert_eq!(system.export_attrs(ordinal), embedded.export_attrs(ordinal), "{stem}");
            }
        }
        loaded += 1;
    }
    eprintln!("loaded {loaded} fixture executables from {}", dir.display());
}
