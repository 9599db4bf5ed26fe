"""A standalone draw path for virtual textures: textured quads through vt_sample.

Why it exists: the virtual texture work is tested and benchmarked on its own geometry, apart
from the renderer's materials and lighting: flat quads in 3D (a wall of texture panels, a
camera looking at it), drawn three ways with one vertex buffer:
  - `draw_virtual`: colour through vt_sample (the page cache), with an optional min LOD;
  - `draw_feedback`: the packed tile keys the frame needs, at a fraction of the resolution;
  - `draw_reference`: the same quads sampled from fully resident textures with GL's own
    trilinear filtering: the picture the virtual path must reproduce.
The renderer samples virtual textures too (engine/streaming/provider.py, shaders/forward*.glsl,
engine/render/vt_feedback.py): docs/virtual_texturing.md, "In the renderer".
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pyglm import glm

from ...gl.device import Device
from ...gl.textures import GpuTexture
from ...gl.vt import ColorTarget, QuadBatch, load_shader, set_uniform
from .system import VirtualTextureSystem


def quad_vertices(corners: np.ndarray, vt: int, uv_scale: float = 1.0,
                  uv_offset: tuple[float, float] = (0.0, 0.0)) -> np.ndarray:
    """Six vertices (xyz, uv, vt) of a quad with corners (bottom-left, bottom-right,
    top-right, top-left); UV (0,0) at the top-left as in KTX2's "rd" orientation."""
    c = np.asarray(corners, np.float32)
    u0, v0 = uv_offset
    uv = np.array([[0, 1], [1, 1], [1, 0], [0, 0]], np.float32) * uv_scale + (u0, v0)
    idx = [0, 1, 2, 0, 2, 3]
    out = np.zeros((6, 6), np.float32)
    out[:, :3], out[:, 3:5], out[:, 5] = c[idx], uv[idx], vt
    return out


def wall(columns: int, rows: int, vts: Sequence[int], size: float = 1.0,
         gap: float = 0.05, uv_scale: float = 1.0) -> np.ndarray:
    """A wall of quads in the z = 0 plane, left to right then top to bottom, textures
    `vts` in turn; centred on the origin."""
    quads = []
    step = size + gap
    x0, y0 = -(columns * step - gap) / 2, (rows * step - gap) / 2
    for i in range(columns * rows):
        cx, cy = x0 + (i % columns) * step, y0 - (i // columns) * step
        corners = [(cx, cy - size, 0), (cx + size, cy - size, 0), (cx + size, cy, 0),
                   (cx, cy, 0)]
        quads.append(quad_vertices(np.array(corners), vts[i % len(vts)], uv_scale))
    return np.concatenate(quads)


def view_projection(eye, target, aspect: float, fovy_deg: float = 60.0,
                    near: float = 0.01, far: float = 100.0) -> glm.mat4:
    return glm.perspective(math.radians(fovy_deg), aspect, near, far) * \
        glm.lookAt(glm.vec3(*eye), glm.vec3(*target), glm.vec3(0, 1, 0))


class QuadRenderer:
    """Programs and targets of the standalone path for one output size."""

    def __init__(self, device: Device, output_size: tuple[int, int],
                 feedback_scale: float = 0.25) -> None:
        self.device = device
        self.output_size = (int(output_size[0]), int(output_size[1]))
        self.feedback_scale = float(feedback_scale)
        vs = load_shader("vt_quad.vert.glsl")
        self._made: list = []
        try:
            self.color_prog = self._keep(device.program(
                vertex_shader=vs, fragment_shader=load_shader("vt_quad.frag.glsl"),
                label="vt.quad"))
            self.feedback_prog = self._keep(device.program(
                vertex_shader=vs, fragment_shader=load_shader("vt_feedback.frag.glsl"),
                label="vt.quad.feedback"))
            self.reference_prog = self._keep(device.program(
                vertex_shader=vs, fragment_shader=load_shader("vt_reference.frag.glsl"),
                label="vt.quad.reference"))
            self.target = ColorTarget(device, self.output_size, label="vt.output")
        except BaseException:
            self.release()
            raise

    def _keep(self, obj):
        self._made.append(obj)
        return obj

    @property
    def feedback_size(self) -> tuple[int, int]:
        w, h = self.output_size
        return max(1, round(w * self.feedback_scale)), max(1, round(h * self.feedback_scale))

    def draw_virtual(self, system: VirtualTextureSystem, quads: QuadBatch,
                     view_proj: glm.mat4, min_lod: float = 0.0,
                     read: bool = True) -> np.ndarray | None:
        """Draw through vt_sample; the image (top row first) when `read`, else None (a
        read-back waits for the GPU: benchmarks read only the frames they score)."""
        prog = self.color_prog
        self.target.begin()
        system.bind(prog)
        prog["u_view_proj"].write(view_proj.to_bytes())
        set_uniform(prog, "u_vt_min_lod", float(min_lod))
        quads.draw(prog)
        return self.target.read() if read else None

    def draw_feedback(self, system: VirtualTextureSystem, quads: QuadBatch,
                      view_proj: glm.mat4, frame: int) -> bool:
        """The feedback pass into the system's target; its readback arrives frames later."""
        size = self.feedback_size
        if not system.feedback_begin(size):
            return False
        prog = self.feedback_prog
        system.bind(prog)
        prog["u_view_proj"].write(view_proj.to_bytes())
        set_uniform(prog, "u_vt_lod_bias", -math.log2(self.output_size[0] / size[0]))
        quads.draw(prog)
        system.feedback_end(frame)
        return True

    def draw_reference(self, quads: QuadBatch, view_proj: glm.mat4,
                       textures: Sequence[GpuTexture], quad_vt: Sequence[int]) -> np.ndarray:
        """Quad i sampled from textures[quad_vt[i]] (fully resident, GL trilinear)."""
        prog = self.reference_prog
        self.target.begin()
        prog["u_view_proj"].write(view_proj.to_bytes())
        set_uniform(prog, "u_texture", 0)
        for i, vt in enumerate(quad_vt):
            textures[vt].use(0)
            quads.draw(prog, i, 1)
        return self.target.read()

    def release(self) -> None:
        target = self.__dict__.pop("target", None)
        if target is not None:
            target.release()
        for obj in reversed(self._made):
            self.device.release(obj)
        self._made.clear()
