"""Prefetch in the streamer (policy tiers wired into LevelStreamer): panning along a row of
wall images at full size, images ahead are streamed before they enter the view; without
prefetch each arrives coarse and sharpens on screen. Deterministic (frame clock, inline
reads), no renderer: the streamer is driven with FrameViews."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from pyglm import glm

from demos.wall import FOVY_DEG, IMAGE, full_size_distance
from demos.wall_assets import wall_textures
from engine.gl.device import Device
from engine.render.camera import mat_to_numpy
from engine.streaming.contract import TEXTURE_SLOTS, FrameView
from engine.streaming.inline_io import InlineLevelIO
from engine.streaming.levels.metrics import measure_view
from engine.streaming.levels.state import PolicyConfig
from engine.streaming.levels.streamer import LevelStreamer
from engine.streaming.settings import StreamerSettings

COUNT, SIZE, VIEWPORT = 24, 256, (192, 108)


@pytest.fixture(scope="module")
def row_paths(user_cache: Path) -> list[Path]:
    return wall_textures(COUNT, SIZE, cache_dir=user_cache / "wall").paths


def row_view(frame: int, x: float) -> FrameView:
    """The camera at full size over x, looking at a row of images at x = 0, 1, 2, ..."""
    d = full_size_distance(SIZE, VIEWPORT[1])
    eye = glm.vec3(x, 0.0, d)
    view = glm.lookAt(eye, glm.vec3(x, 0.0, 0.0), glm.vec3(0, 1, 0))
    fovy = math.radians(FOVY_DEG)
    proj = glm.perspective(fovy, VIEWPORT[0] / VIEWPORT[1], 0.01, 100.0)
    ids = np.full((COUNT, len(TEXTURE_SLOTS)), -1, np.int32)
    ids[:, 0] = np.arange(COUNT)
    centers = np.stack([np.arange(COUNT, dtype=np.float32), np.zeros(COUNT, np.float32),
                        np.zeros(COUNT, np.float32)], 1)
    return FrameView(frame=frame, time=frame / 60.0, camera_pos=np.array(eye, np.float32),
                     view=mat_to_numpy(view), proj=mat_to_numpy(proj), fovy=fovy,
                     viewport=VIEWPORT, render_scale=1.0, centers=centers,
                     radii=np.full(COUNT, IMAGE / math.sqrt(2), np.float32),
                     uv_density=np.full(COUNT, 1 / IMAGE, np.float32), texture_ids=ids)


def pan(device: Device, paths: list[Path], prefetch: bool) -> tuple[float, int]:
    """Pan from image 2 to image 20 in 180 frames; returns the mean fraction of the screen
    whose wanted level is not resident (after the start-up frames), and how many textures
    reached level 0."""
    now = [0.0]
    settings = StreamerSettings(policy=PolicyConfig(prefetch=prefetch), io_workers=0)
    streamer = LevelStreamer(device, settings, clock=lambda: now[0], io=InlineLevelIO)
    streamer.grant(1 << 30)
    try:
        for i, p in enumerate(paths):
            streamer.register(f"row{i}", p)
        missing = []
        for frame in range(200):
            now[0] = frame / 60.0
            x = 2.0 + 18.0 * min(1.0, frame / 180.0)
            view = row_view(frame, x)
            streamer.begin_frame(view)
            streamer.end_frame()
            cov, _ = measure_view(view, streamer, COUNT, resident=streamer.resident_levels())
            if frame >= 10:  # the first frames load what is on screen at the start: both alike
                missing.append(1.0 - cov.at_wanted)
        reached = int((streamer.resident_levels() == 0).sum())
    finally:
        streamer.release()
    return float(np.mean(missing)), reached


@pytest.mark.slow
def test_prefetch_streams_the_images_ahead_of_a_pan(device: Device,
                                                    row_paths: list[Path]) -> None:
    with_pf, reached_pf = pan(device, row_paths, prefetch=True)
    without, reached = pan(device, row_paths, prefetch=False)
    assert without > 0.005  # without prefetch, every image enters the view coarse
    assert with_pf <= 0.5 * without, (with_pf, without)  # the goal: at least halved
    assert reached_pf >= reached  # and it did not cost the images on screen their detail
