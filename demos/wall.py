"""The wall: N photographs in a zoomable grid, each its own BC7 KTX2 with a full mip chain.

It is the scene where the budget binds: at the overview every image wants only a few texels,
diving in wants one image's whole chain, panning at that zoom walks a row of full-size images
through memory, a cut (teleport) to a distant region makes everything visible wrong at once,
and zooming out turns all of it back into tails. That is what a dataset explorer or a photo
wall does to a texture streamer.

Scripted camera (`WallScript`, a pure function of time, so frame N always shows the same
picture): overview -> dive (exponential zoom, constant on-screen speed) to one image at full
size (one texel per pixel) -> hold -> pan along its row -> `cuts` teleports to seeded distant
images, each followed by a hold -> zoom out -> overview. The script is stretched to the run's
frame count when one is given, so `python -m engine demo wall` shows all of it.

Each frame's record gets `wall_segment` and `wall_cut` (the frame a cut landed on), for the
per-segment figures of `python -m lab bench wall`.

Windowed: the window's fly camera (WASD, mouse look) works on the wall as it is; mouse zoom
and drag need the window to forward scroll and drag events (see `WallNavigator`).
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyglm import glm

from engine import inputs
from engine.app.loop import FrameContext, FrameHook
from engine.gl.device import Device
from engine.render.camera import Camera
from engine.render.material import Material
from engine.render.mesh import Mesh, quad
from engine.render.scene import Scene
from engine.streaming.contract import TextureProvider
from engine.streaming.levels.metrics import CutTracker, measure_view

from .wall_assets import wall_textures

CELL = 1.0  # world units between image centres
IMAGE = 0.92  # image edge in world units (the rest is the gap)
FOVY_DEG = 50.0
ASPECT = 16 / 9  # the grid's intended aspect (columns / rows), as a 16:9 screen
FPS = 60.0


def default_count(device: Device) -> int:
    """10,000 images on a GPU; 256 on a software rasterizer (llvmpipe)."""
    renderer = device.caps.renderer.lower()
    software = any(s in renderer for s in ("llvmpipe", "softpipe", "swrast", "software"))
    return 256 if software else 10_000


@dataclass(frozen=True)
class Grid:
    """Image i sits at column i % cols, row i // cols; row 0 at the top."""

    count: int
    cols: int

    @classmethod
    def for_count(cls, count: int, aspect: float = ASPECT) -> Grid:
        cols = max(1, math.ceil(math.sqrt(count * aspect)))
        return cls(count, cols)

    @property
    def rows(self) -> int:
        return math.ceil(self.count / self.cols)

    def center(self, i: int) -> tuple[float, float]:
        c, r = i % self.cols, i // self.cols
        return ((c - (self.cols - 1) / 2) * CELL, ((self.rows - 1) / 2 - r) * CELL)

    def index_at(self, x: float, y: float) -> int:
        """The image nearest the world point (x, y), clamped into the grid."""
        c = round(x / CELL + (self.cols - 1) / 2)
        r = round((self.rows - 1) / 2 - y / CELL)
        c = min(max(c, 0), self.cols - 1)
        r = min(max(r, 0), self.rows - 1)
        return min(self.count - 1, r * self.cols + c)


def distance_for_height(height_world: float, fovy_deg: float = FOVY_DEG) -> float:
    """Camera distance at which `height_world` fills the view vertically."""
    return height_world / (2.0 * math.tan(math.radians(fovy_deg) / 2.0))


def full_size_distance(texture_size: int, viewport_height: int,
                       fovy_deg: float = FOVY_DEG) -> float:
    """Distance at which one image shows one texel per pixel (mip 0 exactly wanted)."""
    return distance_for_height(IMAGE * viewport_height / texture_size, fovy_deg)


def overview_distance(grid: Grid, aspect: float = ASPECT, fovy_deg: float = FOVY_DEG) -> float:
    """Distance at which the whole grid fits the view, with a small margin."""
    height = max(grid.rows * CELL, grid.cols * CELL / aspect)
    return 1.05 * distance_for_height(height, fovy_deg)


