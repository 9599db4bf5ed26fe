"""Small scientific images written by their own writers (zarr, tifffile), and the numpy
picture a view of them must show."""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from engine.science.display import ChannelDisplay, shade
from engine.science.pyramid import reduce2x2

NGFF_AXES = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
             {"name": "x", "type": "space"}]


def pyramid(data: np.ndarray, levels: int) -> list[np.ndarray]:
    """(c, y, x) levels, each the 2x2 mean of the one before (as the view makes them)."""
    out = [data]
    for _ in range(levels - 1):
        out.append(np.stack([reduce2x2(ch, data.dtype) for ch in out[-1]]))
    return out


def sample(rng: np.random.Generator, dtype: str, shape: tuple[int, int, int]) -> np.ndarray:
    """Smooth structure plus noise over the dtype's range (so limits and LUTs matter)."""
    c, h, w = shape
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([np.sin(xx / (17 + 9 * k)) * np.cos(yy / (23 + 5 * k)) for k in range(c)])
    noise = rng.normal(0, 0.15, shape)
    if dtype == "float32":
        return (1000 * (base + noise)).astype(np.float32)
    top = np.iinfo(dtype).max
    return np.clip((base + noise + 1.3) / 2.6 * top, 0, top).astype(dtype)


def write_ome_zarr(path: Path, levels: list[np.ndarray], zarr_format: int,
                   chunk: int = 128) -> Path:
    import zarr
    g = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    for i, lv in enumerate(levels):
        a = g.create_array(str(i), shape=lv.shape, chunks=(1, chunk, chunk), dtype=lv.dtype)
        a[:] = lv
    ms = {"axes": NGFF_AXES, "datasets": [{"path": str(i)} for i in range(len(levels))]}
    if zarr_format == 3:
        g.attrs["ome"] = {"version": "0.5", "multiscales": [ms]}
    else:
        g.attrs["multiscales"] = [{"version": "0.4", **ms}]
    return path


def write_ome_tiff(path: Path, levels: list[np.ndarray], tile: int = 128) -> Path:
    import tifffile
    with tifffile.TiffWriter(path) as tw:
        tw.write(levels[0], subifds=len(levels) - 1, tile=(tile, tile),
                 metadata={"axes": "CYX"})
        for lv in levels[1:]:
            tw.write(lv, subfiletype=1, tile=(tile, tile))
    return path


def write_slide(path: Path, levels: list[np.ndarray], tile: int = 128) -> Path:
    """An SVS-like tiled RGB TIFF: (y, x, 3) levels as reduced pages after the first."""
    import tifffile
    with tifffile.TiffWriter(path) as tw:
        tw.write(levels[0], tile=(tile, tile), photometric="rgb",
                 description="Aperio Image Library engine test")
        for lv in levels[1:]:
            tw.write(lv, tile=(tile, tile), photometric="rgb", subfiletype=1)
    return path


def reference(levels: list[np.ndarray], level: int, viewport, displays: list[ChannelDisplay]
              ) -> np.ndarray:
    """The picture a view shows of (c, y, x) `levels` at `level`: each screen pixel's centre
    mapped to level 0, then to the nearest-below texel of `level`; black off the image."""
    c, h0, w0 = levels[0].shape
    lv = levels[level]
    dy, dx = h0 / lv.shape[1], w0 / lv.shape[2]
    px = np.arange(viewport.width) + 0.5
    py = np.arange(viewport.height) + 0.5
    wx = viewport.cx + (px - viewport.width / 2) * viewport.scale
    wy = viewport.cy + (py - viewport.height / 2) * viewport.scale
    ix = np.floor(wx / dx).astype(np.int64)
    iy = np.floor(wy / dy).astype(np.int64)
    inside = ((iy >= 0) & (iy < lv.shape[1]))[:, None] & ((ix >= 0) & (ix < lv.shape[2]))[None]
    cy, cx = np.clip(iy, 0, lv.shape[1] - 1), np.clip(ix, 0, lv.shape[2] - 1)
    values = [lv[k][np.ix_(cy, cx)] for k in range(c)]
    out = shade(values, displays)
    out[~inside] = 0
    return out


def picture_difference(view, levels: list[np.ndarray], level: int) -> np.ndarray:
    """Each pixel's largest channel difference between the view's picture and the numpy
    picture of `levels` at `level`, the smallest over references taken a hair to each side
    (a pixel centre that falls exactly on a texel edge: either texel is right; llvmpipe
    interpolates texel positions to about 1e-3)."""
    vp, got = view.viewport, view.picture().astype(np.int32)
    e = 2e-3 * vp.scale
    return np.min([np.abs(got - reference(levels, level, replace(vp, cx=vp.cx + ex,
                                                                  cy=vp.cy + ey),
                                          view.displays).astype(np.int32)).max(axis=2)
                   for ex, ey in ((0, 0), (e, e), (-e, -e), (e, -e), (-e, e))], axis=0)


def settled_stops(view, levels: list[np.ndarray]) -> Iterator:
    """The view fitted (a coarse level), at one texel a pixel, and magnified at a corner,
    each settled complete: its FrameStats."""
    h, w = levels[0].shape[1:]
    for at in (None, (w / 2, h / 2, 1.0), (w - 40, h - 30, 0.5)):
        if at is not None:
            view.set_view(*at)
        stats = view.settle(20)
        assert stats.missing == 0 and stats.pending == 0
        yield stats


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255 ** 2 / mse)


def _bilinear_axis(world: np.ndarray, n: int, tile: int):
    """Per screen column (or row): the two texels either side of the pixel centre, each
    clamped to the tile of the texel under it (as the shader does), and the weight."""
    t = world - 0.5
    below = np.floor(t).astype(np.int64)
    lo = np.floor(world).astype(np.int64) // tile * tile
    hi = np.minimum(n, lo + tile) - 1
    a = np.clip(np.clip(below, lo, hi), 0, n - 1)
    b = np.clip(np.clip(below + 1, lo, hi), 0, n - 1)
    return a, b, t - below, (world >= 0) & (world < n)


def bilinear_reference(level0: np.ndarray, viewport, displays: list[ChannelDisplay],
                       tile: int) -> np.ndarray:
    """The picture a view with linear sampling shows of (c, y, x) `level0` at level 0."""
    c, h, w = level0.shape
    wx = viewport.cx + (np.arange(viewport.width) + 0.5 - viewport.width / 2) * viewport.scale
    wy = viewport.cy + (np.arange(viewport.height) + 0.5 - viewport.height / 2) * viewport.scale
    x0, x1, fx, in_x = _bilinear_axis(wx, w, tile)
    y0, y1, fy, in_y = _bilinear_axis(wy, h, tile)
    values = []
    for k in range(c):
        v = level0[k].astype(np.float64)
        top = v[np.ix_(y0, x0)] * (1 - fx) + v[np.ix_(y0, x1)] * fx
        bottom = v[np.ix_(y1, x0)] * (1 - fx) + v[np.ix_(y1, x1)] * fx
        values.append(top * (1 - fy)[:, None] + bottom * fy[:, None])
    out = shade(values, displays)
    out[~(in_y[:, None] & in_x[None])] = 0
    return out


