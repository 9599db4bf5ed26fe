"""Tile reads: strided block-row reads straight from the file, on the I/O worker threads.

Why strided reads: a tile of a 4096^2 BC7 level is 34 block rows of 34 blocks (18 KiB with
its border) inside a 16 MiB level; reading the level to cut one tile would read 900x the
bytes. Without supercompression (KTX2 scheme 0, DDS) a level is stored row of blocks after
row of blocks, so by default a tile is one numpy gather from a read-only mapping of the file
(no system call per row), or, with `use_mmap=False`, `os.pread`: the whole span of its block
rows in one call where they are consecutive and the span is small, else one call per row run
(two or three where a wrapped border jumps). Neither wins everywhere (measured on the 2-core
machine, docs/virtual_texturing.md): a gather faults its pages in holding the GIL, so a dozen
reader threads read a cold file one page at a time (a replay of the H200 flight with cold
files: 365 tiles still missing 5 frames after a cut through the mapping, 1 through pread),
but pread gets no readahead, and with the default two readers the llvmpipe bench's cold
flight did worse through it (one stop never reached its detail; half the upload rate).

Supercompressed levels (zstd/zlib) cannot be read in part: the first tile of a level
inflates the whole level once into a RAM cache (`LevelCache`, LRU under its own byte budget)
and every tile of that level is then cut from RAM. Measured in docs/virtual_texturing.md.

The workers are the existing `LevelIO` pool (priority queue, cancellation, fault
isolation): a request's "level" is the tile's packed key, and the reader here turns it into
bytes; nothing in LevelIO needed to change.
"""
from __future__ import annotations

import hashlib
import logging
import mmap
import os
import queue
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from ...errors import TextureFormatError
from ...textures import TextureFile
from ...textures.cachedir import cache_root
from ...textures.durable import refused, warn_uncached
from ...textures.identity import source_identity
from ...textures.tiled import TiledFile, sidecar_path, tile_header, tile_records, write_tiled
from ..cache import LevelCache, level_key
from ..descriptors import raise_open_file_limit
from ..inline_io import InlineLevelIO
from ..io import LevelIO, ReadResult
from . import keys as tile_keys
from .tiles import (
    VirtualLayout,
    column_runs,
    cut_tile,
    slot_shape,
)

log = logging.getLogger(__name__)
SPAN_BYTES = 1 << 19  # largest row span read in one pread (every BC7 level up to 2048 wide)

#: Damaged tiled copies already named (once per process).
_said_damaged: set[str] = set()

