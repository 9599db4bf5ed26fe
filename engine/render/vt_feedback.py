"""The virtual-texture feedback pass of the scene: which tiles the screen samples.

Why a pass of its own: the whole-level feedback pass (feedback.py) writes one level per
texture id into an RG32UI target; virtual textures need the packed tile key
(`vt_feedback_key`: vt, level, tile x, y) the page-cache policy and the tile I/O speak, into
the R32UI target of the `VirtualTextureSystem` (engine/gl/vt.py `DepthFeedbackTarget`: PBO +
fence ring, never a wait). It draws the same objects as the scene pass (one buffer write and
one multi-draw, `BatchedPass` in "none" texture mode, or a draw per object on drivers without
the batched frame), depth-tested, at a fraction of the render size, with the LOD biased back
to the render size. The system polls the newest
finished readback in its next `begin_frame`.
"""
from __future__ import annotations

import logging
import math
import numpy as np

from ..gl.device import Device
from ..streaming.contract import TextureProvider, VirtualTextures
from .batch import feedback_pass
from .feedback import InstancePass
from .material import Material
from .scene import Scene

log = logging.getLogger(__name__)


#: The pass is never narrower than this (or the render size, when smaller): at a small
#: output or a low render scale, 1/4 of it leaves panels between the feedback pixels, and
#: their tiles would never be asked for.
MIN_FEEDBACK_WIDTH = 64


def vt_feedback_size(render_size: tuple[int, int], scale: float) -> tuple[int, int]:
    """The pass's size: `scale` of the render size, at least MIN_FEEDBACK_WIDTH wide (the
    height keeps the aspect), never larger than the render size."""
    w, h = int(render_size[0]), int(render_size[1])
    k = min(1.0, max(float(scale), MIN_FEEDBACK_WIDTH / max(w, 1)))
    return (max(1, round(w * k)), max(1, round(h * k)))


class VtFeedbackPass:
    """Draws a scene's objects into a virtual texture system's feedback target: in one
    multi-draw with `vt_feedback.batched.frag.glsl` where the device profile has the batched
    frame, else one draw per object with `vt_feedback.object.frag.glsl` (the same keys, the
    slots from uniforms), so virtual textures converge on every driver."""

    def __init__(self, device: Device, provider: TextureProvider, scale: float = 0.25) -> None:
        self.device = device
        self.provider = provider
        self.scale = float(scale)
        self.path = device.profile.feedback_path
        self.prog = self.batch = self.objects = None
        if self.path == "batched":
            self.prog, self.batch = feedback_pass(device, provider, "vt_feedback",
                                                  "vt.feedback")
        else:
            self.objects = InstancePass(device, "vt_feedback.object.frag.glsl",
                                        "vt.feedback.object")
            self.prog = self.objects.prog
        self.passes = 0

    def render(self, vts: VirtualTextures, scene: Scene, render_size: tuple[int, int],
               view_proj: np.ndarray, view_proj_bytes: bytes, frame: int) -> bool:
        """Draw the pass for `frame`; False when every readback is still in flight."""
        size = vt_feedback_size(render_size, self.scale)
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
        if self.batch is not None:
            self.batch.draw(scene.objects, prog, view_proj)
        else:
            self._draw_objects(scene)
        vts.feedback_end(frame)
        self.passes += 1
        return True

    def _draw_objects(self, scene: Scene) -> None:
        """One draw per instance, each material's virtual slots and sizes as uniforms."""
        assert self.objects is not None
        vt_of = self.provider.virtual_ids()
        pass_ = self.objects

        def material(m: Material) -> None:
            ids, sizes = slot_uniforms(m, vt_of, self.provider)
            pass_.set("u_vt", ids)
            if "u_vt_size" in pass_.prog:
                pass_.prog["u_vt_size"].write(sizes.tobytes())
            (a, b, c), (d, e, f) = m.uv_transform
            pass_.set("u_uv_row0_delta", (a - 1.0, b, c))
            pass_.set("u_uv_row1_delta", (d, e - 1.0, f))
        pass_.draw(scene, None, material)

    def release(self) -> None:
        if self.batch is not None:
            self.batch.release()
        if self.objects is not None:
            self.objects.release()


def slot_uniforms(m: Material, vt_of: np.ndarray, provider: TextureProvider
                  ) -> tuple[tuple[int, int, int], np.ndarray]:
    """A material's (albedo, normal, roughness-metal) virtual-texture ids + 1 (0: not
    virtual) and their level-0 sizes, as the per-object tile feedback takes them."""
    ids = [0, 0, 0]
    sizes = np.zeros((3, 2), np.float32)
    for k, tid in enumerate((m.albedo, m.normal, m.roughness_metal)):
        if 0 <= tid < len(vt_of) and vt_of[tid] >= 0:
            ids[k] = int(vt_of[tid]) + 1
            r = provider.residency(tid)
            sizes[k] = (r.chain_width, r.chain_height)
    return (ids[0], ids[1], ids[2]), sizes
