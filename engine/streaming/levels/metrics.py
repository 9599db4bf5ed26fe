"""What a user sees when memory is short, as numbers: pure functions over per-texture arrays.

Per frame:
- wanted vs resident bytes (the streamer's stats already hold both);
- the screen-weighted fraction of visible texels sampled coarser than wanted, by one level
  and by two or more: each texture weighs the pixels its instances cover on screen, and its
  deficit is how many levels its sampler's min LOD lies above the estimator's mip, beyond the
  policy's own hysteresis (`level_deficit`); a level still fading in counts as far as it has
  faded;
- time since the last camera cut until 95% of the visible weight is at its wanted level
  (`CutTracker`): how long a teleport stays blurry;
- efficiency: resident texture bytes over what the screen itself can show, output pixels x
  bytes per texel of the format (1 for BC7), the figure tile-granular residency is held to.

Why screen weights and not texture counts: a thumbnail in a corner that is one level short
costs a few pixels, the image filling the screen costs all of them. The weight of an instance
is the area of its bounding sphere's screen square clipped to the viewport (so images half off
screen count half), summed per texture.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .estimator import CameraInput, InstanceArrays, TextureArrays, estimate_mips

if TYPE_CHECKING:  # the provider contract; only its shape is used here
    from ..contract import FrameView, TextureProvider

AT_WANTED_GOAL = 0.95


@dataclass(frozen=True)
class Coverage:
    """One frame's screen-weighted residency quality."""

    visible_pixels: float     # screen pixels covered by visible textures (weights' sum)
    at_wanted: float          # fraction of them sampled at (or finer than) the wanted level
    coarser_1: float          # fraction exactly one level coarser
    coarser_2plus: float      # fraction two or more levels coarser

    def as_record(self) -> dict[str, float]:
        return {"visible_pixels": self.visible_pixels, "at_wanted_fraction": self.at_wanted,
                "coarser_1_fraction": self.coarser_1,
                "coarser_2plus_fraction": self.coarser_2plus}


def instance_screen_pixels(instances: InstanceArrays, camera: CameraInput,
                           viewport: tuple[int, int]) -> np.ndarray:
    """Per instance, screen pixels of its bounding sphere's square, clipped to the viewport
    (0 behind the camera or off screen)."""
    centers = np.asarray(instances.centers, np.float64)
    n = len(centers)
    if n == 0:
        return np.zeros(0)
    clip = np.c_[centers, np.ones(n)] @ np.asarray(camera.view_proj, np.float64).T
    w = clip[:, 3]
    front = w > 1e-9
    safe_w = np.where(front, w, 1.0)
    width, height = viewport
    px = (clip[:, 0] / safe_w * 0.5 + 0.5) * width
    py = (clip[:, 1] / safe_w * 0.5 + 0.5) * height
    # Pixels per world unit at the centre's depth: the same formula as the estimator's.
    per_unit = height / (2.0 * np.tan(0.5 * camera.fovy) * safe_w)
    r = np.asarray(instances.radii, np.float64) * per_unit
    x0, x1 = np.clip(px - r, 0, width), np.clip(px + r, 0, width)
    y0, y1 = np.clip(py - r, 0, height), np.clip(py + r, 0, height)
    return np.where(front, (x1 - x0) * (y1 - y0), 0.0)


def texture_weights(instances: InstanceArrays, pixels: np.ndarray, count: int) -> np.ndarray:
    """Per texture, the screen pixels of every instance using it."""
    out = np.zeros(count)
    np.add.at(out, np.asarray(instances.texture, np.intp), pixels)
    return out


#: Deficits up to this many levels count as "at the wanted level": the policy's hysteresis
#: band (PolicyConfig.hysteresis) lets the target sit that far above the estimate by design.
TOLERANCE = 0.25


def level_deficit(wanted_mip: np.ndarray, sampled_lod: np.ndarray, levels: np.ndarray,
                  tolerance: float = TOLERANCE) -> np.ndarray:
    """Whole levels by which each texture is sampled coarser than wanted (0 when at or finer).

    d = sampled - wanted, both continuous: the sampler's min LOD (a level still fading in
    counts by how far it has faded) and the estimator's mip clamped to the chain. The deficit
    is ceil(d - tolerance), at least 0: (0.25, 1.25] is one level, beyond that two or more."""
    levels = np.asarray(levels)
    top = np.maximum(levels - 1, 0).astype(np.float64)
    mip = np.asarray(wanted_mip, np.float64)
    with np.errstate(invalid="ignore"):
        wanted = np.clip(np.where(np.isfinite(mip), mip, top), 0.0, top)
    d = np.asarray(sampled_lod, np.float64) - wanted
    return np.maximum(0, np.ceil(d - tolerance - 1e-9)).astype(np.int64)


