"""One viewer on the science bench's image (its OME-Zarr or OME-TIFF, from disk or over
HTTP), in its own process, for `python -m lab.science`.

    python -m lab.science_children VIEWER SPEC.json OUT.json

VIEWER is engine (a ScienceView, headless), engine-bc4 (the same keeping BC4 tiles) or
napari (one multiscale layer a channel, additive, in a Qt window); SPEC's `layers` opens
the image that many times, as layers. The same moves for all: the first frame of the whole image fitted, then zooms to one image
pixel per screen pixel at fixed points, each timed until every channel shows level 0
completely ("sharp"), then a pan at one to one, a frame a step (the engine: planned and
submitted, then finished; napari: its canvas repainted). GPU memory: the engine's ledger;
napari's texture bytes as vispy allocates them (viewer_children.VispyTextures), the
framebuffer its canvas draws into, and the driver's census of every GL object in its
canvas's share group (Qt's compositing textures too), sampled after each zoom. RSS: VmHWM.
"""
from __future__ import annotations

import sys
import time
from typing import Any

from . import viewer_children
from .peer_gl import gl_census, qt_canvas_framebuffer
from .viewer_children import Recorder, VispyTextures, fit_qt_canvas

#: the colour of each of the four channels in both viewers
COLOURS = ("green", "magenta", "cyan", "yellow")
#: The engine's pan after the zooms: frames, and screen pixels a frame, at one to one.
PAN_FRAMES, PAN_STEP_PX = 120, 16


def zoom_points(width: int, height: int, count: int) -> list[tuple[float, float]]:
    """`count` level-0 points spread over the image, away from its edges."""
    return [(width * (0.15 + 0.7 * ((i * 0.618) % 1)), height * (0.15 + 0.7 * ((i * 0.382) % 1)))
            for i in range(count)]


def run_engine(spec: dict[str, Any], rec: Recorder) -> None:
    from engine.gl.device import Device
    from engine.gl.timing import GpuTimer
    from engine.science.gpu import EncodedValueCache, ValueCache
    from engine.science.display import ChannelDisplay
    from engine.science.view import ScienceView

    device = Device.headless()
    lo, hi = spec["limits"]
    layers = spec.get("layers", 1)
    displays = [ChannelDisplay(lo, hi, colormap=c) for c in COLOURS[:spec["channels"]]]
    encoding = spec.get("encoding", "exact")
    view = ScienceView([spec["path"]] * layers, device, size=tuple(spec["size"]),
                       budget=spec["budget"], displays=displays * layers, encoding=encoding)
    timer = GpuTimer(device)
    peak = 0
    uploading = [0, 0.0]  # tiles uploaded and the seconds it took, this frame
    cache_type = EncodedValueCache if encoding == "bc4" else ValueCache
    upload = cache_type.upload

    def timed_upload(cache, slot, values):
        start = time.perf_counter()
        upload(cache, slot, values)
        uploading[0] += 1
        uploading[1] += time.perf_counter() - start
    cache_type.upload = timed_upload

    def frame():
        stats = view.frame()
        device.finish()
        note_peak()
        return stats

    def note_peak() -> None:
        """The ledger's peak, and its split by category at that peak."""
        nonlocal peak
        if device.ledger.total > peak:
            peak = device.ledger.total
            rec.data["gpu_bytes_by_category"] = device.ledger.by_category()

    def sharp(wait_s: float) -> bool:
        end = time.monotonic() + wait_s
        stats = frame()
        while (stats.missing or stats.pending or stats.level) and time.monotonic() < end:
            view.reader.wait_idle(0.002)
            stats = frame()
        return not (stats.missing or stats.pending or stats.level)

    def pan(x: float, y: float, paced: bool) -> dict[str, list]:
        """PAN_FRAMES frames panning right from (x, y) at one to one: each frame's time,
        its CPU part, GPU time and uploads; `paced`: a frame starts every 1/60 s, as on a
        60 Hz display (the time a frame leaves is the readers')."""
        out: dict[str, list] = {"pan_ms": [], "pan_cpu_ms": [], "pan_uploads": []}
        timer.results.clear()
        tick = time.perf_counter()
        for i in range(PAN_FRAMES):
            if paced:
                tick += 1 / 60
                time.sleep(max(0.0, tick - time.perf_counter()))
            uploading[:] = [0, 0.0]
            view.set_view(x + i * PAN_STEP_PX, y, 1.0)
            start = time.perf_counter()
            timer.begin(i)
            stats = view.frame()
            timer.end()
            submitted = time.perf_counter()  # planned, uploaded, drawn: the CPU's part
            device.finish()
            done = time.perf_counter()
            timer.poll()
            note_peak()
            out["pan_cpu_ms"].append((submitted - start) * 1e3)
            out["pan_ms"].append((done - start) * 1e3)
            out["pan_uploads"].append((uploading[0], uploading[1] * 1e3, stats.pending))
            if paced and done > tick + 1 / 60:
                tick = done  # a missed tick: the next frame waits for the next one
        out["pan_gpu_ms"] = [ms for _, ms in timer.results]
        return out

    try:
        frame()
        rec.set(first_frame_s=time.time() - spec["spawn"], gpu_bytes_source="engine ledger")
        end = time.monotonic() + spec["wait_s"]
        stats = frame()
        while (stats.missing or stats.pending) and time.monotonic() < end:
            view.reader.wait_idle(0.002)
            stats = frame()
        rec.set(first_complete_s=time.time() - spec["spawn"], gpu_bytes_peak=peak)
        for x, y in zoom_points(*spec["shape"][::-1], spec["zooms"]):
            view.set_view(x, y, 1.0)
            start = time.perf_counter()
            reached = sharp(spec["wait_s"])
            rec.data["zooms"].append({"point": (x, y), "reached": reached,
                                      "seconds": time.perf_counter() - start})
            rec.set(gpu_bytes_peak=peak)
        first, second = zoom_points(*spec["shape"][::-1], 2)
        rec.data.update(pan(*first, paced=False))
        rec.data.update({f"paced_{k}": v for k, v in pan(*second, paced=True).items()})
        rec.set(budget_bytes=view.governor.budget_bytes,
                reads=view.reader.reads, cancelled=view.reader.cancelled, layers=layers,
                cache_bytes=view.cache.nbytes if view.cache else 0)
    finally:
        cache_type.upload = upload
        timer.release()
        view.release()
        device.shutdown()


