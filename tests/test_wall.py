"""The wall demo's pure parts: grid, scripted camera, mouse navigator, texture generation."""
from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from pyglm import glm

from demos.wall import (
    CELL,
    FOVY_DEG,
    IMAGE,
    Grid,
    WallNavigator,
    WallScript,
    full_size_distance,
)
from demos.wall_assets import WallLayout, assignment, wall_textures
from engine import textures
from engine.streaming.levels.estimator import (
    CameraInput,
    InstanceArrays,
    TextureArrays,
    estimate_mips,
)
from engine.textures.decode import decode_rgba


def cam_input(x: float, y: float, d: float, h: int, aspect: float = 16 / 9) -> CameraInput:
    view = glm.lookAt(glm.vec3(x, y, d), glm.vec3(x, y, 0), glm.vec3(0, 1, 0))
    proj = glm.perspective(glm.radians(FOVY_DEG), aspect, 0.01, 1000.0)
    return CameraInput(position=np.array([x, y, d]), view_proj=np.asarray(proj * view),
                       fovy=math.radians(FOVY_DEG), viewport_height=h)


def wall_arrays(grid: Grid, size: int) -> tuple[InstanceArrays, TextureArrays]:
    centers = np.array([[*grid.center(i), 0.0] for i in range(grid.count)])
    n = grid.count
    inst = InstanceArrays(centers, np.full(n, IMAGE / math.sqrt(2)), np.full(n, 1 / IMAGE),
                          np.arange(n))
    levels = int(math.log2(size)) + 1
    return inst, TextureArrays(np.full(n, size), np.full(n, size), np.full(n, levels),
                               np.zeros(n))


def test_grid_places_every_image_once() -> None:
    grid = Grid.for_count(1000)
    assert grid.cols * grid.rows >= 1000 > grid.cols * (grid.rows - 1)
    centers = {grid.center(i) for i in range(1000)}
    assert len(centers) == 1000
    for i in (0, 17, 999):
        assert grid.index_at(*grid.center(i)) == i


def test_script_dives_to_full_size_pans_cuts_and_zooms_out() -> None:
    grid, size, h = Grid.for_count(400), 1024, 720
    script = WallScript(grid, size, h, cuts=3)
    names = [s.name for s in script.segments]
    assert names == ["overview", "dive", "hold", "pan", "cut0", "cut1", "cut2", "zoom-out",
                     "overview-end"]
    inst, tex = wall_arrays(grid, size)
    # Overview: everything visible, and all of it wants coarse levels only.
    est = estimate_mips(inst, tex, cam_input(*script.sample(0.5), h))
    assert est.visible.all() and est.mip.min() > 3
    # At full size, the image under the camera wants level 0, just: one texel per pixel.
    hold = next(s for s in script.segments if s.name == "hold")
    x, y, d = script.sample(hold.start + 0.1)
    assert d == pytest.approx(full_size_distance(size, h))
    est = estimate_mips(inst, tex, cam_input(x, y, d, h))
    centre = grid.index_at(x, y)
    assert est.level[centre] == 0
    assert est.visible.sum() <= 9
    # The pan moves along the row only; a cut lands far from everything seen before it (the
    # dive's image, the pan's row, earlier cuts), so its images cannot still be resident.
    pan = next(s for s in script.segments if s.name == "pan")
    assert pan.frm[1] == pan.to[1] and pan.to[0] - pan.frm[0] >= 3 * CELL
    cuts = [s for s in script.segments if s.name.startswith("cut")]
    seen = [(pan.frm[0] + f * (pan.to[0] - pan.frm[0]), pan.frm[1]) for f in np.linspace(0, 1, 7)]
    diag = math.hypot(grid.cols, grid.rows) * CELL
    for cut in cuts:
        assert min(math.dist(p, cut.frm[:2]) for p in seen) >= 0.25 * diag
        assert script.sample(cut.start) == pytest.approx(cut.frm)
        seen.append(cut.frm[:2])
    assert script.cut_times() == [c.start for c in cuts]
    assert script.sample(script.duration + 5) == pytest.approx((0.0, 0.0, script.far))


