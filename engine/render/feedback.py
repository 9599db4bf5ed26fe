"""GPU feedback: which mip level each texture is really sampled at, read back without stalls.

Why: the estimator (estimator.py) works from bounding spheres, so it cannot see occlusion
(a panel behind a wall still "wants" detail) nor UVs a shader makes up (tiling, procedural
coordinates). A small depth-tested pass that writes, per pixel, the albedo texture id and the
level the hardware would pick at full render resolution measures what the screen shows.

How (Godot 4.8 / sampler-feedback style, portable to GL 3.3 and llvmpipe):
  1. Draw the scene's instances into a low-resolution RG32UI target (1/8 of the render size by
     default, at least 64x36), depth-tested. Each fragment computes the LOD from UV
     derivatives divided by the downscale factor, i.e. the LOD of the full-resolution frame.
  2. glReadPixels into a pixel-pack buffer (PBO) and put a fence after it: the copy runs
     asynchronously on the GPU; nothing waits.
  3. A later frame asks the fence with a zero timeout. Signalled: read the PBO and reduce with
     numpy to the minimum level per texture. Not signalled: keep using the previous result.
     A ring of PBOs lets a new pass start while older ones are still in flight (the ring is
     engine/gl/readback.py, shared with the virtual-texture feedback target).

The streamer combines feedback with the estimate by taking the finer of the two (`combine`):
feedback adds demand the bounds miss, but "no feedback pixel" does not remove demand, because
a small or distant instance can fall between the pixels of a 1/8 resolution pass.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
from pyglm import glm

from ..gl import shaders
from ..gl.device import Device
from ..gl.indirect import batched_frame_supported
from ..gl.readback import ReadbackRing
from ..gl.types import Framebuffer, Renderbuffer, Texture, VertexArray
from ..memory.ledger import Category
from ..streaming.contract import TextureProvider
from ..streaming.levels.feedback import PIXEL_BYTES, feedback_size, reduce_feedback
from .batch import BatchedPass, feedback_pass
from .camera import mat_to_numpy
from .material import Material
from .mesh import VERTEX_ATTRIBUTES, VERTEX_FORMAT, Mesh
from .scene import Scene

log = logging.getLogger(__name__)


def view_projection(scene: Scene, render_size: tuple[int, int]) -> glm.mat4:
    """The scene pass's view-projection (aspect of the full render size, as renderer.py)."""
    cam = scene.camera
    return cam.proj_matrix(render_size[0] / render_size[1]) * cam.view_matrix()


class InstancePass:
    """One program that draws every instance of a scene (position + UV only) into whatever
    framebuffer is bound, depth-tested. Shared by the feedback and accuracy passes.

    It makes its own vertex arrays instead of using `Mesh.vertex_array`, whose cache is keyed
    by program name: a released program's name can be reused by GL, and the mesh would hand
    back a vertex array bound to the dead one."""

    def __init__(self, device: Device, fragment: str, label: str) -> None:
        self.device = device
        self.label = label
        self.prog = device.shared_program(vertex_shader=shaders.load("feedback.vert.glsl"),
                                          fragment_shader=shaders.load(fragment), label=label)
        self._names = set(self.prog)
        self._vaos: dict[Mesh, VertexArray] = {}

    def set(self, name: str, value: object) -> None:
        """Set a uniform; no-op for one the compiler dropped as unused."""
        if name not in self._names:
            return
        if isinstance(value, glm.mat4):
            self.prog[name].write(value.to_bytes())
        else:
            self.prog[name].value = value

    def _vao(self, mesh: Mesh) -> VertexArray:
        vao = self._vaos.get(mesh)
        if vao is None:
            vao = self.device.vertex_array(
                self.prog, [(mesh.vbo, VERTEX_FORMAT, *VERTEX_ATTRIBUTES)], mesh.ibo,
                index_element_size=4, skip_errors=True, label=f"{self.label}.{mesh.label}")
            self._vaos[mesh] = vao
        return vao

    def draw(self, scene: Scene, view_proj: glm.mat4 | None,
             material_uniforms: Callable[[Material], None]) -> None:
        """Draw every instance; `material_uniforms` is called whenever the material changes
        (`view_proj` None: the caller wrote u_view_proj)."""
        self.device.set_state(depth_test=True)
        if view_proj is not None:
            self.set("u_view_proj", view_proj)
        bound: Material | None = None
        for inst in scene.instances:
            if inst.material is not bound:
                material_uniforms(inst.material)
                bound = inst.material
            self.set("u_model", inst.model)
            self._vao(inst.mesh).render()

    def release(self) -> None:
        for vao in self._vaos.values():
            self.device.release(vao)
        self._vaos.clear()


