"""Ten thousand textures without ten thousand open files or ten thousand Python objects.

Two parts, both format-light and GL-free:

- `HandleCache`: an LRU of open file descriptors, read with `os.pread` (no shared seek
  position, so worker threads share a descriptor safely). Opening a file per level read costs
  a syscall pair every time; keeping every file open costs one descriptor per texture, and a
  process gets 1,024 by default. The cache keeps at most `max_open`; a descriptor evicted
  while a worker still reads it is closed by that worker when it is done (reference counts),
  so eviction never pulls a file out from under a read.

- `HeadReader`: registration's reader. One read per file brings the header and the small
  always-resident levels together (KTX2 stores the smallest level first, right after the
  header), the header is parsed by the KTX2 reader's own code, and files with the same
  header share that parse, so the streamer keeps real `TextureFile`s at a fraction of
  `textures.open`'s cost per file.
"""
from __future__ import annotations

import logging
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from pathlib import Path

from .. import textures
from ..errors import TextureFormatError
from ..textures.ktx2 import MAX_PREFIX, parse_ktx2
from ..textures.ktx2_file import Ktx2File

log = logging.getLogger(__name__)

KTX2_IDENTIFIER = b"\xabKTX 20\xbb\r\n\x1a\n"
HEADER_BYTES = 80
LEVEL_ENTRY_BYTES = 24
MAX_LEVELS = 17
#: vkFormat, levelCount and supercompressionScheme of a KTX2 header
_HEAD_FIELDS = struct.Struct("<12xI24xII")


class HandleCache:
    """At most `max_open` descriptors open at once, least recently used closed first."""

    def __init__(self, max_open: int = 64) -> None:
        if max_open < 1:
            raise ValueError(f"need at least one open file, got {max_open}")
        self.max_open = max_open
        self._lock = threading.Lock()
        self._open: OrderedDict[str, list[int]] = OrderedDict()  # path -> [fd, users]
        self._doomed: dict[int, int] = {}  # fd evicted while in use -> users left
        self.opens = 0
        self.hits = 0

    def _acquire(self, path: str) -> int:
        with self._lock:
            entry = self._open.get(path)
            if entry is not None:
                self._open.move_to_end(path)
                entry[1] += 1
                self.hits += 1
                return entry[0]
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        with self._lock:
            self.opens += 1
            entry = self._open.get(path)
            if entry is not None:  # another thread opened it meanwhile: use theirs
                entry[1] += 1
                os.close(fd)
                return entry[0]
            self._open[path] = [fd, 1]
            while len(self._open) > self.max_open:
                _, (old, users) = self._open.popitem(last=False)
                if users:
                    self._doomed[old] = users
                else:
                    os.close(old)
            return fd

    def _release(self, path: str, fd: int) -> None:
        with self._lock:
            entry = self._open.get(path)
            if entry is not None and entry[0] == fd:
                entry[1] -= 1
                return
            left = self._doomed.get(fd, 0) - 1
            if left <= 0:
                self._doomed.pop(fd, None)
                os.close(fd)
            else:
                self._doomed[fd] = left

    def pread(self, path: str | Path, offset: int, length: int) -> bytes:
        """Exactly `length` bytes at `offset`; a short read (the file shrank) is an error."""
        key = os.fspath(path)
        try:
            fd = self._acquire(key)
        except OSError as exc:
            raise TextureFormatError(Path(key), f"cannot open: {exc}") from exc
        try:
            data = os.pread(fd, length, offset)
        except OSError as exc:
            raise TextureFormatError(Path(key), f"cannot read: {exc}") from exc
        finally:
            self._release(key, fd)
        if len(data) != length:
            raise TextureFormatError(Path(key), f"file truncated (wanted {length} bytes at "
                                                f"offset {offset}, got {len(data)})")
        return data

    def read_level(self, tf: textures.TextureFile, level: int) -> bytes:
        """`read_level` through this cache: the `LevelFiles` surface."""
        return read_level(tf, level, self)

    def drop(self, path: str | Path) -> None:
        """Close a file's descriptor (it changed on disk, or its cached pages are dropped)."""
        with self._lock:
            entry = self._open.pop(os.fspath(path), None)
            if entry is None:
                return
            if entry[1]:
                self._doomed[entry[0]] = entry[1]
            else:
                os.close(entry[0])

    @property
    def open_count(self) -> int:
        with self._lock:
            return len(self._open) + len(self._doomed)

    def close(self) -> None:
        with self._lock:
            for fd, users in self._open.values():
                if users:
                    self._doomed[fd] = users
                else:
                    os.close(fd)
            self._open.clear()


