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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ... import textures
from ...errors import FaultKind, GLError, GLOutOfMemoryError
from ...gl.device import Device
from ...gl.staging import StagingRing
from ...gl.textures import GpuTexture
from ...memory import events
from ...memory.sizes import level_bytes
from ..cache import LevelCache
from ..contract import FrameView, Residency, ResidentTextures
from ..handles import HandleCache, HeadReader, LevelFiles
from ..inline_io import InlineLevelIO
from ..io import LevelIO, Reader, ReadResult, RequestKey
from ..settings import StreamerSettings
from ..stats import IOStats, StreamingStats
from .backends import CATEGORY, ReallocBackend, SparseBackend, Streamed, Uploader
from .estimator import (
    CameraInput,
    InstanceArrays,
    MipEstimate,
    PreparedInstances,
    TextureArrays,
    prepare_instances,
)
from .feedback import combine
from .fade import fade_min_lod
from .ops import MipOp, apply_ops
from .planner import planner_for
from .prefetch import PrefetchConfig, estimate_with_prefetch
from .state import (
    StreamerState,
    TextureTable,
    resident_by_tier,
    resident_bytes,
    tail_base_level,
    update_state,
    wanted_bytes,
)

log = logging.getLogger(__name__)

Clock = Callable[[], float]

#: the staging ring's segments grow to the largest level, up to this
MAX_STAGING_SEGMENT = 32 << 20
#: seconds each new level takes to fade in (fade_min_lod's default)
_FADE_SECONDS = 0.3


def _camera_key(cam: CameraInput | None) -> tuple | None:
    """Everything of a camera the estimator reads, as a comparable value."""
    if cam is None:
        return None
    return (np.asarray(cam.position, np.float64).tobytes(),
            np.asarray(cam.view_proj, np.float64).tobytes(), float(cam.fovy),
            cam.viewport_height, cam.near, cam.render_scale)


class LevelSource(Protocol):
    """Where level bytes come from: the threaded `LevelIO` or the deterministic
    `InlineLevelIO` (same surface)."""

    def request(self, texture_id: int, level: int, priority: float = 0.0) -> None: ...

    def retain(self, keys: Iterable[RequestKey]) -> int: ...

    def poll(self, max_items: int = 64) -> list[ReadResult]: ...

    def stats(self) -> IOStats: ...

    def close(self) -> None: ...


LevelSourceFactory = Callable[[Reader, LevelCache], LevelSource]


@dataclass(eq=False)
class _Partial:
    """A load whose level is too big for one frame, uploaded in bands of block rows over
    several frames. Its new storage (or committed pages) is ledgered from the start and
    handed to the policy as in-flight bytes; it is sampled only once complete."""

    op: MipOp
    target: GpuTexture
    data: bytes
    width: int
    height: int
    next_row: int = 0

    @property
    def done(self) -> bool:
        return self.next_row >= self.height


