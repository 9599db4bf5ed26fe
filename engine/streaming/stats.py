"""Counters of the texture streamer, as plain data.

Kept apart from the code that fills them so the HUD, the CLI report and tests read one shape
without importing threads or GL. Byte fields are exact (engine.memory.sizes), never estimates.
"""
from __future__ import annotations

from dataclasses import dataclass

from .contract import ProviderStats


@dataclass
class CacheStats:
    """RAM level cache: what it holds and how well it serves the I/O workers."""

    hits: int = 0
    misses: int = 0
    bytes: int = 0
    entries: int = 0
    evictions: int = 0
    #: puts refused because a single item is larger than the whole cache budget
    rejected: int = 0
    budget_bytes: int = 0


@dataclass
class IOStats:
    """I/O workers: requests through their life cycle and the faults they met."""

    requested: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    cache_hits: int = 0
    bytes_read: int = 0
    pending: int = 0
    in_progress: int = 0


@dataclass
class StreamingStats(ProviderStats):
    """One frame's view of the streamer, filled by the residency executor.

    `over_budget_events` counts frames that started above the pool (the governor cut it, or
    in-flight work overran): the symptom Unreal users know as "POOL OVER BUDGET".
    """

    cached_bytes: int = 0
    pending_bytes: int = 0
    pending_count: int = 0
    in_flight_bytes: int = 0
    pool_bytes: int = 0
    peak_bytes: int = 0
    over_budget_events: int = 0
    loads: int = 0
    evictions: int = 0
    io_errors: int = 0
    upload_bytes_this_frame: int = 0
    ops_this_frame: int = 0
    deferred_loads: int = 0
    #: wall milliseconds of the last begin_frame (plan, reallocate/commit, copy, upload)
    frame_ms: float = 0.0
    backend: str = ""
    budget_violations: int = 0
    residency_changes: int = 0
