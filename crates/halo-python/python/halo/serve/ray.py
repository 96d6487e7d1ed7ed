"""A Ray Serve deployment of a halo model: each replica loads the module on its own device and
answers the Open Inference Protocol's JSON inference requests (`{"inputs": [{"name", "shape",
"datatype", "data"}]}`), with the input and output names `halo serve` gives the function.

    from ray import serve
    from halo.serve.ray import deployment
    serve.run(deployment("model.vmfb", "mlp", num_replicas=2, max_batch_size=8))
    # POST http://127.0.0.1:8000/ {"inputs": [{"name": "input", "shape": [1, 16], ...}]}

A Ray Serve config file deploys it as `import_path: halo.serve.ray:app` with `args` (see
`deploy/ray/config.yaml`). With `max_batch_size` the replica batches concurrent requests with Ray's `@serve.batch`:
requests whose inputs agree but for their leading (batch) dimension are joined along it, the
function is called once, and each request gets its own rows back. The function's inputs and
outputs must then lead with that dimension. Needs `pip install "ray[serve]"`.
"""

import os
import re
from typing import Any, Optional

import numpy as np
from ray import serve

import halo

# The protocol's datatypes, as numpy dtypes.
DATATYPES = {
    "BOOL": np.bool_,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}
NAMES = {np.dtype(dtype): name for name, dtype in DATATYPES.items()}


class BadRequest(ValueError):
    """A request the model cannot take; its message names what was wrong."""


def declared_names(declaration: Optional[str]) -> tuple[list[str], list[str]]:
    """The input and output names of a function's declaration
    (`func @f(%input: tensor<?x16xf32>) -> (%logits: tensor<?x10xf32>)`)."""
    if not declaration or "->" not in declaration:
        return [], []
    arguments, results = declaration.split("->", 1)
    name = re.compile(r"%([\w.$-]+)\s*:")
    return name.findall(arguments), name.findall(results)


def decode(body: Any, names: list[str]) -> list[np.ndarray]:
    """The request's input arrays in the function's order (by name where the function names
    them, else in the request's order)."""
    if not isinstance(body, dict) or not isinstance(body.get("inputs"), list):
        raise BadRequest('an inference request is a JSON object with an "inputs" list')
    arrays = {}
    order = []
    for index, tensor in enumerate(body["inputs"]):
        if not isinstance(tensor, dict):
            raise BadRequest(f"input {index} is not an object")
        name = tensor.get("name", f"input{index}")
        datatype = tensor.get("datatype")
        if datatype not in DATATYPES:
            raise BadRequest(f"input '{name}' has datatype {datatype!r}; known: {sorted(DATATYPES)}")
        shape = tensor.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise BadRequest(f"input '{name}' needs a shape of non-negative integers, not {shape!r}")
        try:
            array = np.asarray(tensor.get("data"), dtype=DATATYPES[datatype])
        except (TypeError, ValueError) as error:
            raise BadRequest(f"input '{name}' has data that is not {datatype}: {error}") from None
        if array.size != int(np.prod(shape)):
            raise BadRequest(f"input '{name}' has {array.size} values for shape {shape}")
        arrays[name] = array.reshape(shape)
        order.append(name)
    if names and set(names) == set(arrays):
        return [arrays[name] for name in names]
    if names:
        raise BadRequest(f"the model's inputs are {names}; the request gives {order}")
    return [arrays[name] for name in order]


def encode(outputs: list[np.ndarray], names: list[str]) -> list[dict]:
    """The outputs as the protocol's JSON tensors."""
    encoded = []
    for index, array in enumerate(outputs):
        array = np.asarray(array)
        encoded.append(
            {
                "name": names[index] if index < len(names) else f"output{index}",
                "datatype": NAMES.get(array.dtype, str(array.dtype)),
                "shape": list(array.shape),
                "data": array.ravel().tolist(),
            }
        )
    return encoded