class FeedbackPass:
    """The feedback executor: low-resolution pass + PBO ring + fence polling.

    `provider` supplies each albedo texture's chain size (`residency`); feedback does not
    depend on what is resident, only on what the screen would sample. `every`: the pass runs
    on frames that are multiples of it (`frame_step`), amortising its cost."""

    def __init__(self, device: Device, provider: TextureProvider, *, scale: float = 1 / 8,
                 min_size: tuple[int, int] = (64, 36), ring: int = 3, every: int = 4,
                 batched: bool = True) -> None:
        if ring < 2:
            raise ValueError("the feedback ring needs at least 2 buffers to avoid waiting")
        self.device = device
        self.provider = provider
        self.scale = scale
        self.min_size = min_size
        self.every = max(1, int(every))
        self.size = (0, 0)
        self.latest_frame = -1  # the frame the last poll() result was rendered in
        self.skipped = 0  # passes not rendered because every buffer was still in flight
        # The batched frame's path (one buffer write, one multi-draw, no per-object uniform)
        # where the driver has it; else the instance loop.
        self._pass: InstancePass | None = None
        self._batch: BatchedPass | None = None
        self._batch_prog = None
        if batched and batched_frame_supported(device):
            self._batch_prog, self._batch = feedback_pass(device, provider, "feedback",
                                                           "feedback")
        else:
            self._pass = InstancePass(device, "feedback.frag.glsl", "feedback")
        self._ring = ReadbackRing(device, ring, "feedback")
        self._color: Texture | None = None
        self._depth: Renderbuffer | None = None
        self._fbo: Framebuffer | None = None

    # ------------------------------------------------------------------ targets
    def _ensure_target(self, size: tuple[int, int]) -> Framebuffer:
        if self._fbo is not None and size == self.size:
            return self._fbo
        self._release_target()
        dev = self.device
        self._color = dev.texture(size, 2, dtype="u4", category=Category.TARGET, label="feedback")
        self._depth = dev.renderbuffer(size, depth=True, label="feedback.depth")
        self._fbo = dev.framebuffer([self._color], self._depth, label="feedback.fbo")
        self.size = size
        return self._fbo

    def _release_target(self) -> None:
        for obj in (self._fbo, self._depth, self._color):
            self.device.release(obj)
        self._fbo = self._depth = self._color = None

    # ------------------------------------------------------------------ per frame
    def render(self, scene: Scene, render_size: tuple[int, int], frame: int) -> bool:
        """Draw the feedback pass for the frame `scene` shows at `render_size` and start its
        asynchronous readback. False (nothing drawn) when every ring buffer is in flight."""
        if not self._ring.has_free():
            self.skipped += 1
            log.debug("feedback frame %d skipped: all %d readbacks in flight", frame,
                      self._ring.in_flight())
            return False
        size = feedback_size(render_size, self.scale, self.min_size)
        fbo = self._ensure_target(size)
        fbo.use()
        fbo.clear(0, 0, 0, 0, depth=1.0)  # 0 = no texture (see feedback.frag.glsl)
        downscale = (render_size[0] / size[0], render_size[1] / size[1])
        if self._batch is not None:
            count = self._render_batched(scene, render_size, downscale)
        else:
            count = self._render_instances(scene, render_size, downscale)
        self._ring.start(fbo, size, PIXEL_BYTES // 4, frame, tag=count)
        return True

    def _render_batched(self, scene: Scene, render_size: tuple[int, int],
                        downscale: tuple[float, float]) -> int:
        """Every object in one multi-draw: ids and chain sizes come from the object and
        texture rows. Returns the texture count the image can name."""
        prog = self._batch_prog
        view_proj = view_projection(scene, render_size)
        if "u_view_proj" in prog:
            prog["u_view_proj"].write(view_proj.to_bytes())
        if "u_downscale" in prog:
            prog["u_downscale"].value = downscale
        self.device.set_state(depth_test=True)
        objects = scene.objects
        self._batch.draw(objects, prog, mat_to_numpy(view_proj))
        albedo = objects.texture_ids[:, 0] if objects.count else np.zeros(0, np.int32)
        return int(albedo.max()) + 1 if len(albedo) and albedo.max() >= 0 else 0

    def _render_instances(self, scene: Scene, render_size: tuple[int, int],
                          downscale: tuple[float, float]) -> int:
        assert self._pass is not None
        self._pass.set("u_downscale", downscale)
        count = 0
        chain: dict[int, tuple[float, float]] = {}

        def material_uniforms(m: Material) -> None:
            nonlocal count
            tid = m.albedo
            self._pass.set("u_texture_id", tid + 1 if tid >= 0 else 0)
            if tid >= 0:
                if tid not in chain:
                    res = self.provider.residency(tid)
                    chain[tid] = (float(res.chain_width), float(res.chain_height))
                self._pass.set("u_chain_size", chain[tid])
                count = max(count, tid + 1)

        self._pass.draw(scene, view_projection(scene, render_size), material_uniforms)
        return count

    def poll(self) -> np.ndarray | None:
        """The newest finished feedback, reduced per texture (float levels, +inf for textures
        no pixel showed), or None when no readback has finished since the last poll. Never
        waits. `latest_frame` says which frame the result was rendered in."""
        got = self._ring.poll()
        if got is None:
            return None
        self.latest_frame = got.frame
        return reduce_feedback(got.image, got.tag)

    def frame_step(self, frame: int, scene: Scene, render_size: tuple[int, int]
                   ) -> np.ndarray | None:
        """The frame loop's call, before the provider plans the frame: returns the newest
        finished feedback (None if none finished), then runs the pass on every `every`-th
        frame. The loop hands the result to a provider that takes feedback."""
        mips = self.poll()
        if frame % self.every == 0:
            self.render(scene, render_size, frame)
        return mips

    def release(self) -> None:
        self._ring.release()
        self._release_target()
        if self._pass is not None:
            self._pass.release()
        if self._batch is not None:
            self._batch.release()
            self._batch = None
        self._batch_prog = None
