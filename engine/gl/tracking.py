"""A tracking wrapper of a user's moderngl context.

Apps that embed the engine keep making their own moderngl objects. Wrapping their context
puts those objects in the same ledger (category 'user') and the same leak checks, without
changing their code: `ctx = TrackedContext(ctx, device)` and carry on.
"""
from __future__ import annotations

from typing import Any

from .device import mgl_texel_bytes

_ZERO_BYTE = {"framebuffer", "simple_framebuffer", "program", "vertex_array",
              "simple_vertex_array", "sampler", "compute_shader"}


def _texture_bytes(obj: Any) -> int:
    w, h = obj.size[:2]
    depth = obj.size[2] if len(obj.size) > 2 else getattr(obj, "layers", 1)
    comps = getattr(obj, "components", 4)
    dtype = getattr(obj, "dtype", "f1")
    samples = max(1, getattr(obj, "samples", 0))
    faces = 6 if type(obj).__name__ == "TextureCube" else 1
    return mgl_texel_bytes(comps, dtype) * w * h * max(1, depth) * faces * samples


class TrackedContext:
    """Proxy of a moderngl.Context whose factories register what they make."""

    def __init__(self, ctx: Any, device: Any, category: str = "user") -> None:
        self._ctx = ctx
        self._device = device
        self._category = category

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._ctx, name)
        if not callable(attr) or name not in _FACTORIES:
            return attr

        def make(*args: Any, **kwargs: Any) -> Any:
            obj = attr(*args, **kwargs)
            kind, nbytes = _FACTORIES[name](obj)
            self._device.track_user_object(obj, kind, nbytes, f"user {name} #{obj.glo}",
                                           self._category)
            return obj
        return make


def _sized(kind: str, size_fn):
    return lambda obj: (kind, size_fn(obj))


_FACTORIES = {
    "texture": _sized("texture", _texture_bytes),
    "texture_array": _sized("texture", _texture_bytes),
    "texture_cube": _sized("texture", _texture_bytes),
    "texture3d": _sized("texture", _texture_bytes),
    "depth_texture": _sized("texture", lambda o: o.size[0] * o.size[1] * 4),
    "renderbuffer": _sized("renderbuffer", _texture_bytes),
    "depth_renderbuffer": _sized("renderbuffer",
                                 lambda o: o.size[0] * o.size[1] * 4 * max(1, o.samples)),
    "buffer": _sized("buffer", lambda o: o.size),
    **{name: _sized(name.replace("simple_", ""), lambda o: 0) for name in _ZERO_BYTE},
}
