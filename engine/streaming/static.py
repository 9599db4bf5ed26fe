"""The static provider: every registered texture fully resident from registration on.

It is the baseline the streamer is measured against, and the simplest thing that renders
correctly.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import textures
from ..gl.device import Device
from ..gl.textures import GpuTexture
from ..gl.upload import upload_texture_file
from ..memory.ledger import Category
import numpy as np

from .contract import FrameView, ProviderStats, Residency, ResidentTextures

log = logging.getLogger(__name__)


@dataclass
class _Static:
    key: str
    path: Path
    tex: GpuTexture
    levels: int


class StaticTextureProvider:
    """Every registered texture fully resident from registration on: the baseline the
    streamer is measured against, and the simplest thing that renders correctly."""

    def __init__(self, device: Device, *, category: Category = Category.STATIC) -> None:
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

    def register_many(self, entries: Sequence[tuple[str, str | Path]]) -> list[int]:
        """One `register` at a time: every texture is made whole anyway."""
        return [self.register(key, Path(path)) for key, path in entries]

    def _upload(self, key: str, path: Path) -> tuple[GpuTexture, int]:
        """Make the whole texture resident; returns it and its level count."""
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

    def resident_textures(self) -> ResidentTextures:
        """Every texture whole from level 0: no clamp, and the set changes only by adding."""
        zeros = np.zeros(len(self._items), np.float32)
        return ResidentTextures(len(self._items), [it.tex for it in self._items], zeros, zeros)

    def stats(self) -> ProviderStats:
        resident = sum(item.tex.nbytes for item in self._items)
        return ProviderStats(resident_bytes=resident, wanted_bytes=resident,
                             textures=len(self._items))

    def release(self) -> None:
        for item in self._items:
            self.device.release(item.tex)
        self._items.clear()
        self._ids.clear()
