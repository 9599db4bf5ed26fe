"""A run's trace in Chrome's trace-event JSON, for Perfetto (ui.perfetto.dev: "Open trace
file") and chrome://tracing.

`RunSettings(trace="run.json")` (or `--trace FILE` on `demo`, `soak`, ...) records:

- counter tracks (ph "C"), one sample per frame: `bytes by category` (one series per ledger
  category), `budget` (budget and effective budget), `pool`, `texture bytes` (wanted and
  resident), `render scale`, `tiles resident`, `frame ms` (CPU and GPU);
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
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ..memory import events
from ..streaming.contract import ProviderStats

#: Events held in memory before they are appended to the temporary file.
FLUSH_EVERY = 4096
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
        self._lock = threading.Lock()
        self._events: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.pid = os.getpid()
        self._t0 = time.perf_counter()
        self._categories: dict[str, int] = {}
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
        with self._lock:
            self._events.append(event)
            self.count += 1
            if len(self._events) >= FLUSH_EVERY:
                self._flush_locked()

    def _flush_locked(self) -> None:
        if self._file is None or not self._events:
            return
        text = ",\n".join(json.dumps(e, separators=(",", ":")) for e in self._events)
        self._file.write(text if self._first else ",\n" + text)
        self._first = False
        self._events.clear()

    # ------------------------------------------------------------------ events.EventSink
    def span(self, cat: str, name: str, start: float, end: float,
             args: Mapping[str, Any]) -> None:
        sid = next(self._ids)
        base = {"cat": cat, "name": name, "id": sid, "pid": self.pid, "tid": IO_TID}
        self._add({**base, "ph": "b", "ts": self._us(start), "args": dict(args)})
        self._add({**base, "ph": "e", "ts": self._us(max(end, start))})

    def instant(self, cat: str, name: str, args: Mapping[str, Any]) -> None:
        self._add({"ph": "i", "s": "p", "cat": cat, "name": name, "pid": self.pid,
                   "tid": RENDER_TID, "ts": self._us(time.perf_counter()), "args": dict(args)})

    # ------------------------------------------------------------------ per frame
    def frame(self, record: Mapping[str, Any], phases: Sequence[tuple[str, float]],
              stats: ProviderStats) -> None:
        """One frame: `phases` is [(name, perf_counter at its start), ..., ("end", t)]."""
        start, end = phases[0][1], phases[-1][1]
        frame = int(record["frame"])
        self._add({"ph": "X", "cat": "frame", "name": "frame", "pid": self.pid,
                   "tid": RENDER_TID, "ts": self._us(start), "dur": self._us(end) - self._us(start),
                   "args": {"frame": frame}})
        for (name, t0), (_, t1) in zip(phases, phases[1:]):
            self._add({"ph": "X", "cat": "phase", "name": name, "pid": self.pid,
                       "tid": RENDER_TID, "ts": self._us(t0), "dur": self._us(t1) - self._us(t0)})
        budget = int(record["budget_bytes"])
        if self._budget is not None and budget != self._budget:
            self.instant("budget", "budget change", {"from": self._budget, "to": budget,
                                                      "frame": frame})
        self._budget = budget
        for cat in self._categories:
            self._categories[cat] = 0  # a category that emptied is drawn at zero, not held
        self._categories.update({str(k): int(v) for k, v in record["by_category"].items()})
        ts = self._us(end)
        effective = int(record.get("effective_budget_bytes", budget))
        counters: dict[str, dict[str, float]] = {
            "bytes by category": dict(self._categories),
            "budget": {"budget": budget, "effective": effective},
            "pool": {"bytes": int(record.get("pool_bytes", 0))},
            "texture bytes": {"wanted": int(record["texture_wanted_bytes"]),
                              "resident": int(record["texture_resident_bytes"])},
            "render scale": {"scale": float(record["render_scale"])},
            "tiles resident": {"tiles": stats.cache_slots_used},
            "frame ms": {"cpu": float(record.get("cpu_ms", record["ms"])),
                         "gpu": float(record.get("gpu_ms") or 0.0)},
        }
        for name, values in counters.items():
            self._add({"ph": "C", "name": name, "pid": self.pid, "tid": RENDER_TID, "ts": ts,
                       "args": values})

    # ------------------------------------------------------------------ end
    def close(self) -> Path:
        """Write what is left, rename the file into place, stop receiving events."""
        events.uninstall(self)
        with self._lock:
            self._flush_locked()
            if self._file is None:
                return self.path
            self._file.write("\n]}\n")
            self._file.close()
            self._file = None
        os.replace(self._tmp, self.path)
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
