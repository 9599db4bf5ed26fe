"""Fade-in of new levels through the sampler's min LOD, so detail arriving does not pop."""
from __future__ import annotations

import numpy as np

from .state import StreamerState


def fade_min_lod(state: StreamerState, now: float, seconds_per_level: float = 0.3,
                 rows: np.ndarray | None = None) -> np.ndarray:
    """Sampler minimum LOD per texture (in levels of the full chain; subtract the storage
    base for GL_TEXTURE_MIN_LOD of a reallocated texture) so new levels blend in over
    `seconds_per_level` each instead of popping, as Unreal does.

    A level starts fading when it arrived AND the next coarser one finished fading, so two
    levels arriving together fade one after the other rather than jumping.

    `rows`, when given, are the only textures that can be fading (any superset of those with
    a level that arrived within levels x `seconds_per_level`: the caller knows when it last
    loaded each texture); the scan for fading textures then looks at those rows alone
    instead of the whole (textures x levels) table every frame. Same result either way."""
    spl = max(seconds_per_level, 1e-9)
    base = state.resident_base.astype(np.float64)
    out = base.astype(np.float32)
    # Only textures with a level that arrived within (levels x spl) can still be fading (the
    # chain of fades is at most that long); every other one sits at its base. Restricting the
    # work to them keeps a settled scene of thousands of textures cheap every frame.
    times_all = state.level_times
    cand = times_all if rows is None else times_all[rows]
    with np.errstate(invalid="ignore"):
        recent = (cand > now - times_all.shape[1] * spl) & np.isfinite(cand)
    hit = np.flatnonzero(recent.any(axis=1))
    if hit.size == 0:
        return out
    rows = hit if rows is None else np.asarray(rows)[hit]
    times = times_all[rows]
    lvl = np.arange(times.shape[1], dtype=np.float64)[None, :]
    # start_l = max(time_l, start_{l+1} + spl)  <=>  w_l = max(time_l + l*spl, w_{l+1})
    w = np.maximum.accumulate((times + lvl * spl)[:, ::-1], axis=1)[:, ::-1]
    start = w - lvl * spl
    with np.errstate(invalid="ignore"):
        progress = np.clip((now - start) / spl, 0.0, 1.0)
    started = (lvl >= state.resident_base[rows, None]) & (start <= now)
    lod = np.where(started, lvl + 1.0 - progress, np.inf).min(axis=1)
    out[rows] = np.where(np.isfinite(lod), np.maximum(lod, base[rows]), base[rows])
    return out
