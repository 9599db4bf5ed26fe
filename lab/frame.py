"""Frame: the per-object path against the batched path, N textured objects each with its own
streamed texture (issue 11), CPU and GPU milliseconds per frame, p50 and p99.

The scene: N quads on a grid filling the view, each with its own texture registered with the
streamer (one 256x256 BC7 file registered under N keys: N distinct GPU textures, streamed
independently); the camera sways a little every frame (culling runs every frame; the objects
stay put, so the batched path rewrites only what streaming changes). Per path, the same frames: grant the pool, `begin_frame` (the streamer plans
and uploads), render + present, `end_frame`, then wait for the GPU.

- `cpu_ms`: the render thread's time for the frame up to, not including, the wait for the
  GPU (streamer work included): what the issue's CPU goals are about;
- `render_ms`: the renderer's share of it (render + present);
- `submit_ms`: the scene pass alone (culling, packing, the buffer write and the draw calls:
  what grows with N). On llvmpipe the "GPU" is the CPU: the rasterizer runs when the present
  pass flushes, so `render_ms` there includes the rasterization and only `submit_ms` (at a
  small output size) isolates the submission cost;
- `stream_ms`: the streamer's share (begin_frame + end_frame; building the FrameView is
  the renderer's and not in it), p50 and p99: the column the streamer's own CPU goal
  (issue 11: <= 1 ms at 10,000 textures) is read from;
- `gpu_ms`: GL_TIME_ELAPSED of render + present, read back after the wait.

Peers: pygfx (wgpu) and moderngl-window cannot run this scene: neither uploads BCn data nor
streams mip levels, so "the same scene" (N streamed BC7 textures) does not exist for them;
their per-object draw loops are what the per-object path measures.
"""
from __future__ import annotations

import logging
import math
import tempfile
import time
from pathlib import Path

import numpy as np
from pyglm import glm

from engine.gl.bindless import bindless_supported
from engine.gl.device import Device
from engine.memory.sizes import level_bytes, mip_dims
from engine.textures.ktx2_write import write_ktx2
from .common import SuiteResult, random_blocks

log = logging.getLogger(__name__)


def _texture_file(directory: Path, size: int = 256) -> Path:
    """One BC7 KTX2 with a full mip chain; random blocks (timing does not look at texels)."""
    path = directory / f"frame-bench-{size}.ktx2"
    levels = size.bit_length()
    data = [random_blocks(level_bytes("BC7_SRGB", *mip_dims(size, size, i)), i)
            for i in range(levels)]
    write_ktx2(path, "BC7_SRGB", size, size, data)
    return path


def _release(*objects) -> None:
    """Release what a measurement made, in order, skipping what it never got to make."""
    for obj in objects:
        if obj is not None:
            obj.release()


