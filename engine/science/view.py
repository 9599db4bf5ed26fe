"""`ScienceView`: a chunked scientific image (OME-Zarr, OME-TIFF, tiled TIFF) on screen,
channels composited from their raw values, inside the governor's budget.

A frame: the governor's split gives the streamed pool, which sizes the value cache (made
again, old first, when the pool no longer holds it or the view needs more); the plan
(engine.science.plan) names the tiles of the shown level under the screen for each visible
channel, the coarsest level's tile of each first; the reader fetches the missing ones
(cancelling what the last frame asked for and this one does not); arrived tiles go into
slots; every tile is drawn from itself or its resident ancestors. A hidden channel asks for
no tile. Contrast limits, gamma and colormaps are uniforms and a LUT row: a change shows in
the next frame with nothing read or uploaded again.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import UsageError
from ..gl.device import Device
from ..gl.vt import ColorTarget
from ..memory.budget import Budget
from ..memory.governor import Governor
from .display import ChannelDisplay, default_colormap
from .bc4 import encode_tile, pitch_for
from .gpu import (
    ENCODINGS,
    FLOATS_PER_QUAD,
    MAX_CHANNELS,
    SAMPLING,
    EncodedValueCache,
    TilePainter,
    ValueCache,
    slot_bytes,
    slot_grid,
    value_cache,
)
from .gpu_encode import GpuTileEncoder
from .plan import (
    CoverCache,
    SlotCache,
    Viewport,
    downsample,
    fit,
    level_for,
    max_tiles,
    visible_tiles,
)
from .layers import Layers
from .reads import DEFAULT_WORKERS, TileReader
from .readers import open_image_source
from .source import ChunkedSource, LevelInfo, TileKey

log = logging.getLogger(__name__)

#: slots asked for above the frame's tiles (room to pan without evicting what is shown)
SLACK = 1.25
#: quads a drawn tile may take: itself, or the 2x2 coarser tiles under it at most
PIECES_PER_TILE = 4
#: contrast limits by default: these percentiles of the coarsest level
DEFAULT_PERCENTILES = (0.5, 99.5)
#: while reads are in flight, arrived tiles are drawn at most this often (seconds): a redraw
#: holds the CPU (a software rasteriser) and the GIL the reads need
REFRESH_S = 0.1
#: seconds of tile uploads a frame of a moving view may spend (at least one tile): a pan onto
#: new tiles or a jump brings a hundred or more at once, and uploading them all in one frame
#: is a hitch (a view at rest uploads all it has: nobody waits on that frame's timing)
UPLOAD_S = 0.003


@dataclass(frozen=True)
class FrameStats:
    """One frame: the level shown, tiles wanted / drawn from themselves / missing (drawn
    from an ancestor or not at all), reads queued or running, the cache's bytes."""

    level: int
    wanted: int
    exact: int
    missing: int
    pending: int
    cache_bytes: int
    quads: int
    over_budget: bool
    drawn: bool = True


@dataclass(frozen=True)
class Pick:
    """The level-0 pixel under a screen point and every channel's raw value there (None
    for a channel whose layer does not reach that pixel)."""

    x: int
    y: int
    values: tuple[Any, ...]


def default_displays(source: ChunkedSource) -> list[ChannelDisplay]:
    """Limits from the coarsest level's percentiles (one tile read a channel)."""
    out = []
    coarsest = len(source.levels) - 1
    for c in range(source.channels):
        v = source.read_tile(coarsest, c, 0, 0).astype(np.float64)
        finite = v[np.isfinite(v)]
        lo, hi = (np.percentile(finite, DEFAULT_PERCENTILES) if finite.size else (0.0, 1.0))
        lo, hi = float(lo), float(hi)
        if not hi > lo:
            hi = lo + 1.0
        out.append(ChannelDisplay(lo, hi, colormap=default_colormap(c, source.channels)))
    return out


Sources = ChunkedSource | str | Sequence[ChunkedSource | str]
#: a layer's tile size and levels: layers alike share covers (ScienceView.frame)
Pyramid = tuple[int, tuple[LevelInfo, ...]]


