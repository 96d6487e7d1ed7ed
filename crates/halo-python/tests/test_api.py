"""The package's API around a call: devices, loading, arrays in and out, errors."""

import numpy as np
import pytest

import halo
from conftest import MODELS, cpu_module


def aligned(array: np.ndarray, alignment: int = 64) -> np.ndarray:
    """A copy of `array` whose data starts at a multiple of `alignment` bytes."""
    raw = np.empty(array.nbytes + alignment, np.uint8)
    offset = -raw.ctypes.data % alignment
    out = raw[offset : offset + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def test_drivers_and_devices_include_the_cpu():
    assert {"local-sync", "local-task"} <= set(halo.drivers())
    uris = [d["uri"] for d in halo.devices()]
    assert any(uri.startswith("local-task://") for uri in uris)


def test_an_unknown_driver_is_not_found_and_names_the_known_ones():
    with pytest.raises(halo.NotFoundError) as raised:
        halo.Device("no-such-driver")
    assert raised.value.code == "NOT_FOUND"
    assert "local-task" in str(raised.value)
    assert isinstance(raised.value, halo.Error)


def test_a_missing_module_file_names_the_path(tmp_path):
    missing = tmp_path / "absent.vmfb"
    with pytest.raises(halo.Error) as raised:
        halo.load(missing)
    assert str(missing) in str(raised.value)


def test_load_names_what_it_takes_when_given_something_else():
    for wrong in [b"\x00" * 100, 7, [cpu_module("tiny_add.vmfb"), 7]]:
        with pytest.raises(TypeError) as raised:
            halo.load(wrong)
        assert "a module file's path or a list of paths" in str(raised.value)


def test_a_corrupt_module_raises_instead_of_crashing(tmp_path):
    data = bytearray((cpu_module("mlp.vmfb")).read_bytes())
    for cut in (16, 300, len(data) // 2):
        path = tmp_path / f"cut{cut}.vmfb"
        path.write_bytes(bytes(data[:cut]))
        with pytest.raises(halo.Error):
            halo.load(path)
    path = tmp_path / "noise.vmfb"
    path.write_bytes(np.random.default_rng(7).bytes(4096))
    with pytest.raises(halo.Error):
        halo.load(path)


def test_functions_are_listed_and_found_by_attribute_and_name():
    module = halo.load(cpu_module("mlp.vmfb"), device="local-sync")
    assert "mlp" in module.functions
    assert module.mlp.name == "mlp"
    assert module["mlp"].declaration.startswith("sync func @mlp(")
    with pytest.raises(AttributeError) as raised:
        module.no_such_function
    assert "mlp" in str(raised.value)
    with pytest.raises(halo.NotFoundError):
        module["no_such_function"]


def test_wrong_inputs_raise_invalid_argument_naming_the_function():
    module = halo.load(cpu_module("tiny_add.vmfb"))
    function = module[module.functions[0]]
    with pytest.raises(halo.InvalidArgumentError) as raised:
        function()
    assert function.name in str(raised.value)
    with pytest.raises(halo.InvalidArgumentError) as raised:
        function(np.array(["text"]), np.array(["text"]))
    assert "dtype" in str(raised.value) and "input 0" in str(raised.value)
    with pytest.raises(halo.InvalidArgumentError):
        function(object(), object())


def test_an_input_numpy_cannot_copy_raises_numpys_memory_error_with_the_context():
    module = halo.load(cpu_module("tiny_add.vmfb"))
    function = module[module.functions[0]]
    # Exabytes viewed through zero strides: NumPy refuses the contiguous copy with its
    # MemoryError subclass, which cannot be made from a message alone.
    huge = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), shape=(1 << 30, 1 << 30), strides=(0, 0))
    with pytest.raises(MemoryError) as raised:
        function(huge, huge)
    assert "Unable to allocate" in str(raised.value)
    if hasattr(raised.value, "add_note"):
        assert "while converting input 0" in "".join(raised.value.__notes__)
    # Errors of one-message classes still carry the context in their message.
    with pytest.raises(halo.InvalidArgumentError) as raised:
        function(np.array(["text"]), np.array(["text"]))
    assert "while converting input 0" in str(raised.value)
    assert raised.value.code == "INVALID_ARGUMENT"


def test_results_go_back_in_without_leaving_the_device():
    module = halo.load(cpu_module("tiny_add.vmfb"))
    function = module[module.functions[0]]
    x = np.arange(4, dtype=np.float32)
    once = function(x, x)
    twice = function(once, once)
    assert isinstance(twice, halo.Array)
    np.testing.assert_array_equal(twice.numpy(), 4 * x)
    np.testing.assert_array_equal(np.asarray(twice), 4 * x)


@pytest.mark.parametrize(
    "dtype",
    [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
     np.float16, np.float32, np.float64, np.complex64, np.complex128],
)
def test_every_numpy_dtype_round_trips_through_a_device(dtype):
    device = halo.Device("local-task")
    x = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    array = device.put(x)
    assert array.shape == (2, 3, 4)
    assert array.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(array.numpy(), x)


def test_aligned_contiguous_arrays_go_in_without_a_copy():
    device = halo.Device("local-task")
    x = aligned(np.arange(1024, dtype=np.float32))
    assert x.ctypes.data % 64 == 0
    array = device.put(x)
    assert array.numpy().ctypes.data == x.ctypes.data
    x[3] = 42.0
    assert array.numpy()[3] == 42.0