#: Bytes read from each file's start at registration: the header, the level index and, in
#: the same read, the small levels KTX2 stores first (a 256^2 BC1 file's tail of levels up to
#: 64^2 ends near 3 KB). A file whose tail ends further in (a 1024^2 BC7 file's near 6 KB)
#: gets a second read, and the reader reads that much from every later file of the batch.
READ_AHEAD = 4096
#: The most a head read grows to (files with big tails take a second read instead).
MAX_READ_AHEAD = 1 << 20

TailOf = Callable[[textures.TextureFile], int]
#: What `HeadReader.read_head` read: (file size, first bytes, whether it got all it asked
#: for), or the OSError that stopped it
Head = tuple[int, bytes, bool] | OSError
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class HeadReader:
    """Opens texture files for registration: one open, fstat, read and close per file for
    the header *and* the always-resident tail levels, instead of `textures.open` (which
    stats, opens and reads the file for its magic, then again for the header) followed by
    another open and read for the tail.

    Plain KTX2 files (no supercompression, a vkFormat) are parsed by the KTX2 reader's own
    `parse_ktx2` from the bytes read, so the checks and the typed errors are the reader's.
    A file's parse depends only on its header, level index and size, so files alike in
    those (a batch made by one tool: same format, size and metadata lengths) share one
    parse: the others get a copy of its `Ktx2File` with their own path. Anything else (DDS,
    supercompressed, Basis, a file too short for the bytes read) goes through
    `textures.open` and reads its tail through the file's own `read_levels_all`."""

    def __init__(self, read_ahead: int = READ_AHEAD) -> None:
        self.read_ahead = max(int(read_ahead), MAX_PREFIX)
        self._models: dict[tuple[bytes, int], _Model] = {}
        #: heads read by `open_header`, handed to that file's `open_tail` (read once)
        self._kept: dict[str, Head] = {}
        self.parses = 0  # headers parsed (the rest were copies of an identical one)
        self.extra_reads = 0  # tails that did not lie inside the first read

    def open_header(self, path: str | Path) -> textures.TextureFile:
        """The file's TextureFile from one read of its first bytes (shared parses as in
        `open_tail`), keeping those bytes for the file's `open_tail`: a caller that looks at
        headers before choosing what to register reads each file once. Raises the reader's
        TextureFormatError, naming the file."""
        head = self.read_head(path)
        if isinstance(head, OSError):
            raise TextureFormatError(Path(path), f"cannot read file: {head}") from head
        size, data, whole = head
        found = self._parse(path, data, size) if whole else None
        if found is None:
            return textures.open(path)
        self._kept[os.fspath(path)] = head
        return found[0]

    def read_head(self, path: str | Path) -> Head:
        """The file's first bytes and size: one open, fstat, read and close, no parsing.
        A failure is returned, not raised (`open_tail` reports it, naming the file)."""
        try:
            fd = os.open(path, os.O_RDONLY | _CLOEXEC)
        except OSError as exc:
            return exc
        try:
            size = os.lseek(fd, 0, os.SEEK_END)  # the size without a stat_result (pread
            want = min(size, self.read_ahead)  # ignores the file position)
            head = os.pread(fd, want, 0)
        except OSError as exc:
            return exc
        finally:
            os.close(fd)
        return size, head, len(head) == want

    def open_tail(self, path: str | Path, tail_of: TailOf
                  ) -> tuple[textures.TextureFile, int, dict[int, bytes]]:
        """(the file's TextureFile, tail = tail_of(tf), its levels tail.. by index).

        `tail_of` must depend on the header alone (it is asked once per distinct header).
        Raises the reader's TextureFormatError, naming the file, for a missing, truncated
        or bad one."""
        head = self._kept.pop(os.fspath(path), None) or self.read_head(path)
        if isinstance(head, OSError):
            raise TextureFormatError(Path(path), f"cannot read file: {head}") from head
        size, data, whole = head
        # a file that shrank under us takes the reader's own path (and its error)
        found = self._parse(path, data, size) if whole else None
        if found is None or found[1] is None:
            tf = found[0] if found is not None else textures.open(path)
            tail = tail_of(tf)
            return tf, tail, tf.read_levels_all(range(tail, len(tf.levels)))
        tf, model = found
        plan = model.plan
        if plan is None:
            plan = model.plan = _TailPlan.of(tf, tail_of(tf))
        if plan.slices is None:  # not one run: the file's own per-level reads
            return tf, plan.tail, tf.read_levels_all(range(plan.tail, len(tf.levels)))
        if plan.end <= len(data):
            span, base = data, 0
        else:
            span, base = self._read_span(tf, plan), plan.start
        return tf, plan.tail, {i: span[a - base:b - base] for i, a, b in plan.slices}

    def _parse(self, path: str | Path, head: bytes, size: int
               ) -> tuple[Ktx2File, _Model | None] | None:
        """A plain KTX2 file's header (and the shared entry of files with the same one), or
        None when the reader should open it."""
        if len(head) < HEADER_BYTES or head[:12] != KTX2_IDENTIFIER:
            return None
        vk, count, scheme = _HEAD_FIELDS.unpack_from(head, 0)
        end = HEADER_BYTES + max(1, count) * LEVEL_ENTRY_BYTES
        if vk == 0 or scheme != 0 or count > MAX_LEVELS or len(head) < end:
            return None  # Basis, supercompressed or odd: the reader decides
        key = (head[:end], size)
        p = path if isinstance(path, Path) else Path(path)
        model = self._models.get(key)
        if model is not None:
            return _copy_ktx2(model.tf, p), model
        tf = parse_ktx2(p, head, size)  # raises the reader's error for a bad file
        self.parses += 1
        if type(tf) is not Ktx2File or tf.supercompression != "none":
            return tf, None
        model = self._models[key] = _Model(_copy_ktx2(tf, tf.path))  # callers may change tf
        return tf, model

    def _read_span(self, tf: Ktx2File, plan: _TailPlan) -> bytes:
        """The tail's span when it lies past the first read; later files are read further."""
        self.extra_reads += 1
        if plan.end <= MAX_READ_AHEAD:
            self.read_ahead = max(self.read_ahead, plan.end)
        length = plan.end - plan.start
        try:
            fd = os.open(tf.path, os.O_RDONLY | _CLOEXEC)
            try:
                span = os.pread(fd, length, plan.start)
            finally:
                os.close(fd)
        except OSError as exc:
            raise TextureFormatError(tf.path, f"cannot read levels {plan.tail}..: {exc}") \
                from exc
        if len(span) != length:
            raise TextureFormatError(tf.path, f"levels {plan.tail}..{len(tf.levels) - 1}: file "
                                              f"truncated (wanted {length} bytes at offset "
                                              f"{plan.start}, got {len(span)})")
        return span


