"""The virtual-texture CPU path as it was before the 4K rewrite (commit 7737f0b), frozen.

Why keep it: `vt_cpu.py` replays one flight's feedback through this and through the live
code in the same process, frame by frame, so the before/after ratio is measured side by
side on the same machine and the same images (a ratio from two runs on a shared machine
says more about the neighbours than about the code). Nothing outside the benchmark uses it.

What is frozen: the feedback reduction (`np.unique(return_inverse=True)` of the run heads),
the ancestor expansion (a Python loop of packs per level), the plan's two `np.isin` over
all slots and its eager key -> tier dict, and the page table's full recompute of every
dirty texture. Admission (`admit_many`) and everything else is the live code's.
"""
from __future__ import annotations

import numpy as np

from ..streaming.virtual.pagetable import PageTable
from ..streaming.virtual.policy import Tier, TilePolicy
from ..streaming.virtual.requests import TileRequests
from ..streaming.virtual.keys import pack as pack_feedback
from ..streaming.virtual.keys import unpack as unpack_feedback


def reduce_feedback_v0(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Run heads of the image, then `np.unique(return_inverse=True)` and a bincount."""
    flat = np.asarray(image, np.uint64).ravel()
    n = flat.size
    if n == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    change = np.empty(n, bool)
    change[0] = True
    np.not_equal(flat[1:], flat[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    lengths = np.diff(np.append(starts, n))
    heads = flat[starts]
    keep = heads != 0
    heads, lengths = heads[keep], lengths[keep]
    if heads.size == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    keys, inverse = np.unique(heads, return_inverse=True)
    counts = np.bincount(inverse, weights=lengths, minlength=keys.size).astype(np.int64)
    return keys.astype(np.uint64), counts


def expand_requests_v0(keys: np.ndarray, pixels: np.ndarray, levels_of_vt: np.ndarray,
                       grids: np.ndarray | None = None) -> TileRequests:
    """Ancestors by a loop over distances, one pack and one `np.full` per level."""
    keys = np.asarray(keys, np.uint64)
    pixels = np.asarray(pixels, np.int64)
    levels_of_vt = np.asarray(levels_of_vt, np.int64)
    vt, level, x, y = unpack_feedback(keys)
    ok = (vt >= 0) & (vt < levels_of_vt.size)
    vt, level, x, y, pixels = vt[ok], level[ok], x[ok], y[ok], pixels[ok]
    top = levels_of_vt[vt] - 1
    ok = level <= top
    if grids is not None:
        g = np.asarray(grids, np.int64)
        lvl = np.minimum(level, g.shape[1] - 1)
        ok &= (x < g[vt, lvl, 0]) & (y < g[vt, lvl, 1])
    vt, level, x, y, pixels, top = vt[ok], level[ok], x[ok], y[ok], pixels[ok], top[ok]
    all_keys, all_tiers, all_px = [pack_feedback(vt, level, x, y)], \
        [np.full(vt.size, Tier.VISIBLE, np.int64)], [pixels]
    for k in range(1, 16):
        up = level + k <= top
        if not up.any():
            break
        all_keys.append(pack_feedback(vt[up], level[up] + k, x[up] >> k, y[up] >> k))
        all_tiers.append(np.full(int(up.sum()), Tier.VISIBLE if k == 1 else Tier.PREFETCH,
                                 np.int64))
        all_px.append(pixels[up])
    k_all = np.concatenate(all_keys)
    if k_all.size == 0:
        return TileRequests.empty()
    t_all, p_all = np.concatenate(all_tiers), np.concatenate(all_px)
    order = np.argsort(k_all, kind="stable")
    ks = k_all[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    tiers = np.minimum.reduceat(t_all[order], starts)
    px = np.add.reduceat(p_all[order], starts)
    return TileRequests(ks[starts].astype(np.uint64), tiers.astype(np.int64),
                        px.astype(np.int64))


class TilePolicyV0(TilePolicy):
    """The live policy with the old `plan`: `np.isin` of every slot against the wanted
    keys and of the keys against the slots, the key -> tier dict built every frame, and
    the slot ranks computed twice (once per tier's room)."""

    def plan(self, frame: int, keys: np.ndarray, tiers: np.ndarray,
             pixels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        self.frame = int(frame)
        keys = np.asarray(keys, np.uint64)
        tiers = np.asarray(tiers, np.int64)
        pixels = np.zeros(keys.size, np.int64) if pixels is None else np.asarray(pixels,
                                                                                  np.int64)
        self._want_keys, self._want_tiers = keys, tiers
        self._want_map = dict(zip(keys.tolist(), tiers.tolist(), strict=True))
        self.current[:] = False
        if self.occupied:
            held = np.isin(self.slot_key, keys) & (self.slot_key != 0)
            self.current[:] = held
            if held.any():
                slots = np.flatnonzero(held)
                order = np.argsort(keys)
                pos = order[np.searchsorted(keys, self.slot_key[slots], sorter=order)]
                self.last_wanted[slots] = frame
                vis = tiers[pos] == Tier.VISIBLE
                self.last_visible[slots[vis]] = frame
            resident = np.isin(keys, self.slot_key[self.slot_key != 0])
        else:
            resident = np.zeros(keys.size, bool)
        miss = np.flatnonzero(~resident)
        self.missing = int(miss.size)
        if miss.size == 0:
            return np.zeros(0, np.uint64), np.zeros(0, np.float64)
        _, level, _, _ = unpack_feedback(keys[miss])
        priority = (2 - tiers[miss]) * 1e6 + level * 1e4 + np.minimum(pixels[miss], 9999)
        order = np.argsort(-priority, kind="stable")
        is_visible = tiers[miss][order] == Tier.VISIBLE
        room_visible, room_prefetch = self.admissible(Tier.VISIBLE), \
            self.admissible(Tier.PREFETCH)
        keep = np.where(is_visible, np.cumsum(is_visible) <= room_visible,
                        np.cumsum(~is_visible) <= room_prefetch)
        order = order[keep][:self.max_requests]
        return keys[miss][order], priority[order]


class PageTableV0(PageTable):
    """The live table with the old update: every dirty texture recomputed in full."""

    def set_residency(self, vt: int, slots: dict[tuple[int, int, int], int]) -> int:
        lay = self.layouts[vt]
        if (lay.levels - 1, 0, 0) not in slots:
            raise ValueError(f"virtual texture {vt}: its coarsest tile is not resident")
        return self._recompute(vt, slots)
