"""The virtual-texture feedback pass of the scene: which tiles the screen samples.

Why a pass of its own: the whole-level feedback pass (feedback.py) writes one level per
texture id into an RG32UI target; virtual textures need the packed tile key
(`vt_feedback_key`: vt, level, tile x, y) the page-cache policy and the tile I/O speak, into
the R32UI target of the `VirtualTextureSystem` (engine/gl/vt.py `DepthFeedbackTarget`: PBO +
fence ring, never a wait). It draws the same objects as the scene pass (one buffer write and
one multi-draw, `BatchedPass` in "none" texture mode, or a draw per object on drivers without
the batched frame), depth-tested, at a fraction of the render size, with the LOD biased back
to the render size. The system polls the newest finished readback in its next
`begin_frame`.

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
from ..gl.vt import FEEDBACK_READBACKS
from ..resolution.targets_spec import TargetSpec
from ..streaming.contract import TextureProvider, VirtualTextures
from .batch import feedback_pass
from .feedback import InstancePass
from .material import Material
from .objects import ObjectArrays
from .scene import Scene

log = logging.getLogger(__name__)


#: The pass is never narrower than this (or the render size, when smaller): at a small
#: output or a low render scale, 1/4 of it leaves panels between the feedback pixels, and
#: their tiles would never be asked for.
MIN_FEEDBACK_WIDTH = 64


def feedback_specs(scale: float, reduce_on_gpu: bool = False) -> tuple[TargetSpec, ...]:
    """The pass's memory as the resolution controller prices it: the key target, its depth
    and the readback buffers, at `scale` of the render size and MIN_FEEDBACK_WIDTH wide at
    least (never wider than the render size); with the reduction on the GPU its hash table,
    list and list copies too (engine/gl/feedback_reduce.py: each as many bytes a pixel as
    RG8)."""
    def spec(name: str, fmt: str, copies: int = 1) -> TargetSpec:
        return TargetSpec(name, fmt, relative_size=scale, min_width=MIN_FEEDBACK_WIDTH,
                          copies=copies)
    specs = (spec("vt.feedback", "RG32UI"), spec("vt.feedback.depth", "DEPTH24"),
             spec("vt.feedback.readback", "RG32UI", FEEDBACK_READBACKS))
    if reduce_on_gpu:
        specs += (spec("vt.feedback.table", "RG8", 2),  # the table and the list
                  spec("vt.feedback.list.readback", "RG8", FEEDBACK_READBACKS))
    return specs


def vt_feedback_size(output_size: tuple[int, int], render_scale: float,
                     scale: float) -> tuple[int, int]:
    """The pass's size at this render scale (the one rule: `feedback_specs`'s dims)."""
    return feedback_specs(scale)[0].dims(int(output_size[0]), int(output_size[1]),
                                        render_scale)


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
        self.size = (0, 0)

    def reserve(self, vts: VirtualTextures, objects: ObjectArrays, textures: int,
                output_size: tuple[int, int], render_scale: float) -> None:
        """Make everything the pass draws with (frame ring, geometry, and target and
        readbacks at this render scale): before the governor's split, so a frame
        allocates nothing."""
        self.resize(vts, output_size, render_scale)
        if self.batch is not None:
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
