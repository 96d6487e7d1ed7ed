"""halo.compile_onnx / compile_mlir: the pinned compiler from Python, then a call."""

import os
import shutil
import warnings

import numpy as np
import pytest

import halo
from conftest import MODELS, PORTABLE_CHIP


def compiler_or_skip():
    compiler = os.environ.get("HALO_IREE_COMPILE") or shutil.which("iree-compile")
    if not compiler:
        pytest.skip("skipped: no iree-compile (set HALO_IREE_COMPILE or pip install 'halo[compile]')")
    return compiler


def test_compile_mlir_then_call(tmp_path):
    compiler_or_skip()
    output = tmp_path / "tiny_add.vmfb"
    module = halo.compile_mlir(MODELS / "tiny_add.mlir", "local-sync", target_chip=PORTABLE_CHIP, output=output)
    assert output.is_file()
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(module.tiny_add(x, x).numpy(), 2 * x)


def test_compile_onnx_into_scratch_space_matches_the_recorded_output():
    compiler_or_skip()
    module = halo.compile_onnx(MODELS / "onnx_mlp.onnx", target_chip=PORTABLE_CHIP)
    flags = (MODELS / "onnx_mlp.basic.flags").read_text().splitlines()
    inputs = [np.load(MODELS / line.split("@", 1)[1]) for line in flags if line.startswith("--input=@")]
    results = module.onnx_mlp(*inputs)
    expected = (MODELS / "onnx_mlp.basic.expected").read_text().splitlines()[2::2]
    assert len(results) == len(expected) == 2
    for result, text in zip(results, expected):
        # Other flags than the fixture's may round differently in the last place.
        want = halo.parse_tensor(text).reshape(result.shape)
        np.testing.assert_allclose(result.numpy(), want, rtol=1e-4, atol=1e-6)


def test_a_model_of_the_wrong_kind_is_refused():
    with pytest.raises(halo.InvalidArgumentError) as raised:
        halo.compile_onnx(MODELS / "tiny_add.mlir")
    assert "tiny_add.mlir" in str(raised.value) and ".onnx" in str(raised.value)


