"""One provider for a scene that mixes whole-level and virtual textures.

Why a composite: the renderer and the frame loop talk to ONE `TextureProvider` (register,
bind, residency, begin_frame, end_frame, stats, release, grant). Behind it two executors
share the one streaming pool the governor grants:

  - the whole-level `TextureStreamer` (small textures, non-power-of-two ones, other formats);
  - the `VirtualTextureSystem` (large power-of-two 2D textures of one BCn format), whose
    tiles live in a page cache sized by `set_allowance`.

The decision is per texture at `register` (`decide_virtual`, pure). Ids are the composite's
own, in registration order; `virtual_ids()` tells the renderer which ones sample through
`vt_sample` and with which vt id. The page cache is ledgered in the streamed category (by
engine/gl/vt.py), so the governor, the report and the HUD see it; `stats()` adds it to the
streamer's resident/wanted/min bytes.

The pool split (`split_pool`, pure, documented in docs/ARCHITECTURE.md):

    vt_min    = page table + LOD proxy + (packed coarsest-tile slots + whole pinned slots
                + MIN_STREAM_SLOTS) x slot bytes          (the cache cannot be smaller)
    screen    = output pixels x bytes per texel of the virtual format
    demand    = the tiles the newest feedback shows (x 1.25) + pinned + MIN_STREAM_SLOTS
    cap       = max(vt_min, virtual_screen_factor x screen, demand)   (8x by default)
    room      = max(vt_min, pool - whole-level tails)
    vt_target = min(cap, room)

so the page cache follows the screen, not the content (the demand term covers a screen
that shows many textures at once: each visible one needs whole tiles, and the H200's
gallery of 200 x 4096^2 wanted more of them than 8x its pixels held, so it never settled),
and never takes the room the
whole-level streamer's always-resident tails need; the streamer is granted the rest
(`pool - vt allowance`) and counts the cache out of the streamed category's total
(`TextureStreamer.shared_bytes`). A cache rebuild re-streams every tile, so the allowance
moves only when it must (the pool no longer holds it) or when the target moved by more than
a quarter (`settle_allowance`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import textures
from ..formats import PixelFormat
from ..gl.device import Device
from .contract import FrameView, ProviderStats, Residency, ResidentTextures
from .provider import TextureStreamer
from .settings import StreamerSettings
from .virtual.pagetable import TABLE_WIDTH
from .virtual.system import VirtualTextureSystem, choose_virtual
from .virtual.tiles import slot_bytes

log = logging.getLogger(__name__)

#: Slots the page cache keeps for streaming beyond its pinned coarsest tiles, at least.
MIN_STREAM_SLOTS = 16
#: The allowance grows only past this factor of the current one (a rebuild re-streams).
GROW_FACTOR = 1.25
#: ... and shrinks on its own (not forced by the pool) only below this one.
SHRINK_FACTOR = 0.5


# ---------------------------------------------------------------------- pure policy
def decide_virtual(mode: str, width: int, height: int, fmt: PixelFormat, *, is_2d: bool,
                   vt_format: PixelFormat | None, min_size: int = 1024) -> bool:
    """Whether a texture streams virtually. Never: mode "off", not 2D, not a 4x4-block
    compressed format, or another format than the page cache's (one cache,
    one format). "always": every other texture; "auto": those `choose_virtual` takes."""
    if mode == "off" or not is_2d or not fmt.compressed or (fmt.block_w, fmt.block_h) != (4, 4):
        return False
    if vt_format is not None and fmt != vt_format:
        return False
    if mode == "always":
        return True
    return choose_virtual(width, height, min_size)


#: Headroom over the shown tiles when the feedback sizes the cache (tiles come and go as
#: the view moves; without it the cache is full the moment it fits).
DEMAND_HEADROOM = 1.25


def cache_cap(vt_min: int, screen_bytes: int, factor: float, demand: int = 0) -> int:
    """The most the page cache aims at, whatever the pool (see the module docstring)."""
    return max(vt_min, int(factor * screen_bytes), int(demand))


def split_pool(pool: int, whole_min: int, vt_min: int, screen_bytes: int,
               factor: float, demand: int = 0) -> int:
    """The page cache's allowance out of the one pool (see the module docstring)."""
    room = max(vt_min, int(pool) - int(whole_min))
    return min(cache_cap(vt_min, screen_bytes, factor, demand), room)


