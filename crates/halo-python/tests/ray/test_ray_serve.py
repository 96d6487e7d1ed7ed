"""halo on Ray Serve: a local cluster of a head and a second node (two `ray start` processes on
this machine), the benchmark set's test-scale MLP deployed with 2 replicas through
`halo.serve.ray`, clients sending requests while one replica's process is killed, and every
request answered (retried where Ray answers a server error) with the answer halo gives alone.

Run by scripts/test-python in a virtualenv of its own with `ray[serve]` (`.ray-venv`);
anywhere Ray is missing the module is skipped, naming why.
"""

import os
import pathlib
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="Ray Serve is not installed here (scripts/test-python installs it in .ray-venv)")
serve = pytest.importorskip("ray.serve")
requests = pytest.importorskip("requests")

import halo  # noqa: E402
from halo.serve.ray import app, deployment  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[4]
ARM64 = platform.machine().lower() in ("aarch64", "arm64")
MLP = ROOT / "fixtures" / "benchmark-models" / ("arm_64/mlp.vmfb" if ARM64 else "mlp.vmfb")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_command() -> str:
    """The `ray` command of the running interpreter's environment."""
    beside = pathlib.Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else (shutil.which("ray") or "ray")


@pytest.fixture(scope="module")
def cluster():
    """A head and a second node, one CPU each, in a temporary folder; stopped afterwards."""
    temp = tempfile.mkdtemp(prefix="halo-ray-")
    port = free_port()
    address = f"127.0.0.1:{port}"
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    common = ["--num-cpus=1", "--object-store-memory=100000000", "--disable-usage-stats"]
    head = [ray_command(), "start", "--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}"]
    subprocess.run(head + common, check=True, env=env, capture_output=True, timeout=180)
    try:
        node = [ray_command(), "start", f"--address={address}"]
        subprocess.run(node + common, check=True, env=env, capture_output=True, timeout=180)
        ray.init(address=address, logging_level="ERROR")
        deadline = time.time() + 120
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            assert time.time() < deadline, "the second node did not join"
            time.sleep(0.5)
        yield address
    finally:
        try:
            serve.shutdown()
        except Exception:
            pass
        ray.shutdown()
        subprocess.run([ray_command(), "stop", "--force"], env=env, capture_output=True, timeout=180)
        shutil.rmtree(temp, ignore_errors=True)


def request_body(rows: int, seed: int) -> tuple[dict, np.ndarray]:
    values = ((np.arange(rows * 16) * 7 + seed * 13) % 23).astype(np.float32) / 11.0 - 1.0
    x = values.reshape(rows, 16)
    body = {"inputs": [{"name": "input", "shape": [rows, 16], "datatype": "FP32", "data": x.ravel().tolist()}]}
    return body, x


def post_until_answered(url: str, body: dict, attempts: int = 60) -> dict:
    """Posts `body`, retrying what Ray answers with a server error or a dropped connection
    (a replica that died under the request)."""
    last = None
    for _ in range(attempts):
        try:
            response = requests.post(url, json=body, timeout=60)
        except requests.RequestException as error:
            last = error
        else:
            if response.status_code == 200:
                return response.json()
            assert response.status_code >= 500, f"{response.status_code}: {response.text}"
            last = response.text
        time.sleep(0.2)
    raise AssertionError(f"no answer after {attempts} attempts: {last}")


def test_two_replicas_answer_every_request_while_one_is_killed(cluster):
    http_port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": http_port})
    handle = serve.run(
        deployment(str(MLP), "mlp", num_replicas=2, max_batch_size=4, ray_actor_options={"num_cpus": 1}),
        name="mlp",
        route_prefix="/mlp",
    )
    url = f"http://127.0.0.1:{http_port}/mlp"
    # Each replica on its own node: one CPU each, one CPU per node.
    pids = set()
    deadline = time.time() + 60
    while len(pids) < 2:
        assert time.time() < deadline, f"found only the replicas {pids}"
        pids.add(handle.pid.remote().result())
    alone = halo.load(str(MLP), device="local-task")

    answers = {}
    errors = []

    def client(index: int):
        try:
            for n in range(12):
                seed = index * 100 + n
                body, x = request_body(1 + seed % 3, seed)
                answer = post_until_answered(url, body)
                answers[seed] = (answer, x)
        except BaseException as error:  # reported by the test's thread
            errors.append(error)

    clients = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for thread in clients:
        thread.start()
    time.sleep(1.0)
    victim = sorted(pids)[0]
    os.kill(victim, signal.SIGKILL)
    for thread in clients:
        thread.join(timeout=600)
    assert not errors, errors
    assert len(answers) == 48
    for seed, (answer, x) in answers.items():
        (output,) = answer["outputs"]
        assert output["name"] == "add_14" and output["datatype"] == "FP32", output
        got = np.asarray(output["data"], np.float32).reshape(output["shape"])
        want = np.asarray(alone.mlp(x))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"request {seed}")
    # The killed replica was replaced.
    deadline = time.time() + 120
    replaced = set()
    while len(replaced) < 2 or victim in replaced:
        assert time.time() < deadline, f"the replicas now: {replaced}"
        replaced = {handle.pid.remote().result() for _ in range(8)}
    bad = requests.post(url, json={"inputs": [{"name": "input", "shape": [9, 16], "datatype": "FP32", "data": [0] * 144}]})
    assert bad.status_code == 400 and "1 to 4 rows" in bad.json()["error"], bad.text


def test_the_config_file_builder_takes_the_deployments_settings_and_names_what_it_lacks():
    built = app({"module": str(MLP), "function": "mlp", "num_replicas": 2, "max_batch_size": 4, "num_cpus": 1})
    assert isinstance(built, serve.Application)
    with pytest.raises(ValueError, match="takes module, function and"):
        app({"module": str(MLP), "replicas": 2})
    config = (ROOT / "deploy" / "ray" / "config.yaml").read_text()
    assert "import_path: halo.serve.ray:app" in config
