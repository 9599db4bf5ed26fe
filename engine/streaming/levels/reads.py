"""Level bytes between the readers and the uploads: what the plan asks to read, and what
has been read and waits to be uploaded.

The read side has its own failure rule (a texture whose file fails stays at what it has,
reported once) and its own bookkeeping (which read bytes are still wanted); keeping it here
leaves the executor only the GL work of applying ops.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from ...errors import FaultKind
from ...gl.device import Device
from ...memory import events
from ..cache import LevelCache
from ..inline_io import InlineLevelIO
from ..io import LevelIO, Reader, ReadResult, RequestKey
from ..settings import StreamerSettings
from ..stats import IOStats
from .registry import Registry

log = logging.getLogger(__name__)


class LevelSource(Protocol):
    """Where level bytes come from: the threaded `LevelIO` or the deterministic
    `InlineLevelIO` (same surface)."""

    def request(self, texture_id: int, level: int, priority: float = 0.0) -> None: ...

    def retain(self, keys: Iterable[RequestKey]) -> int: ...

    def poll(self, max_items: int = 64) -> list[ReadResult]: ...

    def stats(self) -> IOStats: ...

    def close(self) -> None: ...


LevelSourceFactory = Callable[[Reader, LevelCache], LevelSource]


def make_source(cfg: StreamerSettings, read: Reader, cache: LevelCache,
                factory: LevelSourceFactory | None) -> LevelSource:
    """The given source, else `cfg.io_workers` reader threads (0: inline reads)."""
    if factory is not None:
        return factory(read, cache)
    if cfg.io_workers == 0:
        return InlineLevelIO(read, cache)
    return LevelIO(read, cache, workers=cfg.io_workers, latency_ms=cfg.io_latency_ms)


class ReadLevels:
    """Read levels by (texture, level), waiting for their upload."""

    def __init__(self, device: Device, registry: Registry, source: LevelSource) -> None:
        self.device = device
        self.registry = registry
        self.source = source
        self.ready: dict[tuple[int, int], bytes] = {}

    def drain(self) -> int:
        """Take the finished reads; the number of textures that newly failed a read."""
        sink = events.SINK
        items = self.registry.items
        errors = 0
        for res in self.source.poll(256):
            if sink is not None and res.requested:
                sink.span("read", "read", res.requested, res.finished, {
                    "file": str(items[res.texture_id].tf.path), "level": res.level,
                    "bytes": len(res.data) if res.data is not None else 0,
                    "queue_ms": (res.started - res.requested) * 1e3,
                    "from_cache": res.from_cache, "ok": res.ok})
                if not res.ok:
                    sink.instant("fault", "read failed", {
                        "file": str(items[res.texture_id].tf.path), "level": res.level,
                        "error": str(res.error)})
            if res.ok:
                self.ready[(res.texture_id, res.level)] = res.data
            elif not items[res.texture_id].failed:
                item = items[res.texture_id]
                self.registry.mark_failed(res.texture_id)
                errors += 1
                log.warning("texture %s stays at level %d: %s", item.key, item.base, res.error)
                self.device.faults.report(FaultKind.LEVEL_READ, item.key, res.error)
        return errors

    def request(self, wanted: Sequence[RequestKey], resident_base) -> None:
        """Ask for the plan's reads (first most urgent) and drop read bytes nothing wants
        any more: neither requested nor the next finer level of what is resident."""
        for rank, (t, lvl) in enumerate(wanted):
            self.source.request(t, lvl, priority=float(len(wanted) - rank))
        keys = set(wanted)
        self.source.retain(keys)
        for key in [k for k in self.ready if k not in keys
                    and k[1] != resident_base[k[0]] - 1]:
            del self.ready[key]

    def pending_bytes(self) -> int:
        return sum(len(v) for v in self.ready.values())
