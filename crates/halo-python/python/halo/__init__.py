"""halo: run programs compiled by IREE's compiler (iree-compile 3.13) from Python.

    import numpy as np, halo
    m = halo.load("model.vmfb", device="local-task")
    out = m.main(np.ones((4,), np.float32))
    print(out.numpy())
"""

import dataclasses
import statistics
import time
from typing import Any, Callable

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
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
    devices,
    drivers,
    load,
    parse_tensor,
)

__all__ = [
    "BenchmarkResult",
    "benchmark",
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
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "devices",
    "drivers",
    "load",
    "parse_tensor",
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
