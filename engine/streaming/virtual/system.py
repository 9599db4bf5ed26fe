"""The virtual texture system a frame loop owns: register files, feed it feedback, update
residency, bind it for drawing.

    vts = VirtualTextureSystem(device, allowance_bytes)   # the streaming pool's allowance
    vt = vts.register("rock.ktx2")                       # id the shader's vt_sample takes
    per frame:
        vts.begin_frame(frame)        # newest finished feedback -> tile requests -> I/O
        vts.update()                  # arrived tiles -> cache slots, page table rows -> GPU
        vts.bind(program)             # cache + table on texture units, uniforms set
        ... draw with vt_sample(vt, uv) ...
        if vts.feedback_begin(size):  # at 1/4 .. 1/8 of the output size
            ... draw the same geometry with a vt_feedback_key program ...
            vts.feedback_end(frame)

Memory: the page cache and the page table are the only GPU memory (ledgered as the
streaming pool). `allowance_bytes`, handed in from outside (the governor's streaming
allowance), is their ceiling; below it the cache holds what the newest feedback wants
(sizing.py) and grows or shrinks with it, copying the tiles it keeps on the GPU where old
and new fit the allowance together, else remade (old released first, pinned tiles
re-uploaded from RAM, the rest streams back in).
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ... import textures
from ...errors import BudgetError, FaultKind, TextureFormatError
from ...formats import PixelFormat
from ...gl.device import Device
from ...memory import events
from ...memory.split import MIN_STREAM_SLOTS
from ...textures.transcode import blocks_transcoder, served_tile_format
from ...gl.vt import (
    DepthFeedbackTarget,
    FeedbackTarget,
    LodProxy,
    PageCache,
    PageTableTexture,
    bind_vt,
    cache_grid,
)
from . import keys as tile_keys
from .io import TileIO
from .pagetable import TABLE_WIDTH, PageTable
from .cells import PackedCells
from .policy import Tier, TilePolicy
from .requests import TileRequests, expand_requests, reduce_feedback, reduce_readback
from .sizing import ElasticSize, screen_tiles, wanted_slots
from .tiles import (
    SLOT_TEXELS,
    TILE_TEXELS,
    TextureGrids,
    TAIL_CLASS_SHIFT,
    TAIL_CLASSES,
    TAIL_FLAG,
    VirtualLayout,
    Wrap,
    slot_bytes,
    slot_shape,
    tail_blocks,
    tail_texels,
    tails_per_row,
    tails_per_slot,
    virtual_levels,
)

log = logging.getLogger(__name__)

#: Texture units the system binds by default (high, out of the renderer's way).
PROXY_UNIT = 13
CACHE_UNIT = 14
TABLE_UNIT = 15


@dataclass
class VtFrameStats:
    """One frame's work: what the bench and the HUD report."""

    frame: int = 0
    requests: int = 0
    tiles_uploaded: int = 0
    bytes_uploaded: int = 0
    evictions: int = 0
    deferred: int = 0  # tiles in hand that found no slot this frame (kept, not re-read)
    table_words: int = 0
    feedback_ms: float = 0.0  # readback poll + reduce + plan + I/O requests (CPU)
    update_ms: float = 0.0  # admit + upload + page table (CPU)
    upload_ms: float = 0.0  # of update_ms: the tile uploads
    table_ms: float = 0.0  # of update_ms: page-table recompute and row writes
    in_hand: int = 0  # tiles read and waiting for an upload slot in a later frame
    feedback_frame: int = -1


@dataclass
class _Texture:
    layout: VirtualLayout
    path: Path
    resident: dict[tuple[int, int, int], int] = field(default_factory=dict)


def choose_virtual(width: int, height: int, min_size: int = 1024) -> bool:
    """Whether a texture should stream virtually: large (either side >= `min_size`, where
    whole levels cost megabytes), whatever its size otherwise (non-power-of-two, larger
    than the driver's largest texture: the page table addresses it, not a GL texture). The
    streamer's per-texture decision; small textures stream by whole levels."""
    return max(width, height) >= min_size


