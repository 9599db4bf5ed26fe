"""GPU feedback, the pure half: what the feedback image means for the streamer.

The feedback pass itself (engine.render.feedback) draws, per pixel, the albedo texture id and
the level the hardware would pick at full render resolution, and reads it back without stalls.
These functions turn its image into per-texture levels and fold them into the estimator's
numbers. The finer of the two wins (`combine`): feedback adds demand the bounds miss (occlusion
aside, UVs a shader makes up), but "no feedback pixel" does not remove demand, because a small
or distant instance can fall between the pixels of a 1/8 resolution pass.
"""
from __future__ import annotations

import math

import numpy as np


#: Bytes per feedback pixel: (texture id + 1, level) as two uint32.
PIXEL_BYTES = 8


def combine(est_mip: np.ndarray, est_visible: np.ndarray, feedback_mip: np.ndarray,
            bias: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Fold GPU feedback into the estimator's per-texture (mip, visible).

    The finer level wins (`fmin`: +inf feedback leaves the estimate alone), and a texture
    the GPU saw is visible even if its bounds said otherwise. `bias` is the streamer's global
    mip bias, applied to feedback as the estimator applies it to its own numbers. Feedback
    shorter than the estimate (textures registered after the feedback frame) counts as
    +inf for the missing ids.
    """
    est_mip = np.asarray(est_mip, np.float64)
    fb = np.asarray(feedback_mip, np.float64)
    if fb.shape[0] > est_mip.shape[0]:
        raise ValueError(f"feedback for {fb.shape[0]} textures, estimate for "
                         f"{est_mip.shape[0]}")
    full = np.full(est_mip.shape, np.inf)
    full[:fb.shape[0]] = fb + bias
    full = np.maximum(full, 0.0)
    return np.fmin(est_mip, full), np.asarray(est_visible, bool) | np.isfinite(full)


def reduce_feedback(image: np.ndarray, texture_count: int) -> np.ndarray:
    """Per texture, the finest level any feedback pixel asked for (+inf: no pixel).

    `image` is the (..., 2) uint32 feedback image: (provider id + 1, level); id 0 is
    background or a material without albedo."""
    data = np.asarray(image, np.uint32).reshape(-1, 2)
    ids, levels = data[:, 0].astype(np.int64), data[:, 1].astype(np.float64)
    seen = (ids > 0) & (ids <= texture_count)
    out = np.full(texture_count, np.inf)
    np.minimum.at(out, ids[seen] - 1, levels[seen])
    return out


def feedback_size(render_size: tuple[int, int], scale: float,
                  min_size: tuple[int, int]) -> tuple[int, int]:
    """The low-resolution target's size: `render_size * scale`, but at least `min_size`
    (capped at the render size: never more pixels than the frame itself)."""
    w, h = int(render_size[0]), int(render_size[1])
    return (min(w, max(min_size[0], math.ceil(w * scale))),
            min(h, max(min_size[1], math.ceil(h * scale))))