@dataclass(frozen=True)
class _TailPlan:
    """Where a header's tail levels lie: the span [start, end) and each level's slice of
    it, or slices None when they are not one run (KTX2 stores the smallest level first, so
    a tail normally is one)."""

    tail: int
    start: int
    end: int
    slices: tuple[tuple[int, int, int], ...] | None

    @classmethod
    def of(cls, tf: Ktx2File, tail: int) -> _TailPlan:
        lvs = tf.levels[tail:]
        if not lvs:
            return cls(tail, 0, 0, ())
        start = min(lv.offset for lv in lvs)
        end = max(lv.offset + lv.nbytes for lv in lvs)
        if end - start > sum(lv.nbytes for lv in lvs) + 16 * len(lvs):  # the reader's test
            return cls(tail, start, end, None)
        return cls(tail, start, end,
                   tuple((lv.index, lv.offset, lv.offset + lv.nbytes) for lv in lvs))


@dataclass(eq=False)
class _Model:
    """One distinct header of a batch: a private copy of its parse, and its tail plan once
    the caller's tail_of has been asked."""

    tf: Ktx2File
    plan: _TailPlan | None = None


def _copy_ktx2(model: Ktx2File, path: Path) -> Ktx2File:
    """The same header under another path (a plain, non-frozen dataclass: copying its
    fields is what `dataclasses.replace` does, without re-running __init__)."""
    tf = object.__new__(Ktx2File)
    tf.__dict__.update(model.__dict__)
    tf.path = path
    tf.extra = dict(model.extra)
    return tf


class LevelFiles(Protocol):
    """Where the whole-level streamer's workers read level bytes from: the open-file cache
    (`HandleCache`) by default; a caller that must see or shape those reads (the soak, a
    test) hands in its own, wrapping it."""

    def read_level(self, tf: textures.TextureFile, level: int) -> bytes:
        """The stored bytes of `level` of `tf` (worker threads call this)."""
        ...

    def drop(self, path: str | Path) -> None:
        """Forget an open descriptor of `path` (the file was replaced or damaged)."""
        ...

    def close(self) -> None: ...


def read_level(tf: textures.TextureFile, level: int, handles: HandleCache) -> bytes:
    """`tf.read_level_all(level)` through the handle cache where that is a plain byte span
    (KTX2 without supercompression); any other case reads the usual way."""
    if tf.container == "ktx2" and tf.supercompression == "none":
        lv = tf.level(level)
        return handles.pread(tf.path, lv.offset, lv.stored_nbytes)
    return tf.read_level_all(level)
