"""The lesser drivers the engine is tested under, emulated on Mesa llvmpipe with its override
variables (MESA_GL_VERSION_OVERRIDE, MESA_GLSL_VERSION_OVERRIDE, MESA_EXTENSION_OVERRIDE).

Mesa facts these follow: removing GL_ARB_texture_compression_bptc alone drops the context to
GL 4.1 unless the versions are overridden too; removing RGTC crashes Mesa 22.3 at context
creation (so no profile removes it; RGTC is core since GL 3.0 anyway); Mesa keeps entry
points such as glTexStorage2D whatever is removed, so a real macOS driver can still differ.
"""
from __future__ import annotations

from dataclasses import dataclass

_MAC_REMOVED = ("GL_ARB_compute_shader", "GL_ARB_shader_storage_buffer_object",
                "GL_ARB_multi_draw_indirect", "GL_ARB_buffer_storage",
                "GL_ARB_texture_compression_bptc", "GL_ARB_sparse_texture",
                "GL_ARB_bindless_texture", "GL_ARB_shader_draw_parameters",
                "GL_ARB_base_instance")
_S3TC = ("GL_EXT_texture_compression_s3tc", "GL_EXT_texture_compression_s3tc_srgb",
         "GL_EXT_texture_compression_dxt1", "GL_ANGLE_texture_compression_dxt3",
         "GL_ANGLE_texture_compression_dxt5")


@dataclass(frozen=True)
class DriverProfile:
    name: str
    what: str
    gl: str  # MESA_GL_VERSION_OVERRIDE
    glsl: str  # MESA_GLSL_VERSION_OVERRIDE
    removed: tuple[str, ...] = ()
    #: what the engine must pick there
    draw_path: str = "batched"
    bc7_as: str = "BC7"

    def env(self) -> dict[str, str]:
        env = {"MESA_GL_VERSION_OVERRIDE": self.gl, "MESA_GLSL_VERSION_OVERRIDE": self.glsl}
        if self.removed:
            env["MESA_EXTENSION_OVERRIDE"] = " ".join(f"-{e}" for e in self.removed)
        return env


PROFILES: tuple[DriverProfile, ...] = (
    DriverProfile("gl41-mac", "GL 4.1 core, macOS-class: no compute, SSBO, MDI, buffer "
                  "storage, bindless, BPTC, sparse", "4.1", "410", _MAC_REMOVED,
                  "per_object", "BC3"),
    DriverProfile("gl33", "GL 3.3 core, the same removals", "3.3", "330", _MAC_REMOVED,
                  "per_object", "BC3"),
    DriverProfile("gl45-no-bptc", "GL 4.5 without BPTC", "4.5", "450",
                  ("GL_ARB_texture_compression_bptc",), "batched", "BC3"),
    DriverProfile("gl45-no-bptc-s3tc", "GL 4.5 without BPTC and S3TC", "4.5", "450",
                  ("GL_ARB_texture_compression_bptc",) + _S3TC, "batched", "RGBA8"),
    DriverProfile("gl43", "GL 4.3 with MDI, SSBO and draw parameters", "4.3", "430",
                  (), "batched", "BC7"),
)
BY_NAME = {p.name: p for p in PROFILES}
