"""Where a streamed frame's time goes on the GPU: the gallery flight with everything resident,
then streamed (the default provider, whole levels and virtual textures under one pool, then
whole levels through each backend), on the renderer's default (batched) path, recording frame
time, the render thread's CPU time and the streamer's own time.

    python -m lab.gpu_pacing OUT.json [--count 200 --texture-size 4096 --frames 360]
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--texture-size", type=int, default=4096)
    ap.add_argument("--frames", type=int, default=360)
    args = ap.parse_args()
    from engine.app.providers import provider_name
    from engine.demos import DEMOS
    from engine.hosts.run import run_scene
    from engine.streaming.levels.streamer import LevelStreamer
    from lab.streaming import WallClockPacer

    def sparse(device, settings, clock):  # whole levels only, through one backend each
        return LevelStreamer(device, backend="sparse")

    def realloc(device, settings, clock):
        return LevelStreamer(device, backend="realloc")

    rows = []
    for provider in ("static", "streaming", sparse, realloc):
        label = provider_name(provider)
        streamer_ms: list[float] = []
        timed: dict = {}

        def hook(ctx, acc=streamer_ms, timed=timed):
            """The provider's own time per frame (begin_frame + end_frame), wrapped at the
            first frame's hook: the first frames are left out of the figures anyway."""
            if not timed:
                for name in ("begin_frame", "end_frame"):
                    def wrap(fn):
                        def run(*a, **k):
                            t = time.perf_counter()
                            try:
                                return fn(*a, **k)
                            finally:
                                timed["ms"] = timed.get("ms", 0.0) + (time.perf_counter() - t) * 1e3
                        return run
                    setattr(ctx.provider, name, wrap(getattr(ctx.provider, name)))
                timed["ms"] = 0.0
                return
            acc.append(timed["ms"])
            timed["ms"] = 0.0
        try:
            res = run_scene(DEMOS["gallery"].factory, frames=args.frames, size=(1280, 720),
                            budget="80%", provider=provider,
                            on_frame=[hook, WallClockPacer()],
                            options={"count": args.count, "texture_size": args.texture_size})
        except ValueError as exc:  # a backend this driver lacks (sparse on llvmpipe)
            print(f"{label}: skipped ({exc})", flush=True)
            continue
        ms = np.array([f["ms"] for f in res.frames[30:]])  # the frame's own time, no pacing
        cpu = np.array([f.get("cpu_ms", np.nan) for f in res.frames[30:]], float)
        sm = np.array(streamer_ms[29:])
        rows.append({"provider": label, "frame_p50_ms": float(np.median(ms)),
                     "frame_p99_ms": float(np.percentile(ms, 99)),
                     "cpu_p50_ms": float(np.nanmedian(cpu)),
                     "cpu_p99_ms": float(np.nanpercentile(cpu, 99)),
                     "draw_calls": res.frames[-1].get("draw_calls"),
                     "streamer_p50_ms": float(np.median(sm)),
                     "streamer_p99_ms": float(np.percentile(sm, 99)),
                     "peak_bytes": res.summary["peak_bytes"],
                     "staging_bytes": res.summary["peak_by_category"].get("staging", 0)})
        print(rows[-1], flush=True)
    base = rows[0]["frame_p99_ms"]
    for r in rows:
        r["p99_ratio"] = r["frame_p99_ms"] / base
    with open(args.out, "w") as fh:
        json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
