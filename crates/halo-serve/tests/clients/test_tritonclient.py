"""NVIDIA's Triton client library (`tritonclient`, HTTP) against `halo serve`: health, metadata,
and JSON and binary inference equal to `halo run-module`'s results."""

import numpy as np
import pytest
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from conftest import MODELS, host_module, run_module, texts, top_classes


def test_health_and_metadata(serve):
    served = serve("cnn.vmfb", "cnn")
    client = triton_http.InferenceServerClient(url=served.http)
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("cnn")
    assert not client.is_model_ready("missing")
    assert client.get_server_metadata()["name"] == "halo"
    metadata = client.get_model_metadata("cnn")
    assert metadata["inputs"][0]["datatype"] == "FP32"
    assert [o["name"] for o in metadata["outputs"]] == ["output0", "output1"]


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_cnn_inference_equals_run_module(serve, cnn_input, binary):
    served = serve("cnn.vmfb", "cnn")
    client = triton_http.InferenceServerClient(url=served.http)
    data = triton_http.InferInput("input0", list(cnn_input.shape), "FP32")
    data.set_data_from_numpy(cnn_input, binary_data=binary)
    wanted = [triton_http.InferRequestedOutput(f"output{i}", binary_data=binary) for i in range(2)]
    result = client.infer("cnn", [data], outputs=wanted)
    expected = run_module("cnn.vmfb", "cnn", [cnn_input], 2)
    for index, want in enumerate(expected):
        # The form asked for is the form sent: raw bytes after the JSON, or JSON numbers.
        sent_binary = "binary_data_size" in result.get_output(f"output{index}").get("parameters", {})
        assert sent_binary == binary
        got = result.as_numpy(f"output{index}")
        assert got.shape == want.shape
        # JSON carries each f32 as a decimal that reads back to the same float.
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_requests_and_answers_equal_plain_ones(serve, cnn_input, binary, algorithm):
    served = serve("cnn.vmfb", "cnn")
    client = triton_http.InferenceServerClient(url=served.http)
    data = triton_http.InferInput("input0", list(cnn_input.shape), "FP32")
    data.set_data_from_numpy(cnn_input, binary_data=binary)
    wanted = [triton_http.InferRequestedOutput(f"output{i}", binary_data=binary) for i in range(2)]
    result = client.infer(
        "cnn",
        [data],
        outputs=wanted,
        request_compression_algorithm=algorithm,
        response_compression_algorithm=algorithm,
    )
    # The answer's compression is checked byte by byte in the Rust tests (serve.rs): the client
    # takes either form.
    expected = run_module("cnn.vmfb", "cnn", [cnn_input], 2)
    for index, want in enumerate(expected):
        np.testing.assert_array_equal(result.as_numpy(f"output{index}"), want)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_classification_sends_the_largest_scores_as_classes(serve, cnn_input, binary):
    served = serve("cnn.vmfb", "cnn")
    client = triton_http.InferenceServerClient(url=served.http)
    assert "classification" in client.get_server_metadata()["extensions"]
    data = triton_http.InferInput("input0", list(cnn_input.shape), "FP32")
    data.set_data_from_numpy(cnn_input)
    expected = run_module("cnn.vmfb", "cnn", [cnn_input], 2)
    for count in (2, 10):
        wanted = [
            triton_http.InferRequestedOutput("output1", binary_data=binary, class_count=count),
            triton_http.InferRequestedOutput("output0", binary_data=binary),
        ]
        result = client.infer("cnn", [data], outputs=wanted)
        classes = result.get_output("output1")
        assert classes["datatype"] == "BYTES"
        assert classes["shape"] == [min(count, expected[1].size)]
        assert texts(result.as_numpy("output1")) == top_classes(expected[1], count)
        # An output not asked for as classes comes back as itself.
        np.testing.assert_array_equal(result.as_numpy("output0"), expected[0])


