"""A monitor entry (one engine process's published state) read as hostile input.

Why. `python -m engine monitor` reads every file in the runtime folder and prints what it
finds; one malformed file (a pid of twenty digits, JSON nested thousands deep, a missing
key, NaN or Infinity, a number of a thousand digits) made it raise and list nothing, or print
invalid JSON. `parse_entry` bounds the document (size, depth, container and string lengths),
accepts only finite numbers and a plausible pid, and requires every key the monitor shows
with its type, so what it returns can be printed, formatted and dumped as strict JSON
without another check. Anything else is `EntryError` with the reason, and the monitor skips
that file, naming it once.
"""
from __future__ import annotations

import json
import math
from typing import Any

from ..statedir import plausible_pid

#: Bounds of one document; a real one is a few KiB, 3 levels deep, with < 20 categories.
MAX_DEPTH = 6
MAX_ITEMS = 256
MAX_STRING = 1000

_NUMBER = (int, float)
#: Every key the monitor shows, and the types its value may have.
REQUIRED: dict[str, tuple[type, ...]] = {
    "pid": (int,), "name": (str,), "program": (str,), "frame": (int,),
    "budget_bytes": _NUMBER, "effective_budget_bytes": _NUMBER,
    "external_pressure_bytes": _NUMBER, "total_bytes": _NUMBER, "by_category": (dict,),
    "resident_bytes": _NUMBER, "wanted_bytes": _NUMBER, "resident_by_tier": (dict,),
    "cache_slots": _NUMBER, "cache_slots_used": _NUMBER, "reads_in_flight": _NUMBER,
    "uploads_in_flight": _NUMBER, "read_mb_s": _NUMBER, "upload_mb_s": _NUMBER,
    "render_scale": _NUMBER, "scale_reason": (str,), "times": (dict,),
}
#: Keys that may be missing (written before the first frame, or by older versions).
OPTIONAL: dict[str, tuple[type, ...]] = {
    "start": (int, type(None)), "started_utc": _NUMBER, "renderer": (str,),
}


class EntryError(ValueError):
    """A state file's document the monitor cannot trust; the message says why."""


def parse_entry(body: bytes) -> dict[str, Any]:
    """The document in `body`, checked (module docstring); EntryError otherwise."""
    try:
        doc = json.loads(body, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise EntryError("JSON nested too deep") from None
    except (ValueError, UnicodeDecodeError) as exc:  # also ints of more than 4300 digits
        raise EntryError(f"not JSON: {str(exc)[:80]}") from None
    if not isinstance(doc, dict):
        raise EntryError("not a JSON object")
    _bounded(doc, 0)
    for table in (REQUIRED, OPTIONAL):
        for key, types in table.items():
            if key not in doc:
                if table is REQUIRED:
                    raise EntryError(f"no {key!r}")
                continue
            value = doc[key]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise EntryError(f"{key!r} is {type(value).__name__}")
    if not plausible_pid(doc["pid"]):
        raise EntryError(f"pid {doc['pid']} is no process id")
    for key in ("by_category", "resident_by_tier", "times"):
        if not all(v is None or isinstance(v, _NUMBER) for v in doc[key].values()):
            raise EntryError(f"{key!r} holds something other than numbers")
    return doc


def identity(body: bytes) -> tuple[int, int | None] | None:
    """(pid, start) of a document `parse_entry` refused, when it still names a process (so
    the file of a process that is gone can be cleaned away); None otherwise."""
    try:
        doc = json.loads(body, parse_constant=_no_constant, parse_float=_finite_float)
    except (RecursionError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or not plausible_pid(doc.get("pid")):
        return None
    start = doc.get("start")
    return doc["pid"], start if isinstance(start, int) and not isinstance(start, bool) else None


def _bounded(value: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise EntryError(f"nested deeper than {MAX_DEPTH}")
    if isinstance(value, str) and len(value) > MAX_STRING:
        raise EntryError(f"a string of {len(value)} characters")
    if isinstance(value, (dict, list)):
        if len(value) > MAX_ITEMS:
            raise EntryError(f"a container of {len(value)} items")
        for item in (value.values() if isinstance(value, dict) else value):
            _bounded(item, depth + 1)
        if isinstance(value, dict):
            for key in value:
                _bounded(key, depth + 1)


def _no_constant(name: str) -> float:
    raise EntryError(f"{name} is no JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise EntryError(f"{text[:40]} is not a finite number")
    return value
