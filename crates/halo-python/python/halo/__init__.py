"""halo: run programs compiled by IREE's compiler (iree-compile 3.13) from Python.

    import numpy as np, halo
    m = halo.load("model.vmfb", device="local-task")
    out = m.main(np.ones((4,), np.float32))
    print(out.numpy())
"""

import contextlib
import dataclasses
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Iterator, Optional, Sequence, Union

from ._halo import (
    AbortedError,
    AlreadyExistsError,
    Array,
    CancelledError,
    DataLossError,
    DeadlineExceededError,
    DeferredError,
    Device,
    Error,
    FailedPreconditionError,
    Function,
    IncompatibleError,
    InternalError,
    InvalidArgumentError,
    Module,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TraceWriter,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
    compile,
    tune as _tune,
    devices,
    drivers,
    load,
    parse_tensor,
    start_trace,
)

__all__ = [
    "BenchmarkResult",
    "benchmark",
    "compile",
    "compile_mlir",
    "compile_onnx",
    "tune",
    "AbortedError",
    "AlreadyExistsError",
    "Array",
    "CancelledError",
    "DataLossError",
    "DeadlineExceededError",
    "DeferredError",
    "Device",
    "Error",
    "FailedPreconditionError",
    "Function",
    "IncompatibleError",
    "InternalError",
    "InvalidArgumentError",
    "Module",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "TraceWriter",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "devices",
    "drivers",
    "load",
    "parse_tensor",
    "start_trace",
    "trace",
]


@dataclasses.dataclass(frozen=True)
class BenchmarkResult:
    """Per-call wall times of a benchmarked function, in seconds."""

    repetitions: int
    mean: float
    median: float
    min: float
    max: float
    stdev: float

    def __str__(self) -> str:
        ms = 1e3
        return (
            f"{self.repetitions} calls: median {self.median * ms:.3f} ms, mean {self.mean * ms:.3f} ms, "
            f"min {self.min * ms:.3f} ms, max {self.max * ms:.3f} ms, stdev {self.stdev * ms:.3f} ms"
        )