def _same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether two reduced feedbacks (keys, pixels) are equal: their expansion is too (a
    texture's layout never changes once registered), so it is not done again."""
    return a[0].size == b[0].size and np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def uploads_for_screen(width: int, height: int, floor: int) -> int:
    """Tiles a frame may upload at a render size of `width` x `height`: `floor`, or a
    quarter of the finest tiles such a screen shows at once (one texel a pixel), so that a
    cut to new detail is uploaded within about four frames whatever the output size."""
    tiles = -(-width // TILE_TEXELS) * -(-height // TILE_TEXELS)
    return max(int(floor), -(-tiles // 4))


class VirtualTextureSystem:
    """Page cache + page table + tile I/O + residency policy for textures of one format."""

    def __init__(self, device: Device, allowance_bytes: int, *, io_workers: int = 2,
                 max_uploads: int = 32, upload_budget_ms: float | None = None,
                 hold_frames: int = 8, grace_frames: int = 2,
                 max_requests: int | None = None,
                 latency_ms: tuple[float, float] | None = None,
                 level_cache_bytes: int = 64 << 20, feedback_depth: bool = False,
                 feedback_reduce: bool | None = None,
                 tiled_dir: Path | bool = True) -> None:
        self.device = device
        self.allowance = int(allowance_bytes)
        self.max_uploads = self._min_uploads = int(max_uploads)
        #: Milliseconds of tile uploads a frame may spend (None: `max_uploads` tiles, a
        #: fixed count); the count follows the measured cost of recent uploads, at most
        #: `max_uploads`, at least one tile.
        self.upload_budget_ms = upload_budget_ms
        self._tile_upload_ms: float | None = None  # moving average of one tile's upload
        self.hold_frames = int(hold_frames)
        self.grace_frames = int(grace_frames)
        # Reads asked for per frame: a few frames of uploads ahead, so I/O never idles.
        self._fixed_requests = bool(max_requests)
        self.max_requests = int(max_requests) if max_requests else 4 * self.max_uploads
        self.fmt: PixelFormat | None = None
        self.table = PageTable()
        # tiled_dir: where tile-contiguous copies of the files (one pread a tile, made
        # once in the background; io.TiledCache) live: True, the engine's cache folder.
        self.io = TileIO(workers=io_workers, latency_ms=latency_ms,
                         level_cache_bytes=level_cache_bytes, tiled_dir=tiled_dir)
        self.textures: list[_Texture] = []
        self.pinned_data: dict[int, bytes] = {}
        self.policy: TilePolicy | None = None
        self.cache: PageCache | None = None
        self.gpu_table: PageTableTexture | None = None
        # A scene's feedback pass is depth-tested (objects occlude); the standalone quads
        # are one flat wall and need no depth buffer.
        # feedback_reduce: reduce it on the GPU (None: as the device profile says).
        target = DepthFeedbackTarget if feedback_depth else FeedbackTarget
        self.feedback = target(device, reduce=feedback_reduce)
        self.proxy: LodProxy | None = None
        self.frame = 0
        self.stats = VtFrameStats()
        self.history: list[VtFrameStats] = []
        self._dirty_vts: set[int] = set()
        self._requests = TileRequests.empty()
        #: What a plan depends on besides the frame: new requests and every change of what
        #: is resident, in hand, asked or failed (counted). While it stays the same, the
        #: plan is reused once nothing is missing or every tier has settled (`_plan_holds`).
        self._changes = 0
        self._plan_inputs: tuple[int, int] | None = None
        self._plan_since = 0
        self._ready: dict[int, bytes] = {}  # tiles read, not yet uploaded
        self._deferred: set[int] = set()  # of those, the ones that found no slot last frame
        self._asked: set[int] = set()  # reads the I/O was asked for and has not finished
        #: The newest plan's missing tiles -> priority (TilePolicy.plan): the upload order.
        self._urgency: dict[int, float] = {}
        self._grids = TextureGrids()  # per texture: size, levels, first packed level
        self.packed = PackedCells()  # where the small packed levels live in the cache
        #: Per size class, the policy of the cells its streamed small levels take (cell i
        #: of the policy is cell `packed.pinned_count[k] + i` of the class; None: none).
        self._cells: list[TilePolicy | None] = [None] * TAIL_CLASSES
        self._cell_of: dict[int, int] = {}  # streamed cell key asked for -> its size class
        self._visible_slots = 0  # the newest requests' visible tiles that take whole slots
        self._visible_cells = [0] * TAIL_CLASSES  # ... and those of each class of cells
        self._asked_slots = 0  # the newest requests' whole-slot tiles (visible and ancestors)
        self._asked_cells = [0] * TAIL_CLASSES
        #: Visible tiles to size the cache for before any feedback (`fit_screen`).
        self._screen_hint = screen_tiles(1280, 720, TILE_TEXELS)
        self._elastic = ElasticSize()
        self.resizes = 0  # elastic resizes that kept the cache's tiles (copies)
        #: The newest feedback reduced to (unique keys, pixels) and the frame it showed.
        self.last_feedback: tuple[np.ndarray, np.ndarray] = (np.zeros(0, tile_keys.DTYPE),
                                                             np.zeros(0, np.int64))
        self.feedback_frame = -1
        #: Textures whose tile reads failed (vt id -> the error): reported once, asked for no
        #: more tiles; they keep the tiles they hold and fall back to coarser ones (their
        #: pinned coarsest tile at least, held in RAM) where those go.
        self.failed: dict[int, str] = {}
        self.io_errors = 0  # textures whose tile reads failed (each counted once)
        self._failed_ids = np.zeros(0, np.int64)
        self._closed = False

    # ------------------------------------------------------------------ registration
    def register(self, path: str | Path | textures.TextureFile,
                 wrap: str | Wrap = "repeat") -> int:
        """Open a texture file as a virtual texture; its id for vt_sample. The coarsest
        tile is read now (a few KiB) and pinned: the fallback every lookup can reach.
        `path` may be the file already opened (`textures.open`: a caller that opened it to
        decide how it streams does not parse its header twice)."""
        tf = path if isinstance(path, textures.TextureFile) else textures.open(path)
        fmt = served_tile_format(tf, self.device.caps.can_sample)
        if self.fmt is None:
            self.fmt = self.packed.fmt = fmt
        elif fmt != self.fmt:
            raise TextureFormatError(tf.path, f"{fmt.name} in a virtual texture system of "
                                              f"{self.fmt.name} (one page cache per format)")
        w = Wrap[wrap.upper()] if isinstance(wrap, str) else Wrap(wrap)
        layout = VirtualLayout(fmt, tf.width, tf.height,
                               virtual_levels(fmt, tf.width, tf.height, len(tf.levels)), w)
        source = self.io.add(tf, layout, None if fmt is tf.pixel_format
                             else blocks_transcoder(tf.pixel_format, fmt, tf.path))
        vt = self.table.add(layout)
        self._grids.append(layout)
        self.textures.append(_Texture(layout, tf.path))
        top = layout.levels - 1
        pinned = []
        # Small levels share slots as cells; only the coarsest is pinned (the fallback every
        # lookup reaches), the others stream into cells like tiles into slots: pinned, the
        # small levels of thousands of textures would take more than a screen's worth.
        new_class = False
        for level, k in layout.packed_levels():
            if level == top:
                key = self.key(vt, level, 0, 0)
                self.pinned_data[key] = source.read_tile(level, 0, 0)
                self.packed.pin(key, k)
                pinned.append(key)
            else:
                new_class |= self.packed.stream(k)
        key = self.key(vt, top, 0, 0)
        if key not in self.packed.pinned:  # a coarsest level too large for a cell: a slot
            self.pinned_data[key] = source.read_tile(top, 0, 0)
            pinned.append(key)
        if self.cache is not None:
            if new_class or not self.packed.fits([c.slots if c is not None else 0
                                                  for c in self._cells]):
                self._rebuild()  # the tail cells grew: resize within allowance
            else:
                self._fit_table()
                for key in pinned:
                    self._pin(key)
        return vt

    @staticmethod
    def key(vt: int, level: int, x: int, y: int) -> int:
        return tile_keys.pack_one(vt, level, x, y)

    # ------------------------------------------------------------------ memory
    def _most_slots(self) -> int:
        """Slots the allowance pays for beside the table and the 1-byte LOD proxy."""
        assert self.fmt is not None
        return (self.allowance - self.table_bytes() - 1) // slot_bytes(self.fmt)

    def _table_rows(self) -> int:
        """Rows the GPU table is made with: the CPU table's and an eighth more (at least
        one), so that it grows rarely as levels gain blocks of entries."""
        rows = self.table.rows
        return rows + max(1, rows // 8)

    def table_bytes(self) -> int:
        """What the page table takes of the allowance: the GPU table as made, or as it
        would be made now, whichever is larger."""
        made = self.gpu_table.rows if self.gpu_table is not None else 0
        return max(made, self._table_rows()) * TABLE_WIDTH * 4

    def _fit_table(self) -> None:
        """Keep the GPU table the size of the CPU one: grown when blocks no longer fit,
        remade smaller (after compacting away the holes zooms leave) when far too large."""
        if self.gpu_table is None:
            return
        if self.table.wants_compaction():
            self.table.compact()
        want, made = self._table_rows(), self.gpu_table.rows
        if made >= self.table.rows and made <= want + max(1, want // 4):
            return
        if want > self.device.caps.max_texture_size:
            raise BudgetError(f"the page table of {len(self.textures)} textures needs "
                              f"{want} rows of {TABLE_WIDTH} words; this driver's "
                              f"textures have at most {self.device.caps.max_texture_size}")
        self.gpu_table.release()
        self.gpu_table = PageTableTexture(self.device, TABLE_WIDTH, want)
        self.table.mark_all()

    def _grid(self, total: int) -> tuple[int, int]:
        """The cache's grid of at least `total` slots where the allowance holds them
        (`cache_grid` gives at most as many, up to a row fewer)."""
        return cache_grid(min(self._most_slots(), total + math.isqrt(max(0, total)) + 1),
                          SLOT_TEXELS, self.device.caps.max_texture_size)

    def _fixed_slots(self) -> int:
        """Slots of packed small levels (what the screen shows of them, with headroom) and
        of whole pinned coarsest tiles."""
        return sum(self._class_slots(1 << 30)) + self._whole_pinned()

    def _whole_pinned(self) -> int:
        """Coarsest tiles too large for a cell, each pinned in a whole slot."""
        return len(self.pinned_data) - len(self.packed.pinned)

    def _slot_count(self) -> int:
        """The slots the cache holds: what the screen needs (engine/streaming/virtual/
        sizing.py), within the allowance."""
        asked = self.feedback_frame >= 0 or self._requests.keys.size > 0
        visible = self._visible_slots if asked else self._screen_hint
        return wanted_slots(self._fixed_slots(), visible, self._most_slots(),
                            self._asked_slots if asked else 0)

    def min_bytes(self) -> int:
        """The least this system runs with: the page table, the LOD proxy, the packed
        levels' fewest slots, the whole pinned tiles and a few slots to stream."""
        assert self.fmt is not None
        slots = self.packed.fewest_slots() + self._whole_pinned() + MIN_STREAM_SLOTS
        return self.table_bytes() + 1 + slots * slot_bytes(self.fmt)

    def _class_slots(self, total: int) -> list[int]:
        """`PackedCells.class_slots` for a cache of `total` slots and the newest feedback."""
        return self.packed.class_slots(total, self._visible_cells, self._asked_cells,
                                       self._whole_pinned())

    def _rebuild(self) -> None:
        """(Re)make cache and table for the current allowance, old ones released first.
        The cache's first slots hold the packed coarsest tiles (tail cells); the policy
        manages the rest, its slot i being cache slot i + `packed.slots`."""
        if self.fmt is None:
            raise BudgetError("no virtual texture registered yet")
        if self._table_rows() > self.device.caps.max_texture_size:
            raise BudgetError(f"the page table of {len(self.textures)} textures needs "
                              f"{self._table_rows()} rows of {TABLE_WIDTH} words; this "
                              f"driver's textures have at most "
                              f"{self.device.caps.max_texture_size}")
        self._release_gpu()
        self._changes += 1
        slots = self._slot_count()
        sx, sy = self._grid(slots)
        class_slots = self._class_slots(sx * sy)
        tail_slots = sum(class_slots)
        whole = self._whole_pinned()
        if sx * sy - tail_slots < max(1, whole):
            raise BudgetError(f"virtual texture allowance {self.allowance} bytes holds "
                              f"{max(0, sx * sy)} slots; {len(self.pinned_data)} textures "
                              f"need {tail_slots} slot(s) of packed coarsest tiles and "
                              f"{whole} whole one(s), and one more to stream")
        self.packed.place(class_slots)
        for k, n in enumerate(class_slots):
            cells = self.packed.streamed_room(k, n)
            self._cells[k] = self._new_policy(cells) if cells > 0 else None
        self.gpu_table = PageTableTexture(self.device, TABLE_WIDTH, self._table_rows())
        self.proxy = LodProxy(self.device)
        self.cache = PageCache(self.device, self.fmt, sx, sy, SLOT_TEXELS)
        if self.policy is None:
            self.policy = self._new_policy(sx * sy - tail_slots)
        else:
            self.policy.resize(sx * sy - tail_slots)
        for t in self.textures:
            t.resident.clear()
        self._pin_all()
        self.table.mark_all()
        log.info("virtual texture cache: %dx%d slots of %s (%d bytes), table %d rows",
                 sx, sy, self.fmt.name, self.cache.nbytes, self.gpu_table.rows)

    def _new_policy(self, slots: int) -> TilePolicy:
        return TilePolicy(slots, hold_frames=self.hold_frames, grace_frames=self.grace_frames,
                          max_requests=self.max_requests)

    def _pin(self, key: int) -> None:
        """Upload a tile for good: a small level into its cell, a coarsest level too large
        for one into a whole slot the policy never evicts."""
        code = self.packed.pinned.get(key)
        if code is None:
            slot = self.policy.pin(key) + self.packed.slots
            self.cache.upload_tile(slot, self.pinned_data[key])
            self._record(key, slot)
            return
        k, cell = self.packed.cell_of(code)
        self._upload_cell(key, k, cell, self.pinned_data[key])

    def _pin_all(self) -> None:
        """Every pinned tile into a new cache: the cells gathered slot by slot in memory
        and uploaded as whole slots (one upload per slot, not one per texture: thousands
        of textures' coarsest levels share a few dozen slots), whole-slot ones as tiles."""
        shape = slot_shape(self.fmt)
        slots: dict[int, np.ndarray] = {}
        for key, data in self.pinned_data.items():
            code = self.packed.pinned.get(key)
            if code is None:
                self._pin(key)
                continue
            k, cell = self.packed.cell_of(code)
            per_row, per_slot = tails_per_row(self.fmt, k), self.packed.per_slot(k)
            n = tail_texels(self.fmt, k) // self.fmt.block_w  # blocks a side of a cell
            slot = self.packed.bases[k] + cell // per_slot
            img = slots.get(slot)
            if img is None:
                img = slots[slot] = np.zeros(shape, np.uint8)
            c = cell % per_slot
            bx, by = (c % per_row) * n, (c // per_row) * n
            img[by:by + n, bx:bx + n] = np.frombuffer(
                tail_blocks(self.fmt, data, k), np.uint8).reshape(n, n, shape[2])
            self._record(key, TAIL_FLAG | code)
        self.cache.upload_tiles([(slot, img.tobytes()) for slot, img in sorted(slots.items())])

    def _upload_cell(self, key: int, k: int, cell: int, data: bytes) -> None:
        """Upload a packed level's slot bytes into cell `cell` of size class `k` and point
        its page-table entry there."""
        x, y = self._cell_origin(self.cache, self.packed.bases[k], k, cell)
        self.cache.upload_region(x, y, tail_texels(self.fmt, k), tail_blocks(self.fmt, data, k))
        self._record(key, TAIL_FLAG | (k << TAIL_CLASS_SHIFT) | cell)

    def _class_of(self, key: int) -> int:
        """The size class of a streamed cell (asked for, or resident), -1 for a tile that
        takes a whole slot."""
        k = self._cell_of.get(key)
        if k is not None:
            return k
        for k, pol in enumerate(self._cells):
            if pol is not None and key in pol.where:
                return k
        return -1

    def _policy_for(self, key: int) -> TilePolicy:
        k = self._class_of(key)
        return self.policy if k < 0 else self._cells[k]

    def _held(self, key: int) -> bool:
        """Resident in a policy's slot or cell (pinned cells aside)."""
        if self.policy is not None and self.policy.is_resident(key):
            return True
        return any(c is not None and c.is_resident(key) for c in self._cells)

    def _resident_keys(self) -> np.ndarray:
        """Keys of every tile a policy holds (slots and streamed cells)."""
        parts = [self.policy.slot_key] if self.policy is not None else []
        parts += [c.slot_key for c in self._cells if c is not None]
        return np.concatenate(parts) if parts else np.zeros(0, tile_keys.DTYPE)

    @property
    def tail_slots(self) -> int:
        """Cache slots holding packed small levels (policy slot i = cache slot i + this)."""
        return self.packed.slots

    @property
    def tails(self) -> dict[int, int]:
        """Packed small levels: key -> class << TAIL_CLASS_SHIFT | cell (a read-only view for
        tests and tools)."""
        return dict(self.packed.pinned)

    def cell_key(self, code: int) -> int:
        """The key held in packed cell `code` (class << TAIL_CLASS_SHIFT | cell, as a
        page-table entry names it): a pinned coarsest level or a streamed small level; 0 for
        a free cell (tests and tools)."""
        k, cell = self.packed.cell_of(code)
        if cell < self.packed.pinned_count[k]:
            return next((key for key, c in self.packed.pinned.items() if c == code), 0)
        pol, i = self._cells[k], cell - self.packed.pinned_count[k]
        return int(pol.slot_key[i]) if pol is not None and i < pol.slots else 0

    def is_resident(self, key: int) -> bool:
        """The tile is in the cache (a packed coarsest tile, or a policy slot)."""
        return int(key) in self.packed.pinned or self._held(int(key))

    def _record(self, key: int, slot: int | None) -> None:
        vt, level, x, y = tile_keys.unpack_one(key)
        res = self.textures[vt].resident
        if slot is None:
            res.pop((level, x, y), None)
        else:
            res[(level, x, y)] = slot
        self._dirty_vts.add(vt)
        self._changes += 1

    def set_allowance(self, allowance_bytes: int) -> None:
        """A new streaming allowance from the governor: a ceiling. The cache shrinks at once
        when it no longer fits; a larger allowance is only room to grow into."""
        self.allowance = int(allowance_bytes)
        if self.cache is not None and self.cache.slots > self._most_slots():
            self._resize(self._slot_count())

    def _follow_need(self) -> None:
        """Grow or shrink the cache to what the screen needs (`ElasticSize`); a class of
        packed cells that needs more slots than it has grows the cache too."""
        if self.cache is None or self.fmt is None:
            return
        size = self._elastic.decide(self.frame, self.cache.slots, self._slot_count(),
                                    self._most_slots())
        short = any(a > b for a, b in zip(self._class_slots(size), self.packed.held(),
                                          strict=True))
        if size != self.cache.slots or short:
            self._resize(size)

    def _resize(self, total: int) -> None:
        """Make the cache `total` slots, keeping its pinned tiles and the best of the rest
        (`TilePolicy.shrink_or_grow`, for whole slots and each class of cells) by copying
        them on the GPU. Old and new coexist for the copy, so it is done only where both fit
        the allowance (and the driver copies images); else the cache is remade and its
        tiles stream back in."""
        sx, sy = self._grid(total)
        old, fmt = self.cache, self.fmt
        classes = self._class_slots(sx * sy)
        whole = sx * sy - sum(classes)
        if (sx, sy) == (old.slots_x, old.slots_y) and classes == self.packed.held():
            return
        if not self.device.caps.copy_image or whole < self._whole_pinned() + 1 or \
                old.nbytes + sx * sy * slot_bytes(fmt) > self._most_slots() * slot_bytes(fmt):
            self._rebuild()
            return
        packed = self.packed
        was_bases, was_slots = packed.bases, packed.slots
        packed.place(classes)
        cache = PageCache(self.device, fmt, sx, sy, SLOT_TEXELS)
        self._changes += 1
        moves, regions, records = [], [], []
        for k in range(TAIL_CLASSES):
            size, pinned = tail_texels(fmt, k), packed.pinned_count[k]
            moves += [(was_bases[k] + i, packed.bases[k] + i)
                      for i in range(-(-pinned // packed.per_slot(k)))]
            cells = packed.streamed_room(k, classes[k])
            pol = self._cells[k]
            if pol is None or cells <= 0:
                records += [(key, None) for key in (pol.where if pol is not None else ())]
                self._cells[k] = self._new_policy(cells) if cells > 0 else None
                continue
            kept, dropped = pol.shrink_or_grow(cells)
            records += [(key, None) for key in dropped]
            for a, b in kept:
                regions.append((self._cell_origin(old, was_bases[k], k, pinned + a),
                                self._cell_origin(cache, packed.bases[k], k, pinned + b), size))
                records.append((int(pol.slot_key[b]),
                                TAIL_FLAG | (k << TAIL_CLASS_SHIFT) | (pinned + b)))
        kept, dropped = self.policy.shrink_or_grow(whole)
        moves += [(a + was_slots, b + packed.slots) for a, b in kept]
        records += [(key, None) for key in dropped]
        records += [(int(self.policy.slot_key[b]), b + packed.slots) for _, b in kept]
        cache.copy_slots(old, moves)
        cache.copy_regions(old, regions)
        old.release()
        self.cache = cache
        for key, slot in records:
            self._record(key, slot)
        self.resizes += 1
        log.debug("page cache %d -> %d slots (%d tiles and %d cells kept)", old.slots,
                  cache.slots, len(kept), len(regions))

    def _cell_origin(self, cache: PageCache, base: int, k: int, cell: int) -> tuple[int, int]:
        """Texel origin of cell `cell` of size class `k` whose slots start at `base`."""
        per_row, size, per = tails_per_row(self.fmt, k), tail_texels(self.fmt, k), \
            tails_per_slot(self.fmt, k)
        sx, sy = cache.slot_origin(base + cell // per)
        c = cell % per
        return sx + (c % per_row) * size, sy + (c // per_row) * size

    @property
    def nbytes(self) -> int:
        """GPU bytes held: the cache and the table."""
        return sum(obj.nbytes for obj in (self.cache, self.gpu_table, self.proxy)
                   if obj is not None)

    def resident_tiles(self) -> int:
        """Tiles held: whole-slot tiles and packed cells (many cells share one slot)."""
        return (self.policy.occupied if self.policy else 0) + len(self.packed.pinned) + \
            sum(c.occupied for c in self._cells if c is not None)

    def used_slots(self) -> int:
        """Cache slots holding at least one tile: whole-slot tiles, and each slot of packed
        cells with a cell in use. What `cache_slots_used` reports against `cache.slots`;
        counting cells instead (`resident_tiles`) overran the cache's slots."""
        used = self.policy.occupied if self.policy is not None else 0
        if self.fmt is None:
            return used
        for k, pol in enumerate(self._cells):
            per, pinned = self.packed.per_slot(k), self.packed.pinned_count[k]
            streamed = {(pinned + i) // per for i in pol.where.values()} if pol else set()
            used += len(streamed | set(range(-(-pinned // per))))
        return used

    def visible_tile_count(self) -> int:
        """Tiles the newest feedback made VISIBLE (asked for, or blended with by trilinear)
        that take whole slots: what the screen needs resident, whatever the cache holds
        besides (the small levels that stream as cells aside)."""
        return self._visible_slots

    def wanted_resident_fraction(self) -> float:
        """Of the newest feedback's pixels, the fraction whose tile (at the level they want)
        is resident: 1.0 means the screen shows full detail everywhere it looked."""
        keys, counts = self.last_feedback
        if keys.size == 0:
            return 1.0
        held = self._packed(keys) | np.isin(keys, self._resident_keys())
        return float(counts[held].sum() / counts.sum())

    def fit_screen(self, width: int, height: int) -> None:
        """Size the per-frame uploads (and reads asked for) to a render size of `width` x
        `height` (`uploads_for_screen`, at least the `max_uploads` it was made with)."""
        self._screen_hint = screen_tiles(width, height, TILE_TEXELS)
        n = uploads_for_screen(width, height, self._min_uploads)
        if n == self.max_uploads:
            return
        self.max_uploads = n
        if not self._fixed_requests:
            self.max_requests = 4 * n
            for policy in (self.policy, *self._cells):
                if policy is not None:
                    policy.max_requests = self.max_requests

    def feedback_coverage(self) -> tuple[float, float, float]:
        """Of the newest feedback's pixels, the fractions whose lookup shows the level it
        wants, one level coarser, and two or more coarser (read from the page table as it
        is now): the screen-weighted detail, as the whole-level `Coverage` counts it."""
        keys, counts = self.last_feedback
        if keys.size == 0 or self.policy is None:
            return 1.0, 0.0, 0.0
        deficit = self._deficit(keys)
        total = float(counts.sum())
        at = float(counts[deficit <= 0].sum()) / total
        one = float(counts[deficit == 1].sum()) / total
        return at, one, max(0.0, 1.0 - at - one)

    def _packed(self, keys: np.ndarray) -> np.ndarray:
        """Which keys name a packed small level (always resident, never asked for).
        Packed levels are a suffix of each chain, so this is one compare per key (no
        search among every texture's packed keys, which grow with the textures)."""
        vt, level, _, _ = tile_keys.unpack(keys)
        first = self._grids.first_packed
        ok = (vt >= 0) & (vt < first.size)
        return ok & (level >= first[np.where(ok, vt, 0)])

    # ------------------------------------------------------------------ per frame
    def begin_frame(self, frame: int, feedback: np.ndarray | None = None) -> None:
        """Plan the frame: the newest finished feedback readback (or `feedback`, an image
        of packed keys from elsewhere) becomes prioritised tile requests for the I/O."""
        t0 = time.perf_counter()
        if self.cache is None:
            self._rebuild()
        self.frame = int(frame)
        self.stats = VtFrameStats(frame=self.frame)
        if feedback is None:
            got = self.feedback.poll_feedback()
            reduced = None if got is None else reduce_readback(got)
        else:
            reduced = reduce_feedback(feedback) if feedback.size else None
        if reduced is not None:
            keys, counts = reduced
            if not _same(reduced, self.last_feedback):  # a still camera: the same requests
                req = expand_requests(keys, counts, self._grids.levels, self._grids)
                if self.packed.pinned:  # packed small levels: resident, never asked for
                    keep = ~self._packed(req.keys)
                    req = TileRequests(req.keys[keep], req.tiers[keep], req.pixels[keep])
                self._requests = req
                self._changes += 1
            self.last_feedback = (keys, counts)
            self.feedback_frame = self.feedback.latest_frame if feedback is None \
                else self.frame
            self.stats.feedback_frame = self.feedback_frame
        self._drain()  # reads finished since the last update are in hand, not re-asked
        if self._plan_holds():
            for pol in self._policies():
                pol.refresh(self.frame)
        else:
            self._plan(self._requests)
        self.stats.requests = len(self._asked)
        self._follow_need()
        self.stats.feedback_ms = (time.perf_counter() - t0) * 1e3

    def _policies(self) -> list[TilePolicy]:
        return [p for p in (self.policy, *self._cells) if p is not None]

    def _plan_holds(self) -> bool:
        """Whether the last plan is this frame's too: the same requests and no change since
        it, and either nothing missing (nothing to rank) or `hold_frames` + 1 frames since
        the change, after which every slot's tier is fixed (refreshed each frame, or aged out
        for good). A still camera then costs a refresh, not a plan."""
        inputs = (self._changes, len(self.textures))
        if inputs != self._plan_inputs:
            self._plan_inputs, self._plan_since = inputs, self.frame
            return False
        return all(p.missing == 0 for p in self._policies()) or \
            self.frame - self._plan_since > self.hold_frames + 1

    def _plan(self, req: TileRequests) -> None:
        """Each policy's plan of `req`, and the I/O asked for what is newly missing."""
        if self._failed_ids.size and req.keys.size:
            # A broken file is not read again: its missing tiles are not asked for (they
            # would take the room of others' in the plan), its resident ones stay wanted.
            keep = ~np.isin(tile_keys.vt_of(req.keys), self._failed_ids) | \
                np.isin(req.keys, self._resident_keys())
            req = TileRequests(req.keys[keep], req.tiers[keep], req.pixels[keep])
        # Whole-slot tiles and each size class of streamed cells have a policy of their own
        # (a cell and a slot are not the same room); their asks go to the one I/O queue.
        if req.keys.size:
            vt, level, _, _ = tile_keys.unpack(req.keys)
            cls = self._grids.cell_class(vt, level, self.fmt)
        else:
            cls = np.zeros(0, np.int64)
        ask: dict[int, float] = {}
        self._urgency = {}
        for k, pol in [(-1, self.policy), *enumerate(self._cells)]:
            if pol is None:
                continue
            m = cls == k
            keys = req.keys[m]
            missing, priority = pol.plan(self.frame, keys, req.tiers[m], req.pixels[m],
                                         self._deficit(keys))
            # Ask the I/O only for what is new since the last frame (each request takes
            # the workers' lock; re-asking a pending read every frame was most of this
            # method's time at 4K), and cancel only when something dropped out of the
            # wanted set.
            got = missing.tolist()
            urgency = dict(zip(got, priority.tolist(), strict=True))
            self._urgency.update(urgency)
            ask.update((key, p) for key, p in urgency.items() if key not in self._ready)
            shown = int((req.tiers[m] == 0).sum())
            if k >= 0:
                self._cell_of.update(dict.fromkeys(got, k))
                self._visible_cells[k], self._asked_cells[k] = shown, int(m.sum())
            else:
                self._visible_slots, self._asked_slots = shown, int(m.sum())
        self.io.request_many([(key, prio) for key, prio in ask.items()
                              if key not in self._asked])
        if any(k not in ask for k in self._asked):
            self.io.retain(ask)
        self._asked = set(ask)

    def _deficit(self, keys: np.ndarray) -> np.ndarray | None:
        """Levels of detail the screen lacks at each tile now: the level its page-table
        entry shows (its finest resident ancestor) minus its own (0: resident)."""
        if keys.size == 0:
            return None
        vt, level, x, y = tile_keys.unpack(keys)
        held = self.table.entries(vt, level, x, y, self._grids.grid) >> 24
        return held.astype(np.int64) - level

    def _upload_count(self) -> int:
        """Tiles this frame may upload: the budget over the measured cost of one."""
        if self.upload_budget_ms is None or not self._tile_upload_ms:
            return self.max_uploads
        return max(1, min(self.max_uploads,
                          int(self.upload_budget_ms / self._tile_upload_ms)))

    def update(self) -> VtFrameStats:
        """Admit arrived tiles (evicting worse ones), upload them into their slots and
        write the page-table rows that changed. At most `max_uploads` tiles a frame, fewer
        where `upload_budget_ms` is set and recent uploads cost more. A tile that finds no
        slot stays in hand (its bytes are paid for) until one frees up or nobody wants it."""
        t0 = time.perf_counter()
        if self.cache is None:
            self._rebuild()
        st = self.stats
        uploads: list[tuple[int, bytes]] = []
        self._drain()
        classes = {key: self._class_of(key) for key in self._ready}
        pols = [self.policy, *self._cells]  # by class + 1
        # Best tier first; within it, tiles that found no slot last frame after the others
        # (so they cannot hold the frame's uploads back from tiles that would find one),
        # then the plan's urgency (the screen's loss: pixels x levels lacking), then coarser.
        waited, urgency = self._deferred, self._urgency
        order = sorted(self._ready, key=lambda k: (pols[classes[k] + 1].tier_of(k),
                                                   k in waited, -urgency.get(k, 0.0),
                                                   -tile_keys.level_of(k)))
        self._deferred = set()
        arriving: list[list[int]] = [[] for _ in pols]
        for key in order[:self._upload_count()]:
            if pols[classes[key] + 1].is_resident(key):
                del self._ready[key]
            else:
                arriving[classes[key] + 1].append(key)
        for c, keys in enumerate(arriving):
            if not keys:
                continue
            for key, adm in zip(keys, pols[c].admit_many(keys), strict=True):
                if adm is None:
                    st.deferred += 1
                    self._deferred.add(key)
                    continue
                data = self._ready.pop(key)
                if adm.evicted:
                    self._record(adm.evicted, None)
                    self._cell_of.pop(adm.evicted, None)
                    st.evictions += 1
                if c == 0:
                    uploads.append((adm.slot + self.packed.slots, data))
                    self._record(key, adm.slot + self.packed.slots)
                else:
                    cell = self.packed.pinned_count[c - 1] + adm.slot
                    self._upload_cell(key, c - 1, cell, data)
                st.tiles_uploaded += 1
                st.bytes_uploaded += len(data)
        # Tiles in hand nobody wants any more go once there are more than a few frames' worth.
        if len(self._ready) > 4 * self.max_uploads:
            for key in [k for k in self._ready
                        if self._policy_for(k).tier_of(k) == Tier.RECENT]:
                del self._ready[key]
        st.in_hand = len(self._ready)
        t_up = time.perf_counter()
        self.cache.upload_tiles(uploads)
        t_table = time.perf_counter()
        if events.SINK is not None and uploads:
            events.SINK.span("upload", "tile upload", t_up, t_table, {
                "tiles": len(uploads), "bytes": sum(len(d) for _, d in uploads),
                "evictions": st.evictions})
        st.upload_ms = (t_table - t_up) * 1e3
        if uploads:
            cost = st.upload_ms / len(uploads)
            self._tile_upload_ms = cost if self._tile_upload_ms is None else \
                0.8 * self._tile_upload_ms + 0.2 * cost
        for vt in sorted(self._dirty_vts):
            self.table.set_residency(vt, self.textures[vt].resident)
        self._dirty_vts.clear()
        self._fit_table()
        rects = self.table.take_dirty()
        self.gpu_table.write(self.table.words, rects)
        st.table_words = sum(n * w for _, n, _, w in rects)
        now = time.perf_counter()
        st.table_ms = (now - t_table) * 1e3
        st.update_ms = (now - t0) * 1e3
        self.history.append(st)
        return st

    def _drain(self) -> None:
        """Every finished read goes into the tiles in hand (deduplicated): a read the frame
        cannot upload waits there instead of being asked for again."""
        sink = events.SINK
        for res in self.io.poll(1 << 30):
            key = int(res.level)
            self._changes += 1
            self._asked.discard(key)  # finished either way; a failed read is asked again
            if sink is not None and res.requested and 0 <= res.texture_id < len(self.textures):
                sink.span("read", "tile read", res.requested, res.finished, {
                    "file": str(self.textures[res.texture_id].path),
                    "tile": [key >> 16 & 0xF, key & 0xFF, key >> 8 & 0xFF],  # level, x, y
                    "bytes": len(res.data) if res.data is not None else 0,
                    "queue_ms": (res.started - res.requested) * 1e3, "ok": res.ok})
            if res.ok and not self._held(key):
                self._ready[key] = res.data
            elif not res.ok:
                self._read_failed(key, res.error)

    def _read_failed(self, key: int, error: Exception | None) -> None:
        """A tile read failed (the file vanished, shrank or cannot be read): the texture is
        reported once (a warning naming the file, counted in `io_errors`) and asked for no
        more tiles, so the fault costs one read, not one per frame."""
        vt = tile_keys.vt_of(int(key))
        if vt in self.failed or not 0 <= vt < len(self.textures):
            return
        self.mark_failed(vt, str(error))
        self.io_errors += 1
        log.warning("virtual texture %s stays at its resident tiles: %s",
                    self.textures[vt].path, error)
        self.device.faults.report(FaultKind.TILE_READ, self.textures[vt].path, error)

    def mark_failed(self, vt: int, reason: str) -> None:
        """Read no more tiles of texture `vt` (what a failed read does; also for a reference
        run that must see the same broken files as the run it is compared with)."""
        self.failed[int(vt)] = reason
        self._changes += 1
        self._failed_ids = np.array(sorted(self.failed), np.int64)

    def bind(self, program, cache_unit: int = CACHE_UNIT, table_unit: int = TABLE_UNIT,
             proxy_unit: int = PROXY_UNIT) -> None:
        """Point `program`'s u_vt_* uniforms at the cache, the table and the LOD proxy."""
        if self.cache is None:
            self._rebuild()
        bind_vt(program, self.cache, self.gpu_table, self.proxy, cache_unit, table_unit,
                proxy_unit, tuple(self.packed.bases), self.fmt.block_w)

    def all_tiles(self, vt: int, min_level: int = 0) -> np.ndarray:
        """Packed keys of every tile of `vt` from `min_level` to its coarsest level."""
        lay = self.textures[vt].layout
        keys = []
        for level in range(min_level, lay.levels):
            gx, gy = lay.grid(level)
            y, x = np.mgrid[0:gy, 0:gx]
            keys.append(tile_keys.pack(np.full(x.size, vt), np.full(x.size, level), x.ravel(),
                                     y.ravel()))
        return np.concatenate(keys)

    def preload(self, keys: np.ndarray, timeout: float = 30.0) -> bool:
        """Make the given tiles resident now (tests, benchmarks, a level start): they are
        asked for as visible until all are in, or `timeout` seconds passed, or the ones
        missing are all of textures that failed (they can never come). True if all are
        (False too when the cache cannot hold them)."""
        keys = np.unique(np.asarray(keys, tile_keys.DTYPE))
        saved = self._requests
        self._requests = TileRequests(keys, np.zeros(keys.size, np.int64),
                                      np.ones(keys.size, np.int64))
        end = time.perf_counter() + timeout
        try:
            while True:
                self.begin_frame(self.frame + 1, feedback=np.zeros(0, tile_keys.DTYPE))
                self.update()
                missing = [k for k in keys.tolist() if not self.is_resident(k)]
                if not missing:
                    return True
                if time.perf_counter() > end or \
                        all(int(tile_keys.vt_of(k)) in self.failed for k in missing):
                    return False
                time.sleep(0.001)
        finally:
            self._requests = saved

    # ------------------------------------------------------------------ feedback
    def feedback_reserve(self, size: tuple[int, int]) -> None:
        """Make the feedback target and its readback buffers at `size` now."""
        self.feedback.reserve(size)

    def feedback_bytes(self) -> int:
        return self.feedback.nbytes

    def feedback_begin(self, size: tuple[int, int]) -> bool:
        """Bind and clear the feedback target (False: all readbacks in flight, skip)."""
        return self.feedback.begin(size)

    def feedback_end(self, frame: int) -> None:
        self.feedback.end(frame)

    # ------------------------------------------------------------------ teardown
    def _release_gpu(self) -> None:
        if self.cache is not None:
            self.cache.release()
            self.cache = None
        if self.gpu_table is not None:
            self.gpu_table.release()
            self.gpu_table = None
        if self.proxy is not None:
            self.proxy.release()
            self.proxy = None

    def release(self) -> None:
        """Stop the I/O workers and release every GL object. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.io.close()
        self._release_gpu()
        self.feedback.release()
