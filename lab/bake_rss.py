"""Peak memory and time of `engine bake` on a generated huge image (issue 23: a 65536^2 image
baked with at most 1 GiB of RSS).

    python -m lab.bake_rss make OUT.tif EDGE [--jpeg]
    python -m lab.bake_rss bake IN.tif OUTDIR [--format bc1] [--jobs N] [--json OUT]

`make` writes an EDGE x EDGE RGB tiled TIFF (256 x 256 tiles, BigTIFF) computed lazily by
libvips from its coordinates (gradients and a diagonal pattern), so the generator holds a
few tiles, never the image. `bake` runs `python -m engine bake` on it in a subprocess and
samples every 50 ms the RSS of the main process and of each worker (from /proc), and their
sum, RSS and PSS (PSS splits the pages the forked workers share, so its sum is the memory
the tree really holds); it prints one JSON object with wall seconds, level-0 Mpx/s of wall
time, the peaks and the bake's own table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make(path: str, edge: int, jpeg: bool) -> None:
    import pyvips

    xy = pyvips.Image.xyz(edge, edge)
    r = (xy[0] * 255 / edge).cast("uchar")
    g = (xy[1] * 255 / edge).cast("uchar")
    b = ((xy[0] + xy[1]) % 256).cast("uchar")
    img = r.bandjoin([g, b]).copy(interpretation="srgb")
    extra = {"compression": "jpeg", "Q": 90} if jpeg else {}
    img.write_to_file(path, tile=True, tile_width=256, tile_height=256, bigtiff=True, **extra)


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


def _kib(pid: int, path: str, key: str) -> int:
    try:
        with open(f"/proc/{pid}/{path}") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def bake(src: str, out_dir: str, fmt: str, jobs: int | None) -> dict:
    cmd = [sys.executable, "-m", "engine", "bake", src, "-o", out_dir, "--format", fmt,
           "--max-pixels", str(1 << 33), "--no-progress"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    peak = {"main_rss": 0, "worker_rss": 0, "tree_rss": 0, "tree_pss": 0}
    while proc.poll() is None:
        pids = [proc.pid] + _children(proc.pid)
        rss = [_kib(p, "status", "VmRSS:") for p in pids]
        pss = [_kib(p, "smaps_rollup", "Pss:") for p in pids]
        peak["main_rss"] = max(peak["main_rss"], rss[0])
        peak["worker_rss"] = max([peak["worker_rss"], *rss[1:]])
        peak["tree_rss"] = max(peak["tree_rss"], sum(rss))
        peak["tree_pss"] = max(peak["tree_pss"], sum(pss))
        time.sleep(0.05)
    wall = time.perf_counter() - start
    stdout, stderr = proc.communicate()
    import pyvips

    img = pyvips.Image.new_from_file(src)
    mpx = img.width * img.height / 1e6
    return {"source": src, "width": img.width, "height": img.height, "format": fmt,
            "jobs": jobs or os.cpu_count(), "rc": proc.returncode, "wall_s": round(wall, 2),
            "mpx_per_s_wall": round(mpx / wall, 2),
            **{f"peak_{k}_mib": round(v / 1024, 1) for k, v in peak.items()},
            "stdout": stdout.strip().splitlines(), "stderr_tail": stderr.strip()[-2000:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("path")
    m.add_argument("edge", type=int)
    m.add_argument("--jpeg", action="store_true", help="JPEG-compressed tiles (smaller file)")
    b = sub.add_parser("bake")
    b.add_argument("src")
    b.add_argument("out_dir")
    b.add_argument("--format", default="bc1")
    b.add_argument("--jobs", type=int)
    b.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "make":
        make(args.path, args.edge, args.jpeg)
        return 0
    result = bake(args.src, args.out_dir, args.format, args.jobs)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0 if result["rc"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
