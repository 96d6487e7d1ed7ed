"""Triton's gRPC client (`tritonclient.grpc`) against `halo serve`'s gRPC port: health,
metadata, inference (unary and streamed) with raw tensor contents equal to `halo run-module`'s
results, and the model repository calls."""

import queue
import urllib.request

import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
from tritonclient.grpc import service_pb2
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from conftest import MODELS, host_module, run_module, texts, top_classes


def test_health_and_metadata(serve):
    served = serve("cnn.vmfb", "cnn")
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("cnn")
    assert client.is_model_ready("cnn", model_version="1")
    assert not client.is_model_ready("missing")
    server = client.get_server_metadata(as_json=True)
    assert server["name"] == "halo"
    assert "binary_tensor_data" in server["extensions"]
    metadata = client.get_model_metadata("cnn", as_json=True)
    assert metadata["inputs"][0]["datatype"] == "FP32"
    assert [o["name"] for o in metadata["outputs"]] == ["output0", "output1"]


def test_cnn_inference_equals_run_module(serve, cnn_input):
    served = serve("cnn.vmfb", "cnn")
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    data = triton_grpc.InferInput("input0", list(cnn_input.shape), "FP32")
    data.set_data_from_numpy(cnn_input)
    result = client.infer("cnn", [data], request_id="g-1")
    assert result.get_response().id == "g-1"
    expected = run_module("cnn.vmfb", "cnn", [cnn_input], 2)
    for index, want in enumerate(expected):
        got = result.as_numpy(f"output{index}")
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    # Asking for one output returns only it.
    only = client.infer("cnn", [data], outputs=[triton_grpc.InferRequestedOutput("output1")])
    assert [o.name for o in only.get_response().outputs] == ["output1"]
    np.testing.assert_array_equal(only.as_numpy("output1"), expected[1])


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_requests_equal_plain_ones(serve, cnn_input, algorithm):
    served = serve("cnn.vmfb", "cnn")
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    data = triton_grpc.InferInput("input0", list(cnn_input.shape), "FP32")
    data.set_data_from_numpy(cnn_input)
    result = client.infer("cnn", [data], compression_algorithm=algorithm)
    for index, want in enumerate(run_module("cnn.vmfb", "cnn", [cnn_input], 2)):
        np.testing.assert_array_equal(result.as_numpy(f"output{index}"), want)


def test_a_compressed_message_past_the_size_limit_is_resource_exhausted(serve):
    served = serve("tiny_add.vmfb", "tiny_add", "--max-request-bytes=4096")
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    # 16 KiB of zeros compress to a few dozen bytes, and the limit holds for what they become.
    inputs = [triton_grpc.InferInput(f"input{i}", [4096], "FP32") for i in range(2)]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.zeros(4096, dtype=np.float32))
    with pytest.raises(InferenceServerException) as refused:
        client.infer("tiny_add", inputs, compression_algorithm="gzip")
    assert refused.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
    assert "4096 bytes" in refused.value.message()
    small = [triton_grpc.InferInput(f"input{i}", [4], "FP32") for i in range(2)]
    for tensor in small:
        tensor.set_data_from_numpy(np.ones(4, dtype=np.float32))
    result = client.infer("tiny_add", small, compression_algorithm="gzip")
    np.testing.assert_array_equal(result.as_numpy("output0"), np.full(4, 2, dtype=np.float32))


def test_classification_sends_the_largest_scores_as_classes_with_labels(serve, cnn_input, tmp_path):
    labels = ("cat", "dog")
    (tmp_path / "animals.txt").write_text("\n".join(labels) + "\n")
    served = serve("cnn.vmfb", "cnn", f"--output-labels=output0={tmp_path / 'animals.txt'}")
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    assert "classification" in client.get_server_metadata(as_json=True)["extensions"]
    config = client.get_model_config("cnn", as_json=True)["config"]
    assert config["output"][0]["label_filename"] == "animals.txt"
    data = triton_grpc.InferInput("input0", list(cnn_input.shape), "FP32")
    data.set_data_from_numpy(cnn_input)
    expected = run_module("cnn.vmfb", "cnn", [cnn_input], 2)
    wanted = [triton_grpc.InferRequestedOutput("output0", class_count=3)]
    result = client.infer("cnn", [data], outputs=wanted)
    output = result.get_output("output0")
    assert output.datatype == "BYTES"
    assert list(output.shape) == [3]
    # Three classes and two labels: the third class has no name.
    assert texts(result.as_numpy("output0")) == top_classes(expected[0], 3, labels)


