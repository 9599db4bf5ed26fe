"""Raw-GL probes run inside a Qt peer's process (napari's canvas context): what its driver
holds for it, where the peer's own bookkeeping sees only part. A lab raw-GL probe by design
(tests/layer_rules.py LAB_RAW_GL_PROBES): the engine's own bytes come from its ledger.
"""
from __future__ import annotations

from typing import Any

from .viewer_children import GL_TEXEL_BYTES


def query(get: Any, *args: Any) -> int:
    """One integer a GL getter (PyOpenGL) writes."""
    import numpy as np

    out = np.zeros(1, np.int32)
    get(*args, out)
    return int(out[0])


def qt_canvas_framebuffer(native: Any) -> dict[str, Any]:
    """The framebuffer a Qt GL canvas (a QOpenGLWidget) draws into, as its driver reports
    it: each attachment's size, internal format and samples, and their bytes (an image
    attached at two points counted once). napari's texture figure leaves this out, while
    the engine's ledger counts its own output target."""
    from OpenGL import GL

    native.makeCurrent()
    try:
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, native.defaultFramebufferObject())
        seen, parts = set(), []
        for point in (GL.GL_COLOR_ATTACHMENT0, GL.GL_DEPTH_ATTACHMENT, GL.GL_STENCIL_ATTACHMENT):
            kind = query(GL.glGetFramebufferAttachmentParameteriv, GL.GL_FRAMEBUFFER, point,
                         GL.GL_FRAMEBUFFER_ATTACHMENT_OBJECT_TYPE)
            if kind == GL.GL_NONE:
                continue
            name = query(GL.glGetFramebufferAttachmentParameteriv, GL.GL_FRAMEBUFFER, point,
                         GL.GL_FRAMEBUFFER_ATTACHMENT_OBJECT_NAME)
            if (kind, name) in seen:
                continue
            seen.add((kind, name))
            if kind == GL.GL_RENDERBUFFER:
                GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, name)
                w, h, fmt, samples = (query(GL.glGetRenderbufferParameteriv, GL.GL_RENDERBUFFER, p)
                                      for p in (GL.GL_RENDERBUFFER_WIDTH,
                                                GL.GL_RENDERBUFFER_HEIGHT,
                                                GL.GL_RENDERBUFFER_INTERNAL_FORMAT,
                                                GL.GL_RENDERBUFFER_SAMPLES))
            else:
                GL.glBindTexture(GL.GL_TEXTURE_2D, name)
                w, h, fmt, samples = (*(query(GL.glGetTexLevelParameteriv, GL.GL_TEXTURE_2D, 0, p)
                                        for p in (GL.GL_TEXTURE_WIDTH, GL.GL_TEXTURE_HEIGHT,
                                                  GL.GL_TEXTURE_INTERNAL_FORMAT)), 0)
            parts.append({"size": [w, h], "format": hex(fmt), "samples": samples,
                          "bytes": w * h * GL_TEXEL_BYTES.get(fmt, 4) * max(samples, 1)})
        return {"attachments": parts, "bytes": sum(p["bytes"] for p in parts)}
    finally:
        native.doneCurrent()


def gl_census(native: Any, misses: int = 4096) -> dict[str, int]:
    """Bytes of every texture, renderbuffer and buffer in a Qt GL canvas's share group (its
    own objects, and any its toolkit shares with it), as the driver reports them (GL 4.5
    direct state access): names are probed from 1 until `misses` in a row hold nothing
    (Mesa hands out names above the highest in use, so deleted objects leave gaps).
    Counts what a peer's own bookkeeping might miss."""
    from OpenGL import GL

    def texture_bytes(name: int) -> int:
        total = 0
        for level in range(16):
            w, h, d, fmt, samples, compressed = (
                query(GL.glGetTextureLevelParameteriv, name, level, p)
                for p in (GL.GL_TEXTURE_WIDTH, GL.GL_TEXTURE_HEIGHT, GL.GL_TEXTURE_DEPTH,
                          GL.GL_TEXTURE_INTERNAL_FORMAT, GL.GL_TEXTURE_SAMPLES,
                          GL.GL_TEXTURE_COMPRESSED))
            if not w:
                break
            total += (query(GL.glGetTextureLevelParameteriv, name, level,
                            GL.GL_TEXTURE_COMPRESSED_IMAGE_SIZE) if compressed
                      else w * h * d * GL_TEXEL_BYTES.get(fmt, 4) * max(samples, 1))
        return total

    def renderbuffer_bytes(name: int) -> int:
        w, h, fmt, samples = (query(GL.glGetNamedRenderbufferParameteriv, name, p)
                              for p in (GL.GL_RENDERBUFFER_WIDTH, GL.GL_RENDERBUFFER_HEIGHT,
                                        GL.GL_RENDERBUFFER_INTERNAL_FORMAT,
                                        GL.GL_RENDERBUFFER_SAMPLES))
        return w * h * GL_TEXEL_BYTES.get(fmt, 4) * max(samples, 1)

    kinds = {"textures": (GL.glIsTexture, texture_bytes),
             "renderbuffers": (GL.glIsRenderbuffer, renderbuffer_bytes),
             "buffers": (GL.glIsBuffer, lambda name: query(GL.glGetNamedBufferParameteriv,
                                                          name, GL.GL_BUFFER_SIZE))}
    native.makeCurrent()
    try:
        out: dict[str, int] = {}
        for kind, (exists, size) in kinds.items():
            total, name, missed = 0, 1, 0
            while missed < misses:
                if exists(name):
                    total, missed = total + size(name), 0
                else:
                    missed += 1
                name += 1
            out[kind] = total
        out["bytes"] = sum(out.values())
        return out
    finally:
        native.doneCurrent()
