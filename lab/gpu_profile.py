"""cProfile of the streamed gallery flight (where a streamed frame's time goes).

    python -m lab.gpu_profile [--provider streaming] [--frames 360]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--provider", default="streaming")
    ap.add_argument("--frames", type=int, default=360)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--texture-size", type=int, default=4096)
    args = ap.parse_args()
    from engine.demos import DEMOS
    from engine.hosts.run import run_scene
    from lab.streaming import WallClockPacer

    opts = {"count": args.count, "texture_size": args.texture_size}
    run_scene(DEMOS["gallery"].factory, frames=10, size=(1280, 720), provider=args.provider,
              options=opts)  # warm: generation, shader compiles
    prof = cProfile.Profile()
    prof.enable()
    res = run_scene(DEMOS["gallery"].factory, frames=args.frames, size=(1280, 720),
                    provider=args.provider, on_frame=[WallClockPacer()], options=opts)
    prof.disable()
    print(res.summary)
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(22)
    return 0


if __name__ == "__main__":
    sys.exit(main())
