"""One viewer on one data set, in its own process, for `python -m lab bench viewers`.

    python -m lab.viewer_children VIEWER SPEC.json OUT.json

VIEWER is engine, napari or fastplotlib; SPEC says the data (photos or the huge image), the
output size, the camera moves and the start time of the process (the parent's clock when it
spawned this one, so the first frame's time includes the interpreter and the imports). The
same moves for each viewer: the first frame of everything fitted, zooms (onto photographs,
or to one image pixel per screen pixel at points of the huge image) each timed until its
detail is on screen, then a pan of fixed steps, each frame timed. OUT is rewritten after
every step, so a run cut short by the parent's timeout keeps what it measured.

GPU memory where no driver says it per process: the engine's ledger (exact GL bytes); for
napari the texture bytes vispy allocates, from the shape and internal format of each
glTexImage2D/3D it issues (RGB8 counted as 4 bytes a texel: drivers store it padded); for
fastplotlib the bytes of every wgpu texture pygfx creates, from its size, format and mip
count, until it is released. Peak RSS is the process's VmHWM (and, for the engine, the
largest of its live worker processes' at the end).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
import weakref
from pathlib import Path
from typing import Any

#: Fraction of a zoom target's frame it fills (as ImageWall.zoom_to).
FILL = 0.95
#: Screen pixels moved per pan frame.
PAN_STEP_PX = 12
#: Frames of unchanged sharpness after which a zoom's picture counts as settled.
SETTLE_FRAMES = 3
#: A 60 Hz display's frame: the wait for detail draws no faster.
FRAME_S = 1 / 60
#: Photographs loaded between the peers' progress records.
PROGRESS_EVERY = 25


def vmhwm_bytes() -> int | None:
    """This process's peak resident set (VmHWM), None where /proc does not say it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def descendants_hwm_bytes() -> int | None:
    """The largest VmHWM among this process's live descendants (the engine's thumbnail and
    encoder workers, under the pool's fork server); None where /proc does not say it."""
    parents: dict[int, int] = {}
    hwm: dict[int, int] = {}
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines()
                          if ":" in line)
        except OSError:  # the process ended while we looked
            continue
        pid = int(status.parent.name)
        parents[pid] = int(fields.get("PPid", "0").strip() or 0)
        if "VmHWM" in fields:
            hwm[pid] = int(fields["VmHWM"].split()[0]) * 1024
    me, found = os.getpid(), []
    for pid in parents:
        p = parents[pid]
        while p and p != me:
            p = parents.get(p, 0)
        if p == me:
            found.append(hwm.get(pid, 0))
    return max(found) if found else None


def sharpness(frame) -> float:
    """Mean absolute difference between neighbouring pixels of the frame's grey, over its
    central half: how much fine detail is on screen. Alignment-free, so viewers whose one
    to one view lands half a pixel apart compare fairly; the parent divides it by the same
    figure of the source around the same point."""
    import numpy as np

    g = np.asarray(frame)[..., :3].astype(np.float32).mean(-1)
    h, w = g.shape
    c = g[h // 4:h - h // 4, w // 4:w - w // 4]
    return float(np.abs(np.diff(c, axis=0)).mean() + np.abs(np.diff(c, axis=1)).mean())


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class Recorder:
    """The child's figures, written to OUT after every step."""

    def __init__(self, out: Path, viewer: str, part: str) -> None:
        self.out = out
        self.data: dict[str, Any] = {"viewer": viewer, "part": part, "available": True,
                                     "zooms": [], "pan_ms": []}

    def set(self, **kw: Any) -> None:
        self.data.update(kw)
        self.write()

    def write(self) -> None:
        self.data["vmhwm_bytes"] = vmhwm_bytes()
        pan = self.data["pan_ms"]
        self.data["pan_ms_p50"] = _percentile(pan, 50)
        self.data["pan_ms_p95"] = _percentile(pan, 95)
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.out)


def grid_rects(count: int, width: int, height: int, aspect: float) -> list[tuple[float, ...]]:
    """(x0, y0, x1, y1) in image pixels, y down, of `count` equal photographs in a grid whose
    shape suits a screen of `aspect`: the peers' layout of the wall (the engine lays out the
    same photographs, all of one size, in the same grid of rows)."""
    gap = 0.02 * width
    cols = max(1, round(math.sqrt(count * aspect * height / width)))
    out = []
    for i in range(count):
        r, c = divmod(i, cols)
        x, y = c * (width + gap), r * (height + gap)
        out.append((x, y, x + width, y + height))
    return out