@dataclass(frozen=True)
class Segment:
    name: str
    start: float  # seconds
    end: float
    frm: tuple[float, float, float]  # camera (x, y, distance) at start
    to: tuple[float, float, float]
    zoom: bool = False  # interpolate the distance exponentially (constant on-screen speed)


class WallScript:
    """The scripted camera: a list of segments, each moving (x, y, distance) from `frm` to
    `to`; time outside the script clamps to its ends. Pure and deterministic."""

    def __init__(self, grid: Grid, texture_size: int, viewport_height: int, *, cuts: int = 1,
                 seed: int = 11, aspect: float = ASPECT, duration: float | None = None,
                 pan_images: int = 6) -> None:
        self._args = {"texture_size": texture_size, "cuts": cuts, "seed": seed,
                      "aspect": aspect, "duration": duration, "pan_images": pan_images}
        self.viewport_height = viewport_height
        self.grid = grid
        far = overview_distance(grid, aspect)
        near = full_size_distance(texture_size, viewport_height)
        rng = np.random.default_rng(seed)
        # The dive's target: an image a third into the grid, with room to pan right.
        row = grid.rows // 3
        col = max(0, min(grid.cols - 1 - pan_images, grid.cols // 3))
        first = min(grid.count - 1, row * grid.cols + col)
        ax, ay = grid.center(first)
        bx, by = grid.center(min(grid.count - 1, first + min(pan_images, grid.cols - 1 - col)))
        plan: list[tuple[str, float, tuple, tuple, bool]] = [
            ("overview", 1.0, (0.0, 0.0, far), (0.0, 0.0, far), False),
            ("dive", 2.0, (0.0, 0.0, far), (ax, ay, near), True),
            ("hold", 0.5, (ax, ay, near), (ax, ay, near), False),
            ("pan", 3.0, (ax, ay, near), (bx, by, near), False),
        ]
        here = (bx, by)
        # Everything seen so far at full size: the dive's image and the pan's row. A cut goes
        # as far from all of it as the grid allows, so its images cannot still be resident.
        seen = [(ax + (bx - ax) * f, ay) for f in np.linspace(0.0, 1.0, pan_images + 1)]
        for k in range(cuts):
            target = self._distant(rng, seen)
            cx, cy = grid.center(target)
            plan.append((f"cut{k}", 1.5, (cx, cy, near), (cx, cy, near), False))
            here = (cx, cy)
            seen.append(here)
        plan += [("zoom-out", 2.0, (*here, near), (0.0, 0.0, far), True),
                 ("overview-end", 0.5, (0.0, 0.0, far), (0.0, 0.0, far), False)]
        natural = sum(p[1] for p in plan)
        stretch = (duration / natural) if duration and duration > 0 else 1.0
        t, self.segments = 0.0, []
        for name, length, frm, to, zoom in plan:
            self.segments.append(Segment(name, t, t + length * stretch, frm, to, zoom))
            t += length * stretch
        self.near, self.far = near, far

    def _distant(self, rng: np.random.Generator, seen: list[tuple[float, float]]) -> int:
        """Of 64 seeded candidates, the image farthest from every point in `seen`."""
        pts = np.asarray(seen, np.float64)
        best, best_d = 0, -1.0
        for _ in range(64):
            i = int(rng.integers(0, self.grid.count))
            d = float(np.min(np.hypot(*(np.asarray(self.grid.center(i)) - pts).T)))
            if d > best_d:
                best, best_d = i, d
        return best

    @property
    def duration(self) -> float:
        return self.segments[-1].end

    def retarget(self, viewport_height: int) -> None:
        """Re-plan for another output height, so that "full size" stays one texel per pixel
        (the scene is built before the output size is known to it)."""
        if viewport_height != self.viewport_height:
            self.__init__(self.grid, viewport_height=viewport_height, **self._args)

    def segment_at(self, t: float) -> Segment:
        for seg in self.segments:
            if t < seg.end:
                return seg
        return self.segments[-1]

    def cut_times(self) -> list[float]:
        return [s.start for s in self.segments if s.name.startswith("cut")]

    def sample(self, t: float) -> tuple[float, float, float]:
        """(x, y, distance) of the camera at time t."""
        seg = self.segment_at(t)
        u = min(1.0, max(0.0, (t - seg.start) / max(seg.end - seg.start, 1e-9)))
        u = u * u * (3 - 2 * u)  # ease in and out: no velocity jumps inside a segment
        x = seg.frm[0] + (seg.to[0] - seg.frm[0]) * u
        y = seg.frm[1] + (seg.to[1] - seg.frm[1]) * u
        if seg.zoom:
            d = seg.frm[2] * (seg.to[2] / seg.frm[2]) ** u
            # Move across in step with the zoom so the target stays put on screen.
            span = seg.to[2] - seg.frm[2]
            w = (d - seg.frm[2]) / span if abs(span) > 1e-12 else u
            x = seg.frm[0] + (seg.to[0] - seg.frm[0]) * w
            y = seg.frm[1] + (seg.to[1] - seg.frm[1]) * w
        else:
            d = seg.frm[2] + (seg.to[2] - seg.frm[2]) * u
        return x, y, d

    def apply(self, camera: Camera, t: float) -> None:
        x, y, d = self.sample(t)
        camera.position = glm.vec3(x, y, d)
        camera.target = glm.vec3(x, y, 0.0)
        camera.up = glm.vec3(0.0, 1.0, 0.0)


@dataclass
class WallNavigator:
    """Mouse zoom and drag for a window, as plain state: the window forwards scroll steps and
    drag motion (pixels) and the camera follows. Zoom keeps the world point under the cursor
    fixed on screen, as map viewers do.

    The window (engine/hosts/window.py) drives it as the scene's `navigator`: glfw's scroll
    callback -> `zoom(steps, cursor_ndc)`, cursor motion with the left button held ->
    `drag(dx, dy)`, `follow(camera)` when the user first touches the mouse, then
    `apply(camera)` each frame instead of the scripted camera."""

    x: float
    y: float
    distance: float
    viewport_height: int
    near: float = 0.05
    far: float = 1e4
    fovy_deg: float = FOVY_DEG
    aspect: float = ASPECT

    def world_per_pixel(self) -> float:
        return 2.0 * self.distance * math.tan(math.radians(self.fovy_deg) / 2) / \
            self.viewport_height

    def zoom(self, steps: float, cursor_ndc: tuple[float, float] = (0.0, 0.0),
             factor: float = 1.2) -> None:
        """Zoom in by `factor` per scroll step (negative steps zoom out)."""
        half_h = self.distance * math.tan(math.radians(self.fovy_deg) / 2)
        wx = self.x + cursor_ndc[0] * half_h * self.aspect
        wy = self.y + cursor_ndc[1] * half_h
        new = min(self.far, max(self.near, self.distance / factor ** steps))
        keep = new / self.distance
        self.x = wx - (wx - self.x) * keep
        self.y = wy - (wy - self.y) * keep
        self.distance = new

    def drag(self, dx_px: float, dy_px: float) -> None:
        """Move the wall with the cursor (screen y grows downwards)."""
        s = self.world_per_pixel()
        self.x -= dx_px * s
        self.y += dy_px * s

    def follow(self, camera: Camera) -> None:
        self.x, self.y = float(camera.position.x), float(camera.position.y)
        self.distance = min(self.far, max(self.near, float(camera.position.z)))

    def apply(self, camera: Camera) -> None:
        camera.position = glm.vec3(self.x, self.y, self.distance)
        camera.target = glm.vec3(self.x, self.y, 0.0)
        camera.up = glm.vec3(0.0, 1.0, 0.0)


DEFAULTS = {"texture_size": 1024, "cuts": 1, "viewport_height": 720}


def build(device: Device, provider: TextureProvider, options: Mapping[str, Any]) -> Scene:
    """The wall scene: `count` images (default by device), each its own streamed texture."""
    opts = {**DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
    # the CLI's checks, for callers of the API (run_scene(build, options={"count": 0}))
    count = inputs.checked("count", inputs.scene_count,
                           opts.get("count") or default_count(device))
    size = inputs.checked("texture_size", inputs.texture_edge, opts["texture_size"])
    assets = wall_textures(count, size, cache_dir=opts.get("cache_dir"))
    frames = int(opts.get("frames") or 0)
    scene = Scene(device)
    try:
        grid = Grid.for_count(count)
        script = WallScript(grid, size, int(opts["viewport_height"]), cuts=int(opts["cuts"]),
                            duration=frames / FPS if frames > 0 else None)
        mesh = scene.add_mesh(Mesh(device, quad(IMAGE, IMAGE), label="wall-image"))
        ids = provider.register_many([(path.stem, path) for path in assets.paths])
        for i, (path, tid) in enumerate(zip(assets.paths, ids)):
            mat = Material(path.stem, albedo=tid, roughness=1.0)
            scene.materials.append(mat)
            x, y = grid.center(i)
            scene.add(mesh, mat, glm.translate(glm.vec3(x, y, 0.0)))
        # Light from the viewer, strong ambient: the images look like themselves.
        scene.sun.direction = (0.0, 0.0, -1.0)
        scene.sun.intensity = 1.6
        scene.ambient = (0.55, 0.55, 0.55)
        scene.clear_color = (0.05, 0.05, 0.06)
        scene.camera = Camera(fovy_deg=FOVY_DEG, near=0.01, far=10.0 * script.far)
        scene.on_update.append(lambda sc, t: script.apply(sc.camera, t))
        scene.wall_script = script  # type: ignore[attr-defined]  # hooks and the bench read it
        scene.navigator = WallNavigator(0.0, 0.0, script.far, int(opts["viewport_height"]))
    except BaseException:
        scene.release()
        raise
    return scene


class WallMetrics:
    """Per-frame quality figures for the report (and the HUD): the screen-weighted fractions
    at / one level / two or more levels coarser than wanted, and the time from each cut until
    95% of the visible texels are at their wanted level (wall-clock seconds, because the
    streamer's reads happen in wall time; the frame count is recorded too)."""

    def __init__(self) -> None:
        self.tracker = CutTracker()
        self.cut_frame: int | None = None

    def __call__(self, ctx: FrameContext) -> None:
        view = ctx.renderer.frame_view(ctx.scene, ctx.frame, ctx.time)
        count = int(view.texture_ids.max(initial=-1)) + 1
        cov, _ = measure_view(view, ctx.provider, count)
        ctx.record.update(cov.as_record())
        now = time.perf_counter()
        cut = bool(ctx.record.get("wall_cut"))
        if cut:
            self.cut_frame = ctx.frame
        open_cut = self.tracker.last_cut
        since = self.tracker.update(now, cov.at_wanted, cut)
        if since is not None:
            ctx.record["since_cut_s"] = since
            ctx.record["since_cut_frames"] = ctx.frame - (self.cut_frame or 0)
        if (open_cut is not None or cut) and self.tracker.last_cut is None:
            ctx.record["cut_to_95_s"] = self.tracker.times[-1]
            ctx.record["cut_to_95_frames"] = ctx.frame - (self.cut_frame or 0)


def hooks(options: Mapping[str, Any]) -> list[FrameHook]:
    """Records the script's segment per frame, which frame a cut landed on, and (unless
    `metrics` is False) the quality metrics of `WallMetrics`."""
    def segment(ctx: FrameContext) -> None:
        script: WallScript | None = getattr(ctx.scene, "wall_script", None)
        if script is None:
            return
        script.retarget(ctx.renderer.output_size[1])
        seg = script.segment_at(ctx.time)
        ctx.record["wall_segment"] = seg.name
        dt = ctx.time / ctx.frame if ctx.frame else 0.0
        prev = script.segment_at(ctx.time - dt) if ctx.frame else None
        ctx.record["wall_cut"] = seg.name.startswith("cut") and prev is not seg
    out: list[FrameHook] = [segment]
    if options.get("metrics", True) is not False:
        out.append(WallMetrics())
    return out
