"""Forward renderer: scene -> HDR targets at render resolution -> tone-mapped output.

The scene pass lights in linear space into an RGBA16F target sized by the render scale (the
`RenderTargetSet` reallocates it when memory asks for a smaller scale). The present pass maps
HDR to display: it tone-maps and sRGB-encodes into an 8-bit output at output resolution. With
plain bilinear upscaling both happen in one pass (no intermediate target, so lowering the scale
really saves memory); an edge-aware upscaler (FSR) wants tone-mapped input, so then the
tone-mapped image goes through an LDR target at render resolution first.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pyglm import glm

from ..gl import shaders
from ..gl.bindless import bindless_supported
from ..gl.device import Device
from ..gl.indirect import batched_frame_supported
from ..gl.timing import GpuTimer
from ..resolution.targets import RenderTargetSet, ResizeEvent, default_targets_spec
from ..resolution.targets_spec import TargetSpec, TargetsSpec
from ..streaming.contract import (
    FrameView,
    TextureProvider,
    VirtualTextureHost,
    VirtualTextures,
)
from .batch import (
    BatchedPass,
    TextureMode,
    batched_source,
    provider_gives_textures,
    virtual_slots,
)
from .camera import mat_to_numpy
from .material import Material
from .scene import MAX_POINT_LIGHTS, Scene
from .vt_feedback import VtFeedbackPass, feedback_specs, vt_feedback_size

log = logging.getLogger(__name__)

ViewMode = Literal["lit", "mip"]
RenderPath = Literal["per_object", "batched"]


@dataclass
class RendererSettings:
    """How the scene pass submits its objects.

    `path`: "batched" (default) writes every object's data in one buffer write and draws with
    indirect multi-draws (engine/render/batch.py); "per_object" is the old loop of uniform
    writes and one draw call per object, kept as the benchmark baseline and for drivers
    without indirect draws. `force_bound`: use the bound-texture fallback of the batched path
    even where bindless textures exist (both must give the same picture). The GPU time of
    each frame comes from GL timer queries, read a few frames late
    (`frame_stats()["gpu_ms"]`); the fade-in clamp uses ARB_sparse_texture_clamp's
    textureClampARB where the driver has it."""

    path: RenderPath = "batched"
    force_bound: bool = False
    #: fade-in clamp in the shader: None = where needed (bindless; bound textures keep the
    #: sampler's own min LOD), True = always (tests compare it with the sampler's clamp)
    shader_lod_clamp: bool | None = None
    cull: bool = True
    #: render-size fraction of the virtual-texture feedback pass (scenes with virtual
    #: textures only; 1/4 .. 1/8: docs/virtual_texturing.md)
    vt_feedback_scale: float = 0.25


def choose_path(settings: RendererSettings, batched_available: bool) -> RenderPath:
    return "batched" if settings.path == "batched" and batched_available else "per_object"


def choose_texture_mode(settings: RendererSettings, bindless_available: bool,
                        provider_ok: bool = True) -> TextureMode:
    """Bindless where the driver has it, unless forced off (or the provider's textures
    cannot take handles); else the bound fallback."""
    if bindless_available and provider_ok and not settings.force_bound:
        return "bindless"
    return "bound"
_UNITS = {"albedo": 0, "normal": 1, "roughness_metal": 2}
_HAS_FLAGS = {"albedo": "u_has_albedo", "normal": "u_has_normal", "roughness_metal": "u_has_rm"}
_VT_FLAGS = {"albedo": "u_albedo_vt", "normal": "u_normal_vt", "roughness_metal": "u_rm_vt"}
# Units of vt_sample's samplers (engine.streaming.virtual.system PROXY/CACHE/TABLE_UNIT),
# set even without virtual textures: samplers of different types left on unit 0 beside
# u_albedo_tex would make every draw an error.
_VT_UNITS = {"u_vt_lod_proxy": 13, "u_vt_cache": 14, "u_vt_table": 15}


_UNSET = object()


class _Program:
    """A program plus the names of its active uniforms (the compiler drops unused ones, and
    setting a dropped uniform must be a no-op rather than a KeyError), and the last value
    written to each: a uniform keeps its value in the program, so rewriting an equal one is
    wasted work (measured on the H200: uniform writes were most of a frame's CPU time)."""

    def __init__(self, prog: Any) -> None:
        self.prog = prog
        self.names = set(self.prog)
        self._last: dict[str, object] = {}

    @classmethod
    def shared(cls, device: Device, label: str, vertex_shader: str,
               fragment_shader: str) -> _Program:
        """The device's program of these sources (`Device.shared_program`) with its uniform
        values: every renderer on the device writes through the same record."""
        prog = device.shared_program(vertex_shader=vertex_shader,
                                     fragment_shader=fragment_shader, label=label)
        return device.prepared(("_Program", id(prog)), lambda: cls(prog))

    @classmethod
    def load(cls, device: Device, label: str, vertex: str, fragment: str) -> _Program:
        return cls.shared(device, label, shaders.load(vertex), shaders.load(fragment))

    def set(self, name: str, value) -> None:
        if name not in self.names:
            return
        if isinstance(value, (glm.mat4, glm.mat3)):
            value = value.to_bytes()
        elif isinstance(value, np.ndarray):
            value = value.astype(np.float32).tobytes()
        if self._last.get(name, _UNSET) == value:
            return
        self._last[name] = value
        if isinstance(value, bytes):
            self.prog[name].write(value)
        else:
            self.prog[name].value = value


class Renderer:
    """Draws a Scene with textures from a TextureProvider. One per device and output."""

    def __init__(self, device: Device, provider: TextureProvider,
                 output_size: tuple[int, int], *, scale: float = 1.0,
                 upscale: str = "bilinear", targets_spec: TargetsSpec | None = None,
                 exposure: float = 1.0, settings: RendererSettings | None = None) -> None:
        self.device = device
        self.settings = settings or RendererSettings()
        self.provider = provider
        self.upscale = upscale
        self.exposure = exposure
        self._tonemap = True  # the scene's choice, read by render() for present()
        self.view_mode: ViewMode = "lit"
        self._made: list = []
        try:
            self.targets = RenderTargetSet(device, targets_spec or default_targets_spec(),
                                           output_size, scale, label="scene")
            self._forward = _Program.load(device, "forward", "forward.vert.glsl",
                                          "forward.frag.glsl")
            self._present = _Program.load(device, "present", "fullscreen.vert.glsl",
                                          "present.frag.glsl")
            self._fullscreen = self._keep_gl(device.vertex_array(self._present.prog, [],
                                                                 label="fullscreen"))
            self._output_tex, self._output_fbo = self._make_output(output_size)
            self.path: RenderPath = choose_path(self.settings, batched_frame_supported(device))
            if self.path != self.settings.path:
                log.info("renderer: a draw per object (the driver lacks %s)",
                         ", ".join(device.profile.missing[:5]))
            self.texture_mode: TextureMode | None = None
            self._batch: BatchedPass | None = None
            self._batched: _Program | None = None
            if self.path == "batched":
                self._setup_batched()
            self.timer: GpuTimer | None = GpuTimer(device)
        except BaseException:
            self.release()
            raise
        self._frame = 0
        self._cpu_ms = 0.0
        self._t_render = 0.0
        self._ldr: tuple[Any, Any] | None = None
        self._upscaler = None
        self._vt_pass: VtFeedbackPass | None = None

    # ------------------------------------------------------------------ construction helpers
    def _keep_gl(self, obj):
        self._made.append(obj)
        return obj

    def _make_output(self, size: tuple[int, int]):
        tex = self.device.texture(size, 4, category="target", label="output")
        try:
            fbo = self.device.framebuffer([tex], label="output.fbo")
        except BaseException:
            self.device.release(tex)
            raise
        return tex, fbo

    def _setup_batched(self) -> None:
        bindless = bindless_supported(self.device)
        self.texture_mode = choose_texture_mode(self.settings, bindless,
                                                provider_gives_textures(self.provider))
        use_bindless = self.texture_mode == "bindless"
        clamp_ext = "GL_ARB_sparse_texture_clamp" in self.device.caps.extensions
        self._batched_flags = (use_bindless, clamp_ext)
        self._batched_variants: dict[int, _Program] = {}
        self._vt_slots_key: tuple | None = None
        self._vt_slots = 0
        self._vt_objects = np.zeros(0, bool)
        self._batched = self._batched_program(0)
        self._batch = BatchedPass(self.device, self.provider, mode=self.texture_mode,
                                  shader_clamp=self.settings.shader_lod_clamp)
        log.info("renderer: batched path, %s textures", self.texture_mode)

    def _batched_program(self, vt_slots: int) -> _Program:
        """The batched forward program for a set of slots that may be virtual (VT_SLOTS),
        compiled the first time a scene needs it: a scene without virtual textures runs the
        program it always ran."""
        prog = self._batched_variants.get(vt_slots)
        if prog is None:
            use_bindless, clamp_ext = self._batched_flags
            prog = self._batched_variants[vt_slots] = _Program.shared(
                self.device, f"forward.batched.{self.texture_mode}.vt{vt_slots}",
                batched_source("forward.batched.vert.glsl", use_bindless),
                batched_source("forward.batched.frag.glsl", use_bindless, clamp_ext, vt_slots))
        return prog

    # ------------------------------------------------------------------ properties
    @property
    def output_size(self) -> tuple[int, int]:
        return self.targets.output_size

    @property
    def render_size(self) -> tuple[int, int]:
        return self.targets.render_size

    @property
    def render_scale(self) -> float:
        return self.targets.scale

    @property
    def output_fbo(self) -> Any:
        """The final 8-bit display image (what the HUD draws over and the window shows)."""
        return self._output_fbo

    # ------------------------------------------------------------------ memory of the targets
    @property
    def cost_spec(self) -> TargetsSpec:
        """Every render target this renderer holds, as the resolution controller must price
        them: the scene targets, with the FSR upscaler its tone-mapped input (render
        size) and its EASU intermediate (output size), and with virtual textures the tile
        feedback pass's target and readbacks. Priced at every scale, although at scale 1.0
        the upscaler is bypassed: conservative, never over the budget."""
        extra: tuple[TargetSpec, ...] = ()
        if self.upscale != "bilinear":
            extra += (TargetSpec("ldr", "RGBA8"), TargetSpec("easu", "RGBA8",
                                                             follows_scale=False))
        if self._draws_vt_feedback():
            extra += feedback_specs(self.settings.vt_feedback_scale,
                                    self.device.profile.feedback_reduce == "gpu")
        return TargetsSpec(self.targets.spec.targets + extra) if extra else self.targets.spec

    @property
    def target_bytes(self) -> int:
        """Bytes of every render target held now (what `cost_spec` prices)."""
        held = self.targets.nbytes
        if self._ldr is not None:
            held += self._ldr[0].width * self._ldr[0].height * 4
        if self._upscaler is not None:
            held += self._upscaler.nbytes
        vts = self._virtual_system()
        if self._vt_pass and vts is not None:
            held += vts.feedback_bytes()
        return held

    # ------------------------------------------------------------------ resizing
    def set_scale(self, scale: float, release_first: bool = False) -> ResizeEvent:
        """Reallocate the scene targets at a new render scale (memory pressure). The
        upscaler's input follows: with release_first it goes first too, so nothing old
        outlives the decision that there is no room for old and new together."""
        if release_first:
            self._drop_ldr()
        event = self.targets.resize(scale, release_first=release_first)
        self._drop_ldr()
        vts = self._virtual_system()
        if self._vt_pass and vts is not None and not event.failed:
            self._vt_pass.resize(vts, self.output_size, self.render_scale)
        return event

    def set_output_size(self, size: tuple[int, int]) -> None:
        """The window changed size."""
        if tuple(size) == self.output_size:
            return
        self.targets.set_output_size(*size)
        self.device.release(self._output_fbo)
        self.device.release(self._output_tex)
        self._output_tex, self._output_fbo = self._make_output(size)
        self._drop_ldr()

    # ------------------------------------------------------------------ per frame
    def frame_view(self, scene: Scene, frame: int, time: float) -> FrameView:
        """What the texture provider needs to know about this frame."""
        w, h = self.render_size
        cam = scene.camera
        centers, radii, density, ids = scene.frame_arrays()
        return FrameView(frame=frame, time=time, camera_pos=np.array(tuple(cam.position),
                                                                     np.float32),
                         view=mat_to_numpy(cam.view_matrix()),
                         proj=mat_to_numpy(cam.proj_matrix(w / h)), fovy=cam.fovy,
                         viewport=(w, h), render_scale=self.render_scale, centers=centers,
                         radii=radii, uv_density=density, texture_ids=ids)

    def reserve(self, scene: Scene) -> None:
        """Make now the per-frame memory the next frames of `scene` can need (the batched
        path's frame ring at every object visible, its geometry, the meshes' own buffers
        where objects are drawn one at a time, and the virtual-texture feedback pass with its
        target and readbacks): called before the governor splits the budget, so it is fixed
        memory in the split, never a surprise mid-frame."""
        textures = self.provider.stats().textures
        if self._batch is not None:
            self._batch.reserve(scene.objects, textures)
        vts = self._virtual_system()
        vt_pass = self._feedback_pass() if vts is not None else None
        if vt_pass is not None:
            vt_pass.reserve(vts, scene.objects, textures, self.output_size, self.render_scale)
        if self._batch is None or (vt_pass is not None and vt_pass.objects is not None):
            for mesh in scene.meshes:  # the per-object draws use each mesh's own buffers
                mesh.prepare()

    def render(self, scene: Scene) -> None:
        """The scene pass into the HDR targets (GPU time measured from here to the end of
        `present`)."""
        self._t_render = time.perf_counter()
        self._tonemap = scene.tonemap
        if self.timer is not None:
            self.timer.begin(self._frame)
        fbo = self.targets.fbo
        fbo.use()
        fbo.clear(*scene.clear_color, 1.0, depth=1.0)
        self.device.set_state(depth_test=True)
        vts = self._virtual_system()
        if self.path == "batched":
            self._render_batched(scene, vts)
        else:
            self._render_per_object(scene, vts)
        if self.targets.msaa > 1:
            self.targets.resolve()
        if vts is not None:
            self._vt_feedback(scene, vts)
        self._cpu_ms = (time.perf_counter() - self._t_render) * 1000.0

    # ------------------------------------------------------------------ virtual textures
    def _virtual_system(self) -> VirtualTextures | None:
        """The provider's virtual texture system when some of its ids are virtual."""
        p = self.provider
        return p.virtual_system() if isinstance(p, VirtualTextureHost) else None

    def _vt_feedback(self, scene: Scene, vts: VirtualTextures) -> None:
        """The tile feedback pass (vt_feedback.py), after the scene pass: its readback is
        polled by the system's next begin_frame."""
        vt_pass = self._feedback_pass()
        if vt_pass.size != vt_feedback_size(self.output_size, self.render_scale,
                                            vt_pass.scale):
            # drawn without `reserve` (a caller outside the frame loop)
            vt_pass.reserve(vts, scene.objects, self.provider.stats().textures,
                            self.output_size, self.render_scale)
        view_proj = self._view_proj(scene)
        vt_pass.render(vts, scene, self.render_size, mat_to_numpy(view_proj),
                       view_proj.to_bytes(), self._frame)

    def _draws_vt_feedback(self) -> bool:
        """Whether this renderer draws the tile feedback pass (its provider has virtual
        textures: every driver has a path for it)."""
        return self._virtual_system() is not None

    def _feedback_pass(self) -> VtFeedbackPass:
        """The tile feedback pass, made the first time it is asked for."""
        if self._vt_pass is None:
            self._vt_pass = VtFeedbackPass(self.device, self.provider,
                                           self.settings.vt_feedback_scale)
        return self._vt_pass

    def _view_proj(self, scene: Scene) -> glm.mat4:
        w, h = self.render_size
        cam = scene.camera
        return cam.proj_matrix(w / h) * cam.view_matrix()

    def _set_frame_uniforms(self, p: _Program, scene: Scene, view_proj: glm.mat4) -> None:
        p.set("u_view_proj", view_proj)
        p.set("u_camera_pos", tuple(scene.camera.position))
        self._set_lights(p, scene)
        p.set("u_view_mode", 1 if self.view_mode == "mip" else 0)
        for slot, unit in _UNITS.items():
            p.set({"albedo": "u_albedo_tex", "normal": "u_normal_tex",
                   "roughness_metal": "u_rm_tex"}[slot], unit)
        for name, unit in _VT_UNITS.items():
            p.set(name, unit)

    def _render_batched(self, scene: Scene, vts: VirtualTextures | None = None) -> None:
        """Every object in one buffer write and one multi-draw (bindless) or one per texture
        set (bound): see batch.py. Virtual textures' ids carry their vt id in the texture
        rows; the page cache, table and LOD proxy are bound once here."""
        assert self._batch is not None and self._batched is not None
        view_proj = self._view_proj(scene)
        self._set_frame_uniforms(self._batched, scene, view_proj)
        vt_prog = vt_objects = None
        if vts is not None:
            # objects with a virtual texture are drawn with a program that has vt_sample
            # code for the slots they need; the others with the plain one
            objects = scene.objects
            ids = self.provider.virtual_ids()
            key = (objects.version, ids.tobytes())
            if key != self._vt_slots_key:
                self._vt_slots_key = key
                self._vt_slots = virtual_slots(objects.texture_ids, ids)
                lut = np.append(np.asarray(ids), -1)
                tex = objects.texture_ids
                self._vt_objects = (lut[np.where(tex >= 0, tex, -1)] >= 0).any(axis=1) \
                    if len(tex) else np.zeros(0, bool)
            if self._vt_slots:
                vt_prog = self._batched_program(self._vt_slots)
                self._set_frame_uniforms(vt_prog, scene, view_proj)
                vts.bind(vt_prog.prog)
                vt_objects = self._vt_objects
        self._batch.draw(scene.objects, self._batched.prog, mat_to_numpy(view_proj),
                         vt_program=vt_prog.prog if vt_prog is not None else None,
                         vt_objects=vt_objects, cull=self.settings.cull)

    def _render_per_object(self, scene: Scene,
                           vts: VirtualTextures | None = None) -> None:
        """The old path: uniforms and a draw call per object (the benchmark baseline).
        Materials with a virtual texture are drawn with a variant compiled with vt_sample
        (VT_SLOTS); the others keep the plain program (llvmpipe would run the page-cache
        code of a branch for every pixel: measured 131 -> 166 ms a frame on the gallery
        when the plain program carried it)."""
        plain = self._forward
        view_proj = self._view_proj(scene)
        self._set_frame_uniforms(plain, scene, view_proj)
        self._vt_of = None
        vt_p: _Program | None = None
        if vts is not None:
            self._vt_of = self.provider.virtual_ids()
            vt_p = self._forward_vt_program()
            self._set_frame_uniforms(vt_p, scene, view_proj)
            vts.bind(vt_p.prog)
        bound: Material | None = None
        bound_p: _Program | None = None
        for inst in scene.instances:
            m = inst.material
            p = vt_p if vt_p is not None and self._is_virtual(m) else plain
            if m is not bound or p is not bound_p:
                self._set_material(m, p)
                bound, bound_p = m, p
            p.set("u_model", inst.model)
            p.set("u_normal_matrix", glm.mat3(glm.transpose(glm.inverse(inst.model))))
            inst.mesh.vertex_array(p.prog).render()

    def _set_lights(self, p: _Program, scene: Scene) -> None:
        sun = scene.sun
        p.set("u_sun_dir", tuple(glm.normalize(glm.vec3(sun.direction))))
        p.set("u_sun_color", tuple(c * sun.intensity for c in sun.color))
        p.set("u_ambient", scene.ambient)
        lights = scene.point_lights[:MAX_POINT_LIGHTS]
        pos = np.zeros((MAX_POINT_LIGHTS, 4), np.float32)
        col = np.zeros((MAX_POINT_LIGHTS, 3), np.float32)
        for i, light in enumerate(lights):
            pos[i] = (*light.position, light.range)
            col[i] = tuple(c * light.intensity for c in light.color)
        p.set("u_point_count", len(lights))
        p.set("u_point_pos", pos)
        p.set("u_point_color", col)

    def _forward_vt_program(self) -> _Program:
        """The per-object program with vt_sample code, compiled on first use."""
        prog = getattr(self, "_forward_vt", None)
        if prog is None:
            prog = self._forward_vt = _Program.shared(
                self.device, "forward.vt", shaders.load("forward.vert.glsl"),
                batched_source("forward.frag.glsl", False, False, 7))
        return prog

    def _is_virtual(self, m: Material) -> bool:
        vt_of = self._vt_of
        return vt_of is not None and any(0 <= t < len(vt_of) and vt_of[t] >= 0
                                         for t in m.texture_ids())

    def _set_material(self, m: Material, p: _Program | None = None) -> None:
        p = p or self._forward
        p.set("u_albedo_factor", m.albedo_factor)
        p.set("u_roughness", m.roughness)
        p.set("u_metalness", m.metalness)
        p.set("u_normal_scale", m.normal_scale)
        (a, b, c), (d, e, f) = m.uv_transform  # sent as the difference from the identity
        p.set("u_uv_row0_delta", (a - 1.0, b, c))
        p.set("u_uv_row1_delta", (d, e - 1.0, f))
        p.set("u_emissive", m.emissive)
        vt_of = getattr(self, "_vt_of", None)
        for slot, unit in _UNITS.items():
            tid = getattr(m, slot)
            p.set(_HAS_FLAGS[slot], tid >= 0)
            vt = int(vt_of[tid]) if vt_of is not None and 0 <= tid < len(vt_of) else -1
            p.set(_VT_FLAGS[slot], vt)
            if tid >= 0 and vt < 0:
                self.provider.bind(tid, unit)
        if m.albedo >= 0:
            res = self.provider.residency(m.albedo)
            p.set("u_albedo_chain_size", (float(res.chain_width), float(res.chain_height)))
            p.set("u_albedo_resident", float(res.base_level))

    def present(self) -> None:
        """Tone-map + sRGB-encode (and upscale) the HDR colour into the output."""
        t0 = time.perf_counter()
        self.device.set_state()
        p = self._present
        p.set("u_hdr", 0)
        p.set("u_exposure", self.exposure)
        p.set("u_tonemap", self._tonemap)
        if self.upscale == "bilinear" or self.render_size == self.output_size:
            self._tonemap_into(self._output_fbo)
        else:
            ldr_tex, ldr_fbo = self._ensure_ldr()
            self._tonemap_into(ldr_fbo)
            self._ensure_upscaler().present(ldr_tex, self.render_size, self._output_fbo,
                                            self.output_size)
        if self.timer is not None:
            self.timer.end()
        self._frame += 1
        self._cpu_ms += (time.perf_counter() - t0) * 1000.0

    def frame_stats(self) -> dict:
        """This renderer's share of the last frame, for the per-frame report and the HUD:
        `render_cpu_ms` (render + present on the CPU, no GPU wait), `gpu_ms` (GL timer query
        of the newest frame the GPU has finished, a few frames old; None until one has),
        the path, draw calls and bytes written. The frame loop's own `cpu_ms` is its frame
        time up to (not including) its wait for the GPU."""
        out: dict = {"render_path": self.path, "render_cpu_ms": self._cpu_ms,
                     "gpu_ms": None, "texture_mode": self.texture_mode}
        if self.timer is not None:
            self.timer.poll()
            out["gpu_ms"] = self.timer.latest_ms
        if self._batch is not None:
            st = self._batch.stats
            out.update(draw_calls=st.draw_calls, visible_objects=st.visible,
                       texture_binds=st.texture_binds, object_bytes=st.bytes_written,
                       texture_handles=st.handles, ring_waits=self._batch.ring.waits)
        return out

    def _tonemap_into(self, fbo: Any) -> None:
        fbo.use()
        self.targets.color.use(0)
        self._fullscreen.render(vertices=3)

    def _ensure_ldr(self) -> tuple[Any, Any]:
        if self._ldr is None:
            tex = self.device.texture(self.render_size, 4, category="target", label="ldr")
            try:
                self._ldr = (tex, self.device.framebuffer([tex], label="ldr.fbo"))
            except BaseException:
                self.device.release(tex)
                raise
        return self._ldr

    def _drop_ldr(self) -> None:
        if self._ldr is not None:
            self.device.release(self._ldr[1])
            self.device.release(self._ldr[0])
            self._ldr = None

    def _ensure_upscaler(self):
        if self._upscaler is None:
            from ..resolution.upscale import Upscaler
            self._upscaler = Upscaler(self.device, mode=self.upscale)
        return self._upscaler

    def read_output(self, components: int = 3) -> np.ndarray:
        """The output image, top row first: (H, W, components) uint8."""
        w, h = self.output_size
        data = self._output_fbo.read(components=components, alignment=1)
        return np.frombuffer(data, np.uint8).reshape(h, w, components)[::-1].copy()

    def blit_to_screen(self) -> None:
        """Window mode: copy the output to the default framebuffer."""
        self.device.copy_framebuffer(None, self._output_fbo)

    def release(self) -> None:
        if getattr(self, "timer", None) is not None:
            self.timer.release()
            self.timer = None
        if getattr(self, "_batch", None) is not None:
            self._batch.release()
            self._batch = None
        if getattr(self, "_vt_pass", None):
            self._vt_pass.release()
        self._vt_pass = None
        if getattr(self, "_upscaler", None) is not None:
            self._upscaler.release()
            self._upscaler = None
        if getattr(self, "_ldr", None) is not None:
            self._drop_ldr()
        for name in ("_output_fbo", "_output_tex"):
            obj = self.__dict__.pop(name, None)
            if obj is not None:
                self.device.release(obj)
        for obj in reversed(self._made):
            self.device.release(obj)
        self._made.clear()
        targets = self.__dict__.pop("targets", None)
        if targets is not None:
            targets.release()