def bounds_of(rects: list[tuple[float, ...]]) -> tuple[float, float, float, float]:
    return (min(r[0] for r in rects), min(r[1] for r in rects),
            max(r[2] for r in rects), max(r[3] for r in rects))


def fit_view(rect: tuple[float, ...], size: tuple[int, int], fill: float
             ) -> tuple[float, float, float]:
    """(centre x, centre y, screen pixels per image pixel) that show `rect` filling `fill`."""
    w, h = size
    rw, rh = rect[2] - rect[0], rect[3] - rect[1]
    zoom = fill * min(w / rw, h / rh)
    return (rect[0] + rect[2]) / 2, (rect[1] + rect[3]) / 2, zoom


def huge_points(width: int, height: int) -> list[tuple[float, float]]:
    """Where the huge image is looked at one to one: its centre and two quarter points."""
    return [(width / 2, height / 2), (width / 4, height / 4), (3 * width / 4, 3 * height / 4)]


# ---------------------------------------------------------------------------- engine
def run_engine(spec: dict[str, Any], rec: Recorder) -> None:
    import numpy as np

    from engine.app.loop import FrameContext, FrameLoop
    from engine.gl.device import Device
    from engine.streaming.levels.metrics import measure_view
    from engine.view import cache
    from engine.view.wall import ImageView, ImageWall

    size = tuple(spec["size"])
    kwargs = {"workers": spec["workers"], "progress": False, "cache_dir": Path(spec["cache"]),
              "max_pixels": spec["max_pixels"], "encoder": spec["encoder"]}
    device = Device.headless()
    if spec["part"] == "photos":
        wall: ImageWall = ImageWall(spec["photos"], order="given", **kwargs)
    else:
        wall = ImageView(spec["huge"], **kwargs)
    chunk = min(wall.chunk, device.caps.max_texture_size) // 4 * 4
    probe: dict[str, Any] = {"on": False, "deficit": None, "shown": None}

    def coverage(ctx: FrameContext) -> None:
        if probe["on"]:
            fv = ctx.renderer.frame_view(ctx.scene, ctx.frame, ctx.time)
            count = int(fv.texture_ids.max(initial=-1)) + 1
            # detail counted when it is resident, not as far as its fade-in has got (a
            # level fading in is resident: the floor of the sampler's min LOD)
            sampled = np.array([ctx.provider.residency(t).base_level for t in range(count)])
            probe["deficit"] = measure_view(fv, ctx.provider, count,
                                            resident=np.floor(sampled))[1]
            # and as far as it has faded in: what the screen shows
            probe["shown"] = measure_view(fv, ctx.provider, count, sampled=sampled)[1]

    loop = FrameLoop.embedded(device, wall, size=size, budget=spec["budget"],
                              on_frame=wall.hooks(False) + [coverage])
    frame = peak = over = textures = 0

    def step() -> dict[str, Any]:
        nonlocal frame, peak, over, textures
        r = loop.step(frame)
        frame += 1
        peak = max(peak, int(r["peak_bytes"]))
        cats = r["by_category"]
        textures = max(textures, int(cats.get("texture.streamed", 0))
                       + int(cats.get("texture.static", 0)))
        over += int(bool(r.get("over_budget_reason")))  # the frame's peak, not its end
        return r

    try:
        step()
        rec.set(first_frame_s=time.time() - spec["spawn"], gpu_bytes_source="engine ledger",
                images=len(wall.items), chunk=chunk, renderer=device.caps.renderer)
        nav = wall.navigator

        def targets_visible(index: int) -> list:
            view = nav.view_rect()
            return [c for c in wall.items[index].chunks if view.overlaps(c.rect)]

        def settle(index: int) -> dict[str, Any]:
            """Frames until the target's visible chunks are their own textures with their
            wanted level resident (`seconds`: the level has arrived), then until it has
            faded in and the frames drawn show no more detail (`shown_s`: the screen shows
            it)."""
            start = time.perf_counter()
            first = frame
            out: dict[str, Any] = {"reached": False}
            probe["on"] = True

            def done(key: str) -> bool:
                deficit = probe[key]
                # a texture registered after this frame's view was taken is not drawn yet
                return deficit is not None and all(c.ready for c in shown) and all(
                    c.material.albedo < len(deficit) and deficit[c.material.albedo] <= 0
                    for c in shown)

            try:
                while time.perf_counter() - start < spec["wait_s"]:
                    began = time.perf_counter()
                    step()
                    # a host draws at the display's rate, not flat out: the rest of the
                    # frame is the encoder's (it shares the cores)
                    time.sleep(max(0.0, FRAME_S - (time.perf_counter() - began)))
                    shown = targets_visible(index)
                    if not out["reached"] and done("deficit"):
                        out.update(reached=True, seconds=time.perf_counter() - start,
                                   frames=frame - first)
                    if out["reached"] and done("shown"):
                        break
                else:
                    out.setdefault("seconds", time.perf_counter() - start)
                    out.setdefault("frames", frame - first)
                    return out
            finally:
                probe["on"] = False
            # The provider says the level is there some frames before the screen shows it:
            # draw until the frame's own detail stops growing (SETTLE_FRAMES alike).
            last, same, at, at_frame = -1.0, 0, 0.0, frame
            while time.perf_counter() - start < spec["wait_s"] and same < SETTLE_FRAMES:
                step()
                with loop.attributed():
                    now = sharpness(loop.renderer.read_output())
                if abs(now - last) <= 0.01 * max(now, 1e-6):
                    same += 1
                else:  # still changing: the picture is settled from this frame on, or later
                    same, at, at_frame = 0, time.perf_counter() - start, frame - first
                last = now
            out.update(shown_s=at, shown_frames=at_frame, settled=same >= SETTLE_FRAMES)
            return out


        zooms = []
        if spec["part"] == "photos":
            for index in spec["zoom_targets"]:
                zooms.append((min(index, len(wall.items) - 1), None))
        else:
            it = wall.items[0]
            for x, y in huge_points(it.width, it.height):
                zooms.append((0, (x, y)))
        for index, point in zooms:
            it = wall.items[index]
            if point is None:
                wall.zoom_to(index, FILL)
            else:  # one image pixel per screen pixel, centred on the point
                nav.one_to_one(it.rect, it.height)
                nav.x = it.rect.x0 + point[0] / it.width * it.rect.width
                nav.y = it.rect.y1 - point[1] / it.height * it.rect.height
            shown = targets_visible(index)
            encoded = all(c.ready or (it.entry is not None and cache.chunk_path(
                it.entry, wall.format, chunk, c.k).is_file()) for c in shown)
            zoom = {"target": index, "point": point, "encoded": encoded, "chunks": len(shown),
                    **settle(index)}
            zoom["render_scale"] = float(loop.renderer.render_scale)
            if point is not None:
                with loop.attributed():
                    zoom["sharpness"] = sharpness(loop.renderer.read_output())
            rec.data["zooms"].append(zoom)
            rec.set(gpu_bytes_peak=peak, gpu_texture_bytes_peak=textures,
                    over_budget_frames=over)
        if spec["part"] == "photos":  # pan across the wall, a few images high
            wall.fit_all()
            nav.zoom(spec["pan_zoom_steps"])
        for _ in range(spec["pan_frames"]):
            nav.drag(-PAN_STEP_PX, 0)
            rec.data["pan_ms"].append(float(step()["ms"]))
        children = descendants_hwm_bytes()
        rec.set(gpu_bytes_peak=peak, gpu_texture_bytes_peak=textures,
                workers_maxrss_bytes=children, over_budget_frames=over,
                budget=spec["budget"], problems=len(wall.problems))
    finally:
        loop.release()
        device.shutdown()


