"""The KServe manifests in deploy/kserve name endpoints and flags `halo serve` really has: the
runtime's arguments start a server whose probe and metrics paths answer."""

import urllib.request

import yaml

from conftest import MODELS, REPO, host_module

DEPLOY = REPO / "deploy" / "kserve"


def load(name: str) -> dict:
    return yaml.safe_load((DEPLOY / name).read_text())


def test_the_runtimes_arguments_serve_and_its_probes_answer(serve, tmp_path):
    runtime = load("servingruntime.yaml")
    container = runtime["spec"]["containers"][0]
    args = container["args"]
    assert args[0] == "serve"
    (tmp_path / "cnn").mkdir()
    (tmp_path / "cnn" / "config.toml").write_text(f'function = "cnn"\nmodules = ["{MODELS / host_module("cnn.vmfb")}"]\n')
    # The same flags, with the repository in a temporary folder and free ports for the test.
    flags = [a.replace("/mnt/models", str(tmp_path)) for a in args[1:] if not a.startswith(("--http-port", "--grpc-port"))]
    served = serve.with_args(*flags)
    port = container["ports"][0]["containerPort"]
    assert f"--http-port={port}" in args
    service = load("inferenceservice.yaml")
    paths = [
        container["readinessProbe"]["httpGet"]["path"],
        container["livenessProbe"]["httpGet"]["path"],
        service["metadata"]["annotations"]["prometheus.io/path"],
        "/v2/models/cnn/ready",
    ]
    for path in paths:
        with urllib.request.urlopen(f"http://{served.http}{path}", timeout=30) as response:
            assert response.status == 200, path


def test_the_inference_service_uses_the_runtime_and_its_model_format():
    runtime = load("servingruntime.yaml")
    predictor = load("inferenceservice.yaml")["spec"]["predictor"]
    assert predictor["model"]["runtime"] == runtime["metadata"]["name"]
    formats = [f["name"] for f in runtime["spec"]["supportedModelFormats"]]
    assert predictor["model"]["modelFormat"]["name"] in formats
    assert predictor["model"]["protocolVersion"] in runtime["spec"]["protocolVersions"]
