"""Shared budgets with GL on llvmpipe: two views of one process, and a group of headless
processes (lab.share's scenario: three members of weight 1, a fourth of weight 2
joins and leaves, one is killed with SIGKILL, a member that wants less than its share joins),
asserted from the members' own per-frame ledger reports."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from engine.app.loop import FrameLoop
from lab import share
from engine.demos.gallery import build
from engine.gl.hosts import headless_device, made_current
from engine.memory.shares import ShareSettings, ViewShares
from engine.streaming.settings import StreamerSettings

from process_helpers import headless_env

MIB = 1 << 20
# The gallery sets are read from the user's cache (user_cache / "gallery"): where
# ENGINE_CACHE=user_cache puts them for the Qt example, and where the other modules and the
# demos read the same 512^2 set.


@pytest.mark.slow
def test_two_views_share_one_budget_and_hiding_one_frees_it(user_cache):
    """Two loops on two contexts of this process, weights 1 and 2, one budget: their summed
    ledger peaks never exceed it; hiding the second gives its memory to the first within a
    few frames; showing it again takes it back."""
    views = ViewShares(4 * MIB)
    streamer = StreamerSettings(staging_bytes=256 << 10, virtual="off", mip_bias=-6)
    devices = [headless_device(), headless_device()]
    loops = []
    try:
        for device, weight in zip(devices, (1, 2)):
            with made_current(device):
                loops.append(FrameLoop.embedded(
                    device, build, size=share.SIZE, provider="streaming", streamer=streamer,
                    share=ShareSettings(views, weight=weight),
                    options=dict(share.SCENE, cache_dir=user_cache / "gallery")))
        records = []
        for frame in range(36):
            loops[1].governor.share.visible = not 12 <= frame < 24
            row = []
            for device, loop in zip(devices, loops):
                with made_current(device):
                    row.append(loop.step(frame))
            records.append(row)
        assert all(a["peak_bytes"] + b["peak_bytes"] <= views.budget for a, b in records)
        shown, hidden, back = records[11], records[23], records[35]
        assert shown[1]["grant_bytes"] > shown[0]["grant_bytes"]  # weight 2 gets more
        floor = loops[1].governor.share.claim.floor
        # hidden: down to its floor within 3 frames, and the other view's grant took it
        assert all(r[1]["total_bytes"] <= max(floor, r[1]["grant_bytes"])
                   for r in records[14:24])
        assert hidden[1]["grant_bytes"] == floor
        # the visible view's grant took it by the third frame after the hide
        assert records[14][0]["grant_bytes"] == hidden[0]["grant_bytes"] \
            == views.budget - floor
        assert hidden[0]["total_bytes"] > shown[0]["total_bytes"]
        assert back[1]["grant_bytes"] == shown[1]["grant_bytes"]
    finally:
        for device, loop in zip(devices, loops):
            with made_current(device):
                loop.release()
        for device in devices:
            with made_current(device):
                assert device.shutdown() == []
    assert views.seats() == []


@pytest.mark.slow
def test_group_of_processes_reaches_weighted_shares_and_never_goes_over(
        tmp_path, monkeypatch, user_cache):
    for key, value in headless_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    budget = 8 * MIB
    # The floor covers what a member allocates before its first frame (about 1 MiB here) and
    # in it (the renderer's geometry arena is made by the first draw). The outsider is the
    # device script's slot for the PyTorch process; here it only exercises the NVML sampler.
    result = share.scenario(tmp_path / "out", budget=budget, floor=MIB + MIB // 4, hold=1.2,
                            fps=30,  # paced: the other tests keep the cores
                            cache=user_cache / "gallery",
                            outsider=[sys.executable, "-c", "import time; time.sleep(1)"])
    phases = {p["phase"]: p for p in result["phases"]}
    assert list(phases) == ["three", "d joined", "d left", "c killed", "modest e joined"]
    for p in result["phases"]:
        # every member's grant settles within 10% of the arbitration's share, within 1 s
        assert p["grant_settle_s"] is not None and p["grant_settle_s"] < 1.0, p
    for name in ("three", "d joined", "d left", "c killed"):
        p = phases[name]  # greedy members: their shares are the budget by weight
        for m, grant in p["grant_bytes"].items():
            assert abs(grant - p["weighted_share_bytes"][m]) <= 0.1 * grant, (name, p)
    modest = phases["modest e joined"]
    assert modest["grant_bytes"]["e"] < budget / 3  # wants less than its share...
    assert min(modest["grant_bytes"]["a"], modest["grant_bytes"]["b"]) > budget / 3  # ...gives
    sums = result["sums"]
    assert sums["group_over_instants"] == 0 and sums["max_sum_bytes"] <= budget, json.dumps(sums)
    assert sums["member_frames_over_effective"] == 0
    assert min(sums["frames"].values()) >= share.WARM_FRAMES
    nvml = result["nvml"]  # on llvmpipe NVML names no GPU here, and says why
    assert nvml["available"] is False and nvml["reason"].startswith("NVML") \
        or nvml["samples"] > 0


def test_scenario_refuses_a_bad_frame_rate_before_starting_anything(tmp_path):
    from engine.errors import UsageError

    for fps in (0, -5, 2.5, "fast"):
        with pytest.raises(UsageError, match="fps"):
            share.scenario(tmp_path / "out", budget=8 * MIB, floor=MIB, fps=fps)
    assert not (tmp_path / "out").exists()


def test_exchange_cost_is_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    cost = share.exchange_cost(members=3, repeats=20)
    assert cost["view_exchange_us"] > 0 and cost["group_exchange_us"] > 0
    assert list(tmp_path.joinpath("engine-share").iterdir()) == []  # the last one out removed it


@pytest.mark.slow
@pytest.mark.window
def test_qt_example_two_views_one_budget(xvfb_display, user_cache):
    """examples/embed_qt_views.py: two widgets (two contexts) on one ViewShares; hiding the
    right one gives its memory to the left one; nothing leaks. Skips without Xvfb/PySide6."""
    import importlib.util
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    if importlib.util.find_spec("PySide6") is None:
        pytest.skip("PySide6 not installed (pip install -e '.[qt]')")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "DISPLAY": xvfb_display, "ENGINE_CACHE": str(user_cache),
           "QT_QPA_PLATFORM": "xcb", "PYTHONPATH": str(root)}
    # a budget that binds: with elastic staging neither view is held back at 32 MiB, and a
    # hide then has nothing to give the other view
    proc = subprocess.run([sys.executable, "examples/embed_qt_views.py", "--frames", "6",
                           "--size", "160", "120", "--budget", "6MiB"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=240)
    if "Could not load the Qt platform plugin" in proc.stderr:
        pytest.skip("Qt's xcb platform plugin cannot load here")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    result = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    assert result["left_objects"] == 0 and result["right_objects"] == 0
    assert result["sum_within_budget"]
    assert result["right_after_hide"]["total"] <= result["right_shown"]["total"]
    assert result["left_after_hide"]["grant"] > result["left_shown"]["grant"]


def _two_views_on_one_device(device, views, cache):
    """A gallery (weight 1) and the glTF box (weight 2) drawing with one device."""
    from engine.demos import gltf_demo

    streamer = StreamerSettings(staging_bytes=256 << 10, virtual="off", mip_bias=-6)
    loops = []
    with made_current(device):
        for build_scene, weight, options in (
                (build, 1, dict(share.SCENE, cache_dir=cache)), (gltf_demo.build, 2, {})):
            loops.append(FrameLoop.embedded(
                device, build_scene, size=share.SIZE, provider="streaming", streamer=streamer,
                share=ShareSettings(views, weight=weight), options=options))
    return loops


def test_two_views_on_one_device_share_one_budget(user_cache):
    """Two loops of different scenes on ONE device and one ViewShares: each plans with its
    own bytes (the ledger's owners), the device's peak in every frame (both steps) is within
    the budget, hiding the box gives its memory to the gallery within a few frames and
    showing it takes it back; released (second first), nothing is left."""
    views = ViewShares(4 * MIB)
    device = headless_device()
    loops = _two_views_on_one_device(device, views, user_cache / "gallery")
    records, device_peaks = [], []
    try:
        with made_current(device):
            device.ledger.reset_frame_peak()
            for frame in range(36):
                loops[1].governor.share.visible = not 12 <= frame < 24
                records.append([loop.step(frame) for loop in loops])
                device_peaks.append(device.ledger.end_frame(frame).peak_bytes)
                # the views' figures add up to the device's
                assert records[-1][0]["total_bytes"] + records[-1][1]["total_bytes"] \
                    == device.ledger.total
    finally:
        with made_current(device):
            for loop in reversed(loops):
                loop.release()
            assert device.ledger.total == 0
            assert device.shutdown() == []
    assert views.seats() == []
    assert max(device_peaks) <= views.budget
    assert all(a["peak_bytes"] + b["peak_bytes"] <= views.budget for a, b in records)
    assert not any("over_budget_reason" in r for row in records for r in row)
    shown, hidden, back = records[11], records[23], records[35]
    assert shown[0]["total_bytes"] > 0 and shown[1]["total_bytes"] > 0
    # the box wants less than its weighted share (two thirds): the gallery takes the rest
    assert shown[1]["grant_bytes"] < views.budget / 3 < views.budget / 2 < shown[0]["grant_bytes"]
    floor = loops[1].governor.share.claim.floor
    assert hidden[1]["grant_bytes"] == floor
    # hidden: down to its floor by the third frame, and the other's grant took the rest
    assert all(r[1]["total_bytes"] <= max(floor, r[1]["grant_bytes"]) for r in records[14:24])
    assert records[14][0]["grant_bytes"] == hidden[0]["grant_bytes"] == views.budget - floor
    assert hidden[0]["total_bytes"] > shown[0]["total_bytes"]
    # shown again: the box's grant is back (at least what it had), the gallery's went down
    assert back[1]["grant_bytes"] >= shown[1]["grant_bytes"]
    assert back[0]["grant_bytes"] < hidden[0]["grant_bytes"]
    assert back[0]["total_bytes"] + back[1]["total_bytes"] <= views.budget


def test_two_views_on_one_device_release_in_either_order(user_cache):
    """Released first-first or second-first after a frame each, nothing of either is left
    and the board is empty."""
    for order in ((0, 1), (1, 0)):
        views = ViewShares(8 * MIB)
        device = headless_device()
        loops = _two_views_on_one_device(device, views, user_cache / "gallery")
        with made_current(device):
            try:
                for loop in loops:
                    assert loop.step(0)["total_bytes"] > 0
            finally:
                for i in order:
                    loops[i].release()
            assert device.ledger.total == 0
            assert device.shutdown() == []
        assert views.seats() == []


@pytest.mark.slow
def test_canvas_hosts_share_and_a_hidden_one_gives_back(user_cache):
    """Two rendercanvas hosts (a device each) on one ViewShares: hiding one drops it to its
    floor at once (unseen frames), the other's grant grows at its next draw."""
    pytest.importorskip("rendercanvas")
    from rendercanvas.offscreen import RenderCanvas

    from engine.hosts.canvas import CanvasHost

    views = ViewShares(4 * MIB)
    streamer = StreamerSettings(staging_bytes=256 << 10, virtual="off", mip_bias=-6)
    hosts = [CanvasHost(RenderCanvas(size=share.SIZE), build, budget="64MiB", continuous=False,
                        provider="streaming", streamer=streamer,
                        share=ShareSettings(views, weight=w),
                        options=dict(share.SCENE, cache_dir=user_cache / "gallery"))
             for w in (1, 1)]
    try:
        for _ in range(8):
            for host in hosts:
                host.canvas.draw()
        before = [h.frames.loop.governor.share.grant for h in hosts]
        hosts[1].set_visible(False)
        seat = hosts[1].frames.loop.governor.share
        assert hosts[1].device.ledger.total <= seat.grant == seat.claim.floor
        hosts[0].canvas.draw()
        assert hosts[0].frames.loop.governor.share.grant == views.budget - seat.reserved
        assert hosts[0].frames.loop.governor.share.grant > before[0]
        hosts[1].set_visible(True)
        for _ in range(3):
            for host in hosts:
                host.canvas.draw()
        assert hosts[1].frames.loop.governor.share.grant == before[1]
    finally:
        assert [h.close() for h in hosts] == [0, 0]


@pytest.mark.slow
def test_canvas_hosts_on_one_device_share_it_and_close_in_either_order(user_cache):
    """Two canvases drawing with ONE device, the second given the first's
    (`device=first.device`, from `engine.hosts`), on one ViewShares: each view plans with
    its own bytes, a hidden one gives back, and the device the first host made is shut down
    by whichever host closes last."""
    pytest.importorskip("rendercanvas")
    from rendercanvas.offscreen import RenderCanvas

    from engine.demos import gltf_demo
    from engine.hosts import CanvasHost

    streamer = StreamerSettings(staging_bytes=256 << 10, virtual="off", mip_bias=-6)
    for closing in ((0, 1), (1, 0)):
        views = ViewShares(4 * MIB)
        first = CanvasHost(RenderCanvas(size=share.SIZE), build, continuous=False,
                           provider="streaming", streamer=streamer,
                           share=ShareSettings(views),
                           options=dict(share.SCENE, cache_dir=user_cache / "gallery"))
        second = CanvasHost(RenderCanvas(size=share.SIZE), gltf_demo.build, continuous=False,
                            device=first.device, provider="streaming", streamer=streamer,
                            share=ShareSettings(views))
        hosts = [first, second]
        try:
            for _ in range(4):
                for host in hosts:
                    image = host.canvas.draw()
                    assert host.last_record["total_bytes"] > 0
            assert np.asarray(image).shape == (share.SIZE[1], share.SIZE[0], 4)
            totals = [h.last_record["total_bytes"] for h in hosts]
            assert sum(totals) <= views.budget
            assert first.device.ledger.total == sum(totals)  # the views' bytes are the device's
            second.set_visible(False)
            seat = second.frames.loop.governor.share
            assert seat.grant == seat.claim.floor
            first.canvas.draw()
            assert first.frames.loop.governor.share.grant == views.budget - seat.reserved
        finally:
            left = [hosts[i].close() for i in closing]
        assert left == [None, 0]  # the last host out shut the device down, nothing left
        assert views.seats() == []


def test_outsider_script_parses_its_steps():
    """lab/share_outsider.py (the device script's PyTorch process): its sizes; the
    rest needs torch and a GPU."""
    from lab import share_outsider as module

    assert [module.parse(x) for x in "16GiB,512MiB,32MiB,4096".split(",")] == \
        [16 << 30, 512 << 20, 32 << 20, 4096]
