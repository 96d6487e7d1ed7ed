//! IREE-compiled programs that call halo's own kernels (fixtures/kernels): the CPU drivers
//! resolve the import, and the kernel gives the answers of IREE's generated code for the same
//! layer.

use halo_runtime::{tensor, HostTensor, Instance, Session, StatusCode};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// This architecture's builds of the programs: in `fixtures/kernels` for x86-64, in its
/// `arm_64/` for AArch64.
fn kernels() -> PathBuf {
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/kernels");
    if cfg!(target_arch = "aarch64") {
        kernels.join("arm_64")
    } else {
        kernels
    }
}

fn f32s(tensor: &HostTensor) -> Vec<f32> {
    (tensor.bytes.chunks_exact(4))
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// `function`'s result for a batch of `rows` rows of 16 features.
fn dense(session: &Session, function: &str, rows: usize) -> Vec<f32> {
    let values: Vec<String> = (0..rows * 16)
        .map(|i| format!("{}", ((i * 7919) % 61) as f32 / 16.0 - 1.8))
        .collect();
    let input = HostTensor::parse(&format!("{rows}x16xf32={}", values.join(" "))).unwrap();
    let function = session.function(function).unwrap();
    let outputs = session
        .call(&function, &[session.tensor_input(&input).unwrap()])
        .unwrap();
    let result = tensor::to_host(session.device().as_ref(), &outputs[0]).unwrap();
    assert_eq!(result.shape, [rows as u64, 40]);
    f32s(&result)
}

#[test]
fn a_dense_layer_through_halos_matmul_kernel_matches_iree_s_code_on_both_cpu_drivers() {
    for device in ["local-sync", "local-task"] {
        let mut session = Session::new(&Instance::new(), &[device]).unwrap();
        session.load_module_file(&kernels().join("kernel_matmul.vmfb")).unwrap();
        for rows in [1, 3, 17] {
            let (kernel, codegen) = (dense(&session, "dense", rows), dense(&session, "dense_codegen", rows));
            for (i, (k, c)) in kernel.iter().zip(&codegen).enumerate() {
                assert!(
                    (k - c).abs() <= 1e-5 * c.abs().max(1.0),
                    "{device}, {rows} rows, [{i}]: {k} against {c}"
                );
            }
            // ReLU cut some and passed others, in the last, narrower workgroup's columns too.
            let last_columns = || kernel.chunks(40).flat_map(|row| &row[32..]);
            assert!(
                last_columns().any(|&x| x == 0.0) && last_columns().any(|&x| x > 0.0),
                "{device}: {kernel:?}"
            );
        }
    }
}

#[test]
fn a_program_importing_a_kernel_the_device_lacks_fails_at_load_naming_it() {
    // halo's CPU drivers offer halo's kernels; a device made without them stands in for a
    // runtime (IREE's, or another build of halo) that has none.
    let info = halo_hal::DeviceInfo {
        id: 0,
        path: "0".into(),
        name: "local-sync without halo's kernels".into(),
        details: Vec::new(),
    };
    let bare = halo_local::sync::SyncDevice::new(info, Arc::from([]), Default::default());
    let mut session = Session::with_devices(vec![Arc::new(bare)]).unwrap();
    let error = session
        .load_module_file(&kernels().join("kernel_matmul.vmfb"))
        .unwrap_err();
    assert_eq!(error.code(), StatusCode::NotFound, "{error}");
    assert!(error.to_string().contains("halo_matmul_f32_v0"), "{error}");
}

#[test]
fn a_damaged_program_handing_the_kernel_memory_outside_its_bindings_gets_an_error_not_a_crash() {
    for device in ["local-sync", "local-task"] {
        let mut session = Session::new(&Instance::new(), &[device]).unwrap();
        session.load_module_file(&kernels().join("kernel_matmul.vmfb")).unwrap();
        for function in ["past_its_output", "into_its_weights"] {
            let input = HostTensor::parse("2x16xf32=1").unwrap();
            let callee = session.function(function).unwrap();
            let error = session
                .call(&callee, &[session.tensor_input(&input).unwrap()])
                .unwrap_err();
            assert!(error.to_string().contains(function), "{device}, {function}: {error}");
        }
        // The session goes on: the same module's sound function still answers.
        assert_eq!(dense(&session, "dense", 2).len(), 80, "{device}");
    }
}