def napari_levels(path: str, count: int) -> list[Any]:
    """The image's levels, finest first, as napari's users open them: an OME-Zarr (a folder or
    a URL) through zarr, an OME-TIFF through tifffile's zarr store of its SubIFDs."""
    import tifffile
    import zarr

    if path.endswith((".tif", ".tiff")):
        group = zarr.open(tifffile.imread(path, aszarr=True), mode="r")
    else:
        group = zarr.open_group(path, mode="r")
    return [group[str(i)] for i in range(count)]


def run_napari(spec: dict[str, Any], rec: Recorder) -> None:
    import napari
    from qtpy.QtWidgets import QApplication

    textures = VispyTextures()
    viewer = napari.Viewer(show=True)
    w, h = spec["size"]
    levels = napari_levels(spec["path"], spec["levels"])
    layers = []
    for _ in range(spec.get("layers", 1)):
        layers += viewer.add_image(levels, channel_axis=0, multiscale=True,
                                   contrast_limits=[list(spec["limits"])] * spec["channels"],
                                   colormap=list(COLOURS[:spec["channels"]]),
                                   blending="additive")
    fit_qt_canvas(viewer, w, h)
    canvas = viewer.window._qt_viewer.canvas.native  # no public handle (fit_qt_canvas)

    def draw():
        QApplication.processEvents()
        return viewer.screenshot(canvas_only=True, flash=False)

    def census() -> None:
        """The driver's count of the process's GL objects, kept where it is the largest."""
        now = {**gl_census(canvas), "vispy_textures": textures.now}
        if now["bytes"] > rec.data.get("gpu_census", {}).get("bytes", 0):
            rec.set(gpu_census=now)

    def sharp(wait_s: float) -> bool:
        start = time.perf_counter()
        while time.perf_counter() - start < wait_s:
            draw()
            if all(lay.data_level == 0 and getattr(lay, "loaded", True) for lay in layers):
                return True
        return False

    try:
        hh, hw = spec["shape"]
        viewer.camera.center = (hh / 2, hw / 2)
        viewer.camera.zoom = min(w / hw, h / hh)
        draw()
        rec.set(first_frame_s=time.time() - spec["spawn"], napari=napari.__version__,
                gpu_bytes_source="vispy texture uploads (shape x internal format)",
                gpu_bytes_peak=textures.peak, framebuffer=qt_canvas_framebuffer(canvas))
        census()
        for x, y in zoom_points(hw, hh, spec["zooms"]):
            viewer.camera.center = (y, x)
            viewer.camera.zoom = 1.0
            start = time.perf_counter()
            reached = sharp(spec["wait_s"])
            rec.data["zooms"].append({"point": (x, y), "reached": reached,
                                      "seconds": time.perf_counter() - start})
            rec.set(gpu_bytes_peak=textures.peak)
            census()
        x, y = zoom_points(hw, hh, 1)[0]
        pan = rec.data["pan_ms"] = []
        for i in range(PAN_FRAMES):
            viewer.camera.center = (y, x + i * PAN_STEP_PX)
            start = time.perf_counter()
            QApplication.processEvents()
            canvas.repaint()  # paints now, as a frame of an interactive pan would
            pan.append((time.perf_counter() - start) * 1e3)
        rec.set(gpu_bytes_peak=textures.peak, layers=len(layers))
    finally:
        viewer.close()


def run_engine_bc4(spec: dict[str, Any], rec: Recorder) -> None:
    run_engine({**spec, "encoding": "bc4"}, rec)


RUNNERS = {"engine": run_engine, "engine-bc4": run_engine_bc4, "napari": run_napari}
NEEDS = {"napari": ("napari", "zarr")}


def main(argv: list[str]) -> int:
    return viewer_children.main(argv, RUNNERS, NEEDS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