def _scene(device: Device, provider, n: int, path: Path):
    from engine.render.camera import Camera
    from engine.render.material import Material
    from engine.render.mesh import Mesh, quad
    from engine.render.scene import Scene

    scene = Scene(device)
    panel = scene.add_mesh(Mesh(device, quad(0.9, 0.9), label="panel"))
    side = math.ceil(math.sqrt(n * 16 / 9))
    rows = math.ceil(n / side)
    ids = provider.register_many([(f"obj{i}", path) for i in range(n)])
    for i, tid in enumerate(ids):
        x, y = i % side - (side - 1) / 2, i // side - (rows - 1) / 2
        scene.add(panel, Material(f"m{i}", albedo=tid, roughness=0.6),
                  glm.translate(glm.vec3(x, y, 0.0)))
    dist = max(rows, side * 9 / 16) / (2 * math.tan(math.radians(30))) * 1.05
    scene.camera = Camera(position=glm.vec3(0, 0, dist), target=glm.vec3(0, 0, 0),
                          far=dist * 4)
    return scene


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def measure(device: Device, n: int, path: str, frames: int, size: tuple[int, int],
            texture: Path, force_bound: bool = False, backend: str = "realloc") -> dict:
    """One (N, path) cell: per-frame CPU and GPU times, p50 and p99."""
    from engine.render.renderer import Renderer, RendererSettings
    from engine.streaming.levels.streamer import LevelStreamer

    provider = LevelStreamer(device, backend=backend)
    scene = renderer = None
    try:
        scene = _scene(device, provider, n, texture)
        renderer = Renderer(device, provider, size,
                            settings=RendererSettings(path=path, force_bound=force_bound))
        cpu, render, stream, gpu, submit = [], [], [], [], []
        warm = 3
        cam = scene.camera
        home = glm.vec3(cam.position)
        for f in range(frames + warm):
            # a slow sway: the view changes every frame (culling runs), the objects do not
            cam.position = home + glm.vec3(0.02 * math.sin(f * 0.2), 0.0, 0.0)
            t0 = time.perf_counter()
            provider.grant(1 << 30)
            view = renderer.frame_view(scene, f, f / 60)  # the renderer's, not the streamer's
            tv = time.perf_counter()
            provider.begin_frame(view)
            t1 = time.perf_counter()
            renderer.render(scene)
            ts = time.perf_counter()
            renderer.present()
            t2 = time.perf_counter()
            provider.end_frame()
            t3 = time.perf_counter()
            device.finish()
            st = renderer.frame_stats()
            if f >= warm:
                cpu.append((t3 - t0) * 1e3)
                render.append((t2 - t1) * 1e3)
                submit.append((ts - t1) * 1e3)
                stream.append((t1 - tv + t3 - t2) * 1e3)
                if st["gpu_ms"] is not None and renderer.timer.latest_frame == f:
                    gpu.append(st["gpu_ms"])
        st = renderer.frame_stats()
        return {"N": n, "path": path if path == "per_object" else
                f"batched/{renderer.texture_mode}", "size": f"{size[0]}x{size[1]}",
                "frames": frames,
                "cpu_ms_p50": _pct(cpu, 50), "cpu_ms_p99": _pct(cpu, 99),
                "render_ms_p50": _pct(render, 50), "render_ms_p99": _pct(render, 99),
                "submit_ms_p50": _pct(submit, 50), "submit_ms_p99": _pct(submit, 99),
                "stream_ms_p50": _pct(stream, 50), "stream_ms_p99": _pct(stream, 99),
                "gpu_ms_p50": _pct(gpu, 50), "gpu_ms_p99": _pct(gpu, 99),
                "draw_calls": st.get("draw_calls", n), "visible": st.get("visible_objects", n),
                "residency_changes": provider.residency_changes}
    finally:
        _release(renderer, scene, provider)


def run(device: Device, quick: bool = False, counts: tuple[int, ...] | None = None,
        sizes: tuple[tuple[int, int], ...] | None = None) -> SuiteResult:
    result = SuiteResult("frame")
    llvmpipe = "llvmpipe" in device.caps.renderer.lower()
    counts = counts or ((50, 200) if quick else (200, 1000, 10000))
    if sizes is None:
        sizes = ((128, 72),) if quick else \
            ((128, 72),) if llvmpipe else ((1280, 720), (3840, 2160))
    paths = [("per_object", False), ("batched", False)]
    if bindless_supported(device):
        paths.append(("batched", True))  # the bound fallback, forced, on a bindless driver
    with tempfile.TemporaryDirectory() as tmp:
        texture = _texture_file(Path(tmp))
        for size in sizes:
            for n in counts:
                per_object_cpu = None
                for path, force in paths:
                    frames = 30 if n <= 1000 or path == "batched" else 10
                    if quick:
                        frames = 8
                    row = measure(device, n, path, frames, size, texture, force_bound=force)
                    if path == "per_object":
                        per_object_cpu = row["cpu_ms_p50"]
                    elif per_object_cpu:
                        row["per_object_over_batched_cpu"] = per_object_cpu / row["cpu_ms_p50"]
                    log.info("frame bench %s", row)
                    result.rows.append(row)
    result.notes.append("cpu_ms: render thread per frame without the GPU wait (streamer "
                        "included); gpu_ms: GL timer query of render + present")
    result.notes.append("peers: pygfx and moderngl-window upload no BCn data and stream no "
                        "mip levels, so they cannot run this scene")
    return result


