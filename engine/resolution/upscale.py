"""The upscaler pass: render-resolution colour -> output resolution, drawn as one full-screen
triangle.

Modes:
  bilinear  four taps blended in the shader; the baseline.
  fsr       our implementation of AMD FidelityFX Super Resolution 1.0 from its published
            description: EASU (edge-adaptive upsampling, shaders/upscale_easu.glsl) into an
            intermediate at output size, then RCAS (contrast-adaptive sharpening,
            shaders/upscale_rcas.glsl) into the destination.

The input must be in display space (tone-mapped and sRGB-encoded, values in [0, 1]) as FSR 1
expects: its edge analysis works on perceptual luma and RCAS bounds its lobe by [0, 1]. So the
pipeline is scene (HDR, render res) -> tone map (render res) -> upscale (output res) -> UI.

The intermediate is a render target like any other: made through the device (category
"target", so the governor counts it) and reallocated only when the output size changes.
"""
from __future__ import annotations

import logging
from typing import TypeVar


from ..gl.device import Device
from ..gl.types import Framebuffer, Texture, VertexArray
from ..memory.ledger import Category
from ..memory.sizes import level_bytes
from ..gl import shaders

log = logging.getLogger(__name__)
_T = TypeVar("_T")

MODES = ("bilinear", "fsr")
#: AMD's suggested default: 0.2 stops below the strongest sharpening.
DEFAULT_SHARPNESS_STOPS = 0.2


class Upscaler:
    """Presents a source texture into (a viewport of) a destination framebuffer."""

    def __init__(self, device: Device, mode: str = "bilinear",
                 sharpness_stops: float = DEFAULT_SHARPNESS_STOPS,
                 label: str = "upscale") -> None:
        if mode not in MODES:
            raise ValueError(f"unknown upscale mode {mode!r}; choose one of {MODES}")
        if sharpness_stops < 0:
            raise ValueError(f"sharpness_stops must be >= 0 (0 = strongest), got "
                             f"{sharpness_stops}")
        self._device = device
        self.mode = mode
        self.sharpness_stops = float(sharpness_stops)
        self._label = label
        self._objects: list[object] = []  # programs and VAOs, released together
        self._intermediate: Texture | None = None
        self._intermediate_fbo: Framebuffer | None = None
        try:
            self._passes = [self._pass(name) for name in
                            (("bilinear",) if mode == "bilinear" else ("easu", "rcas"))]
        except Exception:
            self.release()
            raise

    @property
    def nbytes(self) -> int:
        """Bytes of the FSR intermediate (0 for bilinear, or before the first present)."""
        t = self._intermediate
        return level_bytes("RGBA8", *t.size) if t is not None else 0

    def present(self, src_texture: Texture, src_size: tuple[int, int],
                dst_fbo: Framebuffer, dst_size: tuple[int, int],
                viewport: tuple[int, int, int, int] | None = None) -> None:
        """Upscale the `src_size` region (from the origin) of `src_texture` onto `viewport`
        (x, y, w, h; default all of `dst_size`) of `dst_fbo`.

        A full-screen pass owns the pipeline state while it runs: depth test, blending and
        culling are switched off (passes set the state they need; none inherits it).
        """
        x, y, w, h = viewport if viewport is not None else (0, 0, *dst_size)
        if w < 1 or h < 1 or src_size[0] < 1 or src_size[1] < 1:
            raise ValueError(f"empty upscale: {src_size} -> viewport {(x, y, w, h)}")
        self._device.set_state()  # no depth test, blending or culling
        src_px = (int(src_size[0]), int(src_size[1]))
        if self.mode == "bilinear":
            self._draw(self._passes[0], src_texture, dst_fbo, (x, y, w, h), u_src_size=src_px)
            return
        easu, rcas = self._passes
        inter_fbo = self._intermediate_for((w, h))
        self._draw(easu, src_texture, inter_fbo, (0, 0, w, h), u_src_size=src_px)
        self._draw(rcas, self._intermediate, dst_fbo, (x, y, w, h),
                   u_sharpness=2.0 ** -self.sharpness_stops)

    def release(self) -> None:
        """Delete every GL object the upscaler made (safe to call twice)."""
        self._release_intermediate()
        for obj in reversed(self._objects):
            self._device.release(obj)
        self._objects.clear()

    # -- internals -------------------------------------------------------------------------------
    def _own(self, obj: _T) -> _T:
        self._objects.append(obj)
        return obj

    def _pass(self, name: str) -> VertexArray:
        """Program + buffer-less VAO of one pass (the triangle comes from gl_VertexID)."""
        prog = self._device.shared_program(
            vertex_shader=shaders.load("fullscreen.vert.glsl"),
            fragment_shader=shaders.load(f"upscale_{name}.glsl"),
            label=f"{self._label}.{name}")
        return self._own(self._device.vertex_array(prog, [], label=f"{self._label}.{name}.vao"))

    def _draw(self, vao: VertexArray, src: Texture,
              fbo: Framebuffer, viewport: tuple[int, int, int, int],
              **uniforms) -> None:
        prog = vao.program
        fbo.use()
        self._device.set_viewport(viewport)
        src.use(0)
        prog["u_src"] = 0
        prog["u_dst_origin"] = (float(viewport[0]), float(viewport[1]))
        if "u_dst_size" in prog:
            prog["u_dst_size"] = (float(viewport[2]), float(viewport[3]))
        for name, value in uniforms.items():
            prog[name] = value
        vao.render(vertices=3)

    def _intermediate_for(self, size: tuple[int, int]) -> Framebuffer:
        """EASU's output at `size`; reallocated (old released first: it is scratch) on change.
        RGBA8 because the data is display-encoded 8-bit anyway and memory is the point."""
        if self._intermediate is not None and self._intermediate.size == size:
            return self._intermediate_fbo
        self._release_intermediate()
        self._intermediate = self._device.texture(size, 4, category=Category.TARGET,
                                                  label=f"{self._label}.easu")
        try:
            self._intermediate_fbo = self._device.framebuffer(
                [self._intermediate], label=f"{self._label}.easu_fbo")
        except Exception:
            self._release_intermediate()
            raise
        log.debug("'%s': EASU intermediate %dx%d", self._label, *size)
        return self._intermediate_fbo

    def _release_intermediate(self) -> None:
        self._device.release(self._intermediate_fbo)
        self._device.release(self._intermediate)
        self._intermediate_fbo = self._intermediate = None
