"""The engine on a rendercanvas canvas (`pip install 'vram-budget-renderer[canvas]'`): one host class for
Qt, wx, Jupyter and offscreen canvases (engine.hosts.canvas.CanvasHost).

    python examples/embed_canvas.py --backend offscreen --frames 30 --save out/canvas.png
    python examples/embed_canvas.py --backend qt        # a Qt window (PySide6), until closed
    python examples/embed_canvas.py --backend wx --frames 120

In a Jupyter notebook (jupyter_rfb draws the frames in the cell, the browser's size is used):

    from rendercanvas.jupyter import RenderCanvas
    from engine.demos.gltf_demo import build
    from engine.hosts.canvas import CanvasHost
    canvas = RenderCanvas(size=(640, 400))
    host = CanvasHost(canvas, build, budget="256MiB")
    canvas                                  # the cell's output: the engine, animating
    # later: host.close()

Prints one JSON line (frames, size, objects left); exits 0 when nothing leaked.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from engine.demos.gltf_demo import build
from engine.hosts.canvas import CanvasHost

log = logging.getLogger("embed_canvas")


def _canvas_module(backend: str):
    """rendercanvas's module for a backend; Qt's needs a Qt binding imported first."""
    if backend == "qt":
        import PySide6  # noqa: F401  (rendercanvas.qt uses the Qt binding already imported)
        import rendercanvas.pyside6 as mod
    elif backend == "wx":
        import rendercanvas.wx as mod
    else:
        import rendercanvas.offscreen as mod
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("offscreen", "qt", "wx"), default="offscreen")
    ap.add_argument("--frames", type=int, default=0,
                    help="frames to draw (0: offscreen 60, windows until closed)")
    ap.add_argument("--size", type=int, nargs=2, default=(640, 400))
    ap.add_argument("--budget", default="256MiB")
    ap.add_argument("--save", type=Path, help="offscreen: save the last frame as PNG")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    mod = _canvas_module(args.backend)
    canvas = mod.RenderCanvas(size=tuple(args.size), title="rendercanvas + engine")
    if args.backend == "offscreen":
        frames = args.frames or 60
        host = CanvasHost(canvas, build, budget=args.budget, continuous=False)
        for _ in range(frames):
            image = canvas.draw()  # one draw callback -> one engine frame
        if args.save is not None:
            from PIL import Image
            args.save.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(image[..., :3]).save(args.save)
        canvas.close()
    else:
        host = CanvasHost(canvas, build, budget=args.budget, max_frames=args.frames)
        if args.frames > 0:
            def stop_when_done(event=None) -> None:  # the frames are drawn: close the window
                if host.frame >= args.frames:
                    canvas.close()
                else:
                    mod.loop.call_later(0.05, stop_when_done)
            mod.loop.call_later(0.05, stop_when_done)
        mod.loop.run()  # returns when the window is closed
    left = host.close()  # closing the canvas has done it already; this returns the count
    print(json.dumps({"backend": args.backend, "frames": host.frame,
                      "size": list(host.size) if host.size else None, "left": left}), flush=True)
    return 0 if left == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
