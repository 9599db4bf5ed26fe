"""A tracking wrapper of a user's moderngl context.

Apps that embed the engine keep making their own moderngl objects. Wrapping their context
puts those objects in the same ledger (category 'user') and the same leak checks, without
changing their code: `ctx = TrackedContext(ctx, device)` and carry on.

The wrapper is meant to be indistinguishable from the context: every read, write and call goes
to the context (attribute writes included: `ctx.blend_func = ...` sets the context's state),
`isinstance(ctx, moderngl.Context)` holds, and the wrapper equals its context (so an object's
`.ctx`, which moderngl sets to the real context, compares equal to it). What it adds is only
bookkeeping: each factory that makes a GL object the app owns registers it, by a weak
reference, so moderngl's own garbage-collection modes (`gc_mode`) see the same object
lifetimes as without the wrapper. Objects are not labelled (a GL label is state the app can
read back). Objects that wrap memory the app does not own here (`external_buffer`,
`external_texture`, `detect_framebuffer`), objects without GL memory (`scope`,
`debug_scope`) and queries (moderngl gives them no `release`) pass through untracked.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from .device import mgl_texel_bytes


def _dims(obj: Any) -> tuple[int, int, int]:
    size = tuple(obj.size)
    depth = size[2] if len(size) > 2 else 1
    return int(size[0]), int(size[1]), int(depth)


def _texture_bytes(obj: Any, faces: int = 1) -> int:
    w, h, depth = _dims(obj)
    if getattr(obj, "depth", False):  # depth textures: 32-bit depth components
        texel = 4
    else:
        texel = mgl_texel_bytes(getattr(obj, "components", 4), getattr(obj, "dtype", "f1"))
    layers = getattr(obj, "layers", 1) if len(obj.size) == 2 else 1
    return texel * w * h * depth * max(1, layers) * faces * max(1, getattr(obj, "samples", 0))


def _renderbuffer_bytes(obj: Any) -> int:
    w, h = obj.size[:2]
    texel = 4 if getattr(obj, "depth", False) else mgl_texel_bytes(obj.components, obj.dtype)
    return texel * w * h * max(1, obj.samples)


#: factory name -> (kind, bytes of what it made)
_FACTORIES: dict[str, tuple[str, Callable[[Any], int]]] = {
    "texture": ("texture", _texture_bytes),
    "texture_array": ("texture", _texture_bytes),
    "texture3d": ("texture", _texture_bytes),
    "texture_cube": ("texture", lambda o: _texture_bytes(o, faces=6)),
    "depth_texture": ("texture", _texture_bytes),
    "depth_texture_cube": ("texture", lambda o: _texture_bytes(o, faces=6)),
    "renderbuffer": ("renderbuffer", _renderbuffer_bytes),
    "depth_renderbuffer": ("renderbuffer", _renderbuffer_bytes),
    "buffer": ("buffer", lambda o: int(o.size)),
    "framebuffer": ("framebuffer", lambda o: 0),
    # the renderbuffers moderngl makes for it, on the context itself
    "simple_framebuffer": ("framebuffer", lambda o: sum(
        _renderbuffer_bytes(a) for a in (*o.color_attachments, o.depth_attachment) if a)),
    "empty_framebuffer": ("framebuffer", lambda o: 0),
    "program": ("program", lambda o: 0),
    "vertex_array": ("vertex_array", lambda o: 0),
    "simple_vertex_array": ("vertex_array", lambda o: 0),
    "sampler": ("sampler", lambda o: 0),
    "compute_shader": ("compute_shader", lambda o: 0),
}


def _valid(obj: Any) -> bool:
    return obj is not None and _valid_mglo(getattr(obj, "mglo", None))


def _valid_mglo(mglo: Any) -> bool:
    return mglo is not None and type(mglo).__name__ != "InvalidObject"


class UserObject:
    """What the ledger and tracker hold for one user object: a weak reference to it and to
    its context (`obj.ctx`). Releasing it never touches GL once the context itself is
    released (any release order is safe).

    An object the app dropped without `release()` is the most common moderngl leak: the
    Python object goes, its GL object stays (moderngl deletes nothing on collection unless
    the context's `gc_mode` says so). It must stay a live record, a leak of whoever made it,
    not vanish from the checks. So the record keeps the object's attribute dict (not the
    object: it is still collected when the app drops it): moderngl's `release()` swaps the
    object's `mglo` for an InvalidObject, so after the object is gone the dict still tells a
    released object (its `mglo` invalid) from a dropped one (its `mglo` the live GL object,
    which `release` here then deletes). With `gc_mode="auto"` collection releases it; with
    "context_gc" the context releases it at its next `gc()`: neither is a leak here."""

    def __init__(self, obj: Any) -> None:
        self._obj = weakref.ref(obj)
        self._ctx = weakref.ref(obj.ctx)
        self._state: dict[str, Any] = getattr(obj, "__dict__", {})

    def alive(self) -> bool:
        ctx = self._ctx()
        if not _valid(ctx):
            return False
        obj = self._obj()
        if obj is not None:
            return _valid(obj)
        if getattr(ctx, "gc_mode", None) in ("auto", "context_gc"):
            return False
        return _valid_mglo(self._state.get("mglo"))

    def release(self) -> None:
        if not _valid(self._ctx()):
            return
        obj = self._obj()
        if obj is not None:
            obj.release()
            return
        mglo = self._state.get("mglo")  # dropped without release(): its GL object goes now
        if _valid_mglo(mglo):
            mglo.release()
        self._state = {}


class TrackedContext:
    """Proxy of a moderngl.Context whose factories register what they make (see module)."""

    __slots__ = ("_ctx", "_device", "_category", "__weakref__")

    def __init__(self, ctx: Any, device: Any, category: str = "user") -> None:
        object.__setattr__(self, "_ctx", ctx)
        object.__setattr__(self, "_device", device)
        object.__setattr__(self, "_category", category)

    # -- being the context ------------------------------------------------------------------
    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(wrapper, moderngl.Context) holds
        return type(self._ctx)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._ctx, name)
        made = _FACTORIES.get(name)
        if made is None or not callable(attr):
            return attr
        kind, size = made

        def make(*args: Any, **kwargs: Any) -> Any:
            obj = attr(*args, **kwargs)
            self._track(obj, kind, size(obj), name)
            return obj
        make.__name__ = name
        make.__doc__ = attr.__doc__
        return make

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._ctx, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._ctx, name)

    def __eq__(self, other: object) -> bool:
        if type(other) is TrackedContext:
            return other._ctx is self._ctx
        return other is self._ctx

    def __hash__(self) -> int:
        return hash(self._ctx)

    def __enter__(self) -> TrackedContext:
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)

    def __dir__(self) -> list[str]:
        return dir(self._ctx)

    def __repr__(self) -> str:
        return f"TrackedContext({self._ctx!r})"

    # -- the bookkeeping ----------------------------------------------------------------------
    def _track(self, obj: Any, kind: str, nbytes: int, factory: str) -> None:
        handle = UserObject(obj)
        glo = getattr(obj, "glo", 0)
        self._device.track_user_object(handle, kind, nbytes, f"user {factory} #{glo}",
                                       self._category, glo=glo)


def tracked_context(device: Any, category: str = "user") -> TrackedContext:
    """`device`'s own moderngl context, tracked: what a test (or an app drawing beside the
    engine) makes through it is ledgered under `category` and seen by leak checks (the
    pytest plugin's `engine_context` fixture)."""
    return TrackedContext(device._ctx, device, category)
