"""The whole-level streamer: keeps only the mip levels the screen needs, under a hard byte
pool, without hitches. The streaming provider (engine.streaming.provider) runs it for every
texture that does not stream as virtual tiles; alone it is a provider of its own.

Per frame (render thread): drain finished reads -> estimate desired mips from the FrameView
(pure, vectorised) -> fold into the policy state (hysteresis) -> plan (pure: priority,
eviction, the hard-budget invariant with transients) -> execute the plan's ops through a
backend (realloc + copy image, or sparse commit) within upload caps -> request the reads the
plan wants from the I/O threads -> fade new levels in through the sampler's min LOD.
Worker threads only read and decompress files; bytes cross back through a queue.

The streamer computes no budget of its own: the frame loop grants it the governor's
streaming allowance (`grant`) before each frame, and that is the hard pool it plans against.
Time comes from an injected clock and reads from an injected level source, so a run can be
made deterministic (reference-image tests use a frame clock and `InlineLevelIO`).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ...gl.device import Device
from ...memory.sizes import format_bytes
from ..cache import LevelCache
from ..contract import FrameView, Residency, ResidentTextures
from ..handles import HandleCache, HeadReader, LevelFiles
from ..settings import StreamerSettings
from ..stats import StreamingStats
from .backends import CATEGORY, ReallocBackend, SparseBackend, Uploader
from .bands import BandedLoads
from .estimates import EstimateCache
from .estimator import TextureArrays
from .executor import Executor
from .feedback import combine
from .planner import planner_for
from .reads import LevelSource, LevelSourceFactory, ReadLevels, make_source
from .registry import Registry
from .sampling import Sampling
from .state import (
    StreamerState,
    TextureTable,
    carried_state,
    hold_failed,
    resident_by_tier,
    resident_bytes,
    update_state,
    wanted_bytes,
)

__all__ = ["Clock", "LevelSource", "LevelSourceFactory", "LevelStreamer"]

Clock = Callable[[], float]

log = logging.getLogger(__name__)


class LevelStreamer:
    """Streams BCn mip levels of registered texture files under the granted pool.

    `settings` (StreamerSettings) may be varied by keyword: `LevelStreamer(dev,
    backend="realloc")` is `LevelStreamer(dev, replace(StreamerSettings(), backend=...))`.
    `clock` gives seconds (fade-in, upload time caps); `io` makes the level source (default:
    `settings.io_workers` reader threads; `InlineLevelIO` for deterministic runs); `files` is
    where those read level bytes (default: an open-file cache of 64 descriptors). `files`
    may be replaced (wrapped) before the first frame reads anything.

    A coordinator of its parts: the `registry` of textures and tails, the `estimates` cache,
    the `reads` waiting for upload, the banded loads (`bands`), the `executor` that applies
    each plan, and the `sampling` LODs that fade new levels in."""

    def __init__(self, device: Device, settings: StreamerSettings | None = None, *,
                 clock: Clock = time.perf_counter, io: LevelSourceFactory | None = None,
                 files: LevelFiles | None = None, **overrides: Any) -> None:
        self.settings = cfg = replace(settings or StreamerSettings(), **overrides)
        self.device = device
        self.clock = clock
        backend = cfg.backend
        if backend == "auto":
            backend = "sparse" if device.caps.sparse_texture else "realloc"
        if backend == "sparse" and not device.caps.sparse_texture:
            raise ValueError("backend 'sparse' needs ARB_sparse_texture, which this driver lacks")
        # Planning as if every op reallocates is exact for reallocated textures and only
        # conservative for sparse ones (a commit has no old + new transient); a sparse
        # streamer still reallocates the textures sparse pages do not suit (small, arrays).
        self.backend = SparseBackend(device) if backend == "sparse" else ReallocBackend(device)
        self.registry = Registry(self.backend, ReallocBackend(device),
                                 files if files is not None else HandleCache(64),
                                 cfg.max_tail_size)
        self.items = self.registry.items
        self.config = cfg.policy
        self.planner = planner_for(cfg.policy.policy)
        self._pool = 0  # the governor's streaming allowance, granted each frame
        #: bytes of the streamed ledger category held by others (set by the streaming provider)
        self.shared_bytes: Callable[[], int] = lambda: 0
        self.mip_bias = cfg.mip_bias
        self.feedback_mips: np.ndarray | None = None
        self._table: TextureTable | None = None
        self._tex_arrays: TextureArrays | None = None
        self._state: StreamerState | None = None
        self.estimates = EstimateCache()
        self.sampling = Sampling(device)
        self._frame = 0
        self._t0 = clock()
        self.cache = LevelCache(cfg.ram_cache_bytes)
        self.io: LevelSource = make_source(cfg, self.registry.read, self.cache, io)
        self.reads = ReadLevels(device, self.registry, self.io)
        self.uploader = Uploader(device, cfg.staging_bytes)
        self.bands = BandedLoads(self.registry, self.uploader, cfg.max_band_bytes,
                                 self.reads.ready)
        self.stats_ = StreamingStats()
        self.executor = Executor(device, self.registry, self.reads, self.bands, self.uploader,
                                 self.stats_, self._held, cfg.max_upload_ms)
        self.residency_changes = 0

    @property
    def files(self) -> LevelFiles:
        return self.registry.files

    @files.setter
    def files(self, files: LevelFiles) -> None:
        self.registry.files = files

    @property
    def budget_violations(self) -> int:
        """Loads refused because the plan promised room the ledger did not have."""
        return self.executor.budget_violations

    # ------------------------------------------------------------------ registration
    def register(self, key: str, path: Path) -> int:
        """Open the file (header only) and make its always-resident tail: sampling is valid
        from the first frame. Raises the texture error for a bad file, allocating nothing.
        A batch of one: `register_many` is the one way in."""
        return self.register_many(((key, path),))[0]

    def register_many(self, entries: Sequence[tuple[str, str | Path]],
                      reader: HeadReader | None = None) -> list[int]:
        """Register (key, path) pairs at once; their ids, in order. A key registered before
        (or earlier in the batch) keeps its id and its path is not read. `reader`: the
        `HeadReader` that read the files' headers already (the provider's), if any.

        Per file: one open, size, read and close for the header and the tail levels
        (`HeadReader`; files alike share one header parse), then the tail texture and one
        batched upload of its levels.

        All or nothing: a bad file (`TextureFormatError` naming it: missing, truncated,
        hostile) or a GL failure (`GLError`/`GLOutOfMemoryError`, its message naming the
        file) releases every texture the batch made and registers none of it, so a retry
        without the bad entry starts clean. Textures registered by earlier calls stay."""
        ids, grew = self.registry.register_many(entries, self.uploader, reader)
        if grew:
            self._table = None  # rebuilt (and the state extended) at the next frame
        return ids

    def resident_levels(self) -> np.ndarray:
        """Finest resident level per texture: what is in memory (`residency` adds the fade)."""
        return np.array([it.base for it in self.items], np.int32)

    def _rebuild(self) -> None:
        self._table, self._tex_arrays = self.registry.tables()
        self._state = carried_state(self._state, self._table)
        self.sampling.resize(len(self.items))

    def _held(self) -> int:
        """Bytes of the streamed category that are this streamer's: the ledger's total less
        what others sharing the category hold (a virtual-texture page cache, whose own share
        of the pool is taken out of the grant; see engine.streaming.provider)."""
        return self.device.ledger.category_total(CATEGORY) - int(self.shared_bytes())

    # ------------------------------------------------------------------ per frame
    def grant(self, pool_bytes: int, cache_bytes: int | None = None) -> None:
        """The governor's streaming allowance for the coming frame: the hard pool the plan
        fits (resident + in-flight + transient copies), whatever the budget behind it. It
        has no page cache: a cache share (`cache_bytes`) is the provider's to take out.
        `StreamerSettings.fixed_pool_bytes` replaces the allowance when set."""
        fixed = self.settings.fixed_pool_bytes
        self._pool = max(0, int(pool_bytes if fixed is None else fixed))

    @property
    def pool_bytes(self) -> int:
        return self._pool

    def set_feedback(self, levels: np.ndarray) -> None:
        """Per-texture finest level from the GPU feedback pass (+inf: not seen); folded into
        each following frame's estimate until the next call."""
        self.feedback_mips = np.asarray(levels, np.float64)

    def begin_frame(self, view: FrameView) -> None:
        if not self.items:
            return
        t_begin = self.clock()
        if self._table is None:
            self._rebuild()
        self._frame = view.frame
        now = self.clock() - self._t0
        self.uploader.begin_frame()
        self.stats_.io_errors += self.reads.drain()
        # the policy tiers rank by a prefetch prediction; the baselines have no such notion
        est, prefetch = self.estimates.estimate(
            view, self._tex_arrays, self.config.prefetch and self.planner.predicts,
            self.mip_bias)
        mip, visible = est.mip, est.visible
        if self.feedback_mips is not None:
            mip, visible = combine(mip, visible, self.feedback_mips, self.mip_bias)
        state = update_state(self._state, self._table, mip, visible, view.frame, self.config,
                             prefetch)
        self._state = hold_failed(state, self.registry.failed)
        self._step(now)
        self.stats_.frame_ms = (self.clock() - t_begin) * 1000.0

    def _step(self, now: float) -> None:
        """Run the plan for the current state, then fade what it loaded."""
        self._state, done = self.executor.run(self._state, self._table, self.planner,
                                              self.config, self._frame, self._pool, now,
                                              self.clock)
        self.residency_changes += len(done)
        self.sampling.changed(done, now)
        self.sampling.fade(self._state, self.items, now)
        # after the frame's loads: the ring grows only into room they left
        self.uploader.resize(self.reads.pending_bytes(), self._pool - self._held())

    def bind(self, texture_id: int, unit: int) -> None:
        item = self.items[texture_id]
        if item.tex is None:  # its storage lost to a GL out-of-memory (shrink_through_host)
            self.device.commands.unbind(unit, layered=item.tf.layers > 1)
            return
        item.tex.use(unit)

    def resident_textures(self) -> ResidentTextures:
        """All ids at once (the batched renderer's per-frame read); the texture list is
        rebuilt only when a residency change happened since the last call."""
        return self.sampling.resident_textures(self.items, self.residency_changes)

    def residency(self, texture_id: int) -> Residency:
        return self.sampling.residency(self.items[texture_id], texture_id)

    def end_frame(self) -> None:
        self.device.flush_releases()

    # ------------------------------------------------------------------ API
    def preload(self, keys: list[str] | None = None, level: int = 0,
                timeout: float = 10.0) -> bool:
        """Make the given textures (default: all) resident down to `level`, running the
        streamer without rendering; True when done within `timeout` seconds."""
        if self._table is None and self.items:
            self._rebuild()
        ids = [self.registry.ids[k] for k in keys] if keys else list(range(len(self.items)))
        if ids and self._pool and self._table is not None:
            # what the asked textures hold at `level` (the others at their tails) cannot fit
            # the pool: the streamer would evict one to load another until the timeout
            base = np.minimum(self._table.tail_base, level)
            others = np.ones(len(self.items), bool)
            others[ids] = False
            need = int(self._table.bytes_at(np.where(others, self._table.tail_base,
                                                     base)).sum())
            if need > self._pool:
                log.warning("preload: %s of textures at level %d cannot fit the pool of %s",
                            format_bytes(need), level, format_bytes(self._pool))
                return False
        deadline = self.clock() + timeout
        while self.clock() < deadline:
            st = self._state
            todo = [t for t in ids if st.resident_base[t] > level and not self.items[t].failed]
            if not todo:
                return True
            # wanted now: visible in the frame the plan is made for, so the tiered policy
            # loads them (a texture not seen this frame is only "recent": nothing streams in)
            self._frame += 1
            st.target[todo] = level
            st.last_visible[todo] = self._frame
            if st.visible is not None:
                st.visible[todo] = True
            self.uploader.begin_frame()
            self.stats_.io_errors += self.reads.drain()
            self._step(self.clock() - self._t0)
            time.sleep(0.001)
        return False

    def stats(self) -> StreamingStats:
        s = self.stats_
        if self._table is None and self.items:
            self._rebuild()  # registered, no frame yet: the tails are known and held
        if self._table is not None:
            s.resident_bytes = resident_bytes(self._state, self._table)
            s.wanted_bytes = wanted_bytes(self._state, self._table)
            s.min_bytes = int(self._table.bytes_at(self._table.tail_base).sum())
            s.resident_by_tier = resident_by_tier(self._state, self._table)
        ios = self.io.stats()
        s.reads_in_flight = ios.pending + ios.in_progress
        s.bytes_read = ios.bytes_read
        s.cached_bytes = self.cache.stats().bytes
        s.pending_count = len(self.reads.ready) + ios.pending
        s.pending_uploads = s.pending_count
        s.pending_bytes = self.reads.pending_bytes()
        s.backend = self.backend.name
        s.budget_violations = self.budget_violations
        s.textures = len(self.items)
        s.residency_changes = self.residency_changes
        s.staging_bytes = self.uploader.ring_bytes
        return replace(s)

    def release(self) -> None:
        self.io.close()
        self.files.close()
        self.bands.abort_all()
        self.registry.release()
        self.uploader.release_ring()
        self._table = None
        self._state = None
        self.estimates.clear()
