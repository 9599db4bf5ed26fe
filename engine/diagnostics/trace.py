"""A run's trace in Chrome's trace-event JSON, for Perfetto (ui.perfetto.dev: "Open trace
file") and chrome://tracing.

`RunSettings(trace="run.json")` (or `--trace FILE` on `demo`, `soak`, ...) records:

- counter tracks (ph "C"), sampled at the end of every frame and written when they change:
  `bytes by category` (one series per ledger category), `budget` (budget and effective
  budget), `pool`, `texture bytes` (wanted and resident), `render scale`, `tiles resident`
  (frame times are the frame slices' lengths);
- complete slices (ph "X") for every frame and its phases (split, feedback, streamer, scene
  pass, present, finish) on the render thread;
- async spans (ph "b"/"e", paired by cat and id) for every level read (file, level, bytes,
  queue time) and upload (file, level, bytes);
- instant events (ph "i") for evictions, budget changes, out-of-memory allocations and
  faults (failed reads and uploads);
- metadata (ph "M") naming the process and the render thread.

Timestamps are microseconds since the trace began. The last sample of every counter is the
last frame's record, so the trace ends where the run's report does. Events are written to a
temporary file as they pile up (a long soak does not hold them in memory) and the file is
renamed into place when the run ends.
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ..errors import OutputWriteError
from ..memory import events
from ..streaming.contract import ProviderStats

log = logging.getLogger(__name__)

#: Events held in memory before they are appended to the temporary file.
FLUSH_EVERY = 4096
#: Frames held (as references to their numbers) before their events are formatted.
FRAMES_PER_BATCH = 256
#: Read and upload spans held (as their numbers) before they are formatted.
SPANS_PER_BATCH = 1024
RENDER_TID = 1
IO_TID = 2


class Tracer:
    """Records one run's trace; installs itself as the process's event sink (engine.memory
    .events) until `close`. Thread-safe: I/O workers and the render thread both report."""

    def __init__(self, path: Path | str, *, process_name: str = "engine") -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.name}.tmp{os.getpid()}")
        self._file: IO[str] | None = self._tmp.open("w", encoding="utf-8")
        self._file.write('{"displayTimeUnit": "ms", "traceEvents": [\n')
        self._first = True
        self.error: OSError | None = None  # the write that failed, if one did
        self._lock = threading.Lock()
        self._events: list[str] = []  # serialised events not yet in the file
        self._spans: list[tuple[str, str, float, float, Mapping[str, Any]]] = []
        self._quoted: dict[tuple[str, str], str] = {}  # (cat, name) -> their JSON fields
        self._ids = itertools.count(1)
        self.pid = os.getpid()
        self._t0 = time.perf_counter()
        self._categories: dict[str, int] = {}
        self._counters: dict[str, str] = {}  # track -> its last written args
        self._held: list[tuple[Any, ...]] = []  # frames not formatted yet
        self._head = f'"pid":{self.pid},"tid":{RENDER_TID}'
        self._budget: int | None = None
        self.count = 0
        for tid, name in ((RENDER_TID, "render thread"), (IO_TID, "reads and uploads")):
            self._add({"ph": "M", "name": "thread_name", "pid": self.pid, "tid": tid,
                       "args": {"name": name}})
        self._add({"ph": "M", "name": "process_name", "pid": self.pid, "tid": RENDER_TID,
                   "args": {"name": process_name}})
        try:
            events.install(self)
        except RuntimeError:
            self._discard()
            raise

    # ------------------------------------------------------------------ clock and buffer
    def _us(self, t: float) -> float:
        return round((t - self._t0) * 1e6, 3)

    def _add(self, event: dict[str, Any]) -> None:
        self._extend([json.dumps(event, separators=(",", ":"))])

    def _extend(self, lines: list[str]) -> None:
        """Events already serialised (one JSON object each) go into the buffer."""
        with self._lock:
            self._events.extend(lines)
            self.count += len(lines)
            if len(self._events) >= FLUSH_EVERY:
                self._flush_locked()

    def _flush_locked(self) -> None:
        if self._file is None or not self._events:
            self._events.clear()
            return
        text = ",\n".join(self._events)
        self._events.clear()
        try:
            self._file.write(text if self._first else ",\n" + text)
        except OSError as exc:
            self._fail(exc)
        self._first = False

    def _fail(self, exc: OSError) -> None:
        """A write failed (a full disk): the temporary file goes at once and the run goes on
        without a trace; `close` raises OutputWriteError naming the file."""
        self.error = exc
        log.error("trace %s: %s; the run goes on without it", self.path, exc.strerror or exc)
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass  # the same full disk flushing what was buffered: the file goes anyway
            self._file = None
        self._tmp.unlink(missing_ok=True)

    # ------------------------------------------------------------------ events.EventSink
    def span(self, cat: str, name: str, start: float, end: float,
             args: Mapping[str, Any]) -> None:
        """Held as its numbers (one list append under the lock); serialised in batches by
        `_format_spans`, so an I/O worker or the render thread pays no JSON per event."""
        with self._lock:
            self._spans.append((cat, name, start, end, args))
            self.count += 2
            if len(self._spans) >= SPANS_PER_BATCH:
                self._format_spans_locked()

    def instant(self, cat: str, name: str, args: Mapping[str, Any]) -> None:
        self._add({"ph": "i", "s": "p", "cat": cat, "name": name, "pid": self.pid,
                   "tid": RENDER_TID, "ts": self._us(time.perf_counter()), "args": dict(args)})

    def _format_spans_locked(self) -> None:
        """The held spans as "b"/"e" pairs: the fixed fields written directly, the names'
        JSON looked up once, one `json.dumps` for each span's arguments."""
        t0, pid, quoted, out = self._t0, self.pid, self._quoted, self._events
        dumps = json.dumps
        for cat, name, start, end, args in self._spans:
            key = (cat, name)
            head = quoted.get(key)
            if head is None:
                head = quoted[key] = f'"cat":{dumps(cat)},"name":{dumps(name)}'
            sid = next(self._ids)
            b = round((start - t0) * 1e6, 3)
            e = round((max(end, start) - t0) * 1e6, 3)
            body = f'{head},"id":{sid},"pid":{pid},"tid":{IO_TID}'
            out.append(f'{{"ph":"b",{body},"ts":{b},'
                       f'"args":{dumps(args, separators=(",", ":"))}}}')
            out.append(f'{{"ph":"e",{body},"ts":{e}}}')
        self._spans.clear()
        if len(out) >= FLUSH_EVERY:
            self._flush_locked()

    # ------------------------------------------------------------------ per frame
    def frame(self, record: Mapping[str, Any], phases: Sequence[tuple[str, float]],
              stats: ProviderStats) -> None:
        """One frame: `phases` is [(name, perf_counter at its start), ..., ("end", t)].
        The frame keeps only references to its numbers here; its events are formatted in
        batches of `FRAMES_PER_BATCH` (warm code instead of a cold call every frame: the
        per-frame part is the cost that counts against every frame)."""
        self._held.append((phases, int(record["frame"]), int(record["budget_bytes"]),
                          int(record.get("effective_budget_bytes", record["budget_bytes"])),
                          int(record.get("pool_bytes", 0)), int(record["texture_wanted_bytes"]),
                          int(record["texture_resident_bytes"]), float(record["render_scale"]),
                          int(stats.cache_slots_used), record["by_category"]))
        if len(self._held) >= FRAMES_PER_BATCH:
            self._format_frames()

    def _format_frames(self) -> None:
        """The held frames as events: formatted directly (the names are fixed, the values
        numbers; times in whole microseconds), a counter written only when its value changed
        (a counter holds its value until the next sample)."""
        t0, head, cats, last = self._t0, self._head, self._categories, self._counters
        lines: list[str] = []
        for (phases, frame, budget, effective, pool, wanted, resident, scale, tiles,
             by_category) in self._held:
            us = [int((t - t0) * 1e6) for _, t in phases]
            lines.append(f'{{"ph":"X","cat":"frame","name":"frame",{head},"ts":{us[0]},'
                         f'"dur":{us[-1] - us[0]},"args":{{"frame":{frame}}}}}')
            lines += [f'{{"ph":"X","cat":"phase","name":"{phases[i][0]}",{head},"ts":{us[i]},'
                      f'"dur":{us[i + 1] - us[i]}}}' for i in range(len(phases) - 1)]
            if self._budget is not None and budget != self._budget:
                lines.append(json.dumps({
                    "ph": "i", "s": "p", "cat": "budget", "name": "budget change",
                    "pid": self.pid, "tid": RENDER_TID, "ts": us[0],
                    "args": {"from": self._budget, "to": budget, "frame": frame}},
                    separators=(",", ":")))
            self._budget = budget
            for cat in cats:
                cats[cat] = 0  # a category that emptied is drawn at zero, not held
            for k, v in by_category.items():
                cats[str(k)] = int(v)
            counters = (
                ("bytes by category", ",".join(f'"{c}":{v}' for c, v in cats.items())),
                ("budget", f'"budget":{budget},"effective":{effective}'),
                ("pool", f'"bytes":{pool}'),
                ("texture bytes", f'"wanted":{wanted},"resident":{resident}'),
                ("render scale", f'"scale":{scale!r}'),
                ("tiles resident", f'"tiles":{tiles}'),
            )
            for name, args in counters:
                if last.get(name) != args:
                    last[name] = args
                    lines.append(f'{{"ph":"C","name":"{name}",{head},"ts":{us[-1]},'
                                 f'"args":{{{args}}}}}')
        self._held.clear()
        self._extend(lines)

    # ------------------------------------------------------------------ end
    def close(self) -> Path:
        """Write what is left, rename the file into place, stop receiving events."""
        events.uninstall(self)
        self._format_frames()
        with self._lock:
            self._format_spans_locked()
            self._flush_locked()
            if self._file is not None:
                try:
                    self._file.write("\n]}\n")
                    self._file.close()
                    os.replace(self._tmp, self.path)
                except OSError as exc:
                    self._fail(exc)
                self._file = None
        if self.error is not None:
            raise OutputWriteError(self.path, self.error.strerror or str(self.error))
        return self.path

    def _discard(self) -> None:
        events.uninstall(self)
        if self._file is not None:
            self._file.close()
            self._file = None
        self._tmp.unlink(missing_ok=True)