def profile_streamer(device: Device, n: int = 10000, frames: int = 200,
                     size: tuple[int, int] = (1280, 720), top: int = 15) -> tuple[dict, str]:
    """Where the streamer's per-frame CPU goes with `n` registered textures: its
    begin_frame + end_frame timed over `frames` frames with the camera still, then over as
    many with it swaying as in `measure` (the estimate is recomputed every frame: the case
    a still view skips), then profiled (cProfile) over as many moving frames. Returns the
    timings (`stream_ms_*`: still; `moving_stream_ms_*`: swaying) and the profile's top
    entries by own time."""
    import cProfile
    import io
    import pstats

    from engine.render.renderer import Renderer
    from engine.streaming.levels.streamer import LevelStreamer

    with tempfile.TemporaryDirectory() as tmp:
        texture = _texture_file(Path(tmp))
        provider = LevelStreamer(device, backend="realloc")
        scene = renderer = None
        try:
            scene = _scene(device, provider, n, texture)
            renderer = Renderer(device, provider, size)
            cam = scene.camera
            home = glm.vec3(cam.position)
            still: list[float] = []
            moving: list[float] = []

            def step(f: int, times: list[float] | None, sway: bool) -> None:
                if sway:
                    cam.position = home + glm.vec3(0.02 * math.sin(f * 0.2), 0.0, 0.0)
                provider.grant(1 << 30)
                view = renderer.frame_view(scene, f, f / 60)
                t0 = time.perf_counter()
                provider.begin_frame(view)
                provider.end_frame()
                if times is not None:
                    times.append((time.perf_counter() - t0) * 1e3)

            warm = 10
            for f in range(frames + warm):
                step(f, still if f >= warm else None, False)
            for f in range(frames + warm, 2 * frames + warm):
                step(f, moving, True)
            prof = cProfile.Profile()
            prof.enable()
            for f in range(2 * frames + warm, 3 * frames + warm):
                step(f, None, True)
            prof.disable()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
            stats = {"textures": n, "frames": frames, "stream_ms_p50": _pct(still, 50),
                     "stream_ms_p99": _pct(still, 99),
                     "moving_stream_ms_p50": _pct(moving, 50),
                     "moving_stream_ms_p99": _pct(moving, 99),
                     "residency_changes": provider.residency_changes}
            return stats, out.getvalue()
        finally:
            _release(renderer, scene, provider)


def main(argv: list[str] | None = None) -> int:
    """`python -m lab.frame [--quick] [--json OUT] [--counts 200,1000]`: this suite
    alone (the same rows as `python -m lab bench frame`)."""
    import argparse

    from .common import write_run
    from .harness import rows_table

    ap = argparse.ArgumentParser(prog="python -m lab.frame")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--counts", help="comma-separated object counts")
    ap.add_argument("--sizes", help="comma-separated WxH output sizes")
    ap.add_argument("--profile-streamer", type=int, metavar="N",
                    help="only profile the streamer's per-frame work at N textures")
    ap.add_argument("--frames", type=int, default=200,
                    help="frames per timing of --profile-streamer (still, moving, profiled)")
    args = ap.parse_args(argv)
    counts = tuple(int(c) for c in args.counts.split(",")) if args.counts else None
    sizes = tuple(tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")) \
        if args.sizes else None
    device = Device.headless()
    if args.profile_streamer:
        try:
            stats, text = profile_streamer(device, args.profile_streamer, args.frames)
            print(stats)
            print(text)
        finally:
            device.shutdown()
        return 0
    try:
        res = run(device, quick=args.quick, counts=counts, sizes=sizes)
        print(rows_table(res.rows))
        if args.json:
            write_run(args.json, device, "frame", res.rows, res.notes)
    finally:
        device.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
