"""Colormaps as 256-entry RGB lookup tables (uint8), the rows of the LUT texture.

A name is, in this order: a solid colour ("red", "green", ..., "#rrggbb": a ramp from black,
what a fluorescence channel is usually shown in), a colormap of matplotlib or cmap when
either is importable (their exact tables), or one of the built-ins gray, viridis, magma and
inferno. The built-in perceptual maps are piecewise-linear through a handful of their
published anchor colours: close to the originals, and always there without a plotting
package.
"""
from __future__ import annotations

import functools
import re

import numpy as np

from ..errors import UsageError

SOLID = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255),
         "cyan": (0, 255, 255), "magenta": (255, 0, 255), "yellow": (255, 255, 0),
         "white": (255, 255, 255)}
#: anchor colours, evenly spaced from 0 to 1
ANCHORS = {
    "gray": ("#000000", "#ffffff"),
    "viridis": ("#440154", "#3b528b", "#21918c", "#5ec962", "#fde725"),
    "magma": ("#000004", "#3b0f70", "#8c2981", "#de4968", "#fe9f6d", "#fcfdbf"),
    "inferno": ("#000004", "#420a68", "#932667", "#dd513a", "#fca50a", "#fcffa4"),
}
BUILT_IN = tuple(ANCHORS) + tuple(SOLID)
_HEX = re.compile(r"^#[0-9a-fA-F]{6}$")


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def _ramp(anchors: list[tuple[int, int, int]]) -> np.ndarray:
    a = np.asarray(anchors, np.float64)
    at = np.linspace(0.0, 1.0, len(a))
    t = np.linspace(0.0, 1.0, 256)
    return np.rint(np.stack([np.interp(t, at, a[:, k]) for k in range(3)], 1)).astype(np.uint8)


def _from_packages(name: str) -> np.ndarray | None:
    """The exact table of a matplotlib or cmap colormap of this name, if either knows it."""
    t = np.linspace(0.0, 1.0, 256)
    try:
        import matplotlib
        table = matplotlib.colormaps[name](t)[:, :3]
        return np.rint(table * 255).astype(np.uint8)
    except (ImportError, KeyError, ValueError):
        pass
    try:
        import cmap
        table = np.asarray(cmap.Colormap(name)(t))[:, :3]
        return np.rint(table * 255).astype(np.uint8)
    except (ImportError, KeyError, ValueError, TypeError):
        return None


@functools.lru_cache(maxsize=64)
def lut(name: str) -> np.ndarray:
    """(256, 3) uint8 table of `name`, read-only (kept: every display change asks again,
    and a plotting package that is not installed costs an import search each time);
    UsageError naming the accepted ones otherwise."""
    table = _table(name)
    table.flags.writeable = False
    return table


def _table(name: str) -> np.ndarray:
    key = name.strip().lower()
    if key in SOLID:
        return _ramp([(0, 0, 0), SOLID[key]])
    if _HEX.match(key):
        return _ramp([(0, 0, 0), _rgb(key)])
    table = _from_packages(name.strip())
    if table is not None:
        return table
    if key in ANCHORS:
        return _ramp([_rgb(c) for c in ANCHORS[key]])
    raise UsageError(f"colormap {name!r} unknown; accepted: {', '.join(BUILT_IN)}, "
                     f"#rrggbb, or a matplotlib/cmap name when one is installed")
