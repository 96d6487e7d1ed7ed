"""halo.trace: a Chrome trace-event timeline of the calls made inside the block."""

import json

import numpy as np
import pytest

import halo
from conftest import MODELS, cpu_module


def spans(events):
    """(name, thread, begin, end, args) of every span, checking that spans nest per thread."""
    open_spans, closed = {}, []
    for event in events:
        assert "ph" in event and "name" in event
        if event["ph"] == "M":
            continue
        assert isinstance(event["ts"], (int, float)) and "pid" in event and "tid" in event
        stack = open_spans.setdefault(event["tid"], [])
        if event["ph"] == "B":
            stack.append(event)
        elif event["ph"] == "E":
            begin = stack.pop()
            assert begin["name"] == event["name"]
            assert begin["ts"] <= event["ts"]
            closed.append((event["name"], event["tid"], begin["ts"], event["ts"], begin.get("args", {})))
        elif event["ph"] == "X":
            end = event["ts"] + event["dur"]
            closed.append((event["name"], event["tid"], event["ts"], end, event.get("args", {})))
    assert all(not stack for stack in open_spans.values())
    return closed


def traced_cnn_call(directory, device):
    """The events of a trace of one call of the CNN fixture on `device`."""
    module = halo.load(cpu_module("cnn.vmfb"), device=device)
    image = np.load(MODELS / "cnn.basic.0.npy")
    with halo.trace(directory / "trace.json") as path:
        module.cnn(image)
    return json.loads(path.read_text())


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_a_traced_call_shows_its_dispatches_inside_it(tmp_path, device):
    found = spans(traced_cnn_call(tmp_path, device))
    calls = [s for s in found if s[0] == "call"]
    assert len(calls) == 1 and calls[0][4]["function"] == '"cnn"'
    _, caller, start, end, _ = calls[0]
    dispatches = [s for s in found if s[0] == "dispatch"]
    assert dispatches and all(s[4]["export"].startswith('"cnn_dispatch_') for s in dispatches)
    assert all(start <= s[2] and s[3] <= end for s in dispatches)
    imports = [s[4]["name"] for s in found if s[0] == "vm.import" and s[1] == caller and start <= s[2] <= end]
    assert '"hal.device.queue.execute.indirect"' in imports and '"hal.fence.await"' in imports


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_the_device_queue_has_a_track_with_each_execution(tmp_path, device):
    events = traced_cnn_call(tmp_path, device)
    tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    found = spans(events)
    call = next(s for s in found if s[0] == "call")
    executions = [s for s in found if s[0] == "execute"]
    assert executions, "a command buffer's execution"
    for execution in executions:
        assert tracks[execution[1]].startswith(f"{device} device") and tracks[execution[1]].endswith("queue")
        assert call[2] <= execution[2] and execution[3] <= call[3]
        assert execution[4]["commands"] > 0
    dispatches = [s for s in found if s[0] == "dispatch"]
    assert all(any(e[2] <= d[2] and d[3] <= e[3] for e in executions) for d in dispatches)


def test_nothing_is_traced_outside_the_block_and_traces_can_follow_each_other(tmp_path):
    module = halo.load(cpu_module("tiny_add.vmfb"))
    x = np.ones(4, np.float32)
    with halo.trace(tmp_path / "first.json"):
        module.tiny_add(x, x)
    module.tiny_add(x, x)
    with halo.trace(tmp_path / "second.json") as path:
        module.tiny_add(x, x)
        module.tiny_add(x, x)
    assert len([s for s in spans(json.loads((tmp_path / "first.json").read_text())) if s[0] == "call"]) == 1
    assert len([s for s in spans(json.loads(path.read_text())) if s[0] == "call"]) == 2


def test_a_second_trace_at_once_is_refused(tmp_path):
    with halo.trace(tmp_path / "a.json"):
        with pytest.raises(halo.FailedPreconditionError) as raised:
            with halo.trace(tmp_path / "b.json"):
                pass
        assert "a.json" in str(raised.value)