def settle_allowance(current: int, target: int, room: int, full: int | None = None) -> int:
    """The allowance to hand the cache: `target` when the current one no longer fits the
    room, or the target moved far enough to be worth a rebuild, or the room again allows the
    `full` size the cache aims at (`split_pool`'s cap) and the cache is smaller; else the
    current one. Without the last rule a cache shrunk under pressure stayed up to a quarter
    below its full size for good once the pressure passed (the wall soak: 20 slots instead
    of 24, a different picture from a fresh start at the same budget)."""
    if current <= 0 or current > room:
        return target
    if full is not None and current < target and target >= full:
        return target
    if target > current * GROW_FACTOR or target < current * SHRINK_FACTOR:
        return target
    return current


@dataclass(frozen=True)
class _Entry:
    virtual: bool
    index: int  # streamer id, or vt id
    width: int
    height: int
    levels: int


class MixedTextureProvider:
    """The whole-level streamer and the virtual texture system behind one provider."""

    def __init__(self, device: Device, streamer: TextureStreamer,
                 settings: StreamerSettings | None = None, *, deterministic: bool = False
                 ) -> None:
        self.device = device
        self.streamer = streamer
        self.settings = settings or streamer.settings
        self.deterministic = deterministic
        self.vts: VirtualTextureSystem | None = None
        self._entries: list[_Entry] = []
        self._ids: dict[str, int] = {}
        self._whole_lut = np.full(1, -1, np.int32)  # composite id + 1 -> streamer id / -1
        self._vt_ids = np.zeros(0, np.int32)
        self._luts_dirty = False
        self._whole_ids: list[int] = []  # streamer id -> composite id
        self._output_px = 0
        self._pool = 0
        self.vt_allowance = 0
        self._demand = 0  # the largest starved page-cache demand seen (_demand_bytes)
        self._vt_uploaded = 0  # tile bytes uploaded so far (ProviderStats.bytes_uploaded)
        self._table_cache: tuple[tuple[int, int], ResidentTextures] | None = None
        self._whole_index = np.zeros(0, np.intp)
        self._whole_sids = np.zeros(0, np.intp)
        streamer.shared_bytes = lambda: self.vts.nbytes if self.vts is not None else 0

    # ------------------------------------------------------------------ registration
    def _system(self) -> VirtualTextureSystem:
        if self.vts is None:
            cfg = self.settings
            self.vts = VirtualTextureSystem(
                self.device, 0, io_workers=0 if self.deterministic else max(1, cfg.io_workers),
                max_uploads=cfg.virtual_max_uploads, latency_ms=cfg.io_latency_ms,
                feedback_depth=True)
        return self.vts

    def register(self, key: str, path: Path) -> int:
        return self.register_many([(key, path)])[0]

    def register_many(self, entries: Sequence[tuple[str, str | Path]]) -> list[int]:
        """Register (key, path) pairs; their composite ids, in order. Every new file is
        opened (header only) and sorted before anything is made, so a bad file raises its
        typed error with nothing of the batch registered; the whole-level ones then go to
        the streamer in one all-or-nothing batch, the virtual ones to the page cache."""
        new: dict[str, tuple[Path, Any, bool]] = {}
        vt_format = self.vts.fmt if self.vts is not None else None  # one page cache format
        for key, path in entries:
            if key in self._ids or key in new:
                continue
            tf = textures.open(path)
            virtual = self._decide(tf, vt_format)
            if virtual:
                vt_format = tf.pixel_format
            new[key] = (Path(path), tf, virtual)
        whole = [(k, p) for k, (p, _, virtual) in new.items() if not virtual]
        sids = iter(self.streamer.register_many(whole)) if whole else iter(())
        for key, (path, tf, virtual) in new.items():
            if virtual:
                entry = _Entry(True, self._system().register(path, "repeat"), tf.width,
                               tf.height, len(tf.levels))
            else:
                entry = _Entry(False, next(sids), tf.width, tf.height, len(tf.levels))
                self._whole_ids.append(len(self._entries))
            self._entries.append(entry)
            self._ids[key] = len(self._entries) - 1
            log.debug("texture %s (%dx%d): %s", key, tf.width, tf.height,
                      "virtual" if virtual else "whole levels")
        self._luts_dirty = True  # rebuilt once when next read, not per registration
        return [self._ids[key] for key, _ in entries]

    def _decide(self, tf, vt_format: PixelFormat | None) -> bool:
        cfg = self.settings
        fmt = tf.pixel_format
        return decide_virtual(
            cfg.virtual, tf.width, tf.height, fmt,
            is_2d=tf.layers == 1 and tf.faces == 1 and tf.depth == 1, vt_format=vt_format,
            min_size=cfg.virtual_min_size) and self.device.caps.can_sample(fmt)

    def _refresh_luts(self) -> None:
        """The id lookup arrays, rebuilt only after registrations (rebuilding them in every
        `register` made registering N textures cost N^2: 9 s for 10,000)."""
        if self._luts_dirty:
            self._whole_lut = np.array([-1] + [-1 if e.virtual else e.index
                                               for e in self._entries], np.int32)
            self._vt_ids = np.array([e.index if e.virtual else -1 for e in self._entries],
                                    np.int32)
            self._luts_dirty = False

    def virtual_ids(self) -> np.ndarray:
        self._refresh_luts()
        return self._vt_ids

    def virtual_system(self) -> VirtualTextureSystem | None:
        return self.vts if self.vts is not None and self.vts.textures else None

    # ------------------------------------------------------------------ the pool
    def _vt_min(self) -> int:
        vts = self.vts
        assert vts is not None and vts.fmt is not None
        pinned = vts._tail_slots_needed() + len(vts.pinned_data) - len(vts.tails)
        fixed = vts.table.rows * TABLE_WIDTH * 4 + 1
        return fixed + (pinned + MIN_STREAM_SLOTS) * slot_bytes(vts.fmt)

    def _demand_bytes(self) -> int:
        """The cache that holds every tile the newest feedback shows, with headroom, once
        the cache starved (full, with shown tiles missing); the largest such demand seen
        so far, so that the grown cache is not shrunk back into starvation (a resize
        rebuilds the cache and re-streams every tile: it must not oscillate)."""
        vts = self.vts
        policy = vts.policy
        if policy is not None and vts.feedback_frame >= 0 and policy.occupied >= policy.slots:
            if policy.visible_missing:
                shown = int(vts.visible_tile_count() * DEMAND_HEADROOM)
                self._demand = max(self._demand, self._vt_min() + shown * slot_bytes(vts.fmt))
        return self._demand

    def _screen_bytes(self) -> int:
        fmt = self.vts.fmt
        return int(self._output_px * fmt.block_bytes / (fmt.block_w * fmt.block_h))

    def grant(self, pool_bytes: int) -> None:
        """Split the one pool: the page cache's allowance first (by `split_pool`), the rest
        to the whole-level streamer."""
        self._pool = max(0, int(pool_bytes))
        vts = self.virtual_system()
        if vts is None:
            self.streamer.grant(self._pool)
            return
        whole_min = self.streamer.stats().min_bytes
        vt_min = self._vt_min()
        demand = self._demand_bytes()
        target = split_pool(self._pool, whole_min, vt_min, self._screen_bytes(),
                            self.settings.virtual_screen_factor, demand)
        room = max(vt_min, self._pool - whole_min)
        cap = cache_cap(vt_min, self._screen_bytes(), self.settings.virtual_screen_factor,
                        demand)
        allowance = settle_allowance(self.vt_allowance, target, room, full=cap)
        if allowance != self.vt_allowance:
            log.debug("page cache allowance %d -> %d (pool %d)", self.vt_allowance,
                      allowance, self._pool)
            self.vt_allowance = allowance
            vts.set_allowance(allowance)
        self.streamer.grant(max(0, self._pool - self.vt_allowance))

    @property
    def pool_bytes(self) -> int:
        return self._pool

    # ------------------------------------------------------------------ per frame
    def set_feedback(self, levels: np.ndarray) -> None:
        """Per composite id finest level (the whole-level feedback pass): the streamer's
        ids' share of it."""
        lv = np.asarray(levels, np.float64)
        if self.vts is None:  # the same ids
            self.streamer.set_feedback(lv)
            return
        ids = np.asarray(self._whole_ids, np.intp)
        out = np.full(len(ids), np.inf)
        ok = ids < len(lv)
        out[ok] = lv[ids[ok]]
        self.streamer.set_feedback(out)

    def begin_frame(self, view: FrameView) -> None:
        w, h = view.viewport
        scale = view.render_scale if view.render_scale > 0 else 1.0
        self._output_px = int(round(w / scale) * round(h / scale))
        ids = view.texture_ids
        if ids.size and self.vts is not None:
            self._refresh_luts()
            view = replace(view, texture_ids=self._whole_lut[np.asarray(ids, np.int64) + 1])
        self.streamer.begin_frame(view)
        vts = self.virtual_system()
        if vts is not None:
            if self.vt_allowance == 0:  # no grant yet (a run without a governor split)
                self.grant(self._pool)
            vts.begin_frame(view.frame)
            self._vt_uploaded += vts.update().bytes_uploaded

    def bind(self, texture_id: int, unit: int) -> None:
        """A virtual id's shader reads the page cache (units bound once per frame by the
        renderer through `virtual_system().bind`), not this unit; the page cache goes on
        the unit anyway, so that it never keeps whatever was bound there last. Measured on
        llvmpipe: left alone, the unit still held the HDR target the previous frame's
        present pass sampled, which the scene pass renders into, and the gallery's scene
        pass took 483 ms instead of 74."""
        e = self._entries[texture_id]
        if not e.virtual:
            self.streamer.bind(e.index, unit)
        elif self.vts is not None and self.vts.cache is not None:
            self.vts.cache.use(unit)

    def residency(self, texture_id: int) -> Residency:
        e = self._entries[texture_id]
        if e.virtual:
            return Residency(e.width, e.height, e.levels, 0.0)
        return self.streamer.residency(e.index)

    def resident_textures(self) -> ResidentTextures:
        """The streamer's table spread over the composite ids; virtual ids hold no GL
        texture of their own (None) and no clamp."""
        table = self.streamer.resident_textures()
        if self.vts is None:  # every id is the streamer's own, in the same order
            return table
        key = (table.version, len(self._entries))
        if self._table_cache is not None and self._table_cache[0] == key:
            cached = self._table_cache[1]
            # the clamps move every frame while levels fade in; the texture list does not
            min_lod = cached.min_lod.copy()
            min_lod[self._whole_index] = np.asarray(table.min_lod)[self._whole_sids]
            return ResidentTextures(table.version, cached.textures, cached.finest, min_lod)
        n = len(self._entries)
        texs: list[Any] = [None] * n
        finest = np.zeros(n, np.float32)
        min_lod = np.zeros(n, np.float32)
        for cid in self._whole_ids:
            sid = self._entries[cid].index
            if sid < len(table.textures):
                texs[cid] = table.textures[sid]
                finest[cid] = table.finest[sid]
                min_lod[cid] = table.min_lod[sid]
        out = ResidentTextures(table.version, texs, finest, min_lod)
        self._whole_index = np.asarray(self._whole_ids, np.intp)
        self._whole_sids = np.asarray([self._entries[c].index for c in self._whole_ids],
                                      np.intp)
        self._table_cache = (key, out)
        return out

    def end_frame(self) -> None:
        self.streamer.end_frame()

    def stats(self) -> ProviderStats:
        """The streamer's stats with the page cache added: resident = cache + table as held,
        wanted = the allowance the split would give it, min = the smallest cache it can
        run with."""
        st = self.streamer.stats()
        vts = self.virtual_system()
        extra_res = extra_want = extra_min = missing = vt_reads = vt_read_bytes = 0
        if vts is not None:
            ios = vts.io.stats()
            vt_reads, vt_read_bytes = ios.pending + ios.in_progress, ios.bytes_read
            # Before the first feedback readback nothing is known to be shown: count one
            # tile per virtual texture, so no one takes an empty plan for a settled one.
            missing = (vts.policy.visible_missing
                       if vts.policy is not None and vts.feedback_frame >= 0
                       else len(vts.textures))
            extra_min = self._vt_min()
            extra_res = vts.nbytes
            extra_want = max(extra_min, int(self.settings.virtual_screen_factor
                                            * self._screen_bytes()))
        return replace(st, resident_bytes=st.resident_bytes + extra_res,
                       wanted_bytes=st.wanted_bytes + extra_want,
                       min_bytes=st.min_bytes + extra_min,
                       pending_uploads=st.pending_uploads + (vts.stats.in_hand if vts else 0),
                       textures=len(self._entries), missing_tiles=missing,
                       reads_in_flight=st.reads_in_flight + vt_reads,
                       bytes_read=st.bytes_read + vt_read_bytes,
                       bytes_uploaded=st.bytes_uploaded + self._vt_uploaded,
                       cache_slots=vts.cache.slots if vts and vts.cache else 0,
                       cache_slots_used=vts.resident_tiles() if vts and vts.cache else 0)

    def release(self) -> None:
        if self.vts is not None:
            self.vts.release()
            self.vts = None
        self.streamer.release()
        self._entries.clear()
        self._ids.clear()

    def __getattr__(self, name: str) -> Any:
        """Anything else the streamer offers (preload, counters) is the streamer's."""
        if name == "streamer":
            raise AttributeError(name)
        return getattr(self.streamer, name)
