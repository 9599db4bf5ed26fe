"""The streaming provider: the one `TextureProvider` that streams textures under the pool the
governor grants, by whole mip levels or as virtual-texture tiles, per texture.

Why one provider with two executors: the renderer and the frame loop talk to ONE provider
(register, bind, residency, begin_frame, end_frame, stats, release, grant). Behind it two
executors share the one streaming pool:

  - the whole-level `LevelStreamer` (engine.streaming.levels: small textures, other
    formats);
  - the `VirtualTextureSystem` (engine.streaming.virtual: large 2D textures of one BCn
    format, of any size), whose tiles live in a page cache sized by its allowance.

The decision is per texture at `register` (`decide_virtual`, pure). Ids are the provider's
own, in registration order (one id space); `virtual_ids()` tells the renderer which ones
sample through `vt_sample` and with which vt id. The page cache is ledgered in the streamed
category (by engine/gl/vt.py), so the governor, the report and the HUD see it; `stats()`
adds it to the whole levels' resident/wanted/min bytes and reports what the cache needs
(`ProviderStats.cache`), from which the governor sets the cache's share of the pool
(engine.memory.split); the whole-level streamer is granted the rest.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UnsupportedFormatError
from ..formats import PixelFormat
from ..gl.device import Device
from ..memory.split import CacheNeeds, share_pool
from ..textures.tiled import tile_levels
from ..textures.transcode import served_tile_format
from .contract import FrameView, Residency, ResidentTextures
from .handles import HeadReader
from .levels.streamer import Clock, LevelSourceFactory, LevelStreamer
from .settings import StreamerSettings
from .stats import StreamingStats
from .virtual.system import VirtualTextureSystem, choose_virtual
from .virtual.tiles import slot_bytes

log = logging.getLogger(__name__)

#: Headroom over the shown tiles when the feedback sizes the cache (tiles come and go as
#: the view moves; without it the cache is full the moment it fits).
DEMAND_HEADROOM = 1.25


def decide_virtual(mode: str, width: int, height: int, fmt: PixelFormat, *, is_2d: bool,
                   vt_format: PixelFormat | None, min_size: int = 1024) -> bool:
    """Whether a texture streams virtually. Never: mode "off", not 2D, not a 4x4-block
    compressed format, another format than the page cache's (one cache, one format), or
    thinner than a block (a 2048x1 image: no whole block to cut a tile from, so it would
    have no tiled level at all). "always": every other texture; "auto": those
    `choose_virtual` takes."""
    if mode == "off" or not is_2d or not fmt.compressed or (fmt.block_w, fmt.block_h) != (4, 4):
        return False
    if tile_levels(fmt, width, height, 1) == 0:
        return False
    if vt_format is not None and fmt != vt_format:
        return False
    if mode == "always":
        return True
    return choose_virtual(width, height, min_size)


@dataclass(frozen=True)
class _Entry:
    virtual: bool
    index: int  # whole-level streamer id, or vt id
    width: int
    height: int
    levels: int


class StreamingProvider:
    """Streams registered texture files under the granted pool: whole levels through a
    `LevelStreamer`, virtual textures through one page cache.

    `settings` may be varied by keyword, as `LevelStreamer`'s; `clock` and `io` go to the
    whole-level streamer; `deterministic` reads tiles on the render thread (no workers), for
    reference-image runs."""

    def __init__(self, device: Device, settings: StreamerSettings | None = None, *,
                 clock: Clock = time.perf_counter, io: LevelSourceFactory | None = None,
                 deterministic: bool = False, **overrides: Any) -> None:
        self.device = device
        #: the whole-level executor; its ids are its own (`_entries` maps to them)
        settings = replace(settings or StreamerSettings(), **overrides)
        #: the pool held whatever the governor grants (StreamerSettings.fixed_pool_bytes):
        #: applied here, before the page cache takes its share, not again by the levels
        self.fixed_pool = settings.fixed_pool_bytes
        self.levels = LevelStreamer(device, replace(settings, fixed_pool_bytes=None),
                                    clock=clock, io=io)
        self.settings = settings
        self.deterministic = deterministic
        self.vts: VirtualTextureSystem | None = None
        self._entries: list[_Entry] = []
        self._ids: dict[str, int] = {}
        self._whole_lut = np.full(1, -1, np.int32)  # provider id + 1 -> streamer id / -1
        self._vt_ids = np.zeros(0, np.int32)
        self._luts_dirty = False
        self._whole_ids: list[int] = []  # streamer id -> provider id
        self._output_px = 0
        self._pool = 0
        self._demand = 0  # the largest starved page-cache demand seen (_demand_bytes)
        self._vt_uploaded = 0  # tile bytes uploaded so far (ProviderStats.bytes_uploaded)
        self._said_no_tiles = False  # a format without tiles on this driver: said once
        self._table_cache: tuple[tuple[int, int], ResidentTextures] | None = None
        self._whole_index = np.zeros(0, np.intp)
        self._whole_sids = np.zeros(0, np.intp)
        self.levels.shared_bytes = lambda: self.vts.nbytes if self.vts is not None else 0

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
        """Register (key, path) pairs; their ids, in order. Every new file is opened (header
        only) and sorted before anything is made, so a bad file raises its typed error with
        nothing of the batch registered; the whole-level ones then go to the streamer in one
        all-or-nothing batch, the virtual ones to the page cache."""
        new: dict[str, tuple[Path, Any, bool]] = {}
        vt_format = self.vts.fmt if self.vts is not None else None  # one page cache format
        reader = HeadReader()  # each file read once: header here, its tail in the streamer
        for key, path in entries:
            if key in self._ids or key in new:
                continue
            tf = reader.open_header(path)
            tile_format = self._tile_format(tf, vt_format)
            virtual = tile_format is not None
            if virtual:
                vt_format = tile_format
            new[key] = (Path(path), tf, virtual)
        whole = [(k, p) for k, (p, _, virtual) in new.items() if not virtual]
        sids = iter(self.levels.register_many(whole, reader)) if whole else iter(())
        for key, (path, tf, virtual) in new.items():
            if virtual:
                entry = _Entry(True, self._system().register(tf, "repeat"), tf.width,
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

    def _tile_format(self, tf, vt_format: PixelFormat | None) -> PixelFormat | None:
        """The page-cache format the file's tiles take when it streams virtually (its own,
        or a block-compatible one the driver samples); None where it streams by whole
        levels (`decide_virtual`, or a driver that samples no format of its blocks: said
        once)."""
        cfg = self.settings
        if not decide_virtual(cfg.virtual, tf.width, tf.height, tf.pixel_format,
                              is_2d=tf.layers == 1 and tf.faces == 1 and tf.depth == 1,
                              vt_format=None, min_size=cfg.virtual_min_size):
            return None
        try:
            fmt = served_tile_format(tf, self.device.caps.can_sample)
        except UnsupportedFormatError as exc:
            if not self._said_no_tiles:
                self._said_no_tiles = True
                log.warning("%s: streamed by whole levels, not as virtual tiles (%s)",
                            tf.path, exc.why)
            return None
        return fmt if vt_format is None or fmt == vt_format else None  # one cache format

    def _refresh_luts(self) -> None:
        """The id lookup arrays, rebuilt only after registrations (rebuilding them in every
        `register` made registering N textures cost N^2)."""
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
        assert self.vts is not None and self.vts.fmt is not None
        return self.vts.min_bytes()

    def _demand_now(self) -> int:
        """The cache that holds every tile the newest feedback shows, with headroom, once
        the cache starved (full, with shown tiles missing), or the largest such demand seen
        so far, so that the grown cache is not shrunk back into starvation (a resize
        rebuilds the cache and re-streams every tile: it must not oscillate). Pure: `grant`
        keeps the largest."""
        vts = self.vts
        policy = vts.policy
        if policy is not None and vts.feedback_frame >= 0 and policy.occupied >= policy.slots:
            if policy.visible_missing:
                shown = int(vts.visible_tile_count() * DEMAND_HEADROOM)
                return max(self._demand, self._vt_min() + shown * slot_bytes(vts.fmt))
        return self._demand

    def _screen_bytes(self) -> int:
        fmt = self.vts.fmt
        return int(self._output_px * fmt.block_bytes / (fmt.block_w * fmt.block_h))

    def cache_needs(self, whole_min: int | None = None) -> CacheNeeds | None:
        """What the page cache needs of the pool (None without virtual textures): the
        governor's input for the cache's share (engine.memory.split). `whole_min`: the
        whole-level tails, when the caller has the streamer's stats at hand."""
        vts = self.virtual_system()
        if vts is None:
            return None
        if whole_min is None:
            whole_min = self.levels.stats().min_bytes
        return CacheNeeds(current=vts.allowance, min_bytes=self._vt_min(),
                          screen_bytes=self._screen_bytes(),
                          screen_factor=self.settings.virtual_screen_factor,
                          demand_bytes=self._demand_now(), whole_min_bytes=int(whole_min))

    def grant(self, pool_bytes: int, cache_bytes: int | None = None) -> None:
        """The governor's streaming allowance for the coming frame, and the page cache's
        share of it (`BudgetSplit.cache_allowance`); the whole-level streamer gets the rest.
        Without a share (a run with no governor split of its own) the cache gets what
        `share_pool` gives at this pool. A fixed pool (`StreamerSettings.fixed_pool_bytes`)
        replaces both, held at least at the floor (`ProviderStats.min_bytes`)."""
        vts = self.virtual_system()
        if self.fixed_pool is not None:
            floor = self.stats().min_bytes if vts is not None else 0
            pool_bytes, cache_bytes = max(self.fixed_pool, floor), None
        self._pool = max(0, int(pool_bytes))
        if vts is None:
            self.levels.grant(self._pool)
            return
        needs = self.cache_needs()
        assert needs is not None
        self._demand = needs.demand_bytes
        allowance = share_pool(self._pool, needs) if cache_bytes is None else int(cache_bytes)
        if allowance != vts.allowance:
            log.debug("page cache allowance %d -> %d (pool %d)", vts.allowance,
                      allowance, self._pool)
            vts.set_allowance(allowance)
        self.levels.grant(max(0, self._pool - vts.allowance))

    @property
    def pool_bytes(self) -> int:
        return self._pool

    @property
    def cache_allowance(self) -> int:
        """The page cache's share of the pool now (0 without virtual textures)."""
        return self.vts.allowance if self.vts is not None else 0

    # ------------------------------------------------------------------ per frame
    def set_feedback(self, levels: np.ndarray) -> None:
        """Per provider id finest level (the whole-level feedback pass): the streamer's ids'
        share of it."""
        lv = np.asarray(levels, np.float64)
        if self.vts is None:  # the same ids
            self.levels.set_feedback(lv)
            return
        ids = np.asarray(self._whole_ids, np.intp)
        out = np.full(len(ids), np.inf)
        ok = ids < len(lv)
        out[ok] = lv[ids[ok]]
        self.levels.set_feedback(out)

    @property
    def feedback_mips(self) -> np.ndarray | None:
        """The newest whole-level feedback, per whole-level streamer id."""
        return self.levels.feedback_mips

    def begin_frame(self, view: FrameView) -> None:
        w, h = view.viewport
        scale = view.render_scale if view.render_scale > 0 else 1.0
        self._output_px = int(round(w / scale) * round(h / scale))
        ids = view.texture_ids
        if ids.size and self.vts is not None:
            self._refresh_luts()
            view = replace(view, texture_ids=self._whole_lut[np.asarray(ids, np.int64) + 1])
        self.levels.begin_frame(view)
        vts = self.virtual_system()
        if vts is not None:
            vts.fit_screen(w, h)
            if vts.allowance == 0:  # no grant yet (a run without a governor split)
                self.grant(self._pool)
            vts.begin_frame(view.frame)
            self._vt_uploaded += vts.update().bytes_uploaded

    def bind(self, texture_id: int, unit: int) -> None:
        """A virtual id's shader reads the page cache (units bound once per frame by the
        renderer through `virtual_system().bind`), not this unit; the page cache goes on
        the unit anyway, so that it never keeps whatever was bound there last (left alone
        it may still hold a render target the scene pass draws into, and sampling it then
        costs a feedback loop's synchronisation on some drivers)."""
        e = self._entries[texture_id]
        if not e.virtual:
            self.levels.bind(e.index, unit)
        elif self.vts is not None and self.vts.cache is not None:
            self.vts.cache.use(unit)

    def residency(self, texture_id: int) -> Residency:
        e = self._entries[texture_id]
        if e.virtual:
            return Residency(e.width, e.height, e.levels, 0.0)
        return self.levels.residency(e.index)

    def resident_textures(self) -> ResidentTextures:
        """The streamer's table spread over the provider's ids; virtual ids hold no GL
        texture of their own (None) and no clamp."""
        table = self.levels.resident_textures()
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
        self.levels.end_frame()

    # ------------------------------------------------------------------ queries
    def pending_reads(self) -> int:
        """Whole-level reads queued or running now."""
        ios = self.levels.io.stats()
        return int(ios.pending) + int(ios.in_progress)

    def stats(self) -> StreamingStats:
        """The streamer's stats with the page cache added: resident = cache + table as held,
        wanted = the allowance the split would give it, min = the smallest cache it can
        run with; `cache` is what the cache needs of the pool."""
        st = self.levels.stats()
        vts = self.virtual_system()
        if vts is None:
            return replace(st, textures=len(self._entries))
        # Before the first feedback readback nothing is known to be shown: count one tile
        # per virtual texture, so no one takes an empty plan for a settled one.
        missing = (vts.policy.visible_missing
                   if vts.policy is not None and vts.feedback_frame >= 0
                   else len(vts.textures))
        needs = self.cache_needs(st.min_bytes)
        ios = vts.io.stats()
        extra_want = max(needs.min_bytes, int(needs.screen_factor * needs.screen_bytes))
        return replace(st, resident_bytes=st.resident_bytes + vts.nbytes,
                       wanted_bytes=st.wanted_bytes + extra_want,
                       min_bytes=st.min_bytes + needs.min_bytes,
                       pending_uploads=st.pending_uploads + vts.stats.in_hand,
                       textures=len(self._entries), missing_tiles=missing, cache=needs,
                       reads_in_flight=st.reads_in_flight + ios.pending + ios.in_progress,
                       bytes_read=st.bytes_read + ios.bytes_read,
                       bytes_uploaded=st.bytes_uploaded + self._vt_uploaded,
                       cache_slots=vts.cache.slots if vts.cache is not None else 0,
                       cache_slots_used=vts.used_slots() if vts.cache is not None else 0)

    def release(self) -> None:
        if self.vts is not None:
            self.vts.release()
            self.vts = None
        self.levels.release()
        self._entries.clear()
        self._ids.clear()
