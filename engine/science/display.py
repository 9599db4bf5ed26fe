"""How each channel is shown: contrast limits, gamma, colormap, visibility (plain data).

The shader applies exactly `shade` below to the raw value of each visible channel and adds
the channels' colours; this module is the one statement of that rule, so a test (or a
caller that wants a picture without GL) can compute it with numpy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from .colormaps import lut

#: colormaps of channels 0, 1, ... when the caller names none (one channel: gray)
DEFAULT_COLOURS = ("green", "magenta", "cyan", "yellow", "red", "blue")


@dataclass(frozen=True)
class ChannelDisplay:
    """One channel's look: raw values in [low, high] map to the colormap's ends,
    `gamma` bends the ramp between."""

    low: float
    high: float
    gamma: float = 1.0
    colormap: str = "gray"
    visible: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.high <= self.low:
            raise UsageError(f"contrast limits {self.low}..{self.high}: need finite low < high")
        if not (math.isfinite(self.gamma) and self.gamma > 0):
            raise UsageError(f"gamma {self.gamma}: need a finite number > 0")
        lut(self.colormap)  # an unknown name fails here, before any GL work


def default_colormap(channel: int, channels: int) -> str:
    return "gray" if channels == 1 else DEFAULT_COLOURS[channel % len(DEFAULT_COLOURS)]


def lut_index(values: np.ndarray, d: ChannelDisplay) -> np.ndarray:
    """The LUT entry each raw value shows (float32 arithmetic, as the shader's)."""
    v = values.astype(np.float32)
    lo, hi = np.float32(d.low), np.float32(d.high)
    t = np.clip((v - lo) / (hi - lo), np.float32(0), np.float32(1))
    t = np.power(t, np.float32(d.gamma))
    return np.floor(t * np.float32(255) + np.float32(0.5)).astype(np.int32)


def shade(values: list[np.ndarray | None], displays: list[ChannelDisplay]) -> np.ndarray:
    """The RGB picture (uint8) of per-channel raw value images (None: not shown), added
    and clamped as the additive blend does."""
    out = None
    for v, d in zip(values, displays):
        if v is None or not d.visible:
            continue
        rgb = lut(d.colormap)[lut_index(v, d)].astype(np.int32)
        out = rgb if out is None else out + rgb
    if out is None:
        raise ValueError("no visible channel")
    return np.minimum(out, 255).astype(np.uint8)
