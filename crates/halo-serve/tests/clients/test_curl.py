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
