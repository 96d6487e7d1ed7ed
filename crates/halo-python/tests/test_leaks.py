"""Many calls leave neither Python objects nor memory behind."""

import gc
import os
import sys

import numpy as np

import halo
from conftest import MODELS, cpu_module


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_ten_thousand_calls_leak_nothing():
    module = halo.load(cpu_module("tiny_add.vmfb"), device="local-task")
    function = module.tiny_add
    x = np.arange(4, dtype=np.float32)
    for _ in range(1000):
        function(x, x).numpy()
    gc.collect()
    objects, rss, refs = len(gc.get_objects()), rss_bytes(), sys.getrefcount(x)
    for _ in range(10_000):
        out = function(x, x)
        out.numpy()
        function(out, out)
    del out
    gc.collect()
    assert sys.getrefcount(x) == refs
    assert len(gc.get_objects()) - objects < 100
    growth = rss_bytes() - rss
    assert growth < 4 << 20, f"resident memory grew by {growth} bytes over 10,000 calls"
