"""From a feedback image to the frame's tile requests: numpy only, no GL.

The feedback pass writes, per low-resolution pixel, the packed key of the tile trilinear
filtering reads at its finer level (0 where no virtual texture is drawn). One readback is
reduced to unique keys with pixel counts; each key's parent (the coarser level of the
same trilinear lookup) is as VISIBLE as the key itself, and the further ancestors up to the
pinned coarsest tile are PREFETCH: the fallbacks a fast camera shows while finer tiles load.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .policy import Tier
from .tiles import pack_feedback, unpack_feedback


@dataclass(frozen=True)
class TileRequests:
    """Unique tile keys of one frame, each with its tier and the pixels that asked."""

    keys: np.ndarray  # uint32, sorted
    tiers: np.ndarray  # int64 Tier values
    pixels: np.ndarray  # int64

    @staticmethod
    def empty() -> TileRequests:
        return TileRequests(np.zeros(0, np.uint32), np.zeros(0, np.int64),
                            np.zeros(0, np.int64))

    def __len__(self) -> int:
        return int(self.keys.size)


def reduce_feedback(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique non-zero keys of a feedback image and how many pixels wrote each.

    Neighbouring pixels mostly want the same tile, so the image is first cut into runs of
    equal keys (one vectorised compare, O(pixels)); only the run heads are sorted. At
    960x540 this is what keeps the reduction cheap (a plain np.unique sorts every pixel)."""
    flat = np.asarray(image, np.uint32).ravel()
    n = flat.size
    if n == 0:
        return np.zeros(0, np.uint32), np.zeros(0, np.int64)
    change = np.empty(n, bool)
    change[0] = True
    np.not_equal(flat[1:], flat[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    lengths = np.diff(np.append(starts, n))
    heads = flat[starts]
    keep = heads != 0
    heads, lengths = heads[keep], lengths[keep]
    if heads.size == 0:
        return np.zeros(0, np.uint32), np.zeros(0, np.int64)
    keys, inverse = np.unique(heads, return_inverse=True)
    counts = np.bincount(inverse, weights=lengths, minlength=keys.size).astype(np.int64)
    return keys.astype(np.uint32), counts


def expand_requests(keys: np.ndarray, pixels: np.ndarray, levels_of_vt: np.ndarray,
                    grids: np.ndarray | None = None) -> TileRequests:
    """Add every ancestor of the asked-for tiles (parent VISIBLE, the rest PREFETCH) and
    merge duplicates, keeping the best tier and summing pixels. Keys naming a texture,
    level or (with `grids`, shape (textures, levels, 2): tiles x, y per level) tile that
    does not exist (a stale or corrupt readback) are dropped."""
    keys = np.asarray(keys, np.uint32)
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
    # Merge duplicates with one sort and segment reductions (ufunc.at is far slower).
    order = np.argsort(k_all, kind="stable")
    ks = k_all[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    tiers = np.minimum.reduceat(t_all[order], starts)
    px = np.add.reduceat(p_all[order], starts)
    return TileRequests(ks[starts].astype(np.uint32), tiers.astype(np.int64),
                        px.astype(np.int64))