def test_two_inputs_and_integer_tensors(serve):
    add = serve("tiny_add.vmfb", "tiny_add")
    client = triton_http.InferenceServerClient(url=add.http)
    a = np.array([1.0, 2.5, -3.0, 0.125], dtype=np.float32)
    b = np.array([0.5, 0.25, 1e-3, 7.0], dtype=np.float32)
    inputs = [triton_http.InferInput(f"input{i}", [4], "FP32") for i in range(2)]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b, binary_data=False)
    result = client.infer("tiny_add", inputs)
    np.testing.assert_array_equal(result.as_numpy("output0"), run_module("tiny_add.vmfb", "tiny_add", [a, b], 1)[0])

    reverse = serve("shape_ops.vmfb", "reverse")
    client = triton_http.InferenceServerClient(url=reverse.http)
    values = np.array([1, 2, 3, 4, 5, -6], dtype=np.int32)
    data = triton_http.InferInput("input0", [6], "INT32")
    data.set_data_from_numpy(values)
    result = client.infer("shape_ops", [data])
    np.testing.assert_array_equal(result.as_numpy("output0"), run_module("shape_ops.vmfb", "reverse", [values], 1)[0])


def test_a_bad_request_raises_the_servers_message_and_the_next_succeeds(serve):
    served = serve("tiny_add.vmfb", "tiny_add")
    client = triton_http.InferenceServerClient(url=served.http)
    wrong = triton_http.InferInput("input0", [4], "INT32")
    wrong.set_data_from_numpy(np.arange(4, dtype=np.int32))
    other = triton_http.InferInput("input1", [4], "FP32")
    other.set_data_from_numpy(np.ones(4, dtype=np.float32))
    with pytest.raises(InferenceServerException, match="is INT32; the model takes FP32"):
        client.infer("tiny_add", [wrong, other])
    with pytest.raises(InferenceServerException, match="unknown model 'nope'"):
        client.infer("nope", [other])
    right = triton_http.InferInput("input0", [4], "FP32")
    right.set_data_from_numpy(np.arange(4, dtype=np.float32))
    result = client.infer("tiny_add", [right, other])
    np.testing.assert_array_equal(result.as_numpy("output0"), np.arange(4, dtype=np.float32) + 1)