# ---------------------------------------------------------------------------- peers' data
def read_rgb(path: str):
    import numpy as np
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def huge_levels(path: str) -> list[Any]:
    """The tiled TIFF's pyramid (its SubIFDs) as lazy dask arrays, finest first, read through
    tifffile's zarr store: what napari's multiscale image needs."""
    import dask.array as da
    import tifffile
    import zarr

    store = tifffile.imread(path, aszarr=True)
    group = zarr.open(store, mode="r")
    if hasattr(group, "shape"):  # a single level
        return [da.from_zarr(group)]
    keys = sorted(group.keys(), key=int)
    return [da.from_zarr(group[k]) for k in keys]


# ---------------------------------------------------------------------------- napari
#: GL internal formats -> bytes a texel (RGB8 padded to 4, as drivers store it).
GL_TEXEL_BYTES = {
    0x1903: 1, 0x8229: 1, 0x1909: 1, 0x8040: 1,       # RED, R8, LUMINANCE, LUMINANCE8
    0x190A: 2, 0x8227: 2, 0x822B: 2, 0x822D: 2,       # LUMINANCE_ALPHA, RG, RG8, R16F
    0x1907: 4, 0x8051: 4, 0x1908: 4, 0x8058: 4,       # RGB, RGB8, RGBA, RGBA8
    0x822E: 4, 0x8230: 8, 0x881A: 8, 0x881B: 8,       # R32F, RG32F, RGBA16F, RGB16F
    0x8814: 16, 0x8815: 16, 0x8C41: 4, 0x8C43: 4,     # RGBA32F, RGB32F, SRGB8, SRGB8_A8
    0x81A5: 2, 0x81A6: 4, 0x88F0: 4, 0x1902: 4,       # DEPTH16, DEPTH24, DEPTH24_STENCIL8
}


