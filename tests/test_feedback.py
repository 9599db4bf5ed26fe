"""GPU feedback pass: pure helpers (combine, reduce, sizing), occlusion caught where bounds
cannot, agreement with the estimator on visible textures, and a readback that never waits."""
from __future__ import annotations

import numpy as np
import pytest
from pyglm import glm
from streaming_helpers import make_textures

from engine.gl import constants as K
from engine.render.camera import Camera, mat_to_numpy
from engine.render.material import Material
from engine.render.mesh import Mesh, quad
from engine.render.scene import Scene
from engine.streaming.static import StaticTextureProvider
from engine.streaming.levels.estimator import (
    CameraInput,
    InstanceArrays,
    TextureArrays,
    estimate_mips,
)
from engine.render.feedback import FeedbackPass
from engine.streaming.levels.feedback import combine, feedback_size, reduce_feedback

RENDER = (320, 240)
FRONT, HIDDEN, SIDE = 0, 1, 2  # texture ids of the three quads


# ---------------------------------------------------------------------- pure helpers
def test_combine_takes_the_finer_level_and_marks_seen_textures_visible():
    est = np.array([2.5, np.inf, 4.0, np.inf])
    vis = np.isfinite(est)
    fb = np.array([1.0, 3.0, np.inf, np.inf])
    mip, visible = combine(est, vis, fb)
    np.testing.assert_array_equal(mip, [1.0, 3.0, 4.0, np.inf])
    np.testing.assert_array_equal(visible, [True, True, True, False])


def test_combine_applies_bias_and_pads_late_textures():
    est = np.array([2.0, 0.5, 3.0])
    mip, visible = combine(est, np.ones(3, bool), np.array([0.0]), bias=1.0)
    np.testing.assert_array_equal(mip, [1.0, 0.5, 3.0])  # ids 1, 2 registered later: +inf
    assert visible.all()
    with pytest.raises(ValueError):
        combine(est[:1], np.ones(1, bool), np.zeros(2))


def test_reduce_feedback_is_the_minimum_level_per_texture():
    image = np.array([[[0, 0], [1, 3], [1, 2]],
                      [[3, 5], [3, 4], [9, 0]]], np.uint32)  # id 9 is out of range: ignored
    np.testing.assert_array_equal(reduce_feedback(image, 4), [2.0, np.inf, 4.0, np.inf])


def test_feedback_size_scales_with_a_floor_and_never_exceeds_the_frame():
    assert feedback_size((1280, 720), 1 / 8, (64, 36)) == (160, 90)
    assert feedback_size((320, 240), 1 / 8, (64, 36)) == (64, 36)
    assert feedback_size((40, 20), 1 / 8, (64, 36)) == (40, 20)


# ---------------------------------------------------------------------- on the GPU
@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return make_textures(tmp_path_factory.mktemp("feedback"), 3, 512)


@pytest.fixture
def occlusion_scene(device, files):
    """Three textured quads facing a camera on +z: FRONT hides HIDDEN (same line of sight,
    1 m behind, smaller, fully inside the frustum); SIDE is plainly visible."""
    provider = StaticTextureProvider(device)
    scene = Scene(device)
    try:
        mats = [Material(f"m{i}", albedo=provider.register(f"t{i}", p))
                for i, p in enumerate(files)]
        big = scene.add_mesh(Mesh(device, quad(1.4, 1.4), label="big"))
        small = scene.add_mesh(Mesh(device, quad(0.8, 0.8), label="small"))
        scene.add(big, mats[FRONT], glm.translate(glm.vec3(-0.8, 0.0, 0.0)))
        scene.add(small, mats[HIDDEN], glm.translate(glm.vec3(-0.8, 0.0, -1.0)))
        scene.add(big, mats[SIDE], glm.translate(glm.vec3(0.9, 0.0, 0.0)))
        scene.camera = Camera(position=glm.vec3(0.0, 0.0, 3.0), target=glm.vec3(0, 0, 0))
        yield scene, provider
    finally:
        scene.release()
        provider.release()


def bounds_estimate(scene: Scene, provider: StaticTextureProvider):
    """What the streamer's estimator says about the scene (bounds only)."""
    centers, radii, density, ids = scene.frame_arrays()
    cam = scene.camera
    vp = mat_to_numpy(cam.proj_matrix(RENDER[0] / RENDER[1])) @ mat_to_numpy(cam.view_matrix())
    res = [provider.residency(t) for t in range(3)]
    return estimate_mips(
        InstanceArrays(centers=centers, radii=radii, uv_density=density, texture=ids[:, 0]),
        TextureArrays(width=np.array([r.chain_width for r in res]),
                      height=np.array([r.chain_height for r in res]),
                      levels=np.array([r.levels for r in res]), bias=np.zeros(3)),
        CameraInput(position=np.array(tuple(cam.position)), view_proj=vp, fovy=cam.fovy,
                    viewport_height=RENDER[1], near=cam.near))


def first_result(device, fb: FeedbackPass) -> np.ndarray:
    """Poll until a result arrives. The test lets the GPU finish first (ctx.finish), so the
    fence is signalled; poll itself never waits."""
    device.finish()
    mips = fb.poll()
    assert mips is not None
    return mips


def test_occluded_texture_gets_no_feedback_while_bounds_want_it(device, occlusion_scene):
    scene, provider = occlusion_scene
    est = bounds_estimate(scene, provider)
    assert est.visible.all()  # in the frustum: bounds cannot tell HIDDEN is behind FRONT
    fb = FeedbackPass(device, provider)
    try:
        assert fb.render(scene, RENDER, frame=7)
        mips = first_result(device, fb)
    finally:
        fb.release()
    assert fb.latest_frame == 7
    assert fb.size == (64, 36)
    assert mips[HIDDEN] == np.inf
    for t in (FRONT, SIDE):
        assert np.isfinite(mips[t]) and abs(mips[t] - est.level[t]) <= 1, (t, mips, est.mip)
    assert est.level[FRONT] >= 1  # a real level to agree on, not both clamped to 0


def test_readback_never_waits_and_the_ring_skips_when_full(device, occlusion_scene,
                                                           monkeypatch):
    """With the GPU "busy" (every fence unsignalled) poll returns None at once, each wait
    asks for a zero timeout, and once every buffer is in flight passes are skipped."""
    scene, provider = occlusion_scene
    timeouts: list[int] = []
    real = device._raw.glClientWaitSync

    def busy(sync, flags, timeout):
        timeouts.append(timeout)
        return K.TIMEOUT_EXPIRED

    fb = FeedbackPass(device, provider, ring=3)
    try:
        monkeypatch.setitem(device._raw._fns, "glClientWaitSync", busy)
        assert fb.poll() is None  # nothing rendered yet
        assert [fb.render(scene, RENDER, frame=f) for f in range(4)] == [True] * 3 + [False]
        assert fb.skipped == 1
        assert fb.poll() is None
        assert timeouts and set(timeouts) == {0}
        monkeypatch.setitem(device._raw._fns, "glClientWaitSync", real)
        mips = first_result(device, fb)  # the newest of the three, older ones retired
        assert fb.latest_frame == 2 and mips[HIDDEN] == np.inf
        assert fb.poll() is None
        assert fb.render(scene, RENDER, frame=4)
    finally:
        fb.release()
