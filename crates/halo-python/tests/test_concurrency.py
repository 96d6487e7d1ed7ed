"""Calls from several Python threads and from asyncio: the GIL is released while a call runs."""

import asyncio
import threading

import numpy as np
import pytest

import halo
from conftest import CPU_DEVICES, MODELS, cpu_module


@pytest.mark.parametrize("device", CPU_DEVICES)
def test_threads_calling_one_module_all_get_their_own_results(device):
    module = halo.load(cpu_module("tiny_add.vmfb"), device=device)
    failures = []

    def work(seed):
        for step in range(50):
            x = np.full(4, seed * 1000 + step, np.float32)
            out = module.tiny_add(x, x).numpy()
            if not np.array_equal(out, 2 * x):
                failures.append((seed, step, out))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


@pytest.mark.parametrize("device", CPU_DEVICES)
def test_python_runs_on_other_threads_while_a_call_computes(device):
    # One long call: 16M elements through `x * 2 + 1`. Were the GIL held during it, the
    # counting thread could not run a single iteration until the call had returned.
    module = halo.load(cpu_module("dynamic_shapes.vmfb"), device=device)
    x = np.ones(1 << 24, np.float32)
    module.scale_1d(x[:16])
    started, done = threading.Event(), threading.Event()
    counts = []

    def count():
        started.wait()
        n = 0
        while not done.is_set():
            n += 1
        counts.append(n)

    counter = threading.Thread(target=count)
    counter.start()
    started.set()
    out = module.scale_1d(x)
    done.set()
    counter.join()
    assert out.numpy()[-1] == 3.0
    assert counts[0] > 100, f"the counting thread ran {counts[0]} iterations during the call"


def test_asyncio_calls_run_concurrently_and_return_results():
    sync = halo.load(cpu_module("tiny_add.vmfb"), device="local-task")
    fenced = halo.load(cpu_module("async_external.vmfb"), device="local-task")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.ones((4, 2), np.float32)

    async def main():
        xs = [np.full(4, i, np.float32) for i in range(8)]
        sums = await asyncio.gather(*(sync.tiny_add.call_async(x, x) for x in xs))
        for x, out in zip(xs, sums):
            np.testing.assert_array_equal(out.numpy(), 2 * x)
        return await fenced.matmul_bias.call_async(a, b, np.ones(2, np.float32))

    out = asyncio.run(main())
    np.testing.assert_array_equal(out.numpy(), np.maximum(a @ b + 1, 0))


def test_asyncio_errors_arrive_as_halo_exceptions():
    module = halo.load(cpu_module("tiny_add.vmfb"))

    async def main():
        await module.tiny_add.call_async(np.ones(4, np.float32))

    with pytest.raises(halo.InvalidArgumentError) as raised:
        asyncio.run(main())
    assert "tiny_add" in str(raised.value)


def test_call_async_outside_an_event_loop_is_refused_before_the_call_starts():
    module = halo.load(cpu_module("tiny_add.vmfb"))
    with pytest.raises(RuntimeError):
        module.tiny_add.call_async(np.ones(4, np.float32), np.ones(4, np.float32))