def test_integer_tensors(serve):
    served = serve("shape_ops.vmfb", "reverse")
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    values = np.array([1, 2, 3, 4, 5, -6], dtype=np.int32)
    data = triton_grpc.InferInput("input0", [6], "INT32")
    data.set_data_from_numpy(values)
    result = client.infer("shape_ops", [data])
    np.testing.assert_array_equal(result.as_numpy("output0"), run_module("shape_ops.vmfb", "reverse", [values], 1)[0])


def test_bad_requests_are_invalid_argument_naming_the_problem(serve):
    served = serve("tiny_add.vmfb", "tiny_add")
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    ones = triton_grpc.InferInput("input1", [4], "FP32")
    ones.set_data_from_numpy(np.ones(4, dtype=np.float32))
    cases = [
        ("input0", [4], "INT32", np.arange(4, dtype=np.int32), "is INT32; the model takes FP32"),
        ("input0", [3], "FP32", np.arange(3, dtype=np.float32), r"shape \[3\]"),
        ("other", [4], "FP32", np.arange(4, dtype=np.float32), "no input 'other'"),
    ]
    for name, shape, datatype, values, message in cases:
        bad = triton_grpc.InferInput(name, shape, datatype)
        bad.set_data_from_numpy(values)
        with pytest.raises(InferenceServerException, match=message) as caught:
            client.infer("tiny_add", [bad, ones])
        assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
    with pytest.raises(InferenceServerException, match="unknown model 'nope'"):
        client.infer("nope", [ones])
    right = triton_grpc.InferInput("input0", [4], "FP32")
    right.set_data_from_numpy(np.arange(4, dtype=np.float32))
    result = client.infer("tiny_add", [right, ones])
    np.testing.assert_array_equal(result.as_numpy("output0"), np.arange(4, dtype=np.float32) + 1)


def tiny_add_message() -> bytes:
    """A whole ModelInfer message for tiny_add, 0..3 plus ones, as raw bytes."""
    request = service_pb2.ModelInferRequest(model_name="tiny_add")
    for name in ("input0", "input1"):
        tensor = request.inputs.add(name=name, datatype="FP32")
        tensor.shape.append(4)
    request.raw_input_contents.extend([np.arange(4, dtype=np.float32).tobytes(), np.ones(4, np.float32).tobytes()])
    return request.SerializeToString()


def test_a_message_that_is_not_protobuf_is_invalid_argument_naming_it(serve):
    served = serve("tiny_add.vmfb", "tiny_add")
    whole = tiny_add_message()
    not_utf8 = service_pb2.ModelInferRequest(model_name="tiny_add").SerializeToString().replace(b"tiny", b"\xff\xfe\xfd\xfc")
    damaged = [
        (whole[:-3], "buffer underflow"),
        (b"\x00" + whole, "invalid tag value: 0"),
        (not_utf8, "model_name: invalid string value"),
    ]
    with grpc.insecure_channel(served.grpc) as channel:
        infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        for message, problem in damaged:
            with pytest.raises(grpc.RpcError) as caught:
                infer(message, timeout=30)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value
            assert "not a valid ModelInferRequest" in caught.value.details()
            assert problem in caught.value.details()
        answer = service_pb2.ModelInferResponse.FromString(infer(whole, timeout=30))
    np.testing.assert_array_equal(np.frombuffer(answer.raw_output_contents[0], np.float32), np.arange(4) + 1)


def test_streams_waiting_between_messages_hold_no_place(serve):
    # One model admitting two requests (one running, one queued). Places go to messages while
    # they arrive (halo-cli's serve tests hold them with calls stopped mid-message): two streams
    # kept open between messages hold none, so a call beside them is answered.
    served = serve("tiny_add.vmfb", "tiny_add", "--max-concurrency=1", "--max-queue=1")
    message = tiny_add_message()
    with grpc.insecure_channel(served.grpc) as channel:
        infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        stream = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer")
        held = []
        for _ in range(2):
            sending = queue.Queue()
            sending.put(message)
            answers = stream(iter(sending.get, None), timeout=60)
            assert not service_pb2.ModelStreamInferResponse.FromString(next(answers)).error_message
            held.append((sending, answers))
        answer = service_pb2.ModelInferResponse.FromString(infer(message, timeout=30))
        np.testing.assert_array_equal(np.frombuffer(answer.raw_output_contents[0], np.float32), np.arange(4) + 1)
        # The streams go on answering.
        for sending, answers in held:
            sending.put(message)
            assert not service_pb2.ModelStreamInferResponse.FromString(next(answers)).error_message
            sending.put(None)
            assert list(answers) == []


