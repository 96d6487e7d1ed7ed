//! Loads the modules iree-compile 3.13 made (tests/data) and checks what the loader reports
//! against IREE's own reading of the same files (`iree-dump-module --output=flatbuffer-json`).

mod module_support;

use halo_vm::module::{
    BytecodeModule, Dependency, ExportDef, FeatureBits, ImportDef, LoadMode, ARCHIVE_SEGMENT_ALIGNMENT,
    BYTECODE_VERSION_MAJOR,
};
use module_support::{data_path, module_bytes, MODULES};
use serde_json::Value;
use std::sync::Arc;

fn load(stem: &str) -> BytecodeModule {
    BytecodeModule::from_file(&data_path(&format!("{stem}.vmfb"))).unwrap_or_else(|err| panic!("{stem}: {err}"))
}

fn golden(stem: &str) -> Value {
    let text = std::fs::read_to_string(data_path(&format!("{stem}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn list<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn number(value: &Value, key: &str) -> u64 {
    value
        .get(key)
        .map_or(0, |v| v.as_u64().unwrap_or_else(|| v.as_i64().unwrap() as u64))
}

fn byte_list(value: &Value, key: &str) -> Vec<u8> {
    list(value, key).iter().map(|b| b.as_u64().unwrap() as u8).collect()
}

/// Feature bits as flatcc prints them: absent, a number, or space-separated names.
fn features(value: &Value, key: &str) -> FeatureBits {
    match value.get(key) {
        None => FeatureBits::empty(),
        Some(Value::Number(n)) => FeatureBits::from_bits_retain(n.as_u64().unwrap() as u32),
        Some(Value::String(names)) => names
            .split_whitespace()
            .map(|name| FeatureBits::from_name(name).unwrap_or_else(|| panic!("unknown feature {name}")))
            .collect(),
        Some(other) => panic!("unexpected feature value {other}"),
    }
}

fn attrs(value: Option<&Value>) -> Vec<(String, String)> {
    value.map_or(Vec::new(), |v| {
        list(v, "attrs")
            .iter()
            .map(|a| {
                (
                    text(a, "key").unwrap().to_string(),
                    text(a, "value").unwrap_or("").to_string(),
                )
            })
            .collect()
    })
}

fn owned(pairs: Vec<(&str, &str)>) -> Vec<(String, String)> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn optional_flag(value: &Value) -> bool {
    text(value, "flags").is_some_and(|flags| flags.split_whitespace().any(|f| f == "OPTIONAL"))
}

fn check_against_golden(stem: &str) {
    let module = load(stem);
    let json = golden(stem);
    let ctx = |what: &str| format!("{stem}: {what}");

    assert_eq!(module.name(), text(&json, "name").unwrap(), "{}", ctx("name"));
    assert_eq!(
        u64::from(module.version()),
        number(&json, "version"),
        "{}",
        ctx("version")
    );
    assert_eq!(
        module.requirements(),
        features(&json, "requirements"),
        "{}",
        ctx("requirements")
    );
    let version = number(&json, "bytecode_version") as u32;
    assert_eq!(
        module.bytecode_version(),
        ((version >> 16) as u16, version as u16),
        "{}",
        ctx("bytecode_version")
    );

    let json_attrs: Vec<(String, String)> = attrs(Some(&json));
    assert_eq!(owned(module.attrs()), json_attrs, "{}", ctx("attrs"));

    let types: Vec<&str> = list(&json, "types")
        .iter()
        .map(|t| text(t, "full_name").unwrap())
        .collect();
    assert_eq!(module.types(), types, "{}", ctx("types"));

    let dependencies: Vec<Dependency> = list(&json, "dependencies")
        .iter()
        .map(|d| Dependency {
            name: text(d, "name").unwrap(),
            minimum_version: number(d, "minimum_version") as u32,
            optional: optional_flag(d),
        })
        .collect();
    assert_eq!(module.dependencies(), dependencies, "{}", ctx("dependencies"));

    let imports: Vec<ImportDef> = list(&json, "imported_functions")
        .iter()
        .map(|i| ImportDef {
            full_name: text(i, "full_name").unwrap(),
            calling_convention: i.get("signature").and_then(|s| text(s, "calling_convention")),
            attrs: Vec::new(),
            optional: optional_flag(i),
        })
        .collect();
    let mut loaded_imports = module.imports();
    for (loaded, json_import) in loaded_imports.iter_mut().zip(list(&json, "imported_functions")) {
        assert_eq!(
            owned(std::mem::take(&mut loaded.attrs)),
            attrs(json_import.get("signature"))
        );
    }
    assert_eq!(loaded_imports, imports, "{}", ctx("imports"));

    let exports: Vec<ExportDef> = list(&json, "exported_functions")
        .iter()
        .map(|e| ExportDef {
            local_name: text(e, "local_name").unwrap(),
            internal_ordinal: number(e, "internal_ordinal") as u32,
        })
        .collect();
    assert_eq!(module.exports(), exports, "{}", ctx("exports"));

    let signatures = list(&json, "function_signatures");
    let descriptors = list(&json, "function_descriptors");
    assert_eq!(
        module.function_count() as usize,
        descriptors.len(),
        "{}",
        ctx("function count")
    );
    assert_eq!(signatures.len(), descriptors.len(), "{}", ctx("signature count"));
    let bytecode = byte_list(&json, "bytecode_data");
    assert_eq!(module.bytecode_data(), bytecode.as_slice(), "{}", ctx("bytecode_data"));
    for (i, (signature, descriptor)) in signatures.iter().zip(descriptors).enumerate() {
        let ordinal = i as u32;
        let loaded = module.function_signature(ordinal).unwrap();
        assert_eq!(
            loaded.calling_convention,
            text(signature, "calling_convention"),
            "{}",
            ctx("cconv")
        );
        assert_eq!(
            owned(loaded.attrs),
            attrs(Some(signature)),
            "{}",
            ctx("signature attrs")
        );

        let function = module.function(ordinal).unwrap();
        assert_eq!(
            u64::from(function.bytecode_offset),
            number(descriptor, "bytecode_offset")
        );
        assert_eq!(
            u64::from(function.bytecode_length),
            number(descriptor, "bytecode_length")
        );
        assert_eq!(
            function.requirements,
            features(descriptor, "requirements"),
            "{}",
            ctx("function requirements")
        );
        assert_eq!(u64::from(function.block_count), number(descriptor, "block_count"));
        assert_eq!(
            u64::from(function.i32_register_count),
            number(descriptor, "i32_register_count")
        );
        assert_eq!(
            u64::from(function.ref_register_count),
            number(descriptor, "ref_register_count")
        );
        let start = function.bytecode_offset as usize;
        let end = start + function.bytecode_length as usize;
        assert_eq!(module.function_bytecode(ordinal).unwrap(), &bytecode[start..end]);
    }
    assert_eq!(module.function(module.function_count()), None);

    let segments = list(&json, "rodata_segments");
    assert_eq!(
        module.rodata_count() as usize,
        segments.len(),
        "{}",
        ctx("rodata count")
    );
    for (i, segment) in segments.iter().enumerate() {
        let ordinal = i as u32;
        let data = module.rodata(ordinal).unwrap();
        if segment.get("embedded_data").is_some() {
            assert_eq!(
                data,
                byte_list(segment, "embedded_data").as_slice(),
                "{}",
                ctx("embedded rodata")
            );
            assert_eq!(module.rodata_is_external(ordinal), Some(false));
        } else {
            let layout = module.layout();
            let start = layout.rodata_base + number(segment, "external_data_offset") as usize;
            assert_eq!(
                module.rodata_range(ordinal).unwrap(),
                start..start + number(segment, "external_data_length") as usize
            );
            assert_eq!(data.len() as u64, number(segment, "external_data_length"));
            assert_eq!(module.rodata_is_external(ordinal), Some(true));
        }
    }

    let rwdata: Vec<u32> = list(&json, "rwdata_segments")
        .iter()
        .map(|s| number(s, "byte_size") as u32)
        .collect();
    assert_eq!(module.rwdata_sizes(), rwdata, "{}", ctx("rwdata"));
    let state = json.get("module_state").cloned().unwrap_or(Value::Null);
    assert_eq!(
        u64::from(module.global_bytes_capacity()),
        number(&state, "global_bytes_capacity")
    );
    assert_eq!(u64::from(module.global_ref_count()), number(&state, "global_ref_count"));
    assert_eq!(module.has_debug_database(), json.get("debug_database").is_some());

    // The same bytes from memory load to the same module.
    let from_memory = BytecodeModule::from_bytes(module_bytes(stem)).unwrap();
    assert_eq!(from_memory.exports(), module.exports());
    assert_eq!(from_memory.layout(), module.layout());
    assert!(module.bytes().is_mapped() && !from_memory.bytes().is_mapped());
    // Read whole into memory of its own: the same bytes, page-aligned like a map.
    let preloaded = BytecodeModule::open(&data_path(&format!("{stem}.vmfb")), LoadMode::Preload).unwrap();
    assert_eq!(preloaded.exports(), module.exports());
    assert_eq!(preloaded.layout(), module.layout());
    assert!(preloaded.bytes().is_mapped());
    assert_eq!(&preloaded.bytes()[..], &module.bytes()[..]);
}

#[test]
fn every_module_matches_iree_dump_module_json() {
    for stem in MODULES {
        check_against_golden(stem);
    }
}

#[test]
fn add_module() {
    let module = load("add");
    assert_eq!(module.name(), "m");
    assert_eq!(module.bytecode_version(), (BYTECODE_VERSION_MAJOR, 0));
    assert_eq!(module.requirements(), FeatureBits::empty());
    assert_eq!(module.function_count(), 1);
    assert_eq!(module.function_name(0), Some("add"));
    assert_eq!(module.function_signature(0).unwrap().calling_convention, Some("0ii_i"));
    assert_eq!(module.find_export("add").map(|e| e.internal_ordinal), Some(0));
    assert_eq!(module.find_export("nope"), None);
    // iree-compile wraps the module in a polyglot ZIP by default: a 64-byte local-file header
    // ("module.fb" plus an extra field that pads the FlatBuffer to 64 + 4).
    let layout = module.layout();
    assert_eq!(layout.zip_header_len, 64);
    assert_eq!(layout.flatbuffer.start, 68);
    // Each function starts with a block marker (0x79).
    assert_eq!(module.function_bytecode(0).unwrap()[0], 0x79);
}

#[test]
fn external_rodata_counts_from_the_aligned_end_of_the_flatbuffer() {
    let expected: Vec<u8> = (0..4096).map(|i| (i % 251) as u8).collect();
    for (stem, zip_header_len, first_offset) in [("rodata", 64, 64), ("rodata_nozip", 0, 0)] {
        let module = load(stem);
        let layout = module.layout().clone();
        assert_eq!(layout.zip_header_len, zip_header_len, "{stem}");
        assert_eq!(
            layout.rodata_base,
            layout.flatbuffer.end.next_multiple_of(ARCHIVE_SEGMENT_ALIGNMENT)
        );
        assert_eq!(
            module.rodata(0).unwrap(),
            [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]
        );
        assert_eq!(module.rodata_is_external(0), Some(false));
        // With the ZIP wrapper the segment has its own 64-byte local-file header, which the
        // compiler accounts for in `external_data_offset`.
        let range = module.rodata_range(1).unwrap();
        assert_eq!(range.start, layout.rodata_base + first_offset, "{stem}");
        assert_eq!(module.rodata(1).unwrap(), expected.as_slice(), "{stem}");
        // Zero-copy: a memory map is page-aligned, so file alignment is memory alignment.
        assert_eq!(
            module.rodata(1).unwrap().as_ptr() as usize % ARCHIVE_SEGMENT_ALIGNMENT,
            0
        );
        assert_eq!(module.global_bytes_capacity(), 4);
        assert_eq!(module.global_ref_count(), 1);
        assert_eq!(module.rodata(2), None);
    }
}

#[test]
fn rodata_outlives_the_module_through_its_bytes() {
    let module = load("rodata");
    let bytes = Arc::clone(module.bytes());
    let range = module.rodata_range(1).unwrap();
    drop(module);
    assert_eq!(bytes[range][..4], [0, 1, 2, 3]);
}

#[test]
fn float_module_requires_float_extensions() {
    let module = load("float");
    assert_eq!(module.requirements(), FeatureBits::EXT_F32 | FeatureBits::EXT_F64);
    assert_eq!(module.function(0).unwrap().requirements, FeatureBits::EXT_F32);
    assert_eq!(module.function(1).unwrap().requirements, FeatureBits::EXT_F64);
    assert_eq!(module.types(), ["f32", "f64"]);
    // f64 values take register pairs.
    assert_eq!(module.function(1).unwrap().i32_register_count, 4);
    assert_eq!(module.function_signature(1).unwrap().calling_convention, Some("0FF_F"));
}

#[test]
fn imports_dependencies_and_stripped_names() {
    let module = load("imports");
    assert_eq!(module.version(), 3);
    assert_eq!(
        module.dependencies(),
        [
            Dependency {
                name: "other",
                minimum_version: 2,
                optional: false
            },
            Dependency {
                name: "extra",
                minimum_version: 0,
                optional: true
            },
        ]
    );
    let imports = module.imports();
    let summary: Vec<(&str, Option<&str>, bool)> = imports
        .iter()
        .map(|i| (i.full_name, i.calling_convention, i.optional))
        .collect();
    assert_eq!(
        summary,
        [
            ("other.double", Some("0i_i"), false),
            ("other.maybe", Some("0i_i"), true),
            ("extra.probe", Some("0v_i"), true),
        ]
    );
    // The export is renamed; the private helper stays an internal function.
    assert_eq!(module.exports()[0].local_name, "double_it");
    assert_eq!(module.function_count(), 3);
    // Compiled with the source map stripped: names come from exports only.
    assert!(!module.has_debug_database());
    assert_eq!(module.function_name(0), Some("double_it"));
    assert_eq!(module.function_name(1), None);
    assert_eq!(module.function_name(2), Some("use_helper"));
    assert_eq!(module.function_name(3), None);
}

#[test]
fn whole_program_module_has_abi_declaration_and_hal_imports() {
    let module = load("mul");
    assert_eq!(module.name(), "module");
    assert_eq!(module.requirements(), FeatureBits::YIELD | FeatureBits::UNWIND);
    let export = module.find_export("mul").unwrap();
    let signature = module.function_signature(export.internal_ordinal).unwrap();
    assert_eq!(signature.calling_convention, Some("0rr_r"));
    assert_eq!(
        signature.attr("iree.abi.declaration"),
        Some("sync func @mul(%input0: tensor<4xf32>, %input1: tensor<4xf32>) -> (%output0: tensor<4xf32>)")
    );
    assert_eq!(
        module.dependencies(),
        [Dependency {
            name: "hal",
            minimum_version: 7,
            optional: false
        }]
    );
    assert!(module
        .imports()
        .iter()
        .all(|i| i.full_name.starts_with("hal.") && !i.optional));
    assert!(module.types().contains(&"!hal.buffer_view"));
    // The CPU kernel is an ELF stored after the FlatBuffer. Only the rodata base is 64-byte
    // aligned: the segment itself is aligned to its own `alignment` (16 for executables), here
    // 96 bytes past the base, after the ZIP local-file header naming it.
    let elf = (0..module.rodata_count())
        .find(|&i| module.rodata(i).unwrap().starts_with(b"\x7fELF"))
        .unwrap();
    assert_eq!(module.rodata_is_external(elf), Some(true));
    let range = module.rodata_range(elf).unwrap();
    assert_eq!(range.start, module.layout().rodata_base + 96);
    assert_eq!(range.start % 16, 0);
    assert_eq!(module.rodata(elf).unwrap().as_ptr() as usize % 16, 0);
}

#[test]
fn incomplete_debug_database_does_not_misname_functions() {
    // iree-compile 3.13 writes one source map (the last function's, at index 0) however many
    // functions a module has; reading it by ordinal would call function 0 "__init".
    let module = load("mul");
    assert!(module.has_debug_database());
    let maps = module.def().debug_database().unwrap().functions().unwrap();
    assert_eq!(maps.len(), 1);
    assert_eq!(maps.get(0).local_name(), Some("__init"));
    assert_eq!(module.function_name(0), None);
    assert_eq!(module.function_name(1), Some("mul"));
    assert_eq!(module.function_name(2), Some("__init"));
}

/// Where `iree-dump-module` is, if this machine has it: `$IREE_DUMP_MODULE`, else `PATH`.
fn iree_dump_module() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("IREE_DUMP_MODULE") {
        return Some(path.into());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("iree-dump-module"))
        .find(|path| path.is_file())
}

#[test]
fn golden_json_matches_live_iree_dump_module() {
    let Some(tool) = iree_dump_module() else {
        eprintln!("skipped: iree-dump-module not found (set IREE_DUMP_MODULE or put it on PATH)");
        return;
    };
    for stem in MODULES {
        let output = std::process::Command::new(&tool)
            .arg("--output=flatbuffer-json")
            .arg(data_path(&format!("{stem}.vmfb")))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{stem}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let live: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            live,
            golden(stem),
            "{stem}: committed JSON is stale; run tests/data/regenerate.sh"
        );
    }
}

/// The functions a caller means: `halo compile`'s `$async` forms and the compiler's `__init` are
/// left out, and every other export is kept, in export order.
#[test]
fn public_functions_leave_out_the_compilers_own_exports() {
    let fixture = |path: &str| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(path);
        BytecodeModule::from_file(&path).unwrap_or_else(|err| panic!("{path:?}: {err}"))
    };
    assert_eq!(
        fixture("benchmark-models/squeezenet.vmfb").public_functions(),
        ["squeezenet"]
    );
    assert_eq!(
        fixture("models/control_flow.vmfb").public_functions(),
        ["if_positive", "sum4", "halve_until", "collatz", "for_accumulate"]
    );
}
