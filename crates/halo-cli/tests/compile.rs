//! `halo compile` end to end with the pinned `iree-compile` (from `HALO_IREE_COMPILE`, `PATH`, or
//! the repository's `.iree-venv` made by `scripts/setup-iree`), and its errors without one.

mod common;

use halo_compile::KERNEL_IMPORTS;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn halo(args: &[&str], envs: &[(&str, &Path)]) -> Output {
    common::halo_command()
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .expect("running halo")
}

/// The real compiler, or `None` after saying that the test skipped.
fn real_compiler(test: &str) -> Option<PathBuf> {
    let venv = repo().join(".iree-venv/bin/iree-compile");
    let explicit = venv.is_file().then_some(venv);
    match halo_compile::Toolchain::locate(explicit.as_deref()) {
        Ok(toolchain) if toolchain.onnx_importer().is_ok() => Some(toolchain.compiler().to_path_buf()),
        Ok(_) => {
            println!("skipped: {test}: iree-import-onnx is missing next to the compiler and on PATH");
            None
        }
        Err(error) => {
            println!("skipped: {test}: {error}");
            None
        }
    }
}

/// The real compiler where a Vulkan device is present too, or `None` after saying which is
/// missing.
fn compiler_and_vulkan(test: &str) -> Option<PathBuf> {
    let compiler = real_compiler(test)?;
    if !common::vulkan_device_present() {
        println!("skipped: {test}: no Vulkan device");
        return None;
    }
    Some(compiler)
}

#[test]
fn a_compiled_onnx_model_gives_the_recorded_answers_on_both_cpu_drivers() {
    let Some(compiler) = real_compiler("a_compiled_onnx_model_gives_the_recorded_answers_on_both_cpu_drivers") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let fixtures = repo().join("fixtures/models");
    let output = halo(
        &[
            "compile",
            fixtures.join("onnx_mlp.onnx").to_str().unwrap(),
            "-o",
            out.path().join("onnx_mlp.vmfb").to_str().unwrap(),
        ],
        &[("HALO_IREE_COMPILE", &compiler)],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("--iree-llvmcpu-target-cpu=host"), "{stdout}");
    let cases: Vec<PathBuf> = common::cases(&fixtures)
        .into_iter()
        .filter(|case| case.file_name().unwrap().to_string_lossy().starts_with("onnx_mlp."))
        .collect();
    assert_eq!(cases.len(), 3, "{cases:?}");
    for device in ["--device=local-task", "--device=local-sync"] {
        for case in &cases {
            let diff = common::check_case_in(&fixtures, out.path(), case, &[device], &[], common::close_enough);
            assert!(diff.is_none(), "{}", diff.unwrap());
        }
    }
}

/// A program compiled for the other CPU architecture (`--target-arch`, its baseline CPU) holds that
/// architecture's executables, and this machine refuses to run it, naming the formats it has.
#[test]
fn a_model_compiled_for_the_other_cpu_architecture_holds_its_executables() {
    let test = "a_model_compiled_for_the_other_cpu_architecture_holds_its_executables";
    let Some(compiler) = real_compiler(test) else {
        return;
    };
    let (other, triple, chip) = if cfg!(target_arch = "aarch64") {
        ("x86_64", "x86_64-unknown-linux-gnu", "x86-64-v2")
    } else {
        ("arm_64", "aarch64-unknown-linux-gnu", "generic")
    };
    let out = tempfile::tempdir().unwrap();
    let fixtures = repo().join("fixtures/models");
    let vmfb = out.path().join("onnx_mlp.vmfb");
    let output = halo(
        &[
            "compile",
            fixtures.join("onnx_mlp.onnx").to_str().unwrap(),
            "-o",
            vmfb.to_str().unwrap(),
            &format!("--target-arch={other}"),
        ],
        &[("HALO_IREE_COMPILE", &compiler)],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!(
            "--iree-llvmcpu-target-triple={triple} --iree-llvmcpu-target-cpu={chip}"
        )),
        "{stdout}"
    );
    assert!(stderr.contains(&format!("baseline {other} CPU")), "{stderr}");
    let format = format!("embedded-elf-{other}");
    let bytes = std::fs::read(&vmfb).unwrap();
    assert!(
        bytes.windows(format.len()).any(|w| w == format.as_bytes()),
        "no {format} executable"
    );
    let run = common::halo_command()
        .current_dir(&fixtures)
        .arg("run-module")
        .args([
            &format!("--module={}", vmfb.display()),
            "--flagfile=onnx_mlp.basic.flags",
        ])
        .arg("--device=local-task")
        .output()
        .unwrap();
    let refused = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success() && refused.contains("INCOMPATIBLE") && refused.contains(&format),
        "{refused}"
    );
}

