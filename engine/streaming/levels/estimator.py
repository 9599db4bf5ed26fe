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

from dataclasses import dataclass, field

import numpy as np

from ..culling import frustum_planes

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


@dataclass(frozen=True)
class PreparedInstances:
    """The camera-independent half of the estimate, per instance.

    Why: the instances and textures of a scene rarely change between frames while the camera
    does, so a streamer prepares these once (and again only when its inputs change) and a
    frame then pays only for the frustum test, the distances and one log2 per instance.
    `texels` is uv_density x max(width, height) of the instance's texture: the first factor
    of the mip formula, kept in the same evaluation order so results are bit-identical."""

    centers: np.ndarray  # (N, 3) float64
    columns: np.ndarray  # (3, N) float64, the centres' x, y, z rows (contiguous passes)
    radii: np.ndarray    # (N,) float64
    texels: np.ndarray   # (N,) float64, texels per world unit at mip 0
    bias: np.ndarray     # (N,) float64, the instance's texture bias
    texture: np.ndarray  # (N,) intp
    levels: np.ndarray   # (T,) int32
    #: reused work memory of `instance_mips` (its (6, N) temporary): a fresh array that
    #: large comes from mmap and page-faults in every frame (measured: 6x the arithmetic at
    #: N = 10,000). Never part of a result.
    scratch: dict[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    def work(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        buf = self.scratch.get(name)
        if buf is None or buf.shape != shape:
            buf = self.scratch[name] = np.empty(shape)
        return buf


@dataclass(frozen=True)
class InstanceMips:
    """Per-instance results for one camera, before any visibility mask.

    `plane_dist` is the smallest signed distance of the centre to the frustum planes: an
    instance of radius r is visible when `plane_dist >= -r`, so one pass answers the test
    for any radius (prefetch asks it again with grown spheres)."""

    mip: np.ndarray         # (N,) float64, unmasked
    plane_dist: np.ndarray  # (N,) float64
    #: per axis, (centre - camera position)^2
    offset_sq: tuple[np.ndarray, np.ndarray, np.ndarray]

    def visible(self, radii: np.ndarray) -> np.ndarray:
        return self.plane_dist >= -radii


def prepare_instances(instances: InstanceArrays, textures: TextureArrays) -> PreparedInstances:
    """The per-instance terms `estimate_mips` needs that no camera changes."""
    tex = np.asarray(instances.texture, dtype=np.intp)
    size = np.maximum(textures.width, textures.height).astype(np.float64)
    centers = np.asarray(instances.centers, dtype=np.float64)
    return PreparedInstances(
        centers=centers, columns=np.ascontiguousarray(centers.reshape(-1, 3).T),
        radii=np.asarray(instances.radii, dtype=np.float64),
        texels=np.asarray(instances.uv_density, dtype=np.float64) * size[tex],
        bias=np.asarray(textures.bias, dtype=np.float64)[tex], texture=tex,
        levels=np.asarray(textures.levels, dtype=np.int32))


def instance_mips(prep: PreparedInstances, camera: CameraInput,
                  global_bias: float = 0.0) -> InstanceMips:
    """Each instance's mip and frustum distance for `camera` (the module docstring's formula)."""
    planes = frustum_planes(camera.view_proj)
    count = len(prep.radii)
    # (6, N) layout: reducing over the 6 planes is then 6 long element-wise passes; an
    # (N, 6) layout with min(axis=1) measured 5x slower for N = 10,000.
    dist = np.matmul(np.ascontiguousarray(planes[:, :3]), prep.centers.T,
                     out=prep.work("planes", (6, count)))
    dist += planes[:, 3:4]
    plane_dist = dist.min(axis=0)
    pos = np.asarray(camera.position, dtype=np.float64)
    # |centre - position|^2 per axis on contiguous rows (an (N, 3) pass with a 3-long inner
    # axis measured 4x slower), summed as (x + z) + y: the order numpy's einsum summed a row
    # in when it computed this, so the numbers are unchanged to the last bit.
    sx, sy, sz = (np.square(prep.columns[k] - pos[k]) for k in range(3))
    d = np.sqrt((sx + sz) + sy) - prep.radii
    d = np.maximum(d, camera.near)
    # log2(texels/px) = log2(uv * size * 2 d tan(fovy/2) / (viewport_h * scale))
    scale = 2.0 * np.tan(0.5 * camera.fovy) / (camera.viewport_height * camera.render_scale)
    with np.errstate(divide="ignore"):
        mip = np.log2(prep.texels * d * scale)
    mip += prep.bias + global_bias
    return InstanceMips(mip=mip, plane_dist=plane_dist, offset_sq=(sx, sy, sz))


def texture_min(prep: PreparedInstances, inst_mip: np.ndarray,
                instance_visible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per texture, (the finest mip over its instances where `instance_visible`, clamped at
    0; NOT_WANTED where none, whether any is). The mask is applied here, so one unmasked
    `inst_mip` serves several masks."""
    mip = np.full(prep.levels.shape[0], NOT_WANTED)
    np.minimum.at(mip, prep.texture, np.where(instance_visible, inst_mip, NOT_WANTED))
    tex_visible = np.isfinite(mip)
    return np.where(tex_visible, np.maximum(mip, 0.0), NOT_WANTED), tex_visible


def texture_mips(prep: PreparedInstances, inst_mip: np.ndarray,
                 instance_visible: np.ndarray) -> MipEstimate:
    """`texture_min`, with the integer levels: the estimate of the visible instances."""
    levels = prep.levels
    mip, tex_visible = texture_min(prep, inst_mip, instance_visible)
    top = np.maximum(levels - 1, 0)
    level = np.where(tex_visible, np.minimum(np.floor(np.minimum(mip, top)), top), top)
    return MipEstimate(mip=mip, level=level.astype(np.int32), visible=tex_visible,
                       instance_visible=instance_visible)


def estimate_prepared(prep: PreparedInstances, camera: CameraInput,
                      global_bias: float = 0.0) -> MipEstimate:
    """`estimate_mips` on prepared instances."""
    im = instance_mips(prep, camera, global_bias)
    return texture_mips(prep, im.mip, im.visible(prep.radii))


def estimate_mips(instances: InstanceArrays, textures: TextureArrays, camera: CameraInput,
                  global_bias: float = 0.0) -> MipEstimate:
    """Desired mip per texture for this frame (see the module docstring for the formula)."""
    return estimate_prepared(prepare_instances(instances, textures), camera, global_bias)
