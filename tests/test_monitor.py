"""The live monitor: engine processes publish their state, `monitor` shows every one of them,
and a process that is gone (ended, or killed with SIGKILL) disappears with its file."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.diagnostics import live
from engine.diagnostics.monitor import text_lines
from engine.streaming.contract import ProviderStats
from process_helpers import ROOT, headless_env

DEMO = ["-m", "engine", "demo", "pressure", "--headless", "--size", "64x48", "--count", "4",
        "--texture-size", "128"]


def _record(frame: int, **kw: Any) -> dict[str, Any]:
    return {"frame": frame, "ms": 5.0, "cpu_ms": 4.0, "gpu_ms": 3.0, "budget_bytes": 1000,
            "render_scale": 1.0, "by_category": {"target": 10}, **kw}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_publisher_writes_at_most_every_interval_and_removes_its_file(tmp_path):
    clock = Clock()
    pub = live.LivePublisher(tmp_path, program="test", clock=clock)
    frames = [_record(0)]
    stats = ProviderStats(resident_bytes=5, wanted_bytes=7, bytes_read=0,
                          resident_by_tier={"visible": 5})
    pub.frame(frames, stats, lambda: {"target": 10, "buffer": 4})
    clock.now += live.PUBLISH_EVERY_S / 2
    frames.append(_record(1))
    pub.frame(frames, ProviderStats(bytes_read=2_000_000), lambda: {"target": 11})
    assert pub.writes == 1  # the second frame came too soon
    clock.now += live.PUBLISH_EVERY_S
    frames.append(_record(2, effective_budget_bytes=900, scale_reason="fit", gpu_ms=None))
    pub.frame(frames, ProviderStats(bytes_read=3_000_000, bytes_uploaded=750_000),
              lambda: {"target": 12})
    assert pub.writes == 2
    [state] = live.read_all(tmp_path)
    assert state["pid"] == os.getpid() and state["program"] == "test"
    assert state["frame"] == 2 and state["by_category"] == {"target": 12}
    assert state["budget_bytes"] == 1000 and state["effective_budget_bytes"] == 900
    dt = 1.5 * live.PUBLISH_EVERY_S
    assert state["read_mb_s"] == pytest.approx(3.0 / dt)
    assert state["upload_mb_s"] == pytest.approx(0.75 / dt)
    assert state["times"]["frames"] == 3 and state["times"]["cpu_ms_p50"] == 4.0
    assert state["times"]["gpu_ms_p50"] == 3.0  # the frame without a GPU time left out
    assert "frame 2" in "\n".join(text_lines([state]))
    pub.close()
    assert live.read_all(tmp_path) == [] and not list(tmp_path.iterdir())


def test_recent_times_cover_the_newest_seconds():
    frames = [_record(i, ms=100.0 if i < 50 else 10.0, cpu_ms=float(i)) for i in range(600)]
    times = live.recent_times(frames, seconds=5.0)
    assert times["frames"] == 500  # 500 frames of 10 ms are the newest 5 s
    assert times["ms_p50"] == times["ms_p99"] == 10.0
    assert times["cpu_ms_p50"] == pytest.approx(np.percentile(np.arange(100, 600), 50))
    assert times["cpu_ms_p99"] == pytest.approx(np.percentile(np.arange(100, 600), 99))
    assert live.recent_times([])["ms_p50"] is None


def test_a_dead_process_file_is_removed(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    live.StateFile(tmp_path / f"{gone.pid}.1.json").write(json.dumps(
        {"pid": gone.pid, "start": None, "name": f"{gone.pid}.1"}).encode())
    (tmp_path / f"{gone.pid}.1.snapshot-request").write_text("x")
    # a pid that is alive but started at another time is a reused pid: its file is stale too
    live.StateFile(tmp_path / f"{os.getpid()}.9.json").write(json.dumps(
        {"pid": os.getpid(), "start": -5, "name": f"{os.getpid()}.9"}).encode())
    # a file without the engine's magic is no state file: it stays whatever its name says
    # (the monitor deletes only its own files); one of a live pid whose loop has not written
    # yet stays as well
    (tmp_path / f"{gone.pid}.2.json").write_text("garbage")
    (tmp_path / f".{gone.pid}.3.json.tmp").write_text("")  # killed while making its file
    live.StateFile(tmp_path / f"{os.getpid()}.10.json")
    assert live.read_all(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{os.getpid()}.10.json", f"{gone.pid}.2.json"])


def test_a_reader_never_sees_half_a_write(tmp_path):
    """A writer thread rewrites the file as fast as it can while the reader reads it."""
    import threading

    path = tmp_path / "1.1.json"
    state = live.StateFile(path)
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            state.write(json.dumps({"n": n, "pad": "x" * (n % 3000)}).encode())

    writer = threading.Thread(target=write)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # the threads take turns often: more interleavings, no waits
    writer.start()
    try:
        seen = [live.StateFile.read(path) for _ in range(300)]
    finally:
        stop.set()
        writer.join()
        sys.setswitchinterval(interval)
    docs = [d for d in seen if d is not None]
    assert len(docs) > 250 and all(len(d["pad"]) == d["n"] % 3000 for d in docs)
    state.close()
    assert not path.exists()


def test_runtime_dir_is_private(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    path = live.runtime_dir()
    assert path == tmp_path / "engine-monitor" and (path.stat().st_mode & 0o777) == 0o700
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing"))
    assert live.runtime_dir(create=False).name == f"engine-monitor-{os.getuid()}"


def _monitor(env: dict[str, str], *extra: str) -> list[dict[str, Any]]:
    out = subprocess.run([sys.executable, "-m", "engine", "monitor", "--once", "--json", *extra],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def _wait_for(folder: Path, pid: int, proc: subprocess.Popen, min_frame: int = 1,
              timeout: float = 90.0) -> dict[str, Any]:
    """The process's state once it has rendered `min_frame` frames (read in this process,
    through the reader the monitor uses: no interpreter start per poll)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "exited"
        if folder.is_dir():
            for s in live.read_all(folder, clean=False):
                if s["pid"] == pid and s["frame"] >= min_frame:
                    return s
        time.sleep(0.1)
    raise AssertionError(f"process {pid} never showed in the monitor")


