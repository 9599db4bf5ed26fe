"""A device without GL: the real allocator, ledger and leak tracker over placeholder objects.

Why: the code that decides *what* to allocate and in which order (the render-target set's
reallocation and fallback, OOM handling, leak accounting) should be testable on any machine,
fast, and with failures injected exactly where a test wants them. `FakeDevice` offers the
factory and command surface those layers use; every "object" is a `FakeObject` recorded through
the same `Allocator` as on a real device, so byte sizes, categories, peaks, leak checks and the
out-of-memory path (`fault_injector`) behave exactly as with GL. Filament's ResourceAllocator
interface plays the same role there.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..formats import PixelFormat
from ..formats import get as get_format
from ..memory.ledger import Category, Ledger
from ..memory.leaks import LeakTracker, TrackedObject
from ..memory.sizes import level_bytes, mip_dims, texture_bytes
from . import constants as K
from .allocator import Allocator, FaultInjection
from .context import RenderThread
from .device import mgl_format, mgl_texel_bytes
from .textures import GpuTexture

_NAMES = itertools.count(1)


class _NoGL:
    """The raw entry points the allocator calls, answering as a GL with no errors."""

    def glGetError(self) -> int:
        return K.NO_ERROR

    def glObjectLabel(self, *args: Any) -> None:
        """Labels exist for debuggers; there is none here."""


@dataclass(eq=False)
class FakeObject:
    """Stands in for a moderngl object: a GL name, a size, and a log of what was done to it."""

    kind: str
    size: tuple[int, ...] = ()
    glo: int = field(default_factory=lambda: next(_NAMES))
    released: bool = False
    calls: list[str] = field(default_factory=list)

    def release(self) -> None:
        self.released = True

    def use(self, *args: Any) -> None:
        self.calls.append("use")

    def clear(self, *args: Any, **kw: Any) -> None:
        self.calls.append("clear")


class FakeDevice(FaultInjection):
    """The Device surface of the allocation-deciding layers, with no GL behind it."""

    def __init__(self, *, max_samples: int = 4, max_texture_size: int = 16384) -> None:
        self.ledger = Ledger()
        self.tracker = LeakTracker()
        self._thread = RenderThread()
        self._alloc = Allocator(_NoGL(), self._thread, self.ledger, self.tracker, labels=False)
        self.max_samples = max_samples
        self.max_texture_size = max_texture_size
        self.copies: list[tuple[Any, Any]] = []

    # ------------------------------------------------------------------ factories
    def _make(self, kind: str, category: Category | str, label: str, nbytes: int,
              size: tuple[int, ...]) -> FakeObject:
        obj = self._alloc.guarded(f"{kind} '{label}'", nbytes, lambda: FakeObject(kind, size),
                                  lambda o: o.release())
        return self._alloc.register(obj, kind, category, label, nbytes, obj.glo, obj.release)

    def texture(self, size: tuple[int, int], components: int = 4, data: bytes | None = None, *,
                dtype: str = "f1", levels: int = 1, category: Category | str = Category.STATIC,
                label: str = "texture") -> FakeObject:
        w, h = int(size[0]), int(size[1])
        fmt = mgl_format(components, dtype)
        nbytes = texture_bytes(fmt, w, h, levels=levels) if fmt is not None else \
            sum(mgl_texel_bytes(components, dtype) * mip_dims(w, h, i)[0] * mip_dims(w, h, i)[1]
                for i in range(levels))
        return self._make("texture", category, label, nbytes, (w, h))

    def depth_texture(self, size: tuple[int, int], *, category: Category | str = Category.TARGET,
                      label: str = "depth") -> FakeObject:
        return self._make("texture", category, label, level_bytes("DEPTH24", *size), tuple(size))

    def renderbuffer(self, size: tuple[int, int], components: int = 4, *, samples: int = 0,
                     dtype: str = "f1", depth: bool = False,
                     category: Category | str = Category.TARGET,
                     label: str = "renderbuffer") -> FakeObject:
        w, h = int(size[0]), int(size[1])
        per = level_bytes("DEPTH24", w, h) if depth else mgl_texel_bytes(components, dtype) * w * h
        return self._make("renderbuffer", category, label, per * max(1, samples), (w, h))

    def framebuffer(self, color_attachments: Sequence[Any] = (), depth_attachment: Any = None, *,
                    label: str = "framebuffer") -> FakeObject:
        size = color_attachments[0].size if color_attachments else ()
        return self._make("framebuffer", Category.OTHER, label, 0, size)

    def buffer(self, data: bytes | None = None, *, reserve: int = 0, dynamic: bool = False,
               category: Category | str = Category.BUFFER, label: str = "buffer") -> FakeObject:
        nbytes = len(memoryview(data).cast("B")) if data is not None else int(reserve)
        return self._make("buffer", category, label, nbytes, (nbytes,))

    def storage_texture(self, fmt: PixelFormat | str, width: int, height: int, *,
                        levels: int = 1, base_level: int = 0, layers: int = 1,
                        cube: bool = False, category: Category | str = Category.STATIC,
                        label: str = "texture") -> GpuTexture:
        f = get_format(fmt) if isinstance(fmt, str) else fmt
        faces = 6 if cube else 1
        nbytes = texture_bytes(f, width, height, levels=levels, base_level=base_level,
                               layers=layers, faces=faces)
        glo = self._alloc.guarded(f"{f.name} texture '{label}'", nbytes, lambda: next(_NAMES),
                                  lambda name: None)
        tex = GpuTexture(glo, K.TEXTURE_2D, f, int(width), int(height), base_level, levels,
                         layers, faces, nbytes, label, category, self)
        return self._alloc.register(tex, "texture", category, label, nbytes, glo, lambda: None)

    # ------------------------------------------------------------------ commands
    def copy_framebuffer(self, dst: Any, src: Any) -> None:
        self.copies.append((dst, src))

    def set_state(self, **kw: bool) -> None:
        """No pipeline here."""

    def set_viewport(self, viewport: tuple[int, int, int, int]) -> None:
        """No pipeline here."""

    def finish(self) -> None:
        """Nothing is ever in flight."""

    # ------------------------------------------------------------------ release
    def release(self, obj: Any) -> None:
        if self._alloc.release(obj) and isinstance(obj, GpuTexture):
            obj.released = True

    def flush_releases(self) -> int:
        return self._alloc.flush()

    def live_objects(self) -> list[TrackedObject]:
        return self._alloc.live()

    def leak_check(self) -> Any:
        return self._alloc.leak_check()

    def end_frame(self, frame: int) -> Any:
        self.flush_releases()
        return self.ledger.end_frame(frame)
