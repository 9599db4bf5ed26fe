"""Progress of long work (bakes, gallery/wall generation, bench suites): tqdm on a terminal,
one log line per stage start and end everywhere else.

Why both: a person at a terminal wants a live bar; a CI log or a piped run wants no bar noise
(carriage returns, hundreds of redraws) but does want to see where the time went, so there
each stage logs a start line and an end line with counts and seconds through the logger
`engine.progress`.

Making the lines visible by default takes two small rules, both only on that one logger:
- its level is INFO unless someone set one (the CLI configures the root logger at WARNING,
  which would otherwise drop them); silence them with
  `logging.getLogger("engine.progress").setLevel(logging.WARNING)`;
- when logging is not configured at all (a script using the library, no `basicConfig`), a
  fallback handler writes them to stderr; it checks at every record and stays silent as soon
  as any handler exists up the chain, so configuring logging later never doubles the lines.
"""
from __future__ import annotations

import logging
import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING, Self, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm

log = logging.getLogger("engine.progress")


class _StderrWhenUnconfigured(logging.Handler):
    """Python's own last-resort handler shows WARNING and above only; this one shows the
    progress lines, and only while no other handler would."""

    def emit(self, record: logging.LogRecord) -> None:
        parent = log.parent
        if log.propagate and parent is not None and parent.hasHandlers():
            return  # the application's handlers show it
        try:
            sys.stderr.write(self.format(record) + "\n")  # looked up now: redirections work
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


if log.level == logging.NOTSET:
    log.setLevel(logging.INFO)
if not any(isinstance(h, _StderrWhenUnconfigured) for h in log.handlers):
    _fallback = _StderrWhenUnconfigured()
    _fallback.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    log.addHandler(_fallback)


class Progress:
    """`with Progress(total, "baking") as bar: ... bar.advance(1, "file.png")`.

    `enabled`: None (default) draws the bar when the stream is a terminal; True forces it,
    False never draws it. Without a bar the stage's start and end are logged instead (so
    `--no-progress` still leaves a two-line trace of the stage in a log), and with
    `log_interval` a line between them at most every that many seconds, with the rate and
    the time left, for one long stage (a huge file's rows) that would otherwise sit silent.
    `unit` names what is counted."""

    def __init__(self, total: int, label: str = "", *, stream: TextIO | None = None,
                 enabled: bool | None = None, width: int | None = None, unit: str = "item",
                 log_interval: float | None = None) -> None:
        self.total = max(0, int(total))
        self.unit = unit
        self.log_interval = log_interval
        self._last_line = time.perf_counter()
        self.done = 0
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = enabled if enabled is not None else bool(isatty and isatty())
        self._start = time.perf_counter()
        self._closed = False
        self._bar: tqdm | None = None
        self._redirect = None
        if self.enabled:
            # Imported here: tqdm pulls in asyncio (~15 ms), and most runs draw no bar.
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._bar = tqdm(total=self.total, desc=label or None, file=self.stream,
                             ncols=width, dynamic_ncols=width is None, mininterval=0.1,
                             leave=True, unit=unit)
            # Log lines printed while the bar is drawn go above it instead of through it.
            self._redirect = logging_redirect_tqdm()
            self._redirect.__enter__()
        else:
            log.info("%s: started, %d %s(s)", label or "work", self.total, unit)

    def advance(self, n: int = 1, note: str = "") -> None:
        """Count `n` more units done; `note` (e.g. the file just finished) shows after the bar."""
        step = max(0, min(self.total - self.done, int(n)))
        self.done += step
        if self._bar is not None:
            if note:
                self._bar.set_postfix_str(note[:60], refresh=False)
            self._bar.update(step)
        elif self.log_interval is not None and self.done < self.total:
            now = time.perf_counter()
            if now - self._last_line >= self.log_interval:
                self._last_line = now
                secs = now - self._start
                rate = self.done / secs if secs > 0 else 0.0
                left = (self.total - self.done) / rate if rate > 0 else float("inf")
                log.info("%s: %d/%d %s(s) in %.1f s, %.1f/s, about %.0f s left",
                         self.label or "work", self.done, self.total, self.unit, secs, rate,
                         left)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self._start

    def close(self, error: BaseException | None = None) -> None:
        """End the bar (or log the stage's end line); safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            if self._redirect is not None:
                self._redirect.__exit__(None, None, None)
                self._redirect = None
            self._bar.close()
            self._bar = None
            return
        secs = self.seconds
        name = self.label or "work"
        if error is not None:
            log.warning("%s: stopped at %d/%d after %.2f s (%s)", name, self.done, self.total,
                        secs, type(error).__name__)
        else:
            rate = f", {self.done / secs:.2f}/s" if secs > 0 and self.done else ""
            log.info("%s: %d/%d done in %.2f s%s", name, self.done, self.total, secs, rate)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(exc)
