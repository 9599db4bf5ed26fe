"""A plan's operations and the hard-budget arithmetic over them. Pure, and below the
planner's state (engine.streaming.levels.state), which applies them.

A `MipOp` moves one texture's finest resident level; a `Plan` is the ordered list the GL
executor runs front to back. `step_peaks`/`plan_fits` check the hard budget at every step
(transient copies included).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass



@dataclass(frozen=True)
class MipOp:
    """Change texture `texture`'s finest resident level from `old_base` to `new_base`.
    A load (new_base < old_base) uploads exactly the level `new_base` (the rest is copied
    on the GPU); an eviction may drop several levels in one reallocation."""

    texture: int
    old_base: int
    new_base: int
    old_bytes: int
    new_bytes: int
    realloc: bool = True

    @property
    def is_load(self) -> bool:
        return self.new_base < self.old_base

    @property
    def delta(self) -> int:
        """Change of resident bytes once the op completes."""
        return self.new_bytes - self.old_bytes

    @property
    def transient_bytes(self) -> int:
        """Bytes on top of the pre-op total while the op runs (old and new storage coexist)."""
        return self.new_bytes if self.realloc else max(0, self.delta)

    @property
    def upload_bytes(self) -> int:
        return self.delta if self.is_load else 0


def step_peaks(ops: Iterable[MipOp], start_bytes: int) -> list[int]:
    """Peak bytes during each op when run in order from `start_bytes` (resident + in flight).
    Skipping any load keeps every later peak the same or lower (loads only add bytes), so
    an executor may drop loads whose data is not there; it must not drop evictions."""
    total, peaks = start_bytes, []
    for op in ops:
        peaks.append(total + op.transient_bytes)
        total += op.delta
    return peaks


def plan_fits(ops: Sequence[MipOp], start_bytes: int, pool_bytes: int) -> bool:
    """True when running `ops` in order never exceeds `pool_bytes` (the executor's check)."""
    return all(p <= pool_bytes for p in step_peaks(ops, start_bytes))


@dataclass(frozen=True)
class Plan:
    """One frame's decisions. `ops` in execution order; `requests` are (texture, level)
    reads the I/O should fetch, most important first (loads whose data is not ready)."""

    ops: tuple[MipOp, ...]
    requests: tuple[tuple[int, int], ...]
    start_bytes: int
    pool_bytes: int
    peak_bytes: int
    end_bytes: int
    over_budget: bool
    deferred_loads: int
    reserve_bytes: int

    @property
    def loads(self) -> list[MipOp]:
        return [op for op in self.ops if op.is_load]

    @property
    def evictions(self) -> list[MipOp]:
        return [op for op in self.ops if not op.is_load]

    @property
    def upload_bytes(self) -> int:
        return sum(op.upload_bytes for op in self.ops)
