"""The split of the streaming pool between whole mip levels and the virtual-texture page
cache. Pure: the governor calls `share_pool` for each frame's split (`BudgetSplit.
cache_allowance`); the hysteresis that keeps the cache from rebuilding is here alone.

    vt_min    = page table + LOD proxy + (packed coarsest-tile slots + whole pinned slots
                + MIN_STREAM_SLOTS) x slot bytes          (the cache cannot be smaller)
    screen    = output pixels x bytes per texel of the virtual format
    demand    = the tiles the newest feedback shows (with headroom) + pinned + MIN_STREAM_SLOTS
    cap       = max(vt_min, screen_factor x screen, demand)
    room      = max(vt_min, pool - whole-level tails)
    vt_target = min(cap, room)

so the page cache follows the screen, not the content (the demand term covers a screen
that shows many textures at once: each visible one needs whole tiles), and never takes the
room the whole-level streamer's always-resident tails need; the whole levels get the rest
of the pool. A cache rebuild re-streams every tile, so the allowance moves only when it
must (the pool no longer holds it) or when the target moved far enough (`settle_allowance`).
"""
from __future__ import annotations

from dataclasses import dataclass

#: Slots the page cache keeps for streaming beyond its pinned coarsest tiles, at least: at
#: the floor everything draws from its pinned tiles and a few tiles stream at a time (the
#: screen's need, not this, sizes the cache above the floor).
MIN_STREAM_SLOTS = 4
#: The allowance grows only past this factor of the current one (a rebuild re-streams).
GROW_FACTOR = 1.25
#: ... and shrinks on its own (not forced by the pool) only below this one.
SHRINK_FACTOR = 0.5


@dataclass(frozen=True)
class CacheNeeds:
    """What a page cache needs of the streaming pool, as its provider reports it."""

    current: int  # the cache's allowance now (0: none yet)
    min_bytes: int  # the smallest cache it runs with (vt_min)
    screen_bytes: int  # output pixels x bytes per texel of the cache's format
    screen_factor: float  # the cache aims at this many screens at most
    demand_bytes: int = 0  # the tiles a starved cache was seen to need (0: not starved)
    whole_min_bytes: int = 0  # the whole-level tails the cache must leave room for


def cache_cap(vt_min: int, screen_bytes: int, factor: float, demand: int = 0) -> int:
    """The most the page cache aims at, whatever the pool (see the module docstring)."""
    return max(vt_min, int(factor * screen_bytes), int(demand))


def split_pool(pool: int, whole_min: int, vt_min: int, screen_bytes: int,
               factor: float, demand: int = 0) -> int:
    """The page cache's target out of the one pool (see the module docstring)."""
    room = max(vt_min, int(pool) - int(whole_min))
    return min(cache_cap(vt_min, screen_bytes, factor, demand), room)


def settle_allowance(current: int, target: int, room: int, full: int | None = None) -> int:
    """The allowance to hand the cache: `target` when the current one no longer fits the
    room, or the target moved far enough to be worth a rebuild, or the room again allows the
    `full` size the cache aims at (`split_pool`'s cap) and the cache is smaller; else the
    current one. The `full` rule lets a cache shrunk under pressure return to the size a
    fresh start at the same budget has, once the pressure passed."""
    if current <= 0 or current > room:
        return target
    if full is not None and current < target and target >= full:
        return target
    if target > current * GROW_FACTOR or target < current * SHRINK_FACTOR:
        return target
    return current


def share_pool(pool: int, needs: CacheNeeds) -> int:
    """The page cache's allowance out of `pool`: the target `split_pool` gives, settled
    against the cache's current allowance."""
    target = split_pool(pool, needs.whole_min_bytes, needs.min_bytes, needs.screen_bytes,
                        needs.screen_factor, needs.demand_bytes)
    room = max(needs.min_bytes, int(pool) - needs.whole_min_bytes)
    cap = cache_cap(needs.min_bytes, needs.screen_bytes, needs.screen_factor,
                    needs.demand_bytes)
    return settle_allowance(needs.current, target, room, full=cap)
