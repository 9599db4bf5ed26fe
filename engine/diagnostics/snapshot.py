"""A snapshot of who holds what: every live GL object, the page cache, the staging ring and
the free pieces of each pool, as JSON and as one self-contained HTML page.

PyTorch's memory snapshot is the model: when the budget is spent, the question is which
objects hold it, how old they are and where they were made. `snapshot(device, "snap.json")`
(also `engine.snapshot`, the window's P key and `python -m engine monitor --snapshot PID`)
writes `snap.json` and `snap.html`:

- `objects`: every live GL object the device made: label, kind, category, bytes, age in
  seconds and, when the device captures creation stacks (`Device.headless(capture_stacks=
  True)`), its creation site and stack;
- `totals`: bytes and counts per category, summed from the objects (the ledger's own
  figures beside them, in `ledger`);
- `page_cache`: the virtual-texture page cache's slot map (one letter per slot: T packed
  tails, P pinned, V visible, F prefetch, R recent, . free), when the provider has one;
- `staging`: each staging ring segment's bytes in use and whether the GPU may still read it;
- `sizes`: a histogram of allocation sizes (power-of-two buckets);
- `pools`: the fragmentation view: for the budget, the streaming pool, the page cache and
  each staging ring, its size, what is free and in what pieces;
- `timeline`: the ledger's per-frame history (the newest `TIMELINE_SAMPLES` frames).

The HTML page carries the data and its own JS and CSS inline (a treemap by category and
label, the ledger timeline as SVG, the tables): it opens offline, from a file, in any browser.
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..gl.device import Device
from ..gl.staging import StagingRing
from ..memory.governor import Governor
from ..streaming.contract import TextureProvider, VirtualTextureHost
from ..streaming.virtual.tiles import slot_bytes
from .files import atomic_text

log = logging.getLogger(__name__)

SCHEMA = 1
TIMELINE_SAMPLES = 2000
_DATA_MARK = "/*SNAPSHOT_DATA*/null"
SLOT_LEGEND = {"T": "packed tails", "P": "pinned", "V": "visible", "F": "prefetch",
               "R": "recent", ".": "free"}


def _site(stack: str | None) -> str | None:
    """The innermost caller frame of a creation stack: 'file:line in function'."""
    if not stack:
        return None
    lines = [ln.strip() for ln in stack.strip().splitlines() if ln.strip().startswith("File")]
    if not lines:
        return None
    # 'File "/x/y.py", line 12, in f' -> 'y.py:12 in f'
    head = lines[-1].split('"')
    path = head[1] if len(head) > 2 else lines[-1]
    rest = head[2] if len(head) > 2 else ""
    line = rest.split("line")[-1].split(",")[0].strip() if "line" in rest else "?"
    func = rest.split(" in ")[-1].strip() if " in " in rest else "?"
    return f"{os.path.basename(path)}:{line} in {func}"


def _pieces(sizes: Sequence[int]) -> dict[str, Any]:
    """Free space in pieces: their count, total, largest, and how many of each size."""
    sizes = [int(s) for s in sizes if s > 0]
    hist: dict[str, int] = {}
    for s in sizes:
        hist[str(s)] = hist.get(str(s), 0) + 1
    return {"free_bytes": sum(sizes), "pieces": len(sizes), "largest_free": max(sizes, default=0),
            "piece_sizes": hist}


def _runs(free: np.ndarray) -> list[int]:
    """Lengths of the runs of True in a boolean array."""
    if not free.size:
        return []
    padded = np.concatenate(([False], free, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return (edges[1::2] - edges[::2]).tolist()


def _size_histogram(sizes: Sequence[int]) -> list[dict[str, int]]:
    """Allocation sizes in power-of-two buckets: bucket k holds sizes in (2^(k-1), 2^k]."""
    buckets: dict[int, list[int]] = {}
    for s in sizes:
        k = 0 if s <= 1 else int(s - 1).bit_length()
        buckets.setdefault(k, []).append(int(s))
    return [{"up_to_bytes": 1 << k, "count": len(v), "bytes": sum(v)}
            for k, v in sorted(buckets.items())]


def _page_cache(provider: TextureProvider | None) -> dict[str, Any] | None:
    if not isinstance(provider, VirtualTextureHost):
        return None
    vts = provider.virtual_system()
    if vts is None or vts.cache is None or vts.policy is None:
        return None
    pol, tails = vts.policy, vts.tail_slots
    tier_letter = np.array(["V", "F", "R"])  # streaming.tiers.Tier: VISIBLE, PREFETCH, RECENT
    letters = np.where(pol.slot_key == 0, ".",
                       np.where(pol.pinned, "P", tier_letter[np.clip(pol.tiers(), 0, 2)]))
    used = vts.cache.slots_x * vts.cache.slots_y
    slot_map = "T" * tails + "".join(letters.tolist())
    slot_map = slot_map[:used]
    nbytes = slot_bytes(vts.fmt)
    return {"slots": len(slot_map), "slot_bytes": nbytes, "slot_map": slot_map,
            "counts": {k: slot_map.count(k) for k in SLOT_LEGEND},
            "free_runs": _runs(np.frombuffer(slot_map.encode(), np.uint8) == ord("."))}


def collect(device: Device, *, provider: TextureProvider | None = None,
            governor: Governor | None = None,
            frames: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The snapshot document (see the module docstring)."""
    now = time.monotonic()
    objects, staging = [], []
    for alloc, rec, obj in device.live_allocations():
        objects.append({"id": alloc.id, "kind": alloc.kind, "category": str(alloc.category),
                        "label": alloc.label, "bytes": alloc.nbytes, "glo": alloc.glo,
                        "age_s": round(now - rec.created, 3) if rec.created else None,
                        "site": _site(rec.stack), "stack": rec.stack})
        if isinstance(obj, StagingRing):
            staging.append({"label": alloc.label, "segments": [
                {"used_bytes": used, "size_bytes": size, "gpu_reading": busy}
                for used, size, busy in obj.occupancy()]})
    objects.sort(key=lambda o: -o["bytes"])
    totals: dict[str, dict[str, int]] = {}
    for o in objects:
        t = totals.setdefault(o["category"], {"bytes": 0, "count": 0})
        t["bytes"] += o["bytes"]
        t["count"] += 1
    total = sum(t["bytes"] for t in totals.values())
    last = dict(frames[-1]) if frames else {}
    budget = int(last.get("effective_budget_bytes", last.get("budget_bytes", 0)) or
                 (governor.budget_bytes if governor is not None else 0))
    pools: list[dict[str, Any]] = [{"name": "budget", "size_bytes": budget, "used_bytes": total,
                                    **_pieces([budget - total])}]
    stats = provider.stats() if provider is not None else None
    if "pool_bytes" in last and stats is not None:
        pool = int(last["pool_bytes"])
        pools.append({"name": "streaming pool", "size_bytes": pool,
                      "used_bytes": stats.resident_bytes,
                      **_pieces([pool - stats.resident_bytes])})
    cache = _page_cache(provider)
    if cache is not None:
        size = cache["slots"] * cache["slot_bytes"]
        free = [n * cache["slot_bytes"] for n in cache["free_runs"]]
        pools.append({"name": "page cache", "size_bytes": size,
                      "used_bytes": size - sum(free), **_pieces(free)})
    for ring in staging:
        segs = ring["segments"]
        pools.append({"name": f"staging {ring['label']}",
                      "size_bytes": sum(s["size_bytes"] for s in segs),
                      "used_bytes": sum(s["used_bytes"] for s in segs),
                      **_pieces([0 if s["gpu_reading"] else s["size_bytes"] - s["used_bytes"]
                                 for s in segs])})
    history = device.ledger.history[-TIMELINE_SAMPLES:]
    budgets = {int(f["frame"]): int(f.get("effective_budget_bytes", f["budget_bytes"]))
               for f in frames or ()}
    return {
        "schema": SCHEMA, "pid": os.getpid(), "created_utc": time.time(),
        "renderer": device.caps.renderer, "stacks": any(o["stack"] for o in objects),
        "total_bytes": total, "budget_bytes": budget, "totals": totals,
        "ledger": device.ledger.by_category(),
        "objects": objects, "sizes": _size_histogram([o["bytes"] for o in objects]),
        "page_cache": cache, "slot_legend": SLOT_LEGEND, "staging": staging, "pools": pools,
        "provider": None if stats is None else {
            "resident_bytes": stats.resident_bytes, "wanted_bytes": stats.wanted_bytes,
            "resident_by_tier": dict(stats.resident_by_tier), "textures": stats.textures},
        "timeline": [{"frame": s.frame, "total_bytes": s.total_bytes,
                      "by_category": dict(s.by_category), "budget_bytes": budgets.get(s.frame)}
                     for s in history],
    }