class OpenSources:
    """A bound on the descriptors tile sources hold: the most recently read `limit` sources
    keep their file (and mapping, and tile-contiguous copy) open; the others give theirs up
    once no read uses them and open again on their next read. Why: a source holds up to
    three descriptors, and a wall of 10,000 virtual textures would otherwise need 30,000
    (the H200 machine allows 20,000). The limit follows the process's own (a third of it,
    less a reserve for everything else)."""

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._recent: OrderedDict[int, TileSource] = OrderedDict()

    @property
    def limit(self) -> int:
        if self._limit is None:
            soft = raise_open_file_limit() or 1024
            self._limit = max(4, (soft - min(256, soft // 2)) // 3)
        return self._limit

    def touch(self, src: TileSource) -> None:
        """`src` is being read: most recent now; the oldest beyond the limit go idle."""
        limit = self.limit
        with self._lock:
            self._recent[id(src)] = src
            self._recent.move_to_end(id(src))
            victims = [self._recent.popitem(last=False)[1]
                       for _ in range(len(self._recent) - limit)]
        for old in victims:  # outside the lock: a source's own lock is taken here
            old.idle()

    def forget(self, src: TileSource) -> None:
        with self._lock:
            self._recent.pop(id(src), None)


#: The process's one bound (tile sources of every virtual texture system share it).
OPEN_SOURCES = OpenSources()


class TileSource:
    """One virtual texture's file and layout; `read_tile` is safe from any thread."""

    def __init__(self, tf: TextureFile, layout: VirtualLayout,
                 level_cache: LevelCache | None = None, use_mmap: bool = True,
                 serve: Callable[[bytes], bytes] | None = None) -> None:
        if tf.layers != 1 or tf.faces != 1 or tf.depth != 1:
            raise TextureFormatError(tf.path, "virtual textures are 2D (no arrays, cube maps "
                                              "or 3D)")
        self.tf = tf
        self.layout = layout
        #: stored tile bytes -> the page cache's format (a driver without the file's own)
        self.serve = serve
        self.strided = tf.supercompression == "none"
        self._levels = level_cache
        self._fd: int | None = None
        self._map: mmap.mmap | None = None
        self._lock = threading.Lock()
        self.use_mmap = use_mmap
        self.reads = 0  # pread calls (row path) or gathers (mapped path)
        self._tiled: TiledFile | None = None  # the tile-contiguous copy, once there is one
        #: told (copy's path, problem) when a record of the copy is damaged (TiledCache)
        self.on_damaged: Callable[[Path, str], None] | None = None
        self._inflight = 0  # reads using the handle now (a reopen waits for them)
        self._stale = False  # reopen() asked: drop the handle once no read uses it

    @property
    def path(self) -> Path:
        return self.tf.path

    def _file(self) -> int:
        with self._lock:
            if self._fd is None:
                try:
                    fd = os.open(self.tf.path, os.O_RDONLY)
                except OSError as exc:
                    raise TextureFormatError(self.tf.path, f"cannot open: {exc}") from exc
                if not stat.S_ISREG(os.fstat(fd).st_mode):  # a folder opens, then fails
                    os.close(fd)  # in mmap or pread with untyped errors
                    raise TextureFormatError(self.tf.path, "not a regular file")
                self._fd = fd
            return self._fd

    def reopen(self) -> None:
        """Open the file again for the next read: the handle (and mapping) are dropped as
        soon as no read is using them. Why: an open handle keeps reading the file it opened
        even after its path was removed or replaced; a reopen makes the reads see what is at
        the path now (the soak's injected faults, or a file replaced on purpose)."""
        with self._lock:
            self._stale = True
            if self._inflight == 0:
                self._drop_locked()
        tiled = self._tiled
        if tiled is not None and not self._copy_matches(tiled):
            self._tiled = None  # a copy of what the path held before: reads go to the file
            tiled.close()

    def _copy_matches(self, tiled: TiledFile) -> bool:
        try:
            return tiled.matches(self.tf.path)
        except OSError:  # the file is gone: so is what the copy was made from
            return False

    def _drop_locked(self) -> None:
        self._stale = False
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a view is still alive somewhere: let GC unmap it
                log.debug("%s: mapping still referenced at close", self.tf.path)
            self._map = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def idle(self) -> None:
        """Give the descriptors up once no read uses them (`OpenSources`); the next read
        opens the file (or its copy) again."""
        with self._lock:
            if self._inflight == 0:
                self._drop_locked()
            else:
                self._stale = True
        tiled = self._tiled
        if tiled is not None:
            tiled.idle()

    def close(self) -> None:
        OPEN_SOURCES.forget(self)
        with self._lock:
            self._drop_locked()
        if self._tiled is not None:
            self._tiled.close()
            self._tiled = None

    @property
    def tiled(self) -> bool:
        """Whether reads go to the tile-contiguous copy (one pread a tile)."""
        return self._tiled is not None

    @property
    def tiled_path(self) -> Path | None:
        """The tile-contiguous copy read from, if any."""
        tiled = self._tiled
        return None if tiled is None else tiled.path

    def attach_tiled(self, tiled: TiledFile) -> None:
        """Read from now on from `tiled`, a tile-contiguous copy of this file (made by
        `TiledCache`); reads under way on the old path finish there. A copy that no longer
        matches the path (made from a handle opened before the file was replaced or
        removed, which `reopen` could not see yet) is closed instead."""
        if not self._copy_matches(tiled):
            tiled.close()
            return
        old, self._tiled = self._tiled, tiled
        if old is not None:
            old.close()

    def read_row_run(self, level: int, x: int, y: int, count: int) -> list[bytes] | None:
        """Slot bytes of tiles (level, x .. x + count - 1, y), neighbours in one tile row:
        one positioned read of their consecutive records in the tiled copy; None without
        a copy (the caller reads them one by one)."""
        tiled = self._tiled
        if tiled is None:
            return None
        OPEN_SOURCES.touch(self)
        try:
            run = tiled.read_run(tile_index(self.layout, level, x, y), count)
        except TextureFormatError as exc:
            self._tiled_failed(tiled, exc)
            return None
        if self.serve is None or holds_served(tiled, self.layout):
            return run
        return [self.serve(t) for t in run]

    def read_tile(self, level: int, x: int, y: int) -> bytes:
        """Slot bytes of tile (level, x, y): payload and border (see tiles.cut_tile), in the
        page cache's format (a tiled copy made here holds that format already)."""
        OPEN_SOURCES.touch(self)
        tiled = self._tiled
        if tiled is not None:
            try:
                data = tiled.read(tile_index(self.layout, level, x, y))
            except TextureFormatError as exc:
                self._tiled_failed(tiled, exc)
            else:
                if self.serve is None or holds_served(tiled, self.layout):
                    return data
                return self.serve(data)
        data = self._read_file(level, x, y)
        return data if self.serve is None else self.serve(data)

    def _tiled_failed(self, tiled: TiledFile, exc: TextureFormatError) -> None:
        """A read of the tiled copy failed: reads go to the file from now on. A copy still
        attached is damaged (`on_damaged` is told, to make it again); one detached meanwhile
        (replaced, closed) is not."""
        if self._tiled is not tiled:
            return
        self._tiled = None
        tiled.close()
        if self.on_damaged is not None:
            self.on_damaged(tiled.path, exc.problem)

    def _read_file(self, level: int, x: int, y: int) -> bytes:
        """The tile from the file as it is stored."""
        if not self.strided:
            return cut_tile(self.layout, level, x, y, self._whole_level(level))
        with self._lock:
            if self._stale and self._inflight == 0:
                self._drop_locked()
            self._inflight += 1
        try:
            if self.use_mmap:
                return self._gather_mapped(level, x, y)
            return self._read_rows(level, x, y)
        finally:
            with self._lock:
                self._inflight -= 1
                if self._stale and self._inflight == 0:
                    self._drop_locked()

    def _read_rows(self, level: int, x: int, y: int) -> bytes:
        """The tile's block rows by `os.pread`, which releases the GIL while the disk works
        (a gather from a mapping faults pages in holding it, so twelve reader threads read a
        cold file one page at a time). Where the rows are consecutive and their whole span
        is small (every level up to 2048 wide for BC7), one pread of the span and a numpy
        gather; otherwise one pread per row run (two or three where a border wraps)."""
        lay, f = self.layout, self.layout.fmt
        lv = self.tf.level(level)
        w, _ = lay.level_size(level)
        nbx = -(-w // f.block_w)
        cols, rows = lay.source_indices(level, x, y)
        slot = np.zeros(slot_shape(f), np.uint8)
        fd, bb = self._file(), f.block_bytes
        pitch = nbx * bb
        if rows.size and int(rows[-1]) - int(rows[0]) == rows.size - 1 \
                and rows.size * pitch <= SPAN_BYTES:
            want = rows.size * pitch
            data = os.pread(fd, want, lv.offset + int(rows[0]) * pitch)
            if len(data) != want:
                raise TextureFormatError(self.tf.path, f"level {level}: file truncated")
            blocks = np.frombuffer(data, np.uint8).reshape(rows.size, nbx, bb)
            slot[:rows.size, :cols.size] = blocks[:, cols]
            self.reads += 1
            return slot.tobytes()
        runs = column_runs(cols)
        for i, row in enumerate(rows.tolist()):
            base = lv.offset + row * nbx * bb
            for at, first, count in runs:
                want = count * bb
                data = os.pread(fd, want, base + first * bb)
                if len(data) != want:
                    raise TextureFormatError(self.tf.path, f"level {level}: file truncated")
                slot[i, at:at + count] = np.frombuffer(data, np.uint8).reshape(count, bb)
                self.reads += 1
        return slot.tobytes()

    def _gather_mapped(self, level: int, x: int, y: int) -> bytes:
        """The same blocks gathered from a read-only mapping of the file: one numpy gather
        instead of 34+ system calls (which cost most under gVisor, where the H200 runs).
        The file size is checked first: a file that shrank since it was opened is an error,
        not a SIGBUS."""
        lay, f = self.layout, self.layout.fmt
        lv = self.tf.level(level)
        w, h = lay.level_size(level)
        mapped = self._mapping()
        if os.fstat(self._file()).st_size < lv.offset + lv.nbytes:
            raise TextureFormatError(self.tf.path, f"level {level}: file truncated")
        nbx, nby = -(-w // f.block_w), -(-h // f.block_h)
        cols, rows = lay.source_indices(level, x, y)  # may raise: before any view exists
        slot = np.zeros(slot_shape(f), np.uint8)
        blocks = np.frombuffer(mapped, np.uint8, nbx * nby * f.block_bytes,
                               lv.offset).reshape(nby, nbx, f.block_bytes)
        slot[:rows.size, :cols.size] = blocks[np.ix_(rows, cols)]
        del blocks  # no view of the mapping outlives the call (close() needs none left)
        self.reads += 1
        return slot.tobytes()

    def _mapping(self) -> mmap.mmap:
        fd = self._file()
        with self._lock:
            if self._map is None:
                try:
                    self._map = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
                except (OSError, ValueError) as exc:  # an empty or unmappable file
                    raise TextureFormatError(self.tf.path, f"cannot map: {exc}") from exc
            return self._map

    def _whole_level(self, level: int) -> bytes:
        key = level_key(id(self), level)
        if self._levels is not None:
            data = self._levels.get(key)
            if data is not None:
                return data
        data = self.tf.read_level(level)
        if self._levels is not None:
            self._levels.put(key, data)
        return data


def holds_served(tiled: TiledFile, layout: VirtualLayout) -> bool:
    """Whether a tiled copy stores the page cache's format (made on this driver, which
    serves the file as another format) rather than the file's own."""
    return tiled.header.meta.get("format") == layout.fmt.name


def tile_index(layout: VirtualLayout, level: int, x: int, y: int) -> int:
    """Record of tile (level, x, y) in a tiled copy: the order of the page table's entries
    (level by level, row-major)."""
    gx, _ = layout.grid(level)
    return layout.level_starts()[level] + y * gx + x


def tiled_folder() -> Path:
    """The folder of tile-contiguous copies: in the engine's cache folder ($ENGINE_CACHE)."""
    return cache_root() / "vt_tiles"


def _writable(folder: Path) -> str | None:
    """None if files can be made in `folder` (made if missing), else why not."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".probe-{os.getpid()}-{threading.get_ident()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return str(exc)
    return None


class TiledCache:
    """Tile-contiguous copies of virtual textures, made once on first use by one
    background thread (never on the render thread) and attached to their source when
    complete; until then the source reads as before. A copy `engine bake` wrote beside the
    file (`sidecar_path`) is used first; others live in `folder`, named by the source's
    path, identity (size, times, inode: engine.textures.identity) and wrap (the borders
    depend on it), and every copy is checked against the source when opened, so an edited
    or replaced file is converted again. A record whose checksum differs when read sends
    its source's reads back to the file and the copy is made again.

    A folder that cannot be written (read-only, full, a file in the way) turns the making
    off with one log line: copies already there are still used, the rest read as they are."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.made = 0  # copies written by this cache
        self.failed = 0
        #: Why no copies are made (None: they are).
        self.disabled: str | None = _writable(self.folder)
        if self.disabled is not None:
            log.warning("tile-contiguous copies are not made (%s: %s); virtual textures "
                        "read their files as they are", self.folder, self.disabled)
        self._jobs: queue.SimpleQueue[TileSource | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._queued = 0  # copies asked for and not finished
        self._worker = threading.Thread(target=self._work, name="engine-vt-tiler",
                                        daemon=True)
        self._worker.start()

    def path_for(self, src: TileSource) -> Path:
        ident = f"{Path(src.path).resolve()}|{source_identity(os.stat(src.path))}|" \
                f"{int(src.layout.wrap)}|{src.layout.levels}"
        if src.serve is not None:  # a copy in the served format: another file
            ident += f"|{src.layout.fmt.name}"
        digest = hashlib.sha1(os.fsencode(ident)).hexdigest()[:16]  # any file name
        return self.folder / f"{Path(src.path).stem}-{digest}.vttiles"

    @staticmethod
    def _attach_if_fits(src: TileSource, path: Path) -> bool:
        if not path.exists():
            return False
        tiled = TiledFile(path)
        meta = tiled.header.meta
        if tiled.matches(src.path) and tiled.header.records == src.layout.entry_count \
                and meta.get("levels") == src.layout.levels \
                and meta.get("wrap") == int(src.layout.wrap) \
                and meta.get("format") in (src.tf.format, src.layout.fmt.name):
            src.attach_tiled(tiled)
            return True
        tiled.close()
        return False

    def add(self, src: TileSource) -> None:
        """Attach an existing copy now (opening it reads its header only), else queue one."""
        src.on_damaged = lambda path, problem: self._remake(src, path, problem)
        for path in (sidecar_path(src.path), self.path_for(src)):
            try:
                if self._attach_if_fits(src, path):
                    return
            except TextureFormatError as exc:  # damaged: a miss, never an error
                self._damaged(path, exc.problem)
            except OSError as exc:
                log.debug("%s: tiled copy %s not usable (%s)", src.path, path, exc)
        self._queue(src)

    def _queue(self, src: TileSource) -> None:
        if self.disabled is not None:
            return
        with self._lock:
            self._queued += 1
        self._jobs.put(src)

    def _remake(self, src: TileSource, path: Path, problem: str) -> None:
        """A record of `src`'s attached copy was damaged (its checksum differs): the
        source is read as it is meanwhile, and the copy made again in this folder."""
        self._damaged(path, problem)
        self._queue(src)

    def _damaged(self, path: Path, problem: str) -> None:
        """A tiled copy that does not parse: one in this folder (ours) is removed and made
        again; a sidecar beside its source (`engine bake`'s, the user's) is left as it is
        and read around. Either is named once."""
        if path.parent == self.folder:
            path.unlink(missing_ok=True)
        if str(path) not in _said_damaged:
            _said_damaged.add(str(path))
            log.warning("tiled copy %s is damaged (%s); %s", path, problem,
                        "it is made again" if path.parent == self.folder else
                        "a copy is made in the cache instead")

    def _work(self) -> None:
        while (src := self._jobs.get()) is not None:
            try:
                self._make(src)
            finally:
                with self._lock:
                    self._queued -= 1

    def _make(self, src: TileSource) -> None:
        if self._stop.is_set() or self.disabled is not None:
            return
        lay = src.layout
        try:
            header = tile_header(src.tf, lay.levels, lay.wrap)
            records = tile_records(src.tf, lay.levels, lay.wrap, self._stop.is_set)
            if src.serve is not None:  # transcoded once here, not on every read
                header = replace(header, meta={**header.meta, "format": lay.fmt.name})
                records = map(src.serve, records)
            path = write_tiled(self.path_for(src), header, records)
            src.attach_tiled(TiledFile(path))
            self.made += 1
        except OSError as exc:
            self.failed += 1
            # a full disk still takes the empty probe file: its error says it first
            if not refused(exc) and _writable(self.folder) is None:  # the source's fault
                log.warning("%s: tiled copy not made, reading it as it is: %s", src.path, exc)
                return
            self.disabled = str(exc)  # the folder stopped taking files (full, read-only)
            warn_uncached(self.folder, exc, "tile-contiguous copies (virtual textures read "
                                            "their files as they are)")
        except (ValueError, TextureFormatError) as exc:
            if self._stop.is_set():  # closed while cutting: the half copy was removed
                return
            self.failed += 1
            log.warning("%s: tiled copy not made, reading it as it is: %s", src.path, exc)

    def idle(self) -> bool:
        """No copy queued or being made (tests and benchmarks wait for this)."""
        with self._lock:
            return self._queued == 0

    def close(self) -> None:
        """Stop after the tile being cut (a half-written copy is removed) and join."""
        self._stop.set()
        self._jobs.put(None)
        self._worker.join()


#: Most tiles one read takes: a tile and wanted neighbours of its row in the tiled copy.
RUN_TILES = 8


class TileIO:
    """The I/O worker pool serving tile requests (keys as in `keys.pack`).

    Reads are batched by neighbourhood: a worker reading a tile of a tiled copy also reads
    the queued tiles beside it in its row (consecutive records, up to `run_tiles`) in the
    same positioned read, sorted by offset; their bytes wait in a stash until the workers
    pop those requests (no I/O then). A cut's tiles come in screen-sized rectangles, so
    most of a row's wanted tiles travel together: fewer system calls (dear under gVisor)
    and sequential disk access. A stashed tile whose request is cancelled is delivered
    anyway, like a read under way (its bytes are paid for)."""

    def __init__(self, *, workers: int = 2, level_cache_bytes: int = 64 << 20,
                 latency_ms: tuple[float, float] | None = None, use_mmap: bool = True,
                 tiled_dir: Path | bool = True) -> None:
        self.sources: list[TileSource] = []
        self.use_mmap = use_mmap
        #: Tile-contiguous copies (one pread a tile), made in the background into
        #: `tiled_dir` (True: the engine's cache folder, `tiled_folder()`; False: none).
        folder = tiled_folder() if tiled_dir is True else tiled_dir
        self.tiled = TiledCache(folder) if folder else None
        self.level_cache = LevelCache(level_cache_bytes)
        #: Most tiles one read takes (1: a read a tile, what `lab.vt_reads`
        #: compares with).
        self.run_tiles = RUN_TILES
        self._lock = threading.Condition()
        self._queued: set[int] = set()  # keys asked for whose read has not started
        self._stash: dict[int, bytes] = {}  # neighbours read with another tile
        self._claimed: set[int] = set()  # neighbours in a read under way
        self._orphans: list[ReadResult] = []  # stashed tiles whose request went
        # workers=0: reads done on the render thread when polled, in priority order
        # (deterministic runs: a frame's tiles then depend on the frame number only)
        self._io: LevelIO | InlineLevelIO = (
            InlineLevelIO(self._read) if workers == 0 else
            LevelIO(self._read, workers=workers, latency_ms=latency_ms))

    def add(self, tf: TextureFile, layout: VirtualLayout,
            serve: Callable[[bytes], bytes] | None = None) -> TileSource:
        src = TileSource(tf, layout, self.level_cache, self.use_mmap, serve)
        self.sources.append(src)
        if self.tiled is not None:
            self.tiled.add(src)
        return src

    def _read(self, vt: int, key: int) -> bytes:
        src = self.sources[vt]
        _, level, x, y = tile_keys.unpack_one(key)
        with self._lock:
            self._queued.discard(key)
            while key in self._claimed:  # a neighbour's read is bringing it
                self._lock.wait()
            data = self._stash.pop(key, None)
            if data is not None:
                return data
            if not src.tiled or self.run_tiles <= 1:
                first, count = x, 1
            else:
                first, count = self._run_locked(src, key, level, x, y)
                for i in range(first, first + count):
                    if i != x:
                        self._claimed.add(tile_keys.pack_one(vt, level, i, y))
        if count == 1:
            return src.read_tile(level, x, y)
        try:
            run = src.read_row_run(level, first, y, count)
        finally:
            with self._lock:
                for i in range(first, first + count):
                    self._claimed.discard(tile_keys.pack_one(vt, level, i, y))
                self._lock.notify_all()
        if run is None:  # the copy went (a reopen): this tile alone, the rest as asked
            return src.read_tile(level, x, y)
        with self._lock:
            for i, data in enumerate(run, first):
                if i == x:
                    continue
                k = tile_keys.pack_one(vt, level, i, y)
                if k in self._queued:
                    self._stash[k] = data
                else:  # cancelled while being read: delivered, like any read under way
                    self._orphans.append(ReadResult(vt, k, data))
        return run[x - first]

    def _run_locked(self, src: TileSource, key: int, level: int, x: int,
                    y: int) -> tuple[int, int]:
        """(first x, count) of the tiles read with (level, x, y): it and the queued tiles
        next to it in its row, not read or being read already, at most `run_tiles`."""
        gx, _ = src.layout.grid(level)
        vt = tile_keys.vt_of(key)

        def free(i: int) -> bool:
            k = tile_keys.pack_one(vt, level, i, y)
            return k in self._queued and k not in self._claimed and k not in self._stash

        lo = hi = x
        while hi - lo + 1 < self.run_tiles:
            if hi + 1 < gx and free(hi + 1):
                hi += 1
            elif lo > 0 and free(lo - 1):
                lo -= 1
            else:
                break
        return lo, hi - lo + 1

    def request(self, key: int, priority: float) -> None:
        """Ask for a tile by key (`keys.pack`)."""
        self.request_many([(key, priority)])

    def request_many(self, items: list[tuple[int, float]]) -> None:
        """Ask for tiles by (key, priority), all at once (`LevelIO.request_many`)."""
        if not items:
            return
        with self._lock:
            self._queued.update(int(k) for k, _ in items)
        self._io.request_many([(tile_keys.vt_of(int(k)), int(k), p) for k, p in items])

    def retain(self, keys) -> int:
        """Cancel the queued reads not in `keys`; reads under way finish and are delivered
        (the system keeps them in hand: dropping paid-for bytes of a tile the next frame may
        want again cost reads on every camera move), stashed neighbours too."""
        keep = {int(k) for k in keys}
        with self._lock:
            self._queued &= keep
            for k in [k for k in self._stash if k not in keep]:
                self._orphans.append(ReadResult(tile_keys.vt_of(k), k, self._stash.pop(k)))
        return self._io.retain(((tile_keys.vt_of(k), k) for k in keep), keep_reading=True)

    def poll(self, max_items: int = 64) -> list[ReadResult]:
        out = self._io.poll(max_items)
        if self._orphans:
            with self._lock:
                out += self._orphans
                self._orphans = []
        return out

    def stats(self):
        return self._io.stats()

    def close(self) -> None:
        self._io.close()
        if self.tiled is not None:
            self.tiled.close()
        for src in self.sources:
            src.close()