def benchmark(function: Callable[..., Any], *args: Any, repetitions: int = 100, warmup: int = 3) -> BenchmarkResult:
    """Calls `function(*args)` `warmup` times untimed, then `repetitions` times, each timed from
    the call to its results being ready (a halo call returns only then)."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be at least 1, not {repetitions}")
    for _ in range(warmup):
        function(*args)
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return BenchmarkResult(
        repetitions=repetitions,
        mean=statistics.fmean(times),
        median=statistics.median(times),
        min=min(times),
        max=max(times),
        stdev=statistics.stdev(times) if repetitions > 1 else 0.0,
    )


_COMPILE_EXTRA = "pip install 'halo[compile]'"


def _bundled_compiler() -> Optional[str]:
    """The iree-compile that `halo[compile]` installed next to this interpreter, if any."""
    for folder in (pathlib.Path(sys.executable).parent, pathlib.Path(sys.prefix) / "bin"):
        candidate = folder / "iree-compile"
        if candidate.is_file():
            return str(candidate)
    return None


def _needs_compiler(error: UnavailableError) -> UnavailableError:
    raised = UnavailableError(f"{error}; halo's compile functions need the compiler: {_COMPILE_EXTRA}")
    raised.code = error.code
    return raised


def tune(
    model: Union[str, "os.PathLike[str]"],
    output: Union[str, "os.PathLike[str]"],
    device: Union[str, Device] = "local-task",
    *,
    inputs: Optional[Sequence[Any]] = None,
    function: Optional[str] = None,
    target_chip: Optional[str] = None,
    extra_flags: Sequence[str] = (),
    report: Optional[Union[str, "os.PathLike[str]"]] = None,
    tolerance: float = 1e-4,
    min_time: float = 3.0,
    compile_timeout: float = 600.0,
    jobs: Optional[int] = None,
    cache: Optional[Union[str, "os.PathLike[str]", bool]] = None,
    kernels: Optional[bool] = None,
) -> dict:
    """Tunes a model as `halo compile --tune` does: every variant of the documented flag space is
    compiled (in parallel up to the core count), timed on `device` with `inputs` (arrays, one per
    argument; generated from the function's declaration when None) and checked against IREE's
    default compile; the fastest within `tolerance` is written to `output`. Returns the report
    (also written to `report`, default `output` with `.tune.json`) with `cache_hit` and
    `warnings` added. `cache`: a folder, False for none, None for the default
    (`HALO_TUNE_CACHE`, else `~/.cache/halo/tune`). Variants calling halo's own CPU kernels join
    the space unless `kernels` is False (None: on CPU devices, as `halo compile --tune`); the
    report's `chosen_kernels` says whether the program written calls them, and then it runs only
    on halo."""
    import json

    uri = device.uri if isinstance(device, Device) else device
    output = pathlib.Path(output)
    report = pathlib.Path(report) if report is not None else output.with_suffix(".tune.json")
    compiler = None if os.environ.get("HALO_IREE_COMPILE") else _bundled_compiler()
    scratch = tempfile.mkdtemp(prefix="halo-tune-")
    try:
        npy = None
        if inputs is not None:
            import numpy

            npy = pathlib.Path(scratch, "inputs.npy")
            with open(npy, "wb") as file:
                for array in inputs:
                    numpy.save(file, numpy.asarray(array))
        try:
            text, cache_hit, warnings = _tune(
                model, output, report, device=uri, target_chip=target_chip, extra_flags=list(extra_flags),
                iree_compile=compiler, inputs=npy, function=function, tolerance=tolerance, min_time=min_time,
                compile_timeout=compile_timeout, jobs=jobs, cache=cache if cache not in (None, False) else None,
                use_cache=cache is not False, kernels=kernels)
        except UnavailableError as error:
            raise _needs_compiler(error) from error
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result = json.loads(text)
    result["cache_hit"] = cache_hit
    result["warnings"] = list(warnings)
    return result


def _compile_and_load(
    model: Union[str, "os.PathLike[str]"],
    suffixes: Sequence[str],
    device: Union[str, Device],
    target_chip: Optional[str],
    output: Optional[Union[str, "os.PathLike[str]"]],
    extra_flags: Sequence[str],
    tune_inputs: Optional[Sequence[Any]],
    kernels: Optional[bool],
) -> Module:
    model = pathlib.Path(model)
    if model.suffix not in suffixes:
        raise InvalidArgumentError(f"'{model}' is not a {' or '.join(suffixes)} file")
    uri = device.uri if isinstance(device, Device) else device
    compiler = None if os.environ.get("HALO_IREE_COMPILE") else _bundled_compiler()
    scratch = None if output is not None else tempfile.mkdtemp(prefix="halo-compile-")
    target = pathlib.Path(output) if output is not None else pathlib.Path(scratch, model.stem + ".vmfb")
    try:
        if tune_inputs is not None:
            tune(model, target, uri, inputs=tune_inputs, target_chip=target_chip, extra_flags=extra_flags,
                 kernels=kernels)
        else:
            try:
                compile(model, target, device=uri, target_chip=target_chip, extra_flags=list(extra_flags),
                        iree_compile=compiler, kernels=kernels)
            except UnavailableError as error:
                raise _needs_compiler(error) from error
        # A program compiled into scratch space is read into memory, so the folder can go.
        return load(target, device=device, mmap=output is not None)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def compile_onnx(
    model: Union[str, "os.PathLike[str]"],
    device: Union[str, Device] = "local-task",
    *,
    target_chip: Optional[str] = None,
    output: Optional[Union[str, "os.PathLike[str]"]] = None,
    extra_flags: Sequence[str] = (),
    tune_inputs: Optional[Sequence[Any]] = None,
    kernels: Optional[bool] = None,
) -> Module:
    """Compiles an ONNX model as `halo compile` does (the pinned iree-compile 3.13 from
    `halo[compile]`, the best flags known for the device; for this machine's CPU, or the CUDA
    device's architecture, unless `target_chip` names another, e.g. the portable "x86-64-v2") and
    loads it on `device`. The
    `.vmfb` goes to `output`, or to a temporary file that is removed once loaded. With
    `tune_inputs` (arrays, one per argument) it is tuned on them instead, as `halo.tune` does.
    f32 matmuls and convolutions call halo's own CPU kernels where they apply unless `kernels` is
    False (None: on CPU devices, as `halo compile`; False as `halo compile --portable`; with
    `tune_inputs`, only where they win): such a program runs only on halo's CPU drivers, never on
    IREE's runtime."""
    return _compile_and_load(model, (".onnx",), device, target_chip, output, extra_flags, tune_inputs, kernels)


def compile_mlir(
    model: Union[str, "os.PathLike[str]"],
    device: Union[str, Device] = "local-task",
    *,
    target_chip: Optional[str] = None,
    output: Optional[Union[str, "os.PathLike[str]"]] = None,
    extra_flags: Sequence[str] = (),
    tune_inputs: Optional[Sequence[Any]] = None,
    kernels: Optional[bool] = None,
) -> Module:
    """As `compile_onnx`, for MLIR (`.mlir` text or `.mlirbc` bytecode)."""
    return _compile_and_load(model, (".mlir", ".mlirbc"), device, target_chip, output, extra_flags, tune_inputs,
                             kernels)


@contextlib.contextmanager
def trace(path: Union[str, "os.PathLike[str]"]) -> Iterator[pathlib.Path]:
    """Writes what the runtime does inside the `with` block to `path` as Chrome trace-event JSON
    (open it in ui.perfetto.dev or chrome://tracing): one track per thread, spans for calls, `hal`
    calls, queue submissions, dispatches, transfers and semaphore waits."""
    writer = start_trace(path)
    try:
        yield pathlib.Path(path)
    finally:
        writer.finish()
