"""The process heap does not keep streamed level buffers. Two threads make and drop
level-sized buffers (256 KiB to 8 MiB) between small long-lived objects, as the I/O workers do
beside the render thread: with glibc's floating mmap threshold the freed buffers stay in the
arenas, with the threshold fixed (`map_large_buffers`, which the frame loop calls) they go back
to the system. Each case runs in its own process: mallopt is process-wide."""
from __future__ import annotations

import ctypes.util
import subprocess
import sys

import pytest

WORKLOAD = """
import random, sys, threading
if sys.argv[1] == "fixed":
    from engine.streaming.heap import map_large_buffers
    assert map_large_buffers()
keep = []
def worker(seed):
    r = random.Random(seed)
    for _ in range(200):
        level = bytearray(r.randint(256 << 10, 8 << 20))
        keep.append(bytearray(r.randint(100, 5000)))
        if len(keep) > 2000:
            keep.pop(r.randrange(len(keep)))
        del level
threads = [threading.Thread(target=worker, args=(s,)) for s in range(2)]
[t.start() for t in threads]
[t.join() for t in threads]
print(int(open("/proc/self/statm").read().split()[1]) * 4096)
"""


def _rss_after(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", WORKLOAD, mode], capture_output=True,
                         text=True, timeout=120, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.skipif("libc.so" not in (ctypes.util.find_library("c") or ""),
                    reason="glibc only")
@pytest.mark.slow
def test_level_buffers_do_not_stay_in_the_heap():
    floating, fixed = _rss_after("floating"), _rss_after("fixed")
    assert fixed < floating - (8 << 20), (floating >> 20, fixed >> 20)
