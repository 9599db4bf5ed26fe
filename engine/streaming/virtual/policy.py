"""Which tiles to read, which to keep, which to evict: the pure residency policy.

Numbers in, decisions out; no GL, no files (tested without either). Tiles are named by their
packed 64-bit key (`keys.pack`: the very value the feedback pass writes), so a
frame's requests stay numpy arrays from the readback to here.

Tiers, as Neuroglancer and the whole-level streamer rank work: VISIBLE (a feedback pixel
asked for the tile, or for a child one level finer, which trilinear filtering blends with
it) > PREFETCH (a further ancestor of a visible tile: what the screen falls back to while a
finer tile is on its way) > RECENT (resident, no longer asked for). A tile keeps the tier it
earned for `hold_frames` frames: feedback runs every few frames on a sub-sampled image, so a
tile missing from one readback is not yet unwanted (the hysteresis that stops thrashing).

Slots: a fixed count handed in from outside (the cache the governor's allowance pays for).
A tile is admitted into a free slot, or into the slot of the worst resident tile (highest
tier, then least recently wanted) when that tile's tier is strictly worse than the newcomer's:
a visible tile never evicts another tile the newest feedback showed (or one shown within
`grace_frames`), so a too-small cache shows coarser detail instead of thrashing; a tile
visible only through the longer hold gives way to one shown now, so a camera cut is not held
up by the last view. Pinned tiles (each texture's coarsest) are never evicted: they are the
fallback that keeps every lookup valid.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import BudgetError
from ..tiers import Tier
from . import keys as tile_keys


def _badness(keys: np.ndarray | int) -> np.ndarray:
    """A fixed order among tiles visible now, worse = larger (`keys.fine_first`): finer
    level first, then a larger key. A full cache keeps the best of the visible tiles in this order, so a view
    that wants more than the cache holds converges to the same tiles whatever came first:
    every texture's coarser fallback before any texture's finer detail (the wall's overview
    kept level 4 of some images and showed the 4-texel tail of others), and the same picture
    after a soak as after a fresh start. (< 2**56: below every rank > 0 eviction score.)"""
    return tile_keys.fine_first(keys)


def _may_evict(rank: int, score: int, tier: int, key: int) -> bool:
    """A newcomer of `tier` may take a slot of eviction `rank` (and score): one strictly
    worse in rank, or, for a visible newcomer, a visible tile worse in `_badness`."""
    if rank > 2 * int(tier):
        return True
    return rank == 0 and int(tier) == 0 and score > int(_badness(key))


_NEVER = -(1 << 40)
#: Request priority = tier step + capped screen loss x MAX_LEVELS + level: exact in float64
#: (below 2**53), each part never reaching into the next.
_LOSS_CAP = (1 << 40) - 1
_TIER_STEP = float(1 << 45)


@dataclass(frozen=True)
class Admission:
    """Where an arriving tile goes: its slot, and the tile evicted from it (0: none)."""

    slot: int
    evicted: int = 0


@dataclass(frozen=True)
class PolicyStats:
    slots: int
    occupied: int
    pinned: int
    visible: int
    wanted_missing: int
    #: of those, tiles shown now (the rest are prefetch): 0 when the screen has its detail
    visible_missing: int = 0


class TilePolicy:
    """Slot bookkeeping and the load/evict decisions for one page cache."""

    def __init__(self, slots: int, *, hold_frames: int = 8, grace_frames: int = 2,
                 max_requests: int = 128) -> None:
        if slots < 1:
            raise BudgetError(f"a page cache needs at least one slot, got {slots}")
        self.hold_frames = int(hold_frames)
        #: Frames a visible tile absent from the feedback still counts as shown now (one
        #: sub-sampled readback can miss it); after that it yields to tiles shown now.
        self.grace_frames = min(int(grace_frames), self.hold_frames)
        self.max_requests = int(max_requests)
        self._reset(int(slots))
        # The newest plan's wanted tiles: sorted keys and their tiers as arrays; the dict
        # behind `tier_of` is built only when a frame asks (tiles arrived), not every plan.
        self._want_keys = np.zeros(0, tile_keys.DTYPE)
        self._want_tiers = np.zeros(0, np.int64)
        self._want_map: dict[int, int] | None = {}
        self.frame = 0
        self.missing = 0
        self.visible_missing = 0

    def _reset(self, slots: int) -> None:
        self.slots = slots
        self.slot_key = np.zeros(slots, tile_keys.DTYPE)  # 0 = free
        self.pinned = np.zeros(slots, bool)
        self.last_visible = np.full(slots, _NEVER, np.int64)
        self.last_wanted = np.full(slots, _NEVER, np.int64)
        self.current = np.zeros(slots, bool)  # asked for by the newest plan
        self.where: dict[int, int] = {}  # key -> slot
        # The newest plan's resident wanted tiles and, of those, the visible ones (`refresh`).
        self._wanted_slots = self._visible_slots = np.zeros(0, np.int64)

    # ------------------------------------------------------------------ queries
    @property
    def occupied(self) -> int:
        return len(self.where)

    def is_resident(self, key: int) -> bool:
        return int(key) in self.where

    def tiers(self, frame: int | None = None) -> np.ndarray:
        """Each slot's tier now (free and pinned slots: RECENT, they are never victims)."""
        f = self.frame if frame is None else frame
        return np.where(f - self.last_visible <= self.hold_frames, Tier.VISIBLE,
                        np.where(f - self.last_wanted <= self.hold_frames, Tier.PREFETCH,
                                 Tier.RECENT)).astype(np.int64)

    def stats(self) -> PolicyStats:
        visible = int(((self.tiers() == Tier.VISIBLE) & (self.slot_key != 0)).sum())
        return PolicyStats(self.slots, self.occupied, int(self.pinned.sum()), visible,
                           self.missing, self.visible_missing)

    # ------------------------------------------------------------------ pinning
    def pin(self, key: int) -> int:
        """Give `key` a slot for good (a texture's coarsest tile). BudgetError when every
        slot is pinned already: the cache is smaller than one tile per texture."""
        key = int(key)
        if key in self.where:
            slot = self.where[key]
            self.pinned[slot] = True
            return slot
        free = np.flatnonzero(self.slot_key == 0)
        if free.size == 0:
            unpinned = np.flatnonzero(~self.pinned)
            if unpinned.size == 0:
                raise BudgetError(f"page cache of {self.slots} slots is full of pinned tiles: "
                                  "each virtual texture needs one slot for its coarsest tile")
            slot = int(unpinned[np.argmin(self.last_wanted[unpinned])])
            self._free_slot(slot)
        else:
            slot = int(free[0])
        self._occupy(slot, key)
        self.pinned[slot] = True
        return slot

    def pinned_keys(self) -> list[int]:
        return [int(k) for k in self.slot_key[self.pinned]]

    # ------------------------------------------------------------------ per frame
    def plan(self, frame: int, keys: np.ndarray, tiers: np.ndarray,
             pixels: np.ndarray | None = None,
             deficit: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Take a frame's wanted tiles (unique packed keys, their tiers, optionally the
        feedback pixels behind each and the levels of detail the screen lacks there: the
        level the page table shows minus the tile's own) and return the missing ones to
        read, most urgent first (at most `max_requests`), with a priority each (higher
        first). Resident wanted tiles have their recency refreshed.

        Urgency is what the screen loses while the tile is missing: visible before
        prefetch, then pixels x deficit (an ancestor's pixels are all its descendants'),
        then coarser first; without pixels or deficits, coarser first.

        Per-frame cost matters (it runs every frame on every wanted tile): one binary search
        of every slot's key in the sorted wanted keys answers both "which slots are wanted"
        and "which wanted keys are resident" (two `np.isin` did it before), the slot ranks
        are computed once, and the key -> tier dict is left to the frames that need it."""
        keys = np.asarray(keys, tile_keys.DTYPE)
        tiers = np.asarray(tiers, np.int64)
        pixels = np.zeros(keys.size, np.int64) if pixels is None else np.asarray(pixels,
                                                                                  np.int64)
        # The system hands in sorted unique keys (expand_requests); other callers' keys are
        # searched through a sorter, so their order (ties in priority) is kept.
        sorter = None if keys.size < 2 or (keys[1:] > keys[:-1]).all() else \
            np.argsort(keys, kind="stable")
        self._want_keys, self._want_tiers, self._want_map = keys, tiers, None
        resident = np.zeros(keys.size, bool)
        if self.occupied and keys.size:
            pos = np.searchsorted(keys, self.slot_key, sorter=sorter)
            np.minimum(pos, keys.size - 1, out=pos)
            if sorter is not None:
                pos = sorter[pos]
            held = (keys[pos] == self.slot_key) & (self.slot_key != 0)
            self.current[:] = held
            slots = np.flatnonzero(held)
            at = pos[slots]
            resident[at] = True
            self._wanted_slots = slots
            self._visible_slots = slots[tiers[at] == Tier.VISIBLE]
        else:
            self.current[:] = False
            self._wanted_slots = self._visible_slots = np.zeros(0, np.int64)
        self.refresh(frame)
        miss = np.flatnonzero(~resident)
        self.missing = int(miss.size)
        self.visible_missing = int(np.count_nonzero(tiers[miss] == Tier.VISIBLE))
        if miss.size == 0:
            return np.zeros(0, tile_keys.DTYPE), np.zeros(0, np.float64)
        miss_keys, miss_tiers = keys[miss], tiers[miss]
        level = tile_keys.level_of(miss_keys)
        loss = pixels[miss] * (1 if deficit is None else np.maximum(
            np.asarray(deficit, np.int64)[miss], 1))
        priority = (2 - miss_tiers) * _TIER_STEP + np.minimum(loss, _LOSS_CAP) * \
            tile_keys.MAX_LEVELS + level
        order = np.argsort(-priority, kind="stable")
        # As many of each tier as there are slots it could take: more would be read only
        # to be dropped on arrival.
        is_visible = miss_tiers[order] == Tier.VISIBLE
        room_visible, room_prefetch = self._room(self._ranks())
        keep = np.where(is_visible, np.cumsum(is_visible) <= room_visible,
                        np.cumsum(~is_visible) <= room_prefetch)
        if is_visible.sum() > room_visible:
            # Beyond the free and worse slots: those that displace a finer visible tile.
            rest = np.flatnonzero(is_visible & ~keep)
            keep[rest[self._displacing(miss_keys[order][rest])]] = True
        order = order[keep][:self.max_requests]
        return miss_keys[order], priority[order]

    def refresh(self, frame: int) -> None:
        """Mark the resident tiles the newest plan wanted as wanted (and visible) in
        `frame`: all a frame whose plan would be the last one's needs to do."""
        self.frame = int(frame)
        self.last_wanted[self._wanted_slots] = frame
        self.last_visible[self._visible_slots] = frame

    def _displacing(self, newcomers: np.ndarray) -> np.ndarray:
        """Which of these visible newcomers would get a slot by displacing a visible tile
        worse in the fixed order (`_badness`), pairing the best newcomers with the worst
        residents as `admit_many` does."""
        out = np.zeros(newcomers.size, bool)
        held = (self._ranks() == 0) & ~self.pinned & (self.slot_key != 0)
        if not held.any() or newcomers.size == 0:
            return out
        victims = np.sort(_badness(self.slot_key[held]))[::-1]  # worst first
        bad = _badness(newcomers)
        best = np.argsort(bad, kind="stable")  # best first
        m = min(victims.size, best.size)
        ok = victims[:m] > bad[best[:m]]
        count = m if ok.all() else int(np.argmin(ok))
        out[best[:count]] = True
        return out

    def _room(self, rank: np.ndarray) -> tuple[int, int]:
        """Slots a VISIBLE and a PREFETCH newcomer could take, from one rank array."""
        open_ = (self.slot_key == 0)
        movable = ~self.pinned
        return (int((open_ | (movable & (rank > 2 * int(Tier.VISIBLE)))).sum()),
                int((open_ | (movable & (rank > 2 * int(Tier.PREFETCH)))).sum()))

    @property
    def _want(self) -> dict[int, int]:
        """The newest plan's key -> tier, built on first use after each plan."""
        if self._want_map is None:
            self._want_map = dict(zip(self._want_keys.tolist(), self._want_tiers.tolist(),
                                      strict=True))
        return self._want_map

    def admissible(self, tier: Tier = Tier.VISIBLE) -> int:
        """Slots a newcomer of `tier` could take now: free ones and those holding tiles of a
        strictly worse rank (see `admit`)."""
        rank = self._ranks()
        return int(((self.slot_key == 0) | (~self.pinned & (rank > 2 * int(tier)))).sum())

    def _ranks(self) -> np.ndarray:
        """Each slot's eviction rank: 0 visible now, 1 visible only through the hold (not
        in the newest feedback for more than `grace_frames`: after a camera cut these give
        way to what the screen shows now), 2 prefetch, 4 recent."""
        rank = self.tiers() * 2
        stale = self.frame - self.last_visible > self.grace_frames
        rank[(rank == 0) & ~self.current & stale] = 1
        return rank

    def tier_of(self, key: int) -> Tier:
        return Tier(self._want.get(int(key), Tier.RECENT))

    def admit(self, key: int) -> Admission | None:
        """A tile's bytes arrived: its slot (maybe evicting a worse tile), or None when
        nothing resident is worse than it (the bytes are dropped; the tile is asked for again
        while it is wanted). Already resident: its own slot."""
        key = int(key)
        if key in self.where:
            return Admission(self.where[key])
        tier = self.tier_of(key)
        free = np.flatnonzero(self.slot_key == 0)
        if free.size:
            slot = int(free[0])
            self._occupy(slot, key)
            return Admission(slot)
        # Worst rank first, then oldest; pinned slots never.
        rank = self._ranks()
        score = self._victim_scores(rank)
        victim = int(np.argmax(score))
        if score[victim] < 0 or not _may_evict(int(rank[victim]), int(score[victim]), tier,
                                               key):
            return None
        evicted = int(self.slot_key[victim])
        self._free_slot(victim)
        self._occupy(victim, key)
        return Admission(victim, evicted)

    def admit_many(self, keys: list[int]) -> list[Admission | None]:
        """`admit` for a frame's arrivals, best first, with the slot ranks computed once
        (a per-tile `admit` costs a pass over every slot: 256 of them were 40 ms a frame
        on the H200's 2,162-slot cache). Free slots go first, then the worst victims in
        order, each only to a newcomer of strictly better rank."""
        out: list[Admission | None] = []
        free = np.flatnonzero(self.slot_key == 0).tolist()[::-1]  # pop() takes the lowest
        rank = self._ranks()
        score = self._victim_scores(rank)
        victims = np.argsort(-score, kind="stable").tolist()
        at = 0
        for key in keys:
            key = int(key)
            if key in self.where:
                out.append(Admission(self.where[key]))
                continue
            if free:
                slot = free.pop()
                self._occupy(slot, key)
                out.append(Admission(slot))
                continue
            tier = self.tier_of(key)
            if at < len(victims):
                v = victims[at]
                if score[v] >= 0 and _may_evict(int(rank[v]), int(score[v]), tier, key):
                    at += 1
                    evicted = int(self.slot_key[v])
                    self._free_slot(v)
                    self._occupy(v, key)
                    out.append(Admission(v, evicted))
                    continue
            out.append(None)
        return out

    def _victim_scores(self, rank: np.ndarray) -> np.ndarray:
        """Eviction order, highest first: worst rank, then least recently wanted; tiles
        visible now (rank 0) last, finest level first, then highest key (`_badness`);
        pinned and free slots never (-1)."""
        age = self.frame - self.last_wanted
        score = np.where(rank > 0, rank * (1 << 57) + np.minimum(age, 1 << 41),
                         _badness(self.slot_key))
        return np.where(self.pinned | (self.slot_key == 0), -1, score)

    def evict(self, key: int) -> int | None:
        """Drop a resident, unpinned tile; its freed slot (None if not resident/pinned)."""
        slot = self.where.get(int(key))
        if slot is None or self.pinned[slot]:
            return None
        self._free_slot(slot)
        return slot

    def resize(self, slots: int) -> dict[int, int]:
        """A new slot count (the cache was reallocated): every unpinned tile is dropped and
        the pinned ones are renumbered from slot 0. Returns {pinned key: new slot}."""
        keep = self.pinned_keys()
        if slots < len(keep):
            raise BudgetError(f"{slots} slots cannot hold the {len(keep)} pinned tiles")
        self._reset(int(slots))
        out = {}
        for key in keep:
            out[key] = self.pin(key)
        return out

    def shrink_or_grow(self, slots: int) -> tuple[list[tuple[int, int]], list[int]]:
        """A new slot count whose cache keeps what it can (the elastic page cache): the
        pinned tiles and then the best of the rest in eviction order (the worst go first, as
        `admit` would have evicted them) move to slots 0..n-1 with their recency kept.
        Returns the moves (old slot, new slot) and the keys dropped."""
        slots = int(slots)
        pinned = np.flatnonzero(self.pinned)
        if slots < pinned.size:
            raise BudgetError(f"{slots} slots cannot hold the {pinned.size} pinned tiles")
        held = np.flatnonzero((self.slot_key != 0) & ~self.pinned)
        score = self._victim_scores(self._ranks())[held]
        held = held[np.argsort(score, kind="stable")]  # best (least evictable) first
        keep = np.concatenate([pinned, held[:slots - pinned.size]])
        dropped = [int(k) for k in self.slot_key[held[slots - pinned.size:]]]
        saved = (self.slot_key[keep], self.pinned[keep], self.last_visible[keep],
                 self.last_wanted[keep], self.current[keep])
        self._reset(slots)
        n = keep.size
        (self.slot_key[:n], self.pinned[:n], self.last_visible[:n], self.last_wanted[:n],
         self.current[:n]) = saved
        self.where = {int(k): i for i, k in enumerate(self.slot_key[:n])}
        return [(int(old), i) for i, old in enumerate(keep)], dropped

    # ------------------------------------------------------------------ internals
    def _occupy(self, slot: int, key: int) -> None:
        self.slot_key[slot] = key
        self.where[key] = slot
        self.current[slot] = key in self._want
        self.last_wanted[slot] = self.frame
        self.last_visible[slot] = _NEVER
        if self.tier_of(key) == Tier.VISIBLE:
            self.last_visible[slot] = self.frame

    def _free_slot(self, slot: int) -> None:
        key = int(self.slot_key[slot])
        self.where.pop(key, None)
        self.slot_key[slot] = 0
        self.current[slot] = False
        self.pinned[slot] = False
        self.last_visible[slot] = _NEVER
        self.last_wanted[slot] = _NEVER
