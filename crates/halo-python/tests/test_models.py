"""Every model fixture through the Python API, against what iree-run-module printed for it."""

import re

import numpy as np
import pytest

import halo
from conftest import ARM64, CPU_DEVICES, MODELS, cpu_module

CASES = sorted(MODELS.glob("*.*.flags"))


# Vulkan's unmapped variant keeps device memory from the host, as on a discrete GPU, so results are
# read through a copy instead of in place.
VULKAN_DEVICES = ["vulkan", "vulkan://?device_local_mappable=false"]

# Cases where lavapipe's SPIR-V kernels round differently from the CPU's (as for IREE's own Vulkan
# driver; see crates/halo-cli/tests/vulkan_models.rs): compared as numbers, not text.
KERNEL_DIFFERENCES = {
    "elementwise_math.binary",
    "elementwise_math.unary_special",
    "float16.to_f16",
    "onnx_mlp.basic",
}


def vulkan_available() -> bool:
    return any(d["driver"] == "vulkan" for d in halo.devices())


def program(name: str, device: str) -> halo.Module:
    # A fresh load per case: some programs keep state between calls, as iree-run-module's runs do not.
    if device.startswith("vulkan"):
        if not vulkan_available():
            pytest.skip("skipped: no Vulkan device")
        path = MODELS / "vulkan" / f"{name}.vmfb"
        if not path.exists():
            pytest.skip(f"skipped: {name} has no Vulkan build")
        return halo.load(path, device=device)
    return halo.load(cpu_module(f"{name}.vmfb"), device=device)


def npy_arrays(path):
    """Every array in a .npy file, in order (a file may hold several back to back)."""
    arrays = []
    with open(path, "rb") as f:
        while f.peek(1):
            arrays.append(np.load(f))
    return arrays


def read_flags(path):
    function, inputs = None, []
    for line in path.read_text().splitlines():
        flag, _, value = line.partition("=")
        if flag == "--function":
            function = value
        elif flag == "--input" and value.startswith("@"):
            inputs.extend(npy_arrays(MODELS / value[1:]))
        elif flag == "--input":
            inputs.append(scalar_or_tensor(value))
    return function, inputs


def scalar_or_tensor(text):
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return halo.parse_tensor(text)


def same_tensor_text(got: str, want: str) -> bool:
    """Whether two buffer view texts agree; NumPy integers are signed (`si32`) where the
    command line's text gives signless ones (`i32`), as in IREE's own Python binding."""
    return re.sub(r"x(s)?i(\d+)=", r"xi\2=", got, count=1) == want


def expected_results(path):
    """The results iree-run-module printed, one text per result."""
    results = []
    for line in path.read_text().splitlines()[1:]:
        if line.startswith("result["):
            results.append(line.split(": ", 1)[1])
        else:
            results[-1] += "\n" + line
    return results


def check_result(result, expected, exact=True):
    if expected.startswith("hal.buffer_view\n"):
        assert isinstance(result, halo.Array)
        if not exact:
            want = halo.parse_tensor(expected.split("\n", 1)[1]).reshape(result.shape)
            np.testing.assert_allclose(result.numpy(), want, rtol=1e-5, atol=1e-7)
            return
        assert same_tensor_text("hal.buffer_view\n" + result.format(), expected)
        host = result.numpy()
        assert host.shape == result.shape and host.dtype == result.dtype
        text = expected.split("\n", 1)[1]
        if "..." not in text and host.dtype.kind in "biuf":
            np.testing.assert_allclose(host, halo.parse_tensor(text).reshape(host.shape), rtol=1e-5)
    else:
        kind, value = expected.split("=", 1)
        if kind in ("i32", "i64"):
            assert result == int(value)
        else:
            assert result == pytest.approx(float(value), rel=1e-5)


def error_class(code: str) -> type:
    return getattr(halo, "".join(word.capitalize() for word in code.split("_")) + "Error")


@pytest.mark.parametrize("device", CPU_DEVICES + VULKAN_DEVICES)
@pytest.mark.parametrize("flags", CASES, ids=lambda p: p.name[: -len(".flags")])
def test_case_matches_iree(flags, device):
    name = flags.name.split(".")[0]
    function, inputs = read_flags(flags)
    module = program(name, device)
    expected = flags.with_suffix(".expected")
    if expected.exists():
        results = module[function](*inputs)
        want = expected_results(expected)
        got = list(results) if isinstance(results, tuple) else [results]
        assert len(got) == len(want)
        # AArch64 builds may round last bits differently from IREE's x86-64 outputs.
        exact = not (ARM64 or device.startswith("vulkan") and flags.name[: -len(".flags")] in KERNEL_DIFFERENCES)
        for result, text in zip(got, want):
            check_result(result, text, exact)
    else:
        code, message = flags.with_suffix(".expected-error").read_text().strip().split("; ", 1)
        with pytest.raises(error_class(code)) as raised:
            module[function](*inputs)
        assert raised.value.code == code
        assert message in str(raised.value)
