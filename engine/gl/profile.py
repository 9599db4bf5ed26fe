"""One capability profile per device: which paths and formats this driver gets.

Decided once, at device creation, from the context's GL and GLSL versions and its
extensions (never by trying and failing): the draw path (batched indirect multi-draws with
shader storage, or a draw call per object), the virtual-texture feedback path (the same
choice), compute (the GPU encoder; the feedback reduced on the GPU where compute runs on
a GPU, not in a software rasterizer), staging (a persistently mapped ring or plain uploads),
the shading-language version every shader is compiled at, and what each texture format is
served as. `decide` is pure and unit-tested without GL; `Device` keeps its result as
`device.profile` and logs it once.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from ..formats import FORMATS, PixelFormat
from ..textures.transcode import served_table

log = logging.getLogger(__name__)

Path = Literal["batched", "per_object"]

#: GLSL the batched frame's shaders need at least (shader storage blocks, std430).
BATCHED_GLSL = 430
#: GLSL of the compute encoders (`#version 430`).
COMPUTE_GLSL = 430


@dataclass(frozen=True)
class DeviceProfile:
    """What this device's driver gets. `missing` names each feature the full engine would
    use and this driver lacks (what a skipped test or a fallback names)."""

    gl_version: int  # 410 for 4.1
    glsl_version: int  # 410 for GLSL 4.10
    draw_path: Path
    feedback_path: Path
    compute: bool
    staging: Literal["persistent", "plain"]
    bindless: bool
    sparse: bool
    #: where the virtual-texture feedback image is reduced to unique keys: "gpu" (a compute
    #: pass, engine/gl/feedback_reduce.py) needs compute on a real GPU; a software rasterizer
    #: runs compute on the CPU, slower than the numpy reduction, so it keeps "cpu"
    feedback_reduce: Literal["gpu", "cpu"] = "cpu"
    #: a software rasterizer (llvmpipe): its draws run when something waits for them, and a
    #: wait inside a moderngl call holds the GIL for the whole rasterization
    software: bool = False
    #: source format -> the format it is held in on the GPU ("-": cannot be served)
    served: dict[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()

    def served_as(self, name: str) -> str:
        return self.served.get(name, name)

    @property
    def fallbacks(self) -> dict[str, str]:
        """Only the formats not served as themselves."""
        return {k: v for k, v in self.served.items() if v != k}

    def as_dict(self) -> dict[str, object]:
        return {"gl_version": self.gl_version, "glsl_version": self.glsl_version,
                "draw_path": self.draw_path, "feedback_path": self.feedback_path,
                "compute": self.compute, "staging": self.staging,
                "feedback_reduce": self.feedback_reduce, "software": self.software,
                "bindless": self.bindless,
                "sparse": self.sparse, "served": dict(self.served),
                "missing": list(self.missing)}


def _has(exts: frozenset[str], version: int, core: int, *names: str) -> bool:
    return version >= core or any(n in exts for n in names)


def decide(gl_version: int, glsl_version: int, extensions: Iterable[str],
           sampled: Callable[[PixelFormat], bool], *, entry_points: Callable[[str], bool],
           buffer_storage: bool, bindless: bool, sparse: bool,
           software: bool = False) -> DeviceProfile:
    """The profile of a driver. `sampled(fmt)`: whether it samples a format (the
    capabilities' judgement); `entry_points(name)`: whether the loader found a function;
    `software`: a software rasterizer (`software_renderer`)."""
    exts = frozenset(extensions)
    missing: list[str] = []
    need = {
        "GLSL 4.30": glsl_version >= BATCHED_GLSL,
        "ARB_multi_draw_indirect": _has(exts, gl_version, 430, "GL_ARB_multi_draw_indirect")
        and entry_points("glMultiDrawElementsIndirect"),
        "ARB_shader_storage_buffer_object": _has(exts, gl_version, 430,
                                                 "GL_ARB_shader_storage_buffer_object"),
        "ARB_shader_draw_parameters": _has(exts, gl_version, 460,
                                           "GL_ARB_shader_draw_parameters"),
        "ARB_base_instance": _has(exts, gl_version, 420, "GL_ARB_base_instance")
        and entry_points("glDrawElementsInstancedBaseVertexBaseInstance"),
        "glBindBufferRange": entry_points("glBindBufferRange"),
    }
    missing += [k for k, ok in need.items() if not ok]
    if glsl_version < 400:
        # textureQueryLod: below it virtual textures compute their LOD from the footprint
        # formula, which drivers round differently from their own trilinear filtering
        missing.insert(0, "GLSL 4.00")
    batched = all(need.values())
    compute = glsl_version >= COMPUTE_GLSL and _has(exts, gl_version, 430,
                                                   "GL_ARB_compute_shader") \
        and _has(exts, gl_version, 430, "GL_ARB_shader_storage_buffer_object")
    if not _has(exts, gl_version, 430, "GL_ARB_compute_shader"):
        missing.append("ARB_compute_shader")
    if not buffer_storage:
        missing.append("ARB_buffer_storage")
    if not bindless:
        missing.append("ARB_bindless_texture")
    if not sparse:
        missing.append("ARB_sparse_texture")
    names = [f.name for f in FORMATS if f.compressed]
    served = served_table(names, sampled)
    missing += [f"{n} sampling" for n in names if served[n] != n]
    path: Path = "batched" if batched else "per_object"
    return DeviceProfile(gl_version=gl_version, glsl_version=glsl_version, draw_path=path,
                         feedback_path=path, compute=compute,
                         staging="persistent" if buffer_storage else "plain",
                         feedback_reduce="gpu" if compute and not software else "cpu",
                         software=software,
                         bindless=bindless and batched, sparse=sparse, served=served,
                         missing=tuple(dict.fromkeys(missing)))


_VERSION = re.compile(r"(\d+)\.(\d+)")
_SOFTWARE = re.compile(r"llvmpipe|softpipe|swrast|software rasterizer", re.IGNORECASE)


def software_renderer(renderer: str) -> bool:
    """Whether GL_RENDERER names a software rasterizer (Mesa's llvmpipe, softpipe)."""
    return bool(_SOFTWARE.search(renderer))



def parse_glsl_version(text: str | None, gl_version: int) -> int:
    """GLSL version as 330/410/450 from GL_SHADING_LANGUAGE_VERSION ("4.50", "4.10 Mesa",
    "4.60 NVIDIA"); without one, the GL version's own (GL 3.3 and later match GLSL)."""
    m = _VERSION.search(text or "")
    if not m:
        return gl_version
    return int(m.group(1)) * 100 + int(m.group(2)[:2].ljust(2, "0"))


_VERSION_LINE = re.compile(r"^[ \t]*#version[ \t]+(\d+)([ \t]+\w+)?[ \t]*$", re.MULTILINE)


def at_version(source: str, glsl_version: int) -> str:
    """`source` compiled at the context's GLSL version where its own `#version` asks for
    more: a shader states the version it prefers and guards what needs it with
    `#if __VERSION__ >= ...`, so one source serves GLSL 3.30 to 4.60. A source asking for
    less keeps its own version (the picture of a full driver does not change)."""
    m = _VERSION_LINE.search(source)
    if m is None or int(m.group(1)) <= glsl_version:
        return source
    profile = m.group(2) or (" core" if glsl_version >= 150 else "")
    return source[:m.start()] + f"#version {glsl_version}{profile}" + source[m.end():]


def describe(p: DeviceProfile) -> str:
    """One line for the log: the paths and what is served in place of what."""
    fb = ", ".join(f"{k}->{v}" for k, v in sorted(p.fallbacks.items())) or "none"
    return (f"GL {p.gl_version // 100}.{p.gl_version % 100 // 10}, GLSL {p.glsl_version}; "
            f"draw {p.draw_path}, feedback {p.feedback_path}, compute "
            f"{'yes' if p.compute else 'no (CPU encoder)'}, feedback reduced on the "
            f"{p.feedback_reduce.upper()}, staging {p.staging}, bindless "
            f"{'yes' if p.bindless else 'no'}, sparse {'yes' if p.sparse else 'no'}; "
            f"formats served as others: {fb}")