@pytest.mark.slow
def test_monitor_shows_running_demos_and_forgets_them(tmp_path):
    """Two demos at once: one runs to its end and writes its report, the other is killed
    with SIGKILL. Both show in `monitor --once --json` with their own ledger's figures; both
    are gone afterwards, the killed one's file removed by the monitor."""
    env = headless_env(tmp_path)
    env["XDG_RUNTIME_DIR"] = str(tmp_path)
    folder = tmp_path / "engine-monitor"
    report = tmp_path / "run.json"
    endless = subprocess.Popen([sys.executable, *DEMO, "--frames", "1000000"], env=env, cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finite = None
    try:
        _wait_for(folder, endless.pid, endless)
        # started once the other one draws, so its frames need only outlast one monitor
        # command (about 1 s): 800 frames take 1.6 s alone where objects are drawn one at a
        # time (a GL 4.1 driver), 4 s with the batched frame
        finite = subprocess.Popen([sys.executable, *DEMO, "--frames", "800", "--report",
                                   str(report)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        _wait_for(folder, finite.pid, finite)
        both = {s["pid"]: s for s in _monitor(env)}  # the command itself sees both
        assert {finite.pid, endless.pid} <= set(both)
        sample, other = both[finite.pid], both[endless.pid]
        assert other["program"].startswith("engine demo pressure")
        # the snapshot request travels through the same folder
        snap = tmp_path / "snap.json"
        out = subprocess.run([sys.executable, "-m", "engine", "monitor", "--snapshot",
                              str(endless.pid), "--out", str(snap)], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=90)
        assert out.returncode == 0, out.stderr
        doc = json.loads(snap.read_text())
        assert doc["pid"] == endless.pid and snap.with_suffix(".html").exists()
        assert {c: t["bytes"] for c, t in doc["totals"].items()} == doc["ledger"]
        endless.send_signal(signal.SIGKILL)
        endless.wait(timeout=30)
        assert finite.wait(timeout=180) == 0, finite.stderr.read()
    finally:
        for proc in (finite, endless):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [s for s in _monitor(env) if s["pid"] in (finite.pid, endless.pid)] == []
    assert list(folder.glob("*")) == []  # the killed process's file went too
    frames = json.loads(report.read_text())["frames"]
    record = frames[sample["frame"]]
    assert record["frame"] == sample["frame"]
    assert sample["budget_bytes"] == record["budget_bytes"]
    assert sample["effective_budget_bytes"] == record["effective_budget_bytes"]
    assert sample["by_category"] == record["by_category"]
    assert sample["total_bytes"] == record["total_bytes"]
    assert sample["render_scale"] == record["render_scale"]
    assert sample["resident_by_tier"] == record["resident_by_tier"]


def _published(tmp_path: Path) -> tuple[live.LivePublisher, dict[str, Any]]:
    pub = live.LivePublisher(tmp_path, program="engine demo x")
    pub.frame([_record(3, scale_reason="fit")], ProviderStats(
        resident_bytes=5, wanted_bytes=9, resident_by_tier={"visible": 3, "recent": 2},
        cache_slots=16, cache_slots_used=9), lambda: {"target": 10, "texture.streamed": 5})
    [state] = live.read_all(tmp_path)
    return pub, state


def test_the_table_shows_every_figure(tmp_path):
    pytest.importorskip("rich")
    import io

    from rich.console import Console

    from engine.diagnostics.monitor import rich_table

    pub, state = _published(tmp_path)
    pub.close()
    console = Console(width=220, record=True, file=io.StringIO())
    console.print(rich_table([state]))
    text = console.export_text()
    for needle in (str(os.getpid()), "engine demo x", "9/16", "vis 3 B", "fit"):
        assert needle in text, needle


def test_snapshot_of_a_process_that_is_not_there_is_a_usage_error(tmp_path):
    from engine.diagnostics.monitor import request_snapshot
    from engine.errors import UsageError

    with pytest.raises(UsageError, match="no engine process"):
        request_snapshot(999_999_999, tmp_path / "s.json", folder=tmp_path)


def test_a_snapshot_request_reaches_the_loop(tmp_path):
    """monitor --snapshot drops a request; the publisher's next write hands it to the loop."""
    from engine.diagnostics.monitor import request_snapshot

    asked: list[Path] = []
    clock = Clock()
    pub = live.LivePublisher(tmp_path, program="x", clock=clock,
                             on_snapshot=lambda p: (asked.append(p), p.write_text("{}")))
    pub.frame([_record(0)], ProviderStats(), lambda: {})

    def tick(_: float) -> None:  # the monitor's wait: the loop keeps rendering meanwhile
        clock.now += live.PUBLISH_EVERY_S
        pub.frame([_record(1)], ProviderStats(), lambda: {})

    [path] = request_snapshot(os.getpid(), tmp_path / "s.json", folder=tmp_path, sleep=tick)
    assert asked == [path] and path == (tmp_path / "s.json").resolve()
    pub.close()


def test_nvml_view_is_added_by_the_monitor():
    """Each process gets NVML's view of its GPU, or the reason there is none (llvmpipe: the
    GL renderer is no NVIDIA GPU, or the driver library is absent)."""
    from engine.diagnostics.monitor import _nvml_line, with_nvml

    [state] = with_nvml([{"pid": os.getpid(), "renderer": "llvmpipe (LLVM 15.0.6, 256 bits)"}])
    nv = state["nvml"]
    assert nv["source"] == "NVML"
    assert nv.get("total_bytes") or nv["reason"].startswith("NVML")
    assert _nvml_line(state)