def timed_pan(rec: Recorder, frames: int, look, draw, cx: float, cy: float, z: float) -> None:
    """A peer's pan: `frames` steps of PAN_STEP_PX screen pixels to the right from (cx, cy)
    at zoom z, each frame's draw timed into the record's pan_ms."""
    for i in range(frames):
        look(cx + (i + 1) * PAN_STEP_PX / z, cy, z)
        start = time.perf_counter()
        draw()
        rec.data["pan_ms"].append((time.perf_counter() - start) * 1000.0)


class _LiveTextures:
    """Live and peak bytes of a peer's textures, by object, as its allocator is patched to
    report them (`add`, and the live entry popped when the texture goes)."""

    def __init__(self) -> None:
        self.live: dict[int, int] = {}
        self.peak = 0
        self.unknown: set = set()  # formats without a known texel size (counted at 4 bytes)

    def add(self, key: int, nbytes: int) -> None:
        self.live[key] = nbytes
        self.peak = max(self.peak, sum(self.live.values()))

    @property
    def now(self) -> int:
        return sum(self.live.values())


class VispyTextures(_LiveTextures):
    """Live bytes of the textures vispy allocates: its GLIR texture objects' set_size (one
    glTexImage per level-0 shape and format) and delete, patched at class level."""

    def __init__(self) -> None:
        from vispy.gloo import glir

        super().__init__()
        outer = self

        def wrap(cls: type, dims: int) -> None:
            original = cls.set_size

            def set_size(obj, shape, format, internalformat):  # noqa: A002 (vispy's name)
                original(obj, shape, format, internalformat)
                fmt = glir.as_enum(internalformat if internalformat is not None else format)
                per = GL_TEXEL_BYTES.get(int(fmt))
                if per is None:
                    outer.unknown.add(int(fmt))
                    per = 4
                outer.add(id(obj), math.prod(shape[:dims]) * per)

            cls.set_size = set_size

        wrap(glir.GlirTexture2D, 2)
        wrap(glir.GlirTexture3D, 3)
        if hasattr(glir, "GlirTextureCube"):
            wrap(glir.GlirTextureCube, 2)
        delete = glir.GlirTexture.delete

        def deleted(obj):
            delete(obj)
            outer.live.pop(id(obj), None)

        glir.GlirTexture.delete = deleted


def fit_qt_canvas(viewer: Any, w: int, h: int) -> None:
    """Resize napari's window until its canvas is w x h (the docks take the rest)."""
    from qtpy.QtWidgets import QApplication

    # napari has no public handle on its window and vispy canvas
    window, native = viewer.window._qt_window, viewer.window._qt_viewer.canvas.native
    for _ in range(5):
        QApplication.processEvents()
        dw, dh = w - native.width(), h - native.height()
        if not dw and not dh:
            return
        window.resize(window.width() + dw, window.height() + dh)