def test_script_moves_smoothly_inside_segments() -> None:
    """No jumps except at cuts: per 1/60 s step the camera moves less than its distance to
    the wall (a cut moves it by half the grid)."""
    script = WallScript(Grid.for_count(256), 256, 144, cuts=2, duration=6.0)
    assert script.duration == pytest.approx(6.0)
    cuts = script.cut_times()
    t = np.arange(0, script.duration, 1 / 60)
    pos = np.array([script.sample(x) for x in t])
    steps = np.linalg.norm(np.diff(pos[:, :2], axis=0), axis=1)
    jumps = [t[i + 1] for i in np.flatnonzero(steps > pos[1:, 2])]
    assert len(jumps) == 2
    for j, c in zip(jumps, cuts):
        assert c - 1 / 60 <= j <= c + 1 / 60


def test_navigator_zoom_keeps_the_point_under_the_cursor() -> None:
    nav = WallNavigator(x=3.0, y=-1.0, distance=10.0, viewport_height=720)
    cursor = (0.5, -0.25)
    half_h = 10.0 * math.tan(math.radians(FOVY_DEG) / 2)
    point = (3.0 + cursor[0] * half_h * nav.aspect, -1.0 + cursor[1] * half_h)
    nav.zoom(3, cursor)
    assert nav.distance == pytest.approx(10.0 / 1.2 ** 3)
    half_h = nav.distance * math.tan(math.radians(FOVY_DEG) / 2)
    assert nav.x + cursor[0] * half_h * nav.aspect == pytest.approx(point[0])
    assert nav.y + cursor[1] * half_h == pytest.approx(point[1])
    before = (nav.x, nav.y)
    nav.drag(100, 50)  # the wall follows the cursor: right and down
    assert nav.x == pytest.approx(before[0] - 100 * nav.world_per_pixel())
    assert nav.y == pytest.approx(before[1] + 50 * nav.world_per_pixel())


def test_assignment_is_a_permutation_independent_of_count() -> None:
    layout = WallLayout.for_size(256)
    picks = [assignment(i, 36, layout) for i in range(900)]
    assert len(set(picks)) == 900  # every window once before any repeats
    assert assignment(5, 36, layout) == picks[5]
    # neighbours come from different canvases (photos, crops, colours)
    assert sum(a[0] == b[0] for a, b in pairwise(picks)) < 900 // 10


def test_generated_textures_are_distinct_photographs(tmp_path: Path) -> None:
    """Textures are valid full-chain BC7 KTX2 files; neighbours differ; a texture does not
    depend on how many were asked for; level 1 is close to level 0 downsampled (the cut
    keeps the chain consistent) yet not equal to it (the finest level holds real detail)."""
    assets = wall_textures(6, 64, cache_dir=tmp_path, workers=1)
    assert assets.generated == 6
    again = wall_textures(3, 64, cache_dir=tmp_path)
    assert again.generated == 0 and again.paths == assets.paths[:3]
    images = []
    for p in assets.paths:
        tf = textures.open(p)
        assert tf.format == "BC7_SRGB" and len(tf.levels) == 7 and tf.width == 64
        images.append(decode_rgba(tf, 0)[..., :3].astype(np.float64))
    for a, b in pairwise(images):
        assert np.abs(a - b).mean() > 10  # neighbours are different pictures
    tf = textures.open(assets.paths[0])
    lvl0 = images[0]
    lvl1 = decode_rgba(tf, 1)[..., :3].astype(np.float64)
    box = lvl0.reshape(32, 2, 32, 2, 3).mean(axis=(1, 3))
    err = np.abs(box - lvl1).mean()
    assert err < 8, err
    assert np.abs(lvl0 - np.repeat(np.repeat(lvl1, 2, 0), 2, 1)).mean() > 1