# --------------------------------------------------------------------------- validation
class TraceError(ValueError):
    """A trace that breaks the trace-event format; names the event."""


_PHASES = {"X", "B", "E", "b", "e", "n", "i", "I", "C", "M"}


def validate_trace(doc: Any) -> dict[str, int]:
    """Check a trace document against the trace-event format: every event has a known ph,
    a name, pid/tid and a numeric ts (metadata aside); complete slices a dur >= 0; async
    begin/end events pair up by (cat, id) with the end not before the begin; counters have
    numeric args and per track (name, pid) times that never go back. Returns event counts
    by ph; TraceError names the first fault."""
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError('not an object with a "traceEvents" list')
    counts: dict[str, int] = {}
    open_spans: dict[tuple[str, Any], float] = {}
    last_counter: dict[tuple[str, Any], float] = {}
    for i, e in enumerate(doc["traceEvents"]):
        where = f"traceEvents[{i}]"
        if not isinstance(e, dict):
            raise TraceError(f"{where}: not an object")
        ph = e.get("ph")
        if ph not in _PHASES:
            raise TraceError(f"{where}: unknown ph {ph!r}")
        if not isinstance(e.get("name"), str) or "pid" not in e or "tid" not in e:
            raise TraceError(f"{where}: needs name, pid and tid")
        counts[ph] = counts.get(ph, 0) + 1
        if ph == "M":
            continue
        ts = e.get("ts")
        if isinstance(ts, bool) or not isinstance(ts, (int, float)):
            raise TraceError(f"{where}: ts {ts!r} is not a number")
        if ph == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
            raise TraceError(f"{where}: complete event without a dur >= 0")
        if ph in ("b", "e"):
            key = (e.get("cat"), e.get("id"))
            if e.get("id") is None or not isinstance(e.get("cat"), str):
                raise TraceError(f"{where}: async event needs cat and id")
            if ph == "b":
                if key in open_spans:
                    raise TraceError(f"{where}: async span {key} begun twice")
                open_spans[key] = ts
            else:
                if key not in open_spans:
                    raise TraceError(f"{where}: async end {key} without a begin")
                if ts < open_spans.pop(key):
                    raise TraceError(f"{where}: async span {key} ends before it begins")
        if ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool)
                    for v in args.values()):
                raise TraceError(f"{where}: counter args must be numbers")
            track = (e["name"], e["pid"])
            if ts < last_counter.get(track, float("-inf")):
                raise TraceError(f"{where}: counter {e['name']!r} goes back in time")
            last_counter[track] = ts
    if open_spans:
        raise TraceError(f"{len(open_spans)} async span(s) never ended: "
                         f"{sorted(open_spans)[:3]}")
    return counts


def final_counters(doc: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """The last value of every counter track (name -> its args)."""
    out: dict[str, tuple[float, dict[str, float]]] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "C" and e["ts"] >= out.get(e["name"], (float("-inf"),))[0]:
            out[e["name"]] = (e["ts"], e["args"])
    return {name: args for name, (_, args) in out.items()}
