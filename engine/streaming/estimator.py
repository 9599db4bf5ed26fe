"""Desired mip level per texture from instance bounds and the camera, vectorised.

Why this shape: the estimator runs every frame over every instance, so it takes
structure-of-arrays inputs and does a fixed number of numpy passes (no Python loop per
instance). It is the CPU "screen size x texel factor" metric of Unreal/Unity: per instance the
texel-to-pixel ratio at the point of its bounding sphere nearest the camera, which errs on the
side of detail (the nearest point is the sharpest point the instance can show).

Mip formula, per instance i using texture t:
    d      = max(|c_i - cam| - r_i, near)
    px/wu  = viewport_h * render_scale / (2 d tan(fovy / 2))   pixels per world unit
    tx/wu  = uv_density_i * max(w_t, h_t)                      texels per world unit at mip 0
    mip    = log2(tx/wu / px/wu) + bias_t + global_bias
Rendering at a lower scale shows fewer pixels, hence `- log2(render_scale)` extra bias: the
texture streamer and the resolution controller then help each other (DESIGN.md section 1).
A texture's desired mip is the minimum over its visible instances.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: float mip given to a texture no visible instance uses; the int level is then levels - 1.
NOT_WANTED = np.inf


@dataclass(frozen=True)
class InstanceArrays:
    """Per drawn instance (N of them): world bounding sphere, UV density, texture index.

    `uv_density` is UV units per world unit (how much of the [0,1] UV square one world unit
    covers). Multiplied by the texture's size in texels it gives texels per world unit, so
    one mesh can share one density across textures of any resolution.
    """

    centers: np.ndarray     # (N, 3) float
    radii: np.ndarray       # (N,) float
    uv_density: np.ndarray  # (N,) float, UV units per world unit
    texture: np.ndarray     # (N,) int, index into TextureArrays


@dataclass(frozen=True)
class TextureArrays:
    """Per texture (T of them): level-0 size, level count, per-texture mip bias."""

    width: np.ndarray   # (T,) int
    height: np.ndarray  # (T,) int
    levels: np.ndarray  # (T,) int
    bias: np.ndarray    # (T,) float; positive = coarser (Unity's priority as a mip offset)


@dataclass(frozen=True)
class CameraInput:
    """What the estimator needs of the camera.

    `view_proj` is the math-convention matrix (clip = M @ [x, y, z, 1]) of a GL projection
    (clip z in [-w, w]). A pyglm mat4 converts with `np.asarray(proj * view)` (its numpy
    view is already in math convention: checked, no transpose needed).
    `viewport_height` is the output height in pixels; `render_scale` the fraction of it actually
    rendered (dynamic resolution).
    """

    position: np.ndarray  # (3,)
    view_proj: np.ndarray  # (4, 4)
    fovy: float            # radians
    viewport_height: int
    near: float = 0.1
    render_scale: float = 1.0


@dataclass(frozen=True)
class MipEstimate:
    """Per texture: finest wanted mip (float, >= 0; NOT_WANTED when invisible), the integer
    level (floor of the float, clamped to [0, levels-1]; levels-1 when invisible) and whether
    any visible instance uses it. `instance_visible` is kept for callers that draw."""

    mip: np.ndarray        # (T,) float64
    level: np.ndarray      # (T,) int32
    visible: np.ndarray    # (T,) bool
    instance_visible: np.ndarray  # (N,) bool


def frustum_planes(view_proj: np.ndarray) -> np.ndarray:
    """The 6 planes (a, b, c, d), normals pointing inside and unit length, of a GL
    view-projection (Gribb & Hartmann): left, right, bottom, top, near, far."""
    m = np.asarray(view_proj, dtype=np.float64)
    r0, r1, r2, r3 = m
    planes = np.stack([r3 + r0, r3 - r0, r3 + r1, r3 - r1, r3 + r2, r3 - r2])
    norms = np.linalg.norm(planes[:, :3], axis=1, keepdims=True)
    return planes / np.where(norms > 0, norms, 1.0)


def spheres_visible(planes: np.ndarray, centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """True for each sphere not entirely behind any plane (conservative: may keep a few
    spheres near frustum corners, never drops a visible one)."""
    # (6, N) layout: reducing over the 6 planes is then 6 long element-wise passes; an
    # (N, 6) layout with min(axis=1) measured 5x slower for N = 10,000.
    dist = np.ascontiguousarray(planes[:, :3]) @ centers.T
    dist += planes[:, 3:4]
    return dist.min(axis=0) >= -radii


def estimate_mips(instances: InstanceArrays, textures: TextureArrays, camera: CameraInput,
                  global_bias: float = 0.0) -> MipEstimate:
    """Desired mip per texture for this frame (see the module docstring for the formula)."""
    centers = np.asarray(instances.centers, dtype=np.float64)
    radii = np.asarray(instances.radii, dtype=np.float64)
    tex = np.asarray(instances.texture, dtype=np.intp)
    levels = np.asarray(textures.levels, dtype=np.int32)

    visible = spheres_visible(frustum_planes(camera.view_proj), centers, radii)

    offset = centers - np.asarray(camera.position, dtype=np.float64)
    dist = np.sqrt(np.einsum("ij,ij->i", offset, offset)) - radii
    dist = np.maximum(dist, camera.near)
    # log2(texels/px) = log2(uv * size * 2 d tan(fovy/2) / (viewport_h * scale))
    size = np.maximum(textures.width, textures.height).astype(np.float64)
    scale = 2.0 * np.tan(0.5 * camera.fovy) / (camera.viewport_height * camera.render_scale)
    with np.errstate(divide="ignore"):
        inst_mip = np.log2(np.asarray(instances.uv_density, dtype=np.float64) * size[tex]
                           * dist * scale)
    inst_mip += np.asarray(textures.bias, dtype=np.float64)[tex] + global_bias
    inst_mip[~visible] = NOT_WANTED

    mip = np.full(levels.shape[0], NOT_WANTED)
    np.minimum.at(mip, tex, inst_mip)
    tex_visible = np.isfinite(mip)
    mip = np.where(tex_visible, np.maximum(mip, 0.0), NOT_WANTED)
    top = np.maximum(levels - 1, 0)
    level = np.where(tex_visible, np.minimum(np.floor(np.minimum(mip, top)), top), top)
    return MipEstimate(mip=mip, level=level.astype(np.int32), visible=tex_visible,
                       instance_visible=visible)