def check_reading(sampling: str, encoding: str) -> None:
    """How values are read and kept, refused with the accepted ones named (the view, the
    hosts' ScienceScene and `engine view` alike)."""
    for name, value, accepted in (("sampling", sampling, SAMPLING),
                                  ("encoding", encoding, ENCODINGS)):
        if value not in accepted:
            raise UsageError(f"{name} {value!r}; accepted: {', '.join(accepted)}")


class ScienceView:
    """A chunked image, or several as layers (engine.science.layers: their channels one
    after another, first layer drawn first), viewed at `size` pixels on `device`, in
    `budget` (a Governor, a Budget or a spec such as "256MiB"). `encoding="bc4"` keeps
    tiles as BC4 in a quarter of a 16-bit cache's bytes, lossy on screen (engine.science.bc4;
    `pick` still reads the source's values)."""

    def __init__(self, source: Sources, device: Device, *,
                 size: tuple[int, int] = (1280, 720),
                 budget: Governor | Budget | str | int = "256MiB",
                 displays: list[ChannelDisplay] | None = None,
                 workers: int = DEFAULT_WORKERS, sampling: str = "nearest",
                 encoding: str = "exact") -> None:
        w, h = int(size[0]), int(size[1])
        if w < 1 or h < 1:
            raise UsageError(f"view size {size}: need at least 1x1 pixels")
        check_reading(sampling, encoding)
        many = source if isinstance(source, (list, tuple)) else [source]
        opened: list[ChunkedSource] = []
        try:
            for s in many:
                opened.append(open_image_source(s))
            self.source = Layers(opened)
            self.device = device
            self.governor = budget if isinstance(budget, Governor) else self._governor(budget)
            self.displays = list(displays) if displays is not None else [
                d for s in opened for d in default_displays(s)]
            self._check(sampling)
        except BaseException:
            for s in opened:
                s.close()
            raise
        self.sampling, self.encoding = sampling, encoding
        self._geometry = self._geometry_table()
        self._pyramids: list[Pyramid] = [(src.tile, tuple(src.levels))
                                         for src in self.source.sources]
        self.size = (w, h)
        self.viewport = fit(w, h, self.source.extent)
        self.slots = SlotCache(0)
        self._covers = CoverCache()
        self.cache: ValueCache | EncodedValueCache | None = None
        tile = self.source.tile
        self._slot_bytes = slot_bytes(self.source.dtype, tile, encoding)
        self._pitch = pitch = pitch_for(tile) if encoding == "bc4" else tile
        # BC4 is encoded by a compute pass where the driver has one (llvmpipe's included:
        # its threads, unlike numpy's calls on the readers, do not wait for the GIL), else
        # on the reader threads
        on_gpu = encoding == "bc4" and device.profile.compute
        self.reader = TileReader(self.source, workers, prepare=(
            (lambda values: encode_tile(values, pitch)) if encoding == "bc4" and not on_gpu
            else None))
        self._encoder: GpuTileEncoder | None = None
        try:
            if on_gpu:
                self._encoder = GpuTileEncoder(device, self.source.dtype, tile)
            self.target = ColorTarget(device, self.size, label="science.output")
            self.painter = TilePainter(device, self.source.dtype, sampling, encoding)
        except BaseException:
            self.release()
            raise
        self.frames = 0
        self._drawn_as: tuple | None = None  # what the target shows (see _needs_draw)
        self._stale = False  # tiles arrived since the last draw
        self._arrived: dict[TileKey, Any] = {}  # read (and encoded), not uploaded yet
        self._last_draw = 0.0

    def _geometry_table(self) -> np.ndarray:
        """[channel, level] -> (tile, level-0 pixels a texel y, x, height, width): what a
        tile's vertices need, looked up for a whole frame at once."""
        layers = self.source
        depth = max(len(s.levels) for s in layers.sources)
        table = np.ones((layers.channels, depth, 5))
        for c in range(layers.channels):
            src = layers.source_of(c)
            for i, info in enumerate(src.levels):
                table[c, i] = (src.tile, *downsample(src.levels, i), *info.shape)
        return table

    def _governor(self, budget: Budget | str | int) -> Governor:
        """A governor of its own: a percentage is of the probed VRAM, and where the driver
        reports free VRAM other programs' use lowers the budget (as a frame loop's)."""
        reading = self.device.vram()
        if not isinstance(budget, Budget):
            budget = Budget(budget, vram_total=reading.total_bytes)
        pressure = self.device.vram if self.device.probe.source == "NVX" else None
        return Governor(budget=budget, pressure=pressure)

    def _check(self, sampling: str) -> None:
        if len(self.displays) != self.source.channels:
            raise UsageError(f"{len(self.displays)} channel displays for "
                             f"{self.source.channels} channels")
        self._check_visible(self.displays)
        if sampling == "linear" and self.source.dtype.kind != "f":
            raise UsageError(f"linear sampling is for float data; {self.source.name} is "
                             f"{self.source.dtype.name} (its values stay exact: nearest)")

    # ------------------------------------------------------------------ display and camera
    @staticmethod
    def _check_visible(displays: list[ChannelDisplay]) -> None:
        shown = sum(d.visible for d in displays)
        if shown > MAX_CHANNELS:
            raise UsageError(f"{shown} visible channels; at most {MAX_CHANNELS} at once")

    def set_display(self, channel: int, **changes: Any) -> None:
        """Change one channel's look (low, high, gamma, colormap, visible): the next frame
        shows it, nothing is read again."""
        if not 0 <= channel < len(self.displays):
            raise UsageError(f"channel {channel}: the source has {len(self.displays)}")
        new = replace(self.displays[channel], **changes)
        displays = self.displays[:channel] + [new] + self.displays[channel + 1:]
        self._check_visible(displays)
        self.displays = displays

    def set_layer_visible(self, layer: int, visible: bool) -> None:
        """Show or hide every channel of one layer (a hidden layer reads and holds no
        tile)."""
        if not 0 <= layer < len(self.source.sources):
            raise UsageError(f"layer {layer}: the view has {len(self.source.sources)}")
        for c in self.source.channels_of(layer):
            self.set_display(c, visible=visible)

    def set_view(self, cx: float, cy: float, scale: float) -> None:
        """Centre the screen on level-0 point (cx, cy) at `scale` level-0 pixels a screen
        pixel."""
        if not (math.isfinite(cx) and math.isfinite(cy) and math.isfinite(scale)
                and scale > 0):
            raise UsageError(f"view ({cx}, {cy}) at scale {scale}: need finite, scale > 0")
        self.viewport = Viewport(*self.size, float(cx), float(cy), float(scale))

    def fit(self) -> None:
        self.viewport = fit(*self.size, self.source.extent)

    def resize(self, size: tuple[int, int]) -> None:
        """Draw at `size` pixels from now on (a host's window or widget was resized),
        keeping the image point at the centre and the zoom."""
        w, h = int(size[0]), int(size[1])
        if w < 1 or h < 1:
            raise UsageError(f"view size {size}: need at least 1x1 pixels")
        if (w, h) == self.size:
            return
        # the old one first (both at once might not fit the budget), gone from the view
        # should the new one fail
        self.__dict__.pop("target").release()
        self.target = ColorTarget(self.device, (w, h), label="science.output")
        vp = self.viewport
        self.size, self.viewport = (w, h), Viewport(w, h, vp.cx, vp.cy, vp.scale)
        self._drawn_as = None

    def trim(self) -> None:
        """Give the value cache back now (a host hid the view); the next frame reads again
        what it shows."""
        self._drop_cache()

    def zoom(self, factor: float, at: tuple[float, float] | None = None) -> None:
        """Zoom in by `factor` (> 1 in) keeping screen point `at` (pixels; the centre by
        default) over the same image point."""
        vp = self.viewport
        sx, sy = at if at is not None else (vp.width / 2, vp.height / 2)
        wx, wy = vp.world(sx, sy)
        scale = vp.scale / factor
        self.set_view(wx - (sx - vp.width / 2) * scale, wy - (sy - vp.height / 2) * scale,
                      scale)

    def pan(self, dx: float, dy: float) -> None:
        """Move the picture by (dx, dy) screen pixels."""
        vp = self.viewport
        self.set_view(vp.cx - dx * vp.scale, vp.cy - dy * vp.scale, vp.scale)

    # ------------------------------------------------------------------ a frame
    def _visible(self) -> list[int]:
        return [c for c, d in enumerate(self.displays) if d.visible]

    def _plan(self, visible: list[int], slots: int) -> tuple[int, list[TileKey], list[TileKey]]:
        """(level, tiles to draw, tiles wanted): each layer's finest level from the zoom's
        (all made coarser by the same steps until their tiles fit `slots` with each
        channel's coarsest tile); `level` is the coarsest level drawn."""
        layers = self.source
        chosen = {c: level_for(layers.levels_of(c), self.viewport.scale) for c in visible}
        under: dict[tuple, list[tuple[int, int]]] = {}  # channels of one geometry share it
        coarser = 0
        while True:
            draw, extra, shown, done = [], [], 0, True
            for c in visible:
                levels = layers.levels_of(c)
                coarsest = len(levels) - 1
                level = min(coarsest, chosen[c] + coarser)
                done &= level == coarsest
                shown = max(shown, level)
                tile = layers.source_of(c).tile
                at = (levels, tile, level)
                if at not in under:
                    under[at] = visible_tiles(levels, tile, level, self.viewport)
                draw += [TileKey(level, c, ty, tx) for ty, tx in under[at]]
                if level != coarsest:
                    extra.append(TileKey(coarsest, c, 0, 0))
            if len(draw) + len(extra) <= slots or done:
                return shown, draw, extra + draw
            coarser += 1

    def _most_wanted(self, visible: list[int]) -> int:
        """The most tiles this zoom can want, wherever the view pans (so that a pan does
        not outgrow the cache sized for where it started)."""
        layers, vp = self.source, self.viewport
        most = 0
        for c in visible:
            levels = layers.levels_of(c)
            level = level_for(levels, vp.scale)
            most += max_tiles(levels, layers.source_of(c).tile, level, vp)
            most += level != len(levels) - 1
        return most

    def _size_cache(self, visible: list[int]) -> bool:
        """Make the quad buffer and the value cache fit this frame's split; False when the
        budget cannot hold even the coarsest tiles."""
        most = self._most_wanted(visible)
        # a tile is drawn from at most 2x2 tiles of one coarser level (plan.cover)
        self.painter.reserve(PIECES_PER_TILE * most)
        need = math.ceil(most * SLACK)
        held = self.cache.nbytes if self.cache is not None else 0
        split = self.governor.split(self.device.ledger.by_category(),
                                    resizable_target_bytes=0,
                                    stream_wanted=max(held, need * self._slot_bytes),
                                    stream_min=len(visible) * self._slot_bytes)
        allow = split.pool_allowance // self._slot_bytes
        have = self.cache.slots if self.cache is not None else 0
        if have > allow or (have < need and have < allow):
            # where the GPU copies tiles, a new size keeps them and the cache is made the
            # size needed; elsewhere it doubles, to be remade (every tile read again) seldom
            copies = self.device.caps.copy_image
            want = min(allow, need if copies else max(need, 2 * have))
            size = math.prod(slot_grid(want, allow, self._pitch,
                                       self.device.caps.max_texture_size))
            if size == have:
                return have >= len(visible)  # the grid allowed is the one held
            if copies and have and want >= len(visible) and \
                    (have + size) * self._slot_bytes <= split.pool_allowance:
                self._move_cache(want, allow)
                return True
            self._drop_cache()
            if want >= max(1, len(visible)):
                self.cache = value_cache(self.device, self.source.dtype, self.source.tile,
                                         want, allow, self.encoding, self._encoder)
                self.slots = SlotCache(self.cache.slots)
                log.info("science cache: %d slots (%d bytes)", self.cache.slots,
                         self.cache.nbytes)
        return self.cache is not None and self.cache.slots >= len(visible)

    def _move_cache(self, want: int, allow: int) -> None:
        """Remake the value cache at `want` slots, the most recently drawn tiles copied over
        on the GPU (both caches are held for the copy: the caller checked they fit)."""
        old = self.cache
        cache = value_cache(self.device, self.source.dtype, self.source.tile, want, allow,
                            self.encoding, self._encoder)
        self.slots, moves = self.slots.resized(cache.slots)
        cache.copy_slots(old, moves)
        old.release()
        self.cache, self._drawn_as = cache, None
        self._covers.clear()
        log.info("science cache: %d slots (%d bytes), %d tiles kept", cache.slots,
                 cache.nbytes, len(moves))

    def _drop_cache(self) -> None:
        if self.cache is not None:
            self.cache.release()
        self.cache = None
        self.slots = SlotCache(0)
        self._covers.clear()
        self._drawn_as = None

    def _needs_draw(self, state: tuple) -> bool:
        """Whether the target must be drawn again: the view, size or looks changed (drawn
        at once), or tiles arrived (drawn when the last read lands, else every REFRESH_S,
        so that redraws leave the reads most of the time)."""
        if state != self._drawn_as:
            return True
        if not self._stale:
            return False
        return (self._pending() == 0
                or time.monotonic() - self._last_draw >= REFRESH_S)

    def frame(self) -> FrameStats:
        """Plan, read and upload; draw into the view's target when its picture changed
        (`drawn`); the target keeps the last picture otherwise."""
        visible = self._visible()
        fits = self._size_cache(visible) if visible else True
        if not visible or not fits:
            self.reader.want([])
            self.target.begin()
            self._drawn_as = None
            self.frames += 1
            self._arrived.clear()
            return FrameStats(0, 0, 0, 0, self._pending(),
                              self.cache.nbytes if self.cache else 0, 0, not fits)
        level, draw, wanted = self._plan(visible, self.slots.slots)
        slots = self.slots
        slots.new_frame()
        for k in wanted:
            if k in slots:
                slots.use(k)
        state = (self.viewport, tuple(self.displays[c] for c in visible))
        self._upload(wanted, limited=state != self._drawn_as)
        self.reader.want([k for k in wanted if k not in slots and k not in self._arrived])
        exact = sum(k in slots for k in draw)
        self.frames += 1
        if not self._needs_draw(state):
            return FrameStats(level, len(wanted), exact, len(draw) - exact,
                              self._pending(), self.cache.nbytes, 0, False, drawn=False)
        rows = np.full(self.source.channels, -1.0)
        rows[visible] = np.arange(len(visible))
        keys: list[TileKey] = []  # tiles drawn from themselves, then the pieces' tiles
        # missing tiles by their layer's pyramid: layers alike (the usual acquisitions of one
        # field) are covered in one call, whose numpy work costs about the same for one
        # layer's tiles as for all of theirs
        missing: dict[Pyramid, list[TileKey]] = {}
        for k in draw:
            if k in slots:
                keys.append(k)
            else:
                missing.setdefault(self._pyramids[self.source.layer_of(k.channel)],
                                   []).append(k)
        drawn_from: list[TileKey] = []  # the tiles parts of missing ones are drawn from
        rects: list[tuple[float, ...]] = []
        for (tile, levels), ks in missing.items():
            got, where = self._covers.cover(levels, tile, ks, slots)
            drawn_from += got
            rects += where
        for k in dict.fromkeys(drawn_from):
            slots.use(k)
        keys += drawn_from
        quads = self._quads(keys, np.array(rects, np.float64).reshape(-1, 4), rows)
        vp = self.viewport
        self.target.begin()
        self.painter.draw(quads, [self.displays[c] for c in visible], self.cache,
                          (vp.cx, vp.cy), vp.scale, self.size)
        if self.device.profile.software:
            # rasterize now, the GIL left to the readers: else the next frame's first upload
            # waits for it inside moderngl, the GIL held (a 20-channel zoom in a frame loop
            # took 11x as long)
            self.device.finish()
        self._drawn_as, self._stale, self._last_draw = state, False, time.monotonic()
        return FrameStats(level, len(wanted), exact, len(draw) - exact, self._pending(),
                          self.cache.nbytes, len(keys), False)

    def _pending(self) -> int:
        """Tiles queued, being read, or read and waiting for their upload."""
        return self.reader.pending + len(self._arrived)

    def _upload(self, wanted: list[TileKey], limited: bool) -> None:
        """Upload arrived tiles the frame wants, most wanted first; drop those no longer
        wanted. `limited` (the view moved: a frame the user waits for): for at most
        UPLOAD_S, the rest wait for the next frames; else (the view at rest, filling in)
        all of them."""
        arrived = self._arrived
        arrived.update(self.reader.collect())
        if not arrived:
            return
        slots, end = self.slots, None
        for k in wanted:
            if k not in arrived:
                continue
            if k in slots:  # resident already: nothing to upload
                del arrived[k]
                continue
            # the clock starts after the first upload: that one may wait for the GPU to
            # finish drawing from the cache (a software rasteriser does), the next do not
            if end is not None and time.perf_counter() > end:
                break
            values = arrived.pop(k)
            slot = slots.place(k)
            if slot is not None:
                self.cache.upload(slot, values)
                self._stale = True
            if end is None and limited:
                end = time.perf_counter() + UPLOAD_S
        wanted_set = set(wanted)
        for k in [k for k in arrived if k not in wanted_set]:
            del arrived[k]

    def _quads(self, keys: list[TileKey], rects: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """A quad of FLOATS_PER_QUAD floats for each tile in `keys`, over its whole
        rectangle, or for the last len(rects) over those rectangles; in numpy, a row a tile
        (a frame draws a tile a channel: a thousand at 20 channels)."""
        n = len(keys)
        level, channel, ty, tx = np.array(keys, np.int64).reshape(n, 4).T
        tile, dy, dx, h, w = self._geometry[channel, level].T
        fx, fy = tx * tile, ty * tile
        lx, ly = np.minimum(w, fx + tile), np.minimum(h, fy + tile)
        rect = np.stack([fx * dx, fy * dy, lx * dx, ly * dy], axis=1)
        if len(rects):
            rect[n - len(rects):] = rects
        slot = np.fromiter(map(self.slots.slot, keys), np.int64, n)
        cache = self.cache
        ox, oy = slot % cache.slots_x * cache.pitch, slot // cache.slots_x * cache.pitch
        out = np.empty((n, FLOATS_PER_QUAD), np.float32)
        out[:, 0:4] = rect
        out[:, 4:8] = rect / np.stack([dx, dy, dx, dy], axis=1)
        low, span = cache.ranges[slot].T
        out[:, 8:] = np.stack([ox - fx, oy - fy, fx, fy, lx - 1, ly - 1, rows[channel],
                               low, span], axis=1)
        return out

    def settle(self, timeout: float = 30.0) -> FrameStats:
        """Draw frames until every wanted tile is drawn from itself (a complete picture)
        or `timeout` seconds pass."""
        end = time.monotonic() + timeout
        stats = self.frame()
        while (stats.missing or stats.pending) and time.monotonic() < end:
            self.reader.wait_idle(min(0.5, max(0.0, end - time.monotonic())))
            stats = self.frame()
        return stats

    def picture(self) -> np.ndarray:
        """The last frame, (height, width, 3) uint8, top row first."""
        return self.target.read()[:, :, :3]

    # ------------------------------------------------------------------ values
    def pick(self, x: float, y: float) -> Pick | None:
        """The sources' raw level-0 values (every channel, its own dtype; None where its
        layer does not reach) under the screen pixel at column x, row y (its centre, where
        the frame samples); None off every layer."""
        wx, wy = self.viewport.world(x + 0.5, y + 0.5)
        ix, iy = math.floor(wx), math.floor(wy)
        values: list[Any] = []
        for src in self.source.sources:
            h, w = src.levels[0].shape
            t = src.tile
            inside = 0 <= ix < w and 0 <= iy < h
            values += [src.read_tile(0, c, iy // t, ix // t)[iy % t, ix % t] if inside
                       else None for c in range(src.channels)]
        if all(v is None for v in values):
            return None
        return Pick(ix, iy, tuple(values))

    def release(self) -> None:
        """Stop the reads, free every GL object the view made, close the source."""
        self.reader.close()
        self._arrived.clear()
        self._drop_cache()
        for name in ("painter", "target", "_encoder"):
            obj = self.__dict__.pop(name, None)
            if obj is not None:
                obj.release()
        self.source.close()
