#!/usr/bin/env python3
"""The same two latencies as halo's `latency` example, measured on IREE 3.13 through its Python
bindings (iree.runtime): a host-signal -> host-wake ping-pong and an empty queue submission round
trip (a 64-byte queue_alloca). Python adds its own call overhead (roughly a microsecond per call), so these figures are an
upper bound on IREE's C runtime.

Usage: .iree-venv/bin/python scripts/iree-latency.py [device] [rounds]
"""
import statistics
import sys
import threading
import time

import iree.runtime as rt

device_name = sys.argv[1] if len(sys.argv) > 1 else "local-task"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
device = rt.get_device(device_name)
ping, pong = device.create_semaphore(0), device.create_semaphore(0)


def partner():
    for value in range(1, rounds + 1):
        ping.wait(value)
        pong.signal(value)


thread = threading.Thread(target=partner)
thread.start()
wake = []
for value in range(1, rounds + 1):
    start = time.perf_counter()
    ping.signal(value)
    pong.wait(value)
    wake.append((time.perf_counter() - start) / 2)
thread.join()

# queue_execute with no command buffer fails with std::bad_cast in the 3.13 Python bindings, so
# the submission timed here is a 64-byte queue_alloca (halo's example times the same).
done = device.create_semaphore(0)
trips = []
for value in range(1, rounds + 1):
    start = time.perf_counter()
    device.queue_alloca(64, [], [(done, value)])
    done.wait(value)
    trips.append(time.perf_counter() - start)
print(f"device {device_name}, {rounds} rounds (through Python)")
print(f"host signal -> waiting host thread wakes: {statistics.median(wake) * 1e6:.2f} us")
print(f"queue_alloca(64) submission round trip: {statistics.median(trips) * 1e6:.2f} us")
