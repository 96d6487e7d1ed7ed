"""Ctrl-C stops a call on the main thread that would never end, as it stops Python code."""

import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import CPU_DEVICES, MODELS, cpu_module

# Halving until the sum drops below 5 never ends when an element is infinite.
SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np, halo
    halve_until = halo.load(sys.argv[1], device=sys.argv[2]).halve_until
    print("calling", flush=True)
    try:
        halve_until(np.array([np.inf, 20, 30, 40], np.float32), 5.0)
        print("returned", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    halved, count = halve_until(np.array([10, 20, 30, 40], np.float32), 5.0)
    print(np.asarray(halved).tolist(), int(count), flush=True)
    """
)


# The same through call_async on an asyncio loop: the KeyboardInterrupt leaves asyncio.run.
ASYNC_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys, numpy as np, halo
    halve_until = halo.load(sys.argv[1], device=sys.argv[2]).halve_until
    async def halve(values):
        return await halve_until.call_async(np.array(values, np.float32), 5.0)
    print("calling", flush=True)
    try:
        asyncio.run(halve([np.inf, 20, 30, 40]))
        print("returned", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    halved, count = asyncio.run(halve([10, 20, 30, 40]))
    print(np.asarray(halved).tolist(), int(count), flush=True)
    """
)


def run_and_interrupt(device, script=SCRIPT, module=cpu_module("control_flow.vmfb")):
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(module), device],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline() == "calling\n"
        # The endless call is running (or about to): neither outcome may let it finish.
        try:
            process.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
        return process.returncode, out, err
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("device", CPU_DEVICES)
@pytest.mark.parametrize("script", [SCRIPT, ASYNC_SCRIPT], ids=["call", "call_async"])
def test_ctrl_c_raises_keyboard_interrupt_in_an_endless_call_and_the_module_goes_on(device, script):
    code, out, err = run_and_interrupt(device, script)
    assert code == 0, err
    assert out.splitlines() == ["interrupted", "[0.3125, 0.625, 0.9375, 1.25] 5"], err


IGNORING = "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"


def test_an_ignored_sigint_leaves_the_call_running():
    with pytest.raises(subprocess.TimeoutExpired):
        process = subprocess.Popen(
            [sys.executable, "-c", IGNORING + SCRIPT, str(cpu_module("control_flow.vmfb")), "local-sync"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout.readline() == "calling\n"
            process.send_signal(signal.SIGINT)
            process.wait(timeout=2)
        finally:
            process.kill()
            process.wait()


# A module whose initializer loops for ever: `func_util` with one byte of `__init` changed
# (`global.store.i32` became a branch back to the start). Loading it runs the initializer.
LOADING_SCRIPT = textwrap.dedent(
    """
    import pathlib, sys, tempfile, halo
    damaged = bytearray(pathlib.Path(sys.argv[1]).read_bytes())
    assert damaged[2368] == 0x01
    damaged[2368] = 0x60
    path = pathlib.Path(tempfile.mkdtemp()) / "func_util.vmfb"
    path.write_bytes(bytes(damaged))
    print("calling", flush=True)
    try:
        halo.load(path, device=sys.argv[2])
        print("returned", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    print(halo.load(sys.argv[1], device=sys.argv[2]).status(0), flush=True)
    """
)


def test_ctrl_c_stops_a_module_initializer_that_never_ends():
    code, out, err = run_and_interrupt("local-sync", LOADING_SCRIPT, MODELS.parent / "vm" / "func_util.vmfb")
    assert code == 0, err
    assert out.splitlines() == ["interrupted", "1"], err


# One kernel stepping 1024 values 2**62 times each: it does not return in this test's lifetime.
KERNEL_SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np, halo
    kernel_loop = halo.load(sys.argv[1], device=sys.argv[2]).kernel_loop
    print("calling", flush=True)
    try:
        kernel_loop(np.full(1024, 7, np.int64), np.array(2**62, np.int64))
        print("returned", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    """
)


def test_after_ctrl_c_in_a_kernel_that_does_not_return_the_program_exits():
    # The call gives up on the kernel; the interpreter's exit then drops the device, which must
    # not wait for ever on the workers still inside the kernel. (On local-sync the kernel runs on
    # the calling thread itself, where nothing can stop it.)
    code, out, err = run_and_interrupt("local-task", KERNEL_SCRIPT, cpu_module("kernel_loop.vmfb"))
    assert code == 0, err
    assert out.splitlines() == ["interrupted"], err