def run_napari(spec: dict[str, Any], rec: Recorder) -> None:
    import napari

    from qtpy.QtWidgets import QApplication

    textures = VispyTextures()
    # Shown (on the run's Xvfb): a hidden viewer's multiscale slicing reads a canvas extent
    # that is not the drawn one, and shows the wrong part of the pyramid.
    viewer = napari.Viewer(show=True)
    w, h = spec["size"]

    def draw():
        QApplication.processEvents()
        return viewer.screenshot(canvas_only=True, flash=False)

    def look(cx: float, cy: float, zoom: float) -> None:
        viewer.camera.center = (cy, cx)
        viewer.camera.zoom = zoom

    try:
        if spec["part"] == "photos":
            pw, ph = spec["photo_size"]
            rects = grid_rects(len(spec["photos"]), pw, ph, w / h)
            for i, (path, r) in enumerate(zip(spec["photos"], rects)):
                viewer.add_image(read_rgb(path), rgb=True, translate=(r[1], r[0]),
                                 name=Path(path).stem)
                if i % PROGRESS_EVERY == PROGRESS_EVERY - 1:  # a run cut short says how far
                    rec.set(loaded=i + 1, loaded_s=time.time() - spec["spawn"])
            fit_qt_canvas(viewer, w, h)
            look(*fit_view(bounds_of(rects), (w, h), 1 / 1.05))
        else:
            levels = huge_levels(spec["huge"])
            layer = viewer.add_image(levels, rgb=True, multiscale=True, name="huge")
            fit_qt_canvas(viewer, w, h)
            hh, hw = levels[0].shape[:2]
            look(*fit_view((0, 0, hw, hh), (w, h), 1 / 1.05))
        shape = draw().shape
        rec.set(first_frame_s=time.time() - spec["spawn"], images=len(viewer.layers),
                frame_shape=list(shape),
                gpu_bytes_source="vispy texture uploads (shape x internal format)",
                gpu_bytes_peak=textures.peak, napari=napari.__version__)
        if spec["part"] == "photos":
            for index in spec["zoom_targets"]:
                index = min(index, len(rects) - 1)
                look(*fit_view(rects[index], (w, h), FILL))
                start = time.perf_counter()
                draw()  # the photographs are whole textures: detail is there at once
                rec.data["zooms"].append({"target": index, "reached": True,
                                          "seconds": time.perf_counter() - start})
                rec.set(gpu_bytes_peak=textures.peak)
            cx, cy, z = fit_view(bounds_of(rects), (w, h), 1 / 1.05)
            z *= 1.2 ** spec["pan_zoom_steps"]
        else:
            for x, y in huge_points(hw, hh):
                look(x, y, 1.0)
                start = time.perf_counter()
                reached = False
                while time.perf_counter() - start < spec["wait_s"]:
                    frame = draw()
                    if layer.data_level == 0 and getattr(layer, "loaded", True):
                        reached = True
                        break
                rec.data["zooms"].append({"target": 0, "point": (x, y), "reached": reached,
                                          "seconds": time.perf_counter() - start,
                                          "level": int(layer.data_level),
                                          "sharpness": sharpness(frame)})
                rec.set(gpu_bytes_peak=textures.peak)
            cx, cy, z = hw / 2, hh / 2, 1.0
        timed_pan(rec, spec["pan_frames"], look, draw, cx, cy, z)
        rec.set(gpu_bytes_peak=textures.peak, gpu_bytes_end=textures.now,
                unknown_gl_formats=sorted(textures.unknown))
    finally:
        viewer.close()


# ---------------------------------------------------------------------------- fastplotlib
#: wgpu texture formats -> bytes a texel (block formats per texel of their block).
WGPU_TEXEL_BYTES = {
    "r8unorm": 1, "r8snorm": 1, "r8uint": 1, "r8sint": 1, "rg8unorm": 2, "r16float": 2,
    "r16uint": 2, "r16sint": 2, "rgba8unorm": 4, "rgba8unorm-srgb": 4, "bgra8unorm": 4,
    "bgra8unorm-srgb": 4, "rgba8snorm": 4, "rgba8uint": 4, "r32float": 4, "r32uint": 4,
    "r32sint": 4, "rg16float": 4, "rgb10a2unorm": 4, "rg11b10ufloat": 4, "depth24plus": 4,
    "depth24plus-stencil8": 4, "depth32float": 4, "depth16unorm": 2, "stencil8": 1,
    "rgba16float": 8, "rgba16uint": 8, "rg32float": 8, "rgba32float": 16, "rgba32uint": 16,
}


class WgpuTextures(_LiveTextures):
    """Live bytes of every texture the wgpu device creates (pygfx's resources and targets):
    GPUDevice.create_texture patched, each texture's bytes dropped when it is released."""

    def __init__(self) -> None:
        from wgpu.backends.wgpu_native import _api

        super().__init__()
        original = _api.GPUDevice.create_texture
        outer = self

        def create_texture(device, **kw):
            tex = original(device, **kw)
            size = kw["size"]
            dims = [size[k] for k in ("width", "height", "depth_or_array_layers")
                    if k in size] if isinstance(size, dict) else list(size)
            dims += [1] * (3 - len(dims))
            fmt = str(kw["format"])
            per = WGPU_TEXEL_BYTES.get(fmt)
            if per is None:
                outer.unknown.add(fmt)
                per = 4
            levels = int(kw.get("mip_level_count", 1))
            n = sum(max(1, dims[0] >> m) * max(1, dims[1] >> m) for m in range(levels))
            key = id(tex)
            outer.add(key, n * dims[2] * per * int(kw.get("sample_count", 1)))
            weakref.finalize(tex, outer.live.pop, key, None)
            return tex

        _api.GPUDevice.create_texture = create_texture


