"""The virtual-texture feedback pass of the scene: which tiles the screen samples.

Why a pass of its own: the whole-level feedback pass (feedback.py) writes one level per
texture id into an RG32UI target; virtual textures need the packed tile key
(`vt_feedback_key`: vt, level, tile x, y) the page-cache policy and the tile I/O speak, into
the R32UI target of the `VirtualTextureSystem` (engine/gl/vt.py `DepthFeedbackTarget`: PBO +
fence ring, never a wait). It draws the same batched objects as the scene pass (one buffer
write, one multi-draw: `BatchedPass` in "none" texture mode), depth-tested, at a fraction of
the render size, with the LOD biased back to the render size. The system polls the newest
finished readback in its next `begin_frame`.

Its memory (target, depth, readback buffers) is priced with the render targets
(`feedback_specs`, in the renderer's `cost_spec`), so the governor's target curve holds it
at every scale and the floor holds it at the smallest; it is made before the split
(`reserve`) and remade with the targets when the scale changes, never mid-frame.
"""
from __future__ import annotations

import logging
import math
import numpy as np

from ..gl.device import Device
from ..gl.indirect import batched_frame_supported
from ..gl.vt import FEEDBACK_READBACKS
from ..resolution.targets_spec import TargetSpec
from ..streaming.contract import TextureProvider, VirtualTextures
from .batch import feedback_pass
from .objects import ObjectArrays
from .scene import Scene

log = logging.getLogger(__name__)


#: The pass is never narrower than this (or the render size, when smaller): at a small
#: output or a low render scale, 1/4 of it leaves panels between the feedback pixels, and
#: their tiles would never be asked for.
MIN_FEEDBACK_WIDTH = 64


def feedback_specs(scale: float) -> tuple[TargetSpec, ...]:
    """The pass's memory as the resolution controller prices it: the key target, its depth
    and the readback buffers, at `scale` of the render size and MIN_FEEDBACK_WIDTH wide at
    least (never wider than the render size)."""
    def spec(name: str, fmt: str, copies: int = 1) -> TargetSpec:
        return TargetSpec(name, fmt, relative_size=scale, min_width=MIN_FEEDBACK_WIDTH,
                          copies=copies)
    return (spec("vt.feedback", "RG32UI"), spec("vt.feedback.depth", "DEPTH24"),
            spec("vt.feedback.readback", "RG32UI", FEEDBACK_READBACKS))


def vt_feedback_size(output_size: tuple[int, int], render_scale: float,
                     scale: float) -> tuple[int, int]:
    """The pass's size at this render scale (the one rule: `feedback_specs`'s dims)."""
    return feedback_specs(scale)[0].dims(int(output_size[0]), int(output_size[1]),
                                        render_scale)


class VtFeedbackPass:
    """Draws a scene's objects with `vt_feedback.batched.frag.glsl` into a virtual texture
    system's feedback target."""

    def __init__(self, device: Device, provider: TextureProvider, scale: float = 0.25) -> None:
        if not batched_frame_supported(device):
            raise RuntimeError("the virtual-texture feedback pass needs the batched frame "
                               "(GL 4.3-class indirect draws)")
        self.device = device
        self.scale = float(scale)
        self.prog, self.batch = feedback_pass(device, provider, "vt_feedback", "vt.feedback")
        self.passes = 0
        self.size = (0, 0)

    def reserve(self, vts: VirtualTextures, objects: ObjectArrays, textures: int,
                output_size: tuple[int, int], render_scale: float) -> None:
        """Make everything the pass draws with (frame ring, geometry, and target and
        readbacks at this render scale): before the governor's split, so a frame
        allocates nothing."""
        self.resize(vts, output_size, render_scale)
        self.batch.reserve(objects, textures)

    def resize(self, vts: VirtualTextures, output_size: tuple[int, int],
               render_scale: float) -> None:
        """Target and readbacks at this render scale (the old ones go first)."""
        self.size = vt_feedback_size(output_size, render_scale, self.scale)
        vts.feedback_reserve(self.size)

    def render(self, vts: VirtualTextures, scene: Scene, render_size: tuple[int, int],
               view_proj: np.ndarray, view_proj_bytes: bytes, frame: int) -> bool:
        """Draw the pass for `frame` at the reserved size; False when every readback is
        still in flight."""
        size = self.size
        if not vts.feedback_begin(size):
            return False
        prog = self.prog
        vts.bind(prog)
        if "u_view_proj" in prog:
            prog["u_view_proj"].write(view_proj_bytes)
        if "u_vt_lod_bias" in prog:
            prog["u_vt_lod_bias"].value = -math.log2(render_size[0] / size[0])
        if "u_vt_frame" in prog:
            prog["u_vt_frame"].value = int(frame)
        self.batch.draw(scene.objects, prog, view_proj)
        vts.feedback_end(frame)
        self.passes += 1
        return True

    def release(self) -> None:
        self.batch.release()