#[test]
fn tuning_keeps_a_variant_that_gives_the_recorded_answers_and_caches_it() {
    let Some(compiler) = real_compiler("tuning_keeps_a_variant_that_gives_the_recorded_answers_and_caches_it") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let fixtures = repo().join("fixtures/models");
    let vmfb = out.path().join("onnx_mlp.vmfb");
    let cache = out.path().join("cache");
    let model = fixtures.join("onnx_mlp.onnx");
    let tune = || {
        let output = halo(
            &[
                "compile",
                model.to_str().unwrap(),
                "-o",
                vmfb.to_str().unwrap(),
                "--target-chip=x86-64-v2",
                "--tune",
                "--tune-min-time=0.05",
                "--tune-cache",
                cache.to_str().unwrap(),
            ],
            &[("HALO_IREE_COMPILE", &compiler)],
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "{text}");
        text
    };
    let first = tune();
    assert!(!first.contains("found in the cache"), "{first}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("onnx_mlp.tune.json")).unwrap()).unwrap();
    let variants = report["variants"].as_array().unwrap();
    // The model has no convolution, so `o3-shift-depthwise-only` and `o3-keep-convolutions`
    // would repeat `fast-o3`; halo's kernels (on the CPU by default) add `fast-kernels` and
    // `fast-o3-kernels`.
    assert_eq!(variants.len(), 12, "{report:#}");
    let calling: Vec<&str> = variants
        .iter()
        .filter(|v| v["kernels"] == true)
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(calling, ["fast-kernels", "fast-o3-kernels"], "{report:#}");
    let fast_kernels = variants.iter().find(|v| v["name"] == "fast-kernels").unwrap();
    assert_eq!(fast_kernels["status"], "measured", "{fast_kernels:#}");
    assert_eq!(
        report["chosen_kernels"] == true,
        first.contains("runs only on halo"),
        "{first}"
    );
    assert!(variants.iter().all(|v| v["graph_rewrite"] == "none"), "{report:#}");
    assert_eq!(report["baseline"], "iree-default");
    assert_eq!(variants[0]["deviation"], 0.0);
    // iree-compile 3.13 rejects this model at O3 (see flag_set.rs): the report says so and why.
    let o3 = variants.iter().find(|v| v["name"] == "fast-o3").unwrap();
    assert_eq!(o3["status"], "compile-failed", "{o3:#}");
    assert!(o3["error"].as_str().unwrap().contains("error:"), "{o3:#}");
    let chosen = variants.iter().find(|v| v["name"] == report["chosen"]).unwrap();
    assert_eq!(chosen["status"], "measured", "{report:#}");
    let fastest = variants
        .iter()
        .filter(|v| v["status"] == "measured")
        .map(|v| v["per_call_ms"].as_f64().unwrap())
        .fold(f64::MAX, f64::min);
    // The fastest, or halo compile's own choice within 3 % of it.
    let chosen_ms = chosen["per_call_ms"].as_f64().unwrap();
    assert!(chosen_ms == fastest || chosen_ms * 0.97 < fastest, "{report:#}");
    assert!(
        first.contains(&format!("chose '{}'", report["chosen"].as_str().unwrap())),
        "{first}"
    );
    let cases: Vec<PathBuf> = common::cases(&fixtures)
        .into_iter()
        .filter(|case| case.file_name().unwrap().to_string_lossy().starts_with("onnx_mlp."))
        .collect();
    for case in &cases {
        let diff = common::check_case_in(&fixtures, out.path(), case, &[], &[], common::close_enough);
        assert!(diff.is_none(), "{}", diff.unwrap());
    }

    let tuned = std::fs::read(&vmfb).unwrap();
    std::fs::remove_file(&vmfb).unwrap();
    let second = tune();
    assert!(second.contains("found in the cache"), "{second}");
    assert_eq!(std::fs::read(&vmfb).unwrap(), tuned);

    let entry = std::fs::read_dir(&cache).unwrap().next().unwrap().unwrap().path();
    std::fs::write(entry.join("report.json"), "{ truncated").unwrap();
    let third = tune();
    assert!(
        third.contains("warning: ignoring a corrupt tuning cache entry"),
        "{third}"
    );
    assert!(!third.contains("found in the cache"), "{third}");
    assert!(
        tune().contains("found in the cache"),
        "the corrupt entry was not replaced"
    );
}

#[test]
fn tuning_flags_are_checked_before_anything_compiles() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.vmfb");
    let out = out.to_str().unwrap();
    let model = repo().join("fixtures/models/onnx_mlp.onnx");
    let model = model.to_str().unwrap();
    let cases: [(&[&str], i32, &str); 5] = [
        (&["--tune", "--flag-set=fast"], 2, "cannot be used with"),
        (&["--input=x.npy"], 2, "--tune"),
        (
            &["--tune", "--tune-min-time=0"],
            1,
            "--tune-min-time=0 is not a positive number",
        ),
        (&["--tune", "--jobs=0"], 1, "--jobs must be at least 1"),
        (
            &["--tune", "--input=@/nonexistent/in.npy"],
            1,
            "reading --input '@/nonexistent/in.npy'",
        ),
    ];
    for (flags, code, message) in cases {
        let mut args = vec!["compile", model, "-o", out];
        args.extend_from_slice(flags);
        let output = halo(&args, &[("HALO_IREE_COMPILE", Path::new("/nonexistent/iree-compile"))]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(
            stderr.contains(message) && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_model_the_importer_rejects_is_named_with_the_importers_reason() {
    let Some(compiler) = real_compiler("a_model_the_importer_rejects_is_named_with_the_importers_reason") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("truncated.onnx");
    let whole = std::fs::read(repo().join("fixtures/models/onnx_mlp.onnx")).unwrap();
    std::fs::write(&model, &whole[..whole.len() / 2]).unwrap();
    let output = halo(
        &[
            "compile",
            model.to_str().unwrap(),
            "-o",
            dir.path().join("t.vmfb").to_str().unwrap(),
        ],
        &[("HALO_IREE_COMPILE", &compiler)],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("iree-import-onnx rejected model") && stderr.contains("truncated.onnx"),
        "{stderr}"
    );
    assert!(!dir.path().join("t.vmfb").exists());
}

#[test]
fn bad_settings_end_in_errors_that_name_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.vmfb");
    let out = out.to_str().unwrap();
    let model = repo().join("fixtures/models/onnx_mlp.onnx");
    let model = model.to_str().unwrap();
    let nowhere = Path::new("/nonexistent/iree-compile");
    let foreign = if cfg!(target_arch = "aarch64") {
        "--target-arch=x86_64"
    } else {
        "--target-arch=arm_64"
    };
    let mlir = repo().join("fixtures/models/tiny_add.mlir");
    let mlir = mlir.to_str().unwrap();
    let cases: [(&[&str], &str); 11] = [
        (
            &[
                "compile",
                model,
                "-o",
                out,
                "--iree-compile=/bin/true",
                "--batch-sizes=4,0",
            ],
            "batch size 0 is not from 1 to 65536",
        ),
        (
            &[
                "compile",
                mlir,
                "-o",
                out,
                "--iree-compile=/bin/true",
                "--batch-sizes=4",
            ],
            "--batch-sizes is for ONNX models",
        ),
        (
            &["compile", model, "-o", out, "--iree-compile=/nonexistent/iree-compile"],
            "given by --iree-compile",
        ),
        (
            &["compile", model, "-o", out, "--target-arch=riscv64"],
            "unknown CPU architecture 'riscv64'",
        ),
        (
            &["compile", model, "-o", out, "--device=vulkan", "--target-arch=arm_64"],
            "applies to CPU devices",
        ),
        (
            &["compile", model, "-o", out, foreign, "--tune"],
            "cannot run programs for --target-arch",
        ),
        (
            &["compile", model, "-o", out, "--graph-rewrite=fuse-everything"],
            "unknown graph rewrite 'fuse-everything'",
        ),
        (
            &["compile", model, "-o", out, "--flag-set=turbo"],
            "unknown flag set 'turbo'",
        ),
        (
            &["compile", model, "-o", out, "--device=tpu://0"],
            "no target for device 'tpu://0'",
        ),
        (
            &["compile", "/nonexistent/m.onnx", "-o", out, "--iree-compile=/bin/true"],
            "/nonexistent/m.onnx",
        ),
        (&["compile", model, "-o", out], "named by HALO_IREE_COMPILE"),
    ];
    for (args, message) in cases {
        let output = halo(args, &[("HALO_IREE_COMPILE", nowhere)]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(message) && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
}

/// `--portable`: IREE's code only (the program runs on IREE's runtime too), with the graph
/// rewrites.
#[test]
fn compiled_benchmark_models_give_onnxruntimes_answers() {
    let Some(compiler) = real_compiler("compiled_benchmark_models_give_onnxruntimes_answers") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let fixtures = repo().join("fixtures/benchmark-models");
    // ShuffleNet's depthwise convolutions, SqueezeNet's 3x3 ones, DenseNet's narrowing ones,
    // every model's max pools and DenseNet's average pools (moved before their convolutions) are
    // rewritten before import, and the other convolutions with a bias add it after them; the
    // encoder and the MLP (whose batch stays dynamic) have none to rewrite.
    for (model, declaration, rewritten) in [
        (
            "squeezenet",
            "sync func @squeezenet(%input: tensor<1x3x64x64xf32>) -> (%flatten_117: tensor<1x10xf32>)",
            Some("graph rewrite 'convolutions-as-shifts': 29 node(s) replaced before import"),
        ),
        (
            "encoder",
            "sync func @encoder(%tokens: tensor<1x16xi64>) -> (%layernormalization_123: tensor<1x16x32xf32>)",
            None,
        ),
        (
            "shufflenet_v2",
            "sync func @shufflenet_v2(%input: tensor<1x3x64x64xf32>) -> (%gemm_333: tensor<1x10xf32>)",
            Some("graph rewrite 'convolutions-as-shifts': 57 node(s) replaced before import"),
        ),
        (
            "densenet121",
            "sync func @densenet121(%input: tensor<1x3x64x64xf32>) -> (%gemm_1028: tensor<1x10xf32>)",
            Some("graph rewrite 'convolutions-as-shifts': 62 node(s) replaced before import"),
        ),
        (
            "mlp",
            "sync func @mlp(%input: tensor<?x16xf32>) -> (%add_14: tensor<?x10xf32>)",
            None,
        ),
    ] {
        let vmfb = out.path().join(format!("{model}.vmfb"));
        let onnx = fixtures.join(format!("{model}.onnx"));
        let output = halo(
            &[
                "compile",
                onnx.to_str().unwrap(),
                "-o",
                vmfb.to_str().unwrap(),
                "--portable",
            ],
            &[("HALO_IREE_COMPILE", &compiler)],
        );
        assert!(
            output.status.success(),
            "{model}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let compiled = String::from_utf8_lossy(&output.stdout);
        assert!(!compiled.contains("halo's kernels"), "{model}: {compiled}");
        let program = std::fs::read(&vmfb).unwrap();
        let calls_kernels = KERNEL_IMPORTS
            .iter()
            .any(|name| program.windows(name.len()).any(|w| w == name.as_bytes()));
        assert!(!calls_kernels, "{model}: --portable left a call of halo's kernels");
        match rewritten {
            Some(line) => assert!(compiled.contains(line), "{model}: {compiled}"),
            None => assert!(!compiled.contains("graph rewrite"), "{model}: {compiled}"),
        }
        assert_recorded_answers(model, &vmfb, "local-task");
        let module = format!("--module={}", vmfb.display());
        let function = format!("--function={model}");
        // The importer leaves the declaration out; halo writes it, with the graph's names.
        let output = halo(&["run-module", &module, &function], &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(declaration), "{model}: {stderr}");
    }
}

/// By default on the CPU (`--kernels`): the MLP's and the encoder's matmuls call halo's matmul kernel
/// (their bias and ReLU fused), SqueezeNet's 3x3 convolutions (bias
/// and ReLU fused; its stem's stride 2 through its input's phases) its convolution kernel and
/// its 1x1 ones the matmul kernel, ShuffleNet v2's and MobileNet-v2's depthwise convolutions
/// (strides 1 and 2; MobileNet's with ReLU6 fused, as into its stem and 1x1 convolutions) the
/// depthwise kernel, the program says it needs halo, and
/// its answers are still onnxruntime's on both CPU drivers; other targets are refused.
#[test]
fn a_model_compiled_with_halos_kernels_calls_them_and_gives_onnxruntimes_answers() {
    let test = "a_model_compiled_with_halos_kernels_calls_them_and_gives_onnxruntimes_answers";
    let Some(compiler) = real_compiler(test) else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let compile = |model: &str, flags: &[&str]| {
        let onnx = repo().join(format!("fixtures/benchmark-models/{model}.onnx"));
        let vmfb = out.path().join(format!("{model}.vmfb"));
        let mut args = vec!["compile", onnx.to_str().unwrap(), "-o", vmfb.to_str().unwrap()];
        args.extend(flags);
        (halo(&args, &[("HALO_IREE_COMPILE", &compiler)]), vmfb)
    };
    // The encoder's projections are MatMuls of [1, tokens, K] by [K, N], which arrive as batch
    // matmuls of one batch against a broadcast matrix (the feed-forward layer's GELU fused); its
    // attention's are batch matmuls, which have a dispatch of their own, and a scaled softmax.
    let models = [
        // Every dense layer's bias and ReLU fused into the product.
        ("mlp", &["halo_matmul_f32_v4", "halo_dense_tile"][..]),
        (
            "encoder",
            &[
                "halo_matmul_f32_v4",
                "halo_dense_tile",
                "halo_matmul_f32_v0",
                "halo_batch_matmul_tile",
                "halo_softmax_f32_v0",
                "halo_softmax_tile",
            ],
        ),
        ("squeezenet", &["halo_conv2d_f32_v4", "halo_pointwise_tile"]),
        (
            "shufflenet_v2",
            &["halo_depthwise_conv2d_f32_v2", "halo_depthwise_padded_tile"],
        ),
        // ReLU6 fused into each kind of convolution: the stem, the depthwise and the 1x1 ones;
        // a block's sum with its input into the 1x1 convolution that ends it; the global
        // average pool's sum before the classifier.
        (
            "mobilenet_v2",
            &[
                "halo_conv2d_tile",
                "halo_depthwise_padded_tile",
                "halo_pointwise_tile",
                "halo_pointwise_residual_tile",
                "halo_matmul_f32_v5",
                "halo_row_sums_tile",
            ],
        ),
    ];
    for (model, kernels) in models {
        let (output, vmfb) = compile(model, &[]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{model}: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.contains(
                "halo's kernels (halo_matmul_f32_v0, halo_matmul_f32_v4, halo_matmul_f32_v5, halo_conv2d_f32_v4, \
                 halo_depthwise_conv2d_f32_v2, halo_softmax_f32_v0, halo_row_sums_f32_v0) where they apply: \
                 this program runs \
                 only on halo's CPU drivers \
                 (--portable writes one that IREE's runtime runs too)"
            ),
            "{stdout}"
        );
        let program = std::fs::read(&vmfb).unwrap();
        for kernel in kernels {
            let named = program.windows(kernel.len()).any(|w| w == kernel.as_bytes());
            assert!(named, "{model} does not hold {kernel}");
        }
        for device in ["local-task", "local-sync"] {
            assert_recorded_answers(model, &vmfb, device);
        }
    }
    let stderr = String::from_utf8_lossy(&compile("mlp", &["--kernels", "--device=vulkan"]).0.stderr).into_owned();
    assert!(stderr.contains("--kernels needs a CPU device"), "{stderr}");
    let stderr = String::from_utf8_lossy(&compile("mlp", &["--kernels", "--portable"]).0.stderr).into_owned();
    assert!(
        stderr.contains("'--kernels' cannot be used with '--portable'"),
        "{stderr}"
    );
}

#[test]
fn dense_layers_wider_than_a_kernel_tile_give_the_answers_of_iree_s_code() {
    let test = "dense_layers_wider_than_a_kernel_tile_give_the_answers_of_iree_s_code";
    let Some(compiler) = real_compiler(test) else {
        return;
    };
    // Sums of 70 products of about 0.1 in another order: a few float roundings apart.
    let calls = [("dense", "5x70xf32=0.5", 2000), ("dense_row", "1x70xf32=0.5", 400)];
    kernels_give_the_answers_of_iree_s_code(&compiler, ("wide_dense.mlir", &[]), &calls, &["halo_dense_tile"], 1e-5);
}

#[test]
fn dense_weights_are_packed_once_at_compile_time_even_where_padding_them_would_grow_them_past_iree_s_limit() {
    let test =
        "dense_weights_are_packed_once_at_compile_time_even_where_padding_them_would_grow_them_past_iree_s_limit";
    let Some(compiler) = real_compiler(test) else {
        return;
    };
    // The fixture's weights are computed, not stored: a limit between their 3.3 MB and the 4.7 MB
    // of a zero-padded packing has IREE fold the weights with an unpadded packing, and neither
    // with a padded one.
    let limit = ["--iree-opt-const-expr-max-size-increase-threshold=4000000"];
    // Sums of 2048 products of about 0.005: a few float roundings apart.
    let calls = [("tall", "1x2048xf32=0.5", 400)];
    let tiles = ["halo_dense_tile"];
    let program = kernels_give_the_answers_of_iree_s_code(&compiler, ("tall_dense.mlir", &limit), &calls, &tiles, 1e-4);
    let own = b"tall_dispatch";
    assert!(
        !program.windows(own.len()).any(|w| w == own),
        "@tall packs its weights on every call"
    );
}

#[test]
fn depthwise_convolutions_get_their_padding_from_the_kernel_only_where_it_is_even_zeros() {
    let test = "depthwise_convolutions_get_their_padding_from_the_kernel_only_where_it_is_even_zeros";
    let Some(compiler) = real_compiler(test) else {
        return;
    };
    let calls = [
        ("even", "1x4x9x11xf32=0.5", 396),
        ("uneven", "1x4x9x11xf32=0.5", 396),
        ("ones", "1x4x9x11xf32=0.5", 396),
        // Sums of -22 to 22: both bounds of the clip are reached.
        ("even_relu6", "1x4x9x11xf32=2", 396),
    ];
    // The padded form for @even, the unpadded one (after IREE's pad) for the other two.
    let tiles = ["halo_depthwise_padded_tile", "halo_depthwise_tile"];
    let program =
        kernels_give_the_answers_of_iree_s_code(&compiler, ("padded_depthwise.mlir", &[]), &calls, &tiles, 1e-5);
    // @even_relu6's pad and clip are the kernel's: no dispatch of IREE's code is left to it.
    let own = b"even_relu6_dispatch";
    assert!(
        !program.windows(own.len()).any(|w| w == own),
        "@even_relu6 has dispatches besides the kernel's"
    );
}

#[test]
fn a_1x1_convolution_summed_with_another_tensor_gets_the_sum_from_the_kernel() {
    let test = "a_1x1_convolution_summed_with_another_tensor_gets_the_sum_from_the_kernel";
    let Some(compiler) = real_compiler(test) else {
        return;
    };
    // A residual read at the wrong place shows in the answers.
    let input = format!("1x8x5x6xf32={}", ripple(240));
    let calls = [
        ("sum_relu", input.as_str(), 240),
        ("sum", input.as_str(), 240),
        ("chained", input.as_str(), 240),
    ];
    let tiles = ["halo_pointwise_residual_tile"];
    let program =
        kernels_give_the_answers_of_iree_s_code(&compiler, ("residual_pointwise.mlir", &[]), &calls, &tiles, 1e-5);
    for function in ["sum_relu", "sum", "chained"] {
        let own = dispatches_of(&program, function);
        assert!(
            own.is_empty(),
            "@{function} has dispatches besides the kernel's: {own:?}"
        );
    }
    // A convolution whose result is read twice is not fused into the sum, which would compute it
    // a second time there.
    let text = preprocessed(&compiler, "residual_pointwise.mlir");
    assert_eq!(
        kernel_dispatches(function_body(&text, "chained")),
        ["halo_pointwise_executable", "halo_pointwise_residual_executable"],
        "@chained's kernel dispatches"
    );
}

#[test]
fn a_squeeze_and_excitations_weights_scale_the_filters_of_the_1x1_convolution_after_them() {
    let test = "a_squeeze_and_excitations_weights_scale_the_filters_of_the_1x1_convolution_after_them";
    let Some(compiler) = real_compiler(test) else {
        return;
    };
    // A weight applied to the wrong channel, or not at all, shows in the answers.
    let input = format!("1x8x5x6xf32={}", ripple(240));
    let calls = [
        ("excited", input.as_str(), 240),
        ("excited_sum", input.as_str(), 240),
        ("row_scaled", input.as_str(), 240),
    ];
    let tiles = ["halo_pointwise_tile", "halo_pointwise_residual_tile"];
    // The filters scaled before the product round differently from the image scaled before it,
    // and the answers are printed to six digits (values up to about 4).
    kernels_give_the_answers_of_iree_s_code(&compiler, ("residual_pointwise.mlir", &[]), &calls, &tiles, 1e-4);
    let text = preprocessed(&compiler, "residual_pointwise.mlir");
    let cases = [
        ("excited", "halo_pointwise_executable", false),
        ("excited_sum", "halo_pointwise_residual_executable", false),
        ("row_scaled", "halo_pointwise_executable", true),
    ];
    for (function, kernel, scaled_by_iree) in cases {
        let body = function_body(&text, function);
        assert_eq!(kernel_dispatches(body), [kernel], "@{function}'s kernel dispatches");
        // IREE's code computes the scaled image only where the kernel cannot take the scale.
        let writes_image = body.lines().any(|line| {
            line.contains("linalg.generic")
                && line
                    .split_once("outs(")
                    .is_some_and(|(_, outs)| outs.contains("tensor<1x8x5x6xf32>"))
        });
        assert_eq!(writes_image, scaled_by_iree, "@{function} computes x · s itself");
    }
}

/// `fixtures/kernels/<source>` as `halo compile` gives it to IREE's compiler's later phases,
/// halo's kernels in place, before IREE partitions it into dispatches of its own.
fn preprocessed(compiler: &Path, source: &str) -> String {
    let out = tempfile::tempdir().unwrap();
    let text = out.path().join("preprocessed.mlir");
    let source = repo().join("fixtures/kernels").join(source);
    let args = [
        "compile",
        source.to_str().unwrap(),
        "-o",
        text.to_str().unwrap(),
        "--",
        "--compile-to=preprocessing",
    ];
    let output = halo(&args, &[("HALO_IREE_COMPILE", compiler)]);
    assert!(output.status.success(), "{output:?}");
    std::fs::read_to_string(&text).unwrap()
}

/// The body of `function` in the printed program `text`.
fn function_body<'t>(text: &'t str, function: &str) -> &'t str {
    let start = text
        .find(&format!("@{function}("))
        .expect("the function is in the program");
    let body = &text[start..];
    &body[..body.find("\n  }").unwrap_or(body.len())]
}

/// The executables of halo's kernels that a function's `body` dispatches, in order.
fn kernel_dispatches(body: &str) -> Vec<&str> {
    body.match_indices("flow.dispatch @")
        .map(|(at, found)| {
            let name = &body[at + found.len()..];
            &name[..name.find("::").unwrap_or(0)]
        })
        .collect()
}

#[test]
fn a_few_columns_past_a_kernel_tile_are_the_last_tiles_and_every_column_is_computed_once() {
    let test = "a_few_columns_past_a_kernel_tile_are_the_last_tiles_and_every_column_is_computed_once";
    let Some(compiler) = real_compiler(test) else {
        return;
    };
    let inputs = [
        ("pointwise_196", format!("1x4x14x14xf32={}", ripple(784)), 1568),
        ("pointwise_241", format!("1x4x1x241xf32={}", ripple(964)), 1928),
        ("matmul_200", format!("5x24xf32={}", ripple(120)), 1000),
        ("batch_matmul_197", format!("2x5x24xf32={}", ripple(240)), 1970),
    ];
    let calls: Vec<(&str, &str, usize)> = inputs
        .iter()
        .map(|(function, input, count)| (*function, input.as_str(), *count))
        .collect();
    let tiles = ["halo_pointwise_tile", "halo_matmul_tile", "halo_batch_matmul_tile"];
    let program = kernels_give_the_answers_of_iree_s_code(&compiler, ("tail_columns.mlir", &[]), &calls, &tiles, 1e-5);
    for (function, _, _) in &inputs {
        assert_only_copies_are_left(&program, function);
    }
}

#[test]
fn a_global_average_pools_sum_is_the_row_sums_kernels_and_a_windowed_pool_is_not() {
    let test = "a_global_average_pools_sum_is_the_row_sums_kernels_and_a_windowed_pool_is_not";
    let Some(compiler) = real_compiler(test) else {
        return;
    };
    // A channel summed into another's place, or a plane summed short, shows in the answers.
    let input = format!("1x8x5x6xf32={}", ripple(240));
    let calls = [("global_mean", input.as_str(), 8), ("window_sum", input.as_str(), 48)];
    let tiles = ["halo_row_sums_tile", "halo_row_sums_f32_v0"];
    kernels_give_the_answers_of_iree_s_code(&compiler, ("global_pool.mlir", &[]), &calls, &tiles, 1e-5);
    let text = preprocessed(&compiler, "global_pool.mlir");
    let taken = kernel_dispatches(function_body(&text, "global_mean"));
    assert_eq!(taken, ["halo_row_sums_executable"], "@global_mean's kernel dispatches");
    let left = kernel_dispatches(function_body(&text, "window_sum"));
    assert!(left.is_empty(), "@window_sum calls {left:?}");
}

#[test]
fn a_grouped_convolution_calls_the_convolution_kernel_with_its_bias_and_relu() {
    let test = "a_grouped_convolution_calls_the_convolution_kernel_with_its_bias_and_relu";
    let Some(compiler) = real_compiler(test) else {
        return;
    };
    // A group reading another's channels, or a tap the wrong plane, shows in the answers.
    let input = format!("1x12x9x11xf32={}", ripple(1188));
    let calls = [
        ("grouped_relu", input.as_str(), 594),
        ("grouped_s2", input.as_str(), 180),
        ("bare_relu", input.as_str(), 180),
        ("bare", input.as_str(), 594),
    ];
    let program = kernels_give_the_answers_of_iree_s_code(
        &compiler,
        ("grouped_conv.mlir", &[]),
        &calls,
        &["halo_conv2d_tile", "halo_conv2d_f32_v4"],
        1e-5,
    );
    // With a bias or without, only the pad and the phase split are left.
    for function in ["grouped_relu", "grouped_s2", "bare_relu", "bare"] {
        assert_only_copies_are_left(&program, function);
    }
}

#[test]
fn a_silu_after_a_convolution_is_the_kernels_epilogue_and_a_gate_is_not_taken_for_one() {
    let fused = [
        ("pointwise_add_silu", 1188),
        ("pointwise_silu_s2", 360),
        ("conv_add_silu_s2", 360),
        ("conv_silu", 1188),
        ("depthwise_silu", 792),
        ("depthwise_silu_s2", 160),
    ];
    activations_are_the_kernels_epilogue(
        "a_silu_after_a_convolution_is_the_kernels_epilogue_and_a_gate_is_not_taken_for_one",
        "silu.mlir",
        &fused,
        ("gated", 1188),
    );
}

#[test]
fn a_hard_swish_after_a_convolution_is_the_kernels_epilogue_and_a_gate_is_not_taken_for_one() {
    let fused = [
        ("pointwise_add_hard_swish", 1188),
        ("pointwise_hard_swish_s2", 360),
        ("conv_add_hard_swish_s2", 360),
        ("conv_hard_swish", 1188),
        ("depthwise_hard_swish", 792),
        ("depthwise_hard_swish_s2", 160),
    ];
    activations_are_the_kernels_epilogue(
        "a_hard_swish_after_a_convolution_is_the_kernels_epilogue_and_a_gate_is_not_taken_for_one",
        "hard_swish.mlir",
        &fused,
        ("gated", 1188),
    );
}

#[test]
fn gelu_after_a_transformer_s_projection_is_the_dense_kernel_s_epilogue_and_another_erf_is_not() {
    // Sums of 70 products up to about ±10 in another order: GELU's bend, and both of erf's fits.
    one_taken_and_one_left(
        "gelu_after_a_transformer_s_projection_is_the_dense_kernel_s_epilogue_and_another_erf_is_not",
        ("gelu.mlir", &format!("1x5x70xf32={}", ripple(350)), 1000),
        ("projection_gelu", "erf_of_half"),
        &["halo_dense_tile", "halo_matmul_f32_v4"],
        1e-4,
    );
}

#[test]
fn attention_s_scaled_softmax_calls_the_kernel_and_a_chain_shifted_by_another_maximum_does_not() {
    // Scores from -3.75 to 3.75 after the scale: weights from about e^-7.5 of a row's largest.
    one_taken_and_one_left(
        "attention_s_scaled_softmax_calls_the_kernel_and_a_chain_shifted_by_another_maximum_does_not",
        ("softmax.mlir", &format!("1x2x5x37xf32={}", ripple(370)), 370),
        ("scaled_softmax", "shifted_by_another"),
        &["halo_softmax_tile", "halo_softmax_f32_v0"],
        1e-6,
    );
}

/// Compiles `fixtures/kernels/<source>` with halo's kernels and with `--portable`, checks that
/// both functions give the same `elements` answers for `input` from both programs within
/// `tolerance`, that the program calls each of `tiles`, that `taken` keeps nothing of IREE's code
/// but copies, and that `left` (a lookalike of what the kernel takes) keeps a dispatch of its own.
fn one_taken_and_one_left(
    test: &str,
    (source, input, elements): (&str, &str, usize),
    (taken, left): (&str, &str),
    tiles: &[&str],
    tolerance: f64,
) {
    let Some(compiler) = real_compiler(test) else {
        return;
    };
    let calls = [(taken, input, elements), (left, input, elements)];
    let program = kernels_give_the_answers_of_iree_s_code(&compiler, (source, &[]), &calls, tiles, tolerance);
    assert_only_copies_are_left(&program, taken);
    assert!(
        !dispatches_of(&program, left).is_empty(),
        "@{left} was taken by a kernel"
    );
}

#[test]
fn a_relu_after_a_convolution_in_either_form_is_the_kernels_epilogue_and_a_minimum_is_not() {
    let fused = [
        ("pointwise_add_relu", 1188),
        ("pointwise_relu_s2", 360),
        ("conv_add_relu_s2", 360),
        ("conv_relu", 1188),
        ("depthwise_relu", 792),
        ("depthwise_relu_s2", 160),
    ];
    activations_are_the_kernels_epilogue(
        "a_relu_after_a_convolution_in_either_form_is_the_kernels_epilogue_and_a_minimum_is_not",
        "relu.mlir",
        &fused,
        ("negative_part", 792),
    );
}

/// Compiles `fixtures/kernels/<source>` (convolutions of 8 channels of 9x11 followed by an
/// activation) and checks that each of `fused` gives `--portable`'s answers with nothing of
/// IREE's code left but copies, and that `left`, which is not the activation, keeps a dispatch
/// of its own.
fn activations_are_the_kernels_epilogue(test: &str, source: &str, fused: &[(&str, usize)], left: (&str, usize)) {
    let Some(compiler) = real_compiler(test) else {
        return;
    };
    // Sums of -5 to 5: every bend of the activations and their tails.
    let input = format!("1x8x9x11xf32={}", ripple(792));
    let calls: Vec<(&str, &str, usize)> = fused
        .iter()
        .chain([&left])
        .map(|&(function, count)| (function, input.as_str(), count))
        .collect();
    let tiles = [
        "halo_pointwise_tile",
        "halo_matmul_f32_v5",
        "halo_conv2d_tile",
        "halo_conv2d_f32_v4",
        "halo_depthwise_padded_tile",
        "halo_depthwise_tile",
        "halo_depthwise_conv2d_f32_v2",
    ];
    let program = kernels_give_the_answers_of_iree_s_code(&compiler, (source, &[]), &calls, &tiles, 1e-5);
    for (function, _) in fused {
        assert_only_copies_are_left(&program, function);
    }
    assert!(
        !dispatches_of(&program, left.0).is_empty(),
        "@{}'s activation was fused into a kernel",
        left.0
    );
}

/// The names of the dispatches of IREE's code that `function` kept in `program`.
fn dispatches_of(program: &[u8], function: &str) -> Vec<String> {
    let prefix = format!("{function}_dispatch_");
    program
        .windows(prefix.len())
        .enumerate()
        .filter(|(_, w)| *w == prefix.as_bytes())
        .map(|(at, _)| {
            let name = program[at..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_');
            String::from_utf8(name.copied().collect()).unwrap()
        })
        .collect()
}

/// What is left of IREE's code in `function` is pads and the split into phases: no
/// convolution, bias or activation of its own. (IREE keeps one copy of identical dispatches, so a
/// function may have none under its own name.)
fn assert_only_copies_are_left(program: &[u8], function: &str) {
    for name in dispatches_of(program, function) {
        assert!(
            name.contains("_slow_memcpy") || name.contains("_transpose_"),
            "@{function} keeps IREE's {name}"
        );
    }
}

/// `elements` values from -1.5 to 1.5, space-separated, that vary from one element to the next
/// (so along rows and across channels) and repeat only every 13.
fn ripple(elements: i32) -> String {
    let values: Vec<String> = (0..elements)
        .map(|i| (f64::from((i * 7) % 13) / 4.0 - 1.5).to_string())
        .collect();
    values.join(" ")
}

/// Compiles `fixtures/kernels/<source>` with halo's kernels and with `--portable`, checks that
/// the first program calls each of `tiles`, and that each call `(function, input, elements)`
/// gives the same `elements` values from both, within `tolerance`. `compiler_flags` go to
/// `iree-compile` for both. Returns the first program.
fn kernels_give_the_answers_of_iree_s_code(
    compiler: &Path,
    (source, compiler_flags): (&str, &[&str]),
    calls: &[(&str, &str, usize)],
    tiles: &[&str],
    tolerance: f64,
) -> Vec<u8> {
    let out = tempfile::tempdir().unwrap();
    let source = repo().join("fixtures/kernels").join(source);
    let compile = |name: &str, flags: &[&str]| {
        let vmfb = out.path().join(name);
        let mut args = vec!["compile", source.to_str().unwrap(), "-o", vmfb.to_str().unwrap()];
        args.extend(flags);
        args.push("--");
        args.extend(compiler_flags);
        let output = halo(&args, &[("HALO_IREE_COMPILE", compiler)]);
        assert!(output.status.success(), "{output:?}");
        vmfb
    };
    let (kernels, portable) = (compile("kernels.vmfb", &[]), compile("portable.vmfb", &["--portable"]));
    let program = std::fs::read(&kernels).unwrap();
    for tile in tiles {
        let named = program.windows(tile.len()).any(|w| w == tile.as_bytes());
        assert!(named, "the program calls halo's kernel through {tile}");
    }
    let answer = |vmfb: &Path, function: &str, input: &str| {
        let module = format!("--module={}", vmfb.display());
        let (function, input) = (format!("--function={function}"), format!("--input={input}"));
        let run = halo(
            &[
                "run-module",
                &module,
                &function,
                &input,
                "--output_max_element_count=4096",
            ],
            &[],
        );
        assert!(run.status.success(), "{run:?}");
        let text = String::from_utf8_lossy(&run.stdout).into_owned();
        let values = text.rsplit_once('=').map_or("", |(_, values)| values);
        values
            .split(|c: char| c.is_whitespace() || c == '[' || c == ']')
            .filter(|t| !t.is_empty())
            .map(|t| t.parse().unwrap())
            .collect::<Vec<f64>>()
    };
    for &(function, input, count) in calls {
        let (got, want) = (answer(&kernels, function, input), answer(&portable, function, input));
        assert_eq!((got.len(), want.len()), (count, count), "{function}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= tolerance, "{function}[{i}]: {g} against {w}");
        }
    }
    program
}

#[test]
fn batch_sizes_add_a_function_per_size_giving_the_models_answers_and_a_fixed_batch_is_refused() {
    let Some(compiler) =
        real_compiler("batch_sizes_add_a_function_per_size_giving_the_models_answers_and_a_fixed_batch_is_refused")
    else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let fixtures = repo().join("fixtures/benchmark-models");
    let vmfb = out.path().join("mlp.vmfb");
    let compile = |model: &str, output: &Path| compile_fixture(&compiler, model, output, "--batch-sizes=3,1");
    let output = compile("mlp.onnx", &vmfb);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("functions for fixed batch sizes: each public function's name with _b1, _b3"),
        "{stdout}"
    );
    let dump = String::from_utf8_lossy(&halo(&["dump-module", vmfb.to_str().unwrap()], &[]).stdout).into_owned();
    assert!(
        dump.contains("sync func @mlp_b3(%input: tensor<3x16xf32>) -> (%add_14: tensor<3x10xf32>)"),
        "{dump}"
    );
    // The batch-1 function gives onnxruntime's recorded answer; batch 3 the model's own.
    let module = format!("--module={}", vmfb.display());
    let input = format!("--input=@{}", fixtures.join("mlp.input.npy").display());
    let expected = format!("--expected_output=@{}", fixtures.join("mlp.expected.npy").display());
    let run = halo(&["run-module", &module, "--function=mlp_b1", &input, &expected], &[]);
    assert!(String::from_utf8_lossy(&run.stdout).contains("[SUCCESS]"), "{run:?}");
    let rows = "--input=3x16xf32=0.25";
    let answer = |function: &str| {
        let run = halo(&["run-module", &module, &format!("--function={function}"), rows], &[]);
        assert!(run.status.success(), "{run:?}");
        String::from_utf8_lossy(&run.stdout).replace(function, "f")
    };
    assert!(
        common::close_enough(&answer("mlp_b3"), &answer("mlp")),
        "{}\n{}",
        answer("mlp_b3"),
        answer("mlp")
    );

    let refused = compile("squeezenet.onnx", &out.path().join("squeezenet.vmfb"));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("to lead with a dynamic batch dimension")
            && stderr.contains("input 0 is !torch.vtensor<[1,3,64,64],f32>"),
        "{stderr}"
    );
}

/// IREE's SPIR-V for ShuffleNet's depthwise convolutions gives wrong answers (on lavapipe as on
/// an NVIDIA GPU); `halo compile --device=vulkan` rewrites them, so the module gives
/// onnxruntime's.
#[test]
fn a_model_compiled_for_vulkan_gives_onnxruntimes_answers() {
    let Some(compiler) = compiler_and_vulkan("a_model_compiled_for_vulkan_gives_onnxruntimes_answers") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let vmfb = out.path().join("shufflenet_v2.vmfb");
    let output = compile_fixture(&compiler, "shufflenet_v2.onnx", &vmfb, "--device=vulkan");
    let compiled = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("note: compiled for IREE's portable Vulkan target"),
        "{stderr}"
    );
    assert!(
        compiled.contains("graph rewrite 'convolutions-as-shifts'")
            && compiled.contains("with flag set 'fast'")
            && compiled.contains("--iree-hal-target-device=vulkan")
            && !compiled.contains("O3"),
        "{compiled}"
    );
    assert_recorded_answers("shufflenet_v2", &vmfb, "vulkan");
}

/// `halo compile --device=metal` keeps IREE's convolutions (no graph rewrite): run with a GPU's
/// lockstep simd-groups, as the emulated device runs them, they give onnxruntime's answers.
/// SqueezeNet's kernels have threadgroups whose z they ignore and ShuffleNet's zero outputs in
/// one loop that other threads accumulate into in the next; both broke an emulation that ran
/// threads one after another.
#[test]
fn models_compiled_for_metal_give_onnxruntimes_answers_on_the_emulated_device() {
    let test = "models_compiled_for_metal_give_onnxruntimes_answers_on_the_emulated_device";
    let Some(compiler) = real_compiler(test) else { return };
    if !common::device_present("metal") {
        println!("skipped: {test}: no Metal device (the emulated one needs clang)");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    for model in ["squeezenet", "shufflenet_v2"] {
        let vmfb = out.path().join(format!("{model}.vmfb"));
        let output = compile_fixture(&compiler, &format!("{model}.onnx"), &vmfb, "--device=metal://emulated");
        let compiled = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        assert!(
            compiled.contains("--iree-hal-target-device=metal") && !compiled.contains("graph rewrite"),
            "{compiled}"
        );
        assert_recorded_answers(model, &vmfb, "metal://emulated");
    }
}

/// Runs benchmark model `model`, compiled to `vmfb`, on `device` with its recorded input and
/// asserts onnxruntime's recorded answers.
/// `halo compile` of the benchmark-model fixture `model` (`mlp.onnx`) into `vmfb` with `compiler`
/// and one more flag.
fn compile_fixture(compiler: &Path, model: &str, vmfb: &Path, flag: &str) -> Output {
    let model = repo().join("fixtures/benchmark-models").join(model);
    halo(
        &["compile", model.to_str().unwrap(), "-o", vmfb.to_str().unwrap(), flag],
        &[("HALO_IREE_COMPILE", compiler)],
    )
}

fn assert_recorded_answers(model: &str, vmfb: &Path, device: &str) {
    let fixtures = repo().join("fixtures/benchmark-models");
    let input = format!("--input=@{}", fixtures.join(format!("{model}.input.npy")).display());
    let expected = format!(
        "--expected_output=@{}",
        fixtures.join(format!("{model}.expected.npy")).display()
    );
    let device = format!("--device={device}");
    let module = format!("--module={}", vmfb.display());
    let function = format!("--function={model}");
    let output = halo(&["run-module", &device, &module, &function, &input, &expected], &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("[SUCCESS]"),
        "{model} {device}: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `halo compile` of the `tiny_add` fixture for `device` into `out` with `extra` flags and `envs`
/// set; its stdout and stderr, once it succeeded.
fn compile_tiny(out: &Path, device: &str, extra: &[&str], envs: &[(&str, &Path)]) -> (String, String) {
    let model = repo().join("fixtures/models/tiny_add.mlir");
    let vmfb = out.join("tiny.vmfb");
    let device = format!("--device={device}");
    let mut args = vec![
        "compile",
        model.to_str().unwrap(),
        "-o",
        vmfb.to_str().unwrap(),
        &device,
    ];
    args.extend(extra);
    let output = halo(&args, envs);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stdout}{stderr}");
    (stdout, stderr)
}

/// A CUDA compile without `--target-chip` takes the architecture of the CUDA device it opens (the
/// fake library's, compute capability 8.0) instead of iree-compile's `sm_60`; with no device it
/// keeps that default and says why, and a named chip is kept.
#[test]
fn a_cuda_compile_without_a_chip_takes_the_architecture_of_the_device_present() {
    let Some(compiler) = real_compiler("a_cuda_compile_without_a_chip_takes_the_architecture_of_the_device_present")
    else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let compile = |library: &Path, chip: &[&str]| {
        compile_tiny(
            out.path(),
            "cuda",
            chip,
            &[("HALO_IREE_COMPILE", &compiler), ("HALO_CUDA_LIBRARY", library)],
        )
    };
    let fake = std::env::current_exe().unwrap().with_file_name("libhalo_cuda_fake.so");
    let (stdout, stderr) = compile(&fake, &[]);
    assert!(stdout.contains("--iree-cuda-target=sm_80"), "{stdout}");
    assert!(
        stderr.contains("compiling for sm_80") && stderr.contains("compute capability 8.0"),
        "{stderr}"
    );
    let (stdout, stderr) = compile(&fake, &["--target-chip=sm_75"]);
    assert!(stdout.contains("--iree-cuda-target=sm_75"), "{stdout}");
    assert!(!stderr.contains("note"), "{stderr}");
    let missing = Path::new("/nonexistent/libcuda.so.1");
    let (stdout, stderr) = compile(missing, &[]);
    assert!(!stdout.contains("--iree-cuda-target"), "{stdout}");
    assert!(
        stderr.contains("no CUDA device to read the chip from")
            && stderr.contains("/nonexistent/libcuda.so.1")
            && stderr.contains("default sm_60"),
        "{stderr}"
    );
}

/// A Vulkan compile without `--target-chip` takes the architecture of the NVIDIA GPU behind the
/// device: the CUDA device with the Vulkan device's UUID (here the fake library, given the UUID
/// of the Vulkan device present). A Vulkan device no CUDA device shares its UUID with keeps the
/// portable target and its caution.
#[test]
fn a_vulkan_compile_without_a_chip_takes_the_architecture_of_the_cuda_device_with_its_uuid() {
    let Some(compiler) =
        compiler_and_vulkan("a_vulkan_compile_without_a_chip_takes_the_architecture_of_the_cuda_device_with_its_uuid")
    else {
        return;
    };
    let listed = halo(&["devices"], &[]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    let uuid = listed
        .lines()
        .find_map(|line| line.strip_prefix("vulkan://"))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the Vulkan device's line in `halo devices`");
    let out = tempfile::tempdir().unwrap();
    let fake = std::env::current_exe().unwrap().with_file_name("libhalo_cuda_fake.so");
    let envs = [
        ("HALO_IREE_COMPILE", compiler.as_path()),
        ("HALO_CUDA_LIBRARY", fake.as_path()),
    ];
    let compile = |fake_uuid: Option<&str>| match fake_uuid {
        Some(uuid) => compile_tiny(
            out.path(),
            "vulkan",
            &[],
            &[envs[0], envs[1], ("HALO_CUDA_FAKE_UUID", Path::new(uuid))],
        ),
        None => compile_tiny(out.path(), "vulkan", &[], &envs),
    };
    let (stdout, stderr) = compile(Some(uuid));
    assert!(stdout.contains("--iree-vulkan-target=sm_80"), "{stdout}");
    assert!(
        stderr.contains("compiling for sm_80") && stderr.contains(&format!("CUDA device 'cuda://{uuid}'")),
        "{stderr}"
    );
    assert!(!stderr.contains("portable Vulkan target"), "{stderr}");
    let (stdout, stderr) = compile(None);
    assert!(!stdout.contains("--iree-vulkan-target"), "{stdout}");
    assert!(stderr.contains("portable Vulkan target"), "{stderr}");
}

/// Ctrl-C or `SIGTERM` during a compile kills the compiler and removes the scratch folder beside
/// the output (the imported model, often hundreds of MB), instead of leaving both behind.
#[test]
fn a_signal_stops_a_compile_and_leaves_no_scratch_folder_or_compiler_behind() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("compiler.pid");
    // A stand-in iree-compile 3.13 that never finishes, saying its process id.
    let compiler = dir.path().join("iree-compile");
    std::fs::write(
        &compiler,
        format!(
            "#!/bin/sh\ncase \"$1\" in --version) echo \"IREE compiler version 3.13.0 @ 0123\"; exit 0;; esac\n\
             echo $$ > '{}'\nexec sleep 60\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&compiler, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let model = repo().join("fixtures/models/tiny_add.mlir");
    let child = common::halo_command()
        .args([
            "compile",
            model.to_str().unwrap(),
            "-o",
            out.join("tiny.vmfb").to_str().unwrap(),
        ])
        .arg(format!("--iree-compile={}", compiler.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let compiler_pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .filter(|text| text.ends_with('\n'))
        {
            break pid.trim().to_string();
        }
        assert!(started.elapsed().as_secs() < 30, "the compiler never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let scratch = || {
        std::fs::read_dir(&out)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    };
    assert!(
        scratch().iter().any(|name| name.starts_with(".halo-compile-")),
        "{:?}",
        scratch()
    );
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("CANCELLED") && stderr.contains("stopped by a signal"),
        "{stderr}"
    );
    assert!(started.elapsed().as_secs() < 30, "the compile was not stopped");
    assert!(scratch().is_empty(), "left behind: {:?}", scratch());
    assert!(
        !Path::new("/proc").join(&compiler_pid).exists(),
        "the compiler (process {compiler_pid}) is still running"
    );
}

/// Tuning for Vulkan checks its variants against the rewritten graph: the one compiling
/// ShuffleNet's depthwise convolutions as given (wrong, see the test above) is dropped, and the
/// chosen program gives onnxruntime's answers.
#[test]
fn tuning_for_vulkan_drops_the_variant_that_keeps_iree_s_convolutions() {
    let Some(compiler) = compiler_and_vulkan("tuning_for_vulkan_drops_the_variant_that_keeps_iree_s_convolutions")
    else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let fixtures = repo().join("fixtures/benchmark-models");
    let vmfb = out.path().join("shufflenet_v2.vmfb");
    let input = format!("--input=@{}", fixtures.join("shufflenet_v2.input.npy").display());
    let output = halo(
        &[
            "compile",
            fixtures.join("shufflenet_v2.onnx").to_str().unwrap(),
            "--device=vulkan",
            "-o",
            vmfb.to_str().unwrap(),
            "--tune",
            "--tune-min-time=0.1",
            "--tune-cache",
            out.path().join("cache").to_str().unwrap(),
            &input,
        ],
        &[("HALO_IREE_COMPILE", &compiler)],
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("shufflenet_v2.tune.json")).unwrap()).unwrap();
    assert_eq!(report["baseline"], "shifted", "{report:#}");
    assert_eq!(report["chosen_graph_rewrite"], "convolutions-as-shifts", "{report:#}");
    let variants = report["variants"].as_array().unwrap();
    let kept = variants.iter().find(|v| v["name"] == "o3-keep-convolutions").unwrap();
    assert_eq!(kept["status"], "deviates", "{report:#}");
    assert_recorded_answers("shufflenet_v2", &vmfb, "vulkan");
}