def test_unaligned_or_strided_arrays_are_copied_once():
    device = halo.Device("local-task")
    base = aligned(np.arange(1025, dtype=np.float32))
    unaligned = base[1:]
    strided = base[::2]
    swapped = base.astype(">f4")
    for x in (unaligned, strided, swapped):
        array = device.put(x)
        out = array.numpy()
        assert not np.shares_memory(out, x)
        np.testing.assert_array_equal(out, x)


def test_results_are_read_without_a_copy_on_the_cpu():
    module = halo.load(cpu_module("tiny_add.vmfb"))
    x = np.arange(4, dtype=np.float32)
    result = module[module.functions[0]](x, x)
    first, second = result.numpy(), np.asarray(result)
    assert first.ctypes.data == second.ctypes.data == result.__array_interface__["data"][0]
    del result
    np.testing.assert_array_equal(first, 2 * x)


def test_parse_tensor_reads_iree_text():
    np.testing.assert_array_equal(halo.parse_tensor("2x2xi32=1 2 3 4"), np.array([[1, 2], [3, 4]], np.int32))
    with pytest.raises(halo.OutOfRangeError) as raised:
        halo.parse_tensor("2x2xf32=1 2 3")
    assert "2x2xf32=1 2 3" in str(raised.value)


def test_dlpack_goes_both_ways_without_a_copy():
    device = halo.Device("local-task")
    x = aligned(np.arange(12, dtype=np.float32).reshape(3, 4))

    class OnlyDlpack:
        """A producer that speaks DLPack and nothing else NumPy knows."""

        def __init__(self, array):
            self.array = array

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    array = device.put(OnlyDlpack(x))
    assert array.__dlpack_device__() == (1, 0)
    back = np.from_dlpack(array)
    assert back.ctypes.data == x.ctypes.data
    np.testing.assert_array_equal(back, x)


def test_torch_tensors_go_both_ways_without_a_copy():
    torch = pytest.importorskip(
        "torch", reason="test_torch_tensors_go_both_ways_without_a_copy: PyTorch is not installed"
    )
    module = halo.load(cpu_module("tiny_add.vmfb"), device="local-task")
    x = torch.from_numpy(aligned(np.arange(4, dtype=np.float32)))
    device = halo.Device("local-task")
    put = device.put(x)
    assert np.from_dlpack(put).ctypes.data == x.data_ptr(), "a tensor goes in without a copy"
    result = module.tiny_add(x, x)
    out = torch.from_dlpack(result)
    assert out.data_ptr() == result.numpy().ctypes.data, "a result comes out without a copy"
    torch.testing.assert_close(out, x + x)


def test_jax_arrays_go_in_and_results_come_back_as_jax_arrays():
    jnp = pytest.importorskip(
        "jax.numpy", reason="test_jax_arrays_go_in_and_results_come_back_as_jax_arrays: JAX is not installed"
    )
    module = halo.load(cpu_module("tiny_add.vmfb"), device="local-task")
    x = jnp.arange(4, dtype=jnp.float32)
    result = module.tiny_add(x, x)
    back = jnp.from_dlpack(result)
    np.testing.assert_array_equal(np.asarray(back), np.arange(4, dtype=np.float32) * 2)
    # A JAX result goes back in as an input too.
    np.testing.assert_array_equal(module.tiny_add(back, x).numpy(), np.arange(4, dtype=np.float32) * 3)


VM_FIXTURES = MODELS.parent / "vm"


@pytest.mark.parametrize("code", range(1, 19))
def test_every_status_code_raises_its_own_class(code):
    module = halo.load(VM_FIXTURES / "fail.vmfb", device="local-sync")
    with pytest.raises(halo.Error) as raised:
        module.fail_with(code)
    error = raised.value
    name = error.code
    expected = "".join(part.capitalize() for part in name.split("_")) + "Error"
    assert type(error) is getattr(halo, expected), f"code {code} ({name}) raised {type(error).__name__}"
    assert "requested failure" in str(error)


def test_a_status_number_is_read_modulo_32_as_iree_does():
    module = halo.load(VM_FIXTURES / "fail.vmfb", device="local-sync")
    with pytest.raises(halo.InvalidArgumentError) as raised:
        module.fail_with(99)
    assert raised.value.code == "INVALID_ARGUMENT"


def test_every_error_class_is_a_distinct_subclass_of_error():
    classes = [
        value
        for name, value in vars(halo).items()
        if isinstance(value, type) and issubclass(value, halo.Error) and value is not halo.Error
    ]
    assert len(classes) == 18, [c.__name__ for c in classes]
    assert all(issubclass(c, Exception) for c in classes)


def test_benchmark_reports_per_call_times():
    module = halo.load(cpu_module("tiny_add.vmfb"))
    x = np.ones(4, np.float32)
    result = halo.benchmark(module.tiny_add, x, x, repetitions=20)
    assert result.repetitions == 20
    assert 0 < result.min <= result.median <= result.max
    assert "20 calls" in str(result)
    with pytest.raises(ValueError):
        halo.benchmark(module.tiny_add, x, x, repetitions=0)


def test_results_the_host_cannot_address_are_read_once_into_a_copy():
    if not any(d["driver"] == "vulkan" for d in halo.devices()):
        pytest.skip("skipped: no Vulkan device")
    module = halo.load(MODELS / "vulkan" / "tiny_add.vmfb", device="vulkan://?device_local_mappable=false")
    x = np.arange(4, dtype=np.float32)
    result = module.tiny_add(x, x)
    address, read_only = result.__array_interface__["data"]
    assert read_only
    assert result.numpy().ctypes.data == address == result.__array_interface__["data"][0]
    np.testing.assert_array_equal(result.numpy(), 2 * x)
