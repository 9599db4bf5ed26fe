"""Bake throughput per core, this tree against a git revision, side by side in one run:
mip generation, BC7 (etcpak plus the opaque-alpha fix, engine.textures.encode) and BC1, on
a photograph of the repository scaled to EDGE^2, medians of REPS runs of CPU time.

    python -m lab.bake_speed [--baseline REV] [--edge 1024] [--reps 3] [--json OUT]

Prints one JSON object: Mpx/s per core for each stage and tree, and current/baseline ratios.
The baseline's engine/textures/{mipgen,encode}.py are loaded from `git show REV:...`. The
`bake_*` figures are whole bakes (`bake_image`: mips, encode, the level-0 PSNR scoring and
the file write), the baseline's from its whole `engine` package (`git archive REV engine`),
each tree in its own subprocess.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _load(rev: str, name: str) -> types.ModuleType:
    text = subprocess.run(["git", "show", f"{rev}:engine/textures/{name}.py"], cwd=ROOT,
                          check=True, capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader(f"engine.textures._baseline_{name}", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "engine.textures"
    exec(compile(text, f"{rev}:{name}.py", "exec"), mod.__dict__)
    return mod


def _median_mpx(fn, pixels: int, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return pixels / 1e6 / statistics.median(times)


_BAKE = """
import json, statistics, sys, time
import numpy as np
from engine.textures.bake import bake_image
img = np.load(sys.argv[1])
out = {}
for fmt in ("bc1", "bc7"):
    times = []
    for _ in range(int(sys.argv[3])):
        t = time.process_time()
        result = bake_image(img, sys.argv[2], fmt)
        times.append(time.process_time() - t)
    out[f"bake_{fmt}_psnr_db"] = result.psnr_db
    out[f"bake_{fmt}_mpx_s"] = img.shape[0] * img.shape[1] / 1e6 / statistics.median(times)
print(json.dumps(out))
"""


def _bake_figures(tree: Path, img_path: Path, out: Path, reps: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", _BAKE, str(img_path), str(out), str(reps)],
                          cwd=tree, env=env, check=True, capture_output=True, text=True)
    return json.loads(proc.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    from PIL import Image

    from engine.textures import encode, mipgen

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="HEAD")
    ap.add_argument("--edge", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    photo = sorted((ROOT / "assets" / "photos").glob("*.jpg"))[0]
    img = np.ascontiguousarray(np.asarray(Image.open(photo).convert("RGBA").resize(
        (args.edge, args.edge), Image.Resampling.LANCZOS)))
    px = args.edge * args.edge
    chain = sum(max(1, args.edge >> k) ** 2 for k in range(args.edge.bit_length()))
    trees = {"baseline": (_load(args.baseline, "mipgen"), _load(args.baseline, "encode")),
             "current": (mipgen, encode)}
    out: dict = {"edge": args.edge, "reps": args.reps, "baseline": args.baseline,
                 "photo": photo.name}
    for label, (mg, en) in trees.items():
        levels = mg.generate_mips(img, colorspace="srgb")
        out[label] = {
            "mips_mpx_s": _median_mpx(lambda: mg.generate_mips(img, colorspace="srgb"), px,
                                      args.reps),
            "bc7_mpx_s": _median_mpx(lambda: en.encode_image(img, "BC7_SRGB"), px, args.reps),
            "bc1_mpx_s": _median_mpx(lambda: en.encode_image(img, "BC1_RGB_SRGB"), px,
                                     args.reps),
            # the whole chain as a bake does it: mips, then every level encoded
            "bc7_chain_mpx_s": _median_mpx(lambda: [en.encode_image(lv, "BC7_SRGB") for lv in
                                                    mg.generate_mips(img, colorspace="srgb")],
                                           px, args.reps),
            "bc1_chain_mpx_s": _median_mpx(lambda: [en.encode_image(lv, "BC1_RGB_SRGB")
                                                    for lv in mg.generate_mips(
                                                        img, colorspace="srgb")],
                                           px, args.reps),
        }
        out[label]["levels_identical_bytes"] = sum(lv.nbytes for lv in levels)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline, "engine"], cwd=ROOT,
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        np.save(Path(tmp) / "img.npy", img)
        for label, tree in (("baseline", base), ("current", ROOT)):
            out[label].update(_bake_figures(tree, Path(tmp) / "img.npy",
                                            Path(tmp) / f"{label}.ktx2", args.reps))
    out["ratio"] = {k: out["current"][k] / out["baseline"][k] for k in out["current"]
                    if k.endswith("_mpx_s")}
    out["chain_pixels_per_level0_pixel"] = chain / px
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
