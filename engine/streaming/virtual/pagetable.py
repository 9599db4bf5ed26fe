"""The shared page table on the CPU: one uint32 array for every virtual texture.

Layout (what shaders/vt_sample.glsl reads): rows of TABLE_WIDTH words (a 2D texture, so
it holds up to TABLE_WIDTH x GL_MAX_TEXTURE_SIZE words). The first row is a directory of
chunks: word c = where chunk c starts, a block of CHUNK_TEXTURES words (word i = where
texture c * CHUNK_TEXTURES + i's range starts), made when its first texture registers; so
shaders name a texture by its id, for up to TABLE_WIDTH * CHUNK_TEXTURES textures, while a
table of a few textures costs two rows. Each texture owns a contiguous range starting at
its `VirtualLayout.base`: a descriptor of DESCRIPTOR_WORDS words, then one entry per tile of
each level, level 0 first, row-major. An entry names a cache slot and the level of the tile
in that slot. A tile that is not resident holds its finest resident ancestor's entry, so the
shader always finds *some* texels (coarser ones), never garbage: that is why every texture's
coarsest tile is pinned resident before its entries are first written.

Updates are incremental: the table remembers the residency its words show per texture and a
new one is applied as a diff. A tile that arrives overwrites, in its own subtree (the entries
of its footprint at its level and every finer one), the entries that named a coarser tile; a
tile that goes hands the entries that named it its parent's entry (which is its own finest
resident ancestor). Evictions first, then arrivals, and any order within each: every step
only touches the subtree of the tile it is about. A texture's first residency, one whose
coarsest tile moved, or a diff of more tiles than `FULL_REWRITE_TILES` is recomputed in full
(one vectorised fill per level). Measured at the 4K bench (a 4096^2 texture: 11 levels, 1,365
entries): the full recompute costs ~0.35 ms per texture, where one arriving tile costs tens
of microseconds, and a frame that uploads 256 tiles dirties dozens of textures. Only the
changed index range goes to the GPU (`take_dirty`).
"""
from __future__ import annotations

import numpy as np

from .tiles import DESCRIPTOR_WORDS, VirtualLayout, ancestor_index, pack_entry

#: Width of the page-table texture in entries (rows of this many words; a power of two,
#: shaders/vt_sample.glsl VT_TABLE_SHIFT).
TABLE_WIDTH = 2048
#: The directory row: word c holds where chunk c of the texture directory starts.
DIRECTORY_WORDS = TABLE_WIDTH
#: Textures per directory chunk (a power of two, shaders/vt_sample.glsl VT_CHUNK_SHIFT).
CHUNK_TEXTURES = 2048
#: The most textures a table holds (and a key names: keys.MAX_TEXTURES is larger).
MAX_TABLE_TEXTURES = DIRECTORY_WORDS * CHUNK_TEXTURES
#: Above this many changed tiles in one texture, one full recompute beats the per-tile steps.
FULL_REWRITE_TILES = 24


