"""The baseline streaming policies the wall benchmark compares the tiered one against.

They are measurement apparatus, not shipped policy: whole textures with LRU eviction
(Panda3D's graphics-memory-limit) and one global mip bias. Each is a `Planner` the executor
runs under the same hard-budget rules as the tiered policy, passed as the object itself in
`PolicyConfig.policy` (`BASELINES` by name); the product's planner registry is not touched.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.streaming.levels.ops import MipOp, Plan, step_peaks
from engine.streaming.levels.state import (
    PolicyConfig,
    StreamerState,
    TextureTable,
    resident_bytes,
    tail_reserve,
)


def _baseline_plan(state: StreamerState, table: TextureTable, pool: int, start: int,
                   config: PolicyConfig, desired: np.ndarray, order: Sequence[int],
                   evict_order: Sequence[int], ready: np.ndarray | None,
                   whole: bool, cut_first: bool = False) -> Plan:
    """The executor-facing part both baselines share: evict textures (in `evict_order`, to
    their `desired` level, or to the tail when `whole`) while loads need room, then load one
    level per texture in `order`; every step checked against the pool and the tail reserve,
    with the same per-frame caps as the tiered policy."""
    reserve = tail_reserve(table, config)
    res = state.resident_base
    ops: list[MipOp] = []
    total = start
    touched: set[int] = set()
    requests: list[tuple[int, int]] = []
    deferred = 0

    def op(t: int, new: int) -> MipOp:
        return MipOp(t, int(res[t]), new, int(table.storage[t, res[t]]),
                     int(table.storage[t, new]), config.realloc)

    def fits(candidate: MipOp, end_limit: int) -> bool:
        return (total + candidate.transient_bytes <= pool
                and total + candidate.delta <= end_limit)

    over = start > pool
    evictable = [t for t in evict_order
                 if res[t] < desired[t] or (whole and res[t] < table.tail_base[t])]
    ev = iter(evictable)
    if cut_first and not over:  # everything finer than wanted goes first, as far as it fits
        for t in evictable:
            e = op(t, int(desired[t]))
            if len(ops) >= config.max_ops or total + e.transient_bytes > pool:
                continue
            ops.append(e)
            touched.add(t)
            total += e.delta
    if over:
        for t in ev:
            if total <= pool - reserve or len(ops) >= config.max_ops:
                break
            e = op(t, int(table.tail_base[t]) if whole else int(desired[t]))
            ops.append(e)
            touched.add(t)
            total += e.delta
    else:
        uploads = 0
        for t in order:
            if res[t] <= desired[t] or t in touched:
                continue
            if ready is not None and not ready[t]:
                if len(requests) < config.max_requests:
                    requests.append((t, int(res[t]) - 1))
                continue
            load = op(t, int(res[t]) - 1)
            if len(ops) >= config.max_ops or (uploads and uploads + load.upload_bytes
                                               > config.max_upload_bytes):
                deferred += 1
                continue
            while not fits(load, pool - reserve) and len(ops) < config.max_ops - 1:
                victim = next((v for v in ev if v != t and v not in touched), None)
                if victim is None:
                    break
                new = int(table.tail_base[victim]) if whole else int(desired[victim])
                e = op(victim, new)
                if total + e.transient_bytes > pool:
                    continue
                ops.append(e)
                touched.add(victim)
                total += e.delta
            if not fits(load, pool - reserve):
                deferred += 1
                continue
            ops.append(load)
            touched.add(t)
            total += load.delta
            uploads += load.upload_bytes
    peaks = step_peaks(ops, start)
    return Plan(ops=tuple(ops), requests=tuple(requests), start_bytes=start, pool_bytes=pool,
                peak_bytes=max([start, *peaks]), end_bytes=total, over_budget=over,
                deferred_loads=deferred, reserve_bytes=reserve)


def plan_lru_whole(state: StreamerState, table: TextureTable, frame: int, pool_bytes: int,
                   in_flight_bytes: int = 0, config: PolicyConfig = PolicyConfig(),
                   ready: np.ndarray | None = None) -> Plan:
    """Baseline: Panda3D's graphics-memory-limit. A texture in view wants its whole chain
    (level 0, whatever its screen size); when a load does not fit, whole textures not seen
    this frame are evicted to their tail, least recently used first. Loads go most recently
    seen first. (The executor loads one level per texture per frame, so 'whole' arrives
    level by level: a kinder baseline than one big upload.)"""
    start = resident_bytes(state, table) + int(in_flight_bytes)
    seen = state.last_visible == frame
    desired = np.where(seen, 0, np.maximum(state.resident_base, 0)).astype(np.int32)
    desired = np.minimum(desired, table.tail_base)
    order = np.flatnonzero(seen).tolist()
    lru = np.argsort(state.last_visible, kind="stable")
    evict_order = [int(t) for t in lru if not seen[t]]
    if start > pool_bytes:  # recovering: everything is fair game, least recent first
        evict_order = [int(t) for t in lru]
    return _baseline_plan(state, table, int(pool_bytes), start, config, desired, order,
                          evict_order, ready, whole=True)


def bias_for_pool(state: StreamerState, table: TextureTable, pool_bytes: int,
                  config: PolicyConfig) -> int:
    """The smallest global bias b >= 0 whose targets (target + b, clamped to the tails) fit
    the pool with the tail reserve left free."""
    limit = pool_bytes - tail_reserve(table, config)
    top = int(table.levels.max(initial=1))
    for b in range(top + 1):
        base = np.minimum(state.target + b, table.tail_base)
        if int(table.bytes_at(base).sum()) <= limit:
            return b
    return top


def plan_global_bias(state: StreamerState, table: TextureTable, frame: int, pool_bytes: int,
                     in_flight_bytes: int = 0, config: PolicyConfig = PolicyConfig(),
                     ready: np.ndarray | None = None) -> Plan:
    """Baseline: one mip bias for every texture ("drop the finest levels everywhere until it
    fits"). Each frame the smallest bias whose biased targets fit the pool is found; textures
    finer than their biased target are cut back to it, then loads go towards it, largest want
    first. The bias found is left in `state.global_bias` for reports."""
    start = resident_bytes(state, table) + int(in_flight_bytes)
    bias = bias_for_pool(state, table, int(pool_bytes), config)
    state.global_bias = bias
    desired = np.minimum(state.target + bias, table.tail_base).astype(np.int32)
    order = np.argsort(desired - state.resident_base, kind="stable").tolist()
    evict_order = np.argsort(state.last_visible, kind="stable").tolist()
    return _baseline_plan(state, table, int(pool_bytes), start, config, desired, order,
                          evict_order, ready, whole=False, cut_first=True)


@dataclass(frozen=True)
class FunctionPlanner:
    """A baseline plan function as a `Planner`; baselines have no notion of prefetch."""

    plan: Callable[..., Plan]
    predicts: bool = False


BASELINES: dict[str, FunctionPlanner] = {"lru-whole": FunctionPlanner(plan_lru_whole),
                                         "global-bias": FunctionPlanner(plan_global_bias)}