def run_fastplotlib(spec: dict[str, Any], rec: Recorder) -> None:
    import fastplotlib as fpl
    import wgpu

    textures = WgpuTextures()
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    w, h = spec["size"]
    fig = fpl.Figure(size=(w, h), canvas="offscreen")
    plot = fig[0, 0]

    def look(cx: float, cy: float, zoom: float) -> None:
        hw, hh = w / zoom / 2, h / zoom / 2
        plot.camera.show_rect(cx - hw, cx + hw, cy - hh, cy + hh)

    def draw():
        return fig.canvas.draw()

    if spec["part"] == "photos":
        pw, ph = spec["photo_size"]
        rects = grid_rects(len(spec["photos"]), pw, ph, w / h)
        for i, (path, r) in enumerate(zip(spec["photos"], rects)):
            plot.add_image(read_rgb(path), offset=(r[0], r[1], 0))
            if i % PROGRESS_EVERY == PROGRESS_EVERY - 1:
                rec.set(loaded=i + 1, loaded_s=time.time() - spec["spawn"])
        home = fit_view(bounds_of(rects), (w, h), 1 / 1.05)
    else:
        import tifffile

        data = tifffile.imread(spec["huge"])  # no pyramid: the whole image, level 0
        hh_, hw_ = data.shape[:2]
        plot.add_image(data)
        home = fit_view((0, 0, hw_, hh_), (w, h), 1 / 1.05)
    fig.show()
    look(*home)
    shape = draw().shape
    rec.set(first_frame_s=time.time() - spec["spawn"], images=len(plot.graphics),
            frame_shape=list(shape),
            gpu_bytes_source="wgpu textures created (size x format x mips)",
            gpu_bytes_peak=textures.peak, fastplotlib=fpl.__version__,
            adapter=dict(adapter.info))
    if spec["part"] == "photos":
        for index in spec["zoom_targets"]:
            index = min(index, len(rects) - 1)
            look(*fit_view(rects[index], (w, h), FILL))
            start = time.perf_counter()
            draw()  # whole textures: detail is there at once
            rec.data["zooms"].append({"target": index, "reached": True,
                                      "seconds": time.perf_counter() - start})
            rec.set(gpu_bytes_peak=textures.peak)
        cx, cy, z = home
        z *= 1.2 ** spec["pan_zoom_steps"]
    else:
        for x, y in huge_points(hw_, hh_):
            look(x, y, 1.0)
            start = time.perf_counter()
            frame = draw()
            rec.data["zooms"].append({"target": 0, "point": (x, y), "reached": True,
                                      "seconds": time.perf_counter() - start,
                                      "sharpness": sharpness(frame)})
            rec.set(gpu_bytes_peak=textures.peak)
        cx, cy, z = hw_ / 2, hh_ / 2, 1.0
    timed_pan(rec, spec["pan_frames"], look, draw, cx, cy, z)
    rec.set(gpu_bytes_peak=textures.peak, gpu_bytes_end=textures.now,
            unknown_wgpu_formats=sorted(textures.unknown))


RUNNERS = {"engine": run_engine, "napari": run_napari, "fastplotlib": run_fastplotlib}
#: What each peer imports first: missing, it is reported unavailable with the reason.
NEEDS = {"napari": ("napari", "dask", "zarr", "tifffile"),
         "fastplotlib": ("fastplotlib", "wgpu", "tifffile")}


def main(argv: list[str], runners: dict[str, Any] | None = None,
         needs: dict[str, tuple[str, ...]] | None = None) -> int:
    """Run VIEWER on SPEC into OUT (`runners` and `needs`: another bench's viewers)."""
    runners = RUNNERS if runners is None else runners
    needs = NEEDS if needs is None else needs
    viewer, spec_path, out = argv
    spec = json.loads(Path(spec_path).read_text())
    rec = Recorder(Path(out), viewer, spec["part"])
    for name in needs.get(viewer, ()):
        try:
            __import__(name)
        except Exception as exc:  # any import failure (missing, broken binary) is a reason
            rec.set(available=False, reason=f"cannot import {name}: {exc}")
            return 0
    runners[viewer](spec, rec)
    rec.set(done=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
