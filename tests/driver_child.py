"""One deterministic run of a demo scene for the driver matrix (tests/test_drivers.py), in a
process of its own so the parent can give it an emulated driver's environment.

    python tests/driver_child.py SCENE OUT_DIR

writes OUT_DIR/SCENE.png (the last frame) and OUT_DIR/SCENE.json (frames over budget, the
worst frame's peak and budget, leaked objects, the device profile). SCENE "canvas" is the
glTF demo embedded in an offscreen rendercanvas (a host app's embedding); its picture only.
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from engine.gl.device import Device
from engine.render.imagecompare import save_png
from engine.streaming.settings import StreamerSettings
from engine.testing import run_headless

SIZE = (160, 96)
#: scene -> (demo, frames, budget, options, streamer settings)
SCENES = {
    "gallery": ("gallery", 24, "16MiB", {"count": 12, "texture_size": 256, "format": "bc7"},
                StreamerSettings()),
    "gallery-vt": ("gallery", 40, "24MiB", {"count": 6, "texture_size": 1024, "format": "bc7"},
                   replace(StreamerSettings(), virtual="always")),
    "wall": ("wall", 30, "32MiB", {"count": 24, "texture_size": 256}, StreamerSettings()),
    "gltf": ("gltf", 12, "32MiB", {}, StreamerSettings()),
}


def canvas_picture(frames: int = 4):
    """The glTF demo embedded in rendercanvas's offscreen canvas (the host apps use), as
    the canvas shows its last frame."""
    import numpy as np
    from rendercanvas.offscreen import RenderCanvas

    from engine.demos.gltf_demo import build
    from engine.hosts.canvas import CanvasHost

    canvas = RenderCanvas(size=SIZE)
    host = CanvasHost(canvas, build, continuous=False)
    try:
        for _ in range(frames):
            image = np.asarray(canvas.draw())
    finally:
        host.close()
        canvas.close()
    return image


def main(scene: str, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    if scene == "canvas":
        save_png(canvas_picture()[..., :3], out / "canvas.png")
        return 0
    demo, frames, budget, options, streamer = SCENES[scene]
    device = Device.headless()
    try:
        profile = device.profile.as_dict()
        result = run_headless(demo, frames=frames, size=SIZE, budget=budget, options=options,
                              deterministic=True, streamer=streamer, device=device)
    finally:
        device.shutdown()
    over = [f for f in result.frames
            if int(f.get("peak_bytes", f["total_bytes"])) > int(f["budget_bytes"])]
    worst = max(result.frames, key=lambda f: int(f.get("peak_bytes", f["total_bytes"]))
                - int(f["budget_bytes"]))
    save_png(result.image[..., :3], out / f"{scene}.png")
    (out / f"{scene}.json").write_text(json.dumps({
        "frames": len(result.frames), "over_budget_frames": len(over),
        "worst_peak_bytes": int(worst.get("peak_bytes", worst["total_bytes"])),
        "worst_budget_bytes": int(worst["budget_bytes"]),
        "leaked_objects": int(result.summary["leaked_objects"]), "profile": profile}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], Path(sys.argv[2])))
