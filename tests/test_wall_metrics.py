"""The streaming quality metrics (engine/streaming/levels/metrics.py): pure, no GL."""
from __future__ import annotations

import numpy as np
import pytest
from pyglm import glm

from engine.streaming.levels.estimator import CameraInput, InstanceArrays
from engine.streaming.levels.metrics import (
    CutTracker,
    coverage,
    efficiency,
    instance_screen_pixels,
    level_deficit,
    texture_weights,
)


def camera(x: float = 0.0, dist: float = 2.0, h: int = 400, aspect: float = 1.0) -> CameraInput:
    view = glm.lookAt(glm.vec3(x, 0, dist), glm.vec3(x, 0, 0), glm.vec3(0, 1, 0))
    proj = glm.perspective(glm.radians(60.0), aspect, 0.01, 100.0)
    return CameraInput(position=np.array([x, 0, dist]), view_proj=np.asarray(proj * view),
                       fovy=np.radians(60.0), viewport_height=h)


def test_screen_pixels_follow_size_and_clip_to_the_viewport() -> None:
    inst = InstanceArrays(np.array([[0.0, 0, 0], [0, 0, -2.0], [50.0, 0, 0], [0, 0, 5.0]]),
                          np.full(4, 0.1), np.ones(4), np.arange(4))
    px = instance_screen_pixels(inst, camera(), (400, 400))
    # Four times farther from the camera (2 vs 4 units): a quarter of the side, 1/16 the area.
    assert px[0] == pytest.approx(4 * px[1], rel=0.02)
    assert px[2] == 0.0  # off screen
    assert px[3] == 0.0  # behind the camera
    # Centred on the right edge: exactly half of it is on screen.
    edge = 2.0 * np.tan(np.radians(30.0))  # half-width of the view at distance 2
    half = InstanceArrays(np.array([[edge, 0, 0]]), np.array([0.1]), np.ones(1), np.zeros(1, int))
    assert instance_screen_pixels(half, camera(), (400, 400))[0] == pytest.approx(px[0] / 2,
                                                                                   rel=0.02)
    assert texture_weights(InstanceArrays(inst.centers, inst.radii, inst.uv_density,
                                          np.array([0, 0, 1, 1])), px, 3).tolist() == \
        [px[0] + px[1], 0.0, 0.0]


def test_deficit_counts_whole_levels_beyond_the_hysteresis() -> None:
    levels = np.array([10, 10, 10, 10, 10, 10, 3])
    wanted = np.array([0.0, 0.9, 2.0, np.inf, 3.5, 0.5, 5.0])
    sampled = np.array([1.0, 1.0, 4.0, 9.0, 4.6, 0.7, 2.0])
    # 1 level short; within the band (0.1); 2 short; invisible wants its top level; 1.1
    # short counts one; within the band (0.2); mip beyond the chain is clamped to its top.
    assert level_deficit(wanted, sampled, levels).tolist() == [1, 0, 2, 0, 1, 0, 0]


def test_coverage_is_weighted_by_screen_pixels() -> None:
    c = coverage(np.array([900.0, 50.0, 50.0, 0.0]), np.array([0, 1, 3, 5]))
    assert (c.at_wanted, c.coarser_1, c.coarser_2plus) == (0.9, 0.05, 0.05)
    assert coverage(np.zeros(3), np.array([1, 2, 3])).at_wanted == 1.0  # nothing visible


def test_cut_tracker_times_each_cut_to_the_goal() -> None:
    tracker = CutTracker(goal=0.95)
    frames = [(0.0, 1.0, False), (1.0, 0.2, True), (1.1, 0.6, False), (1.25, 0.96, False),
              (2.0, 0.1, True), (2.1, 0.3, True), (2.6, 0.99, False), (3.0, 0.1, True)]
    for now, at, cut in frames:
        tracker.update(now, at, cut)
    tracker.close()
    assert tracker.times == [pytest.approx(0.25), None, pytest.approx(0.5), None]
    assert tracker.finished() == [pytest.approx(0.25), pytest.approx(0.5)]


def test_efficiency_is_bytes_over_the_screen_need() -> None:
    assert efficiency(2 * 1280 * 720, 1280 * 720, 1.0) == 2.0
    assert efficiency(1280 * 720, 1280 * 720, 0.5) == 2.0
