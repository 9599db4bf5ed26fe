"""What the driver can do, asked once at start-up.

Compressed formats are judged by the driver itself: the extension (or core version) must
claim the format AND a 4x4 immutable texture of it must be creatable without a GL error.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..formats import BCN_FAMILIES, FORMATS, PixelFormat
from . import constants as K
from .profile import parse_glsl_version
from .raw import RawGL

log = logging.getLogger(__name__)

_NEVER_CORE = 10_000  # S3TC never entered core GL (patents); only extensions bring it
# Extensions that bring each compressed family (or the core version that includes it).
_FAMILY_SOURCES: dict[str, tuple[tuple[str, ...], int]] = {
    "BC1": (("GL_EXT_texture_compression_s3tc", "GL_EXT_texture_compression_dxt1"), _NEVER_CORE),
    "BC2": (("GL_EXT_texture_compression_s3tc", "GL_ANGLE_texture_compression_dxt3"), _NEVER_CORE),
    "BC3": (("GL_EXT_texture_compression_s3tc", "GL_ANGLE_texture_compression_dxt5"), _NEVER_CORE),
    "BC4": (("GL_ARB_texture_compression_rgtc", "GL_EXT_texture_compression_rgtc"), 300),
    "BC5": (("GL_ARB_texture_compression_rgtc", "GL_EXT_texture_compression_rgtc"), 300),
    "BC6H": (("GL_ARB_texture_compression_bptc",), 420),
    "BC7": (("GL_ARB_texture_compression_bptc",), 420),
}


@dataclass(frozen=True)
class Capabilities:
    renderer: str
    vendor: str
    gl_version: str
    version_code: int  # 450 for 4.5
    glsl_version: int  # 450 for GLSL 4.50
    extensions: frozenset[str]
    max_texture_size: int
    max_array_layers: int
    max_samples: int
    compressed: frozenset[str] = field(default_factory=frozenset)  # our format names
    sparse_texture: bool = False
    copy_image: bool = False
    buffer_storage: bool = False
    debug_output: bool = False
    texture_storage: bool = True
    memory_info: str | None = None

    def can_sample(self, fmt: PixelFormat) -> bool:
        return (not fmt.compressed) or fmt.name in self.compressed

    @property
    def compressed_families(self) -> list[str]:
        fams = {f.family for f in FORMATS if f.name in self.compressed}
        return [f for f in BCN_FAMILIES if f in fams]


def _claimed(fmt: PixelFormat, exts: frozenset[str], version: int) -> bool:
    names, core = _FAMILY_SOURCES[fmt.family]
    ok = version >= core or any(n in exts for n in names)
    if ok and fmt.srgb and fmt.family in ("BC1", "BC2", "BC3"):
        # sRGB S3TC comes from EXT_texture_sRGB (desktop) or its GLES cousins, never core.
        ok = any(e in exts for e in ("GL_EXT_texture_sRGB", "GL_EXT_texture_compression_s3tc_srgb",
                                     "GL_NV_sRGB_formats"))
    return ok


def _creatable(raw: RawGL, fmt: PixelFormat) -> bool:
    """Make a 4x4 immutable texture of the format and see whether GL complains."""
    while raw.glGetError():
        pass
    name = raw.gen_texture()
    prev = raw.get_int(K.TEXTURE_BINDING_2D)
    raw.glBindTexture(K.TEXTURE_2D, name)
    raw.glTexStorage2D(K.TEXTURE_2D, 1, fmt.gl_internal, 4, 4)
    err = raw.glGetError()
    raw.glBindTexture(K.TEXTURE_2D, prev)
    raw.delete_texture(name)
    while raw.glGetError():
        pass
    return err == K.NO_ERROR


_SHADING_LANGUAGE_VERSION = 0x8B8C


def _glsl_version(raw: RawGL, gl_version: int) -> int:
    text = raw.glGetString(_SHADING_LANGUAGE_VERSION) if raw.has("glGetString") else None
    return parse_glsl_version(text.decode("latin-1") if text else None, gl_version)


def detect(ctx, raw: RawGL) -> Capabilities:
    info = ctx.info
    exts = frozenset(ctx.extensions)
    version = int(ctx.version_code)
    compressed = frozenset(
        f.name for f in FORMATS
        if f.compressed and _claimed(f, exts, version) and _creatable(raw, f))
    memory_info = ("NVX" if "GL_NVX_gpu_memory_info" in exts
                   else "ATI" if "GL_ATI_meminfo" in exts else None)
    caps = Capabilities(
        renderer=str(info.get("GL_RENDERER", "")),
        vendor=str(info.get("GL_VENDOR", "")),
        gl_version=str(info.get("GL_VERSION", "")),
        version_code=version,
        glsl_version=_glsl_version(raw, version),
        extensions=exts,
        max_texture_size=raw.get_int(K.MAX_TEXTURE_SIZE),
        max_array_layers=raw.get_int(K.MAX_ARRAY_TEXTURE_LAYERS),
        max_samples=raw.get_int(K.MAX_SAMPLES),
        compressed=compressed,
        sparse_texture="GL_ARB_sparse_texture" in exts and raw.has("glTexPageCommitmentARB"),
        copy_image=(version >= 430 or "GL_ARB_copy_image" in exts) and raw.has("glCopyImageSubData"),
        buffer_storage=(version >= 440 or "GL_ARB_buffer_storage" in exts)
        and raw.has("glBufferStorage"),
        debug_output=(version >= 430 or "GL_KHR_debug" in exts) and raw.has("glObjectLabel"),
        texture_storage=raw.has("glTexStorage2D"),
        memory_info=memory_info,
    )
    log.debug("GL %s (GLSL %d) on %s; compressed: %s", caps.gl_version, caps.glsl_version,
              caps.renderer, ",".join(caps.compressed_families))
    return caps