def test_grpc_requests_show_in_the_metrics_which_prometheus_parses(serve, cnn_input):
    served = serve("cnn.vmfb", "cnn")
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    data = triton_grpc.InferInput("input0", list(cnn_input.shape), "FP32")
    data.set_data_from_numpy(cnn_input)
    for _ in range(2):
        client.infer("cnn", [data])
    with urllib.request.urlopen(f"http://{served.http}/metrics", timeout=30) as response:
        text = response.read().decode()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    success = ("halo_inference_requests_total", (("model", "cnn"), ("outcome", "success"), ("protocol", "grpc")))
    assert samples[success] == 2
    assert samples[("halo_inference_compute_seconds_count", (("model", "cnn"),))] == 2


def test_streamed_inference_answers_each_request_and_reports_failures_in_band(serve, cnn_input):
    served = serve("cnn.vmfb", "cnn")
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    data = triton_grpc.InferInput("input0", list(cnn_input.shape), "FP32")
    data.set_data_from_numpy(cnn_input)
    answers = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    for index in range(4):
        client.async_stream_infer("cnn", [data], request_id=f"s-{index}")
    client.async_stream_infer("nope", [data], request_id="bad")
    received = [answers.get(timeout=60) for _ in range(5)]
    client.stop_stream()
    expected = run_module("cnn.vmfb", "cnn", [cnn_input], 2)
    results = {result.get_response().id: result for result, error in received if error is None}
    assert sorted(results) == ["s-0", "s-1", "s-2", "s-3"]
    for result in results.values():
        np.testing.assert_array_equal(result.as_numpy("output1"), expected[1])
    errors = [error for result, error in received if error is not None]
    assert len(errors) == 1 and "unknown model 'nope'" in errors[0].message(), errors
    # The unary call still answers after the stream.
    np.testing.assert_array_equal(client.infer("cnn", [data]).as_numpy("output0"), expected[0])


def test_the_model_repository_api_over_grpc(serve, tmp_path):
    for name in ["adder", "spare"]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.toml").write_text(
            f'function = "tiny_add"\nmodules = ["{MODELS / host_module("tiny_add.vmfb")}"]\n'
        )
    served = serve.with_args(f"--model-repository={tmp_path}")
    client = triton_grpc.InferenceServerClient(url=served.grpc)

    def states():
        index = client.get_model_repository_index(as_json=True)["models"]
        return [(m["name"], m["state"]) for m in index]

    assert states() == [("adder", "READY"), ("spare", "READY")]
    client.unload_model("spare")
    assert not client.is_model_ready("spare")
    assert states() == [("adder", "READY"), ("spare", "UNAVAILABLE")]
    with pytest.raises(InferenceServerException, match="takes no load parameters \\(got config\\)") as caught:
        client.load_model("spare", config='{"max_batch_size": 8}')
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert not client.is_model_ready("spare")
    client.load_model("spare")
    assert client.is_model_ready("spare")
    with pytest.raises(InferenceServerException, match="has no model 'missing'"):
        client.load_model("missing")
    with pytest.raises(InferenceServerException, match="no model 'ghost' is loaded"):
        client.unload_model("ghost")


def test_model_config_and_statistics(serve, cnn_input):
    served = serve("cnn.vmfb", "cnn")
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    config = client.get_model_config("cnn").config
    assert config.name == "cnn" and config.platform == "halo_iree" and config.max_batch_size == 0
    assert config.input[0].name == "input0"
    assert config.input[0].data_type == triton_grpc.model_config_pb2.TYPE_FP32
    assert list(config.input[0].dims) == list(cnn_input.shape)
    assert [o.name for o in config.output] == ["output0", "output1"]

    before = client.get_inference_statistics("cnn", as_json=True)["model_stats"][0]
    assert before["name"] == "cnn" and before["version"] == "1"
    assert "inference_count" not in before  # proto3 JSON leaves out zeros
    data = triton_grpc.InferInput("input0", list(cnn_input.shape), "FP32")
    data.set_data_from_numpy(cnn_input)
    for _ in range(3):
        client.infer("cnn", [data])
    stats = client.get_inference_statistics("cnn").model_stats[0]
    assert stats.inference_count == stats.execution_count == 3
    assert stats.inference_stats.success.count == 3
    assert stats.inference_stats.compute_infer.count == 3
    assert 0 < stats.inference_stats.compute_infer.ns <= stats.inference_stats.success.ns
    assert stats.inference_stats.fail.count == 0
    assert stats.last_inference > 0
    everything = client.get_inference_statistics("").model_stats
    assert [m.name for m in everything] == ["cnn"]
    with pytest.raises(InferenceServerException, match="unknown model 'nope'"):
        client.get_model_config("nope")


