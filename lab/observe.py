"""The cost of watching a run: the live state file and the trace, side by side with neither.

`python -m lab.observe [--json OUT]` runs the pressure demo (streamed, under its
moving budget: reads, uploads and evictions every few frames) on one device in three
configurations, interleaved in rounds so drift in the machine's load falls on all three:

- `off`: no state file, no trace (the frame loop's observers removed);
- `live`: the default: the state file for `engine monitor`, no trace;
- `trace`: the state file and a trace (RunSettings.trace).

Per configuration it reports the median milliseconds per frame of the frame records'
`cpu_ms` (wall time of the render thread's work before the wait for the GPU) and of the
render thread's own CPU time per `step` (`time.thread_time`: a time slice given to another
process is not counted), and, measured directly, the thread CPU time spent inside the
observers (the publisher's `frame`, the tracer's `frame`, `span` and `instant`, wherever they
are called from) as a share of the frame's: the A/B ratio of medians is what a user sees, the
direct share is the same cost without the noise of other processes' load. With tracing off,
what remains in the frame is the check of one module global per event site and eight
perf_counter reads per frame; `off_hooks_us` measures exactly those statements.
"""
from __future__ import annotations

import argparse
import json
import logging
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engine.app.loop import FrameLoop, make_governor
from engine.app.settings import RunSettings
from engine.gl.device import Device
from engine.memory import events

CONFIGS = ("off", "live", "trace")