def test_a_missing_compiler_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.delenv("HALO_IREE_COMPILE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(halo, "_bundled_compiler", lambda: None)
    with pytest.raises(halo.UnavailableError) as raised:
        halo.compile_mlir(MODELS / "tiny_add.mlir")
    assert "halo[compile]" in str(raised.value)
    assert raised.value.code == "UNAVAILABLE"


def test_compiling_for_the_portable_vulkan_target_warns_about_nvidia(monkeypatch, tmp_path):
    monkeypatch.setenv("HALO_IREE_COMPILE", str(tmp_path / "iree-compile"))
    with pytest.warns(UserWarning, match="portable Vulkan target.*--target-chip=ampere"):
        with pytest.raises(halo.NotFoundError):
            halo.compile_mlir(MODELS / "tiny_add.mlir", "vulkan")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(halo.NotFoundError):
            halo.compile_mlir(MODELS / "tiny_add.mlir", "vulkan", target_chip="ampere")


def test_compiling_for_cuda_without_a_device_warns_that_the_compilers_old_default_stays(monkeypatch, tmp_path):
    monkeypatch.setenv("HALO_IREE_COMPILE", str(tmp_path / "iree-compile"))
    monkeypatch.setenv("HALO_CUDA_LIBRARY", str(tmp_path / "libcuda.so.1"))
    with pytest.warns(UserWarning, match="no CUDA device to read the chip from.*libcuda.so.1.*default sm_60"):
        with pytest.raises(halo.NotFoundError):
            halo.compile_mlir(MODELS / "tiny_add.mlir", "cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(halo.NotFoundError):
            halo.compile_mlir(MODELS / "tiny_add.mlir", "cuda", target_chip="sm_80")


def test_a_compiler_that_is_not_there_is_named(monkeypatch, tmp_path):
    missing = tmp_path / "iree-compile"
    monkeypatch.setenv("HALO_IREE_COMPILE", str(missing))
    with pytest.raises(halo.NotFoundError) as raised:
        halo.compile_mlir(MODELS / "tiny_add.mlir")
    assert str(missing) in str(raised.value)


def test_tune_keeps_a_variant_with_the_recorded_answers_and_caches_it(tmp_path):
    compiler_or_skip()
    flags = (MODELS / "onnx_mlp.basic.flags").read_text().splitlines()
    inputs = [np.load(MODELS / line.split("@", 1)[1]) for line in flags if line.startswith("--input=@")]
    output, cache = tmp_path / "mlp.vmfb", tmp_path / "cache"
    report = halo.tune(MODELS / "onnx_mlp.onnx", output, "local-sync", inputs=inputs, target_chip=PORTABLE_CHIP,
                       min_time=0.05, cache=cache)
    assert not report["cache_hit"]
    assert report["inputs"].endswith("inputs.npy")
    assert (tmp_path / "mlp.tune.json").is_file()
    statuses = {v["name"]: v["status"] for v in report["variants"]}
    assert statuses[report["chosen"]] == "measured"
    assert statuses["fast-o3"] == "compile-failed"  # iree-compile 3.13 refuses this model at O3
    results = halo.load(output, "local-sync").onnx_mlp(*inputs)
    expected = (MODELS / "onnx_mlp.basic.expected").read_text().splitlines()[2::2]
    for result, text in zip(results, expected):
        want = halo.parse_tensor(text).reshape(result.shape)
        np.testing.assert_allclose(result.numpy(), want, rtol=1e-4, atol=1e-6)

    again = halo.tune(MODELS / "onnx_mlp.onnx", tmp_path / "again.vmfb", "local-sync", inputs=inputs,
                      target_chip=PORTABLE_CHIP, min_time=0.05, cache=cache)
    assert again["cache_hit"] and again["chosen"] == report["chosen"]
    assert (tmp_path / "again.vmfb").read_bytes() == output.read_bytes()


def test_compile_onnx_with_tune_inputs_loads_the_tuned_program(tmp_path, monkeypatch):
    compiler_or_skip()
    flags = (MODELS / "onnx_mlp.basic.flags").read_text().splitlines()
    inputs = [np.load(MODELS / line.split("@", 1)[1]) for line in flags if line.startswith("--input=@")]
    monkeypatch.setenv("HALO_TUNE_CACHE", str(tmp_path / "cache"))
    module = halo.compile_onnx(MODELS / "onnx_mlp.onnx", "local-sync", target_chip=PORTABLE_CHIP, tune_inputs=inputs)
    assert len(module.onnx_mlp(*inputs)) == 2


def test_tune_refuses_bad_settings_by_name(tmp_path):
    with pytest.raises(halo.InvalidArgumentError, match="min_time=0"):
        halo.tune(MODELS / "onnx_mlp.onnx", tmp_path / "o.vmfb", min_time=0)
    with pytest.raises(halo.InvalidArgumentError, match="tolerance=-1"):
        halo.tune(MODELS / "onnx_mlp.onnx", tmp_path / "o.vmfb", tolerance=-1)


def test_compile_reports_the_graph_rewrite_and_refuses_unknown_ones(tmp_path):
    with pytest.raises(halo.InvalidArgumentError) as raised:
        halo.compile(MODELS / "onnx_mlp.onnx", tmp_path / "x.vmfb", graph_rewrite="fuse-everything")
    assert "fuse-everything" in str(raised.value) and "depthwise-as-shifts" in str(raised.value)
    compiler_or_skip()
    # The MLP has no depthwise convolution: the CPU sets' rewrite finds nothing to change.
    summary = halo.compile(MODELS / "onnx_mlp.onnx", tmp_path / "mlp.vmfb", target_chip=PORTABLE_CHIP,
                           flag_set="fast")
    assert (summary["graph_rewrite"], summary["rewritten_nodes"]) == ("none", 0)
    assert (tmp_path / "mlp.vmfb").is_file()


def test_compile_rewrites_a_cnns_3x3_convolutions_and_keeps_onnxruntimes_answers(tmp_path):
    # The same rewrite as `halo compile`: the test-scale SqueezeNet's eight unit-stride 3x3
    # convolutions become 1x1 convolutions over concatenated windows, all 26 of its
    # convolutions add their bias after them, and its 3 max pools become maxima of windows.
    benchmark_models = MODELS.parent / "benchmark-models"
    with pytest.raises(halo.InvalidArgumentError, match="convolutions-as-shifts"):
        halo.compile(benchmark_models / "squeezenet.onnx", tmp_path / "x.vmfb", graph_rewrite="all-of-them")
    compiler_or_skip()
    output = tmp_path / "squeezenet.vmfb"
    summary = halo.compile(benchmark_models / "squeezenet.onnx", output, target_chip=PORTABLE_CHIP, kernels=False)
    assert (summary["graph_rewrite"], summary["rewritten_nodes"]) == ("convolutions-as-shifts", 29)
    result = halo.load(output, "local-sync").squeezenet(np.load(benchmark_models / "squeezenet.input.npy"))
    expected = np.load(benchmark_models / "squeezenet.expected.npy")
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-4, atol=1e-5)


def test_compile_with_halos_kernels_calls_them_and_keeps_onnxruntimes_answers(tmp_path):
    # `halo compile` from Python: on the CPU, by default, the test-scale SqueezeNet's
    # convolutions (its stride-2 stem among them) call halo's convolution kernel; such a program
    # runs only on halo. `kernels=False` is `--portable`.
    benchmark_models = MODELS.parent / "benchmark-models"
    compiler_or_skip()
    with pytest.raises(halo.InvalidArgumentError, match="needs a CPU device"):
        halo.compile(benchmark_models / "squeezenet.onnx", tmp_path / "x.vmfb", device="vulkan", target_chip="ampere",
                     kernels=True)
    output = tmp_path / "squeezenet.vmfb"
    summary = halo.compile(benchmark_models / "squeezenet.onnx", output, target_chip=PORTABLE_CHIP)
    assert summary["kernels"] is True
    assert b"halo_conv2d_f32_v4" in output.read_bytes()
    expected = np.load(benchmark_models / "squeezenet.expected.npy")
    for device in ("local-sync", "local-task"):
        result = halo.load(output, device).squeezenet(np.load(benchmark_models / "squeezenet.input.npy"))
        np.testing.assert_allclose(result.numpy(), expected, rtol=1e-4, atol=1e-5)
    portable = halo.compile(benchmark_models / "squeezenet.onnx", tmp_path / "p.vmfb", target_chip=PORTABLE_CHIP,
                            kernels=False)
    assert portable["kernels"] is False
    assert b"halo_conv2d_f32_v4" not in (tmp_path / "p.vmfb").read_bytes()
    module = halo.compile_onnx(MODELS.parent / "benchmark-models" / "mlp.onnx", "local-sync",
                               target_chip=PORTABLE_CHIP, kernels=True)
    x = np.load(benchmark_models / "mlp.input.npy")
    np.testing.assert_allclose(module.mlp(x).numpy(), np.load(benchmark_models / "mlp.expected.npy"),
                               rtol=1e-4, atol=1e-5)