def test_system_shared_memory_inputs_and_outputs(serve):
    import os

    import tritonclient.utils.shared_memory as shm

    served = serve("tiny_add.vmfb", "tiny_add")
    client = triton_grpc.InferenceServerClient(url=served.grpc)
    key_in, key_out = f"/halo_grpc_{os.getpid()}_in", f"/halo_grpc_{os.getpid()}_out"
    a, b = np.arange(4, dtype=np.float32), np.full(4, -3, dtype=np.float32)
    region_in = shm.create_shared_memory_region("in", key_in, 16)
    region_out = shm.create_shared_memory_region("out", key_out, 16)
    try:
        shm.set_shared_memory_region(region_in, [b])
        client.register_system_shared_memory("in", key_in, 16)
        client.register_system_shared_memory("out", key_out, 16)
        status = client.get_system_shared_memory_status(as_json=True)["regions"]
        assert status["in"]["key"] == key_in and int(status["out"]["byte_size"]) == 16

        # input0 travels as raw contents, input1 comes from shared memory.
        first = triton_grpc.InferInput("input0", [4], "FP32")
        first.set_data_from_numpy(a)
        second = triton_grpc.InferInput("input1", [4], "FP32")
        second.set_shared_memory("in", 16)
        output = triton_grpc.InferRequestedOutput("output0")
        output.set_shared_memory("out", 16)
        client.infer("tiny_add", [first, second], outputs=[output])
        got = shm.get_contents_as_numpy(region_out, np.float32, [4])
        np.testing.assert_array_equal(got, run_module("tiny_add.vmfb", "tiny_add", [a, b], 1)[0])

        small = triton_grpc.InferRequestedOutput("output0")
        small.set_shared_memory("out", 8)
        with pytest.raises(InferenceServerException, match="shared_memory_byte_size is 8") as caught:
            client.infer("tiny_add", [first, second], outputs=[small])
        assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
        client.unregister_system_shared_memory()
        assert client.get_system_shared_memory_status(as_json=True).get("regions", {}) == {}
    finally:
        shm.destroy_shared_memory_region(region_in)
        shm.destroy_shared_memory_region(region_out)


# grpc.health.v1 messages by hand (one string field; one enum field), so that no further package
# is needed: a check names a service, and the answer's status is SERVING (1) or NOT_SERVING (2).
def health_request(service: str) -> bytes:
    name = service.encode()
    return b"\x0a" + bytes([len(name)]) + name if name else b""


HEALTH_STATUSES = {b"\x08\x01": "SERVING", b"\x08\x02": "NOT_SERVING"}


def health_check(served, service: str) -> str:
    with grpc.insecure_channel(served.grpc) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        try:
            return HEALTH_STATUSES[check(health_request(service), timeout=30)]
        except grpc.RpcError as error:
            return error.code().name


def test_the_grpc_health_service_answers_as_the_http_probes(serve):
    served = serve("tiny_add.vmfb", "tiny_add")
    for service in ["", "inference.GRPCInferenceService", "ready", "live"]:
        assert health_check(served, service) == "SERVING", service
    assert health_check(served, "nope") == "NOT_FOUND"


def test_a_health_watch_sees_the_shutdown_and_does_not_hold_it(serve):
    served = serve("tiny_add.vmfb", "tiny_add")
    with grpc.insecure_channel(served.grpc) as channel:
        watch = channel.unary_stream("/grpc.health.v1.Health/Watch")(health_request(""), timeout=60)
        assert HEALTH_STATUSES[next(watch)] == "SERVING"
        served.process.terminate()
        assert HEALTH_STATUSES[next(watch)] == "NOT_SERVING"
        # The stream ends, and the server with it: a watching client does not hold the shutdown.
        assert list(watch) == []
        assert served.process.wait(timeout=20) == 0
