"""A wall's thumbnail atlas made in the background, after its first frame.

Why: a wall whose thumbnails are cached but whose atlas is not (the run after a cold one)
would otherwise copy thousands of thumbnails into pages before it draws anything. Its first
frame draws those images as placeholders instead, fills them from their cached thumbnails
within a few frames, and this job writes the atlas for the next run meanwhile. A run that
ends first waits for it as it releases its scene (its frames and outputs are done by then),
so that the next run starts from the atlas.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path

from . import atlas as atlas_
from .encoder import process_pool

log = logging.getLogger(__name__)
progress = logging.getLogger("engine.progress")


class AtlasLater:
    """`atlas_.build(folder, thumbs, cell, page_edge)` on a thread of its own (over a pool
    of `workers` background processes when there are several), once `start` is called."""

    def __init__(self, folder: Path, thumbs: list[Path], cell: int, page_edge: int,
                 workers: int) -> None:
        self.folder, self.thumbs, self.cell, self.page_edge = folder, thumbs, cell, page_edge
        self.workers = workers
        self.made: atlas_.Atlas | None = None
        self._worker: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._worker is not None

    def start(self) -> None:
        self._worker = threading.Thread(target=self._run, name="view-atlas", daemon=True)
        self._worker.start()

    def _run(self) -> None:
        try:
            if self.workers <= 1:
                self.made = atlas_.build(self.folder, self.thumbs, self.cell, self.page_edge)
                return
            with process_pool(self.workers, background=True) as pool:
                self.made = atlas_.build(self.folder, self.thumbs, self.cell, self.page_edge,
                                         pool)
        except (OSError, RuntimeError) as exc:  # a disk error, a pool that broke or cannot start
            log.warning("thumbnail atlas not made (%s: %s): made by a later run",
                        type(exc).__name__, exc)

    def wait(self) -> None:
        """Finish the atlas (started now if it was not yet)."""
        if self._worker is None:
            self.start()
        assert self._worker is not None
        if self._worker.is_alive():
            progress.info("finishing the thumbnail atlas of %d images for the next run",
                          len(self.thumbs))
        self._worker.join()
