"""The streamed textures by id: registration, their always-resident tails, and the
static tables the planner and the estimator read.

Kept apart from the per-frame work so that what a texture is (its file, its backend, its
tail) is decided in one place, once, and the frame loop only reads it. Registration makes
the tail textures through the backends (the GL side); the tables are plain numpy.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ... import textures
from ...errors import GLError, GLOutOfMemoryError
from ...textures.transcode import ServedFile, serve_file
from ..handles import HeadReader, LevelFiles
from ..served_copies import SERVED_COPIES, ServedCopies
from .backends import ReallocBackend, SparseBackend, Streamed, Uploader
from .estimator import TextureArrays
from .state import TextureTable, tail_base_level

log = logging.getLogger(__name__)

Backend = ReallocBackend | SparseBackend


def served(tf: textures.TextureFile, tail: dict[int, bytes], sampled,
           copies: ServedCopies = SERVED_COPIES
           ) -> tuple[textures.TextureFile, dict[int, bytes]]:
    """The file as the driver will hold it and its tail levels in that format: itself; else
    its copy in the served format from the cache (read as it is), or, until that copy is
    made, a `ServedFile` whose reads transcode on the workers."""
    out = serve_file(tf, sampled)
    if not isinstance(out, ServedFile):
        return tf, tail
    copy = copies.find(tf, out.pixel_format)
    if copy is not None:
        return copy, copy.read_levels_all(sorted(tail))
    return out, {i: out.transcode_level(i, data) for i, data in tail.items()}


@dataclass(eq=False)
class Registry:
    """Registered textures in id order (`items`; `ids` by key), each with the backend that
    streams it, and where their level bytes are read (`files`).

    A sparse streamer still reallocates the textures sparse pages do not suit (small ones,
    arrays, cubes): `backend_for` says which backend owns each texture."""

    backend: Backend
    realloc: ReallocBackend
    files: LevelFiles
    max_tail_size: int
    items: list[Streamed] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)
    #: per texture: a read or upload failed, it stays at what it has
    failed: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    #: the textures whose failure lasts (a read: the file is bad); an upload's passes
    lasting: set[int] = field(default_factory=set)
    #: per texture, made once at its first `tables()`: (storage bytes per finest level,
    #: tail, width, height), so a registration costs the new textures, not all of them
    _rows: list[tuple[list[int], int, int, int]] = field(default_factory=list)

    def backend_for(self, item: Streamed) -> Backend:
        if isinstance(self.backend, SparseBackend) and not self.backend.supports(item.tf):
            return self.realloc
        return self.backend

    def tail(self, item: Streamed) -> int:
        """First always-resident level: small levels, and for sparse textures also the
        driver's mip tail, which is committed and decommitted only as a whole."""
        tf = item.tf
        tail = tail_base_level(tf.width, tf.height, len(tf.levels),
                               max_tail_size=self.max_tail_size)
        return self.backend_for(item).tail_base(tf, tail)

    def register_many(self, entries: Sequence[tuple[str, str | Path]],
                      uploader: Uploader, reader: HeadReader | None = None
                      ) -> tuple[list[int], bool]:
        """Register (key, path) pairs at once: their ids in order, and whether any texture
        is new. A key registered before (or earlier in the batch) keeps its id and its path
        is not read. All or nothing: a failure releases every texture the batch made.
        `reader`: the caller's, when it has read the headers already."""
        ids: list[int] = []
        new: list[tuple[str, str | Path]] = []
        pending: dict[str, int] = {}
        first = len(self.items)
        for key, path in entries:
            tid = self.ids.get(key)
            if tid is None:
                tid = pending.get(key)
                if tid is None:
                    tid = pending[key] = first + len(new)
                    new.append((key, path))
            ids.append(tid)
        if not new:
            return ids, False
        made: list[Streamed] = []
        reader = reader or HeadReader()
        try:
            for key, path in new:
                made.append(self._make_tail(key, path, reader, uploader))
        except BaseException:
            for item in made:
                self.backend_for(item).release(item)
            raise
        self.items.extend(made)
        self.ids.update(pending)
        log.debug("registered %d textures (%d header parses, %d second reads)", len(made),
                  reader.parses, reader.extra_reads)
        return ids, True

    def _make_tail(self, key: str, path: str | Path, reader: HeadReader,
                   uploader: Uploader) -> Streamed:
        """One file's Streamed with its tail texture made and filled (render thread)."""
        try:  # tail_of may allocate too (a sparse backend's page-geometry probe)
            tf, tail, tail_bytes = reader.open_tail(path, self._tail_of)
            tf, tail_bytes = served(tf, tail_bytes, self.realloc.device.caps.can_sample)
            item = Streamed(key, tf)
            self.backend_for(item).create(item, tail, tail_bytes.__getitem__, uploader)
        except GLOutOfMemoryError as exc:
            raise GLOutOfMemoryError(f"{exc.what} for {path}", exc.nbytes) from exc
        except GLError as exc:
            raise GLError(f"{exc} (registering {path})", exc.codes) from exc
        return item

    def _tail_of(self, tf: textures.TextureFile) -> int:
        return self.tail(Streamed("", tf))

    def read(self, tid: int, level: int) -> bytes:
        """Worker-thread reader: only file I/O and decompression, never GL, through `files`
        (by default plain KTX2 levels through the open-file LRU: a bounded number of
        descriptors, no open/close per read; anything else the usual way)."""
        return self.files.read_level(self.items[tid].tf, level)

    def mark_failed(self, t: int, passing: bool = False) -> None:
        """Hold texture t at what it has; `passing`: until `clear_failed` (a GL upload
        failure, retried later: retry.py), else for good."""
        self.items[t].failed = True
        self.failed[t] = True
        if not passing:
            self.lasting.add(t)

    def clear_failed(self, t: int) -> bool:
        """Let texture t stream again after a passing failure; False where it lasts."""
        if t in self.lasting:
            return False
        self.items[t].failed = False
        self.failed[t] = False
        return True

    def tables(self) -> tuple[TextureTable, TextureArrays]:
        """The planner's table (exact storage per finest level, tails) and the estimator's
        texture arrays, of every registered texture; refreshes the failed flags too."""
        for it in self.items[len(self._rows):]:
            be = self.backend_for(it)
            self._rows.append(([be.storage_bytes(it.tf, b) for b in range(len(it.tf.levels))],
                               self.tail(it), it.tf.width, it.tf.height))
        count = len(self.items)
        max_levels = max(len(r[0]) for r in self._rows)
        storage = np.zeros((count, max_levels + 1), np.int64)
        for t, (row, _, _, _) in enumerate(self._rows):
            storage[t, :len(row)] = row
        levels = np.array([len(r[0]) for r in self._rows], np.int32)
        tails = np.array([r[1] for r in self._rows], np.int32)
        self.failed = np.array([it.failed for it in self.items], bool)
        arrays = TextureArrays(width=np.array([r[2] for r in self._rows]),
                               height=np.array([r[3] for r in self._rows]),
                               levels=levels, bias=np.zeros(count))
        return TextureTable(levels=levels, tail_base=tails, storage=storage), arrays

    def release(self) -> None:
        """Release every texture's GPU storage and forget them all."""
        for item in self.items:
            if item.tex is not None:
                self.backend_for(item).release(item)
        self.items.clear()
        self.ids.clear()
        self._rows.clear()
