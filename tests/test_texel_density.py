"""The texel density the texture provider is told (Scene.frame_arrays) counts a material's UV
transform: a quad that shows a quarter of a texture's width asks for a quarter of the
texels per world unit, as the sampler reads them, and so for a level two steps coarser
than the whole texture would need, not a finer one than it shows."""
from __future__ import annotations

import math

import numpy as np
from pyglm import glm

from engine.render.material import Material
from engine.render.mesh import Mesh, quad
from engine.render.scene import Scene


def test_density_follows_the_materials_uv_scale(device):
    scene = Scene(device)
    try:
        mesh = scene.add_mesh(Mesh(device, quad(1.0, 1.0), label="density-quad"))
        plain = Material("plain", albedo=0)
        cell = Material("cell", albedo=0)
        cell.uv_transform = ((0.25, 0.0, 0.5), (0.0, 0.25, 0.25))  # an atlas cell
        turned = Material("turned", albedo=0)
        c, s = math.cos(0.7), math.sin(0.7)  # a rotation keeps the scale
        turned.uv_transform = ((0.5 * c, -0.5 * s, 0.0), (0.5 * s, 0.5 * c, 0.0))
        for m in (plain, cell, turned):
            scene.add(mesh, m, glm.scale(glm.vec3(2.0, 2.0, 2.0)))
        _, _, density, _ = scene.frame_arrays()
        assert np.allclose(density / density[0], [1.0, 0.25, 0.5], rtol=1e-5)
        cell.uv_transform = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))  # its own texture arrives
        _, _, density, _ = scene.frame_arrays()
        assert np.allclose(density / density[0], [1.0, 1.0, 0.5], rtol=1e-5)
    finally:
        scene.release()
