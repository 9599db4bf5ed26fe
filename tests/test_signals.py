"""Ctrl-C and SIGTERM: the command stops within a second, leaves no worker process and no
half-written output, and exits 130 / 143 with one line (engine/cli.py, "signals").

Each case runs the CLI in a subprocess and sends it the signal; child processes are found
through /proc (psutil is not a dependency)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from process_helpers import headless_env

from engine.cli_process import child_pids

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def _stop(proc: subprocess.Popen, sig: int) -> tuple[float, str]:
    sent = time.monotonic()
    proc.send_signal(sig)
    proc.wait(timeout=20)
    took = time.monotonic() - sent
    return took, proc.stderr.read().decode()


def _said(err: str) -> list[str]:
    """stderr without the progress log (engine.progress: its stage lines, including the one
    saying where a stage stopped, are not about the interruption's handling)."""
    return [ln for ln in err.strip().splitlines()
            if ln.strip() and "engine.progress:" not in ln]


def _images(folder: Path, count: int, edge: int) -> list[Path]:
    from PIL import Image

    folder.mkdir()
    rng = np.random.default_rng(5)
    paths = []
    for i in range(count):
        p = folder / f"img{i}.png"
        Image.fromarray(rng.integers(0, 256, (edge, edge, 3), dtype=np.uint8)).save(p)
        paths.append(p)
    return paths


def _stopped_cleanly(proc: subprocess.Popen, status: int, err: str, took: float,
                     said: str) -> None:
    """The signal's exit status, one line that says `said`, no traceback, within a second."""
    assert proc.returncode == status, err
    lines = _said(err)
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in err, err
    print(f"stopped {took:.3f} s after the signal")
    assert took < 1.0, f"took {took:.2f} s to stop"


@pytest.fixture(scope="module")
def bake_inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The bakes' input images, made once: a bake only reads them."""
    return _images(tmp_path_factory.mktemp("signals") / "in", 6, 1024)


@pytest.mark.parametrize("sig,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_stops_a_bake_and_its_workers(tmp_path, bake_inputs, sig, status):
    images = bake_inputs
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "engine", "bake", *map(str, images), "-o",
                             str(out), "--jobs", "2", "--no-progress"], cwd=ROOT,
                            env=headless_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        workers = _wait_for(lambda: [p for p in child_pids(proc.pid) if _alive(p)], 60,
                            "the bake's worker processes")
        time.sleep(0.5)  # the workers are encoding now
        took, err = _stop(proc, sig)
    finally:
        if proc.poll() is None:
            proc.kill()
    _stopped_cleanly(proc, status, err, took, signal.Signals(sig).name)
    # Every worker is gone (an orphan would be reparented and keep running).
    _wait_for(lambda: not any(_alive(p) for p in workers), 2.0, "the workers to end")
    # No half-written texture: only whole outputs, no temporaries.
    leftovers = [p.name for p in out.iterdir() if not p.name.endswith(".ktx2")] \
        if out.exists() else []
    assert leftovers == []
    from engine.textures import inspect

    for done in out.glob("*.ktx2") if out.exists() else []:
        assert inspect(done)["levels"]  # a complete file parses


@pytest.mark.parametrize("sig,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_a_demo_run_without_partial_outputs(tmp_path, sig, status):
    report, shot = tmp_path / "o" / "r.json", tmp_path / "o" / "s.png"
    proc = subprocess.Popen([sys.executable, "-m", "engine", "demo", "gallery", "--frames",
                             "100000", "--count", "2", "--texture-size", "32", "--size",
                             "64x48", "--report", str(report), "--screenshot", str(shot)],
                            cwd=ROOT, env=headless_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        line = _wait_for(lambda: proc.stderr.readline(), 60, "the first progress line")
        while b"rendering" not in line:
            line = proc.stderr.readline()
            assert line, "the run ended before rendering"
        time.sleep(0.3)
        took, err = _stop(proc, sig)
    finally:
        if proc.poll() is None:
            proc.kill()
    _stopped_cleanly(proc, status, err, took, "interrupted")
    assert not report.exists() and not shot.exists()
    assert not (tmp_path / "o").exists() or list((tmp_path / "o").iterdir()) == []
