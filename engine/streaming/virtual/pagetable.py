"""The shared page table on the CPU: one uint32 array for every virtual texture, with
entries only for the levels that hold a resident tile.

Layout (what shaders/vt_sample.glsl reads): rows of TABLE_WIDTH words (a 2D texture). Row 0
is a directory of chunks: word c = where chunk c starts, a block of CHUNK_TEXTURES words
(word i = where texture c * CHUNK_TEXTURES + i's descriptor starts). A descriptor is
DESCRIPTOR_HEAD words ((width - 1) | levels << 24, then (height - 1) | wrap << 24), one *level
word* per level, then the coarsest level's entries. A level word names where a block of
entries starts (bits 0..26) and the level they belong to (bits 27..31). A level that holds a
resident tile has a block of its own (one entry per tile, row-major); any other level points
at the finest coarser level that has one, because its own entries would be exactly what that
level's are at the ancestor tiles (each tile's finest resident ancestor): the shader reads the
ancestor's entry. An entry names a cache slot and the level of the tile in that slot, so
the shader always finds *some* texels (coarser ones), never garbage: that is why every
texture's coarsest tile is pinned before its entries are first written.

Why sparse: a dense table holds an entry for every tile of every level of every registered
texture, so a wall of 10,000 textures of 1024² cost 112 words each (4.3 MiB, more than four
screens of texels) while the screen showed a few dozen of them closely. Here a texture costs
its descriptor and coarsest entry while nothing finer is resident (17 words for 1024²).

Blocks come from free lists of exact sizes (textures of one shape reuse each other's) and
then the end of the table; `compact` lays the table out afresh once holes are a large part
of it. Updates are incremental: the table remembers the residency its words show per
texture and applies a new one as a diff. A tile that arrives overwrites, in its own subtree
(its footprint at its level and every finer level with a block), the entries that named a
coarser tile; a tile that goes hands the entries that named it its parent's entry; a tile
that changed slot (a resized cache) has the entries naming it rewritten in place. A level's
block is made (filled from the level it pointed at) before its first tile arrives and given
back after its last tile left. A first residency, a moved coarsest tile, or a diff of more
than `FULL_REWRITE_TILES` tiles is recomputed in full. Only the changed spans of rows go to
the GPU (`take_dirty`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .tiles import VirtualLayout, ancestor_index, pack_entry

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
#: Descriptor words before the level words: the level-0 size, the levels and the wrap.
DESCRIPTOR_HEAD = 2
#: A level word: where its entries start (low bits) and whose level they are (high bits).
LEVEL_SHIFT = 27
START_MASK = (1 << LEVEL_SHIFT) - 1
#: Holes (freed words not at the end) above this share of the table trigger `compact`.
HOLE_SHARE = 0.25


def descriptor_words(layout: VirtualLayout) -> int:
    """Words of a texture's descriptor block: head, level words, coarsest entries."""
    return DESCRIPTOR_HEAD + layout.levels + layout.tiles(layout.levels - 1)


@dataclass
class _Placed:
    """Where one texture's words sit: its descriptor and the blocks of its levels."""

    layout: VirtualLayout
    desc: int
    blocks: dict[int, int] = field(default_factory=dict)  # level -> first entry


