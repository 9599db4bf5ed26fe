"""Materials: texture ids from the provider plus constant factors (metal-roughness PBR)."""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Protocol

from ..streaming.contract import NO_TEXTURE, TEXTURE_SLOTS


class MaterialWatcher(Protocol):
    """What holds a copy of a material's row (a scene's object arrays): told when any field
    of the material is assigned, so only the scenes that use it recompute their rows."""

    def material_changed(self) -> None: ...


@dataclass
class Material:
    """Textures are provider ids (NO_TEXTURE = use the factor alone). Factors multiply the
    texture values, as in glTF, so a texture-less material is just its factors."""

    name: str = "material"
    albedo: int = NO_TEXTURE  # sRGB colour texture
    normal: int = NO_TEXTURE  # tangent-space normal map (linear)
    roughness_metal: int = NO_TEXTURE  # G = roughness, B = metalness (glTF packing)
    albedo_factor: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)
    roughness: float = 0.6
    metalness: float = 0.0
    emissive: tuple[float, float, float] = (0.0, 0.0, 0.0)
    normal_scale: float = 1.0
    #: UV transform, the two rows of a 2x3 affine matrix ((a, b, c), (d, e, f)):
    #: u' = a u + b v + c, v' = d u + e v + f. glTF's KHR_texture_transform, applied in the
    #: forward vertex shaders (identity: UVs as stored).
    uv_transform: tuple[tuple[float, float, float], tuple[float, float, float]] = (
        (1.0, 0.0, 0.0), (0.0, 1.0, 0.0))

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        for watcher in tuple(self.__dict__.get("_watchers", ())):
            watcher.material_changed()

    def watch(self, watcher: MaterialWatcher) -> None:
        """`watcher` is told of every later field assignment, for as long as it lives."""
        self.__dict__.setdefault("_watchers", weakref.WeakSet()).add(watcher)

    def texture_ids(self) -> tuple[int, ...]:
        """Ids in `TEXTURE_SLOTS` order."""
        return tuple(getattr(self, slot) for slot in TEXTURE_SLOTS)
