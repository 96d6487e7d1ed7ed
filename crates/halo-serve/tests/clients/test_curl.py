"""Plain `curl` against `halo serve`: what a user types first, and what a probe runs."""

import json
import shutil
import subprocess

import numpy as np
import pytest

from conftest import run_module

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")


def curl(*args: str) -> tuple:
    """The status code and body of a curl call."""
    done = subprocess.run(
        ["curl", "-sS", "-w", "\n%{http_code}", *args], check=True, capture_output=True, text=True, timeout=60
    )
    body, _, status = done.stdout.rpartition("\n")
    return int(status), body


def test_probes_metadata_and_json_inference(serve):
    served = serve("tiny_add.vmfb", "tiny_add")
    base = f"http://{served.http}/v2"
    assert curl(f"{base}/health/live")[0] == 200
    assert curl(f"{base}/health/ready")[0] == 200
    status, body = curl(f"{base}/models/tiny_add")
    assert status == 200
    assert json.loads(body)["inputs"][1]["name"] == "input1"
    request = {
        "inputs": [
            {"name": "input0", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2], [3, 4.5]]},
            {"name": "input1", "shape": [4], "datatype": "FP32", "data": [0.5, 0.5, 0.5, 0.5]},
        ]
    }
    status, body = curl("-H", "Content-Type: application/json", "-d", json.dumps(request), f"{base}/models/tiny_add/infer")
    assert status == 400, "tiny_add takes [4]; [2, 2] is refused"
    assert "shape [2, 2]" in json.loads(body)["error"]
    request["inputs"][0]["shape"] = [4]
    status, body = curl("-H", "Content-Type: application/json", "-d", json.dumps(request), f"{base}/models/tiny_add/infer")
    assert status == 200, body
    a = np.array([1, 2, 3, 4.5], dtype=np.float32)
    b = np.full(4, 0.5, dtype=np.float32)
    expected = run_module("tiny_add.vmfb", "tiny_add", [a, b], 1)[0]
    np.testing.assert_array_equal(np.array(json.loads(body)["outputs"][0]["data"], dtype=np.float32), expected)


def grpc_status(served, method: str, frame: bytes, *headers: str) -> tuple:
    """The `grpc-status` and `grpc-message` of one gRPC call curl makes with `frame` as its body."""
    done = subprocess.run(
        [
            "curl", "-sS", "-i", "--http2-prior-knowledge",
            "-H", "content-type: application/grpc", "-H", "te: trailers",
            *[arg for header in headers for arg in ("-H", header)],
            "--data-binary", "@-",
            f"http://{served.grpc}/inference.GRPCInferenceService/{method}",
        ],
        input=frame, check=True, capture_output=True, timeout=60,
    )
    fields = dict(
        line.split(": ", 1) for line in done.stdout.decode().splitlines() if line.startswith("grpc-")
    )
    return fields.get("grpc-status"), fields.get("grpc-message", "")


def curl_speaks_http2() -> bool:
    """Whether this curl was built with HTTP/2, which gRPC runs over."""
    if shutil.which("curl") is None:
        return False
    return "HTTP2" in subprocess.run(["curl", "-V"], capture_output=True, text=True, timeout=60).stdout


@pytest.mark.skipif(not curl_speaks_http2(), reason="curl here has no HTTP/2: skipped the damaged gRPC frame test")
@pytest.mark.parametrize("method", ["ModelInfer", "ModelStreamInfer"])
def test_a_grpc_message_that_does_not_decompress_is_invalid_argument(serve, method):
    served = serve("tiny_add.vmfb", "tiny_add")
    # A frame flagged compressed (1), five bytes long, that are not gzip.
    damaged = b"\x01\x00\x00\x00\x05hello"
    status, message = grpc_status(served, method, damaged, "grpc-encoding: gzip")
    assert status == "3", f"INVALID_ARGUMENT, not tonic's INTERNAL: {status} {message}"
    assert "does%20not%20decompress" in message
    # The same call uncompressed is read: an empty ModelInferRequest names no model.
    status, message = grpc_status(served, "ModelInfer", b"\x00\x00\x00\x00\x00")
    assert (status, "unknown%20model" in message) == ("3", True), message
