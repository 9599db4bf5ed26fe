"""GPU device run: a second process takes and gives back VRAM while the gallery streams.

    python -m lab.gpu_pressure OUT_DIR

The engine runs with budget "80%" of the probed VRAM; a PyTorch process allocates all but
`--leave` GiB of what is free, holds it, frees it. The governor reads NVX each frame, so the
effective budget must fall below what the engine uses and come back; the report shows it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HOG = r"""
import sys, time, torch
time.sleep(float(sys.argv[1]))
free, total = torch.cuda.mem_get_info()
keep = int(float(sys.argv[3]) * (1 << 30))
x = torch.empty(max(0, free - keep), dtype=torch.uint8, device="cuda")
x.fill_(1); torch.cuda.synchronize()
print("hog: took", x.numel(), "bytes", flush=True)
time.sleep(float(sys.argv[2]))
del x; torch.cuda.empty_cache(); torch.cuda.synchronize()
print("hog: freed", flush=True)
time.sleep(float(sys.argv[2]))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--leave", type=float, default=1.0, help="GiB the hog leaves free")
    ap.add_argument("--count", type=int, default=48)
    ap.add_argument("--texture-size", type=int, default=2048)
    ap.add_argument("--frames", type=int, default=1500)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from engine.demos import DEMOS
    from engine.hosts.run import run_scene

    t_start = [None]

    def hook(ctx):
        if t_start[0] is None:
            t_start[0] = time.perf_counter()
        ctx.record["wall_s"] = time.perf_counter() - t_start[0]

    hog = subprocess.Popen([sys.executable, "-c", HOG, "3", "4", str(args.leave)])
    try:
        result = run_scene(DEMOS["gallery"].factory, frames=args.frames, size=(1920, 1080),
                           budget="80%", provider="streaming", on_frame=[hook],
                           options={"count": args.count, "texture_size": args.texture_size},
                           report=args.out / "pressure_gpu.json")
    finally:
        hog.wait(timeout=60)
    frames = result.frames
    eff = [f.get("effective_budget_bytes", f["budget_bytes"]) for f in frames]
    over = [f for f in frames if f["total_bytes"] > f.get("effective_budget_bytes",
                                                           f["budget_bytes"])]
    summary = {"frames": len(frames), "effective_budget_min": min(eff),
               "effective_budget_max": max(eff), "frames_over_effective_budget": len(over),
               "min_render_scale": min(f["render_scale"] for f in frames),
               "leaked_objects": result.summary["leaked_objects"]}
    (args.out / "pressure_gpu_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
