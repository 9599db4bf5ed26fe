"""Bindless texture handles (ARB_bindless_texture): textures without a bind per object.

The batched frame puts each object's texture handles in its per-object data, so one indirect
multi-draw samples thousands of different textures with no glBindTexture between them.

Two rules of the extension shape this module:
- A handle freezes its texture's sampler state: glTexParameter on a texture that has a handle
  is an error, for ever (handles are never deleted, only made non-resident). The streamer
  changes GL_TEXTURE_MIN_LOD (fade-in) and GL_TEXTURE_BASE_LEVEL (sparse) on its textures, so
  the handle is made not of the streamer's texture but of a *texture view* of it
  (ARB_texture_view): the view shares the storage (no memory of its own) and has its own,
  frozen, sampler state; the streamer keeps its parameters; the shader applies the min LOD
  clamp itself from the object data.
- A handle must not outlive its texture. Each handle is registered with the device as a
  tracked object of kind "texture_handle" (and its view as a "texture" of no bytes), and the
  device's release of the texture first makes the handle non-resident and deletes the view
  (a hook on the allocator's before-destroy), so the leak report counts live handles and a
  released texture never leaves one behind. A reallocated texture (the streamer's grow or
  shrink) is a new texture: it gets a new handle, made resident when the renderer first
  needs it, before any draw reads it; the old one goes with the old texture.
"""
from __future__ import annotations

import ctypes as C
import logging
from dataclasses import dataclass
from typing import Any

from . import constants as K
from .extensions import extensions, guarded, raw_of, register
from .textures import GpuTexture

log = logging.getLogger(__name__)

_VIEW_SIG = (None, (C.c_uint, C.c_uint, C.c_uint, C.c_uint, C.c_uint, C.c_uint, C.c_uint,
                    C.c_uint))


@dataclass(eq=False)
class TextureHandle:
    """One resident bindless handle of a view of `texture`."""

    value: int
    view_glo: int
    texture: GpuTexture
    label: str
    resident: bool = True


def bindless_supported(device: Any) -> bool:
    """ARB_bindless_texture and ARB_texture_view (views keep the streamer's texture
    parameters free) with their entry points."""
    exts = device.caps.extensions
    return ("GL_ARB_bindless_texture" in exts
            and (device.caps.version_code >= 430 or "GL_ARB_texture_view" in exts)
            and extensions(device).has("glGetTextureHandleARB", "glMakeTextureHandleResidentARB",
                                       "glMakeTextureHandleNonResidentARB")
            and _texture_view_fn(device) is not None)


def _texture_view_fn(device: Any):
    fn = getattr(device, "_frame_texture_view", None)
    if fn is None:
        try:
            addr = device.handle.loader("glTextureView")
        except Exception:  # noqa: BLE001 - a loader that raises for unknown names: absent
            addr = None
        fn = C.CFUNCTYPE(_VIEW_SIG[0], *_VIEW_SIG[1])(addr) if addr else False
        device._frame_texture_view = fn
    return fn or None


class BindlessTextures:
    """Handles of GpuTextures, made on first use, released before their textures."""

    def __init__(self, device: Any) -> None:
        if not bindless_supported(device):
            raise RuntimeError("bindless textures need ARB_bindless_texture and "
                               "ARB_texture_view")
        self.device = device
        self._ext = extensions(device)
        self._view = _texture_view_fn(device)
        self._by_tex: dict[int, TextureHandle] = {}  # id(GpuTexture) -> handle
        self.made = 0
        self.released = 0
        self._alloc = getattr(device, "_alloc", None)
        self._prev_hook = None
        if self._alloc is not None:
            self._prev_hook = self._alloc.before_destroy
            self._alloc.before_destroy = self._before_destroy
        else:  # the device before its refactor has no hook: handles are swept per frame
            log.info("device has no before-destroy hook; texture handles are swept per frame")

    # ------------------------------------------------------------------ handles
    def handle(self, tex: GpuTexture) -> int:
        """The resident handle of `tex` (made now if it has none)."""
        h = self._by_tex.get(id(tex))
        if h is not None and h.texture is tex:
            return h.value
        return self._make(tex).value

    def __len__(self) -> int:
        return len(self._by_tex)

    def _make(self, tex: GpuTexture) -> TextureHandle:
        raw, ext = raw_of(self.device), self._ext
        label = f"{tex.label}.handle"
        layers = tex.layers * tex.faces

        def make() -> TextureHandle:
            view = raw.gen_texture()
            self._view(view, tex.target, tex.glo, tex.fmt.gl_internal, 0, tex.levels, 0, layers)
            raw.glBindTexture(tex.target, view)
            raw.glTexParameteri(tex.target, K.TEXTURE_MIN_FILTER,
                                K.LINEAR_MIPMAP_LINEAR if tex.levels > 1 else K.LINEAR)
            raw.glTexParameteri(tex.target, K.TEXTURE_MAG_FILTER, K.LINEAR)
            raw.glBindTexture(tex.target, 0)
            value = int(ext.glGetTextureHandleARB(view))
            if not value:
                raw.delete_texture(view)
                raise RuntimeError(f"glGetTextureHandleARB gave no handle for '{tex.label}'")
            ext.glMakeTextureHandleResidentARB(C.c_uint64(value))
            return TextureHandle(value, view, tex, label)

        def destroy_made(h: TextureHandle) -> None:
            self._ext.glMakeTextureHandleNonResidentARB(C.c_uint64(h.value))
            raw.delete_texture(h.view_glo)

        h = guarded(self.device, f"texture handle '{label}'", 0, make, destroy_made)
        register(self.device, h, "texture_handle", "other", label, 0, h.view_glo,
                 lambda: self._destroy(h))
        old = self._by_tex.get(id(tex))
        self._by_tex[id(tex)] = h  # an id reused by a new texture: the new handle first
        if old is not None:
            self.device.release(old)
        self.made += 1
        return h

    def _destroy(self, h: TextureHandle) -> None:
        """Non-resident first (no draw may use it after this), then the view goes."""
        if h.resident:
            self._ext.glMakeTextureHandleNonResidentARB(C.c_uint64(h.value))
            h.resident = False
        raw_of(self.device).delete_texture(h.view_glo)
        if self._by_tex.get(id(h.texture)) is h:
            del self._by_tex[id(h.texture)]
        self.released += 1

    def _before_destroy(self, alloc, obj: Any) -> None:
        if isinstance(obj, GpuTexture):
            h = self._by_tex.get(id(obj))
            if h is not None and h.texture is obj:
                self.device.release(h)
        if self._prev_hook is not None:
            self._prev_hook(alloc, obj)

    def sweep(self) -> int:
        """Release handles whose texture is gone (devices without the release hook)."""
        dead = [h for h in self._by_tex.values() if h.texture.released]
        for h in dead:
            self.device.release(h)
        return len(dead)

    def release(self) -> None:
        for h in list(self._by_tex.values()):
            self.device.release(h)
        self._by_tex.clear()
        if self._alloc is not None and self._alloc.before_destroy == self._before_destroy:
            self._alloc.before_destroy = self._prev_hook
