//! Malformed modules: each is rejected with an error that names what is wrong, never a panic.

mod module_support;

use halo_hal::StatusCode;
use halo_vm::module::schema::{BytecodeModuleDef, ExportFunctionDef, RodataSegmentDef};
use halo_vm::module::{BytecodeModule, MAX_I32_REGISTER_COUNT, MAX_REF_REGISTER_COUNT};
use module_support::*;

fn expect_err(result: halo_hal::Result<BytecodeModule>, code: StatusCode, needles: &[&str]) -> halo_hal::Error {
    let err = match result {
        Ok(module) => panic!("expected an error, loaded {module:?}"),
        Err(err) => err,
    };
    assert_eq!(err.code(), code, "{err}");
    let text = err.to_string();
    for needle in needles {
        assert!(text.contains(needle), "error {text:?} does not mention {needle:?}");
    }
    err
}

#[test]
fn empty_input() {
    expect_err(
        BytecodeModule::from_bytes(Vec::new()),
        StatusCode::InvalidArgument,
        &["empty"],
    );
    let path = std::env::temp_dir().join(format!("halo-vm-empty-{}.vmfb", std::process::id()));
    std::fs::write(&path, b"").unwrap();
    let err = expect_err(
        BytecodeModule::from_file(&path),
        StatusCode::InvalidArgument,
        &["empty"],
    );
    assert!(err.to_string().contains(&path.display().to_string()), "{err}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn missing_file_names_the_path() {
    let path = data_path("no-such-module.vmfb");
    let err = expect_err(
        BytecodeModule::from_file(&path),
        StatusCode::NotFound,
        &["no-such-module.vmfb"],
    );
    assert!(err.to_string().contains("loading bytecode module"), "{err}");
}

/// Truncating a module loads only when everything the module uses is still there: the FlatBuffer
/// and the external rodata (the ZIP central directory after them is not needed).
#[test]
fn truncated_at_every_length() {
    for stem in MODULES {
        let bytes = module_bytes(stem);
        let module = BytecodeModule::from_bytes(bytes.clone()).unwrap();
        let needed = (0..module.rodata_count())
            .map(|i| module.rodata_range(i).unwrap().end)
            .fold(module.layout().flatbuffer.end, usize::max);
        let stride = if bytes.len() > 2000 { 3 } else { 1 };
        for len in (0..bytes.len()).step_by(stride).chain([needed - 1, needed]) {
            let result = BytecodeModule::from_bytes(&bytes[..len]);
            match result {
                Ok(module) => {
                    assert!(
                        len >= needed,
                        "{stem} truncated to {len} of {needed} needed bytes loaded"
                    );
                    touch_everything(&module);
                }
                Err(err) => {
                    assert!(len < needed, "{stem} truncated to {len} (needs {needed}): {err}");
                    assert_eq!(err.code(), StatusCode::InvalidArgument, "{stem} at {len}: {err}");
                }
            }
        }
    }
}

#[test]
fn wrong_identifier() {
    let result = load_patched("add", |module, bytes| {
        let at = module.layout().flatbuffer.start + 4;
        bytes[at..at + 4].copy_from_slice(b"TFL3");
    });
    expect_err(
        result,
        StatusCode::InvalidArgument,
        &["identifier \"TFL3\"", "byte offset 68", "not a .vmfb"],
    );
}

#[test]
fn wrong_size_prefix() {
    for stem in ["add", "rodata_nozip"] {
        let len = module_bytes(stem).len();
        // Past the end of the file.
        let result = load_patched(stem, |module, bytes| {
            let at = module.layout().flatbuffer.start - 4;
            put(bytes, at, (len as u32).to_le_bytes());
        });
        expect_err(result, StatusCode::InvalidArgument, &["size prefix", "only"]);
        let result = load_patched(stem, |module, bytes| {
            let at = module.layout().flatbuffer.start - 4;
            put(bytes, at, u32::MAX.to_le_bytes());
        });
        expect_err(result, StatusCode::InvalidArgument, &["size prefix"]);
        // Too small to hold a root offset and identifier.
        let result = load_patched(stem, |module, bytes| {
            let at = module.layout().flatbuffer.start - 4;
            put(bytes, at, 4u32.to_le_bytes());
        });
        expect_err(result, StatusCode::InvalidArgument, &["size prefix", "too small"]);
        // Shorter than the FlatBuffer: its offsets now point outside it.
        let result = load_patched(stem, |module, bytes| {
            let at = module.layout().flatbuffer.start - 4;
            let shorter = module.layout().flatbuffer.len() as u32 - 64;
            put(bytes, at, shorter.to_le_bytes());
        });
        expect_err(result, StatusCode::InvalidArgument, &["failed verification"]);
    }
}

#[test]
fn zip_header_past_the_end() {
    let result = load_patched("add", |_, bytes| put(bytes, 26, u16::MAX.to_le_bytes()));
    expect_err(
        result,
        StatusCode::InvalidArgument,
        &["ZIP local-file header of 65590 bytes", "only 629 bytes"],
    );
    // A header that fits but leaves too little for a module.
    let mut bytes = module_bytes("add");
    bytes.truncate(64 + 8);
    expect_err(
        BytecodeModule::from_bytes(bytes),
        StatusCode::InvalidArgument,
        &["too short", "byte offset 64"],
    );
}

#[test]
fn bytecode_version_16_and_18_are_incompatible() {
    for (version, shown) in [(16u32 << 16, "16.0"), (18 << 16, "18.0"), ((17 << 16) | 1, "17.1")] {
        let result = load_patched("add", |module, bytes| {
            put(bytes, bytecode_version_pos(module), version.to_le_bytes());
        });
        expect_err(result, StatusCode::Incompatible, &[shown, "17.0", "module 'm'"]);
    }
    // Synthetic modules agree.
    let synth = Synth {
        bytecode_version: 16 << 16,
        ..Synth::default()
    };
    expect_err(synth.load(), StatusCode::Incompatible, &["16.0"]);
    Synth::default().load().unwrap();
}

#[test]
fn missing_required_name() {
    let result = load_patched("add", |module, bytes| {
        let def = module.def();
        let at = vtable_entry_pos(module, &def._tab, BytecodeModuleDef::VT_NAME);
        put(bytes, at, 0u16.to_le_bytes());
    });
    expect_err(result, StatusCode::InvalidArgument, &["failed verification", "name"]);
    let synth = Synth {
        name: "",
        ..Synth::default()
    };
    expect_err(synth.load(), StatusCode::InvalidArgument, &["empty name"]);
}

/// Patches a field of function descriptor 1 of `imports.vmfb` (bytecode [24, 44)).
fn patch_descriptor(field_offset: usize, value: &[u8]) -> halo_hal::Result<BytecodeModule> {
    load_patched("imports", |module, bytes| {
        let at = descriptor_pos(module, 1) + field_offset;
        bytes[at..at + value.len()].copy_from_slice(value);
    })
}

#[test]
fn function_descriptor_ranges_out_of_bounds() {
    let bytecode_len = BytecodeModule::from_bytes(module_bytes("imports"))
        .unwrap()
        .bytecode_data()
        .len();
    let end = format!("exceeds bytecode_data length {bytecode_len}");
    expect_err(
        patch_descriptor(0, &(bytecode_len as i32).to_le_bytes()),
        StatusCode::InvalidArgument,
        &["function_descriptors[1]", &end, "module 'imports_module'"],
    );
    expect_err(
        patch_descriptor(4, &1000i32.to_le_bytes()),
        StatusCode::InvalidArgument,
        &["function_descriptors[1] bytecode range [24, 1024)", &end],
    );
    // Offset + length overflows i32: must not wrap around into range.
    expect_err(
        patch_descriptor(0, &i32::MAX.to_le_bytes()),
        StatusCode::InvalidArgument,
        &["function_descriptors[1]", &end],
    );
    expect_err(
        patch_descriptor(0, &(-4i32).to_le_bytes()),
        StatusCode::InvalidArgument,
        &["function_descriptors[1].bytecode_offset is negative (-4)"],
    );
    expect_err(
        patch_descriptor(4, &(-1i32).to_le_bytes()),
        StatusCode::InvalidArgument,
        &["function_descriptors[1].bytecode_length is negative"],
    );
    expect_err(
        patch_descriptor(4, &0i32.to_le_bytes()),
        StatusCode::InvalidArgument,
        &["0 bytes of bytecode"],
    );
    expect_err(
        patch_descriptor(14, &0i16.to_le_bytes()),
        StatusCode::InvalidArgument,
        &["0 blocks"],
    );
    expect_err(
        patch_descriptor(14, &(-2i16).to_le_bytes()),
        StatusCode::InvalidArgument,
        &["block_count is negative"],
    );
}

#[test]
fn register_counts_beyond_the_isa() {
    let too_many_i32 = (MAX_I32_REGISTER_COUNT + 1) as i16;
    let too_many_ref = (MAX_REF_REGISTER_COUNT + 1) as i16;
    // 0x4000 registers are too many refs but fine for the i32 bank.
    patch_descriptor(16, &too_many_ref.to_le_bytes()).unwrap();
    let ok = patch_descriptor(16, &(MAX_I32_REGISTER_COUNT as i16).to_le_bytes()).unwrap();
    assert_eq!(ok.function(1).unwrap().i32_register_count, MAX_I32_REGISTER_COUNT);
    // The field is an i16, so one past the i32 bank's limit reads as negative.
    expect_err(
        patch_descriptor(16, &too_many_i32.to_le_bytes()),
        StatusCode::InvalidArgument,
        &["function_descriptors[1].i32_register_count is negative (-32768)"],
    );
    expect_err(
        patch_descriptor(18, &too_many_ref.to_le_bytes()),
        StatusCode::InvalidArgument,
        &["16384 ref registers", "16383"],
    );
    let ok = patch_descriptor(18, &(MAX_REF_REGISTER_COUNT as i16).to_le_bytes()).unwrap();
    assert_eq!(ok.function(1).unwrap().ref_register_count, MAX_REF_REGISTER_COUNT);
}

#[test]
fn export_ordinal_out_of_range() {
    for ordinal in [3i32, 1000, -1] {
        let result = load_patched("imports", |module, bytes| {
            let export = module.def().exported_functions().unwrap().get(1);
            let at = field_pos(module, &export._tab, ExportFunctionDef::VT_INTERNAL_ORDINAL).unwrap();
            put(bytes, at, ordinal.to_le_bytes());
        });
        let shown = format!("internal_ordinal {ordinal} is out of range [0, 3)");
        expect_err(
            result,
            StatusCode::InvalidArgument,
            &["exported_functions[1] ('use_helper')", &shown],
        );
    }
}

#[test]
fn signature_count_must_match_descriptors() {
    let synth = Synth {
        signature_count: Some(0),
        exports: Vec::new(),
        ..Synth::default()
    };
    expect_err(
        synth.load(),
        StatusCode::InvalidArgument,
        &["function_signatures has 0 entries but function_descriptors has 1"],
    );
}

#[test]
fn external_rodata_out_of_range() {
    let file_len = module_bytes("rodata").len();
    for (field, value) in [
        (RodataSegmentDef::VT_EXTERNAL_DATA_LENGTH, 1u64 << 40),
        (RodataSegmentDef::VT_EXTERNAL_DATA_LENGTH, file_len as u64),
        (RodataSegmentDef::VT_EXTERNAL_DATA_OFFSET, u64::MAX - 8),
        (RodataSegmentDef::VT_EXTERNAL_DATA_OFFSET, file_len as u64),
    ] {
        let result = load_patched("rodata", |module, bytes| {
            let segment = module.def().rodata_segments().unwrap().get(1);
            let at = field_pos(module, &segment._tab, field).unwrap();
            put(bytes, at, value.to_le_bytes());
        });
        let shown = format!("lies outside the file ({file_len} bytes)");
        expect_err(
            result,
            StatusCode::InvalidArgument,
            &["rodata_segments[1] external data", &shown],
        );
    }
}

#[test]
fn synthetic_external_rodata() {
    let data: Vec<u8> = (0..100).collect();
    let synth = Synth {
        zip_header: true,
        rodata: vec![
            SynthRodata::Embedded(vec![9, 9]),
            SynthRodata::External {
                offset: 128,
                length: 100,
                bytes: data.clone(),
            },
        ],
        ..Synth::default()
    };
    let module = synth.load().unwrap();
    assert_eq!(module.layout().zip_header_len, 42);
    assert_eq!(module.rodata(0).unwrap(), [9, 9]);
    assert_eq!(module.rodata(1).unwrap(), data.as_slice());
    assert_eq!(module.rodata_range(1).unwrap().start, module.layout().rodata_base + 128);

    let mut past_end = synth.clone();
    past_end.rodata[1] = SynthRodata::External {
        offset: 128,
        length: 101,
        bytes: data,
    };
    expect_err(
        past_end.load(),
        StatusCode::InvalidArgument,
        &["rodata_segments[1]", "outside the file"],
    );
}

#[test]
fn unsupported_compression_is_incompatible() {
    let synth = Synth {
        rodata: vec![SynthRodata::Compressed(1)],
        ..Synth::default()
    };
    assert_eq!(synth.load().unwrap().rodata(0).unwrap(), [1, 2, 3]);
    let synth = Synth {
        rodata: vec![SynthRodata::Compressed(7)],
        ..Synth::default()
    };
    expect_err(
        synth.load(),
        StatusCode::Incompatible,
        &["rodata_segments[0]", "compression type 7"],
    );
}

#[test]
fn unknown_feature_requirements_are_incompatible() {
    let synth = Synth {
        requirements: 0b1_0001,
        ..Synth::default()
    };
    expect_err(
        synth.load(),
        StatusCode::Incompatible,
        &["module 'synth'", "[0x10]", "EXT_F32 | 0x10"],
    );
    let mut synth = Synth::default();
    synth.functions[0].requirements = 1 << 9;
    expect_err(
        synth.load(),
        StatusCode::Incompatible,
        &["function_descriptors[0]", "0x200"],
    );
    let mut synth = Synth::default();
    synth.functions[0].requirements = 0b1111;
    synth.load().unwrap();
}

#[test]
fn corrupted_module_state_is_rejected() {
    let result = load_patched("rodata", |module, bytes| {
        let state = module.def().module_state().unwrap();
        let at = field_pos(
            module,
            &state._tab,
            halo_vm::module::schema::ModuleStateDef::VT_GLOBAL_REF_COUNT,
        )
        .unwrap();
        put(bytes, at, (-1i32).to_le_bytes());
    });
    expect_err(
        result,
        StatusCode::InvalidArgument,
        &["module_state.global_ref_count is negative"],
    );
}
