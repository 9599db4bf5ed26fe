"""A photo wall in a Jupyter notebook (or any rendercanvas canvas): paste into a cell.

    from rendercanvas.jupyter import RenderCanvas
    import engine
    from engine.hosts.canvas import CanvasHost

    wall = engine.ImageWall(["photos/"])
    canvas = RenderCanvas(size=(960, 540))
    host = CanvasHost(canvas, wall, provider="streaming", on_frame=wall.hooks())
    canvas            # shows the wall; then, in later cells:
    wall.zoom_to(3)   # frame image 3
    wall.fit_all()
    wall.pick((0.0, 0.0))  # the image and pixel at the centre of the view

Run as a script it does the same on rendercanvas's offscreen canvas and saves a frame:

    python examples/view_jupyter.py photos/ --out wall.png
"""
from __future__ import annotations

import argparse
import sys

import engine
from engine.hosts.canvas import CanvasHost

#: Most frames drawn for the saved picture to settle (levels streaming and fading in).
SETTLE_FRAMES = 600


def main(argv: list[str] | None = None) -> int:
    from PIL import Image
    from rendercanvas.offscreen import RenderCanvas

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--out", default="wall.png")
    args = ap.parse_args(argv)
    wall = engine.ImageWall(args.paths, wait_detail=True)
    canvas = RenderCanvas(size=(640, 360))
    host = CanvasHost(canvas, wall, provider="streaming", on_frame=wall.hooks(),
                      continuous=False)
    try:
        for _ in range(SETTLE_FRAMES):  # until the picture is complete (its hook says so)
            canvas.draw()
            if host.last_record is not None and host.last_record.get("settled"):
                break
        Image.fromarray(host.last_image).save(args.out)
    finally:
        left = host.close()
    print(wall.pick((0.0, 0.0)))
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