class LevelStreamer:
    """Streams BCn mip levels of registered texture files under the granted pool.

    `settings` (StreamerSettings) may be varied by keyword: `LevelStreamer(dev,
    backend="realloc")` is `LevelStreamer(dev, replace(StreamerSettings(), backend=...))`.
    `clock` gives seconds (fade-in, upload time caps); `io` makes the level source (default:
    `settings.io_workers` reader threads; `InlineLevelIO` for deterministic runs); `files` is
    where those read level bytes (default: an open-file cache of 64 descriptors). `files`
    may be replaced (wrapped) before the first frame reads anything."""

    def __init__(self, device: Device, settings: StreamerSettings | None = None, *,
                 clock: Clock = time.perf_counter, io: LevelSourceFactory | None = None,
                 files: LevelFiles | None = None, **overrides: Any) -> None:
        self.settings = replace(settings or StreamerSettings(), **overrides)
        cfg = self.settings
        self.device = device
        self.clock = clock
        backend = cfg.backend
        if backend == "auto":
            backend = "sparse" if device.caps.sparse_texture else "realloc"
        if backend == "sparse" and not device.caps.sparse_texture:
            raise ValueError("backend 'sparse' needs ARB_sparse_texture, which this driver lacks")
        self.backend = SparseBackend(device) if backend == "sparse" else ReallocBackend(device)
        self._realloc = ReallocBackend(device)  # arrays/cubes stream by reallocation anyway
        # Planning as if every op reallocates is exact for reallocated textures and only
        # conservative for sparse ones (a commit has no old + new transient); a sparse
        # streamer still reallocates the textures sparse pages do not suit (small, arrays).
        self.config = cfg.policy
        self.planner = planner_for(cfg.policy.policy)
        self._pool = 0  # the governor's streaming allowance, granted each frame
        #: bytes of the streamed ledger category held by others (set by the streaming provider)
        self.shared_bytes: Callable[[], int] = lambda: 0
        self.max_upload_ms = cfg.max_upload_ms
        self.max_tail_size = cfg.max_tail_size
        self.mip_bias = cfg.mip_bias
        self.feedback_mips: np.ndarray | None = None
        self.items: list[Streamed] = []
        self._table_cache: tuple[int, list, np.ndarray] | None = None
        self._touched: list[int] = []  # textures whose storage changed this frame
        self._ids: dict[str, int] = {}
        self._table: TextureTable | None = None
        self._state: StreamerState | None = None
        self._ready: dict[tuple[int, int], bytes] = {}
        self._lods = np.zeros(0, np.float32)
        # per texture, when its last load completed (-inf: never): only those loaded within
        # one fade chain can be fading, so _fade looks at those rows alone
        self._load_time = np.zeros(0, np.float64)
        # Per-frame work skipped while its inputs stay the same (_prepared, _estimate_frame):
        # (texture arrays, copies of the view's instance arrays, prepared instances) and
        # (key of everything the estimate reads, estimate, prediction).
        self._prep_cache: tuple[Any, tuple[np.ndarray, ...], PreparedInstances] | None = None
        self._est_cache: tuple[tuple, MipEstimate, np.ndarray | None] | None = None
        self._frame = 0
        self._t0 = clock()
        self.cache = LevelCache(cfg.ram_cache_bytes)
        self.files: LevelFiles = files if files is not None else HandleCache(64)
        self._prev_camera: CameraInput | None = None
        if io is not None:
            self.io: LevelSource = io(self._read, self.cache)
        elif cfg.io_workers == 0:
            self.io = InlineLevelIO(self._read, self.cache)
        else:
            self.io = LevelIO(self._read, self.cache, workers=cfg.io_workers,
                              latency_ms=cfg.io_latency_ms)
        self.staging_bytes = cfg.staging_bytes if device.caps.buffer_storage else 0
        self.max_band_bytes = cfg.max_band_bytes
        self._partials: dict[int, _Partial] = {}
        self._failed = np.zeros(0, bool)  # per texture: a read or upload failed, stays put
        ring = None
        if self.staging_bytes:
            ring = StagingRing(device, self.staging_bytes, label="streamer-staging")
        self.uploader = Uploader(device, ring)
        self.stats_ = StreamingStats()
        self.budget_violations = 0
        self.residency_changes = 0

    # ------------------------------------------------------------------ registration
    def _backend_for(self, item: Streamed):
        if isinstance(self.backend, SparseBackend) and not self.backend.supports(item.tf):
            return self._realloc
        return self.backend

    def _tail(self, item: Streamed) -> int:
        """First always-resident level: small levels, and for sparse textures also the
        driver's mip tail, which is committed and decommitted only as a whole."""
        tf = item.tf
        tail = tail_base_level(tf.width, tf.height, len(tf.levels),
                               max_tail_size=self.max_tail_size)
        return self._backend_for(item).tail_base(tf, tail)

    def register(self, key: str, path: Path) -> int:
        """Open the file (header only) and make its always-resident tail: sampling is valid
        from the first frame. Raises the texture error for a bad file, allocating nothing.
        A batch of one: `register_many` is the one way in."""
        return self.register_many(((key, path),))[0]

    def register_many(self, entries: Sequence[tuple[str, str | Path]]) -> list[int]:
        """Register (key, path) pairs at once; their ids, in order. A key registered before
        (or earlier in the batch) keeps its id and its path is not read.

        Per file: one open, size, read and close for the header and the tail levels
        (`HeadReader`; files alike share one header parse), then the tail texture and one
        batched upload of its levels. 10,000 256^2 BC1 files (7 tail levels each) on
        llvmpipe: 2.4-2.6 s one `register` at a time before, about 0.6 s this way, of which
        about 0.3 s is the driver's own texture creation and uploads.

        All or nothing: a bad file (`TextureFormatError` naming it: missing, truncated,
        hostile) or a GL failure (`GLError`/`GLOutOfMemoryError`, its message naming the
        file) releases every texture the batch made and registers none of it, so a retry
        without the bad entry starts clean. Textures registered by earlier calls stay."""
        ids: list[int] = []
        new: list[tuple[str, str | Path]] = []
        pending: dict[str, int] = {}
        first = len(self.items)
        for key, path in entries:
            tid = self._ids.get(key)
            if tid is None:
                tid = pending.get(key)
                if tid is None:
                    tid = pending[key] = first + len(new)
                    new.append((key, path))
            ids.append(tid)
        if not new:
            return ids
        made: list[Streamed] = []
        reader = HeadReader()
        try:
            for key, path in new:
                made.append(self._make_tail(key, path, reader))
        except BaseException:
            for item in made:
                self._backend_for(item).release(item)
            raise
        self.items.extend(made)
        self._ids.update(pending)
        self._table = None  # rebuilt (and the state extended) at the next frame
        log.debug("registered %d textures (%d header parses, %d second reads)", len(made),
                  reader.parses, reader.extra_reads)
        return ids

    def _make_tail(self, key: str, path: str | Path, reader: HeadReader) -> Streamed:
        """One file's Streamed with its tail texture made and filled (render thread)."""
        try:  # tail_of may allocate too (a sparse backend's page-geometry probe)
            tf, tail, tail_bytes = reader.open_tail(path, self._tail_of)
            item = Streamed(key, tf)
            self._backend_for(item).create(item, tail, tail_bytes.__getitem__, self.uploader)
        except GLOutOfMemoryError as exc:
            raise GLOutOfMemoryError(f"{exc.what} for {path}", exc.nbytes) from exc
        except GLError as exc:
            raise GLError(f"{exc} (registering {path})", exc.codes) from exc
        return item

    def _tail_of(self, tf: textures.TextureFile) -> int:
        return self._tail(Streamed("", tf))

    def _read(self, tid: int, level: int) -> bytes:
        """Worker-thread reader: only file I/O and decompression, never GL, through `files`
        (by default plain KTX2 levels through the open-file LRU: a bounded number of
        descriptors, no open/close per read; anything else the usual way)."""
        return self.files.read_level(self.items[tid].tf, level)

    def resident_levels(self) -> np.ndarray:
        """Finest resident level per texture: what is in memory (`residency` adds the fade)."""
        return np.array([it.base for it in self.items], np.int32)

    def _rebuild(self) -> None:
        count = len(self.items)
        max_levels = max(len(it.tf.levels) for it in self.items)
        storage = np.zeros((count, max_levels + 1), np.int64)
        for t, it in enumerate(self.items):
            be = self._backend_for(it)
            for b in range(len(it.tf.levels)):
                storage[t, b] = be.storage_bytes(it.tf, b)
        levels = np.array([len(it.tf.levels) for it in self.items], np.int32)
        tails = np.array([self._tail(it) for it in self.items], np.int32)
        self._table = TextureTable(levels=levels, tail_base=tails, storage=storage)
        new = StreamerState.initial(self._table)
        old = self._state
        if old is not None:
            n, m = len(old.resident_base), min(old.level_times.shape[1], max_levels)
            for name in ("resident_base", "target", "last_visible", "unwanted_since"):
                getattr(new, name)[:n] = getattr(old, name)
            new.level_times[:n, :m] = old.level_times[:, :m]
        self._state = new
        self._lods = np.resize(self._lods, count)
        load_time = np.full(count, -np.inf)
        load_time[:min(count, len(self._load_time))] = self._load_time[:count]
        self._load_time = load_time
        self._failed = np.array([it.failed for it in self.items], bool)
        self._size_ring()
        self._tex_arrays = TextureArrays(
            width=np.array([it.tf.width for it in self.items]),
            height=np.array([it.tf.height for it in self.items]),
            levels=levels, bias=np.zeros(count))

    def _size_ring(self) -> None:
        """Grow the ring so a segment holds the largest level: every upload then goes
        through the persistently mapped ring (measured 2.5x a client-memory upload on the
        H200) instead of a synchronous copy inside the GL call. It is fixed memory under the
        one budget, so it grows only into at most a quarter of the room the granted pool has
        left."""
        ring = self.uploader.ring
        if ring is None:
            return
        largest = max(lv.nbytes for it in self.items for lv in it.tf.levels)
        want = min(largest, MAX_STAGING_SEGMENT)
        if want <= ring.segment_bytes:
            return
        room = self._pool - self._held()
        if want * (ring.size // ring.segment_bytes) > room // 4:
            return
        ring.release()
        self.uploader.ring = StagingRing(self.device, want, label="streamer-staging")

    def _held(self) -> int:
        """Bytes of the streamed category that are this streamer's: the ledger's total less
        what others sharing the category hold (a virtual-texture page cache, whose own share
        of the pool is taken out of the grant; see engine.streaming.provider)."""
        return self.device.ledger.category_total(CATEGORY) - int(self.shared_bytes())

    # ------------------------------------------------------------------ per frame
    def grant(self, pool_bytes: int, cache_bytes: int | None = None) -> None:
        """The governor's streaming allowance for the coming frame: the hard pool the plan
        fits (resident + in-flight + transient copies), whatever the budget behind it. It
        has no page cache: a cache share (`cache_bytes`) is the provider's to take out."""
        self._pool = max(0, int(pool_bytes))

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
        self._drain_reads()
        cam = self._camera(view)
        est, prefetch = self._estimate_frame(self._prepared(view), cam)
        mip, visible = est.mip, est.visible
        if self.feedback_mips is not None:
            mip, visible = combine(mip, visible, self.feedback_mips, self.mip_bias)
        self._prev_camera = cam
        state = update_state(self._state, self._table, mip, visible, view.frame, self.config,
                             prefetch)
        failed = self._failed
        state.target[failed] = np.maximum(state.target[failed], state.resident_base[failed])
        if state.prefetch_target is not None:
            state.prefetch_target[failed] = np.maximum(state.prefetch_target[failed],
                                                       state.resident_base[failed])
        self._state = state
        self._execute(now)
        self._fade(now)
        self.stats_.frame_ms = (self.clock() - t_begin) * 1000.0

    @staticmethod
    def _instances(view: FrameView) -> InstanceArrays:
        """One row per (instance, texture slot in use)."""
        ids = view.texture_ids
        rows, cols = np.nonzero(ids >= 0)
        return InstanceArrays(centers=view.centers[rows], radii=view.radii[rows],
                              uv_density=view.uv_density[rows], texture=ids[rows, cols])

    @staticmethod
    def _camera(view: FrameView) -> CameraInput:
        vp = np.asarray(view.proj, np.float64) @ np.asarray(view.view, np.float64)
        return CameraInput(position=view.camera_pos, view_proj=vp, fovy=view.fovy,
                           viewport_height=max(1, round(view.viewport[1] / view.render_scale)),
                           render_scale=view.render_scale)

    def _prepared(self, view: FrameView) -> PreparedInstances:
        """The camera-independent estimator terms, rebuilt only when the view's instance
        arrays (compared by value: a scene updates its arrays in place) or the textures
        changed: a still scene under a moving camera pays only for the camera's part."""
        arrays = (view.texture_ids, view.centers, view.radii, view.uv_density)
        cached = self._prep_cache
        if cached is not None and cached[0] is self._tex_arrays and all(
                a.shape == b.shape and np.array_equal(a, b) for a, b in zip(arrays, cached[1])):
            return cached[2]
        prep = prepare_instances(self._instances(view), self._tex_arrays)
        self._prep_cache = (self._tex_arrays, tuple(np.array(a) for a in arrays), prep)
        return prep

    def _estimate_frame(self, prep: PreparedInstances, cam: CameraInput
                        ) -> tuple[MipEstimate, np.ndarray | None]:
        """This frame's estimate and prefetch prediction (policy tiers: the camera a moment
        ahead and the view's neighbours; the baselines have no such notion, so they run
        without it). The same inputs (instances, this and the last camera, bias) give the
        same numbers, so a still view reuses the last frame's."""
        prefetch = self.config.prefetch and self.planner.predicts
        prev = self._prev_camera if prefetch else None
        key = (_camera_key(cam), _camera_key(prev), prefetch, float(self.mip_bias))
        cached = self._est_cache
        if cached is not None and cached[0][0] is prep and cached[0][1:] == key:
            return cached[1], cached[2]
        est, mips = estimate_with_prefetch(prep, cam, prev, PrefetchConfig() if prefetch
                                           else None, self.mip_bias)
        self._est_cache = ((prep, *key), est, mips)
        return est, mips

    def _upload_failed(self, t: int, exc: Exception) -> None:
        """An upload or allocation failed: the texture keeps what is resident, reported once."""
        item = self.items[t]
        if not item.failed:
            log.warning("streaming %s failed: %s", item.key, exc)
            self.device.faults.report(FaultKind.LEVEL_UPLOAD, item.key, exc)
        self._mark_failed(t)

    def _mark_failed(self, t: int) -> None:
        self.items[t].failed = True
        self._failed[t] = True

    def _drain_reads(self) -> None:
        sink = events.SINK
        for res in self.io.poll(256):
            if sink is not None and res.requested:
                sink.span("read", "read", res.requested, res.finished, {
                    "file": str(self.items[res.texture_id].tf.path), "level": res.level,
                    "bytes": len(res.data) if res.data is not None else 0,
                    "queue_ms": (res.started - res.requested) * 1e3,
                    "from_cache": res.from_cache, "ok": res.ok})
                if not res.ok:
                    sink.instant("fault", "read failed", {
                        "file": str(self.items[res.texture_id].tf.path), "level": res.level,
                        "error": str(res.error)})
            if res.ok:
                self._ready[(res.texture_id, res.level)] = res.data
            elif not self.items[res.texture_id].failed:
                item = self.items[res.texture_id]
                self._mark_failed(res.texture_id)
                self.stats_.io_errors += 1
                log.warning("texture %s stays at level %d: %s", item.key, item.base, res.error)
                self.device.faults.report(FaultKind.LEVEL_READ, item.key, res.error)

    def _execute(self, now: float) -> None:
        st, table = self._state, self._table
        # Ready: the next finer level's bytes are in hand (or nothing finer exists, or a banded
        # load is under way). Built from the few ready keys, not a loop over every texture.
        ready = st.resident_base == 0
        for t, level in self._ready:
            if level == st.resident_base[t] - 1:
                ready[t] = True
        ready[list(self._partials)] = True
        pool = self._pool
        in_flight = sum(self._transient(p) for p in self._partials.values())
        plan = self.planner.plan(st, table, self._frame, pool, in_flight, self.config, ready)
        if plan.over_budget:  # the budget fell: unfinished loads give their memory back first
            for t in list(self._partials):
                self._abort_partial(t)
        # The most the streamer may hold at any instant: the granted pool, or, in a frame that
        # began over it (the budget fell), what it held then.
        ceiling = max(pool, self._held())
        done = [*self._advance_partials()]
        t0 = self.clock()
        uploaded = 0
        loads_open = True  # a band load started this frame holds memory the plan did not expect
        for op in plan.ops:
            item = self.items[op.texture]
            if op.texture in self._partials:
                if op.is_load:
                    continue
                self._abort_partial(op.texture)  # evicting wins over an unfinished load
            if op.is_load:
                if not loads_open or ((self.clock() - t0) * 1000 > self.max_upload_ms
                                      and uploaded):
                    continue  # out of time this frame: loads may be skipped, never evictions
                data = self._ready.pop((op.texture, op.new_base), None)
                if data is None:
                    continue
                uploaded += 1
            else:
                data = None
                op = self._fit_eviction(op, ceiling)
            streamed = self._held()
            transient = op.new_bytes if self._backend_for(item).realloc else max(0, op.delta)
            if streamed + transient > pool and op.is_load:
                self.budget_violations += 1  # the plan promised otherwise: refuse the op
                log.error("refusing %s: %d + %d > pool %d", item.key, streamed, transient, pool)
                continue
            sink = events.SINK
            began = time.perf_counter()
            try:
                if data is not None and self._banded(item, op.new_base):
                    loads_open = False
                    if not self._start_partial(op, item, data):
                        continue
                else:
                    self._backend_for(item).change(item, op.new_base, data, self.uploader)
            except Exception as exc:  # GL OOM etc.: keep what is resident, report once
                if sink is not None:
                    sink.instant("fault", "streaming failed", {
                        "file": str(item.tf.path), "level": op.new_base, "error": str(exc)})
                self._upload_failed(op.texture, exc)
                continue
            if sink is not None:
                what = {"file": str(item.tf.path), "level": op.new_base, "bytes": op.new_bytes}
                if op.is_load:
                    sink.span("upload", "upload", began, time.perf_counter(),
                              {**what, "upload_bytes": op.upload_bytes})
                else:
                    sink.instant("evict", "eviction", {**what, "from_level": op.old_base})
            done.append(op)
        self.uploader.end_frame()
        self._state = apply_ops(st, done, now)
        for op in done:
            if op.is_load:
                self._load_time[op.texture] = now
        self.residency_changes += len(done)
        # a reallocated texture is a new GL object at the default MIN_LOD: _fade sets it
        self._touched = [op.texture for op in done]
        wanted_keys = set(plan.requests)
        for rank, (t, lvl) in enumerate(plan.requests):
            self.io.request(t, lvl, priority=float(len(plan.requests) - rank))
        self.io.retain(wanted_keys)
        for key in [k for k in self._ready if k not in wanted_keys
                    and k[1] != self._state.resident_base[k[0]] - 1]:
            del self._ready[key]
        s = self.stats_
        s.pool_bytes = pool
        s.peak_bytes = plan.peak_bytes
        s.in_flight_bytes = in_flight
        s.over_budget_events += int(plan.over_budget)
        s.loads += len([o for o in done if o.is_load])
        s.evictions += len([o for o in done if not o.is_load])
        s.upload_bytes_this_frame = sum(o.upload_bytes for o in done)
        s.bytes_uploaded += s.upload_bytes_this_frame
        s.ops_this_frame = len(done)
        s.deferred_loads = plan.deferred_loads

    # ------------------------------------------------------------------ banded loads
    def _banded(self, item: Streamed, level: int) -> bool:
        tf = item.tf
        return tf.layers == 1 and tf.faces == 1 and tf.levels[level].nbytes > self.max_band_bytes

    def _transient(self, p: _Partial) -> int:
        """Bytes a partial load holds beyond what the policy's state counts as resident."""
        return p.op.new_bytes if self._backend_for(self.items[p.op.texture]).realloc \
            else max(0, p.op.delta)

    def _start_partial(self, op: MipOp, item: Streamed, data: bytes) -> bool:
        """Begin a banded load and upload its first band; True if it finished at once."""
        lv = item.tf.levels[op.new_base]
        target = self._backend_for(item).begin_load(item, op.new_base)
        p = _Partial(op, target, data, lv.width, lv.height)
        self._partials[op.texture] = p
        self._upload_band(p, self.max_band_bytes)
        if p.done:
            self._finish_partial(op.texture)
        return p.done

    def _upload_band(self, p: _Partial, budget: int) -> int:
        """Upload the next rows of `p` (whole block rows, about `budget` bytes)."""
        fmt = self.items[p.op.texture].tf.pixel_format
        band = level_bytes(fmt, p.width, fmt.block_h)  # one row of blocks
        y0 = p.next_row
        y1 = min(p.height, y0 + max(1, budget // band) * fmt.block_h)
        start = (y0 // fmt.block_h) * band
        end = start + level_bytes(fmt, p.width, y1 - y0)
        try:
            self.uploader.rows(p.target, p.op.new_base, memoryview(p.data)[start:end], y0, y1)
        except Exception:
            self._abort_partial(p.op.texture)
            raise
        p.next_row = y1
        return end - start

    def _advance_partials(self) -> list[MipOp]:
        """Continue unfinished loads within this frame's band budget; the completed ops."""
        budget, finished = self.max_band_bytes, []
        for t, p in list(self._partials.items()):
            if budget <= 0:
                break
            try:
                budget -= self._upload_band(p, budget)
            except Exception as exc:  # GL error: the load was aborted; keep what is resident
                self._upload_failed(t, exc)
                continue
            if p.done:
                finished.append(self._finish_partial(t))
        return finished

    def _finish_partial(self, t: int) -> MipOp:
        p = self._partials.pop(t)
        self._backend_for(self.items[t]).finish_load(self.items[t], p.op.new_base, p.target)
        return p.op

    def _abort_partial(self, t: int) -> None:
        p = self._partials.pop(t, None)
        if p is None:
            return
        self._backend_for(self.items[t]).abort_load(self.items[t], p.op.new_base, p.target)
        self._ready[(t, p.op.new_base)] = p.data  # the bytes stay usable for a later try

    def _fit_eviction(self, op: MipOp, ceiling: int) -> MipOp:
        """A realloc eviction holds the old and the new storage at once. The plan keeps that
        within the pool, but once the pool has shrunk below what is resident (the governor
        re-split the budget, or the budget fell) the plan only recovers: its transients are
        checked against nothing, and the planned one may not fit the memory really free. Then
        evict straight to the tail: the smallest new storage there is, the one the plan's tail
        reserve exists to keep room for."""
        tail = int(self._table.tail_base[op.texture])
        streamed = self._held()
        if not op.realloc or op.new_base >= tail or streamed + op.transient_bytes <= ceiling:
            return op
        log.debug("evicting %s to its tail: %d + %d > %d", self.items[op.texture].key,
                  streamed, op.transient_bytes, ceiling)
        return replace(op, new_base=tail, new_bytes=int(self._table.storage[op.texture, tail]))

    def _fade(self, now: float) -> None:
        # fading rows: loaded within one chain of fades (fade_min_lod's own window)
        window = self._state.level_times.shape[1] * _FADE_SECONDS
        lods = fade_min_lod(self._state, now, _FADE_SECONDS,
                            rows=np.flatnonzero(self._load_time > now - window))
        changed = np.flatnonzero(np.abs(lods - self._lods) > 1e-3)
        if self._touched:  # new storage this frame: its clamp must be set even if unchanged
            changed = np.union1d(changed, self._touched)
            self._touched = []
        for t in changed:
            item = self.items[t]
            # GL measures MIN_LOD from the texture's base level: storage level 0 for a
            # reallocated texture (chain level item.base), GL_TEXTURE_BASE_LEVEL = item.base
            # for a sparse one. Either way the offset is the finest resident chain level.
            self.device.set_min_lod(item.tex, float(lods[t]) - item.base)
        self._lods = lods

    def bind(self, texture_id: int, unit: int) -> None:
        self.items[texture_id].tex.use(unit)

    def resident_textures(self) -> ResidentTextures:
        """All ids at once (the batched renderer's per-frame read); the texture list is
        rebuilt only when a residency change happened since the last call."""
        if self._table_cache is None or self._table_cache[0] != self.residency_changes \
                or len(self._table_cache[1]) != len(self.items):
            self._table_cache = (self.residency_changes, [it.tex for it in self.items],
                                 np.array([it.base for it in self.items], np.float32))
        version, textures, finest = self._table_cache
        lods = self._lods if len(self._lods) == len(self.items) else finest
        return ResidentTextures(version, textures, finest,
                                np.maximum(np.asarray(lods, np.float32), finest))

    def residency(self, texture_id: int) -> Residency:
        it = self.items[texture_id]
        lod = float(self._lods[texture_id]) if texture_id < len(self._lods) else float(it.base)
        return Residency(it.tf.width, it.tf.height, len(it.tf.levels), max(lod, it.base))

    def end_frame(self) -> None:
        self.device.flush_releases()

    # ------------------------------------------------------------------ API
    def preload(self, keys: list[str] | None = None, level: int = 0,
                timeout: float = 10.0) -> bool:
        """Make the given textures (default: all) resident down to `level`, running the
        streamer without rendering; True when done within `timeout` seconds."""
        if self._table is None and self.items:
            self._rebuild()
        ids = [self._ids[k] for k in keys] if keys else list(range(len(self.items)))
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
            self._drain_reads()
            self._execute(self.clock() - self._t0)
            self._fade(self.clock() - self._t0)
            time.sleep(0.001)
        return False

    def stats(self) -> StreamingStats:
        s = self.stats_
        if self._table is not None:
            s.resident_bytes = resident_bytes(self._state, self._table)
            s.wanted_bytes = wanted_bytes(self._state, self._table)
            s.min_bytes = int(self._table.bytes_at(self._table.tail_base).sum())
            s.resident_by_tier = resident_by_tier(self._state, self._table)
        ios = self.io.stats()
        s.reads_in_flight = ios.pending + ios.in_progress
        s.bytes_read = ios.bytes_read
        s.cached_bytes = self.cache.stats().bytes
        s.pending_count = len(self._ready) + ios.pending
        s.pending_uploads = s.pending_count
        s.pending_bytes = sum(len(v) for v in self._ready.values())
        s.backend = self.backend.name
        s.budget_violations = self.budget_violations
        s.textures = len(self.items)
        s.residency_changes = self.residency_changes
        return replace(s)

    def release(self) -> None:
        self.io.close()
        self.files.close()
        for t in list(self._partials):
            self._abort_partial(t)
        for item in self.items:
            if item.tex is not None:
                self._backend_for(item).release(item)
        if self.uploader.ring is not None:
            self.uploader.ring.release()
        self.items.clear()
        self._ids.clear()
        self._table = None
        self._state = None
        self._prep_cache = self._est_cache = None

