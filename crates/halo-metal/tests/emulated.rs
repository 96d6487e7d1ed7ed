//! IREE's Metal builds of the executable fixtures, compiled for the host by the emulated
//! backend and run threadgroup by threadgroup, give what IREE's CPU runtime gave for the same
//! dispatches (`fixtures/executables/*.expected`).

use halo_hal::{HostTensor, StatusCode};
use halo_metal::backend::Backend;
use halo_metal::emulated::backend::EmulatedBackend;
use halo_metal::emulated::host_compiler::{BindingMemory, HostCompiler, KernelEntry};
use halo_metal::executable_def::decode;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables")
}

/// The memory of `values`, as a binding.
fn memory<T>(values: &mut [T]) -> BindingMemory {
    BindingMemory {
        start: values.as_mut_ptr().cast(),
        length: std::mem::size_of_val(values),
    }
}

/// clang, or `None` after saying by name that `test` skipped.
fn compiler_or_skip(test: &str) -> Option<HostCompiler> {
    match HostCompiler::locate() {
        Ok(compiler) => Some(compiler),
        Err(error) => {
            println!("SKIPPED {test}: {error}");
            None
        }
    }
}

/// One dispatch of a flagfile.
struct Case {
    entry_point: usize,
    workgroups: [u32; 3],
    bindings: Vec<HostTensor>,
    constants: Vec<u32>,
}

fn read_case(flags: &Path) -> Case {
    let mut case = Case {
        entry_point: 0,
        workgroups: [1, 1, 1],
        bindings: Vec::new(),
        constants: Vec::new(),
    };
    for line in std::fs::read_to_string(flags).unwrap().lines() {
        let (flag, value) = line.split_once('=').unwrap();
        match flag {
            "--entry_point" => case.entry_point = value.parse().unwrap(),
            "--workgroup_count" => {
                let counts: Vec<u32> = value.split(',').map(|n| n.parse().unwrap()).collect();
                case.workgroups = counts.try_into().unwrap();
            }
            "--binding" => case.bindings.push(HostTensor::parse(value).unwrap()),
            "--constant" => case.constants.push(value.parse::<i64>().unwrap() as u32),
            other => panic!("{}: unknown flag {other}", flags.display()),
        }
    }
    case
}