class _Timed:
    """Wraps an observer's methods to add up the CPU seconds the calling thread spent in them
    (thread time: a time slice given to another process is not counted)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, obj: Any, name: str) -> None:
        inner = getattr(obj, name)

        def timed(*args: Any, **kw: Any) -> Any:
            t = time.thread_time()
            try:
                return inner(*args, **kw)
            finally:
                self.seconds += time.thread_time() - t

        setattr(obj, name, timed)


def _block(device: Device, config: str, frames: int, first: int, size: tuple[int, int],
           options: dict[str, Any], trace_dir: Path) -> dict[str, Any]:
    from engine.demos import DEMOS

    demo = DEMOS["pressure"]
    settings = RunSettings(frames=frames, size=size, provider="streaming", options=options,
                           trace=trace_dir / f"{config}-{first}.json" if config == "trace"
                           else None)
    loop = FrameLoop(device, make_governor(device, settings), demo.factory, settings,
                     on_frame=demo.hooks(options))
    timed = _Timed()
    try:
        if config == "off" and loop.live is not None:
            loop.live.close()
            loop.live = None
        if loop.live is not None:
            timed.wrap(loop.live, "frame")
        if loop.tracer is not None:
            for name in ("frame", "span", "instant", "close"):
                timed.wrap(loop.tracer, name)
        cpu, thread = [], []
        for f in range(first, first + frames):
            t = time.thread_time()
            cpu.append(float(loop.step(f)["cpu_ms"]))
            thread.append((time.thread_time() - t) * 1e3)
        tracer = loop.tracer
    finally:
        loop.release()
    events_written = tracer.count if tracer is not None else 0  # all written once closed
    return {"cpu_ms": cpu, "thread_ms": thread, "observer_ms": timed.seconds * 1e3,
            "events": events_written}


def off_hooks_us(reps: int = 200_000) -> float:
    """Microseconds per frame of what tracing-off leaves in a frame: eight (name, clock)
    marks and a handful of `events.SINK` checks (one per phase and per streamed level)."""
    clock = time.perf_counter
    t = clock()
    for _ in range(reps):
        phases = [("split", clock())]
        for name in ("a", "b", "c", "d", "e", "f", "g"):
            phases.append((name, clock()))
        for _ in range(4):
            if events.SINK is not None:
                break
    return (clock() - t) / reps * 1e6


def run(device: Device, *, frames: int = 200, rounds: int = 3, warmup: int = 30,
        size: tuple[int, int] = (320, 180), count: int = 16, texture_size: int = 256,
        say: Callable[[str], None] = print) -> dict[str, Any]:
    options = {"count": count, "texture_size": texture_size, "format": "bc1",
               "frames": frames}
    results: dict[str, dict[str, Any]] = {c: {"cpu_ms": [], "thread_ms": [], "observer_ms": 0.0,
                                              "events": 0, "block_medians": [],
                                              "observer_block_us": []}
                                          for c in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="engine-observe-") as tmp:
        _block(device, "off", warmup, 0, size, options, Path(tmp))  # assets, shaders, caches
        for r in range(rounds):
            order = CONFIGS[r % 3:] + CONFIGS[:r % 3]  # each config first once
            for config in order:
                b = _block(device, config, frames, 0, size, options, Path(tmp))
                res = results[config]
                res["cpu_ms"] += b["cpu_ms"]
                res["thread_ms"] += b["thread_ms"]
                res["observer_ms"] += b["observer_ms"]
                res["observer_block_us"].append(b["observer_ms"] / frames * 1e3)
                res["events"] += b["events"]
                res["block_medians"].append(float(np.median(b["cpu_ms"])))
                say(f"round {r + 1} {config:5s}: cpu p50 {np.median(b['cpu_ms']):.3f} ms, "
                    f"thread p50 {np.median(b['thread_ms']):.3f} ms, observers "
                    f"{b['observer_ms'] / frames * 1e3:.1f} us/frame")
    base = float(np.median(results["off"]["cpu_ms"]))
    base_thread = float(np.median(results["off"]["thread_ms"]))
    out: dict[str, Any] = {"frames_per_block": frames, "rounds": rounds, "size": list(size),
                           "textures": count, "texture_size": texture_size,
                           "renderer": device.caps.renderer, "host": platform.node(),
                           "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "off_hooks_us_per_frame": off_hooks_us(), "configs": {}}
    for config, res in results.items():
        n = len(res["cpu_ms"])
        med = float(np.median(res["cpu_ms"]))
        thread = float(np.median(res["thread_ms"]))
        per_frame = res["observer_ms"] / n if n else 0.0
        out["configs"][config] = {
            "frames": n, "cpu_ms_p50": med, "block_medians": res["block_medians"],
            "ratio_to_off": med / base if base else None,
            "thread_cpu_ms_p50": thread,
            "thread_ratio_to_off": thread / base_thread if base_thread else None,
            "observer_us_per_frame": per_frame * 1e3,
            # per block (mean over its frames), then the median block: one block that met a
            # collection or a flush at a bad moment does not decide the figure
            "observer_us_per_frame_block_median": float(np.median(res["observer_block_us"])),
            "observer_block_share_of_cpu": (float(np.median(res["observer_block_us"])) / 1e3
                                            / thread if thread else None),
            "observer_share_of_cpu": per_frame / thread if thread else None,
            "trace_events": res["events"]}
    out["off_hooks_share_of_cpu"] = (out["off_hooks_us_per_frame"] / 1e3 / base_thread
                                     if base_thread else None)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.observe", description=__doc__)
    p.add_argument("--frames", type=int, default=200, help="frames per block (default 200)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the three configs")
    p.add_argument("--size", default="320x180", help="output WxH (default 320x180)")
    p.add_argument("--count", type=int, default=16, help="textures (default 16)")
    p.add_argument("--texture-size", type=int, default=256)
    p.add_argument("--json", type=Path, help="write the result here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    w, h = (int(v) for v in args.size.lower().split("x"))
    device = Device.headless()
    try:
        out = run(device, frames=args.frames, rounds=args.rounds, size=(w, h),
                  count=args.count, texture_size=args.texture_size)
    finally:
        device.shutdown()
    for config, res in out["configs"].items():
        share = res["observer_share_of_cpu"]
        print(f"{config:5s}: cpu p50 {res['cpu_ms_p50']:.3f} ms (x{res['ratio_to_off']:.4f} of "
              f"off), render-thread CPU p50 {res['thread_cpu_ms_p50']:.3f} ms "
              f"(x{res['thread_ratio_to_off']:.4f}), observers "
              f"{res['observer_us_per_frame']:.1f} us/frame = {100 * share:.2f}% of the "
              f"frame's thread CPU (median block {res['observer_us_per_frame_block_median']:.1f}"
              f" us = {100 * res['observer_block_share_of_cpu']:.2f}%), "
              f"{res['trace_events']} trace events")
    print(f"tracing off leaves {out['off_hooks_us_per_frame']:.2f} us/frame = "
          f"{100 * out['off_hooks_share_of_cpu']:.3f}% of frame CPU")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
