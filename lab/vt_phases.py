"""Where a virtual-texture frame's CPU goes, phase by phase: what the worst frames spend.

The system's own stats time two spans (`feedback_ms`: poll + reduce + plan + I/O requests;
`table_ms`: the page table's recompute and row writes). A p99 of those spans says that some
frames are slow, not why. `PhaseClock` wraps the calls inside them (the feedback poll, the
reduction, the ancestors' expansion, each policy's plan, the I/O requests and cancels, the
elastic cache's resizes, admission, tile uploads, page-table rows) with timers for one run,
and at each frame's end files the times under that frame; `worst` then gives the mean
breakdown of the slowest frames. Bench apparatus: the wrappers are put on the run's own
objects (and the classes whose instances the system remakes), and taken off by `close`.
"""
from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from engine.gl.vt import PageCache, PageTableTexture
from engine.streaming.virtual import system as vt_system
from engine.streaming.virtual.pagetable import PageTable
from engine.streaming.virtual.policy import TilePolicy

#: (owner, attribute, phase): module functions and class methods the system calls.
_SHARED = ((vt_system, "reduce_readback", "reduce"), (vt_system, "reduce_feedback", "reduce"),
           (vt_system, "expand_requests", "expand"), (TilePolicy, "plan", "plan"),
           (TilePolicy, "admit_many", "admit"), (PageCache, "upload_tiles", "upload"),
           (PageTable, "set_residency", "table_cpu"),
           (PageTableTexture, "write", "table_gpu"))
#: Methods of the system itself and of its parts made once.
_OWN = (("feedback", "poll_feedback", "poll"), (None, "_drain", "drain"),
        (None, "_deficit", "deficit"), (None, "_follow_need", "resize"),
        ("io", "request", "io_request"), ("io", "retain", "io_retain"))


class PhaseClock:
    """Per-frame times of the virtual texture system's phases (ms), for one run."""

    def __init__(self, vts: Any) -> None:
        self._current: dict[str, float] = defaultdict(float)
        self._depth = 0
        self.frames: list[tuple[float, dict[str, float]]] = []  # (span ms, phases)
        self._undo: list[Callable[[], None]] = []
        for owner, name, phase in _SHARED:
            self._wrap(owner, name, phase)
        for part, name, phase in _OWN:
            self._wrap(vts if part is None else getattr(vts, part), name, phase, own=True)

    def _wrap(self, owner: Any, name: str, phase: str, own: bool = False) -> None:
        original = getattr(owner, name)
        clock = self

        def timed(*args, **kwargs):
            outer = clock._depth == 0  # a phase inside another is counted once, as the outer
            clock._depth += 1
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                clock._depth -= 1
                if outer:
                    clock._current[phase] += (time.perf_counter() - t0) * 1e3
        setattr(owner, name, timed)
        if own:
            self._undo.append(lambda: delattr(owner, name))
        else:
            self._undo.append(lambda: setattr(owner, name, original))

    def frame_done(self, span_ms: float, **spans: float) -> None:
        """File the phases timed since the last call under a frame whose measured span
        (the system's feedback + table ms) was `span_ms`; `spans`: the system's own spans
        (its stats' feedback_ms, update_ms, ...), filed beside the phases."""
        self._current.update(spans)
        self.frames.append((span_ms, dict(self._current)))
        self._current.clear()

    def worst(self, fraction: float = 0.01, least: int = 3) -> dict[str, Any]:
        """Mean ms of each phase over the slowest `fraction` of frames (at least `least`),
        beside the mean over every frame: where the tail's time goes."""
        if not self.frames:
            return {}
        ranked = sorted(self.frames, key=lambda f: f[0], reverse=True)
        top = ranked[:max(least, round(len(ranked) * fraction))]

        def mean(rows: list[tuple[float, dict[str, float]]]) -> dict[str, float]:
            names = sorted({k for _, p in rows for k in p})
            return {k: round(sum(p.get(k, 0.0) for _, p in rows) / len(rows), 3)
                    for k in names}
        return {"frames": len(top), "span_ms": round(sum(s for s, _ in top) / len(top), 3),
                "worst_ms": [round(s, 3) for s, _ in top], "phases_ms": mean(top),
                "all_frames_phases_ms": mean(self.frames)}

    def close(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
