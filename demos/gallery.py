"""The gallery: a corridor of panels, each with its own large BC7 texture, flown through.

At the default 200 textures of 4096x4096 BC7 (21 MiB each with mips, ~4.3 GiB in all) the
gallery does not fit a typical budget fully resident: it exists to exercise streaming. The
textures are generated on first run (see engine.demos.gallery_assets for how that stays
fast) and cached.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyglm import glm

from engine import inputs
from engine.gl.device import Device
from engine.render.camera import Camera, CameraPath, Keyframe
from engine.demos.gallery_assets import gallery_texture_paths, gallery_textures
from engine.render.material import Material
from engine.render.mesh import Mesh, box, quad
from engine.render.scene import PointLight, Scene
from engine.streaming.contract import TextureProvider

DEFAULTS = {"count": 200, "texture_size": 4096, "format": "bc7", "speed": 2.5}
SPACING = 4.0  # metres between panels along a wall
HALF_WIDTH = 3.5  # corridor half width
PANEL = 3.0  # panel edge


def corridor_length(count: int) -> float:
    return math.ceil(count / 2) * SPACING + SPACING


def texture_paths(options: Mapping[str, Any]) -> list[Path]:
    """The files of the gallery these options ask for, in the cache, generated or not."""
    opts = {**DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
    return gallery_texture_paths(int(opts["count"]), int(opts["texture_size"]),
                                 str(opts["format"]), cache_dir=opts.get("cache_dir"))


def build(device: Device, provider: TextureProvider, options: Mapping[str, Any]) -> Scene:
    opts = {**DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
    # the CLI's checks, for callers of the API (run_scene(build, options={"count": 0}))
    count = inputs.checked("count", inputs.scene_count, opts["count"])
    size = inputs.checked("texture_size", inputs.texture_edge, opts["texture_size"])
    assets = gallery_textures(count, size, str(opts["format"]),
                              cache_dir=opts.get("cache_dir"))
    scene = Scene(device)
    try:
        _populate(scene, provider, assets.paths, float(opts["speed"]))
    except BaseException:
        scene.release()
        raise
    return scene


def _populate(scene: Scene, provider: TextureProvider, paths, speed: float) -> None:
    device = scene.device
    count = len(paths)
    length = corridor_length(count)
    panel = scene.add_mesh(Mesh(device, quad(PANEL, PANEL), label="panel"))
    slab = scene.add_mesh(Mesh(device, box((2 * HALF_WIDTH + 0.4, 0.2, length + 8)),
                               label="slab"))
    floor = Material("floor", albedo_factor=(0.35, 0.33, 0.3, 1.0), roughness=0.8)
    ceiling = Material("ceiling", albedo_factor=(0.6, 0.6, 0.62, 1.0), roughness=0.9)
    scene.materials += [floor, ceiling]
    mid = -length / 2 + 2
    scene.add(slab, floor, glm.translate(glm.vec3(0, -0.1, mid)))
    scene.add(slab, ceiling, glm.translate(glm.vec3(0, 4.1, mid)))
    wall = scene.add_mesh(Mesh(device, box((0.2, 4.2, length + 8)), label="wall"))
    plaster = Material("wall", albedo_factor=(0.5, 0.48, 0.45, 1.0), roughness=0.95)
    scene.materials.append(plaster)
    for side in (-1.0, 1.0):
        scene.add(wall, plaster, glm.translate(glm.vec3(side * (HALF_WIDTH + 0.15), 2.0, mid)))
    end = scene.add_mesh(Mesh(device, box((2 * HALF_WIDTH + 0.4, 4.2, 0.2)), label="end"))
    for z in (mid - length / 2 - 4.1, mid + length / 2 + 4.1):
        scene.add(end, plaster, glm.translate(glm.vec3(0, 2.0, z)))
    ids = provider.register_many([(path.stem, path) for path in paths])
    for i, (path, tid) in enumerate(zip(paths, ids)):
        mat = Material(path.stem, albedo=tid, roughness=0.45 + 0.4 * ((i * 7) % 5) / 4)
        scene.materials.append(mat)
        side = -1.0 if i % 2 == 0 else 1.0
        z = -(i // 2) * SPACING
        model = glm.translate(glm.vec3(side * (HALF_WIDTH - 0.02), 1.9, z)) * \
            glm.rotate(glm.radians(90.0 * -side), glm.vec3(0, 1, 0))
        scene.add(panel, mat, model)
    scene.point_lights = [PointLight((0.0, 3.4, -k * length / 4), (1.0, 0.85, 0.7), 6.0, 14.0)
                          for k in range(4)]
    scene.sun.intensity = 0.8
    scene.camera = Camera(fovy_deg=65.0)
    scene.camera_path = camera_path(length, speed)


def camera_path(length: float, speed: float) -> CameraPath:
    """Down the corridor with a gentle sway from wall to wall, so panels on both sides pass
    close (mip 0 wanted) and far (tails suffice) in turn."""
    keys = []
    steps = max(2, int(length // SPACING))
    for k in range(steps + 1):
        z = 3.0 - k * (length - 2.0) / steps
        sway = 1.2 * math.sin(k * 0.9)
        keys.append(Keyframe(k * (length / steps) / speed, (sway, 1.7, z),
                             (-sway * 1.5, 1.8, z - 6.0)))
    return CameraPath(keys, "catmull-rom")