def coverage(weights: np.ndarray, deficit: np.ndarray) -> Coverage:
    """Screen-weighted fractions at wanted / one level coarser / two or more."""
    weights = np.asarray(weights, np.float64)
    total = float(weights.sum())
    if total <= 0:
        return Coverage(0.0, 1.0, 0.0, 0.0)
    frac = lambda mask: float(weights[mask].sum() / total)
    return Coverage(total, frac(deficit <= 0), frac(deficit == 1), frac(deficit >= 2))


def efficiency(resident_bytes: int, output_pixels: int, bytes_per_texel: float = 1.0) -> float:
    """Resident texture bytes over the screen's own need (output pixels x bytes per texel)."""
    need = output_pixels * bytes_per_texel
    return float(resident_bytes) / need if need > 0 else float("inf")


@dataclass
class CutTracker:
    """Time from each camera cut until `goal` of the visible weight is at its wanted level.
    Feed it every frame; a cut that is followed by another before reaching the goal is
    recorded as unfinished (None), so a p95 never silently drops the slow ones."""

    goal: float = AT_WANTED_GOAL
    last_cut: float | None = None
    times: list[float | None] = field(default_factory=list)

    def update(self, now: float, at_wanted: float, cut: bool = False) -> float | None:
        """Record this frame; returns seconds since the last cut (None when no cut is open)."""
        if cut:
            if self.last_cut is not None:
                self.times.append(None)
            self.last_cut = now
        if self.last_cut is None:
            return None
        since = now - self.last_cut
        if at_wanted >= self.goal:
            self.times.append(since)
            self.last_cut = None
        return since

    def finished(self) -> list[float]:
        return [t for t in self.times if t is not None]

    def close(self) -> None:
        """End of the run: a cut still open never reached the goal."""
        if self.last_cut is not None:
            self.times.append(None)
            self.last_cut = None


def view_camera(view: FrameView, near: float = 0.1) -> CameraInput:
    """The estimator's camera for a frame view, exactly as the streamer builds it."""
    vp = np.asarray(view.proj, np.float64) @ np.asarray(view.view, np.float64)
    return CameraInput(position=view.camera_pos, view_proj=vp, fovy=view.fovy,
                       viewport_height=max(1, round(view.viewport[1] / view.render_scale)),
                       render_scale=view.render_scale, near=near)


def view_instances(view: FrameView) -> InstanceArrays:
    ids = view.texture_ids
    rows, cols = np.nonzero(ids >= 0)
    return InstanceArrays(centers=view.centers[rows], radii=view.radii[rows],
                          uv_density=view.uv_density[rows], texture=ids[rows, cols])


def texture_geometry(provider: TextureProvider, count: int) -> TextureArrays:
    """Chain sizes and level counts of ids 0..count-1 (fixed for a texture's life: a probe
    that measures every frame reads them once)."""
    res = [provider.residency(t) for t in range(count)]
    return TextureArrays(width=np.array([r.chain_width for r in res]),
                         height=np.array([r.chain_height for r in res]),
                         levels=np.array([r.levels for r in res]), bias=np.zeros(count))


def measure_view(view: FrameView, provider: TextureProvider, count: int,
                 mip_bias: float = 0.0, resident: np.ndarray | None = None,
                 geometry: TextureArrays | None = None, sampled: np.ndarray | None = None
                 ) -> tuple[Coverage, np.ndarray]:
    """Coverage of one frame from its view and the provider's public residency: works for any
    provider (static, streamed, baselines) without reaching into one. Also returns the
    per-texture deficit. Costs one `residency` call per texture unless the caller passes
    the `geometry` (`texture_geometry`) and the `sampled` levels it already has (at 10,000
    textures the calls took 35 ms a frame, half of a wall flight's time on the H200).

    By default a texture counts at the level its sampler is clamped to (a level fading in
    counts as far as it has faded: what the screen shows). `resident` (per-texture finest
    resident level) counts what is in memory instead: the measure of when detail *arrived*,
    which the cut timer uses (a fade is a choice of presentation, not a missing level)."""
    tex = texture_geometry(provider, count) if geometry is None else geometry
    levels = tex.levels
    if resident is not None:
        sampled = np.asarray(resident, np.float64)
    elif sampled is None:
        sampled = np.array([provider.residency(t).base_level for t in range(count)])
    inst = view_instances(view)
    cam = view_camera(view)
    est = estimate_mips(inst, tex, cam, mip_bias)
    pixels = instance_screen_pixels(inst, cam, view.viewport) * est.instance_visible
    weights = texture_weights(inst, pixels, count)
    deficit = level_deficit(est.mip, sampled, levels)
    return coverage(weights, deficit), deficit
