"""The shared page table on the CPU: one uint32 array for every virtual texture.

Layout (what shaders/vt_sample.glsl reads): the first DIRECTORY_WORDS words are a directory
(word `vt` = where texture `vt`'s range starts), so shaders name a texture by its id. Each
texture owns a contiguous range starting at
its `VirtualLayout.base`: a descriptor of DESCRIPTOR_WORDS words, then one entry per tile of
each level, level 0 first, row-major. An entry names a cache slot and the level of the tile
in that slot. A tile that is not resident holds its finest resident ancestor's entry, so the
shader always finds *some* texels (coarser ones), never garbage: that is why every texture's
coarsest tile is pinned resident before its entries are first written.

Why numpy and full recomputation per dirty texture: a 4096^2 texture has 1,365 entries and
the ancestor fill is one vectorised step per level, far cheaper than tracking which entries
an eviction uncovered; only the changed index range goes to the GPU (`take_dirty`).
"""
from __future__ import annotations

import numpy as np

from .tiles import VirtualLayout, pack_entry

#: Width of the page-table texture in entries (rows of this many words).
TABLE_WIDTH = 1024
#: The directory row: word `vt` holds texture vt's base; also the most textures a table holds.
DIRECTORY_WORDS = TABLE_WIDTH


class PageTable:
    """CPU copy of the table plus the range of words changed since the last upload."""

    def __init__(self) -> None:
        self.words = np.zeros(0, np.uint32)
        self.layouts: list[VirtualLayout] = []
        self._dirty: tuple[int, int] | None = None
        self._used = DIRECTORY_WORDS

    @property
    def used(self) -> int:
        """Words in use: the directory and every texture's range."""
        return self._used

    @property
    def rows(self) -> int:
        """Rows of the table texture the current contents need (at least one)."""
        return max(1, -(-self.used // TABLE_WIDTH))

    def next_base(self) -> int:
        return self.used

    def add(self, layout: VirtualLayout) -> int:
        """Append a texture's range (its entries all zero until `set_residency`); its id."""
        if layout.base != self.used:
            raise ValueError(f"layout base {layout.base} != next free word {self.used}")
        if len(self.layouts) >= DIRECTORY_WORDS:
            raise ValueError(f"a page table holds at most {DIRECTORY_WORDS} textures")
        self.layouts.append(layout)
        self._used += layout.table_words
        need = self.rows * TABLE_WIDTH
        if self.words.size < need:
            grown = np.zeros(need, np.uint32)
            grown[:self.words.size] = self.words
            self.words = grown
        self.words[layout.base:layout.base + layout.table_words] = 0
        self.words[layout.base:layout.base + layout.table_words][:len(layout.descriptor())] = \
            layout.descriptor()
        vt = len(self.layouts) - 1
        self.words[vt] = layout.base
        self._mark(vt, vt + 1)
        self._mark(layout.base, layout.base + layout.table_words)
        return vt

    def _mark(self, lo: int, hi: int) -> None:
        self._dirty = (lo, hi) if self._dirty is None else \
            (min(lo, self._dirty[0]), max(hi, self._dirty[1]))

    def set_residency(self, vt: int, slots: dict[tuple[int, int, int], int]) -> int:
        """Rewrite texture `vt`'s entries from its resident tiles {(level, x, y): slot}.
        The coarsest level's single tile must be among them. Returns how many entries
        changed (their range is marked for upload)."""
        lay = self.layouts[vt]
        top = lay.levels - 1
        if (top, 0, 0) not in slots:
            raise ValueError(f"virtual texture {vt}: its coarsest tile is not resident")
        offsets = lay.level_offsets()
        by_level: dict[int, list[tuple[int, int, int]]] = {}
        for (level, x, y), slot in slots.items():
            by_level.setdefault(level, []).append((x, y, slot))
        parent = np.array([[pack_entry(slots[(top, 0, 0)], top)]], np.uint32)
        new = []
        for lvl in range(top, -1, -1):
            gx, gy = lay.grid(lvl)
            if lvl == top:
                grid = parent
            else:
                ys = np.minimum(np.arange(gy) >> 1, parent.shape[0] - 1)
                xs = np.minimum(np.arange(gx) >> 1, parent.shape[1] - 1)
                grid = parent[np.ix_(ys, xs)].copy()
            for x, y, slot in by_level.get(lvl, ()):
                grid[y, x] = pack_entry(slot, lvl)
            new.append((offsets[lvl], grid.ravel()))
            parent = grid
        changed = 0
        for off, flat in new:
            cur = self.words[off:off + flat.size]
            diff = np.flatnonzero(cur != flat)
            if diff.size:
                changed += int(diff.size)
                cur[:] = flat
                self._mark(off + int(diff[0]), off + int(diff[-1]) + 1)
        return changed

    def lookup(self, vt: int, level: int, x: int, y: int) -> int:
        """The entry the shader reads for a tile (for tests and debugging)."""
        lay = self.layouts[vt]
        gx, _ = lay.grid(level)
        return int(self.words[lay.level_offsets()[level] + y * gx + x])

    def take_dirty(self) -> tuple[int, int] | None:
        """The changed word range [lo, hi) since the last call (then clean)."""
        dirty, self._dirty = self._dirty, None
        return dirty

    def mark_all(self) -> None:
        """Everything must go up again (a new table texture)."""
        if self.used:
            self._mark(0, self.used)
