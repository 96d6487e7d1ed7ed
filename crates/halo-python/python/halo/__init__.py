"""halo: run programs compiled by IREE's compiler (iree-compile 3.13) from Python.

    import numpy as np, halo
    m = halo.load("model.vmfb", device="local-task")
    out = m.main(np.ones((4,), np.float32))
    print(out.numpy())
"""

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
