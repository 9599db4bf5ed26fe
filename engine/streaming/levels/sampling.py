"""The level each streamed texture is sampled from: the fade-in of new levels through the
sampler's min LOD, and the renderer's per-frame table of textures and LODs.

The fade rule is pure (engine.streaming.levels.fade); this applies it to the GL objects and
remembers what it set, so only the rows that changed cost a GL call per frame.
"""
from __future__ import annotations

import numpy as np

from ...gl.device import Device
from ..contract import Residency, ResidentTextures
from .backends import Streamed
from .fade import fade_min_lod
from .ops import MipOp
from .state import StreamerState

#: seconds each new level takes to fade in (fade_min_lod's default)
FADE_SECONDS = 0.3


class Sampling:
    """Per texture: the min LOD set on its sampler, and when its last load completed (-inf:
    never): only those loaded within one fade chain can be fading, so `fade` looks at those
    rows alone."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.lods = np.zeros(0, np.float32)
        self.load_time = np.zeros(0, np.float64)
        self._touched: list[int] = []  # textures whose storage changed this frame
        self._table: tuple[int, list, np.ndarray] | None = None

    def resize(self, count: int) -> None:
        """Follow the registered textures (new ones never loaded)."""
        self.lods = np.resize(self.lods, count)
        load_time = np.full(count, -np.inf)
        load_time[:min(count, len(self.load_time))] = self.load_time[:count]
        self.load_time = load_time

    def changed(self, done: list[MipOp], now: float) -> None:
        """Ops done this frame: their textures have new storage, the loaded ones fade in."""
        for op in done:
            if op.is_load:
                self.load_time[op.texture] = now
        # a reallocated texture is a new GL object at the default MIN_LOD: fade sets it
        self._touched = [op.texture for op in done]

    def fade(self, state: StreamerState, items: list[Streamed], now: float) -> None:
        # fading rows: loaded within one chain of fades (fade_min_lod's own window)
        window = state.level_times.shape[1] * FADE_SECONDS
        lods = fade_min_lod(state, now, FADE_SECONDS,
                            rows=np.flatnonzero(self.load_time > now - window))
        changed = np.flatnonzero(np.abs(lods - self.lods) > 1e-3)
        if self._touched:  # new storage this frame: its clamp must be set even if unchanged
            changed = np.union1d(changed, self._touched)
            self._touched = []
        for t in changed:
            item = items[t]
            if item.tex is None:  # no storage (a GL out-of-memory): nothing to clamp
                continue
            # GL measures MIN_LOD from the texture's base level: storage level 0 for a
            # reallocated texture (chain level item.base), GL_TEXTURE_BASE_LEVEL = item.base
            # for a sparse one. Either way the offset is the finest resident chain level.
            self.device.commands.set_min_lod(item.tex, float(lods[t]) - item.base)
        self.lods = lods

    def resident_textures(self, items: list[Streamed], version: int) -> ResidentTextures:
        """All ids at once (the batched renderer's per-frame read); the texture list is
        rebuilt only when `version` (the count of residency changes) moved since the last
        call."""
        if self._table is None or self._table[0] != version or len(self._table[1]) != len(items):
            self._table = (version, [it.tex for it in items],
                           np.array([it.base for it in items], np.float32))
        version, textures, finest = self._table
        lods = self.lods if len(self.lods) == len(items) else finest
        return ResidentTextures(version, textures, finest,
                                np.maximum(np.asarray(lods, np.float32), finest))

    def residency(self, item: Streamed, texture_id: int) -> Residency:
        lod = float(self.lods[texture_id]) if texture_id < len(self.lods) else float(item.base)
        return Residency(item.tf.width, item.tf.height, len(item.tf.levels), max(lod, item.base))