class HaloModel:
    """One replica: `function` of the `module` file(s) loaded on `device`."""

    def __init__(
        self,
        module: Any,
        function: str,
        device: str = "local-task",
        max_batch_size: int = 0,
        batch_wait_timeout_s: float = 0.0,
    ):
        self.model = halo.load(module, device=device)
        self.function = self.model[function]
        self.name = function
        self.input_names, self.output_names = declared_names(self.function.declaration)
        self.max_batch_size = max_batch_size
        if max_batch_size > 0:
            self.batched.set_max_batch_size(max_batch_size)
            self.batched.set_batch_wait_timeout_s(batch_wait_timeout_s)

    async def __call__(self, request) -> Any:
        from starlette.responses import JSONResponse

        try:
            inputs = decode(await request.json(), self.input_names)
        except ValueError as error:  # BadRequest, and a body that is not JSON
            return JSONResponse({"error": str(error)}, status_code=400)
        try:
            outputs = await self.infer(inputs)
        except BadRequest as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        except halo.Error as error:
            return JSONResponse({"error": str(error)}, status_code=500)
        return {"model_name": self.name, "outputs": encode(outputs, self.output_names)}

    async def infer(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The function's outputs for `inputs`, through the batcher when the replica batches."""
        if self.max_batch_size > 0:
            rows = inputs[0].shape[0] if inputs and inputs[0].ndim else None
            if rows is None or rows > self.max_batch_size:
                raise BadRequest(
                    f"a batched request has 1 to {self.max_batch_size} rows along its first dimension"
                )
            return await self.batched(inputs)
        return self.call(inputs)

    def call(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """One call of the function, its results read back."""
        results = self.function(*inputs)
        results = results if isinstance(results, tuple) else (results,)
        return [np.asarray(result) for result in results]

    @serve.batch(max_batch_size=1)
    async def batched(self, requests: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        """Requests whose inputs agree but for their rows, one call per such group; each gets
        its own rows of every output."""
        groups: dict[tuple, list[int]] = {}
        for index, inputs in enumerate(requests):
            key = tuple((array.dtype.str, array.shape[1:]) for array in inputs)
            groups.setdefault(key, []).append(index)
        answers: list[Any] = [None] * len(requests)
        for members in groups.values():
            joined = [np.concatenate([requests[m][i] for m in members]) for i in range(len(requests[members[0]]))]
            outputs = self.call(joined)
            start = 0
            for m in members:
                rows = requests[m][0].shape[0]
                answers[m] = [output[start : start + rows] for output in outputs]
                start += rows
        return answers

    def pid(self) -> int:
        """The replica's process, for operators (and tests) that need to find it."""
        return os.getpid()


def app(args: dict) -> Any:
    """The application a Ray Serve config file names (`import_path: halo.serve.ray:app`), from
    its `args`: `module` and `function`, and optionally `name`, `num_replicas`, `device`,
    `max_batch_size`, `batch_wait_timeout_s` and `num_cpus` (each replica's)."""
    known = {"module", "function", "name", "num_replicas", "device", "max_batch_size", "batch_wait_timeout_s", "num_cpus"}
    unknown = sorted(set(args) - known)
    if unknown or "module" not in args or "function" not in args:
        raise ValueError(f"halo.serve.ray:app takes module, function and {sorted(known - {'module', 'function'})}; got {sorted(args)}")
    options = {key: args[key] for key in ("name", "num_replicas", "device", "max_batch_size", "batch_wait_timeout_s") if key in args}
    if "num_cpus" in args:
        options["ray_actor_options"] = {"num_cpus": args["num_cpus"]}
    return deployment(args["module"], args["function"], **options)


def deployment(
    module: Any,
    function: str,
    *,
    name: str = "halo",
    num_replicas: int = 1,
    device: str = "local-task",
    max_batch_size: int = 0,
    batch_wait_timeout_s: float = 0.0,
    ray_actor_options: Optional[dict] = None,
):
    """The bound Ray Serve application of `function` in `module` with `num_replicas` replicas,
    for `serve.run`."""
    options: dict[str, Any] = {"name": name, "num_replicas": num_replicas}
    if ray_actor_options is not None:
        options["ray_actor_options"] = ray_actor_options
    return serve.deployment(HaloModel).options(**options).bind(
        module, function, device, max_batch_size, batch_wait_timeout_s
    )
