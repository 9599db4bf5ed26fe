"""glTF demo: a real glTF 2.0 model (default: Khronos' BoxTextured sample) on an orbit.

Options: `model` (path to a .gltf/.glb; default the bundled sample), `orbit_seconds`
(one turn, default 6). The camera distance comes from the model's bounds, so any model fits
the view; the orbit is a function of time only, so frame N always shows the same picture.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pyglm import glm

from engine import assets
from engine.gl.device import Device
from engine.render.gltf import load_gltf
from engine.render.gltf_scene import add_to_scene
from engine.render.scene import Scene
from engine.streaming.contract import TextureProvider

DEFAULT_MODEL = assets.MODELS / "BoxTextured" / "BoxTextured.glb"


def build(device: Device, provider: TextureProvider, options: Mapping[str, Any]) -> Scene:
    asset = load_gltf(options.get("model") or DEFAULT_MODEL)
    scene = Scene(device, clear_color=(0.05, 0.06, 0.08))
    try:
        add_to_scene(asset, scene, provider)
    except BaseException:
        scene.release()
        raise
    lo, hi = asset.bounds()
    center = glm.vec3(*((lo + hi) / 2).tolist())
    radius = max(float(glm.length(glm.vec3(*(hi - lo).tolist()))) / 2, 1e-3)
    distance = radius / math.sin(math.radians(scene.camera.fovy_deg) / 2) * 1.1
    scene.camera.near, scene.camera.far = distance / 100, distance * 10
    period = float(options.get("orbit_seconds") or 6.0)

    def orbit(s: Scene, t: float) -> None:
        a = 2 * math.pi * t / period + math.radians(35)
        s.camera.position = center + glm.vec3(math.sin(a), 0.55, math.cos(a)) * distance
        s.camera.target = center

    scene.on_update.append(orbit)
    orbit(scene, 0.0)
    return scene
