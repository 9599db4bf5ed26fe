"""CI smoke run of the benchmark suites: `python -m lab bench --quick --json` (every suite,
in two halves run at once) finishes within a minute on llvmpipe and writes the JSON every
consumer of the figures reads.

It checks shape, not figures: the quick sizes are too small for the figures to mean
anything, and CI machines are shared and noisy.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.harness import SUITES

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 60.0


def _strict(token: str) -> float:
    raise ValueError(f"non-standard JSON number {token} (NaN/Infinity)")


#: The suites in two groups of about equal time on llvmpipe (quick seconds: wall 5.2,
#: peers 3.1, frame 1.6, bake 1.5, virtual 1.2, resolution 1.0, the rest under 1), run as two
#: processes at once: the suite's longest test took 21 s as one process, and CI has 2 cores.
GROUPS = (("wall", "bake", "encode", "streaming", "upload", "transcode"),
          ("peers", "frame", "virtual", "resolution", "startup", "accounting", "scaling"))


@pytest.mark.slow
def test_quick_bench_writes_json(tmp_path):
    assert sorted(sum(GROUPS, ())) == sorted(SUITES), "every suite in exactly one group"
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "lab", "bench", "--quick", "--json",
                               str(tmp_path / f"bench{i}.json"), *group], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, group in enumerate(GROUPS)]
    for proc in procs:
        _, err = proc.communicate(timeout=3 * LIMIT_S)
        assert proc.returncode == 0, err[-4000:]
    elapsed = time.perf_counter() - start
    assert elapsed < LIMIT_S, f"--quick took {elapsed:.0f} s (limit {LIMIT_S:.0f} s)"

    parts = [json.loads((tmp_path / f"bench{i}.json").read_text(), parse_constant=_strict)
             for i in range(len(GROUPS))]
    data = parts[0]
    for part in parts[1:]:
        assert part["machine"] == data["machine"] and part["quick"] is True
        data["suites"].update(part["suites"])
    assert data["quick"] is True
    assert {"renderer", "gl_version", "host", "cpu_count"} <= set(data["machine"])
    assert data["date"]
    assert set(data["suites"]) == set(SUITES)
    for name, suite in data["suites"].items():
        assert isinstance(suite["rows"], list) and suite["rows"], name
        assert all(isinstance(row, dict) and row for row in suite["rows"]), name
        assert all(isinstance(note, str) for note in suite["notes"]), name

    streaming = data["suites"]["streaming"]["rows"]
    assert {r["part"] for r in streaming} == {"upload", "latency"}
    wall_rows = data["suites"]["wall"]["rows"]
    tiles = not any("no virtual flights" in n for n in data["suites"]["wall"]["notes"])
    assert {r["part"] for r in wall_rows} == {"wall", "efficiency", "prefetch", "cut", "scale",
                                              "vt-memory"} | ({"pan"} if tiles else set())
    wall = [r for r in wall_rows if r["part"] == "wall"]
    assert {r["policy"] for r in wall} >= {"tiered", "lru-whole", "global-bias"}
    assert all(r["frames_over_budget"] == 0 for r in wall)
    assert {r["source"] for r in streaming if r["part"] == "latency"} == {"file", "ram cache"}
    startup = data["suites"]["startup"]["rows"]
    assert startup[0]["first_frame_speedup"] > 0
    assert {r["part"] for r in data["suites"]["peers"]["rows"]} >= {"vram@40dB", "loader",
                                                                   "ceiling"}
    encode = data["suites"]["encode"]["rows"]
    assert [r["format"] for r in encode] == ["BC1_RGB_SRGB", "BC7_SRGB"]
    # the GPU encoder's columns where the driver has compute shaders (its note says so else)
    gpu = not any("no compute shaders" in n for n in data["suites"]["encode"]["notes"])
    assert all(r["cpu_pool_mpx_s"] > 0 and (not gpu or r["gpu_mpx_s"] > 0) for r in encode)
    scaling = data["suites"]["scaling"]["rows"]
    assert [r["textures"] for r in scaling] == [50, 500]
