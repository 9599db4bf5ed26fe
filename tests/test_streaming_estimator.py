"""Desired mip estimation: formula, culling, per-texture minimum, biases, and its cost."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest
from pyglm import glm

from engine.streaming.culling import frustum_planes, spheres_visible
from engine.streaming.levels.estimator import (
    CameraInput,
    InstanceArrays,
    TextureArrays,
    estimate_mips,
)

FOVY = math.radians(60.0)


def camera(render_scale: float = 1.0, height: int = 1080) -> CameraInput:
    """At the origin looking down -z."""
    proj = glm.perspective(FOVY, 16 / 9, 0.1, 1000.0)
    view = glm.lookAt(glm.vec3(0), glm.vec3(0, 0, -1), glm.vec3(0, 1, 0))
    return CameraInput(np.zeros(3), np.asarray(proj * view), FOVY, height, 0.1, render_scale)


def textures(n: int, size: int = 1024, bias: float = 0.0) -> TextureArrays:
    levels = size.bit_length()
    return TextureArrays(np.full(n, size), np.full(n, size), np.full(n, levels), np.full(n, bias))


def one(z: float, radius: float = 1.0, uv: float = 1.0, tex: int = 0, x: float = 0.0):
    return [x, 0.0, z], radius, uv, tex


def instances(*rows) -> InstanceArrays:
    c, r, uv, t = zip(*rows)
    return InstanceArrays(np.array(c, float), np.array(r, float), np.array(uv, float),
                          np.array(t, int))


def expected_mip(d: float, uv: float, size: int, height: int = 1080, scale: float = 1.0) -> float:
    px_per_unit = height * scale / (2 * d * math.tan(FOVY / 2))
    return math.log2(uv * size / px_per_unit)


def test_formula_at_the_nearest_point_of_the_sphere():
    est = estimate_mips(instances(one(-101.0, radius=1.0, uv=0.5)), textures(1), camera())
    assert est.visible[0]
    assert est.mip[0] == pytest.approx(expected_mip(100.0, 0.5, 1024))
    assert est.level[0] == math.floor(expected_mip(100.0, 0.5, 1024))


def test_minimum_over_instances_and_clamping():
    inst = instances(one(-500.0), one(-50.0), one(-5000.0, tex=1), one(-0.5, tex=2))
    est = estimate_mips(inst, textures(3), camera())
    assert est.mip[0] == pytest.approx(expected_mip(49.0, 1.0, 1024))   # the nearer one wins
    assert est.level[1] == 10                                            # clamped to levels-1
    assert est.mip[2] == 0.0 and est.level[2] == 0                       # inside: finest


def test_culling_and_not_wanted():
    inst = instances(one(50.0), one(-50.0, x=500.0), one(-50.0, tex=2), one(-2000.0, tex=3))
    est = estimate_mips(inst, textures(4), camera())
    assert est.visible.tolist() == [False, False, True, False]  # behind, aside, seen, beyond far
    assert np.isinf(est.mip[0]) and est.level[0] == 10
    assert est.instance_visible.tolist() == [False, False, True, False]


def test_sphere_straddling_a_plane_is_visible():
    planes = frustum_planes(camera().view_proj)
    centers = np.array([[0.0, 0.0, 5.0], [0.0, 0.0, 1.0]])   # behind, overlapping near plane
    assert spheres_visible(planes, centers, np.array([1.0, 1.5])).tolist() == [False, True]


def test_biases_and_render_scale():
    inst = instances(one(-101.0))
    base = estimate_mips(inst, textures(1), camera()).mip[0]
    assert estimate_mips(inst, textures(1, bias=1.5), camera()).mip[0] == pytest.approx(base + 1.5)
    assert estimate_mips(inst, textures(1), camera(), global_bias=-1).mip[0] == pytest.approx(
        base - 1)
    # half the pixels in each direction: one level coarser
    assert estimate_mips(inst, textures(1), camera(render_scale=0.5)).mip[0] == pytest.approx(
        base + 1)


def test_cost_for_ten_thousand_instances():
    rng = np.random.default_rng(0)
    n = 10_000
    inst = InstanceArrays(rng.uniform(-300, 300, (n, 3)), rng.uniform(0.5, 3, n),
                          rng.uniform(0.01, 1, n), rng.integers(0, n, n))
    tex = TextureArrays(rng.choice([256, 1024, 4096], n), rng.choice([256, 1024], n),
                        np.full(n, 13), np.zeros(n))
    cam = camera()
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        estimate_mips(inst, tex, cam)
        times.append(time.perf_counter() - t0)
    assert float(np.median(times)) < 5e-3   # about 0.5 ms on the dev machine; loose for CI
