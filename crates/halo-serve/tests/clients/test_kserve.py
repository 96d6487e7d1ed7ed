"""KServe's own client library (`kserve`: REST and gRPC over the v2 protocol) against `halo serve`."""

import asyncio

import grpc
import httpx
import numpy as np
import pytest
from kserve import InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest, RESTConfig

from conftest import run_module


def call(coroutine_factory):
    async def run():
        client = InferenceRESTClient(RESTConfig(protocol="v2"))
        try:
            return await coroutine_factory(client)
        finally:
            await client.close()

    return asyncio.run(run())


def test_health(serve):
    served = serve("cnn.vmfb", "cnn")
    base = f"http://{served.http}"
    assert call(lambda c: c.is_server_live(base))
    assert call(lambda c: c.is_server_ready(base))
    assert call(lambda c: c.is_model_ready(base, "cnn"))


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_cnn_inference_equals_run_module(serve, cnn_input, binary):
    served = serve("cnn.vmfb", "cnn")
    data = InferInput("input0", list(cnn_input.shape), "FP32")
    data.set_data_from_numpy(cnn_input, binary_data=binary)
    request = InferRequest(
        model_name="cnn",
        infer_inputs=[data],
        request_id="k-1",
        parameters={"binary_data_output": binary},
    )
    response = call(lambda c: c.infer(f"http://{served.http}", request, model_name="cnn"))
    expected = run_module("cnn.vmfb", "cnn", [cnn_input], 2)
    assert response.id == "k-1"
    got = {output.name: output.as_numpy() for output in response.outputs}
    for index, want in enumerate(expected):
        np.testing.assert_array_equal(got[f"output{index}"].reshape(want.shape), want)


def test_a_bad_request_is_a_400_with_the_servers_message(serve):
    served = serve("tiny_add.vmfb", "tiny_add")
    data = InferInput("input0", [3], "FP32")
    data.set_data_from_numpy(np.ones(3, dtype=np.float32))
    request = InferRequest(model_name="tiny_add", infer_inputs=[data])
    with pytest.raises(httpx.HTTPStatusError, match=r"shape \[3\].*400"):
        call(lambda c: c.infer(f"http://{served.http}", request, model_name="tiny_add"))


def grpc_call(url: str, method):
    async def run():
        async with InferenceGRPCClient(url) as client:
            return await method(client)

    return asyncio.run(run())


def test_grpc_health_and_inference_equal_run_module(serve, cnn_input):
    served = serve("cnn.vmfb", "cnn")
    assert grpc_call(served.grpc, lambda c: c.is_server_live())
    assert grpc_call(served.grpc, lambda c: c.is_server_ready())
    assert grpc_call(served.grpc, lambda c: c.is_model_ready("cnn"))
    data = InferInput("input0", list(cnn_input.shape), "FP32")
    data.set_data_from_numpy(cnn_input)
    request = InferRequest(model_name="cnn", infer_inputs=[data], request_id="kg-1")
    response = grpc_call(served.grpc, lambda c: c.infer(request))
    assert response.id == "kg-1"
    expected = run_module("cnn.vmfb", "cnn", [cnn_input], 2)
    got = {output.name: output.as_numpy() for output in response.outputs}
    for index, want in enumerate(expected):
        np.testing.assert_array_equal(got[f"output{index}"].reshape(want.shape), want)


def test_grpc_bad_request_is_invalid_argument(serve):
    served = serve("tiny_add.vmfb", "tiny_add")
    data = InferInput("input0", [4], "INT32")
    data.set_data_from_numpy(np.arange(4, dtype=np.int32))
    request = InferRequest(model_name="tiny_add", infer_inputs=[data])
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        grpc_call(served.grpc, lambda c: c.infer(request))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "is INT32; the model takes FP32" in caught.value.details()
