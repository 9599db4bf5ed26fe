"""What a texture provider is told about each frame, as plain data.

The provider (static loader or streamer) decides which mip levels each texture needs from
what the camera sees. It gets numbers only, never the scene or GL objects, so streaming policy
stays a pure function of this view and can be tested without a renderer.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Texture slots of a material, in the column order of `FrameView.texture_ids`.
TEXTURE_SLOTS: tuple[str, ...] = ("albedo", "normal", "roughness_metal")
NO_TEXTURE = -1


@dataclass(frozen=True)
class FrameView:
    """The camera and every instance's screen-relevant numbers for one frame.

    Arrays are per instance (row i = instance i). `texture_ids[i, s]` is the provider id in
    slot `TEXTURE_SLOTS[s]` of instance i's material, or NO_TEXTURE.
    """

    frame: int
    time: float
    camera_pos: np.ndarray  # (3,) float32, world space
    view: np.ndarray  # (4, 4) float32, row-major (numpy convention)
    proj: np.ndarray  # (4, 4) float32, row-major
    fovy: float  # vertical field of view, radians
    viewport: tuple[int, int]  # render resolution (w, h) in pixels
    render_scale: float  # render resolution / output resolution
    centers: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.float32))
    radii: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    uv_density: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    texture_ids: np.ndarray = field(
        default_factory=lambda: np.zeros((0, len(TEXTURE_SLOTS)), np.int32))

    @property
    def instance_count(self) -> int:
        return int(self.centers.shape[0])
