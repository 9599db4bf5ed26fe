"""How well streaming serves the screen: the mip-debug view as numbers.

The target (streaming issue): at least 95% of on-screen texels sample a resident level within
one level of the level they would sample with every level resident. Per pixel showing an
albedo texture:
    wanted   = floor(LOD from UV derivatives), clamped to [0, levels - 1]
    missing  = resident min LOD of the texture - wanted   (> 0: coarser than wanted)
    exact    <=> missing <= 0      (the debug view paints it green)
    within 1 <=> missing <= 1      (green or yellow; red is worse)
The LOD is the debug view's own `wanted_level` (shaders/mipdebug.glsl), so the fractions
here are exactly the shares of its colours, without tone mapping or edge blending in the way.
`classify_mip_debug` reads the same numbers back from a debug-view screenshot, as a cross-check
anyone can do by eye.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ..gl.device import Device
from .material import Material
from .scene import Scene
from ..streaming.contract import TextureProvider
from .feedback import InstancePass, view_projection
from ..memory.ledger import Category

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AccuracyResult:
    """Shares of the `pixels` on-screen pixels showing an albedo texture. With no such
    pixel both fractions are 1.0: nothing is shown at the wrong level."""

    fraction_within_one: float
    fraction_exact: float
    pixels: int


def accuracy_from_levels(levels: np.ndarray) -> AccuracyResult:
    """The result from a (..., 4) float image of (wanted LOD, resident min LOD, levels - 1,
    has albedo) per pixel, as shaders/feedback.accuracy.frag.glsl writes it."""
    data = np.asarray(levels, np.float64).reshape(-1, 4)
    shown = data[data[:, 3] > 0.5]
    if not len(shown):
        return AccuracyResult(1.0, 1.0, 0)
    wanted = np.clip(np.floor(shown[:, 0]), 0.0, shown[:, 2])
    missing = shown[:, 1] - wanted
    return AccuracyResult(float(np.mean(missing <= 1.0)), float(np.mean(missing <= 0.0)),
                          len(shown))


def measure_accuracy(device: Device, scene: Scene, provider: TextureProvider,
                     render_size: tuple[int, int]) -> AccuracyResult:
    """Draw the scene's albedo LODs at `render_size` with the provider's current residency
    and compare per pixel (see the module docstring).

    A measuring tool, not a per-frame pass: it makes its target, reads it back synchronously
    (a stall) and releases everything before returning."""
    w, h = int(render_size[0]), int(render_size[1])
    made: list = []
    probe = InstancePass(device, "feedback.accuracy.frag.glsl", "accuracy")
    try:
        color = device.texture((w, h), 4, dtype="f4", category=Category.TARGET, label="accuracy")
        made.append(color)
        depth = device.renderbuffer((w, h), depth=True, label="accuracy.depth")
        made.append(depth)
        fbo = device.framebuffer([color], depth, label="accuracy.fbo")
        made.append(fbo)
        fbo.use()
        fbo.clear(0.0, 0.0, 0.0, 0.0, depth=1.0)

        def material_uniforms(m: Material) -> None:
            probe.set("u_has_albedo", m.albedo >= 0)
            if m.albedo >= 0:
                res = provider.residency(m.albedo)
                probe.set("u_chain_size", (float(res.chain_width), float(res.chain_height)))
                probe.set("u_resident", float(res.base_level))
                probe.set("u_top_level", float(max(res.levels - 1, 0)))

        probe.draw(scene, view_projection(scene, (w, h)), material_uniforms)
        data = np.frombuffer(fbo.read(components=4, dtype="f4", alignment=1), np.float32)
        result = accuracy_from_levels(data.reshape(h, w, 4))
    finally:
        for obj in reversed(made):
            device.release(obj)
        probe.release()
    log.debug("mip accuracy at %dx%d: %.4f within one level, %.4f exact, %d pixels", w, h,
              result.fraction_within_one, result.fraction_exact, result.pixels)
    return result


def classify_mip_debug(image: np.ndarray) -> AccuracyResult:
    """The same fractions read from a mip-debug screenshot ((H, W, 3) uint8): green pixels
    are exact, yellow one level short, red worse. Colours are shaded by albedo brightness
    and tone-mapped, so the classes are told apart by channel differences, not exact values;
    edge pixels blend classes, so expect agreement with `measure_accuracy` to a few percent."""
    rgb = np.asarray(image, np.int32)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    green = (g > r + 20) & (g > b + 20)
    red = (r > g + 60) & (r > b + 60)
    yellow = (r > b + 60) & (g > b + 60) & ~green & ~red
    shown = int((green | yellow | red).sum())
    if not shown:
        return AccuracyResult(1.0, 1.0, 0)
    return AccuracyResult(float((green | yellow).sum() / shown), float(green.sum() / shown),
                          shown)
