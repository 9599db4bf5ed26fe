"""Regression: the gallery's floor had a few pure-black pixels, the same ones every run.

Cause: the BRDF's Fresnel term pow(1.0 - vdh, 5.0). Where a point light lies along the view
ray (v == l, so h == v) dot(v, h) rounds to just above 1, and pow() of a negative base is
NaN in GLSL: the pixel came out black (in the gallery at frame 299 of the README's run, four
pixels where the line from a ceiling light through the camera meets the floor). A headlight
(the light exactly at the camera) puts v == l on every pixel of the floor, so the old
shader blackened a large share of it; the fixed one (dots clamped to [0, 1]) none.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("moderngl")
glm = pytest.importorskip("pyglm").glm

from engine.render.camera import Camera  # noqa: E402
from engine.render.material import Material  # noqa: E402
from engine.render.mesh import Mesh, box  # noqa: E402
from engine.render.scene import PointLight, Scene  # noqa: E402

CAMERA = (0.3, 1.7, 3.0)


def headlight_floor(device, provider, options) -> Scene:
    """The gallery's floor slab and material, lit only by a point light at the camera."""
    scene = Scene(device)
    slab = scene.add_mesh(Mesh(device, box((7.4, 0.2, 48.0)), label="floor"))
    floor = Material("floor", albedo_factor=(0.35, 0.33, 0.3, 1.0), roughness=0.8)
    scene.materials.append(floor)
    scene.add(slab, floor, glm.translate(glm.vec3(0.0, -0.1, -20.0)))
    scene.sun.intensity = 0.0
    scene.point_lights = [PointLight(CAMERA, (1.0, 0.85, 0.7), 6.0, 14.0)]
    scene.camera = Camera(fovy_deg=65.0)
    scene.camera.position = glm.vec3(*CAMERA)
    scene.camera.target = glm.vec3(0.0, 0.2, -6.0)
    return scene


def test_floor_lit_along_the_view_ray_has_no_black_pixels(engine_device):
    from engine.testing import run_headless

    result = run_headless(headlight_floor, frames=1, size=(160, 120), budget="256MiB",
                          device=engine_device)
    image = np.asarray(result.image)[..., :3]
    floor = image[70:, :]  # the lower part of the view is all floor (camera looks down)
    black = int((floor == 0).all(axis=-1).sum())
    assert black == 0, f"{black} pure-black floor pixels (NaN in the shader)"
    # The floor really is drawn and lit there (not the clear colour, which is near black).
    assert float(floor.mean()) > 40.0, floor.mean()
