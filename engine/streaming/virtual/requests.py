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

from . import keys as tile_keys
from .policy import Tier
from .tiles import TextureGrids


@dataclass(frozen=True)
class TileRequests:
    """Unique tile keys of one frame, each with its tier and the pixels that asked."""

    keys: np.ndarray  # keys.DTYPE (uint64), sorted
    tiers: np.ndarray  # int64 Tier values
    pixels: np.ndarray  # int64

    @staticmethod
    def empty() -> TileRequests:
        return TileRequests(np.zeros(0, tile_keys.DTYPE), np.zeros(0, np.int64),
                            np.zeros(0, np.int64))

    def __len__(self) -> int:
        return int(self.keys.size)


def reduce_feedback(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique non-zero keys of a feedback image (keys, or the readback's (h, w, 2) uint32
    words) and how many pixels wrote each.

    Neighbouring pixels mostly want the same tile, so the image is first cut into runs of
    equal keys (one vectorised compare, O(pixels)); only the run heads are reduced, by one
    stable argsort and segment sums. At the 4K feedback size (480x270: 129,600 pixels,
    ~9,000 runs, ~300 keys) the heads come in long ascending stretches, which the stable
    sort (timsort) merges in near-linear time; `np.unique(return_inverse=True)` of the same
    heads cost twice as much and was most of this function's time."""
    image = np.asarray(image)
    if image.dtype == np.uint32 and image.ndim == 3:  # the readback's word pairs
        image = tile_keys.from_words(image)
    flat = np.asarray(image, tile_keys.DTYPE).ravel()
    n = flat.size
    if n == 0:
        return np.zeros(0, tile_keys.DTYPE), np.zeros(0, np.int64)
    change = np.empty(n, bool)
    change[0] = True
    np.not_equal(flat[1:], flat[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    lengths = np.diff(starts, append=n)
    heads = flat[starts]
    keep = heads != 0
    if not keep.all():
        heads, lengths = heads[keep], lengths[keep]
    if heads.size == 0:
        return np.zeros(0, tile_keys.DTYPE), np.zeros(0, np.int64)
    order = np.argsort(heads, kind="stable")
    ordered = heads[order]
    first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return ordered[first], np.add.reduceat(lengths[order], first).astype(np.int64)


def reduce_readback(readback) -> tuple[np.ndarray, np.ndarray] | None:
    """`reduce_feedback`'s answer for a finished feedback frame (engine/gl/feedback_reduce.py
    `FeedbackReadback`): the GPU's list of unique keys sorted (work that follows the keys,
    not the pixels), else its image reduced here; None for an empty image."""
    if readback.words is not None:
        keys = tile_keys.from_words(readback.words)
        order = np.argsort(keys)
        return keys[order], np.asarray(readback.pixels, np.int64)[order]
    if readback.image is None or not readback.image.size:
        return None
    return reduce_feedback(readback.image)


def _grid(grids, vt: np.ndarray, level: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tiles (x, y) of (vt, level), element-wise, from a `TextureGrids` or an array of
    shape (textures, levels, 2)."""
    if isinstance(grids, TextureGrids):
        return grids.grid(vt, level)
    g = np.asarray(grids, np.int64)
    lvl = np.minimum(level, g.shape[1] - 1)
    return g[vt, lvl, 0], g[vt, lvl, 1]


def expand_requests(keys: np.ndarray, pixels: np.ndarray, levels_of_vt: np.ndarray,
                    grids: TextureGrids | np.ndarray | None = None) -> TileRequests:
    """Add every ancestor of the asked-for tiles (parent VISIBLE, the rest PREFETCH) and
    merge duplicates, keeping the best tier and summing pixels. Keys naming a texture,
    level or (with `grids`: a `TextureGrids`, or tiles x, y per texture and level in an
    array of shape (textures, levels, 2)) tile that does not exist (a stale or corrupt
    readback) are dropped.

    All ancestors come from one broadcast (distance k = 0..span down the rows, keys along
    the columns) instead of a Python loop of packs per level: at 4K that loop's call
    overhead was most of the cost. The rows are laid out k-major, so the flattened keys are
    a few nearly sorted runs, which the stable sort (timsort) merges in little more than
    linear time (a plain argsort of the same keys interleaved costs 5x more)."""
    keys = np.asarray(keys, tile_keys.DTYPE)
    pixels = np.asarray(pixels, np.int64)
    levels_of_vt = np.asarray(levels_of_vt)  # indexed below: never converted whole
    if keys.size == 0:
        return TileRequests.empty()
    vt, level, x, y = tile_keys.unpack(keys)
    ok = (vt >= 0) & (vt < levels_of_vt.size)
    vt = np.where(ok, vt, 0)
    top = levels_of_vt[vt].astype(np.int64) - 1
    ok &= level <= top
    if grids is not None:
        gx, gy = _grid(grids, vt, level)
        ok &= (x < gx) & (y < gy)
    if not ok.all():
        keys, pixels, vt, level, x, y, top = (a[ok] for a in (keys, pixels, vt, level, x, y,
                                                               top))
        if keys.size == 0:
            return TileRequests.empty()
    span = int((top - level).max()) + 1
    k = np.arange(span, dtype=tile_keys.DTYPE)[:, None]
    up = level + k.astype(np.int64) <= top  # (span, n): ancestor k of key i exists
    # Masked rows (level + k beyond the chain) are computed but never kept.
    ancestors = tile_keys.ancestors(keys, k)[up]
    if grids is not None:
        # Sizes that do not halve exactly: where the shifted index falls off a coarser grid,
        # the ancestor is the grid's last tile (tiles.ancestor_index).
        vt_k = np.broadcast_to(vt, up.shape)[up]
        lvl_k = (level + k.astype(np.int64))[up]
        k_up = np.broadcast_to(k, up.shape)[up].astype(np.int64)
        x_k, y_k = np.broadcast_to(x, up.shape)[up] >> k_up, \
            np.broadcast_to(y, up.shape)[up] >> k_up
        gx, gy = _grid(grids, vt_k, lvl_k)
        off = (x_k >= gx) | (y_k >= gy)
        if off.any():
            ancestors[off] = tile_keys.pack(vt_k[off], lvl_k[off],
                                            np.minimum(x_k[off], gx[off] - 1),
                                            np.minimum(y_k[off], gy[off] - 1))
    far = np.broadcast_to(k >= 2, up.shape)[up]  # beyond the parent: PREFETCH
    px = np.broadcast_to(pixels, up.shape)[up]
    # Merge duplicates with one sort and segment reductions (ufunc.at is far slower).
    order = np.argsort(ancestors, kind="stable")
    ks = ancestors[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    tiers = np.where(np.logical_and.reduceat(far[order], starts), int(Tier.PREFETCH),
                     int(Tier.VISIBLE)).astype(np.int64)
    return TileRequests(ks[starts], tiers, np.add.reduceat(px[order], starts))