#[test]
fn every_metal_fixture_case_gives_irees_cpu_results() {
    let test = "every_metal_fixture_case_gives_irees_cpu_results";
    let Some(compiler) = compiler_or_skip(test) else { return };
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures().join("metal-msl-fb"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            fixtures()
                .join(path.file_name().unwrap())
                .with_extension("expected")
                .exists()
        })
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "found {} Metal cases", cases.len());
    let mut failures = Vec::new();
    for flags in &cases {
        let name = flags.file_stem().unwrap().to_string_lossy().to_string();
        let executable_name = name.split('.').next().unwrap();
        let bytes = std::fs::read(fixtures().join(format!("{executable_name}.metal-msl-fb.fb"))).unwrap();
        let executable = decode(&bytes).unwrap();
        let mut case = read_case(flags);
        let export = &executable.exports[case.entry_point];
        let source = executable.libraries[export.library].source.as_deref().unwrap();
        let entry = KernelEntry {
            entry_point: &export.entry_point,
            threadgroup_size: export.threadgroup_size,
        };
        let library = match compiler.compile(source, &[entry]) {
            Ok(library) => library,
            Err(error) => {
                failures.push(format!("{name}: {error}"));
                continue;
            }
        };
        let pointers: Vec<BindingMemory> = case.bindings.iter_mut().map(|b| memory(&mut b.bytes)).collect();
        let [gx, gy, gz] = case.workgroups;
        for z in 0..gz {
            for y in 0..gy {
                for x in 0..gx {
                    // SAFETY: each binding is the whole buffer IREE's runtime dispatched the same
                    // kernel over, with the same workgroup count and constants.
                    unsafe { library.run(0, &pointers, &case.constants, [x, y, z], case.workgroups) }.unwrap();
                }
            }
        }
        let expected = std::fs::read_to_string(fixtures().join(format!("{name}.expected"))).unwrap();
        let got: Vec<String> = case.bindings.iter().map(|b| b.format(1 << 20)).collect();
        let want: Vec<&str> = expected.lines().collect();
        if got != want {
            failures.push(format!("{name}:\n got {got:?}\nwant {want:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Threadgroups past the grid the conv fixture was compiled for (6) would write past its
/// output: each such access reads zero, writes nothing, and fails the threadgroup naming it,
/// while the threadgroups inside the grid still give IREE's results. The output binding is the
/// head of a larger buffer whose tail must stay untouched.
#[test]
fn accesses_past_a_binding_are_contained_and_named() {
    let test = "accesses_past_a_binding_are_contained_and_named";
    let Some(compiler) = compiler_or_skip(test) else { return };
    let bytes = std::fs::read(fixtures().join("conv2d_f32.metal-msl-fb.fb")).unwrap();
    let executable = decode(&bytes).unwrap();
    let export = &executable.exports[0];
    let entry = KernelEntry {
        entry_point: &export.entry_point,
        threadgroup_size: export.threadgroup_size,
    };
    let library = compiler
        .compile(executable.libraries[0].source.as_deref().unwrap(), &[entry])
        .unwrap();
    let mut case = read_case(&fixtures().join("metal-msl-fb/conv2d_f32.basic.flags"));
    assert_eq!(case.workgroups, [6, 1, 1], "the fixture changed");
    let output_length = case.bindings[2].bytes.len();
    let mut output = vec![0x5au8; output_length + 4096];
    let mut bindings: Vec<BindingMemory> = case.bindings[..2].iter_mut().map(|b| memory(&mut b.bytes)).collect();
    bindings.push(BindingMemory {
        start: output.as_mut_ptr().cast(),
        length: output_length,
    });
    for x in 0..40 {
        // SAFETY: each binding is valid memory of its length.
        let outcome = unsafe { library.run(0, &bindings, &[], [x, 0, 0], [40, 1, 1]) };
        match outcome {
            Ok(()) => assert!(x < 6, "threadgroup {x} ran past the output without an error"),
            Err(error) => {
                assert!(x >= 6, "threadgroup {x}: {error}");
                assert_eq!(error.code(), StatusCode::OutOfRange, "{error}");
                let expected = format!("of binding 2, which holds {output_length} bytes");
                assert!(error.message().contains(&expected), "{error}");
            }
        }
    }
    assert!(
        output[output_length..].iter().all(|&b| b == 0x5a),
        "bytes past the binding were written"
    );
    case.bindings[2].bytes.copy_from_slice(&output[..output_length]);
    let expected = std::fs::read_to_string(fixtures().join("conv2d_f32.basic.expected")).unwrap();
    assert_eq!(case.bindings[2].format(1 << 20), expected.lines().nth(2).unwrap());
}

/// A kernel that reads more bindings than a dispatch gives is refused before it runs.
#[test]
fn too_few_bindings_are_refused() {
    let Some(compiler) = compiler_or_skip("too_few_bindings_are_refused") else {
        return;
    };
    let bytes = std::fs::read(fixtures().join("conv2d_f32.metal-msl-fb.fb")).unwrap();
    let executable = decode(&bytes).unwrap();
    let entry = KernelEntry {
        entry_point: &executable.exports[0].entry_point,
        threadgroup_size: executable.exports[0].threadgroup_size,
    };
    let library = compiler
        .compile(executable.libraries[0].source.as_deref().unwrap(), &[entry])
        .unwrap();
    let mut one = [0f32; 4];
    // SAFETY: the binding is valid memory of its length.
    let error = unsafe { library.run(0, &[memory(&mut one)], &[], [0, 0, 0], [1, 1, 1]) }.unwrap_err();
    assert!(error.message().contains("reads 3 bindings; 1 were given"), "{error}");
}

#[test]
fn msl_that_does_not_compile_is_an_error_carrying_clangs_message() {
    let Some(compiler) = compiler_or_skip("msl_that_does_not_compile_is_an_error_carrying_clangs_message") else {
        return;
    };
    let source = "#include <metal_stdlib>\nkernel void broken(uint3 g [[threadgroup_position_in_grid]])\n{\n    undeclared_name = 1;\n}\n";
    let entry = KernelEntry {
        entry_point: "broken",
        threadgroup_size: [1, 1, 1],
    };
    let error = compiler.compile(source, &[entry]).unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
    assert!(error.message().contains("undeclared_name"), "{error}");
    for (entry_point, threadgroup_size, says) in [
        ("k(); evil", [1, 1, 1], "is not an MSL identifier"),
        ("k", [0, 1, 1], "a threadgroup holds 1 to 1024"),
        ("k", [65536, 65536, 65536], "a threadgroup holds 1 to 1024"),
    ] {
        let entry = KernelEntry {
            entry_point,
            threadgroup_size,
        };
        let error = compiler.compile(source, &[entry]).unwrap_err();
        assert!(error.message().contains(says), "{error}");
    }
    // Declared and never defined: refused when linked, not when first called.
    let undefined = "#include <metal_stdlib>\nstruct Args\n{\n    device float* p [[id(0)]];\n};\n\nfloat nowhere(float x);\n\nkernel void \
                     u(constant Args& a [[buffer(0)]])\n{\n    a.p[0] = nowhere(a.p[0]);\n}\n";
    let error = compiler
        .compile(
            undefined,
            &[KernelEntry {
                entry_point: "u",
                threadgroup_size: [1, 1, 1],
            }],
        )
        .unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
    assert!(error.message().contains("nowhere"), "{error}");
}

/// Every half converts to the float `half` computes, and floats (halfway cases, subnormals,
/// overflow, NaN) round to the half it computes.
#[test]
fn half_conversions_are_ieees() {
    let Some(compiler) = compiler_or_skip("half_conversions_are_ieees") else {
        return;
    };
    let source = "#include <metal_stdlib>\nstruct Args\n{\n    device half* halves [[id(0)]];\n    device float* floats \
                  [[id(1)]];\n    device half* rounded [[id(2)]];\n};\n\nkernel void convert(constant Args& a [[buffer(0)]], \
                  uint3 g [[threadgroup_position_in_grid]])\n{\n    float f = a.halves[g.x];\n    a.rounded[g.x] = \
                  (half)a.floats[g.x];\n    a.floats[g.x] = f;\n}\n";
    let entry = KernelEntry {
        entry_point: "convert",
        threadgroup_size: [1, 1, 1],
    };
    let library = compiler.compile(source, &[entry]).unwrap();
    let mut halves: Vec<u16> = (0..=u16::MAX).collect();
    let mut floats: Vec<f32> = (0..=u16::MAX as u32)
        .map(|i| match i % 4 {
            0 => f32::from_bits(i.wrapping_mul(0x9e37_79b9)),
            1 => half::f16::from_bits(i as u16).to_f32() * (1.0 + f32::EPSILON * 4096.0),
            2 => f32::from_bits(0x3300_0000 + i * 97),
            _ => 65504.0 + i as f32,
        })
        .collect();
    let inputs = floats.clone();
    let mut rounded = vec![0u16; halves.len()];
    let pointers: Vec<BindingMemory> = vec![memory(&mut halves), memory(&mut floats), memory(&mut rounded)];
    for x in 0..halves.len() as u32 {
        // SAFETY: each of the three buffers has an element at every threadgroup index.
        unsafe { library.run(0, &pointers, &[], [x, 0, 0], [halves.len() as u32, 1, 1]) }.unwrap();
    }
    for (bits, got) in halves.iter().zip(&floats) {
        let want = half::f16::from_bits(*bits).to_f32();
        assert!(
            got.to_bits() == want.to_bits() || (want.is_nan() && got.is_nan()),
            "{bits:#06x}: {got} != {want}"
        );
    }
    for (input, got) in inputs.iter().zip(&rounded) {
        let want = half::f16::from_f32(*input);
        assert!(
            *got == want.to_bits() || (want.is_nan() && half::f16::from_bits(*got).is_nan()),
            "{input:e}: {got:#06x} != {:#06x}",
            want.to_bits()
        );
    }
}

/// A kernel whose threads meet at a barrier and combine values across a simd-group: each thread
/// reads what another wrote before the barrier, and gets its simd-group's sum; the last
/// simd-group is partial and one thread ends early, so neither may hold the others up.
#[test]
fn threads_meet_at_barriers_and_simd_groups_sum_their_values() {
    let Some(compiler) = compiler_or_skip("threads_meet_at_barriers_and_simd_groups_sum_their_values") else {
        return;
    };
    let source = "#include <metal_stdlib>\nusing namespace metal;\nstruct Args\n{\n    device float* input [[id(0)]];\n    \
                  device float* mirrored [[id(1)]];\n    device float* sums [[id(2)]];\n};\n\nkernel void k(constant Args& a \
                  [[buffer(0)]], uint3 t [[thread_position_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])\n{\n    \
                  threadgroup float shared[40];\n    shared[t.x] = a.input[t.x];\n    threadgroup_barrier(mem_flags::mem_threadgroup);\n    \
                  a.mirrored[t.x] = shared[39u - t.x];\n    if (t.x == 39u) return;\n    a.sums[t.x] = simd_sum(a.input[t.x]) + \
                  float(lane) * 0.0;\n}\n";
    let entry = KernelEntry {
        entry_point: "k",
        threadgroup_size: [40, 1, 1],
    };
    let library = compiler.compile(source, &[entry]).unwrap();
    let mut input: Vec<f32> = (0..40).map(|i| i as f32).collect();
    let (mut mirrored, mut sums) = (vec![0f32; 40], vec![-1f32; 40]);
    let pointers: Vec<BindingMemory> = vec![memory(&mut input), memory(&mut mirrored), memory(&mut sums)];
    // SAFETY: the kernel touches elements 0..40 of each buffer, which all have 40.
    unsafe { library.run(0, &pointers, &[], [0, 0, 0], [1, 1, 1]) }.unwrap();
    let want_mirrored: Vec<f32> = (0..40).rev().map(|i| i as f32).collect();
    assert_eq!(mirrored, want_mirrored);
    let first: f32 = (0..32).map(|i| i as f32).sum();
    let second: f32 = (32..39).map(|i| i as f32).sum();
    for (i, sum) in sums.iter().enumerate() {
        let want = match i {
            0..32 => first,
            32..39 => second,
            _ => -1.0,
        };
        assert_eq!(*sum, want, "thread {i}");
    }
}

/// The `metal-msl-fb` executables stored in a module: each starts with its 64-byte header
/// (`MTL1`, version 0, content size).
fn embedded_executables(module: &[u8]) -> Vec<&[u8]> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(offset) = module[at..].windows(8).position(|w| w == b"MTL1\0\0\0\0") {
        let start = at + offset;
        let size = module
            .get(start + 8..start + 16)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize)
            .unwrap_or(0);
        let end = (start + 64).saturating_add(size).min(module.len());
        found.push(&module[start..end]);
        at = end.max(start + 8);
    }
    found
}

/// Every kernel iree-compile makes of the model fixtures for Metal (`fixtures/models/metal`)
/// compiles for the emulated device, those with barriers and simd-group sums included.
#[test]
fn every_kernel_of_the_metal_model_fixtures_compiles() {
    let Some(compiler) = compiler_or_skip("every_kernel_of_the_metal_model_fixtures_compiles") else {
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models/metal");
    let mut modules: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "vmfb"))
        .collect();
    modules.sort();
    assert!(modules.len() >= 25, "found {} Metal modules", modules.len());
    let (mut kernels, mut lockstep, mut failures) = (0, 0, Vec::new());
    for module in &modules {
        let bytes = std::fs::read(module).unwrap();
        let executables = embedded_executables(&bytes);
        assert!(!executables.is_empty(), "{}: no Metal executable", module.display());
        for executable in executables {
            let executable = decode(executable).unwrap_or_else(|e| panic!("{}: {e}", module.display()));
            for (ordinal, library) in executable.libraries.iter().enumerate() {
                let entries: Vec<KernelEntry> = executable
                    .exports
                    .iter()
                    .filter(|export| export.library == ordinal)
                    .map(|export| KernelEntry {
                        entry_point: &export.entry_point,
                        threadgroup_size: export.threadgroup_size,
                    })
                    .collect();
                let source = library.source.as_deref().unwrap();
                kernels += entries.len();
                lockstep += usize::from(source.contains("threadgroup_barrier"));
                if let Err(error) = compiler.compile(source, &entries) {
                    failures.push(format!("{}: {error}", module.display()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        kernels >= 120 && lockstep >= 1,
        "{kernels} kernels, {lockstep} with barriers"
    );
}

/// Metal's elementwise math and `dot` on 3-element vectors, whose elements the header counts by
/// their components (a `float3` is as large as a `float4`).
#[test]
fn vector_math_works_lane_by_lane_on_three_element_vectors() {
    let Some(compiler) = compiler_or_skip("vector_math_works_lane_by_lane_on_three_element_vectors") else {
        return;
    };
    let source = "#include <metal_stdlib>\nusing namespace metal;\nstruct Args\n{\n    device float* v [[id(0)]];\n};\n\n\
                  kernel void k(constant Args& a [[buffer(0)]])\n{\n    float3 x = float3(a.v[0], a.v[1], a.v[2]);\n    \
                  float3 r = fma(sqrt(x), float3(2.0), float3(1.0));\n    a.v[4] = r.x;\n    a.v[5] = r.y;\n    a.v[6] = r.z;\n    \
                  a.v[7] = dot(x, x);\n}\n";
    let entry = KernelEntry {
        entry_point: "k",
        threadgroup_size: [1, 1, 1],
    };
    let library = compiler.compile(source, &[entry]).unwrap();
    let mut v = [4.0f32, 9.0, 16.0, -1.0, 0.0, 0.0, 0.0, 0.0];
    let pointers: Vec<BindingMemory> = vec![memory(&mut v)];
    // SAFETY: the kernel touches elements 0..8, which `v` has.
    unsafe { library.run(0, &pointers, &[], [0, 0, 0], [1, 1, 1]) }.unwrap();
    assert_eq!(v, [4.0, 9.0, 16.0, -1.0, 5.0, 7.0, 9.0, 353.0]);
}

/// The argument buffer's members reach the bindings their `[[id(n)]]` names, whatever order they
/// are declared in and with ordinals left out; the push constants arrive in their struct at
/// `[[buffer(3)]]`, where IREE puts them; each threadgroup's threads get their positions from the
/// export's threadgroup size.
#[test]
fn bindings_constants_and_positions_arrive_where_the_msl_declares_them() {
    let test = "bindings_constants_and_positions_arrive_where_the_msl_declares_them";
    let Some(compiler) = compiler_or_skip(test) else { return };
    let source = "#include <metal_stdlib>\nusing namespace metal;\n\nstruct _c\n{\n    uint _m0[2];\n};\n\n\
                  struct _b\n{\n    uint _m0[1];\n};\n\nstruct spvDescriptorSetBuffer0\n{\n    device _b* out_ [[id(2)]];\n    \
                  device _b* in_ [[id(0)]];\n};\n\nkernel void k(constant spvDescriptorSetBuffer0& set [[buffer(0)]], \
                  constant _c& pc [[buffer(3)]], uint3 g [[thread_position_in_grid]], uint3 n [[threadgroups_per_grid]])\n{\n    \
                  uint i = g.y * (n.x * 4u) + g.x;\n    (*set.out_)._m0[i] = (*set.in_)._m0[i] * pc._m0[0] + pc._m0[1] + g.z * 1000u;\n}\n";
    let entry = KernelEntry {
        entry_point: "k",
        threadgroup_size: [4, 2, 1],
    };
    let library = compiler.compile(source, &[entry]).unwrap();
    let mut input: Vec<u32> = (0..16).collect();
    let mut unused = [0xdead_beefu32];
    let mut output = vec![0u32; 16];
    let bindings = [memory(&mut input), memory(&mut unused), memory(&mut output)];
    for x in 0..2 {
        // SAFETY: the grid is 8x2 threads, one element of each 16-element binding apiece.
        unsafe { library.run(0, &bindings, &[3, 5], [x, 0, 0], [2, 1, 1]) }.unwrap();
    }
    let want: Vec<u32> = (0..16).map(|i| i * 3 + 5).collect();
    assert_eq!(output, want);
    assert_eq!(unused, [0xdead_beef], "binding 1 is no member's");
}

/// A threadgroup of more threads than Metal allows, an entry point the MSL lacks, and a library
/// with only a metallib are refused by name.
#[test]
fn impossible_kernels_are_refused_by_name() {
    let Some(compiler) = compiler_or_skip("impossible_kernels_are_refused_by_name") else {
        return;
    };
    let bytes = std::fs::read(fixtures().join("multi_export.metal-msl-fb.fb")).unwrap();
    let mut executable = decode(&bytes).unwrap();
    let source = executable.libraries[0].source.clone().unwrap();
    let too_wide = KernelEntry {
        entry_point: &executable.exports[0].entry_point,
        threadgroup_size: [64, 32, 1],
    };
    let error = compiler.compile(&source, &[too_wide]).unwrap_err();
    assert!(error.message().contains("threadgroup holds 1 to 1024"), "{error}");
    let missing = KernelEntry {
        entry_point: "not_there",
        threadgroup_size: [1, 1, 1],
    };
    let error = compiler.compile(&source, &[missing]).unwrap_err();
    assert!(error.message().contains("no kernel 'not_there'"), "{error}");
    executable.libraries[0].source = None;
    executable.libraries[0].metallib = Some(vec![0x4d, 0x54, 0x4c, 0x42]);
    let backend = EmulatedBackend::new(compiler, 1).unwrap();
    let error = backend.make_pipelines(&executable).err().unwrap();
    assert_eq!(error.code(), StatusCode::Unimplemented, "{error}");
    assert!(error.message().contains("holds only a precompiled metallib"), "{error}");
}

/// Threads that differ only in a dimension the kernel never reads do the same work: on a GPU
/// they run in lockstep and their identical read-modify-writes land once, so the emulated
/// device runs one of them (IREE gave a convolution threadgroups of 16x1x2 whose z it ignores).
#[test]
fn threads_a_kernel_cannot_tell_apart_accumulate_once() {
    let Some(compiler) = compiler_or_skip("threads_a_kernel_cannot_tell_apart_accumulate_once") else {
        return;
    };
    let source = "#include <metal_stdlib>\nusing namespace metal;\n\nstruct _b\n{\n    float _m0[1];\n};\n\n\
                  struct spvDescriptorSetBuffer0\n{\n    device _b* in_ [[id(0)]];\n    device _b* out_ [[id(1)]];\n};\n\n\
                  kernel void k(constant spvDescriptorSetBuffer0& s [[buffer(0)]], uint3 l [[thread_position_in_threadgroup]])\n{\n    \
                  (*s.out_)._m0[l.x] = 0.0;\n    for (uint i = 0u; i < 4u; i++)\n    {\n        \
                  (*s.out_)._m0[l.x] += (*s.in_)._m0[i] * float(l.x + 1u);\n    }\n}\n";
    let entry = KernelEntry {
        entry_point: "k",
        threadgroup_size: [4, 1, 2],
    };
    let library = compiler.compile(source, &[entry]).unwrap();
    let mut input = [1.0f32, 2.0, 3.0, 4.0];
    let mut output = [0f32; 4];
    let bindings = [memory(&mut input), memory(&mut output)];
    // SAFETY: each thread touches elements 0..4 of the two 4-element bindings.
    unsafe { library.run(0, &bindings, &[], [0, 0, 0], [1, 1, 1]) }.unwrap();
    assert_eq!(output, [10.0, 20.0, 30.0, 40.0]);
}

/// A library compiled with a cache is loaded from it the second time (no clang), and a damaged
/// entry is refused, rebuilt and still runs.
#[test]
fn compiled_libraries_come_back_from_the_cache() {
    let Some(compiler) = compiler_or_skip("compiled_libraries_come_back_from_the_cache") else {
        return;
    };
    let folder = std::env::temp_dir().join(format!("halo-metal-cache-test-{}", std::process::id()));
    let compiler = compiler.with_cache(&halo_hal::disk_cache::CacheDir::At(folder.clone()));
    let source = "#include <metal_stdlib>\nusing namespace metal;\n\nstruct _b\n{\n    float _m0[1];\n};\n\n\
                  struct spvDescriptorSetBuffer0\n{\n    device _b* in_ [[id(0)]];\n    device _b* out_ [[id(1)]];\n};\n\n\
                  kernel void k(constant spvDescriptorSetBuffer0& s [[buffer(0)]], uint3 l [[thread_position_in_threadgroup]])\n{\n    \
                  (*s.out_)._m0[l.x] = -(*s.in_)._m0[l.x];\n}\n";
    let entries = [KernelEntry {
        entry_point: "k",
        threadgroup_size: [4, 1, 1],
    }];
    let run_negate = |library: &halo_metal::emulated::host_compiler::CompiledLibrary| {
        let mut values = [1.0f32, -2.0, 3.0, -4.0];
        let mut out = [0f32; 4];
        let bindings = [memory(&mut values), memory(&mut out)];
        // SAFETY: the kernel reads and writes the four elements of each binding.
        unsafe { library.run(0, &bindings, &[], [0, 0, 0], [1, 1, 1]) }.unwrap();
        out
    };
    let counters = |c: &HostCompiler| {
        let counters = &c.cache().unwrap().counters;
        ["hits", "misses", "rejected"].map(|key| counters.get(key).unwrap())
    };
    let first = run_negate(&compiler.compile(source, &entries).unwrap());
    assert_eq!(first, [-1.0, 2.0, -3.0, 4.0]);
    assert_eq!(counters(&compiler), [0, 1, 0]);
    assert_eq!(run_negate(&compiler.compile(source, &entries).unwrap()), first);
    assert_eq!(counters(&compiler), [1, 1, 0]);
    let entry = std::fs::read_dir(compiler.cache().unwrap().dir())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut damaged = std::fs::read(&entry).unwrap();
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    std::fs::write(&entry, damaged).unwrap();
    assert_eq!(run_negate(&compiler.compile(source, &entries).unwrap()), first);
    assert_eq!(counters(&compiler), [1, 2, 1]);
    std::fs::remove_dir_all(&folder).unwrap();
}
