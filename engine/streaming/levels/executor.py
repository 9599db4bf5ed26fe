"""Runs one frame's plan on the GPU: loads and evictions through the backends, within the
frame's upload time, never over the granted pool.

The planner decides against a model of memory; this is where the model meets the driver.
It re-checks every op against the ledger (refusing what the plan promised wrongly), spreads
big loads over frames (engine.streaming.levels.bands), and keeps what is resident when an
upload fails, so a fault costs detail, never a crash or a broken texture; such a texture
streams again after a back-off (engine.streaming.levels.retry).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from ...errors import FaultKind
from ...gl.device import Device
from ...memory import events
from ..stats import StreamingStats
from .backends import Uploader
from .bands import BandedLoads
from .ops import MipOp, Plan
from .reads import ReadLevels
from .registry import Registry
from .retry import UploadRetries
from .state import Planner, PolicyConfig, StreamerState, TextureTable, apply_ops

log = logging.getLogger(__name__)


class Executor:
    """Applies plans for one streamer. `held` gives the bytes of the streamed ledger
    category that are the streamer's own (the ledger's total less what others sharing the
    category hold)."""

    def __init__(self, device: Device, registry: Registry, reads: ReadLevels,
                 bands: BandedLoads, uploader: Uploader, stats: StreamingStats,
                 held: Callable[[], int], max_upload_ms: float) -> None:
        self.device = device
        self.registry = registry
        self.reads = reads
        self.bands = bands
        self.uploader = uploader
        self.stats = stats
        self.held = held
        self.max_upload_ms = max_upload_ms
        self.budget_violations = 0
        self.retries = UploadRetries()
        self._reported: set[int] = set()  # textures whose upload failure was reported
        self._now = 0.0

    def run(self, st: StreamerState, table: TextureTable, planner: Planner,
            config: PolicyConfig, frame: int, pool: int, now: float,
            clock: Callable[[], float]) -> tuple[StreamerState, list[MipOp]]:
        """Plan and run this frame's ops: the state after them, and the ops really done."""
        self._now = now
        for t in self.retries.ready(now):
            if self.registry.clear_failed(t):
                log.debug("retrying %s after a failed upload", self.registry.items[t].key)
        ready_bytes, partials = self.reads.ready, self.bands.partials
        # Ready: the next finer level's bytes are in hand (or nothing finer exists, or a banded
        # load is under way). Built from the few ready keys, not a loop over every texture.
        ready = st.resident_base == 0
        for t, level in ready_bytes:
            if level == st.resident_base[t] - 1:
                ready[t] = True
        ready[list(partials)] = True
        in_flight = self.bands.in_flight()
        plan = planner.plan(st, table, frame, pool, in_flight, config, ready)
        if plan.over_budget:  # the budget fell: unfinished loads give their memory back first
            self.bands.abort_all()
        # The most the streamer may hold at any instant: the granted pool, or, in a frame that
        # began over it (the budget fell), what it held then.
        ceiling = max(pool, self.held())
        done = [*self.bands.advance(self.upload_failed)]
        t0 = clock()
        uploaded = 0
        loads_open = True  # a band load started this frame holds memory the plan did not expect
        for op in plan.ops:
            item = self.registry.items[op.texture]
            if op.texture in partials:
                if op.is_load:
                    continue
                self.bands.abort(op.texture)  # evicting wins over an unfinished load
            if op.is_load:
                if not loads_open or ((clock() - t0) * 1000 > self.max_upload_ms
                                      and uploaded):
                    continue  # out of time this frame: loads may be skipped, never evictions
                data = ready_bytes.pop((op.texture, op.new_base), None)
                if data is None:
                    continue
                uploaded += 1
            else:
                data = None
                op = self._fit_eviction(op, table, ceiling)
            streamed = self.held()
            backend = self.registry.backend_for(item)
            transient = op.new_bytes if backend.realloc else max(0, op.delta)
            if streamed + transient > pool and op.is_load:
                self.budget_violations += 1  # the plan promised otherwise: refuse the op
                log.error("refusing %s: %d + %d > pool %d", item.key, streamed, transient, pool)
                continue
            sink = events.SINK
            began = time.perf_counter()
            try:
                if data is not None and self.bands.banded(item, op.new_base):
                    loads_open = False
                    if not self.bands.start(op, item, data):
                        continue
                elif data is None and op.realloc and item.tf.faces == 1 and \
                        streamed + op.transient_bytes > ceiling:
                    failed = backend.shrink_through_host(item, op.new_base, self.uploader)
                    if failed is not None:  # it kept its coarsest level alone: the op says so
                        self.upload_failed(op.texture, failed)
                        op = replace(op, new_base=item.base,
                                     new_bytes=backend.storage_bytes(item.tf, item.base))
                else:
                    backend.change(item, op.new_base, data, self.uploader)
            except Exception as exc:  # GL OOM etc.: keep what is resident, report once
                if sink is not None:
                    sink.instant("fault", "streaming failed", {
                        "file": str(item.tf.path), "level": op.new_base, "error": str(exc)})
                self.upload_failed(op.texture, exc)
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
        for op in done:
            if op.is_load:
                self.retries.succeeded(op.texture)
        state = apply_ops(st, done, now)
        self.reads.request(plan.requests, state.resident_base)
        self._count(plan, done, pool, in_flight)
        return state, done

    def _count(self, plan: Plan, done: list[MipOp], pool: int, in_flight: int) -> None:
        s = self.stats
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

    def upload_failed(self, t: int, exc: Exception) -> None:
        """An upload or allocation failed: the texture keeps what is resident (reported
        once) and tries again after a back-off, unless its storage is gone."""
        item = self.registry.items[t]
        if t not in self._reported:
            self._reported.add(t)
            log.warning("streaming %s failed: %s", item.key, exc)
            self.device.faults.report(FaultKind.LEVEL_UPLOAD, item.key, exc)
        if item.tex is None:  # nothing left to load into (shrink_through_host)
            self.registry.mark_failed(t)
            self.retries.forget(t)
            return
        self.registry.mark_failed(t, passing=True)
        log.debug("%s retries in %.0f s", item.key, self.retries.failed(t, self._now) - self._now)

    def _fit_eviction(self, op: MipOp, table: TextureTable, ceiling: int) -> MipOp:
        """A realloc eviction holds the old and the new storage at once. The plan keeps that
        within the pool, but once the pool has shrunk below what is resident (the governor
        re-split the budget, or the budget fell) the plan only recovers: its transients are
        checked against nothing, and the planned one may not fit the memory really free. Then
        evict straight to the tail: the smallest new storage there is, the one the plan's tail
        reserve exists to keep room for. Where even that copy does not fit, the run loop
        shrinks through the host (`shrink_through_host`), never holding both."""
        tail = int(table.tail_base[op.texture])
        streamed = self.held()
        if not op.realloc or op.new_base >= tail or streamed + op.transient_bytes <= ceiling:
            return op
        log.debug("evicting %s to its tail: %d + %d > %d", self.registry.items[op.texture].key,
                  streamed, op.transient_bytes, ceiling)
        return replace(op, new_base=tail, new_bytes=int(table.storage[op.texture, tail]))