class PageTable:
    """CPU copy of the table plus the range of words changed since the last upload."""

    def __init__(self) -> None:
        self.words = np.zeros(0, np.uint32)
        self.layouts: list[VirtualLayout] = []
        self._dirty: tuple[int, int] | None = None
        self._used = DIRECTORY_WORDS
        self._chunks = 0  # directory chunks made
        # Per texture, the residency {(level, x, y): slot} its entries show now.
        self._applied: dict[int, dict[tuple[int, int, int], int]] = {}

    @property
    def used(self) -> int:
        """Words in use: the directory and every texture's range."""
        return self._used

    @property
    def rows(self) -> int:
        """Rows of the table texture the current contents need (at least one)."""
        return max(1, -(-self.used // TABLE_WIDTH))

    def _new_chunk(self) -> bool:
        """Whether the next texture opens a directory chunk."""
        return len(self.layouts) % CHUNK_TEXTURES == 0

    def next_base(self) -> int:
        """Where the next texture's range will start (after its directory chunk, if it
        opens one)."""
        return self.used + (CHUNK_TEXTURES if self._new_chunk() else 0)

    def _grow(self, need: int) -> None:
        need = -(-need // TABLE_WIDTH) * TABLE_WIDTH
        if self.words.size < need:  # doubling: registering n textures costs O(n) copies
            grown = np.zeros(max(need, 2 * self.words.size), np.uint32)
            grown[:self.words.size] = self.words
            self.words = grown

    def directory_index(self, vt: int) -> int:
        """The word holding texture `vt`'s base."""
        return int(self.words[vt // CHUNK_TEXTURES]) + vt % CHUNK_TEXTURES

    def level_offsets(self, vt: np.ndarray, level: np.ndarray) -> np.ndarray:
        """Table index of the first entry of level `level` of texture `vt`, element-wise,
        read from the directory and the descriptors (as the shader does): no per-texture
        array that grows with the textures registered."""
        vt = np.asarray(vt, np.int64)
        w = self.words
        d = w[vt // CHUNK_TEXTURES].astype(np.int64) + vt % CHUNK_TEXTURES
        return w[w[d].astype(np.int64) + 4 + np.asarray(level, np.int64)].astype(np.int64)

    def add(self, layout: VirtualLayout) -> int:
        """Append a texture's range (its entries all zero until `set_residency`); its id."""
        if layout.base != self.next_base():
            raise ValueError(f"layout base {layout.base} != next free word {self.next_base()}")
        if len(self.layouts) >= MAX_TABLE_TEXTURES:
            raise ValueError(f"a page table holds at most {MAX_TABLE_TEXTURES} textures")
        vt = len(self.layouts)
        if self._new_chunk():
            chunk = vt // CHUNK_TEXTURES
            self._grow(self._used + CHUNK_TEXTURES)
            self.words[chunk] = self._used
            self._mark(chunk, chunk + 1)
            self._used += CHUNK_TEXTURES
            self._chunks += 1
        self.layouts.append(layout)
        self._used += layout.table_words
        self._grow(self._used)
        rng = self.words[layout.base:layout.base + layout.table_words]
        rng[:] = 0
        rng[:DESCRIPTOR_WORDS] = layout.descriptor()
        d = self.directory_index(vt)
        self.words[d] = layout.base
        self._mark(d, d + 1)
        self._mark(layout.base, layout.base + layout.table_words)
        return vt

    def _mark(self, lo: int, hi: int) -> None:
        self._dirty = (lo, hi) if self._dirty is None else \
            (min(lo, self._dirty[0]), max(hi, self._dirty[1]))

    def set_residency(self, vt: int, slots: dict[tuple[int, int, int], int]) -> int:
        """Make texture `vt`'s entries show its resident tiles {(level, x, y): slot}. The
        coarsest level's single tile must be among them. Returns how many entries were
        written (their range is marked for upload; an entry that a moved tile rewrites
        twice counts twice)."""
        lay = self.layouts[vt]
        top = lay.levels - 1
        if (top, 0, 0) not in slots:
            raise ValueError(f"virtual texture {vt}: its coarsest tile is not resident")
        prev = self._applied.get(vt)
        if prev is None and all(lay.grid(level) == (1, 1) for level, _, _ in slots):
            changed = self._first_fill(lay, slots)
        elif prev is None or prev.get((top, 0, 0)) != slots[(top, 0, 0)]:
            changed = self._recompute(vt, slots)
        else:
            gone = prev.items() - slots.items()
            came = slots.items() - prev.items()
            if len(gone) + len(came) > FULL_REWRITE_TILES:
                changed = self._recompute(vt, slots)
            else:
                changed = 0
                for (level, x, y), slot in gone:
                    changed += self._evict(lay, level, x, y, pack_entry(slot, level))
                for (level, x, y), slot in came:
                    changed += self._admit(lay, level, x, y, pack_entry(slot, level))
        self._applied[vt] = dict(slots)
        return changed

    def _first_fill(self, lay: VirtualLayout, slots: dict[tuple[int, int, int], int]) -> int:
        """A texture's first residency of single-tile levels only (what registration pins):
        each level's entries all name the finest resident level at or above it, one fill
        for the whole range (a full recompute per texture was most of registering a
        million)."""
        entry, entries = 0, []
        for level in range(lay.levels - 1, -1, -1):
            slot = slots.get((level, 0, 0))
            if slot is not None:
                entry = pack_entry(slot, level)
            entries.append(entry)
        counts = [lay.tiles(level) for level in range(lay.levels - 1, -1, -1)]
        lo = lay.base + DESCRIPTOR_WORDS
        hi = lo + lay.entry_count
        # levels are stored finest first: reverse the coarsest-first lists
        self.words[lo:hi] = np.repeat(np.array(entries[::-1], np.uint32), counts[::-1])
        self._mark(lo, hi)
        return lay.entry_count

    def _evict(self, lay: VirtualLayout, level: int, x: int, y: int, entry: int) -> int:
        """Tile (level, x, y) left: entries naming it take its parent's entry."""
        gx, gy = lay.grid(level + 1)
        fallback = int(self.words[lay.level_offsets()[level + 1]
                                  + int(ancestor_index(y, 1, gy)) * gx
                                  + int(ancestor_index(x, 1, gx))])
        return self._subtree_write(lay, level, x, y, entry, fallback, evict=True)

    def _admit(self, lay: VirtualLayout, level: int, x: int, y: int, entry: int) -> int:
        """Tile (level, x, y) arrived: entries of its footprint naming a coarser tile now
        name it."""
        return self._subtree_write(lay, level, x, y, entry, entry, evict=False)

    def _subtree_write(self, lay: VirtualLayout, level: int, x: int, y: int, entry: int,
                       value: int, evict: bool) -> int:
        """Write `value` into the footprint of tile (level, x, y) at its level and every
        finer one, where an entry names the tile (`evict`) or a coarser tile (else). The
        tile's own entry is one word: a scalar step, no views (most arrivals are fine)."""
        words, offsets = self.words, lay.level_offsets()
        gx, gy = lay.grid(level)
        last_x, last_y = x == gx - 1, y == gy - 1
        i = offsets[level] + y * gx + x
        cur = int(words[i])
        if not (cur == entry if evict else (cur >> 24) > level):
            return 0  # the tile's own entry decides for its whole footprint
        words[i] = value
        self._mark(i, i + 1)
        n = 1
        for lvl in range(level - 1, -1, -1):
            d = level - lvl
            gx, gy = lay.grid(lvl)
            off = offsets[lvl]
            # The footprint: the tile's children d levels finer, and where the tile is the
            # last of its row or column, every finer tile beyond (clamped ancestors).
            y0, x0 = y << d, x << d
            y1 = gy if last_y else (y + 1) << d
            x1 = gx if last_x else (x + 1) << d
            view = words[off:off + gx * gy].reshape(gy, gx)[y0:y1, x0:x1]
            hit = view == entry if evict else (view >> 24) > level
            k = int(np.count_nonzero(hit))
            if k:
                view[hit] = value
                h, w = view.shape
                self._mark(off + y0 * gx + x0, off + (y0 + h - 1) * gx + x0 + w)
                n += k
        return n

    def _recompute(self, vt: int, slots: dict[tuple[int, int, int], int]) -> int:
        """Rewrite texture `vt`'s entries from scratch, one vectorised fill per level."""
        lay = self.layouts[vt]
        top = lay.levels - 1
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
