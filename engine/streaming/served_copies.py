"""Copies of texture files in the format this driver is served them as, kept in the cache.

Where the driver cannot sample a file's format (BC7 on macOS), every level read transcodes
on the I/O threads (engine/textures/transcode.py): a few milliseconds a level, paid again on
every run and on every cut. A copy in the served format, written once in the background
into `$ENGINE_CACHE/served/`, is then read as it is, at a plain read's speed, like the
virtual textures' tiled copies. A copy is found by the source's path and identity (size,
times, inode: engine.textures.identity) and the served format; one that does not open, does
not match the source's shape or differs from its checksums (a CRC32 per level, checked when
it is found) is ignored and made again. Only single 2D images are copied (arrays and cube
maps keep transcoding). A folder that stops taking files (full, read-only) stops the making
with one warning; the levels keep being transcoded.
"""
from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
from pathlib import Path

from ..errors import TextureFormatError
from ..formats import PixelFormat
from ..textures import TextureFile, checksum, open_texture
from ..textures.cachedir import cache_root
from ..textures.durable import refused, warn_uncached
from ..textures.identity import source_identity
from ..textures.ktx2_write import write_ktx2
from ..textures.transcode import ServedFile

log = logging.getLogger(__name__)


class ServedCopies:
    """Finds the served-format copy of a file, and makes missing ones on a thread of its
    own (one at a time, lowest priority: the frame's reads come first)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self.made = 0
        self._jobs: queue.SimpleQueue[tuple[TextureFile, PixelFormat] | None] = \
            queue.SimpleQueue()
        self._asked: set[Path] = set()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self.disabled: str | None = None

    def _root(self) -> Path:
        return self.folder if self.folder is not None else cache_root() / "served"

    def path_for(self, tf: TextureFile, fmt: PixelFormat) -> Path:
        ident = f"{Path(tf.path).resolve()}|{source_identity(os.stat(tf.path))}|{fmt.name}"
        digest = hashlib.sha1(os.fsencode(ident)).hexdigest()[:16]
        return self._root() / f"{Path(tf.path).stem}-{digest}.ktx2"

    @staticmethod
    def copyable(tf: TextureFile) -> bool:
        return tf.layers == 1 and tf.faces == 1 and tf.depth == 1

    def find(self, tf: TextureFile, fmt: PixelFormat) -> TextureFile | None:
        """The copy of `tf` in `fmt`, when one was made and still matches; else None (and a
        copy is asked for)."""
        if not self.copyable(tf):
            return None
        try:
            path = self.path_for(tf, fmt)
        except OSError:
            return None
        if path.is_file():
            try:
                copy = open_texture(path)
                if copy.pixel_format is fmt and (copy.width, copy.height) == (tf.width,
                                                                            tf.height) \
                        and len(copy.levels) == len(tf.levels):
                    checksum.verify(copy)
                    return copy
            except (TextureFormatError, OSError) as exc:
                log.warning("%s: its copy in %s is damaged (%s); made again", tf.path,
                            fmt.name, exc)
            path.unlink(missing_ok=True)  # damaged or of another shape: a miss, made again
            with self._lock:
                self._asked.discard(path)
        self._ask(tf, fmt, path)
        return None

    def _ask(self, tf: TextureFile, fmt: PixelFormat, path: Path) -> None:
        with self._lock:
            if self.disabled is not None or path in self._asked:
                return
            self._asked.add(path)
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="engine-served-copies",
                                                daemon=True)
                self._worker.start()
        self._jobs.put((tf, fmt))

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            tf, fmt = job
            if self.disabled is not None:
                continue
            try:
                self._make(tf, fmt)
            except (TextureFormatError, OSError, ValueError) as exc:
                if refused(exc) or isinstance(exc, OSError) and \
                        not os.access(self._root(), os.W_OK):
                    if self.disabled is None:
                        warn_uncached(self._root(), exc, "served-format copies (their "
                                      "levels keep being transcoded)")
                    self.disabled = str(exc)
                    continue
                log.warning("%s: no copy in %s made (%s); its levels keep being transcoded",
                            tf.path, fmt.name, exc)

    def _make(self, tf: TextureFile, fmt: PixelFormat) -> None:
        path = self.path_for(tf, fmt)
        path.parent.mkdir(parents=True, exist_ok=True)
        served = ServedFile.of(tf, fmt)
        levels = [served.read_level_all(i) for i in range(len(tf.levels))]
        write_ktx2(path, fmt.name, tf.width, tf.height, levels, checksums=True)
        self.made += 1
        log.debug("%s: copy in %s written to %s", tf.path, fmt.name, path)

    def idle(self) -> bool:
        """Whether every asked copy is made (tests wait on it)."""
        return self._jobs.empty() and all(p.is_file() for p in self._asked) \
            if self.disabled is None else True


#: The process's copies (one thread, whoever registers files).
SERVED_COPIES = ServedCopies()
