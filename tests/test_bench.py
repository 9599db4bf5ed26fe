"""CI smoke run of the benchmark suites: `python -m engine bench --quick --json` finishes,
within a minute on llvmpipe, and writes the JSON every consumer of the figures reads.

It checks shape, not figures: the quick sizes are too small for the figures to mean
anything, and CI machines are shared and noisy.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from engine.bench.harness import SUITES

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 60.0


def _strict(token: str) -> float:
    raise ValueError(f"non-standard JSON number {token} (NaN/Infinity)")


def test_quick_bench_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "engine", "bench", "--quick", "--json",
                           str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=3 * LIMIT_S, check=False)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert elapsed < LIMIT_S, f"--quick took {elapsed:.0f} s (limit {LIMIT_S:.0f} s)"

    data = json.loads(out.read_text(), parse_constant=_strict)
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
    assert {r["part"] for r in wall_rows} == {"wall", "efficiency", "prefetch", "cut", "scale"}
    wall = [r for r in wall_rows if r["part"] == "wall"]
    assert {r["policy"] for r in wall} >= {"tiered", "lru-whole", "global-bias"}
    assert all(r["frames_over_budget"] == 0 for r in wall)
    assert {r["source"] for r in streaming if r["part"] == "latency"} == {"file", "ram cache"}
    startup = data["suites"]["startup"]["rows"]
    assert startup[0]["first_frame_speedup"] > 0
    assert {r["part"] for r in data["suites"]["peers"]["rows"]} >= {"vram@40dB", "loader",
                                                                   "ceiling"}
    scaling = data["suites"]["scaling"]["rows"]
    assert [r["textures"] for r in scaling] == [50, 500]