def render_html(doc: Mapping[str, Any]) -> str:
    """The snapshot as one HTML page: the data inline, no request to anywhere."""
    template = resources.files(__package__).joinpath("snapshot.html").read_text("utf-8")
    data = json.dumps(doc, separators=(",", ":")).replace("</", "<\\/")
    return template.replace(_DATA_MARK, data, 1)


def write_snapshot(path: Path | str, device: Device, *, provider: TextureProvider | None = None,
                   governor: Governor | None = None,
                   frames: Sequence[Mapping[str, Any]] | None = None) -> Path:
    """Write the snapshot as PATH (JSON; ".json" is added when PATH has no suffix) and the
    page beside it with ".html"; returns the JSON's path. Runs on the render thread."""
    path = Path(path)
    if path.suffix == "":
        path = path.with_suffix(".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = collect(device, provider=provider, governor=governor, frames=frames)
    atomic_text(path.with_suffix(".html"), render_html(doc))
    atomic_text(path, json.dumps(doc, indent=1))
    log.info("snapshot: %d objects, %d bytes -> %s", len(doc["objects"]), doc["total_bytes"],
             path)
    return path


def snapshot(device: Device, path: Path | str | None = None, *,
             provider: TextureProvider | None = None, governor: Governor | None = None,
             frames: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Who holds what on `device` now, as a document; with `path`, also written as PATH
    (JSON) and PATH.html (see `write_snapshot`). A running FrameLoop's `snapshot(path)`
    passes its own provider, governor and frames."""
    if path is not None:
        written = write_snapshot(path, device, provider=provider, governor=governor,
                                 frames=frames)
        return json.loads(written.read_text(encoding="utf-8"))
    return collect(device, provider=provider, governor=governor, frames=frames)