def test_the_model_repository_api(serve, tmp_path):
    for name in ["adder", "spare"]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.toml").write_text(
            f'function = "tiny_add"\nmodules = ["{MODELS / host_module("tiny_add.vmfb")}"]\noutput_names = ["sum"]\n'
        )
    served = serve.with_args(f"--model-repository={tmp_path}")
    client = triton_http.InferenceServerClient(url=served.http)
    index = client.get_model_repository_index()
    assert [(m["name"], m["state"]) for m in index] == [("adder", "READY"), ("spare", "READY")]
    client.unload_model("spare")
    assert not client.is_model_ready("spare")
    assert [m["state"] for m in client.get_model_repository_index()] == ["READY", "UNAVAILABLE"]
    client.load_model("spare")
    assert client.is_model_ready("spare")
    inputs = [triton_http.InferInput(f"input{i}", [4], "FP32") for i in range(2)]
    for data in inputs:
        data.set_data_from_numpy(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(client.infer("spare", inputs).as_numpy("sum"), np.arange(4, dtype=np.float32) * 2)
    with pytest.raises(InferenceServerException, match="has no model 'missing'"):
        client.load_model("missing")
    with pytest.raises(InferenceServerException, match="takes no load parameters \\(got config\\)"):
        client.load_model("spare", config='{"max_batch_size": 8}')


def test_model_config_and_statistics(serve, cnn_input):
    served = serve("cnn.vmfb", "cnn")
    client = triton_http.InferenceServerClient(url=served.http)
    assert {"model_configuration", "statistics"} <= set(client.get_server_metadata()["extensions"])
    config = client.get_model_config("cnn")
    assert config["name"] == "cnn" and config["max_batch_size"] == 0
    assert config["input"] == [{"name": "input0", "data_type": "TYPE_FP32", "dims": list(cnn_input.shape)}]
    assert [o["name"] for o in config["output"]] == ["output0", "output1"]
    assert client.get_model_config("cnn", model_version="1") == config

    data = triton_http.InferInput("input0", list(cnn_input.shape), "FP32")
    data.set_data_from_numpy(cnn_input, binary_data=True)
    client.infer("cnn", [data])
    client.infer("cnn", [data])
    bad = triton_http.InferInput("input0", [1], "FP32")
    bad.set_data_from_numpy(np.ones(1, dtype=np.float32))
    with pytest.raises(InferenceServerException):
        client.infer("cnn", [bad])
    stats = client.get_inference_statistics("cnn")["model_stats"]
    assert len(stats) == 1 and stats[0]["name"] == "cnn" and stats[0]["version"] == "1"
    inference = stats[0]["inference_stats"]
    # The request of the wrong shape reached the model and failed there.
    assert stats[0]["inference_count"] == 2 and inference["success"]["count"] == 2
    assert inference["fail"]["count"] == 1 and inference["fail"]["ns"] > 0
    assert inference["queue"]["count"] == inference["compute_infer"]["count"] == 2
    assert 0 < inference["compute_infer"]["ns"] <= inference["success"]["ns"]
    assert [m["name"] for m in client.get_inference_statistics()["model_stats"]] == ["cnn"]
    with pytest.raises(InferenceServerException, match="unknown model 'nope'"):
        client.get_inference_statistics("nope")


def test_system_shared_memory_inputs_and_outputs(serve):
    import os

    import tritonclient.utils.shared_memory as shm

    served = serve("tiny_add.vmfb", "tiny_add")
    client = triton_http.InferenceServerClient(url=served.http)
    key_in, key_out = f"/halo_http_{os.getpid()}_in", f"/halo_http_{os.getpid()}_out"
    a, b = np.arange(4, dtype=np.float32), np.full(4, 10, dtype=np.float32)
    region_in = shm.create_shared_memory_region("in", key_in, 32)
    region_out = shm.create_shared_memory_region("out", key_out, 16)
    try:
        shm.set_shared_memory_region(region_in, [np.zeros(4, dtype=np.float32), a])
        client.register_system_shared_memory("in", key_in, 32)
        client.register_system_shared_memory("out", key_out, 16)
        status = client.get_system_shared_memory_status()
        assert sorted((r["name"], r["key"], r["byte_size"]) for r in status) == [("in", key_in, 32), ("out", key_out, 16)]
        with pytest.raises(InferenceServerException, match="already registered"):
            client.register_system_shared_memory("in", key_in, 32)

        first = triton_http.InferInput("input0", [4], "FP32")
        first.set_shared_memory("in", 16, offset=16)  # a, after the zeros
        second = triton_http.InferInput("input1", [4], "FP32")
        second.set_data_from_numpy(b, binary_data=True)
        output = triton_http.InferRequestedOutput("output0")
        output.set_shared_memory("out", 16)
        result = client.infer("tiny_add", [first, second], outputs=[output])
        assert result.get_output("output0")["parameters"]["shared_memory_region"] == "out"
        got = shm.get_contents_as_numpy(region_out, np.float32, [4])
        np.testing.assert_array_equal(got, run_module("tiny_add.vmfb", "tiny_add", [a, b], 1)[0])

        # A window past the region is refused by name, and the server goes on.
        past = triton_http.InferInput("input0", [4], "FP32")
        past.set_shared_memory("in", 16, offset=24)
        with pytest.raises(InferenceServerException, match="shared memory region 'in'"):
            client.infer("tiny_add", [past, second])
        client.unregister_system_shared_memory("in")
        assert [r["name"] for r in client.get_system_shared_memory_status()] == ["out"]
        with pytest.raises(InferenceServerException, match="no shared memory region 'in'"):
            client.infer("tiny_add", [first, second])
        client.unregister_system_shared_memory()
        assert client.get_system_shared_memory_status() == []
    finally:
        shm.destroy_shared_memory_region(region_in)
        shm.destroy_shared_memory_region(region_out)