class PageTable:
    """CPU copy of the table plus the spans of rows changed since the last upload."""

    def __init__(self) -> None:
        self.words = np.zeros(DIRECTORY_WORDS, np.uint32)
        self._placed: list[_Placed] = []
        self._chunk_starts: list[int] = []
        self._free: dict[int, list[int]] = {}  # block size -> starts
        self._holes = 0
        self._used = DIRECTORY_WORDS
        self._dirty: dict[int, tuple[int, int]] = {}  # row -> [lo, hi) columns
        # Per texture, the residency {(level, x, y): slot} its entries show now.
        self._applied: dict[int, dict[tuple[int, int, int], int]] = {}

    @property
    def layouts(self) -> list[VirtualLayout]:
        return [p.layout for p in self._placed]

    @property
    def used(self) -> int:
        """Words up to the last block in use (holes included)."""
        return self._used

    @property
    def live(self) -> int:
        """Words in use: the table less its holes."""
        return self._used - self._holes

    @property
    def rows(self) -> int:
        """Rows of the table texture the current contents need (at least one)."""
        return max(1, -(-self.used // TABLE_WIDTH))

    # ------------------------------------------------------------------ blocks
    def _new_block(self, size: int) -> int:
        free = self._free.get(size)
        if free:
            self._holes -= size
            return free.pop()
        start = self._used
        self._used += size
        if self.words.size < self._used:  # doubling: n blocks cost O(n) copies
            need = -(-self._used // TABLE_WIDTH) * TABLE_WIDTH
            grown = np.zeros(max(need, 2 * self.words.size), np.uint32)
            grown[:self.words.size] = self.words
            self.words = grown
        return start

    def _free_block(self, start: int, size: int) -> None:
        self._free.setdefault(size, []).append(start)
        self._holes += size

    def wants_compaction(self) -> bool:
        """Whether holes are a large part of the table (after a zoom gave blocks back)."""
        return self._holes > max(2 * TABLE_WIDTH, HOLE_SHARE * self._used)

    def compact(self) -> None:
        """Lay every block out afresh, in order, with no holes (the GPU copy is rewritten
        whole: `mark_all`)."""
        old = self.words
        self.words = np.zeros(DIRECTORY_WORDS, np.uint32)
        self._used, self._free, self._holes, self._dirty = DIRECTORY_WORDS, {}, 0, {}
        for c in range(len(self._chunk_starts)):
            self._chunk_starts[c] = start = self._new_block(CHUNK_TEXTURES)
            self.words[c] = start
        for vt, p in enumerate(self._placed):
            lay, size = p.layout, descriptor_words(p.layout)
            desc = self._new_block(size)
            self.words[desc:desc + size] = old[p.desc:p.desc + size]
            top = lay.levels - 1
            blocks = {top: desc + DESCRIPTOR_HEAD + lay.levels}
            for level, start in p.blocks.items():
                if level != top:
                    n = lay.tiles(level)
                    blocks[level] = at = self._new_block(n)
                    self.words[at:at + n] = old[start:start + n]
            p.desc, p.blocks = desc, blocks
            self.words[self.directory_index(vt)] = desc
            self._point_levels(p)
        self.mark_all()

    # ------------------------------------------------------------------ textures
    def directory_index(self, vt: int) -> int:
        """The word holding texture `vt`'s descriptor start."""
        return int(self.words[vt // CHUNK_TEXTURES]) + vt % CHUNK_TEXTURES

    def add(self, layout: VirtualLayout) -> int:
        """Add a texture: its descriptor and coarsest entries (zero until
        `set_residency`); its id."""
        vt = len(self._placed)
        if vt >= MAX_TABLE_TEXTURES:
            raise ValueError(f"a page table holds at most {MAX_TABLE_TEXTURES} textures")
        if vt % CHUNK_TEXTURES == 0:
            start = self._new_block(CHUNK_TEXTURES)
            self._chunk_starts.append(start)
            self.words[vt // CHUNK_TEXTURES] = start
            self._mark(vt // CHUNK_TEXTURES, vt // CHUNK_TEXTURES + 1)
            self.words[start:start + CHUNK_TEXTURES] = 0
        size = descriptor_words(layout)
        desc = self._new_block(size)
        top = layout.levels - 1
        p = _Placed(layout, desc, {top: desc + DESCRIPTOR_HEAD + layout.levels})
        self._placed.append(p)
        self.words[desc:desc + size] = 0
        self.words[desc] = (layout.width - 1) | (layout.levels << 24)
        self.words[desc + 1] = (layout.height - 1) | (int(layout.wrap) << 24)
        self._mark(desc, desc + size)
        d = self.directory_index(vt)
        self.words[d] = desc
        self._mark(d, d + 1)
        self._point_levels(p)
        return vt

    def _point_levels(self, p: _Placed) -> None:
        """Write the level words: each level's own block, or the finest coarser one."""
        lay = p.layout
        words = np.empty(lay.levels, np.uint32)
        held, start = lay.levels - 1, p.blocks[lay.levels - 1]
        for level in range(lay.levels - 1, -1, -1):
            if level in p.blocks:
                held, start = level, p.blocks[level]
            words[level] = (held << LEVEL_SHIFT) | start
        lo = p.desc + DESCRIPTOR_HEAD
        cur = self.words[lo:lo + lay.levels]
        if not np.array_equal(cur, words):
            cur[:] = words
            self._mark(lo, lo + lay.levels)

    def _grid_view(self, p: _Placed, level: int) -> np.ndarray:
        """The block of a level that has one, as a (rows, columns) view of the words."""
        gx, gy = p.layout.grid(level)
        start = p.blocks[level]
        return self.words[start:start + gx * gy].reshape(gy, gx)

    def _holder(self, p: _Placed, level: int) -> int:
        """The level whose block a level's lookups read: itself or the finest coarser."""
        return next(lvl for lvl in range(level, p.layout.levels) if lvl in p.blocks)

    def _open_level(self, p: _Placed, level: int) -> None:
        """Give a level a block of its own, filled with what its lookups read now."""
        lay = p.layout
        held = self._holder(p, level)
        src = self._grid_view(p, held)
        gx, gy = lay.grid(level)
        d = held - level
        ys = ancestor_index(np.arange(gy), d, src.shape[0])
        xs = ancestor_index(np.arange(gx), d, src.shape[1])
        start = self._new_block(gx * gy)
        p.blocks[level] = start
        self.words[start:start + gx * gy] = src[np.ix_(ys, xs)].ravel()
        self._mark(start, start + gx * gy)
        self._point_levels(p)

    def _close_level(self, p: _Placed, level: int) -> None:
        """Give a level's block back: with no tile of its own resident, its entries equal
        what the coarser block gives its lookups."""
        self._free_block(p.blocks.pop(level), p.layout.tiles(level))
        self._point_levels(p)

    def set_residency(self, vt: int, slots: dict[tuple[int, int, int], int]) -> int:
        """Make texture `vt`'s entries show its resident tiles {(level, x, y): slot}. The
        coarsest level's single tile must be among them. Returns how many entries were
        written (an entry that a moved tile rewrites twice counts twice)."""
        p = self._placed[vt]
        lay = p.layout
        top = lay.levels - 1
        if (top, 0, 0) not in slots:
            raise ValueError(f"virtual texture {vt}: its coarsest tile is not resident")
        levels = {level for level, _, _ in slots}
        prev = self._applied.get(vt)
        if prev is None or prev.get((top, 0, 0)) != slots[(top, 0, 0)]:
            changed = self._recompute(p, slots, levels)
        else:
            gone = [(t, slot) for t, slot in prev.items() if t not in slots]
            came = [(t, slot) for t, slot in slots.items() if t not in prev]
            moved = [(pack_entry(prev[t], t[0]), pack_entry(slot, t[0]))
                     for t, slot in slots.items() if t in prev and prev[t] != slot]
            if len(gone) + len(came) > FULL_REWRITE_TILES:
                changed = self._recompute(p, slots, levels)
            else:
                for level in sorted(levels - p.blocks.keys(), reverse=True):
                    self._open_level(p, level)
                changed = self._move(p, moved) if moved else 0
                for (level, x, y), slot in gone:
                    changed += self._evict(p, level, x, y, pack_entry(slot, level))
                for (level, x, y), slot in came:
                    changed += self._subtree_write(p, level, x, y, pack_entry(slot, level),
                                                   pack_entry(slot, level), evict=False)
                for level in p.blocks.keys() - levels - {top}:
                    self._close_level(p, level)
        self._applied[vt] = dict(slots)
        return changed

    def _move(self, p: _Placed, moved: list[tuple[int, int]]) -> int:
        """Tiles that changed slot (a page cache resized with its tiles copied): every
        entry naming an old (slot, level) names the new one, one vectorised replace per
        block, where an eviction and an arrival per tile cost two subtree passes each."""
        pairs = np.array(moved, np.uint32)
        pairs = pairs[np.argsort(pairs[:, 0])]
        old, new = pairs[:, 0], pairs[:, 1]
        changed = 0
        for level, start in p.blocks.items():
            view = self.words[start:start + p.layout.tiles(level)]
            i = np.minimum(np.searchsorted(old, view), old.size - 1)
            hit = np.flatnonzero(old[i] == view)
            if hit.size:
                view[hit] = new[i[hit]]
                self._mark(start + int(hit[0]), start + int(hit[-1]) + 1)
                changed += int(hit.size)
        return changed

    def _evict(self, p: _Placed, level: int, x: int, y: int, entry: int) -> int:
        """Tile (level, x, y) left: entries naming it take its parent's entry."""
        fallback = self.resolve(p, level + 1, x >> 1, y >> 1)
        return self._subtree_write(p, level, x, y, entry, fallback, evict=True)

    def _subtree_write(self, p: _Placed, level: int, x: int, y: int, entry: int,
                       value: int, evict: bool) -> int:
        """Write `value` into the footprint of tile (level, x, y) at its level and every
        finer level with a block, where an entry names the tile (`evict`) or a coarser
        tile (else). The tile's own entry is one word: a scalar step, no views (most
        arrivals are fine)."""
        lay, words = p.layout, self.words
        gx, gy = lay.grid(level)
        last_x, last_y = x == gx - 1, y == gy - 1
        i = p.blocks[level] + y * gx + x
        cur = int(words[i])
        if not (cur == entry if evict else (cur >> 24) > level):
            return 0  # the tile's own entry decides for its whole footprint
        words[i] = value
        self._mark(i, i + 1)
        n = 1
        for lvl in range(level - 1, -1, -1):
            if lvl not in p.blocks:
                continue
            d = level - lvl
            gx, gy = lay.grid(lvl)
            off = p.blocks[lvl]
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

    def _recompute(self, p: _Placed, slots: dict[tuple[int, int, int], int],
                   levels: set[int]) -> int:
        """Rewrite a texture's blocks from scratch, one vectorised fill per level with a
        block: the levels with a resident tile get blocks, the others give theirs back."""
        lay = p.layout
        top = lay.levels - 1
        for level in p.blocks.keys() - levels - {top}:
            self._free_block(p.blocks.pop(level), lay.tiles(level))
        for level in levels - p.blocks.keys():
            p.blocks[level] = self._new_block(lay.tiles(level))
        self._point_levels(p)
        by_level: dict[int, list[tuple[int, int, int]]] = {}
        for (level, x, y), slot in slots.items():
            by_level.setdefault(level, []).append((x, y, slot))
        parent = np.array([[pack_entry(slots[(top, 0, 0)], top)]], np.uint32)
        changed = 0
        for lvl in range(top, min(p.blocks) - 1, -1):
            gx, gy = lay.grid(lvl)
            if lvl == top:
                grid = np.broadcast_to(parent, (gy, gx)).copy()
            else:
                ys = np.minimum(np.arange(gy) >> 1, parent.shape[0] - 1)
                xs = np.minimum(np.arange(gx) >> 1, parent.shape[1] - 1)
                grid = parent[np.ix_(ys, xs)]
            for x, y, slot in by_level.get(lvl, ()):
                grid[y, x] = pack_entry(slot, lvl)
            parent = grid
            if lvl in p.blocks:
                cur = self._grid_view(p, lvl).ravel()
                diff = np.flatnonzero(cur != grid.ravel())
                if diff.size:
                    changed += int(diff.size)
                    cur[:] = grid.ravel()
                    off = p.blocks[lvl]
                    self._mark(off + int(diff[0]), off + int(diff[-1]) + 1)
        return changed

    # ------------------------------------------------------------------ lookups
    def resolve(self, p: _Placed | int, level: int, x: int, y: int) -> int:
        """The entry the shader reads for tile (level, x, y), through the level word."""
        if not isinstance(p, _Placed):
            p = self._placed[p]
        held = self._holder(p, level)
        view = self._grid_view(p, held)
        d = held - level
        return int(view[min(y >> d, view.shape[0] - 1), min(x >> d, view.shape[1] - 1)])

    def lookup(self, vt: int, level: int, x: int, y: int) -> int:
        """The entry the shader reads for a tile (for tests and debugging)."""
        return self.resolve(vt, level, x, y)

    def entries(self, vt: np.ndarray, level: np.ndarray, x: np.ndarray, y: np.ndarray,
                level_grid) -> np.ndarray:
        """The entries the shader reads for tiles (vt, level, x, y), element-wise, read
        through the directory, descriptors and level words as the shader does (no
        per-texture array that grows with the textures registered). `level_grid(vt,
        level)` gives the tile columns and rows of a level."""
        vt = np.asarray(vt, np.int64)
        level = np.asarray(level, np.int64)
        w = self.words
        desc = w[w[vt // CHUNK_TEXTURES].astype(np.int64) + vt % CHUNK_TEXTURES].astype(np.int64)
        lw = w[desc + DESCRIPTOR_HEAD + level].astype(np.int64)
        held = lw >> LEVEL_SHIFT
        d = held - level
        hx, hy = level_grid(vt, held)
        tx = np.minimum(np.asarray(x, np.int64) >> d, hx - 1)
        ty = np.minimum(np.asarray(y, np.int64) >> d, hy - 1)
        return w[(lw & START_MASK) + ty * hx + tx]

    def dense(self, vt: int) -> list[np.ndarray]:
        """Every level's entries as the shader reads them, (rows, columns) each: what a
        dense table would hold (for tests and the bench's checks)."""
        p = self._placed[vt]
        out = []
        for level in range(p.layout.levels):
            held = self._holder(p, level)
            src = self._grid_view(p, held)
            gx, gy = p.layout.grid(level)
            d = held - level
            out.append(src[np.ix_(ancestor_index(np.arange(gy), d, src.shape[0]),
                                  ancestor_index(np.arange(gx), d, src.shape[1]))])
        return out

    def level_blocks(self, vt: int) -> list[int]:
        """The levels of a texture that hold a block of entries (finest first)."""
        return sorted(self._placed[vt].blocks)

    # ------------------------------------------------------------------ uploads
    def _mark(self, lo: int, hi: int) -> None:
        for row in range(lo // TABLE_WIDTH, (hi - 1) // TABLE_WIDTH + 1):
            a = max(lo - row * TABLE_WIDTH, 0)
            b = min(hi - row * TABLE_WIDTH, TABLE_WIDTH)
            cur = self._dirty.get(row)
            self._dirty[row] = (a, b) if cur is None else (min(a, cur[0]), max(b, cur[1]))

    def take_dirty(self) -> list[tuple[int, int, int, int]]:
        """The changed words since the last call as rectangles (first row, rows, first
        column, columns): consecutive changed rows share one (then clean)."""
        rects: list[list[int]] = []
        for row in sorted(self._dirty):
            lo, hi = self._dirty[row]
            if rects and rects[-1][0] + rects[-1][1] == row:
                r = rects[-1]
                r[1] += 1
                r[2], r[3] = min(r[2], lo), max(r[3], hi)
            else:
                rects.append([row, 1, lo, hi])
        self._dirty = {}
        return [(r0, n, lo, hi - lo) for r0, n, lo, hi in rects]

    def mark_all(self) -> None:
        """Everything must go up again (a new table texture)."""
        self._dirty = {row: (0, TABLE_WIDTH) for row in range(self.rows)}
