"""halo.compile_onnx / compile_mlir: the pinned compiler from Python, then a call."""

import os
import shutil

import numpy as np
import pytest

import halo
from conftest import MODELS


def compiler_or_skip():
    compiler = os.environ.get("HALO_IREE_COMPILE") or shutil.which("iree-compile")
    if not compiler:
        pytest.skip("skipped: no iree-compile (set HALO_IREE_COMPILE or pip install 'halo[compile]')")
    return compiler


def test_compile_mlir_then_call(tmp_path):
    compiler_or_skip()
    output = tmp_path / "tiny_add.vmfb"
    module = halo.compile_mlir(MODELS / "tiny_add.mlir", "local-sync", target_chip="x86-64-v2", output=output)
    assert output.is_file()
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(module.tiny_add(x, x).numpy(), 2 * x)


def test_compile_onnx_into_scratch_space_matches_the_recorded_output():
    compiler_or_skip()
    module = halo.compile_onnx(MODELS / "onnx_mlp.onnx", target_chip="x86-64-v2")
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


def test_a_compiler_that_is_not_there_is_named(monkeypatch, tmp_path):
    missing = tmp_path / "iree-compile"
    monkeypatch.setenv("HALO_IREE_COMPILE", str(missing))
    with pytest.raises(halo.NotFoundError) as raised:
        halo.compile_mlir(MODELS / "tiny_add.mlir")
    assert str(missing) in str(raised.value)
