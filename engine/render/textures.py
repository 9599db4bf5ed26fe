"""The seam between the renderer and whatever keeps textures on the GPU.

The renderer never owns textures: it asks a `TextureProvider` to bind id N on unit U. The
static provider below keeps every level resident; the streamer implements the same protocol
and keeps only the levels the last `FrameView` justifies. `residency(id)` tells the renderer
which chain levels are really there, so the mip-debug view can colour what is missing.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..gl.device import Device
from ..gl.textures import GpuTexture
from .frame import FrameView

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Residency:
    """What is on the GPU for one texture: its full chain size and the finest level held.

    `base_level` may be fractional while a streamer fades a new level in (it is the min LOD
    the sampler is clamped to, in chain levels)."""

    chain_width: int
    chain_height: int
    levels: int
    base_level: float


@runtime_checkable
class TextureProvider(Protocol):
    """Keeps textures on the GPU for the renderer. Every method runs on the render thread."""

    def register(self, key: str, path: Path) -> int:
        """Make `path` known under `key`; returns the id materials use. Same key, same id."""
        ...

    def begin_frame(self, view: FrameView) -> None:
        """Learn what this frame shows (before any bind): the streamer plans loads here."""
        ...

    def bind(self, texture_id: int, unit: int) -> None:
        """Bind the texture's resident levels for sampling on `unit`."""
        ...

    def residency(self, texture_id: int) -> Residency:
        ...

    def end_frame(self) -> None:
        ...

    def stats(self) -> dict:
        """At least resident_bytes, wanted_bytes, pending_uploads."""
        ...

    def release(self) -> None:
        """Release every GL object the provider made."""
        ...


@dataclass
class _Static:
    key: str
    path: Path
    tex: GpuTexture
    levels: int


class StaticTextureProvider:
    """Every registered texture fully resident from registration on: the baseline the
    streamer is measured against, and the simplest thing that renders correctly."""

    def __init__(self, device: Device, *, category: str = "texture.static") -> None:
        self.device = device
        self.category = category
        self._items: list[_Static] = []
        self._ids: dict[str, int] = {}

    def register(self, key: str, path: Path) -> int:
        if key in self._ids:
            return self._ids[key]
        tex, levels = self._upload(key, Path(path))
        self._items.append(_Static(key, Path(path), tex, levels))
        self._ids[key] = len(self._items) - 1
        return self._ids[key]

    def _upload(self, key: str, path: Path) -> tuple[GpuTexture, int]:
        """Make the whole texture resident; returns it and its level count."""
        from .. import textures
        from ..gl.upload import upload_texture_file

        tf = textures.open(path)
        tex = upload_texture_file(self.device, tf, category=self.category, label=key)
        return tex, len(tf.levels)

    def begin_frame(self, view: FrameView) -> None:
        """Nothing to plan: everything is already resident."""

    def bind(self, texture_id: int, unit: int) -> None:
        self._items[texture_id].tex.use(unit)

    def residency(self, texture_id: int) -> Residency:
        item = self._items[texture_id]
        return Residency(item.tex.chain_width, item.tex.chain_height, item.levels, 0.0)

    def end_frame(self) -> None:
        """Nothing streams, so nothing to finish."""

    def stats(self) -> dict:
        resident = sum(item.tex.nbytes for item in self._items)
        return {"resident_bytes": resident, "wanted_bytes": resident, "pending_uploads": 0,
                "textures": len(self._items)}

    def release(self) -> None:
        for item in self._items:
            self.device.release(item.tex)
        self._items.clear()
        self._ids.clear()


ProviderFactory = Callable[[Device], TextureProvider]
PROVIDERS: dict[str, ProviderFactory] = {"static": StaticTextureProvider}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make a provider selectable by name (`run_scene(provider=...)`, `--provider`)."""
    PROVIDERS[name] = factory


def make_provider(name: str, device: Device) -> TextureProvider:
    if name not in PROVIDERS and name.startswith("streaming"):
        # The streamer registers itself on import; importing it here keeps the render
        # package free of a hard dependency on streaming.
        try:
            import engine.streaming.provider  # noqa: F401
        except ImportError as exc:
            raise ValueError(f"texture provider {name!r} is not available: {exc}") from exc
    if name not in PROVIDERS:
        raise ValueError(f"unknown texture provider {name!r}; known: {sorted(PROVIDERS)}")
    return PROVIDERS[name](device)
