"""The snapshot of who holds what: its document sums to the ledger, and its one HTML page
loads in a real headless browser (Chromium) with no console error and shows the ledger's
totals. The browser tests skip without a chromium binary."""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import engine
from engine.app.loop import FrameContext
from engine.hosts.run import run_scene
from engine.demos import DEMOS
from engine.diagnostics.snapshot import SLOT_LEGEND, render_html
from engine.gl.device import Device
from engine.streaming.settings import StreamerSettings

OPTIONS = {"count": 6, "texture_size": 256, "format": "bc1", "frames": 60}
AT_FRAME = 40
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)


@pytest.fixture(scope="module")
def taken(tmp_path_factory) -> dict[str, Any]:
    """A snapshot taken in frame AT_FRAME of the pressure demo with its 256 px textures
    streamed virtually (so there is a page cache), on a device that records creation sites."""
    out = tmp_path_factory.mktemp("snap") / "snap.json"
    seen: dict[str, Any] = {}

    def hook(ctx: FrameContext) -> None:
        if ctx.frame == AT_FRAME:
            seen["doc"] = engine.snapshot(ctx.device, out, provider=ctx.provider,
                                          governor=ctx.governor, frames=[ctx.record])
            seen["ledger"] = ctx.device.ledger.by_category()

    demo = DEMOS["pressure"]
    device = Device.headless(capture_stacks=True)
    try:
        run_scene(demo.factory, device=device, frames=OPTIONS["frames"], size=(96, 64),
                  provider="streaming", options=OPTIONS, on_frame=[*demo.hooks(OPTIONS), hook],
                  streamer=StreamerSettings(virtual_min_size=256))
    finally:
        device.shutdown()
    return {**seen, "json": out, "html": out.with_suffix(".html")}


def test_snapshot_sums_to_the_ledger(taken):
    doc, ledger = taken["doc"], taken["ledger"]
    assert json.loads(taken["json"].read_text()) == doc
    assert {c: t["bytes"] for c, t in doc["totals"].items()} == ledger == doc["ledger"]
    assert doc["total_bytes"] == sum(ledger.values())
    assert sum(t["count"] for t in doc["totals"].values()) == len(doc["objects"])
    assert sum(b["count"] for b in doc["sizes"]) == len(doc["objects"])
    assert sum(b["bytes"] for b in doc["sizes"]) == doc["total_bytes"]
    assert doc["stacks"] and all(o["age_s"] >= 0 for o in doc["objects"])
    # the creation site names the caller, not the device's own bookkeeping
    sites = {o["site"] for o in doc["objects"]}
    assert None not in sites and not any(s.startswith(("allocator.py", "device.py"))
                                         for s in sites)


@pytest.mark.needs("ARB_buffer_storage")
@pytest.mark.needs("BC1_RGB sampling")
def test_snapshot_has_the_page_cache_staging_and_free_pieces(taken):
    doc = taken["doc"]
    cache = doc["page_cache"]
    assert cache is not None and len(cache["slot_map"]) == cache["slots"] > 0
    assert set(cache["slot_map"]) <= set(SLOT_LEGEND)
    assert sum(cache["counts"].values()) == cache["slots"]
    assert sum(cache["free_runs"]) == cache["counts"]["."]
    pools = {p["name"]: p for p in doc["pools"]}
    assert {"budget", "streaming pool", "page cache"} <= set(pools)
    for p in pools.values():
        assert p["free_bytes"] == sum(int(s) * n for s, n in p["piece_sizes"].items())
        assert p["largest_free"] <= p["free_bytes"]
    assert pools["page cache"]["free_bytes"] == cache["counts"]["."] * cache["slot_bytes"]
    # the staging ring exists only while whole levels upload (every texture here is virtual)
    assert all(s["size_bytes"] > 0 for r in doc["staging"] for s in r["segments"])
    assert doc["timeline"] and doc["timeline"][-1]["frame"] == AT_FRAME - 1


def test_the_page_is_self_contained(taken):
    page = taken["html"].read_text()
    assert "/*SNAPSHOT_DATA*/" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing fetched
    assert "<script src" not in page and "<link" not in page


def _load(page: Path, tmp_path: Path) -> tuple[str, str]:
    """The page's DOM after its scripts ran, and the browser's log (console messages)."""
    run = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
         "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout, run.stderr


def _console_errors(log: str) -> list[str]:
    return [ln for ln in log.splitlines() if "CONSOLE" in ln and
            ("Uncaught" in ln or "Error" in ln or ":ERROR:" in ln)]


def _text(dom: str, element_id: str) -> str:
    m = re.search(rf'id="{element_id}"[^>]*>(.*?)</', dom, re.S)
    assert m, element_id
    return html.unescape(m.group(1)).strip()


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_the_page_loads_in_chromium_and_shows_the_ledger(taken, tmp_path):
    dom, log = _load(taken["html"], tmp_path)
    assert _console_errors(log) == [], log[-2000:]
    assert 'data-ready="1"' in dom
    assert _text(dom, "errors") == ""
    ledger = taken["ledger"]
    assert int(_text(dom, "total-bytes")) == sum(ledger.values())
    assert int(_text(dom, "ledger-bytes")) == sum(ledger.values())
    for cat, nbytes in ledger.items():
        row = re.search(rf'<tr data-category="{re.escape(cat)}">(.*?)</tr>', dom, re.S)
        assert row, cat
        assert re.search(rf'class="n bytes">{nbytes}<', row.group(1)), (cat, row.group(1))
    assert dom.count('style="left:') > len(ledger) - 1  # the treemap drew its rectangles
    assert "<path" in dom  # the timeline drew its areas


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_a_broken_page_is_caught(taken, tmp_path):
    """The browser check sees a script error (the test above would not pass a broken page)."""
    doc = json.loads(taken["json"].read_text())
    broken = tmp_path / "broken.html"
    broken.write_text(render_html(doc).replace("render();\n</script>",
                                               "render(); missingFunction();\n</script>"))
    dom, log = _load(broken, tmp_path)
    assert _console_errors(log) or "missingFunction" in _text(dom, "errors")


def test_the_window_p_key_writes_a_snapshot(tmp_path, monkeypatch):
    """The window's key handler asks its loop for a snapshot, numbered per press (driven
    without a window: the handler only needs the loop)."""
    glfw = pytest.importorskip("glfw")
    from engine.hosts.window import WindowHost

    class Loop:
        governor = None
        scene = None  # no scene controls: the window's own keys
        asked: list[Path] = []

        def snapshot(self, path: Path) -> Path:
            self.asked.append(path)
            return path

    monkeypatch.chdir(tmp_path)
    host = WindowHost.__new__(WindowHost)
    host.loop, host.snapshots = Loop(), 0
    for _ in range(2):
        host._on_key(None, glfw.KEY_P, 0, glfw.PRESS, 0)
    assert [p.name for p in Loop.asked] == [f"engine-snapshot-{os.getpid()}-{n}.json"
                                            for n in (1, 2)]
