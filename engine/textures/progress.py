"""A tiny progress bar on stderr, so long bakes show they are alive without a tqdm dependency.

It draws only when the stream is a terminal (or when forced), so logs, CI output and piped
runs stay clean, and it redraws at most ten times a second.
"""
from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Self, TextIO


class Progress:
    """`with Progress(total, "baking") as bar: ... bar.advance()`."""

    def __init__(self, total: int, label: str = "", *, stream: TextIO | None = None,
                 enabled: bool | None = None, width: int = 30) -> None:
        self.total = max(0, int(total))
        self.done = 0
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = enabled if enabled is not None else bool(isatty and isatty())
        self.width = width
        self._start = time.perf_counter()
        self._last_draw = 0.0

    def advance(self, n: int = 1, note: str = "") -> None:
        """Count `n` more units done; `note` (e.g. the file just finished) is shown after the bar."""
        self.done = min(self.total, self.done + n)
        now = time.perf_counter()
        if self.enabled and (now - self._last_draw >= 0.1 or self.done >= self.total):
            self._last_draw = now
            self._draw(note)

    def _draw(self, note: str) -> None:
        frac = self.done / self.total if self.total else 1.0
        filled = round(frac * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.perf_counter() - self._start
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s {note}"[:200] + "\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line so whatever prints next starts on a fresh one."""
        if self.enabled:
            self._draw("")
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
