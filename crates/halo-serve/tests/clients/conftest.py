"""Starts `halo serve` for the client tests and computes what `halo run-module` answers."""

import os
import pathlib
import platform
import re
import subprocess
import tempfile
import threading

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[4]
MODELS = REPO / "fixtures" / "models"
# On AArch64 the served programs are the fixtures' AArch64 builds (fixtures/models/arm_64).
ARM64 = platform.machine().lower() in ("aarch64", "arm64")


def host_module(module: str) -> str:
    """This machine's build of the model fixture `module`, relative to fixtures/models."""
    return f"arm_64/{module}" if ARM64 and (MODELS / "arm_64" / module).exists() else module


def halo_binary() -> pathlib.Path:
    binary = pathlib.Path(os.environ.get("HALO_BIN", REPO / "target" / "debug" / "halo"))
    if not binary.is_file():
        pytest.fail(f"the halo CLI is not at {binary}: run `cargo build -p halo-cli` or set HALO_BIN")
    return binary


class Served:
    """A `halo serve` process on free ports; `http` and `grpc` are their host:port."""

    def __init__(self, *args: str):
        self.process = subprocess.Popen(
            [halo_binary(), "serve", "--http-port=0", "--grpc-port=0", *args],
            cwd=MODELS,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Log lines may come first; the server says where it listens in its own line.
        first = ""
        while "http://" not in first:
            first = self.process.stderr.readline()
            if not first:
                break
        http = re.search(r"http://([^/\s]+)", first)
        grpc = re.search(r"grpc://(\S+)", first)
        if not (http and grpc):
            self.stop()
            pytest.fail(f"halo serve did not say where it listens: {first!r}")
        self.http = http.group(1)
        self.grpc = grpc.group(1)
        # Drains the server's log so that it never blocks on a full pipe.
        threading.Thread(target=self.process.stderr.read, daemon=True).start()

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def serve():
    started = []

    def start(module: str, function: str, *extra: str) -> Served:
        return start_with(f"--module={host_module(module)}", f"--function={function}", *extra)

    def start_with(*args: str) -> Served:
        served = Served(*args)
        started.append(served)
        return served

    start.with_args = start_with
    yield start
    for served in started:
        served.stop()


def run_module(module: str, function: str, inputs: list, results: int) -> list:
    """`halo run-module`'s results for numpy `inputs`, through .npy files."""
    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        flags = []
        for index, array in enumerate(inputs):
            path = scratch / f"input{index}.npy"
            np.save(path, array)
            flags.append(f"--input=@{path}")
        outputs = [scratch / f"output{index}.npy" for index in range(results)]
        subprocess.run(
            [halo_binary(), "run-module", f"--module={host_module(module)}", f"--function={function}", *flags]
            + [f"--output=@{path}" for path in outputs],
            cwd=MODELS,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return [np.load(path) for path in outputs]


@pytest.fixture
def cnn_input() -> np.ndarray:
    return np.load(MODELS / "cnn.basic.0.npy")


def top_classes(scores: np.ndarray, count: int, labels: tuple = ()) -> list:
    """The classification extension's answer computed here: the `count` largest scores as
    `value:index` (six decimals), with `:label` where `labels` has one, largest first, equal
    ones in index order."""
    flat = scores.reshape(-1)
    order = sorted(range(flat.size), key=lambda index: (-float(flat[index]), index))[:count]
    named = lambda index: f":{labels[index]}" if index < len(labels) else ""
    return [f"{float(flat[index]):.6f}:{index}{named(index)}" for index in order]


def texts(array: np.ndarray) -> list:
    """A BYTES tensor's elements as str, whether the client read them from JSON or raw bytes."""
    return [item.decode() if isinstance(item, bytes) else item for item in array.reshape(-1)]
